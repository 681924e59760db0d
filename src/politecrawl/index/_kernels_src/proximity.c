/* Term proximity: gather (the query terms' positions in given documents, seeking by skip
 * blocks) and proximity (the closeness of query neighbours, as bm25.pair_closeness and
 * bm25.proximity_scores).  Part of the unity build _kernels.c (after top.c). */

/* Format 6: the chunks that hold positions [lo, hi) of field `f` (lo < hi), into `s`: their table
 * entries (the table is mapped: 4 or 8 bytes per 128 positions), checked (within the file, each
 * not before the one it follows) before any byte they point at is read, and their bytes (where
 * the field is read with pread: one pread). */
static int packed_chunks_fetch(const Field *f, int64_t lo, int64_t hi, PosScratch *s) {
    if (lo < 0 || hi <= lo || (uint64_t)hi > f->pos_count) return corrupt("positions beyond the positions");
    uint64_t c0 = (uint64_t)lo / POS_CHUNK, k = (uint64_t)(hi - 1) / POS_CHUNK - c0 + 1;
    if (grow((void **)&s->tab, &s->tcap, (size_t)(k + 1) * sizeof(uint64_t)) < 0) return -1;
    /* entries c0 .. c0 + k are in the table: hi <= pos_count above, and Postings_init holds the
     * table to one entry per chunk of pos_count and one more */
    const Arr *ct = &f->pos_chunks;
    for (uint64_t j = 0; j <= k; j++) s->tab[j] = at(ct, (Py_ssize_t)(c0 + j));
    for (uint64_t j = 0; j < k; j++) /* the end first: a difference taken after it cannot wrap */
        if (s->tab[j + 1] > f->pos_len || s->tab[j] > s->tab[j + 1])
            return corrupt("positions chunk table out of order or beyond its file");
    if (f->positions.fd < 0) {
        s->base = f->positions.a.p + s->tab[0]; /* the file's padding follows its last chunk */
    } else {
        size_t need = (size_t)(s->tab[k] - s->tab[0]);
        if (grow((void **)&s->bytes, &s->bcap, need + PACK_PADDING) < 0) return -1;
        if (src_read(&f->positions, (int64_t)s->tab[0], (int64_t)need, s->bytes) < 0) return -1;
        memset(s->bytes + need, 0, PACK_PADDING); /* what bits_at's 8-byte reads may touch */
        s->base = s->bytes;
    }
    s->c0 = c0;
    s->k = k;
    return 0;
}

/* The stored values (each posting's position deltas) of positions [a, z) of field `f`, within
 * the range packed_chunks_fetch fetched into `s`, decoded into s->vals (*out): only the chunks
 * they fall in are decoded (their widths and sizes checked), and of those only these values. */
static int packed_values(const Field *f, PosScratch *s, int64_t a, int64_t z, const uint32_t **out) {
    if (a < 0 || z < a || (uint64_t)a < s->c0 * POS_CHUNK || (uint64_t)z > (s->c0 + s->k) * POS_CHUNK ||
        (uint64_t)z > f->pos_count)
        return corrupt("positions beyond the positions");
    if (grow((void **)&s->vals, &s->vcap, (size_t)(z - a + 1) * sizeof(uint32_t)) < 0) return -1;
    *out = s->vals;
    for (uint64_t c = (uint64_t)a / POS_CHUNK; z > a && c <= (uint64_t)(z - 1) / POS_CHUNK; c++) {
        uint64_t j = c - s->c0, first = c * POS_CHUNK;
        uint64_t n = f->pos_count - first < POS_CHUNK ? f->pos_count - first : POS_CHUNK;
        uint64_t x = (uint64_t)a > first ? (uint64_t)a : first, y = (uint64_t)z < first + n ? (uint64_t)z : first + n;
        if (unpack_pos_chunk(s->base + (s->tab[j] - s->tab[0]), s->tab[j + 1] - s->tab[j], (Py_ssize_t)n,
                             (Py_ssize_t)(x - first), (Py_ssize_t)(y - first), s->vals + (x - (uint64_t)a)) < 0)
            return -1;
    }
    return 0;
}

