/* check_ca.h: the CA-task invariants of one step (validate.h's "disaggregated" clause), on
 * the plan format alone: DistCA's CA-tasks (Sec. 4.1-4.2) tile every span of a disaggregated
 * micro-batch once per stage at the tick ticks.h lays out, each with its causal KV prefix. */
#ifndef BP_CHECK_CA_H
#define BP_CHECK_CA_H

#include "plan.h"

/* Step i (st) of p: 0, or -1 naming the first breach (a step without disaggregated
 * micro-batches or CA-tasks has none). */
int bp_check_ca_tasks(const struct bp_plan *p, const struct bp_step *st, size_t i,
		      struct bp_error *err);

#endif
