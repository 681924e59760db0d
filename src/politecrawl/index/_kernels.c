/* The searcher's inner loops, compiled: politecrawl.index._kernels.
 *
 * Why C: a query's work is many small steps (per term, per segment, per field, per hit), and in
 * numpy each step is a call whose fixed cost (a few microseconds) is most of the step.  The
 * profiles in docs/search.md ("Compiled inner loops") show that cost was what separated the
 * searcher from tantivy, not the amount of data.  These functions do the same arithmetic as the
 * numpy code in search.py, snippet.py and bm25.py, in the same order, so the results are
 * bit-identical (tests/unit/test_index_kernels.py compares them); that numpy code stays as the
 * reference and as the fallback where this module could not be built.
 *
 * Only the CPython API and the buffer protocol are used (no numpy headers): arrays come in as
 * buffers (numpy arrays, memory maps, bytes) and results go out as bytes objects that the
 * caller views with numpy.frombuffer.
 *
 * The GIL is held throughout, so the module's scratch arrays need no lock.  Every index read
 * from a segment file is checked against the array it indexes: a damaged file raises
 * ValueError, never reads out of bounds.
 *
 * Contents:
 *   Postings          one segment's postings (three fields), skip blocks and term dictionary
 *     .lookup(term)   term id by binary search in the sorted dictionary (no Python dict)
 *     .df(tid, live)  documents holding the term in one field or any
 *   doc_freqs(...)    a query's document frequencies over every segment, in one call
 *   top(...)          the k best matches over every segment (BM25F + title term, BM25F, or
 *                     per-field BM25; MaxScore over the skip blocks' bounds), ties included
 *   gather(...)       the positions of the query terms in given documents, seeking by blocks
 *   rank(...)         from top()'s matches to the page: sorted, the head reranked by proximity
 *   proximity(...)    term proximity: the closest neighbouring occurrences of query neighbours
 *   best_window(...)  the snippet window with the most distinct terms, then occurrences
 *   make_snippet(...) the snippet's text and highlights from the region around that window
 *   snippet_at(...)   a hit's snippet from its decompressed body: the occurrence, the region,
 *                     make_snippet
 *   snippet_hit(...)  a hit's snippet from its stored LZ4 pieces, whole (decompression called back)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <stdint.h>
#include <string.h>

#define N_FIELDS 3 /* title, body, anchor: bm25.FIELDS */

/* -- arrays ------------------------------------------------------------------------------- */

/* A one-dimensional, C-contiguous array of non-negative integers of 1, 2, 4 or 8 bytes. */
typedef struct {
    Py_buffer view;
    const unsigned char *p;
    Py_ssize_t n;
    int size;
    int held;
} Arr;

