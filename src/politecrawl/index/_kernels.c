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
 *   Postings          one segment's postings (three fields) and term dictionary
 *     .lookup(term)   term id by binary search in the sorted dictionary (no Python dict)
 *     .df(tid, live)  documents holding the term in any field
 *     .score(...)     every matching document scored (BM25F + title term, BM25F, or per-field
 *                     BM25); the top k returned, ties at the k-th score included
 *     .gather(...)    the positions of the query terms in given documents, in one pass per term
 *   closeness(...)    term proximity: the closest neighbouring occurrences of query neighbours
 *   best_window(...)  the snippet window with the most distinct terms, then occurrences
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

static int arr_get(PyObject *obj, Arr *a, const char *what) {
    memset(a, 0, sizeof(*a));
    if (PyObject_GetBuffer(obj, &a->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    a->held = 1;
    int size = (int)a->view.itemsize;
    const char *fmt = a->view.format ? a->view.format : "B";
    while (*fmt == '<' || *fmt == '=' || *fmt == '@' || *fmt == '|') fmt++;
    if (a->view.ndim > 1 || !strchr("bBhHiIlLqQ?", *fmt) || fmt[0] == '\0' || fmt[1] != '\0' ||
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

/* -- scratch (kept zeroed between calls; the GIL is held) ----------------------------------- */

static double *s_score, *s_pseudo;
static unsigned char *s_seen;
static uint32_t *s_stamp, s_stamp_now;
static int32_t *s_touched, *s_term_docs;
static Py_ssize_t s_cap;

static int scratch(Py_ssize_t n) {
    if (n <= s_cap) return 0;
    Py_ssize_t cap = n < 1024 ? 1024 : n;
    double *score = PyMem_Calloc((size_t)cap, sizeof(double));
    double *pseudo = PyMem_Calloc((size_t)cap, sizeof(double));
    unsigned char *seen = PyMem_Calloc((size_t)cap, 1);
    uint32_t *stamp = PyMem_Calloc((size_t)cap, sizeof(uint32_t));
    int32_t *touched = PyMem_Malloc((size_t)cap * sizeof(int32_t));
    int32_t *term_docs = PyMem_Malloc((size_t)cap * sizeof(int32_t));
    if (!score || !pseudo || !seen || !stamp || !touched || !term_docs) {
        PyMem_Free(score); PyMem_Free(pseudo); PyMem_Free(seen); PyMem_Free(stamp);
        PyMem_Free(touched); PyMem_Free(term_docs);
        PyErr_NoMemory();
        return -1;
    }
    PyMem_Free(s_score); PyMem_Free(s_pseudo); PyMem_Free(s_seen); PyMem_Free(s_stamp);
    PyMem_Free(s_touched); PyMem_Free(s_term_docs);
    s_score = score; s_pseudo = pseudo; s_seen = seen; s_stamp = stamp;
    s_touched = touched; s_term_docs = term_docs;
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

typedef struct {
    Arr term_ptr, docs, tfs, pos_ptr, positions;
} Field;

typedef struct {
    PyObject_HEAD
    Field f[N_FIELDS];
    Arr terms, term_end;
    Py_ssize_t n_terms, n_docs;
} Postings;

static void Postings_dealloc(Postings *self) {
    for (int i = 0; i < N_FIELDS; i++) {
        arr_release(&self->f[i].term_ptr);
        arr_release(&self->f[i].docs);
        arr_release(&self->f[i].tfs);
        arr_release(&self->f[i].pos_ptr);
        arr_release(&self->f[i].positions);
    }
    arr_release(&self->terms);
    arr_release(&self->term_end);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Postings(n_docs, terms, term_end, fields): `terms` the sorted dictionary (UTF-8 terms, one per
 * line), `term_end[i]` where term i ends in it; `fields` three tuples (term_ptr, docs, tfs,
 * pos_ptr, positions) as segment.py stores them. */
static int Postings_init(Postings *self, PyObject *args, PyObject *kw) {
    Py_ssize_t n_docs;
    PyObject *terms, *term_end, *fields;
    static char *names[] = {"n_docs", "terms", "term_end", "fields", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "nOOO", names, &n_docs, &terms, &term_end, &fields)) return -1;
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
    for (Py_ssize_t i = 0; i < self->n_terms; i++) {
        uint64_t end = at(&self->term_end, i);
        uint64_t start = i ? at(&self->term_end, i - 1) + 1 : 0;
        if (end < start || end > (uint64_t)self->terms.n) return corrupt("term dictionary offsets");
    }
    PyObject *seq = PySequence_Fast(fields, "fields must be a sequence");
    if (!seq) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != N_FIELDS) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "expected three fields");
        return -1;
    }
    for (int fi = 0; fi < N_FIELDS; fi++) {
        PyObject *arrays = PySequence_Fast_GET_ITEM(seq, fi);
        PyObject *a0, *a1, *a2, *a3, *a4;
        if (!PyArg_ParseTuple(arrays, "OOOOO", &a0, &a1, &a2, &a3, &a4)) { Py_DECREF(seq); return -1; }
        Field *f = &self->f[fi];
        if (arr_get(a0, &f->term_ptr, "term_ptr") < 0 || arr_get(a1, &f->docs, "docs") < 0 ||
            arr_get(a2, &f->tfs, "tfs") < 0 || arr_get(a3, &f->pos_ptr, "pos_ptr") < 0 ||
            arr_get(a4, &f->positions, "positions") < 0) {
            Py_DECREF(seq);
            return -1;
        }
        if (f->term_ptr.n != self->n_terms + 1 || f->pos_ptr.n != self->n_terms + 1 || f->docs.n != f->tfs.n) {
            Py_DECREF(seq);
            return corrupt("postings arrays of different lengths");
        }
        uint64_t prev = 0, prev_pos = 0;
        for (Py_ssize_t t = 0; t <= self->n_terms; t++) {
            uint64_t p = at(&f->term_ptr, t), q = at(&f->pos_ptr, t);
            if (p < prev || q < prev_pos) { Py_DECREF(seq); return corrupt("term pointers not ascending"); }
            prev = p;
            prev_pos = q;
        }
        if (prev != (uint64_t)f->docs.n || prev_pos > (uint64_t)f->positions.n) {
            Py_DECREF(seq);
            return corrupt("term pointers beyond the postings");
        }
    }
    Py_DECREF(seq);
    return 0;
}

static Py_ssize_t lookup(Postings *self, const char *key, Py_ssize_t len) {
    Py_ssize_t lo = 0, hi = self->n_terms;
    const char *blob = (const char *)self->terms.p;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        Py_ssize_t start = mid ? (Py_ssize_t)at(&self->term_end, mid - 1) + 1 : 0;
        Py_ssize_t mlen = (Py_ssize_t)at(&self->term_end, mid) - start;
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
    return PyLong_FromSsize_t(lookup(self, key, len));
}

/* The postings [lo, hi) of term `tid` in field `f`, checked. */
static int term_range(Postings *self, const Field *f, Py_ssize_t tid, Py_ssize_t *lo, Py_ssize_t *hi) {
    if (tid < 0 || tid >= self->n_terms) {
        PyErr_SetString(PyExc_ValueError, "term id out of range");
        return -1;
    }
    *lo = (Py_ssize_t)at(&f->term_ptr, tid);
    *hi = (Py_ssize_t)at(&f->term_ptr, tid + 1);
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

/* df(tid, live=None, field=-1) -> int: documents (allowed by the byte mask `live`) holding term
 * `tid` in field `field` (0 title, 1 body, 2 anchor), or in any field. */
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
    if (scratch(self->n_docs) < 0) goto fail;
    uint32_t now = next_stamp();
    Py_ssize_t count = 0;
    for (int fi = 0; fi < N_FIELDS; fi++) {
        if (only >= 0 && fi != only) continue;
        const Field *f = &self->f[fi];
        Py_ssize_t lo, hi;
        if (term_range(self, f, tid, &lo, &hi) < 0) goto fail;
        uint64_t d = 0;
        for (Py_ssize_t i = lo; i < hi; i++) {
            d += at(&f->docs, i);
            if (d >= (uint64_t)self->n_docs) { corrupt("doc id beyond the segment"); goto fail; }
            if (s_stamp[d] != now) {
                s_stamp[d] = now;
                if (!live || live[d]) count++;
            }
        }
    }
    if (has_live) PyBuffer_Release(&lv);
    return PyLong_FromSsize_t(count);
fail:
    if (has_live) PyBuffer_Release(&lv);
    return NULL;
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

/* score(term_ids, coef, mode, norms, title_norm, allowed, k, k1, k1p1) -> (docs, scores, count)
 *
 * Every document holding a term of `term_ids` (this segment's ids, -1 for absent; in the order
 * their scores are added) is scored, as search.Searcher._match does with numpy:
 *
 *   mode 0 ("bm25f+title", "bm25f"), coef = (idf, title coefficient) per term, norms = the
 *     fields' w_f / B_f per document, title_norm = TITLE_K1 * B_title per document:
 *       pseudo = sum over fields, in order, of tf * norms[f][d]
 *       score += idf * ((pseudo * k1p1) / (pseudo + k1))
 *       score += (title_coef * tf_title) / (tf_title + title_norm[d])   (if title_coef != 0)
 *   mode 1 ("fields"), coef = (fidf_title, fidf_body, fidf_anchor) per term, norms = k1 * B_f:
 *       score += (fidf_f * tf_f) / (tf_f + norms[f][d])   for each field in order
 *
 * `allowed` (bytes per document, or None: all) keeps documents out of the result.  Returns the
 * allowed documents whose score is among the k best (every one tied with the k-th included), in
 * the order they were first matched, as bytes of int64 and float64, and how many allowed
 * documents match.
 */
static PyObject *Postings_score(Postings *self, PyObject *args) {
    PyObject *term_ids, *coef_obj, *norms_obj, *tnorm_obj, *allowed_obj;
    int mode;
    Py_ssize_t k;
    double k1, k1p1;
    if (!PyArg_ParseTuple(args, "OOiOOOndd", &term_ids, &coef_obj, &mode, &norms_obj, &tnorm_obj, &allowed_obj,
                          &k, &k1, &k1p1))
        return NULL;
    PyObject *ids = PySequence_Fast(term_ids, "term_ids must be a sequence");
    if (!ids) return NULL;
    Py_ssize_t n_terms = PySequence_Fast_GET_SIZE(ids);
    Py_ssize_t n = self->n_docs;
    int per_term = mode == MODE_FIELDS ? N_FIELDS : 2;
    Py_buffer coef_v, norm_v[N_FIELDS], tnorm_v, allowed_v;
    const double *coef = NULL, *norm[N_FIELDS] = {NULL, NULL, NULL}, *tnorm = NULL;
    const unsigned char *allowed = NULL;
    int has_coef = 0, has_norm[N_FIELDS] = {0, 0, 0}, has_tnorm = 0, has_allowed = 0;
    PyObject *result = NULL, *docs_out = NULL, *scores_out = NULL;
    double *heap = NULL;
    Py_ssize_t m = 0; /* documents touched */

    if (mode != MODE_BM25F && mode != MODE_FIELDS) {
        PyErr_SetString(PyExc_ValueError, "unknown mode");
        goto done;
    }
    if ((has_coef = doubles_get(coef_obj, &coef_v, n_terms * per_term, "coef", &coef)) <= 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "coef is required");
        has_coef = 0;
        goto done;
    }
    PyObject *norms = PySequence_Fast(norms_obj, "norms must be a sequence");
    if (!norms) goto done;
    if (PySequence_Fast_GET_SIZE(norms) != N_FIELDS) {
        Py_DECREF(norms);
        PyErr_SetString(PyExc_ValueError, "expected three norm arrays");
        goto done;
    }
    for (int fi = 0; fi < N_FIELDS; fi++) {
        has_norm[fi] = doubles_get(PySequence_Fast_GET_ITEM(norms, fi), &norm_v[fi], n, "norms", &norm[fi]);
        if (has_norm[fi] < 0) { has_norm[fi] = 0; Py_DECREF(norms); goto done; }
        if (!has_norm[fi]) { Py_DECREF(norms); PyErr_SetString(PyExc_ValueError, "norms are required"); goto done; }
    }
    Py_DECREF(norms);
    if ((has_tnorm = doubles_get(tnorm_obj, &tnorm_v, n, "title_norm", &tnorm)) < 0) { has_tnorm = 0; goto done; }
    if ((has_allowed = live_get(allowed_obj, &allowed_v, n, &allowed)) < 0) { has_allowed = 0; goto done; }
    if (scratch(n) < 0) goto done;

    for (Py_ssize_t ti = 0; ti < n_terms; ti++) {
        Py_ssize_t tid = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(ids, ti));
        if (tid == -1 && PyErr_Occurred()) goto cleanup;
        if (tid < 0) continue;
        const double *c = coef + ti * per_term;
        if (mode == MODE_FIELDS) {
            for (int fi = 0; fi < N_FIELDS; fi++) {
                const Field *f = &self->f[fi];
                Py_ssize_t lo, hi;
                if (term_range(self, f, tid, &lo, &hi) < 0) goto cleanup;
                uint64_t d = 0;
                const double *nf = norm[fi];
                for (Py_ssize_t i = lo; i < hi; i++) {
                    d += at(&f->docs, i);
                    if (d >= (uint64_t)n) { corrupt("doc id beyond the segment"); goto cleanup; }
                    double tf = (double)at(&f->tfs, i);
                    s_score[d] += (c[fi] * tf) / (tf + nf[d]);
                    if (!s_seen[d]) { s_seen[d] = 1; s_touched[m++] = (int32_t)d; }
                }
            }
            continue;
        }
        /* BM25F: the pseudo frequency of each document holding the term, over the fields in
         * order, then one saturation. */
        uint32_t now = next_stamp();
        Py_ssize_t nt = 0;
        for (int fi = 0; fi < N_FIELDS; fi++) {
            const Field *f = &self->f[fi];
            Py_ssize_t lo, hi;
            if (term_range(self, f, tid, &lo, &hi) < 0) goto cleanup;
            uint64_t d = 0;
            const double *nf = norm[fi];
            for (Py_ssize_t i = lo; i < hi; i++) {
                d += at(&f->docs, i);
                if (d >= (uint64_t)n) { corrupt("doc id beyond the segment"); goto cleanup; }
                if (s_stamp[d] != now) {
                    s_stamp[d] = now;
                    s_pseudo[d] = 0.0;
                    s_term_docs[nt++] = (int32_t)d;
                }
                s_pseudo[d] += (double)at(&f->tfs, i) * nf[d];
            }
        }
        double idf = c[0];
        for (Py_ssize_t j = 0; j < nt; j++) {
            int32_t d = s_term_docs[j];
            double p = s_pseudo[d];
            s_pseudo[d] = 0.0;
            s_score[d] += idf * ((p * k1p1) / (p + k1));
            if (!s_seen[d]) { s_seen[d] = 1; s_touched[m++] = d; }
        }
        double tc = c[1];
        if (tc != 0.0 && tnorm) {
            const Field *f = &self->f[0];
            Py_ssize_t lo = (Py_ssize_t)at(&f->term_ptr, tid), hi = (Py_ssize_t)at(&f->term_ptr, tid + 1);
            uint64_t d = 0;
            for (Py_ssize_t i = lo; i < hi; i++) {
                d += at(&f->docs, i); /* checked above */
                double tf = (double)at(&f->tfs, i);
                s_score[d] += (tc * tf) / (tf + tnorm[d]);
            }
        }
    }

    /* The k-th best allowed score, then every allowed document scoring at least that. */
    Py_ssize_t count = 0, in_heap = 0;
    if (k > 0) {
        heap = PyMem_Malloc((size_t)k * sizeof(double));
        if (!heap) { PyErr_NoMemory(); goto cleanup; }
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        int32_t d = s_touched[j];
        double s = s_score[d];
        if (s > 0.0 && (!allowed || allowed[d])) {
            count++;
            if (k > 0) heap_push(heap, &in_heap, k, s);
        }
    }
    double threshold = (k > 0 && in_heap == k) ? heap[0] : (k > 0 ? 0.0 : DBL_MAX);
    Py_ssize_t n_out = 0;
    if (k > 0) {
        for (Py_ssize_t j = 0; j < m; j++) {
            int32_t d = s_touched[j];
            double s = s_score[d];
            if (s > 0.0 && s >= threshold && (!allowed || allowed[d])) n_out++;
        }
    }
    docs_out = PyBytes_FromStringAndSize(NULL, n_out * (Py_ssize_t)sizeof(int64_t));
    scores_out = PyBytes_FromStringAndSize(NULL, n_out * (Py_ssize_t)sizeof(double));
    if (!docs_out || !scores_out) goto cleanup;
    if (n_out) {
        int64_t *od = (int64_t *)PyBytes_AS_STRING(docs_out);
        double *os = (double *)PyBytes_AS_STRING(scores_out);
        Py_ssize_t w = 0;
        for (Py_ssize_t j = 0; j < m; j++) {
            int32_t d = s_touched[j];
            double s = s_score[d];
            if (s > 0.0 && s >= threshold && (!allowed || allowed[d])) {
                od[w] = d;
                os[w++] = s;
            }
        }
    }
    result = Py_BuildValue("(NNn)", docs_out, scores_out, count);
    docs_out = scores_out = NULL;

cleanup:
    for (Py_ssize_t j = 0; j < m; j++) {
        int32_t d = s_touched[j];
        s_score[d] = 0.0;
        s_seen[d] = 0;
    }
    /* a failure halfway through a term leaves pseudo frequencies behind: clear them all */
    if (!result && s_pseudo) memset(s_pseudo, 0, (size_t)s_cap * sizeof(double));
done:
    Py_XDECREF(docs_out);
    Py_XDECREF(scores_out);
    PyMem_Free(heap);
    if (has_coef) PyBuffer_Release(&coef_v);
    for (int fi = 0; fi < N_FIELDS; fi++)
        if (has_norm[fi]) PyBuffer_Release(&norm_v[fi]);
    if (has_tnorm) PyBuffer_Release(&tnorm_v);
    if (has_allowed) PyBuffer_Release(&allowed_v);
    Py_DECREF(ids);
    return result;
}

/* gather(field, term_ids, docs, cap) -> (starts, positions)
 *
 * The token positions of each term of `term_ids` (-1: absent) in field `field` of each document
 * of `docs` (ascending int64 doc ids, no repeats): the first `cap` of each, ascending.  Run
 * (c, t) -- candidate c, term t -- is positions[starts[c * T + t] : starts[c * T + t + 1]];
 * `starts` is int64[len(docs) * T + 1] and positions int64, both as bytes.  One pass over each
 * term's postings (summing doc deltas and frequencies up to the last candidate), then one copy
 * per run. */
static PyObject *Postings_gather(Postings *self, PyObject *args) {
    int field;
    PyObject *term_ids, *docs_obj;
    Py_ssize_t cap;
    if (!PyArg_ParseTuple(args, "iOOn", &field, &term_ids, &docs_obj, &cap)) return NULL;
    if (field < 0 || field >= N_FIELDS || cap < 0) {
        PyErr_SetString(PyExc_ValueError, "bad field or cap");
        return NULL;
    }
    PyObject *ids = PySequence_Fast(term_ids, "term_ids must be a sequence");
    if (!ids) return NULL;
    Arr cands;
    if (arr_get(docs_obj, &cands, "docs") < 0) { Py_DECREF(ids); return NULL; }
    Py_ssize_t T = PySequence_Fast_GET_SIZE(ids), nc = cands.n, runs = nc * T;
    const Field *f = &self->f[field];
    PyObject *result = NULL, *starts_b = NULL, *pos_b = NULL;
    int64_t *run_off = PyMem_Calloc((size_t)(runs ? runs : 1), sizeof(int64_t));
    int64_t *run_len = PyMem_Calloc((size_t)(runs ? runs : 1), sizeof(int64_t));
    if (!run_off || !run_len) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t c = 1; c < nc; c++)
        if (at(&cands, c) <= at(&cands, c - 1)) {
            PyErr_SetString(PyExc_ValueError, "docs must be ascending");
            goto done;
        }
    for (Py_ssize_t t = 0; t < T && nc; t++) {
        Py_ssize_t tid = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(ids, t));
        if (tid == -1 && PyErr_Occurred()) goto done;
        if (tid < 0) continue;
        Py_ssize_t lo, hi;
        if (term_range(self, f, tid, &lo, &hi) < 0) goto done;
        uint64_t base = at(&f->pos_ptr, tid), end = at(&f->pos_ptr, tid + 1);
        uint64_t d = 0, off = base, want = at(&cands, 0);
        Py_ssize_t c = 0;
        for (Py_ssize_t i = lo; i < hi; i++) {
            d += at(&f->docs, i);
            uint64_t tf = at(&f->tfs, i);
            while (want < d) {
                if (++c == nc) goto next_term;
                want = at(&cands, c);
            }
            if (want == d) {
                if (off + tf > end) { corrupt("positions beyond the term's"); goto done; }
                run_off[c * T + t] = (int64_t)off;
                run_len[c * T + t] = (int64_t)(tf < (uint64_t)cap ? tf : (uint64_t)cap);
                if (++c == nc) goto next_term;
                want = at(&cands, c);
            }
            off += tf;
        }
    next_term:;
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
        int64_t s = 0, o = run_off[r];
        for (int64_t q = 0; q < run_len[r]; q++) {
            s += (int64_t)at(&f->positions, o + q);
            pos[starts[r] + q] = s;
        }
    }
    result = PyTuple_Pack(2, starts_b, pos_b);
