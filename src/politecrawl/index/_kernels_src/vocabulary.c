/* The segment writer's vocabulary: Vocabulary (a hash table of the terms' UTF-8 bytes) and its
 * term_ids(...), which cuts text into words as analysis.c does (next_word, run_pieces).
 *
 * Vocabulary.term_ids is what the segment writer calls for each field of each document: the
 * words go straight into the segment's vocabulary (a hash table of their UTF-8 bytes: a new term
 * gets the next id) and come out as int32 ids.  No str is made for a word already in it, nor a
 * list of tokens, nor a Python int per token: making a str per token cost about as much as the
 * rest of the writer's per-token work.  In ASCII text a word shorter than 8 bytes (most words)
 * is found, lower-cased and looked up from one 8-byte read (SWAR_WORDS): a loop per byte, with
 * its mispredicted exit at every word's end, cost more than the lookup itself.
 * Part of the unity build _kernels.c (after analysis.c). */

/* -- Vocabulary ----------------------------------------------------------------------------- */

/* Terms are keys: their UTF-8 bytes, one after the other in `arena` (key k ends at key_end[k]).
 * A key is a term (key_id[k] = its id) or, with stop words, a stop word (key_id[k] = -1: looked
 * up like a term, never given an id, so the vocabulary holds only the terms of some token).
 * The table is open addressing, linear probing, at most half full.  A slot holds the key's
 * first 8 bytes (`head`), its hash and its value: the term id + 1, or for a stop word
 * STOP_FLAG | key + 1 (0: empty).  A key of at most 8 bytes is its head, zero-padded; a longer
 * one's head ends in 0xFF, a byte UTF-8 never holds, so no short key's head equals it.  So a
 * word of at most 8 bytes (most words) is found from its slot alone, without reading the arena. */
#define STOP_FLAG 0x80000000u

typedef struct {
    uint64_t head;
    uint32_t hash, value;
} Slot;

typedef struct {
    PyObject_HEAD
    Slot *slots;
    Py_ssize_t mask, n_keys, keys_cap;
    char *arena;
    size_t arena_len, arena_cap;
    uint32_t *key_end;
    int32_t *id_key; /* term id -> key */
    Py_ssize_t n_terms;
    /* scratch: one token's UTF-8 bytes, and the ids of one call */
    char *word;
    Py_ssize_t word_cap;
    int32_t *ids;
    Py_ssize_t ids_cap;
} Vocabulary;

static void Vocabulary_dealloc(Vocabulary *v) {
    PyMem_Free(v->slots);
    PyMem_Free(v->arena);
    PyMem_Free(v->key_end);
    PyMem_Free(v->id_key);
    PyMem_Free(v->word);
    PyMem_Free(v->ids);
    Py_TYPE(v)->tp_free((PyObject *)v);
}

static inline uint64_t word_head(const unsigned char *w, Py_ssize_t n) {
    uint64_t head = 0;
    if (n <= 8) {
        memcpy(&head, w, (size_t)n);
    } else {
        memcpy(&head, w, 7);
        head |= (uint64_t)0xFF << 56;
    }
    return head;
}

/* A word's hash: of its head alone for a word of at most 8 bytes (the head holds all of it:
 * the bytes are not read again), of all its bytes for a longer one. */
static inline uint32_t word_hash(const unsigned char *p, Py_ssize_t n, uint64_t head) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    if (n <= 8) {
        h = (h ^ head) * 0xC4CEB9FE1A85EC53ULL;
    } else {
        while (n >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
            h ^= h >> 32;
            p += 8;
            n -= 8;
        }
        uint64_t w = 0;
        memcpy(&w, p, (size_t)n);
        h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    }
    h ^= h >> 29;
    h *= 0xFF51AFD7ED558CCDULL;
    return (uint32_t)(h >> 32);
}

static int vocab_grow_table(Vocabulary *v) {
    Py_ssize_t size = v->slots ? 2 * (v->mask + 1) : 1024;
    Slot *slots = PyMem_Calloc((size_t)size, sizeof(Slot));
    if (!slots) return -1;
    for (Py_ssize_t i = 0; v->slots && i <= v->mask; i++) {
        Slot e = v->slots[i];
        if (!e.value) continue;
        Py_ssize_t j = (Py_ssize_t)e.hash & (size - 1);
        while (slots[j].value) j = (j + 1) & (size - 1);
        slots[j] = e;
    }
    PyMem_Free(v->slots);
    v->slots = slots;
    v->mask = size - 1;
    return 0;
}

