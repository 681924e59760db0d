/* SimHash's per-word loop, text_fingerprint's space squeezing, page text's whitespace and the walk
 * that reads a parsed page's text, compiled: politecrawl.content._dedup.
 *
 * Why C: on a ~20 KB page the numpy simhash spent most of its time in Python-level steps, not in
 * arithmetic: bytes.split (one bytes object per word, about half of it), the word -> id
 * vocabulary dict, the digest cache lookups and some fifteen numpy calls, each with a fixed cost.
 * Here a page's words are never made objects unless their digest is unknown.
 *
 * The definition is dedup.py's, bit for bit (stored fingerprints depend on it); dedup.py's numpy
 * code stays the reference and the fallback where this module could not be built, and
 * tests/unit/test_dedup.py compares the two.  What stays in Python: NFKC, encoding and the
 * bytes.translate that makes punctuation spaces and ASCII lower case (each one C-level call
 * already), and the digest of a word (dedup._word_digest: the case folding of a non-ASCII word
 * and BLAKE2b-64 from hashlib), called back once for each word this module has not cached.
 *
 * The GIL is held throughout, so the cache needs no lock.
 *
 * Contents:
 *   the word digest cache   word bytes -> 8-byte digest, open addressing, bounded
 *   simhash(data, shingle, word_digest)   the words' digests, shingles, majority bits
 *   squash_whitespace(text)   maintext's " ".join(text.split()) on a str, no object per word
 *   squeeze_spaces(data)    runs of spaces made one, the ends stripped (text_fingerprint)
 *   tree_text(node, inline, merge)   the text under a lexbor node, read in one walk (treetext.py)
 *   node_fields(node), node_data(node)   a node's fields, for treetext.py's check of the layout
 *   cache_len(), cache_clear()   for the tests
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------- the word digest cache */

/* Shared across calls because a crawl's frequent words repeat on every page.  Bounded as
 * dedup.py's dict is: at most CACHE_SIZE words, emptied when full; longer words are not kept
 * (they are rare, and seldom repeat across pages).  A long word repeated within one page is
 * called back at each occurrence: no worse than a page of distinct words. */
#define CACHE_MAX_LEN 32
#define CACHE_SIZE (1 << 15)
/* Twice as many slots as words: with linear probing, a lookup stays a probe or two. */
#define CACHE_SLOTS (CACHE_SIZE * 2)
/* Pages are written by strangers.  Whatever their words, a lookup gives up after this many
 * slots (and the word is then not cached): words made to collide cost no more than uncached
 * words, never a long scan. */
#define MAX_PROBE 32

typedef struct {
    uint64_t digest;
    uint32_t tag;  /* the high half of the word's hash: most mismatches end here, without memcmp */
    uint8_t len;   /* 0: an empty slot (bytes.split never yields an empty word) */
    char key[CACHE_MAX_LEN];
} Slot;

/* Static (zeroed, its pages touched only as they fill), 3 MiB: no allocation to fail or free. */
static Slot cache[CACHE_SLOTS];
static Py_ssize_t cache_used;

/* SplitMix64's finalizer (Steele, Lea, Flood 2014): SimHash mixes each shingle hash with it, and
 * the cache spreads FNV-1a's word hashes with it (FNV alone leaves the low bits, the slot
 * index, poorly mixed for short words). */
static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= UINT64_C(0xBF58476D1CE4E5B9);
    x ^= x >> 27;
    x *= UINT64_C(0x94D049BB133111EB);
    x ^= x >> 31;
    return x;
}

static inline uint64_t word_hash(const unsigned char *word, Py_ssize_t len) {
    uint64_t h = UINT64_C(0xCBF29CE484222325);  /* FNV-1a 64 */
    for (Py_ssize_t i = 0; i < len; i++) {
        h ^= word[i];
        h *= UINT64_C(0x100000001B3);
    }
    return mix64(h);
}

/* The slot holding the word, or NULL. */
static Slot *cache_find(const unsigned char *word, Py_ssize_t len, uint64_t hash) {
    uint32_t tag = (uint32_t)(hash >> 32);
    for (Py_ssize_t probe = 0; probe < MAX_PROBE; probe++) {
        Slot *slot = &cache[(hash + (uint64_t)probe) & (CACHE_SLOTS - 1)];
        if (slot->len == 0) return NULL;  /* nothing is ever removed: a gap ends the chain */
        if (slot->tag == tag && slot->len == len && memcmp(slot->key, word, (size_t)len) == 0) return slot;
    }
    return NULL;
}

