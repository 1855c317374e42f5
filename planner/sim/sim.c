/* sim.c: the 1F1B pipeline event simulator (sim.h). Called by plan.c for every pipeline of
 * every step, so every method is predicted by the same code. Invariant: ops on one stage never
 * overlap and run in the 1F1B order; an op never starts before its input exists. */
#include "sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int bp_sim_1f1b_op(int pp, size_t m, int s, size_t k, size_t *mb)
{
	size_t warm = (size_t)(pp - s - 1);
	if (warm > m)
		warm = m;
	if (k < warm) {
		*mb = k;
		return 0;
	}
	size_t steady = m - warm; /* pairs of (F, B) */
	size_t t = k - warm;
	if (t < 2 * steady) {
		if (t % 2 == 0) {
			*mb = warm + t / 2;
			return 0;
		}
		*mb = t / 2;
		return 1;
	}
	*mb = steady + (t - 2 * steady);
	return 1;
}

int bp_sim_1f1b(const struct bp_sim_pipe *in, struct bp_sim_result *out, struct bp_error *err)
{
	int pp = in->pp, rc = -1;
	size_t m = in->m;
	double *f_end = NULL, *b_end = NULL, *free_at = NULL;
	size_t *next = NULL;
	int64_t *held = NULL;
	if (pp < 1)
		return bp_errorf(err, "pipeline has %d stages", pp);
	for (size_t i = 0; i < m * (size_t)pp; i++)
		if (!(in->fwd[i] >= 0 && isfinite(in->fwd[i]) && in->bwd[i] >= 0 &&
		      isfinite(in->bwd[i])))
			return bp_errorf(err, "micro-batch %zu stage %zu has an invalid time",
					 i / (size_t)pp, i % (size_t)pp);
	f_end = bp_calloc(m * pp + 1, sizeof(double), err);
	b_end = bp_calloc(m * pp + 1, sizeof(double), err);
	free_at = bp_calloc((size_t)pp, sizeof(double), err);
	next = bp_calloc((size_t)pp, sizeof(size_t), err);
	held = bp_calloc((size_t)pp, sizeof(int64_t), err);
	if (!f_end || !b_end || !free_at || !next || !held)
		goto out;
	for (size_t i = 0; i < m * (size_t)pp; i++)
		f_end[i] = b_end[i] = -1.0;
	for (int s = 0; s < pp; s++) {
		out->busy[s] = 0.0;
		out->finish[s] = 0.0;
		out->peak_act[s] = 0;
	}
	/* Sweep the stages, running every op whose input is ready, until all 2m ops per stage
	 * ran. 1F1B is deadlock-free, so each sweep makes progress. */
	size_t remaining = 2 * m * (size_t)pp;
	while (remaining > 0) {
		int progress = 0;
		for (int s = 0; s < pp; s++) {
			while (next[s] < 2 * m) {
				size_t j;
				int is_b = bp_sim_1f1b_op(pp, m, s, next[s], &j);
				size_t idx = j * pp + s;
				double p2p = in->p2p ? in->p2p[j] : 0.0;
				double ready;
				if (!is_b) {
					if (s == 0)
						ready = 0.0;
					else if (f_end[idx - 1] < 0)
						break;
					else
						ready = f_end[idx - 1] + p2p;
				} else {
					if (s == pp - 1)
						ready = f_end[idx];
					else if (b_end[idx + 1] < 0)
						break;
					else
						ready = b_end[idx + 1] + p2p;
				}
				double start = ready > free_at[s] ? ready : free_at[s];
				double dur = is_b ? in->bwd[idx] : in->fwd[idx];
				int64_t act = in->act ? in->act[idx] : 0;
				if (!is_b) {
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
			bp_errorf(err, "internal: 1F1B schedule made no progress");
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
