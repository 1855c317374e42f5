/* kk.c: the "kk" method, Karmarkar-Karp balanced partitioning on a length-only workload proxy,
 * the way verl balances sequence lengths across data-parallel ranks (its seqlen balancing:
 * the largest differencing method of Karmarkar & Karp 1982, "The differencing method of set
 * partitioning", in its k-way form), plus the per-micro-batch token cap verl's partition does
 * not enforce. Called through the method table (methods.c) by bp_solve.
 *
 * Per step: k = dp * m bins with m = ceil(tokens / (dp * max_tokens)). Each document's
 * workload is bp_kk_proxy (s^2 + coef * s, coef from the model: pack.h), not the cost model:
 * this baseline shows what a FLOP proxy buys. KK partitions the documents into k bins of
 * balanced workload; bins over max_tokens are then repaired by moving documents to bins with
 * room (bp_pack_kk); when no repair exists m grows by one. The k bins are dealt m to each
 * pipeline, pipelines' workloads balanced (bp_deal_bins), each pipeline's in decreasing
 * workload. Invariant: every document whole in exactly one micro-batch within max_tokens.
 * Written from the algorithm's description, not from verl's code.
 * The partition and its repair are bp_pack_kk (blocks/kk_part.c). */
#include "method.h"

#include <math.h>
#include <stdlib.h>

#include "pack.h"

/* bp_grow_m's try: KK into dp x m bins (load and fill reallocated to fit) */
struct kk_try {
	const int64_t *w, *len;
	size_t n, dp;
	int64_t cap;
	int *bin_of;
	int64_t *load, *fill;
};

static int kk_try(size_t m, void *arg, struct bp_error *err)
{
	struct kk_try *t = arg;
	size_t k = m * t->dp;
	free(t->load);
	free(t->fill);
	t->load = bp_calloc(k, sizeof(int64_t), err);
	t->fill = bp_calloc(k, sizeof(int64_t), err);
	if (!t->load || !t->fill)
		return -1;
	return bp_pack_kk(t->w, t->len, t->n, k, t->cap, t->bin_of, t->load, t->fill, err);
}

static int kk_step(const struct bp_method_ctx *ctx, const struct bp_batch *b,
		      struct bp_step *st, const struct bp_plan *out, void *arg,
		      struct bp_error *err)
{
	(void)arg;
	int dp = bp_plan_dp(out);
	int64_t cap = out->max_tokens;
	size_t n = b->ndocs;
	int64_t coef = bp_kk_coef(&ctx->cm->prof->model);
	int64_t *len = bp_calloc(n ? n : 1, sizeof(int64_t), err);
	int64_t *w = bp_calloc(n ? n : 1, sizeof(int64_t), err);
	int *bin_of = bp_calloc(n ? n : 1, sizeof(int), err);
	size_t *order = bp_calloc(n ? n : 1, sizeof(size_t), err);
	int64_t *load = NULL, *fill = NULL;
	double *dload = NULL;
	size_t *border = NULL;
	int *group_of = NULL;
	int rc = -1;
	if (!len || !w || !bin_of || !order)
		goto out;
	rc = bp_batch_lens(b, cap, len, err);
	if (rc < 0 || !n)
		goto out;
	rc = -1;
	int64_t tokens = 0;
	for (size_t i = 0; i < n; i++) {
		w[i] = bp_kk_proxy(len[i], coef);
		tokens += len[i];
	}
	struct kk_try t = {w, len, n, (size_t)dp, cap, bin_of, NULL, NULL};
	size_t m;
	int r = bp_grow_m(bp_first_m(tokens, dp, cap, len, n, cap), n, kk_try, &t, &m, err);
	load = t.load;
	fill = t.fill;
	if (r < 0)
		goto out;
	size_t k = m * (size_t)dp;
	dload = bp_calloc(k, sizeof(double), err);
	border = bp_calloc(k, sizeof(size_t), err);
	group_of = bp_calloc(k, sizeof(int), err);
	if (!dload || !border || !group_of)
		goto out;
	for (size_t j = 0; j < k; j++)
		dload[j] = (double)load[j];
	if (bp_deal_bins(dload, k, (size_t)dp, m, group_of, err) < 0 ||
	    bp_order_by_len(len, n, order, err) < 0)
		goto out;
	bp_order_by_cost(dload, fill, k, border);
	if (bp_emit_bins(b->docs, n, order, bin_of, k, border, group_of, st->pipes, st->npipes,
			 ctx->shard, err) < 0)
		goto out;
	rc = 0;
out:
	free(len);
	free(w);
	free(bin_of);
	free(order);
	free(load);
	free(fill);
	free(dload);
	free(border);
	free(group_of);
	return rc;
}

int bp_method_kk(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		   struct bp_plan *out, struct bp_error *err)
{
	return bp_method_each_step(ctx, in, out, kk_step, NULL, err);
}

/* Its price (cmd/cmd_solve_limits.c): 80 D log2 D instructions per step for the D
 * documents' Karmarkar-Karp (its heap of partials and the melds), times its runs: one more
 * each time its repair finds no room and a micro-batch count is tried (bp_grow_m: one by one
 * for 8 tries, then doubling steps and a bisection), 2 + 100 x the share of documents of at
 * least max-tokens / 2, at most 26 (5-6 measured at 4K context; 18 at 64 GPUs, 1K context
 * and 8M tokens a step, slimpajama-c4, where one by one took 182); and 600 k log2 k once for dealing the k = mb0 bins (rounded up to dp) to
 * pipelines. Fitted to callgrind's counts of kk_step at 1,024-16,384 GPUs, 8K tokens per
 * GPU: 69-71 D log2 D x runs and 590 k log2 k (issue 24; was 40 D k log2 k per run). */
#define I_KK_MERGE 80.0
#define I_KK_DEAL 600.0

static void kk_price(const struct bp_price_req *r, struct bp_price *p)
{
	double dp = (double)r->dp, k = dp * ceil(r->mb0 / dp);
	double runs = 2.0 + fmin(24.0, 100.0 * r->long_share);
	p->own = p->pack = I_KK_MERGE * r->docs * log2(r->docs + 1.0) * runs +
			   I_KK_DEAL * k * log2(k + 1.0);
}

/* The method's row of the table (plan/method.h struct bp_method). */
BP_METHOD_ROW(kk) = {
	.name = "kk",
	.solve = bp_method_kk,
	.summary = "Karmarkar-Karp balanced partition on a workload proxy, with a token cap",
	.paper = "verl's seqlen balancing (Karmarkar-Karp)",
	.schedules = 1,
	.in_all = 1,
	.rank = 90,
	.price = kk_price,
};
