/* The searcher's inner loops, and the writer's word splitting, compiled: politecrawl.index._kernels.
 *
 * Why C: a query's work is many small steps (per term, per segment, per field, per hit), and in
 * numpy each step is a call whose fixed cost (a few microseconds) is most of the step.  The
 * profiles in docs/search.md ("Compiled inner loops") show that cost was what separated the
 * searcher from tantivy, not the amount of data.  These functions do the same arithmetic as the
 * numpy code in engine_numpy.py, snippet.py, snippet_hit.py and bm25.py, in the same order, so
 * the results are bit-identical (tests/unit/test_index_kernels.py compares them); that numpy
 * code stays as the reference and as the fallback where this module could not be built.
 *
 * Only the CPython API and the buffer protocol are used (no numpy headers): arrays come in as
 * buffers (numpy arrays, memory maps, bytes) and results go out as bytes objects that the
 * caller views with numpy.frombuffer.
 *
 * The GIL is held throughout, so the module's scratch arrays need no lock (build_postings lets it
 * go for its two passes, which touch only arrays of their own: the writer's body compression
 * thread runs meanwhile).  Every index read
 * from a segment file is checked against the array it indexes: a damaged file raises
 * ValueError, never reads out of bounds.
 *
 * One unity build: this file includes the parts in _kernels_src/ (each a concept, below), so the
 * extension is one translation unit, compiled with one set of flags (pyproject.toml), and every
 * function stays static.  An included part may use what the parts before it define.
 *
 * Contents:
 *   Postings          one segment's postings (three fields), skip blocks and term dictionary
 *     .lookup(term)   term id by binary search in the sorted dictionary (no Python dict)
 *     .df(tid, live)  documents holding the term in one field or any
 *   doc_freqs(...)    a query's document frequencies over every segment, in one call
 *   top(...)          the k best matches over every segment (BM25F + title term, BM25F, or
 *                     per-field BM25; MaxScore over the skip blocks' bounds), ties included
 *   gather(...)       the positions of the query terms in given documents, seeking by blocks
 *   rank(...)         from top()'s matches to the page: sorted, the head reranked by proximity
 *   proximity(...)    term proximity: the closest neighbouring occurrences of query neighbours
 *   best_window(...)  the snippet window with the most distinct terms, then occurrences
 *   make_snippet(...) the snippet's text and highlights from the region around that window
 *   snippet_at(...)   a hit's snippet from its decompressed body: the occurrence, the region,
 *                     make_snippet
 *   snippet_hit(...)  a hit's snippet from its stored LZ4 pieces, whole (decompression called back)
 *   tokens(...)       normalized text cut into words, as analysis.Analyzer.tokenize does
 *   build_postings(...) a new segment's postings of one field, from its tokens' term ids
 *   live_terms(...)   which of a merge's source's terms have a posting of a live document
 *   merge_sources(...) a merge's postings of one field, from its sources' files as they are
 *   posting_blocks(...) a field's skip blocks, from its postings
 *   pack_postings(...)  a run of terms' postings bit-packed in blocks (format 5)
 *   unpack_postings(...) ... and decoded back into doc deltas and tfs
 *   pack_positions(...) a field's positions bit-packed in chunks (format 6)
 *   unpack_positions(...) ... and a range of them decoded back
 *   pack_term_table(...) a segment's per-term table packed in blocks (format 7)
 *   term_column(...)  ... and a range of one of its columns read back
 *   merge_terms(...)  a merge's term dictionary: the sources' sorted dictionaries merged as bytes
 *   Vocabulary        a segment's terms while it is written
 *     .term_ids(...)  the same words as ids in it (the writer's per-token loop)
 *
 * The parts, in the order they are included:
 *   common.h          the CPython headers, checked views of arrays, the scratch arrays
 *   packed.c          format 5's bit-packed blocks: unpack_block, pack_postings, unpack_postings;
 *                     format 6's chunks of positions: unpack_pos_chunk, pack_positions,
 *                     unpack_positions
 *   term_table.c      a column of the per-term table read in place (TCol), pack_term_table,
 *                     term_column
 *   positions.c       an array read through a mapping or with pread, a packed reader's scratch
 *   postings.c        Postings (lookup, df), decoding a term's postings
 *   cursor.c          a cursor over a term's postings: seeks by the skip blocks, blocks read in place
 *   scoring.c         one segment scored: the terms' bounds, the heap of the k best, the matches
 *   top.c             doc_freqs, top
 *   proximity.c       gather (and its reader of format 6's chunks), proximity
 *   rank.c            rank
 *   snippet.c         best_window, make_snippet
 *   snippet_hit.c     snippet_at, snippet_hit (a body's LZ4 pieces)
 *   analysis.c        tokens (words, CJK runs cut into bigrams)
 *   vocabulary.c      Vocabulary, its term_ids
 *   merge_terms.c     merge_terms
 *   build_postings.c  build_postings
 *   merge_sources.c   live_terms, merge_sources
 *   skip_blocks.c     posting_blocks
 */
#include "_kernels_src/common.h"

#include "_kernels_src/packed.c"
#include "_kernels_src/term_table.c"
#include "_kernels_src/positions.c"
#include "_kernels_src/postings.c"
#include "_kernels_src/cursor.c"
#include "_kernels_src/scoring.c"
#include "_kernels_src/top.c"
#include "_kernels_src/proximity.c"
#include "_kernels_src/rank.c"
#include "_kernels_src/snippet.c"
#include "_kernels_src/snippet_hit.c"
#include "_kernels_src/analysis.c"
#include "_kernels_src/vocabulary.c"
#include "_kernels_src/merge_terms.c"
#include "_kernels_src/build_postings.c"
#include "_kernels_src/merge_sources.c"
#include "_kernels_src/skip_blocks.c"

