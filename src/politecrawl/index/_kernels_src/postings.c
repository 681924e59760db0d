/* One segment's postings as the kernels read them: the Postings type (three fields, skip blocks,
 * the term dictionary and its lookup), document frequencies, and decoding a run of postings (a
 * cursor that seeks through a term's postings by its skip blocks is cursor.c).  Part of the unity
 * build _kernels.c (after common.h). */

#define BLOCK 128 /* postings per skip block: skip_blocks.BLOCK */

/* A term's pointers in one field, both ends of each (its postings, positions, skip blocks and
 * packed blocks), as term_ok read and checked them.  A query asks for a term's pointers several
 * times per segment (its document frequency, its bound, its cursors, the gather), and in format 7
 * each is a read of the packed table (tat), so a field keeps the last SPANS terms' spans, one
 * slot per tid % SPANS: `key` is tid + 1 (0, as the object is allocated zeroed: empty). */
typedef struct {
    Py_ssize_t key;
    uint64_t lo, hi, p0, p1, b0, b1, o0, o1;
} Span;

#define SPANS 64

/* -- Postings ------------------------------------------------------------------------------ */

typedef struct {
    TCol term_ptr, pos_ptr;
    Arr docs, tfs;
    /* formats 2-5: the positions as stored, pos_size bytes each; format 6 (pos_packed): their
     * chunks (packed.c), the bytes here and the chunk table in `pos_chunks`, pos_len bytes before
     * the padding, pos_size the bytes format 5 would store a position in (what the reads of
     * nearby runs are grouped by).  pos_count: the field's positions. */
    Src positions;
    TCol block_ptr;
    Arr blocks; /* segment.posting_blocks: blocks is uint32 rows of (last doc, positions
                              start, largest tf, shortest field length[, where its packed block
                              starts]) */
    /* format 5 (packed: blocks has 5 columns): doc ids and tfs bit-packed (packed.c) in `packed`,
     * term t's blocks from byte pack_ptr[t]; docs and tfs are not held.  n_post: the postings. */
    int packed_fmt, bcols;
    Arr packed;
    TCol pack_ptr;
    Py_ssize_t n_post;
    uint64_t packed_len; /* packed.n less the padding */
    Arr pos_chunks;
    int pos_packed, pos_size;
    uint64_t pos_count, pos_len;
    Span spans[SPANS]; /* term_ok's, read back with field_span */
} Field;

static inline uint32_t blk(const Field *f, Py_ssize_t row, int col) {
    return ((const uint32_t *)f->blocks.p)[row * f->bcols + col];
}

/* Every KEY_STRIDE-th term of the dictionary sampled as its first 8 bytes (a big-endian number,
 * zero-padded): a lookup bisects this small array, then only the KEY_STRIDE terms between two
 * samples -- a few cache lines -- instead of ~18 probes over the whole memory-mapped dictionary. */
#define KEY_STRIDE 32

typedef struct {
    PyObject_HEAD
    Field f[N_FIELDS];
    Arr terms, term_end;
    Py_ssize_t n_terms, n_docs;
    Arr keys; /* keys[j]: the prefix key of term j * KEY_STRIDE (segment.term_keys) */
    Py_ssize_t n_keys;
} Postings;