static int vocab_grow_keys(Vocabulary *v) {
    Py_ssize_t cap = v->keys_cap ? 2 * v->keys_cap : 1024;
    uint32_t *end = PyMem_Realloc(v->key_end, (size_t)cap * sizeof(uint32_t));
    if (end) v->key_end = end;
    int32_t *idk = PyMem_Realloc(v->id_key, (size_t)cap * sizeof(int32_t));
    if (idk) v->id_key = idk;
    if (!end || !idk) return -1;
    v->keys_cap = cap;
    return 0;
}

static inline const char *key_bytes(const Vocabulary *v, Py_ssize_t k, Py_ssize_t *len) {
    size_t start = k ? v->key_end[k - 1] : 0;
    *len = (Py_ssize_t)(v->key_end[k] - start);
    return v->arena + start;
}

static inline Py_ssize_t slot_key(const Vocabulary *v, uint32_t value) {
    return value & STOP_FLAG ? (Py_ssize_t)(value & ~STOP_FLAG) - 1 : v->id_key[value - 1];
}

/* The id of the word (UTF-8 bytes, `head` its word_head), added if new; -1 for a stop word, -2
 * on error. */
static int64_t vocab_id_head(Vocabulary *v, const unsigned char *w, Py_ssize_t n, uint64_t head, PyObject *stop) {
    uint32_t h = word_hash(w, n, head);
    Py_ssize_t j = h & v->mask;
    for (;;) {
        Slot *e = &v->slots[j];
        if (!e->value) break;
        if (e->hash == h && e->head == head) {
            if (n <= 8) return e->value & STOP_FLAG ? -1 : (int64_t)e->value - 1;
            Py_ssize_t len;
            const char *kb = key_bytes(v, slot_key(v, e->value), &len);
            if (len == n && memcmp(kb, w, (size_t)n) == 0) return e->value & STOP_FLAG ? -1 : (int64_t)e->value - 1;
        }
        j = (j + 1) & v->mask;
    }
    /* a new key */
    int is_stop = 0;
    if (stop) {
        PyObject *tok = PyUnicode_DecodeUTF8((const char *)w, n, "strict");
        if (!tok) return -2;
        is_stop = PySet_Contains(stop, tok);
        Py_DECREF(tok);
        if (is_stop < 0) return -2;
    }
    if (v->n_keys >= INT32_MAX - 1 || v->arena_len + (size_t)n > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "vocabulary too large: more than 2**31 terms or 4 GB of them");
        return -2;
    }
    if (v->n_keys == v->keys_cap && vocab_grow_keys(v) < 0) goto nomem;
    if (v->arena_len + (size_t)n > v->arena_cap) {
        size_t cap = v->arena_cap ? 2 * v->arena_cap : 16384;
        while (cap < v->arena_len + (size_t)n) cap *= 2;
        char *arena = PyMem_Realloc(v->arena, cap);
        if (!arena) goto nomem;
        v->arena = arena;
        v->arena_cap = cap;
    }
    memcpy(v->arena + v->arena_len, w, (size_t)n);
    v->arena_len += (size_t)n;
    Py_ssize_t k = v->n_keys++;
    v->key_end[k] = (uint32_t)v->arena_len;
    int32_t id = -1;
    uint32_t value = STOP_FLAG | (uint32_t)(k + 1);
    if (!is_stop) {
        id = (int32_t)v->n_terms++;
        v->id_key[id] = (int32_t)k;
        value = (uint32_t)id + 1;
    }
    v->slots[j] = (Slot){head, h, value};
    if (2 * v->n_keys > v->mask && vocab_grow_table(v) < 0) goto nomem;
    return id;
nomem:
    PyErr_NoMemory();
    return -2;
}

static int64_t vocab_id(Vocabulary *v, const unsigned char *w, Py_ssize_t n, PyObject *stop) {
    return vocab_id_head(v, w, n, word_head(w, n), stop);
}

/* -- ASCII text eight bytes at a time ------------------------------------------------------- */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__GNUC__)
#define SWAR_WORDS 1
#define BYTES(c) (0x0101010101010101ULL * (uint64_t)(c))

/* Per byte of x (8 bytes of ASCII text, each < 0x80): 0x80 where it is in [lo, hi]. Neither sum
 * carries into the next byte. */
