/* The operator columns of one block of a Kineto trace in C, for the torch analysis
 * (export/ascend_pt/columns.py): one pass over the block's bytes (the JSON array that
 * sources/kineto_trace.py would hand to orjson) instead of a dict per event.
 *
 *   ops(block[, start, stop]) -> None | (pid, names, name_code, keys, key_code, op_i64, op_annot, flow_i64,
 *                                        flow_start, py_names, py_name_code, py_i64, py_dur_us)
 *
 * ``block`` is a JSON array of events; with ``start``/``stop`` it is block[start:stop], the
 * inside of one (its brackets implied: no copy of a file's events to add them).  The parse runs
 * without the GIL.
 *
 * Every byte is validated as JSON.  The result is None (the caller parses the block with orjson
 * and takes the Python path, which stays the reference) whenever the block holds anything this
 * scan does not reproduce exactly: a byte >= 0x80, a \u escape, an escape in a key or in a
 * ph/cat, a duplicated key the columns read, a bool where an integer is read, an integer of
 * more than 18 digits, an event that is not an object, a cpu_op/user_annotation without a numeric
 * ts, GPU events, [memory] instant events, nesting deeper than 64.
 *
 * Texts come once per distinct value, in first-seen order, with an int32 code per event (bytes
 * of a bytearray): ``names`` (str; two raw spellings of one text may both appear) and ``keys``
 * (bytes: for each of "Input Dims", "Input type", "Sequence number", "Fwd thread id" \x02 when
 * absent, else \x01 and the value's raw bytes; equal bytes are equal JSON values) of the cpu_op /
 * user_annotation X events (file order).  Numbers come as writable bytearrays of whole columns,
 * one after the other: op_i64 (int64 x 6n) ts ns, dur ns (rint(µs x 1000); 0 when absent or
 * out of int64 ns range), tid (0 unless an integer), External id (-(2**62) unless an integer,
 * and for annotations), Sequence number (-1 unless an integer), Fwd thread id (0 unless an
 * integer); op_annot (uint8: user_annotation).  pid: that of the first op whose pid is an
 * integer (None: none).  Per fwdbwd flow (ph s/f): flow_i64 (3m) ts ns, id, tid (0 unless
 * integers), flow_start (uint8: ph s).  Per python_function X event (with_stack): names and
 * codes as for the ops, py_i64 (3k) ts ns, dur ns, tid, and py_dur_us (float64 µs).
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

static inline int put(buf *b, const void *v, size_t n) {
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

/* byte classes: 1 JSON whitespace; 2 ends a plain run in a string ('"', '\\', < 0x20, >= 0x80) */
static const unsigned char CLASS[256] = {
    2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 2, 2, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
};

/* SWAR over 8 bytes (little-endian lanes; the lowest flagged lane is exact, the bits above it
 * may be spurious): lanes equal to b, lanes below 0x20 or from 0x80 */
#define ONES UINT64_C(0x0101010101010101)
#define HIGH UINT64_C(0x8080808080808080)
static inline uint64_t lanes_eq(uint64_t w, unsigned char b) {
    uint64_t x = w ^ (ONES * b);
    return (x - ONES) & ~x & HIGH;
}
static inline uint64_t lanes_odd(uint64_t w) { return ((w - ONES * 0x20) & ~w & HIGH) | (w & HIGH); }
static inline uint64_t load8(const char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__GNUC__)
#define SWAR 1
#else
#define SWAR 0
#endif

/* skip JSON whitespace; Kineto's layout first: none (after a key or a value), one space (after
 * a colon), a newline and an indent of spaces (before a key), 8 bytes of indent at a time */