static void Postings_dealloc(Postings *self) {
    for (int i = 0; i < N_FIELDS; i++) {
        tcol_release(&self->f[i].term_ptr);
        arr_release(&self->f[i].docs);
        arr_release(&self->f[i].tfs);
        tcol_release(&self->f[i].pos_ptr);
        src_release(&self->f[i].positions);
        arr_release(&self->f[i].pos_chunks);
        tcol_release(&self->f[i].block_ptr);
        arr_release(&self->f[i].blocks);
        arr_release(&self->f[i].packed);
        tcol_release(&self->f[i].pack_ptr);
    }
    arr_release(&self->terms);
    arr_release(&self->term_end);
    arr_release(&self->keys);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The first 8 bytes of a term as a big-endian number, zero-padded: ordered as the terms are
 * (UTF-8 byte order; no term holds a zero byte). */
static uint64_t prefix_key(const unsigned char *s, Py_ssize_t len) {
    uint64_t k = 0;
    for (int i = 0; i < 8; i++) k = (k << 8) | (i < len ? s[i] : 0);
    return k;
}

/* Where term i is in the dictionary, checked against it. */
static int term_at(Postings *self, Py_ssize_t i, Py_ssize_t *start, Py_ssize_t *len) {
    uint64_t end = at(&self->term_end, i);
    uint64_t first = i ? at(&self->term_end, i - 1) + 1 : 0;
    if (end < first || end > (uint64_t)self->terms.n) return corrupt("term dictionary offsets");
    *start = (Py_ssize_t)first;
    *len = (Py_ssize_t)(end - first);
    return 0;
}

/* Term `tid`'s pointers in field `f`, read from the per-term table. */
static void read_span(const Field *f, Py_ssize_t tid, Span *s) {
    s->key = tid + 1;
    s->lo = tat(&f->term_ptr, tid);
    s->hi = tat(&f->term_ptr, tid + 1);
    s->p0 = tat(&f->pos_ptr, tid);
    s->p1 = tat(&f->pos_ptr, tid + 1);
    s->b0 = tat(&f->block_ptr, tid);
    s->b1 = tat(&f->block_ptr, tid + 1);
    s->o0 = f->packed_fmt ? tat(&f->pack_ptr, tid) : 0;
    s->o1 = f->packed_fmt ? tat(&f->pack_ptr, tid + 1) : 0;
}

/* Term `tid`'s pointers in field `f` (checked by term_ok first): the span term_ok kept, or, where
 * another term has taken its slot since, read again. */
static inline Span field_span(const Field *f, Py_ssize_t tid) {
    const Span *kept = &f->spans[tid % SPANS];
    if (kept->key == tid + 1) return *kept;
    Span s;
    read_span(f, tid, &s);
    return s;
}

/* Term `tid`'s postings, positions and skip blocks, checked against their arrays in each field:
 * every function that reads a term's postings asks this first.  A term checked is kept
 * (Field.spans) and not checked again while it is. */
static int term_ok(Postings *self, Py_ssize_t tid) {
    if (tid < 0 || tid >= self->n_terms) {
        PyErr_SetString(PyExc_ValueError, "term id out of range");
        return -1;
    }
    const TCol *checked = NULL; /* a packed column whose blocks of the term's rows are checked */
    for (int fi = 0; fi < N_FIELDS; fi++) {
        Field *f = &self->f[fi];
        Span *slot = &f->spans[tid % SPANS], s;
        if (slot->key == tid + 1) continue;
        /* The segment's packed columns are one table's: its blocks of these rows are checked once,
         * not once per column and field. */
        const TCol *cols[4] = {&f->term_ptr, &f->pos_ptr, &f->block_ptr, &f->pack_ptr};
        for (int k = 0; k < (f->packed_fmt ? 4 : 3); k++) {
            if (checked && tcol_same_table(cols[k], checked)) continue;
            if (tcol_rows_ok(cols[k], tid, tid + 1) < 0) return -1;
            if (cols[k]->packed) checked = cols[k];
        }
        read_span(f, tid, &s);
        uint64_t count = s.hi - s.lo, want = count > BLOCK ? (count + BLOCK - 1) / BLOCK : 0;
        if (s.hi < s.lo || s.hi > (uint64_t)f->n_post) return corrupt("term pointers beyond the postings");
        if (s.p1 < s.p0 || s.p1 > f->pos_count) return corrupt("positions pointers beyond the positions");
        if (s.b1 < s.b0 || s.b1 - s.b0 != want || s.b1 > (uint64_t)(f->blocks.n / f->bcols))
            return corrupt("skip blocks do not match the postings");
        if (f->packed_fmt) {
            if (s.o1 < s.o0 || s.o1 > f->packed_len) return corrupt("packed postings pointers beyond their file");
            if (count > (uint64_t)self->n_docs) return corrupt("more postings than documents");
        }
        *slot = s;
    }
    return 0;
}

/* Postings(n_docs, terms, term_end, keys, fields): `terms` the sorted dictionary (UTF-8 terms, one
 * per line), `term_end[i]` where term i ends in it, `keys` every KEY_STRIDE-th term's prefix key
 * (segment.term_keys); `fields` three tuples (term_ptr, docs, tfs, pos_ptr, positions, block_ptr,
 * blocks) as segment.py stores them -- format 5's with blocks of 5 columns and (packed, pack_ptr)
 * in place of (docs, tfs) -- `positions` an array or a tuple (fd, byte offset, bytes per
 * position, count, owner) of a file to read them from with pread (FieldPostings.positions_file):
 * `owner`, which keeps the descriptor open, is held while this object lives; format 6's a tuple
 * (packed, chunks, count, size): its packed file (an array or such a file) and chunk table (an
 * array), its positions and the bytes format 5 would store one in (FieldPostings.kernel_positions). */
static int Postings_init(Postings *self, PyObject *args, PyObject *kw) {
    Py_ssize_t n_docs;
    PyObject *terms, *term_end, *keys, *fields;
    static char *names[] = {"n_docs", "terms", "term_end", "keys", "fields", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "nOOOO", names, &n_docs, &terms, &term_end, &keys, &fields)) return -1;
    if (n_docs < 0 || n_docs > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "n_docs out of range");
        return -1;
    }
    if (self->terms.held) {
        PyErr_SetString(PyExc_RuntimeError, "Postings is initialised once");
        return -1;
    }
    self->n_docs = n_docs;
    if (arr_get(terms, &self->terms, "terms") < 0 || arr_get(term_end, &self->term_end, "term_end") < 0) return -1;
    self->n_terms = self->term_end.n;
    PyObject *seq = PySequence_Fast(fields, "fields must be a sequence");
    if (!seq) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != N_FIELDS) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "expected three fields");
        return -1;
    }
    for (int fi = 0; fi < N_FIELDS; fi++) {
        PyObject *arrays = PySequence_Fast_GET_ITEM(seq, fi);
        PyObject *a0, *a1, *a2, *a3, *a4, *a5, *a6;
        if (!PyArg_ParseTuple(arrays, "OOOOOOO", &a0, &a1, &a2, &a3, &a4, &a5, &a6)) {
            Py_DECREF(seq);
            return -1;
        }
        Field *f = &self->f[fi];
        f->positions.fd = -1;
        if (PyTuple_Check(a4) && PyTuple_GET_SIZE(a4) == 4) { /* format 6: (packed, chunks, count, size) */
            PyObject *pk, *ch;
            long long count;
            int size;
            if (!PyArg_ParseTuple(a4, "OOLi", &pk, &ch, &count, &size) || src_get(pk, &f->positions, "packed positions") < 0 ||
                arr_get(ch, &f->pos_chunks, "positions chunk table") < 0) {
                Py_DECREF(seq);
                return -1;
            }
            /* count first: a damaged one near 2**63 must not wrap the chunk count below */
            if (count < 0 || count > (long long)(PY_SSIZE_T_MAX / 8) || f->positions.a.size != 1 ||
                f->positions.a.n < PACK_PADDING ||
                (size != 1 && size != 2 && size != 4) ||
                f->pos_chunks.n != (Py_ssize_t)((count + POS_CHUNK - 1) / POS_CHUNK) + 1) {
                Py_DECREF(seq);
                return corrupt("packed positions of the wrong shape");
            }
            f->pos_packed = 1;
            f->pos_size = size;
            f->pos_count = (uint64_t)count;
            f->pos_len = (uint64_t)(f->positions.a.n - PACK_PADDING);
        } else {
            if (src_get(a4, &f->positions, "positions") < 0) {
                Py_DECREF(seq);
                return -1;
            }
            f->pos_size = f->positions.a.size;
            f->pos_count = (uint64_t)f->positions.a.n;
        }
        if (tcol_get(a0, &f->term_ptr, "term_ptr") < 0 || tcol_get(a3, &f->pos_ptr, "pos_ptr") < 0 ||
            tcol_get(a5, &f->block_ptr, "block_ptr") < 0 || arr_get_nd(a6, &f->blocks, "blocks", 1) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        f->bcols = f->blocks.view.ndim == 2 ? (int)f->blocks.view.shape[1] : 4;
        f->packed_fmt = f->bcols == 5;
        if (f->packed_fmt ? (arr_get(a1, &f->packed, "packed") < 0 || tcol_get(a2, &f->pack_ptr, "pack_ptr") < 0)
                          : (arr_get(a1, &f->docs, "docs") < 0 || arr_get(a2, &f->tfs, "tfs") < 0)) {
            Py_DECREF(seq);
            return -1;
        }
        /* the writer stores these in 1, 2 or 4 bytes; wider values could wrap the sums that the
         * bounds checks rely on (a doc id from its deltas, a position from the tfs) */
        if (f->docs.size > 4 || f->tfs.size > 4 || f->pos_size > 4) {
            Py_DECREF(seq);
            return corrupt("postings wider than 32 bits");
        }
        if (f->block_ptr.n != self->n_terms + 1 || f->blocks.size != 4 || (f->bcols != 4 && f->bcols != 5) ||
            f->blocks.n % f->bcols != 0) {
            Py_DECREF(seq);
            return corrupt("skip blocks of the wrong shape");
        }
        if (f->term_ptr.n != self->n_terms + 1 || f->pos_ptr.n != self->n_terms + 1 ||
            (!f->packed_fmt && f->docs.n != f->tfs.n)) {
            Py_DECREF(seq);
            return corrupt("postings arrays of different lengths");
        }
        if (f->packed_fmt) {
            if (f->packed.size != 1 || f->packed.n < PACK_PADDING || f->pack_ptr.n != self->n_terms + 1) {
                Py_DECREF(seq);
                return corrupt("packed postings of the wrong shape");
            }
            f->packed_len = (uint64_t)(f->packed.n - PACK_PADDING);
            if (tcol_rows_ok(&f->term_ptr, self->n_terms, self->n_terms) < 0) {
                Py_DECREF(seq);
                return -1;
            }
            f->n_post = (Py_ssize_t)tat(&f->term_ptr, self->n_terms);
        } else {
            f->n_post = f->docs.n;
        }
    }
    Py_DECREF(seq);
    /* The rest is checked term by term where a term is used (term_ok): opening a segment of a
     * large index does not read all of it. */
    if (arr_get(keys, &self->keys, "keys") < 0) return -1;
    self->n_keys = (self->n_terms + KEY_STRIDE - 1) / KEY_STRIDE;
    if (self->keys.n != self->n_keys || self->keys.size != 8) return corrupt("term keys of the wrong length");
    return 0;
}

