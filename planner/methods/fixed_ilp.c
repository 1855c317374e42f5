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
 * (relative gap at which a step counts as optimal), ilp_max_vars; window (default 1): pack
 * that many global batches together, one ILP per window (Table 2's "#global batch";
 * blocks/window.h), its record on the window's first step. */
#include "method.h"

#include <math.h>
#include <string.h>

#include "ilp_pack.h"
#include "window.h"

static int ilp_window(const struct bp_method_ctx *ctx, const struct bp_batch *b,
		      struct bp_step *st, const struct bp_plan *out, void *arg,
		      struct bp_error *err)
{
	return bp_ilp_pack_step(ctx, b, st, (int)st->npipes, out->max_tokens, out->max_tokens,
				arg, err);
}

int bp_fixed_ilp_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			      struct bp_error *err)
{
	struct bp_ilp_opts o;
	int64_t window;
	(void)p;
	if (bp_ilp_read_params(scratch, &o, err) < 0)
		return -1;
	/* wlb-ilp shares the ILP parameters; its window is fixed-ilp's only */
	if (!bp_plan_param(scratch, "window") && !strcmp(p->method, "wlb-ilp"))
		return 0;
	return bp_param_int(scratch, bp_fixed_param_specs, "window", &window, err);
}

int bp_method_fixed_ilp(const struct bp_method_ctx *ctx, const struct bp_batches *in,
			struct bp_plan *out, struct bp_error *err)
{
	struct bp_ilp_opts o;
	int64_t window;
	if (bp_ilp_read_params(out, &o, err) < 0 ||
	    bp_param_int(out, bp_fixed_param_specs, "window", &window, err) < 0)
		return -1;
	return bp_pack_windowed(ctx, in, out, window, ilp_window, &o, err);
}

/* Its price: fixed's greedy (bp_fixed_pack_price), and GLPK's search per window where the
 * window's binaries fit (bp_price_ilp_pack), at most ilp_time_limit_s, which ends the run. */
static void fixed_ilp_price(const struct bp_price_req *r, struct bp_price *p)
{
	p->own = p->pack = bp_fixed_pack_price(r);
	p->own += bp_price_ilp_pack(r, fmax(1.0, bp_price_param(r, "window", 1)));
}

static const char *const fixed_ilp_params[] = {"ilp_time_limit_s", "ilp_gap",
					       "ilp_node_limit", "ilp_work_limit",
					       "ilp_max_vars", "window", NULL};

/* The method's row of the table (plan/method.h struct bp_method). */
BP_METHOD_ROW(fixed_ilp) = {
	.name = "fixed-ilp",
	.solve = bp_method_fixed_ilp,
	.summary = "fixed-length packing solved exactly by GLPK, warm-started from fixed",
	.paper = "WLB-LLM Sec. 3.2, Eq. 1",
	.params = fixed_ilp_params,
	.param_specs = bp_fixed_param_specs, /* window; the ILP budgets keep
					       * bp_ilp_read_params (blocks/ilp_pack.c) */
	.record = &bp_record_ilp,
	.warn = bp_ilp_warn,
	.check_params = bp_fixed_ilp_check_params,
	.schedules = 1,
	.in_all = 1,
	.rank = 40,
	.price = fixed_ilp_price,
	.carries_param = "window",
};
