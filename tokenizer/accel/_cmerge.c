/* The two merge loops of stages/bpe.py for short words, in C: the same ids, faster (docs/performance.md).
 *
 * - TokenTable: a vocabulary's texts packed and its ids by text (_cmerge_table.c says why).
 * - ScoredVocab.encode(chunk): bpe.merge_scored (score-based SentencePiece, as GGUF stores it).
 *   Any two adjacent symbols whose concatenation is a token may merge; the pair whose token scores
 *   highest merges first, leftmost on ties; a pair that is no token (or scores -inf) never merges.
 * - RankedTable.merge(ids): bpe.merge_ranked (merge lists: byte-level BPE, tokenizer.json).
 *   The adjacent pair with the lowest value (rank * width + merged id) merges first, leftmost on
 *   ties. bpe.py has both rules with worked examples.
 *
 * Why C. A first pass over new text spends most of its time merging. In Python each merge is a dozen
 * bytecodes, and for score-based merges a new string per pair, hashed and freed. A C loop that still
 * makes those strings gained too little; this one makes none (a symbol is a span or an id).
 * That is what puts SentencePiece vocabularies' first pass ahead of HF tokenizers'
 * (scripts/bench_tokenizer.py).
 * The Python loops stay: they take long words (a heap, O(n log n)) and run where this module is not
 * built; tests/test_accel_native.py holds the two to the same ids.
 *
 * Performance choices:
 * - Open-addressing hash tables, linear probing, at most half full. ScoredVocab prices pairs in the
 *   TokenTable, keyed by UTF-8: a chunk is written as UTF-8 once, and pricing a pair hashes a span of
 *   it in place, no object per pair. RankedTable keeps each pair's value as the merge-table dict first
 *   gives it, keyed by the pair's int key (see _cmerge_ranked.c for why not a copy up front).
 * - A symbol is a span of the chunk (ScoredVocab: its start) or an id (RankedTable); merging two
 *   drops one array entry (a memmove of a short array).
 * - One array holds each adjacent pair's priority. A merge is a linear scan for the best plus two
 *   lookups for the pairs that touch the merged symbol: O(n) per merge, for n <= MAX_SYMBOLS; a
 *   longer word gets None back and goes to the Python heap loop.
 * - Later duplicates of a token text win, for the id and the score, as in the Python tables
 *   (dict(zip(tokens, ...))).
 */
#include "_cmerge.h"

PyObject *id_list(const int64_t *ids, Py_ssize_t n) {
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *id = PyLong_FromLongLong(ids[i]);
        if (id == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, id);
    }
    return out;
}

static int add_type(PyObject *m, PyTypeObject *type, const char *name) {
    if (PyType_Ready(type) < 0) return -1;
    Py_INCREF(type);
    if (PyModule_AddObject(m, name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

Py_ssize_t read_chunk(PyObject *chunk, Py_UCS4 *text) {
    if (!PyUnicode_Check(chunk)) {
        PyErr_SetString(PyExc_TypeError, "encode() needs a str");
        return -1;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(chunk);
    if (n > MAX_SYMBOLS) return TOO_LONG;
    if (n && PyUnicode_AsUCS4(chunk, text, MAX_SYMBOLS, 0) == NULL) return -1;
    return n;
}

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "tokenizer.accel._cmerge",
    .m_doc = "The short-word merge loops of bpe.py in C (ScoredVocab, RankedTable), and GGUF string arrays.",
    .m_size = -1,
    .m_methods = GGUF_METHODS,
};

PyMODINIT_FUNC PyInit__cmerge(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (add_type(m, &TokenTableType, "TokenTable") < 0 || add_type(m, &TokenIndexType, "TokenIndex") < 0 || add_type(m, &ScoredVocabType, "ScoredVocab") < 0 ||
        add_type(m, &RankedTableType, "RankedTable") < 0 ||
        PyModule_AddIntConstant(m, "MAX_SYMBOLS", MAX_SYMBOLS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
