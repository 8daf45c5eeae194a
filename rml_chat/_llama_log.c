/* llama.cpp's log callback, in C, so that logging never waits for Python's GIL.
 *
 * Why: llama.cpp writes ~1,400 log lines while it loads a model and builds a context. The weights load in
 * a thread while our main thread builds the tokenizer; through a Python callback each of those lines
 * waits for the GIL, which the main thread holds, so the load stalls. This callback keeps the warning and
 * error lines (a failed load is explained with them) and, when verbose, writes every line to stderr.
 * docs/performance.md ("Launch to first token") has the figures.
 *
 * Python sees four functions: address() (the callback, for llama_log_set), set_verbose(flag), kept() (the
 * warning and error text since clear(), as bytes) and clear(). Where this does not compile,
 * rml_chat/runtime.py installs a Python callback that does the same.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include <string.h>

enum { LEVEL_WARN = 3, LEVEL_ERROR = 4, LEVEL_CONT = 5 }; /* ggml_log_level */

static int verbose = 0;
static int last_level = 0; /* a LEVEL_CONT line continues the level of the line before it */
static char kept_text[16384];
static size_t kept_len = 0;

static void on_log(int level, const char *text, void *user_data) {
    (void)user_data;
    if (text == NULL) return;
    if (level == LEVEL_CONT) level = last_level; else last_level = level;
    if (level == LEVEL_WARN || level == LEVEL_ERROR) {
        size_t n = strlen(text);
        if (kept_len + n <= sizeof kept_text) { /* the first lines tell why; later ones are dropped */
            memcpy(kept_text + kept_len, text, n);
            kept_len += n;
        }
    }
    if (verbose) {
        fputs(text, stderr);
        fflush(stderr);
    }
}

static PyObject *py_address(PyObject *self, PyObject *unused) {
    return PyLong_FromVoidPtr((void *)on_log);
}

static PyObject *py_set_verbose(PyObject *self, PyObject *flag) {
    int on = PyObject_IsTrue(flag);
    if (on < 0) return NULL;
    verbose = on;
    Py_RETURN_NONE;
}

static PyObject *py_kept(PyObject *self, PyObject *unused) {
    return PyBytes_FromStringAndSize(kept_text, (Py_ssize_t)kept_len);
}

static PyObject *py_clear(PyObject *self, PyObject *unused) {
    kept_len = 0;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"address", py_address, METH_NOARGS, "The callback's address, for llama_log_set."},
    {"set_verbose", py_set_verbose, METH_O, "Write every line to stderr (true) or none (false)."},
    {"kept", py_kept, METH_NOARGS, "The warning and error lines logged since clear(), as bytes."},
    {"clear", py_clear, METH_NOARGS, "Forget the kept lines."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_llama_log", "llama.cpp's log callback in C.", -1, methods};

PyMODINIT_FUNC PyInit__llama_log(void) { return PyModule_Create(&module); }
