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
 * The packer is bp_pack_bfd (blocks/pack_len.c). Written from the description, not from
 * TRL. */
#include "method.h"

#include <stdlib.h>

#include "pack.h"

static int bfd_step(const struct bp_method_ctx *ctx, const struct bp_batch *b,
		    struct bp_step *st, const struct bp_plan *out, void *arg,
		    struct bp_error *err)
{
	(void)arg;
	return bp_pack_step_rr(bp_pack_bfd, b, st, out->max_tokens, ctx->shard, err);
}

int bp_method_bfd(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		  struct bp_plan *out, struct bp_error *err)
{
	return bp_method_each_step(ctx, in, out, bfd_step, NULL, err);
}

/* The method's row of the table (plan/method.h struct bp_method). */
BP_METHOD_ROW(bfd) = {
	.name = "bfd",
	.solve = bp_method_bfd,
	.summary = "best-fit-decreasing with a segment tree, O(n log n)",
	.paper = "TRL's packing (best-fit-decreasing)",
	.schedules = 1,
	.in_all = 1,
	.rank = 70,
	.price = bp_price_sort_packer,
};
