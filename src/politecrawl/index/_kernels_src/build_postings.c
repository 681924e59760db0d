/* A new segment's postings of one field grouped by term, compiled: build_postings(...) (a
 * merge's are merge_sources.c's, with the same PostingsOut).
 *
 * The writer has the field's tokens as term ids in document order (Vocabulary.term_ids) and
 * needs them grouped by term, then by document: the postings (doc ids delta-encoded within a
 * term, term frequencies) and each posting's positions (delta-encoded within the posting).  The
 * numpy code (segment_write._build_field_postings) sorts the tokens by term (two stable radix
 * passes), then finds postings and deltas with a gather and a cumsum per array; here it is a
 * counting sort, two passes over the tokens.  The arrays are the numpy code's, value for value
 * (tests/unit/test_index_tokens.py writes a segment both ways and compares the files).
 * Part of the unity build _kernels.c. */

/* The five arrays build_postings and merge_sources return, as bytes: term_ptr and pos_ptr (int64, copied from the
 * counting sort's prefix sums), doc_deltas and tfs (uint32, n_post), positions (uint32, n_pos). */
typedef struct {
    PyObject *term_ptr, *deltas, *tfs, *pos_ptr, *positions;
} PostingsOut;

static int postings_out_new(PostingsOut *o, const int64_t *post_ptr, const int64_t *tok_ptr, size_t nt,
                            Py_ssize_t n_post, Py_ssize_t n_pos) {
    o->term_ptr = PyBytes_FromStringAndSize((const char *)post_ptr, (Py_ssize_t)(nt * sizeof(int64_t)));
    o->pos_ptr = PyBytes_FromStringAndSize((const char *)tok_ptr, (Py_ssize_t)(nt * sizeof(int64_t)));
    o->deltas = PyBytes_FromStringAndSize(NULL, n_post * 4);
    o->tfs = PyBytes_FromStringAndSize(NULL, n_post * 4);
    o->positions = PyBytes_FromStringAndSize(NULL, n_pos * 4);
    return o->term_ptr && o->pos_ptr && o->deltas && o->tfs && o->positions ? 0 : -1;
}

/* (term_ptr, doc_deltas, tfs, pos_ptr, positions): new references, the struct's still its own. */
static PyObject *postings_out_tuple(const PostingsOut *o) {
    return Py_BuildValue("(OOOOO)", o->term_ptr, o->deltas, o->tfs, o->pos_ptr, o->positions);
}

static void postings_out_clear(PostingsOut *o) {
    Py_CLEAR(o->term_ptr);
    Py_CLEAR(o->deltas);
    Py_CLEAR(o->tfs);
    Py_CLEAR(o->pos_ptr);
    Py_CLEAR(o->positions);
}

/* build_postings' pass 1: each token's term id (tids), and per term its tokens and postings
 * counted at [t + 1] of tok_ptr and post_ptr (zeroed; last_doc all -1).  NULL, or what is wrong
 * with the arguments.  Touches no Python object: run without the GIL. */
static const char *count_tokens(const Arr *ids, const Arr *rank, const Arr *lens, Py_ssize_t n_terms, uint32_t *tids,
                                int64_t *tok_ptr, int64_t *post_ptr, int32_t *last_doc) {
    const int32_t *idp = (const int32_t *)ids->p, *rk = (const int32_t *)rank->p;
    const int64_t *lp = (const int64_t *)lens->p;
    Py_ssize_t i = 0, n = ids->n;
    for (Py_ssize_t d = 0; d < lens->n; d++) {
        int64_t len = lp[d];
        if (len < 0 || len > n - i) return "the documents' lengths do not add up to the tokens";
        for (Py_ssize_t end = i + (Py_ssize_t)len; i < end; i++) {
            int32_t v = idp[i];
            if (v < 0 || v >= rank->n || rk[v] < 0 || rk[v] >= n_terms) return "a term id out of range";
            uint32_t t = (uint32_t)rk[v];
            tids[i] = t;
            tok_ptr[t + 1]++;
            if (last_doc[t] != (int32_t)d) {
                last_doc[t] = (int32_t)d;
                post_ptr[t + 1]++;
            }
        }
    }
    return i == n ? NULL : "the documents' lengths do not add up to the tokens";
}

/* build_postings' pass 2: each token to its term's next position; a new posting at a new
 * document.  cur[t]: the term's current posting; tok_ptr[t] (advancing): where its next
 * position goes.  Touches no Python object: run without the GIL. */
