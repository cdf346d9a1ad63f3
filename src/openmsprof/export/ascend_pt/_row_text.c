/* Row texts of the torch analysis' large views in C (export/ascend_pt/text.py): one ``%`` template
 * filled from whole columns, the same bytes as ``template % row`` for each row in Python.
 *
 *   join(template, columns, sep) -> bytes        the rows' texts joined by sep
 *   rows(template, columns) -> list[bytes]       one text per row
 *   records(fixed, width, codes, vocabulary) -> bytes
 *                        per row i: fixed[i*width:(i+1)*width] + vocabulary[codes[i]] (binary
 *                        records: a packed constant part, then a variable tail; torch.op_range)
 *
 * The template is bytes with the conversions %d, %03d, %t, %u and %b (and %% for a percent sign);
 * any other conversion is a ValueError.  One column per conversion, all of the same length n (>= 0):
 *   %d, %03d   a C-contiguous one-dimensional int64 buffer (numpy int64 array);
 *   %t         the same, ns written as µs with three decimals: "%d.%03d" % divmod(v, 1000);
 *   %u         the same, ns written as orjson writes v / 1000 for 0 <= v < 10**12: "%d.%b" % (v //
 *              1000, the decimals of v % 1000 without trailing zeros, "0" for none); a value
 *              outside that range is a ValueError (the caller takes the general form);
 *   %b         a list of n bytes (row i: item i), or a tuple (codes, vocabulary): an int64
 *              buffer of n codes and a list or tuple of bytes (row i: vocabulary[codes[i]]).
 * Every input is checked: lengths, buffer formats, codes within the vocabulary (IndexError),
 * items that are bytes (TypeError).  Nothing here calls back into Python or waits: the GIL is
 * held throughout and the inputs cannot change under the loop.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { K_INT, K_INT03, K_BYTES, K_US, K_USF };
enum { C_ARRAY, C_LIST, C_VOCAB };

typedef struct {
    Py_ssize_t lit_off, lit_len; /* literal text before this conversion (in the literal buffer) */
    int kind;
} conv;

typedef struct {
    int type;
    Py_buffer view; /* C_ARRAY: the values; C_VOCAB: the codes */
    int has_view;
    const int64_t *data;
    PyObject *seq; /* C_LIST: the list; C_VOCAB: the vocabulary (list or tuple) */
    Py_ssize_t seq_len;
    const char *cur; /* %b: the current row's bytes (put_row's first pass) */
    Py_ssize_t cur_len;
} column;

typedef struct {
    char *lit;        /* the literal pieces, %% already a single % */
    conv *convs;      /* one per conversion */
    Py_ssize_t nconv; /* conversions */
    Py_ssize_t tail_off, tail_len; /* the literal after the last conversion */
    Py_ssize_t lit_total;
} tmpl;

static void tmpl_free(tmpl *t) {
    PyMem_Free(t->lit);
    PyMem_Free(t->convs);
    t->lit = NULL;
    t->convs = NULL;
}

/* bytes after the literal buffer and the reserved output, for copy_lit's fixed-size copies */
#define LIT_SLACK 16

/* a literal piece copied: a short one as one fixed 16-byte copy (two moves, no call; the source
 * and the destination have LIT_SLACK bytes to spare, the bytes past len are overwritten next) */
static inline void copy_lit(char *o, const char *src, Py_ssize_t len) {
    if (len <= LIT_SLACK)
        memcpy(o, src, LIT_SLACK);
    else
        memcpy(o, src, (size_t)len);
}

/* n bytes copied without a call for the usual short ones (overlapping fixed-size moves that read
 * and write only [0, n)) */
static inline void copy_small(char *o, const char *s, Py_ssize_t n) {
    if (n > 32) {
        memcpy(o, s, (size_t)n);
    } else if (n >= 8) {
        for (Py_ssize_t k = 0; k + 8 <= n; k += 8)
            memcpy(o + k, s + k, 8);
        memcpy(o + n - 8, s + n - 8, 8);
    } else if (n >= 4) {
        memcpy(o, s, 4);
        memcpy(o + n - 4, s + n - 4, 4);
    } else if (n > 0) {
        o[0] = s[0];
        o[n / 2] = s[n / 2];
        o[n - 1] = s[n - 1];
    }
}

