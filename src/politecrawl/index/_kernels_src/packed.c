/* Bit-packed postings (segment format 5, packed_postings.py has the layout): a block of up to
 * BLOCK postings is two width bytes, then its doc gaps (doc - previous doc - 1; a term's first:
 * its doc id), then its tfs - 1, each run little-endian bits, byte-aligned.  unpack_block decodes
 * one block (the searcher's cursor and whole-list decode, postings.c); pack_postings and
 * unpack_postings are packed_postings.py's kernels (the writer, merges, the numpy engine), byte
 * for byte its numpy code's.  Part of the unity build _kernels.c (after common.h). */

#define PACK_PADDING 8 /* zero bytes at the end of a packed file: packed_postings.PADDING */

/* `b` bits (b <= 32) from bit `bit` of `p`: one unaligned 8-byte read (the file's padding keeps
 * it inside the file). */
static inline uint64_t bits_at(const unsigned char *p, uint64_t bit, int b) {
    uint64_t w;
    memcpy(&w, p + (bit >> 3), 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return (w >> (bit & 7)) & ((UINT64_C(1) << b) - 1);
}

static inline Py_ssize_t packed_bytes(Py_ssize_t n, int b) { return (n * b + 7) / 8; }

/* Decodes the block at byte `off` of `p` (`len` bytes before the padding) holding `n` postings
 * into docs (absolute: `base` is the doc id its first gap counts from, 0 at a term's start) and
 * tfs; its end goes to *end.  -1 (ValueError) for a block past the file, a width over 32 bits
 * or a tf of 0 (a wrapped tf - 1). */
static int unpack_block(const unsigned char *p, uint64_t len, uint64_t off, Py_ssize_t n, uint64_t base,
                        uint32_t *docs, uint32_t *tfs, uint64_t *end) {
    /* not off + 2 > len: an offset near 2**64 (a damaged int64 pointer read as uint64) would wrap */
    if (off > len || len - off < 2) return corrupt("packed postings beyond their file");
    int bd = p[off], bt = p[off + 1];
    if (bd > 32 || bt > 32) return corrupt("a packed width over 32 bits");
    uint64_t dstart = off + 2, tstart = dstart + (uint64_t)packed_bytes(n, bd);
    *end = tstart + (uint64_t)packed_bytes(n, bt);
    if (*end > len) return corrupt("packed postings beyond their file");
    const unsigned char *dp = p + dstart, *tp = p + tstart;
    uint64_t d = base;
    if (bd == 0) { /* consecutive documents: a common word's dense blocks */
        for (Py_ssize_t i = 0; i < n; i++) docs[i] = (uint32_t)(d + (uint64_t)i);
        d += (uint64_t)n;
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            d += bits_at(dp, (uint64_t)i * (uint64_t)bd, bd);
            docs[i] = (uint32_t)d;
            d++;
        }
    }
    /* the last id must fit 32 bits (gaps >= 0: it is the largest); the caller checks it against
     * the segment's documents */
    if (n && d - 1 > UINT32_MAX) return corrupt("doc id beyond 32 bits");
    if (bt == 0) {
        for (Py_ssize_t i = 0; i < n; i++) tfs[i] = 1;
    } else {
        int zero = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            uint32_t tf = (uint32_t)(bits_at(tp, (uint64_t)i * (uint64_t)bt, bt) + 1);
            tfs[i] = tf;
            zero |= tf == 0;
        }
        if (zero) return corrupt("a posting with no occurrences");
    }
    return 0;
}

/* The bits of `v` (0 for 0). */
static inline int bit_width(uint64_t v) {
    int b = 0;
    while (v) {
        b++;
        v >>= 1;
    }
    return b;
}

