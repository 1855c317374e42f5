/* wlb_ilp.c: the "wlb-ilp" method, WLB-LLM Sec. 4.1's variable-length packing, Eq. 2, solved
 * per global batch by GLPK (ilp_pack.c): minimise the largest micro-batch workload
 * W = W_a + W_l (bp_cost_doc: attention plus linear layers and collectives) with micro-batches
 * of up to L_max tokens. No outlier delay (Sec. 4.2): every document trains in the step that
 * drew it; the "wlb" method (wlb.c) is the heuristic with delay queues.
 *
 * Choices the paper leaves open:
 *   L_max = min(max_len_factor * max_tokens, the largest micro-batch such that on every stage
 *     s the model state plus pp - s in-flight micro-batches of L_max tokens (the 1F1B
 *     maximum, split over cp ranks) fit the usable memory), never below max_tokens: Eq. 2's
 *     "maximum sequence length permitted by GPU memory". It is the plan's
 *     max_microbatch_tokens; default factor 2.
 *   Micro-batches per step: dp * m with m = ceil(tokens / (dp * max_tokens)) as in "fixed",
 *     so fixed-ilp and wlb-ilp differ only in the cap (with the default budget of
 *     pp * dp * max_tokens tokens per step, m = pp: WLB's global batch of PP x DP
 *     micro-batches); more only when the greedy cannot place every document within L_max.
 *   Warm start: the variable-length greedy, costliest document first into the least-loaded
 *     micro-batch whose tokens stay within L_max (bp_pack_lpt with cap L_max: Alg. 1's packing
 *     without the queues). */
#include "method.h"

#include <stdio.h>

#include "ilp_pack.h"

/* The largest micro-batch (tokens) whose 1F1B in-flight activations fit every stage. */
static int64_t memory_lmax(const struct bp_costmodel *cm, int64_t hi)
{
	int64_t cap = bp_cost_mem_cap(cm), lo = 0;
	int cp = cm->sc.cp, pp = cm->sc.pp;
	while (lo < hi) { /* act_bytes grows with tokens: bisect on the largest that fits */
		int64_t mid = lo + (hi - lo + 1) / 2, per_rank = (mid + cp - 1) / cp;
		int fits = 1;
		for (int s = 0; s < pp && fits; s++)
			fits = bp_cost_state_bytes(cm, s) +
				       (int64_t)(pp - s) * bp_cost_act_bytes(cm, s, per_rank) <=
			       cap;
		if (fits)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

int bp_method_wlb_ilp(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		      struct bp_plan *out, struct bp_error *err)
{
	struct bp_ilp_opts o;
	double factor;
	int64_t L = out->max_tokens;
	if (bp_ilp_read_params(out, &o, err) < 0 ||
	    bp_method_param_real(out, "max_len_factor", 2.0, 1.0, 64.0, &factor, err) < 0)
		return -1;
	int64_t lmax = memory_lmax(ctx->cm, (int64_t)(factor * (double)L));
	if (lmax < L)
		lmax = L; /* bp_solve already checked that max_tokens fits */
	bp_plan_set_mb_cap(out, lmax);
	if (bp_method_alloc_steps(out, in, in->n, err) < 0)
		return -1;
	for (size_t s = 0; s < in->n; s++) {
		int rc = bp_ilp_pack_step(ctx, &in->b[s], &out->steps[s], bp_plan_dp(out), L,
					  lmax, &o, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}
