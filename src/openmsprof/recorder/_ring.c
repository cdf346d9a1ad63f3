/* openmsprof native recorder core: per-thread ring buffers of fixed 32-byte records.
 *
 * Producers (mark/push/pop/range_start/range_end, and api/step_range for the host's API spans
 * and framework steps) are C functions called with the GIL held:
 * each writes one record into its own thread's single-producer/single-consumer ring and
 * publishes it with a release store; no lock, no Python object per event.  A full ring drops
 * the record and counts it per thread and kind (and why); a producer never waits for the
 * flusher's I/O: only a thread's first record and a new string take a lock, one held for a few
 * pointer operations, and they wait for it with the GIL released.
 *
 * A native flusher thread (no GIL) writes the rings' records to disk as packed blocks (_pack.h:
 * ~9 bytes a marker instead of 32; with configure(packed=False), or no staging buffer, whole ring
 * segments as they are, with writev), into slices opened relative to the data directory's fd
 * with O_NOFOLLOW.  Strings are interned by the
 * producer on first sight (a dict lookup under the GIL) and queued as string-table entries that
 * the flusher writes before the records using them.  Memory: ring data is taken from a fixed
 * budget (the ceiling); a thread that finds the budget spent gets no ring and its records are
 * counted as dropped.
 *
 * Locks and the GIL: reg_lock (the ring list), str_lock (pending string entries) and fl_lock (the
 * flusher's wake-up) are each held for a few pointer operations only, never across I/O and never
 * while waiting for the GIL; a caller holding the GIL that finds one taken releases the GIL while
 * it waits (lock_gil_safe).  Fork: a prepare handler takes all three, the parent's handler
 * releases them, the child's re-initialises them and switches recording off; the Python session
 * then calls child_reset() (the parent's buffered records are discarded, never written twice) and,
 * when it follows the fork, start() again with the child's own file names.  docs/internals.md
 * "Fork and threads" states the contract.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "_pack.h"

#define NKINDS 16         /* record kinds 1..12 (markers 1..5, api 6, step range 12); 0 unused */
#define HEADER_SIZE 16
#define SLICE_BYTES (64u * 1024u * 1024u)
#define MIN_RING 2048u   /* records */
/* why a record was dropped: its ring was full (the flusher behind), the thread got no ring (the
 * memory budget spent), its string could not be queued (string memory full), bad arguments */
enum { WHY_FULL, WHY_NO_MEMORY, WHY_STRINGS, WHY_BAD_ARGS, NWHY };
static const char *why_names[NWHY] = {"ring_full", "no_memory", "string_memory_full", "bad_arguments"};

typedef struct {
    uint8_t kind, flags;
    uint16_t aux;
    uint32_t tid;
    int64_t t0, t1;
    uint32_t a, b;
} rec_t;

typedef struct ring {
    _Atomic uint64_t head;
    char pad1[56];
    _Atomic uint64_t tail;
    char pad2[56];
    rec_t *data;
    uint64_t cap, mask;
    size_t bytes;
    uint32_t tid;
    uint32_t name_id;
    _Atomic uint64_t drops[NKINDS]; /* written by the producer */
    _Atomic uint64_t lost[NKINDS];  /* written by the flusher: buffered when collection halted */
    _Atomic uint64_t why[NWHY];     /* drops by reason (written by the producer) */
    _Atomic int dead;
    int thread_written;
    struct ring *next;
} ring_t;

typedef struct {
    const char *source, *kind;
    const char *magic;
    int fd, index;
    uint64_t size;
    int version; /* of the file header: 1 fixed 32-byte records (and string tables), 2 packed blocks */
} slice_t;

/* ---- configuration and state ------------------------------------------------------------ */
static uint64_t cfg_ring_records = 1u << 19;           /* 16 MB rings (core.py sizes them from the budget) */
static uint64_t cfg_budget = 56ull * 1024 * 1024;      /* ring data ceiling */
static uint64_t cfg_string_bytes = 8ull * 1024 * 1024; /* pending string entries ceiling */
static uint64_t cfg_string_cache = 65536;
static PyObject *thread_name_fn = NULL;
static pthread_cond_t fl_cond;

static _Atomic int enabled = 0;     /* markers (msproftx) */
static _Atomic int collecting = 0;  /* api and step ranges: a session runs and has not halted */
static _Atomic uint64_t budget_used = 0;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static ring_t *rings = NULL;
static pthread_key_t exit_key;
static __thread ring_t *tls_ring = NULL;

static PyObject *intern_dict = NULL;
static uint32_t next_string_id = 0x80000000u;
static pthread_mutex_t str_lock = PTHREAD_MUTEX_INITIALIZER;
static char *str_buf = NULL;
static size_t str_len = 0, str_cap = 0;
static uint64_t range_ids = 0;

static int dir_fd = -1;
static char dev_name[32] = "host";
static slice_t rec_slice = {"Mstx", "records", "OMSPREC\0", -1, -1, 0, 2};
static slice_t str_slice = {"MstxNative", "table", "OMSPSTR\0", -1, -1, 0, 1};
/* packed records (_pack.h): on unless configure(packed=False); the flusher's staging buffer,
 * taken from the memory budget while a session runs */
static int cfg_packed = 1;
#define PK_FILL (1u << 20)
#define PK_BUF_BYTES ((size_t)PK_FILL + PACK_BLOCK_MAX)
static uint8_t *pk_buf = NULL;
static pthread_t flusher;
static int flusher_running = 0;
static pthread_mutex_t fl_lock = PTHREAD_MUTEX_INITIALIZER;
static int fl_stop = 0;
static uint64_t interval_ns = 200000000ull;
static uint64_t floor_bytes = 0, max_bytes = 0, check_every = 1024ull * 1024;
static _Atomic uint64_t records_written = 0, bytes_written = 0, flusher_cpu_ns = 0;
static _Atomic uint64_t newest_written_ns = 0, dropped_strings = 0;
/* domain filter: 0 none, 1 include (record only these), 2 exclude (record all but these) */
static int dom_mode = 0;
static PyObject *dom_set = NULL;     /* frozenset of domain names */
static PyObject *default_dom = NULL; /* "default": the domain of a marker without one */
static uint32_t dom_gen = 0;            /* bumped by set_domains: per-thread stacks start afresh */
static __thread uint64_t skip_stack[4]; /* per thread: was the push at this depth filtered out */
static __thread int skip_depth = 0;
static __thread uint32_t skip_gen = 0;
/* Filter resolved once per domain object: the str objects the filter skips, by identity (strong
 * references; read and written with the GIL held), and whether it skips markers without a
 * domain.  A mark in an excluded domain then costs what a mark with recording off does: the
 * flag, and a pointer compare before any argument is parsed. */
#define SKIP_SLOTS 64
static PyObject *skip_cache[SKIP_SLOTS];
static int skip_default = 0;
static _Atomic int halt_code = 0; /* 1 floor, 2 storage limit, 3 write error */
static _Atomic int halt_errno = 0;

