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
 * The packer is bp_pack_ffd (blocks/pack_len.c). Written from the algorithm's description,
 * not from NeMo's code. */
#include "method.h"

#include <stdlib.h>

#include "pack.h"

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
