/* export/ascend_pt/perfetto_fit.py's ``fit`` in C (its Python code stays the fallback and the
 * reference: tests/export/test_perfetto_fit_native.py keeps both equal).
 *
 *   fit(ts, dur, track, priority, stay, out_dur, out_track, lane_shift, max_lanes)
 *       -> (shortened, shortened_ns, moved, lanes) | None
 *
 * ``ts``, ``dur``, ``track`` (int64), ``priority`` (int8) and ``stay`` (bool, one byte, or None for
 * all False) are per event; ``out_dur`` and ``out_track`` (int64, writable, not overlapping an
 * input) receive trace_view's durations and track ids; ``lanes`` maps each overflow lane's track id
 * to its base track id, in the order perfetto_fit.fit fills it.  None (nothing written that
 * matters) means the input is outside the native range, where the Python code runs instead: a time
 * or duration beyond +-2^61 ns, track ids whose lanes would not fit in int64, or, on the text path
 * of ``image_ns`` (a time below 2^40 us, or no 80-bit long double), a time of 2^53 ns or more.
 *
 * Each lane pass is perfetto_fit's sweep over every event of the swept tracks in sweep order
 * (track, Perfetto's start, -duration, index), one stack per track (``_sweep``'s cluster skipping
 * is a Python-side saving; the full sweep is what it is equal to).  Runs without the GIL; the
 * buffers are held for the whole call; no state outlives a call.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LIMIT ((int64_t)1 << 61)
#define EXACT_FROM_NS ((int64_t)1099511627776 * 1000) /* 2^40 us: the long-double path is exact */
#define TEXT_EXACT ((uint64_t)1 << 53)                 /* below it, a double holds the ns count */

typedef struct {
    int64_t track, img, ndur, idx;
} Key;

static inline int less(const Key *a, const Key *b) {
    if (a->track != b->track)
        return a->track < b->track;
    if (a->img != b->img)
        return a->img < b->img;
    if (a->ndur != b->ndur)
        return a->ndur < b->ndur;
    return a->idx < b->idx;
}

/* Merge sort (the keys are distinct: any sort gives lexsort's order); ordered halves cost one
 * comparison, so an already sorted track costs O(n). */
static void msort(Key *a, Key *tmp, Py_ssize_t n) {
    if (n <= 16) {
        for (Py_ssize_t i = 1; i < n; i++) {
            Key k = a[i];
            Py_ssize_t j = i;
            for (; j > 0 && less(&k, &a[j - 1]); j--)
                a[j] = a[j - 1];
            a[j] = k;
        }
        return;
    }
    Py_ssize_t h = n / 2;
    msort(a, tmp, h);
    msort(a + h, tmp, n - h);
    if (!less(&a[h], &a[h - 1]))
        return;
    memcpy(tmp, a, (size_t)h * sizeof(Key));
    Py_ssize_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        a[k++] = less(&a[j], &tmp[i]) ? a[j++] : tmp[i++];
    while (i < h)
        a[k++] = tmp[i++];
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* perfetto_fit.image_ns: Perfetto's ns for the "%d.%03d" us text of each ns time.  Returns 1
 * (outside the native range) where the text path would need more than a double's 53 bits. */
static int image(const int64_t *ts, Py_ssize_t n, int64_t *img) {
    int64_t lo = ts[0];
    for (Py_ssize_t i = 1; i < n; i++)
        if (ts[i] < lo)
            lo = ts[i];
    int wide = LDBL_MANT_DIG >= 64 && lo >= EXACT_FROM_NS;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t t = ts[i], q = t / 1000, r = t % 1000;
        double us;
        if (r < 0) { /* Python's floor division: the text of -700 ns is "-1.300" */
            q -= 1;
            r += 1000;
        }
        if (wide) {
            /* numpy: q and r as long double, r / 1000 + q, then to double (t >= 2^40 us here) */
            long double v = (long double)q + (long double)r / 1000.0L;
            us = (double)v;
        } else {
            /* float("%d.%03d"): the decimal N / 1000 correctly rounded, which IEEE division of
             * the exact double N gives; the text's sign is q's */
            uint64_t mag = q < 0 ? (uint64_t)0 - (uint64_t)q : (uint64_t)q;
            uint64_t num = mag * 1000 + (uint64_t)r;
            if (num >= TEXT_EXACT)
                return 1;
            us = (double)num / 1000.0;
            if (q < 0)
                us = -us;
        }
        /* numpy: a whole us is scaled exactly, else us * 1000 truncated (|us| < 2^52 here, so
         * the cast truncates exactly and tells whole values: no libm floor call) */
        int64_t whole = (int64_t)us;
        img[i] = (double)whole == us ? whole * 1000 : (int64_t)(us * 1000.0);
    }
    return 0;
}