/* ORs `b` bits of `v` in at bit `bit` of `p` (zeroed, with 8 bytes of room past the run). */
static inline void bits_put(unsigned char *p, uint64_t bit, uint64_t v) {
    uint64_t w;
    memcpy(&w, p + (bit >> 3), 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
    w |= v << (bit & 7);
    w = __builtin_bswap64(w);
#else
    w |= v << (bit & 7);
#endif
    memcpy(p + (bit >> 3), &w, 8);
}

/* pack_postings(term_ptr, deltas, tfs, block) -> (packed, pack_ptr, block_offsets): bytes (uint8),
 * int64 [T+1] (where each term's blocks start) and int64 [B] (where each block of a list of more
 * than `block` postings starts, in skip-block order); term_ptr from 0, deltas the first of a term
 * absolute.  packed_postings.pack_postings. */
static PyObject *k_pack_postings(PyObject *self, PyObject *args) {
    PyObject *tp_o, *d_o, *t_o;
    Py_ssize_t block;
    if (!PyArg_ParseTuple(args, "OOOn", &tp_o, &d_o, &t_o, &block)) return NULL;
    Arr tp, dl, tf;
    PyObject *result = NULL, *packed_b = NULL, *ptr_b = NULL, *offs_b = NULL;
    unsigned char *buf = NULL;
    if (arr_get_strided(tp_o, &tp, "term_ptr") < 0) return NULL;
    if (arr_get_strided(d_o, &dl, "deltas") < 0) goto release_tp;
    if (arr_get_strided(t_o, &tf, "tfs") < 0) goto release_dl;
    Py_ssize_t n_terms = tp.n ? tp.n - 1 : 0, n_post = dl.n;
    if (block <= 0 || block > 4096 || tf.n != n_post || (tp.n && (at(&tp, 0) != 0 || at(&tp, n_terms) != (uint64_t)n_post))) {
        PyErr_SetString(PyExc_ValueError, "pack_postings: pointers that do not match the postings");
        goto done;
    }
    /* at most 2 bytes of widths and 8 of values a posting, and a block's rounding */
    Py_ssize_t n_blocks = 0, n_long = 0;
    for (Py_ssize_t t = 0; t < n_terms; t++) {
        uint64_t lo = at(&tp, t), hi = at(&tp, t + 1);
        if (hi < lo || hi > (uint64_t)n_post) {
            PyErr_SetString(PyExc_ValueError, "pack_postings: pointers out of order");
            goto done;
        }
        Py_ssize_t nb = (Py_ssize_t)((hi - lo + (uint64_t)block - 1) / (uint64_t)block);
        n_blocks += nb;
        if (hi - lo > (uint64_t)block) n_long += nb;
    }
    size_t cap = (size_t)n_blocks * 4 + (size_t)n_post * 8 + 16;
    buf = PyMem_Calloc(cap, 1);
    ptr_b = PyBytes_FromStringAndSize(NULL, (n_terms + 1) * (Py_ssize_t)sizeof(int64_t));
    offs_b = PyBytes_FromStringAndSize(NULL, n_long * (Py_ssize_t)sizeof(int64_t));
    if (!buf || !ptr_b || !offs_b) {
        if (!buf) PyErr_NoMemory();
        goto done;
    }
    int64_t *pack_ptr = (int64_t *)PyBytes_AS_STRING(ptr_b), *offs = (int64_t *)PyBytes_AS_STRING(offs_b);
    uint64_t out = 0;
    Py_ssize_t k = 0;
    for (Py_ssize_t t = 0; t < n_terms; t++) {
        Py_ssize_t lo = (Py_ssize_t)at(&tp, t), hi = (Py_ssize_t)at(&tp, t + 1);
        pack_ptr[t] = (int64_t)out;
        for (Py_ssize_t s = lo; s < hi; s += block) {
            Py_ssize_t e = s + block < hi ? s + block : hi, n = e - s;
            uint64_t gmax = 0, tmax = 0;
            for (Py_ssize_t i = s; i < e; i++) {
                uint64_t d = at(&dl, i), f = at(&tf, i);
                if ((i > lo && d == 0) || f == 0 || d > UINT32_MAX || f > UINT32_MAX) {
                    PyErr_SetString(PyExc_ValueError, "pack_postings: doc ids out of order, or a tf of 0");
                    goto done;
                }
                uint64_t g = i > lo ? d - 1 : d;
                if (g > gmax) gmax = g;
                if (f - 1 > tmax) tmax = f - 1;
            }
            int bd = bit_width(gmax), bt = bit_width(tmax);
            if (hi - lo > block) offs[k++] = (int64_t)out;
            buf[out] = (unsigned char)bd;
            buf[out + 1] = (unsigned char)bt;
            uint64_t dstart = out + 2, tstart = dstart + (uint64_t)packed_bytes(n, bd);
            for (Py_ssize_t i = s; i < e; i++) {
                uint64_t d = at(&dl, i), g = i > lo ? d - 1 : d;
                if (bd) bits_put(buf + dstart, (uint64_t)(i - s) * (uint64_t)bd, g);
                if (bt) bits_put(buf + tstart, (uint64_t)(i - s) * (uint64_t)bt, at(&tf, i) - 1);
            }
            out = tstart + (uint64_t)packed_bytes(n, bt);
        }
    }
    pack_ptr[n_terms] = (int64_t)out;
    packed_b = PyBytes_FromStringAndSize((const char *)buf, (Py_ssize_t)out);
    if (packed_b) result = PyTuple_Pack(3, packed_b, ptr_b, offs_b);
done:
    PyMem_Free(buf);
    Py_XDECREF(packed_b);
    Py_XDECREF(ptr_b);
    Py_XDECREF(offs_b);
    arr_release(&tf);
release_dl:
    arr_release(&dl);
release_tp:
    arr_release(&tp);
    return result;
}

/* unpack_postings(packed, pack_ptr, term_ptr, n_docs, block) -> (deltas, tfs): bytes of uint32, the
 * doc deltas (the first of a term absolute) and tfs of terms [0, T) of a run, whose pointers
 * (T+1 rows, absolute) are pack_ptr and term_ptr.  packed_postings.unpack. */
static PyObject *k_unpack_postings(PyObject *self, PyObject *args) {
    PyObject *p_o, *pp_o, *tp_o;
    Py_ssize_t n_docs, block;
    if (!PyArg_ParseTuple(args, "OOOnn", &p_o, &pp_o, &tp_o, &n_docs, &block)) return NULL;
    Arr p, pp, tp;
    PyObject *result = NULL, *d_b = NULL, *t_b = NULL;
    if (arr_get(p_o, &p, "packed") < 0) return NULL;
    if (arr_get_strided(pp_o, &pp, "pack_ptr") < 0) goto release_p;
    if (arr_get_strided(tp_o, &tp, "term_ptr") < 0) goto release_pp;
    if (p.size != 1 || p.n < PACK_PADDING || tp.n < 1 || pp.n != tp.n || block <= 0 || block > 4096 ||
        n_docs < 0) {
        PyErr_SetString(PyExc_ValueError, "corrupt segment: packed postings of the wrong shape");
        goto done;
    }
    Py_ssize_t n_terms = tp.n - 1;
    uint64_t base_ptr = at(&tp, 0), len = (uint64_t)(p.n - PACK_PADDING);
    if (at(&tp, n_terms) < base_ptr || at(&tp, n_terms) - base_ptr > (uint64_t)PY_SSIZE_T_MAX / 8) {
        corrupt("term pointers out of order");
        goto done;
    }
    Py_ssize_t n_post = (Py_ssize_t)(at(&tp, n_terms) - base_ptr);
    d_b = PyBytes_FromStringAndSize(NULL, n_post * 4);
    t_b = PyBytes_FromStringAndSize(NULL, n_post * 4);
    if (!d_b || !t_b) goto done;
    uint32_t *deltas = (uint32_t *)PyBytes_AS_STRING(d_b), *tfs = (uint32_t *)PyBytes_AS_STRING(t_b);
    for (Py_ssize_t t = 0; t < n_terms; t++) {
        uint64_t lo = at(&tp, t), hi = at(&tp, t + 1), off = at(&pp, t);
        if (hi < lo || hi - base_ptr > (uint64_t)n_post || hi - lo > (uint64_t)n_docs) {
            corrupt("term pointers out of order, or more postings than documents");
            goto done;
        }
        uint64_t prev = 0; /* the doc id the next gap counts from */
        for (uint64_t s = lo; s < hi; s += (uint64_t)block) {
            Py_ssize_t n = (Py_ssize_t)(hi - s < (uint64_t)block ? hi - s : (uint64_t)block);
            uint32_t *d = deltas + (s - base_ptr), *f = tfs + (s - base_ptr);
            if (unpack_block(p.p, len, off, n, prev, d, f, &off) < 0) goto done;
            uint64_t last = d[n - 1];
            if (last >= (uint64_t)n_docs) {
                corrupt("doc id beyond the segment");
                goto done;
            }
            /* absolute ids back to deltas, the first of the term absolute */
            for (Py_ssize_t i = n - 1; i > 0; i--) d[i] -= d[i - 1];
            if (s > lo) d[0] = (uint32_t)(d[0] - (prev - 1));
            prev = last + 1;
        }
    }
    result = PyTuple_Pack(2, d_b, t_b);
done:
    Py_XDECREF(d_b);
    Py_XDECREF(t_b);
    arr_release(&tp);
release_pp:
    arr_release(&pp);
release_p:
    arr_release(&p);
    return result;
}

/* -- positions (segment format 6, packed_positions.py has the layout) -------------------------
 *
 * A field's positions (each posting's, delta-encoded within it, as formats 2-5 store them) cut
 * into chunks of POS_CHUNK, whatever postings they belong to: a chunk is a width byte, then its
 * values, little-endian bits, byte-aligned; a table (uint32) holds where each chunk starts, and
 * where the last ends. */

#define POS_CHUNK 128 /* positions per chunk: packed_positions.CHUNK */

/* Values [a, z) of a chunk of `n` positions at `p`, `size` bytes as the chunk table says (with 8
 * bytes readable past them: the file's padding, or a reader's zeroed tail), decoded into `out`
 * (z - a of them; a value has the chunk's width, so those before `a` are skipped, not decoded).
 * -1 (ValueError) for a width over 32 bits or a size that is not the one the width gives. */
static int unpack_pos_chunk(const unsigned char *p, uint64_t size, Py_ssize_t n, Py_ssize_t a, Py_ssize_t z,
                            uint32_t *out) {
    if (size < 1) return corrupt("positions chunk table out of order or beyond its file");
    int b = p[0];
    if (b > 32) return corrupt("a packed width over 32 bits");
    if (size - 1 != (uint64_t)packed_bytes(n, b)) return corrupt("a positions chunk of the wrong size");
    if (b == 0) {
        memset(out, 0, (size_t)(z - a) * sizeof(uint32_t));
        return 0;
    }
    for (Py_ssize_t i = a; i < z; i++) out[i - a] = (uint32_t)bits_at(p + 1, (uint64_t)i * (uint64_t)b, b);
    return 0;
}

/* pack_positions(values, chunk) -> (packed, offsets): bytes (uint8) and int64 [chunks], where
 * each chunk of `chunk` values (the last may be shorter) starts.  packed_positions.pack_positions. */
static PyObject *k_pack_positions(PyObject *self, PyObject *args) {
    PyObject *v_o;
    Py_ssize_t chunk;
    if (!PyArg_ParseTuple(args, "On", &v_o, &chunk)) return NULL;
    Arr v;
    if (arr_get_strided(v_o, &v, "positions") < 0) return NULL;
    PyObject *result = NULL, *packed_b = NULL, *offs_b = NULL;
    unsigned char *buf = NULL;
    if (chunk <= 0 || chunk > 4096) {
        PyErr_SetString(PyExc_ValueError, "pack_positions: chunk out of range");
        goto done;
    }
    Py_ssize_t n = v.n, n_chunks = (n + chunk - 1) / chunk;
    /* a width byte a chunk, at most 4 bytes a value, and room for bits_put's 8-byte writes */
    buf = PyMem_Calloc((size_t)n_chunks + (size_t)n * 4 + 16, 1);
    offs_b = PyBytes_FromStringAndSize(NULL, n_chunks * (Py_ssize_t)sizeof(int64_t));
    if (!buf || !offs_b) {
        if (!buf) PyErr_NoMemory();
        goto done;
    }
    int64_t *offs = (int64_t *)PyBytes_AS_STRING(offs_b);
    uint64_t out = 0;
    for (Py_ssize_t c = 0; c < n_chunks; c++) {
        Py_ssize_t s = c * chunk, e = s + chunk < n ? s + chunk : n;
        uint64_t top = 0;
        for (Py_ssize_t i = s; i < e; i++) {
            uint64_t x = at(&v, i);
            if (x > top) top = x;
        }
        if (top > UINT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "pack_positions: a position past 32 bits");
            goto done;
        }
        int b = bit_width(top);
        offs[c] = (int64_t)out;
        buf[out] = (unsigned char)b;
        /* the values' bits gathered in a word and written 4 bytes at a time (bits_put's
         * read-modify-write of 8 bytes a value made this a tenth of a build's time) */
        unsigned char *o = buf + out + 1;
        uint64_t acc = 0;
        int held = 0;
        if (b)
            for (Py_ssize_t i = s; i < e; i++) {
                acc |= at(&v, i) << held; /* held < 32 and b <= 32: within 64 bits */
                held += b;
                if (held >= 32) {
                    for (int q = 0; q < 4; q++) *o++ = (unsigned char)(acc >> (8 * q));
                    acc >>= 32;
                    held -= 32;
                }
            }
        for (; held > 0; held -= 8, acc >>= 8) *o++ = (unsigned char)acc;
        out += 1 + (uint64_t)packed_bytes(e - s, b);
    }
    packed_b = PyBytes_FromStringAndSize((const char *)buf, (Py_ssize_t)out);
    if (packed_b) result = PyTuple_Pack(2, packed_b, offs_b);
done:
    PyMem_Free(buf);
    Py_XDECREF(packed_b);
    Py_XDECREF(offs_b);
    arr_release(&v);
    return result;
}

