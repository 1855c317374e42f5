/* solve.h: the one entry point that turns a dataset and a profile into a plan: draw the global
 * batches, run the method, predict with the shared cost model and simulator, validate.
 * Everything the plan depends on is in the options, so the same options give the same plan. */
#ifndef BP_SOLVE_H
#define BP_SOLVE_H

#include "costmodel.h"
#include "dataset.h"
#include "plan.h"
#include "profile.h"

struct bp_solve_opts {
	const char *method;
	struct bp_cluster cluster;   /* gpu and gpus_per_node are taken from the profile */
	int64_t steps, tokens_per_step, docs_per_step, max_tokens;
	enum bp_overlen overlen;
	uint64_t seed;
	enum bp_shard shard;
	const char *dataset_name, *dataset_sha; /* recorded in the plan */
	const char *profile_sha;
	const struct bp_param *params; /* method parameters as given (checked against the
					* method's list); borrowed */
	size_t nparams;
};

/* Solves into an initialised plan. Returns 0, -1 (error) or BP_INFEASIBLE, with err. The
 * plan is released on failure. */
int bp_solve(const struct bp_dataset *ds, const struct bp_profile *prof,
	     const struct bp_solve_opts *o, struct bp_plan *out, struct bp_error *err);

/* Checks a plan against its profile: invariants, and that re-predicting gives the numbers
 * the plan carries (to 1e-3 us / 1 byte after rounding). Returns 0 or -1 naming the first
 * difference. */
int bp_plan_check(const struct bp_plan *p, const struct bp_profile *prof,
		  struct bp_error *err);

/* Initialises cm for the plan's scheme after checking the profile's model matches the plan's. */
int bp_plan_costmodel(const struct bp_plan *p, const struct bp_profile *prof,
		      struct bp_costmodel *cm, struct bp_error *err);

#endif