/* gather(segments, term_ids, field, segs, docs, cap) -> (starts, positions)
 *
 * The token positions of each query term in field `field` (0 title, 1 body, 2 anchor) of each
 * document (segs[c], docs[c]) -- int32 arrays, distinct pairs, in any order: the first `cap` of
 * each, ascending.  `term_ids` as top() returns them (int64 [segments * terms]).  Run (c, t) is
 * positions[starts[c * T + t] : starts[c * T + t + 1]]; `starts` is int64[len(docs) * T + 1] and
 * positions int64, both as bytes.  Per segment and term, one cursor seeks the segment's
 * documents in doc order (skipping the blocks between them); then the runs are read in the
 * order they are in the files, those near each other in one read (RUN_GAP). */
typedef struct {
    int64_t key; /* (segment << 32 | doc) */
    Py_ssize_t c;
} KeyedCand;

#define KEY_LESS(x, y) ((x).key < (y).key)
DEFINE_MERGE_SORT(sort_keyed, KeyedCand, KEY_LESS)

/* Runs of positions closer together than this many bytes in a file are read in one piece: a
 * pread costs about as much as copying a few KB. */
#define RUN_GAP 4096

/* A run of positions to read: its place in the files (segment, offset) and in the output. */
typedef struct {
    int64_t off;
    int32_t seg;
    Py_ssize_t r;
} RunPlace;

static int by_file_place(const void *a, const void *b) {
    const RunPlace *x = a, *y = b;
    if (x->seg != y->seg) return x->seg < y->seg ? -1 : 1;
    return (x->off > y->off) - (x->off < y->off);
}

/* Runs an earlier gather of the same terms and field read (its starts and positions, at most
 * `cap` a run), and for each candidate of this gather its index there (-1: not among them): a run
 * found there whole is copied instead of read again.  With `off` and `tf` (the earlier gather's
 * RunPlaces), where each of its runs is and how long it is whole, a candidate found there needs no
 * seek through the postings at all. */
typedef struct {
    const int64_t *starts, *pos;
    const Py_ssize_t *index;
    Py_ssize_t cap;
    const int64_t *off, *tf;
} KnownRuns;

/* Where a gather found each run (candidate c, term t at c * T + t): its first position's index in
 * the field's positions, and the term's tf in the candidate (0: not in it), before any cap. */
typedef struct {
    int64_t *off, *tf;
} RunPlaces;

/* The runs of positions of each term (tids: int64 [segments * T]) in `field` of each candidate
 * (cseg[c], cdoc[c]), as gather() describes them: new references in *starts_out, *pos_out.
 * `pairs_only`: a candidate with fewer than two of the terms in the field gets empty runs (its
 * positions are not read): the proximity rows need a pair, and are 0.0 without one. `known`
 * (or NULL): runs already read, copied where they hold all this gather needs. */
