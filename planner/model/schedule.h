/* schedule.h: the pipeline schedules a layout can run, as one table (plans/README.md
 * "layouts", key "schedule").
 *
 * A row is everything the planner, the simulator and balexec's engine know about a
 * schedule: its name in plans, whether it takes virtual stages, the layout and micro-batch
 * count rules it needs, and the order of a stage's ops. The event simulator (sim.c) and the
 * engine's replay (executor/engine.c) run any row's op order; the only schedule with a
 * timeline of its own is DistCA's world-synchronous ticks (planner/sim/ticks.c), flagged
 * `world_ticks`. Code outside schedule.c asks the row (bp_layout_schedule), never compares
 * names.
 *
 * Ops: a stage of a pipeline of pp stages with v virtual stages per rank (model chunks:
 * chunk c of rank s holds virtual stage c * pp + s, v = 1 without interleaving) and m
 * micro-batches runs 2 m v ops, each the forward or backward of one micro-batch on one
 * chunk. */
#ifndef BP_SCHEDULE_H
#define BP_SCHEDULE_H

#include <stddef.h>

#include "bp.h"

struct bp_layout;

/* The names of the rows that methods set by name (a layout starts as 1F1B). */
#define BP_SCHEDULE_1F1B "1f1b"
#define BP_SCHEDULE_INTERLEAVED "interleaved"
#define BP_SCHEDULE_TICKS "distca-ticks"

/* One op of a stage. */
struct bp_sched_op {
	size_t mb; /* micro-batch, 0 <= mb < m */
	int chunk; /* model chunk on this rank, 0 <= chunk < v */
	int bwd;   /* 0 forward, 1 backward */
};

struct bp_schedule {
	const char *name;  /* the plan's "schedule" value */
	const char *about; /* one line for people */
	/* The step runs one world-synchronous tick timeline over every pipeline (DistCA Fig. 8,
	 * planner/sim/ticks.c), not per-pipeline ops: `op` is NULL. */
	int world_ticks;
	/* Takes virtual stages (a layout's virtual_stages >= 2); 0: exactly 1. */
	int chunked;
	/* The layout rules of this schedule beyond bp_layout_check's own (NULL: none). */
	int (*check_layout)(const struct bp_layout *l, struct bp_error *err);
	/* Whether a pipeline of pp stages, v chunks may run m micro-batches (NULL: any m). */
	int (*check_count)(int pp, int v, size_t m, struct bp_error *err);
	/* The k-th op (0 <= k < 2 m v) of stage s. */
	void (*op)(int pp, int v, size_t m, int s, size_t k, struct bp_sched_op *out);
};

/* The row named `name`, or NULL. */
const struct bp_schedule *bp_schedule_find(const char *name);
/* The rows, in table order; *n gets their number. */
const struct bp_schedule *bp_schedule_table(size_t *n);
/* "1f1b, interleaved or distca-ticks": every row's name, for messages (truncated to n). */
void bp_schedule_names(char *buf, size_t n);
/* The default schedule of a pipeline layout (1F1B). */
const struct bp_schedule *bp_schedule_default(void);

/* Megatron-LM's interleaved 1F1B in closed form: the pipeline bubble of m equal micro-batches
 * of forward + backward time t per stage is (pp - 1) / v * t (Narayanan et al., "Efficient
 * Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", Sec. 2.2.2), so the
 * pipeline takes (m + (pp - 1) / v) * t without transfers. v = 1 is plain 1F1B. */
double bp_schedule_closed_form(int pp, int v, size_t m, double t);

#endif
