/* Row texts of the torch analysis' large views in C (export/ascend_pt/text.py): one ``%`` template
 * filled from whole columns, the same bytes as ``template % row`` for each row in Python.
 *
 *   join(template, columns, sep) -> bytes        the rows' texts joined by sep
 *   rows(template, columns) -> list[bytes]       one text per row
 *   records(fixed, width, codes, vocabulary) -> bytes
 *                        per row i: fixed[i*width:(i+1)*width] + vocabulary[codes[i]] (binary
 *                        records: a packed constant part, then a variable tail; torch.op_range)
 *
 * The template is bytes with the conversions %d, %03d, %t and %b (and %% for a percent sign); any
 * other conversion is a ValueError.  %t is not Python's: it is the µs text of a ns value v,
 * "%d.%03d" % divmod(v, 1000) (docs/formats.md §1), one column where Python takes two.
 * One column per conversion, all of the same length n (>= 0):
 *   %d, %03d, %t   a C-contiguous one-dimensional int64 buffer (numpy int64 array);
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

enum { K_INT, K_INT03, K_US, K_BYTES };
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

static int tmpl_parse(const char *s, Py_ssize_t n, tmpl *t) {
    t->lit = PyMem_Malloc((size_t)n + 1);
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
        if (i + 1 < n && (s[i + 1] == 'd' || s[i + 1] == 'b' || s[i + 1] == 't')) {
            kind = s[i + 1] == 'd' ? K_INT : s[i + 1] == 't' ? K_US : K_BYTES;
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

/* the decimal text of v, zero-padded to width (sign included) as Python's %0<width>d */
static char *put_int(char *o, int64_t v, int width) {
    char tmp[24];
    int k = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[k++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    int len = k + (v < 0);
    if (v < 0)
        *o++ = '-';
    for (int pad = width - len; pad > 0; pad--)
        *o++ = '0';
    while (k)
        *o++ = tmp[--k];
    return o;
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
static int put_row(out *b, const tmpl *t, const column *cols, Py_ssize_t i, const char *sep, Py_ssize_t seplen) {
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
            need += l;
        } else {
            need += 26; /* %t: up to 20 digits and sign, the point, 3 decimals */
        }
    }
    char *o = out_reserve(b, need);
    if (o == NULL)
        return -1;
    char *o0 = o;
    if (seplen) {
        memcpy(o, sep, (size_t)seplen);
        o += seplen;
    }
    for (Py_ssize_t j = 0; j < t->nconv; j++) {
        const conv *c = &t->convs[j];
        memcpy(o, t->lit + c->lit_off, (size_t)c->lit_len);
        o += c->lit_len;
        if (c->kind == K_BYTES) {
            PyObject *item = bytes_at(&cols[j], j, i); /* checked above */
            Py_ssize_t l = PyBytes_GET_SIZE(item);
            memcpy(o, PyBytes_AS_STRING(item), (size_t)l);
            o += l;
        } else if (c->kind == K_US) {
            int64_t v = cols[j].data[i], q = v / 1000, r = v % 1000;
            if (r < 0) { /* floor division, as Python's divmod */
                q -= 1;
                r += 1000;
            }
            o = put_int(o, q, 0);
            *o++ = '.';
            o = put_int(o, r, 3);
        } else {
            o = put_int(o, cols[j].data[i], c->kind == K_INT03 ? 3 : 0);
        }
    }
    memcpy(o, t->lit + t->tail_off, (size_t)t->tail_len);
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
