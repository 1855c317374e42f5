/* sim.c: the pipeline event simulator (sim.h). Called by the step simulator (predict.c) for
 * every pipeline of every step, so every method is predicted by the same code; the op order
 * comes from the schedule's row (planner/model/schedule.c), which balexec's engine
 * (executor/engine.c) replays too. Invariant: ops on one stage never overlap and run in the
 * schedule's order; an op never starts before its input exists. */
#include "sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int bp_sim_pipeline(const struct bp_sim_pipe *in, struct bp_sim_result *out,
		    struct bp_error *err)
{
	int pp = in->pp, v = in->v > 1 ? in->v : 1, rc = -1;
	const struct bp_schedule *sch = in->sched ? in->sched : bp_schedule_default();
	size_t m = in->m, nv = (size_t)pp * (size_t)v, nops = m * nv;
	double *f_end = NULL, *b_end = NULL, *free_at = NULL;
	size_t *next = NULL;
	int64_t *held = NULL;
	if (pp < 1)
		return bp_errorf(err, "pipeline has %d stages", pp);
	if (!sch->op)
		return bp_errorf(err, "internal: schedule %s has no per-pipeline ops", sch->name);
	for (size_t i = 0; i < nops; i++)
		if (!(in->fwd[i] >= 0 && isfinite(in->fwd[i]) && in->bwd[i] >= 0 &&
		      isfinite(in->bwd[i])))
			return bp_errorf(err, "micro-batch %zu stage %zu has an invalid time", i / nv,
					 i % (size_t)pp);
	f_end = bp_calloc(nops + 1, sizeof(double), err);
	b_end = bp_calloc(nops + 1, sizeof(double), err);
	free_at = bp_calloc((size_t)pp, sizeof(double), err);
	next = bp_calloc((size_t)pp, sizeof(size_t), err);
	held = bp_calloc((size_t)pp, sizeof(int64_t), err);
	if (!f_end || !b_end || !free_at || !next || !held)
		goto out;
	for (size_t i = 0; i < nops; i++)
		f_end[i] = b_end[i] = -1.0;
	for (int s = 0; s < pp; s++) {
		out->busy[s] = 0.0;
		out->finish[s] = 0.0;
		out->peak_act[s] = 0;
	}
	/* Sweep the stages, running every op whose input is ready, until all 2 m v ops per
	 * stage ran. The table's schedules are deadlock-free, so each sweep makes progress.
	 * An op of micro-batch j on virtual stage q (chunk c of stage s, q = c pp + s) sits at
	 * j nv + q: its forward input is virtual stage q - 1's forward, its backward input
	 * virtual stage q + 1's backward (the last one's: its own forward). */
	size_t per = 2 * m * (size_t)v, remaining = per * (size_t)pp;
	while (remaining > 0) {
		int progress = 0;
		for (int s = 0; s < pp; s++) {
			while (next[s] < per) {
				struct bp_sched_op op;
				sch->op(pp, v, m, s, next[s], &op);
				size_t q = (size_t)op.chunk * (size_t)pp + (size_t)s;
				size_t idx = op.mb * nv + q, j = op.mb;
				double p2p = in->p2p ? in->p2p[j] : 0.0;
				double ready;
				if (!op.bwd) {
					if (q == 0)
						ready = 0.0;
					else if (f_end[idx - 1] < 0)
						break;
					else
						ready = f_end[idx - 1] + p2p;
				} else {
					if (q == nv - 1) {
						if (f_end[idx] < 0)
							break;
						ready = f_end[idx];
					} else if (b_end[idx + 1] < 0) {
						break;
					} else {
						ready = b_end[idx + 1] + p2p;
					}
				}
				double start = ready > free_at[s] ? ready : free_at[s];
				double dur = op.bwd ? in->bwd[idx] : in->fwd[idx];
				int64_t act = in->act ? in->act[idx] : 0;
				if (!op.bwd) {
					f_end[idx] = start + dur;
					if (out->f_start)
						out->f_start[idx] = start;
					held[s] = bp_i64_mul_add_sat(act, 1, held[s]);
					if (held[s] > out->peak_act[s])
						out->peak_act[s] = held[s];
				} else {
					b_end[idx] = start + dur;
					if (out->b_start)
						out->b_start[idx] = start;
					held[s] = bp_i64_mul_add_sat(act, -1, held[s]);
				}
				free_at[s] = start + dur;
				out->busy[s] += dur;
				next[s]++;
				remaining--;
				progress = 1;
			}
		}
		if (!progress) {
			bp_errorf(err, "internal: %s schedule made no progress", sch->name);
			goto out;
		}
	}
	out->end = 0.0;
	for (int s = 0; s < pp; s++) {
		out->finish[s] = free_at[s];
		if (free_at[s] > out->end)
			out->end = free_at[s];
	}
	rc = 0;
out:
	free(f_end);
	free(b_end);
	free(free_at);
	free(next);
	free(held);
	return rc;
}
