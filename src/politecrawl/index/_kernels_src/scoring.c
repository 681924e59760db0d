/* Scoring one segment: the arithmetic of engine_numpy.match (BM25F plus the title term,
 * BM25F, or per-field BM25) on the postings, with the bound of what each term can add to a
 * score (from the skip blocks) for MaxScore, a heap of the k best and the list of matches that
 * may be among them.  Part of the unity build _kernels.c (after postings.c). */

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
        Span s = field_span(f, tid);
        Py_ssize_t lo = (Py_ssize_t)s.lo, hi = (Py_ssize_t)s.hi, b0 = (Py_ssize_t)s.b0, b1 = (Py_ssize_t)s.b1;
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
        } else { /* a short list: at most BLOCK postings */
            uint32_t ds[BLOCK], ts[BLOCK];
            if (hi - lo > BLOCK) return -1.0;
            Py_ssize_t got = decode(f, tid, self->n_docs, ds, ts);
            if (got < 0) return -1.0;
            for (Py_ssize_t i = 0; i < got; i++) {
                uint32_t d = ds[i];
                double tf = (double)ts[i];
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
 * exhaustive pass, in its order, found by seeking through the skip blocks.  -1 (ValueError) for
 * a damaged packed block. */
static int score_some(Postings *self, Py_ssize_t tid, int mode, const double *c, const double *const *norm,
                       const double *tnorm, double k1, double k1p1, const int32_t *docs, Py_ssize_t n, double *score) {
    Cursor cur[N_FIELDS];
    for (int fi = 0; fi < N_FIELDS; fi++)
        if (cursor_init(&cur[fi], &self->f[fi], tid) < 0) return -1;
    double tc = mode == MODE_FIELDS ? 0.0 : (tnorm ? c[1] : 0.0);
    for (Py_ssize_t j = 0; j < n; j++) {
        uint64_t d = (uint64_t)docs[j];
        double tf[N_FIELDS];
        int any = 0;
        for (int fi = 0; fi < N_FIELDS; fi++) {
            int found = cursor_seek(&cur[fi], d);
            if (found < 0) return -1;
            tf[fi] = found ? (double)cursor_tf(&cur[fi]) : 0.0;
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
    return 0;
}

/* A seek through a term's postings costs about this many postings of a whole pass over them. */
#define SEEK_COST 8

/* The k-th best score of `docs` (allowed ones), or 0.0 if there are fewer than k. */
static double kth_best(const int32_t *docs, Py_ssize_t n, const double *score, const unsigned char *allowed,
                       Py_ssize_t k, double *heap) {
    Py_ssize_t in_heap = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        int32_t d = docs[j];
        /* a filter's mask lets through documents in no order: arithmetic, not a branch the CPU
         * mispredicts on a good share of them (x * 1.0 - 0.0 is x to the bit; a filtered-out
         * document gets -1.0, below every score) */
        int a = !allowed || allowed[d];
        double v = score[d] * (double)a - (double)(a ^ 1);
        if (in_heap == k ? v <= heap[0] : v < 0.0) continue; /* one branch, rarely taken once full */
        heap_push(heap, &in_heap, k, v);
    }
    return in_heap == k ? heap[0] : 0.0;
}

/* A histogram of scores in buckets of [0, top] (top: at least every score), a bucket for about
 * every 4 documents counted up to HIST_BUCKETS (4 KB of counts), so that its cost stays that of
 * the pass over them however few they are: what MaxScore's check reads its threshold from, and how many documents it would keep,
 * in one pass over the documents matched so far.  The check had been a pass counting those above
 * the bounds left, a heap of the k best (kth_best), then the pass that keeps them: on a long query
 * of frequent words, whose matches are most of a segment, as costly as scoring the postings it
 * could save, so it was asked only where more than twice the matches' postings were left, and
 * the query's last term, a common word with most of its postings, was scored on every match. */
#define HIST_BUCKETS 1024
#define HIST_STRIDE 8

typedef struct {
    uint32_t count[HIST_BUCKETS];
    Py_ssize_t nb; /* buckets in use */
    double scale;  /* buckets per unit of score */
} ScoreHist;

/* Counts every `stride`-th of `docs` (n of them). */
static void hist_fill(ScoreHist *h, const int32_t *docs, Py_ssize_t n, Py_ssize_t stride, const double *score,
                      const unsigned char *allowed, double top) {
    Py_ssize_t c = n / stride / 4, nb = c < 16 ? 16 : c < HIST_BUCKETS ? c : HIST_BUCKETS;
    memset(h->count, 0, (size_t)nb * sizeof(uint32_t));
    h->nb = nb;
    h->scale = top > 0.0 ? (double)nb / top : 0.0;
    if (!allowed) {
        for (Py_ssize_t j = 0; j < n; j += stride) {
            double b = score[docs[j]] * h->scale;
            h->count[b < (double)(nb - 1) ? (Py_ssize_t)b : nb - 1]++;
        }
        return;
    }
    for (Py_ssize_t j = 0; j < n; j += stride) { /* a mask's byte counted as 0 or 1: added, not branched on */
        int32_t d = docs[j];
        double b = score[d] * h->scale;
        h->count[b < (double)(nb - 1) ? (Py_ssize_t)b : nb - 1] += allowed[d] != 0;
    }
}

/* A lower bound of the k-th best score counted: the lower edge of the highest bucket with k
 * scores at or above it, less a margin for the rounding of a bucket's index; 0.0 for fewer than
 * k.  A lower bound is what MaxScore needs: scores only grow, so the final k-th best is above it. */
static double hist_kth(const ScoreHist *h, Py_ssize_t k) {
    Py_ssize_t above = 0, b = h->nb;
    while (b > 0 && above < k) above += h->count[--b];
    return above >= k && b > 0 ? ((double)b / h->scale) * (1.0 - 1e-9) : 0.0;
}

/* At least the documents counted whose score is `cut` or more (those of its bucket and the one
 * below it included, for the rounding). */
static Py_ssize_t hist_at_least(const ScoreHist *h, double cut) {
    double c = cut * h->scale;
    Py_ssize_t from = c <= 1.0 ? 0 : c < (double)h->nb ? (Py_ssize_t)c - 1 : h->nb - 2;
    Py_ssize_t n = 0;
    for (Py_ssize_t j = from; j < h->nb; j++) n += h->count[j];
    return n;
}

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
 * without pruning; NULL with k > 0: not counted, and a filter's mask is then read only for the
 * documents whose score would enter the k best), `read` the postings read.
 *
 *   mode 0 ("bm25f+title", "bm25f"), coef = (idf, title coefficient) per term, norm = the
 *     fields' w_f / B_f per document, tnorm = TITLE_K1 * B_title per document:
 *       pseudo = (title part + body part) + anchor part, each tf * norm[f][d] (0.0 if absent)
 *       score += idf * ((pseudo * k1p1) / (pseudo + k1)), then + (title_coef * tf_title) /
 *       (tf_title + tnorm[d]) (0.0 without a title match or coefficient)
 *   mode 1 ("fields"), coef = (fidf_title, fidf_body, fidf_anchor) per term, norm = k1 * B_f:
 *       score += (fidf_f * tf_f) / (tf_f + norm[f][d])   for each field in order
 *
 * which is engine_numpy.match's arithmetic, in its order.
 *
 * With `prune_min` >= 0, MaxScore where the terms have at least that many postings in the
 * segment (-1: never): each term's bound (term_bound) says what it can add at most.  After
 * each term, if at least k allowed documents already score more than the remaining terms' bounds
 * together (or the floor is above them), no document not matched yet can reach the k-th score;
 * if then the documents whose score plus those bounds reaches the k-th best are few against the
 * postings left, the remaining terms are scored only on them (seeking through the skip blocks),
 * and that set shrinks as the bounds left do.  The documents kept get every term, in order, so
 * their scores are the exhaustive ones to the bit. */
static int score_segment(Postings *self, int32_t seg, const Py_ssize_t *tids, Py_ssize_t n_terms, const double *coef,
                         int mode, const double *const *norm, const double *tnorm, const unsigned char *allowed,
                         Py_ssize_t k, double k1, double k1p1, const double *bp, Py_ssize_t prune_min, double floor,
                         Hits *out, Py_ssize_t *count_out, Py_ssize_t *read_out) {
    Py_ssize_t n = self->n_docs;
    int per_term = mode == MODE_FIELDS ? N_FIELDS : 2;
    int ok = -1, pruning = 0;
    double *heap = NULL, *rest = NULL, *upto = NULL;
    uint64_t *has_part = NULL; /* BM25F: the documents with a title or anchor part set, a bit each */
    Py_ssize_t *left = NULL, *plen = NULL;
    int32_t *pushed = NULL, *keep = NULL;
    Py_ssize_t m = 0, n_keep = 0, postings_read = 0; /* documents touched: s_touched[:m] */
    if (scratch(n) < 0) return -1;
    has_part = PyMem_Calloc((size_t)(n / 64 + 1), sizeof(uint64_t));
    rest = PyMem_Calloc((size_t)(n_terms + 1), sizeof(double));
    upto = PyMem_Calloc((size_t)(n_terms + 1), sizeof(double));
    left = PyMem_Calloc((size_t)(n_terms + 1), sizeof(Py_ssize_t));
    plen = PyMem_Calloc((size_t)(n_terms + 1), sizeof(Py_ssize_t));
    if (k > 0) heap = PyMem_Malloc((size_t)k * sizeof(double));
    if (!has_part || !rest || !upto || !left || !plen || (k > 0 && !heap)) {
        PyErr_NoMemory();
        goto done;
    }
    int prune = prune_min >= 0 && k > 0 && bp && n_terms > 1;
    if (prune) {
        /* plen[i]: term i's postings.  Fewer than prune_min in all (rare words), and MaxScore
         * cannot save more than it costs: the bounds of short lists are found by decoding them
         * and reading the norms of their documents, a pass as costly as scoring them. */
        Py_ssize_t total = 0;
        for (Py_ssize_t ti = 0; ti < n_terms; ti++) {
            if (tids[ti] < 0) continue;
            for (int fi = 0; fi < N_FIELDS; fi++) {
                Span s = field_span(&self->f[fi], tids[ti]);
                plen[ti] += (Py_ssize_t)(s.hi - s.lo);
            }
            total += plen[ti];
        }
        prune = total >= prune_min;
    }
    if (prune) {
        /* rest[i]: the bounds of the terms after term i, together; upto[i]: of term i and those
         * before; left[i]: the postings of the terms after term i */
        for (Py_ssize_t ti = 0; ti < n_terms; ti++) {
            if (tids[ti] < 0) continue;
            double b = term_bound(self, tids[ti], mode, coef + ti * per_term, bp, norm, tnorm, k1, k1p1);
            if (b < 0) {
                corrupt("doc id beyond the segment");
                goto done;
            }
            upto[ti] = b; /* summed below */
        }
        for (Py_ssize_t ti = n_terms - 1; ti >= 1; ti--) {
            rest[ti - 1] = rest[ti] + upto[ti];
            left[ti - 1] = left[ti] + plen[ti];
        }
        for (Py_ssize_t ti = 1; ti < n_terms; ti++) upto[ti] += upto[ti - 1];
    }

    double *score = s_score, retry_rest = INFINITY;
    ScoreHist hist;
    for (Py_ssize_t ti = 0; ti < n_terms; ti++) {
        Py_ssize_t tid = tids[ti];
        if (tid < 0) continue;
        const double *c = coef + ti * per_term;
        /* Seeking costs several times a posting of a whole pass: the documents still in the
         * running are sought only when they are few against the term's postings. */
        if (pruning && n_keep * SEEK_COST < plen[ti]) {
            if (score_some(self, tid, mode, c, norm, tnorm, k1, k1p1, keep, n_keep, score) < 0) goto cleanup;
            postings_read += n_keep;
        } else {
            Py_ssize_t len[N_FIELDS];
            for (int fi = 0; fi < N_FIELDS; fi++) {
                if ((len[fi] = decode(&self->f[fi], tid, n, s_docs[fi], s_tfs[fi])) < 0) goto cleanup;
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
                    has_part[d >> 6] |= UINT64_C(1) << (d & 63);
                }
                for (Py_ssize_t i = 0; i < len[2]; i++) {
                    uint32_t d = s_docs[2][i];
                    pa[d] = (double)s_tfs[2][i] * n2[d];
                    has_part[d >> 6] |= UINT64_C(1) << (d & 63);
                }
                /* A body posting of a document without a title or anchor part reads no part: the
                 * parts are 0.0, and (0.0 + x) + 0.0 and y + 0.0 are x and y (both > 0), so its
                 * score is the body-only loop's, to the bit.  A common word is in a few titles and
                 * most bodies: three arrays of n doubles read and zeroed per body posting were
                 * most of its cost, against a bit map of n bits (7.5 KB at 60,000 documents):
                 * with the kept documents' bit map below, the scoring of the long queries of
                 * frequent words (100,000 documents) went from 1.21 to about 1.09 ms at the median. */
                for (Py_ssize_t i = 0; i < len[1]; i++) {
                    uint32_t d = db[i];
                    double sc = score[d];
                    s_touched[m] = (int32_t)d;
                    m += (sc == 0.0) & (m < n);
                    if (!((has_part[d >> 6] >> (d & 63)) & 1)) {
                        double p = (double)tb[i] * n1[d];
                        score[d] = sc + idf * ((p * k1p1) / (p + k1));
                        continue;
                    }
                    double p = (pt[d] + (double)tb[i] * n1[d]) + pa[d];
                    score[d] = (sc + idf * ((p * k1p1) / (p + k1))) + bt[d];
                    pt[d] = bt[d] = pa[d] = 0.0;
                }
                for (int fi = 0; fi < N_FIELDS; fi += 2) /* the bits of the next term start clear */
                    for (Py_ssize_t i = 0; i < len[fi]; i++) has_part[s_docs[fi][i] >> 6] = 0;
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
             * left to be worth it: a quarter of the matches (the histogram's pass costs a fraction
             * of scoring a posting, and the seeks read the kept documents' blocks in place). */
            if (!((rest[ti] < upto[ti] || rest[ti] < floor) && 4 * left[ti] > m && rest[ti] <= retry_rest)) continue;
            double theta;
            if (rest[ti] < floor) {
                theta = floor;
            } else {
                /* Every HIST_STRIDE-th match first, for a guess (not a bound) of the k-th best
                 * and of how many it would keep: most checks fail, and the pass over every
                 * match is made where the guess says that pruning pays.  After a check that
                 * fails because the bounds left are above the threshold, the next waits for them
                 * to fall below it (the threshold grows slowly from one term to the next). */
                int pays = 0;
                for (Py_ssize_t stride = m >= 4 * HIST_STRIDE * k ? HIST_STRIDE : 1;; stride = 1) {
                    hist_fill(&hist, s_touched, m, stride, score, allowed, upto[ti]);
                    theta = hist_kth(&hist, (k + stride - 1) / stride);
                    if (theta < floor) theta = floor;
                    if (!(theta > rest[ti])) { /* a document not matched yet may still get in */
                        retry_rest = theta;
                        break;
                    }
                    if (hist_at_least(&hist, theta - rest[ti]) * stride * SEEK_COST >= left[ti]) {
                        retry_rest = rest[ti] * 0.5; /* as below, without the pass that finds them */
                        break;
                    }
                    if (stride == 1) {
                        pays = 1;
                        break;
                    }
                }
                if (!pays) continue;
            }
            /* the documents kept, as a bitmap of the segment's: read back in doc order, which
             * score_some takes (the matches come term after term, so they are not in order;
             * qsort was ~3% of the long queries of frequent words in a profile) */
            Py_ssize_t words = (n + 63) / 64;
            uint64_t *bits = PyMem_Calloc((size_t)(words ? words : 1), sizeof(uint64_t));
            if (!bits) {
                PyErr_NoMemory();
                goto cleanup;
            }
            for (Py_ssize_t j = 0; j < m; j++) { /* no branch on a filter's mask: as in kth_best */
                int32_t d = s_touched[j];
                uint64_t in = (uint64_t)((!allowed || allowed[d]) & (score[d] + rest[ti] >= theta));
                bits[d >> 6] |= in << (d & 63);
                n_keep += (Py_ssize_t)in;
            }
            if (n_keep * SEEK_COST >= left[ti]) {
                /* too many still in the running for seeking to pay: score the next term
                 * exhaustively, and ask again only once the bounds left are at most half these
                 * (the pass over the matches costs about as much each time).  Giving up for good
                 * here scored a long query's last terms, common words of small bounds and most of
                 * its postings, on every match, when few documents could still use them. */
                PyMem_Free(bits);
                n_keep = 0;
                retry_rest = rest[ti] * 0.5;
                continue;
            }
            keep = PyMem_Malloc((size_t)(n_keep ? n_keep : 1) * sizeof(int32_t));
            if (!keep) {
                PyMem_Free(bits);
                PyErr_NoMemory();
                goto cleanup;
            }
            Py_ssize_t w = 0;
            for (Py_ssize_t i = 0; i < words; i++)
                for (uint64_t b = bits[i]; b; b &= b - 1) keep[w++] = (int32_t)(i * 64 + __builtin_ctzll(b));
            PyMem_Free(bits);
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
    double cut = floor; /* what a score must reach to enter: the floor, and the heap's minimum once full */
    if (k > 0) {
        pushed = PyMem_Malloc((size_t)(n_final ? n_final : 1) * sizeof(int32_t));
        if (!pushed) {
            PyErr_NoMemory();
            goto cleanup;
        }
    }
    for (Py_ssize_t j = 0; !count_out && j < n_final; j++) {
        /* Not counting (a page of hits): most matches score below the cut, and their mask bytes
         * are not read.  Read at random, one a match, a segment's masks of a million documents
         * (a byte each) cost the rare words' queries as much as their scoring. */
        int32_t d = final[j];
        double v = score[d];
        if (v < cut || (allowed && !allowed[d])) continue;
        pushed[n_pushed++] = d;
        heap_push(heap, &in_heap, k, v);
        if (in_heap == k && heap[0] > cut) cut = heap[0];
    }
    for (Py_ssize_t j = 0; count_out && j < n_final; j++) {
        int32_t d = final[j];
        /* as in kth_best: a filtered-out document gets a score below every floor (scores are
         * >= 0), and is counted by adding its mask byte */
        int a = !allowed || allowed[d];
        count += a;
        if (k <= 0) continue;
        double v = score[d] * (double)a - (double)(a ^ 1);
        if (v < cut) continue;
        pushed[n_pushed++] = d;
        heap_push(heap, &in_heap, k, v);
        if (in_heap == k && heap[0] > cut) cut = heap[0];
    }
    double threshold = in_heap == k && k > 0 ? heap[0] : 0.0;
    for (Py_ssize_t j = 0; j < n_pushed; j++) {
        int32_t d = pushed[j];
        if (score[d] >= threshold && hits_add(out, seg, d, score[d]) < 0) goto cleanup;
    }
    if (count_out) *count_out += count;
    *read_out += postings_read;
    ok = 0;
cleanup:
    /* the scores back to 0.0: where most of the segment was matched, all of them in one sweep */
    if (m > n / 4)
        memset(s_score, 0, (size_t)n * sizeof(double));
    else
        for (Py_ssize_t j = 0; j < m; j++) s_score[s_touched[j]] = 0.0;
done:
    PyMem_Free(heap);
    PyMem_Free(pushed);
    PyMem_Free(keep);
    PyMem_Free(rest);
    PyMem_Free(upto);
    PyMem_Free(left);
    PyMem_Free(plen);
    PyMem_Free(has_part);
    return ok;
}