static inline void shorten(int64_t *du, int64_t j, int64_t to) {
    int64_t v = to < du[j] ? to : du[j];
    du[j] = v > 0 ? v : 0;
}

/* One lane pass over ``order`` (m keys in sweep order): perfetto_fit._sweep's decisions; returns
 * the number of events written to ``moved`` (to go one lane up). */
static Py_ssize_t sweep(const Key *order, Py_ssize_t m, const int64_t *img, int64_t *du, const int64_t *ts,
                        const int64_t *end, const int8_t *pr, const unsigned char *st, int last, int64_t *stack,
                        int64_t *moved) {
    Py_ssize_t sp = 0, nm = 0;
    for (Py_ssize_t k = 0; k < m; k++) {
        int64_t e = order[k].idx, s = img[e];
        if (k == 0 || order[k].track != order[k - 1].track)
            sp = 0;
        for (;;) {
            while (sp && img[stack[sp - 1]] + du[stack[sp - 1]] <= s)
                sp--;
            if (!sp)
                break;
            int64_t p = stack[sp - 1], pend = img[p] + du[p];
            if (s + du[e] <= pend)
                break;
            if (end[e] <= end[p]) { /* truly nested: end at the parent's end */
                shorten(du, e, pend - s);
                break;
            }
            if (ts[e] >= end[p]) { /* truly after it: the parent ends where this starts */
                shorten(du, p, s - img[p]);
                sp--;
                continue;
            }
            if (last || (st && st[e] && st[p])) { /* partial overlap, no lane left or both stay */
                shorten(du, e, pend - s);
                break;
            }
            if (pr[p] < pr[e]) {
                moved[nm++] = p;
                sp--;
                continue;
            }
            moved[nm++] = e;
            e = -1;
            break;
        }
        if (e >= 0)
            stack[sp++] = e;
    }
    return nm;
}

enum { OK = 0, OUT_OF_RANGE = 1, NO_MEMORY = 2 };

typedef struct {
    const int64_t *ts, *dur, *track;
    const int8_t *pr;
    const unsigned char *st;
    int64_t *du, *trk;
    Py_ssize_t n;
    int shift_min, max_lanes;
    /* results */
    int64_t shortened, moved0;
    uint64_t shortened_ns;
    int64_t *lanes; /* lane track ids, in the order fit fills its dict */
    Py_ssize_t n_lanes;
    int64_t mask;
} Job;

static int bit_length(int64_t v) {
    uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    int b = 0;
    while (m) {
        b++;
        m >>= 1;
    }
    return b;
}

