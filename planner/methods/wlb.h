/* wlb.h: WLB-LLM's Alg. 1 driver (wlb.c), shared by the "wlb" method (its greedy packing)
 * and "wlb-ilp" (wlb_ilp.c: the same queues and step contents, each step's packing solved
 * again as Eq. 2 by GLPK). Nothing else calls it. */
#ifndef BP_WLB_H
#define BP_WLB_H

#include "method.h"

/* Called once per step after the greedy has packed it: the n documents the greedy placed
 * (cost = bp_cost_doc, len in tokens; sorted by length descending) into nbins micro-batches
 * of at most cap tokens, bin_of[i] the greedy's micro-batch of document i. It may change
 * bin_of to a packing that keeps every document within cap in the same nbins, and may give
 * st a record. All pointers are borrowed for the call. Returns 0 or -1 (err says why). */
typedef int (*bp_wlb_repack_fn)(void *arg, const double *cost, const int64_t *len, size_t n,
				size_t nbins, int64_t cap, int *bin_of, struct bp_step *st,
				struct bp_error *err);

/* Runs Alg. 1 with the outlier queues (wlb.c's header comment has every rule) over the
 * drawn batches into out->steps, flush steps included. repack (NULL: keep the greedy) sees
 * each step's packing before it is emitted; the queues, the carried documents and so each
 * step's documents do not depend on it. Reads and records the parameters queues,
 * thresholds, max_len_factor and max_delay; records microbatches_per_step. Returns 0, -1 or
 * BP_INFEASIBLE. */
int bp_wlb_plan(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		struct bp_plan *out, bp_wlb_repack_fn repack, void *arg, struct bp_error *err);

/* wlb's typed queue parameters (queues, max_len_factor, max_delay, release; thresholds,
 * whose default follows queues and max_tokens, keeps its own reader): wlb's param_specs,
 * wlb-ilp's too. */
extern const struct bp_param_spec bp_wlb_param_specs[];

#endif
