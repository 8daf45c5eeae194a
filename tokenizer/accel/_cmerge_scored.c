/* ScoredVocab: bpe.merge_scored's loop for one chunk (score-based SentencePiece). See _cmerge.c. */
#include "_cmerge.h"
#include <math.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    TokenTable *table; /* the texts and ids, shared with the tokenizer's index */
    const double *scores; /* by id: view.buf (an array('d') read in place, held), or our own copy of a list */
    Py_buffer view;       /* view.obj NULL: none held */
} ScoredVocab;

static void release_scores(ScoredVocab *self) {
    if (self->view.obj != NULL) PyBuffer_Release(&self->view);
    else PyMem_Free((double *)self->scores);
    self->scores = NULL;
}

static void vocab_dealloc(ScoredVocab *self) {
    Py_XDECREF(self->table);
    release_scores(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A list of floats, copied: the copy, or NULL with an error set. */
static double *copy_scores(PyObject *scores, Py_ssize_t n) {
    if (PyList_GET_SIZE(scores) != n) {
        PyErr_SetString(PyExc_ValueError, "one score per token");
        return NULL;
    }
    double *values = PyMem_Malloc((n ? n : 1) * sizeof(double));
    if (values == NULL) return (double *)PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        /* exact floats (no __float__ to run: no Python code runs while the tables are filled) */
        if (!PyFloat_CheckExact(PyList_GET_ITEM(scores, i))) {
            PyMem_Free(values);
            PyErr_SetString(PyExc_TypeError, "scores must be floats");
            return NULL;
        }
        values[i] = PyFloat_AS_DOUBLE(PyList_GET_ITEM(scores, i));
    }
    return values;
}

/* A buffer of n doubles (array('d')), held and read in place (a held array cannot be resized): 0, or -1
 * with an error set. */
static int hold_scores(PyObject *scores, Py_ssize_t n, Py_buffer *view) {
    if (PyObject_GetBuffer(scores, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->itemsize != sizeof(double) || view->format == NULL || strcmp(view->format, "d") != 0)
        PyErr_SetString(PyExc_TypeError, "scores must be a list of floats or a buffer of doubles");
    else if (view->len != n * (Py_ssize_t)sizeof(double))
        PyErr_SetString(PyExc_ValueError, "one score per token");
    else
        return 0;
    PyBuffer_Release(view);
    return -1;
}

/* ScoredVocab(table: TokenTable, scores: list[float] | array('d')): one score per token */
static int vocab_init(ScoredVocab *self, PyObject *args, PyObject *kwargs) {
    PyObject *table, *scores;
    static char *names[] = {"table", "scores", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O", names, &TokenTableType, &table, &scores)) return -1;
    Py_ssize_t n = ((TokenTable *)table)->count;
    Py_buffer view = {0};
    double *copy = NULL;
    if (PyList_Check(scores) ? (copy = copy_scores(scores, n)) == NULL : hold_scores(scores, n, &view) < 0) return -1;
    release_scores(self);
    self->view = view;
    self->scores = copy != NULL ? copy : (const double *)view.buf;
    Py_INCREF(table);
    Py_XSETREF(self->table, (TokenTable *)table);
    return 0;
}

/* The token spelled s[0:n] (UTF-8): its score into *value and id into *id; -inf when it is no token. */
static void price(const ScoredVocab *v, const char *s, Py_ssize_t n, double *value, int32_t *id) {
    *id = table_find(v->table, s, n);
    *value = *id >= 0 ? v->scores[*id] : -INFINITY;
}

#define LONE INT64_MIN /* a symbol not merged: its one character's id is looked up at the end */

/* encode(chunk): the ids, -1 - code point for a character that is no token (the caller applies
 * byte fallback or unk); None past MAX_SYMBOLS characters. */
static PyObject *vocab_encode(ScoredVocab *self, PyObject *chunk) {
    if (self->table == NULL) {
        PyErr_SetString(PyExc_TypeError, "encode() needs a ScoredVocab made by __init__");
        return NULL;
    }
    Py_UCS4 text[MAX_SYMBOLS];
    Py_ssize_t n = read_chunk(chunk, text);
    if (n < 0) return n == TOO_LONG ? Py_NewRef(Py_None) : NULL;
    char utf8[4 * MAX_SYMBOLS];
    Py_ssize_t start[MAX_SYMBOLS + 1]; /* symbol i is utf8[start[i]:start[i + 1]], a span of whole characters */
    start[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) start[i + 1] = start[i] + utf8_put(text[i], utf8 + start[i]);
    Py_ssize_t first[MAX_SYMBOLS]; /* symbol i's first character, for one that is no token */
    int64_t ids[MAX_SYMBOLS];          /* symbol i's token id (LONE: not merged, not looked up yet) */
    double value[MAX_SYMBOLS];         /* value[i]: the score of symbols i and i + 1 together */
    int32_t merged[MAX_SYMBOLS];       /* merged[i]: the id of that token, where value[i] > -inf */
    Py_ssize_t symbols = n;
    for (Py_ssize_t i = 0; i < n; i++) ids[i] = LONE, first[i] = i;
    for (Py_ssize_t i = 0; i + 1 < n; i++) price(self, utf8 + start[i], start[i + 2] - start[i], &value[i], &merged[i]);
    while (symbols > 1) {
        Py_ssize_t at = 0; /* the best pair, leftmost on ties (as Python's max() then index()) */
        double best = value[0];
        for (Py_ssize_t i = 1; i + 1 < symbols; i++)
            if (value[i] > best) {
                best = value[i];
                at = i;
            }
        if (best == -INFINITY) break;
        /* symbol at becomes the pair's token; drop the boundary after it and the pair that spanned it */
        ids[at] = merged[at];
        memmove(start + at + 1, start + at + 2, (symbols - at - 1) * sizeof(Py_ssize_t));
        memmove(ids + at + 1, ids + at + 2, (symbols - at - 2) * sizeof(int64_t));
        memmove(first + at + 1, first + at + 2, (symbols - at - 2) * sizeof(Py_ssize_t));
        memmove(value + at, value + at + 1, (symbols - at - 2) * sizeof(double));
        memmove(merged + at, merged + at + 1, (symbols - at - 2) * sizeof(int32_t));
        symbols--;
        if (at > 0)
            price(self, utf8 + start[at - 1], start[at + 1] - start[at - 1], &value[at - 1], &merged[at - 1]);
        if (at + 1 < symbols) price(self, utf8 + start[at], start[at + 2] - start[at], &value[at], &merged[at]);
    }
    for (Py_ssize_t i = 0; i < symbols; i++)
        if (ids[i] == LONE) { /* one character, which may be no token */
            int32_t id = table_find(self->table, utf8 + start[i], start[i + 1] - start[i]);
            ids[i] = id >= 0 ? id : -1 - (int64_t)text[first[i]];
        }
    return id_list(ids, symbols);
}

/* get(text, default=None): text's score, default when it is no token (bpe.merge_scored's dict, for long chunks) */
static PyObject *vocab_get(ScoredVocab *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2 || !PyUnicode_Check(args[0]) || self->table == NULL) {
        PyErr_SetString(PyExc_TypeError, "get(text: str, default=None) on a ScoredVocab made by __init__");
        return NULL;
    }
    int32_t id = table_find_str(self->table, args[0]);
    if (id == -2) return NULL;
    return id >= 0 ? PyFloat_FromDouble(self->scores[id]) : Py_NewRef(nargs == 2 ? args[1] : Py_None);
}

static PyMethodDef vocab_methods[] = {
    {"get", (PyCFunction)(void (*)(void))vocab_get, METH_FASTCALL,
     "get(text, default=None) -> the score of the token spelled text, default when there is none"},
    {"encode", (PyCFunction)vocab_encode, METH_O,
     "encode(chunk) -> ids (-1 - code point for a character that is no token), or None past 128 characters"},
    {NULL, NULL, 0, NULL}};

PyTypeObject ScoredVocabType = CMERGE_TYPE(
    "tokenizer.accel._cmerge.ScoredVocab",
    "ScoredVocab(table, scores): a SentencePiece vocabulary's scores over its TokenTable, for encode(chunk)",
    ScoredVocab, vocab_init, vocab_dealloc, vocab_methods);
