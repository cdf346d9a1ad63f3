/* The torch analysis' summary CSVs' per-row columns in C (export/ascend_pt/summary_cols.py): one call
 * per view where numpy takes a dozen calls on small arrays.  summary_cols.py's numpy code is the
 * reference and the fallback; it checks the arguments first (one line naming what is wrong), and
 * every buffer is checked again here (kinds, lengths, codes).
 *
 *   kernel_codes(ts, dur, op, op_shape, step_start, step_end, wait, shape, step)
 *       per kernel i: wait[i] = max(ts[i] - (ts[i-1] + dur[i-1]), 0) (0 for the first);
 *       shape[i] = op_shape[op[i]] (0 when op[i] < 0); step[i] = 1 + the index of the step that
 *       starts last at or before ts[i] when ts[i] is before its end, else 0 (steps by start)
 *   step_sums(lo, hi, tracks, out)
 *       per window j (lo[j]..hi[j]): out[6j..6j+5] = the length of each of the four sorted,
 *       disjoint tracks (tracks[0..3], each (starts, ends)) inside the window (0 if negative),
 *       then of the busy track tracks[4]: Stage (first busy start to last busy end inside) and
 *       Preparing (window start to the first busy start), 0 where nothing is busy inside
 *   op_tree_times(ts, dur, tid, k_op, k_dur, child, dev_self, dev_total)
 *       operators nested by thread and time (sorted by thread, start, -duration: an operator's
 *       parent is the innermost one still open at its start): per operator the summed duration
 *       of its direct children, its kernels' duration (k_op: each kernel's operator, -1 none)
 *       and its subtree's kernels' duration (nesting.parents + nesting.op_times of every operator)
 *   group_stats(key, dur, size, out) -> groups
 *       kernels grouped by key (0 <= key < size): per group (key, count, total, min, max) into
 *       out (5 per group), by total descending, then by first kernel; returns the group count
 *
 * Arithmetic wraps as numpy's int64 does (no undefined overflow).  The GIL is released around
 * the loops; the buffers are held (PyBuffer) for the call, and no Python object is touched then.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_sweep.h"

static inline int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t wsub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }

typedef struct {
    Py_buffer view;
    int held;
    int64_t *data;
    Py_ssize_t n;
} arr;

static void arr_release(arr *a) {
    if (a->held) {
        PyBuffer_Release(&a->view);
        a->held = 0;
    }
}

/* a one-dimensional C-contiguous int64 buffer (writable when asked) named what */
static int arr_get(PyObject *obj, arr *a, const char *what, int writable) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &a->view, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: not a %scontiguous int64 buffer", what, writable ? "writable " : "");
        return -1;
    }
    a->held = 1;
    const char *f = a->view.format ? a->view.format : "B";
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    if (a->view.ndim != 1 || a->view.itemsize != 8 || !(strcmp(f, "q") == 0 || strcmp(f, "l") == 0)) {
        PyErr_Format(PyExc_TypeError, "%s: not a one-dimensional int64 buffer", what);
        return -1;
    }
    a->data = (int64_t *)a->view.buf;
    a->n = a->view.shape ? a->view.shape[0] : a->view.len / 8;
    return 0;
}

static int same_len(const arr *a, const arr *b, const char *an, const char *bn) {
    if (a->n != b->n) {
        PyErr_Format(PyExc_ValueError, "%s has %zd values, %s %zd", an, a->n, bn, b->n);
        return -1;
    }
    return 0;
}