static inline int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A thread ends (its pthread key destructor, no GIL): the ring can take no more records, so the
 * budget keeps only the pages it wrote (the rest was never touched, so never memory); the
 * flusher is woken to write and free it.  Threads born and dead in quick succession would
 * otherwise spend the budget until the flusher's next cycle. */
static void on_thread_exit(void *p) {
    ring_t *r = (ring_t *)p;
    pthread_mutex_lock(&reg_lock); /* against stop() freeing the ring's data meanwhile */
    if (r->data != NULL) {
        uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
        uint64_t n = head < r->cap ? head : r->cap;
        size_t touched = ((size_t)n * sizeof(rec_t) + 4095) & ~(size_t)4095;
        if (touched < r->bytes) {
            atomic_fetch_sub(&budget_used, r->bytes - touched);
            r->bytes = touched;
        }
    }
    atomic_store_explicit(&r->dead, 1, memory_order_release);
    pthread_mutex_unlock(&reg_lock);
    pthread_cond_signal(&fl_cond);
}

/* Take a lock with the GIL held: a taken lock is waited for with the GIL released, so no other
 * Python thread is ever stopped behind a lock (the holders never need the GIL). */
static void lock_gil_safe(pthread_mutex_t *m) {
    if (pthread_mutex_trylock(m) == 0) return;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(m);
    Py_END_ALLOW_THREADS
}

/* fork: no lock may be held by a thread that does not exist in the child */
static void fork_prepare(void) {
    pthread_mutex_lock(&reg_lock);
    pthread_mutex_lock(&str_lock);
    pthread_mutex_lock(&fl_lock);
}

static void fork_parent(void) {
    pthread_mutex_unlock(&fl_lock);
    pthread_mutex_unlock(&str_lock);
    pthread_mutex_unlock(&reg_lock);
}

static _Atomic int forked_child = 0; /* set in a child until child_reset() ran */

static void fork_child(void) {
    /* async-signal-safe work only (a fork+exec child runs this too): fresh locks, recording off;
     * the flusher thread does not exist here.  child_reset() does the rest under the GIL. */
    pthread_mutex_init(&reg_lock, NULL);
    pthread_mutex_init(&str_lock, NULL);
    pthread_mutex_init(&fl_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&fl_cond, &ca);
    pthread_condattr_destroy(&ca);
    atomic_store(&enabled, 0);
    atomic_store(&collecting, 0);
    atomic_store(&forked_child, flusher_running);
    flusher_running = 0;
}

/* ---- strings ------------------------------------------------------------------------------ */
static int queue_string(uint32_t id, const char *s, Py_ssize_t n) {
    lock_gil_safe(&str_lock);
    size_t need = str_len + 8 + (size_t)n;
    if (need > cfg_string_bytes) {
        pthread_mutex_unlock(&str_lock);
        return -1;
    }
    if (need > str_cap) {
        size_t nc = str_cap ? str_cap : 65536;
        while (nc < need) nc *= 2;
        char *nb = realloc(str_buf, nc);
        if (!nb) { pthread_mutex_unlock(&str_lock); return -1; }
        str_buf = nb;
        str_cap = nc;
    }
    uint32_t hdr[2] = {id, (uint32_t)n};
    memcpy(str_buf + str_len, hdr, 8);
    memcpy(str_buf + str_len + 8, s, (size_t)n);
    str_len = need;
    pthread_mutex_unlock(&str_lock);
    return 0;
}

/* string id of obj (0 for None); returns -1 when the string could not be queued (dropped) */
static int64_t intern(PyObject *obj) {
    if (obj == Py_None || obj == NULL) return 0;
    if (intern_dict == NULL) return -1;
    if (PyUnicode_CheckExact(obj)) {
        PyObject *v = PyDict_GetItemWithError(intern_dict, obj);
        if (v != NULL) return (int64_t)PyLong_AsUnsignedLong(v);
        if (PyErr_Occurred()) { PyErr_Clear(); return -1; }
    }
    PyObject *text = PyUnicode_Check(obj) ? (Py_INCREF(obj), obj) : PyObject_Str(obj);
    if (text == NULL) { PyErr_Clear(); return -1; }
    PyObject *raw = PyUnicode_AsEncodedString(text, "utf-8", "replace");
    if (raw == NULL) { PyErr_Clear(); Py_DECREF(text); return -1; }
    uint32_t id = next_string_id;
    int64_t out = -1;
    if (queue_string(id, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw)) == 0) {
        next_string_id = id + 1 < id ? 0x80000000u : id + 1;
        out = id;
        if ((uint64_t)PyDict_Size(intern_dict) >= cfg_string_cache) PyDict_Clear(intern_dict);
        PyObject *pid = PyLong_FromUnsignedLong(id);
        if (pid == NULL || (PyUnicode_CheckExact(obj) && PyDict_SetItem(intern_dict, obj, pid) < 0))
            PyErr_Clear();
        Py_XDECREF(pid);
    } else {
        atomic_fetch_add(&dropped_strings, 1);
    }
    Py_DECREF(raw);
    Py_DECREF(text);
    return out;
}

/* ---- rings -------------------------------------------------------------------------------- */
/* a thread's ring: the configured size, but at most half of what is left of the budget, so
 * that threads starting together all get one (sizes fall geometrically as the budget fills) */
static void ring_alloc_data(ring_t *r) {
    uint64_t n = cfg_ring_records;
    uint64_t used = atomic_load(&budget_used), left = used < cfg_budget ? cfg_budget - used : 0;
    while (n > MIN_RING && (uint64_t)n * sizeof(rec_t) > left / 2) n >>= 1;
    while (n >= MIN_RING) {
        size_t bytes = (size_t)n * sizeof(rec_t);
        uint64_t used = atomic_fetch_add(&budget_used, bytes);
        if (used + bytes <= cfg_budget) {
            rec_t *d = malloc(bytes);
            if (d) {
                r->data = d; r->cap = n; r->mask = n - 1; r->bytes = bytes;
                return;
            }
        }
        atomic_fetch_sub(&budget_used, bytes);
        n >>= 1;
    }
}

static ring_t *new_ring(void) {
    ring_t *r = calloc(1, sizeof(ring_t));
    if (r == NULL) return NULL;
    r->tid = (uint32_t)syscall(SYS_gettid);
    lock_gil_safe(&reg_lock);
    r->next = rings;
    rings = r;
    pthread_mutex_unlock(&reg_lock);
    pthread_setspecific(exit_key, r);
    tls_ring = r;
    return r;
}

