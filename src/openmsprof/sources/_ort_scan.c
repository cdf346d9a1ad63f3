/* The ONNX Runtime profile scan of sources/ort_profile.py in C: one pass over ORT's JSON that
 * finds the events written in ORT's fixed one-line layout
 *
 *   \n{"cat" : "Node|Session","pid" :N,"tid" :N,"dur" :N,"ts" :N,"ph" : "X","name" :"NAME"
 *
 * (the same events, fields and name bytes as ort_profile._EVENT's regex, which stays the
 * fallback), skips the rest of each line (the args: most of the bytes) and returns
 *
 *   scan(buffer) -> (names, rows, bad)
 *
 * names: the distinct raw name bytes (escapes kept, as the regex returns them) in order of first
 * appearance; rows: bytes of int64 (name index, tid, dur, ts) per event, in file order; bad: the
 * lines that begin like an event of ORT's layout ("\n{"cat" : "Node"" or "Session"") but do not
 * follow it to the end of the name (another layout, a number over 18 digits, a cut file): the
 * caller then parses the whole profile with orjson, so no event is ever missed.
 *
 * The scan runs without the GIL (the application's threads go on meanwhile); the buffer is held
 * by its buffer export for the whole call (bytes are immutable; an exported mmap or bytearray
 * cannot be closed or resized).  Only the raw allocator is used without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static const char HEAD[] = "\n{\"cat\" : \"";
static const char PID[] = ",\"pid\" :";
static const char TID[] = ",\"tid\" :";
static const char DUR[] = ",\"dur\" :";
static const char TS[] = ",\"ts\" :";
static const char NAME[] = ",\"ph\" : \"X\",\"name\" :\"";
#define LIT(s) (sizeof(s) - 1)
#define MAX_DIGITS 18 /* < 2^63 whatever the digits */

typedef struct {
    const char *p;
    Py_ssize_t n;
    uint64_t hash;
    int64_t idx; /* -1: empty slot */
} slot;

typedef struct {
    slot *slots;
    size_t cap, used;
    const char **name_p; /* by index */
    Py_ssize_t *name_n;
    size_t names_cap;
    int64_t *rows;
    size_t rows_n, rows_cap; /* in events */
    Py_ssize_t bad;
    int nomem;
} state;

/* the literal s (length n) at p, inside [p, end) */
static int lit(const char *p, const char *end, const char *s, size_t n) {
    return (size_t)(end - p) >= n && memcmp(p, s, n) == 0;
}

/* [0-9]+ at *pp (at most MAX_DIGITS) into *v; advances *pp */
static int digits(const char **pp, const char *end, int64_t *v) {
    const char *p = *pp;
    int64_t x = 0;
    int k = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        if (++k > MAX_DIGITS) return 0;
        x = x * 10 + (*p - '0');
        p++;
    }
    if (k == 0) return 0;
    *pp = p;
    *v = x;
    return 1;
}

static int grow_names(state *s) {
    size_t cap = s->names_cap ? s->names_cap * 2 : 64;
    const char **np_ = PyMem_RawRealloc(s->name_p, cap * sizeof *np_);
    if (np_ == NULL) return 0;
    s->name_p = np_;
    Py_ssize_t *nn = PyMem_RawRealloc(s->name_n, cap * sizeof *nn);
    if (nn == NULL) return 0;
    s->name_n = nn;
    s->names_cap = cap;
    return 1;
}

static int rehash(state *s, size_t cap) {
    slot *t = PyMem_RawMalloc(cap * sizeof *t);
    if (t == NULL) return 0;
    for (size_t i = 0; i < cap; i++) t[i].idx = -1;
    for (size_t i = 0; i < s->cap; i++) {
        if (s->slots[i].idx < 0) continue;
        size_t j = (size_t)s->slots[i].hash & (cap - 1);
        while (t[j].idx >= 0) j = (j + 1) & (cap - 1);
        t[j] = s->slots[i];
    }
    PyMem_RawFree(s->slots);
    s->slots = t;
    s->cap = cap;
    return 1;
}

/* index of the name [p, p+n), a new one when first seen; -1 when out of memory */
static int64_t intern(state *s, const char *p, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    size_t j = (size_t)h & (s->cap - 1);
    while (s->slots[j].idx >= 0) {
        slot *e = &s->slots[j];
        if (e->hash == h && e->n == n && memcmp(e->p, p, (size_t)n) == 0) return e->idx;
        j = (j + 1) & (s->cap - 1);
    }
    if (s->used >= s->names_cap && !grow_names(s)) return -1;
    int64_t idx = (int64_t)s->used++;
    s->name_p[idx] = p;
    s->name_n[idx] = n;
    s->slots[j] = (slot){p, n, h, idx};
    if (s->used * 2 > s->cap && !rehash(s, s->cap * 2)) return -1;
    return idx;
}