static void cache_clear_all(void) {
    memset(cache, 0, sizeof cache);
    cache_used = 0;
}

/* Keeps the word's digest if it fits; a word that finds no free slot within MAX_PROBE is not
 * kept. */
static void cache_add(const unsigned char *word, Py_ssize_t len, uint64_t hash, uint64_t digest) {
    if (len > CACHE_MAX_LEN) return;
    if (cache_used >= CACHE_SIZE) cache_clear_all();
    for (Py_ssize_t probe = 0; probe < MAX_PROBE; probe++) {
        Slot *slot = &cache[(hash + (uint64_t)probe) & (CACHE_SLOTS - 1)];
        if (slot->len == 0) {
            slot->digest = digest;
            slot->tag = (uint32_t)(hash >> 32);
            slot->len = (uint8_t)len;
            memcpy(slot->key, word, (size_t)len);
            cache_used++;
            return;
        }
    }
}

/* numpy reads the digests as "<u8": little-endian whatever the machine. */
static inline uint64_t load_le64(const unsigned char *p) {
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--) x = (x << 8) | p[i];
    return x;
}

/* The digest of one word: from the cache, else from word_digest(word) (a bytes of 8). */
static int digest_of(const unsigned char *word, Py_ssize_t len, PyObject *word_digest, uint64_t *out) {
    uint64_t hash = 0;
    if (len <= CACHE_MAX_LEN) {
        hash = word_hash(word, len);
        const Slot *slot = cache_find(word, len, hash);
        if (slot) {
            *out = slot->digest;
            return 0;
        }
    }
    PyObject *arg = PyBytes_FromStringAndSize((const char *)word, len);
    if (!arg) return -1;
    PyObject *digest = PyObject_CallOneArg(word_digest, arg);
    Py_DECREF(arg);
    if (!digest) return -1;
    if (!PyBytes_Check(digest) || PyBytes_GET_SIZE(digest) != 8) {
        PyErr_Format(PyExc_TypeError, "word_digest must return 8 bytes, not %R", digest);
        Py_DECREF(digest);
        return -1;
    }
    *out = load_le64((const unsigned char *)PyBytes_AS_STRING(digest));
    Py_DECREF(digest);
    /* Added after the call, not into a slot found before it: the callback runs Python code. */
    cache_add(word, len, hash, *out);
    return 0;
}

/* ---------------------------------------------------------------- simhash */

/* bytes.split()'s separators (Py_ISSPACE): space, \t, \n, \v, \f, \r.  Not \x1c-\x1f, which
 * str.split() takes as whitespace but bytes.split() does not. */
static inline int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* 2**64 / golden ratio, odd: combines a shingle's word hashes in order. */
#define SHINGLE_K UINT64_C(0x9E3779B97F4A7C15)
#define ONE_PER_BYTE UINT64_C(0x0101010101010101)

/* Adds the 8 lanes' byte counters to the 64 bit counts: lane b, byte k counts bit 8k + b. */
static void flush_lanes(uint64_t lanes[8], int64_t counts[64]) {
    for (int b = 0; b < 8; b++) {
        for (int k = 0; k < 8; k++) counts[8 * k + b] += (int64_t)((lanes[b] >> (8 * k)) & 0xFF);
        lanes[b] = 0;
    }
}