/* The id of the term `key` (len bytes, UTF-8), -1 if absent, -2 (ValueError) if the dictionary is
 * damaged. */
static Py_ssize_t lookup(Postings *self, const char *key, Py_ssize_t len) {
    uint64_t k = prefix_key((const unsigned char *)key, len);
    /* the samples below k, and those above it: the term is between them */
    Py_ssize_t a = 0, z = self->n_keys;
    while (a < z) {
        Py_ssize_t mid = a + (z - a) / 2;
        if (at(&self->keys, mid) < k) a = mid + 1; else z = mid;
    }
    Py_ssize_t lo = a > 0 ? (a - 1) * KEY_STRIDE : 0;
    z = self->n_keys;
    while (a < z) {
        Py_ssize_t mid = a + (z - a) / 2;
        if (at(&self->keys, mid) <= k) a = mid + 1; else z = mid;
    }
    Py_ssize_t hi = a * KEY_STRIDE < self->n_terms ? a * KEY_STRIDE : self->n_terms;
    const char *blob = (const char *)self->terms.p;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2, start, mlen;
        if (term_at(self, mid, &start, &mlen) < 0) return -2;
        int c = memcmp(blob + start, key, (size_t)(mlen < len ? mlen : len));
        if (c == 0) c = (mlen > len) - (mlen < len);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return -1;
}