static int run(Job *J) {
    Py_ssize_t n = J->n;
    int64_t hi = J->track[0], lo = J->track[0];
    for (Py_ssize_t i = 0; i < n; i++) {
        if (J->ts[i] > LIMIT || J->ts[i] < -LIMIT || J->dur[i] > LIMIT || J->dur[i] < -LIMIT)
            return OUT_OF_RANGE;
        if (J->track[i] > hi)
            hi = J->track[i];
        if (J->track[i] < lo)
            lo = J->track[i];
    }
    int shift = bit_length(hi);
    if (shift < J->shift_min)
        shift = J->shift_min;
    /* every lane id (a track plus up to max_lanes << shift) stays within int64 */
    if (shift > 61 || (uint64_t)(J->max_lanes + 1) > ((uint64_t)1 << 62 >> shift) || lo < -((int64_t)1 << 62))
        return OUT_OF_RANGE;
    int64_t step = (int64_t)1 << shift;
    J->mask = step - 1;

    int rc = NO_MEMORY;
    int64_t *img = malloc((size_t)n * sizeof(int64_t)), *end = malloc((size_t)n * sizeof(int64_t));
    int64_t *stack = malloc((size_t)n * sizeof(int64_t)), *moved = malloc((size_t)n * sizeof(int64_t));
    Key *keys = malloc((size_t)n * sizeof(Key)), *tmp = malloc((size_t)(n / 2 + 1) * sizeof(Key));
    Py_ssize_t cap = 0;
    if (!img || !end || !stack || !moved || !keys || !tmp)
        goto done;
    if (image(J->ts, n, img)) {
        rc = OUT_OF_RANGE;
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        J->du[i] = J->dur[i];
        J->trk[i] = J->track[i];
        end[i] = J->ts[i] + J->dur[i];
        keys[i] = (Key){J->track[i], img[i], -J->dur[i], (int64_t)i};
    }
    Py_ssize_t m = n, pass_lanes = 0; /* this pass' lane ids: J->lanes[n_lanes - pass_lanes ...] */
    for (int lane = 0; lane <= J->max_lanes; lane++) {
        if (lane) { /* the events of the tracks that received the last pass' moves */
            const int64_t *swept = J->lanes + (J->n_lanes - pass_lanes);
            m = 0;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (bsearch(&J->trk[i], swept, (size_t)pass_lanes, sizeof(int64_t), cmp_i64))
                    keys[m++] = (Key){J->trk[i], img[i], -J->dur[i], (int64_t)i};
            }
        }
        msort(keys, tmp, m);
        Py_ssize_t nm = sweep(keys, m, img, J->du, J->ts, end, J->pr, J->st, lane == J->max_lanes, stack, moved);
        if (!nm)
            break;
        if (!lane)
            J->moved0 = nm;
        for (Py_ssize_t j = 0; j < nm; j++) { /* stack is free: the moved events' new track ids */
            J->trk[moved[j]] += step;
            stack[j] = J->trk[moved[j]];
        }
        qsort(stack, (size_t)nm, sizeof(int64_t), cmp_i64);
        pass_lanes = 0;
        for (Py_ssize_t j = 0; j < nm; j++) {
            if (j && stack[j] == stack[j - 1])
                continue;
            if (J->n_lanes == cap) {
                Py_ssize_t grow = cap ? 2 * cap : 16;
                int64_t *more = realloc(J->lanes, (size_t)grow * sizeof(int64_t));
                if (!more)
                    goto done;
                J->lanes = more;
                cap = grow;
            }
            J->lanes[J->n_lanes++] = stack[j];
            pass_lanes++;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t cut = (uint64_t)J->dur[i] - (uint64_t)J->du[i];
        J->shortened += cut != 0;
        J->shortened_ns += cut; /* wraps as numpy's int64 sum does */
    }
    rc = OK;
done:
    free(img);
    free(end);
    free(stack);
    free(moved);
    free(keys);
    free(tmp);
    return rc;
}

