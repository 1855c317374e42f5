/* solve_fixture.h: the unit tests' solve requests: the options every test's bp_solve call
 * shares (the method on a cluster of one scheme, documents cut at the cap, sequence sharding,
 * a dataset preset named in the plan with placeholder digests, codec.h), the solve of a
 * request on its preset, and the analytic H100 profile of a preset model. Include after
 * check.h. */
#ifndef BP_TEST_SOLVE_FIXTURE_H
#define BP_TEST_SOLVE_FIXTURE_H

#include "analytic.h"
#include "codec.h"
#include "dataset.h"
#include "solve.h"

/* method on gpus GPUs of scheme sc (dp the rest), the preset dataset; the caller sets the
 * steps, the cap, the step size, the seed and what else it tests. */
static inline struct bp_solve_opts test_solve_opts(const char *method, const char *dataset,
						   struct bp_scheme sc, int gpus)
{
	return (struct bp_solve_opts){
		.method = method,
		.cluster = {.gpus = gpus, .tp = sc.tp, .cp = sc.cp, .pp = sc.pp,
			    .dp = gpus / (sc.tp * sc.cp * sc.pp)},
		.overlen = BP_OVERLEN_TRUNCATE, .shard = BP_SHARD_SEQUENCE,
		.dataset_name = dataset, .dataset_sha = TEST_DATASET_SHA,
		.profile_sha = TEST_PROFILE_SHA,
	};
}

/* bp_solve of o on the preset o->dataset_name (a preset that does not load is a failed
 * check); bp_solve's status, err filled. */
static inline int test_solve_preset(const struct bp_profile *prof, const struct bp_solve_opts *o,
				    struct bp_plan *plan, struct bp_error *err)
{
	struct bp_dataset ds;
	bp_dataset_init(&ds);
	CHECK(bp_dataset_preset(&ds, o->dataset_name, err) == 0);
	int rc = bp_solve(&ds, prof, o, plan, err);
	bp_dataset_release(&ds);
	return rc;
}

/* prof (initialised here) = the analytic profile of model on H100s for scheme sc (one fit),
 * documents up to max_len; a profile that cannot be made is a failed check. */
static inline void test_h100_profile(struct bp_profile *prof, const char *model,
				     struct bp_scheme sc, int64_t max_len)
{
	struct bp_error err = {""};
	bp_profile_init(prof);
	CHECK(bp_profile_analytic(prof, bp_gpu_preset("H100"), bp_model_preset(model), &sc, 1,
				  max_len, &err) == 0);
}

#endif
