/* ffd.c: the "ffd" method, first-fit-decreasing packing to a fixed length, the way NeMo packs
 * sequences for fine-tuning (its "first_fit_decreasing" packing algorithm; the heuristic is
 * Johnson's 1973 first-fit-decreasing, at most 11/9 OPT + 6/9 bins, Dosa 2007). Called
 * through the method table (methods.c) by bp_solve.
 *
 * Per step: documents longest first (ties: draw order, i.e. doc id), each into the
 * lowest-numbered micro-batch with room for it under max_tokens, a new one when none has. The
 * micro-batches are dealt round-robin to the dp pipelines in the order they were opened:
 * NeMo packs to a length and does not balance, which is what this baseline shows.
 * Invariant: every document whole in exactly one micro-batch of at most max_tokens tokens.
 *
 * The first fit is found in O(log B) with a max segment tree over the bins' free room; bins
 * not yet opened are leaves with full room, so the leftmost leaf with room >= len is the
 * first fit, opening a new bin when no open bin fits. The tree has B leaves, B a bound on
 * the bins FFD can open: any-fit packing leaves at most one bin at most half full (a later
 * bin's first item would have fitted there), so bins < 2 * tokens / cap + 1, and at most n.
 * So a step of 100 documents into 128K-token micro-batches builds a tree of about 16
 * leaves, and the cost follows the batch, not the context length; up to FFD_SCAN_BINS
 * bins a scan over the open bins is faster still and finds the same bin. Written from the
 * algorithm's description, not from NeMo's code. */
#include "method.h"

#include <stdlib.h>

#include "pack.h"

/* Up to this many bins a scan finds the first fit faster than the tree; speed only. */
#define FFD_SCAN_BINS 32

/* B: a bound on the bins any any-fit packing of n items, tokens in all, opens under cap. */
size_t bp_anyfit_bins_bound(size_t n, int64_t tokens, int64_t cap)
{
	if (tokens > INT64_MAX / 2)
		return n;
	int64_t b = 2 * tokens / cap + 1;
	return (uint64_t)b < (uint64_t)n ? (size_t)b : n;
}

int bp_pack_ffd(const int64_t *len, size_t n, int64_t cap, int *bin_of, size_t *nbins,
		struct bp_error *err)
{
	size_t *order = NULL;
	int64_t *room = NULL; /* segment tree: room[1] root, leaves room[P..2P) */
	size_t P, used = 0, B;
	int64_t tokens = 0;
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
		tokens = tokens > INT64_MAX - len[i] ? INT64_MAX : tokens + len[i];
	}
	B = bp_anyfit_bins_bound(n, tokens, cap);
	if (B <= FFD_SCAN_BINS)
		P = 0; /* no tree: room[0..B) are the bins */
	else
		for (P = 1; P < B; P *= 2)
			;
	order = bp_calloc(n, sizeof(size_t), err);
	room = bp_calloc(P ? 2 * P : B, sizeof(int64_t), err);
	if (!order || !room || bp_order_by_len(len, n, order, err) < 0)
		goto out;
	if (!P) { /* few bins: the first fit by a scan over the open ones, O(n B) */
		for (size_t q = 0; q < n; q++) {
			size_t i = order[q], b = 0;
			while (b < used && room[b] < len[i])
				b++;
			if (b == used) {
				if (used == B) {
					bp_errorf(err, "internal: ffd ran out of its %zu bins", B);
					goto out;
				}
				room[used++] = cap;
			}
			room[b] -= len[i];
			bin_of[i] = (int)b;
		}
		*nbins = used;
		rc = 0;
		goto out;
	}
	for (size_t v = P; v < 2 * P; v++)
		room[v] = v - P < B ? cap : -1; /* leaves past B never open */
	for (size_t v = P - 1; v >= 1; v--)
		room[v] = room[2 * v] >= room[2 * v + 1] ? room[2 * v] : room[2 * v + 1];
	for (size_t q = 0; q < n; q++) {
		size_t i = order[q], v = 1;
		int64_t l = len[i];
		/* room[1] >= l: fewer than B bins are open whenever one more must open. */
		if (room[1] < l) {
			bp_errorf(err, "internal: ffd ran out of its %zu bins", B);
			goto out;
		}
		while (v < P)
			v = room[2 * v] >= l ? 2 * v : 2 * v + 1;
		size_t b = v - P;
		bin_of[i] = (int)b;
		if (b + 1 > used)
			used = b + 1;
		room[v] -= l;
		for (v /= 2; v >= 1; v /= 2) {
			int64_t m = room[2 * v] >= room[2 * v + 1] ? room[2 * v] : room[2 * v + 1];
			if (room[v] == m)
				break; /* ancestors unchanged */
			room[v] = m;
		}
	}
	*nbins = used;
	rc = 0;
out:
	free(order);
	free(room);
	return rc;
}

static int ffd_step(const struct bp_method_ctx *ctx, const struct bp_batch *b,
		    struct bp_step *st, const struct bp_plan *out, void *arg,
		    struct bp_error *err)
{
	(void)arg;
	return bp_pack_step_rr(bp_pack_ffd, b, st, out->max_tokens, ctx->shard, err);
}

int bp_method_ffd(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		  struct bp_plan *out, struct bp_error *err)
{
	return bp_method_each_step(ctx, in, out, ffd_step, NULL, err);
}

/* The method's row of the table (plan/method.h struct bp_method). */
BP_METHOD_ROW(ffd) = {
	.name = "ffd",
	.solve = bp_method_ffd,
	.summary = "first-fit-decreasing to the context length, bins dealt round-robin",
	.paper = "NeMo's sequence packing (first-fit-decreasing)",
	.schedules = 1,
	.in_all = 1,
	.rank = 60,
	.price = bp_price_sort_packer,
};
