/* What every part of the kernels uses: the CPython headers, checked views of the segments'
 * arrays (Arr, doubles_get), the error for a damaged file, and the module's scratch arrays
 * (shared: the GIL is held for the whole of a call).  Part of the unity build _kernels.c. */
#ifndef POLITECRAWL_KERNELS_COMMON_H
#define POLITECRAWL_KERNELS_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <float.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define N_FIELDS 3 /* title, body, anchor: bm25.FIELDS */

/* -- arrays ------------------------------------------------------------------------------- */

/* A one-dimensional array of non-negative integers of 1, 2, 4 or 8 bytes: C-contiguous, or
 * (arr_get_strided) a column of a table, `stride` bytes from one item to the next. */
typedef struct {
    Py_buffer view;
    const unsigned char *p;
    Py_ssize_t n;
    Py_ssize_t stride;
    int size;
    int held;
} Arr;

static int arr_get_flags(PyObject *obj, Arr *a, const char *what, int any_ndim, int flags) {
    memset(a, 0, sizeof(*a));
    if (PyObject_GetBuffer(obj, &a->view, flags | PyBUF_FORMAT) < 0) return -1;
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
    a->stride = size;
    if (a->view.strides && a->view.ndim == 1) {
        if (a->view.strides[0] < size) {
            PyErr_Format(PyExc_ValueError, "%s: items overlap or run backwards", what);
            PyBuffer_Release(&a->view);
            a->held = 0;
            return -1;
        }
        a->n = a->view.shape[0];
        a->stride = a->view.strides[0];
    }
    return 0;
}

static int arr_get_nd(PyObject *obj, Arr *a, const char *what, int any_ndim) {
    return arr_get_flags(obj, a, what, any_ndim, PyBUF_C_CONTIGUOUS);
}

static int arr_get(PyObject *obj, Arr *a, const char *what) { return arr_get_nd(obj, a, what, 0); }

/* A one-dimensional array that may be a column of a table (segment.TermTable), read with at() only. */
static int arr_get_strided(PyObject *obj, Arr *a, const char *what) {
    return arr_get_flags(obj, a, what, 0, PyBUF_STRIDES);
}

static void arr_release(Arr *a) {
    if (a->held) PyBuffer_Release(&a->view);
    a->held = 0;
}

static inline uint64_t at(const Arr *a, Py_ssize_t i) {
    const unsigned char *q = a->p + i * a->stride;
    switch (a->size) {
        case 1: return *q;
        case 2: return *(const uint16_t *)q;
        case 4: return *(const uint32_t *)q;
        default: return *(const uint64_t *)q;
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

/* -- sorting -------------------------------------------------------------------------------- */

/* name(a, n, tmp): a stable merge sort of the n items of type T at `a` by LESS(x, y) (a macro of
 * two items), runs of 8 sorted by insertion first, `tmp` (room for n) its scratch.  qsort calls a
 * function per comparison and allocates its own scratch: on the hundred or so items rank sorts a
 * few times a query, that was most of the sorting's cost. */
#define DEFINE_MERGE_SORT(name, T, LESS)                                                             \
    static void name(T *a, Py_ssize_t n, T *tmp) {                                                   \
        for (Py_ssize_t s = 0; s < n; s += 8) {                                                      \
            Py_ssize_t e = s + 8 < n ? s + 8 : n;                                                    \
            for (Py_ssize_t i = s + 1; i < e; i++) {                                                 \
                T x = a[i];                                                                          \
                Py_ssize_t j = i;                                                                    \
                for (; j > s && LESS(x, a[j - 1]); j--) a[j] = a[j - 1];                             \
                a[j] = x;                                                                            \
            }                                                                                        \
        }                                                                                            \
        T *src = a, *dst = tmp;                                                                      \
        for (Py_ssize_t w = 8; w < n; w *= 2) {                                                      \
            for (Py_ssize_t lo = 0; lo < n; lo += 2 * w) {                                           \
                Py_ssize_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;      \
                Py_ssize_t i = lo, j = mid, k = lo;                                                  \
                while (i < mid && j < hi) dst[k++] = LESS(src[j], src[i]) ? src[j++] : src[i++];     \
                while (i < mid) dst[k++] = src[i++];                                                 \
                while (j < hi) dst[k++] = src[j++];                                                  \
            }                                                                                        \
            T *t = src;                                                                              \
            src = dst;                                                                               \
            dst = t;                                                                                 \
        }                                                                                            \
        if (src != a) memcpy(a, src, (size_t)n * sizeof(T));                                         \
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

/* -- CJK ------------------------------------------------------------------------------------- */

/* analysis.CJK_RANGES, the same table: the scripts written without spaces, whose runs of letters
 * are cut into overlapping bigrams (analysis.py, step 5). tests/unit/test_index_tokens.py holds
 * the two equal on every code point. */
static const Py_UCS4 cjk_ranges[][2] = {
    {0x1100, 0x11FF},   {0x3005, 0x3007},   {0x3021, 0x3029}, {0x3031, 0x3035}, {0x3038, 0x303C}, {0x3040, 0x30FF},
    {0x3100, 0x31BF},   {0x31F0, 0x31FF},   {0x3400, 0x4DBF}, {0x4E00, 0x9FFF}, {0xA960, 0xA97F}, {0xAC00, 0xD7FF},
    {0xF900, 0xFAFF},   {0xFF66, 0xFFDC},   {0x1B000, 0x1B16F}, {0x20000, 0x323AF},
};

static inline int is_cjk(Py_UCS4 ch) {
    if (ch < 0x1100) return 0;
    for (size_t r = 0; r < sizeof(cjk_ranges) / sizeof(cjk_ranges[0]); r++) {
        if (ch < cjk_ranges[r][0]) return 0;
        if (ch <= cjk_ranges[r][1]) return 1;
    }
    return 0;
}

/* How a term's occurrence in text is bounded (snippet._joins): a character next to it that
 * "joins" it makes it part of a longer token, so no occurrence.  A term of other letters (mode 0)
 * is joined by a letter or digit that is not CJK; a lone CJK letter (mode 1) by a CJK letter; a
 * CJK bigram (mode 2) by nothing (every two letters of a CJK run are a token). */
static inline int term_mode(Py_UCS4 first, Py_ssize_t len) { return !is_cjk(first) ? 0 : len == 1 ? 1 : 2; }

static inline int joins(int mode, Py_UCS4 c) {
    if (mode == 2 || !Py_UNICODE_ISALNUM(c)) return 0;
    return mode == 0 ? !is_cjk(c) : is_cjk(c);
}

#endif /* POLITECRAWL_KERNELS_COMMON_H */