/* lookup(term: str | bytes) -> int: the term's id, -1 if the segment does not have it.  The
 * dictionary is sorted by code point, which is the byte order of UTF-8. */
static PyObject *Postings_lookup(Postings *self, PyObject *arg) {
    const char *key;
    Py_ssize_t len;
    if (PyUnicode_Check(arg)) {
        key = PyUnicode_AsUTF8AndSize(arg, &len);
        if (!key) {  /* a lone surrogate: no such term */
            PyErr_Clear();
            return PyLong_FromLong(-1);
        }
    } else if (PyBytes_Check(arg)) {
        key = PyBytes_AS_STRING(arg);
        len = PyBytes_GET_SIZE(arg);
    } else {
        PyErr_SetString(PyExc_TypeError, "lookup() takes a str or bytes");
        return NULL;
    }
    Py_ssize_t tid = lookup(self, key, len);
    if (tid == -2) return NULL;
    return PyLong_FromSsize_t(tid);
}

/* The postings [lo, hi) of term `tid` in field `f`, checked. */
static int term_range(Postings *self, const Field *f, Py_ssize_t tid, Py_ssize_t *lo, Py_ssize_t *hi) {
    if (term_ok(self, tid) < 0) return -1;
    Span s = field_span(f, tid);
    *lo = (Py_ssize_t)s.lo;
    *hi = (Py_ssize_t)s.hi;
    return 0;
}

