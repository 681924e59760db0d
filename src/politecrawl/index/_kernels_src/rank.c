/* rank: from top()'s matches to the page (sorted by score then url, the head reranked by term
 * proximity, the page's body positions for its snippets).  Part of the unity build _kernels.c
 * (after proximity.c). */

/* -- rank: from the matches to the page ------------------------------------------------------ */

typedef struct {
    double score;
    const unsigned char *url; /* its UTF-8 bytes in the segment's url blob (doc_table) */
    Py_ssize_t url_len;
    int32_t seg, doc;
} Ranked;

/* by score descending, then url, then place (engine_numpy._rank sorts (-score, url, segment, doc));
 * urls compare by their UTF-8 bytes, which order as their code points do (as Python compares str) */
static int ranked_cmp(const void *a, const void *b) {
    const Ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    Py_ssize_t m = x->url_len < y->url_len ? x->url_len : y->url_len;
    int c = m ? memcmp(x->url, y->url, (size_t)m) : 0;
    if (c) return c < 0 ? -1 : 1;
    if (x->url_len != y->url_len) return x->url_len < y->url_len ? -1 : 1;
    if (x->seg != y->seg) return x->seg < y->seg ? -1 : 1;
    return (x->doc > y->doc) - (x->doc < y->doc);
}

#define RANKED_LESS(x, y) (ranked_cmp(&(x), &(y)) < 0)
DEFINE_MERGE_SORT(sort_ranked, Ranked, RANKED_LESS)

/* A row's sum, term by term in order (engine_numpy._bonus sums in the same order). */
static double row_sum(const double *row, Py_ssize_t T) {
    double s = row[0];
    for (Py_ssize_t t = 1; t < T; t++) s += row[t];
    return s;
}

/* rank(segments, urls, term_ids, segs, docs, scores, order, start, end, proximity, snippet_cap)
 *   -> (segs, docs, scores, urls, starts, positions, head)
 *
 * The page [start:end] of the matches top() returned (segs, docs, scores as bytes; term_ids its
 * ids of the terms in scoring order): sorted by score descending, then url (`urls`: per segment
 * its documents' urls as doc_table.TextTable holds them, a pair (UTF-8 blob, where each ends));
 * with `proximity` = (depth, cap, reversed_weight, body weight, title weight, idfs in query
 * order, k1, k1p1), the first `depth` reranked with the term proximity bonus (engine_numpy.page;
 * per field the rows of proximity(), the bonus the body's row sum plus the title's, each summed
 * term by term).  `order`: for each term of the query, in the query's order, its index in the
 * scoring order.  Returns the page's segment indexes (int32), docs (int32) and scores (float64),
 * and their urls (a list of str); with snippet_cap > 0 the runs of their body positions
 * (gather(), the query's terms in its order, the first snippet_cap of each), else None, None; and
 * with proximity, the reranked head (segs, docs, body rows, title rows: what explain shows), else
 * None. */