static int arr_get_nd(PyObject *obj, Arr *a, const char *what, int any_ndim) {
    memset(a, 0, sizeof(*a));
    if (PyObject_GetBuffer(obj, &a->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    a->held = 1;
    int size = (int)a->view.itemsize;
    const char *fmt = a->view.format ? a->view.format : "B";
    while (*fmt == '<' || *fmt == '=' || *fmt == '@' || *fmt == '|') fmt++;
    if ((a->view.ndim > 1 && !any_ndim) || !strchr("bBhHiIlLqQ?", *fmt) || fmt[0] == '\0' || fmt[1] != '\0' ||
        (size != 1 && size != 2 && size != 4 && size != 8)) {
        PyErr_Format(PyExc_ValueError, "%s: expected a one-dimensional integer array, not format %s", what,
                     a->view.format ? a->view.format : "?");
        PyBuffer_Release(&a->view);
        a->held = 0;
        return -1;
    }
    a->p = (const unsigned char *)a->view.buf;
    a->size = size;
    a->n = a->view.len / size;
    return 0;
}

static int arr_get(PyObject *obj, Arr *a, const char *what) { return arr_get_nd(obj, a, what, 0); }

static void arr_release(Arr *a) {
    if (a->held) PyBuffer_Release(&a->view);
    a->held = 0;
}

static inline uint64_t at(const Arr *a, Py_ssize_t i) {
    switch (a->size) {
        case 1: return a->p[i];
        case 2: return ((const uint16_t *)a->p)[i];
        case 4: return ((const uint32_t *)a->p)[i];
        default: return ((const uint64_t *)a->p)[i];
    }
}

/* A read-only buffer of doubles (a float64 array) of at least `n` items, or NULL for None. */
static int doubles_get(PyObject *obj, Py_buffer *view, Py_ssize_t n, const char *what, const double **out) {
    *out = NULL;
    if (obj == Py_None) return 0;
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    const char *fmt = view->format ? view->format : "B";
    while (*fmt == '<' || *fmt == '=' || *fmt == '@') fmt++;
    if (view->itemsize != 8 || strcmp(fmt, "d") != 0 || view->len / 8 < n) {
        PyErr_Format(PyExc_ValueError, "%s: expected at least %zd float64 values", what, n);
        PyBuffer_Release(view);
        return -1;
    }
    *out = (const double *)view->buf;
    return 1;
}

static int corrupt(const char *what) {
    PyErr_Format(PyExc_ValueError, "corrupt segment: %s", what);
    return -1;
}

/* -- scratch (the GIL is held) ---------------------------------------------------------------
 *
 * s_score is kept zeroed between calls (a score is > 0 once a term adds to it, which is how a
 * document's first match is noticed); s_docs/s_tfs hold one term's postings of each field,
 * decoded; s_stamp marks the documents a df() has counted. */

static double *s_score, *s_part[3];
static uint32_t *s_stamp, s_stamp_now;
static int32_t *s_touched;
static uint32_t *s_docs[N_FIELDS], *s_tfs[N_FIELDS];
static Py_ssize_t s_cap;

static void scratch_free(void) {
    PyMem_Free(s_score);
    PyMem_Free(s_stamp);
    PyMem_Free(s_touched);
    for (int i = 0; i < 3; i++) {
        PyMem_Free(s_part[i]);
        s_part[i] = NULL;
    }
    for (int i = 0; i < N_FIELDS; i++) {
        PyMem_Free(s_docs[i]);
        PyMem_Free(s_tfs[i]);
        s_docs[i] = s_tfs[i] = NULL;
    }
    s_score = NULL;
    s_stamp = NULL;
    s_touched = NULL;
    s_cap = 0;
}

static int scratch(Py_ssize_t n) {
    if (n <= s_cap) return 0;
    scratch_free();
    Py_ssize_t cap = n < 1024 ? 1024 : n;
    s_score = PyMem_Calloc((size_t)cap, sizeof(double));
    s_stamp = PyMem_Calloc((size_t)cap, sizeof(uint32_t));
    /* one more than the documents: a pass writes the next slot before it knows whether the
     * document is new (s_touched[m] = d; m += score was 0 and m < n), also when all of them are
     * touched.  A document is new when its score is still 0.0: every posting adds more than 0
     * (a tf of 0 is a corrupt segment; the searcher's coefficients are > 0), and m < n keeps the
     * list in bounds whatever the values say. */
    s_touched = PyMem_Malloc((size_t)(cap + 1) * sizeof(int32_t));
    int ok = s_score && s_stamp && s_touched;
    for (int i = 0; i < 3; i++) {
        s_part[i] = PyMem_Calloc((size_t)cap, sizeof(double));
        ok = ok && s_part[i];
    }
    for (int i = 0; i < N_FIELDS; i++) {
        s_docs[i] = PyMem_Malloc((size_t)cap * sizeof(uint32_t));
        s_tfs[i] = PyMem_Malloc((size_t)cap * sizeof(uint32_t));
        ok = ok && s_docs[i] && s_tfs[i];
    }
    if (!ok) {
        scratch_free();
        PyErr_NoMemory();
        return -1;
    }
    s_stamp_now = 0;
    s_cap = cap;
    return 0;
}

static uint32_t next_stamp(void) {
    if (++s_stamp_now == 0) { /* wrapped: start over */
        memset(s_stamp, 0, (size_t)s_cap * sizeof(uint32_t));
        s_stamp_now = 1;
    }
    return s_stamp_now;
}

/* -- Postings ------------------------------------------------------------------------------ */

#define BLOCK 128 /* postings per skip block: segment.BLOCK */

typedef struct {
    Arr term_ptr, docs, tfs, pos_ptr, positions;
    Arr block_ptr, blocks; /* segment.posting_blocks: blocks is uint32 rows of (last doc, positions
                              start, largest tf, shortest field length) */
} Field;

static inline uint32_t blk(const Field *f, Py_ssize_t row, int col) {
    return ((const uint32_t *)f->blocks.p)[row * 4 + col];
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
        arr_release(&self->f[i].term_ptr);
        arr_release(&self->f[i].docs);
        arr_release(&self->f[i].tfs);
        arr_release(&self->f[i].pos_ptr);
        arr_release(&self->f[i].positions);
        arr_release(&self->f[i].block_ptr);
        arr_release(&self->f[i].blocks);
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

/* Term `tid`'s postings, positions and skip blocks, checked against their arrays in each field:
 * every function that reads a term's postings asks this first. */
static int term_ok(Postings *self, Py_ssize_t tid) {
    if (tid < 0 || tid >= self->n_terms) {
        PyErr_SetString(PyExc_ValueError, "term id out of range");
        return -1;
    }
    for (int fi = 0; fi < N_FIELDS; fi++) {
        const Field *f = &self->f[fi];
        uint64_t lo = at(&f->term_ptr, tid), hi = at(&f->term_ptr, tid + 1);
        uint64_t p0 = at(&f->pos_ptr, tid), p1 = at(&f->pos_ptr, tid + 1);
        uint64_t b0 = at(&f->block_ptr, tid), b1 = at(&f->block_ptr, tid + 1);
        uint64_t count = hi - lo, want = count > BLOCK ? (count + BLOCK - 1) / BLOCK : 0;
        if (hi < lo || hi > (uint64_t)f->docs.n) return corrupt("term pointers beyond the postings");
        if (p1 < p0 || p1 > (uint64_t)f->positions.n) return corrupt("positions pointers beyond the positions");
        if (b1 < b0 || b1 - b0 != want || b1 > (uint64_t)(f->blocks.n / 4))
            return corrupt("skip blocks do not match the postings");
    }
    return 0;
}

/* Postings(n_docs, terms, term_end, keys, fields): `terms` the sorted dictionary (UTF-8 terms, one
 * per line), `term_end[i]` where term i ends in it, `keys` every KEY_STRIDE-th term's prefix key
 * (segment.term_keys); `fields` three tuples (term_ptr, docs, tfs, pos_ptr, positions, block_ptr,
 * blocks) as segment.py stores them. */
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
        if (arr_get(a0, &f->term_ptr, "term_ptr") < 0 || arr_get(a1, &f->docs, "docs") < 0 ||
            arr_get(a2, &f->tfs, "tfs") < 0 || arr_get(a3, &f->pos_ptr, "pos_ptr") < 0 ||
            arr_get(a4, &f->positions, "positions") < 0 || arr_get(a5, &f->block_ptr, "block_ptr") < 0 ||
            arr_get_nd(a6, &f->blocks, "blocks", 1) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        /* the writer stores these in 1, 2 or 4 bytes; wider values could wrap the sums that the
         * bounds checks rely on (a doc id from its deltas, a position from the tfs) */
        if (f->docs.size > 4 || f->tfs.size > 4 || f->positions.size > 4) {
            Py_DECREF(seq);
            return corrupt("postings wider than 32 bits");
        }
        if (f->block_ptr.n != self->n_terms + 1 || f->blocks.size != 4 || f->blocks.n % 4 != 0) {
            Py_DECREF(seq);
            return corrupt("skip blocks of the wrong shape");
        }
        if (f->term_ptr.n != self->n_terms + 1 || f->pos_ptr.n != self->n_terms + 1 || f->docs.n != f->tfs.n) {
            Py_DECREF(seq);
            return corrupt("postings arrays of different lengths");
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
    *lo = (Py_ssize_t)at(&f->term_ptr, tid);
    *hi = (Py_ssize_t)at(&f->term_ptr, tid + 1);
    return 0;
}

/* -- a cursor over one term's postings in one field ----------------------------------------- */

typedef struct {
    const Field *f;
    Py_ssize_t lo, hi; /* the term's postings */
    Py_ssize_t b0, nb; /* its skip blocks: rows [b0, b0 + nb) (none for a short list) */
    Py_ssize_t i;      /* the current posting (hi: past the end) */
    uint64_t doc, pos; /* its doc id, and where its positions start */
} Cursor;

static void cursor_init(Cursor *c, const Field *f, Py_ssize_t tid) {
    c->f = f;
    c->lo = (Py_ssize_t)at(&f->term_ptr, tid);
    c->hi = (Py_ssize_t)at(&f->term_ptr, tid + 1);
    c->b0 = (Py_ssize_t)at(&f->block_ptr, tid);
    c->nb = (Py_ssize_t)at(&f->block_ptr, tid + 1) - c->b0;
    c->i = c->lo;
    c->pos = at(&f->pos_ptr, tid);
    c->doc = c->lo < c->hi ? at(&f->docs, c->lo) : 0;
}

/* The posting-by-posting part of a seek, one loop per pair of integer widths (the widths of a
 * field's doc deltas and tfs: most often 1 or 2 bytes each). */
#define SCAN(TD, TT)                                                  \
    {                                                                 \
        const TD *docs = (const TD *)c->f->docs.p;                    \
        const TT *tfs = (const TT *)c->f->tfs.p;                      \
        Py_ssize_t i = c->i, hi = c->hi;                              \
        uint64_t doc = c->doc, pos = c->pos;                          \
        while (doc < target) {                                        \
            pos += tfs[i];                                            \
            if (++i >= hi) break;                                     \
            doc += docs[i];                                           \
        }                                                             \
        c->i = i;                                                     \
        c->doc = doc;                                                 \
        c->pos = pos;                                                 \
    }
#define SCAN_TFS(TD)                                                  \
    switch (c->f->tfs.size) {                                         \
        case 1: SCAN(TD, uint8_t) break;                              \
        case 2: SCAN(TD, uint16_t) break;                             \
        case 4: SCAN(TD, uint32_t) break;                             \
        default: SCAN(TD, uint64_t) break;                            \
    }

static int scan_to(Cursor *c, uint64_t target) {
    switch (c->f->docs.size) {
        case 1: SCAN_TFS(uint8_t) break;
        case 2: SCAN_TFS(uint16_t) break;
        case 4: SCAN_TFS(uint32_t) break;
        default: SCAN_TFS(uint64_t) break;
    }
    return c->i < c->hi && c->doc == target;
}

/* Moves forward to the first posting whose doc id is >= target; 1 if it is target.  Whole
 * blocks whose last doc is below target are skipped (found by galloping, then bisection), so a
 * seek reads at most one block's deltas. */
static int cursor_seek(Cursor *c, uint64_t target) {
    if (c->i >= c->hi) return 0;
    if (c->doc >= target) return c->doc == target;
    if (c->nb) {
        const Field *f = c->f;
        Py_ssize_t cur = (c->i - c->lo) / BLOCK;
        if (blk(f, c->b0 + cur, 0) < target) {
            Py_ssize_t a = cur, step = 1; /* last_doc(a) < target */
            while (a + step < c->nb && blk(f, c->b0 + a + step, 0) < target) {
                a += step;
                step *= 2;
            }
            Py_ssize_t z = a + step < c->nb ? a + step : c->nb; /* last_doc(z) >= target, or z = nb */
            while (z - a > 1) {
                Py_ssize_t mid = a + (z - a) / 2;
                if (blk(f, c->b0 + mid, 0) < target) a = mid; else z = mid;
            }
            if (z == c->nb) {
                c->i = c->hi;
                return 0;
            }
            /* block z: its first posting's delta is from the last doc of block z - 1 */
            c->i = c->lo + z * BLOCK;
            c->doc = (uint64_t)blk(f, c->b0 + z - 1, 0) + at(&f->docs, c->i);
            c->pos = blk(f, c->b0 + z, 1);
        }
    }
    return scan_to(c, target);
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
        Py_ssize_t lo, hi;
        if (term_range(self, f, tid, &lo, &hi) < 0) return -1;
        uint64_t d = 0;
        for (Py_ssize_t i = lo; i < hi; i++) {
            d += at(&f->docs, i);
            if (d >= (uint64_t)self->n_docs) return corrupt("doc id beyond the segment");
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

/* Postings [lo, hi) of a field, decoded into `docs` (absolute ids) and `tfs` (room for n_docs
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

static Py_ssize_t decode(const Field *f, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t n_docs, uint32_t *docs,
                         uint32_t *tfs) {
    Py_ssize_t n = hi - lo;
    if (n > n_docs) return corrupt("more postings than documents");
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

/* A min-heap of the k best scores seen: heap[0] is the k-th best once it is full. */
static void heap_push(double *heap, Py_ssize_t *n, Py_ssize_t k, double v) {
    if (*n < k) {
        Py_ssize_t i = (*n)++;
        while (i > 0) {
            Py_ssize_t parent = (i - 1) / 2;
            if (heap[parent] <= v) break;
            heap[i] = heap[parent];
            i = parent;
        }
        heap[i] = v;
        return;
    }
    if (v <= heap[0]) return;
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t l = 2 * i + 1, r = l + 1, m = i;
        double mv = v;
        if (l < k && heap[l] < mv) { m = l; mv = heap[l]; }
        if (r < k && heap[r] < mv) { m = r; mv = heap[r]; }
        if (m == i) break;
        heap[i] = heap[m];
        i = m;
    }
    heap[i] = v;
}

enum { MODE_BM25F = 0, MODE_FIELDS = 1 };

/* What one term can add to any score of this segment, at most (with a margin for rounding): from
 * its skip blocks (largest tf over shortest length) for long lists, from the postings for short
 * ones.  `bp` holds b, then per field its weight and average length, then the title's k1. */
static double field_norm_at(const double *bp, int fi, double len) {
    double b = bp[0], avgdl = bp[2 + 2 * fi];
    return avgdl > 0 ? (1.0 - b) + b * (len / avgdl) : 1.0 - b;
}

static double term_bound(Postings *self, Py_ssize_t tid, int mode, const double *c, const double *bp,
                         const double *const *norm, const double *tnorm, double k1, double k1p1) {
    double part[N_FIELDS] = {0.0, 0.0, 0.0}, title = 0.0;
    double tc = mode == MODE_FIELDS ? 0.0 : (tnorm ? c[1] : 0.0);
    for (int fi = 0; fi < N_FIELDS; fi++) {
        const Field *f = &self->f[fi];
        Py_ssize_t lo = (Py_ssize_t)at(&f->term_ptr, tid), hi = (Py_ssize_t)at(&f->term_ptr, tid + 1);
        Py_ssize_t b0 = (Py_ssize_t)at(&f->block_ptr, tid), b1 = (Py_ssize_t)at(&f->block_ptr, tid + 1);
        double w = bp[1 + 2 * fi];
        if (b1 > b0) {
            for (Py_ssize_t r = b0; r < b1; r++) {
                double tf = (double)blk(f, r, 2), B = field_norm_at(bp, fi, (double)blk(f, r, 3));
                double v = mode == MODE_FIELDS ? (c[fi] * tf) / (tf + k1 * B) : tf * (w / B);
                if (v > part[fi]) part[fi] = v;
                if (fi == 0 && tc != 0.0) {
                    double t = (tc * tf) / (tf + bp[7] * B);
                    if (t > title) title = t;
                }
            }
        } else {
            uint64_t d = 0;
            for (Py_ssize_t i = lo; i < hi; i++) {
                d += at(&f->docs, i);
                if (d >= (uint64_t)self->n_docs) return -1.0;
                double tf = (double)at(&f->tfs, i);
                double v = mode == MODE_FIELDS ? (c[fi] * tf) / (tf + norm[fi][d]) : tf * norm[fi][d];
                if (v > part[fi]) part[fi] = v;
                if (fi == 0 && tc != 0.0) {
                    double t = (tc * tf) / (tf + tnorm[d]);
                    if (t > title) title = t;
                }
            }
        }
    }
    double bound;
    if (mode == MODE_FIELDS) {
        bound = part[0] + part[1] + part[2];
    } else {
        double p = part[0] + part[1] + part[2];
        bound = c[0] * ((p * k1p1) / (p + k1)) + title;
    }
    return bound * (1.0 + 1e-9) + 1e-12;
}

/* Adds term `tid`'s score to the documents `docs` (ascending) that hold it: the arithmetic of the
 * exhaustive pass, in its order, found by seeking through the skip blocks. */
static void score_some(Postings *self, Py_ssize_t tid, int mode, const double *c, const double *const *norm,
                       const double *tnorm, double k1, double k1p1, const int32_t *docs, Py_ssize_t n, double *score) {
    Cursor cur[N_FIELDS];
    for (int fi = 0; fi < N_FIELDS; fi++) cursor_init(&cur[fi], &self->f[fi], tid);
    double tc = mode == MODE_FIELDS ? 0.0 : (tnorm ? c[1] : 0.0);
    for (Py_ssize_t j = 0; j < n; j++) {
        uint64_t d = (uint64_t)docs[j];
        double tf[N_FIELDS];
        int any = 0;
        for (int fi = 0; fi < N_FIELDS; fi++) {
            tf[fi] = cursor_seek(&cur[fi], d) ? (double)at(&cur[fi].f->tfs, cur[fi].i) : 0.0;
            any |= tf[fi] > 0.0;
        }
        if (!any) continue;
        if (mode == MODE_FIELDS) {
            for (int fi = 0; fi < N_FIELDS; fi++)
                if (tf[fi] > 0.0) score[d] += (c[fi] * tf[fi]) / (tf[fi] + norm[fi][d]);
            continue;
        }
        double pt = tf[0] > 0.0 ? tf[0] * norm[0][d] : 0.0, pa = tf[2] > 0.0 ? tf[2] * norm[2][d] : 0.0;
        double p = tf[1] > 0.0 ? (pt + tf[1] * norm[1][d]) + pa : pt + pa;
        double bt = tf[0] > 0.0 && tc != 0.0 ? (tc * tf[0]) / (tf[0] + tnorm[d]) : 0.0;
        score[d] = (score[d] + c[0] * ((p * k1p1) / (p + k1))) + bt;
    }
}

/* A seek through a term's postings costs about this many postings of a whole pass over them. */
#define SEEK_COST 8

static int cmp_int32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The k-th best score of `docs` (allowed ones), or 0.0 if there are fewer than k. */
static double kth_best(const int32_t *docs, Py_ssize_t n, const double *score, const unsigned char *allowed,
                       Py_ssize_t k, double *heap) {
    Py_ssize_t in_heap = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        int32_t d = docs[j];
        if (allowed && !allowed[d]) continue;
        double v = score[d];
        if (in_heap == k && v <= heap[0]) continue;
        heap_push(heap, &in_heap, k, v);
    }
    return in_heap == k ? heap[0] : 0.0;
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

/* One segment's matches that may be among the k best: appended to a growing list of hits. */
typedef struct {
    int32_t *seg, *doc;
    double *score;
    Py_ssize_t n, cap;
} Hits;

static int hits_add(Hits *h, int32_t seg, int32_t doc, double score) {
    if (h->n == h->cap) {
        Py_ssize_t cap = h->cap ? 2 * h->cap : 256;
        int32_t *s = PyMem_Realloc(h->seg, (size_t)cap * sizeof(int32_t));
        if (s) h->seg = s;
        int32_t *d = PyMem_Realloc(h->doc, (size_t)cap * sizeof(int32_t));
        if (d) h->doc = d;
        double *v = PyMem_Realloc(h->score, (size_t)cap * sizeof(double));
        if (v) h->score = v;
        if (!s || !d || !v) {
            PyErr_NoMemory();
            return -1;
        }
        h->cap = cap;
    }
    h->seg[h->n] = seg;
    h->doc[h->n] = doc;
    h->score[h->n++] = score;
    return 0;
}

static void hits_free(Hits *h) {
    PyMem_Free(h->seg);
    PyMem_Free(h->doc);
    PyMem_Free(h->score);
}

/* Scores one segment's matches of the terms `tids` (this segment's ids, -1 for absent; in the
 * order their scores are added) and adds to `out` the allowed ones whose score is at least the
 * segment's k-th best and at least `floor` (the k-th best of the segments before: a document
 * below it cannot be among the k best of all).  `count` gets the allowed matches (exact only
 * without pruning), `read` the postings read.
 *
 *   mode 0 ("bm25f+title", "bm25f"), coef = (idf, title coefficient) per term, norm = the
 *     fields' w_f / B_f per document, tnorm = TITLE_K1 * B_title per document:
 *       pseudo = (title part + body part) + anchor part, each tf * norm[f][d] (0.0 if absent)
 *       score += idf * ((pseudo * k1p1) / (pseudo + k1)), then + (title_coef * tf_title) /
 *       (tf_title + tnorm[d]) (0.0 without a title match or coefficient)
 *   mode 1 ("fields"), coef = (fidf_title, fidf_body, fidf_anchor) per term, norm = k1 * B_f:
 *       score += (fidf_f * tf_f) / (tf_f + norm[f][d])   for each field in order
 *
 * which is search.Searcher._match's arithmetic, in its order.
 *
 * With `prune`, MaxScore: each term's bound (term_bound) says what it can add at most.  After
 * each term, if at least k allowed documents already score more than the remaining terms' bounds
 * together (or the floor is above them), no document not matched yet can reach the k-th score;
 * if then the documents whose score plus those bounds reaches the k-th best are few against the
 * postings left, the remaining terms are scored only on them (seeking through the skip blocks),
 * and that set shrinks as the bounds left do.  The documents kept get every term, in order, so
 * their scores are the exhaustive ones to the bit. */
static int score_segment(Postings *self, int32_t seg, const Py_ssize_t *tids, Py_ssize_t n_terms, const double *coef,
                         int mode, const double *const *norm, const double *tnorm, const unsigned char *allowed,
                         Py_ssize_t k, double k1, double k1p1, const double *bp, int prune, double floor, Hits *out,
                         Py_ssize_t *count_out, Py_ssize_t *read_out) {
    Py_ssize_t n = self->n_docs;
    int per_term = mode == MODE_FIELDS ? N_FIELDS : 2;
    int ok = -1, pruning = 0;
    double *heap = NULL, *rest = NULL, *upto = NULL;
    Py_ssize_t *left = NULL, *plen = NULL;
    int32_t *pushed = NULL, *keep = NULL;
    Py_ssize_t m = 0, n_keep = 0, postings_read = 0; /* documents touched: s_touched[:m] */
    if (scratch(n) < 0) return -1;
    rest = PyMem_Calloc((size_t)(n_terms + 1), sizeof(double));
    upto = PyMem_Calloc((size_t)(n_terms + 1), sizeof(double));
    left = PyMem_Calloc((size_t)(n_terms + 1), sizeof(Py_ssize_t));
    plen = PyMem_Calloc((size_t)(n_terms + 1), sizeof(Py_ssize_t));
    if (k > 0) heap = PyMem_Malloc((size_t)k * sizeof(double));
    if (!rest || !upto || !left || !plen || (k > 0 && !heap)) {
        PyErr_NoMemory();
        goto done;
    }
    prune = prune && k > 0 && bp && n_terms > 1;
    if (prune) {
        /* rest[i]: the bounds of the terms after term i, together; upto[i]: of term i and those
         * before; left[i]: the postings of the terms after term i; plen[i]: term i's own */
        for (Py_ssize_t ti = 0; ti < n_terms; ti++) {
            if (tids[ti] < 0) continue;
            double b = term_bound(self, tids[ti], mode, coef + ti * per_term, bp, norm, tnorm, k1, k1p1);
            if (b < 0) {
                corrupt("doc id beyond the segment");
                goto done;
            }
            upto[ti] = b; /* summed below */
            for (int fi = 0; fi < N_FIELDS; fi++)
                plen[ti] += (Py_ssize_t)(at(&self->f[fi].term_ptr, tids[ti] + 1) - at(&self->f[fi].term_ptr, tids[ti]));
        }
        for (Py_ssize_t ti = n_terms - 1; ti >= 1; ti--) {
            rest[ti - 1] = rest[ti] + upto[ti];
            left[ti - 1] = left[ti] + plen[ti];
        }
        for (Py_ssize_t ti = 1; ti < n_terms; ti++) upto[ti] += upto[ti - 1];
    }

    double *score = s_score;
    for (Py_ssize_t ti = 0; ti < n_terms; ti++) {
        Py_ssize_t tid = tids[ti];
        if (tid < 0) continue;
        const double *c = coef + ti * per_term;
        /* Seeking costs several times a posting of a whole pass: the documents still in the
         * running are sought only when they are few against the term's postings. */
        if (pruning && n_keep * SEEK_COST < plen[ti]) {
            score_some(self, tid, mode, c, norm, tnorm, k1, k1p1, keep, n_keep, score);
            postings_read += n_keep;
        } else {
            Py_ssize_t len[N_FIELDS];
            for (int fi = 0; fi < N_FIELDS; fi++) {
                Py_ssize_t lo = (Py_ssize_t)at(&self->f[fi].term_ptr, tid), hi = (Py_ssize_t)at(&self->f[fi].term_ptr, tid + 1);
                if ((len[fi] = decode(&self->f[fi], lo, hi, n, s_docs[fi], s_tfs[fi])) < 0) goto cleanup;
                postings_read += len[fi];
            }
            if (mode == MODE_FIELDS) {
                for (int fi = 0; fi < N_FIELDS; fi++) {
                    const uint32_t *docs = s_docs[fi], *tfs = s_tfs[fi];
                    const double *nf = norm[fi];
                    double cf = c[fi];
                    for (Py_ssize_t i = 0; i < len[fi]; i++) {
                        uint32_t d = docs[i];
                        double tf = (double)tfs[i], sc = score[d];
                        s_touched[m] = (int32_t)d;
                        m += (sc == 0.0) & (m < n);
                        score[d] = sc + (cf * tf) / (tf + nf[d]);
                    }
                }
            } else {
                /* BM25F.  The title's and the anchor's parts of the pseudo frequency go to
                 * s_part[0] and s_part[2] (kept zeroed), the title term to s_part[1]; then each body
                 * posting adds its own part between them: (title + body) + anchor is the numpy
                 * code's order, and a missing part is an exact 0.0.  Each pass zeroes the parts it
                 * reads, so the documents without the term in the body are those of the title and
                 * anchor lists whose parts are still set after the body's pass. */
                double idf = c[0], tc = tnorm ? c[1] : 0.0;
                double *pt = s_part[0], *bt = s_part[1], *pa = s_part[2];
                const double *n0 = norm[0], *n1 = norm[1], *n2 = norm[2];
                const uint32_t *db = s_docs[1], *tb = s_tfs[1];
                if (!len[0] && !len[2]) { /* in bodies only: no parts to add */
                    for (Py_ssize_t i = 0; i < len[1]; i++) {
                        uint32_t d = db[i];
                        double p = (double)tb[i] * n1[d], sc = score[d];
                        s_touched[m] = (int32_t)d;
                        m += (sc == 0.0) & (m < n);
                        score[d] = sc + idf * ((p * k1p1) / (p + k1));
                    }
                    goto scored;
                }
                for (Py_ssize_t i = 0; i < len[0]; i++) {
                    uint32_t d = s_docs[0][i];
                    double tf = (double)s_tfs[0][i];
                    pt[d] = tf * n0[d];
                    if (tc != 0.0) bt[d] = (tc * tf) / (tf + tnorm[d]);
                }
                for (Py_ssize_t i = 0; i < len[2]; i++) {
                    uint32_t d = s_docs[2][i];
                    pa[d] = (double)s_tfs[2][i] * n2[d];
                }
                for (Py_ssize_t i = 0; i < len[1]; i++) {
                    uint32_t d = db[i];
                    double p = (pt[d] + (double)tb[i] * n1[d]) + pa[d];
                    double sc = score[d];
                    s_touched[m] = (int32_t)d;
                    m += (sc == 0.0) & (m < n);
                    score[d] = (sc + idf * ((p * k1p1) / (p + k1))) + bt[d];
                    pt[d] = bt[d] = pa[d] = 0.0;
                }
                for (int fi = 0; fi < N_FIELDS; fi += 2) {
                    for (Py_ssize_t i = 0; i < len[fi]; i++) {
                        uint32_t d = s_docs[fi][i];
                        if (pt[d] == 0.0 && pa[d] == 0.0) continue; /* in the body, or done */
                        double p = pt[d] + pa[d];                   /* title + anchor, or one + 0.0 */
                        double sc = score[d];
                        s_touched[m] = (int32_t)d;
                        m += (sc == 0.0) & (m < n);
                        score[d] = (sc + idf * ((p * k1p1) / (p + k1))) + bt[d];
                        pt[d] = bt[d] = pa[d] = 0.0;
                    }
                }
            }
        }
    scored:
        if (!prune || ti == n_terms - 1) continue;
        if (!pruning) {
            /* Can a document not matched yet still make the top k?  Asked (a pass over the
             * documents matched so far) only if it could be no -- a match can already score more
             * than the rest together, or the floor is above them -- and if enough postings are
             * left to be worth it. */
            if (!((rest[ti] < upto[ti] || rest[ti] < floor) && left[ti] > 2 * m)) continue;
            double theta;
            if (rest[ti] < floor) {
                theta = floor;
            } else {
                Py_ssize_t above = 0;
                for (Py_ssize_t j = 0; j < m && above < k; j++) {
                    int32_t d = s_touched[j];
                    above += score[d] > rest[ti] && (!allowed || allowed[d]);
                }
                if (above < k) continue;
                theta = kth_best(s_touched, m, score, allowed, k, heap);
                if (theta < floor) theta = floor;
            }
            keep = PyMem_Malloc((size_t)(m ? m : 1) * sizeof(int32_t));
            if (!keep) {
                PyErr_NoMemory();
                goto cleanup;
            }
            for (Py_ssize_t j = 0; j < m; j++) {
                int32_t d = s_touched[j];
                if ((!allowed || allowed[d]) && score[d] + rest[ti] >= theta) keep[n_keep++] = d;
            }
            if (n_keep * SEEK_COST >= left[ti]) {
                /* too many still in the running for seeking to pay: score every match, and do
                 * not ask again (the pass over the matches would cost as much each time) */
                PyMem_Free(keep);
                keep = NULL;
                n_keep = 0;
                prune = 0;
                continue;
            }
            qsort(keep, (size_t)n_keep, sizeof(int32_t), cmp_int32);
            pruning = 1;
        } else {
            /* the k-th best only grows, the bounds left only shrink: drop who can no longer reach it */
            double theta = kth_best(keep, n_keep, score, allowed, k, heap);
            if (theta < floor) theta = floor;
            Py_ssize_t w = 0;
            for (Py_ssize_t j = 0; j < n_keep; j++)
                if (score[keep[j]] + rest[ti] >= theta) keep[w++] = keep[j];
            n_keep = w;
        }
    }

    /* The k-th best allowed score: a min-heap of k.  A score that enters it is kept in `pushed`:
     * the heap's minimum only grows, so every score at or above the final k-th best entered. */
    const int32_t *final = pruning ? keep : s_touched;
    Py_ssize_t n_final = pruning ? n_keep : m;
    Py_ssize_t count = 0, in_heap = 0, n_pushed = 0;
    if (k > 0) {
        pushed = PyMem_Malloc((size_t)(n_final ? n_final : 1) * sizeof(int32_t));
        if (!pushed) {
            PyErr_NoMemory();
            goto cleanup;
        }
    }
    for (Py_ssize_t j = 0; j < n_final; j++) {
        int32_t d = final[j];
        if (allowed && !allowed[d]) continue;
        count++;
        if (k <= 0) continue;
        double v = score[d];
        if (v < floor || (in_heap == k && v < heap[0])) continue;
        pushed[n_pushed++] = d;
        heap_push(heap, &in_heap, k, v);
    }
    double threshold = in_heap == k && k > 0 ? heap[0] : 0.0;
    for (Py_ssize_t j = 0; j < n_pushed; j++) {
        int32_t d = pushed[j];
        if (score[d] >= threshold && hits_add(out, seg, d, score[d]) < 0) goto cleanup;
    }
    *count_out += count;
    *read_out += postings_read;
    ok = 0;
cleanup:
    for (Py_ssize_t j = 0; j < m; j++) s_score[s_touched[j]] = 0.0;
done:
    PyMem_Free(heap);
    PyMem_Free(pushed);
    PyMem_Free(keep);
    PyMem_Free(rest);
    PyMem_Free(upto);
    PyMem_Free(left);
    PyMem_Free(plen);
    return ok;
}

/* The term's id in each segment, -1 where it has none: term id t of segment s at [s * T + t]. */
static Py_ssize_t *term_ids(PyObject *segs, PyObject *terms) {
    Py_ssize_t S = PySequence_Fast_GET_SIZE(segs), T = PySequence_Fast_GET_SIZE(terms);
    Py_ssize_t *out = PyMem_Malloc((size_t)(S * T > 0 ? S * T : 1) * sizeof(Py_ssize_t));
    if (!out) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t t = 0; t < T; t++) {
        PyObject *term = PySequence_Fast_GET_ITEM(terms, t);
        Py_ssize_t len = 0;
        const char *key = PyUnicode_Check(term) ? PyUnicode_AsUTF8AndSize(term, &len) : NULL;
        if (!key) PyErr_Clear(); /* not str, or a lone surrogate: no segment has it */
        for (Py_ssize_t s = 0; s < S; s++) {
            Postings *p = (Postings *)PySequence_Fast_GET_ITEM(segs, s);
            Py_ssize_t tid = key ? lookup(p, key, len) : -1;
            if (tid == -2 || (tid >= 0 && term_ok(p, tid) < 0)) {
                PyMem_Free(out);
                return NULL;
            }
            out[s * T + t] = tid;
        }
    }
    return out;
}

static int check_segments(PyObject *segs) {
    for (Py_ssize_t s = 0; s < PySequence_Fast_GET_SIZE(segs); s++)
        if (!PyObject_TypeCheck(PySequence_Fast_GET_ITEM(segs, s), &PostingsType)) {
            PyErr_SetString(PyExc_TypeError, "segments must be Postings");
            return -1;
        }
    return 0;
}

/* doc_freqs(segments, lives, terms) -> bytes of int64 [len(terms) * 4]
 *
 * Per term, the live documents (`lives`: per segment a byte mask or None) of every segment
 * holding it in any field, in the title, in the body and in the anchor text: the statistics a
 * query's scores take, in one call. */
static PyObject *k_doc_freqs(PyObject *mod, PyObject *args) {
    PyObject *segs_obj, *lives_obj, *terms_obj;
    if (!PyArg_ParseTuple(args, "OOO", &segs_obj, &lives_obj, &terms_obj)) return NULL;
    PyObject *segs = PySequence_Fast(segs_obj, "segments must be a sequence");
    PyObject *lives = segs ? PySequence_Fast(lives_obj, "lives must be a sequence") : NULL;
    PyObject *terms = lives ? PySequence_Fast(terms_obj, "terms must be a sequence") : NULL;
    PyObject *result = NULL;
    Py_ssize_t *tids = NULL;
    if (!terms) goto done;
    Py_ssize_t S = PySequence_Fast_GET_SIZE(segs), T = PySequence_Fast_GET_SIZE(terms);
    if (check_segments(segs) < 0) goto done;
    if (PySequence_Fast_GET_SIZE(lives) != S) {
        PyErr_SetString(PyExc_ValueError, "lives: one per segment");
        goto done;
    }
    if (!(tids = term_ids(segs, terms))) goto done;
    result = PyBytes_FromStringAndSize(NULL, T * 4 * (Py_ssize_t)sizeof(int64_t));
    if (!result) goto done;
    int64_t *out = (int64_t *)PyBytes_AS_STRING(result);
    memset(out, 0, (size_t)(T * 4) * sizeof(int64_t));
    for (Py_ssize_t s = 0; s < S; s++) {
        Postings *p = (Postings *)PySequence_Fast_GET_ITEM(segs, s);
        Py_buffer lv;
        const unsigned char *live;
        int has_live = live_get(PySequence_Fast_GET_ITEM(lives, s), &lv, p->n_docs, &live);
        if (has_live < 0) {
            Py_CLEAR(result);
            goto done;
        }
        for (Py_ssize_t t = 0; t < T && result; t++) {
            Py_ssize_t tid = tids[s * T + t];
            if (tid < 0) continue;
            for (int only = -1; only < N_FIELDS; only++) {
                Py_ssize_t c = df_count(p, tid, live, only);
                if (c < 0) {
                    Py_CLEAR(result);
                    break;
                }
                out[t * 4 + only + 1] += c;
            }
        }
        if (has_live) PyBuffer_Release(&lv);
        if (!result) goto done;
    }
done:
    PyMem_Free(tids);
    Py_XDECREF(segs);
    Py_XDECREF(lives);
    Py_XDECREF(terms);
    return result;
}

/* top(segments, terms, coef, mode, norms, allowed, k, k1, k1p1, bound_params, prune)
 *   -> (term_ids, segs, docs, scores, count, postings_read)
 *
 * The k best matches of `terms` (str, in the order their scores are added) over every segment
 * (a list of Postings), every one tied with the k-th included: score_segment on each, the k-th
 * best of the segments done so far as the floor of the next.  `norms`: per segment the tuple
 * (title, body, anchor, title term) of norm arrays (the last None without a title term);
 * `allowed`: per segment a byte mask or None; `coef` and `mode` as score_segment takes them;
 * `bound_params` (b, then per field its weight and average length, then the title's k1).
 * Returns the terms' id in each segment (int64 [segments * terms]), then the hits' segment
 * index (int32), doc id (int32) and score (float64), as bytes, in no particular order; then how
 * many allowed documents match (exact for k = 0, which never prunes) and how many postings were
 * read. */
static PyObject *k_top(PyObject *mod, PyObject *args) {
    PyObject *segs_obj, *terms_obj, *coef_obj, *norms_obj, *allowed_obj, *bp_obj;
    int mode, prune;
    Py_ssize_t k;
    double k1, k1p1;
    if (!PyArg_ParseTuple(args, "OOOiOOnddOp", &segs_obj, &terms_obj, &coef_obj, &mode, &norms_obj, &allowed_obj, &k,
                          &k1, &k1p1, &bp_obj, &prune))
        return NULL;
    if (mode != MODE_BM25F && mode != MODE_FIELDS) {
        PyErr_SetString(PyExc_ValueError, "unknown mode");
        return NULL;
    }
    if (k > INT32_MAX) { /* more than a segment's documents; and the heap's size would wrap */
        PyErr_SetString(PyExc_ValueError, "k out of range");
        return NULL;
    }
    PyObject *segs = PySequence_Fast(segs_obj, "segments must be a sequence");
    PyObject *terms = segs ? PySequence_Fast(terms_obj, "terms must be a sequence") : NULL;
    PyObject *norms = terms ? PySequence_Fast(norms_obj, "norms must be a sequence") : NULL;
    PyObject *allowed_l = norms ? PySequence_Fast(allowed_obj, "allowed must be a sequence") : NULL;
    PyObject *result = NULL;
    Py_ssize_t *tids = NULL;
    Py_buffer coef_v, bp_v;
    const double *coef = NULL, *bp = NULL;
    int has_coef = 0, has_bp = 0;
    Hits hits = {NULL, NULL, NULL, 0, 0};
    double *heap = NULL;
    if (!allowed_l) goto done;
    Py_ssize_t S = PySequence_Fast_GET_SIZE(segs), T = PySequence_Fast_GET_SIZE(terms);
    int per_term = mode == MODE_FIELDS ? N_FIELDS : 2;
    if (check_segments(segs) < 0) goto done;
    if (PySequence_Fast_GET_SIZE(norms) != S || PySequence_Fast_GET_SIZE(allowed_l) != S) {
        PyErr_SetString(PyExc_ValueError, "norms and allowed: one per segment");
        goto done;
    }
    if ((has_coef = doubles_get(coef_obj, &coef_v, T * per_term, "coef", &coef)) <= 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "coef is required");
        has_coef = 0;
        goto done;
    }
    if ((has_bp = doubles_get(bp_obj, &bp_v, 8, "bound_params", &bp)) < 0) {
        has_bp = 0;
        goto done;
    }
    if (!(tids = term_ids(segs, terms))) goto done;
    if (k > 0 && !(heap = PyMem_Malloc((size_t)k * sizeof(double)))) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t count = 0, read = 0, in_heap = 0;
    for (Py_ssize_t s = 0; s < S; s++) {
        Postings *p = (Postings *)PySequence_Fast_GET_ITEM(segs, s);
        int any = 0;
        for (Py_ssize_t t = 0; t < T; t++) any |= tids[s * T + t] >= 0;
        if (!any) continue;
        PyObject *nt = PySequence_Fast_GET_ITEM(norms, s), *al = PySequence_Fast_GET_ITEM(allowed_l, s);
        Py_buffer nv[4], av;
        const double *norm[4] = {NULL, NULL, NULL, NULL};
        int held[4] = {0, 0, 0, 0}, has_al = 0, failed = 0;
        if (!PyTuple_Check(nt) || PyTuple_GET_SIZE(nt) != 4) {
            PyErr_SetString(PyExc_ValueError, "norms: a tuple of four per segment");
            goto done;
        }
        for (int i = 0; i < 4 && !failed; i++) {
            held[i] = doubles_get(PyTuple_GET_ITEM(nt, i), &nv[i], p->n_docs, "norms", &norm[i]);
            if (held[i] < 0) { held[i] = 0; failed = 1; }
            else if (i < 3 && !held[i]) { PyErr_SetString(PyExc_ValueError, "field norms are required"); failed = 1; }
        }
        const unsigned char *allowed = NULL;
        if (!failed && (has_al = live_get(al, &av, p->n_docs, &allowed)) < 0) {
            has_al = 0;
            failed = 1;
        }
        double floor = k > 0 && in_heap == k ? heap[0] : 0.0;
        Py_ssize_t before = hits.n;
        if (!failed && score_segment(p, (int32_t)s, tids + s * T, T, coef, mode, norm, norm[3], allowed, k, k1, k1p1,
                                     has_bp ? bp : NULL, prune, floor, &hits, &count, &read) < 0)
            failed = 1;
        for (int i = 0; i < 4; i++)
            if (held[i]) PyBuffer_Release(&nv[i]);
        if (has_al) PyBuffer_Release(&av);
        if (failed) goto done;
        for (Py_ssize_t j = before; j < hits.n && k > 0; j++) heap_push(heap, &in_heap, k, hits.score[j]);
    }
    /* every segment's hits at or above the k-th best of all */
    double threshold = k > 0 && in_heap == k ? heap[0] : 0.0;
    Py_ssize_t n_out = 0;
    for (Py_ssize_t j = 0; j < hits.n; j++) n_out += hits.score[j] >= threshold;
    PyObject *tids_b = PyBytes_FromStringAndSize(NULL, S * T * (Py_ssize_t)sizeof(int64_t));
    PyObject *seg_b = PyBytes_FromStringAndSize(NULL, n_out * (Py_ssize_t)sizeof(int32_t));
    PyObject *doc_b = PyBytes_FromStringAndSize(NULL, n_out * (Py_ssize_t)sizeof(int32_t));
    PyObject *score_b = PyBytes_FromStringAndSize(NULL, n_out * (Py_ssize_t)sizeof(double));
    if (tids_b && seg_b && doc_b && score_b) {
        int64_t *ot = (int64_t *)PyBytes_AS_STRING(tids_b);
        for (Py_ssize_t i = 0; i < S * T; i++) ot[i] = tids[i];
        int32_t *os = (int32_t *)PyBytes_AS_STRING(seg_b), *od = (int32_t *)PyBytes_AS_STRING(doc_b);
        double *ov = (double *)PyBytes_AS_STRING(score_b);
        Py_ssize_t w = 0;
        for (Py_ssize_t j = 0; j < hits.n; j++)
            if (hits.score[j] >= threshold) {
                os[w] = hits.seg[j];
                od[w] = hits.doc[j];
                ov[w++] = hits.score[j];
            }
        result = Py_BuildValue("(NNNNnn)", tids_b, seg_b, doc_b, score_b, count, read);
    } else {
        Py_XDECREF(tids_b);
        Py_XDECREF(seg_b);
        Py_XDECREF(doc_b);
        Py_XDECREF(score_b);
    }
done:
    hits_free(&hits);
    PyMem_Free(heap);
    PyMem_Free(tids);
    if (has_coef) PyBuffer_Release(&coef_v);
    if (has_bp) PyBuffer_Release(&bp_v);
    Py_XDECREF(segs);
    Py_XDECREF(terms);
    Py_XDECREF(norms);
    Py_XDECREF(allowed_l);
    return result;
}

/* gather(segments, term_ids, field, segs, docs, cap) -> (starts, positions)
 *
 * The token positions of each query term in field `field` (0 title, 1 body, 2 anchor) of each
 * document (segs[c], docs[c]) -- int32 arrays, distinct pairs, in any order: the first `cap` of
 * each, ascending.  `term_ids` as top() returns them (int64 [segments * terms]).  Run (c, t) is
 * positions[starts[c * T + t] : starts[c * T + t + 1]]; `starts` is int64[len(docs) * T + 1] and
 * positions int64, both as bytes.  Per segment and term, one cursor seeks the segment's
 * documents in doc order (skipping the blocks between them); then one copy per run. */
static const int64_t *sort_key; /* gather's sort: (segment << 32 | doc) per candidate */

static int by_key(const void *a, const void *b) {
    int64_t x = sort_key[*(const Py_ssize_t *)a], y = sort_key[*(const Py_ssize_t *)b];
    return (x > y) - (x < y);
}

/* The runs of positions of each term (tids: int64 [segments * T]) in `field` of each candidate
 * (cseg[c], cdoc[c]), as gather() describes them: new references in *starts_out, *pos_out. */
static int gather_runs(PyObject *segs, const int64_t *tids, Py_ssize_t T, int field, const int32_t *cseg,
                       const int32_t *cdoc, Py_ssize_t nc, Py_ssize_t cap, PyObject **starts_out, PyObject **pos_out) {
    Py_ssize_t S = PySequence_Fast_GET_SIZE(segs), runs = nc * T;
    int ok = -1;
    PyObject *starts_b = NULL, *pos_b = NULL;
    int64_t *run_off = PyMem_Calloc((size_t)(runs ? runs : 1), sizeof(int64_t));
    int64_t *run_len = PyMem_Calloc((size_t)(runs ? runs : 1), sizeof(int64_t));
    int64_t *key = PyMem_Malloc((size_t)(nc ? nc : 1) * sizeof(int64_t));
    Py_ssize_t *order = PyMem_Malloc((size_t)(nc ? nc : 1) * sizeof(Py_ssize_t));
    if (!run_off || !run_len || !key || !order) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t c = 0; c < nc; c++) {
        if (cseg[c] < 0 || cseg[c] >= S || cdoc[c] < 0) {
            PyErr_SetString(PyExc_ValueError, "gather: candidate out of range");
            goto done;
        }
        key[c] = ((int64_t)cseg[c] << 32) | cdoc[c];
        order[c] = c;
    }
    sort_key = key;
    qsort(order, (size_t)nc, sizeof(Py_ssize_t), by_key);
    for (Py_ssize_t a = 0; a < nc;) { /* each segment's run of candidates, in doc order */
        Py_ssize_t z = a, s = cseg[order[a]];
        while (z < nc && cseg[order[z]] == s) z++;
        Postings *p = (Postings *)PySequence_Fast_GET_ITEM(segs, s);
        const Field *f = &p->f[field];
        for (Py_ssize_t t = 0; t < T; t++) {
            Py_ssize_t tid = (Py_ssize_t)tids[s * T + t];
            if (tid < 0) continue;
            if (term_ok(p, tid) < 0) goto done;
            uint64_t end = at(&f->pos_ptr, tid + 1);
            Cursor cur;
            cursor_init(&cur, f, tid);
            for (Py_ssize_t j = a; j < z; j++) {
                if (!cursor_seek(&cur, (uint64_t)cdoc[order[j]])) {
                    if (cur.i >= cur.hi) break;
                    continue;
                }
                uint64_t tf = at(&f->tfs, cur.i);
                if (cur.pos < at(&f->pos_ptr, tid) || cur.pos > end || tf > end - cur.pos) {
                    corrupt("positions beyond the term's");
                    goto done;
                }
                Py_ssize_t r = order[j] * T + t;
                run_off[r] = (int64_t)cur.pos;
                run_len[r] = (int64_t)(tf < (uint64_t)cap ? tf : (uint64_t)cap);
            }
        }
        a = z;
    }
    starts_b = PyBytes_FromStringAndSize(NULL, (runs + 1) * (Py_ssize_t)sizeof(int64_t));
    if (!starts_b) goto done;
    int64_t *starts = (int64_t *)PyBytes_AS_STRING(starts_b);
    starts[0] = 0;
    for (Py_ssize_t r = 0; r < runs; r++) starts[r + 1] = starts[r] + run_len[r];
    pos_b = PyBytes_FromStringAndSize(NULL, starts[runs] * (Py_ssize_t)sizeof(int64_t));
    if (!pos_b) goto done;
    int64_t *pos = (int64_t *)PyBytes_AS_STRING(pos_b);
    for (Py_ssize_t r = 0; r < runs; r++) {
        if (!run_len[r]) continue;
        const Field *f = &((Postings *)PySequence_Fast_GET_ITEM(segs, cseg[r / T]))->f[field];
        int64_t v = 0, o = run_off[r];
        for (int64_t q = 0; q < run_len[r]; q++) {
            v += (int64_t)at(&f->positions, o + q);
            pos[starts[r] + q] = v;
        }
    }
    *starts_out = starts_b;
    *pos_out = pos_b;
    starts_b = pos_b = NULL;
    ok = 0;
done:
    Py_XDECREF(starts_b);
    Py_XDECREF(pos_b);
    PyMem_Free(run_off);
    PyMem_Free(run_len);
    PyMem_Free(key);
    PyMem_Free(order);
    return ok;
}

static PyObject *k_gather(PyObject *mod, PyObject *args) {
    PyObject *segs_obj, *tids_obj, *seg_obj, *doc_obj;
    int field;
    Py_ssize_t cap;
    if (!PyArg_ParseTuple(args, "OOiOOn", &segs_obj, &tids_obj, &field, &seg_obj, &doc_obj, &cap)) return NULL;
    if (field < 0 || field >= N_FIELDS || cap < 0) {
        PyErr_SetString(PyExc_ValueError, "bad field or cap");
        return NULL;
    }
    PyObject *segs = PySequence_Fast(segs_obj, "segments must be a sequence");
    if (!segs) return NULL;
    Py_buffer tv, sv, dv;
    int have_t = 0, have_s = 0, have_d = 0;
    PyObject *result = NULL, *starts_b = NULL, *pos_b = NULL;
    if (check_segments(segs) < 0) goto done;
    if (PyObject_GetBuffer(tids_obj, &tv, PyBUF_C_CONTIGUOUS) < 0) goto done;
    have_t = 1;
    if (PyObject_GetBuffer(seg_obj, &sv, PyBUF_C_CONTIGUOUS) < 0) goto done;
    have_s = 1;
    if (PyObject_GetBuffer(doc_obj, &dv, PyBUF_C_CONTIGUOUS) < 0) goto done;
    have_d = 1;
    Py_ssize_t S = PySequence_Fast_GET_SIZE(segs);
    if (dv.len != sv.len || sv.len % 4 || tv.len % 8 || (S && (tv.len / 8) % S) || (!S && sv.len)) {
        PyErr_SetString(PyExc_ValueError, "gather: mismatched arrays");
        goto done;
    }
    Py_ssize_t T = S ? tv.len / 8 / S : 0;
    if (gather_runs(segs, tv.buf, T, field, sv.buf, dv.buf, sv.len / 4, cap, &starts_b, &pos_b) < 0) goto done;
    result = PyTuple_Pack(2, starts_b, pos_b);
done:
    Py_XDECREF(starts_b);
    Py_XDECREF(pos_b);
    if (have_t) PyBuffer_Release(&tv);
    if (have_s) PyBuffer_Release(&sv);
    if (have_d) PyBuffer_Release(&dv);
    Py_DECREF(segs);
    return result;
}

/* -- runs of positions (the output of gather) ------------------------------------------------ */

typedef struct {
    Py_buffer sv, pv;
    const int64_t *starts, *pos;
    Py_ssize_t n_runs;
} Runs;

static int runs_get(PyObject *starts, PyObject *pos, Runs *r) {
    if (PyObject_GetBuffer(starts, &r->sv, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (PyObject_GetBuffer(pos, &r->pv, PyBUF_C_CONTIGUOUS) < 0) { PyBuffer_Release(&r->sv); return -1; }
    r->starts = (const int64_t *)r->sv.buf;
    r->pos = (const int64_t *)r->pv.buf;
    r->n_runs = r->sv.len / 8 - 1;
    Py_ssize_t n_pos = r->pv.len / 8;
    for (Py_ssize_t i = 0; i <= r->n_runs; i++)
        if (r->starts[i] < 0 || r->starts[i] > n_pos || (i && r->starts[i] < r->starts[i - 1])) {
            PyBuffer_Release(&r->sv);
            PyBuffer_Release(&r->pv);
            PyErr_SetString(PyExc_ValueError, "bad runs");
            return -1;
        }
    return 0;
}

static void runs_release(Runs *r) {
    PyBuffer_Release(&r->sv);
    PyBuffer_Release(&r->pv);
}

/* proximity(starts, positions, n_cands, n_terms, cap, reversed_weight, idfs, k1, k1p1, weight)
 *   -> bytes of float64 [n_cands * n_terms]
 *
 * Term proximity over the runs of gather (the first `cap` of each): per candidate, the
 * occurrences of all terms merged by position; each two neighbouring occurrences of terms a,
 * a + 1 at distance delta are worth 1 / delta**2 (reversed_weight times that for a + 1 then a),
 * s(a) the best of them (bm25.pair_closeness); then per term, as bm25.proximity_scores and in
 * its order of operations:
 *     acc(t) = s(t) * idf(t + 1) + s(t - 1) * idf(t - 1)
 *     out(t) = weight * (((min(1, idf(t)) * acc) * k1p1) / (acc + k1))             */
/* The proximity rows of nc candidates (out: float64 [nc * T]) from their runs; `head`, `end`
 * (T each) and `close` (T - 1) are scratch. */
static void proximity_rows(const int64_t *starts, const int64_t *pos, Py_ssize_t nc, Py_ssize_t T, Py_ssize_t cap,
                           double rw, const double *idfs, double k1, double k1p1, double weight, double *out,
                           Py_ssize_t *head, Py_ssize_t *end, double *close) {
    for (Py_ssize_t c = 0; c < nc; c++) {
        Py_ssize_t present = 0;
        for (Py_ssize_t t = 0; t < T; t++) {
            head[t] = starts[c * T + t];
            Py_ssize_t e = starts[c * T + t + 1];
            end[t] = e - head[t] > cap ? head[t] + cap : e;
            present += end[t] > head[t];
        }
        double *row = out + c * T;
        if (present < 2) { /* no pair: every term's formula gives (+)0.0 */
            for (Py_ssize_t t = 0; t < T; t++) row[t] = 0.0;
            continue;
        }
        memset(close, 0, (size_t)(T - 1) * sizeof(double));
        Py_ssize_t prev_t = -1;
        int64_t prev_p = 0;
        for (;;) {
            Py_ssize_t best = -1;
            int64_t bp = 0;
            for (Py_ssize_t t = 0; t < T; t++)
                if (head[t] < end[t] && (best < 0 || pos[head[t]] < bp)) {
                    best = t;
                    bp = pos[head[t]];
                }
            if (best < 0) break;
            head[best]++;
            Py_ssize_t step = best - prev_t;
            if (prev_t >= 0 && (step == 1 || step == -1)) {
                int64_t delta = bp - prev_p;
                double dd = (double)(delta < 1 ? 1 : delta);
                double v = 1.0 / (dd * dd);
                if (step == -1) v *= rw;
                Py_ssize_t a = step == 1 ? prev_t : best;
                if (v > close[a]) close[a] = v;
            }
            prev_t = best;
            prev_p = bp;
        }
        for (Py_ssize_t t = 0; t < T; t++) {
            double acc = 0.0;
            if (t < T - 1) acc += close[t] * idfs[t + 1];
            if (t > 0) acc += close[t - 1] * idfs[t - 1];
            double m = idfs[t] < 1.0 ? idfs[t] : 1.0;
            row[t] = weight * (((m * acc) * k1p1) / (acc + k1));
        }
    }
}

static PyObject *k_proximity(PyObject *mod, PyObject *args) {
    PyObject *starts_obj, *pos_obj, *idfs_obj;
    Py_ssize_t nc, T, cap;
    double rw, k1, k1p1, weight;
    if (!PyArg_ParseTuple(args, "OOnnndOddd", &starts_obj, &pos_obj, &nc, &T, &cap, &rw, &idfs_obj, &k1, &k1p1,
                          &weight))
        return NULL;
    Runs r;
    if (runs_get(starts_obj, pos_obj, &r) < 0) return NULL;
    Py_buffer iv;
    const double *idfs;
    int has_idfs = 0;
    PyObject *out_b = NULL;
    Py_ssize_t *head = NULL, *end = NULL;
    double *close = NULL;
    if (nc < 0 || T < 2 || nc > PY_SSIZE_T_MAX / 8 / T || r.n_runs != nc * T) {
        PyErr_SetString(PyExc_ValueError, "runs do not match n_cands * n_terms (n_terms >= 2)");
        goto done;
    }
    if ((has_idfs = doubles_get(idfs_obj, &iv, T, "idfs", &idfs)) <= 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "idfs are required");
        has_idfs = 0;
        goto done;
    }
    out_b = PyBytes_FromStringAndSize(NULL, nc * T * (Py_ssize_t)sizeof(double));
    head = PyMem_Malloc((size_t)T * sizeof(Py_ssize_t));
    end = PyMem_Malloc((size_t)T * sizeof(Py_ssize_t));
    close = PyMem_Malloc((size_t)(T - 1) * sizeof(double));
    if (!out_b || !head || !end || !close) {
        Py_CLEAR(out_b);
        PyErr_NoMemory();
        goto done;
    }
    proximity_rows(r.starts, r.pos, nc, T, cap, rw, idfs, k1, k1p1, weight, (double *)PyBytes_AS_STRING(out_b), head,
                   end, close);
done:
    PyMem_Free(head);
    PyMem_Free(end);
    PyMem_Free(close);
    if (has_idfs) PyBuffer_Release(&iv);
    runs_release(&r);
    return out_b;
}

/* -- rank: from the matches to the page ------------------------------------------------------ */

typedef struct {
    double score;
    PyObject *url; /* borrowed from the segment's list of urls */
    int32_t seg, doc;
} Ranked;

/* by score descending, then url, then place (search._rank sorts (-score, url, segment, doc));
 * a url that does not compare sets the error checked after the sort */
static int ranked_cmp(const void *a, const void *b) {
    const Ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    int c = PyUnicode_Compare(x->url, y->url);
    if (c) return c;
    if (x->seg != y->seg) return x->seg < y->seg ? -1 : 1;
    return (x->doc > y->doc) - (x->doc < y->doc);
}

/* A row's sum, term by term in order (search._bonus sums in the same order). */
static double row_sum(const double *row, Py_ssize_t T) {
    double s = row[0];
    for (Py_ssize_t t = 1; t < T; t++) s += row[t];
    return s;
}

/* rank(segments, urls, term_ids, segs, docs, scores, order, start, end, proximity, snippet_cap)
 *   -> (segs, docs, scores, starts, positions, head)
 *
 * The page [start:end] of the matches top() returned (segs, docs, scores as bytes; term_ids its
 * ids of the terms in scoring order): sorted by score descending, then url (`urls`: per segment
 * the list of its documents' urls); with `proximity` = (depth, cap, reversed_weight, body weight,
 * title weight, idfs in query order, k1, k1p1), the first `depth` reranked with the term
 * proximity bonus (search.Searcher.search; per field the rows of proximity(), the bonus the
 * body's row sum plus the title's, each summed term by term).  `order`: for each term of the
 * query, in the query's order, its index in the scoring order.  Returns the page's segment
 * indexes (int32), docs (int32) and scores (float64); with snippet_cap > 0 the runs of their
 * body positions (gather(), the query's terms in its order, the first snippet_cap of each), else
 * None, None; and with proximity, the reranked head (segs, docs, body rows, title rows: what
 * explain shows), else None. */
static PyObject *k_rank(PyObject *mod, PyObject *args) {
    PyObject *segs_obj, *urls_obj, *order_obj, *prox;
    Py_buffer tv, sv, dv, vv;
    Py_ssize_t start, end, snippet_cap;
    if (!PyArg_ParseTuple(args, "OOy*y*y*y*OnnOn", &segs_obj, &urls_obj, &tv, &sv, &dv, &vv, &order_obj, &start, &end,
                          &prox, &snippet_cap))
        return NULL;
    PyObject *segs = NULL, *urls = NULL, *order_l = NULL, *result = NULL;
    PyObject *out_seg = NULL, *out_doc = NULL, *out_score = NULL, *starts_b = NULL, *pos_b = NULL, *head = NULL;
    PyObject *bstarts = NULL, *bpos = NULL, *tstarts = NULL, *tpos = NULL, *brows = NULL, *trows = NULL;
    Ranked *ranked = NULL;
    int64_t *tids_q = NULL;
    int32_t *cseg = NULL, *cdoc = NULL;
    Py_ssize_t *scratch_i = NULL;
    double *close = NULL;
    Py_buffer iv;
    int has_idfs = 0;
    if (!(segs = PySequence_Fast(segs_obj, "segments must be a sequence"))) goto done;
    if (!(urls = PySequence_Fast(urls_obj, "urls must be a sequence"))) goto done;
    if (!(order_l = PySequence_Fast(order_obj, "order must be a sequence"))) goto done;
    Py_ssize_t S = PySequence_Fast_GET_SIZE(segs), n = sv.len / 4, Tq = PySequence_Fast_GET_SIZE(order_l);
    if (check_segments(segs) < 0) goto done;
    if (PySequence_Fast_GET_SIZE(urls) != S || dv.len != sv.len || vv.len != n * 8 || tv.len % 8 ||
        (S && (tv.len / 8) % S) || (!S && n)) {
        PyErr_SetString(PyExc_ValueError, "rank: mismatched arrays");
        goto done;
    }
    Py_ssize_t Ts = S ? tv.len / 8 / S : 0;
    const int64_t *tids = tv.buf;
    const int32_t *hseg = sv.buf, *hdoc = dv.buf;
    const double *hscore = vv.buf;
    /* the query's terms in its order: their ids in each segment */
    tids_q = PyMem_Malloc((size_t)(S * Tq > 0 ? S * Tq : 1) * sizeof(int64_t));
    ranked = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Ranked));
    if (!tids_q || !ranked) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t t = 0; t < Tq; t++) {
        Py_ssize_t o = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(order_l, t));
        if (o == -1 && PyErr_Occurred()) goto done;
        if (o < 0 || o >= Ts) {
            PyErr_SetString(PyExc_ValueError, "rank: order out of range");
            goto done;
        }
        for (Py_ssize_t s = 0; s < S; s++) tids_q[s * Tq + t] = tids[s * Ts + o];
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (hseg[i] < 0 || hseg[i] >= S) {
            PyErr_SetString(PyExc_ValueError, "rank: segment out of range");
            goto done;
        }
        PyObject *list = PySequence_Fast_GET_ITEM(urls, hseg[i]);
        if (!PyList_Check(list) || hdoc[i] < 0 || hdoc[i] >= PyList_GET_SIZE(list) ||
            !PyUnicode_Check(PyList_GET_ITEM(list, hdoc[i]))) {
            PyErr_SetString(PyExc_ValueError, "rank: a document without a url");
            goto done;
        }
        ranked[i].score = hscore[i];
        ranked[i].url = PyList_GET_ITEM(list, hdoc[i]);
        ranked[i].seg = hseg[i];
        ranked[i].doc = hdoc[i];
    }
    qsort(ranked, (size_t)n, sizeof(Ranked), ranked_cmp);
    if (PyErr_Occurred()) goto done;
    if (prox != Py_None && n && Tq >= 2) {
        Py_ssize_t depth, cap;
        double rw, w_body, w_title, k1, k1p1;
        PyObject *idfs_obj;
        if (!PyArg_ParseTuple(prox, "nndddOdd", &depth, &cap, &rw, &w_body, &w_title, &idfs_obj, &k1, &k1p1)) goto done;
        const double *idfs;
        if ((has_idfs = doubles_get(idfs_obj, &iv, Tq, "idfs", &idfs)) <= 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "idfs are required");
            has_idfs = 0;
            goto done;
        }
        Py_ssize_t nh = depth < n ? depth : n;
        cseg = PyMem_Malloc((size_t)nh * sizeof(int32_t));
        cdoc = PyMem_Malloc((size_t)nh * sizeof(int32_t));
        scratch_i = PyMem_Malloc((size_t)(2 * Tq) * sizeof(Py_ssize_t));
        close = PyMem_Malloc((size_t)Tq * sizeof(double));
        if (!cseg || !cdoc || !scratch_i || !close) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < nh; i++) {
            cseg[i] = ranked[i].seg;
            cdoc[i] = ranked[i].doc;
        }
        if (gather_runs(segs, tids_q, Tq, 1, cseg, cdoc, nh, cap, &bstarts, &bpos) < 0) goto done;
        if (gather_runs(segs, tids_q, Tq, 0, cseg, cdoc, nh, cap, &tstarts, &tpos) < 0) goto done;
        brows = PyBytes_FromStringAndSize(NULL, nh * Tq * (Py_ssize_t)sizeof(double));
        trows = PyBytes_FromStringAndSize(NULL, nh * Tq * (Py_ssize_t)sizeof(double));
        if (!brows || !trows) goto done;
        double *br = (double *)PyBytes_AS_STRING(brows), *tr = (double *)PyBytes_AS_STRING(trows);
        proximity_rows((int64_t *)PyBytes_AS_STRING(bstarts), (int64_t *)PyBytes_AS_STRING(bpos), nh, Tq, cap, rw, idfs,
                       k1, k1p1, w_body, br, scratch_i, scratch_i + Tq, close);
        proximity_rows((int64_t *)PyBytes_AS_STRING(tstarts), (int64_t *)PyBytes_AS_STRING(tpos), nh, Tq, cap, rw, idfs,
                       k1, k1p1, w_title, tr, scratch_i, scratch_i + Tq, close);
        PyObject *hs = PyBytes_FromStringAndSize((const char *)cseg, nh * (Py_ssize_t)sizeof(int32_t));
        PyObject *hd = PyBytes_FromStringAndSize((const char *)cdoc, nh * (Py_ssize_t)sizeof(int32_t));
        if (!hs || !hd) {
            Py_XDECREF(hs);
            Py_XDECREF(hd);
            goto done;
        }
        head = Py_BuildValue("(NNOO)", hs, hd, brows, trows);
        if (!head) goto done;
        /* the bonus is >= 0: the reranked head still scores at least as much as those below it */
        for (Py_ssize_t i = 0; i < nh; i++)
            ranked[i].score = ranked[i].score + (row_sum(br + i * Tq, Tq) + row_sum(tr + i * Tq, Tq));
        qsort(ranked, (size_t)nh, sizeof(Ranked), ranked_cmp);
        if (PyErr_Occurred()) goto done;
    }
    if (start < 0) start = 0;
    if (end > n) end = n;
    Py_ssize_t np_ = end > start ? end - start : 0;
    out_seg = PyBytes_FromStringAndSize(NULL, np_ * (Py_ssize_t)sizeof(int32_t));
    out_doc = PyBytes_FromStringAndSize(NULL, np_ * (Py_ssize_t)sizeof(int32_t));
    out_score = PyBytes_FromStringAndSize(NULL, np_ * (Py_ssize_t)sizeof(double));
    if (!out_seg || !out_doc || !out_score) goto done;
    int32_t *os = (int32_t *)PyBytes_AS_STRING(out_seg), *od = (int32_t *)PyBytes_AS_STRING(out_doc);
    double *ov = (double *)PyBytes_AS_STRING(out_score);
    for (Py_ssize_t i = 0; i < np_; i++) {
        os[i] = ranked[start + i].seg;
        od[i] = ranked[start + i].doc;
        ov[i] = ranked[start + i].score;
    }
    if (snippet_cap > 0 && Tq > 0) {
        if (gather_runs(segs, tids_q, Tq, 1, os, od, np_, snippet_cap, &starts_b, &pos_b) < 0) goto done;
    } else {
        starts_b = Py_NewRef(Py_None);
        pos_b = Py_NewRef(Py_None);
    }
    result = Py_BuildValue("(OOOOOO)", out_seg, out_doc, out_score, starts_b, pos_b, head ? head : Py_None);
