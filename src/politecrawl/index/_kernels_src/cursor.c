/* A cursor over one term's postings in one field: it seeks a document through the term's skip
 * blocks and reads a packed block (format 5) in place, only as far as the document sought.
 * Part of the unity build _kernels.c (after postings.c). */

typedef struct {
    const Field *f;
    Py_ssize_t lo, hi; /* the term's postings */
    Py_ssize_t b0, nb; /* its skip blocks: rows [b0, b0 + nb) (none for a short list) */
    Py_ssize_t i;      /* the current posting (hi: past the end) */
    uint64_t doc;      /* its doc id */
    uint64_t pos;      /* formats 2-4: where its positions start (format 5: cursor_pos) */
    /* format 5: the block of the current posting, read in place as far as a seek needs it: from
     * posting bs, bn postings, its doc gaps (bd bits each, from dp) and tfs - 1 (bt bits, from
     * tp); where the positions of its posting pj start (ppos), for cursor_pos */
    Py_ssize_t bs, bn, pj;
    const unsigned char *dp, *tp;
    int bd, bt;
    uint64_t off0, ppos;
} Cursor;

/* Moves the cursor to the first posting of block z of its term (format 5): the block's widths and
 * extent checked (as unpack_block checks them), nothing decoded but its first doc id. */
static int cursor_load(Cursor *c, Py_ssize_t z) {
    const Field *f = c->f;
    Py_ssize_t s = c->lo + z * BLOCK, n = c->hi - s < BLOCK ? c->hi - s : BLOCK;
    uint64_t off = c->nb ? blk(f, c->b0 + z, 4) : c->off0, base = z ? (uint64_t)blk(f, c->b0 + z - 1, 0) + 1 : 0;
    uint64_t len = f->packed_len;
    if (z && !c->nb) return corrupt("a short list of more than one block");
    /* not off + 2 > len: an offset near 2**64 (a damaged int64 pointer read as uint64) would wrap */
    if (off > len || len - off < 2) return corrupt("packed postings beyond their file");
    const unsigned char *p = f->packed.p;
    int bd = p[off], bt = p[off + 1];
    if (bd > 32 || bt > 32) return corrupt("a packed width over 32 bits");
    uint64_t dstart = off + 2, tstart = dstart + (uint64_t)packed_bytes(n, bd);
    if (tstart + (uint64_t)packed_bytes(n, bt) > len) return corrupt("packed postings beyond their file");
    c->dp = p + dstart;
    c->tp = p + tstart;
    c->bd = bd;
    c->bt = bt;
    c->bs = s;
    c->bn = n;
    c->i = s;
    c->doc = base + (bd ? bits_at(c->dp, 0, bd) : 0);
    c->pj = 0;
    c->ppos = z ? blk(f, c->b0 + z, 1) : c->pos; /* the term's first: its pointer, as before */
    return 0;
}

/* A cursor at the first posting of term `tid` (checked with term_ok); -1 (ValueError) for a
 * damaged block. */
static int cursor_init(Cursor *c, const Field *f, Py_ssize_t tid) {
    Span s = field_span(f, tid);
    c->f = f;
    c->lo = (Py_ssize_t)s.lo;
    c->hi = (Py_ssize_t)s.hi;
    c->b0 = (Py_ssize_t)s.b0;
    c->nb = (Py_ssize_t)s.b1 - c->b0;
    c->i = c->lo;
    c->pos = s.p0;
    c->bs = -1;
    if (!f->packed_fmt) {
        c->doc = c->lo < c->hi ? at(&f->docs, c->lo) : 0;
        return 0;
    }
    c->off0 = s.o0;
    c->doc = 0;
    if (c->lo < c->hi && cursor_load(c, 0) < 0) return -1;
    return 0;
}

/* The tf of the cursor's current posting (i < hi). */
static inline uint64_t cursor_tf(const Cursor *c) {
    if (!c->f->packed_fmt) return at(&c->f->tfs, c->i);
    return (c->bt ? bits_at(c->tp, (uint64_t)(c->i - c->bs) * (uint64_t)c->bt, c->bt) : 0) + 1;
}

/* Where the positions of the cursor's current posting (i < hi) start: format 5 sums the tfs
 * before it in its block, from the last posting asked for (seeks only go forward). */
static inline uint64_t cursor_pos(Cursor *c) {
    if (!c->f->packed_fmt) return c->pos;
    Py_ssize_t j = c->i - c->bs;
    uint64_t pos = c->ppos;
    if (c->bt == 0) {
        pos += (uint64_t)(j - c->pj);
    } else {
        for (Py_ssize_t q = c->pj; q < j; q++) pos += bits_at(c->tp, (uint64_t)q * (uint64_t)c->bt, c->bt) + 1;
    }
    c->pj = j;
    c->ppos = pos;
    return pos;
}

