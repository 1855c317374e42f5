/* solve.h: the one entry point that turns a dataset and a profile into a plan: draw the global
 * batches, run the method, predict with the shared cost model and simulator, validate.
 * Everything the plan depends on is in the options, so the same options give the same plan. */
#ifndef BP_SOLVE_H
#define BP_SOLVE_H

#include "costmodel.h"
#include "dataset.h"
#include "plan.h"
#include "profile.h"

/* The request's homogeneous layout: gpus = tp*cp*pp*dp in Megatron's placement (plan
 * layout 0). A method may add layouts of its own. */
struct bp_solve_layout {
	int gpus, tp, cp, pp, dp;
};

struct bp_solve_opts {
	const char *method;
	struct bp_solve_layout cluster; /* gpu and gpus_per_node are taken from the profile */
	int64_t steps, tokens_per_step, docs_per_step, max_tokens;
	enum bp_overlen overlen;
	enum bp_documents documents; /* what the loader hands the method (documents.h) */
	enum bp_order order;         /* DRAW, or a sample index in FILE or SHUFFLE order */
	int64_t epochs;              /* FILE, SHUFFLE: the data ends after these; 0 none */
	enum bp_last_batch last;     /* the partial last batch where the data ends */
	uint64_t seed;
	enum bp_shard shard;
	const char *dataset_name, *dataset_sha; /* recorded in the plan */
	const char *profile_sha;
	const struct bp_param *params; /* method parameters as given (checked against the
					* method's list); borrowed */
	size_t nparams;
	const void *method_input;      /* the method's own input (method.h ctx->input);
					* borrowed, may be NULL */
	/* A window of a longer run (issue 22; plans/README.md "Windows"): the plan holds the
	 * run's steps first_step .. first_step + steps - 1. Without flush_data the run ends
	 * after them (a method holding documents, wlb, flushes there); with it the run ends
	 * only where the data does, so windows of one run, planned alone, concatenate to the
	 * plan of the whole run. */
	int64_t first_step;
	int flush_data;
	/* The schedule of the request's layout (a row of planner/model/schedule.h; NULL: 1f1b)
	 * and its virtual stages per rank (interleaved; 0 or 1 otherwise). Only methods whose
	 * table row says `schedules` take one; micro-batch counts are then fitted to the
	 * schedule's rule (schedule_fit.h). */
	const char *schedule;
	int vstages;
};

/* Solves into an initialised plan. Returns 0, -1 (error) or BP_INFEASIBLE, with err. The
 * plan is released on failure. */
int bp_solve(const struct bp_dataset *ds, const struct bp_profile *prof,
	     const struct bp_solve_opts *o, struct bp_plan *out, struct bp_error *err);

/* A whole run planned and written a window of steps at a time, so that memory holds one
 * window, not the run (issue 22 item 3; `solve --plan-format lines`): the sampler streams
 * global batches (dataset.h bp_sampler), the method plans `window` of them (a method that
 * carries state keeps it between calls, method.h bp_method_run, and hands on the steps it
 * has finished), they are predicted and validated like a bp_solve plan's (each handing a
 * window plan: its first step, the documents it trains that earlier steps drew, open when
 * a delay crosses its end), placed in the run (step indices, document ids) and handed to
 * sink->steps; then header gets the plan without steps: sampling and source over its own
 * steps, the method's recorded parameters, its window fields, and the summary of every
 * step. Steps before o->first_step are planned (a method's state) but not predicted nor
 * handed on. The same plan as bp_solve, step for step (tests/scripts/test-plan-lines,
 * test-windows). 0, -1 or BP_INFEASIBLE. */
struct bp_solve_sink {
	int (*steps)(void *arg, const struct bp_plan *window, struct bp_error *err);
	void *arg;
};
int bp_solve_stream(const struct bp_dataset *ds, const struct bp_profile *prof,
		    const struct bp_solve_opts *o, size_t window,
		    const struct bp_solve_sink *sink, struct bp_plan *header,
		    struct bp_error *err);
/* bp_solve through bp_solve_stream, `window` steps at a time, into one plan (the same plan,
 * step for step), telling progress (NULL: nothing) how many steps are planned after each
 * window: what `solve` runs, so a long run reports as it goes. */
int bp_solve_progress(const struct bp_dataset *ds, const struct bp_profile *prof,
		      const struct bp_solve_opts *o, size_t window,
		      void (*progress)(void *arg, int64_t steps), void *arg, struct bp_plan *out,
		      struct bp_error *err);

/* Checks a plan against its profile: the method and its parameters are known, the
 * invariants (validate.h), and that re-predicting its decisions gives every number the plan
 * carries (micro-batch tokens and times, pipeline times, busy time and memory, every step
 * metric and every summary field, to 1e-3 us / 1 byte after rounding). Returns 0 or -1
 * naming the first difference. */
int bp_plan_check(const struct bp_plan *p, const struct bp_profile *prof,
		  struct bp_error *err);

/* Checks a plan's samples against the sample index it names (issue 22): ds must be the
 * index (sha256 equal to the plan's dataset sha256, given as ds_sha); re-reads the index
 * in the plan's recorded order and rules and requires every step's documents to be exactly
 * the samples (ids, offsets, lengths) the order puts in that step, so that with the
 * invariants every sample of the planned range is trained exactly once, in its step or in
 * a recorded later one, and nothing else is. -1 naming the first sample dropped,
 * duplicated, moved or foreign. */
int bp_plan_check_samples(const struct bp_plan *p, const struct bp_dataset *ds,
			  const char *ds_sha, struct bp_error *err);

/* bp_plan_check over a plan of lines a window at a time (at least `window` steps, extended
 * until no delay crosses its end), so memory holds a window, not the run: each window's
 * invariants and predictions as bp_plan_check checks a plan's, document ids ascending across
 * windows, and the summary line (into *file) against every step's. header:
 * bp_plan_lines_open's. */
int bp_plan_check_lines(struct bp_plan_lines *r, const struct bp_plan *header,
			const struct bp_profile *prof, size_t window, struct bp_summary *file,
			struct bp_error *err);

/* Checks the profile's model is the plan's and readies costs for its layouts (release
 * costs after success or failure). */
int bp_plan_costs(const struct bp_plan *p, const struct bp_profile *prof,
		  struct bp_costs *costs, struct bp_error *err);

/* Re-predicts p in place on costs with its method's item cost. */
int bp_plan_repredict(struct bp_plan *p, struct bp_costs *costs, struct bp_error *err);

#endif
