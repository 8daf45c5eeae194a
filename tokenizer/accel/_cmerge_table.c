/* TokenTable: a vocabulary's token texts packed, and their ids by text (see _cmerge.c).
 *
 * What it replaces, and why. The reference path holds a vocabulary as a list of str and a dict from
 * text to id. For Gemma 3's 262,144 tokens that is 19 MB of str objects and a 15 MB dict, as much
 * again as llama.cpp keeps for the same vocabulary, and more than the whole of our other tables. Here
 * the texts are one UTF-8 buffer with offsets (4 bytes a token) and the index is an open-addressing
 * table of ids, each with 8 bits of its text's hash (4 bytes a slot, at most half full): 5 MB for Gemma 3
 * in all.
 *
 *     TokenTable(["a", "▁b", "a"])  ->  bytes "a▁ba", offsets [0, 1, 5, 6]
 *     table[1] == "▁b";  table.get("a") == 2 (later duplicates win, as dict(zip(tokens, ids)))
 *     table.index(): a view that reads as that dict: ["a"] == 2, "c" in it is False, len 2
 *
 * A text is stored as UTF-8 with lone surrogates written as three bytes each (Python's
 * "surrogatepass"), so any str goes in and comes back equal. Lookups hash the same bytes: no object
 * is made to answer get() or to price a pair in ScoredVocab, which shares this table.
 */
#include "_cmerge.h"
#include <string.h>

static uint64_t hash_bytes(const char *s, Py_ssize_t n) {
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a, then a final mix */
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 32);
}

int32_t table_find(const TokenTable *t, const char *s, Py_ssize_t n) {
    if (t->slots == NULL) return -1; /* made by __new__ alone */
    uint64_t h = hash_bytes(s, n);
    for (size_t i = (size_t)h & t->mask;; i = (i + 1) & t->mask) {
        IdSlot slot = t->slots[i];
        if (slot == EMPTY_SLOT) return -1;
        if (slot >> 24 != h >> 56) continue; /* another text (most of them end here) */
        int32_t id = SLOT_ID(slot);
        uint32_t at = t->offsets[id];
        if (t->offsets[id + 1] - at == (uint32_t)n && memcmp(t->bytes + at, s, n) == 0) return id;
    }
}

Py_ssize_t utf8_put(Py_UCS4 cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) { /* surrogates too, as "surrogatepass" writes them */
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* text's UTF-8 into out (room for 4 bytes a character, or NULL to count): its length in bytes. */
static Py_ssize_t utf8_of(PyObject *text, char *out) {
    if (PyUnicode_IS_ASCII(text)) {
        if (out) memcpy(out, PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text));
        return PyUnicode_GET_LENGTH(text);
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    char scratch[4];
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0, n = PyUnicode_GET_LENGTH(text); i < n; i++)
        size += utf8_put(PyUnicode_READ(kind, data, i), out ? out + size : scratch);
    return size;
}

int32_t table_find_str(const TokenTable *t, PyObject *text) {
    Py_ssize_t room = 4 * PyUnicode_GET_LENGTH(text);
    char local[512], *buf = room <= (Py_ssize_t)sizeof local ? local : PyMem_Malloc(room ? room : 1);
    if (buf == NULL) {
        PyErr_NoMemory();
        return -2;
    }
    int32_t id = table_find(t, buf, utf8_of(text, buf));
    if (buf != local) PyMem_Free(buf);
    return id;
}