static inline void put_rec(ring_t *r, int kind, int aux, int64_t t0, int64_t t1, uint32_t a, uint32_t b) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (h - t >= r->cap) {
        int k = kind < NKINDS ? kind : 0;
        atomic_store_explicit(&r->drops[k], atomic_load_explicit(&r->drops[k], memory_order_relaxed) + 1,
                              memory_order_relaxed);
        atomic_store_explicit(&r->why[WHY_FULL], atomic_load_explicit(&r->why[WHY_FULL], memory_order_relaxed) + 1,
                              memory_order_relaxed);
        pthread_cond_signal(&fl_cond);
        return;
    }
    rec_t *rec = &r->data[h & r->mask];
    rec->kind = (uint8_t)kind; rec->flags = 0; rec->aux = (uint16_t)aux; rec->tid = r->tid;
    rec->t0 = t0; rec->t1 = t1; rec->a = a; rec->b = b;
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    /* a quarter and half full: wake the flusher now (a cheap no-op without waiters) */
    uint64_t fill = h + 1 - t;
    if (fill == (r->cap >> 2) || fill == (r->cap >> 1)) pthread_cond_signal(&fl_cond);
}

static ring_t *my_ring(void) {
    ring_t *r = tls_ring;
    if (r == NULL) r = new_ring();
    if (r == NULL) return NULL;
    if (r->data == NULL && r->cap == 0) {
        ring_alloc_data(r);
        if (r->data && thread_name_fn && !r->thread_written) {
            PyObject *name = PyObject_CallNoArgs(thread_name_fn);
            int64_t id = 0;
            if (name != NULL) { id = intern(name); Py_DECREF(name); } else PyErr_Clear();
            r->thread_written = 1;
            put_rec(r, 11, 0, 0, 0, id > 0 ? (uint32_t)id : 0, 0);
        }
    }
    return r;
}