static inline void ws(cur *c) {
    const char *p = c->p, *e = c->end;
    if (p < e && (unsigned char)*p > ' ')
        return;
#if SWAR
    if (e - p >= 2 && p[0] == ' ' && (unsigned char)p[1] > ' ') {
        c->p = p + 1;
        return;
    }
    if (p < e && *p == '\n') {
        p++;
        while (e - p >= 8) {
            uint64_t other = load8(p) ^ (ONES * ' ');
            if (other) {
                p += __builtin_ctzll(other) / 8;
                break;
            }
            p += 8;
        }
    }
#endif
    while (p < e && (CLASS[(unsigned char)*p] & 1))
        p++;
    c->p = p;
}

/* a string at c->p (the opening quote); the span covers the quotes */
static int str(cur *c, span *s) {
    const char *q = c->p + 1;
    int esc = 0;
    for (;;) {
#if SWAR
        while (c->end - q >= 8) {
            uint64_t w = load8(q), hit = lanes_eq(w, '"') | lanes_eq(w, '\\') | lanes_odd(w);
            if (hit) {
                q += __builtin_ctzll(hit) / 8;
                break;
            }
            q += 8;
        }
#endif
        while (q < c->end && !(CLASS[(unsigned char)*q] & 2))
            q++;
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

/* a short key equals w (inline: a memcmp call costs more than these few bytes) */
static inline int same(const char *a, const char *w, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != w[i])
            return 0;
    return 1;
}

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
                if (key.n == lens[i] + 2 && same(key.p + 1, names[i], lens[i])) {
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
            span *d = &out[at];
            d->p = start;
            d->n = (size_t)(c->p - start);
            d->kind = 'o';
            d->esc = 0;
        } else if (value(c, at >= 0 ? &out[at] : &v, depth + 1) < 0) { /* straight into place: a copy
                                                                        * of the span stalls on its fresh stores */
            return -1;
        }
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
static inline int is_n(const span *s, const char *w, size_t n) {
    return s->kind == 's' && !s->esc && s->n == n + 2 && same(s->p + 1, w, n);
}
/* (w a string literal: its length known at compile time) */
#define is(s, w) is_n((s), (w), sizeof(w) - 1)

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
    /* the digits before the point, then after it (at most 17 digits in all: m < 10**17 cannot
     * overflow; more go to the general conversion) */
    const char *start = q;
    for (; q < e && isdig(*q); q++)
        m = m * 10 + (uint64_t)(*q - '0');
    if (q >= e || *q != '.')
        return -1; /* no point, or an exponent */
    const char *point = q++;
    for (; q < e && isdig(*q); q++)
        m = m * 10 + (uint64_t)(*q - '0');
    frac = (int)(q - point - 1);
    if (q != e || (point - start) + frac > 17 || frac > 22 || m > (UINT64_C(1) << 53))
        return -1;
    double d = (double)m / POW10[frac];
    *v = neg ? -d : d;
    return 0;
}

/* a number span as Python's float() of orjson's value: an integer converts exactly as int ->
 * float64 (correctly rounded), a decimal through its fast path; 0 with *v set, -1 bail, 1: a
 * decimal for the general conversion (``slow_f64``, with the GIL: *v is 0 until then) */
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
    if (s->n >= 64)
        return -1;
    *v = 0;
    return 1;
}

/* PyOS_string_to_double (correctly rounded) of a decimal span: 0 with *v set, -1 not a finite
 * float of the whole span.  Needs the GIL. */
static int slow_f64(const char *p, size_t n, double *v) {
    char tmp[64];
    if (n >= sizeof tmp)
        return -1;
    memcpy(tmp, p, n);
    tmp[n] = 0;
    char *endp = NULL;
    double d = PyOS_string_to_double(tmp, &endp, NULL);
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (endp != tmp + n || !isfinite(d))
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


/* Distinct byte strings of one call in first-seen order (an open-addressing table over copies
 * in an arena): each event gets the int32 index of its string, each new string one Python object. */
typedef struct {
    buf arena, ents, codes; /* ents: (offset, length) pairs into arena; codes: int32 per event */
    uint32_t *slots;        /* 0 empty, else entry index + 1 */
    size_t cap, count;
    PyObject *list;
} dedup;

/* 8 bytes at a time, each word mixed in by a multiply (a table index, not a defence) */
static uint64_t hash_bytes(const char *p, size_t n) {
    uint64_t h = UINT64_C(1469598103934665603) ^ n;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * UINT64_C(0x9E3779B97F4A7C15);
        h ^= h >> 29;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * UINT64_C(0x9E3779B97F4A7C15);
        h ^= h >> 29;
    }
    return h ^ (h >> 32);
}