static int gather_runs(PyObject *segs, const int64_t *tids, Py_ssize_t T, int field, const int32_t *cseg,
                       const int32_t *cdoc, Py_ssize_t nc, Py_ssize_t cap, int pairs_only, const KnownRuns *known,
                       const RunPlaces *places_out, PyObject **starts_out, PyObject **pos_out) {
    Py_ssize_t S = PySequence_Fast_GET_SIZE(segs), runs = nc * T;
    int ok = -1;
    PyObject *starts_b = NULL, *pos_b = NULL;
    int64_t *run_off = PyMem_Calloc((size_t)(runs ? runs : 1), sizeof(int64_t));
    int64_t *run_len = PyMem_Calloc((size_t)(runs ? runs : 1), sizeof(int64_t));
    KeyedCand *key = PyMem_Malloc((size_t)(nc ? 2 * nc : 1) * sizeof(KeyedCand)); /* and the sort's scratch */
    Py_ssize_t *order = PyMem_Malloc((size_t)(nc ? nc : 1) * sizeof(Py_ssize_t));
    RunPlace *places = PyMem_Malloc((size_t)(runs ? runs : 1) * sizeof(RunPlace));
    /* the runs in the order the loop below finds them: per segment, terms by id, documents in
     * order, which is the order of their positions in the files */
    Py_ssize_t *found_order = PyMem_Malloc((size_t)(runs ? runs : 1) * sizeof(Py_ssize_t));
    Py_ssize_t *by_tid = PyMem_Malloc((size_t)(T ? T : 1) * sizeof(Py_ssize_t));
    /* with `known`: where a run copied from it starts there (-1: read from the files) */
    int64_t *copy_from = known ? PyMem_Malloc((size_t)(runs ? runs : 1) * sizeof(int64_t)) : NULL;
    Py_ssize_t n_found = 0;
    unsigned char *buf = NULL;
    size_t buf_cap = 0;
    PosScratch ps = {0};
    if (!run_off || !run_len || !key || !order || !places || !found_order || !by_tid || (known && !copy_from)) {
        PyErr_NoMemory();
        goto done;
    }
    if (known)
        for (Py_ssize_t r = 0; r < runs; r++) copy_from[r] = -1;
    for (Py_ssize_t c = 0; c < nc; c++) {
        if (cseg[c] < 0 || cseg[c] >= S || cdoc[c] < 0) {
            PyErr_SetString(PyExc_ValueError, "gather: candidate out of range");
            goto done;
        }
        key[c].key = ((int64_t)cseg[c] << 32) | cdoc[c];
        key[c].c = c;
    }
    sort_keyed(key, nc, key + nc);
    for (Py_ssize_t c = 0; c < nc; c++) order[c] = key[c].c;
    for (Py_ssize_t a = 0; a < nc;) { /* each segment's run of candidates, in doc order */
        Py_ssize_t z = a, s = cseg[order[a]];
        while (z < nc && cseg[order[z]] == s) z++;
        Postings *p = (Postings *)PySequence_Fast_GET_ITEM(segs, s);
        const Field *f = &p->f[field];
        /* the terms by id (a few: an insertion sort), so that the runs come in file order */
        for (Py_ssize_t t = 0; t < T; t++) {
            Py_ssize_t u = t;
            for (; u > 0 && tids[s * T + by_tid[u - 1]] > tids[s * T + t]; u--) by_tid[u] = by_tid[u - 1];
            by_tid[u] = t;
        }
        for (Py_ssize_t ti = 0; ti < T; ti++) {
            Py_ssize_t t = by_tid[ti];
            Py_ssize_t tid = (Py_ssize_t)tids[s * T + t];
            if (tid < 0) continue;
            if (term_ok(p, tid) < 0) goto done;
            Span span = field_span(f, tid);
            uint64_t start = span.p0, end = span.p1;
            Cursor cur;
            int seeking = 0; /* the cursor, made when a candidate not known is first sought */
            for (Py_ssize_t j = a; j < z; j++) {
                Py_ssize_t k = known ? known->index[order[j]] : -1;
                uint64_t tf, cpos;
                if (k >= 0 && known->off) { /* where the earlier gather found it */
                    tf = (uint64_t)known->tf[k * T + t];
                    cpos = (uint64_t)known->off[k * T + t];
                    if (!tf) continue;
                } else {
                    if (!seeking) {
                        if (cursor_init(&cur, f, tid) < 0) goto done;
                        seeking = 1;
                    }
                    int found = cursor_seek(&cur, (uint64_t)cdoc[order[j]]);
                    if (found < 0) goto done;
                    if (!found) continue;
                    tf = cursor_tf(&cur);
                    cpos = cursor_pos(&cur);
                }
                if (cpos < start || cpos > end || tf > end - cpos) {
                    corrupt("positions beyond the term's");
                    goto done;
                }
                Py_ssize_t r = order[j] * T + t;
                if (places_out) {
                    places_out->off[r] = (int64_t)cpos;
                    places_out->tf[r] = (int64_t)tf;
                }
                run_off[r] = (int64_t)cpos;
                run_len[r] = (int64_t)(tf < (uint64_t)cap ? tf : (uint64_t)cap);
                if (k >= 0) {
                    /* the earlier run holds this one if it is the term's first min(tf, its cap)
                     * positions (not emptied for want of a pair) and at least as many as needed */
                    int64_t a0 = known->starts[k * T + t], have = known->starts[k * T + t + 1] - a0;
                    int64_t whole = (int64_t)(tf < (uint64_t)known->cap ? tf : (uint64_t)known->cap);
                    if (have == whole && have >= run_len[r]) {
                        copy_from[r] = a0;
                        continue;
                    }
                }
                found_order[n_found++] = r;
            }
        }
        a = z;
    }
    if (pairs_only)
        for (Py_ssize_t c = 0; c < nc; c++) {
            Py_ssize_t present = 0;
            for (Py_ssize_t t = 0; t < T; t++) present += run_len[c * T + t] > 0;
            if (present < 2)
                for (Py_ssize_t t = 0; t < T; t++) run_len[c * T + t] = 0;
        }
    starts_b = PyBytes_FromStringAndSize(NULL, (runs + 1) * (Py_ssize_t)sizeof(int64_t));
    if (!starts_b) goto done;
    int64_t *starts = (int64_t *)PyBytes_AS_STRING(starts_b);
    starts[0] = 0;
    for (Py_ssize_t r = 0; r < runs; r++) starts[r + 1] = starts[r] + run_len[r];
    pos_b = PyBytes_FromStringAndSize(NULL, starts[runs] * (Py_ssize_t)sizeof(int64_t));
    if (!pos_b) goto done;
    int64_t *pos = (int64_t *)PyBytes_AS_STRING(pos_b);
    for (Py_ssize_t r = 0; known && r < runs; r++)
        if (copy_from[r] >= 0 && run_len[r])
            memcpy(pos + starts[r], known->pos + copy_from[r], (size_t)run_len[r] * sizeof(int64_t));
    /* The runs in file order, per segment: runs less than RUN_GAP bytes apart are read together
     * (one pread where a file is read with pread, instead of one a run).  They were found in that
     * order (a segment's terms by id, whose positions follow one another, each term's documents
     * in order); sorted only if a segment's pointers say otherwise (a damaged one: its reads then
     * fail as they did).  The qsort of every run was a tenth of a long query of frequent words at
     * 8,000 documents. */
    Py_ssize_t nr = 0;
    int in_order = 1;
    for (Py_ssize_t j = 0; j < n_found; j++) {
        Py_ssize_t r = found_order[j];
        if (!run_len[r]) continue;
        places[nr].off = run_off[r];
        places[nr].seg = cseg[r / T];
        places[nr].r = r;
        if (nr && by_file_place(&places[nr - 1], &places[nr]) > 0) in_order = 0;
        nr++;
    }
    if (!in_order) qsort(places, (size_t)nr, sizeof(RunPlace), by_file_place);
    for (Py_ssize_t a = 0; a < nr;) {
        Py_ssize_t r0 = places[a].r;
        const Field *f = &((Postings *)PySequence_Fast_GET_ITEM(segs, places[a].seg))->f[field];
        int size = f->pos_size;
        int64_t lo = run_off[r0], hi = lo + run_len[r0];
        Py_ssize_t z = a + 1;
        while (z < nr && places[z].seg == places[a].seg && (places[z].off - hi) * size < RUN_GAP) {
            int64_t e = places[z].off + run_len[places[z].r];
            if (e > hi) hi = e;
            z++;
        }
        const unsigned char *base = NULL;
        if (f->pos_packed) { /* format 6: the group's chunks read once, each run's values decoded */
            if (packed_chunks_fetch(f, lo, hi, &ps) < 0) goto done;
            for (Py_ssize_t j = a; j < z; j++) {
                Py_ssize_t r = places[j].r;
                const uint32_t *vals;
                if (packed_values(f, &ps, run_off[r], run_off[r] + run_len[r], &vals) < 0) goto done;
                int64_t v = 0;
                for (int64_t q = 0; q < run_len[r]; q++) {
                    v += (int64_t)vals[q];
                    pos[starts[r] + q] = v;
                }
            }
            a = z;
            continue;
        } else if (f->positions.fd < 0) {
            if (hi > (int64_t)f->pos_count) {
                corrupt("positions beyond the positions");
                goto done;
            }
            base = f->positions.a.p + (size_t)lo * (size_t)size;
        } else {
            size_t need = (size_t)(hi - lo) * (size_t)size;
            if (grow((void **)&buf, &buf_cap, need) < 0) goto done;
            if (src_read(&f->positions, lo, hi - lo, buf) < 0) goto done;
            base = buf;
        }
        for (Py_ssize_t j = a; j < z; j++) {
            Py_ssize_t r = places[j].r;
            int64_t v = 0, o = run_off[r] - lo;
            for (int64_t q = 0; q < run_len[r]; q++) {
                v += (int64_t)item_at(base, size, o + q);
                pos[starts[r] + q] = v;
            }
        }
        a = z;
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
    PyMem_Free(places);
    PyMem_Free(found_order);
    PyMem_Free(by_tid);
    PyMem_Free(copy_from);
    PyMem_Free(buf);
    pos_scratch_free(&ps);
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
    if (gather_runs(segs, tv.buf, T, field, sv.buf, dv.buf, sv.len / 4, cap, 0, NULL, NULL, &starts_b, &pos_b) < 0)
        goto done;
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
/* The proximity rows of nc candidates (out: float64 [nc * T]) from their runs; `head`, `end`,
 * `next` (T each) and `close` (T - 1) are scratch. */
static void proximity_rows(const int64_t *starts, const int64_t *pos, Py_ssize_t nc, Py_ssize_t T, Py_ssize_t cap,
                           double rw, const double *idfs, double k1, double k1p1, double weight, double *out,
                           Py_ssize_t *head, Py_ssize_t *end, int64_t *next, double *close) {
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
        /* each term's next position, INT64_MAX once it has none (positions are below 2**32): the
         * smallest is found without a branch on the data, the first term of the smallest on a tie
         * (positions were compared with a branch each: mispredicted, they were most of this) */
        for (Py_ssize_t t = 0; t < T; t++) next[t] = head[t] < end[t] ? pos[head[t]] : INT64_MAX;
        Py_ssize_t prev_t = -1;
        int64_t prev_p = 0;
        for (;;) {
            Py_ssize_t best = 0;
            int64_t bp = next[0];
            for (Py_ssize_t t = 1; t < T; t++) {
                int lower = next[t] < bp;
                bp = lower ? next[t] : bp;
                best = lower ? t : best;
            }
            if (bp == INT64_MAX) break;
            head[best]++;
            next[best] = head[best] < end[best] ? pos[head[best]] : INT64_MAX;
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
    int64_t *next = NULL;
    double *close = NULL;
    if (nc < 0 || T < 2 || nc > PY_SSIZE_T_MAX / 8 / T || r.n_runs != nc * T) {
        PyErr_SetString(PyExc_ValueError, "runs do not match n_cands * n_terms (n_terms >= 2)");
        goto done;
    }
    for (Py_ssize_t i = 0; i < r.starts[r.n_runs]; i++)
        if (r.pos[i] == INT64_MAX) { /* proximity_rows' mark of a term with no position left */
            PyErr_SetString(PyExc_ValueError, "a position of 2**63 - 1");
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
    next = PyMem_Malloc((size_t)T * sizeof(int64_t));
    close = PyMem_Malloc((size_t)(T - 1) * sizeof(double));
    if (!out_b || !head || !end || !next || !close) {
        Py_CLEAR(out_b);
        PyErr_NoMemory();
        goto done;
    }
    proximity_rows(r.starts, r.pos, nc, T, cap, rw, idfs, k1, k1p1, weight, (double *)PyBytes_AS_STRING(out_b), head,
                   end, next, close);
done:
    PyMem_Free(head);
    PyMem_Free(end);
    PyMem_Free(next);
    PyMem_Free(close);
    if (has_idfs) PyBuffer_Release(&iv);
    runs_release(&r);
    return out_b;
}
