/* The operator columns of one block of a Kineto trace in C, for the torch analysis
 * (export/ascend_pt/columns.py): one pass over the block's bytes (the JSON array that
 * sources/kineto_trace.py would hand to orjson) instead of a dict per event.
 *
 *   ops(block) -> None | (pid, names, keys, ts, dur, tid, annot, ext, seq, fwd,
 *                         flow_ts, flow_start, flow_id, flow_tid, py_names, py_ts, py_dur, py_tid)
 *
 * Every byte is validated as JSON.  The result is None (the caller parses the block with orjson
 * and takes the Python path, which stays the reference) whenever the block holds anything this
 * scan does not reproduce exactly: a byte >= 0x80, a \u escape, an escape in a key or in a
 * ph/cat, a duplicated key the columns read, a bool where an integer is read, an integer of
 * more than 18 digits, an event that is not an object, a cpu_op/user_annotation without a numeric
 * ts, GPU events, [memory] instant events, nesting deeper than 64.
 *
 * Per cpu_op / user_annotation X event (file order): name (str), the args key (bytes: for each
 * of "Input Dims", "Input type", "Sequence number", "Fwd thread id" \x02 when absent, else \x01
 * and the value's raw bytes; equal bytes are equal JSON values), and as bytes of float64 / int64
 * / uint8 arrays ts, dur (0 when absent), tid (0 unless an integer), annot (user_annotation),
 * External id (-(2**62) unless an integer, and for annotations), Sequence number (-1 unless an
 * integer), Fwd thread id (0 unless an integer); pid: that of the first op whose pid is an
 * integer (None: none).  Per fwdbwd flow (ph s/f): ts, start (ph s), id and tid (0 unless
 * integers).  Per python_function X event (with_stack): name, ts, dur, tid as for the ops.
 * Other events (M, i, other X categories) are validated and skipped.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64
#define MAX_DIGITS 18
#define NO_EXT (-(INT64_C(1) << 62))

typedef struct {
    char *p;
    size_t n, cap;
} buf;

static int put(buf *b, const void *v, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + n)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (q == NULL)
            return -1;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, v, n);
    b->n += n;
    return 0;
}

typedef struct {
    const char *p, *end;
    int bail; /* 1: not handled here (None); -1: out of memory */
} cur;

/* a span of the block: a JSON value's raw bytes; kind: 's' string, 'n' number (integer: 'i'),
 * 'o' object, 'a' array, 't' true/false, 'z' null, 0 absent; esc: a string with an escape */
typedef struct {
    const char *p;
    size_t n;
    char kind;
    int esc;
} span;

static void ws(cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t'))
        c->p++;
}

/* a string at c->p (the opening quote); the span covers the quotes */
static int str(cur *c, span *s) {
    const char *q = c->p + 1;
    int esc = 0;
    for (;;) {
        if (q >= c->end)
            return -1;
        unsigned char ch = (unsigned char)*q;
        if (ch == '"')
            break;
        if (ch < 0x20 || ch >= 0x80)
            return -1;
        if (ch == '\\') {
            if (q + 1 >= c->end)
                return -1;
            char e = q[1];
            if (!(e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't'))
                return -1; /* \u (or invalid): the Python path */
            esc = 1;
            q += 2;
            continue;
        }
        q++;
    }
    s->p = c->p;
    s->n = (size_t)(q + 1 - c->p);
    s->kind = 's';
    s->esc = esc;
    c->p = q + 1;
    return 0;
}

static int isdig(char ch) { return ch >= '0' && ch <= '9'; }

/* a JSON number (RFC 8259 grammar); kind 'i' when integer-only */
static int num(cur *c, span *s) {
    const char *q = c->p;
    int integer = 1;
    if (q < c->end && *q == '-')
        q++;
    if (q >= c->end || !isdig(*q))
        return -1;
    if (*q == '0')
        q++;
    else
        while (q < c->end && isdig(*q))
            q++;
    if (q < c->end && *q == '.') {
        integer = 0;
        q++;
        if (q >= c->end || !isdig(*q))
            return -1;
        while (q < c->end && isdig(*q))
            q++;
    }
    if (q < c->end && (*q == 'e' || *q == 'E')) {
        integer = 0;
        q++;
        if (q < c->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= c->end || !isdig(*q))
            return -1;
        while (q < c->end && isdig(*q))
            q++;
    }
    s->p = c->p;
    s->n = (size_t)(q - c->p);
    s->kind = integer ? 'i' : 'n';
    s->esc = 0;
    c->p = q;
    return 0;
}

