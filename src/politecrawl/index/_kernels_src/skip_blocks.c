/* A field's skip blocks, compiled: posting_blocks(...).
 *
 * What skip_blocks.posting_blocks computes with numpy (its reference and fallback), in one pass
 * over the postings: the numpy code makes a dozen arrays of a posting or a block each (running
 * sums, repeats, gathers, two reductions), which was a tenth of building an index.  The arrays
 * are the numpy code's, value for value (tests/unit/test_index_skip_blocks.py).
 * Part of the unity build _kernels.c. */

/* posting_blocks(term_ptr, docs, tfs, field_lens, block) -> (block_ptr, blocks)
 *
 * term_ptr [T+1]: term t's postings are [term_ptr[t], term_ptr[t+1]); docs: doc ids
 * delta-encoded within each term; tfs: a tf per posting; field_lens: the field's length per
 * document (may be a column of a table).  Out (bytes): block_ptr uint32 [T+1], term t's blocks
 * are rows [block_ptr[t], block_ptr[t+1]) of blocks; blocks uint32 [B, 4]: per `block` postings
 * of a term with more than `block` of them, its last doc id, the index of its first position,
 * its largest tf and its shortest field length. */
static PyObject *k_posting_blocks(PyObject *self, PyObject *args) {
    PyObject *term_ptr_o, *docs_o, *tfs_o, *lens_o;
    Py_ssize_t block;
    if (!PyArg_ParseTuple(args, "OOOOn", &term_ptr_o, &docs_o, &tfs_o, &lens_o, &block)) return NULL;
    Arr tp, docs, tfs, lens;
    PyObject *result = NULL, *ptr_out = NULL, *blocks_out = NULL;
    if (arr_get_strided(term_ptr_o, &tp, "term_ptr") < 0) return NULL;
    if (arr_get_strided(docs_o, &docs, "docs") < 0) goto release_tp;
    if (arr_get_strided(tfs_o, &tfs, "tfs") < 0) goto release_docs;
    if (arr_get_strided(lens_o, &lens, "field_lens") < 0) goto release_tfs;
    Py_ssize_t n_terms = tp.n ? tp.n - 1 : 0, n_post = docs.n;
    if (block <= 0 || tfs.n != n_post) {
        PyErr_SetString(PyExc_ValueError, "posting_blocks: a block of at least one posting, a tf per posting");
        goto done;
    }
    /* the blocks of each term, and the check that the pointers fit the postings */
    ptr_out = PyBytes_FromStringAndSize(NULL, (n_terms + 1) * (Py_ssize_t)sizeof(uint32_t));
    if (!ptr_out) goto done;
    uint32_t *block_ptr = (uint32_t *)PyBytes_AS_STRING(ptr_out);
    uint64_t total = 0;
    for (Py_ssize_t t = 0; t < n_terms; t++) {
        uint64_t lo = at(&tp, t), hi = at(&tp, t + 1);
        if (lo > hi || hi > (uint64_t)n_post) {
            corrupt("posting pointers out of order or past the postings");
            goto done;
        }
        block_ptr[t] = (uint32_t)total;
        uint64_t count = hi - lo;
        if (count > (uint64_t)block) total += (count + (uint64_t)block - 1) / (uint64_t)block;
    }
    block_ptr[n_terms] = (uint32_t)total;
    blocks_out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total * 4 * (Py_ssize_t)sizeof(uint32_t));
    if (!blocks_out) goto done;
    uint32_t *out = (uint32_t *)PyBytes_AS_STRING(blocks_out);
    /* positions before each posting: the tfs of every posting before it, whichever the term */
    uint64_t pos_before = 0;
    Py_ssize_t p = 0;
    for (Py_ssize_t t = 0; t < n_terms; t++) {
        Py_ssize_t lo = (Py_ssize_t)at(&tp, t), hi = (Py_ssize_t)at(&tp, t + 1);
        for (; p < lo; p++) pos_before += at(&tfs, p);
        if (hi - lo <= block) continue;
        uint64_t doc = 0;
        for (Py_ssize_t start = lo; start < hi; start += block) {
            Py_ssize_t end = start + block < hi ? start + block : hi;
            uint64_t max_tf = 0, min_len = UINT64_MAX;
            out[1] = (uint32_t)pos_before;
            for (p = start; p < end; p++) {
                uint64_t tf = at(&tfs, p);
                doc += at(&docs, p);
                if (doc >= (uint64_t)lens.n) {
                    corrupt("a doc id past the documents' lengths");
                    goto done;
                }
                uint64_t len = at(&lens, (Py_ssize_t)doc);
                pos_before += tf;
                if (tf > max_tf) max_tf = tf;
                if (len < min_len) min_len = len;
            }
            out[0] = (uint32_t)doc;
            out[2] = (uint32_t)max_tf;
            out[3] = (uint32_t)min_len;
            out += 4;
        }
    }
    result = Py_BuildValue("(OO)", ptr_out, blocks_out);
done:
    Py_XDECREF(ptr_out);
    Py_XDECREF(blocks_out);
    arr_release(&lens);
release_tfs:
    arr_release(&tfs);
release_docs:
    arr_release(&docs);
release_tp:
    arr_release(&tp);
    return result;
}
