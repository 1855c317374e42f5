/* fixed_ilp.c: the "fixed-ilp" method, WLB-LLM Sec. 3.2's "Fixed-Len Solver": Eq. 1 solved
 * per global batch by GLPK (ilp_pack.c). Every micro-batch holds at most max_tokens tokens;
 * the step uses the micro-batch count of the "fixed" greedy (m = ceil(tokens / (dp *
 * max_tokens)) per pipeline, more while the greedy finds no room), the ILP starts from that
 * greedy's packing and is never worse than it, and the micro-batches are dealt to pipelines
 * as fixed.c deals them. Each step records the solver's status, objective, bound and gap.
 *
 * Parameters: ilp_node_limit and ilp_work_limit (the deterministic budget per step: nodes,
 * and work scaled by the problem's size, ilp.h), ilp_time_limit_s (a safety net per step: a
 * step it ends is an error, since its result would depend on machine speed), ilp_gap
 * (relative gap at which a step counts as optimal), ilp_max_vars. */
#include "method.h"

#include "ilp_pack.h"

int bp_method_fixed_ilp(const struct bp_method_ctx *ctx, const struct bp_batches *in,
			struct bp_plan *out, struct bp_error *err)
{
	struct bp_ilp_opts o;
	if (bp_ilp_read_params(out, &o, err) < 0)
		return -1;
	if (bp_method_alloc_steps(out, in, in->n, err) < 0)
		return -1;
	for (size_t s = 0; s < in->n; s++) {
		int rc = bp_ilp_pack_step(ctx, &in->b[s], &out->steps[s], bp_plan_dp(out),
					  out->max_tokens, out->max_tokens, &o, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}