done:
    Py_XDECREF(segs);
    Py_XDECREF(urls);
    Py_XDECREF(order_l);
    Py_XDECREF(out_seg);
    Py_XDECREF(out_doc);
    Py_XDECREF(out_score);
    Py_XDECREF(starts_b);
    Py_XDECREF(pos_b);
    Py_XDECREF(head);
    Py_XDECREF(bstarts);
    Py_XDECREF(bpos);
    Py_XDECREF(tstarts);
    Py_XDECREF(tpos);
    Py_XDECREF(brows);
    Py_XDECREF(trows);
    PyMem_Free(ranked);
    PyMem_Free(tids_q);
    PyMem_Free(cseg);
    PyMem_Free(cdoc);
    PyMem_Free(scratch_i);
    PyMem_Free(close);
    if (has_idfs) PyBuffer_Release(&iv);
    PyBuffer_Release(&tv);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&dv);
    PyBuffer_Release(&vv);
    return result;
}

/* snippet.best_window on runs of positions: (term, occurrence) of the window's start in
 * out[0], out[1]; 0 if no term has a position, -1 (MemoryError) on failure. */
static int best_window_core(const int64_t *const *pos, const Py_ssize_t *len, Py_ssize_t T, int64_t width,
                            int64_t limit, Py_ssize_t out[2]) {
    Py_ssize_t total = 0;
    for (Py_ssize_t t = 0; t < T; t++) total += len[t];
    if (!total) return 0;
    int ok = -1;
    Py_ssize_t *head = PyMem_Calloc((size_t)T, sizeof(Py_ssize_t));
    Py_ssize_t *counts = PyMem_Calloc((size_t)T, sizeof(Py_ssize_t));
    int64_t *occ_pos = PyMem_Malloc((size_t)total * sizeof(int64_t));
    Py_ssize_t *occ_term = PyMem_Malloc((size_t)total * sizeof(Py_ssize_t));
    if (!head || !counts || !occ_pos || !occ_term) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t n = 0;
    for (;;) { /* merge by (position, term) */
        Py_ssize_t best = -1;
        int64_t bp = 0;
        for (Py_ssize_t t = 0; t < T; t++)
            if (head[t] < len[t] && (best < 0 || pos[t][head[t]] < bp)) {
                best = t;
                bp = pos[t][head[t]];
            }
        if (best < 0) break;
        occ_pos[n] = bp;
        occ_term[n++] = best;
        head[best]++;
    }
    Py_ssize_t j = 0, distinct = 0, best_a = 0, bk0 = 0, bk1 = 0, bk2 = 0;
    int have = 0;
    for (Py_ssize_t a = 0; a < n; a++) {
        int64_t start = occ_pos[a];
        while (j < n && occ_pos[j] < start + width) {
            if (!counts[occ_term[j]]++) distinct++;
            j++;
        }
        Py_ssize_t early = start < limit, cnt = early ? j - a : 0;
        if (!have || distinct > bk0 || (distinct == bk0 && (early > bk1 || (early == bk1 && cnt > bk2)))) {
            have = 1;
            bk0 = distinct;
            bk1 = early;
            bk2 = cnt;
            best_a = a;
        }
        if (!--counts[occ_term[a]]) distinct--;
    }
    /* which occurrence of its term the window's start is */
    out[0] = occ_term[best_a];
    out[1] = 0;
    for (Py_ssize_t a = 0; a < best_a; a++) out[1] += occ_term[a] == out[0];
    ok = 1;
done:
    PyMem_Free(head);
    PyMem_Free(counts);
    PyMem_Free(occ_pos);
    PyMem_Free(occ_term);
    return ok;
}