static inline uint64_t bytes_in(uint64_t x, unsigned lo, unsigned hi) {
    return (x + BYTES(0x80 - lo)) & ~(x + BYTES(0x7F - hi)) & BYTES(0x80);
}

/* 0x80 in each byte of x that is an ASCII letter or digit (ascii_word). */
static inline uint64_t word_bytes(uint64_t x) {
    return bytes_in(x, '0', '9') | bytes_in(x | BYTES(0x20), 'a', 'z');
}
#endif

/* A token's UTF-8 bytes in v->word (tokens are letters and digits: never a surrogate). */
static int grow_word(Vocabulary *v, Py_ssize_t need) {
    char *w = PyMem_Realloc(v->word, (size_t)need);
    if (!w) {
        PyErr_NoMemory();
        return -1;
    }
    v->word = w;
    v->word_cap = need;
    return 0;
}

static int word_utf8(Vocabulary *v, int kind, const void *data, Py_ssize_t s, Py_ssize_t e) {
    Py_ssize_t need = 4 * (e - s);
    if (need > v->word_cap && grow_word(v, need) < 0) return -1;
    unsigned char *o = (unsigned char *)v->word;
    for (Py_ssize_t i = s; i < e; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 0x80) {
            *o++ = (unsigned char)c;
        } else if (c < 0x800) {
            *o++ = (unsigned char)(0xC0 | (c >> 6));
            *o++ = (unsigned char)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            *o++ = (unsigned char)(0xE0 | (c >> 12));
            *o++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            *o++ = (unsigned char)(0x80 | (c & 0x3F));
        } else {
            *o++ = (unsigned char)(0xF0 | (c >> 18));
            *o++ = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
            *o++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            *o++ = (unsigned char)(0x80 | (c & 0x3F));
        }
    }
    return (int)(o - (unsigned char *)v->word);
}

/* v->ids[count] = id, the array grown if need be; -1 (MemoryError) on failure. */
static int append_id(Vocabulary *v, Py_ssize_t count, int64_t id) {
    if (count == v->ids_cap) {
        Py_ssize_t cap = v->ids_cap ? 2 * v->ids_cap : 4096;
        int32_t *ids = PyMem_Realloc(v->ids, (size_t)cap * sizeof(int32_t));
        if (!ids) {
            PyErr_NoMemory();
            return -1;
        }
        v->ids = ids;
        v->ids_cap = cap;
    }
    v->ids[count] = (int32_t)id;
    return 0;
}

typedef struct {
    Vocabulary *v;
    int kind;
    const void *data;
    PyObject *stop;
    Py_ssize_t count;
} TermState;

/* One token of a non-ASCII run (run_pieces): its id appended to v->ids, unless a stop word. */
static int term_piece(Py_ssize_t s, Py_ssize_t e, void *state) {
    TermState *ts = state;
    int len = word_utf8(ts->v, ts->kind, ts->data, s, e);
    int64_t id = len < 0 ? -2 : vocab_id(ts->v, (const unsigned char *)ts->v->word, len, ts->stop);
    if (id == -2) return -1;
    if (id < 0) return 0; /* a stop word */
    if (append_id(ts->v, ts->count, id) < 0) return -1;
    ts->count++;
    return 0;
}

/* term_ids(text, max_len, stop, lower) -> bytes: the ids of the words of text (see the top of
 * this file), int32 in native order; new terms are added.  lower: text is ASCII and not yet
 * normalized, which for ASCII is lower-casing it (analysis._normalize), done here word by word. */
