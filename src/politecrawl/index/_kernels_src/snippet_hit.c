/* A search hit's snippet from its stored body, as snippet_hit.py: snippet_at (from the body
 * decompressed so far: the occurrence, the region around it, its snippet) and snippet_hit (the
 * whole path for a body stored in LZ4 pieces, decompression called back).  Part of the unity
 * build _kernels.c (after snippet.c). */

/* -- snippet_at: a hit's snippet from its decompressed body ----------------------------------- */

/* s.lower(): for ASCII text a plain loop, else Python's own method (full case mapping). */
static PyObject *str_lower(PyObject *s) {
    if (!PyUnicode_IS_ASCII(s)) return PyObject_CallMethod(s, "lower", NULL);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    PyObject *out = PyUnicode_New(n, 127);
    if (!out) return NULL;
    const Py_UCS1 *src = PyUnicode_1BYTE_DATA(s);
    Py_UCS1 *dst = PyUnicode_1BYTE_DATA(out);
    for (Py_ssize_t i = 0; i < n; i++) dst[i] = src[i] >= 'A' && src[i] <= 'Z' ? src[i] + 32 : src[i];
    return out;
}

static int ascii_alnum(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* The code point of the UTF-8 sequence starting at data[j] (n bytes in all), -1 if invalid. */
static long utf8_at(const unsigned char *data, Py_ssize_t n, Py_ssize_t j) {
    unsigned char b = data[j];
    int size = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    if (b >= 0x80 && b < 0xC0) return -1;
    if (j + size > n) return -1;
    long cp = size == 1 ? b : size == 2 ? (b & 0x1F) : size == 3 ? (b & 0x0F) : (b & 0x07);
    for (int q = 1; q < size; q++) {
        if ((data[j + q] & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (data[j + q] & 0x3F);
    }
    return cp;
}

/* Whether the character ending at byte i (starting at byte j) is a letter or digit that joins a
 * word (joins(0, c): not CJK), as snippet_hit._alnum_before and snippet_hit._alnum_at decide it
 * (an invalid sequence is not). */
static int alnum_before(const unsigned char *data, Py_ssize_t n, Py_ssize_t i) {
    unsigned char b = data[i - 1];
    if (b < 0x80) return ascii_alnum(b);
    Py_ssize_t s = i - 1;
    while (s > 0 && i - s < 4 && data[s] >= 0x80 && data[s] < 0xC0) s--;
    long cp = utf8_at(data, i, s);
    return cp >= 0 && joins(0, (Py_UCS4)cp);
}

static int alnum_at(const unsigned char *data, Py_ssize_t n, Py_ssize_t j) {
    unsigned char b = data[j];
    if (b < 0x80) return ascii_alnum(b);
    long cp = utf8_at(data, n, j);
    return cp >= 0 && joins(0, (Py_UCS4)cp);
}

/* Bytes of data[0:b] that are not inside a character (bodies.utf8_complete). */
static Py_ssize_t utf8_complete(const unsigned char *raw, Py_ssize_t n) {
    for (Py_ssize_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char b = raw[n - back];
        if (b < 0x80) return n;
        if (b >= 0xC0) {
            int need = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
            return back >= need ? n : n - back;
        }
    }
    return n;
}

/* snippet_at(data, done, term, k, terms, window, lead, max_occurrences, before_chars,
 *            from_sync, scan_chars) -> (text, highlights) or int
 *
 * The rest of snippet_hit.snippet_for_hit once the body is decompressed from the sync point (or its
 * start) into `data` (`done`: all the rest of the body is there): the k-th word-bounded occurrence
 * of `term` (lower-case ASCII; ASCII letters of the text compared case-insensitively), the region
 * of text around it (snippet_hit._region), and the snippet of that region (make_snippet, `terms`
 * sorted and distinct).  Returns the snippet, or what the caller must do first:
 *     n > 0   decompress until data holds n bytes (n <= len(data): one more step), and call again
 *     -1      the occurrence is not there (tokens and text disagree): scan the prefix instead
 *     -2      too close after the sync point for the window's lead: start at the one before
 *     -3 - b  the region has a character whose lower case is longer (U+0130): render the region
 *             around byte b with the Python code */
static PyObject *snippet_at_core(const unsigned char *data, Py_ssize_t n, int done, PyObject *term, Py_ssize_t k,
                                 PyObject *terms, Py_ssize_t window, Py_ssize_t lead, Py_ssize_t max_occ,
                                 Py_ssize_t before_chars, int from_sync, Py_ssize_t scan_chars) {
    Py_ssize_t size = PyUnicode_GET_LENGTH(term);
    PyObject *result = NULL;
    if (!PyUnicode_IS_ASCII(term) || size == 0) {
        PyErr_SetString(PyExc_ValueError, "snippet_at: the term must be ASCII");
        goto out;
    }
    if (k < 0 || window < 0 || lead < 0 || max_occ < 0 || before_chars < 0 || scan_chars < 0 ||
        window > PY_SSIZE_T_MAX / 8 || before_chars > PY_SSIZE_T_MAX / 8) {
        PyErr_SetString(PyExc_ValueError, "snippet_at: counts and lengths must be >= 0");
        goto out;
    }
    const unsigned char *key = PyUnicode_1BYTE_DATA(term);
    /* 1. the k-th occurrence: candidates where the first byte matches in either case (memchr) */
    Py_ssize_t b = -1, seen = 0;
    unsigned char c_low = key[0], c_up = c_low >= 'a' && c_low <= 'z' ? (unsigned char)(c_low - 32) : c_low;
    const unsigned char *next_low = n ? memchr(data, c_low, (size_t)n) : NULL;
    const unsigned char *next_up = n && c_up != c_low ? memchr(data, c_up, (size_t)n) : NULL;
    for (Py_ssize_t i = 0;;) {
        if (next_low && next_low < data + i) next_low = i < n ? memchr(data + i, c_low, (size_t)(n - i)) : NULL;
        if (next_up && next_up < data + i) next_up = i < n ? memchr(data + i, c_up, (size_t)(n - i)) : NULL;
        const unsigned char *hit = !next_low ? next_up : !next_up ? next_low : next_low < next_up ? next_low : next_up;
        if (!hit) break;
        i = hit - data;
        if (i + size > n) break;
        Py_ssize_t q = 1;
        while (q < size && (unsigned char)(data[i + q] >= 'A' && data[i + q] <= 'Z' ? data[i + q] + 32 : data[i + q]) == key[q])
            q++;
        if (q < size) {
            i++;
            continue;
        }
        Py_ssize_t j = i + size;
        if (j + 4 > n && !done) { /* the word, or the character after it, may go on */
            result = PyLong_FromSsize_t(n >= scan_chars ? -1 : 0);
            goto out;
        }
        if ((i == 0 || !alnum_before(data, n, i)) && (j >= n || !alnum_at(data, n, j))) {
            if (seen == k) {
                b = i;
                break;
            }
            seen++;
        }
        i = j;
    }
    if (b < 0) {
        result = PyLong_FromSsize_t(done || n >= scan_chars ? -1 : 0);
        goto out;
    }
    /* 2. too close after a sync point for the window's lead? */
    if (from_sync && b < 4 * before_chars) {
        Py_ssize_t chars = 0;
        for (Py_ssize_t i = 0; i < b; i++) chars += (data[i] & 0xC0) != 0x80;
        if (chars < before_chars) {
            result = PyLong_FromSsize_t(-2);
            goto out;
        }
    }
    /* 3. the region: up to 4 * before_chars bytes before (whole characters), `after` characters
     * from the occurrence on (snippet_hit._region; the data is UTF-8, so characters are the bytes
     * that do not continue a sequence) */
    Py_ssize_t after = 2 * window + 1;
    Py_ssize_t first = b - 4 * before_chars > 0 ? b - 4 * before_chars : 0;
    while (first > 0 && data[first] >= 0x80 && data[first] < 0xC0) first++;
    int whole = 0;
    Py_ssize_t len = 0;
    for (Py_ssize_t want = b + after + 64;; want = b + 4 * after + 4) {
        if (n < want && !done) {
            result = PyLong_FromSsize_t(want);
            goto out;
        }
        Py_ssize_t last = n < want ? n : want;
        whole = done && last == n;
        len = whole ? last - b : utf8_complete(data + b, last - b);
        Py_ssize_t chars = 0;
        for (Py_ssize_t q = 0; q < len; q++) chars += (data[b + q] & 0xC0) != 0x80;
        if (chars >= after || whole || want == b + 4 * after + 4) break;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)data + first, b + len - first, "surrogatepass");
    if (!text) goto out;
    Py_ssize_t c = 0;
    for (Py_ssize_t q = first; q < b; q++) c += (data[q] & 0xC0) != 0x80;
    /* 4. make_snippet(text, terms, window, lo = c - lead, hi = c + 2 * window, ...) */
    Py_ssize_t lo = c - lead > 0 ? c - lead : 0, hi = c + 2 * window;
    { /* not from inside a run of CJK letters (snippet_hit._region_start): back to its start, or
       * up to 2 * lead before c, so that its first bigram is not cut in two */
        int tk = PyUnicode_KIND(text);
        const void *td = PyUnicode_DATA(text);
        while (lo > 0 && c - lo < 2 * lead && joins(1, PyUnicode_READ(tk, td, lo - 1)) &&
               joins(1, PyUnicode_READ(tk, td, lo)))
            lo--;
    }
    if (hi > PyUnicode_GET_LENGTH(text)) hi = PyUnicode_GET_LENGTH(text);
    PyObject *part = PyUnicode_Substring(text, lo, hi);
    PyObject *low = part ? str_lower(part) : NULL;
    Py_XDECREF(part);
    if (!low) {
        Py_DECREF(text);
        goto out;
    }
    if (PyUnicode_GET_LENGTH(low) != hi - lo) {
        result = PyLong_FromSsize_t(-3 - b);
    } else {
        result = snippet_core(text, low, terms, window, lo, hi, whole, from_sync || first > 0, lead, max_occ);
    }
    Py_DECREF(low);
    Py_DECREF(text);
out:
    return result;
}

static PyObject *k_snippet_at(PyObject *mod, PyObject *args) {
    Py_buffer dv;
    int done, from_sync;
    PyObject *term, *terms;
    Py_ssize_t k, window, lead, max_occ, before_chars, scan_chars;
    if (!PyArg_ParseTuple(args, "y*pUnOnnnnpn", &dv, &done, &term, &k, &terms, &window, &lead, &max_occ, &before_chars,
                          &from_sync, &scan_chars))
        return NULL;
    PyObject *result = snippet_at_core(dv.buf, dv.len, done, term, k, terms, window, lead, max_occ, before_chars,
                                       from_sync, scan_chars);
    PyBuffer_Release(&dv);
    return result;
}

/* -- snippet_hit: one hit's snippet, whole ------------------------------------------------- */

/* A stored body of LZ4 pieces (bodies.PieceStream): `data` grows a whole piece at a time,
 * decompressed by the Python callable `decompress` (lz4.block.decompress). */
typedef struct {
    const unsigned char *src;
    Py_ssize_t n_src, fed, next, n_ends;
    Py_ssize_t *ends; /* where the pieces after `fed` end */
    unsigned char *data;
    Py_ssize_t n, cap;
    int done;
    PyObject *decompress;
} Pieces;

static int pieces_open(Pieces *p, const unsigned char *src, Py_ssize_t n_src, const int64_t *rows, Py_ssize_t n_rows,
                       Py_ssize_t start, PyObject *decompress) {
    PyMem_Free(p->ends);
    p->ends = NULL;
    if (start < 0 || start > n_src) {
        PyErr_SetString(PyExc_ValueError, "corrupt segment: sync points outside the body");
        return -1;
    }
    p->src = src;
    p->n_src = n_src;
    p->fed = start;
    p->next = 0;
    p->n = 0;
    p->decompress = decompress;
    p->ends = PyMem_Malloc((size_t)(n_rows + 1) * sizeof(Py_ssize_t));
    if (!p->ends) {
        PyErr_NoMemory();
        return -1;
    }
    p->n_ends = 0;
    for (Py_ssize_t r = 0; r < n_rows; r++)
        if (rows[r * 3] > start) p->ends[p->n_ends++] = (Py_ssize_t)rows[r * 3];
    p->ends[p->n_ends++] = n_src;
    p->done = n_src <= start;
    return 0;
}

/* bodies.PieceStream.grow: pieces until `data` holds at_least bytes, or one more piece */
static int pieces_grow(Pieces *p, Py_ssize_t at_least) {
    Py_ssize_t target = at_least > p->n ? at_least : p->n + 1;
    while (p->n < target && !p->done) {
        Py_ssize_t end = p->ends[p->next++];
        if (end < p->fed || end > p->n_src) {
            PyErr_SetString(PyExc_ValueError, "corrupt segment: sync points outside the body");
            return -1;
        }
        PyObject *view = PyMemoryView_FromMemory((char *)p->src + p->fed, end - p->fed, PyBUF_READ);
        PyObject *piece = view ? PyObject_CallOneArg(p->decompress, view) : NULL;
        Py_XDECREF(view);
        if (!piece) return -1;
        if (!PyBytes_Check(piece)) {
            Py_DECREF(piece);
            PyErr_SetString(PyExc_TypeError, "decompress must return bytes");
            return -1;
        }
        Py_ssize_t len = PyBytes_GET_SIZE(piece);
        if (p->n + len > p->cap) {
            Py_ssize_t cap = (p->n + len) * 2;
            unsigned char *data = PyMem_Realloc(p->data, (size_t)cap);
            if (!data) {
                Py_DECREF(piece);
                PyErr_NoMemory();
                return -1;
            }
            p->data = data;
            p->cap = cap;
        }
        memcpy(p->data + p->n, PyBytes_AS_STRING(piece), (size_t)len);
        Py_DECREF(piece);
        p->n += len;
        p->fed = end;
        p->done = p->next == p->n_ends;
    }
    return 0;
}

/* The start of the body (no query term in it): snippet_for_hit's ensure(4 * window), then
 * make_snippet(text, terms, window, hi = 4 * window, complete = done).  None: the Python code. */
static PyObject *snippet_of_start(Pieces *p, PyObject *distinct, Py_ssize_t window, Py_ssize_t lead, Py_ssize_t max_occ) {
    Py_ssize_t want = 4 * window;
    for (;;) {
        if (p->done) break;
        Py_ssize_t usable = utf8_complete(p->data, p->n), chars = 0;
        for (Py_ssize_t q = 0; q < usable; q++) chars += (p->data[q] & 0xC0) != 0x80;
        if (!(p->n < want || (p->n < 4 * want && chars < want))) break;
        if (pieces_grow(p, want) < 0) return NULL;
    }
    Py_ssize_t usable = p->done ? p->n : utf8_complete(p->data, p->n);
    PyObject *text = PyUnicode_DecodeUTF8((const char *)p->data, usable, "surrogatepass");
    if (!text) return NULL;
    Py_ssize_t hi = PyUnicode_GET_LENGTH(text) < want ? PyUnicode_GET_LENGTH(text) : want;
    PyObject *part = PyUnicode_Substring(text, 0, hi);
    PyObject *low = part ? str_lower(part) : NULL;
    Py_XDECREF(part);
    PyObject *result = NULL;
    if (low && PyUnicode_GET_LENGTH(low) == hi)
        result = snippet_core(text, low, distinct, window, 0, hi, p->done, 0, lead, max_occ);
    else if (low)
        result = Py_NewRef(Py_None);
    Py_XDECREF(low);
    Py_DECREF(text);
    return result;
}

/* snippet_hit(compressed, sync, starts, positions, hit, terms, distinct, decompress, window, lead,
 *             max_occurrences, before_chars, scan_chars, width, prefer_before, scan_tokens,
 *             chars_per_token) -> (text, highlights) or None
 *
 * snippet_hit.snippet_for_hit for a body stored in LZ4 pieces, whole.  The hit's body positions are
 * runs as gather() lays them out (bytes of int64: run (hit, t) is positions[starts[hit * T + t]
 * : starts[hit * T + t + 1]], T the number of terms).  The window (best_window over them, those
 * past scan_tokens dropped where there is no sync point), the sync point before
 * it, the pieces from there (`decompress` called on each), then snippet_at's work; or the start of
 * the body if no term is in it.  `sync`: the body's (byte, char, token) rows, int64; `terms` the
 * query's terms in order, `distinct` sorted and distinct.  None where the Python code has to do it
 * (a term with non-ASCII letters, text and tokens that disagree, a lower case of another length). */
static PyObject *k_snippet_hit(PyObject *mod, PyObject *args) {
    Py_buffer cv, sv, rv, qv;
    PyObject *terms_obj, *distinct, *decompress;
    Py_ssize_t hit, window, lead, max_occ, before_chars, scan_chars, width, prefer_before, scan_tokens;
    double chars_per_token;
    if (!PyArg_ParseTuple(args, "y*y*y*y*nOOOnnnnnnnnd", &cv, &sv, &rv, &qv, &hit, &terms_obj, &distinct, &decompress,
                          &window, &lead, &max_occ, &before_chars, &scan_chars, &width, &prefer_before, &scan_tokens,
                          &chars_per_token))
        return NULL;
    PyObject *result = NULL, *terms = NULL;
    const int64_t **pos = NULL;
    Py_ssize_t *len = NULL, found[2];
    Pieces p;
    memset(&p, 0, sizeof(p));
    const unsigned char *src = cv.buf;
    const int64_t *rows = sv.buf, *run_starts = rv.buf, *all_pos = qv.buf;
    Py_ssize_t n_rows = sv.len / 24, n_starts = rv.len / 8, n_pos = qv.len / 8;
    if (!(terms = PySequence_Fast(terms_obj, "terms must be a sequence"))) goto done;
    Py_ssize_t T = PySequence_Fast_GET_SIZE(terms);
    if (sv.len % 24 || hit < 0 || (hit + 1) * T >= n_starts || rv.len % 8 || qv.len % 8) {
        PyErr_SetString(PyExc_ValueError, "snippet_hit: sync rows of three, a run of positions per term and hit");
        goto done;
    }
    pos = PyMem_Calloc((size_t)(T ? T : 1), sizeof(int64_t *));
    len = PyMem_Calloc((size_t)(T ? T : 1), sizeof(Py_ssize_t));
    if (!pos || !len) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t t = 0; t < T; t++) {
        int64_t a = run_starts[hit * T + t], z = run_starts[hit * T + t + 1];
        if (a < 0 || z < a || z > n_pos) {
            PyErr_SetString(PyExc_ValueError, "snippet_hit: bad runs");
            goto done;
        }
        pos[t] = all_pos + a;
        len[t] = (Py_ssize_t)(z - a);
    }
    if (!n_rows) /* reading from the start: how far is bounded */
        for (Py_ssize_t t = 0; t < T; t++)
            while (len[t] && pos[t][len[t] - 1] >= scan_tokens) len[t]--;
    int got = best_window_core(pos, len, T, width, prefer_before, found);
    if (got < 0) goto done;
    if (!got) { /* no query term in the body: its start */
        if (pieces_open(&p, src, cv.len, rows, n_rows, 0, decompress) < 0) goto done;
        result = snippet_of_start(&p, distinct, window, lead, max_occ);
        goto done;
    }
    PyObject *term = PySequence_Fast_GET_ITEM(terms, found[0]);
    if (!PyUnicode_Check(term) || !PyUnicode_IS_ASCII(term) || !PyUnicode_GET_LENGTH(term)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    const int64_t *tp = pos[found[0]];
    int64_t token = tp[found[1]];
    Py_ssize_t r = -1; /* the last sync point at or before the window's token */
    while (r + 1 < n_rows && rows[(r + 1) * 3 + 2] <= token) r++;
    for (;;) {
        Py_ssize_t start = 0, k = found[1];
        int64_t from_token = 0;
        double cpt = n_rows ? (double)rows[1] / (double)(rows[2] > 1 ? rows[2] : 1) : chars_per_token;
        if (r >= 0) {
            start = (Py_ssize_t)rows[r * 3];
            from_token = rows[r * 3 + 2];
            cpt = (double)rows[r * 3 + 1] / (double)(from_token > 1 ? from_token : 1);
            Py_ssize_t before = 0; /* the term's occurrences before the sync point */
            while (before < len[found[0]] && tp[before] < from_token) before++;
            k = found[1] - before;
        }
        if (pieces_open(&p, src, cv.len, rows, n_rows, start, decompress) < 0) goto done;
        /* one step to about the window, from the token's distance */
        double guess = ((double)(token - from_token) * cpt) * 1.1; /* past the body: the whole body */
        Py_ssize_t est = (guess >= 0.0 && guess < (double)cv.len ? (Py_ssize_t)guess : cv.len) + 2 * window + 128;
        if (pieces_grow(&p, est) < 0) goto done;
        for (;;) {
            PyObject *out = snippet_at_core(p.data, p.n, p.done, term, k, distinct, window, lead, max_occ, before_chars,
                                            r >= 0, scan_chars);
            if (!out) goto done;
            if (!PyLong_Check(out)) {
                result = out;
                goto done;
            }
            Py_ssize_t code = PyLong_AsSsize_t(out);
            Py_DECREF(out);
            if (code >= 0) {
                if (pieces_grow(&p, code > p.n ? code : 0) < 0) goto done;
                continue;
            }
            if (code == -2) break; /* too close after the sync point: the one before */
            result = Py_NewRef(Py_None);
            goto done;
        }
        r--;
    }
done:
    PyMem_Free(pos);
    PyMem_Free(len);
    PyMem_Free(p.ends);
    PyMem_Free(p.data);
    Py_XDECREF(terms);
    PyBuffer_Release(&cv);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&rv);
    PyBuffer_Release(&qv);
    return result;
}