static int tmpl_parse(const char *s, Py_ssize_t n, tmpl *t) {
    t->lit = PyMem_Calloc((size_t)n + LIT_SLACK, 1); /* read 16 bytes at a time by copy_lit */
    t->convs = PyMem_Malloc(sizeof(conv) * ((size_t)n / 2 + 1));
    t->nconv = 0;
    if (t->lit == NULL || t->convs == NULL) {
        tmpl_free(t);
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t w = 0, start = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            t->lit[w++] = s[i];
            continue;
        }
        if (i + 1 < n && s[i + 1] == '%') {
            t->lit[w++] = '%';
            i++;
            continue;
        }
        int kind;
        if (i + 1 < n && (s[i + 1] == 'd' || s[i + 1] == 'b' || s[i + 1] == 't' || s[i + 1] == 'u')) {
            kind = s[i + 1] == 'd' ? K_INT : s[i + 1] == 'b' ? K_BYTES : s[i + 1] == 't' ? K_US : K_USF;
            i += 1;
        } else if (i + 3 < n && s[i + 1] == '0' && s[i + 2] == '3' && s[i + 3] == 'd') {
            kind = K_INT03;
            i += 3;
        } else {
            tmpl_free(t);
            PyErr_Format(PyExc_ValueError, "row template: unsupported conversion at byte %zd", i);
            return -1;
        }
        conv *c = &t->convs[t->nconv++];
        c->lit_off = start;
        c->lit_len = w - start;
        c->kind = kind;
        start = w;
    }
    t->tail_off = start;
    t->tail_len = w - start;
    t->lit_total = w;
    return 0;
}

static void columns_release(column *cols, Py_ssize_t n) {
    for (Py_ssize_t j = 0; j < n; j++)
        if (cols[j].has_view) {
            PyBuffer_Release(&cols[j].view);
            cols[j].has_view = 0;
        }
}

/* an int64 view of obj, its length in *len */
static int int64_view(PyObject *obj, column *c, Py_ssize_t j, Py_ssize_t *len) {
    if (PyObject_GetBuffer(obj, &c->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "row column %zd: not a contiguous int64 buffer", j);
        return -1;
    }
    c->has_view = 1;
    const char *f = c->view.format ? c->view.format : "B";
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    if (c->view.ndim != 1 || c->view.itemsize != 8 || !(strcmp(f, "q") == 0 || strcmp(f, "l") == 0)) {
        PyErr_Format(PyExc_TypeError, "row column %zd: not a one-dimensional int64 buffer", j);
        return -1;
    }
    c->data = (const int64_t *)c->view.buf;
    *len = c->view.shape ? c->view.shape[0] : c->view.len / 8;
    return 0;
}

/* the columns (one per conversion, kinds checked) and their common length in *rows */
static int columns_open(PyObject *seq, const tmpl *t, column *cols, Py_ssize_t *rows) {
    Py_ssize_t n = -1;
    for (Py_ssize_t j = 0; j < t->nconv; j++) {
        PyObject *obj = PyTuple_GET_ITEM(seq, j);
        column *c = &cols[j];
        Py_ssize_t len;
        if (t->convs[j].kind != K_BYTES) {
            c->type = C_ARRAY;
            if (int64_view(obj, c, j, &len) < 0)
                return -1;
        } else if (PyList_CheckExact(obj)) {
            c->type = C_LIST;
            c->seq = obj;
            len = PyList_GET_SIZE(obj);
        } else if (PyTuple_CheckExact(obj) && PyTuple_GET_SIZE(obj) == 2) {
            c->type = C_VOCAB;
            c->seq = PyTuple_GET_ITEM(obj, 1);
            if (!PyList_CheckExact(c->seq) && !PyTuple_CheckExact(c->seq)) {
                PyErr_Format(PyExc_TypeError, "row column %zd: the vocabulary is not a list or tuple", j);
                return -1;
            }
            c->seq_len = PySequence_Fast_GET_SIZE(c->seq);
            if (int64_view(PyTuple_GET_ITEM(obj, 0), c, j, &len) < 0)
                return -1;
        } else {
            PyErr_Format(PyExc_TypeError, "row column %zd: a %%b column is a list of bytes or (codes, vocabulary)", j);
            return -1;
        }
        if (n >= 0 && len != n) {
            PyErr_Format(PyExc_ValueError, "row column %zd: %zd rows, column 0 has %zd", j, len, n);
            return -1;
        }
        n = len;
    }
    *rows = n;
    return 0;
}