static PyObject *Vocabulary_term_ids(Vocabulary *v, PyObject *args) {
    PyObject *text, *stop;
    Py_ssize_t max_len;
    int lower;
    if (!PyArg_ParseTuple(args, "UnOp", &text, &max_len, &stop, &lower)) return NULL;
    if (stop == Py_None) {
        stop = NULL;
    } else if (!PyAnySet_Check(stop)) {
        PyErr_SetString(PyExc_TypeError, "stop words: expected a set or a frozenset, or None");
        return NULL;
    }
    if (lower && !PyUnicode_IS_ASCII(text)) {
        PyErr_SetString(PyExc_ValueError, "term_ids: only ASCII text is lower-cased here");
        return NULL;
    }
    if (!v->slots && vocab_grow_table(v) < 0) return PyErr_NoMemory();
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    int ascii = PyUnicode_IS_ASCII(text);
    const unsigned char *b = (const unsigned char *)data;
    Py_ssize_t count = 0, i = 0;
    while (i < n) {
        int64_t id = -3; /* not found yet */
#ifdef SWAR_WORDS
        /* ASCII with 8 bytes to read: the next word found, and if it is shorter than 8 bytes,
         * lower-cased and made its head at once, without a step per byte (most words). */
        if (ascii && i + 8 <= n) {
            uint64_t x, found;
            memcpy(&x, b + i, 8);
            found = word_bytes(x);
            if (!found) {
                i += 8;
                continue;
            }
            i += __builtin_ctzll(found) >> 3;
            if (i + 8 <= n) {
                memcpy(&x, b + i, 8);
                uint64_t ends = ~word_bytes(x) & BYTES(0x80);
                if (ends) {
                    Py_ssize_t len = __builtin_ctzll(ends) >> 3; /* 1 to 7: b[i] is a word byte */
                    i += len;
                    if (len > max_len) continue;
                    if (lower) x |= bytes_in(x, 'A', 'Z') >> 2;
                    uint64_t head = x & ((1ULL << (8 * len)) - 1);
                    id = vocab_id_head(v, (const unsigned char *)&head, len, head, stop);
                }
            }
            /* else a word of 8 bytes or more, or near the end: a byte at a time, below */
        }
#endif
        if (id == -3) {
            Py_ssize_t s = next_word(ascii, kind, data, n, &i);
            if (i == s || (ascii && i - s > max_len)) continue; /* else run_pieces drops long pieces */
            if (ascii && lower) {
                if (i - s > v->word_cap && grow_word(v, i - s) < 0) return NULL;
                unsigned char *o = (unsigned char *)v->word;
                for (Py_ssize_t c = s; c < i; c++) o[c - s] = b[c] >= 'A' && b[c] <= 'Z' ? b[c] + 32 : b[c];
                id = vocab_id(v, o, i - s, stop);
            } else if (ascii) {
                id = vocab_id(v, b + s, i - s, stop);
            } else {
                /* CJK runs are cut into bigrams: each piece of the run looked up and appended */
                TermState ts = {v, kind, data, stop, count};
                if (run_pieces(kind, data, s, i, max_len, term_piece, &ts) < 0) return NULL;
                count = ts.count;
                continue;
            }
        }
        if (id == -2) return NULL;
        if (id < 0) continue; /* a stop word */
        if (append_id(v, count, id) < 0) return NULL;
        count++;
    }
    return PyBytes_FromStringAndSize((const char *)v->ids, count * (Py_ssize_t)sizeof(int32_t));
}

/* terms() -> list[str]: the terms in id order. */
static PyObject *Vocabulary_terms(Vocabulary *v, PyObject *unused) {
    PyObject *out = PyList_New(v->n_terms);
    if (!out) return NULL;
    for (Py_ssize_t t = 0; t < v->n_terms; t++) {
        Py_ssize_t len;
        const char *kb = key_bytes(v, v->id_key[t], &len);
        PyObject *s = PyUnicode_DecodeUTF8(kb, len, "strict");
        if (!s) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, t, s);
    }
    return out;
}

/* A term to sort: its first 8 bytes as a big-endian number (zero-padded: a term holds no zero
 * byte, so this orders as the bytes do, a prefix first) and its id. */
typedef struct {
    uint64_t head;
    int32_t id;
} SortItem;

static const Vocabulary *sorting; /* qsort has no context argument; the GIL is held */

static int cmp_sort_items(const void *a, const void *b) {
    const SortItem *x = a, *y = b;
    if (x->head != y->head) return x->head < y->head ? -1 : 1;
    Py_ssize_t na, nb;
    const char *ka = key_bytes(sorting, sorting->id_key[x->id], &na);
    const char *kb = key_bytes(sorting, sorting->id_key[y->id], &nb);
    int c = memcmp(ka, kb, (size_t)(na < nb ? na : nb));
    return c ? c : (na > nb) - (na < nb);
}

/* Sort `n` items by head, then (a tie: two terms of more than 7 bytes that share their first 8)
 * by their bytes: an LSD radix sort of the heads a byte at a time (a pass is skipped where every
 * head has the same byte there, as the first byte of most words of one script), then a qsort of
 * each run of equal heads.  *items may be swapped for the scratch array; -1: out of memory. */