/* scan_to over format 5's blocks: the doc gaps of the current block read one by one from the
 * current posting (or, in a block of consecutive documents, the posting found from the doc id
 * alone), and on into the next block.  A seek reads about half a block this way where decoding
 * the whole block, then scanning it, read one and a half; and the tfs are not read at all but
 * for the posting found (cursor_tf) and, for its positions, those before it (cursor_pos). */
static int scan_packed(Cursor *c, uint64_t target) {
    while (c->doc < target) {
        Py_ssize_t j = c->i - c->bs;
        if (c->bd == 0) {
            uint64_t step = target - c->doc;
            if (step < (uint64_t)(c->bn - j)) {
                c->i += (Py_ssize_t)step;
                c->doc = target;
                return 1;
            }
            c->i += c->bn - 1 - j;
            c->doc += (uint64_t)(c->bn - 1 - j);
        } else {
            uint64_t doc = c->doc;
            Py_ssize_t bn = c->bn;
            while (doc < target && ++j < bn) doc += bits_at(c->dp, (uint64_t)j * (uint64_t)c->bd, c->bd) + 1;
            if (j < bn) {
                c->i = c->bs + j;
                c->doc = doc;
                break;
            }
            c->i = c->bs + bn - 1;
            c->doc = doc;
        }
        /* past the block's last posting: on into the next block */
        if (c->bs + c->bn >= c->hi) {
            c->i = c->hi;
            return 0;
        }
        if (cursor_load(c, (c->bs + c->bn - c->lo) / BLOCK) < 0) return -1;
    }
    return c->i < c->hi && c->doc == target;
}

/* The posting-by-posting part of a seek, one loop per pair of integer widths (the widths of a
 * field's doc deltas and tfs: most often 1 or 2 bytes each). */
#define SCAN(TD, TT)                                                  \
    {                                                                 \
        const TD *docs = (const TD *)c->f->docs.p;                    \
        const TT *tfs = (const TT *)c->f->tfs.p;                      \
        Py_ssize_t i = c->i, hi = c->hi;                              \
        uint64_t doc = c->doc, pos = c->pos;                          \
        while (doc < target) {                                        \
            pos += tfs[i];                                            \
            if (++i >= hi) break;                                     \
            doc += docs[i];                                           \
        }                                                             \
        c->i = i;                                                     \
        c->doc = doc;                                                 \
        c->pos = pos;                                                 \
    }
#define SCAN_TFS(TD)                                                  \
    switch (c->f->tfs.size) {                                         \
        case 1: SCAN(TD, uint8_t) break;                              \
        case 2: SCAN(TD, uint16_t) break;                             \
        case 4: SCAN(TD, uint32_t) break;                             \
        default: SCAN(TD, uint64_t) break;                            \
    }

static int scan_to(Cursor *c, uint64_t target) {
    if (c->f->packed_fmt) return scan_packed(c, target);
    switch (c->f->docs.size) {
        case 1: SCAN_TFS(uint8_t) break;
        case 2: SCAN_TFS(uint16_t) break;
        case 4: SCAN_TFS(uint32_t) break;
        default: SCAN_TFS(uint64_t) break;
    }
    return c->i < c->hi && c->doc == target;
}

/* Moves forward to the first posting whose doc id is >= target; 1 if it is target, -1
 * (ValueError) for a damaged packed block.  Whole blocks whose last doc is below target are
 * skipped (found by galloping, then bisection), so a seek reads (format 5: decodes) at most one
 * block's deltas. */
static int cursor_seek(Cursor *c, uint64_t target) {
    if (c->i >= c->hi) return 0;
    if (c->doc >= target) return c->doc == target;
    if (c->nb) {
        const Field *f = c->f;
        Py_ssize_t cur = (c->i - c->lo) / BLOCK;
        if (blk(f, c->b0 + cur, 0) < target) {
            Py_ssize_t a = cur, step = 1; /* last_doc(a) < target */
            while (a + step < c->nb && blk(f, c->b0 + a + step, 0) < target) {
                a += step;
                step *= 2;
            }
            Py_ssize_t z = a + step < c->nb ? a + step : c->nb; /* last_doc(z) >= target, or z = nb */
            while (z - a > 1) {
                Py_ssize_t mid = a + (z - a) / 2;
                if (blk(f, c->b0 + mid, 0) < target) a = mid; else z = mid;
            }
            if (z == c->nb) {
                c->i = c->hi;
                return 0;
            }
            /* block z: its first posting's delta is from the last doc of block z - 1 */
            if (f->packed_fmt) {
                if (cursor_load(c, z) < 0) return -1;
                return scan_packed(c, target);
            } else {
                c->i = c->lo + z * BLOCK;
                c->doc = (uint64_t)blk(f, c->b0 + z - 1, 0) + at(&f->docs, c->i);
            }
            c->pos = blk(f, c->b0 + z, 1);
        }
    }
    return scan_to(c, target);
}