/* bytes of column c at row i (borrowed), or NULL with an exception */
static PyObject *bytes_at(const column *c, Py_ssize_t j, Py_ssize_t i) {
    PyObject *item;
    if (c->type == C_LIST) {
        if (i >= PyList_GET_SIZE(c->seq)) { /* cannot shrink (GIL held, no callbacks); checked anyway */
            PyErr_Format(PyExc_IndexError, "row column %zd: row %zd missing", j, i);
            return NULL;
        }
        item = PyList_GET_ITEM(c->seq, i);
    } else {
        int64_t code = c->data[i];
        if (code < 0 || code >= (int64_t)PySequence_Fast_GET_SIZE(c->seq)) {
            PyErr_Format(PyExc_IndexError, "row column %zd, row %zd: code %lld not in a vocabulary of %zd", j, i,
                         (long long)code, PySequence_Fast_GET_SIZE(c->seq));
            return NULL;
        }
        item = PySequence_Fast_GET_ITEM(c->seq, (Py_ssize_t)code);
    }
    if (!PyBytes_Check(item)) {
        PyErr_Format(PyExc_TypeError, "row column %zd, row %zd: %.50s, not bytes", j, i, Py_TYPE(item)->tp_name);
        return NULL;
    }
    return item;
}

/* the two-digit texts 00..99, for put_int */
static const char DIGITS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* the 8 digits of x < 10^8, zero-padded, at p[0..8) (32-bit arithmetic) */
static void put8(char *p, uint32_t x) {
    uint32_t hi = x / 10000, lo = x % 10000;
    memcpy(p, DIGITS + 2 * (hi / 100), 2);
    memcpy(p + 2, DIGITS + 2 * (hi % 100), 2);
    memcpy(p + 4, DIGITS + 2 * (lo / 100), 2);
    memcpy(p + 6, DIGITS + 2 * (lo % 100), 2);
}

/* the decimal text of v, zero-padded to width (sign included) as Python's %0<width>d (eight
 * digits per 64-bit division, then two per 32-bit one: a 16-digit epoch-µs time is one of each
 * and four more) */
static char *put_int(char *o, int64_t v, int width) {
    char tmp[32];
    char *p = tmp + sizeof(tmp);
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    while (u >= 100000000u) {
        uint64_t q = u / 100000000u;
        p -= 8;
        put8(p, (uint32_t)(u - q * 100000000u));
        u = q;
    }
    uint32_t w = (uint32_t)u;
    while (w >= 100) {
        uint32_t d = (w % 100) * 2;
        w /= 100;
        *--p = DIGITS[d + 1];
        *--p = DIGITS[d];
    }
    if (w >= 10) {
        *--p = DIGITS[w * 2 + 1];
        *--p = DIGITS[w * 2];
    } else {
        *--p = (char)('0' + (int)w);
    }
    int k = (int)(tmp + sizeof(tmp) - p);
    int len = k + (v < 0);
    if (v < 0)
        *o++ = '-';
    for (int pad = width - len; pad > 0; pad--)
        *o++ = '0';
    copy_small(o, p, k);
    return o + k;
}

/* %u's range: 0 <= ns < 10**12 */
#define USF_LIMIT 1000000000000LL

/* ns as µs: "%d.%03d" % divmod(v, 1000) (floor division, as Python's), or with ``shortest`` the
 * decimals without trailing zeros ("0" for none: orjson's v / 1000 for 0 <= v < 10**12) */
static char *put_us(char *o, int64_t v, int shortest) {
    int64_t q = v / 1000, r = v % 1000;
    if (r < 0) {
        r += 1000;
        q -= 1;
    }
    o = put_int(o, q, 0);
    *o++ = '.';
    if (shortest && r == 0) {
        *o++ = '0';
        return o;
    }
    o[0] = (char)('0' + r / 100);
    o[1] = (char)('0' + r / 10 % 10);
    o[2] = (char)('0' + r % 10);
    int k = 3;
    if (shortest)
        while (o[k - 1] == '0')
            k--;
    return o + k;
}

/* an output buffer: a bytes object grown as needed */
typedef struct {
    PyObject *obj;
    Py_ssize_t len, cap;
} out;

static char *out_reserve(out *b, Py_ssize_t more) {
    if (more > PY_SSIZE_T_MAX - b->len) {
        PyErr_NoMemory();
        return NULL;
    }
    Py_ssize_t need = b->len + more;
    if (need > b->cap) {
        Py_ssize_t cap = b->cap;
        while (cap < need)
            cap = cap > PY_SSIZE_T_MAX / 2 ? need : cap * 2;
        if (_PyBytes_Resize(&b->obj, cap) < 0)
            return NULL;
        b->cap = cap;
    }
    return PyBytes_AS_STRING(b->obj) + b->len;
}

