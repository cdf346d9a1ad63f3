/* The task pass's per-row loop (summary_task_pass._device_pass) in C: the same lines, the same
 * caches and op_statistic groups.  render() walks a chunk of rows from index i and stops at the
 * first row it leaves to the Python loop (a negative or non-integer time, a task id that is not
 * an integer, a wait that would overflow): the caller renders that row in Python and calls again.
 * The lines come back as UTF-8 bytes (one block per output), built by the Python f-strings' rules:
 *   op line:   pre + tid + post + st "," du "," wt [+ tail] "\n"
 *   time line: tth + tid "," du "," st "," en "\n"
 * with every time >= 0 written as "{v // 1000}.{v % 1000:03d}".
 *
 * Memory-safe whatever Python hands in or does from its callbacks (head(), tail(), a key's
 * __hash__/__eq__, a value's __bool__/__add__/__lt__): the start index is bounds-checked
 * (IndexError), the list's length is re-read every row, and every row, group list and value is
 * owned (a strong reference) across each call into Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

typedef struct {
    char *p;
    Py_ssize_t n, cap;
} buf;

static int put(buf *b, const char *p, Py_ssize_t n) {
    if (b->n + n > b->cap) {
        Py_ssize_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->n + n) cap *= 2;
        char *q = PyMem_Realloc(b->p, (size_t)cap);
        if (q == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, (size_t)n);
    b->n += n;
    return 0;
}

/* a str's UTF-8 bytes (cached in the str) */
static int put_str(buf *b, PyObject *s) {
    Py_ssize_t n;
    const char *p = PyUnicode_AsUTF8AndSize(s, &n);
    return p == NULL ? -1 : put(b, p, n);
}

/* v >= 0 as "{v // 1000}.{v % 1000:03d}" at buf; returns the length */
static int fmt_us(char *buf, long long v) {
    char tmp[24];
    long long q = v / 1000;
    int r = (int)(v % 1000), n = 0, k = 0;
    do {
        tmp[n++] = (char)('0' + q % 10);
        q /= 10;
    } while (q > 0);
    while (n > 0) buf[k++] = tmp[--n];
    buf[k++] = '.';
    buf[k++] = (char)('0' + r / 100);
    buf[k++] = (char)('0' + r / 10 % 10);
    buf[k++] = (char)('0' + r % 10);
    return k;
}

static int is_str3(PyObject *t) {
    return PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 3 && PyUnicode_Check(PyTuple_GET_ITEM(t, 0))
           && PyUnicode_Check(PyTuple_GET_ITEM(t, 1)) && PyUnicode_Check(PyTuple_GET_ITEM(t, 2));
}

/* tails_{cpu,job}.get(tk) or tail(cpu_obj, tk): a new reference to a str, NULL on error */
static PyObject *tail_of(PyObject *cache, PyObject *tail, PyObject *cpu_obj, PyObject *tk) {
    PyObject *tl = PyDict_GetItemWithError(cache, tk);
    if (tl == NULL && PyErr_Occurred()) return NULL;
    Py_XINCREF(tl);  /* owned across its __bool__ */
    int truth = tl != NULL ? PyObject_IsTrue(tl) : 0;
    if (truth < 0) {
        Py_DECREF(tl);
        return NULL;
    }
    if (!truth) {
        Py_XDECREF(tl);
        tl = PyObject_CallFunctionObjArgs(tail, cpu_obj, tk, NULL);
        if (tl == NULL) return NULL;
    }
    if (!PyUnicode_Check(tl)) {
        Py_DECREF(tl);
        PyErr_SetString(PyExc_TypeError, "tail(): a str expected");
        return NULL;
    }
    return tl;
}

/* g[k] of a group list that must still have four items: a new reference, NULL with TypeError */
static PyObject *group_item(PyObject *g, Py_ssize_t k) {
    if (PyList_GET_SIZE(g) != 4) {
        PyErr_SetString(PyExc_TypeError, "groups: a list of four expected");
        return NULL;
    }
    PyObject *x = PyList_GET_ITEM(g, k);
    Py_INCREF(x);
    return x;
}