static int sort_items(const Vocabulary *v, SortItem **items, Py_ssize_t n) {
    SortItem *a = *items, *b = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(SortItem));
    if (!b) return -1;
    for (int shift = 0; shift < 64; shift += 8) {
        Py_ssize_t count[257] = {0};
        for (Py_ssize_t i = 0; i < n; i++) count[((a[i].head >> shift) & 0xFF) + 1]++;
        if (n && count[((a[0].head >> shift) & 0xFF) + 1] == n) continue; /* one byte for all */
        for (int d = 1; d < 257; d++) count[d] += count[d - 1];
        for (Py_ssize_t i = 0; i < n; i++) b[count[(a[i].head >> shift) & 0xFF]++] = a[i];
        SortItem *t = a;
        a = b;
        b = t;
    }
    PyMem_Free(b);
    *items = a;
    sorting = v;
    for (Py_ssize_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && a[j].head == a[i].head;) j++;
        if (j - i > 1) qsort(a + i, (size_t)(j - i), sizeof(SortItem), cmp_sort_items);
    }
    sorting = NULL;
    return 0;
}

/* sorted_terms() -> (blob, rank): the terms sorted (UTF-8 byte order, which is code point
 * order: Python's sorted() of the str), one per line, as a segment's terms.txt; and per term id
 * its place in that order (int32 bytes).  Sorted by their first 8 bytes, held with the ids
 * (sort_items), so most terms are placed without reading them. */
static PyObject *Vocabulary_sorted_terms(Vocabulary *v, PyObject *unused) {
    Py_ssize_t n = v->n_terms;
    SortItem *items = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(SortItem));
    if (!items) return PyErr_NoMemory();
    for (Py_ssize_t t = 0; t < n; t++) {
        Py_ssize_t len;
        const unsigned char *kb = (const unsigned char *)key_bytes(v, v->id_key[t], &len);
        uint64_t head = 0;
        for (Py_ssize_t c = 0; c < 8; c++) head = (head << 8) | (c < len ? kb[c] : 0);
        items[t] = (SortItem){head, (int32_t)t};
    }
    if (sort_items(v, &items, n) < 0) {
        PyMem_Free(items);
        return PyErr_NoMemory();
    }
    PyObject *rank = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
    PyObject *blob = PyBytes_FromStringAndSize(NULL, n ? (Py_ssize_t)v->arena_len + n - 1 : 0);
    PyObject *out = NULL;
    if (rank && blob) {
        int32_t *r = (int32_t *)PyBytes_AS_STRING(rank);
        char *o = PyBytes_AS_STRING(blob);
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t len;
            const char *kb = key_bytes(v, v->id_key[items[i].id], &len);
            if (i) *o++ = '\n';
            memcpy(o, kb, (size_t)len);
            o += len;
            r[items[i].id] = (int32_t)i;
        }
        /* stop words are keys too: the blob holds the terms only */
        if (_PyBytes_Resize(&blob, (Py_ssize_t)(o - PyBytes_AS_STRING(blob))) == 0)
            out = Py_BuildValue("(NN)", blob, rank);
        else
            Py_DECREF(rank);
    } else {
        Py_XDECREF(rank);
        Py_XDECREF(blob);
    }
    PyMem_Free(items);
    return out;
}

static Py_ssize_t Vocabulary_len(Vocabulary *v) { return v->n_terms; }

static PyMethodDef Vocabulary_methods[] = {
    {"term_ids", (PyCFunction)Vocabulary_term_ids, METH_VARARGS,
     "term_ids(text, max_len, stop, lower) -> int32 ids (bytes) of the words of normalized text"},
    {"terms", (PyCFunction)Vocabulary_terms, METH_NOARGS, "terms() -> the terms, in id order"},
    {"sorted_terms", (PyCFunction)Vocabulary_sorted_terms, METH_NOARGS,
     "sorted_terms() -> (the terms sorted, one per line: bytes; each term id's place: int32 bytes)"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods Vocabulary_as_sequence = {.sq_length = (lenfunc)Vocabulary_len};

static PyTypeObject VocabularyType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "politecrawl.index._kernels.Vocabulary",
    .tp_basicsize = sizeof(Vocabulary),
    .tp_dealloc = (destructor)Vocabulary_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A segment's vocabulary while it is written: term -> id, in order of first appearance.",
    .tp_methods = Vocabulary_methods,
    .tp_as_sequence = &Vocabulary_as_sequence,
    .tp_new = PyType_GenericNew,
};
