/* view.h: one rank's view of a plan step (balplan.rankview/v1, plans/README.md "A rank's
 * view"): what a training process with that global rank trains in that step. The same
 * content executor/python/balplan computes, so the two are tested against each other
 * (issue 23 item 4; `balplan view`). */
#ifndef BP_VIEW_H
#define BP_VIEW_H

#include <jansson.h>

#include "plan.h"

#define BP_RANKVIEW_FORMAT "balplan.rankview/v1"

/* The view of global rank `rank` in step `step` (a step index of the plan): its role in the
 * step's layout (pipeline, stage, tp and cp position, or none), and every micro-batch of its
 * pipeline in execution order with spans naming samples, cu_seqlens and the packed-token
 * ranges its CP position holds; the step's trained tokens (the loss normaliser). A new
 * reference, or NULL with err (a step past the end, a rank outside the cluster). */
json_t *bp_rank_view(const struct bp_plan *p, const struct bp_doc_index *docs, int64_t step,
		     int rank, struct bp_error *err);

#endif