/* A C-contiguous one-dimensional buffer of ``item``-byte ``kinds`` (struct format characters). */
static int get(PyObject *o, Py_buffer *b, int writable, Py_ssize_t item, const char *kinds, const char *what,
               const char *want) {
    if (PyObject_GetBuffer(o, b, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "fit: %s must be a C-contiguous%s %s array", what,
                     writable ? " writable" : "", want);
        return -1;
    }
    const char *f = b->format ? b->format : "B";
    if (*f == '@' || *f == '=' || (*f == '<' && PY_LITTLE_ENDIAN) || (*f == '>' && PY_BIG_ENDIAN))
        f++;
    if (b->ndim != 1 || b->itemsize != item || !f[0] || f[1] || !strchr(kinds, f[0])) {
        PyErr_Format(PyExc_TypeError, "fit: %s must be a one-dimensional %s array", what, want);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

static int overlaps(const Py_buffer *a, const Py_buffer *b) {
    const char *x = a->buf, *y = b->buf;
    return a->len && b->len && x < y + b->len && y < x + a->len;
}

static PyObject *fit(PyObject *self, PyObject *args) {
    enum { NB = 7 };
    PyObject *o[NB];
    static const char *names[NB] = {"ts", "dur", "track", "priority", "stay", "out_dur", "out_track"};
    static const char *wants[NB] = {"int64", "int64", "int64", "int8", "bool", "int64", "int64"};
    static const char *kinds[NB] = {"lq", "lq", "lq", "b", "?", "lq", "lq"};
    Py_buffer b[NB];
    int done[NB] = {0};
    int shift_min, max_lanes;
    PyObject *res = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOOOii:fit", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &shift_min,
                          &max_lanes))
        return NULL;
    if (shift_min < 0 || shift_min > 61 || max_lanes < 0 || max_lanes > 64) {
        PyErr_SetString(PyExc_ValueError, "fit: lane_shift must be in [0, 61] and max_lanes in [0, 64]");
        return NULL;
    }
    for (int i = 0; i < NB; i++) {
        if (i == 4 && o[i] == Py_None)
            continue;
        if (get(o[i], &b[i], i >= 5, i == 3 || i == 4 ? 1 : 8, kinds[i], names[i], wants[i]) < 0)
            goto fail;
        done[i] = 1;
    }
    Py_ssize_t n = b[0].shape[0];
    for (int i = 1; i < NB; i++) {
        if (done[i] && b[i].shape[0] != n) {
            PyErr_Format(PyExc_ValueError, "fit: %s has %zd items where ts has %zd", names[i], b[i].shape[0], n);
            goto fail;
        }
    }
    for (int w = 5; w < NB; w++) {
        for (int i = 0; i < NB; i++) {
            if (i != w && done[i] && overlaps(&b[w], &b[i])) {
                PyErr_Format(PyExc_ValueError, "fit: %s shares memory with %s", names[w], names[i]);
                goto fail;
            }
        }
    }
    Job J = {b[0].buf, b[1].buf, b[2].buf, b[3].buf, done[4] ? b[4].buf : NULL, b[5].buf, b[6].buf, n,
             shift_min, max_lanes, 0, 0, 0, NULL, 0, 0};
    int rc = OK;
    if (n) {
        Py_BEGIN_ALLOW_THREADS
        rc = run(&J);
        Py_END_ALLOW_THREADS
    }
    if (rc == NO_MEMORY) {
        PyErr_NoMemory();
    } else if (rc == OUT_OF_RANGE) {
        Py_INCREF(Py_None);
        res = Py_None;
    } else {
        PyObject *lanes = PyDict_New();
        for (Py_ssize_t i = 0; lanes && i < J.n_lanes; i++) {
            PyObject *k = PyLong_FromLongLong(J.lanes[i]), *v = PyLong_FromLongLong(J.lanes[i] & J.mask);
            if (!k || !v || PyDict_SetItem(lanes, k, v) < 0)
                Py_CLEAR(lanes);
            Py_XDECREF(k);
            Py_XDECREF(v);
        }
        if (lanes)
            res = Py_BuildValue("(LLLN)", (long long)J.shortened, (long long)(int64_t)J.shortened_ns,
                                (long long)J.moved0, lanes);
    }
    free(J.lanes);
fail:
    for (int i = 0; i < NB; i++)
        if (done[i])
            PyBuffer_Release(&b[i]);
    return res;
}

static PyMethodDef methods[] = {
    {"fit", fit, METH_VARARGS,
     "fit(ts, dur, track, priority, stay, out_dur, out_track, lane_shift, max_lanes): perfetto_fit.fit in C "
     "(see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_perfetto_fit",
                                    "trace_view's Perfetto fit (export/ascend_pt/perfetto_fit.py's fast path).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__perfetto_fit(void) { return PyModule_Create(&module); }
