/* trace.h: balplan.trace/v2 (executor/README.md "Trace"; v1 is read too): what balexec measured, per step,
 * per rank and per micro-batch, next to what the plan predicted. balexec writes it (rank 0,
 * after a gather); balplan report reads it.
 *
 * Order: steps in replay order (ascending plan index); a step's ranks by world rank; a
 * rank's micro-batches by index in its pipeline (the plan's order, not execution order).
 * Measured times are real microseconds on the backend's clock, not divided by time_scale. */
#ifndef BP_TRACE_H
#define BP_TRACE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "bp.h"

#define BP_TRACE_FORMAT "balplan.trace/v2"
#define BP_TRACE_FORMAT_V1 "balplan.trace/v1"

struct bp_trace_mb {
	double fwd_start_us, fwd_us; /* start from the step start; op time incl. collectives */
	double bwd_start_us, bwd_us;
};

struct bp_trace_rank {
	int rank;
	/* The rank's role in this step (the step's layout): pipeline and stage (-1 each when
	 * the layout leaves the rank out of every pipeline), CP and TP position. A v1 trace's
	 * dp_i and pp_i become pipe and stage of layout 0. */
	int layout, pipe, stage, cp_i, tp_i;
	double step_us;      /* step start (after the world barrier) to grad sync end */
	double pipeline_us;  /* step start to the end of the rank's last 1F1B op */
	double grad_sync_us; /* pipeline end to grad sync end (waits for slower replicas too) */
	struct bp_trace_mb *mbs; /* owned */
	size_t nmbs;
};

struct bp_trace_step {
	int64_t index;       /* plan step index */
	double predicted_us; /* the plan's step_us (not scaled) */
	double step_us;      /* measured: slowest rank's step_us */
	struct bp_trace_rank *ranks; /* world entries, by rank; owned */
	size_t nranks;
};

struct bp_trace {
	char plan_sha[65];   /* sha256 of the plan file's bytes */
	char method[32];     /* the plan's method */
	char backend[32];
	double time_scale;
	double timeout_s;
	int64_t max_bytes;
	int warmup;
	int world;
	struct bp_trace_step *steps; /* owned */
	size_t nsteps;
};

void bp_trace_init(struct bp_trace *t);
void bp_trace_release(struct bp_trace *t);

/* Codec. to_json returns a new reference (NULL on failure); from_json fills an initialised
 * trace, strictly (unknown keys, wrong types, inconsistent counts are errors naming the
 * path); release it after failure too. */
json_t *bp_trace_to_json(const struct bp_trace *t);
int bp_trace_from_json(struct bp_trace *t, json_t *root, struct bp_error *err);
/* Decodes a trace from text (a leading UTF-8 BOM skipped). Before the JSON tree is built, one
 * pass over the text checks that the steps' indices increase, so a large trace with a step out
 * of order is rejected in the time it takes to read it, not after building it whole (the
 * message is from_json's). Then as bp_json_parse_text with bp_trace_from_json. */
int bp_trace_parse(struct bp_trace *t, const char *text, size_t len, struct bp_error *err);

#endif
