/* The analyser's word splitting, compiled: tokens(...), and the scan Vocabulary.term_ids(...)
 * (vocabulary.c) runs too.
 *
 * Both take text that analysis._normalize has already normalized (NFKC, casefold: that stays in
 * Python, where unicodedata does it) and cut it into the maximal runs of characters that
 * str.isalnum() accepts (Py_UNICODE_ISALNUM is what it tests), each run cut where CJK and other
 * characters meet and each CJK piece made its overlapping bigrams (run_pieces; is_cjk is in
 * common.h), dropping other pieces longer than max_len code points and, when a stop-word set is
 * given, the tokens in it.  That is analysis._split_words plus Analyzer.tokenize's filters,
 * character for character (tests/unit/test_index_tokens.py compares them on every code point).
 * Part of the unity build _kernels.c. */

/* ASCII letters and digits: str.isalnum() on the first 128 code points. */
static const unsigned char ascii_word[128] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1,
    ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1,
    ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1,
    ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1,
    ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1,
};

static inline int is_word_char(Py_UCS4 ch) { return ch < 128 ? ascii_word[ch] : Py_UNICODE_ISALNUM(ch); }

/* Called with each token of a run of letters and digits, as [s, e) of the text; 0, or -1 with an
 * exception set. */
typedef int (*piece_sink)(Py_ssize_t s, Py_ssize_t e, void *state);

/* The tokens of the run [s, e) of non-ASCII text: the run cut where CJK and other characters meet,
 * each CJK piece as its overlapping bigrams (itself if one character), each other piece whole if
 * at most max_len characters (analysis.Analyzer._groups). */
static int run_pieces(int kind, const void *data, Py_ssize_t s, Py_ssize_t e, Py_ssize_t max_len, piece_sink sink,
                      void *state) {
    Py_ssize_t a = s;
    while (a < e) {
        int cjk = is_cjk(PyUnicode_READ(kind, data, a));
        Py_ssize_t b = a + 1;
        while (b < e && is_cjk(PyUnicode_READ(kind, data, b)) == cjk) b++;
        if (cjk && b - a > 1) {
            for (Py_ssize_t x = a; x + 1 < b; x++)
                if (sink(x, x + 2, state) < 0) return -1;
        } else if (cjk || b - a <= max_len) {
            if (sink(a, b, state) < 0) return -1;
        }
        a = b;
    }
    return 0;
}

/* The next word of `data` (n characters of `kind`; `ascii`: one byte each) from *i: its start,
 * with *i moved past its end (start == *i: no word left). The one scan both tokens() and
 * Vocabulary.term_ids() run, so they split text alike. */
static inline Py_ssize_t next_word(int ascii, int kind, const void *data, Py_ssize_t n, Py_ssize_t *i) {
    Py_ssize_t at = *i, s;
    if (ascii) {
        const unsigned char *b = (const unsigned char *)data;
        while (at < n && !ascii_word[b[at]]) at++;
        s = at;
        while (at < n && ascii_word[b[at]]) at++;
    } else {
        while (at < n && !is_word_char(PyUnicode_READ(kind, data, at))) at++;
        s = at;
        while (at < n && is_word_char(PyUnicode_READ(kind, data, at))) at++;
    }
    *i = at;
    return s;
}

/* Called with each token in order; returns 0, or -1 with an exception set. */
typedef int (*token_sink)(PyObject *token, void *state);

/* One token of split_words: a new str handed to `sink` unless it is a stop word. */
static int split_token(PyObject *tok, PyObject *stop, token_sink sink, void *state) {
    if (!tok) return -1;
    if (stop) {
        int in = PySet_Contains(stop, tok);
        if (in != 0) {
            Py_DECREF(tok);
            return in < 0 ? -1 : 0;
        }
    }
    int rc = sink(tok, state);
    Py_DECREF(tok);
    return rc;
}

typedef struct {
    PyObject *text, *stop;
    token_sink sink;
    void *state;
} SplitState;

static int split_piece(Py_ssize_t s, Py_ssize_t e, void *state) {
    SplitState *st = state;
    return split_token(PyUnicode_Substring(st->text, s, e), st->stop, st->sink, st->state);
}

/* The tokens of `text` (see the top of this file), each a new str handed to `sink`. */
static int split_words(PyObject *text, Py_ssize_t max_len, PyObject *stop, token_sink sink, void *state) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    int ascii = PyUnicode_IS_ASCII(text);
    SplitState pieces = {text, stop, sink, state};
    Py_ssize_t i = 0;
    while (i < n) {
        Py_ssize_t s = next_word(ascii, kind, data, n, &i);
        if (i == s) continue;
        if (!ascii) { /* CJK runs are cut into bigrams */
            if (run_pieces(kind, data, s, i, max_len, split_piece, &pieces) < 0) return -1;
            continue;
        }
        if (i - s > max_len) continue;
        /* the common case, without PyUnicode_Substring's checks */
        PyObject *tok = PyUnicode_New(i - s, 127);
        if (tok) memcpy(PyUnicode_1BYTE_DATA(tok), (const unsigned char *)data + s, (size_t)(i - s));
        if (split_token(tok, stop, sink, state) < 0) return -1;
    }
    return 0;
}

static int parse_text_args(PyObject *args, PyObject **text, Py_ssize_t *max_len, PyObject **stop) {
    *stop = Py_None;
    if (!PyArg_ParseTuple(args, "Un|O", text, max_len, stop)) return -1;
    if (*stop == Py_None) {
        *stop = NULL;
    } else if (!PyAnySet_Check(*stop)) {
        PyErr_SetString(PyExc_TypeError, "stop words: expected a set or a frozenset, or None");
        return -1;
    }
    return 0;
}

static int sink_append(PyObject *token, void *state) { return PyList_Append((PyObject *)state, token); }

/* tokens(text, max_len, stop=None) -> list[str] */
static PyObject *k_tokens(PyObject *self, PyObject *args) {
    PyObject *text, *stop;
    Py_ssize_t max_len;
    if (parse_text_args(args, &text, &max_len, &stop) < 0) return NULL;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    if (split_words(text, max_len, stop, sink_append, out) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}
