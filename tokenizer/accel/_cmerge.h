/* Shared by the merge loops in C: _cmerge.c (the module and why it exists), _cmerge_scored.c
 * (ScoredVocab: bpe.merge_scored) and _cmerge_ranked.c (RankedTable: bpe.merge_ranked). */
#ifndef RML_CMERGE_H
#define RML_CMERGE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MAX_SYMBOLS 128 /* bpe.SHORT_WORD: a longer word gets None and goes to the Python heap loop */

extern PyTypeObject ScoredVocabType, RankedTableType;
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