/* g[k] = v (v stolen) in a group list that must still have four items; 0, or -1 with TypeError */
static int group_set(PyObject *g, Py_ssize_t k, PyObject *v) {
    if (PyList_GET_SIZE(g) != 4) {
        Py_DECREF(v);
        PyErr_SetString(PyExc_TypeError, "groups: a list of four expected");
        return -1;
    }
    return PyList_SetItem(g, k, v);
}

/* groups[hk]: [count, sum, min, max] of the durations (the Python loop's rules) */
static int add_group(PyObject *groups, PyObject *hk, long long d, int *complete, Py_ssize_t groups_max) {
    PyObject *g = PyDict_GetItemWithError(groups, hk);
    if (g == NULL) {
        if (PyErr_Occurred()) return -1;
        if (!*complete) return 0;
        if (PyDict_GET_SIZE(groups) < groups_max) {
            PyObject *one = PyLong_FromLong(1), *dd = PyLong_FromLongLong(d);
            PyObject *lst = (one && dd) ? PyList_New(4) : NULL;
            if (lst == NULL) {
                Py_XDECREF(one);
                Py_XDECREF(dd);
                return -1;
            }
            PyList_SET_ITEM(lst, 0, one);
            Py_INCREF(dd);
            Py_INCREF(dd);
            PyList_SET_ITEM(lst, 1, dd);
            PyList_SET_ITEM(lst, 2, dd);
            PyList_SET_ITEM(lst, 3, dd);
            int rc = PyDict_SetItem(groups, hk, lst);
            Py_DECREF(lst);
            return rc;
        }
        *complete = 0;
        PyDict_Clear(groups);
        return 0;
    }
    if (!PyList_Check(g)) {
        PyErr_SetString(PyExc_TypeError, "groups: a list of four expected");
        return -1;
    }
    Py_INCREF(g);  /* owned: the additions and comparisons below may run Python code */
    PyObject *dd = PyLong_FromLongLong(d), *one = PyLong_FromLong(1), *x = NULL, *y = NULL;
    int rc = -1;
    if (dd == NULL || one == NULL) goto out;
    /* each step re-reads the list through the checked accessors: a callback may have resized it */
    PyObject *n = (x = group_item(g, 0)) ? PyNumber_Add(x, one) : NULL;
    Py_CLEAR(x);
    if (n == NULL || group_set(g, 0, n) < 0) goto out;  /* n is stolen, even on error */
    PyObject *sum = (x = group_item(g, 1)) ? PyNumber_Add(x, dd) : NULL;
    Py_CLEAR(x);
    if (sum == NULL || group_set(g, 1, sum) < 0) goto out;
    if ((x = group_item(g, 2)) == NULL) goto out;
    int lt = PyObject_RichCompareBool(dd, x, Py_LT);
    if (lt < 0) goto out;
    if (lt) {
        Py_INCREF(dd);
        if (group_set(g, 2, dd) < 0) goto out;
    }
    if ((y = group_item(g, 3)) == NULL) goto out;
    int gt = PyObject_RichCompareBool(dd, y, Py_GT);
    if (gt < 0) goto out;
    if (gt) {
        Py_INCREF(dd);
        if (group_set(g, 3, dd) < 0) goto out;
    }
    rc = 0;
out:
    Py_XDECREF(x);
    Py_XDECREF(y);
    Py_XDECREF(one);
    Py_XDECREF(dd);
    Py_DECREF(g);
    return rc;
}

/* one side's lines (job or twin), UTF-8: op line to ops, time line to times; 0 or -1 */
static int emit(PyObject *pieces, PyObject *tl, const char *tid, int tidn, const char *nums, int numsn,
                const char *tline, int tlinen, buf *ops, buf *times) {
    if (put_str(ops, PyTuple_GET_ITEM(pieces, 0)) < 0 || put(ops, tid, tidn) < 0
        || put_str(ops, PyTuple_GET_ITEM(pieces, 1)) < 0 || put(ops, nums, numsn) < 0
        || (tl != NULL && put_str(ops, tl) < 0) || put(ops, "\n", 1) < 0)
        return -1;
    return put_str(times, PyTuple_GET_ITEM(pieces, 2)) < 0 || put(times, tline, tlinen) < 0 ? -1 : 0;
}

