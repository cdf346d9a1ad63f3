/* The operator nesting sweep, shared by _nest_sweep.c (``tree``: nesting.parents and the kernel
 * mask) and _summary_cols.c (``op_tree_times``: operator_details' tree of operators and
 * annotations).  Include after <Python.h>.
 *
 * The selected events are sorted by (thread, start, -duration, index), as numpy's lexsort orders
 * them, and swept: each one's parent is the nearest event still open on its thread (an event is
 * open until start + duration, exclusive).  int64 sums and negations wrap as numpy's do.
 */
#ifndef OPENMSPROF_SWEEP_H
#define OPENMSPROF_SWEEP_H

#include <stdint.h>
#include <stdlib.h>

typedef struct {
    int64_t tid, ts, nd, i; /* nd: -duration */
} sweep_key;

/* int64 arithmetic as numpy does it (wrapping), without C's undefined overflow */
static inline int64_t sweep_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t sweep_neg(int64_t a) { return (int64_t)(UINT64_C(0) - (uint64_t)a); }

static int sweep_by_key(const void *a, const void *b) {
    const sweep_key *x = a, *y = b;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    if (x->nd != y->nd)
        return x->nd < y->nd ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i; /* numpy's lexsort is stable */
}

/* The ``n`` events' tree: ``sel`` (one byte each; NULL: every event) chooses them; ``keys`` and
 * ``stack`` have room for ``n``; ``parent`` gets every index's parent (-1: none, or not selected)
 * and ``depth`` (NULL: not written) its number of open ancestors (0 where not selected).  Returns
 * how many keys were sorted: ``keys[0..m)`` is the sweep order, a parent before its children.
 * Needs no GIL. */
static Py_ssize_t sweep_tree(const int64_t *ts, const int64_t *dur, const int64_t *tid, const unsigned char *sel,
                             Py_ssize_t n, sweep_key *keys, int64_t *stack, int64_t *parent, int64_t *depth) {
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        parent[i] = -1;
        if (depth != NULL)
            depth[i] = 0;
        if (sel == NULL || sel[i])
            keys[m++] = (sweep_key){tid[i], ts[i], sweep_neg(dur[i]), (int64_t)i};
    }
    Py_ssize_t sorted_run = 1; /* Kineto writes a thread's operators by start: mostly in order already */
    while (sorted_run < m && sweep_by_key(&keys[sorted_run - 1], &keys[sorted_run]) < 0)
        sorted_run++;
    if (sorted_run < m)
        qsort(keys, (size_t)m, sizeof(sweep_key), sweep_by_key);
    Py_ssize_t sp = 0;
    for (Py_ssize_t k = 0; k < m; k++) {
        int64_t i = keys[k].i, t = keys[k].ts;
        if (k && keys[k].tid != keys[k - 1].tid)
            sp = 0;
        while (sp && sweep_add(ts[stack[sp - 1]], dur[stack[sp - 1]]) <= t)
            sp--;
        if (sp) {
            parent[i] = stack[sp - 1];
            if (depth != NULL)
                depth[i] = sp;
        }
        stack[sp++] = i;
    }
    return m;
}

#endif
