/* The import's bulk inserts in C: int64 matrices bound straight from their buffer, without the GIL.
 *
 * The SQLite used is the one Python's sqlite3 module has already loaded (dlopen with RTLD_NOLOAD),
 * so the same library writes the file whichever path runs, and no SQLite header or -dev package
 * is needed to build this.  Without it (a Python whose sqlite3 is linked statically, another
 * platform) the module does not import and parse/db_builder.py binds through the sqlite3 module.
 *
 *   Conn(path)                        a connection (read-write, created if missing)
 *   Conn.execute(sql)                 statements without results (pragmas, schema, BEGIN/COMMIT)
 *   Conn.insert_matrix(sql1, sqlk, k, m)
 *                                     rows of the C-contiguous (n, c) int64 matrix m: sqlk binds k
 *                                     rows per statement, sql1 one (the tail); returns rows inserted
 *   Conn.insert_rows(sql, rows)       an iterable of sequences of int/float/str/bytes/None
 *   Conn.close()
 *   libversion_number()               the loaded library's version (compared with sqlite3's)
 *
 * One call at a time: a method entered while another runs on the same connection (another thread,
 * while this one waits on SQLite without the GIL, or the rows' iterator calling back) raises
 * RuntimeError instead of closing or re-preparing under it.  The flag is read and set under the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
typedef void (*destructor_fn)(void *);
#define SQLITE_OK 0
#define SQLITE_DONE 101
#define SQLITE_OPEN_READWRITE 0x00000002
#define SQLITE_OPEN_CREATE 0x00000004
#define SQLITE_TRANSIENT ((destructor_fn)-1)

static struct {
    int (*open_v2)(const char *, sqlite3 **, int, const char *);
    int (*close)(sqlite3 *);
    int (*exec)(sqlite3 *, const char *, void *, void *, char **);
    void (*free)(void *);
    int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
    int (*bind_int64)(sqlite3_stmt *, int, long long);
    int (*bind_double)(sqlite3_stmt *, int, double);
    int (*bind_text)(sqlite3_stmt *, int, const char *, int, destructor_fn);
    int (*bind_blob)(sqlite3_stmt *, int, const void *, int, destructor_fn);
    int (*bind_null)(sqlite3_stmt *, int);
    int (*bind_parameter_count)(sqlite3_stmt *);
    int (*step)(sqlite3_stmt *);
    int (*reset)(sqlite3_stmt *);
    int (*finalize)(sqlite3_stmt *);
    int (*changes)(sqlite3 *);
    const char *(*errmsg)(sqlite3 *);
    int (*extended_errcode)(sqlite3 *);
    int (*libversion_number)(void);
} S;

static PyObject *Error;  /* _bulk_insert.Error(extended code, message) */

typedef struct {
    PyObject_HEAD
    sqlite3 *db;
    PyObject *stmts; /* dict: sql text -> PyCapsule(sqlite3_stmt *) */
    int busy;        /* a method is running (set and read with the GIL held) */
} Conn;

static PyObject *raise_db(sqlite3 *db, int rc) {
    int code = db ? S.extended_errcode(db) : rc;
    const char *msg = db ? S.errmsg(db) : "cannot open the database";
    PyObject *args = Py_BuildValue("(is)", code, msg);
    if (args) {
        PyErr_SetObject(Error, args);
        Py_DECREF(args);
    }
    return NULL;
}

/* enter a method: -1 with RuntimeError when another call is running on this connection */
static int enter(Conn *self) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the connection is in use by another call (one thread at a time)");
        return -1;
    }
    self->busy = 1;
    return 0;
}

static void leave(Conn *self) { self->busy = 0; }

/* enter() and check that the connection is open (left again on failure) */
static int check_open(Conn *self) {
    if (enter(self) < 0)
        return -1;
    if (self->db == NULL) {
        leave(self);
        PyErr_SetString(PyExc_ValueError, "the connection is closed");
        return -1;
    }
    return 0;
}

