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
 *
 *   tree(ts, dur, tid, sel, trivial, parent, depth, leaf) -> None
 *
 * nesting.parents and nesting.kernel_mask in one call (nesting.tree; the numpy code stays the
 * reference): the ``sel`` events (bool) sorted by (tid, ts, -dur, index) as numpy's lexsort
 * orders them, swept, their parent (index, -1 none) and depth written to ``parent``/``depth``
 * (int64, every index: -1/0 where not selected); with ``trivial`` (bool) ``leaf`` (bool,
 * writable) gets the kernel mask (both None: no mask).  int64 sums/negations wrap as numpy's.
 * Every column has the length of ``ts``; a mismatch, a wrong item size or another item type
 * (int64 columns, bool masks, the int8 kinds: numpy's) is a ValueError naming the column.  No GIL
 * during the sort and the sweeps.
 *
 *   kernels(leaf, kind, ts, out) -> count
 *
 * nesting.kernel_order: the events that are device tasks of a CPU trace — ``leaf`` (bool) and
 * not a launch, or communication (``kind``, int8: 1 launch, 2 communication, 0 other) — in start
 * order (``ts`` int64; equal starts in index order, as numpy's stable argsort), their indices
 * written to the front of ``out`` (int64, as long as ``ts``); returns how many.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_sweep.h"

/* The column types, as the type letters of a buffer's struct format: an int64 column is "q" or
 * "l" (numpy's int64 is either, by platform), a mask "?", a kind column "b". */
#define I64 "ql"
#define MASK "?"
#define KIND "b"

/* The buffer's struct format is one of ``kinds`` (an optional byte-order mark of this machine's
 * order before it). */
static int format_ok(const char *fmt, const char *kinds) {
    if (fmt == NULL)
        fmt = "B"; /* (PEP 3118: no format means unsigned bytes) */
    if (*fmt == '@' || *fmt == '=' || *fmt == (PY_LITTLE_ENDIAN ? '<' : '>'))
        fmt++;
    return fmt[0] != '\0' && fmt[1] == '\0' && strchr(kinds, fmt[0]) != NULL;
}

static int get(PyObject *o, Py_buffer *b, int writable, const char *kinds, const char *what) {
    Py_ssize_t item = kinds[0] == 'q' ? 8 : 1;
    if (PyObject_GetBuffer(o, b, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    if (b->len % item) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of %zd-byte items", what, b->len, item);
        PyBuffer_Release(b);
        return -1;
    }
    if (b->itemsize != item || !format_ok(b->format, kinds)) {
        PyErr_Format(PyExc_ValueError, "%s: items of format '%s' (%zd bytes), not %s", what,
                     b->format ? b->format : "B", b->itemsize,
                     item == 8 ? "int64" : kinds[0] == 'b' ? "int8" : "bool");
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

static PyObject *sweep(PyObject *self, PyObject *args) {
    PyObject *o[7];
    static const char *names[7] = {"pos", "ts", "end", "tid", "nested", "parent", "depth"};
    static const char *kinds[7] = {I64, I64, I64, I64, MASK, I64, I64};
    Py_buffer b[7];
    int got = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOO:sweep", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6]))
        return NULL;
    for (; got < 7; got++) {
        if (get(o[got], &b[got], got >= 5, kinds[got], names[got]) < 0)
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

static PyObject *tree(PyObject *self, PyObject *args) {
    PyObject *o[8];
    static const char *names[8] = {"ts", "dur", "tid", "sel", "trivial", "parent", "depth", "leaf"};
    static const char *kinds[8] = {I64, I64, I64, MASK, MASK, I64, I64, MASK};
    Py_buffer b[8];
    int have[8] = {0};
    sweep_key *keys = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOOOO:tree", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7]))
        return NULL;
    if ((o[4] == Py_None) != (o[7] == Py_None)) {
        PyErr_SetString(PyExc_ValueError, "tree: trivial and leaf are both given or both None");
        return NULL;
    }
    Py_ssize_t n = -1;
    for (int i = 0; i < 8; i++) {
        if (o[i] == Py_None && (i == 4 || i == 7))
            continue;
        if (get(o[i], &b[i], i >= 5, kinds[i], names[i]) < 0)
            goto fail;
        have[i] = 1;
        if (n < 0)
            n = b[i].len / b[i].itemsize;
        if (b[i].len / b[i].itemsize != n) {
            PyErr_Format(PyExc_ValueError, "tree: %s has %zd items, ts has %zd", names[i],
                         b[i].len / b[i].itemsize, n);
            goto fail;
        }
    }
    if (n < 0)
        n = 0;
    const int64_t *ts = b[0].buf, *dur = b[1].buf, *tid = b[2].buf;
    const unsigned char *sel = b[3].buf, *trivial = have[4] ? b[4].buf : NULL;
    int64_t *parent = b[5].buf, *depth = b[6].buf;
    unsigned char *leaf = have[7] ? b[7].buf : NULL;
    /* keys, then the stack (positions into keys), then busy flags: one allocation */
    keys = malloc((size_t)(n ? n : 1) * (sizeof(sweep_key) + sizeof(int64_t) + 1));
    if (keys == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    Py_BEGIN_ALLOW_THREADS
    int64_t *stack = (int64_t *)(keys + (n ? n : 1));
    unsigned char *busy = (unsigned char *)(stack + (n ? n : 1));
    Py_ssize_t m = sweep_tree(ts, dur, tid, sel, n, keys, stack, parent, depth);
    if (leaf != NULL) { /* nesting.kernel_mask: a parent comes before its children in this order */
        memset(busy, 0, (size_t)n);
        for (Py_ssize_t k = m - 1; k >= 0; k--) {
            int64_t i = keys[k].i;
            if (parent[i] >= 0 && (busy[i] || !trivial[i]))
                busy[parent[i]] = 1;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            leaf[i] = sel[i] && !busy[i] && !(trivial[i] && parent[i] >= 0 && !busy[parent[i]]);
    }
    Py_END_ALLOW_THREADS
    free(keys);
    for (int i = 0; i < 8; i++)
        if (have[i])
            PyBuffer_Release(&b[i]);
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < 8; i++)
        if (have[i])
            PyBuffer_Release(&b[i]);
    return NULL;
}

typedef struct {
    int64_t ts, i;
} start;

static int by_start(const void *a, const void *b) {
    const start *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static PyObject *kernels(PyObject *self, PyObject *args) {
    PyObject *o[4];
    static const char *names[4] = {"leaf", "kind", "ts", "out"};
    static const char *kinds[4] = {MASK, KIND, I64, I64};
    Py_buffer b[4];
    int got = 0;
    start *order = NULL;
    if (!PyArg_ParseTuple(args, "OOOO:kernels", &o[0], &o[1], &o[2], &o[3]))
        return NULL;
    Py_ssize_t n = -1;
    for (; got < 4; got++) {
        if (get(o[got], &b[got], got == 3, kinds[got], names[got]) < 0)
            goto fail;
        if (n < 0)
            n = b[got].len / b[got].itemsize;
        if (b[got].len / b[got].itemsize != n) {
            PyErr_Format(PyExc_ValueError, "kernels: %s has %zd items, leaf has %zd", names[got],
                         b[got].len / b[got].itemsize, n);
            got++;
            goto fail;
        }
    }
    const unsigned char *leaf = b[0].buf;
    const signed char *kind = b[1].buf;
    const int64_t *ts = b[2].buf;
    int64_t *out = b[3].buf;
    Py_ssize_t m = 0;
    int ordered = 1;
    order = malloc((size_t)(n ? n : 1) * sizeof(start));
    if (order == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((leaf[i] && kind[i] != 1) || kind[i] == 2) {
            if (m && ts[i] < order[m - 1].ts)
                ordered = 0;
            order[m].ts = ts[i];
            order[m].i = i;
            m++;
        }
    }
    if (!ordered)
        qsort(order, (size_t)m, sizeof(start), by_start);
    for (Py_ssize_t k = 0; k < m; k++)
        out[k] = order[k].i;
    Py_END_ALLOW_THREADS
    free(order);
    for (int i = 0; i < 4; i++)
        PyBuffer_Release(&b[i]);
    return PyLong_FromSsize_t(m);
fail:
    free(order);
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&b[i]);
    return NULL;
}

static PyMethodDef methods[] = {
    {"sweep", sweep, METH_VARARGS,
     "sweep(pos, ts, end, tid, nested, parent, depth): nesting.parents' stack sweep (see the module source)."},
    {"tree", tree, METH_VARARGS,
     "tree(ts, dur, tid, sel, trivial, parent, depth, leaf): nesting.tree's sort, sweep and kernel mask in one "
     "call (see the module source)."},
    {"kernels", kernels, METH_VARARGS,
     "kernels(leaf, kind, ts, out) -> count: nesting.kernel_order's selection in start order (see the module "
     "source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nest_sweep",
                                    "The operator nesting sweep (export/ascend_pt/nesting.py's fast path).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__nest_sweep(void) { return PyModule_Create(&module); }
