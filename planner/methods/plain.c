/* plain.c: the "plain" method, the Megatron-LM baseline every paper compares against
 * (WLB-LLM Sec. 3 and Sec. 6 "Plain-4D"): documents in the order the loader drew them fill
 * context windows of max_tokens tokens, and window w of a step goes to pipeline w mod dp.
 * Balance is whatever the data gives. What a window holds follows the plan's document mode
 * (documents.h), so plain trains the same work as every other method:
 *   whole       a document that does not fit the window's remaining room opens the next
 *               window (no drawn document is longer than a window, so none is cut);
 *   cut         the loader's pieces fill each window exactly (they were cut at its
 *               boundaries), so this is Megatron's loader;
 *   per-method  plain cuts itself: the documents are concatenated and cut at window
 *               boundaries, a document crossing one split into two spans, each trained as its
 *               own sequence (less attention than whole documents; solve before the option).
 * Parameter deal: round-robin (the default, above) or balanced, the stronger Megatron
 * baseline of DistCA Sec. 6.1 (windows dealt to pipelines to even their cost; below). */
#include "method.h"
#include "pack.h"

#include <stdlib.h>
#include <string.h>

/* A step's windows: spans[start[w] .. start[w + 1]). */
struct windows {
	struct bp_span *spans;
	size_t n, cap;
	size_t *start; /* [nw + 1] */
	size_t nw, capw;
};

static int add_span(struct windows *W, struct bp_span sp, struct bp_error *err)
{
	if (W->n == W->cap) {
		size_t nc = W->cap ? W->cap * 2 : 64;
		struct bp_span *nw = bp_realloc_array(W->spans, nc, sizeof(*nw), err);
		if (!nw)
			return -1;
		W->spans = nw;
		W->cap = nc;
	}
	W->spans[W->n++] = sp;
	return 0;
}

/* Closes the open window (spans since the last close), if it holds any. */
static int close_window(struct windows *W, struct bp_error *err)
{
	size_t from = W->nw ? W->start[W->nw] : 0;
	if (W->n == from)
		return 0;
	if (W->nw + 2 > W->capw) {
		size_t nc = W->capw ? W->capw * 2 : 64;
		size_t *ns = bp_realloc_array(W->start, nc, sizeof(*ns), err);
		if (!ns)
			return -1;
		W->start = ns;
		W->capw = nc;
	}
	if (!W->nw)
		W->start[0] = 0;
	W->start[++W->nw] = W->n;
	return 0;
}

/* deal=balanced (DistCA Sec. 6.1's Megatron baseline, which reorders micro-batches across
 * data-parallel ranks to even their FLOPs): the windows, costliest first, each to the
 * least-loaded pipeline that has fewer than ceil(windows / dp) (ties: the lower pipeline);
 * a pipeline then runs its windows in the loader's order. */
static int deal_balanced(const struct bp_method_ctx *ctx, const struct windows *W, int dp,
			 int *pipe_of, struct bp_error *err)
{
	size_t nw = W->nw, per = (nw + (size_t)dp - 1) / (size_t)dp;
	double *cost = bp_calloc(nw + 1, sizeof(double), err), *load = NULL;
	int64_t *len = bp_calloc(nw + 1, sizeof(int64_t), err);
	size_t *order = bp_calloc(nw + 1, sizeof(size_t), err), used;
	struct bp_lpt_opts o = {.nbins = (size_t)dp, .maxbins = (size_t)dp, .cap = INT64_MAX,
				.per = per};
	int rc = -1;
	load = bp_calloc((size_t)dp, sizeof(double), err);
	if (!cost || !len || !order || !load)
		goto out;
	for (size_t w = 0; w < nw; w++)
		for (size_t q = W->start[w]; q < W->start[w + 1]; q++) {
			double c;
			if (bp_cost_doc(ctx->cm, W->spans[q].len, &c, err) < 0)
				goto out;
			cost[w] += c;
			len[w] += W->spans[q].len;
		}
	/* LPT with a count cap and no token cap (pack.h bp_pack_lpt_ex); dp * per >= nw, so
	 * every window finds a pipeline */
	rc = bp_pack_lpt_ex(&o, cost, len, nw, order, pipe_of, load, NULL, &used, err);
	if (rc > 0)
		rc = bp_errorf(err, "internal: %zu windows do not fit %d pipelines", nw, dp);
out:
	free(cost);
	free(len);
	free(order);
	free(load);
	return rc;
}