static PyObject *d_simhash(PyObject *self, PyObject *args) {
    const unsigned char *data;
    Py_ssize_t size, shingle;
    PyObject *word_digest;
    if (!PyArg_ParseTuple(args, "y#nO:simhash", &data, &size, &shingle, &word_digest)) return NULL;
    if (shingle < 1) return PyErr_Format(PyExc_ValueError, "shingle must be >= 1, got %zd", shingle);
    if (!PyCallable_Check(word_digest)) return PyErr_Format(PyExc_TypeError, "word_digest must be callable");

    /* A word and its separator take two bytes at least. */
    uint64_t *hashes = PyMem_Malloc(((size_t)size / 2 + 1) * sizeof *hashes);
    if (!hashes) return PyErr_NoMemory();
    Py_ssize_t n = 0;
    const unsigned char *p = data, *end = data + size;
    for (;;) {
        while (p < end && is_space(*p)) p++;
        if (p == end) break;
        const unsigned char *word = p;
        while (p < end && !is_space(*p)) p++;
        if (digest_of(word, p - word, word_digest, &hashes[n]) < 0) {
            PyMem_Free(hashes);
            return NULL;
        }
        n++;
    }
    if (n == 0) {
        PyMem_Free(hashes);
        return PyLong_FromLong(0);
    }

    /* As dedup.py: a text shorter than one shingle is one shingle of all its words. */
    Py_ssize_t count = n - shingle + 1 > 1 ? n - shingle + 1 : 1;
    Py_ssize_t width = shingle < n ? shingle : n;
    /* Majority bits counted as in dedup.py, SWAR: eight uint64 lanes of eight byte counters take
     * one add per lane per shingle, flushed into exact counts before a byte can overflow. */
    uint64_t lanes[8] = {0};
    int64_t counts[64] = {0};
    int pending = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t h = hashes[i];
        for (Py_ssize_t j = 1; j < width; j++) h = h * SHINGLE_K ^ hashes[i + j];  /* wraps mod 2**64 */
        h = mix64(h);
        for (int b = 0; b < 8; b++) lanes[b] += (h >> b) & ONE_PER_BYTE;
        if (++pending == 255) {
            flush_lanes(lanes, counts);
            pending = 0;
        }
    }
    flush_lanes(lanes, counts);
    PyMem_Free(hashes);

    uint64_t result = 0;
    for (int bit = 0; bit < 64; bit++)
        if (counts[bit] * 2 > count) result |= UINT64_C(1) << bit;
    return PyLong_FromUnsignedLongLong(result);
}

/* ---------------------------------------------------------------- squeeze_spaces */

/* text_fingerprint's " ".join(text.split()) on folded bytes whose whitespace is already spaces:
 * one pass, where bytes.replace needed a search for "  " over the whole text and a pass per
 * halving of the longest run. */
static PyObject *d_squeeze_spaces(PyObject *self, PyObject *arg) {
    if (!PyBytes_Check(arg)) return PyErr_Format(PyExc_TypeError, "squeeze_spaces needs bytes, not %.100s", Py_TYPE(arg)->tp_name);
    const char *src = PyBytes_AS_STRING(arg);
    Py_ssize_t size = PyBytes_GET_SIZE(arg);
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (!out) return NULL;
    char *dst = PyBytes_AS_STRING(out), *w = dst;
    /* Every byte is written, and kept (w advances) unless it is a space after a space: a run of
     * spaces leaves one, the leading run none.  Branch-free: a test per byte that the CPU must
     * guess at every word's end ran at a third of the speed. */
    int after_space = 1;
    for (Py_ssize_t i = 0; i < size; i++) {
        int space = src[i] == ' ';
        *w = src[i];
        w += !(space & after_space);
        after_space = space;
    }
    if (w > dst && w[-1] == ' ') w--;  /* the trailing run's one space */
    if (_PyBytes_Resize(&out, w - dst) < 0) return NULL;  /* it frees out on failure */
    return out;
}

/* ---------------------------------------------------------------- squash_whitespace */

/* maintext.squash_whitespace: " ".join(text.split()) in one pass over the str, without the str
 * object per word that str.split makes (~60 bytes each, the whole text's worth at once). The
 * same whitespace as str.split: Py_UNICODE_ISSPACE. The words are copied into a buffer of the
 * input's kind; PyUnicode_FromKindAndData then makes the canonical str (the narrowest kind that
 * holds it, as every str must be for == and hashing to agree). */
#define SQUASH_LOOP(TYPE)                                    \
    do {                                                     \
        const TYPE *in = (const TYPE *)src;                  \
        TYPE *out = (TYPE *)buf;                             \
        for (Py_ssize_t i = 0; i < n; i++) {                 \
            Py_UCS4 ch = in[i];                              \
            if (Py_UNICODE_ISSPACE(ch)) {                    \
                gap = w > 0;                                 \
                continue;                                    \
            }                                                \
            if (gap) {                                       \
                out[w++] = ' ';                              \
                gap = 0;                                     \
            }                                                \
            out[w++] = (TYPE)ch;                             \
        }                                                    \
    } while (0)