/* the index of p[0..n) (*fresh: 1 when it is new: the caller appends its object to d->list) */
static int64_t dedup_find(dedup *d, const char *p, size_t n, int *fresh) {
    *fresh = 0;
    if (2 * (d->count + 1) > d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 256;
        uint32_t *slots = calloc(cap, sizeof(uint32_t));
        if (slots == NULL)
            return -1;
        const size_t *ents = (const size_t *)d->ents.p;
        for (size_t i = 0; i < d->count; i++) {
            size_t j = hash_bytes(d->arena.p + ents[2 * i], ents[2 * i + 1]) & (cap - 1);
            while (slots[j])
                j = (j + 1) & (cap - 1);
            slots[j] = (uint32_t)(i + 1);
        }
        free(d->slots);
        d->slots = slots;
        d->cap = cap;
    }
    size_t j = hash_bytes(p, n) & (d->cap - 1);
    for (;;) {
        uint32_t e = d->slots[j];
        if (!e)
            break;
        const size_t *ent = (const size_t *)d->ents.p + 2 * (e - 1);
        if (ent[1] == n && memcmp(d->arena.p + ent[0], p, n) == 0)
            return (int64_t)(e - 1);
        j = (j + 1) & (d->cap - 1);
    }
    if (d->count >= INT32_MAX)
        return -1;
    size_t ent[2] = {d->arena.n, n};
    if ((n && put(&d->arena, p, n) < 0) || put(&d->ents, ent, sizeof ent) < 0)
        return -1;
    d->slots[j] = (uint32_t)(d->count + 1);
    *fresh = 1;
    return (int64_t)d->count++;
}

static void dedup_free(dedup *d) {
    free(d->arena.p);
    free(d->ents.p);
    free(d->codes.p);
    free(d->slots);
    Py_XDECREF(d->list);
}

/* a time whose decimal takes the general conversion after the parse: which column, which row,
 * the span's offset and length in the block */
enum { FIX_OP_TS, FIX_OP_DUR, FIX_PY_TS, FIX_PY_DUR, FIX_FLOW_TS };
typedef struct {
    int col;
    size_t row, off, len;
} fixup;

typedef struct {
    buf ts, dur, tid, annot, ext, seq, fwd, fts, fstart, fid, ftid, pts, pdur, pdur_us, ptid, key, tmp, fix;
    dedup names, keys, pnames;
    const char *base; /* the block */
    int64_t pid;
    int has_pid;
} out;

static int defer(out *o, int col, size_t row, const span *s) {
    fixup f = {col, row, (size_t)(s->p - o->base), s->n};
    return put(&o->fix, &f, sizeof f);
}

/* µs → ns as columns.py's ``_ns``: rint(µs × 1000), 0 for a time out of int64 ns */
static int64_t ns_of(double us) { return fabs(us) < 9.2e15 ? (int64_t)rint(us * 1000.0) : 0; }

/* a string's text from its raw bytes with the quotes (escapes decoded: the scan only passes the
 * one-character ones) */
static PyObject *text(out *o, const char *raw, size_t n) {
    const char *p = raw + 1, *e = raw + n - 1;
    if (memchr(p, '\\', (size_t)(e - p)) == NULL)
        return PyUnicode_DecodeASCII(p, e - p, NULL);
    o->tmp.n = 0;
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
        if (put(&o->tmp, &ch, 1) < 0)
            return PyErr_NoMemory();
    }
    return PyUnicode_DecodeASCII(o->tmp.p ? o->tmp.p : "", (Py_ssize_t)o->tmp.n, NULL);
}

