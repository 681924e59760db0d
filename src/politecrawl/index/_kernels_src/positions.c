/* Reading a segment's positions: an array read through a mapping or with pread (Src), and the
 * scratch of a reader of format 6's packed chunks (PosScratch; the readers, which take a field,
 * are proximity.c's).  Part of the unity build _kernels.c (after packed.c). */

static inline uint64_t item_at(const unsigned char *p, int size, Py_ssize_t i) {
    switch (size) {
        case 1: return p[i];
        case 2: return ((const uint16_t *)p)[i];
        case 4: return ((const uint32_t *)p)[i];
        default: return ((const uint64_t *)p)[i];
    }
}

/* An array a kernel reads through a mapping (fd < 0: `a`'s buffer), or with pread (fd >= 0: a.n
 * items of a.size bytes from byte `off` of the file, no buffer held; `owner`, which keeps the
 * descriptor open, is held while this lives).  A mapping's scattered first touches each mapped
 * the 64 KB around them (the kernel's fault-around), so the proximity rerank's reads kept most of
 * a large index's positions resident. */
typedef struct {
    Arr a;
    int fd;
    int64_t off;
    PyObject *owner;
} Src;

/* An array, or a tuple (fd, byte offset, bytes per item, count, owner) of a file to read it from
 * (FieldPostings.positions_file). */
static int src_get(PyObject *obj, Src *s, const char *what) {
    s->fd = -1;
    if (!PyTuple_Check(obj)) return arr_get(obj, &s->a, what);
    int fd, size;
    long long off, count;
    PyObject *owner;
    if (!PyArg_ParseTuple(obj, "iLiLO", &fd, &off, &size, &count, &owner)) return -1;
    if (fd < 0 || off < 0 || count < 0 || (size != 1 && size != 2 && size != 4))
        return corrupt("positions file of the wrong shape");
    s->fd = fd;
    s->off = off;
    s->owner = Py_NewRef(owner);
    s->a.size = size;
    s->a.stride = size;
    s->a.n = (Py_ssize_t)count;
    return 0;
}

static void src_release(Src *s) {
    arr_release(&s->a);
    Py_CLEAR(s->owner);
}

/* Items [o, o + n) of `s`, as stored (a.size bytes each), into `out`: from the buffer, or read
 * with pread; -1 (ValueError) if the file is shorter than they are. */
static int src_read(const Src *s, int64_t o, int64_t n, unsigned char *out) {
    size_t size = (size_t)s->a.size, want = (size_t)n * size;
    if (o < 0 || n < 0 || o > (int64_t)s->a.n || n > (int64_t)s->a.n - o) return corrupt("positions beyond the positions");
    if (s->fd < 0) {
        memcpy(out, s->a.p + (size_t)o * size, want);
        return 0;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t r = pread(s->fd, out + got, want - got, (off_t)(s->off + (int64_t)((size_t)o * size + got)));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        if (r == 0) return corrupt("positions file shorter than its header says");
        got += (size_t)r;
    }
    return 0;
}

/* Format 6's chunks of a range of positions, fetched (packed_chunks_fetch) for their values to be
 * decoded (packed_values): the chunks c0 .. c0 + k - 1, their table entries (tab, k + 1) and
 * their bytes (base: from the mapping, or read into `bytes`); vals: scratch for the values. */
typedef struct {
    uint64_t c0, k;
    const unsigned char *base;
    uint64_t *tab;
    size_t tcap;
    unsigned char *bytes;
    size_t bcap;
    uint32_t *vals;
    size_t vcap;
} PosScratch;

static void pos_scratch_free(PosScratch *s) {
    PyMem_Free(s->vals);
    PyMem_Free(s->bytes);
    PyMem_Free(s->tab);
    memset(s, 0, sizeof(*s));
}

static int grow(void **p, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t want = need < 2 * *cap ? 2 * *cap : need;
    void *q = PyMem_Realloc(*p, want);
    if (!q) {
        PyErr_NoMemory();
        return -1;
    }
    *p = q;
    *cap = want;
    return 0;
}