/* Per term, its positions as int64 buffers (held in views[:*held]). */
static int positions_get(PyObject *seq, Py_buffer *views, Py_ssize_t *held, const int64_t **pos, Py_ssize_t *len) {
    Py_ssize_t T = PySequence_Fast_GET_SIZE(seq);
    for (*held = 0; *held < T; (*held)++) {
        Py_buffer *v = &views[*held];
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, *held), v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
        const char *fmt = v->format ? v->format : "B";
        while (*fmt == '<' || *fmt == '=' || *fmt == '@') fmt++;
        if (v->itemsize != 8 || (strcmp(fmt, "q") != 0 && strcmp(fmt, "l") != 0)) {
            (*held)++;
            PyErr_SetString(PyExc_ValueError, "positions must be int64 arrays");
            return -1;
        }
        pos[*held] = v->buf;
        len[*held] = v->len / 8;
    }
    return 0;
}

/* best_window(positions, width, limit) -> (term, occurrence) or None: snippet.best_window.
 * `positions`: per query term, its ascending token positions in the body (int64 arrays, empty
 * where the term is not in it).  The window of `width` tokens starting at each occurrence is
 * scored by (distinct terms, starts before `limit`, occurrences if it does); the first of the best
 * wins. */
static PyObject *k_best_window(PyObject *mod, PyObject *args) {
    PyObject *seq_obj;
    int64_t width, limit;
    if (!PyArg_ParseTuple(args, "OLL", &seq_obj, &width, &limit)) return NULL;
    PyObject *seq = PySequence_Fast(seq_obj, "positions must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t T = PySequence_Fast_GET_SIZE(seq), held = 0, found[2];
    PyObject *result = NULL;
    Py_buffer *views = PyMem_Calloc((size_t)(T ? T : 1), sizeof(Py_buffer));
    const int64_t **pos = PyMem_Calloc((size_t)(T ? T : 1), sizeof(int64_t *));
    Py_ssize_t *len = PyMem_Calloc((size_t)(T ? T : 1), sizeof(Py_ssize_t));
    if (!views || !pos || !len) {
        PyErr_NoMemory();
        goto done;
    }
    if (positions_get(seq, views, &held, pos, len) < 0) goto done;
    int got = best_window_core(pos, len, T, width, limit, found);
    if (got < 0) goto done;
    result = got ? Py_BuildValue("(nn)", found[0], found[1]) : Py_NewRef(Py_None);
done:
    for (Py_ssize_t i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(pos);
    PyMem_Free(len);
    Py_DECREF(seq);
    return result;
}

/* -- make_snippet -------------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t start, end, term;
} Match;

static int match_cmp(const void *a, const void *b) {
    const Match *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->term > y->term) - (x->term < y->term);
}

/* A growing array of code points, the snippet being written. */
typedef struct {
    Py_UCS4 *p;
    Py_ssize_t n, cap;
} Out;

static int out_put(Out *o, Py_UCS4 c) {
    if (o->n == o->cap) {
        Py_ssize_t cap = o->cap ? 2 * o->cap : 512;
        Py_UCS4 *p = PyMem_Realloc(o->p, (size_t)cap * sizeof(Py_UCS4));
        if (!p) { PyErr_NoMemory(); return -1; }
        o->p = p;
        o->cap = cap;
    }
    o->p[o->n++] = c;
    return 0;
}

/* body[a:b] with each run of whitespace made one space (snippet._clean); with `lstrip`, the
 * leading whitespace dropped.  Returns the code points written, -1 on error. */
static Py_ssize_t out_clean(Out *o, int kind, const void *data, Py_ssize_t a, Py_ssize_t b, int lstrip) {
    Py_ssize_t before = o->n;
    int in_space = 0;
    for (Py_ssize_t i = a; i < b; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (Py_UNICODE_ISSPACE(c)) {
            in_space = 1;
            continue;
        }
        if (in_space && !(lstrip && o->n == before)) {
            if (out_put(o, ' ') < 0) return -1;
        }
        in_space = 0;
        if (out_put(o, c) < 0) return -1;
    }
    if (in_space && !(lstrip && o->n == before)) {
        if (out_put(o, ' ') < 0) return -1;
    }
    return o->n - before;
}

/* make_snippet(body, low, terms, window, lo, hi, complete, cut_before, lead, max_occurrences)
 *   -> (text, highlights)
 *
 * snippet.make_snippet after its first lines: `low` is body[lo:hi].lower() (the same length:
 * the caller checks), `terms` the sorted distinct terms.  Occurrences of each term in `low`,
 * word-bounded (by Python's isalnum, on `low`, and on `body` just outside the region), at most
 * `max_occurrences` per term; the window of `window` characters with the most distinct terms,
 * then occurrences, earliest first; `lead` characters of context before it if it has room; cut at
 * spaces; whitespace runs collapsed; "… " and " …" marking cuts.  Highlights are (start, end)
 * offsets of the occurrences in the text. */
static PyObject *snippet_core(PyObject *body, PyObject *low, PyObject *terms_obj, Py_ssize_t window, Py_ssize_t lo,
                              Py_ssize_t hi, int complete, int cut_before, Py_ssize_t lead, Py_ssize_t max_occ) {
    Py_ssize_t n_body = PyUnicode_GET_LENGTH(body), n_low = PyUnicode_GET_LENGTH(low);
    if (lo < 0 || hi < lo || hi > n_body || n_low != hi - lo || window < 0 || lead < 0) {
        PyErr_SetString(PyExc_ValueError, "make_snippet: low must be body[lo:hi].lower(), of the same length");
        return NULL;
    }
    PyObject *terms = PySequence_Fast(terms_obj, "terms must be a sequence");
    if (!terms) return NULL;
    Py_ssize_t n_terms = PySequence_Fast_GET_SIZE(terms);
    int bk = PyUnicode_KIND(body), lk = PyUnicode_KIND(low);
    const void *bd = PyUnicode_DATA(body), *ld = PyUnicode_DATA(low);
    PyObject *result = NULL;
    Match *matches = NULL;
    Py_ssize_t n_matches = 0, cap_matches = 0, *counts = NULL;
    Out o = {NULL, 0, 0};
    PyObject *hl = NULL;

    int before = lo > 0 ? Py_UNICODE_ISALNUM(PyUnicode_READ(bk, bd, lo - 1)) : 0;
    int after = hi < n_body ? Py_UNICODE_ISALNUM(PyUnicode_READ(bk, bd, hi)) : 0;
    for (Py_ssize_t ti = 0; ti < n_terms; ti++) {
        PyObject *t = PySequence_Fast_GET_ITEM(terms, ti);
        if (!PyUnicode_Check(t)) { PyErr_SetString(PyExc_TypeError, "terms must be str"); goto done; }
        Py_ssize_t size = PyUnicode_GET_LENGTH(t);
        int tk = PyUnicode_KIND(t);
        const void *td = PyUnicode_DATA(t);
        Py_ssize_t found = 0, start = 0;
        while (found < max_occ) {
            /* low.find(t, start) */
            Py_ssize_t i = -1;
            if (lk == PyUnicode_1BYTE_KIND && tk == PyUnicode_1BYTE_KIND && size > 0) {
                const Py_UCS1 *L = ld, *key = td;
                for (Py_ssize_t x = start; x + size <= n_low;) {
                    const Py_UCS1 *p = memchr(L + x, key[0], (size_t)(n_low - size + 1 - x));
                    if (!p) break;
                    x = p - L;
                    if (memcmp(L + x, key, (size_t)size) == 0) {
                        i = x;
                        break;
                    }
                    x++;
                }
            } else {
                for (Py_ssize_t x = start; x + size <= n_low; x++) {
                    Py_ssize_t y = 0;
                    while (y < size && PyUnicode_READ(lk, ld, x + y) == PyUnicode_READ(tk, td, y)) y++;
                    if (y == size) { i = x; break; }
                }
            }
            if (i < 0) break;
            Py_ssize_t j = i + size;
            int left_ok = i == 0 ? !before : !Py_UNICODE_ISALNUM(PyUnicode_READ(lk, ld, i - 1));
            int right_ok = j == n_low ? !after : !Py_UNICODE_ISALNUM(PyUnicode_READ(lk, ld, j));
            if (left_ok && right_ok) {
                if (n_matches == cap_matches) {
                    Py_ssize_t cap = cap_matches ? 2 * cap_matches : 64;
                    Match *mm = PyMem_Realloc(matches, (size_t)cap * sizeof(Match));
                    if (!mm) { PyErr_NoMemory(); goto done; }
                    matches = mm;
                    cap_matches = cap;
                }
                matches[n_matches].start = lo + i;
                matches[n_matches].end = lo + j;
                matches[n_matches++].term = ti;
                found++;
            }
            start = j;
            if (size == 0) break; /* an empty term matches nowhere new */
        }
    }
    qsort(matches, (size_t)n_matches, sizeof(Match), match_cmp);

    /* two pointers: the best window by (distinct terms, occurrences, -start) */
    Py_ssize_t best_i = 0, best_j = 0, bd0 = 0, bd1 = 0, bd2 = 0, j = 0, distinct = 0;
    counts = PyMem_Calloc((size_t)(n_terms ? n_terms : 1), sizeof(Py_ssize_t));
    if (!counts) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n_matches; i++) {
        Py_ssize_t st = matches[i].start;
        while (j < n_matches && matches[j].end - st <= window) {
            if (!counts[matches[j].term]++) distinct++;
            j++;
        }
        Py_ssize_t cnt = j - i;
        if (distinct > bd0 || (distinct == bd0 && (cnt > bd1 || (cnt == bd1 && -st > bd2)))) {
            bd0 = distinct; bd1 = cnt; bd2 = -st;
            best_i = i; best_j = j;
        }
        if (j > i && !--counts[matches[i].term]) distinct--;
    }
    Py_ssize_t start, end, c0 = 0, c1 = 0; /* chosen matches [c0, c1) */
    if (best_j > best_i) {
        Py_ssize_t first_start = matches[best_i].start, last_end = matches[best_j - 1].end;
        Py_ssize_t slack = window - (last_end - first_start);
        if (slack < 0) slack = 0;
        start = first_start - (lead < slack ? lead : slack);
        if (start < 0) start = 0;
        end = last_end > start + window ? last_end : start + window;
        if (end > n_body) end = n_body;
        c0 = best_i;
        c1 = best_j;
    } else {
        start = lo;
        end = lo + window < n_body ? lo + window : n_body;
    }
    /* snap to spaces, never cutting a highlighted word */
    if (start > 0) {
        Py_ssize_t stop = c1 > c0 ? matches[c0].start : end;
        for (Py_ssize_t x = start; x < stop; x++)
            if (PyUnicode_READ(bk, bd, x) == ' ') { start = x + 1; break; }
    }
    if (end < n_body) {
        Py_ssize_t from = c1 > c0 ? matches[c1 - 1].end : start;
        for (Py_ssize_t x = end - 1; x >= from && x >= 0; x--)
            if (PyUnicode_READ(bk, bd, x) == ' ') {
                if (x > start) end = x;
                break;
            }
    }
    Py_ssize_t prefix = 0;
    if (start > 0 || cut_before) {
        if (out_put(&o, 0x2026) < 0 || out_put(&o, ' ') < 0) goto done;
        prefix = 2;
    }
    hl = PyList_New(0);
    if (!hl) goto done;
    Py_ssize_t cursor = start;
    for (Py_ssize_t m = c0; m < c1; m++) {
        Py_ssize_t ms = matches[m].start, me = matches[m].end;
        if (ms < cursor || me > end) continue;
        if (out_clean(&o, bk, bd, cursor, ms, o.n == prefix) < 0) goto done;
        Py_ssize_t at_ = o.n;
        for (Py_ssize_t x = ms; x < me; x++)
            if (out_put(&o, PyUnicode_READ(bk, bd, x)) < 0) goto done;
        PyObject *span = Py_BuildValue("(nn)", at_, o.n);
        if (!span || PyList_Append(hl, span) < 0) { Py_XDECREF(span); goto done; }
        Py_DECREF(span);
        cursor = me;
    }
    if (out_clean(&o, bk, bd, cursor, end, o.n == prefix) < 0) goto done;
    while (o.n > prefix && Py_UNICODE_ISSPACE(o.p[o.n - 1])) o.n--; /* the tail's rstrip */
    if (end < n_body || !complete) {
        if (out_put(&o, ' ') < 0 || out_put(&o, 0x2026) < 0) goto done;
    }
    static const Py_UCS4 nothing[1] = {0};
    PyObject *text = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, o.p ? o.p : nothing, o.n);
    if (!text) goto done;
    PyObject *spans = PyList_AsTuple(hl);
    if (!spans) { Py_DECREF(text); goto done; }
    result = PyTuple_Pack(2, text, spans);
    Py_DECREF(text);
    Py_DECREF(spans);
done:
    PyMem_Free(matches);
    PyMem_Free(counts);
    PyMem_Free(o.p);
    Py_XDECREF(hl);
    Py_DECREF(terms);
    return result;
}

