/* A GGUF string array read into Python strings in C: loaders/gguf_reader.py's _strings loop.
 *
 * read_strings(buffer, pos, end, count, decode) -> (list, pos after the array), or None.
 *
 * A GGUF string is a little-endian u64 byte count, then the bytes. Gemma 3's vocabulary holds 262,144 of
 * them; the Python loop (an unpack, a slice and a decode each) is most of a cold load, which an app
 * starting a chat waits for (docs/performance.md). Here each string is one bounds check and one PyUnicode_DecodeUTF8
 * ("surrogateescape", as the loop decodes) or PyBytes_FromStringAndSize (decode false).
 * Anything unusual — a length that runs past ``end``, a buffer that can't be read — returns None: the
 * Python loop then reads the array again and names what is wrong, with the offset.
 */
#include "_cmerge.h"

static PyObject *read_strings(PyObject *self, PyObject *args) {
    PyObject *source;
    Py_ssize_t pos, end, count;
    int decode;
    if (!PyArg_ParseTuple(args, "Onnnp", &source, &pos, &end, &count, &decode)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(source, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    const unsigned char *data = view.buf;
    if (pos < 0 || end > view.len || pos > end || count < 0 || count > (end - pos) / 8) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    PyObject *out = PyList_New(count);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (end - pos < 8) goto unusual;
        uint64_t length = 0;
        for (int b = 7; b >= 0; b--) length = (length << 8) | data[pos + b];
        pos += 8;
        if (length > (uint64_t)(end - pos)) goto unusual;
        const char *text = (const char *)data + pos;
        PyObject *item = decode ? PyUnicode_DecodeUTF8(text, (Py_ssize_t)length, "surrogateescape")
                                : PyBytes_FromStringAndSize(text, (Py_ssize_t)length);
        if (item == NULL) {
            Py_DECREF(out);
            PyBuffer_Release(&view);
            return NULL;
        }
        PyList_SET_ITEM(out, i, item);
        pos += (Py_ssize_t)length;
    }
    PyBuffer_Release(&view);
    PyObject *result = Py_BuildValue("(Nn)", out, pos);
    return result;
unusual:
    Py_DECREF(out);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

PyMethodDef GGUF_METHODS[] = {
    {"read_strings", read_strings, METH_VARARGS,
     "read_strings(buffer, pos, end, count, decode) -> (list, pos) or None: a GGUF string array"},
    {NULL, NULL, 0, NULL},
};
