/* check_ca.h: the CA-task invariants of one step (validate.h's "disaggregated" clause), on
 * the plan format alone: DistCA's CA-tasks (Sec. 4.1-4.2) tile every span of a disaggregated
 * micro-batch once per stage at the tick ticks.h lays out, each with its causal KV prefix. */
#ifndef BP_CHECK_CA_H
#define BP_CHECK_CA_H

#include "plan.h"

/* A step's spans sorted by (doc, offset), each with its place: the index both CA checks
 * search for the span holding a task's queries. */
struct bp_step_span {
	int64_t doc, offset, len;
	size_t pipe, mb, span;
};
/* Every span of st, sorted (*n of them; the caller frees the array), or NULL with err. */
struct bp_step_span *bp_step_spans(const struct bp_step *st, size_t *n, struct bp_error *err);
/* The index past the last span of doc that starts at or before token at (binary search;
 * sp[result - 1] holds token at when it is doc's and reaches past at). */
size_t bp_step_span_after(const struct bp_step_span *sp, size_t n, int64_t doc, int64_t at);

/* Step i (st) of p: 0, or -1 naming the first breach (a step without disaggregated
 * micro-batches or CA-tasks has none). */
int bp_check_ca_tasks(const struct bp_plan *p, const struct bp_step *st, size_t i,
		      struct bp_error *err);

/* Step i's record, when its ops keep DistCA's tick-schedule decisions (the "distca" record,
 * ca_sched.h struct bp_ca_record), against the step; run after bp_check_ca_tasks and the
 * record's own validate (check_ca_record.c). One scheduler call per (tick, nano-batch) with
 * CA-tasks, in that order, and each call's mean_pairs, max_before_pairs (every task on its
 * queries' linear rank: its pipeline's stage at that tick, that TP group's in-place server),
 * max_after_pairs, moved_pairs (at least, under the parameter two_sided 1) and a2a_bytes_max
 * re-derived from its tasks, their servers, the ping/pong split, the layout's servers and
 * the model's bytes per token; 0, or -1 naming the step, call and field with the recorded
 * and the derived figure. */
int bp_check_ca_record(const struct bp_plan *p, const struct bp_step *st, size_t i,
		       struct bp_error *err);

#endif
