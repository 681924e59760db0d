/* The scoring kernels Python calls: doc_freqs (a query's document frequencies over every
 * segment) and top (every segment scored, the k best of all).  Part of the unity build
 * _kernels.c (after scoring.c). */

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
        /* a tuple of str: in each segment the first of them it has (Segment.term_id: a stem
         * group, whose stemmed term a segment without other forms of the word does not hold) */
        Py_ssize_t n_alt = PyTuple_Check(term) ? PyTuple_GET_SIZE(term) : 1;
        for (Py_ssize_t s = 0; s < S; s++) out[s * T + t] = -1;
        for (Py_ssize_t a = 0; a < n_alt; a++) {
            PyObject *alt = PyTuple_Check(term) ? PyTuple_GET_ITEM(term, a) : term;
            Py_ssize_t len = 0;
            const char *key = PyUnicode_Check(alt) ? PyUnicode_AsUTF8AndSize(alt, &len) : NULL;
            if (!key) {
                PyErr_Clear(); /* not str, or a lone surrogate: no segment has it */
                continue;
            }
            for (Py_ssize_t s = 0; s < S; s++) {
                if (out[s * T + t] >= 0) continue; /* an earlier alternative is there */
                Postings *p = (Postings *)PySequence_Fast_GET_ITEM(segs, s);
                Py_ssize_t tid = lookup(p, key, len);
                if (tid == -2 || (tid >= 0 && term_ok(p, tid) < 0)) {
                    PyMem_Free(out);
                    return NULL;
                }
                out[s * T + t] = tid;
            }
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

/* top(segments, terms, coef, mode, norms, allowed, k, k1, k1p1, bound_params, prune_min, counting=True)
 *   -> (term_ids, segs, docs, scores, count, postings_read)
 *
 * The k best matches of `terms` (str, in the order their scores are added) over every segment
 * (a list of Postings), every one tied with the k-th included: score_segment on each, the k-th
 * best of the segments done so far as the floor of the next.  `norms`: per segment the tuple
 * (title, body, anchor, title term) of norm arrays (the last None without a title term);
 * `allowed`: per segment a byte mask or None; `coef` and `mode` as score_segment takes them;
 * `bound_params` (b, then per field its weight and average length, then the title's k1);
 * `prune_min`: MaxScore in each segment where the terms have at least this many postings in all
 * (-1: never).  Returns the terms' id in each segment (int64 [segments * terms]), then the hits'
 * segment index (int32), doc id (int32) and score (float64), as bytes, in no particular order; then how
 * many allowed documents match (exact for k = 0, which never prunes; -1 with `counting` false and
 * k > 0: not counted, which spares a filter's mask where scores are below the k best) and how
 * many postings were read. */
static PyObject *k_top(PyObject *mod, PyObject *args) {
    PyObject *segs_obj, *terms_obj, *coef_obj, *norms_obj, *allowed_obj, *bp_obj;
    int mode;
    Py_ssize_t k, prune_min;
    double k1, k1p1;
    int counting = 1;
    if (!PyArg_ParseTuple(args, "OOOiOOnddOn|p", &segs_obj, &terms_obj, &coef_obj, &mode, &norms_obj, &allowed_obj, &k,
                          &k1, &k1p1, &bp_obj, &prune_min, &counting))
        return NULL;
    counting = counting || k <= 0;
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
                                     has_bp ? bp : NULL, prune_min, floor, &hits, counting ? &count : NULL, &read) < 0)
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
        result = Py_BuildValue("(NNNNnn)", tids_b, seg_b, doc_b, score_b, counting ? count : (Py_ssize_t)-1, read);
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