static PyMethodDef module_methods[] = {
    {"top", k_top, METH_VARARGS,
     "top(segments, terms, coef, mode, norms, allowed, k, k1, k1p1, bound_params, prune) -> "
     "(term_ids, segs, docs, scores, count, postings_read)"},
    {"gather", k_gather, METH_VARARGS, "gather(segments, term_ids, field, segs, docs, cap) -> (starts, positions)"},
    {"doc_freqs", k_doc_freqs, METH_VARARGS, "doc_freqs(segments, lives, terms) -> int64 [terms * 4]"},
    {"rank", k_rank, METH_VARARGS,
     "rank(segments, urls, term_ids, segs, docs, scores, order, start, end, proximity, snippet_cap) -> "
     "(segs, docs, scores, starts, positions, head)"},
    {"proximity", k_proximity, METH_VARARGS,
     "proximity(starts, positions, n_cands, n_terms, cap, reversed_weight, idfs, k1, k1p1, weight) -> scores"},
    {"best_window", k_best_window, METH_VARARGS, "best_window(positions, width, limit) -> (term, occurrence) or None"},
    {"snippet_hit", k_snippet_hit, METH_VARARGS,
     "snippet_hit(compressed, sync, starts, positions, hit, terms, distinct, decompress, window, lead, "
     "max_occurrences, before_chars, scan_chars, width, prefer_before, scan_tokens, chars_per_token) -> "
     "(text, highlights) or None"},
    {"snippet_at", k_snippet_at, METH_VARARGS,
     "snippet_at(data, done, term, k, terms, window, lead, max_occurrences, before_chars, from_sync, scan_chars)"},
    {"make_snippet", k_make_snippet, METH_VARARGS,
     "make_snippet(body, low, terms, window, lo, hi, complete, cut_before, lead, max_occurrences) -> (text, highlights)"},
    {"build_postings", k_build_postings, METH_VARARGS,
     "build_postings(ids, rank, lens, n_terms) -> (term_ptr, doc_deltas, tfs, pos_ptr, positions)"},
    {"live_terms", k_live_terms, METH_VARARGS, "live_terms(term_ptr, docs, tfs, doc_map) -> bytes, 1 per live term"},
    {"merge_sources", k_merge_sources, METH_VARARGS,
     "merge_sources([(term_ptr, docs, tfs, doc_map, positions, term_map), ...], n_terms) -> "
     "(term_ptr, doc_deltas, tfs, pos_ptr, positions)"},
    {"posting_blocks", k_posting_blocks, METH_VARARGS,
     "posting_blocks(term_ptr, docs, tfs, field_lens, block) -> (block_ptr, blocks)"},
    {"pack_postings", k_pack_postings, METH_VARARGS,
     "pack_postings(term_ptr, deltas, tfs, block) -> (packed, pack_ptr, block_offsets)"},
    {"unpack_postings", k_unpack_postings, METH_VARARGS,
     "unpack_postings(packed, pack_ptr, term_ptr, n_docs, block) -> (deltas, tfs)"},
    {"pack_positions", k_pack_positions, METH_VARARGS, "pack_positions(values, chunk) -> (packed, chunk_offsets)"},
    {"pack_term_table", k_pack_term_table, METH_VARARGS, "pack_term_table(table) -> (directory, bits)"},
    {"term_column", k_term_column, METH_VARARGS, "term_column((directory, bits, column, rows), lo, hi) -> int64 rows"},
    {"unpack_positions", k_unpack_positions, METH_VARARGS,
     "unpack_positions(packed, chunks, count, lo, hi, chunk) -> positions [lo, hi) as uint32"},
    {"merge_terms", k_merge_terms, METH_VARARGS, "merge_terms([(blob, ends, used), ...]) -> (blob, n_terms, maps)"},
    {"tokens", k_tokens, METH_VARARGS, "tokens(text, max_len, stop=None) -> list[str]"},
    {NULL, NULL, 0, NULL},
};

static void module_free(void *mod) { scratch_free(); }

static struct PyModuleDef kernels_module = {
    PyModuleDef_HEAD_INIT, "_kernels", "The searcher's inner loops, compiled (see the C source).", -1,
    module_methods, NULL, NULL, NULL, module_free,
};

PyMODINIT_FUNC PyInit__kernels(void) {
    if (PyType_Ready(&PostingsType) < 0 || PyType_Ready(&VocabularyType) < 0) return NULL;
    PyObject *m = PyModule_Create(&kernels_module);
    if (!m) return NULL;
    Py_INCREF(&PostingsType);
    if (PyModule_AddObject(m, "Postings", (PyObject *)&PostingsType) < 0) {
        Py_DECREF(&PostingsType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&VocabularyType);
    if (PyModule_AddObject(m, "Vocabulary", (PyObject *)&VocabularyType) < 0) {
        Py_DECREF(&VocabularyType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "KEY_STRIDE", KEY_STRIDE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *all = Py_BuildValue("[sssssssssssssssssssssss]", "Postings", "Vocabulary", "best_window",
                                  "build_postings", "doc_freqs", "gather", "live_terms", "make_snippet",
                                  "merge_sources", "merge_terms", "pack_positions", "pack_postings", "pack_term_table",
                                  "posting_blocks", "proximity", "rank", "snippet_at", "snippet_hit", "term_column", "tokens", "top",
                                  "unpack_positions", "unpack_postings");
    if (!all || PyModule_AddObject(m, "__all__", all) < 0) {
        Py_XDECREF(all);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
