/* A merge's postings of one field, from its sources' files as they are: live_terms(...) and
 * merge_sources(...).
 *
 * A merge keeps the postings of its sources' live documents, renumbered (documents and terms)
 * and grouped by merged term.  The numpy code (segment_merge._merge_postings_numpy, its reference
 * and fallback) first decodes every source's postings into arrays of a posting each (running
 * sums of the doc deltas, the term of each posting, masks, gathers), then sorts them; here the
 * sources' stored arrays are read as they are, in two passes of a counting sort by merged term,
 * and each kept posting's run of positions is copied as it goes.  The arrays are the numpy
 * code's, value for value (tests/unit/test_index_merge_kernels.py compares the merged files).
 * Part of the unity build _kernels.c; PostingsOut is build_postings.c's. */

/* One source's field: its stored arrays, and the merged id of each of its terms (-1: none) and
 * of each of its documents (-1: deleted), int32. */
typedef struct {
    Arr term_ptr, docs, tfs, positions, term_map, doc_map;
    int held;
} SourceField;

static void source_release(SourceField *s) {
    Arr *arrays[6] = {&s->term_ptr, &s->docs, &s->tfs, &s->doc_map, &s->positions, &s->term_map};
    for (int k = 0; k < s->held; k++) arr_release(arrays[k]);
    s->held = 0;
}

/* The arrays of (term_ptr, docs, tfs, doc_map[, positions, term_map]), checked against each other. */
static int source_get(PyObject *const *items, int n_items, SourceField *s) {
    memset(s, 0, sizeof(*s));
    Arr *arrays[6] = {&s->term_ptr, &s->docs, &s->tfs, &s->doc_map, &s->positions, &s->term_map};
    static const char *names[6] = {"term_ptr", "docs", "tfs", "doc_map", "positions", "term_map"};
    for (int k = 0; k < n_items; k++) {
        int maps = k == 3 || k == 5;
        if ((maps ? arr_get(items[k], arrays[k], names[k]) : arr_get_strided(items[k], arrays[k], names[k])) < 0)
            return -1;
        s->held = k + 1;
        if (maps && arrays[k]->size != 4) {
            PyErr_Format(PyExc_ValueError, "merge: %s must be int32", names[k]);
            return -1;
        }
    }
    Py_ssize_t n_terms = s->term_ptr.n - 1;
    if (n_terms < 0 || (n_items > 5 && s->term_map.n != n_terms) || at(&s->term_ptr, 0) != 0 ||
        at(&s->term_ptr, n_terms) != (uint64_t)s->docs.n || s->tfs.n != s->docs.n)
        return corrupt("merge: posting pointers that do not fit the postings");
    return 0;
}

/* Called for each posting of a live document, in the source's order: its term (the source's
 * id), merged doc id, tf and first position; 0, or -1 with an exception set. */
typedef int (*posting_visit)(void *state, Py_ssize_t term, int32_t doc, uint32_t tf, uint64_t pos);

/* Every posting of the source visited (doc ids and tfs checked); -1 with an exception set. */
static int source_walk(const SourceField *s, posting_visit visit, void *state) {
    Py_ssize_t n_terms = s->term_ptr.n - 1, n_docs = s->doc_map.n;
    const int32_t *doc_map = (const int32_t *)s->doc_map.p;
    uint64_t pos = 0;
    for (Py_ssize_t t = 0; t < n_terms; t++) {
        Py_ssize_t lo = (Py_ssize_t)at(&s->term_ptr, t), hi = (Py_ssize_t)at(&s->term_ptr, t + 1);
        if (hi < lo || hi > s->docs.n) return corrupt("merge: posting pointers out of order");
        uint64_t doc = 0;
        for (Py_ssize_t p = lo; p < hi; p++) {
            doc += at(&s->docs, p);
            uint64_t tf = at(&s->tfs, p);
            if (doc >= (uint64_t)n_docs || tf == 0 || tf > INT32_MAX) return corrupt("merge: a doc id or tf out of range");
            int32_t merged = doc_map[doc];
            if (merged >= 0 && visit(state, t, merged, (uint32_t)tf, pos) < 0) return -1;
            pos += tf;
        }
    }
    return 0;
}

static int mark_live(void *state, Py_ssize_t term, int32_t doc, uint32_t tf, uint64_t pos) {
    ((char *)state)[term] = 1;
    return 0;
}

/* live_terms(term_ptr, docs, tfs, doc_map) -> bytes: per term of the source's field, 1 if it has
 * a posting of a live document (doc_map >= 0), else 0. */
static PyObject *k_live_terms(PyObject *self, PyObject *args) {
    PyObject *items[4];
    if (!PyArg_ParseTuple(args, "OOOO", &items[0], &items[1], &items[2], &items[3])) return NULL;
    SourceField s;
    PyObject *out = NULL;
    if (source_get(items, 4, &s) == 0) {
        out = PyBytes_FromStringAndSize(NULL, s.term_ptr.n - 1);
        if (out) {
            memset(PyBytes_AS_STRING(out), 0, (size_t)(s.term_ptr.n - 1));
            if (source_walk(&s, mark_live, PyBytes_AS_STRING(out)) < 0) Py_CLEAR(out);
        }
    }
    source_release(&s);
    return out;
}

/* The counting sort's state: per merged term, its postings and positions counted (pass 1), then
 * where its next posting and position go and its last doc (pass 2). */
