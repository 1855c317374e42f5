/* fixed.c: the "fixed" method, fixed-length packing balanced by the cost model: WLB-LLM
 * Sec. 3.2's "Fixed-Len Greedy" packing of one global batch (Table 2). Every micro-batch
 * holds at most max_tokens tokens; documents go costliest first (fwd+bwd time from the cost
 * model, so attention's quadratic term counts) into the least-loaded micro-batch that still
 * has room (LPT, pack.c). A step uses m = ceil(tokens / (dp * max_tokens)) micro-batches per
 * pipeline, one more each time a document finds no room. The dp*m micro-batches are then
 * dealt so pipelines' total loads balance, each pipeline's in decreasing cost.
 *
 * Parameter window (default 1): pack that many global batches together (Table 2's "#global
 * batch"; blocks/window.h), the window's steps sharing its micro-batches. */
#include "method.h"

#include <math.h>
#include <stdlib.h>

#include "pack.h"
#include "window.h"

/* fixed's parameter (its row's param_specs; fixed-ilp reads window with them too). */
const struct bp_param_spec bp_fixed_param_specs[] = {
	BP_PARAM_SPEC_INT("window", 1, 1, 64, "global batches packed together"),
	{0},
};

/* Packs one step; st's pipelines receive the micro-batches. */
static int fixed_step(const struct bp_method_ctx *ctx, const struct bp_batch *b,
		      struct bp_step *st, const struct bp_plan *out, void *arg,
		      struct bp_error *err)
{
	(void)arg;
	size_t n = b->ndocs, m = 0;
	int rc = -1;
	double *cost = bp_calloc(n ? n : 1, sizeof(double), err), *load = NULL;
	int64_t *len = bp_calloc(n ? n : 1, sizeof(int64_t), err);
	int *bin_of = bp_calloc(n ? n : 1, sizeof(int), err);
	if (!cost || !len || !bin_of)
		goto out;
	if (!n) {
		rc = 0;
		goto out;
	}
	rc = bp_pack_fixed_greedy(ctx->cm, b, (int)st->npipes, out->max_tokens, out->max_tokens,
				  cost, len, bin_of, &load, &m, err);
	if (rc == 0)
		rc = bp_emit_balanced(b, cost, len, bin_of, m, st, ctx->shard, err);
out:
	free(cost);
	free(len);
	free(bin_of);
	free(load);
	return rc;
}

int bp_fixed_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			  struct bp_error *err)
{
	int64_t window;
	(void)p;
	if (bp_param_grad_sync(scratch, err) < 0)
		return -1;
	return bp_param_int(scratch, bp_fixed_param_specs, "window", &window, err);
}

int bp_method_fixed(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		   struct bp_plan *out, struct bp_error *err)
{
	int64_t window;
	if (bp_param_int(out, bp_fixed_param_specs, "window", &window, err) < 0)
		return -1;
	return bp_pack_windowed(ctx, in, out, window, fixed_step, NULL, err);
}

/* Its price (cmd/cmd_solve_limits.c): 4,500 D + 35 D mb0 window instructions per step,
 * fitted when each document scanned every micro-batch of the window. The LPT now finds the
 * bin in O(log bins) (blocks/pack.c), so this over-prices large steps (about 10x at 64 GPUs,
 * -L 1024, 8M tokens a step; within tests/scripts/test-cost-guard's x30): a safe side,
 * left for a refit with counts of the new packing. */
#define I_FIXED_DOC 4.5e3
#define I_FIXED_DOC_MB 35.0

double bp_fixed_pack_price(const struct bp_price_req *r)
{
	double window = fmax(1.0, bp_price_param(r, "window", 1));
	return I_FIXED_DOC * r->docs + I_FIXED_DOC_MB * r->docs * r->mb0 * window;
}

static void fixed_price(const struct bp_price_req *r, struct bp_price *p)
{
	p->own = p->pack = bp_fixed_pack_price(r);
}

static const char *const fixed_params[] = {"window", BP_GRAD_SYNC_PARAM, NULL};

/* The method's row of the table (plan/method.h struct bp_method). */
BP_METHOD_ROW(fixed) = {
	.name = "fixed",
	.solve = bp_method_fixed,
	.summary = "fixed-length packing: costliest document first into the least-loaded "
		   "window that fits",
	.paper = "WLB-LLM Sec. 3.2 'Fixed-Len Greedy' (Table 2)",
	.params = fixed_params,
	.param_specs = bp_fixed_param_specs,
	.check_params = bp_fixed_check_params,
	.schedules = 1,
	.in_all = 1,
	.rank = 20,
	.price = fixed_price,
	.carries_param = "window",
};