static PyObject *render(PyObject *self, PyObject *args) {
    PyObject *rows, *prev_obj, *ctx;
    Py_ssize_t i;
    int complete;
    if (!PyArg_ParseTuple(args, "O!nOpO!", &PyList_Type, &rows, &i, &prev_obj, &complete, &PyTuple_Type, &ctx))
        return NULL;
    PyObject *heads, *head, *tails_job, *tails_cpu, *tail, *groups;
    Py_ssize_t groups_max;
    int tensor, twin;
    if (!PyArg_ParseTuple(ctx, "O!OO!O!OO!npp", &PyDict_Type, &heads, &head, &PyDict_Type, &tails_job,
                          &PyDict_Type, &tails_cpu, &tail, &PyDict_Type, &groups, &groups_max, &tensor, &twin))
        return NULL;
    buf out[4] = {{NULL, 0, 0}, {NULL, 0, 0}, {NULL, 0, 0}, {NULL, 0, 0}};  /* ops, times, twin ops, twin times */
    PyObject *result = NULL;
    int has_prev = prev_obj != Py_None, of = 0;
    long long prev = 0;
    Py_ssize_t i0 = i;
    if (i < 0 || i > PyList_GET_SIZE(rows)) {
        PyErr_Format(PyExc_IndexError, "render: start index %zd outside 0..%zd", i, PyList_GET_SIZE(rows));
        goto fail;
    }
    if (has_prev) {
        if (!PyLong_CheckExact(prev_obj)) goto done;
        prev = PyLong_AsLongLongAndOverflow(prev_obj, &of);
        if (of || (prev == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            goto done;
        }
    }
    Py_ssize_t width = tensor ? 21 : 10;
    /* the length is re-read every row: head() and tail() are Python and may change the list */
    for (; i < PyList_GET_SIZE(rows); i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) < width) break;
        PyObject *so = PyTuple_GET_ITEM(row, 0), *eo = PyTuple_GET_ITEM(row, 1), *to = PyTuple_GET_ITEM(row, 2);
        if (!PyLong_CheckExact(so) || !PyLong_CheckExact(eo)) break;
        long long s = PyLong_AsLongLongAndOverflow(so, &of);
        if (of) break;
        long long e = PyLong_AsLongLongAndOverflow(eo, &of);
        if (of || s < 0) break;
        if (e < s) e = s;
        long long d = e - s, wait = 0;
        if (has_prev && s > prev && __builtin_sub_overflow(s, prev, &wait)) break;
        char tid[24];
        int tidn = 0;
        if (to != Py_None) {
            if (!PyLong_CheckExact(to)) break;
            long long t = PyLong_AsLongLongAndOverflow(to, &of);
            if (of) break;
            tidn = snprintf(tid, sizeof tid, "%lld", t);
        }
        /* the row is ours from here: an error is the Python loop's error too */
        prev = e;
        has_prev = 1;
        char st[32], du[32], wt[32], en[32], nums[100], tline[140];
        int stn = fmt_us(st, s), dun = fmt_us(du, d), wtn = fmt_us(wt, wait), enn = fmt_us(en, e);
        int numsn = 0;
        memcpy(nums, st, stn); numsn += stn; nums[numsn++] = ',';
        memcpy(nums + numsn, du, dun); numsn += dun; nums[numsn++] = ',';
        memcpy(nums + numsn, wt, wtn); numsn += wtn;
        int tlinen = 0;
        memcpy(tline, tid, tidn); tlinen += tidn; tline[tlinen++] = ',';
        memcpy(tline + tlinen, du, dun); tlinen += dun; tline[tlinen++] = ',';
        memcpy(tline + tlinen, st, stn); tlinen += stn; tline[tlinen++] = ',';
        memcpy(tline + tlinen, en, enn); tlinen += enn; tline[tlinen++] = '\n';

        Py_INCREF(row);  /* owned across the callbacks: they may replace rows[i] */
        PyObject *hk = PyTuple_GetSlice(row, 3, 10), *h = NULL, *tk = NULL, *tl = NULL;
        if (hk == NULL) {
            Py_DECREF(row);
            goto fail;
        }
        h = PyDict_GetItemWithError(heads, hk);
        if (h != NULL) {
            Py_INCREF(h);
        } else {
            if (PyErr_Occurred()) goto error;
            h = PyObject_CallOneArg(head, hk);
            if (h == NULL) goto error;
        }
        if (!PyTuple_Check(h) || PyTuple_GET_SIZE(h) != 5 || !is_str3(PyTuple_GET_ITEM(h, 0)) || !is_str3(PyTuple_GET_ITEM(h, 2))) {
            PyErr_SetString(PyExc_TypeError, "head(): a tuple of five expected");
            goto error;
        }
        if (add_group(groups, hk, d, &complete, groups_max) < 0) goto error;
        PyObject *cpu = PyTuple_GET_ITEM(h, 1);
        int is_cpu = PyObject_IsTrue(cpu);
        if (is_cpu < 0) goto error;
        if (tensor) {
            tk = PyTuple_GetSlice(row, 10, 21);
            if (tk == NULL) goto error;
            tl = tail_of(is_cpu ? tails_cpu : tails_job, tail, cpu, tk);
            if (tl == NULL) goto error;
        }
        Py_ssize_t op_at = out[0].n, time_at = out[1].n;
        if (emit(PyTuple_GET_ITEM(h, 0), tl, tid, tidn, nums, numsn, tline, tlinen, &out[0], &out[1]) < 0) goto error;
        if (twin) {
            int same = PyObject_IsTrue(PyTuple_GET_ITEM(h, 4));
            if (same < 0) goto error;
            if (same) {  /* the job's lines again */
                Py_ssize_t on = out[0].n - op_at, tn = out[1].n - time_at;
                if (put(&out[2], out[0].p + op_at, on) < 0 || put(&out[3], out[1].p + time_at, tn) < 0) goto error;
            } else {
                PyObject *cpu2 = PyTuple_GET_ITEM(h, 3), *tl2 = NULL;
                int is_cpu2 = PyObject_IsTrue(cpu2);
                if (is_cpu2 < 0) goto error;
                if (tensor) {
                    tl2 = tail_of(is_cpu2 ? tails_cpu : tails_job, tail, cpu2, tk);
                    if (tl2 == NULL) goto error;
                }
                int rc = emit(PyTuple_GET_ITEM(h, 2), tl2, tid, tidn, nums, numsn, tline, tlinen, &out[2], &out[3]);
                Py_XDECREF(tl2);
                if (rc < 0) goto error;
            }
        }
        Py_DECREF(row);
        Py_DECREF(hk);
        Py_DECREF(h);
        Py_XDECREF(tk);
        Py_XDECREF(tl);
        continue;
    error:
        Py_DECREF(row);
        Py_DECREF(hk);
        Py_XDECREF(h);
        Py_XDECREF(tk);
        Py_XDECREF(tl);
        goto fail;
    }
done:;
    PyObject *prev_out;
    if (i == i0) {  /* no row rendered here: hand back what came in */
        prev_out = prev_obj;
        Py_INCREF(prev_out);
    } else {
        prev_out = PyLong_FromLongLong(prev);  /* has_prev: a row was rendered */
        if (prev_out == NULL) goto fail;
    }
    result = Py_BuildValue("(nNOy#y#y#y#)", i, prev_out, complete ? Py_True : Py_False,
                           out[0].p ? out[0].p : "", out[0].n, out[1].p ? out[1].p : "", out[1].n,
                           out[2].p ? out[2].p : "", out[2].n, out[3].p ? out[3].p : "", out[3].n);
fail:
    for (int k = 0; k < 4; k++) PyMem_Free(out[k].p);
    return result;
}

static PyMethodDef methods[] = {
    {"render", render, METH_VARARGS,
     "render(rows, i, prev_end, complete, ctx) -> (stop index, prev_end, complete, op lines, time "
     "lines, twin op lines, twin time lines): the task pass's lines of rows[i:] (UTF-8 bytes) up to "
     "the first row left to the Python loop."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_task_lines", NULL, -1, methods};

PyMODINIT_FUNC PyInit__task_lines(void) { return PyModule_Create(&module); }
