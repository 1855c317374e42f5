/* window.h: packing over a window of several global batches (WLB-LLM Table 2, "#global
 * batch" 1, 2, 4, 8), shared by fixed and fixed-ilp.
 *
 * The loader hands the packer the documents of w consecutive global batches at once; the
 * packer fills the w steps' micro-batches together (w * dp pipelines' worth), and the w
 * steps each train dp of those pipelines. A document may so train in a later step of its
 * window than the one it was drawn for, never an earlier one: the plan lists all of a
 * window's documents as drawn at its first step and delays those trained later to their step
 * (steps[i].delayed), so the token delay a window costs shows in the summary. w = 1 is the
 * per-batch packing. */
#ifndef BP_WINDOW_H
#define BP_WINDOW_H

#include "method.h"

/* Packs the documents of b into st's st->npipes pipelines (dp = st->npipes). */
typedef int (*bp_window_fn)(const struct bp_method_ctx *ctx, const struct bp_batch *b,
			    struct bp_step *st, const struct bp_plan *out, void *arg,
			    struct bp_error *err);

/* Fills out->steps from in's batches, window global batches at a time (the last window may be
 * shorter), calling fn once per window. A record fn sets on its step goes to the window's
 * first step. Returns 0, -1 or BP_INFEASIBLE. */
int bp_pack_windowed(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		     struct bp_plan *out, int64_t window, bp_window_fn fn, void *arg,
		     struct bp_error *err);

#endif