/* the event's name (absent: "") coded into d by its raw text (``texts`` makes the str objects) */
static int code_name(out *o, dedup *d, const span *s) {
    static const span none = {"\"\"", 2, 's', 0};
    if (!s->kind)
        s = &none;
    int fresh;
    int64_t c = dedup_find(d, s->p, s->n, &fresh);
    if (c < 0)
        return -1;
    int32_t c32 = (int32_t)c;
    return put(&d->codes, &c32, 4);
}

/* d's distinct raw texts as Python objects into d->list: str (decoded) or bytes (raw) */
static int texts(out *o, dedup *d, int as_str) {
    const size_t *ents = (const size_t *)d->ents.p;
    for (size_t i = 0; i < d->count; i++) {
        const char *p = d->arena.p ? d->arena.p + ents[2 * i] : "";
        PyObject *x = as_str ? text(o, p, ents[2 * i + 1]) : PyBytes_FromStringAndSize(p, (Py_ssize_t)ents[2 * i + 1]);
        if (x == NULL)
            return -1;
        int r = PyList_Append(d->list, x);
        Py_DECREF(x);
        if (r < 0)
            return -1;
    }
    return 0;
}

static int add_op(out *o, cur *c, span *ev, span *ar) {
    double ts, dur = 0;
    int64_t tid = 0, ext = NO_EXT, seq = -1, fwd = 0, pid;
    int annot = is(&ev[CAT], "user_annotation"), slow_ts, slow_dur = 0;
    if (!(ev[TS].kind == 'i' || ev[TS].kind == 'n') || (slow_ts = to_f64(&ev[TS], &ts)) < 0)
        return 1;
    if (ev[DUR].kind && (!(ev[DUR].kind == 'i' || ev[DUR].kind == 'n') || (slow_dur = to_f64(&ev[DUR], &dur)) < 0))
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
    if (code_name(o, &o->names, &ev[NAME]) < 0)
        return -1;
    o->key.n = 0;
    for (int i = DIMS; i <= FWD; i++) {
        char m = ar[i].kind ? 1 : 2;
        if (put(&o->key, &m, 1) < 0 || (ar[i].kind && put(&o->key, ar[i].p, ar[i].n) < 0))
            return -1;
    }
    int fresh;
    int64_t k = dedup_find(&o->keys, o->key.p, o->key.n, &fresh);
    if (k < 0)
        return -1;
    size_t row = o->ts.n / 8;
    if ((slow_ts && defer(o, FIX_OP_TS, row, &ev[TS]) < 0) || (slow_dur && defer(o, FIX_OP_DUR, row, &ev[DUR]) < 0))
        return -1;
    int32_t k32 = (int32_t)k;
    uint8_t a = (uint8_t)annot;
    int64_t ts_ns = ns_of(ts), dur_ns = ns_of(dur);
    if (put(&o->keys.codes, &k32, 4) || put(&o->ts, &ts_ns, 8) || put(&o->dur, &dur_ns, 8) ||
        put(&o->tid, &tid, 8) || put(&o->annot, &a, 1) || put(&o->ext, &ext, 8) || put(&o->seq, &seq, 8) ||
        put(&o->fwd, &fwd, 8))
        return -1;
    (void)c;
    return 0;
}

