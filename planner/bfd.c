/* bfd.c: the "bfd" method, best-fit-decreasing packing to a fixed length, the way TRL packs
 * datasets for SFT (its "bfd" packing strategy: a segment tree over the free room of the
 * bins, one first-come queue of bins per room value). The heuristic is Johnson's 1973
 * best-fit-decreasing (the same 11/9 OPT + 6/9 bound as FFD). Called through the method table
 * (methods.c) by bp_solve.
 *
 * Per step: documents longest first (ties: draw order, i.e. doc id), each into the open
 * micro-batch with the least room that still fits it (ties: the bin that reached that room
 * first), a new one when none fits. Micro-batches are dealt round-robin to the dp pipelines
 * in the order they were opened (TRL does not balance either). Invariant: every document
 * whole in exactly one micro-batch of at most max_tokens tokens.
 *
 * Speed, O(n log n + min(L, T)) for n documents of T tokens under a cap L: the tree is indexed
 * by a bin's fill f = L - room, so best fit is the largest non-empty f <= L - len; a bin
 * that is full (room 0) leaves the structure. Written from the description, not from TRL. */
#include "method.h"

#include <stdlib.h>

#include "pack.h"

/* The largest position <= x whose leaf is set in the "any" tree t (leaves t[P..2P)), or -1. */
static int64_t seg_last_le(const unsigned char *t, size_t P, size_t x)
{
	size_t v = x + P;
	if (t[v])
		return (int64_t)x;
	for (; v > 1; v /= 2)
		if ((v & 1) && t[v - 1]) {
			v--;
			while (v < P)
				v = t[2 * v + 1] ? 2 * v + 1 : 2 * v;
			return (int64_t)(v - P);
		}
	return -1;
}

static void seg_set(unsigned char *t, size_t P, size_t x, unsigned char on)
{
	size_t v = x + P;
	t[v] = on;
	for (v /= 2; v >= 1; v /= 2) {
		unsigned char a = t[2 * v] | t[2 * v + 1];
		if (t[v] == a)
			break;
		t[v] = a;
	}
}

int bp_pack_bfd(const int64_t *len, size_t n, int64_t cap, int *bin_of, size_t *nbins,
		struct bp_error *err)
{
	size_t *order = NULL;
	unsigned char *tree = NULL;
	int *head = NULL, *tail = NULL; /* per fill value: first-come queue of bins */
	int *next = NULL;               /* per bin: the next bin in its queue, -1 at the end */
	int64_t *fill = NULL;           /* per bin */
	size_t P = 1, used = 0;
	int64_t total = 0, F;
	int rc = -1;
	*nbins = 0;
	if (!n)
		return 0;
	if (n > (size_t)INT32_MAX)
		return bp_errorf(err, "%zu documents in one step are too many to pack", n);
	for (size_t i = 0; i < n; i++) {
		if (len[i] < 1 || len[i] > cap)
			return bp_errorf(err, "item %zu has %lld tokens, outside [1, %lld]", i,
					 (long long)len[i], (long long)cap);
		total += len[i];
	}
	F = total < cap ? total : cap; /* every fill lies in [1, F] */
	while ((int64_t)P < F + 1)
		P *= 2;
	order = bp_calloc(n, sizeof(size_t), err);
	tree = bp_calloc(2 * P, 1, err);
	head = bp_calloc((size_t)F + 1, sizeof(int), err);
	tail = bp_calloc((size_t)F + 1, sizeof(int), err);
	next = bp_calloc(n, sizeof(int), err);
	fill = bp_calloc(n, sizeof(int64_t), err);
	if (!order || !tree || !head || !tail || !next || !fill ||
	    bp_order_by_len(len, n, order, err) < 0)
		goto out;
	for (int64_t f = 0; f <= F; f++)
		head[f] = tail[f] = -1;
	for (size_t q = 0; q < n; q++) {
		size_t i = order[q];
		int64_t l = len[i], x = cap - l < F ? cap - l : F;
		int64_t f = x >= 1 ? seg_last_le(tree, P, (size_t)x) : -1;
		int b;
		if (f >= 1) { /* pop the first-come bin of fill f */
			b = head[f];
			head[f] = next[b];
			if (head[f] < 0) {
				tail[f] = -1;
				seg_set(tree, P, (size_t)f, 0);
			}
		} else {
			b = (int)used++;
		}
		bin_of[i] = b;
		fill[b] += l;
		if (fill[b] < cap) { /* queue it at its new fill; a full bin leaves */
			int64_t g = fill[b];
			next[b] = -1;
			if (tail[g] < 0) {
				head[g] = b;
				seg_set(tree, P, (size_t)g, 1);
			} else {
				next[tail[g]] = b;
			}
			tail[g] = b;
		}
	}
	*nbins = used;
	rc = 0;
out:
	free(order);
	free(tree);
	free(head);
	free(tail);
	free(next);
	free(fill);
	return rc;
}

static int bfd_step(const struct bp_method_ctx *ctx, const struct bp_batch *b,
		    struct bp_step *st, const struct bp_plan *out, struct bp_error *err)
{
	return bp_pack_step_rr(bp_pack_bfd, b, st, out->max_tokens, ctx->shard, err);
}

int bp_method_bfd(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		  struct bp_plan *out, struct bp_error *err)
{
	return bp_method_each_step(ctx, in, out, bfd_step, err);
}