static int live_get(PyObject *obj, Py_buffer *view, Py_ssize_t n, const unsigned char **out) {
    *out = NULL;
    if (obj == Py_None) return 0;
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->len < n) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "mask shorter than the segment");
        return -1;
    }
    *out = (const unsigned char *)view->buf;
    return 1;
}

/* Term `tid`'s postings of a field (checked with term_ok), decoded into `docs` (absolute ids) and `tfs` (room for n_docs
 * each): one loop per integer width, so that each is a tight loop.  Returns how many, or -1
 * (ValueError) for more postings than documents or a doc id past the segment. */
#define DECODE_DOCS(T)                                    \
    {                                                     \
        const T *src = (const T *)f->docs.p + lo;         \
        for (Py_ssize_t i = 0; i < n; i++) {              \
            d += src[i];                                  \
            docs[i] = (uint32_t)d;                        \
        }                                                 \
    }
#define DECODE_TFS(T)                                    \
    {                                                    \
        const T *src = (const T *)f->tfs.p + lo;         \
        for (Py_ssize_t i = 0; i < n; i++) {             \
            tfs[i] = (uint32_t)src[i];                   \
            zero |= src[i] == 0;                         \
        }                                                \
    }

static Py_ssize_t decode(const Field *f, Py_ssize_t tid, Py_ssize_t n_docs, uint32_t *docs, uint32_t *tfs) {
    Span span = field_span(f, tid);
    Py_ssize_t lo = (Py_ssize_t)span.lo, hi = (Py_ssize_t)span.hi;
    Py_ssize_t n = hi - lo;
    if (n > n_docs) return corrupt("more postings than documents");
    if (f->packed_fmt) { /* block after block, each from the end of the one before */
        uint64_t off = span.o0, base = 0;
        for (Py_ssize_t s = 0; s < n; s += BLOCK) {
            Py_ssize_t k = n - s < BLOCK ? n - s : BLOCK;
            if (unpack_block(f->packed.p, f->packed_len, off, k, base, docs + s, tfs + s, &off) < 0) return -1;
            base = (uint64_t)docs[s + k - 1] + 1;
        }
        if (n && base > (uint64_t)n_docs) return corrupt("doc id beyond the segment");
        return n;
    }
    uint64_t d = 0;
    switch (f->docs.size) {
        case 1: DECODE_DOCS(uint8_t) break;
        case 2: DECODE_DOCS(uint16_t) break;
        default: DECODE_DOCS(uint32_t) break; /* at most 4 bytes (Postings_init) */
    }
    /* deltas are >= 0 and at most 32 bits (their sum cannot wrap), so the last id is the
     * largest: checked before any is used */
    if (n && d >= (uint64_t)n_docs) return corrupt("doc id beyond the segment");
    int zero = 0;
    switch (f->tfs.size) {
        case 1: DECODE_TFS(uint8_t) break;
        case 2: DECODE_TFS(uint16_t) break;
        default: DECODE_TFS(uint32_t) break; /* at most 4 bytes (Postings_init) */
    }
    if (zero) return corrupt("a posting with no occurrences");
    return n;
}