static PyObject *k_make_snippet(PyObject *mod, PyObject *args) {
    PyObject *body, *low, *terms;
    Py_ssize_t window, lo, hi, lead, max_occ;
    int complete, cut_before;
    if (!PyArg_ParseTuple(args, "UUOnnnppnn", &body, &low, &terms, &window, &lo, &hi, &complete, &cut_before, &lead,
                          &max_occ))
        return NULL;
    return snippet_core(body, low, terms, window, lo, hi, complete, cut_before, lead, max_occ);
}

/* -- snippet_at: a hit's snippet from its decompressed body ----------------------------------- */

/* s.lower(): for ASCII text a plain loop, else Python's own method (full case mapping). */
static PyObject *str_lower(PyObject *s) {
    if (!PyUnicode_IS_ASCII(s)) return PyObject_CallMethod(s, "lower", NULL);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    PyObject *out = PyUnicode_New(n, 127);
    if (!out) return NULL;
    const Py_UCS1 *src = PyUnicode_1BYTE_DATA(s);
    Py_UCS1 *dst = PyUnicode_1BYTE_DATA(out);
    for (Py_ssize_t i = 0; i < n; i++) dst[i] = src[i] >= 'A' && src[i] <= 'Z' ? src[i] + 32 : src[i];
    return out;
}