/* the event whose line starts at p ('\n'); returns where the scan goes on, and NULL for a line
 * that is not an event of the layout (bad counted when it began like one) */
static const char *event(state *s, const char *p, const char *end) {
    const char *q = p + LIT(HEAD);
    if (lit(q, end, "Node\"", 5)) {
        q += 5;
    } else if (lit(q, end, "Session\"", 8)) {
        q += 8;
    } else {
        return NULL; /* another category: not an event we read (nor the regex) */
    }
    int64_t pid, tid, dur, ts;
    if (!(lit(q, end, PID, LIT(PID)) && (q += LIT(PID), digits(&q, end, &pid)) &&
          lit(q, end, TID, LIT(TID)) && (q += LIT(TID), digits(&q, end, &tid)) &&
          lit(q, end, DUR, LIT(DUR)) && (q += LIT(DUR), digits(&q, end, &dur)) &&
          lit(q, end, TS, LIT(TS)) && (q += LIT(TS), digits(&q, end, &ts)) &&
          lit(q, end, NAME, LIT(NAME)))) {
        s->bad++;
        return NULL;
    }
    q += LIT(NAME);
    const char *name = q;
    /* "([^"\\]*(?:\\.[^"\\]*)*)": a backslash escapes any byte but a newline */
    while (q < end && *q != '"') {
        if (*q == '\\') {
            if (q + 1 >= end || q[1] == '\n') break;
            q += 2;
        } else {
            q++;
        }
    }
    if (q >= end || *q != '"') {
        s->bad++;
        return NULL;
    }
    int64_t idx = intern(s, name, q - name);
    if (idx < 0) {
        s->nomem = 1;
        return end;
    }
    if (s->rows_n == s->rows_cap) {
        size_t cap = s->rows_cap ? s->rows_cap * 2 : 4096;
        int64_t *r = PyMem_RawRealloc(s->rows, cap * 4 * sizeof *r);
        if (r == NULL) {
            s->nomem = 1;
            return end;
        }
        s->rows = r;
        s->rows_cap = cap;
    }
    int64_t *row = s->rows + 4 * s->rows_n++;
    row[0] = idx;
    row[1] = tid;
    row[2] = dur;
    row[3] = ts;
    return q + 1;
}

static void run(state *s, const char *p, const char *end) {
    while (p < end && !s->nomem) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL) break;
        const char *next = lit(nl, end, HEAD, LIT(HEAD)) ? event(s, nl, end) : NULL;
        p = next != NULL ? next : nl + 1;
    }
}

static PyObject *scan(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    state s = {0};
    PyObject *names = NULL, *rows = NULL, *out = NULL;
    s.slots = PyMem_RawMalloc(256 * sizeof *s.slots);
    if (s.slots == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    s.cap = 256;
    for (size_t i = 0; i < s.cap; i++) s.slots[i].idx = -1;
    const char *p = view.buf;
    Py_BEGIN_ALLOW_THREADS
    run(&s, p, p + view.len);
    Py_END_ALLOW_THREADS
    if (s.nomem) {
        PyErr_NoMemory();
        goto done;
    }
    names = PyList_New((Py_ssize_t)s.used);
    if (names == NULL) goto done;
    for (size_t i = 0; i < s.used; i++) {
        PyObject *b = PyBytes_FromStringAndSize(s.name_p[i], s.name_n[i]);
        if (b == NULL) goto done;
        PyList_SET_ITEM(names, (Py_ssize_t)i, b);
    }
    rows = PyBytes_FromStringAndSize((const char *)s.rows, (Py_ssize_t)(s.rows_n * 4 * sizeof(int64_t)));
    if (rows == NULL) goto done;
    out = Py_BuildValue("(OOn)", names, rows, s.bad);
done:
    Py_XDECREF(names);
    Py_XDECREF(rows);
    PyMem_RawFree(s.slots);
    PyMem_RawFree(s.name_p);
    PyMem_RawFree(s.name_n);
    PyMem_RawFree(s.rows);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O,
     "scan(buffer) -> (names, rows, bad): ORT's one-line events (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ort_scan",
                                    "ONNX Runtime profile scan (sources/ort_profile.py's fast path).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__ort_scan(void) { return PyModule_Create(&module); }