/* append row i to b (the separator first unless i == first) */
static int put_row(out *b, const tmpl *t, column *cols, Py_ssize_t i, const char *sep, Py_ssize_t seplen) {
    /* the row's size: literals, ints at most 20 characters, the bytes' own lengths */
    Py_ssize_t need = t->lit_total + seplen;
    for (Py_ssize_t j = 0; j < t->nconv; j++) {
        if (t->convs[j].kind == K_BYTES) {
            PyObject *item = bytes_at(&cols[j], j, i);
            if (item == NULL)
                return -1;
            Py_ssize_t l = PyBytes_GET_SIZE(item);
            if (l > PY_SSIZE_T_MAX - 64 - need) {
                PyErr_NoMemory();
                return -1;
            }
            cols[j].cur = PyBytes_AS_STRING(item); /* (the item cannot go: GIL held, no callbacks) */
            cols[j].cur_len = l;
            need += l;
        } else if (t->convs[j].kind == K_USF && (cols[j].data[i] < 0 || cols[j].data[i] >= USF_LIMIT)) {
            PyErr_Format(PyExc_ValueError, "row column %zd, row %zd: %lld ns is outside the short %%u form", j, i,
                         (long long)cols[j].data[i]);
            return -1;
        } else {
            need += 32; /* an int64 (20 characters), or µs: the whole part, a point, three decimals */
        }
    }
    char *o = out_reserve(b, need + LIT_SLACK); /* copy_lit may write 16 bytes past a short piece */
    if (o == NULL)
        return -1;
    char *o0 = o;
    if (seplen == 1) {
        *o++ = *sep;
    } else if (seplen) {
        memcpy(o, sep, (size_t)seplen);
        o += seplen;
    }
    for (Py_ssize_t j = 0; j < t->nconv; j++) {
        const conv *c = &t->convs[j];
        copy_lit(o, t->lit + c->lit_off, c->lit_len);
        o += c->lit_len;
        if (c->kind == K_BYTES) {
            copy_small(o, cols[j].cur, cols[j].cur_len);
            o += cols[j].cur_len;
        } else if (c->kind == K_US || c->kind == K_USF) {
            o = put_us(o, cols[j].data[i], c->kind == K_USF);
        } else {
            o = put_int(o, cols[j].data[i], c->kind == K_INT03 ? 3 : 0);
        }
    }
    copy_lit(o, t->lit + t->tail_off, t->tail_len);
    o += t->tail_len;
    b->len += o - o0;
    return 0;
}

typedef struct {
    tmpl t;
    column *cols;
    Py_ssize_t n;
} job;

static int job_open(PyObject *template, PyObject *columns, job *jb) {
    memset(jb, 0, sizeof(*jb));
    if (!PyBytes_Check(template)) {
        PyErr_SetString(PyExc_TypeError, "row template: bytes expected");
        return -1;
    }
    if (!PyTuple_Check(columns)) {
        PyErr_SetString(PyExc_TypeError, "row columns: a tuple expected");
        return -1;
    }
    if (tmpl_parse(PyBytes_AS_STRING(template), PyBytes_GET_SIZE(template), &jb->t) < 0)
        return -1;
    if (jb->t.nconv == 0 || jb->t.nconv != PyTuple_GET_SIZE(columns)) {
        PyErr_Format(PyExc_ValueError, "row template: %zd conversions, %zd columns", jb->t.nconv,
                     PyTuple_GET_SIZE(columns));
        tmpl_free(&jb->t);
        return -1;
    }
    jb->cols = PyMem_Calloc((size_t)jb->t.nconv, sizeof(column));
    if (jb->cols == NULL) {
        tmpl_free(&jb->t);
        PyErr_NoMemory();
        return -1;
    }
    if (columns_open(columns, &jb->t, jb->cols, &jb->n) < 0) {
        columns_release(jb->cols, jb->t.nconv);
        PyMem_Free(jb->cols);
        tmpl_free(&jb->t);
        return -1;
    }
    return 0;
}

static void job_close(job *jb) {
    columns_release(jb->cols, jb->t.nconv);
    PyMem_Free(jb->cols);
    tmpl_free(&jb->t);
}

