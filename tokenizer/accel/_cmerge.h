/* Shared by the merge loops in C: _cmerge.c (the module and why it exists), _cmerge_scored.c
 * (ScoredVocab: bpe.merge_scored) and _cmerge_ranked.c (RankedTable: bpe.merge_ranked). */
#ifndef RML_CMERGE_H
#define RML_CMERGE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MAX_SYMBOLS 128 /* bpe.SHORT_WORD: a longer word gets None and goes to the Python heap loop */

extern PyTypeObject ScoredVocabType, RankedTableType, TokenTableType, TokenIndexType;

/* A slot of TokenTable's index: a token id (its low 24 bits) and 8 bits of its text's hash, which turn
 * away most other texts without reading them; EMPTY_SLOT: none. */
typedef uint32_t IdSlot;
#define EMPTY_SLOT UINT32_MAX
#define SLOT_ID(slot) ((int32_t)((slot) & 0xFFFFFF))
#define MAX_TABLE_TOKENS 0xFFFFFF /* ids below it fit a slot (the largest vocabularies have under 1M) */

/* _cmerge_table.c: a vocabulary's texts as UTF-8 ("surrogatepass") and its ids by text. */
typedef struct {
    PyObject_HEAD
    char *bytes;        /* every token's text, one after another */
    uint32_t *offsets;  /* count + 1: token i is bytes[offsets[i]:offsets[i + 1]] */
    Py_ssize_t count;
    Py_ssize_t distinct; /* texts listed once or more */
    IdSlot *slots;
    size_t mask;        /* slot count - 1 (a power of two) */
} TokenTable;

/* TokenTable.index(): its ids by text, as a dict from text to id reads (get, [], in, len). */
typedef struct {
    PyObject_HEAD
    TokenTable *table;
} TokenIndex;

/* The id of the token spelled s[0:n] (UTF-8), -1 when none. */
int32_t table_find(const TokenTable *t, const char *s, Py_ssize_t n);
/* The same for a str; -2 with an error set when out of memory. */
int32_t table_find_str(const TokenTable *t, PyObject *text);
/* cp as UTF-8 (surrogates as three bytes) into out[0:4]: the bytes written. */
Py_ssize_t utf8_put(Py_UCS4 cp, char *out);
extern PyMethodDef GGUF_METHODS[]; /* _cmerge_gguf.c: read_strings */

/* A new list of ids[0:n] as Python ints. */
PyObject *id_list(const int64_t *ids, Py_ssize_t n);

/* A type object with what both types share: plain, default-constructed, one init, one dealloc. */
#define CMERGE_TYPE(NAME, DOC, STRUCT, INIT, DEALLOC, METHODS) {                                     \
    PyVarObject_HEAD_INIT(NULL, 0) .tp_name = NAME, .tp_doc = DOC, .tp_basicsize = sizeof(STRUCT),   \
    .tp_flags = Py_TPFLAGS_DEFAULT, .tp_new = PyType_GenericNew, .tp_init = (initproc)(INIT),        \
    .tp_dealloc = (destructor)(DEALLOC), .tp_methods = (METHODS) }

#define TOO_LONG (-2)
/* A chunk's code points into text[MAX_SYMBOLS]: their count; TOO_LONG past MAX_SYMBOLS; -1 (an error
 * set) when chunk is no str. */
Py_ssize_t read_chunk(PyObject *chunk, Py_UCS4 *text);

#endif
