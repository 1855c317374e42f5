/* wlb_ilp.c: the "wlb-ilp" method, WLB-LLM with the exact packer: the outlier queues,
 * carried documents, max_delay, L_max and N of "wlb" (Alg. 1, Sec. 4.2; bp_wlb_plan in
 * wlb.c, the same code), and each step's packing solved as Eq. 2 by GLPK (ilp_pack.c):
 * minimise the largest micro-batch workload W = W_a + W_l (bp_cost_doc) over the step's
 * micro-batches of at most L_max tokens.
 *
 * The ILP packs exactly the documents Alg. 1's greedy placed in the step, into the same
 * micro-batch count, starting from the greedy's packing (warm start, and kept when GLPK
 * finds nothing better). So the queues and the carried documents are the greedy's, every
 * step of a wlb-ilp plan trains the same documents as the same step of the wlb plan, and
 * its packing objective is never worse than wlb's on that step: the step's "ilp" record
 * holds both (objective_us and greedy_us), and plan validation checks the inequality.
 * Letting the ILP also place documents the greedy carried would make the two methods'
 * queues diverge and their steps incomparable. */
#include "wlb.h"

#include "ilp_pack.h"

static int ilp_repack(void *arg, const double *cost, const int64_t *len, size_t n,
		      size_t nbins, int64_t cap, int *bin_of, struct bp_step *st,
		      struct bp_error *err)
{
	const struct bp_ilp_opts *o = arg;
	struct bp_solver *sv = bp_step_set_record(st, &bp_record_ilp, err);
	if (!sv)
		return -1;
	return bp_ilp_pack_improve(cost, len, n, nbins, cap, bin_of, o, sv, err);
}

int bp_method_wlb_ilp(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		      struct bp_plan *out, struct bp_error *err)
{
	struct bp_ilp_opts o;
	if (bp_ilp_read_params(out, &o, err) < 0)
		return -1;
	return bp_wlb_plan(ctx, in, out, ilp_repack, &o, err);
}

/* Its price: wlb's queues (bp_wlb_pack_price), and GLPK's search per step where the step's
 * binaries fit (bp_price_ilp_pack), at most ilp_time_limit_s, which ends the run. */
static void wlb_ilp_price(const struct bp_price_req *r, struct bp_price *p)
{
	p->own = p->pack = bp_wlb_pack_price(r);
	p->own += bp_price_ilp_pack(r, 1.0);
}

static const char *const wlb_ilp_params[] = {"ilp_time_limit_s", "ilp_gap", "ilp_node_limit",
					     "ilp_work_limit", "ilp_max_vars", "queues",
					     "thresholds", "max_len_factor", "max_delay",
					     "release", NULL};

/* The method's row of the table (plan/method.h struct bp_method). */
BP_METHOD_ROW(wlb_ilp) = {
	.name = "wlb-ilp",
	.solve = bp_method_wlb_ilp,
	.summary = "wlb's outlier queues, each step's packing solved by GLPK from the greedy",
	.paper = "WLB-LLM Sec. 4.1-4.2, Eq. 2",
	.params = wlb_ilp_params,
	.param_specs = bp_wlb_param_specs, /* the ILP budgets keep bp_ilp_read_params */
	.record = &bp_record_ilp,
	.warn = bp_ilp_warn,
	.check_params = bp_wlb_ilp_check_params,
	.carries = 1,
	.schedules = 1,
	.in_all = 1,
	.rank = 50,
	.price = wlb_ilp_price,
	.recorded = bp_wlb_recorded,
};
