/* sim.h: the event simulator every method's prediction comes from.
 *
 * bp_sim_pipeline runs one pipeline under a schedule of the table (planner/model/schedule.h:
 * 1F1B, PipeDream-Flush as Megatron-LM runs it, or Megatron-LM's interleaved 1F1B with v
 * model chunks per rank) with per-micro-batch, per-(chunk, stage) forward and backward times
 * and a point-to-point transfer between consecutive virtual stages. Each op starts when its
 * stage is free and its input has arrived. With equal micro-batches 1F1B takes
 * (m + pp - 1)(t_f + t_b) and interleaved 1F1B (m + (pp - 1) / v)(t_f + t_b); one slow
 * micro-batch lies on the critical path through every stage (WLB-LLM Sec. 3.1, Fig. 5). */
#ifndef BP_SIM_H
#define BP_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "bp.h"
#include "schedule.h"

/* Per-op arrays are indexed [(j * v + c) * pp + s]: micro-batch j, chunk c, stage s (virtual
 * stage c * pp + s); with v = 1 that is [j * pp + s]. */
struct bp_sim_pipe {
	int pp;              /* stages >= 1 */
	size_t m;            /* micro-batches (0 allowed: an idle pipeline) */
	const double *fwd;   /* per op, us */
	const double *bwd;   /* per op, us */
	const double *p2p;   /* [j]: one hop between virtual stages of micro-batch j, us; NULL: 0 */
	const int64_t *act;  /* per op: activation bytes held from F to B; NULL: none */
	const struct bp_schedule *sched; /* the op order; NULL: 1F1B */
	int v;               /* model chunks per rank; 0 or 1: one */
};

struct bp_sim_result {
	double end;          /* when the last op of any stage ends, us */
	double *busy;        /* [pp] caller-owned: compute time per stage */
	double *finish;      /* [pp] caller-owned: when each stage's last op ends */
	int64_t *peak_act;   /* [pp] caller-owned: most activation bytes held at once */
	double *f_start;     /* per op, caller-owned or NULL: op start times */
	double *b_start;     /* per op, caller-owned or NULL */
};

/* Runs the schedule. The result arrays must hold pp (or m*v*pp) entries. Returns 0, or -1 on
 * bad input (negative or non-finite time, a schedule without per-pipeline ops). */
int bp_sim_pipeline(const struct bp_sim_pipe *in, struct bp_sim_result *out,
		    struct bp_error *err);

#endif
