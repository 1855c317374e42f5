/* predict.h: the step simulator: what a plan's decisions cost (planner/README.md "Data
 * flow").
 *
 * Per step, each micro-batch's per-stage times come from its pipeline's cost model (struct
 * bp_costs: one per (layout, pipeline)), each pipeline runs its layout's schedule (1F1B,
 * sim.h, or DistCA's world-synchronous ticks, ticks.h, where attention servers couple all
 * pipelines), the step ends with the gradient synchronisation of its sync model, and the
 * named imbalance metrics, the packing objective and bound, and the summary follow. Every
 * method's predicted numbers come from here; check re-runs it and compares. */
#ifndef BP_PREDICT_H
#define BP_PREDICT_H

#include "costmodel.h"
#include "plan.h"

/* Sync models: plan.h BP_SYNC_*. */

/* The packing weight of one document of len tokens on a pipeline (method.h: a method may
 * bring its own; bp_cost_doc by default). */
typedef int (*bp_item_cost_fn)(const struct bp_costmodel *cm, int64_t len, double *cost,
			       struct bp_error *err);

/* Fills every predicted field of p (micro-batch tokens and times, pipeline times, busy
 * time and memory, step metrics, summary). costs serves p's layouts; item_cost weighs the
 * packing metrics (NULL: bp_cost_doc). */
int bp_plan_predict(struct bp_plan *p, struct bp_costs *costs, bp_item_cost_fn item_cost,
		    struct bp_error *err);

/* Re-runs pipeline k of step st (predicted) and fills each op's start time: f_start and
 * b_start get nmbs * v * pp entries, [(j * v + c) * pp + s] with v the layout's virtual
 * stages (1 but for interleaved: [j * pp + s]; caller-owned); f_dur and b_dur (NULL: not
 * wanted) the same entries' durations, us. For timelines. */
int bp_pipe_schedule(const struct bp_plan *p, const struct bp_step *st, size_t k,
		     struct bp_costs *costs, double *f_start, double *b_start, double *f_dur,
		     double *b_dur, struct bp_error *err);

/* Plan parameter grad_sync (plan/method.h, plans/README.md "Gradient sync") for step st:
 * bp_param_grad_sync's value (1 overlap, 2 overlap-gather: Megatron-LM's overlapped gradient
 * reduce-scatter, and parameter all-gather, modelled in predict.c) when st syncs with
 * dp-allreduce, 0 when exposed or st syncs otherwise, -1 with err for a bad value. */
int bp_step_grad_overlap(const struct bp_plan *p, const struct bp_step *st,
			 struct bp_error *err);
/* For such a step (predicted): how long stage s of pipeline k waits after its last op ends,
 * in the schedule as predicted, until the step's overlapped sync is done (its end, at least
 * the slowest pipeline's), us; what a replay emulates. */
int bp_sync_overlap_wait(const struct bp_plan *p, const struct bp_step *st,
			 struct bp_costs *costs, size_t k, int s, double *wait_us,
			 struct bp_error *err);

/* The summary from the steps' predicted metrics, counts and delays alone (what
 * bp_plan_predict ends with; a plan predicted a window at a time summarises its steps' stubs
 * with it). Keeps summary.truncated and .dropped. */
int bp_plan_summarize(struct bp_plan *p, struct bp_error *err);

#endif