/* unpack_positions(packed, chunks, count, lo, hi, chunk) -> bytes of uint32: positions [lo, hi) of
 * a field's `count`, as formats 2-5 store them; `packed` its packed file (with the padding),
 * `chunks` its chunk table.  Only the table entries of the chunks read are checked (a lookup does
 * not read the whole table): each within the file and not before the one it follows.
 * packed_positions.unpack_positions. */
static PyObject *k_unpack_positions(PyObject *self, PyObject *args) {
    PyObject *p_o, *c_o;
    long long count, lo, hi;
    Py_ssize_t chunk;
    if (!PyArg_ParseTuple(args, "OOLLLn", &p_o, &c_o, &count, &lo, &hi, &chunk)) return NULL;
    Arr p, t;
    PyObject *out_b = NULL;
    if (arr_get(p_o, &p, "packed") < 0) return NULL;
    if (arr_get_strided(c_o, &t, "chunks") < 0) {
        arr_release(&p);
        return NULL;
    }
    if (p.size != 1 || p.n < PACK_PADDING || chunk <= 0 || chunk > 4096 || count < 0 ||
        count > (long long)PY_SSIZE_T_MAX / 8 || t.n != (Py_ssize_t)((count + chunk - 1) / chunk) + 1) {
        corrupt("packed positions of the wrong shape");
        goto done;
    }
    if (lo < 0 || hi < lo || hi > count) {
        corrupt("positions beyond the positions");
        goto done;
    }
    out_b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(hi - lo) * 4);
    if (!out_b) goto done;
    uint32_t *out = (uint32_t *)PyBytes_AS_STRING(out_b);
    uint64_t len = (uint64_t)(p.n - PACK_PADDING);
    for (long long c = lo / chunk; hi > lo && c <= (hi - 1) / chunk; c++) {
        uint64_t off = at(&t, (Py_ssize_t)c), end = at(&t, (Py_ssize_t)c + 1);
        /* end first: an offset near 2**64 cannot wrap a difference taken after it */
        if (end > len || off > end) {
            Py_CLEAR(out_b);
            corrupt("positions chunk table out of order or beyond its file");
            goto done;
        }
        long long first = c * chunk, n = count - first < chunk ? count - first : chunk;
        long long a = lo > first ? lo : first, z = hi < first + n ? hi : first + n;
        if (unpack_pos_chunk(p.p + off, end - off, (Py_ssize_t)n, (Py_ssize_t)(a - first), (Py_ssize_t)(z - first),
                             out + (a - lo)) < 0) {
            Py_CLEAR(out_b);
            goto done;
        }
    }
done:
    arr_release(&t);
    arr_release(&p);
    return out_b;
}