static const char *const plain_deals[] = {"round-robin", "balanced", NULL};

/* plain's parameter (its row's param_specs). */
static const struct bp_param_spec plain_specs[] = {
	BP_PARAM_SPEC_CHOICE("deal", plain_deals, "how windows go to pipelines"),
	{0},
};

/* Reads parameter deal (recording its default): 1 balanced, 0 round-robin, -1 error. */
static int read_deal(struct bp_plan *p, struct bp_error *err)
{
	int deal;
	if (bp_param_choice(p, plain_specs, "deal", &deal, err) < 0)
		return -1;
	return deal == 1;
}

int bp_plain_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			  struct bp_error *err)
{
	(void)p;
	return read_deal(scratch, err) < 0 || bp_param_grad_sync(scratch, err) < 0 ? -1 : 0;
}

/* What plain keeps between steps (bp_method_each_step's arg): its scratch and parameter. */
struct plain_run {
	struct windows W;
	int *pipe_of; /* [cap_pipe]: window w's pipeline */
	size_t cap_pipe;
	int balanced; /* deal=balanced */
};

/* One step: the batch's documents in the loader's order into windows, dealt to pipelines. */
static int plain_step(const struct bp_method_ctx *ctx, const struct bp_batch *b,
		      struct bp_step *st, const struct bp_plan *out, void *arg,
		      struct bp_error *err)
{
	struct plain_run *pr = arg;
	struct windows *W = &pr->W;
	int dp = bp_plan_dp(out);
	int64_t cap = out->max_tokens;
	int cut = out->documents == BP_DOCS_PER_METHOD;
	int64_t fill = 0;
	W->n = W->nw = 0;
	for (size_t i = 0; i < b->ndocs; i++) {
		int64_t off = 0, len = b->docs[i].len;
		if (!cut && fill && len > cap - fill) { /* next-fit: close the window */
			if (close_window(W, err) < 0)
				return -1;
			fill = 0;
		}
		while (off < len) {
			int64_t take = len - off;
			if (take > cap - fill)
				take = cap - fill;
			if (add_span(W, (struct bp_span){b->docs[i].id, off, take}, err) < 0)
				return -1;
			off += take;
			fill += take;
			if (fill == cap) {
				if (close_window(W, err) < 0)
					return -1;
				fill = 0;
			}
		}
	}
	if (close_window(W, err) < 0)
		return -1;
	if (W->nw > pr->cap_pipe) {
		int *np = bp_realloc_array(pr->pipe_of, W->nw, sizeof(*np), err);
		if (!np)
			return -1;
		pr->pipe_of = np;
		pr->cap_pipe = W->nw;
	}
	for (size_t w = 0; w < W->nw; w++) /* window w to pipeline w mod dp */
		pr->pipe_of[w] = (int)(w % (size_t)dp);
	if (pr->balanced && deal_balanced(ctx, W, dp, pr->pipe_of, err) < 0)
		return -1;
	for (size_t w = 0; w < W->nw; w++)
		if (bp_pipe_add_mb(&st->pipes[pr->pipe_of[w]], W->spans + W->start[w],
				   W->start[w + 1] - W->start[w], ctx->shard, err) < 0)
			return -1;
	return 0;
}

int bp_method_plain(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		    struct bp_plan *out, struct bp_error *err)
{
	struct plain_run pr;
	memset(&pr, 0, sizeof(pr));
	pr.balanced = read_deal(out, err);
	if (pr.balanced < 0)
		return -1;
	int rc = bp_method_each_step(ctx, in, out, plain_step, &pr, err) < 0 ? -1 : 0;
	free(pr.W.spans);
	free(pr.W.start);
	free(pr.pipe_of);
	return rc;
}

static const char *const plain_params[] = {"deal", BP_GRAD_SYNC_PARAM, NULL};

/* The method's row of the table (plan/method.h struct bp_method). */
BP_METHOD_ROW(plain) = {
	.name = "plain",
	.solve = bp_method_plain,
	.summary = "documents in loader order cut into fixed context windows, dealt round-robin",
	.paper = "Megatron-LM baseline (WLB-LLM Sec. 3, 'Plain-4D'; deal=balanced: "
		   "DistCA Sec. 6.1)",
	.params = plain_params,
	.param_specs = plain_specs,
	.check_params = bp_plain_check_params,
	.schedules = 1,
	.in_all = 1,
	.baseline = 1,
	.rank = 10,
};
