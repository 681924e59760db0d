/* Snippet windows, as snippet.py: best_window (where in the query terms' positions the window
 * is) and make_snippet (the window's text and highlights in a region of text).  Part of the
 * unity build _kernels.c (after rank.c). */

/* snippet.best_window on runs of positions: (term, occurrence) of the window's start in
 * out[0], out[1]; 0 if no term has a position, -1 (MemoryError) on failure. */
static int best_window_core(const int64_t *const *pos, const Py_ssize_t *len, Py_ssize_t T, int64_t width,
                            int64_t limit, Py_ssize_t out[2]) {
    Py_ssize_t total = 0;
    for (Py_ssize_t t = 0; t < T; t++) total += len[t];
    if (!total) return 0;
    int ok = -1;
    Py_ssize_t *head = PyMem_Calloc((size_t)T, sizeof(Py_ssize_t));
    Py_ssize_t *counts = PyMem_Calloc((size_t)T, sizeof(Py_ssize_t));
    int64_t *occ_pos = PyMem_Malloc((size_t)total * sizeof(int64_t));
    Py_ssize_t *occ_term = PyMem_Malloc((size_t)total * sizeof(Py_ssize_t));
    if (!head || !counts || !occ_pos || !occ_term) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t n = 0;
    for (;;) { /* merge by (position, term) */
        Py_ssize_t best = -1;
        int64_t bp = 0;
        for (Py_ssize_t t = 0; t < T; t++)
            if (head[t] < len[t] && (best < 0 || pos[t][head[t]] < bp)) {
                best = t;
                bp = pos[t][head[t]];
            }
        if (best < 0) break;
        occ_pos[n] = bp;
        occ_term[n++] = best;
        head[best]++;
    }
    Py_ssize_t j = 0, distinct = 0, best_a = 0, bk0 = 0, bk1 = 0, bk2 = 0;
    int have = 0;
    for (Py_ssize_t a = 0; a < n; a++) {
        int64_t start = occ_pos[a];
        while (j < n && occ_pos[j] < start + width) {
            if (!counts[occ_term[j]]++) distinct++;
            j++;
        }
        Py_ssize_t early = start < limit, cnt = early ? j - a : 0;
        if (!have || distinct > bk0 || (distinct == bk0 && (early > bk1 || (early == bk1 && cnt > bk2)))) {
            have = 1;
            bk0 = distinct;
            bk1 = early;
            bk2 = cnt;
            best_a = a;
        }
        if (!--counts[occ_term[a]]) distinct--;
    }
    /* which occurrence of its term the window's start is */
    out[0] = occ_term[best_a];
    out[1] = 0;
    for (Py_ssize_t a = 0; a < best_a; a++) out[1] += occ_term[a] == out[0];
    ok = 1;
done:
    PyMem_Free(head);
    PyMem_Free(counts);
    PyMem_Free(occ_pos);
    PyMem_Free(occ_term);
    return ok;
}

/* Per term, its positions as int64 buffers (held in views[:*held]). */
static int positions_get(PyObject *seq, Py_buffer *views, Py_ssize_t *held, const int64_t **pos, Py_ssize_t *len) {
    Py_ssize_t T = PySequence_Fast_GET_SIZE(seq);
    for (*held = 0; *held < T; (*held)++) {
        Py_buffer *v = &views[*held];
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, *held), v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
        const char *fmt = v->format ? v->format : "B";
        while (*fmt == '<' || *fmt == '=' || *fmt == '@') fmt++;
        if (v->itemsize != 8 || (strcmp(fmt, "q") != 0 && strcmp(fmt, "l") != 0)) {
            (*held)++;
            PyErr_SetString(PyExc_ValueError, "positions must be int64 arrays");
            return -1;
        }
        pos[*held] = v->buf;
        len[*held] = v->len / 8;
    }
    return 0;
}

/* best_window(positions, width, limit) -> (term, occurrence) or None: snippet.best_window.
 * `positions`: per query term, its ascending token positions in the body (int64 arrays, empty
 * where the term is not in it).  The window of `width` tokens starting at each occurrence is
 * scored by (distinct terms, starts before `limit`, occurrences if it does); the first of the best
 * wins. */