typedef struct {
    const SourceField *source;
    Py_ssize_t n_terms;
    int64_t *post_ptr, *tok_ptr, *fill;
    int32_t *last_doc;
    uint32_t *deltas, *tfs, *positions;
} MergeState;

static int count_posting(void *state, Py_ssize_t term, int32_t doc, uint32_t tf, uint64_t pos) {
    MergeState *m = state;
    int32_t g = ((const int32_t *)m->source->term_map.p)[term];
    if (g < 0 || g >= m->n_terms) return corrupt("merge: a live posting of a term the merge does not keep");
    m->post_ptr[g + 1]++;
    m->tok_ptr[g + 1] += tf;
    return 0;
}

static int place_posting(void *state, Py_ssize_t term, int32_t doc, uint32_t tf, uint64_t pos) {
    MergeState *m = state;
    int32_t g = ((const int32_t *)m->source->term_map.p)[term];
    const Arr *from = &m->source->positions;
    if (pos + tf > (uint64_t)from->n) return corrupt("merge: a posting's positions run past the source's");
    int64_t q = m->fill[g]++;
    m->deltas[q] = m->last_doc[g] < 0 ? (uint32_t)doc : (uint32_t)(doc - m->last_doc[g]);
    m->last_doc[g] = doc;
    m->tfs[q] = tf;
    uint32_t *out = m->positions + m->tok_ptr[g];
    m->tok_ptr[g] += tf;
    for (uint32_t k = 0; k < tf; k++) out[k] = (uint32_t)at(from, (Py_ssize_t)(pos + k));
    return 0;
}

/* merge_sources([(term_ptr, docs, tfs, doc_map, positions, term_map), ...], n_terms)
 *     -> (term_ptr, doc_deltas, tfs, pos_ptr, positions)
 *
 * One field of each source, in the merge's document order (merged doc ids ascending from one
 * source to the next), and the merged term count.  Out as build_postings'. */
static PyObject *k_merge_sources(PyObject *self, PyObject *args) {
    PyObject *list;
    Py_ssize_t n_terms;
    if (!PyArg_ParseTuple(args, "O!n", &PyList_Type, &list, &n_terms)) return NULL;
    if (n_terms < 0) return PyErr_Format(PyExc_ValueError, "merge_sources: a negative term count");
    Py_ssize_t n_src = PyList_GET_SIZE(list), got = 0;
    SourceField *src = PyMem_Calloc((size_t)(n_src ? n_src : 1), sizeof(SourceField));
    size_t nt = (size_t)n_terms + 1;
    MergeState m = {NULL, n_terms, PyMem_Calloc(nt, sizeof(int64_t)), PyMem_Calloc(nt, sizeof(int64_t)),
                    PyMem_Malloc(nt * sizeof(int64_t)), PyMem_Malloc(nt * sizeof(int32_t)), NULL, NULL, NULL};
    PostingsOut out = {NULL, NULL, NULL, NULL, NULL};
    PyObject *result = NULL;
    if (!src || !m.post_ptr || !m.tok_ptr || !m.fill || !m.last_doc) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < n_src; got++) {
        PyObject *t = PyList_GET_ITEM(list, got);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 6) {
            PyErr_SetString(PyExc_TypeError, "merge_sources: a source is a tuple of six arrays");
            goto done;
        }
        if (source_get(PySequence_Fast_ITEMS(t), 6, &src[got]) < 0) {
            got++; /* its arrays held so far are released below */
            goto done;
        }
    }
    for (Py_ssize_t k = 0; k < n_src; k++) { /* pass 1: postings and positions per merged term */
        m.source = &src[k];
        if (source_walk(&src[k], count_posting, &m) < 0) goto done;
    }
    for (size_t t = 1; t < nt; t++) {
        m.post_ptr[t] += m.post_ptr[t - 1];
        m.tok_ptr[t] += m.tok_ptr[t - 1];
    }
    Py_ssize_t n_post = (Py_ssize_t)m.post_ptr[nt - 1], n_pos = (Py_ssize_t)m.tok_ptr[nt - 1];
    if (n_pos >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "merge_sources: 2**31 positions or more in one field");
        goto done;
    }
    if (postings_out_new(&out, m.post_ptr, m.tok_ptr, nt, n_post, n_pos) < 0) goto done;
    m.deltas = (uint32_t *)PyBytes_AS_STRING(out.deltas);
    m.tfs = (uint32_t *)PyBytes_AS_STRING(out.tfs);
    m.positions = (uint32_t *)PyBytes_AS_STRING(out.positions);
    memcpy(m.fill, m.post_ptr, nt * sizeof(int64_t));
    for (size_t t = 0; t < nt; t++) m.last_doc[t] = -1;
    for (Py_ssize_t k = 0; k < n_src; k++) { /* pass 2: each kept posting to its merged term's next place */
        m.source = &src[k];
        if (source_walk(&src[k], place_posting, &m) < 0) goto done;
    }
    result = postings_out_tuple(&out);
done:
    postings_out_clear(&out);
    for (Py_ssize_t k = 0; k < got; k++) source_release(&src[k]);
    PyMem_Free(src);
    PyMem_Free(m.post_ptr);
    PyMem_Free(m.tok_ptr);
    PyMem_Free(m.fill);
    PyMem_Free(m.last_doc);
    return result;
}
