/* diff.h: what changed between two plans, in human terms (`balplan diff`).
 *
 * Two plans are equivalent when they have the same inputs (digests, seed), cluster, model,
 * method and parameters, sampling, and per step the same documents, delays and micro-batches
 * (pipelines in order, micro-batches in order, the spans of a micro-batch as a set), and
 * predicted step times within 1e-3 us. Otherwise the diff lists what differs: inputs and
 * configuration first, then per step which micro-batches and documents moved and the predicted
 * step-time change, then the summary change. */
#ifndef BP_DIFF_H
#define BP_DIFF_H

#include "plan.h"

struct bp_diff {
	int equivalent;
	char **lines;     /* owned; each a NUL-terminated line without newline */
	size_t nlines;
	size_t omitted;   /* lines not kept beyond max_lines */
};

void bp_diff_init(struct bp_diff *d);
void bp_diff_release(struct bp_diff *d);

/* Compares a and b; keeps at most max_lines lines of per-step detail (0: no limit). */
int bp_plan_diff(const struct bp_plan *a, const struct bp_plan *b, size_t max_lines,
		 struct bp_diff *out, struct bp_error *err);

#endif