static PyObject *k_rank(PyObject *mod, PyObject *args) {
    PyObject *segs_obj, *urls_obj, *order_obj, *prox;
    Py_buffer tv, sv, dv, vv;
    Py_ssize_t start, end, snippet_cap;
    if (!PyArg_ParseTuple(args, "OOy*y*y*y*OnnOn", &segs_obj, &urls_obj, &tv, &sv, &dv, &vv, &order_obj, &start, &end,
                          &prox, &snippet_cap))
        return NULL;
    PyObject *segs = NULL, *urls = NULL, *order_l = NULL, *result = NULL;
    PyObject *out_seg = NULL, *out_doc = NULL, *out_score = NULL, *starts_b = NULL, *pos_b = NULL, *head = NULL;
    PyObject *out_urls = NULL;
    PyObject *bstarts = NULL, *bpos = NULL, *tstarts = NULL, *tpos = NULL, *brows = NULL, *trows = NULL;
    Ranked *ranked = NULL;
    Arr *ublob = NULL, *uends = NULL;
    Py_ssize_t n_url_arrs = 0;
    int64_t *tids_q = NULL;
    int32_t *cseg = NULL, *cdoc = NULL;
    Py_ssize_t *scratch_i = NULL;
    int64_t *next_i = NULL;
    double *close = NULL;
    Py_buffer iv;
    int has_idfs = 0;
    RunPlaces head_places = {NULL, NULL};
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
    ranked = PyMem_Malloc((size_t)(n ? 2 * n : 1) * sizeof(Ranked)); /* and the sort's scratch */
    ublob = PyMem_Calloc((size_t)(S ? S : 1), sizeof(Arr));
    uends = PyMem_Calloc((size_t)(S ? S : 1), sizeof(Arr));
    if (!tids_q || !ranked || !ublob || !uends) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t s = 0; s < S; s++) {
        PyObject *blob_o, *ends_o;
        n_url_arrs = s + 1; /* released at done, also when acquired in part (arr_release) */
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(urls, s), "OO", &blob_o, &ends_o)) goto done;
        if (arr_get(blob_o, &ublob[s], "url blob") < 0) goto done;
        if (arr_get(ends_o, &uends[s], "url ends") < 0) goto done;
        if (ublob[s].size != 1) {
            PyErr_SetString(PyExc_ValueError, "rank: url blobs are bytes");
            goto done;
        }
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
        const Arr *ends = &uends[hseg[i]];
        if (hdoc[i] < 0 || hdoc[i] >= ends->n) {
            PyErr_SetString(PyExc_ValueError, "rank: a document without a url");
            goto done;
        }
        uint64_t u0 = hdoc[i] ? at(ends, hdoc[i] - 1) : 0, u1 = at(ends, hdoc[i]);
        if (u1 < u0 || u1 > (uint64_t)ublob[hseg[i]].n) {
            corrupt("url offsets beyond the url blob");
            goto done;
        }
        ranked[i].score = hscore[i];
        ranked[i].url = ublob[hseg[i]].p + u0;
        ranked[i].url_len = (Py_ssize_t)(u1 - u0);
        ranked[i].seg = hseg[i];
        ranked[i].doc = hdoc[i];
    }
    sort_ranked(ranked, n, ranked + n);
    Py_ssize_t head_n = 0, head_cap = 0; /* the reranked head's candidates and positions a run */
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
        next_i = PyMem_Malloc((size_t)Tq * sizeof(int64_t));
        close = PyMem_Malloc((size_t)Tq * sizeof(double));
        if (!cseg || !cdoc || !scratch_i || !next_i || !close) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < nh; i++) {
            cseg[i] = ranked[i].seg;
            cdoc[i] = ranked[i].doc;
        }
        /* where the body's runs are, for the page's snippets below (none asked: not recorded) */
        if (snippet_cap > 0) {
            head_places.off = PyMem_Calloc((size_t)(nh * Tq ? nh * Tq : 1), sizeof(int64_t));
            head_places.tf = PyMem_Calloc((size_t)(nh * Tq ? nh * Tq : 1), sizeof(int64_t));
            if (!head_places.off || !head_places.tf) {
                PyErr_NoMemory();
                goto done;
            }
        }
        if (gather_runs(segs, tids_q, Tq, 1, cseg, cdoc, nh, cap, 1, NULL, snippet_cap > 0 ? &head_places : NULL,
                        &bstarts, &bpos) < 0)
            goto done;
        if (gather_runs(segs, tids_q, Tq, 0, cseg, cdoc, nh, cap, 1, NULL, NULL, &tstarts, &tpos) < 0) goto done;
        head_n = nh;
        head_cap = cap;
        brows = PyBytes_FromStringAndSize(NULL, nh * Tq * (Py_ssize_t)sizeof(double));
        trows = PyBytes_FromStringAndSize(NULL, nh * Tq * (Py_ssize_t)sizeof(double));
        if (!brows || !trows) goto done;
        double *br = (double *)PyBytes_AS_STRING(brows), *tr = (double *)PyBytes_AS_STRING(trows);
        proximity_rows((int64_t *)PyBytes_AS_STRING(bstarts), (int64_t *)PyBytes_AS_STRING(bpos), nh, Tq, cap, rw, idfs,
                       k1, k1p1, w_body, br, scratch_i, scratch_i + Tq, next_i, close);
        proximity_rows((int64_t *)PyBytes_AS_STRING(tstarts), (int64_t *)PyBytes_AS_STRING(tpos), nh, Tq, cap, rw, idfs,
                       k1, k1p1, w_title, tr, scratch_i, scratch_i + Tq, next_i, close);
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
        sort_ranked(ranked, nh, ranked + n);
    }
    if (start < 0) start = 0;
    if (end > n) end = n;
    Py_ssize_t np_ = end > start ? end - start : 0;
    out_seg = PyBytes_FromStringAndSize(NULL, np_ * (Py_ssize_t)sizeof(int32_t));
    out_doc = PyBytes_FromStringAndSize(NULL, np_ * (Py_ssize_t)sizeof(int32_t));
    out_score = PyBytes_FromStringAndSize(NULL, np_ * (Py_ssize_t)sizeof(double));
    out_urls = PyList_New(np_);
    if (!out_seg || !out_doc || !out_score || !out_urls) goto done;
    int32_t *os = (int32_t *)PyBytes_AS_STRING(out_seg), *od = (int32_t *)PyBytes_AS_STRING(out_doc);
    double *ov = (double *)PyBytes_AS_STRING(out_score);
    for (Py_ssize_t i = 0; i < np_; i++) {
        const Ranked *r = &ranked[start + i];
        os[i] = r->seg;
        od[i] = r->doc;
        ov[i] = r->score;
        /* the page's urls as doc_table.TextTable decodes them (lone surrogates kept) */
        PyObject *url = PyUnicode_DecodeUTF8((const char *)r->url, r->url_len, "surrogatepass");
        if (!url) goto done;
        PyList_SET_ITEM(out_urls, i, url);
    }
    if (snippet_cap > 0 && Tq > 0) {
        /* The page's hits are among the reranked head, whose body positions were just read (up
         * to head_cap a run): a run read whole there is copied, not read again (at a million
         * documents the positions are read with pread, and these were half of what snippets
         * added to a long query of common words), and the others are read from where that
         * gather found them, with no seek through the postings again. */
        KnownRuns known = {NULL, NULL, NULL, head_cap, head_places.off, head_places.tf};
        Py_ssize_t *index = NULL;
        if (head_n && bstarts) {
            index = PyMem_Malloc((size_t)(np_ ? np_ : 1) * sizeof(Py_ssize_t));
            if (!index) {
                PyErr_NoMemory();
                goto done;
            }
            for (Py_ssize_t i = 0; i < np_; i++) {
                index[i] = -1;
                for (Py_ssize_t k = 0; k < head_n; k++)
                    if (cseg[k] == os[i] && cdoc[k] == od[i]) {
                        index[i] = k;
                        break;
                    }
            }
            known.starts = (const int64_t *)PyBytes_AS_STRING(bstarts);
            known.pos = (const int64_t *)PyBytes_AS_STRING(bpos);
            known.index = index;
        }
        int got = gather_runs(segs, tids_q, Tq, 1, os, od, np_, snippet_cap, 0, index ? &known : NULL, NULL,
                              &starts_b, &pos_b);
        PyMem_Free(index);
        if (got < 0) goto done;
    } else {
        starts_b = Py_NewRef(Py_None);
        pos_b = Py_NewRef(Py_None);
    }
    result = Py_BuildValue("(OOOOOOO)", out_seg, out_doc, out_score, out_urls, starts_b, pos_b, head ? head : Py_None);
done:
    Py_XDECREF(segs);
    Py_XDECREF(urls);
    Py_XDECREF(order_l);
    Py_XDECREF(out_seg);
    Py_XDECREF(out_doc);
    Py_XDECREF(out_score);
    Py_XDECREF(out_urls);
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
    for (Py_ssize_t s = 0; s < n_url_arrs; s++) {
        arr_release(&ublob[s]);
        arr_release(&uends[s]);
    }
    PyMem_Free(ublob);
    PyMem_Free(uends);
    PyMem_Free(tids_q);
    PyMem_Free(cseg);
    PyMem_Free(cdoc);
    PyMem_Free(head_places.off);
    PyMem_Free(head_places.tf);
    PyMem_Free(scratch_i);
    PyMem_Free(next_i);
    PyMem_Free(close);
    if (has_idfs) PyBuffer_Release(&iv);
    PyBuffer_Release(&tv);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&dv);
    PyBuffer_Release(&vv);
    return result;
}