/* a python_function event (as Columns._add_python reads it) */
static int add_py(out *o, span *ev) {
    double ts, dur = 0;
    int64_t tid = 0;
    int slow_ts, slow_dur = 0;
    if (!(ev[TS].kind == 'i' || ev[TS].kind == 'n') || (slow_ts = to_f64(&ev[TS], &ts)) < 0)
        return 1;
    if (ev[DUR].kind && (!(ev[DUR].kind == 'i' || ev[DUR].kind == 'n') || (slow_dur = to_f64(&ev[DUR], &dur)) < 0))
        return 1;
    if (ev[TID].kind && int_or(&ev[TID], 0, &tid) < 0)
        return 1;
    if (ev[NAME].kind && ev[NAME].kind != 's')
        return 1;
    if (code_name(o, &o->pnames, &ev[NAME]) < 0)
        return -1;
    size_t row = o->pts.n / 8;
    if ((slow_ts && defer(o, FIX_PY_TS, row, &ev[TS]) < 0) || (slow_dur && defer(o, FIX_PY_DUR, row, &ev[DUR]) < 0))
        return -1;
    int64_t ts_ns = ns_of(ts), dur_ns = ns_of(dur);
    if (put(&o->pts, &ts_ns, 8) || put(&o->pdur, &dur_ns, 8) || put(&o->pdur_us, &dur, 8) || put(&o->ptid, &tid, 8))
        return -1;
    return 0;
}

static int add_flow(out *o, span *ev, int start) {
    double ts;
    int64_t id = 0, tid = 0;
    int slow_ts;
    if (!(ev[TS].kind == 'i' || ev[TS].kind == 'n') || (slow_ts = to_f64(&ev[TS], &ts)) < 0)
        return 1;
    if (ev[ID].kind && int_or(&ev[ID], 0, &id) < 0)
        return 1;
    if (ev[TID].kind && int_or(&ev[TID], 0, &tid) < 0)
        return 1;
    uint8_t s = (uint8_t)start;
    if (slow_ts && defer(o, FIX_FLOW_TS, o->fts.n / 8, &ev[TS]) < 0)
        return -1;
    int64_t ts_ns = ns_of(ts);
    if (put(&o->fts, &ts_ns, 8) || put(&o->fstart, &s, 1) || put(&o->fid, &id, 8) || put(&o->ftid, &tid, 8))
        return -1;
    return 0;
}

/* The members of an event object (c->p after '{') in Kineto's own layout: each member on its line
 * after a 4-space indent, a known field's key, ": " and its value, then "," / "\n    ," or the
 * closing "\n  }".  Literal bytes replace the whitespace and key loops of ``members`` (most of its
 * time on this layout); the values are read by the same code.  -1 (c->p, ev, ar untouched or to
 * be reset by the caller): another layout or field, for ``members`` to read. */
/* which of EV the key k[0..n) is (-1: none), by its length and letters */
static inline int ev_field(const char *k, size_t n) {
    switch (n) {
    case 2:
        return k[0] == 'p' && k[1] == 'h' ? PH : k[0] == 't' && k[1] == 's' ? TS : k[0] == 'i' && k[1] == 'd' ? ID : -1;
    case 3:
        if (k[1] == 'i' && k[2] == 'd')
            return k[0] == 'p' ? PID : k[0] == 't' ? TID : -1;
        return same(k, "cat", 3) ? CAT : same(k, "dur", 3) ? DUR : -1;
    case 4:
        return same(k, "name", 4) ? NAME : same(k, "args", 4) ? ARGS : -1;
    default:
        return -1;
    }
}

static int kineto_members(cur *c, int depth, span *ev, span *ar) {
    const char *p = c->p, *e = c->end;
    for (;;) {
        if (e - p < 12 || memcmp(p, "\n    \"", 6) != 0)
            return -1;
        p += 6;
        const char *k = p;
        while (p < e && *p >= 'a' && *p <= 'z') /* the fields read here are lower-case words */
            p++;
        size_t n = (size_t)(p - k);
        if (e - p < 3 || memcmp(p, "\": ", 3) != 0)
            return -1;
        int at = ev_field(k, n);
        if (at < 0 || ev[at].kind)
            return -1; /* another field, or a duplicate: ``members`` decides */
        c->p = p + 3;
        if (at == ARGS && c->p < e && *c->p == '{') {
            const char *start = c->p;
            c->p++;
            if (depth + 1 > MAX_DEPTH || members(c, depth + 1, ARG, ARGLEN, NARG, ar, -1, NULL) < 0)
                return -2; /* invalid: no other reading makes it valid */
            ev[at].p = start;
            ev[at].n = (size_t)(c->p - start);
            ev[at].kind = 'o';
            ev[at].esc = 0;
        } else if (value(c, &ev[at], depth + 1) < 0) {
            return -2;
        }
        p = c->p;
        if (p < e && *p == ',') {
            p++;
            continue;
        }
        if (e - p >= 6 && memcmp(p, "\n    ,", 6) == 0) {
            p += 6;
            continue;
        }
        if (e - p >= 4 && memcmp(p, "\n  }", 4) == 0) {
            c->p = p + 4;
            return 0;
        }
        return -1;
    }
}

