/* validate.h: the plan invariants (plans/README.md "Invariants"), one function every consumer
 * calls (solve before writing, check, simulate, diff, view, report and every balexec rank
 * before any backend starts).
 *
 * Checked: the cluster and every layout (layout.h); each step names a layout and has one
 * pipeline per layout pipeline and a known sync model; each drawn document trained exactly
 * once, in its step or, if delayed, in the step named; spans inside their documents and
 * tiling them; every micro-batch within its pipeline's token cap; sharding resolved;
 * attention kinds consistent (sparse: a budget per model layer, 1 <= k <= the blocks of the
 * longest span; disaggregated: a distca-ticks layout with attention servers, and CA-tasks
 * that tile every span of the micro-batch once per stage at the right tick, each with its
 * causal KV prefix, sim/check_ca.h); method records valid (their ops' validate; what a
 * record says against the plan's parameters is its method's check_params, run by
 * bp_plan_check); and, when costs is given, every rank's recorded
 * peak within the memory cap (bp_plan_check then recomputes every predicted number). */
#ifndef BP_VALIDATE_H
#define BP_VALIDATE_H

#include "costmodel.h"
#include "plan.h"

/* Returns 0 or -1 naming the first breach. costs may be NULL (no memory check). */
int bp_plan_validate(const struct bp_plan *p, struct bp_costs *costs, struct bp_error *err);

#endif