static int value(cur *c, span *s, int depth);

static int lit(cur *c, const char *w, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0)
        return -1;
    c->p += n;
    return 0;
}

enum { PH, CAT, NAME, PID, TID, TS, DUR, ID, ARGS, NEV };
static const char *const EV[NEV] = {"ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args"};
enum { DIMS, TYPES, SEQ, FWD, EXT, NARG };
static const char *const ARG[NARG] = {"Input Dims", "Input type", "Sequence number", "Fwd thread id",
                                      "External id"};
static const size_t EVLEN[NEV] = {2, 3, 4, 3, 3, 2, 3, 2, 4};
static const size_t ARGLEN[NARG] = {10, 10, 15, 13, 11};

static int members(cur *c, int depth, const char *const *names, const size_t *lens, int k, span *out,
                   int k_args, span *args);

/* the members of an object (c->p after '{'), each key and value validated; for keys in
 * names[0..k) (lengths lens) the value's span goes to out[i] (a second one: bail); with args, the
 * member "args" (names[k_args]) that is an object has its own members read into args (ARG) */
static int members(cur *c, int depth, const char *const *names, const size_t *lens, int k, span *out,
                   int k_args, span *args) {
    ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    for (;;) {
        span key, v;
        ws(c);
        if (c->p >= c->end || *c->p != '"' || str(c, &key) < 0)
            return -1;
        ws(c);
        if (c->p >= c->end || *c->p != ':')
            return -1;
        c->p++;
        ws(c);
        int at = -1;
        if (k) {
            if (key.esc) { /* might name a field read here */
                c->bail = 1;
                return -1;
            }
            for (int i = 0; i < k; i++) {
                if (key.n == lens[i] + 2 && key.p[1] == names[i][0] && memcmp(key.p + 1, names[i], lens[i]) == 0) {
                    if (out[i].kind) {
                        c->bail = 1;
                        return -1;
                    }
                    at = i;
                    break;
                }
            }
        }
        if (at >= 0 && at == k_args && args != NULL && c->p < c->end && *c->p == '{') {
            const char *start = c->p;
            c->p++;
            if (depth + 1 > MAX_DEPTH || members(c, depth + 1, ARG, ARGLEN, NARG, args, -1, NULL) < 0)
                return -1;
            v.p = start;
            v.n = (size_t)(c->p - start);
            v.kind = 'o';
            v.esc = 0;
        } else if (value(c, &v, depth + 1) < 0) {
            return -1;
        }
        if (at >= 0)
            out[at] = v;
        ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            return 0;
        }
        return -1;
    }
}

static int value(cur *c, span *s, int depth) {
    if (depth > MAX_DEPTH) {
        c->bail = 1;
        return -1;
    }
    if (c->p >= c->end)
        return -1;
    const char *start = c->p;
    s->esc = 0;
    switch (*c->p) {
    case '"':
        return str(c, s);
    case '{':
        c->p++;
        if (members(c, depth, NULL, NULL, 0, NULL, -1, NULL) < 0)
            return -1;
        s->kind = 'o';
        break;
    case '[':
        c->p++;
        ws(c);
        if (c->p < c->end && *c->p == ']') {
            c->p++;
        } else {
            for (;;) {
                span v;
                ws(c);
                if (value(c, &v, depth + 1) < 0)
                    return -1;
                ws(c);
                if (c->p < c->end && *c->p == ',') {
                    c->p++;
                    continue;
                }
                if (c->p < c->end && *c->p == ']') {
                    c->p++;
                    break;
                }
                return -1;
            }
        }
        s->kind = 'a';
        break;
    case 't':
        if (lit(c, "true", 4) < 0)
            return -1;
        s->kind = 't';
        break;
    case 'f':
        if (lit(c, "false", 5) < 0)
            return -1;
        s->kind = 't';
        break;
    case 'n':
        if (lit(c, "null", 4) < 0)
            return -1;
        s->kind = 'z';
        break;
    default:
        return num(c, s);
    }
    s->p = start;
    s->n = (size_t)(c->p - start);
    return 0;
}

/* the string span's text equals w (no escape) */
static int is(const span *s, const char *w) {
    size_t n = strlen(w);
    return s->kind == 's' && !s->esc && s->n == n + 2 && memcmp(s->p + 1, w, n) == 0;
}