static PyObject *d_squash_whitespace(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg))
        return PyErr_Format(PyExc_TypeError, "squash_whitespace needs str, not %.100s", Py_TYPE(arg)->tp_name);
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(arg) < 0) return NULL;
#endif
    int kind = PyUnicode_KIND(arg);
    const void *src = PyUnicode_DATA(arg);
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    void *buf = PyMem_Malloc(n > 0 ? (size_t)n * (size_t)kind : 1);
    if (!buf) return PyErr_NoMemory();
    Py_ssize_t w = 0;
    int gap = 0;
    switch (kind) {
    case PyUnicode_1BYTE_KIND: SQUASH_LOOP(Py_UCS1); break;
    case PyUnicode_2BYTE_KIND: SQUASH_LOOP(Py_UCS2); break;
    default: SQUASH_LOOP(Py_UCS4); break;
    }
    PyObject *result = PyUnicode_FromKindAndData(kind, buf, w);
    PyMem_Free(buf);
    return result;
}

/* ---------------------------------------------------------------- tree_text */

/* A lexbor DOM node and a text node's data, as lexbor declares them (lexbor/dom/interfaces/node.h
 * and character_data.h; selectolax's lexbor.pxd repeats them).  selectolax hands out the
 * address of a node as LexborNode.mem_id; treetext.py checks this layout against selectolax's
 * own answers on a probe document before it calls anything here, and every pointer it reads
 * before this code follows one. */
typedef struct lxb_node lxb_node;
struct lxb_node {
    void *events;
    uintptr_t local_name; /* the tag id for elements: one id per name, whatever the namespace */
    uintptr_t prefix;
    uintptr_t ns;
    void *owner_document;
    lxb_node *next;
    lxb_node *prev;
    lxb_node *parent;
    lxb_node *first_child;
    lxb_node *last_child;
    void *user;
    int type; /* lxb_dom_node_type_t, a C enum */
};

typedef struct {
    lxb_node node;
    unsigned char *data;
    size_t length;
} lxb_char_data;

#define NODE_ELEMENT 1
#define NODE_TEXT 3

typedef struct {
    char *data;
    size_t len, cap;
} Buffer;

static int buffer_add(Buffer *b, const void *data, size_t len) {
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + len) cap *= 2;
        char *grown = PyMem_Realloc(b->data, cap);
        if (!grown) {
            PyErr_NoMemory();
            return -1;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    return 0;
}

static inline int in_set(const unsigned char *set, Py_ssize_t set_len, uintptr_t id) {
    return id / 8 < (uintptr_t)set_len && (set[id / 8] >> (id % 8)) & 1;
}