static sqlite3_stmt *stmt_for(Conn *self, PyObject *sql) {
    PyObject *cap = PyDict_GetItemWithError(self->stmts, sql);
    if (cap != NULL)
        return (sqlite3_stmt *)PyCapsule_GetPointer(cap, NULL);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(sql, &len);
    if (text == NULL)
        return NULL;
    sqlite3_stmt *st = NULL;
    int rc = S.prepare_v2(self->db, text, (int)len, &st, NULL);
    if (rc != SQLITE_OK || st == NULL) {
        if (st)
            S.finalize(st);
        if (rc == SQLITE_OK) {
            PyErr_SetString(PyExc_ValueError, "empty SQL statement");
            return NULL;
        }
        raise_db(self->db, rc);
        return NULL;
    }
    cap = PyCapsule_New(st, NULL, NULL);
    if (cap == NULL || PyDict_SetItem(self->stmts, sql, cap) < 0) {
        Py_XDECREF(cap);
        S.finalize(st);
        return NULL;
    }
    Py_DECREF(cap);
    return st;
}

static void finalize_all(Conn *self) {
    if (self->stmts == NULL)
        return;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(self->stmts, &pos, &key, &value)) {
        sqlite3_stmt *st = (sqlite3_stmt *)PyCapsule_GetPointer(value, NULL);
        if (st)
            S.finalize(st);
    }
    PyDict_Clear(self->stmts);
}

static int Conn_init(Conn *self, PyObject *args, PyObject *kw) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path))
        return -1;
    if (enter(self) < 0)
        return -1;
    if (self->db != NULL) {
        leave(self);
        return 0;
    }
    if (self->stmts == NULL && (self->stmts = PyDict_New()) == NULL) {
        leave(self);
        return -1;
    }
    sqlite3 *db = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = S.open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    Py_END_ALLOW_THREADS
    leave(self);
    if (rc != SQLITE_OK) {
        raise_db(db, rc);
        if (db)
            S.close(db);
        return -1;
    }
    self->db = db;
    return 0;
}

static void close_db(Conn *self) {
    if (self->db != NULL) {
        finalize_all(self);
        S.close(self->db);
        self->db = NULL;
    }
}

static PyObject *Conn_close(Conn *self, PyObject *unused) {
    if (enter(self) < 0)
        return NULL;
    close_db(self);
    leave(self);
    Py_RETURN_NONE;
}