/* an integer span into *v (at most MAX_DIGITS digits): 0; else -1 */
static int to_i64(const span *s, int64_t *v) {
    const char *q = s->p, *e = s->p + s->n;
    int neg = 0;
    int64_t x = 0;
    if (q < e && *q == '-') {
        neg = 1;
        q++;
    }
    if (e - q > MAX_DIGITS)
        return -1;
    for (; q < e; q++)
        x = x * 10 + (*q - '0');
    *v = neg ? -x : x;
    return 0;
}

/* 10**k, exact in float64 for k <= 22 */
static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* a decimal without exponent ("-12.345") whose digits make an integer m <= 2**53 with at most
 * 22 fraction digits: m / 10**k is one IEEE division of two exact operands, so it is the correctly
 * rounded value strtod gives (Clinger's fast path).  0 with *v set; -1: not of that form. */
static int fast_decimal(const span *s, double *v) {
    const char *q = s->p, *e = s->p + s->n;
    int neg = 0, frac = -1;
    uint64_t m = 0;
    if (q < e && *q == '-') {
        neg = 1;
        q++;
    }
    for (; q < e; q++) {
        if (*q == '.') {
            frac = 0;
            continue;
        }
        if (!isdig(*q))  /* an exponent */
            return -1;
        if (m > (UINT64_C(1) << 53) / 10)
            return -1;
        m = m * 10 + (uint64_t)(*q - '0');
        if (frac >= 0)
            frac++;
    }
    if (frac < 0 || frac > 22 || m > (UINT64_C(1) << 53))
        return -1;
    double d = (double)m / POW10[frac];
    *v = neg ? -d : d;
    return 0;
}

/* a number span as Python's float() of orjson's value: an integer converts exactly as int ->
 * float64 (correctly rounded), a decimal through its fast path or PyOS_string_to_double (both
 * correctly rounded) */
static int to_f64(const span *s, double *v) {
    if (s->kind == 'i') {
        int64_t x;
        if (to_i64(s, &x) < 0)
            return -1;
        *v = (double)x;
        return 0;
    }
    if (fast_decimal(s, v) == 0)
        return 0;
    char tmp[64];
    if (s->n >= sizeof tmp)
        return -1;
    memcpy(tmp, s->p, s->n);
    tmp[s->n] = 0;
    char *endp = NULL;
    double d = PyOS_string_to_double(tmp, &endp, NULL);
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (endp != tmp + s->n || !isfinite(d))
        return -1;
    *v = d;
    return 0;
}

/* an integer field read as `x if isinstance(x, int) else dflt`: a bool bails */
static int int_or(const span *s, int64_t dflt, int64_t *v) {
    if (s->kind == 't')
        return -1;
    if (s->kind == 'i')
        return to_i64(s, v);
    *v = dflt;
    return 0;
}


typedef struct {
    buf ts, dur, tid, annot, ext, seq, fwd, fts, fstart, fid, ftid, pts, pdur, ptid, key;
    PyObject *names, *keys, *pnames;
    int64_t pid;
    int has_pid;
} out;

/* a string span's text (its escapes decoded: the scan only passes the one-character ones) */
static PyObject *text(out *o, const span *s) {
    const char *p = s->p + 1, *e = s->p + s->n - 1;
    if (!s->esc)
        return PyUnicode_DecodeASCII(p, e - p, NULL);
    o->key.n = 0;
    for (; p < e; p++) {
        char ch = *p;
        if (ch == '\\') {
            p++;
            switch (*p) {
            case 'b': ch = '\b'; break;
            case 'f': ch = '\f'; break;
            case 'n': ch = '\n'; break;
            case 'r': ch = '\r'; break;
            case 't': ch = '\t'; break;
            default: ch = *p; /* " \ / */
            }
        }
        if (put(&o->key, &ch, 1) < 0)
            return PyErr_NoMemory();
    }
    return PyUnicode_DecodeASCII(o->key.p ? o->key.p : "", (Py_ssize_t)o->key.n, NULL);
}

static int add_op(out *o, cur *c, span *ev, span *ar) {
    double ts, dur = 0;
    int64_t tid = 0, ext = NO_EXT, seq = -1, fwd = 0, pid;
    int annot = is(&ev[CAT], "user_annotation");
    if (!(ev[TS].kind == 'i' || ev[TS].kind == 'n') || to_f64(&ev[TS], &ts) < 0)
        return 1;
    if (ev[DUR].kind && (!(ev[DUR].kind == 'i' || ev[DUR].kind == 'n') || to_f64(&ev[DUR], &dur) < 0))
        return 1;
    if (ev[TID].kind && int_or(&ev[TID], 0, &tid) < 0)
        return 1;
    if (ev[PID].kind == 't')
        return 1;
    if (ev[PID].kind == 'i' && !o->has_pid) {
        if (to_i64(&ev[PID], &pid) < 0)
            return 1;
        o->pid = pid;
        o->has_pid = 1;
    }
    if (ev[NAME].kind && ev[NAME].kind != 's')
        return 1;
    if (ar[EXT].kind && int_or(&ar[EXT], NO_EXT, &ext) < 0)
        return 1;
    if (annot)
        ext = NO_EXT;
    if (ar[SEQ].kind && int_or(&ar[SEQ], -1, &seq) < 0)
        return 1;
    if (ar[FWD].kind && int_or(&ar[FWD], 0, &fwd) < 0)
        return 1;
    PyObject *name = ev[NAME].kind ? text(o, &ev[NAME]) : PyUnicode_FromStringAndSize("", 0);
    if (name == NULL)
        return -1;
    int r = PyList_Append(o->names, name);
    Py_DECREF(name);
    if (r < 0)
        return -1;
    o->key.n = 0;
    for (int i = DIMS; i <= FWD; i++) {
        char m = ar[i].kind ? 1 : 2;
        if (put(&o->key, &m, 1) < 0 || (ar[i].kind && put(&o->key, ar[i].p, ar[i].n) < 0))
            return -1;
    }
    PyObject *key = PyBytes_FromStringAndSize(o->key.p, (Py_ssize_t)o->key.n);
    if (key == NULL)
        return -1;
    r = PyList_Append(o->keys, key);
    Py_DECREF(key);
    if (r < 0)
        return -1;
    uint8_t a = (uint8_t)annot;
    if (put(&o->ts, &ts, 8) || put(&o->dur, &dur, 8) || put(&o->tid, &tid, 8) || put(&o->annot, &a, 1) ||
        put(&o->ext, &ext, 8) || put(&o->seq, &seq, 8) || put(&o->fwd, &fwd, 8))
        return -1;
    (void)c;
    return 0;
}

/* a python_function event (as Columns._add_python reads it) */
static int add_py(out *o, span *ev) {
    double ts, dur = 0;
    int64_t tid = 0;
    if (!(ev[TS].kind == 'i' || ev[TS].kind == 'n') || to_f64(&ev[TS], &ts) < 0)
        return 1;
    if (ev[DUR].kind && (!(ev[DUR].kind == 'i' || ev[DUR].kind == 'n') || to_f64(&ev[DUR], &dur) < 0))
        return 1;
    if (ev[TID].kind && int_or(&ev[TID], 0, &tid) < 0)
        return 1;
    if (ev[NAME].kind && ev[NAME].kind != 's')
        return 1;
    PyObject *name = ev[NAME].kind ? text(o, &ev[NAME]) : PyUnicode_FromStringAndSize("", 0);
    if (name == NULL)
        return -1;
    int r = PyList_Append(o->pnames, name);
    Py_DECREF(name);
    if (r < 0 || put(&o->pts, &ts, 8) || put(&o->pdur, &dur, 8) || put(&o->ptid, &tid, 8))
        return -1;
    return 0;
}

static int add_flow(out *o, span *ev, int start) {
    double ts;
    int64_t id = 0, tid = 0;
    if (!(ev[TS].kind == 'i' || ev[TS].kind == 'n') || to_f64(&ev[TS], &ts) < 0)
        return 1;
    if (ev[ID].kind && int_or(&ev[ID], 0, &id) < 0)
        return 1;
    if (ev[TID].kind && int_or(&ev[TID], 0, &tid) < 0)
        return 1;
    uint8_t s = (uint8_t)start;
    if (put(&o->fts, &ts, 8) || put(&o->fstart, &s, 1) || put(&o->fid, &id, 8) || put(&o->ftid, &tid, 8))
        return -1;
    return 0;
}

/* one event (c->p at '{'): 0 taken or skipped, 1 bail, -1 error (exception set) */
static int event(out *o, cur *c) {
    span ev[NEV], ar[NARG];
    memset(ev, 0, sizeof ev);
    memset(ar, 0, sizeof ar);
    if (c->p >= c->end || *c->p != '{')
        return 1;
    c->p++;
    if (members(c, 1, EV, EVLEN, NEV, ev, ARGS, ar) < 0)
        return 1;
    if (ev[ARGS].kind && ev[ARGS].kind != 'o' && ev[ARGS].kind != 'z')
        return 1;
    span *ph = &ev[PH];
    if (ph->kind == 's' && ph->esc)
        return 1;
    if (is(ph, "X")) {
        span *cat = &ev[CAT];
        if (cat->kind != 's' || cat->esc)
            return 1;
        if (is(cat, "cpu_op") || is(cat, "user_annotation"))
            return add_op(o, c, ev, ar);
        if (is(cat, "python_function"))
            return add_py(o, ev);
        if (is(cat, "kernel") || is(cat, "gpu_memcpy") || is(cat, "gpu_memset"))
            return 1;
        return 0;
    }
    if (is(ph, "s") || is(ph, "f")) {
        if (ev[CAT].kind == 's' && ev[CAT].esc)
            return 1;
        return is(&ev[CAT], "fwdbwd") ? add_flow(o, ev, is(ph, "s")) : 0;
    }
    if (is(ph, "i")) {
        if (ev[NAME].kind == 's' && ev[NAME].esc)
            return 1;
        return is(&ev[NAME], "[memory]") ? 1 : 0;
    }
    return 0;
}

static PyObject *bytes_of(buf *b) { return PyBytes_FromStringAndSize(b->p ? b->p : "", (Py_ssize_t)b->n); }

static PyObject *ops(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    out o;
    memset(&o, 0, sizeof o);
    PyObject *res = NULL;
    o.names = PyList_New(0);
    o.keys = PyList_New(0);
    o.pnames = PyList_New(0);
    int r = 1;
    if (o.names == NULL || o.keys == NULL || o.pnames == NULL) {
        r = -1;
        goto done;
    }
    cur c = {(const char *)view.buf, (const char *)view.buf + view.len, 0};
    ws(&c);
    if (c.p >= c.end || *c.p != '[')
        goto done;
    c.p++;
    ws(&c);
    if (c.p < c.end && *c.p == ']') {
        c.p++;
    } else {
        for (;;) {
            ws(&c);
            r = event(&o, &c);
            if (r != 0)
                goto done;
            r = 1;
            ws(&c);
            if (c.p < c.end && *c.p == ',') {
                c.p++;
                continue;
            }
            if (c.p < c.end && *c.p == ']') {
                c.p++;
                break;
            }
            goto done;
        }
    }
    ws(&c);
    if (c.p != c.end)
        goto done;
    r = 0;
    PyObject *pid = o.has_pid ? PyLong_FromLongLong(o.pid) : (Py_INCREF(Py_None), Py_None);
    if (pid == NULL) {
        r = -1;
        goto done;
    }
    res = Py_BuildValue("(NOONNNNNNNNNNNONNN)", pid, o.names, o.keys, bytes_of(&o.ts), bytes_of(&o.dur),
                        bytes_of(&o.tid), bytes_of(&o.annot), bytes_of(&o.ext), bytes_of(&o.seq),
                        bytes_of(&o.fwd), bytes_of(&o.fts), bytes_of(&o.fstart), bytes_of(&o.fid),
                        bytes_of(&o.ftid), o.pnames, bytes_of(&o.pts), bytes_of(&o.pdur), bytes_of(&o.ptid));
    if (res == NULL)
        r = -1;
done:
    PyBuffer_Release(&view);
    Py_XDECREF(o.names);
    Py_XDECREF(o.keys);
    Py_XDECREF(o.pnames);
    buf *bs[] = {&o.ts, &o.dur, &o.tid, &o.annot, &o.ext, &o.seq, &o.fwd, &o.fts, &o.fstart, &o.fid, &o.ftid,
                 &o.pts, &o.pdur, &o.ptid, &o.key};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
        free(bs[i]->p);
    if (r < 0) {
        Py_XDECREF(res);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return NULL;
    }
    if (r > 0)
        Py_RETURN_NONE;
    return res;
}

static PyMethodDef methods[] = {
    {"ops", ops, METH_O, "ops(block) -> None | (pid, names, keys, ts, dur, tid, annot, ext, seq, fwd, "
                         "flow_ts, flow_start, flow_id, flow_tid, py_names, py_ts, py_dur, py_tid); see the "
                         "module source."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kineto_scan", "Kineto block scan (torch analysis).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__kineto_scan(void) { return PyModule_Create(&module); }