static PyObject *join(PyObject *self, PyObject *args) {
    PyObject *template, *columns;
    Py_buffer sep;
    if (!PyArg_ParseTuple(args, "OOy*:join", &template, &columns, &sep))
        return NULL;
    job jb;
    if (job_open(template, columns, &jb) < 0) {
        PyBuffer_Release(&sep);
        return NULL;
    }
    out b = {NULL, 0, 0};
    Py_ssize_t per = jb.t.lit_total + 32;
    b.cap = jb.n < (PY_SSIZE_T_MAX / 2 - 64) / per ? jb.n * per + 64 : (Py_ssize_t)1 << 20;
    b.obj = PyBytes_FromStringAndSize(NULL, b.cap);
    int ok = b.obj != NULL;
    for (Py_ssize_t i = 0; ok && i < jb.n; i++)
        ok = put_row(&b, &jb.t, jb.cols, i, (const char *)sep.buf, i ? sep.len : 0) == 0;
    job_close(&jb);
    PyBuffer_Release(&sep);
    if (!ok || _PyBytes_Resize(&b.obj, b.len) < 0) {
        Py_XDECREF(b.obj);
        return NULL;
    }
    return b.obj;
}

static PyObject *rows(PyObject *self, PyObject *args) {
    PyObject *template, *columns;
    if (!PyArg_ParseTuple(args, "OO:rows", &template, &columns))
        return NULL;
    job jb;
    if (job_open(template, columns, &jb) < 0)
        return NULL;
    PyObject *list = PyList_New(jb.n);
    out b = {NULL, 0, 256};
    b.obj = list ? PyBytes_FromStringAndSize(NULL, b.cap) : NULL;
    int ok = b.obj != NULL;
    for (Py_ssize_t i = 0; ok && i < jb.n; i++) {
        b.len = 0;
        ok = put_row(&b, &jb.t, jb.cols, i, "", 0) == 0;
        PyObject *row = ok ? PyBytes_FromStringAndSize(PyBytes_AS_STRING(b.obj), b.len) : NULL;
        ok = row != NULL;
        if (ok)
            PyList_SET_ITEM(list, i, row);
    }
    job_close(&jb);
    Py_XDECREF(b.obj);
    if (!ok) {
        Py_XDECREF(list);
        return NULL;
    }
    return list;
}

static PyObject *records(PyObject *self, PyObject *args) {
    Py_buffer fixed;
    Py_ssize_t width;
    PyObject *codes, *vocab;
    if (!PyArg_ParseTuple(args, "y*nOO:records", &fixed, &width, &codes, &vocab))
        return NULL;
    column c;
    memset(&c, 0, sizeof(c));
    c.type = C_VOCAB;
    c.seq = vocab;
    Py_ssize_t n = 0;
    PyObject *res = NULL;
    if (!PyList_CheckExact(vocab) && !PyTuple_CheckExact(vocab)) {
        PyErr_SetString(PyExc_TypeError, "records: the vocabulary is not a list or tuple");
        goto done;
    }
    if (int64_view(codes, &c, 0, &n) < 0)
        goto done;
    if (width < 0 || (n && width > PY_SSIZE_T_MAX / n) || fixed.len != n * width) {
        PyErr_Format(PyExc_ValueError, "records: %zd bytes of fixed parts for %zd rows of %zd", fixed.len, n, width);
        goto done;
    }
    Py_ssize_t total = fixed.len;
    for (Py_ssize_t i = 0; i < n; i++) { /* checks every code and item first */
        PyObject *item = bytes_at(&c, 0, i);
        if (item == NULL)
            goto done;
        if (PyBytes_GET_SIZE(item) > PY_SSIZE_T_MAX - total) {
            PyErr_NoMemory();
            goto done;
        }
        total += PyBytes_GET_SIZE(item);
    }
    res = PyBytes_FromStringAndSize(NULL, total);
    if (res == NULL)
        goto done;
    char *o = PyBytes_AS_STRING(res);
    const char *f = (const char *)fixed.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        memcpy(o, f + i * width, (size_t)width);
        o += width;
        PyObject *item = PySequence_Fast_GET_ITEM(vocab, (Py_ssize_t)c.data[i]);
        memcpy(o, PyBytes_AS_STRING(item), (size_t)PyBytes_GET_SIZE(item));
        o += PyBytes_GET_SIZE(item);
    }
done:
    if (c.has_view)
        PyBuffer_Release(&c.view);
    PyBuffer_Release(&fixed);
    return res;
}

static PyMethodDef methods[] = {
    {"join", join, METH_VARARGS, "join(template, columns, sep) -> the rows' texts joined by sep."},
    {"rows", rows, METH_VARARGS, "rows(template, columns) -> one text per row."},
    {"records", records, METH_VARARGS, "records(fixed, width, codes, vocabulary) -> fixed parts with their tails."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_row_text", "Row texts from columns (torch analysis views).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__row_text(void) { return PyModule_Create(&module); }