static inline void drop(ring_t *r, int kind, int why) {
    atomic_store_explicit(&r->drops[kind], atomic_load_explicit(&r->drops[kind], memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&r->why[why], atomic_load_explicit(&r->why[why], memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static void emit(int kind, int64_t ts, int64_t t1, PyObject *msg, PyObject *domain) {
    ring_t *r = my_ring();
    if (r == NULL) return;
    if (r->data == NULL) { drop(r, kind, WHY_NO_MEMORY); return; }
    int64_t a = msg ? intern(msg) : 0, b = domain ? intern(domain) : 0;
    if (a < 0 || b < 0) { drop(r, kind, WHY_STRINGS); return; }
    put_rec(r, kind, 0, ts, t1, (uint32_t)a, (uint32_t)b);
}

/* ---- domain filter ---------------------------------------------------------------------- */
/* 1 when a marker of domain dom (None: "default") is filtered out by the session's filter */
static inline unsigned skip_slot(PyObject *o) { return (unsigned)((uintptr_t)o >> 4) & (SKIP_SLOTS - 1); }

static void skip_cache_clear(void) {
    for (int i = 0; i < SKIP_SLOTS; i++) Py_CLEAR(skip_cache[i]);
}

/* the producers' first test while a filter is on, before any argument parsing: 1 when the call
 * is surely filtered out (positional arguments; a domain the filter already skipped, or none
 * and the default domain is skipped); 0: parse, then dom_skip */
static inline int fast_skip(PyObject *const *args, Py_ssize_t n, PyObject *kw) {
    if (kw != NULL) return 0;
    Py_ssize_t na = PyVectorcall_NARGS(n);
    if (na == 2) {
        PyObject *d = args[1];
        return d == Py_None ? skip_default : skip_cache[skip_slot(d)] == d;
    }
    return na == 1 && skip_default;
}

static int dom_skip(PyObject *dom) {
    if (dom == NULL || dom == Py_None) return skip_default;
    unsigned slot = skip_slot(dom);
    if (skip_cache[slot] == dom) return 1;
    PyObject *d = dom;
    int in;
    if (PyUnicode_CheckExact(d)) in = PySet_Contains(dom_set, d);
    else {
        PyObject *text = PyObject_Str(d);
        in = text ? PySet_Contains(dom_set, text) : -1;
        Py_XDECREF(text);
    }
    if (in < 0) { PyErr_Clear(); in = 0; }
    int skip = dom_mode == 1 ? !in : in;
    if (skip && PyUnicode_CheckExact(dom)) { /* remembered (a str's dealloc runs no Python code) */
        Py_INCREF(dom);
        Py_XSETREF(skip_cache[slot], dom);
    }
    return skip;
}

/* a push: remember whether it was filtered out, so that its pop is too */
static int push_skip(PyObject *dom) {
    if (skip_gen != dom_gen) { skip_gen = dom_gen; skip_depth = 0; }
    int skip = dom_skip(dom);
    if (skip_depth < 256) {
        uint64_t bit = 1ull << (skip_depth & 63);
        if (skip) skip_stack[skip_depth >> 6] |= bit; else skip_stack[skip_depth >> 6] &= ~bit;
    } else skip = 0; /* deeper than 256: recorded, so that push and pop stay paired */
    skip_depth++;
    return skip;
}

static int pop_skip(void) {
    if (skip_gen != dom_gen) { skip_gen = dom_gen; skip_depth = 0; }
    if (skip_depth == 0) return 0;
    skip_depth--;
    return skip_depth < 256 && (skip_stack[skip_depth >> 6] >> (skip_depth & 63)) & 1;
}

/* ---- producers (METH_FASTCALL) ------------------------------------------------------------ */
static int msg_args(PyObject *const *args, Py_ssize_t n, PyObject *kw, PyObject **msg, PyObject **dom) {
    static const char *names[] = {"message", "domain"};
    *msg = NULL; *dom = Py_None;
    Py_ssize_t nkw = kw ? PyTuple_GET_SIZE(kw) : 0;
    if (n + nkw < 1 || n + nkw > 2 || n > 2) {
        PyErr_SetString(PyExc_TypeError, "expected (message, domain=None)");
        return -1;
    }
    if (n >= 1) *msg = args[0];
    if (n == 2) *dom = args[1];
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *k = PyTuple_GET_ITEM(kw, i);
        int which = -1;
        for (int j = 0; j < 2; j++)
            if (PyUnicode_CompareWithASCIIString(k, names[j]) == 0) which = j;
        if (which < 0 || (which == 0 && n >= 1) || (which == 1 && n == 2)) {
            PyErr_SetString(PyExc_TypeError, "expected (message, domain=None)");
            return -1;
        }
        if (which == 0) *msg = args[n + i]; else *dom = args[n + i];
    }
    if (*msg == NULL) { PyErr_SetString(PyExc_TypeError, "message is required"); return -1; }
    return 0;
}

static PyObject *py_mark(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw) {
    if (!atomic_load_explicit(&enabled, memory_order_relaxed) || (dom_mode && fast_skip(args, n, kw)))
        Py_RETURN_NONE;
    PyObject *msg, *dom;
    if (msg_args(args, PyVectorcall_NARGS(n), kw, &msg, &dom) < 0) return NULL;
    if (dom_mode && dom_skip(dom)) Py_RETURN_NONE;
    int64_t ts = mono_ns();
    emit(1, ts, ts, msg, dom);
    Py_RETURN_NONE;
}

static PyObject *py_push(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw) {
    if (!atomic_load_explicit(&enabled, memory_order_relaxed)) Py_RETURN_NONE;
    PyObject *msg, *dom;
    if (msg_args(args, PyVectorcall_NARGS(n), kw, &msg, &dom) < 0) return NULL;
    if (dom_mode && push_skip(dom)) Py_RETURN_NONE;
    int64_t ts = mono_ns();
    emit(2, ts, ts, msg, dom);
    Py_RETURN_NONE;
}

static PyObject *py_pop(PyObject *self, PyObject *unused) {
    if (!atomic_load_explicit(&enabled, memory_order_relaxed)) Py_RETURN_NONE;
    if (dom_mode && pop_skip()) Py_RETURN_NONE;
    int64_t ts = mono_ns();
    emit(3, ts, ts, NULL, NULL);
    Py_RETURN_NONE;
}

static PyObject *py_range_start(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw) {
    if (!atomic_load_explicit(&enabled, memory_order_relaxed) || (dom_mode && fast_skip(args, n, kw)))
        return PyLong_FromLong(0);
    PyObject *msg, *dom;
    if (msg_args(args, PyVectorcall_NARGS(n), kw, &msg, &dom) < 0) return NULL;
    if (dom_mode && dom_skip(dom)) return PyLong_FromLong(0);
    uint64_t rid = ++range_ids;
    emit(4, mono_ns(), (int64_t)rid, msg, dom);
    return PyLong_FromUnsignedLongLong(rid);
}

static PyObject *py_range_end(PyObject *self, PyObject *arg) {
    if (!atomic_load_explicit(&enabled, memory_order_relaxed)) Py_RETURN_NONE;
    long long rid = PyLong_Check(arg) ? PyLong_AsLongLong(arg) : 0;
    if (rid == -1 && PyErr_Occurred()) { PyErr_Clear(); rid = 0; }
    if (rid > 0) emit(5, mono_ns(), rid, NULL, NULL);
    Py_RETURN_NONE;
}

/* int64 of args[i] or 0 (a bad argument is a dropped record, never an exception) */
static int int_arg(PyObject *o, long long *out) {
    if (!PyLong_Check(o)) return -1;
    *out = PyLong_AsLongLong(o);
    if (*out == -1 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
    return 0;
}

/* api(name, level_code, t0, t1, connection_id): an API span of the calling thread (kind 6) */
static PyObject *py_api(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (!atomic_load_explicit(&collecting, memory_order_relaxed)) Py_RETURN_NONE;
    ring_t *r = my_ring();
    if (r == NULL) Py_RETURN_NONE;
    long long level, t0, t1, conn;
    if (n != 5 || r->data == NULL || int_arg(args[1], &level) || int_arg(args[2], &t0) ||
        int_arg(args[3], &t1) || int_arg(args[4], &conn) || level < 0 || level > 0xFFFF) {
        drop(r, 6, r->data == NULL ? WHY_NO_MEMORY : WHY_BAD_ARGS);
        Py_RETURN_NONE;
    }
    int64_t a = intern(args[0]);
    if (a < 0) { drop(r, 6, WHY_STRINGS); Py_RETURN_NONE; }
    put_rec(r, 6, (int)level, t0, t1, (uint32_t)a, (uint32_t)(conn & 0xFFFFFFFF));
    Py_RETURN_NONE;
}

/* step_range(t0, t1, step_number): a whole framework step (kind 12) */
static PyObject *py_step_range(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (!atomic_load_explicit(&collecting, memory_order_relaxed)) Py_RETURN_NONE;
    ring_t *r = my_ring();
    if (r == NULL) Py_RETURN_NONE;
    long long t0, t1, step;
    if (n != 3 || r->data == NULL || int_arg(args[0], &t0) || int_arg(args[1], &t1) || int_arg(args[2], &step)) {
        drop(r, 12, r->data == NULL ? WHY_NO_MEMORY : WHY_BAD_ARGS);
        Py_RETURN_NONE;
    }
    put_rec(r, 12, 0, t0, t1, (uint32_t)(step & 0xFFFFFFFF), 0);
    Py_RETURN_NONE;
}

/* ---- flusher ------------------------------------------------------------------------------ */
static int write_full(int fd, struct iovec *iov, int cnt) {
    while (cnt > 0) {
        ssize_t w = writev(fd, iov, cnt);
        if (w < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        while (cnt > 0 && (size_t)w >= iov->iov_len) { w -= (ssize_t)iov->iov_len; iov++; cnt--; }
        if (cnt > 0) { iov->iov_base = (char *)iov->iov_base + w; iov->iov_len -= (size_t)w; }
    }
    return 0;
}

static void halt(int code, int err) {
    int zero = 0;
    if (atomic_compare_exchange_strong(&halt_code, &zero, code)) atomic_store(&halt_errno, err);
    atomic_store(&enabled, 0);
    atomic_store(&collecting, 0);
}

static void slice_close(slice_t *s) {
    if (s->fd < 0) return;
    close(s->fd);
    s->fd = -1;
    char name[160];
    snprintf(name, sizeof name, "%s.%s.%s.slice_%d.done", s->source, s->kind, dev_name, s->index);
    int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
    if (fd >= 0) { fchmod(fd, 0640); close(fd); }
}

static int slice_open(slice_t *s) {
    slice_close(s);
    s->index++;
    char name[160];
    snprintf(name, sizeof name, "%s.%s.%s.slice_%d", s->source, s->kind, dev_name, s->index);
    int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0) return errno;
    fchmod(fd, 0640);
    unsigned char hdr[HEADER_SIZE] = {0};
    memcpy(hdr, s->magic, 8);
    hdr[8] = (unsigned char)s->version;
    hdr[10] = 32; /* record size */
    struct iovec iov = {hdr, HEADER_SIZE};
    int err = write_full(fd, &iov, 1);
    if (err) { close(fd); return err; }
    s->fd = fd;
    s->size = HEADER_SIZE;
    atomic_fetch_add(&bytes_written, HEADER_SIZE);
    return 0;
}

static int slice_write(slice_t *s, struct iovec *iov, int cnt, size_t total) {
    if (s->fd < 0 || (s->size + total > SLICE_BYTES && s->size > HEADER_SIZE)) {
        int err = slice_open(s);
        if (err) return err;
    }
    int err = write_full(s->fd, iov, cnt);
    if (err) return err;
    s->size += total;
    atomic_fetch_add(&bytes_written, total);
    return 0;
}

static uint64_t since_check = 0;

static int space_ok(size_t incoming) {
    uint64_t total = atomic_load(&bytes_written) + incoming;
    if (max_bytes && total > max_bytes) { halt(2, 0); return 0; }
    since_check += incoming;
    if (floor_bytes && since_check >= check_every) {
        since_check = 0;
        struct statvfs st;
        if (fstatvfs(dir_fd, &st) == 0) {
            uint64_t free_b = (uint64_t)st.f_bavail * st.f_frsize;
            if (free_b < floor_bytes + incoming) { halt(1, 0); return 0; }
        }
    }
    return 1;
}

/* one cycle; returns the largest ring fill seen (records).  reg_lock is held only to take a
 * snapshot of the ring list and, after the writes, to free the rings of finished threads: never
 * across I/O.  Rings are freed only here and by start/stop/child_reset while no flusher runs, so
 * the snapshot's pointers stay valid through the writes. */
typedef struct { ring_t *r; uint64_t head; } snap_t;
static snap_t *snap = NULL;
static size_t snap_cap = 0;

/* records [from, to) of ``r`` that collection halted before they were written: lost, counted per kind */
static void count_lost(ring_t *r, uint64_t from, uint64_t to) {
    for (uint64_t j = from; j != to; j++) {
        int k = r->data[j & r->mask].kind;
        if (k != 11) atomic_fetch_add(&r->lost[k < NKINDS ? k : 0], 1); /* 11: thread name */
    }
}

/* The ``n`` records of ``r`` from ``t`` as packed blocks (_pack.h), about PK_FILL bytes a write;
 * the ring's tail follows each write, so the producer gets its space back as the backlog goes
 * out.  Returns how many were written: fewer when collection halts (the caller counts the rest
 * as lost). */
#define PK_MAX_BLOCKS 64 /* blocks a write (a full block is >= 32 KB: ~32 fill PK_FILL) */
static uint64_t write_packed(ring_t *r, uint64_t t, uint64_t n) {
    uint64_t done = 0;
    while (done < n && atomic_load(&halt_code) == 0) {
        size_t len = 0, ends[PK_MAX_BLOCKS];
        uint64_t take = 0, upto[PK_MAX_BLOCKS];
        int nb = 0, last = 0;
        while (done + take < n && len < PK_FILL && nb < PK_MAX_BLOCKS) {
            uint64_t pos = (t + done + take) & r->mask, run = n - done - take;
            if (run > r->cap - pos) run = r->cap - pos;
            if (run > PACK_BLOCK_RECORDS) run = PACK_BLOCK_RECORDS;
            len += pack_block((const unsigned char *)&r->data[pos], (size_t)run, pk_buf + len);
            take += run;
            ends[nb] = len; upto[nb] = take; nb++;
        }
        if (max_bytes) { /* the storage limit: the blocks that fit under it are written, then it halts */
            uint64_t bw = atomic_load(&bytes_written) + (rec_slice.fd < 0 ? HEADER_SIZE : 0);
            if (bw + len > max_bytes) {
                int k = 0;
                while (k < nb && bw + ends[k] <= max_bytes) k++;
                if (k == 0) { halt(2, 0); break; }
                len = ends[k - 1]; take = upto[k - 1]; last = 1;
            }
        }
        if (!space_ok(len)) break;
        struct iovec iov = {pk_buf, len};
        int err = slice_write(&rec_slice, &iov, 1, len);
        if (err) { halt(3, err); break; }
        atomic_fetch_add(&records_written, take);
        uint64_t nw = (uint64_t)r->data[(t + done + take - 1) & r->mask].t0;
        if (nw > atomic_load(&newest_written_ns)) atomic_store(&newest_written_ns, nw);
        done += take;
        atomic_store_explicit(&r->tail, t + done, memory_order_release);
        if (last) { halt(2, 0); break; }
    }
    return done;
}

static uint64_t drain_once(int final) {
    uint64_t most = 0;
    pthread_mutex_lock(&reg_lock);
    size_t n_rings = 0;
    for (ring_t *r = rings; r; r = r->next) n_rings++;
    if (n_rings > snap_cap) {
        size_t nc = snap_cap ? snap_cap : 64;
        while (nc < n_rings) nc *= 2;
        snap_t *ns = realloc(snap, nc * sizeof(snap_t));
        if (ns) { snap = ns; snap_cap = nc; }
    }
    if (n_rings > snap_cap) n_rings = snap_cap; /* no memory for a larger snapshot: the rest next cycle */
    size_t i = 0;
    /* heads first, then the strings: every string those records use is already queued */
    for (ring_t *r = rings; r && i < n_rings; r = r->next, i++) {
        snap[i].r = r;
        snap[i].head = atomic_load_explicit(&r->head, memory_order_acquire);
    }
    pthread_mutex_lock(&str_lock);
    char *sb = str_buf; size_t sl = str_len;
    str_buf = NULL; str_len = 0; str_cap = 0;
    pthread_mutex_unlock(&str_lock);
    pthread_mutex_unlock(&reg_lock);

    int stopped = atomic_load(&halt_code) != 0;
    if (sl && !stopped && space_ok(sl)) {
        struct iovec iov = {sb, sl};
        int err = slice_write(&str_slice, &iov, 1, sl);
        if (err) halt(3, err);
    }
    free(sb);
    int dead_seen = 0;
    for (i = 0; i < n_rings; i++) {
        ring_t *r = snap[i].r;
        uint64_t h = snap[i].head, t = atomic_load_explicit(&r->tail, memory_order_relaxed);
        uint64_t n = h - t;
        if (n > most) most = n;
        if (n && pk_buf != NULL) {
            t += write_packed(r, t, n);
            count_lost(r, t, h);
            atomic_store_explicit(&r->tail, h, memory_order_release);
        } else if (n) {
            if (atomic_load(&halt_code) == 0 && space_ok(n * sizeof(rec_t))) {
                uint64_t start = t & r->mask, first = r->cap - start < n ? r->cap - start : n;
                struct iovec iov[2] = {{&r->data[start], first * sizeof(rec_t)},
                                       {&r->data[0], (n - first) * sizeof(rec_t)}};
                int err = slice_write(&rec_slice, iov, n > first ? 2 : 1, n * sizeof(rec_t));
                if (err) { halt(3, err); count_lost(r, t, h); }
                else {
                    atomic_fetch_add(&records_written, n);
                    uint64_t nw = (uint64_t)r->data[(h - 1) & r->mask].t0;
                    if (nw > atomic_load(&newest_written_ns)) atomic_store(&newest_written_ns, nw);
                }
            } else {
                count_lost(r, t, h); /* collection halted: what was buffered is lost, counted per kind */
            }
            atomic_store_explicit(&r->tail, h, memory_order_release);
        }
        dead_seen |= atomic_load_explicit(&r->dead, memory_order_acquire);
    }
    if (dead_seen) {
        /* finished threads, drained: give their memory back; keep counts only if they dropped */
        pthread_mutex_lock(&reg_lock);
        ring_t **link = &rings;
        for (ring_t *r = rings; r;) {
            ring_t *next = r->next;
            if (atomic_load_explicit(&r->dead, memory_order_acquire) &&
                atomic_load_explicit(&r->head, memory_order_acquire) == atomic_load(&r->tail)) {
                if (r->data) { free(r->data); atomic_fetch_sub(&budget_used, r->bytes); r->data = NULL; }
                int any = 0;
                for (int k = 0; k < NKINDS; k++) any |= (atomic_load(&r->drops[k]) | atomic_load(&r->lost[k])) != 0;
                if (!any) { *link = next; free(r); r = next; continue; }
            }
            link = &r->next;
            r = next;
        }
        pthread_mutex_unlock(&reg_lock);
    }
    (void)final;
    return most;
}

static void *flusher_main(void *arg) {
    (void)arg;
    struct timespec c0, c1;
    for (;;) {
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        uint64_t most = drain_once(0);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        atomic_fetch_add(&flusher_cpu_ns, (uint64_t)((c1.tv_sec - c0.tv_sec) * 1000000000LL + (c1.tv_nsec - c0.tv_nsec)));
        /* a busy ring: come back soon; producers also wake us at half full */
        uint64_t wait = most > cfg_ring_records / 8 ? 1000000ull : interval_ns;
        pthread_mutex_lock(&fl_lock);
        if (fl_stop) { pthread_mutex_unlock(&fl_lock); break; }
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        uint64_t ns = (uint64_t)dl.tv_nsec + wait;
        dl.tv_sec += (time_t)(ns / 1000000000ull);
        dl.tv_nsec = (long)(ns % 1000000000ull);
        while (!fl_stop && pthread_cond_timedwait(&fl_cond, &fl_lock, &dl) == EINTR) {}
        int stop = fl_stop;
        pthread_mutex_unlock(&fl_lock);
        if (stop) break;
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    drain_once(1);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    atomic_fetch_add(&flusher_cpu_ns, (uint64_t)((c1.tv_sec - c0.tv_sec) * 1000000000LL + (c1.tv_nsec - c0.tv_nsec)));
    return NULL;
}

/* ---- control ------------------------------------------------------------------------------ */
static PyObject *py_configure(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"ring_records", "memory_bytes", "string_bytes", "thread_name", "packed", NULL};
    unsigned long long rr = cfg_ring_records, mb = cfg_budget + cfg_string_bytes, sb = cfg_string_bytes;
    PyObject *fn = NULL;
    int packed = cfg_packed;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|KKKOp", kwlist, &rr, &mb, &sb, &fn, &packed)) return NULL;
    if (flusher_running) { PyErr_SetString(PyExc_RuntimeError, "recorder is running"); return NULL; }
    uint64_t p = MIN_RING;
    while (p < rr && p < (1ull << 26)) p <<= 1;
    if (sb >= mb) { PyErr_SetString(PyExc_ValueError, "string_bytes must be below memory_bytes"); return NULL; }
    cfg_ring_records = p;
    cfg_budget = mb - sb;
    cfg_string_bytes = sb;
    cfg_packed = packed;
    if (fn != NULL) { Py_XDECREF(thread_name_fn); Py_INCREF(fn); thread_name_fn = fn; }
    Py_RETURN_NONE;
}

static void free_pk_buf(void) {
    if (pk_buf == NULL) return;
    free(pk_buf);
    pk_buf = NULL;
    atomic_fetch_sub(&budget_used, PK_BUF_BYTES);
}

static PyObject *py_start(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dir_fd", "dev", "interval_ns", "floor_bytes", "max_bytes", NULL};
    int fd;
    const char *dev = "host";
    unsigned long long iv = 200000000ull, fb = 0, mxb = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|sKKK", kwlist, &fd, &dev, &iv, &fb, &mxb)) return NULL;
    if (flusher_running) { PyErr_SetString(PyExc_RuntimeError, "recorder is already running"); return NULL; }
    int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (nfd < 0) return PyErr_SetFromErrno(PyExc_OSError);
    dir_fd = nfd;
    snprintf(dev_name, sizeof dev_name, "%s", dev);
    interval_ns = iv ? iv : 200000000ull;
    floor_bytes = fb; max_bytes = mxb; since_check = check_every; /* check at the first write */
    rec_slice.fd = str_slice.fd = -1;
    rec_slice.index = str_slice.index = -1;
    atomic_store(&records_written, 0); atomic_store(&bytes_written, 0);
    atomic_store(&flusher_cpu_ns, 0); atomic_store(&newest_written_ns, 0);
    atomic_store(&dropped_strings, 0); atomic_store(&halt_code, 0); atomic_store(&halt_errno, 0);
    /* forget rings of the previous session (their threads re-register lazily) */
    lock_gil_safe(&reg_lock);
    ring_t **link = &rings;
    for (ring_t *r = rings; r;) {
        ring_t *next = r->next;
        if (atomic_load(&r->dead)) { *link = next; free(r->data); free(r); r = next; continue; }
        atomic_store(&r->head, 0); atomic_store(&r->tail, 0);
        for (int k = 0; k < NKINDS; k++) { atomic_store(&r->drops[k], 0); atomic_store(&r->lost[k], 0); }
        for (int w = 0; w < NWHY; w++) atomic_store(&r->why[w], 0);
        r->thread_written = 0;
        link = &r->next;
        r = next;
    }
    pthread_mutex_unlock(&reg_lock);
    if (intern_dict) PyDict_Clear(intern_dict);
    next_string_id = 0x80000000u; /* each job's table numbers densely from the base */
    /* the packed path's staging buffer, from the budget; without one (no memory, or the budget
     * too small to spare it) this session writes fixed records */
    pk_buf = NULL;
    if (cfg_packed && (uint64_t)PK_BUF_BYTES * 4 <= cfg_budget) {
        pk_buf = malloc(PK_BUF_BYTES);
        if (pk_buf) atomic_fetch_add(&budget_used, PK_BUF_BYTES);
    }
    rec_slice.version = pk_buf ? 2 : 1;
    fl_stop = 0;
    if (pthread_create(&flusher, NULL, flusher_main, NULL) != 0) {
        free_pk_buf();
        close(dir_fd); dir_fd = -1;
        PyErr_SetString(PyExc_OSError, "cannot start the native flusher thread");
        return NULL;
    }
    flusher_running = 1;
    atomic_store(&collecting, 1);
    Py_RETURN_NONE;
}

static PyObject *py_set_enabled(PyObject *self, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    atomic_store(&enabled, on && flusher_running && atomic_load(&halt_code) == 0);
    Py_RETURN_NONE;
}

typedef struct { uint32_t tid; int kind; uint64_t n; } droprow_t;

/* Counters of the running or last session.  reg_lock is taken with the GIL released when busy,
 * and no Python object is made while it is held (a finaliser run by an allocation could mark). */
static PyObject *stats_dict(void) {
    uint64_t total = 0, why[NWHY] = {0}, lost = 0;
    droprow_t *rows = NULL;
    size_t nrows = 0, cap = 0;
    lock_gil_safe(&reg_lock);
    for (ring_t *r = rings; r; r = r->next) {
        for (int w = 0; w < NWHY; w++) why[w] += atomic_load(&r->why[w]);
        for (int k = 1; k < NKINDS; k++) {
            uint64_t l = atomic_load(&r->lost[k]), n = atomic_load(&r->drops[k]) + l;
            if (!n) continue;
            lost += l;
            total += n;
            if (nrows == cap) {
                size_t nc = cap ? cap * 2 : 64;
                droprow_t *nr = realloc(rows, nc * sizeof(droprow_t));
                if (!nr) continue; /* counted in the total, left out of the rows */
                rows = nr; cap = nc;
            }
            rows[nrows].tid = r->tid; rows[nrows].kind = k; rows[nrows].n = n;
            nrows++;
        }
    }
    pthread_mutex_unlock(&reg_lock);
    PyObject *drops = PyList_New(0);
    for (size_t i = 0; drops && i < nrows; i++) {
        PyObject *t = Py_BuildValue("(IiK)", rows[i].tid, rows[i].kind, (unsigned long long)rows[i].n);
        if (t) { PyList_Append(drops, t); Py_DECREF(t); } else PyErr_Clear();
    }
    free(rows);
    if (drops == NULL) return NULL;
    PyObject *reasons = PyDict_New();
    if (reasons == NULL) { Py_DECREF(drops); return NULL; }
    for (int w = 0; w < NWHY; w++) {
        if (!why[w]) continue;
        PyObject *v = PyLong_FromUnsignedLongLong(why[w]);
        if (v) { PyDict_SetItemString(reasons, why_names[w], v); Py_DECREF(v); }
    }
    if (lost) {
        PyObject *v = PyLong_FromUnsignedLongLong(lost);
        if (v) { PyDict_SetItemString(reasons, "collection_halted", v); Py_DECREF(v); }
    }
    return Py_BuildValue("{sKsKsKsNsNsKsKsisisKsK}", "records_written", (unsigned long long)atomic_load(&records_written),
                         "bytes_written", (unsigned long long)atomic_load(&bytes_written),
                         "records_dropped", (unsigned long long)total, "drops", drops, "drop_reasons", reasons,
                         "flusher_cpu_ns", (unsigned long long)atomic_load(&flusher_cpu_ns),
                         "newest_written_ns", (unsigned long long)atomic_load(&newest_written_ns),
                         "halt", atomic_load(&halt_code), "halt_errno", atomic_load(&halt_errno),
                         "memory_bytes", (unsigned long long)atomic_load(&budget_used),
                         "ring_records", (unsigned long long)cfg_ring_records);
}

static PyObject *py_stats(PyObject *self, PyObject *unused) { return stats_dict(); }

static PyObject *py_stop(PyObject *self, PyObject *unused) {
    atomic_store(&enabled, 0);
    atomic_store(&collecting, 0);
    if (!flusher_running) return stats_dict();
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&fl_lock);
    fl_stop = 1;
    pthread_cond_signal(&fl_cond);
    pthread_mutex_unlock(&fl_lock);
    pthread_join(flusher, NULL);
    Py_END_ALLOW_THREADS
    flusher_running = 0;
    free_pk_buf();
    slice_close(&rec_slice);
    slice_close(&str_slice);
    PyObject *st = stats_dict();
    /* release ring memory: producers are off (checked under the GIL we hold) */
    lock_gil_safe(&reg_lock);
    for (ring_t *r = rings; r; r = r->next)
        if (r->data) { free(r->data); atomic_fetch_sub(&budget_used, r->bytes); r->data = NULL; r->cap = 0; }
    pthread_mutex_unlock(&reg_lock);
    if (intern_dict) PyDict_Clear(intern_dict);
    close(dir_fd);
    dir_fd = -1;
    return st;
}

/* set_domains(mode, names): 0 no filter, 1 record only domains in names, 2 all but those
 * ("default" names the domain of a marker given none) */
static PyObject *py_set_domains(PyObject *self, PyObject *args) {
    int mode;
    PyObject *names;
    if (!PyArg_ParseTuple(args, "iO", &mode, &names)) return NULL;
    if (mode < 0 || mode > 2) { PyErr_SetString(PyExc_ValueError, "mode must be 0, 1 or 2"); return NULL; }
    PyObject *set = PyFrozenSet_New(names);
    if (set == NULL) return NULL;
    Py_XSETREF(dom_set, set);
    skip_cache_clear();
    dom_mode = mode;
    int in = mode ? PySet_Contains(dom_set, default_dom) : 0;
    if (in < 0) { PyErr_Clear(); in = 0; }
    skip_default = mode == 1 ? !in : mode == 2 ? in : 0;
    dom_gen++;
    Py_RETURN_NONE;
}

/* In a child after os.fork() (the session's at-fork hook, under the GIL): forget everything the
 * parent had buffered (the parent writes it; a copy written here would be a duplicate), the
 * parent's open files and its threads' rings.  Recording stays off until start() again. */
static PyObject *py_child_reset(PyObject *self, PyObject *unused) {
    atomic_store(&enabled, 0);
    atomic_store(&collecting, 0);
    flusher_running = 0;
    fl_stop = 0;
    ring_t *mine = tls_ring;
    pthread_mutex_lock(&reg_lock); /* fresh since the fork: no other thread can hold it yet */
    for (ring_t *r = rings; r;) {
        ring_t *next = r->next;
        free(r->data);
        if (r != mine) free(r);
        r = next;
    }
    rings = NULL;
    free(pk_buf); /* the parent's staging buffer (no flusher here uses it) */
    pk_buf = NULL;
    atomic_store(&budget_used, 0);
    if (mine) {
        memset(mine, 0, sizeof *mine);
        mine->tid = (uint32_t)syscall(SYS_gettid);
        mine->next = NULL;
        rings = mine;
        pthread_setspecific(exit_key, mine);
    }
    pthread_mutex_unlock(&reg_lock);
    pthread_mutex_lock(&str_lock);
    free(str_buf);
    str_buf = NULL; str_len = 0; str_cap = 0;
    pthread_mutex_unlock(&str_lock);
    if (intern_dict) PyDict_Clear(intern_dict);
    next_string_id = 0x80000000u;
    if (rec_slice.fd >= 0) close(rec_slice.fd); /* the parent's files: no .done marker from here */
    if (str_slice.fd >= 0) close(str_slice.fd);
    rec_slice.fd = str_slice.fd = -1;
    if (dir_fd >= 0) close(dir_fd);
    dir_fd = -1;
    atomic_store(&records_written, 0); atomic_store(&bytes_written, 0);
    atomic_store(&flusher_cpu_ns, 0); atomic_store(&newest_written_ns, 0);
    atomic_store(&dropped_strings, 0); atomic_store(&halt_code, 0); atomic_store(&halt_errno, 0);
    atomic_store(&forked_child, 0);
    Py_RETURN_NONE;
}

/* pack_records(data): ``data`` (whole 32-byte records) as the flusher writes it, packed blocks of
 * PACK_BLOCK_RECORDS (for tests and tools; the GIL is released while encoding) */
static PyObject *py_pack_records(PyObject *self, PyObject *arg) {
    Py_buffer in;
    if (PyObject_GetBuffer(arg, &in, PyBUF_SIMPLE) < 0) return NULL;
    if (in.len % 32 != 0) {
        PyBuffer_Release(&in);
        PyErr_SetString(PyExc_ValueError, "pack_records: length must be a multiple of 32");
        return NULL;
    }
    size_t n = (size_t)in.len / 32, blocks = (n + PACK_BLOCK_RECORDS - 1) / PACK_BLOCK_RECORDS;
    if (n > (SIZE_MAX - blocks * PACK_BLOCK_HEADER) / PACK_MAX_RECORD) {
        PyBuffer_Release(&in);
        return PyErr_NoMemory();
    }
    size_t cap = n * PACK_MAX_RECORD + blocks * PACK_BLOCK_HEADER;
    uint8_t *out = malloc(cap ? cap : 1);
    if (out == NULL) { PyBuffer_Release(&in); return PyErr_NoMemory(); }
    size_t len = 0;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i += PACK_BLOCK_RECORDS) {
        size_t run = n - i < PACK_BLOCK_RECORDS ? n - i : PACK_BLOCK_RECORDS;
        len += pack_block((const unsigned char *)in.buf + i * 32, run, out + len);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    PyObject *res = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)len);
    free(out);
    return res;
}

/* unpack_blocks(data): (records, consumed, bad_blocks, bad_records, unframed) of the whole packed
 * blocks at the front of ``data``: their good records as 32-byte records (bytes), the bytes
 * taken, the damaged blocks and their records (skipped), and whether a header no encoder writes
 * stopped the reading (recorder/packed_read.py: the same result in numpy) */
static PyObject *py_unpack_blocks(PyObject *self, PyObject *arg) {
    Py_buffer in;
    if (PyObject_GetBuffer(arg, &in, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *buf = (const uint8_t *)in.buf;
    size_t size = (size_t)in.len, pos = 0, total = 0;
    int unframed = 0;
    while (pos + PACK_BLOCK_HEADER <= size) { /* frame first: the output's size */
        uint32_t n = unpack_u32le(buf + pos), plen = unpack_u32le(buf + pos + 4);
        if (unpack_header_bad(n, plen)) { unframed = 1; break; }
        if (plen > size - pos - PACK_BLOCK_HEADER) break;
        total += n;
        pos += PACK_BLOCK_HEADER + plen;
    }
    size_t consumed = pos;
    PyObject *res = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(total * 32));
    if (res == NULL) { PyBuffer_Release(&in); return NULL; }
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(res);
    size_t good = 0;
    unsigned long long bad_blocks = 0, bad_records = 0;
    Py_BEGIN_ALLOW_THREADS
    for (pos = 0; pos < consumed;) {
        uint32_t n = unpack_u32le(buf + pos), plen = unpack_u32le(buf + pos + 4);
        if (unpack_block(buf + pos + PACK_BLOCK_HEADER, plen, n, out + good * 32)) good += n;
        else { bad_blocks++; bad_records += n; }
        pos += PACK_BLOCK_HEADER + plen;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    if (good != total && _PyBytes_Resize(&res, (Py_ssize_t)(good * 32)) < 0) return NULL;
    return Py_BuildValue("(NnKKO)", res, (Py_ssize_t)consumed, bad_blocks, bad_records,
                         unframed ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"unpack_blocks", py_unpack_blocks, METH_O,
     "unpack_blocks(data): (records, consumed, bad_blocks, bad_records, unframed) of packed blocks."},
    {"pack_records", py_pack_records, METH_O, "pack_records(data): whole 32-byte records as packed blocks."},
    {"mark", (PyCFunction)(void (*)(void))py_mark, METH_FASTCALL | METH_KEYWORDS, "Instant marker."},
    {"push", (PyCFunction)(void (*)(void))py_push, METH_FASTCALL | METH_KEYWORDS, "Open a same-thread range."},
    {"pop", py_pop, METH_NOARGS, "Close the innermost same-thread range."},
    {"range_start", (PyCFunction)(void (*)(void))py_range_start, METH_FASTCALL | METH_KEYWORDS,
     "Open a range that may end on another thread; returns its id (0 when off)."},
    {"range_end", py_range_end, METH_O, "Close a range opened by range_start."},
    {"api", (PyCFunction)(void (*)(void))py_api, METH_FASTCALL,
     "api(name, level_code, t0, t1, connection_id): an API span of the calling thread."},
    {"step_range", (PyCFunction)(void (*)(void))py_step_range, METH_FASTCALL,
     "step_range(t0, t1, step_number): a whole framework step."},
    {"configure", (PyCFunction)(void (*)(void))py_configure, METH_VARARGS | METH_KEYWORDS, "Set ring size and ceiling."},
    {"start", (PyCFunction)(void (*)(void))py_start, METH_VARARGS | METH_KEYWORDS, "Start the flusher."},
    {"set_enabled", py_set_enabled, METH_O, "Turn the producers on or off."},
    {"stats", py_stats, METH_NOARGS, "Counters of the running or last session."},
    {"set_domains", py_set_domains, METH_VARARGS, "set_domains(mode, names): the marker domain filter."},
    {"child_reset", py_child_reset, METH_NOARGS, "In a forked child: drop the parent's buffers and files."},
    {"stop", py_stop, METH_NOARGS, "Stop producers and flusher, write everything, close files."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_ring", "openmsprof native recorder core", -1, methods};

PyMODINIT_FUNC PyInit__ring(void) {
    PyObject *m = PyModule_Create(&moddef);
    if (m == NULL) return NULL;
    intern_dict = PyDict_New();
    if (intern_dict == NULL || pthread_key_create(&exit_key, on_thread_exit) != 0) { Py_DECREF(m); return NULL; }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&fl_cond, &ca);
    pthread_condattr_destroy(&ca);
    dom_set = PyFrozenSet_New(NULL);
    default_dom = PyUnicode_InternFromString("default");
    if (dom_set == NULL || default_dom == NULL) { Py_DECREF(m); return NULL; }
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    PyModule_AddIntConstant(m, "RECORD_SIZE", (long)sizeof(rec_t));
    PyModule_AddIntConstant(m, "STRING_ID_BASE", (long)0x80000000u);
    PyModule_AddIntConstant(m, "PACK_BLOCK_RECORDS", (long)PACK_BLOCK_RECORDS);
    return m;
}
