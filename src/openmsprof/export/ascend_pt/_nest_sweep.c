/* The stack sweep of export/ascend_pt/nesting.py's ``parents`` in C (its Python loop stays the
 * fallback and the reference: tests/export/test_nest_sweep.py keeps both equal).
 *
 *   sweep(pos, ts, end, tid, nested, parent, depth) -> None
 *
 * Events are in sweep order (thread, start, -duration); ``pos`` (int64) lists the positions to
 * visit in increasing order; ``ts``, ``end``, ``tid`` (int64) and ``nested`` (bool, one byte) are
 * per position; ``parent`` and ``depth`` (int64, writable) receive, for each visited position,
 * the position of the nearest enclosing open event (left as it is when there is none) and the
 * number of open events.  The stack restarts at a new thread or at a position that is not
 * ``nested``.  Runs without the GIL; the buffers are held for the whole call.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

static int get(PyObject *o, Py_buffer *b, int writable, Py_ssize_t item, const char *what) {
    if (PyObject_GetBuffer(o, b, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (b->len % item) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of %zd-byte items", what, b->len, item);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

static PyObject *sweep(PyObject *self, PyObject *args) {
    PyObject *o[7];
    static const char *names[7] = {"pos", "ts", "end", "tid", "nested", "parent", "depth"};
    Py_buffer b[7];
    int got = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOO:sweep", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6]))
        return NULL;
    for (; got < 7; got++) {
        if (get(o[got], &b[got], got >= 5, got == 4 ? 1 : 8, names[got]) < 0)
            goto fail;
    }
    Py_ssize_t n = b[1].len / 8, npos = b[0].len / 8;
    if (b[2].len / 8 != n || b[3].len / 8 != n || b[4].len != n || b[5].len / 8 != n || b[6].len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "sweep: the per-position columns differ in length");
        goto fail;
    }
    const int64_t *pos = b[0].buf, *ts = b[1].buf, *end = b[2].buf, *tid = b[3].buf;
    const unsigned char *nested = b[4].buf;
    int64_t *parent = b[5].buf, *depth = b[6].buf;
    for (Py_ssize_t i = 0; i < npos; i++) {
        if (pos[i] < 0 || pos[i] >= n || (i && pos[i] <= pos[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "sweep: pos must increase within the columns");
            goto fail;
        }
    }
    int64_t *stack = malloc((size_t)(npos ? npos : 1) * sizeof(int64_t));
    if (stack == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t sp = 0;
    int have = 0;
    int64_t cur = 0;
    for (Py_ssize_t i = 0; i < npos; i++) {
        int64_t p = pos[i], t = ts[p];
        if (!have || tid[p] != cur || !nested[p]) {
            sp = 0;
            cur = tid[p];
            have = 1;
        }
        while (sp && end[stack[sp - 1]] <= t)
            sp--;
        if (sp) {
            parent[p] = stack[sp - 1];
            depth[p] = sp;
        }
        stack[sp++] = p;
    }
    Py_END_ALLOW_THREADS
    free(stack);
    for (int i = 0; i < 7; i++)
        PyBuffer_Release(&b[i]);
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&b[i]);
    return NULL;
}

static PyMethodDef methods[] = {
    {"sweep", sweep, METH_VARARGS,
     "sweep(pos, ts, end, tid, nested, parent, depth): nesting.parents' stack sweep (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nest_sweep",
                                    "The operator nesting sweep (export/ascend_pt/nesting.py's fast path).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__nest_sweep(void) { return PyModule_Create(&module); }