done:
    Py_XDECREF(starts_b);
    Py_XDECREF(pos_b);
    PyMem_Free(run_off);
    PyMem_Free(run_len);
    arr_release(&cands);
    Py_DECREF(ids);
    return result;
}

static PyMethodDef Postings_methods[] = {
    {"lookup", (PyCFunction)Postings_lookup, METH_O, "lookup(term) -> term id, or -1"},
    {"df", (PyCFunction)Postings_df, METH_VARARGS, "df(term_id, live=None, field=-1) -> documents with the term"},
    {"score", (PyCFunction)Postings_score, METH_VARARGS, "score(...) -> (docs, scores, count): see the C source"},
    {"gather", (PyCFunction)Postings_gather, METH_VARARGS, "gather(field, term_ids, docs, cap) -> (starts, positions)"},
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

/* closeness(starts, positions, n_cands, n_terms, cap, reversed_weight) -> bytes of float64
 * [n_cands * (n_terms - 1)]: bm25.pair_closeness over the runs of gather, the first `cap` of
 * each.  Per candidate, the occurrences of all terms are merged by position; each two
 * neighbouring occurrences of terms a, a + 1 at distance delta are worth 1 / delta**2
 * (reversed_weight times that for a + 1 then a); the result is the best per pair. */
static PyObject *k_closeness(PyObject *mod, PyObject *args) {
    PyObject *starts_obj, *pos_obj;
    Py_ssize_t nc, T, cap;
    double rw;
    if (!PyArg_ParseTuple(args, "OOnnnd", &starts_obj, &pos_obj, &nc, &T, &cap, &rw)) return NULL;
    Runs r;
    if (runs_get(starts_obj, pos_obj, &r) < 0) return NULL;
    PyObject *out_b = NULL;
    Py_ssize_t *head = NULL, *end = NULL;
    if (nc < 0 || T < 1 || r.n_runs != nc * T) {
        PyErr_SetString(PyExc_ValueError, "runs do not match n_cands * n_terms");
        goto done;
    }
    out_b = PyBytes_FromStringAndSize(NULL, nc * (T - 1) * (Py_ssize_t)sizeof(double));
    head = PyMem_Malloc((size_t)T * sizeof(Py_ssize_t));
    end = PyMem_Malloc((size_t)T * sizeof(Py_ssize_t));
    if (!out_b || !head || !end) { if (out_b) Py_CLEAR(out_b); PyErr_NoMemory(); goto done; }
    double *out = (double *)PyBytes_AS_STRING(out_b);
    memset(out, 0, (size_t)(nc * (T - 1)) * sizeof(double));
    for (Py_ssize_t c = 0; c < nc; c++) {
        for (Py_ssize_t t = 0; t < T; t++) {
            head[t] = r.starts[c * T + t];
            Py_ssize_t e = r.starts[c * T + t + 1];
            end[t] = e - head[t] > cap ? head[t] + cap : e;
        }
        Py_ssize_t prev_t = -1;
        int64_t prev_p = 0;
        double *row = out + c * (T - 1);
        for (;;) {
            Py_ssize_t best = -1;
            int64_t bp = 0;
            for (Py_ssize_t t = 0; t < T; t++)
                if (head[t] < end[t] && (best < 0 || r.pos[head[t]] < bp)) { best = t; bp = r.pos[head[t]]; }
            if (best < 0) break;
            head[best]++;
            Py_ssize_t step = best - prev_t;
            if (prev_t >= 0 && (step == 1 || step == -1)) {
                int64_t delta = bp - prev_p;
                double dd = (double)(delta < 1 ? 1 : delta);
                double v = 1.0 / (dd * dd);
                if (step == -1) v *= rw;
                Py_ssize_t a = step == 1 ? prev_t : best;
                if (v > row[a]) row[a] = v;
            }
            prev_t = best;
            prev_p = bp;
        }
    }
done:
    PyMem_Free(head);
    PyMem_Free(end);
    runs_release(&r);
    return out_b;
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
    Py_ssize_t T = PySequence_Fast_GET_SIZE(seq), held = 0, total = 0;
    PyObject *result = NULL;
    Py_buffer *views = PyMem_Calloc((size_t)(T ? T : 1), sizeof(Py_buffer));
    Py_ssize_t *head = PyMem_Calloc((size_t)(T ? T : 1), sizeof(Py_ssize_t));
    Py_ssize_t *end = PyMem_Calloc((size_t)(T ? T : 1), sizeof(Py_ssize_t));
    Py_ssize_t *counts = PyMem_Calloc((size_t)(T ? T : 1), sizeof(Py_ssize_t));
    int64_t *occ_pos = NULL;
    Py_ssize_t *occ_term = NULL;
    if (!views || !head || !end || !counts) { PyErr_NoMemory(); goto done; }
    for (; held < T; held++) {
        Py_buffer *v = &views[held];
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, held), v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
        const char *fmt = v->format ? v->format : "B";
        while (*fmt == '<' || *fmt == '=' || *fmt == '@') fmt++;
        if (v->itemsize != 8 || (strcmp(fmt, "q") != 0 && strcmp(fmt, "l") != 0)) {
            held++;
            PyErr_SetString(PyExc_ValueError, "positions must be int64 arrays");
            goto done;
        }
        end[held] = v->len / 8;
        total += end[held];
    }
    occ_pos = PyMem_Malloc((size_t)(total ? total : 1) * sizeof(int64_t));
    occ_term = PyMem_Malloc((size_t)(total ? total : 1) * sizeof(Py_ssize_t));
    if (!occ_pos || !occ_term) { PyErr_NoMemory(); goto done; }
    Py_ssize_t n = 0;
    for (;;) { /* merge by (position, term) */
        Py_ssize_t best = -1;
        int64_t bp = 0;
        for (Py_ssize_t t = 0; t < T; t++) {
            if (head[t] < end[t]) {
                int64_t p = ((const int64_t *)views[t].buf)[head[t]];
                if (best < 0 || p < bp) { best = t; bp = p; }
            }
        }
        if (best < 0) break;
        occ_pos[n] = bp;
        occ_term[n++] = best;
        head[best]++;
    }
    if (!n) { result = Py_NewRef(Py_None); goto done; }
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
            bk0 = distinct; bk1 = early; bk2 = cnt;
            best_a = a;
        }
        if (!--counts[occ_term[a]]) distinct--;
    }
    /* which occurrence of its term the window's start is */
    Py_ssize_t t = occ_term[best_a], k = 0;
    for (Py_ssize_t a = 0; a < best_a; a++) k += occ_term[a] == t;
    result = Py_BuildValue("(nn)", t, k);
done:
    for (Py_ssize_t i = 0; i < held; i++)
        if (views[i].obj || views[i].buf) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(head);
    PyMem_Free(end);
    PyMem_Free(counts);
    PyMem_Free(occ_pos);
    PyMem_Free(occ_term);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef module_methods[] = {
    {"closeness", k_closeness, METH_VARARGS, "closeness(starts, positions, n_cands, n_terms, cap, reversed_weight)"},
    {"best_window", k_best_window, METH_VARARGS, "best_window(positions, width, limit) -> (term, occurrence) or None"},
    {NULL, NULL, 0, NULL},
};

static void module_free(void *mod) {
    PyMem_Free(s_score); PyMem_Free(s_pseudo); PyMem_Free(s_seen); PyMem_Free(s_stamp);
    PyMem_Free(s_touched); PyMem_Free(s_term_docs);
    s_score = s_pseudo = NULL; s_seen = NULL; s_stamp = NULL; s_touched = s_term_docs = NULL;
    s_cap = 0;
}

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
    PyObject *all = Py_BuildValue("[sss]", "Postings", "best_window", "closeness");
    if (!all || PyModule_AddObject(m, "__all__", all) < 0) {
        Py_XDECREF(all);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