static PyObject *kernel_codes(PyObject *self, PyObject *args) {
    PyObject *o[9];
    static const char *names[9] = {"ts", "dur", "op", "op_shape", "step_start", "step_end", "wait", "shape", "step"};
    if (!PyArg_ParseTuple(args, "OOOOOOOOO:kernel_codes", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8]))
        return NULL;
    arr a[9];
    memset(a, 0, sizeof(a));
    PyObject *res = NULL;
    for (int j = 0; j < 9; j++)
        if (arr_get(o[j], &a[j], names[j], j >= 6) < 0)
            goto done;
    if (same_len(&a[1], &a[0], "dur", "ts") < 0 || same_len(&a[2], &a[0], "op", "ts") < 0 ||
        same_len(&a[6], &a[0], "wait", "ts") < 0 || same_len(&a[7], &a[0], "shape", "ts") < 0 ||
        same_len(&a[8], &a[0], "step", "ts") < 0 || same_len(&a[5], &a[4], "step_end", "step_start") < 0)
        goto done;
    const int64_t *ts = a[0].data, *dur = a[1].data, *op = a[2].data, *op_shape = a[3].data;
    const int64_t *s0 = a[4].data, *s1 = a[5].data;
    int64_t *wait = a[6].data, *shape = a[7].data, *step = a[8].data;
    Py_ssize_t n = a[0].n, n_ops = a[3].n, n_steps = a[4].n, bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && bad < 0; i++) {
        int64_t w = i ? wsub(ts[i], wadd(ts[i - 1], dur[i - 1])) : 0;
        wait[i] = w > 0 ? w : 0;
        if (op[i] >= n_ops)
            bad = i;
        shape[i] = op[i] >= 0 && op[i] < n_ops ? op_shape[op[i]] : 0;
        Py_ssize_t lo = 0, hi = n_steps; /* the first step that starts after ts[i] */
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (s0[mid] <= ts[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        step[i] = lo > 0 && ts[i] < s1[lo - 1] ? (int64_t)lo : 0;
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_IndexError, "op: kernel %zd names operator %lld of %zd", bad, (long long)op[bad], n_ops);
        goto done;
    }
    res = Py_NewRef(Py_None);
done:
    for (int j = 0; j < 9; j++)
        arr_release(&a[j]);
    return res;
}

