/* multipack.c: the "multipack" method, the multipack sampler's idea (a multifit/LPT packer
 * that balances tokens across data-parallel ranks, so that every rank gets the same number of
 * micro-batches and about the same number of tokens). Called through the method table
 * (methods.c) by bp_solve. The balancing target is tokens, as in the sampler, not the cost
 * model: this baseline shows what token balance alone buys.
 *
 * Per step: m = ceil(tokens / (dp * max_tokens)) micro-batches per pipeline. Documents
 * longest first (ties: draw order) go by Graham's LPT (1969) to the one of the dp*m bins with
 * the fewest tokens; with a token cap that is also the bin with the most room, so when a
 * document does not fit there it fits nowhere and m grows by one. When every document fits,
 * the run was plain LPT, so the bins' tokens are within the longest document of each other.
 * The bins, most tokens first, are dealt to pipelines in a snake (0..dp-1, then dp-1..0, ...):
 * each pipeline gets m bins and, the rounds' spreads tiling the bins' range, the pipelines'
 * tokens too stay within the longest document of each other. A pipeline runs its bins in
 * decreasing tokens. Written from the description, not from the sampler's code. */
#include "method.h"

#include <stdlib.h>

#include "pack.h"


/* bp_grow_m's try: token LPT into dp x m bins (fill reallocated to fit) */
struct mp_try {
	const int64_t *len;
	size_t n, dp;
	int64_t cap;
	int *bin_of;
	int64_t *fill;
};

static int mp_try(size_t m, void *arg, struct bp_error *err)
{
	struct mp_try *t = arg;
	size_t k = m * t->dp;
	free(t->fill);
	t->fill = bp_calloc(k, sizeof(int64_t), err);
	if (!t->fill)
		return -1;
	return bp_pack_lpt_tokens(t->len, t->n, k, t->cap, t->bin_of, t->fill, err);
}

static int multipack_step(const struct bp_method_ctx *ctx, const struct bp_batch *b,
		      struct bp_step *st, const struct bp_plan *out, void *arg,
		      struct bp_error *err)
{
	(void)arg;
	int dp = bp_plan_dp(out);
	int64_t cap = out->max_tokens;
	size_t n = b->ndocs;
	int64_t *len = bp_calloc(n ? n : 1, sizeof(int64_t), err);
	int *bin_of = bp_calloc(n ? n : 1, sizeof(int), err);
	size_t *order = bp_calloc(n ? n : 1, sizeof(size_t), err);
	int64_t *fill = NULL;
	size_t *border = NULL;
	int *group_of = NULL;
	double *dfill = NULL;
	int rc = -1;
	if (!len || !bin_of || !order)
		goto out;
	rc = bp_batch_lens(b, cap, len, err);
	if (rc < 0 || !n)
		goto out;
	rc = -1;
	int64_t tokens = 0;
	for (size_t i = 0; i < n; i++)
		tokens += len[i];
	struct mp_try t = {len, n, (size_t)dp, cap, bin_of, NULL};
	size_t m;
	int r = bp_grow_m(bp_first_m(tokens, dp, cap, len, n, cap), n, mp_try, &t, &m, err);
	fill = t.fill;
	if (r < 0)
		goto out;
	size_t k = m * (size_t)dp;
	border = bp_calloc(k, sizeof(size_t), err);
	group_of = bp_calloc(k, sizeof(int), err);
	dfill = bp_calloc(k, sizeof(double), err);
	if (!border || !group_of || !dfill || bp_order_by_len(len, n, order, err) < 0)
		goto out;
	/* bins with more tokens first, ties by index (token counts are exact in a double) */
	for (size_t j = 0; j < k; j++)
		dfill[j] = (double)fill[j];
	bp_order_by_cost(dfill, fill, k, border);
	for (size_t j = 0; j < k; j++) {
		size_t round = j / (size_t)dp, pos = j % (size_t)dp;
		group_of[border[j]] = (int)(round % 2 ? (size_t)dp - 1 - pos : pos);
	}
	if (bp_emit_bins(b->docs, n, order, bin_of, k, border, group_of, st->pipes, st->npipes,
			 ctx->shard, err) < 0)
		goto out;
	rc = 0;
out:
	free(len);
	free(bin_of);
	free(order);
	free(fill);
	free(border);
	free(group_of);
	free(dfill);
	return rc;
}

int bp_method_multipack(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		   struct bp_plan *out, struct bp_error *err)
{
	return bp_method_each_step(ctx, in, out, multipack_step, NULL, err);
}

/* The method's row of the table (plan/method.h struct bp_method). */
BP_METHOD_ROW(multipack) = {
	.name = "multipack",
	.solve = bp_method_multipack,
	.summary = "LPT packing that balances tokens across DP ranks",
	.paper = "multipack sampler (longest-processing-time over ranks)",
	.schedules = 1,
	.in_all = 1,
	.rank = 80,
	.price = bp_price_sort_packer,
};