/* df(tid, live=None, field=-1) -> int: documents (allowed by the byte mask `live`) holding term
 * `tid` in field `field` (0 title, 1 body, 2 anchor), or in any field. */
/* The live documents (live: a byte mask or NULL) holding term `tid` in field `only` (0 title,
 * 1 body, 2 anchor) or in any field (-1); -1 (ValueError) for a damaged segment. */
static Py_ssize_t df_count(Postings *self, Py_ssize_t tid, const unsigned char *live, int only) {
    if (scratch(self->n_docs) < 0) return -1;
    uint32_t now = next_stamp();
    Py_ssize_t count = 0;
    for (int fi = 0; fi < N_FIELDS; fi++) {
        if (only >= 0 && fi != only) continue;
        const Field *f = &self->f[fi];
        if (term_ok(self, tid) < 0) return -1;
        Py_ssize_t n = decode(f, tid, self->n_docs, s_docs[0], s_tfs[0]);
        if (n < 0) return -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            uint32_t d = s_docs[0][i];
            if (only >= 0) { /* one field: each posting is another document */
                count += !live || live[d];
                continue;
            }
            if (s_stamp[d] != now) {
                s_stamp[d] = now;
                if (!live || live[d]) count++;
            }
        }
    }
    return count;
}

static PyObject *Postings_df(Postings *self, PyObject *args) {
    Py_ssize_t tid;
    PyObject *live_obj = Py_None;
    int only = -1;
    if (!PyArg_ParseTuple(args, "n|Oi", &tid, &live_obj, &only)) return NULL;
    if (only < -1 || only >= N_FIELDS) {
        PyErr_SetString(PyExc_ValueError, "bad field");
        return NULL;
    }
    Py_buffer lv;
    const unsigned char *live;
    int has_live = live_get(live_obj, &lv, self->n_docs, &live);
    if (has_live < 0) return NULL;
    Py_ssize_t count = df_count(self, tid, live, only);
    if (has_live) PyBuffer_Release(&lv);
    return count < 0 ? NULL : PyLong_FromSsize_t(count);
}

static PyMethodDef Postings_methods[] = {
    {"lookup", (PyCFunction)Postings_lookup, METH_O, "lookup(term) -> term id, or -1"},
    {"df", (PyCFunction)Postings_df, METH_VARARGS, "df(term_id, live=None, field=-1) -> documents with the term"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PostingsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "politecrawl.index._kernels.Postings",
    .tp_basicsize = sizeof(Postings),
    .tp_dealloc = (destructor)Postings_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One segment's postings and term dictionary, for the kernels.",
    .tp_methods = Postings_methods,
    .tp_init = (initproc)Postings_init,
    .tp_new = PyType_GenericNew,
};