static int ascii_alnum(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* The code point of the UTF-8 sequence starting at data[j] (n bytes in all), -1 if invalid. */
static long utf8_at(const unsigned char *data, Py_ssize_t n, Py_ssize_t j) {
    unsigned char b = data[j];
    int size = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    if (b >= 0x80 && b < 0xC0) return -1;
    if (j + size > n) return -1;
    long cp = size == 1 ? b : size == 2 ? (b & 0x1F) : size == 3 ? (b & 0x0F) : (b & 0x07);
    for (int q = 1; q < size; q++) {
        if ((data[j + q] & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (data[j + q] & 0x3F);
    }
    return cp;
}

/* Whether the character ending at byte i (starting at byte j) is a letter or digit, as
 * snippet._alnum_before and snippet._alnum_at decide it (an invalid sequence is not). */
static int alnum_before(const unsigned char *data, Py_ssize_t n, Py_ssize_t i) {
    unsigned char b = data[i - 1];
    if (b < 0x80) return ascii_alnum(b);
    Py_ssize_t s = i - 1;
    while (s > 0 && i - s < 4 && data[s] >= 0x80 && data[s] < 0xC0) s--;
    long cp = utf8_at(data, i, s);
    return cp >= 0 && Py_UNICODE_ISALNUM((Py_UCS4)cp);
}

static int alnum_at(const unsigned char *data, Py_ssize_t n, Py_ssize_t j) {
    unsigned char b = data[j];
    if (b < 0x80) return ascii_alnum(b);
    long cp = utf8_at(data, n, j);
    return cp >= 0 && Py_UNICODE_ISALNUM((Py_UCS4)cp);
}

/* Bytes of data[0:b] that are not inside a character (snippet._utf8_complete). */
static Py_ssize_t utf8_complete(const unsigned char *raw, Py_ssize_t n) {
    for (Py_ssize_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char b = raw[n - back];
        if (b < 0x80) return n;
        if (b >= 0xC0) {
            int need = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
            return back >= need ? n : n - back;
        }
    }
    return n;
}

/* snippet_at(data, done, term, k, terms, window, lead, max_occurrences, before_chars,
 *            from_sync, scan_chars) -> (text, highlights) or int
 *
 * The rest of snippet.snippet_for_hit once the body is decompressed from the sync point (or its
 * start) into `data` (`done`: all the rest of the body is there): the k-th word-bounded occurrence
 * of `term` (lower-case ASCII; ASCII letters of the text compared case-insensitively), the region
 * of text around it (snippet._region), and the snippet of that region (make_snippet, `terms`
 * sorted and distinct).  Returns the snippet, or what the caller must do first:
 *     n > 0   decompress until data holds n bytes (n <= len(data): one more step), and call again
 *     -1      the occurrence is not there (tokens and text disagree): scan the prefix instead
 *     -2      too close after the sync point for the window's lead: start at the one before
 *     -3 - b  the region has a character whose lower case is longer (U+0130): render the region
 *             around byte b with the Python code */
static PyObject *snippet_at_core(const unsigned char *data, Py_ssize_t n, int done, PyObject *term, Py_ssize_t k,
                                 PyObject *terms, Py_ssize_t window, Py_ssize_t lead, Py_ssize_t max_occ,
                                 Py_ssize_t before_chars, int from_sync, Py_ssize_t scan_chars) {
    Py_ssize_t size = PyUnicode_GET_LENGTH(term);
    PyObject *result = NULL;
    if (!PyUnicode_IS_ASCII(term) || size == 0) {
        PyErr_SetString(PyExc_ValueError, "snippet_at: the term must be ASCII");
        goto out;
    }
    if (k < 0 || window < 0 || lead < 0 || max_occ < 0 || before_chars < 0 || scan_chars < 0 ||
        window > PY_SSIZE_T_MAX / 8 || before_chars > PY_SSIZE_T_MAX / 8) {
        PyErr_SetString(PyExc_ValueError, "snippet_at: counts and lengths must be >= 0");
        goto out;
    }
    const unsigned char *key = PyUnicode_1BYTE_DATA(term);
    /* 1. the k-th occurrence: candidates where the first byte matches in either case (memchr) */
    Py_ssize_t b = -1, seen = 0;
    unsigned char c_low = key[0], c_up = c_low >= 'a' && c_low <= 'z' ? (unsigned char)(c_low - 32) : c_low;
    const unsigned char *next_low = n ? memchr(data, c_low, (size_t)n) : NULL;
    const unsigned char *next_up = n && c_up != c_low ? memchr(data, c_up, (size_t)n) : NULL;
    for (Py_ssize_t i = 0;;) {
        if (next_low && next_low < data + i) next_low = i < n ? memchr(data + i, c_low, (size_t)(n - i)) : NULL;
        if (next_up && next_up < data + i) next_up = i < n ? memchr(data + i, c_up, (size_t)(n - i)) : NULL;
        const unsigned char *hit = !next_low ? next_up : !next_up ? next_low : next_low < next_up ? next_low : next_up;
        if (!hit) break;
        i = hit - data;
        if (i + size > n) break;
        Py_ssize_t q = 1;
        while (q < size && (unsigned char)(data[i + q] >= 'A' && data[i + q] <= 'Z' ? data[i + q] + 32 : data[i + q]) == key[q])
            q++;
        if (q < size) {
            i++;
            continue;
        }
        Py_ssize_t j = i + size;
        if (j + 4 > n && !done) { /* the word, or the character after it, may go on */
            result = PyLong_FromSsize_t(n >= scan_chars ? -1 : 0);
            goto out;
        }
        if ((i == 0 || !alnum_before(data, n, i)) && (j >= n || !alnum_at(data, n, j))) {
            if (seen == k) {
                b = i;
                break;
            }
            seen++;
        }
        i = j;
    }
    if (b < 0) {
        result = PyLong_FromSsize_t(done || n >= scan_chars ? -1 : 0);
        goto out;
    }
    /* 2. too close after a sync point for the window's lead? */
    if (from_sync && b < 4 * before_chars) {
        Py_ssize_t chars = 0;
        for (Py_ssize_t i = 0; i < b; i++) chars += (data[i] & 0xC0) != 0x80;
        if (chars < before_chars) {
            result = PyLong_FromSsize_t(-2);
            goto out;
        }
    }
    /* 3. the region: up to 4 * before_chars bytes before (whole characters), `after` characters
     * from the occurrence on (snippet._region; the data is UTF-8, so characters are the bytes
     * that do not continue a sequence) */
    Py_ssize_t after = 2 * window + 1;
    Py_ssize_t first = b - 4 * before_chars > 0 ? b - 4 * before_chars : 0;
    while (first > 0 && data[first] >= 0x80 && data[first] < 0xC0) first++;
    int whole = 0;
    Py_ssize_t len = 0;
    for (Py_ssize_t want = b + after + 64;; want = b + 4 * after + 4) {
        if (n < want && !done) {
            result = PyLong_FromSsize_t(want);
            goto out;
        }
        Py_ssize_t last = n < want ? n : want;
        whole = done && last == n;
        len = whole ? last - b : utf8_complete(data + b, last - b);
        Py_ssize_t chars = 0;
        for (Py_ssize_t q = 0; q < len; q++) chars += (data[b + q] & 0xC0) != 0x80;
        if (chars >= after || whole || want == b + 4 * after + 4) break;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)data + first, b + len - first, "surrogatepass");
    if (!text) goto out;
    Py_ssize_t c = 0;
    for (Py_ssize_t q = first; q < b; q++) c += (data[q] & 0xC0) != 0x80;
    /* 4. make_snippet(text, terms, window, lo = c - lead, hi = c + 2 * window, ...) */
    Py_ssize_t lo = c - lead > 0 ? c - lead : 0, hi = c + 2 * window;
    if (hi > PyUnicode_GET_LENGTH(text)) hi = PyUnicode_GET_LENGTH(text);
    PyObject *part = PyUnicode_Substring(text, lo, hi);
    PyObject *low = part ? str_lower(part) : NULL;
    Py_XDECREF(part);
    if (!low) {
        Py_DECREF(text);
        goto out;
    }
    if (PyUnicode_GET_LENGTH(low) != hi - lo) {
        result = PyLong_FromSsize_t(-3 - b);
    } else {
        result = snippet_core(text, low, terms, window, lo, hi, whole, from_sync || first > 0, lead, max_occ);
    }
    Py_DECREF(low);
    Py_DECREF(text);
out:
    return result;
}

static PyObject *k_snippet_at(PyObject *mod, PyObject *args) {
    Py_buffer dv;
    int done, from_sync;
    PyObject *term, *terms;
    Py_ssize_t k, window, lead, max_occ, before_chars, scan_chars;
    if (!PyArg_ParseTuple(args, "y*pUnOnnnnpn", &dv, &done, &term, &k, &terms, &window, &lead, &max_occ, &before_chars,
                          &from_sync, &scan_chars))
        return NULL;
    PyObject *result = snippet_at_core(dv.buf, dv.len, done, term, k, terms, window, lead, max_occ, before_chars,
                                       from_sync, scan_chars);
    PyBuffer_Release(&dv);
    return result;
}

/* -- snippet_hit: one hit's snippet, whole ------------------------------------------------- */

/* A stored body of LZ4 pieces (snippet.PieceStream): `data` grows a whole piece at a time,
 * decompressed by the Python callable `decompress` (lz4.block.decompress). */
typedef struct {
    const unsigned char *src;
    Py_ssize_t n_src, fed, next, n_ends;
    Py_ssize_t *ends; /* where the pieces after `fed` end */
    unsigned char *data;
    Py_ssize_t n, cap;
    int done;
    PyObject *decompress;
} Pieces;

static int pieces_open(Pieces *p, const unsigned char *src, Py_ssize_t n_src, const int64_t *rows, Py_ssize_t n_rows,
                       Py_ssize_t start, PyObject *decompress) {
    PyMem_Free(p->ends);
    p->ends = NULL;
    if (start < 0 || start > n_src) {
        PyErr_SetString(PyExc_ValueError, "corrupt segment: sync points outside the body");
        return -1;
    }
    p->src = src;
    p->n_src = n_src;
    p->fed = start;
    p->next = 0;
    p->n = 0;
    p->decompress = decompress;
    p->ends = PyMem_Malloc((size_t)(n_rows + 1) * sizeof(Py_ssize_t));
    if (!p->ends) {
        PyErr_NoMemory();
        return -1;
    }
    p->n_ends = 0;
    for (Py_ssize_t r = 0; r < n_rows; r++)
        if (rows[r * 3] > start) p->ends[p->n_ends++] = (Py_ssize_t)rows[r * 3];
    p->ends[p->n_ends++] = n_src;
    p->done = n_src <= start;
    return 0;
}

/* snippet.PieceStream.grow: pieces until `data` holds at_least bytes, or one more piece */
static int pieces_grow(Pieces *p, Py_ssize_t at_least) {
    Py_ssize_t target = at_least > p->n ? at_least : p->n + 1;
    while (p->n < target && !p->done) {
        Py_ssize_t end = p->ends[p->next++];
        if (end < p->fed || end > p->n_src) {
            PyErr_SetString(PyExc_ValueError, "corrupt segment: sync points outside the body");
            return -1;
        }
        PyObject *view = PyMemoryView_FromMemory((char *)p->src + p->fed, end - p->fed, PyBUF_READ);
        PyObject *piece = view ? PyObject_CallOneArg(p->decompress, view) : NULL;
        Py_XDECREF(view);
        if (!piece) return -1;
        if (!PyBytes_Check(piece)) {
            Py_DECREF(piece);
            PyErr_SetString(PyExc_TypeError, "decompress must return bytes");
            return -1;
        }
        Py_ssize_t len = PyBytes_GET_SIZE(piece);
        if (p->n + len > p->cap) {
            Py_ssize_t cap = (p->n + len) * 2;
            unsigned char *data = PyMem_Realloc(p->data, (size_t)cap);
            if (!data) {
                Py_DECREF(piece);
                PyErr_NoMemory();
                return -1;
            }
            p->data = data;
            p->cap = cap;
        }
        memcpy(p->data + p->n, PyBytes_AS_STRING(piece), (size_t)len);
        Py_DECREF(piece);
        p->n += len;
        p->fed = end;
        p->done = p->next == p->n_ends;
    }
    return 0;
}

/* The start of the body (no query term in it): snippet_for_hit's ensure(4 * window), then
 * make_snippet(text, terms, window, hi = 4 * window, complete = done).  None: the Python code. */
static PyObject *snippet_of_start(Pieces *p, PyObject *distinct, Py_ssize_t window, Py_ssize_t lead, Py_ssize_t max_occ) {
    Py_ssize_t want = 4 * window;
    for (;;) {
        if (p->done) break;
        Py_ssize_t usable = utf8_complete(p->data, p->n), chars = 0;
        for (Py_ssize_t q = 0; q < usable; q++) chars += (p->data[q] & 0xC0) != 0x80;
        if (!(p->n < want || (p->n < 4 * want && chars < want))) break;
        if (pieces_grow(p, want) < 0) return NULL;
    }
    Py_ssize_t usable = p->done ? p->n : utf8_complete(p->data, p->n);
    PyObject *text = PyUnicode_DecodeUTF8((const char *)p->data, usable, "surrogatepass");
    if (!text) return NULL;
    Py_ssize_t hi = PyUnicode_GET_LENGTH(text) < want ? PyUnicode_GET_LENGTH(text) : want;
    PyObject *part = PyUnicode_Substring(text, 0, hi);
    PyObject *low = part ? str_lower(part) : NULL;
    Py_XDECREF(part);
    PyObject *result = NULL;
    if (low && PyUnicode_GET_LENGTH(low) == hi)
        result = snippet_core(text, low, distinct, window, 0, hi, p->done, 0, lead, max_occ);
    else if (low)
        result = Py_NewRef(Py_None);
    Py_XDECREF(low);
    Py_DECREF(text);
    return result;
}

/* snippet_hit(compressed, sync, starts, positions, hit, terms, distinct, decompress, window, lead,
 *             max_occurrences, before_chars, scan_chars, width, prefer_before, scan_tokens,
 *             chars_per_token) -> (text, highlights) or None
 *
 * snippet.snippet_for_hit for a body stored in LZ4 pieces, whole.  The hit's body positions are
 * runs as gather() lays them out (bytes of int64: run (hit, t) is positions[starts[hit * T + t]
 * : starts[hit * T + t + 1]], T the number of terms).  The window (best_window over them, those
 * past scan_tokens dropped where there is no sync point), the sync point before
 * it, the pieces from there (`decompress` called on each), then snippet_at's work; or the start of
 * the body if no term is in it.  `sync`: the body's (byte, char, token) rows, int64; `terms` the
 * query's terms in order, `distinct` sorted and distinct.  None where the Python code has to do it
 * (a term with non-ASCII letters, text and tokens that disagree, a lower case of another length). */
static PyObject *k_snippet_hit(PyObject *mod, PyObject *args) {
    Py_buffer cv, sv, rv, qv;
    PyObject *terms_obj, *distinct, *decompress;
    Py_ssize_t hit, window, lead, max_occ, before_chars, scan_chars, width, prefer_before, scan_tokens;
    double chars_per_token;
    if (!PyArg_ParseTuple(args, "y*y*y*y*nOOOnnnnnnnnd", &cv, &sv, &rv, &qv, &hit, &terms_obj, &distinct, &decompress,
                          &window, &lead, &max_occ, &before_chars, &scan_chars, &width, &prefer_before, &scan_tokens,
                          &chars_per_token))
        return NULL;
    PyObject *result = NULL, *terms = NULL;
    const int64_t **pos = NULL;
    Py_ssize_t *len = NULL, found[2];
    Pieces p;
    memset(&p, 0, sizeof(p));
    const unsigned char *src = cv.buf;
    const int64_t *rows = sv.buf, *run_starts = rv.buf, *all_pos = qv.buf;
    Py_ssize_t n_rows = sv.len / 24, n_starts = rv.len / 8, n_pos = qv.len / 8;
    if (!(terms = PySequence_Fast(terms_obj, "terms must be a sequence"))) goto done;
    Py_ssize_t T = PySequence_Fast_GET_SIZE(terms);
    if (sv.len % 24 || hit < 0 || (hit + 1) * T >= n_starts || rv.len % 8 || qv.len % 8) {
        PyErr_SetString(PyExc_ValueError, "snippet_hit: sync rows of three, a run of positions per term and hit");
        goto done;
    }
    pos = PyMem_Calloc((size_t)(T ? T : 1), sizeof(int64_t *));
    len = PyMem_Calloc((size_t)(T ? T : 1), sizeof(Py_ssize_t));
    if (!pos || !len) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t t = 0; t < T; t++) {
        int64_t a = run_starts[hit * T + t], z = run_starts[hit * T + t + 1];
        if (a < 0 || z < a || z > n_pos) {
            PyErr_SetString(PyExc_ValueError, "snippet_hit: bad runs");
            goto done;
        }
        pos[t] = all_pos + a;
        len[t] = (Py_ssize_t)(z - a);
    }
    if (!n_rows) /* reading from the start: how far is bounded */
        for (Py_ssize_t t = 0; t < T; t++)
            while (len[t] && pos[t][len[t] - 1] >= scan_tokens) len[t]--;
    int got = best_window_core(pos, len, T, width, prefer_before, found);
    if (got < 0) goto done;
    if (!got) { /* no query term in the body: its start */
        if (pieces_open(&p, src, cv.len, rows, n_rows, 0, decompress) < 0) goto done;
        result = snippet_of_start(&p, distinct, window, lead, max_occ);
        goto done;
    }
    PyObject *term = PySequence_Fast_GET_ITEM(terms, found[0]);
    if (!PyUnicode_Check(term) || !PyUnicode_IS_ASCII(term) || !PyUnicode_GET_LENGTH(term)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    const int64_t *tp = pos[found[0]];
    int64_t token = tp[found[1]];
    Py_ssize_t r = -1; /* the last sync point at or before the window's token */
    while (r + 1 < n_rows && rows[(r + 1) * 3 + 2] <= token) r++;
    for (;;) {
        Py_ssize_t start = 0, k = found[1];
        int64_t from_token = 0;
        double cpt = n_rows ? (double)rows[1] / (double)(rows[2] > 1 ? rows[2] : 1) : chars_per_token;
        if (r >= 0) {
            start = (Py_ssize_t)rows[r * 3];
            from_token = rows[r * 3 + 2];
            cpt = (double)rows[r * 3 + 1] / (double)(from_token > 1 ? from_token : 1);
            Py_ssize_t before = 0; /* the term's occurrences before the sync point */
            while (before < len[found[0]] && tp[before] < from_token) before++;
            k = found[1] - before;
        }
        if (pieces_open(&p, src, cv.len, rows, n_rows, start, decompress) < 0) goto done;
        /* one step to about the window, from the token's distance */
        double guess = ((double)(token - from_token) * cpt) * 1.1; /* past the body: the whole body */
        Py_ssize_t est = (guess >= 0.0 && guess < (double)cv.len ? (Py_ssize_t)guess : cv.len) + 2 * window + 128;
        if (pieces_grow(&p, est) < 0) goto done;
        for (;;) {
            PyObject *out = snippet_at_core(p.data, p.n, p.done, term, k, distinct, window, lead, max_occ, before_chars,
                                            r >= 0, scan_chars);
            if (!out) goto done;
            if (!PyLong_Check(out)) {
                result = out;
                goto done;
            }
            Py_ssize_t code = PyLong_AsSsize_t(out);
            Py_DECREF(out);
            if (code >= 0) {
                if (pieces_grow(&p, code > p.n ? code : 0) < 0) goto done;
                continue;
            }
            if (code == -2) break; /* too close after the sync point: the one before */
            result = Py_NewRef(Py_None);
            goto done;
        }
        r--;
    }
done:
    PyMem_Free(pos);
    PyMem_Free(len);
    PyMem_Free(p.ends);
    PyMem_Free(p.data);
    Py_XDECREF(terms);
    PyBuffer_Release(&cv);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&rv);
    PyBuffer_Release(&qv);
    return result;
}

static PyMethodDef module_methods[] = {
    {"top", k_top, METH_VARARGS,
     "top(segments, terms, coef, mode, norms, allowed, k, k1, k1p1, bound_params, prune) -> "
     "(term_ids, segs, docs, scores, count, postings_read)"},
    {"gather", k_gather, METH_VARARGS, "gather(segments, term_ids, field, segs, docs, cap) -> (starts, positions)"},
    {"doc_freqs", k_doc_freqs, METH_VARARGS, "doc_freqs(segments, lives, terms) -> int64 [terms * 4]"},
    {"rank", k_rank, METH_VARARGS,
     "rank(segments, urls, term_ids, segs, docs, scores, order, start, end, proximity, snippet_cap) -> "
     "(segs, docs, scores, starts, positions, head)"},
    {"proximity", k_proximity, METH_VARARGS,
     "proximity(starts, positions, n_cands, n_terms, cap, reversed_weight, idfs, k1, k1p1, weight) -> scores"},
    {"best_window", k_best_window, METH_VARARGS, "best_window(positions, width, limit) -> (term, occurrence) or None"},
    {"snippet_hit", k_snippet_hit, METH_VARARGS,
     "snippet_hit(compressed, sync, starts, positions, hit, terms, distinct, decompress, window, lead, "
     "max_occurrences, before_chars, scan_chars, width, prefer_before, scan_tokens, chars_per_token) -> "
     "(text, highlights) or None"},
    {"snippet_at", k_snippet_at, METH_VARARGS,
     "snippet_at(data, done, term, k, terms, window, lead, max_occurrences, before_chars, from_sync, scan_chars)"},
    {"make_snippet", k_make_snippet, METH_VARARGS,
     "make_snippet(body, low, terms, window, lo, hi, complete, cut_before, lead, max_occurrences) -> (text, highlights)"},
    {NULL, NULL, 0, NULL},
};

static void module_free(void *mod) { scratch_free(); }

static struct PyModuleDef kernels_module = {
    PyModuleDef_HEAD_INIT, "_kernels", "The searcher's inner loops, compiled (see the C source).", -1,
    module_methods, NULL, NULL, NULL, module_free,
};

PyMODINIT_FUNC PyInit__kernels(void) {
    if (PyType_Ready(&PostingsType) < 0) return NULL;
    PyObject *m = PyModule_Create(&kernels_module);
    if (!m) return NULL;
    Py_INCREF(&PostingsType);
    if (PyModule_AddObject(m, "Postings", (PyObject *)&PostingsType) < 0) {
        Py_DECREF(&PostingsType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "KEY_STRIDE", KEY_STRIDE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *all = Py_BuildValue("[ssssssssss]", "Postings", "best_window", "doc_freqs", "gather", "make_snippet",
                                  "proximity", "rank", "snippet_at", "snippet_hit", "top");
    if (!all || PyModule_AddObject(m, "__all__", all) < 0) {
        Py_XDECREF(all);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