static lxb_node *node_arg(PyObject *arg) {
    void *p = PyLong_AsVoidPtr(arg);
    if (!p && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a node's address cannot be 0");
    return p;
}

/* What maintext's unwrap path reads, without changing the tree: there the elements of
 * `inline` (a bitmap of tag ids) under the root are unwrapped, the text nodes that then meet
 * merged, and the text nodes read with a space between them.  Here the text nodes are read in
 * document order, with a space before one when, since the last, the walk entered or left a
 * node that is not an element of `inline` (another element, a comment): exactly where the
 * unwrapped tree has a text node's end.  merge=False: a space between every two text nodes
 * (selectolax's text(separator=" ") of the tree as it is).  Then whitespace squashed as
 * squash_whitespace does.  Bytes decoded as selectolax decodes them (UTF-8, bad bytes
 * replaced), from the same bytes.  Iterative: a deep tree costs no stack. */
static PyObject *d_tree_text(PyObject *self, PyObject *args) {
    PyObject *root_arg;
    const unsigned char *set;
    Py_ssize_t set_len;
    int merge;
    if (!PyArg_ParseTuple(args, "Oy#p:tree_text", &root_arg, &set, &set_len, &merge)) return NULL;
    lxb_node *root = node_arg(root_arg);
    if (!root) return NULL;
    /* unwrap_inline matches the root too (a selector matches the node it is run on): unwrapped,
     * its text goes to its parent, and nothing is left under it. */
    if (root->type == NODE_ELEMENT && in_set(set, set_len, root->local_name)) return PyUnicode_FromStringAndSize("", 0);

    Buffer out = {NULL, 0, 0};
    int started = 0, edge = 0;
    lxb_node *node = root->first_child;
    while (node) {
        if (node->type == NODE_TEXT) {
            const lxb_char_data *text = (const lxb_char_data *)node;
            if (text->data) {
                if (started && (edge || !merge) && buffer_add(&out, " ", 1) < 0) goto fail;
                if (buffer_add(&out, text->data, text->length) < 0) goto fail;
                started = 1;
                edge = 0;
            }
        } else {
            if (!(node->type == NODE_ELEMENT && in_set(set, set_len, node->local_name))) edge = 1;
            if (node->first_child) {
                node = node->first_child;
                continue;
            }
        }
        while (node != root && !node->next) {
            node = node->parent;
            if (node != root && !(node->type == NODE_ELEMENT && in_set(set, set_len, node->local_name))) edge = 1;
        }
        if (node == root) break;
        node = node->next;
    }
    PyObject *text = PyUnicode_DecodeUTF8(out.data ? out.data : "", (Py_ssize_t)out.len, "replace");
    PyMem_Free(out.data);
    if (!text) return NULL;
    PyObject *squashed = d_squash_whitespace(self, text);
    Py_DECREF(text);
    return squashed;
fail:
    PyMem_Free(out.data);
    return NULL;
}

/* (type, local_name, parent, next, first_child, the data's length or -1 when not text) */
static PyObject *d_node_fields(PyObject *self, PyObject *arg) {
    const lxb_node *node = node_arg(arg);
    if (!node) return NULL;
    Py_ssize_t length = node->type == NODE_TEXT ? (Py_ssize_t)((const lxb_char_data *)node)->length : -1;
    return Py_BuildValue("(iKKKKn)", node->type, (unsigned long long)node->local_name, (unsigned long long)(uintptr_t)node->parent,
                         (unsigned long long)(uintptr_t)node->next, (unsigned long long)(uintptr_t)node->first_child, length);
}

/* A text node's data, as bytes. */
static PyObject *d_node_data(PyObject *self, PyObject *arg) {
    const lxb_node *node = node_arg(arg);
    if (!node) return NULL;
    if (node->type != NODE_TEXT) return PyErr_Format(PyExc_ValueError, "not a text node");
    const lxb_char_data *text = (const lxb_char_data *)node;
    return PyBytes_FromStringAndSize(text->data ? (const char *)text->data : "", text->data ? (Py_ssize_t)text->length : 0);
}

/* ---------------------------------------------------------------- for the tests */

static PyObject *d_cache_len(PyObject *self, PyObject *unused) { return PyLong_FromSsize_t(cache_used); }

static PyObject *d_cache_clear(PyObject *self, PyObject *unused) {
    cache_clear_all();
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"simhash", d_simhash, METH_VARARGS,
     "simhash(data, shingle, word_digest) -> int: the SimHash of the words of data (translated UTF-8)"},
    {"squeeze_spaces", d_squeeze_spaces, METH_O, "squeeze_spaces(data) -> bytes: runs of spaces made one, ends stripped"},
    {"squash_whitespace", d_squash_whitespace, METH_O,
     "squash_whitespace(text) -> str: \" \".join(text.split()), without a str per word"},
    {"tree_text", d_tree_text, METH_VARARGS,
     "tree_text(node, inline, merge) -> str: the text under a lexbor node's address, squashed (treetext.py)"},
    {"node_fields", d_node_fields, METH_O, "node_fields(node) -> tuple: a lexbor node's fields (treetext.py's check)"},
    {"node_data", d_node_data, METH_O, "node_data(node) -> bytes: a lexbor text node's data (treetext.py's check)"},
    {"cache_len", d_cache_len, METH_NOARGS, "cache_len() -> int: words in the digest cache"},
    {"cache_clear", d_cache_clear, METH_NOARGS, "cache_clear() -> None: empties the digest cache"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef dedup_module = {
    PyModuleDef_HEAD_INIT, "_dedup", "The per-word loops of SimHash and of page text, compiled (see the C source).", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__dedup(void) {
    PyObject *m = PyModule_Create(&dedup_module);
    if (!m) return NULL;
    if (PyModule_AddIntConstant(m, "CACHE_SIZE", CACHE_SIZE) < 0 ||
        PyModule_AddIntConstant(m, "CACHE_MAX_LEN", CACHE_MAX_LEN) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *all = Py_BuildValue("[ssssssss]", "cache_clear", "cache_len", "node_data", "node_fields", "simhash", "squash_whitespace",
                                  "squeeze_spaces", "tree_text");
    if (!all || PyModule_AddObject(m, "__all__", all) < 0) {
        Py_XDECREF(all);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
