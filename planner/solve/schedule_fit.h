/* schedule_fit.h: a method's micro-batches made to meet the count rule of the schedule its
 * layout runs (schedule.h check_count), before prediction. Megatron-LM's interleaved 1F1B runs
 * a pipeline's micro-batches in groups of pp, so a pipeline needs a multiple of pp of them;
 * a method packs for its own counts (balance, the token cap), so solve first moves whole
 * micro-batches, the cheapest, between the step's pipelines (in a homogeneous layout, where
 * any pipeline runs any micro-batch alike) until at most one pipeline is off, then splits the
 * costliest micro-batch of several documents at a document boundary into two of about equal
 * cost, and again, until every count is a multiple of pp. No document is cut or leaves its
 * step, and splitting only shortens micro-batches, so the token cap and the documents'
 * steps hold. Called by planner/solve/solve.c for every method's steps. */
#ifndef BP_SCHEDULE_FIT_H
#define BP_SCHEDULE_FIT_H

#include "costmodel.h"
#include "plan.h"

/* Fits every step of p whose layout's schedule has a count rule; a no-op otherwise. Steps
 * that cannot be fitted (no micro-batch of two or more documents left to split) fail with
 * err naming the step, the pipeline and what to change. changed gets the moves and splits
 * made (may be NULL). */
int bp_plan_fit_schedule(struct bp_plan *p, struct bp_costs *costs, int64_t *changed,
			 struct bp_error *err);

#endif