static void Conn_dealloc(Conn *self) {
    close_db(self);  /* no call can be running: each holds a reference to self */
    Py_CLEAR(self->stmts);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Conn_execute(Conn *self, PyObject *arg) {
    const char *sql = PyUnicode_AsUTF8(arg);
    if (sql == NULL || check_open(self) < 0)
        return NULL;
    char *err = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = S.exec(self->db, sql, NULL, NULL, &err);
    Py_END_ALLOW_THREADS
    leave(self);
    if (err)
        S.free(err);
    if (rc != SQLITE_OK)
        return raise_db(self->db, rc);
    Py_RETURN_NONE;
}

/* One statement run: step to the end and reset; returns the rows it inserted, or -1 with the
   statement left unreset (the caller raises the connection's message, then resets it). */
static long long run(sqlite3 *db, sqlite3_stmt *st) {
    if (S.step(st) != SQLITE_DONE)
        return -1;
    S.reset(st);
    return (long long)S.changes(db);
}

static PyObject *raise_stmt(sqlite3 *db, sqlite3_stmt *st) {
    raise_db(db, 1);
    S.reset(st);
    return NULL;
}

static int is_int64_format(const char *fmt) {
    if (fmt == NULL)
        return 0;
    if (*fmt == '<' || *fmt == '=' || *fmt == '@')
        fmt++;
    return (fmt[0] == 'l' || fmt[0] == 'q') && fmt[1] == '\0';
}

static PyObject *Conn_insert_matrix(Conn *self, PyObject *args) {
    PyObject *sql1, *sqlk, *obj;
    int k;
    if (!PyArg_ParseTuple(args, "UUiO", &sql1, &sqlk, &k, &obj))
        return NULL;
    if (check_open(self) < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        leave(self);
        return NULL;
    }
    PyObject *result = NULL;
    if (view.ndim != 2 || view.itemsize != 8 || !is_int64_format(view.format) || k < 1) {
        PyErr_SetString(PyExc_TypeError, "insert_matrix wants a C-contiguous 2-D int64 matrix and k >= 1");
        goto done;
    }
    Py_ssize_t n = view.shape[0], c = view.shape[1];
    sqlite3_stmt *one = stmt_for(self, sql1);
    sqlite3_stmt *many = one ? stmt_for(self, sqlk) : NULL;
    if (many == NULL)
        goto done;
    if (S.bind_parameter_count(one) != c || S.bind_parameter_count(many) != c * k) {
        PyErr_Format(PyExc_ValueError, "the statements bind %d and %d values, the matrix has %zd columns (k=%d)",
                     S.bind_parameter_count(one), S.bind_parameter_count(many), c, k);
        goto done;
    }
    const long long *v = (const long long *)view.buf;
    Py_ssize_t bulk = n - n % k, i = 0;
    long long done_rows = 0, got = 0;
    sqlite3_stmt *failed = NULL;
    Py_BEGIN_ALLOW_THREADS
    for (; i < bulk; i += k) {
        const long long *row = v + i * c;
        for (Py_ssize_t j = 0; j < c * k; j++)
            S.bind_int64(many, (int)j + 1, row[j]);
        if ((got = run(self->db, many)) < 0) {
            failed = many;
            break;
        }
        done_rows += got;
    }
    for (; i < n && failed == NULL; i++) {
        const long long *row = v + i * c;
        for (Py_ssize_t j = 0; j < c; j++)
            S.bind_int64(one, (int)j + 1, row[j]);
        if ((got = run(self->db, one)) < 0) {
            failed = one;
            break;
        }
        done_rows += got;
    }
    Py_END_ALLOW_THREADS
    if (failed != NULL)
        raise_stmt(self->db, failed);
    else
        result = PyLong_FromLongLong(done_rows);
done:
    PyBuffer_Release(&view);
    leave(self);
    return result;
}

static int bind_value(sqlite3_stmt *st, int pos, PyObject *x) {
    if (x == Py_None)
        return S.bind_null(st, pos);
    if (PyLong_Check(x)) {
        int overflow = 0;
        long long val = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (overflow) {
            PyErr_SetString(PyExc_OverflowError, "Python int too large to convert to SQLite INTEGER");
            return -1;
        }
        if (val == -1 && PyErr_Occurred())
            return -1;
        return S.bind_int64(st, pos, val);
    }
    if (PyFloat_Check(x))
        return S.bind_double(st, pos, PyFloat_AS_DOUBLE(x));
    if (PyUnicode_Check(x)) {
        Py_ssize_t len;
        const char *s = PyUnicode_AsUTF8AndSize(x, &len);
        if (s == NULL)
            return -1;
        if (len > INT_MAX) {
            PyErr_SetString(PyExc_OverflowError, "string longer than INT_MAX bytes");
            return -1;
        }
        return S.bind_text(st, pos, s, (int)len, SQLITE_TRANSIENT);
    }
    if (PyBytes_Check(x)) {
        if (PyBytes_GET_SIZE(x) > INT_MAX) {
            PyErr_SetString(PyExc_OverflowError, "bytes longer than INT_MAX");
            return -1;
        }
        return S.bind_blob(st, pos, PyBytes_AS_STRING(x), (int)PyBytes_GET_SIZE(x), SQLITE_TRANSIENT);
    }
    PyErr_Format(PyExc_TypeError, "cannot bind a value of type %.100s", Py_TYPE(x)->tp_name);
    return -1;
}

static PyObject *Conn_insert_rows(Conn *self, PyObject *args) {
    PyObject *sql, *rows;
    if (!PyArg_ParseTuple(args, "UO", &sql, &rows))
        return NULL;
    if (check_open(self) < 0)
        return NULL;
    /* the iterator and the rows' conversions run Python code: busy stays set across them */
    sqlite3_stmt *st = stmt_for(self, sql);
    if (st == NULL) {
        leave(self);
        return NULL;
    }
    int want = S.bind_parameter_count(st);
    PyObject *it = PyObject_GetIter(rows);
    if (it == NULL) {
        leave(self);
        return NULL;
    }
    long long total = 0;
    PyObject *row;
    while ((row = PyIter_Next(it)) != NULL) {
        PyObject *seq = PySequence_Fast(row, "each row must be a sequence");
        Py_DECREF(row);
        if (seq == NULL)
            goto fail;
        Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
        if (m != want) {
            PyErr_Format(PyExc_ValueError, "the statement binds %d values, a row has %zd", want, m);
            Py_DECREF(seq);
            goto fail;
        }
        PyObject **items = PySequence_Fast_ITEMS(seq);
        for (Py_ssize_t j = 0; j < m; j++) {
            if (bind_value(st, (int)j + 1, items[j]) < 0) {
                Py_DECREF(seq);
                S.reset(st);
                goto fail;
            }
        }
        Py_DECREF(seq);
        long long got = run(self->db, st);
        if (got < 0) {
            raise_stmt(self->db, st);
            goto fail;
        }
        total += got;
    }
    Py_DECREF(it);
    leave(self);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromLongLong(total);
fail:
    Py_DECREF(it);
    leave(self);
    return NULL;
}

static PyMethodDef Conn_methods[] = {
    {"execute", (PyCFunction)Conn_execute, METH_O, "Run statements that return no rows."},
    {"insert_matrix", (PyCFunction)Conn_insert_matrix, METH_VARARGS,
     "insert_matrix(sql1, sqlk, k, matrix) -> rows inserted (int64 matrix, without the GIL)."},
    {"insert_rows", (PyCFunction)Conn_insert_rows, METH_VARARGS,
     "insert_rows(sql, rows) -> rows inserted (ints, floats, str, bytes, None)."},
    {"close", (PyCFunction)Conn_close, METH_NOARGS, "Finalize the statements and close."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ConnType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "openmsprof.parse._bulk_insert.Conn",
    .tp_basicsize = sizeof(Conn),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Conn_init,
    .tp_dealloc = (destructor)Conn_dealloc,
    .tp_methods = Conn_methods,
    .tp_doc = "A SQLite connection for the import's bulk inserts.",
};

static PyObject *libversion_number(PyObject *m, PyObject *unused) {
    return PyLong_FromLong(S.libversion_number());
}

static PyMethodDef module_methods[] = {
    {"libversion_number", libversion_number, METH_NOARGS, "The loaded SQLite's version number."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_bulk_insert", "The import's bulk inserts in C.", -1, module_methods,
};

static int load_sqlite(void) {
    /* only the library already in the process (Python's sqlite3 module's): the same SQLite */
    void *lib = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL)
        return -1;
#define SYM(field, name) if ((*(void **)&S.field = dlsym(lib, name)) == NULL) return -1
    SYM(open_v2, "sqlite3_open_v2");
    SYM(close, "sqlite3_close");
    SYM(exec, "sqlite3_exec");
    SYM(free, "sqlite3_free");
    SYM(prepare_v2, "sqlite3_prepare_v2");
    SYM(bind_int64, "sqlite3_bind_int64");
    SYM(bind_double, "sqlite3_bind_double");
    SYM(bind_text, "sqlite3_bind_text");
    SYM(bind_blob, "sqlite3_bind_blob");
    SYM(bind_null, "sqlite3_bind_null");
    SYM(bind_parameter_count, "sqlite3_bind_parameter_count");
    SYM(step, "sqlite3_step");
    SYM(reset, "sqlite3_reset");
    SYM(finalize, "sqlite3_finalize");
    SYM(changes, "sqlite3_changes");
    SYM(errmsg, "sqlite3_errmsg");
    SYM(extended_errcode, "sqlite3_extended_errcode");
    SYM(libversion_number, "sqlite3_libversion_number");
#undef SYM
    return 0;
}

PyMODINIT_FUNC PyInit__bulk_insert(void) {
    /* The sqlite3 module loads the libsqlite3 this module binds to: import it first. */
    PyObject *sqlite3_mod = PyImport_ImportModule("sqlite3");
    if (sqlite3_mod == NULL)
        return NULL;
    Py_DECREF(sqlite3_mod);
    if (load_sqlite() < 0) {
        PyErr_SetString(PyExc_ImportError,
                        "libsqlite3.so.0 is not loaded in this process after import sqlite3 "
                        "(a statically linked sqlite3 module cannot be shared)");
        return NULL;
    }
    if (PyType_Ready(&ConnType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    Error = PyErr_NewException("openmsprof.parse._bulk_insert.Error", NULL, NULL);
    if (Error == NULL || PyModule_AddObject(m, "Error", Error) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(Error);
    Py_INCREF(&ConnType);
    if (PyModule_AddObject(m, "Conn", (PyObject *)&ConnType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
