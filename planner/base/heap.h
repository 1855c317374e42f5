/* heap.h: the planner's one binary heap (issue 28: kk, wlb, multipack, the cost model's
 * launch model and the DistCA scheduler's donor index, blocks/ca_sched.c, each had their
 * own). It holds item indices 0..cap-1; the keys stay with the
 * caller, who passes an order `before(keys, a, b)` (true when item a comes out before item b)
 * to every operation. h[0] is the first item by that order; with a strict total order (ties
 * broken by the caller, e.g. by index) the first item, and so every pop, does not depend on
 * how the heap was built, so a caller's results do not either.
 *
 * The sifts are static inline so that a caller's order, a constant at the call, is inlined
 * into them: the packers run them once per document. bp_heap_grow_least is the one sift for
 * a heap of bare doubles (the launch model's, once per block).
 *
 * Storage is the caller's (a stack array, say) or bp_heap_reserve's (heap.c). With pos, every
 * operation keeps pos[item] = its place in h, so an item whose key changed can be put back
 * in order (bp_heap_fix); without (pos NULL), only the top can change key. */
#ifndef BP_HEAP_H
#define BP_HEAP_H

#include <stddef.h>

#include "bp.h"

typedef int (*bp_heap_before_fn)(const void *keys, int a, int b);

struct bp_heap {
	int *h;      /* h[0..n-1]: the items, h[0] the first */
	int *pos;    /* NULL, or pos[item]: its place in h */
	size_t n, cap;
};

/* Grows the room of hp (zeroed, or grown here before) to cap items, and pos[] with it when
 * with_pos; keeps the items; never shrinks. Returns 0 or -1. */
int bp_heap_reserve(struct bp_heap *hp, size_t cap, int with_pos, struct bp_error *err);
/* Frees what bp_heap_reserve allocated; hp is empty after. */
void bp_heap_free(struct bp_heap *hp);
/* Items 0..n-1 in index order: a heap when no item comes before a lower one (all keys
 * equal, ties by index). n <= cap. */
void bp_heap_iota(struct bp_heap *hp, size_t n);

static inline void bp_heap_put_(struct bp_heap *hp, size_t i, int item)
{
	hp->h[i] = item;
	if (hp->pos)
		hp->pos[item] = (int)i;
}

/* Moves the item at place i up while it comes before its parent. */
static inline void bp_heap_up(struct bp_heap *hp, size_t i, bp_heap_before_fn before,
			      const void *keys)
{
	int item = hp->h[i];
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!before(keys, item, hp->h[p]))
			break;
		bp_heap_put_(hp, i, hp->h[p]);
		i = p;
	}
	bp_heap_put_(hp, i, item);
}

/* Moves the item at place i down while a child comes before it. */
static inline void bp_heap_down(struct bp_heap *hp, size_t i, bp_heap_before_fn before,
				const void *keys)
{
	int item = hp->h[i];
	size_t n = hp->n;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && before(keys, hp->h[c + 1], hp->h[c]))
			c++;
		if (!before(keys, hp->h[c], item))
			break;
		bp_heap_put_(hp, i, hp->h[c]);
		i = c;
	}
	bp_heap_put_(hp, i, item);
}

/* Adds an item (n < cap). */
static inline void bp_heap_push(struct bp_heap *hp, int item, bp_heap_before_fn before,
				const void *keys)
{
	size_t i = hp->n++;
	bp_heap_put_(hp, i, item);
	bp_heap_up(hp, i, before, keys);
}

/* Takes the first item out (n > 0) and returns it. */
static inline int bp_heap_pop(struct bp_heap *hp, bp_heap_before_fn before, const void *keys)
{
	int top = hp->h[0];
	if (--hp->n) {
		bp_heap_put_(hp, 0, hp->h[hp->n]);
		bp_heap_down(hp, 0, before, keys);
	}
	if (hp->pos)
		hp->pos[top] = -1;
	return top;
}

/* Puts an item whose key changed back in order (needs pos). Keys change one at a time:
 * every other item must be in order when it is called. */
static inline void bp_heap_fix(struct bp_heap *hp, int item, bp_heap_before_fn before,
			       const void *keys)
{
	size_t i = (size_t)hp->pos[item];
	bp_heap_up(hp, i, before, keys);
	if (hp->h[i] == item)
		bp_heap_down(hp, i, before, keys);
}

/* Takes an item out wherever it is (needs pos; an item not in the heap, pos -1, is left
 * alone): the last item takes its place and is put back in order. */
static inline void bp_heap_remove(struct bp_heap *hp, int item, bp_heap_before_fn before,
				  const void *keys)
{
	int at = hp->pos[item];
	if (at < 0)
		return;
	hp->pos[item] = -1;
	if ((size_t)at != --hp->n) {
		bp_heap_put_(hp, (size_t)at, hp->h[hp->n]);
		bp_heap_fix(hp, hp->h[at], before, keys);
	}
}

/* The same sift for a min-heap of bare values, h[0..n) itself the heap (n > 0): the least
 * value grows by d and sinks to its place. For a caller whose items are interchangeable,
 * so that only the values matter (the cost model's launch model: places that finish at
 * some time, costmodel.c), without an index's extra load per comparison on its hot path. */
static inline void bp_heap_grow_least(double *h, int n, double d)
{
	double v = h[0] + d;
	int i = 0; /* int, not size_t: 5% fewer instructions in the launch model (callgrind) */
	for (;;) {
		int c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && h[c + 1] < h[c])
			c++;
		if (h[c] >= v)
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = v;
}

#endif
