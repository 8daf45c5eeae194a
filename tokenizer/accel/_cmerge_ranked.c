/* RankedTable: stages/bpe.py merge_ranked's loop for one word or chunk (merge lists). See _cmerge.c. */
#include "_cmerge.h"
#include <string.h>

#define NO_MERGE ((int64_t)1 << 62) /* bpe.NONE: the value of a pair that does not merge */

typedef struct {
    uint64_t key; /* the pair's key + 1; 0: an empty slot */
    int64_t value;
} PairSlot;

/* A cache in front of the Python merge table: each pair is looked up in the dict once, then found
 * here. Copying a whole table up front costs more than a first pass gains from it (Gemma 3's 515k
 * merges take longer to copy than its first pass over a 1 MB corpus takes pair by pair). */
typedef struct {
    PyObject_HEAD
    PyObject *merges; /* dict[int, int], key left * width + right -> rank * width + merged id */
    PyObject *vocab;  /* dict[str, int] or TokenIndex, for encode(); may be NULL */
    int32_t *char_ids; /* code point -> 1 + its token id (width - 1: none); 0: not asked yet */
    int64_t width;
    PairSlot *slots;
    size_t mask;      /* slot count - 1 (a power of two) */
    size_t used;
} RankedTable;

#define FIRST_SLOTS ((size_t)1 << 12)
#define CHAR_IDS 0x10000 /* code points whose ids are kept in an array (256 KB) */
#define MAX_SLOTS ((size_t)1 << 22) /* 64 MB; a full cache starts again empty */

