/* ScoredVocab: bpe.merge_scored's loop for one chunk (score-based SentencePiece). See _cmerge.c. */
#include "_cmerge.h"
#include <math.h>
#include <string.h>

typedef struct {
    uint32_t check;  /* the hash's high half: most mismatches end here */
    uint32_t offset; /* of the text in ScoredVocab.chars */
    uint32_t length; /* 0: an empty slot */
    int32_t id;
    double score;
} Slot; /* 24 bytes: Gemma 3's 262k tokens take 12 MB of slots and 7 MB of code points */

typedef struct {
    PyObject_HEAD
    Slot *slots;
    size_t mask;      /* slot count - 1 (a power of two) */
    Py_UCS4 *chars;   /* every token's code points, one after another */
} ScoredVocab;

static uint64_t hash_span(const Py_UCS4 *s, Py_ssize_t n) {
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a over code points, then a final mix */
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 32);
}

/* The slot holding this text, or the empty slot where it would go. */
static Slot *find(const ScoredVocab *v, const Py_UCS4 *s, Py_ssize_t n, uint64_t h) {
    size_t i = (size_t)h & v->mask;
    for (;;) {
        Slot *slot = &v->slots[i];
        if (slot->length == 0) return slot;
        if (slot->check == (uint32_t)(h >> 32) && slot->length == (uint32_t)n &&
            memcmp(v->chars + slot->offset, s, n * sizeof(Py_UCS4)) == 0)
            return slot;
        i = (i + 1) & v->mask;
    }
}

static void vocab_dealloc(ScoredVocab *self) {
    PyMem_Free(self->slots);
    PyMem_Free(self->chars);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ScoredVocab(tokens: list[str], scores: list[float]) */
static int vocab_init(ScoredVocab *self, PyObject *args, PyObject *kwargs) {
    PyObject *tokens, *scores;
    static char *names[] = {"tokens", "scores", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!", names, &PyList_Type, &tokens, &PyList_Type, &scores))
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(tokens);
    if (PyList_GET_SIZE(scores) != n) {
        PyErr_SetString(PyExc_ValueError, "one score per token");
        return -1;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *text = PyList_GET_ITEM(tokens, i);
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "tokens must be strings");
            return -1;
        }
        total += PyUnicode_GET_LENGTH(text);
        /* exact floats (no __float__ to run: no Python code runs while the tables are filled) */
        if (!PyFloat_CheckExact(PyList_GET_ITEM(scores, i))) {
            PyErr_SetString(PyExc_TypeError, "scores must be floats");
            return -1;
        }
    }
    if (n > INT32_MAX / 2 || total > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "vocabulary too large for ScoredVocab");
        return -1;
    }
    size_t size = 16;
    while (size < 2 * (size_t)n) size <<= 1;
    PyMem_Free(self->slots);
    PyMem_Free(self->chars);
    self->slots = PyMem_Calloc(size, sizeof(Slot));
    self->chars = PyMem_Malloc((total ? total : 1) * sizeof(Py_UCS4));
    self->mask = size - 1;
    if (self->slots == NULL || self->chars == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t offset = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *text = PyList_GET_ITEM(tokens, i);
        Py_ssize_t length = PyUnicode_GET_LENGTH(text);
        double score = PyFloat_AS_DOUBLE(PyList_GET_ITEM(scores, i)); /* checked: exact floats */
        if (length == 0) continue; /* "" is never a pair nor a character */
        Py_UCS4 *at = self->chars + offset;
        if (PyUnicode_AsUCS4(text, at, length, 0) == NULL) return -1;
        uint64_t h = hash_span(at, length);
        Slot *slot = find(self, at, length, h);
        if (slot->length == 0) { /* new text; a duplicate keeps its first copy of the characters */
            slot->check = (uint32_t)(h >> 32);
            slot->offset = (uint32_t)offset;
            slot->length = (uint32_t)length;
            offset += length;
        }
        slot->id = (int32_t)i;
        slot->score = score;
    }
    return 0;
}

/* The pair s[0:n]: its token's score into *value and id into *id; -inf when it is no token. */
static void price(const ScoredVocab *v, const Py_UCS4 *s, Py_ssize_t n, double *value, int32_t *id) {
    const Slot *slot = find(v, s, n, hash_span(s, n));
    *value = slot->length ? slot->score : -INFINITY;
    *id = slot->id;
}

#define LONE INT64_MIN /* a symbol not merged: its one character's id is looked up at the end */

/* encode(chunk): the ids, -1 - code point for a character that is no token (the caller applies
 * byte fallback or unk); None past MAX_SYMBOLS characters. */
static PyObject *vocab_encode(ScoredVocab *self, PyObject *chunk) {
    if (self->slots == NULL) {
        PyErr_SetString(PyExc_TypeError, "encode() needs a ScoredVocab made by __init__");
        return NULL;
    }
    Py_UCS4 text[MAX_SYMBOLS];
    Py_ssize_t n = read_chunk(chunk, text);
    if (n < 0) return n == TOO_LONG ? Py_NewRef(Py_None) : NULL;
    Py_ssize_t start[MAX_SYMBOLS + 1]; /* symbol i is text[start[i]:start[i + 1]] */
    int64_t ids[MAX_SYMBOLS];          /* symbol i's token id (LONE: not merged, not looked up yet) */
    double value[MAX_SYMBOLS];         /* value[i]: the score of symbols i and i + 1 together */
    int32_t merged[MAX_SYMBOLS];       /* merged[i]: the id of that token, where value[i] > -inf */
    Py_ssize_t symbols = n;
    for (Py_ssize_t i = 0; i <= n; i++) start[i] = i;
    for (Py_ssize_t i = 0; i < n; i++) ids[i] = LONE;
    for (Py_ssize_t i = 0; i + 1 < n; i++) price(self, text + i, 2, &value[i], &merged[i]);
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
        memmove(value + at, value + at + 1, (symbols - at - 2) * sizeof(double));
        memmove(merged + at, merged + at + 1, (symbols - at - 2) * sizeof(int32_t));
        symbols--;
        if (at > 0)
            price(self, text + start[at - 1], start[at + 1] - start[at - 1], &value[at - 1], &merged[at - 1]);
        if (at + 1 < symbols) price(self, text + start[at], start[at + 2] - start[at], &value[at], &merged[at]);
    }
    for (Py_ssize_t i = 0; i < symbols; i++)
        if (ids[i] == LONE) { /* one character, which may be no token */
            const Slot *slot = find(self, text + start[i], 1, hash_span(text + start[i], 1));
            ids[i] = slot->length ? slot->id : -1 - (int64_t)text[start[i]];
        }
    return id_list(ids, symbols);
}

static PyMethodDef vocab_methods[] = {
    {"encode", (PyCFunction)vocab_encode, METH_O,
     "encode(chunk) -> ids (-1 - code point for a character that is no token), or None past 128 characters"},
    {NULL, NULL, 0, NULL}};

PyTypeObject ScoredVocabType = CMERGE_TYPE(
    "tokenizer.accel._cmerge.ScoredVocab",
    "ScoredVocab(tokens, scores): a SentencePiece vocabulary's texts and scores, for encode(chunk)",
    ScoredVocab, vocab_init, vocab_dealloc, vocab_methods);
