/* sim.h: the event simulator every method's prediction comes from.
 *
 * bp_sim_1f1b runs one pipeline's 1F1B schedule (PipeDream-Flush / Megatron: stage s runs
 * min(pp-s-1, m) warm-up forwards, then alternates one forward and one backward, then drains
 * backwards) with per-micro-batch, per-stage forward and backward times and a point-to-point
 * transfer between stages. Each op starts when its stage is free and its input has arrived.
 * With equal micro-batches the pipeline takes (m + pp - 1)(t_f + t_b); one slow micro-batch
 * lies on the critical path through every stage (WLB-LLM Sec. 3.1, Fig. 5). */
#ifndef BP_SIM_H
#define BP_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "bp.h"

struct bp_sim_pipe {
	int pp;              /* stages >= 1 */
	size_t m;            /* micro-batches (0 allowed: an idle pipeline) */
	const double *fwd;   /* [j * pp + s], us */
	const double *bwd;   /* [j * pp + s], us */
	const double *p2p;   /* [j]: stage-to-stage transfer of micro-batch j, us; NULL: 0 */
	const int64_t *act;  /* [j * pp + s]: activation bytes held from F to B; NULL: none */
};

struct bp_sim_result {
	double end;          /* when the last op of any stage ends, us */
	double *busy;        /* [pp] caller-owned: compute time per stage */
	double *finish;      /* [pp] caller-owned: when each stage's last op ends */
	int64_t *peak_act;   /* [pp] caller-owned: most activation bytes held at once */
	double *f_start;     /* [j * pp + s] caller-owned or NULL: op start times */
	double *b_start;     /* [j * pp + s] caller-owned or NULL */
};

/* The k-th op (0 <= k < 2m) of stage s in a 1F1B pipeline of pp stages and m micro-batches:
 * min(pp - s - 1, m) warm-up forwards, then one forward and one backward, then the drain.
 * Sets *mb and returns 0 for a forward, 1 for a backward. The simulator and balexec's engine
 * both run ops in this order. */
int bp_sim_1f1b_op(int pp, size_t m, int s, size_t k, size_t *mb);

/* Runs the schedule. The result arrays must hold pp (or m*pp) entries. Returns 0, or -1 on
 * bad input (negative or non-finite time). */
int bp_sim_1f1b(const struct bp_sim_pipe *in, struct bp_sim_result *out, struct bp_error *err);

#endif
