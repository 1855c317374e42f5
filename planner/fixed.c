/* fixed.c: the "fixed" method, fixed-length packing balanced by the cost model: WLB-LLM
 * Sec. 3.2's "Fixed-Len Greedy" packing of one global batch (Table 2). Every micro-batch
 * holds at most max_tokens tokens; documents go costliest first (fwd+bwd time from the cost
 * model, so attention's quadratic term counts) into the least-loaded micro-batch that still
 * has room (LPT, pack.c). A step uses m = ceil(tokens / (dp * max_tokens)) micro-batches per
 * pipeline, one more each time a document finds no room. The dp*m micro-batches are then
 * dealt so pipelines' total loads balance, each pipeline's in decreasing cost. */
#include "method.h"

#include <stdlib.h>

#include "pack.h"

/* Packs one step; st's pipelines receive the micro-batches. */
static int fixed_step(const struct bp_method_ctx *ctx, const struct bp_batch *b,
		      struct bp_step *st, const struct bp_plan *out, struct bp_error *err)
{
	int dp = out->cluster.dp;
	int64_t cap = out->max_tokens;
	size_t n = b->ndocs;
	int rc = -1;
	double *cost = bp_calloc(n, sizeof(double), err);
	int64_t *len = bp_calloc(n, sizeof(int64_t), err);
	int *bin_of = bp_calloc(n, sizeof(int), err);
	double *load = NULL;
	int64_t *fill = NULL;
	int *group_of = NULL;
	size_t *order = bp_calloc(n, sizeof(size_t), err), *border = NULL;
	if (!cost || !len || !bin_of || !order)
		goto out;
	if (!n) {
		rc = 0;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		len[i] = b->docs[i].len;
		if (len[i] > cap) {
			rc = bp_infeasiblef(err, "document %lld has %lld tokens, more than "
					    "max_tokens %lld", (long long)b->docs[i].id,
					    (long long)len[i], (long long)cap);
			goto out;
		}
		cost[i] = bp_cost_doc(ctx->cm, len[i]);
	}
	size_t m = (size_t)((b->tokens + (int64_t)dp * cap - 1) / ((int64_t)dp * cap));
	if (m < 1)
		m = 1;
	for (;;) {
		size_t nbins = m * (size_t)dp;
		free(load);
		free(fill);
		load = bp_calloc(nbins, sizeof(double), err);
		fill = bp_calloc(nbins, sizeof(int64_t), err);
		if (!load || !fill)
			goto out;
		int r = bp_pack_lpt(cost, len, n, nbins, cap, bin_of, load, fill, err);
		if (r < 0)
			goto out;
		if (r == 0)
			break;
		m++; /* cannot exceed n: with n bins every document fits alone */
	}
	size_t nbins = m * (size_t)dp;
	group_of = bp_calloc(nbins, sizeof(int), err);
	if (!group_of || bp_deal_bins(load, nbins, (size_t)dp, m, group_of, err) < 0)
		goto out;
	/* Emit bins in decreasing load; spans of a bin in the packing order. */
	for (size_t k = 0; k < nbins; k++)
		fill[k] = 0; /* a tie-break key of zeros: bins by load alone */
	border = bp_calloc(nbins, sizeof(size_t), err);
	if (!border)
		goto out;
	bp_order_by_cost(load, fill, nbins, border);
	bp_order_by_cost(cost, len, n, order);
	if (bp_emit_bins(b->docs, n, order, bin_of, nbins, border, group_of, st->pipes,
			 st->npipes, ctx->shard, err) < 0)
		goto out;
	rc = 0;
out:
	free(cost);
	free(len);
	free(bin_of);
	free(load);
	free(fill);
	free(group_of);
	free(border);
	free(order);
	return rc;
}

int bp_method_fixed(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		   struct bp_plan *out, struct bp_error *err)
{
	return bp_method_each_step(ctx, in, out, fixed_step, err);
}