/* one event (c->p at '{'): 0 taken or skipped, 1 bail, -1 error (exception set) */
static int event(out *o, cur *c) {
    span ev[NEV], ar[NARG];
    for (int i = 0; i < NEV; i++) /* only a span's kind is read before it is set */
        ev[i].kind = 0;
    for (int i = 0; i < NARG; i++)
        ar[i].kind = 0;
    if (c->p >= c->end || *c->p != '{')
        return 1;
    c->p++;
    const char *start = c->p;
    int fast = kineto_members(c, 1, ev, ar);
    if (fast == -2 || c->bail)
        return 1;
    if (fast < 0) { /* read again from the start by the general member loop */
        c->p = start;
        for (int i = 0; i < NEV; i++)
            ev[i].kind = 0;
        for (int i = 0; i < NARG; i++)
            ar[i].kind = 0;
        if (members(c, 1, EV, EVLEN, NEV, ev, ARGS, ar) < 0)
            return 1;
    }
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

/* the buffers one after the other in one writable bytearray (numpy views it without a copy) */
static PyObject *joined(buf **parts, int k) {
    size_t n = 0;
    for (int i = 0; i < k; i++)
        n += parts[i]->n;
    PyObject *b = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (b == NULL)
        return NULL;
    char *p = PyByteArray_AS_STRING(b);
    for (int i = 0; i < k; i++) {
        if (parts[i]->n)
            memcpy(p, parts[i]->p, parts[i]->n);
        p += parts[i]->n;
    }
    return b;
}

/* the block's events into o (no Python object, no GIL needed): 0 done, 1 not this scan's, -1 out
 * of memory.  bare: the block is the inside of the array (its brackets implied) */
static int parse(out *o, cur *c, int bare) {
    ws(c);
    if (!bare) {
        if (c->p >= c->end || *c->p != '[')
            return 1;
        c->p++;
        ws(c);
    }
    if (c->p < c->end && *c->p == ']' && !bare) {
        c->p++;
    } else if (bare && c->p == c->end) {
        return 0;
    } else {
        for (;;) {
            ws(c);
            int r = event(o, c);
            if (r != 0)
                return r;
            ws(c);
            if (c->p < c->end && *c->p == ',') {
                c->p++;
                continue;
            }
            if (bare && c->p == c->end)
                return 0;
            if (!bare && c->p < c->end && *c->p == ']') {
                c->p++;
                break;
            }
            return 1;
        }
    }
    ws(c);
    return c->p == c->end ? 0 : 1;
}

/* the deferred decimals converted (with the GIL) and written in place: 0, or 1 (one is not a
 * finite float: the block is not this scan's) */
static int apply_fixups(out *o) {
    const fixup *f = (const fixup *)o->fix.p;
    for (size_t i = 0; i < o->fix.n / sizeof(fixup); i++) {
        double d;
        if (slow_f64(o->base + f[i].off, f[i].len, &d) < 0)
            return 1;
        int64_t ns = ns_of(d);
        switch (f[i].col) {
        case FIX_OP_TS: memcpy(o->ts.p + 8 * f[i].row, &ns, 8); break;
        case FIX_OP_DUR: memcpy(o->dur.p + 8 * f[i].row, &ns, 8); break;
        case FIX_PY_TS: memcpy(o->pts.p + 8 * f[i].row, &ns, 8); break;
        case FIX_PY_DUR:
            memcpy(o->pdur.p + 8 * f[i].row, &ns, 8);
            memcpy(o->pdur_us.p + 8 * f[i].row, &d, 8);
            break;
        default: memcpy(o->fts.p + 8 * f[i].row, &ns, 8);
        }
    }
    return 0;
}

static PyObject *ops(PyObject *self, PyObject *args) {
    PyObject *arg;
    Py_ssize_t start = -1, stop = -1;
    if (!PyArg_ParseTuple(args, "O|nn:ops", &arg, &start, &stop))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int bare = PyTuple_GET_SIZE(args) > 1;
    if (bare && (PyTuple_GET_SIZE(args) != 3 || start < 0 || stop < start || stop > view.len)) {
        PyErr_Format(PyExc_ValueError, "ops: start %zd / stop %zd are not a range of the %zd-byte block", start, stop,
                     view.len);
        PyBuffer_Release(&view);
        return NULL;
    }
    out o;
    memset(&o, 0, sizeof o);
    PyObject *res = NULL;
    int r;
    o.base = (const char *)view.buf;
    cur c = {(const char *)view.buf + (bare ? start : 0), (const char *)view.buf + (bare ? stop : view.len), 0};
    Py_BEGIN_ALLOW_THREADS /* the parse touches no Python object: the buffer is held */
    r = parse(&o, &c, bare);
    Py_END_ALLOW_THREADS
    if (r == 0)
        r = apply_fixups(&o);
    if (r != 0)
        goto done;
    r = -1;
    o.names.list = PyList_New(0);
    o.keys.list = PyList_New(0);
    o.pnames.list = PyList_New(0);
    if (o.names.list == NULL || o.keys.list == NULL || o.pnames.list == NULL || texts(&o, &o.names, 1) < 0 ||
        texts(&o, &o.keys, 0) < 0 || texts(&o, &o.pnames, 1) < 0)
        goto done;
    PyObject *pid = o.has_pid ? PyLong_FromLongLong(o.pid) : (Py_INCREF(Py_None), Py_None);
    if (pid == NULL)
        goto done;
    buf *op_i[] = {&o.ts, &o.dur, &o.tid, &o.ext, &o.seq, &o.fwd}, *fl_i[] = {&o.fts, &o.fid, &o.ftid},
        *py_i[] = {&o.pts, &o.pdur, &o.ptid};
    res = Py_BuildValue("(NONONNNNNONNN)", pid, o.names.list, joined((buf *[]){&o.names.codes}, 1), o.keys.list,
                        joined((buf *[]){&o.keys.codes}, 1), joined(op_i, 6), joined((buf *[]){&o.annot}, 1),
                        joined(fl_i, 3), joined((buf *[]){&o.fstart}, 1), o.pnames.list,
                        joined((buf *[]){&o.pnames.codes}, 1), joined(py_i, 3), joined((buf *[]){&o.pdur_us}, 1));
    if (res != NULL)
        r = 0;
done:
    PyBuffer_Release(&view);
    dedup_free(&o.names);
    dedup_free(&o.keys);
    dedup_free(&o.pnames);
    buf *bs[] = {&o.ts, &o.dur, &o.tid, &o.annot, &o.ext, &o.seq, &o.fwd, &o.fts, &o.fstart, &o.fid, &o.ftid,
                 &o.pts, &o.pdur, &o.pdur_us, &o.ptid, &o.key, &o.tmp, &o.fix};
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
    {"ops", ops, METH_VARARGS, "ops(block[, start, stop]) -> None | (pid, names, name_code, keys, key_code, op_i64, "
                               "op_annot, flow_i64, flow_start, py_names, py_name_code, py_i64, py_dur_us); see "
                               "the module source."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kineto_scan", "Kineto block scan (torch analysis).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__kineto_scan(void) { return PyModule_Create(&module); }