static void table_dealloc(TokenTable *self) {
    PyMem_Free(self->bytes);
    PyMem_Free(self->offsets);
    PyMem_Free(self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* TokenTable(tokens: list[str]) */
static int table_init(TokenTable *self, PyObject *args, PyObject *kwargs) {
    PyObject *tokens;
    static char *names[] = {"tokens", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!", names, &PyList_Type, &tokens)) return -1;
    Py_ssize_t n = PyList_GET_SIZE(tokens), total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *text = PyList_GET_ITEM(tokens, i);
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "tokens must be strings");
            return -1;
        }
        total += utf8_of(text, NULL);
    }
    if (n >= MAX_TABLE_TOKENS || total > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "vocabulary too large for TokenTable");
        return -1;
    }
    size_t size = 16;
    while (size < 2 * (size_t)n) size <<= 1;
    PyMem_Free(self->bytes);
    PyMem_Free(self->offsets);
    PyMem_Free(self->slots);
    self->bytes = PyMem_Malloc(total ? total : 1);
    self->offsets = PyMem_Malloc((n + 1) * sizeof(uint32_t));
    self->slots = PyMem_Malloc(size * sizeof(IdSlot));
    self->count = self->distinct = 0; /* until filled: an error below leaves an empty table */
    if (self->bytes == NULL || self->offsets == NULL || self->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(self->slots, 0xFF, size * sizeof(IdSlot)); /* EMPTY_SLOT */
    self->mask = size - 1;
    self->offsets[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) /* the texts first: a slot compares against them */
        self->offsets[i + 1] = self->offsets[i] + (uint32_t)utf8_of(PyList_GET_ITEM(tokens, i), self->bytes + self->offsets[i]);
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *s = self->bytes + self->offsets[i];
        Py_ssize_t length = self->offsets[i + 1] - self->offsets[i];
        uint64_t h = hash_bytes(s, length);
        size_t at = (size_t)h & self->mask;
        for (; self->slots[at] != EMPTY_SLOT; at = (at + 1) & self->mask) {
            uint32_t other = self->offsets[SLOT_ID(self->slots[at])];
            if (self->offsets[SLOT_ID(self->slots[at]) + 1] - other == (uint32_t)length &&
                memcmp(self->bytes + other, s, length) == 0)
                break; /* a duplicate: the later id wins */
        }
        if (self->slots[at] == EMPTY_SLOT) self->distinct++;
        self->slots[at] = (uint32_t)(h >> 56) << 24 | (uint32_t)i;
    }
    self->count = n;
    return 0;
}

static Py_ssize_t table_length(TokenTable *self) { return self->count; }

static PyObject *table_item(TokenTable *self, Py_ssize_t i) {
    if (i < 0 || i >= self->count) {
        PyErr_SetString(PyExc_IndexError, "token id out of range");
        return NULL;
    }
    uint32_t at = self->offsets[i];
    return PyUnicode_DecodeUTF8(self->bytes + at, self->offsets[i + 1] - at, "surrogatepass");
}

/* table[i] (negative from the end) or table[a:b:c] (a list) */
static PyObject *table_subscript(TokenTable *self, PyObject *at) {
    if (PySlice_Check(at)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(at, &start, &stop, &step) < 0) return NULL;
        Py_ssize_t n = PySlice_AdjustIndices(self->count, &start, &stop, step);
        PyObject *out = PyList_New(n);
        for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
            PyObject *text = table_item(self, start + i * step);
            if (text == NULL) Py_CLEAR(out);
            else PyList_SET_ITEM(out, i, text);
        }
        return out;
    }
    Py_ssize_t i = PyNumber_AsSsize_t(at, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) return NULL;
    return table_item(self, i < 0 ? i + self->count : i);
}

static int table_contains(TokenTable *self, PyObject *text) {
    if (!PyUnicode_Check(text)) return 0;
    int32_t id = table_find_str(self, text);
    return id == -2 ? -1 : id >= 0;
}

/* get(text, default=None): the id of the token spelled text (the last one, where it is listed twice). */
static PyObject *table_get(TokenTable *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "get(text, default=None)");
        return NULL;
    }
    PyObject *fallback = nargs == 2 ? args[1] : Py_None;
    if (!PyUnicode_Check(args[0])) return Py_NewRef(fallback);
    int32_t id = table_find_str(self, args[0]);
    if (id == -2) return NULL;
    return id < 0 ? Py_NewRef(fallback) : PyLong_FromLong(id);
}