static void place_tokens(const int64_t *lp, Py_ssize_t n_docs, const uint32_t *tids, const int64_t *post_ptr,
                         int64_t *tok_ptr, int64_t *cur, int32_t *last_doc, uint32_t *last_pos, size_t nt,
                         uint32_t *deltas, uint32_t *tfs, uint32_t *positions) {
    for (size_t t = 0; t < nt; t++) {
        last_doc[t] = -1;
        cur[t] = post_ptr[t] - 1;
    }
    Py_ssize_t i = 0;
    for (Py_ssize_t d = 0; d < n_docs; d++) {
        uint32_t pos = 0;
        for (Py_ssize_t end = i + (Py_ssize_t)lp[d]; i < end; i++, pos++) {
            uint32_t t = tids[i];
            if (last_doc[t] != (int32_t)d) {
                int64_t p = ++cur[t];
                /* doc ids delta-encoded within the term, the first absolute */
                deltas[p] = last_doc[t] < 0 ? (uint32_t)d : (uint32_t)(d - last_doc[t]);
                tfs[p] = 0;
                last_doc[t] = (int32_t)d;
                positions[tok_ptr[t]++] = pos; /* a posting's first position is absolute */
            } else {
                positions[tok_ptr[t]++] = pos - last_pos[t];
            }
            tfs[cur[t]]++;
            last_pos[t] = pos;
        }
    }
}

/* build_postings(ids, rank, lens, n_terms) -> (term_ptr, doc_deltas, tfs, pos_ptr, positions)
 *
 * ids: int32, the field's tokens as vocabulary ids, document after document; rank: int32, a
 * vocabulary id's term id in the segment (< n_terms); lens: int64, each document's tokens.
 * Out (bytes): term_ptr and pos_ptr int64 [n_terms + 1], the first posting and position of each
 * term; doc_deltas, tfs uint32 [postings]; positions uint32 [tokens]. */
static PyObject *k_build_postings(PyObject *self, PyObject *args) {
    PyObject *ids_o, *rank_o, *lens_o;
    Py_ssize_t n_terms;
    if (!PyArg_ParseTuple(args, "OOOn", &ids_o, &rank_o, &lens_o, &n_terms)) return NULL;
    Arr ids, rank, lens;
    if (arr_get(ids_o, &ids, "ids") < 0) return NULL;
    if (arr_get(rank_o, &rank, "rank") < 0) {
        arr_release(&ids);
        return NULL;
    }
    if (arr_get(lens_o, &lens, "lens") < 0) {
        arr_release(&ids);
        arr_release(&rank);
        return NULL;
    }
    PyObject *result = NULL;
    int64_t *tok_ptr = NULL, *post_ptr = NULL, *cur = NULL;
    int32_t *last_doc = NULL;
    uint32_t *last_pos = NULL, *tids = NULL;
    PostingsOut out = {NULL, NULL, NULL, NULL, NULL};
    Py_ssize_t n = ids.n, n_docs = lens.n;
    if (ids.size != 4 || rank.size != 4 || lens.size != 8 || n_terms < 0 || n >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "build_postings: int32 ids and rank, int64 lens, fewer than 2**31 tokens");
        goto done;
    }
    size_t nt = (size_t)n_terms + 1;
    tok_ptr = PyMem_Calloc(nt, sizeof(int64_t));
    post_ptr = PyMem_Calloc(nt, sizeof(int64_t));
    cur = PyMem_Malloc(nt * sizeof(int64_t));
    last_doc = PyMem_Malloc(nt * sizeof(int32_t));
    last_pos = PyMem_Malloc(nt * sizeof(uint32_t));
    tids = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(uint32_t));
    if (!tok_ptr || !post_ptr || !cur || !last_doc || !last_pos || !tids) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t t = 0; t < nt; t++) last_doc[t] = -1;
    /* pass 1: tokens and postings per term; without the GIL (only this call's arrays), so the
     * writer's body compression thread runs meanwhile */
    const char *wrong;
    Py_BEGIN_ALLOW_THREADS
    wrong = count_tokens(&ids, &rank, &lens, n_terms, tids, tok_ptr, post_ptr, last_doc);
    Py_END_ALLOW_THREADS
    if (wrong) {
        PyErr_Format(PyExc_ValueError, "build_postings: %s", wrong);
        goto done;
    }
    for (size_t t = 1; t < nt; t++) {
        tok_ptr[t] += tok_ptr[t - 1];
        post_ptr[t] += post_ptr[t - 1];
    }
    Py_ssize_t n_post = (Py_ssize_t)post_ptr[nt - 1];
    if (postings_out_new(&out, post_ptr, tok_ptr, nt, n_post, n) < 0) goto done;
    uint32_t *deltas = (uint32_t *)PyBytes_AS_STRING(out.deltas), *tfs = (uint32_t *)PyBytes_AS_STRING(out.tfs);
    uint32_t *positions = (uint32_t *)PyBytes_AS_STRING(out.positions);
    Py_BEGIN_ALLOW_THREADS
    place_tokens((const int64_t *)lens.p, n_docs, tids, post_ptr, tok_ptr, cur, last_doc, last_pos, nt, deltas, tfs,
                 positions);
    Py_END_ALLOW_THREADS
    result = postings_out_tuple(&out);
done:
    postings_out_clear(&out);
    PyMem_Free(tok_ptr);
    PyMem_Free(post_ptr);
    PyMem_Free(cur);
    PyMem_Free(last_doc);
    PyMem_Free(last_pos);
    PyMem_Free(tids);
    arr_release(&ids);
    arr_release(&rank);
    arr_release(&lens);
    return result;
}