/* first index in [0, n) with x[i] > v (right) or x[i] >= v (left), x ascending */
static Py_ssize_t bisect(const int64_t *x, Py_ssize_t n, int64_t v, int right) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (right ? x[mid] <= v : x[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static PyObject *step_sums(PyObject *self, PyObject *args) {
    PyObject *lo_o, *hi_o, *tracks, *out_o;
    if (!PyArg_ParseTuple(args, "OOOO:step_sums", &lo_o, &hi_o, &tracks, &out_o))
        return NULL;
    arr lo = {0}, hi = {0}, out = {0}, tr[10];
    memset(tr, 0, sizeof(tr));
    PyObject *res = NULL;
    static const char *tn[10] = {"computing starts", "computing ends", "communication starts", "communication ends",
                                 "not-overlapped starts", "not-overlapped ends", "free starts", "free ends",
                                 "busy starts", "busy ends"};
    if (!PyTuple_Check(tracks) || PyTuple_GET_SIZE(tracks) != 10) {
        PyErr_SetString(PyExc_TypeError, "tracks: a tuple of 10 arrays (starts, ends of 5 tracks) expected");
        return NULL;
    }
    if (arr_get(lo_o, &lo, "lo", 0) < 0 || arr_get(hi_o, &hi, "hi", 0) < 0 || arr_get(out_o, &out, "out", 1) < 0)
        goto done;
    for (int j = 0; j < 10; j++)
        if (arr_get(PyTuple_GET_ITEM(tracks, j), &tr[j], tn[j], 0) < 0)
            goto done;
    if (same_len(&hi, &lo, "hi", "lo") < 0)
        goto done;
    for (int j = 0; j < 10; j += 2)
        if (same_len(&tr[j + 1], &tr[j], tn[j + 1], tn[j]) < 0)
            goto done;
    if (out.n != 6 * lo.n) {
        PyErr_Format(PyExc_ValueError, "out has %zd values, 6 per window (%zd windows)", out.n, lo.n);
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t w = 0; w < lo.n; w++) {
        int64_t a = lo.data[w], b = hi.data[w];
        int64_t *o = out.data + 6 * w;
        for (int t = 0; t < 4; t++) {
            const int64_t *s = tr[2 * t].data, *e = tr[2 * t + 1].data;
            Py_ssize_t m = tr[2 * t].n;
            Py_ssize_t i0 = bisect(e, m, a, 1), i1 = bisect(s, m, b, 0);
            int64_t sum = 0;
            for (Py_ssize_t i = i0; i < i1; i++)
                sum = wadd(sum, wsub(e[i] < b ? e[i] : b, s[i] > a ? s[i] : a));
            o[t] = sum > 0 ? sum : 0;
        }
        const int64_t *bs = tr[8].data, *be = tr[9].data;
        Py_ssize_t m = tr[8].n;
        Py_ssize_t b0 = bisect(be, m, a, 1), b1 = bisect(bs, m, b, 0);
        if (m && b1 > b0) {
            int64_t first = bs[b0] > a ? bs[b0] : a, last = be[b1 - 1] < b ? be[b1 - 1] : b;
            o[4] = wsub(last, first);
            o[5] = wsub(first, a);
        } else {
            o[4] = o[5] = 0;
        }
    }
    Py_END_ALLOW_THREADS
    res = Py_NewRef(Py_None);
done:
    arr_release(&lo);
    arr_release(&hi);
    arr_release(&out);
    for (int j = 0; j < 10; j++)
        arr_release(&tr[j]);
    return res;
}

static PyObject *op_tree_times(PyObject *self, PyObject *args) {
    PyObject *o[8];
    static const char *names[8] = {"ts", "dur", "tid", "k_op", "k_dur", "child", "dev_self", "dev_total"};
    if (!PyArg_ParseTuple(args, "OOOOOOOO:op_tree_times", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7]))
        return NULL;
    arr a[8];
    memset(a, 0, sizeof(a));
    PyObject *res = NULL;
    sweep_key *ev = NULL;
    int64_t *parent = NULL, *stack = NULL;
    for (int j = 0; j < 8; j++)
        if (arr_get(o[j], &a[j], names[j], j >= 5) < 0)
            goto done;
    if (same_len(&a[1], &a[0], "dur", "ts") < 0 || same_len(&a[2], &a[0], "tid", "ts") < 0 ||
        same_len(&a[4], &a[3], "k_dur", "k_op") < 0 || same_len(&a[5], &a[0], "child", "ts") < 0 ||
        same_len(&a[6], &a[0], "dev_self", "ts") < 0 || same_len(&a[7], &a[0], "dev_total", "ts") < 0)
        goto done;
    Py_ssize_t n = a[0].n, nk = a[3].n;
    const int64_t *ts = a[0].data, *dur = a[1].data, *tid = a[2].data, *k_op = a[3].data, *k_dur = a[4].data;
    int64_t *child = a[5].data, *dev_self = a[6].data, *dev_total = a[7].data;
    for (Py_ssize_t i = 0; i < nk; i++)
        if (k_op[i] >= n) {
            PyErr_Format(PyExc_IndexError, "k_op: kernel %zd names operator %lld of %zd", i, (long long)k_op[i], n);
            goto done;
        }
    ev = PyMem_Malloc(sizeof(sweep_key) * (size_t)(n ? n : 1));
    parent = PyMem_Malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    stack = PyMem_Malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (ev == NULL || parent == NULL || stack == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    sweep_tree(ts, dur, tid, NULL, n, ev, stack, parent, NULL);
    for (Py_ssize_t i = 0; i < n; i++)
        child[i] = dev_self[i] = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (parent[i] >= 0)
            child[parent[i]] = wadd(child[parent[i]], dur[i]);
    for (Py_ssize_t i = 0; i < nk; i++)
        if (k_op[i] >= 0)
            dev_self[k_op[i]] = wadd(dev_self[k_op[i]], k_dur[i]);
    for (Py_ssize_t i = 0; i < n; i++)
        dev_total[i] = dev_self[i];
    for (Py_ssize_t p = n - 1; p >= 0; p--) { /* children after their parent in sweep order */
        int64_t i = ev[p].i;
        if (parent[i] >= 0)
            dev_total[parent[i]] = wadd(dev_total[parent[i]], dev_total[i]);
    }
    Py_END_ALLOW_THREADS
    res = Py_NewRef(Py_None);
done:
    PyMem_Free(ev);
    PyMem_Free(parent);
    PyMem_Free(stack);
    for (int j = 0; j < 8; j++)
        arr_release(&a[j]);
    return res;
}

typedef struct {
    int64_t key, count, total, min, max, first;
} group;

static int by_total(const void *pa, const void *pb) {
    const group *a = pa, *b = pb;
    if (a->total != b->total)
        return a->total > b->total ? -1 : 1;
    return a->first < b->first ? -1 : a->first > b->first;
}

static PyObject *group_stats(PyObject *self, PyObject *args) {
    PyObject *key_o, *dur_o, *out_o;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "OOnO:group_stats", &key_o, &dur_o, &size, &out_o))
        return NULL;
    arr key = {0}, dur = {0}, out = {0};
    PyObject *res = NULL;
    group *g = NULL;
    Py_ssize_t *slot = NULL;
    if (arr_get(key_o, &key, "key", 0) < 0 || arr_get(dur_o, &dur, "dur", 0) < 0 || arr_get(out_o, &out, "out", 1) < 0)
        goto done;
    if (same_len(&dur, &key, "dur", "key") < 0)
        goto done;
    if (size < 0 || size > PY_SSIZE_T_MAX / 5 || out.n < 5 * (size < key.n ? size : key.n)) {
        PyErr_Format(PyExc_ValueError, "size %zd: out has %zd values, 5 per group", size, out.n);
        goto done;
    }
    for (Py_ssize_t i = 0; i < key.n; i++)
        if (key.data[i] < 0 || key.data[i] >= size) {
            PyErr_Format(PyExc_IndexError, "key: kernel %zd has key %lld, not in 0..%zd", i, (long long)key.data[i],
                         size - 1);
            goto done;
        }
    slot = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(size ? size : 1));
    g = PyMem_Malloc(sizeof(group) * (size_t)(key.n ? key.n : 1));
    if (slot == NULL || g == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t ng = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < size; k++)
        slot[k] = -1;
    for (Py_ssize_t i = 0; i < key.n; i++) {
        int64_t k = key.data[i], d = dur.data[i];
        Py_ssize_t s = slot[k];
        if (s < 0) {
            s = slot[k] = ng++;
            g[s] = (group){k, 0, 0, d, d, (int64_t)i};
        }
        g[s].count++;
        g[s].total = wadd(g[s].total, d);
        if (d < g[s].min)
            g[s].min = d;
        if (d > g[s].max)
            g[s].max = d;
    }
    qsort(g, (size_t)ng, sizeof(group), by_total);
    for (Py_ssize_t s = 0; s < ng; s++) {
        int64_t *o = out.data + 5 * s;
        o[0] = g[s].key;
        o[1] = g[s].count;
        o[2] = g[s].total;
        o[3] = g[s].min;
        o[4] = g[s].max;
    }
    Py_END_ALLOW_THREADS
    res = PyLong_FromSsize_t(ng);
done:
    PyMem_Free(slot);
    PyMem_Free(g);
    arr_release(&key);
    arr_release(&dur);
    arr_release(&out);
    return res;
}

static PyMethodDef methods[] = {
    {"kernel_codes", kernel_codes, METH_VARARGS, "kernel_codes(ts, dur, op, op_shape, step_start, step_end, wait, shape, step)"},
    {"step_sums", step_sums, METH_VARARGS, "step_sums(lo, hi, tracks, out)"},
    {"op_tree_times", op_tree_times, METH_VARARGS,
     "op_tree_times(ts, dur, tid, k_op, k_dur, child, dev_self, dev_total)"},
    {"group_stats", group_stats, METH_VARARGS, "group_stats(key, dur, size, out) -> groups"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_summary_cols",
                                    "The torch summary CSVs' columns (kernel codes, step sums, op groups).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__summary_cols(void) { return PyModule_Create(&module); }