static uint64_t mix64(uint64_t x) { /* splitmix64's finalizer */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static PairSlot *find_pair(const RankedTable *t, uint64_t stored) {
    size_t i = (size_t)mix64(stored) & t->mask;
    while (t->slots[i].key != 0 && t->slots[i].key != stored) i = (i + 1) & t->mask;
    return &t->slots[i];
}

/* Room for one more entry, at most half full: twice the slots, or (at MAX_SLOTS) empty again. */
static int make_room(RankedTable *t) {
    size_t size = t->mask + 1;
    if (2 * (t->used + 1) <= size) return 0;
    if (size >= MAX_SLOTS) {
        memset(t->slots, 0, size * sizeof(PairSlot));
        t->used = 0;
        return 0;
    }
    PairSlot *old = t->slots;
    t->slots = PyMem_Calloc(2 * size, sizeof(PairSlot));
    if (t->slots == NULL) { /* the old table stays, as it was */
        t->slots = old;
        PyErr_NoMemory();
        return -1;
    }
    t->mask = 2 * size - 1;
    t->used = 0;
    for (size_t i = 0; i < size; i++)
        if (old[i].key) {
            *find_pair(t, old[i].key) = old[i];
            t->used++;
        }
    PyMem_Free(old);
    return 0;
}

static void ranked_dealloc(RankedTable *self) {
    Py_XDECREF(self->merges);
    Py_XDECREF(self->vocab);
    PyMem_Free(self->slots);
    PyMem_Free(self->char_ids);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* RankedTable(merges: dict[int, int], width: int, vocab: dict[str, int] | TokenIndex | None = None):
 * bpe.build_merge_table's table and the vocabulary (for encode), which must not change */
static int ranked_init(RankedTable *self, PyObject *args, PyObject *kwargs) {
    PyObject *merges, *vocab = Py_None;
    long long width;
    static char *names[] = {"merges", "width", "vocab", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!L|O", names, &PyDict_Type, &merges, &width, &vocab))
        return -1;
    if (vocab != Py_None && !PyDict_Check(vocab) && !PyObject_TypeCheck(vocab, &TokenIndexType)) {
        PyErr_SetString(PyExc_TypeError, "vocab must be a dict or a TokenIndex");
        return -1;
    }
    if (width < 1 || width > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "width out of range");
        return -1;
    }
    PyMem_Free(self->slots);
    PyMem_Free(self->char_ids);
    self->slots = PyMem_Calloc(FIRST_SLOTS, sizeof(PairSlot));
    self->char_ids = vocab == Py_None ? NULL : PyMem_Calloc(CHAR_IDS, sizeof(int32_t));
    if (self->slots == NULL || (vocab != Py_None && self->char_ids == NULL)) {
        PyErr_NoMemory();
        return -1;
    }
    self->mask = FIRST_SLOTS - 1;
    self->used = 0;
    self->width = width;
    Py_INCREF(merges);
    Py_XSETREF(self->merges, merges);
    Py_XSETREF(self->vocab, vocab == Py_None ? NULL : Py_NewRef(vocab));
    return 0;
}

/* *value: the pair's value in the merge table, NO_MERGE when it has none. -1 on an error. */
static int pair_value(RankedTable *t, int64_t left, int64_t right, int64_t *value) {
    uint64_t stored = (uint64_t)(left * t->width + right) + 1;
    PairSlot *slot = find_pair(t, stored);
    if (slot->key) {
        *value = slot->value;
        return 0;
    }
    PyObject *key = PyLong_FromLongLong(left * t->width + right);
    if (key == NULL) return -1;
    PyObject *found = PyDict_GetItemWithError(t->merges, key);
    Py_DECREF(key);
    if (found == NULL && PyErr_Occurred()) return -1;
    long long v = NO_MERGE;
    if (found != NULL) {
        if (!PyLong_CheckExact(found)) { /* no __index__ to run: no Python code runs in here */
            PyErr_SetString(PyExc_TypeError, "merge table values must be ints");
            return -1;
        }
        v = PyLong_AsLongLong(found);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v < 0 || v >= NO_MERGE) {
            PyErr_SetString(PyExc_ValueError, "a merge table value out of range");
            return -1;
        }
    }
    if (make_room(t) < 0) return -1;
    slot = find_pair(t, stored);
    slot->key = stored;
    slot->value = v;
    t->used++;
    *value = v;
    return 0;
}

/* The merge loop over ids[0:n] (origin[i]: where symbol i starts in the chunk, moved along; may be
 * NULL). Returns the symbols left, -1 on an error. */
static Py_ssize_t merge_ids(RankedTable *t, int64_t *ids, Py_ssize_t *origin, Py_ssize_t n) {
    int64_t value[MAX_SYMBOLS]; /* value[i]: the pair ids[i], ids[i + 1] */
    for (Py_ssize_t i = 0; i + 1 < n; i++)
        if (pair_value(t, ids[i], ids[i + 1], &value[i]) < 0) return -1;
    Py_ssize_t symbols = n;
    while (symbols > 1) {
        Py_ssize_t at = 0; /* the lowest value, leftmost on ties (as Python's min() then index()) */
        for (Py_ssize_t i = 1; i + 1 < symbols; i++)
            if (value[i] < value[at]) at = i;
        if (value[at] == NO_MERGE) break;
        ids[at] = value[at] % t->width;
        memmove(ids + at + 1, ids + at + 2, (symbols - at - 2) * sizeof(int64_t));
        if (origin) memmove(origin + at + 1, origin + at + 2, (symbols - at - 2) * sizeof(Py_ssize_t));
        memmove(value + at, value + at + 1, (symbols - at - 2) * sizeof(int64_t));
        symbols--;
        if (at > 0 && pair_value(t, ids[at - 1], ids[at], &value[at - 1]) < 0) return -1;
        if (at + 1 < symbols && pair_value(t, ids[at], ids[at + 1], &value[at]) < 0) return -1;
    }
    return symbols;
}

/* merge(ids): the merged ids; None past MAX_SYMBOLS ids or for an id outside the table. */
static PyObject *ranked_merge(RankedTable *self, PyObject *list) {
    if (!PyList_Check(list) || self->slots == NULL) {
        PyErr_SetString(PyExc_TypeError, "merge() needs a list of ids and a RankedTable made by __init__");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (n > MAX_SYMBOLS) Py_RETURN_NONE;
    int64_t ids[MAX_SYMBOLS];
    for (Py_ssize_t i = 0; i < n; i++) {
        long long id = PyLong_AsLongLong(PyList_GET_ITEM(list, i));
        if (id == -1 && PyErr_Occurred()) return NULL;
        if (id < 0 || id >= self->width) Py_RETURN_NONE; /* not an id of this table: Python decides */
        ids[i] = id;
    }
    n = merge_ids(self, ids, NULL, n);
    return n < 0 ? NULL : id_list(ids, n);
}

/* The id of the one-character token for this code point; width - 1 (the missing unit, in no merge)
 * when there is none. Basic-plane answers are kept; the rest are asked of the vocabulary each time. */
static int char_id(RankedTable *t, Py_UCS4 cp, int64_t *id) {
    if (cp < CHAR_IDS && t->char_ids[cp]) {
        *id = t->char_ids[cp] - 1;
        return 0;
    }
    if (!PyDict_Check(t->vocab)) { /* a TokenIndex: no object made */
        char utf8[4];
        int32_t found = table_find(((TokenIndex *)t->vocab)->table, utf8, utf8_put(cp, utf8));
        if (found >= t->width) {
            PyErr_SetString(PyExc_ValueError, "a vocabulary id out of range");
            return -1;
        }
        *id = found < 0 ? t->width - 1 : found;
        if (cp < CHAR_IDS) t->char_ids[cp] = (int32_t)*id + 1;
        return 0;
    }
    PyObject *text = PyUnicode_FromOrdinal((int)cp);
    if (text == NULL) return -1;
    PyObject *found = PyDict_GetItemWithError(t->vocab, text);
    Py_DECREF(text);
    if (found == NULL && PyErr_Occurred()) return -1;
    if (found != NULL && !PyLong_CheckExact(found)) {
        PyErr_SetString(PyExc_TypeError, "vocabulary ids must be ints");
        return -1;
    }
    long long v = found ? PyLong_AsLongLong(found) : t->width - 1;
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0 || v >= t->width) {
        PyErr_SetString(PyExc_ValueError, "a vocabulary id out of range");
        return -1;
    }
    if (cp < CHAR_IDS) t->char_ids[cp] = (int32_t)v + 1;
    *id = v;
    return 0;
}

/* encode(chunk): merge the chunk's characters (SentencePiece text); ids as ScoredVocab.encode gives them. */
static PyObject *ranked_encode(RankedTable *self, PyObject *chunk) {
    if (self->slots == NULL || self->char_ids == NULL) {
        PyErr_SetString(PyExc_TypeError, "encode() needs a RankedTable made with a vocabulary");
        return NULL;
    }
    Py_UCS4 text[MAX_SYMBOLS];
    Py_ssize_t n = read_chunk(chunk, text);
    if (n < 0) return n == TOO_LONG ? Py_NewRef(Py_None) : NULL;
    int64_t ids[MAX_SYMBOLS];
    Py_ssize_t origin[MAX_SYMBOLS];
    for (Py_ssize_t i = 0; i < n; i++) {
        if (char_id(self, text[i], &ids[i]) < 0) return NULL;
        origin[i] = i;
    }
    n = merge_ids(self, ids, origin, n);
    if (n < 0) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) /* a missing unit never merged: it is still its own character */
        if (ids[i] == self->width - 1) ids[i] = -1 - (int64_t)text[origin[i]];
    return id_list(ids, n);
}

static PyMethodDef ranked_methods[] = {
    {"merge", (PyCFunction)ranked_merge, METH_O,
     "merge(ids) -> the merged ids, or None past 128 ids or for an id outside the table"},
    {"encode", (PyCFunction)ranked_encode, METH_O,
     "encode(chunk) -> ids (-1 - code point for a character that is no token), or None past 128 characters"},
    {NULL, NULL, 0, NULL}};

PyTypeObject RankedTableType = CMERGE_TYPE(
    "tokenizer.accel._cmerge.RankedTable", "RankedTable(merges, width): bpe.build_merge_table's table, for merge(ids)",
    RankedTable, ranked_init, ranked_dealloc, ranked_methods);
