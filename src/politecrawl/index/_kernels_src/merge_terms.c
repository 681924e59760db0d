/* A merge's term dictionary, compiled: merge_terms(...).
 *
 * segment_merge.merge_segments needs the union of the terms that still have a live posting in
 * its sources, sorted, and for each source where each of its terms went.  In Python that is a str
 * per term per source, a set, a sort and a dict lookup per term per source: most of a merge's
 * time once the postings are numpy's.  The sources' dictionaries (terms.txt: UTF-8, one term per
 * line) are already sorted in UTF-8 byte order, which is the code point order Python sorts str
 * in, so this merges them as they lie, without decoding.  The result is the Python code's
 * (segment_merge._merge_terms_python, compared in tests/unit/test_index_merge_kernels.py).
 * Part of the unity build _kernels.c. */

typedef struct {
    Arr blob, ends, used;
    Py_ssize_t i;      /* the next term to look at */
    const char *term;  /* the current term (NULL: none left) */
    Py_ssize_t len;
    int32_t *map;
    PyObject *map_bytes;
} TermSource;

/* Moves s to its next used term at or after s->i. */
static int source_next(TermSource *s) {
    Py_ssize_t n = s->ends.n;
    while (s->i < n && !at(&s->used, s->i)) s->map[s->i++] = -1;
    if (s->i >= n) {
        s->term = NULL;
        return 0;
    }
    uint64_t start = s->i ? at(&s->ends, s->i - 1) + 1 : 0, end = at(&s->ends, s->i);
    if (end < start || end > (uint64_t)s->blob.n) return corrupt("term dictionary offsets");
    s->term = (const char *)s->blob.p + start;
    s->len = (Py_ssize_t)(end - start);
    return 0;
}

static int term_cmp(const char *a, Py_ssize_t na, const char *b, Py_ssize_t nb) {
    int c = memcmp(a, b, (size_t)(na < nb ? na : nb));
    return c ? c : (na > nb) - (na < nb);
}

/* merge_terms([(blob, ends, used), ...]) -> (blob, n_terms, [map, ...]): the merged dictionary
 * (one term per line) and per source an int32 array (bytes) from its term ids to the merged
 * ones, -1 for a term not used. */
static PyObject *k_merge_terms(PyObject *self, PyObject *args) {
    PyObject *list;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &list)) return NULL;
    Py_ssize_t k = PyList_GET_SIZE(list);
    TermSource *src = PyMem_Calloc((size_t)(k ? k : 1), sizeof(TermSource));
    if (!src) return PyErr_NoMemory();
    PyObject *result = NULL, *maps = NULL;
    char *out = NULL;
    size_t out_len = 0, out_cap = 0;
    Py_ssize_t n_terms = 0;
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *item = PyList_GET_ITEM(list, j), *b, *e, *u;
        if (!PyArg_ParseTuple(item, "OOO", &b, &e, &u)) goto done;
        if (arr_get(b, &src[j].blob, "blob") < 0 || arr_get(e, &src[j].ends, "ends") < 0 ||
            arr_get(u, &src[j].used, "used") < 0)
            goto done;
        if (src[j].blob.size != 1 || src[j].used.n != src[j].ends.n) {
            PyErr_SetString(PyExc_ValueError, "merge_terms: a blob of bytes and a used flag per term");
            goto done;
        }
        src[j].map_bytes = PyBytes_FromStringAndSize(NULL, src[j].ends.n * (Py_ssize_t)sizeof(int32_t));
        if (!src[j].map_bytes) goto done;
        src[j].map = (int32_t *)PyBytes_AS_STRING(src[j].map_bytes);
        if (source_next(&src[j]) < 0) goto done;
    }
    for (;;) {
        const char *min = NULL;
        Py_ssize_t min_len = 0;
        for (Py_ssize_t j = 0; j < k; j++) {
            if (src[j].term && (!min || term_cmp(src[j].term, src[j].len, min, min_len) < 0)) {
                min = src[j].term;
                min_len = src[j].len;
            }
        }
        if (!min) break;
        if (n_terms >= INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "merge_terms: more than 2**31 terms");
            goto done;
        }
        size_t need = out_len + (size_t)min_len + 1;
        if (need > out_cap) {
            size_t cap = out_cap ? 2 * out_cap : 65536;
            while (cap < need) cap *= 2;
            char *o = PyMem_Realloc(out, cap);
            if (!o) {
                PyErr_NoMemory();
                goto done;
            }
            out = o;
            out_cap = cap;
        }
        if (n_terms) out[out_len++] = '\n';
        memcpy(out + out_len, min, (size_t)min_len);
        out_len += (size_t)min_len;
        /* every source at this term moves on (min points into a source: compare a copy first) */
        const char *term = out + out_len - min_len;
        for (Py_ssize_t j = 0; j < k; j++) {
            if (src[j].term && src[j].len == min_len && memcmp(src[j].term, term, (size_t)min_len) == 0) {
                src[j].map[src[j].i++] = (int32_t)n_terms;
                if (source_next(&src[j]) < 0) goto done;
            }
        }
        n_terms++;
    }
    maps = PyList_New(k);
    if (!maps) goto done;
    for (Py_ssize_t j = 0; j < k; j++) {
        PyList_SET_ITEM(maps, j, src[j].map_bytes);
        src[j].map_bytes = NULL;
    }
    PyObject *blob = PyBytes_FromStringAndSize(out ? out : "", (Py_ssize_t)out_len);
    if (blob) result = Py_BuildValue("(NnN)", blob, n_terms, maps);
    else Py_DECREF(maps);
    maps = NULL;
done:
    for (Py_ssize_t j = 0; j < k; j++) {
        arr_release(&src[j].blob);
        arr_release(&src[j].ends);
        arr_release(&src[j].used);
        Py_XDECREF(src[j].map_bytes);
    }
    Py_XDECREF(maps);
    PyMem_Free(src);
    PyMem_Free(out);
    return result;
}