static PyObject *table_index(TokenTable *self, PyObject *unused) {
    (void)unused;
    TokenIndex *index = PyObject_New(TokenIndex, &TokenIndexType);
    if (index != NULL) index->table = (TokenTable *)Py_NewRef(self);
    return (PyObject *)index;
}

static PyObject *table_nbytes(TokenTable *self, PyObject *unused) {
    (void)unused;
    size_t slots = self->slots ? self->mask + 1 : 0;
    return PyLong_FromSize_t((self->count ? self->offsets[self->count] : 0) + (self->count + 1) * sizeof(uint32_t) +
                             slots * sizeof(IdSlot));
}

static PySequenceMethods table_sequence = {
    .sq_length = (lenfunc)table_length,
    .sq_item = (ssizeargfunc)table_item,
    .sq_contains = (objobjproc)table_contains,
};

static PyMappingMethods table_mapping = {
    .mp_length = (lenfunc)table_length,
    .mp_subscript = (binaryfunc)table_subscript,
};

static PyMethodDef table_methods[] = {
    {"get", (PyCFunction)(void (*)(void))table_get, METH_FASTCALL,
     "get(text, default=None) -> the id of the token spelled text (later duplicates win)"},
    {"index", (PyCFunction)table_index, METH_NOARGS, "index() -> the ids by text, read as a dict (get, [], in, len)"},
    {"nbytes", (PyCFunction)table_nbytes, METH_NOARGS, "nbytes() -> the bytes its tables take"},
    {NULL, NULL, 0, NULL}};

PyTypeObject TokenTableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tokenizer.accel._cmerge.TokenTable",
    .tp_doc = "TokenTable(tokens): token texts packed; table[i] -> text, get(text) -> id",
    .tp_basicsize = sizeof(TokenTable),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_SEQUENCE,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)table_init,
    .tp_dealloc = (destructor)table_dealloc,
    .tp_methods = table_methods,
    .tp_as_sequence = &table_sequence,
    .tp_as_mapping = &table_mapping,
};

/* ----- TokenIndex: the table's ids by text, with a dict's reading methods ----- */

static void index_dealloc(TokenIndex *self) {
    Py_XDECREF(self->table);
    PyObject_Free(self);
}

static Py_ssize_t index_length(TokenIndex *self) { return self->table->distinct; }

static PyObject *index_subscript(TokenIndex *self, PyObject *text) {
    int32_t id = PyUnicode_Check(text) ? table_find_str(self->table, text) : -1;
    if (id == -2) return NULL;
    if (id < 0) {
        PyErr_SetObject(PyExc_KeyError, text);
        return NULL;
    }
    return PyLong_FromLong(id);
}

static int index_contains(TokenIndex *self, PyObject *text) { return table_contains(self->table, text); }

static PyObject *index_get(TokenIndex *self, PyObject *const *args, Py_ssize_t nargs) {
    return table_get(self->table, args, nargs);
}

static PyMappingMethods index_mapping = {.mp_length = (lenfunc)index_length, .mp_subscript = (binaryfunc)index_subscript};
static PySequenceMethods index_sequence = {.sq_contains = (objobjproc)index_contains};
static PyMethodDef index_methods[] = {
    {"get", (PyCFunction)(void (*)(void))index_get, METH_FASTCALL, "get(text, default=None) -> the token's id"},
    {NULL, NULL, 0, NULL}};

PyTypeObject TokenIndexType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tokenizer.accel._cmerge.TokenIndex",
    .tp_doc = "TokenTable.index(): a vocabulary's ids by text, read as dict(zip(tokens, ids)) is",
    .tp_basicsize = sizeof(TokenIndex),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)index_dealloc,
    .tp_methods = index_methods,
    .tp_as_mapping = &index_mapping,
    .tp_as_sequence = &index_sequence,
};