static PyObject *k_best_window(PyObject *mod, PyObject *args) {
    PyObject *seq_obj;
    int64_t width, limit;
    if (!PyArg_ParseTuple(args, "OLL", &seq_obj, &width, &limit)) return NULL;
    PyObject *seq = PySequence_Fast(seq_obj, "positions must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t T = PySequence_Fast_GET_SIZE(seq), held = 0, found[2];
    PyObject *result = NULL;
    Py_buffer *views = PyMem_Calloc((size_t)(T ? T : 1), sizeof(Py_buffer));
    const int64_t **pos = PyMem_Calloc((size_t)(T ? T : 1), sizeof(int64_t *));
    Py_ssize_t *len = PyMem_Calloc((size_t)(T ? T : 1), sizeof(Py_ssize_t));
    if (!views || !pos || !len) {
        PyErr_NoMemory();
        goto done;
    }
    if (positions_get(seq, views, &held, pos, len) < 0) goto done;
    int got = best_window_core(pos, len, T, width, limit, found);
    if (got < 0) goto done;
    result = got ? Py_BuildValue("(nn)", found[0], found[1]) : Py_NewRef(Py_None);
done:
    for (Py_ssize_t i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(pos);
    PyMem_Free(len);
    Py_DECREF(seq);
    return result;
}

/* -- make_snippet -------------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t start, end, term;
} Match;

static int match_cmp(const void *a, const void *b) {
    const Match *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->term > y->term) - (x->term < y->term);
}

/* A growing array of code points, the snippet being written. */
typedef struct {
    Py_UCS4 *p;
    Py_ssize_t n, cap;
} Out;

static int out_put(Out *o, Py_UCS4 c) {
    if (o->n == o->cap) {
        Py_ssize_t cap = o->cap ? 2 * o->cap : 512;
        Py_UCS4 *p = PyMem_Realloc(o->p, (size_t)cap * sizeof(Py_UCS4));
        if (!p) { PyErr_NoMemory(); return -1; }
        o->p = p;
        o->cap = cap;
    }
    o->p[o->n++] = c;
    return 0;
}

/* body[a:b] with each run of whitespace made one space (snippet._clean); with `lstrip`, the
 * leading whitespace dropped.  Returns the code points written, -1 on error. */
static Py_ssize_t out_clean(Out *o, int kind, const void *data, Py_ssize_t a, Py_ssize_t b, int lstrip) {
    Py_ssize_t before = o->n;
    int in_space = 0;
    for (Py_ssize_t i = a; i < b; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (Py_UNICODE_ISSPACE(c)) {
            in_space = 1;
            continue;
        }
        if (in_space && !(lstrip && o->n == before)) {
            if (out_put(o, ' ') < 0) return -1;
        }
        in_space = 0;
        if (out_put(o, c) < 0) return -1;
    }
    if (in_space && !(lstrip && o->n == before)) {
        if (out_put(o, ' ') < 0) return -1;
    }
    return o->n - before;
}

static int match_add(Match **matches, Py_ssize_t *n, Py_ssize_t *cap, Py_ssize_t start, Py_ssize_t end,
                     Py_ssize_t term) {
    if (*n == *cap) {
        Py_ssize_t want = *cap ? 2 * *cap : 64;
        Match *mm = PyMem_Realloc(*matches, (size_t)want * sizeof(Match));
        if (!mm) {
            PyErr_NoMemory();
            return -1;
        }
        *matches = mm;
        *cap = want;
    }
    (*matches)[*n].start = start;
    (*matches)[*n].end = end;
    (*matches)[(*n)++].term = term;
    return 0;
}

/* a == b over n bytes: a word is a few bytes, shorter than a call of memcmp */
static inline int same_bytes(const Py_UCS1 *a, const Py_UCS1 *b, Py_ssize_t n) {
    for (Py_ssize_t x = 0; x < n; x++)
        if (a[x] != b[x]) return 0;
    return 1;
}

/* Py_UNICODE_ISALNUM of each Latin-1 code point (filled on first use). */
static unsigned char latin1_alnum[256];
static int latin1_alnum_ready;

/* The word-bounded occurrences of `terms` in Latin-1 text `low` (n characters), found in one pass
 * over its words, when every term is a non-empty word of Latin-1 letters and digits (what the
 * analyzer makes): such an occurrence is exactly a maximal run of letters and digits equal to a
 * term, so one pass finds what a search for each term finds, in text order (which is the order the
 * matches sort in), at most max_occ a term.  `before`/`after`: whether the characters just outside
 * the text are letters or digits.  Returns 1 with the matches (offsets in `low`) appended; 0 where
 * a term is not such a word, or is given twice (the caller searches for each term); -1 on error. */
static int words_scan(PyObject *terms, Py_ssize_t n_terms, const Py_UCS1 *low, Py_ssize_t n, int before, int after,
                      Py_ssize_t max_occ, Match **matches, Py_ssize_t *n_matches, Py_ssize_t *cap) {
    enum { MAX_SCAN_TERMS = 64 };
    if (n_terms > MAX_SCAN_TERMS) return 0;
    if (!latin1_alnum_ready) {
        for (int c = 0; c < 256; c++) latin1_alnum[c] = (unsigned char)(Py_UNICODE_ISALNUM((Py_UCS4)c) != 0);
        latin1_alnum_ready = 1;
    }
    const Py_UCS1 *key[MAX_SCAN_TERMS];
    Py_ssize_t size[MAX_SCAN_TERMS], found[MAX_SCAN_TERMS];
    uint64_t head[MAX_SCAN_TERMS]; /* a term's first 8 bytes, packed: most words are compared whole in one */
    for (Py_ssize_t t = 0; t < n_terms; t++) {
        PyObject *term = PySequence_Fast_GET_ITEM(terms, t);
        if (PyUnicode_KIND(term) != PyUnicode_1BYTE_KIND || PyUnicode_GET_LENGTH(term) == 0) return 0;
        key[t] = PyUnicode_1BYTE_DATA(term);
        size[t] = PyUnicode_GET_LENGTH(term);
        found[t] = 0;
        head[t] = 0;
        for (Py_ssize_t x = 0; x < size[t]; x++) {
            if (!latin1_alnum[key[t][x]]) return 0;
            if (x < 8) head[t] |= (uint64_t)key[t][x] << (8 * x);
        }
        for (Py_ssize_t u = 0; u < t; u++) /* a term given twice matches twice, as the search does */
            if (size[u] == size[t] && same_bytes(key[u], key[t], size[t])) return 0;
    }
    Py_ssize_t live = max_occ > 0 ? n_terms : 0; /* terms that may still match */
    for (Py_ssize_t i = 0; i < n && live;) {
        if (!latin1_alnum[low[i]]) {
            i++;
            continue;
        }
        uint64_t h = low[i];
        Py_ssize_t j = i + 1;
        for (; j < n && latin1_alnum[low[j]]; j++)
            if (j - i < 8) h |= (uint64_t)low[j] << (8 * (j - i));
        if (!(i == 0 && before) && !(j == n && after))
            for (Py_ssize_t t = 0; t < n_terms; t++)
                if (head[t] == h && size[t] == j - i && found[t] < max_occ &&
                    (size[t] <= 8 || same_bytes(low + i + 8, key[t] + 8, size[t] - 8))) {
                    if (match_add(matches, n_matches, cap, i, j, t) < 0) return -1;
                    if (++found[t] == max_occ) live--;
                    break;
                }
        i = j;
    }
    return 1;
}

/* make_snippet(body, low, terms, window, lo, hi, complete, cut_before, lead, max_occurrences)
 *   -> (text, highlights)
 *
 * snippet.make_snippet after its first lines: `low` is body[lo:hi].lower() (the same length:
 * the caller checks), `terms` the sorted distinct terms.  Occurrences of each term in `low`,
 * word-bounded (joins(), on `low`, and on `body` just outside the region; a CJK bigram's may
 * overlap, and overlapping highlights are merged), at most
 * `max_occurrences` per term; the window of `window` characters with the most distinct terms,
 * then occurrences, earliest first; `lead` characters of context before it if it has room; cut at
 * spaces; whitespace runs collapsed; "… " and " …" marking cuts.  Highlights are (start, end)
 * offsets of the occurrences in the text. */
static PyObject *snippet_core(PyObject *body, PyObject *low, PyObject *terms_obj, Py_ssize_t window, Py_ssize_t lo,
                              Py_ssize_t hi, int complete, int cut_before, Py_ssize_t lead, Py_ssize_t max_occ) {
    Py_ssize_t n_body = PyUnicode_GET_LENGTH(body), n_low = PyUnicode_GET_LENGTH(low);
    if (lo < 0 || hi < lo || hi > n_body || n_low != hi - lo || window < 0 || lead < 0) {
        PyErr_SetString(PyExc_ValueError, "make_snippet: low must be body[lo:hi].lower(), of the same length");
        return NULL;
    }
    PyObject *terms = PySequence_Fast(terms_obj, "terms must be a sequence");
    if (!terms) return NULL;
    Py_ssize_t n_terms = PySequence_Fast_GET_SIZE(terms);
    int bk = PyUnicode_KIND(body), lk = PyUnicode_KIND(low);
    const void *bd = PyUnicode_DATA(body), *ld = PyUnicode_DATA(low);
    PyObject *result = NULL;
    Match *matches = NULL;
    Py_ssize_t n_matches = 0, cap_matches = 0, *counts = NULL;
    Out o = {NULL, 0, 0};
    PyObject *hl = NULL;

    /* the characters just outside the region (a space where there is none: it joins nothing) */
    Py_UCS4 before_c = lo > 0 ? PyUnicode_READ(bk, bd, lo - 1) : ' ';
    Py_UCS4 after_c = hi < n_body ? PyUnicode_READ(bk, bd, hi) : ' ';
    int before = joins(0, before_c), after = joins(0, after_c);
    for (Py_ssize_t ti = 0; ti < n_terms; ti++)
        if (!PyUnicode_Check(PySequence_Fast_GET_ITEM(terms, ti))) {
            PyErr_SetString(PyExc_TypeError, "terms must be str");
            goto done;
        }
    int scanned = lk == PyUnicode_1BYTE_KIND ? words_scan(terms, n_terms, ld, n_low, before, after, max_occ, &matches,
                                                          &n_matches, &cap_matches)
                                             : 0;
    if (scanned < 0) goto done;
    for (Py_ssize_t ti = 0; !scanned && ti < n_terms; ti++) {
        PyObject *t = PySequence_Fast_GET_ITEM(terms, ti);
        Py_ssize_t size = PyUnicode_GET_LENGTH(t);
        int tk = PyUnicode_KIND(t);
        const void *td = PyUnicode_DATA(t);
        Py_ssize_t found = 0, start = 0;
        int mode = size ? term_mode(PyUnicode_READ(tk, td, 0), size) : 0;
        while (found < max_occ) {
            /* low.find(t, start) */
            Py_ssize_t i = -1;
            if (lk == PyUnicode_1BYTE_KIND && tk == PyUnicode_1BYTE_KIND && size > 0) {
                const Py_UCS1 *L = ld, *key = td;
                for (Py_ssize_t x = start; x + size <= n_low;) {
                    const Py_UCS1 *p = memchr(L + x, key[0], (size_t)(n_low - size + 1 - x));
                    if (!p) break;
                    x = p - L;
                    if (memcmp(L + x, key, (size_t)size) == 0) {
                        i = x;
                        break;
                    }
                    x++;
                }
            } else {
                for (Py_ssize_t x = start; x + size <= n_low; x++) {
                    Py_ssize_t y = 0;
                    while (y < size && PyUnicode_READ(lk, ld, x + y) == PyUnicode_READ(tk, td, y)) y++;
                    if (y == size) { i = x; break; }
                }
            }
            if (i < 0) break;
            Py_ssize_t j = i + size;
            int left_ok = !joins(mode, i == 0 ? before_c : PyUnicode_READ(lk, ld, i - 1));
            int right_ok = !joins(mode, j == n_low ? after_c : PyUnicode_READ(lk, ld, j));
            if (left_ok && right_ok) {
                if (match_add(&matches, &n_matches, &cap_matches, lo + i, lo + j, ti) < 0) goto done;
                found++;
            }
            start = mode == 2 ? i + 1 : j; /* a CJK bigram's occurrences may overlap */
            if (size == 0) break; /* an empty term matches nowhere new */
        }
    }
    if (scanned)
        for (Py_ssize_t m = 0; m < n_matches; m++) { /* words_scan gives offsets in `low` */
            matches[m].start += lo;
            matches[m].end += lo;
        }
    if (!scanned) qsort(matches, (size_t)n_matches, sizeof(Match), match_cmp);

    /* two pointers: the best window by (distinct terms, occurrences, -start) */
    Py_ssize_t best_i = 0, best_j = 0, bd0 = 0, bd1 = 0, bd2 = 0, j = 0, distinct = 0;
    counts = PyMem_Calloc((size_t)(n_terms ? n_terms : 1), sizeof(Py_ssize_t));
    if (!counts) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n_matches; i++) {
        Py_ssize_t st = matches[i].start;
        while (j < n_matches && matches[j].end - st <= window) {
            if (!counts[matches[j].term]++) distinct++;
            j++;
        }
        Py_ssize_t cnt = j - i;
        if (distinct > bd0 || (distinct == bd0 && (cnt > bd1 || (cnt == bd1 && -st > bd2)))) {
            bd0 = distinct; bd1 = cnt; bd2 = -st;
            best_i = i; best_j = j;
        }
        if (j > i && !--counts[matches[i].term]) distinct--;
    }
    Py_ssize_t start, end, c0 = 0, c1 = 0; /* chosen matches [c0, c1) */
    if (best_j > best_i) {
        /* a CJK bigram overlapping the first match: the word's start, marked too */
        while (best_i > 0 && matches[best_i - 1].end > matches[best_i].start) best_i--;
        Py_ssize_t first_start = matches[best_i].start, last_end = matches[best_j - 1].end;
        Py_ssize_t slack = window - (last_end - first_start);
        if (slack < 0) slack = 0;
        start = first_start - (lead < slack ? lead : slack);
        if (start < 0) start = 0;
        end = last_end > start + window ? last_end : start + window;
        if (end > n_body) end = n_body;
        c0 = best_i;
        c1 = best_j;
    } else {
        start = lo;
        end = lo + window < n_body ? lo + window : n_body;
    }
    /* snap to spaces, never cutting a highlighted word */
    if (start > 0) {
        Py_ssize_t stop = c1 > c0 ? matches[c0].start : end;
        for (Py_ssize_t x = start; x < stop; x++)
            if (PyUnicode_READ(bk, bd, x) == ' ') { start = x + 1; break; }
    }
    if (end < n_body) {
        Py_ssize_t from = c1 > c0 ? matches[c1 - 1].end : start;
        for (Py_ssize_t x = end - 1; x >= from && x >= 0; x--)
            if (PyUnicode_READ(bk, bd, x) == ' ') {
                if (x > start) end = x;
                break;
            }
    }
    Py_ssize_t prefix = 0;
    if (start > 0 || cut_before) {
        if (out_put(&o, 0x2026) < 0 || out_put(&o, ' ') < 0) goto done;
        prefix = 2;
    }
    hl = PyList_New(0);
    if (!hl) goto done;
    Py_ssize_t cursor = start;
    Py_ssize_t last_hl = -1; /* where the last highlight ends in the text written */
    for (Py_ssize_t m = c0; m < c1; m++) {
        Py_ssize_t ms = matches[m].start, me = matches[m].end;
        if (ms < cursor && cursor < me && me <= end && last_hl == o.n) {
            /* overlapping the last highlight (the bigrams of a CJK word): that highlight grows */
            for (Py_ssize_t x = cursor; x < me; x++)
                if (out_put(&o, PyUnicode_READ(bk, bd, x)) < 0) goto done;
            Py_ssize_t last = PyList_GET_SIZE(hl) - 1;
            Py_ssize_t first_at = PyLong_AsSsize_t(PyTuple_GET_ITEM(PyList_GET_ITEM(hl, last), 0));
            PyObject *span = Py_BuildValue("(nn)", first_at, o.n);
            if (!span) goto done;
            if (PyList_SetItem(hl, last, span) < 0) goto done; /* steals span */
            last_hl = o.n;
            cursor = me;
            continue;
        }
        if (ms < cursor || me > end) continue;
        if (out_clean(&o, bk, bd, cursor, ms, o.n == prefix) < 0) goto done;
        Py_ssize_t at_ = o.n;
        for (Py_ssize_t x = ms; x < me; x++)
            if (out_put(&o, PyUnicode_READ(bk, bd, x)) < 0) goto done;
        PyObject *span = Py_BuildValue("(nn)", at_, o.n);
        if (!span || PyList_Append(hl, span) < 0) { Py_XDECREF(span); goto done; }
        Py_DECREF(span);
        last_hl = o.n;
        cursor = me;
    }
    if (out_clean(&o, bk, bd, cursor, end, o.n == prefix) < 0) goto done;
    while (o.n > prefix && Py_UNICODE_ISSPACE(o.p[o.n - 1])) o.n--; /* the tail's rstrip */
    if (end < n_body || !complete) {
        if (out_put(&o, ' ') < 0 || out_put(&o, 0x2026) < 0) goto done;
    }
    static const Py_UCS4 nothing[1] = {0};
    PyObject *text = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, o.p ? o.p : nothing, o.n);
    if (!text) goto done;
    PyObject *spans = PyList_AsTuple(hl);
    if (!spans) { Py_DECREF(text); goto done; }
    result = PyTuple_Pack(2, text, spans);
    Py_DECREF(text);
    Py_DECREF(spans);
done:
    PyMem_Free(matches);
    PyMem_Free(counts);
    PyMem_Free(o.p);
    Py_XDECREF(hl);
    Py_DECREF(terms);
    return result;
}

static PyObject *k_make_snippet(PyObject *mod, PyObject *args) {
    PyObject *body, *low, *terms;
    Py_ssize_t window, lo, hi, lead, max_occ;
    int complete, cut_before;
    if (!PyArg_ParseTuple(args, "UUOnnnppnn", &body, &low, &terms, &window, &lo, &hi, &complete, &cut_before, &lead,
                          &max_occ))
        return NULL;
    return snippet_core(body, low, terms, window, lo, hi, complete, cut_before, lead, max_occ);
}
