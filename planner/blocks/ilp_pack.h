/* ilp_pack.h: the min-max packing ILP of WLB-LLM Eq. 1 (fixed length, cap L) and Eq. 2
 * (variable length, cap L_max), and the step driver the fixed-ilp and wlb-ilp methods share.
 * Built on the GLPK wrapper of ilp.h. */
#ifndef BP_ILP_PACK_H
#define BP_ILP_PACK_H

#include "ilp.h"
#include "method.h"

/* One packing instance: n items of cost w (us) and len tokens into nbins bins of at most cap
 * tokens, minimising the largest bin cost. All pointers are borrowed for the call. */
struct bp_ilp_pack {
	const double *w;
	const int64_t *len;
	size_t n, nbins;
	int64_t cap;
	const int *warm_bin; /* a feasible assignment (the greedy's); required */
	/* Formulation switches (all on in the methods; off only to measure them): */
	int warm;        /* inject warm_bin into GLPK's tree */
	int symmetry;    /* items sorted by cost descending, x_ij = 0 for bin j > item i */
	int lower_bound; /* z >= bp_pack_bound (max item, mean, two of the nbins+1 largest) */
};

struct bp_ilp_pack_result {
	enum bp_ilp_status status; /* OPTIMAL, FEASIBLE or WARM_START */
	enum bp_ilp_limit limit;
	double objective, bound, gap; /* largest bin cost (us), its proven lower bound, gap */
	double solver_objective;      /* what GLPK found itself (us); inf when nothing */
	int64_t nodes, iterations; /* what GLPK spent; 0 when it was not called */
	double work;               /* as ilp.h's work_limit counts it */
	char warning[256]; /* non-empty when a limit was hit */
};

/* Solves the instance; bin_of (n entries) gets each item's bin. Never worse than warm_bin:
 * when GLPK finds nothing better, bin_of is warm_bin and the status WARM_START (OPTIMAL if
 * the search proved it). The result depends only on the inputs and o's deterministic
 * budget (nodes, work): when the wall-clock limit ends the search first, this is an error.
 * Returns 0, or -1 when GLPK failed or the time limit was reached (err says why). */
int bp_ilp_pack_solve(const struct bp_ilp_pack *in, const struct bp_ilp_opts *o, int *bin_of,
		      struct bp_ilp_pack_result *res, struct bp_error *err);

/* Reads ilp_time_limit_s, ilp_gap, ilp_node_limit, ilp_work_limit (millions of work units,
 * ilp.h) and ilp_max_vars from the plan's parameters (recording the defaults of
 * bp_ilp_opts_default) into o. */
int bp_ilp_read_params(struct bp_plan *out, struct bp_ilp_opts *o, struct bp_error *err);

/* One step of fixed-ilp / wlb-ilp: the step's documents, costs w = bp_cost_doc, go into
 * dp * m micro-batches of at most cap tokens; m starts at ceil(tokens / (dp * window)) and
 * grows while the LPT greedy (bp_pack_lpt with cap) cannot place every document. The ILP
 * starts from the greedy, the micro-batches are dealt to pipelines (bp_deal_bins) in
 * decreasing cost and st->solver is filled. A document longer than cap is infeasible. A
 * problem with more than o->max_vars binaries keeps the greedy without calling GLPK, status
 * "too-large", objective the greedy's and bound bp_pack_bound, so plans stay reproducible. */
int bp_ilp_pack_step(const struct bp_method_ctx *ctx, const struct bp_batch *b,
		     struct bp_step *st, int dp, int64_t window, int64_t cap,
		     const struct bp_ilp_opts *o, struct bp_error *err);

/* What an exact solver said about one step: the ILP methods' per-step record (plan v2
 * steps[i].record, kind "ilp"; v1's "solver"). */
struct bp_solver {
	char status[24];  /* "optimal", "feasible", "warm-start", "too-large" */
	double objective; /* best packing objective found, us */
	double bound;     /* best proven lower bound, us */
	double gap;       /* (objective - bound) / objective */
	/* wlb-ilp only (JSON greedy_us, absent elsewhere): the objective of Alg. 1's greedy on
	 * the same step, what wlb trains; objective <= greedy is checked on every plan. */
	int has_greedy;
	double greedy;    /* us */
};
extern const struct bp_record_ops bp_record_ilp;

/* wlb-ilp's packing of one step (the repack hook of wlb.h): n documents of cost (us) and
 * len (tokens), packed by the greedy into nbins micro-batches of at most cap tokens as
 * bin_of, are packed again by the ILP of Eq. 2 warm-started from bin_of, and bin_of gets
 * the result, never worse than the greedy. sv gets status, objective, bound, gap and the
 * greedy's objective. A problem with more than o->max_vars binaries keeps bin_of without
 * calling GLPK (status "too-large"). Pointers are borrowed. Returns 0 or -1. */
int bp_ilp_pack_improve(const double *cost, const int64_t *len, size_t n, size_t nbins,
			int64_t cap, int *bin_of, const struct bp_ilp_opts *o,
			struct bp_solver *sv, struct bp_error *err);

/* The method table's warning for fixed-ilp and wlb-ilp: how many steps were not proven
 * optimal or too large to search. */
void bp_ilp_warn(const struct bp_plan *p, char *buf, size_t n);

#endif
