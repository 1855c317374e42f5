/* bench_hyd.c: Hydraulis's planner time at the sizes of its Table 2 (App. E): the strategy
 * proposal (Sec. 7) once, then per iteration the greedy dispatch (Alg. 1, T trials) of every
 * candidate, the packing of every pipeline (Eq. 1 over App. C's range) and the selection
 * (blocks/hyd_step.c, what `solve -m hydraulis` runs per step), and Eq. 3 by GLPK for the
 * chosen candidate with the method's budget. One core, one thread: the paper ran 10
 * processes over 10 iterations. Model hydraulis-32b on A800 (the paper's), 32K context,
 * analytic profile of the scheme space; medians over the iterations after one warm-up, wall
 * clock and the thread's CPU time (which a machine shared with other jobs does not inflate).
 * usage: bench_hyd GPUS TOKENS_PER_STEP [ITERS [DATASET [TRIALS [MIN_PROB]]]]
 *        (defaults 10 slimpajama-commoncrawl 100 0.001; MIN_PROB 0 keeps every length L in
 *        the proposal, as the paper) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analytic.h"
#include "hyd.h"
#include "rng.h"
#include "bench_util.h"

/* The calling thread's CPU time, ms. */
static double cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(double), cmp_double);
	return n ? v[n / 2] : 0.0;
}

static int fail(const struct bp_error *err)
{
	fprintf(stderr, "bench_hyd: %s\n", err->text);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: bench_hyd GPUS TOKENS_PER_STEP [ITERS [DATASET [TRIALS "
			"[MIN_PROB]]]]\n");
		return 2;
	}
	int gpus = atoi(argv[1]);
	int64_t tps = atoll(argv[2]);
	int iters = argc > 3 ? atoi(argv[3]) : 10;
	const char *dsname = argc > 4 ? argv[4] : "slimpajama-commoncrawl";
	int trials = argc > 5 ? atoi(argv[5]) : 100;
	double min_prob = argc > 6 ? atof(argv[6]) : 1e-3;
	const int64_t L = 32768;
	struct bp_error err;
	struct bp_dataset ds;
	struct bp_profile prof;
	struct bp_hyd_set set;
	struct bp_scheme sc[64];
	const struct bp_model *m = bp_model_preset("hydraulis-32b");
	const struct bp_gpu *g = bp_gpu_preset("A800");
	if (gpus < 8 || tps < L || iters < 1 || trials < 1) {
		fprintf(stderr, "bench_hyd: GPUS >= 8, TOKENS_PER_STEP >= 32768, ITERS, TRIALS >= 1\n");
		return 2;
	}
	bp_dataset_init(&ds);
	bp_profile_init(&prof);
	bp_hyd_set_init(&set);
	size_t nsc = bp_hyd_space(m, g->gpus_per_node, gpus, 8, sc, 64);
	if (bp_dataset_preset(&ds, dsname, &err) < 0 ||
	    bp_profile_analytic(&prof, g, m, sc, nsc, L, &err) < 0)
		return fail(&err);

	/* The proposal, as `balplan propose` runs it (its defaults), median of 3. */
	struct bp_hyd_space_opts so = {{gpus, 0, 1, 0, 0, min_prob, 0.1, 1}, 0, 128, 0.85};
	double tprop[3];
	for (int r = 0; r < 3; r++) {
		bp_hyd_set_release(&set);
		double t0 = now_ms();
		if (bp_hyd_propose_profile(&prof, sc, nsc, &ds, L, BP_OVERLEN_TRUNCATE, tps, 0, &so,
					   &set, &err) < 0)
			return fail(&err);
		tprop[r] = now_ms() - t0;
	}

	/* The candidates as the method builds them: pipelines by MaxLen, longest first. */
	struct bp_hyd_cand *cand = calloc(set.n, sizeof(*cand));
	struct bp_hyd_fit *fits = calloc(set.nschemes, sizeof(*fits));
	size_t maxp = 0;
	for (size_t k = 0; k < set.nschemes; k++)
		fits[k] = (struct bp_hyd_fit){set.schemes[k].a, set.schemes[k].b, set.schemes[k].c,
					      set.schemes[k].fit_err, 0};
	for (size_t i = 0; i < set.n; i++) {
		const struct bp_hyd_strategy *st = &set.s[i];
		size_t np = 0, j = 0;
		int64_t caps[BP_HYD_MAX_GROUPS];
		size_t order[BP_HYD_MAX_GROUPS], fk[BP_HYD_MAX_GROUPS];
		for (size_t q = 0; q < st->ng; q++) {
			struct bp_costmodel cm;
			struct bp_scheme s = {st->g[q].tp, 1, st->g[q].pp};
			if (bp_costmodel_init(&cm, &prof, s, st->g[q].count, &err) < 0)
				return fail(&err);
			caps[q] = bp_hyd_maxlen(&cm, st->g[q].count, 128);
			bp_costmodel_release(&cm);
			order[q] = q;
			for (fk[q] = 0; fk[q] < set.nschemes; fk[q]++)
				if (set.schemes[fk[q]].tp == s.tp && set.schemes[fk[q]].pp == s.pp)
					break;
			np += (size_t)st->g[q].count;
		}
		for (size_t a = 1; a < st->ng; a++)
			for (size_t b = a; b > 0 && caps[order[b]] > caps[order[b - 1]]; b--) {
				size_t t = order[b];
				order[b] = order[b - 1];
				order[b - 1] = t;
			}
		struct bp_hyd_dpipe *dp = calloc(np, sizeof(*dp));
		int64_t *util = calloc(np, sizeof(int64_t));
		for (size_t q = 0; q < st->ng; q++) {
			size_t gq = order[q];
			for (int c = 0; c < st->g[gq].count; c++, j++) {
				dp[j] = (struct bp_hyd_dpipe){&fits[fk[gq]], st->g[gq].pp, caps[gq]};
				util[j] = set.schemes[fk[gq]].util_len;
			}
		}
		cand[i] = (struct bp_hyd_cand){np, dp, util, caps[order[0]]};
		if (np > maxp)
			maxp = np;
	}

	/* Iterations: the sampler's global batches (one warm-up). */
	struct bp_batches b = {0};
	struct bp_sampler_opts sopt = {.steps = iters + 1, .tokens_per_step = tps,
				       .docs_per_step = 0, .max_len = L,
				       .overlen = BP_OVERLEN_TRUNCATE, .seed = 1};
	if (bp_sample(&ds, &sopt, &b, &err) < 0)
		return fail(&err);
	size_t maxn = 1;
	for (size_t s = 0; s < b.n; s++)
		maxn = b.b[s].ndocs > maxn ? b.b[s].ndocs : maxn;
	int64_t *len = calloc(maxn, sizeof(int64_t));
	int *pipe_of = calloc(maxn, sizeof(int)), *bin_of = calloc(maxn, sizeof(int));
	int *alt = calloc(maxn, sizeof(int));
	struct bp_hyd_pipe_res *pr = calloc(maxp ? maxp : 1, sizeof(*pr));
	struct bp_hyd_cand_res *res = calloc(set.n, sizeof(*res));
	double *tstep = calloc((size_t)iters, sizeof(double));
	double *tgreedy = calloc((size_t)iters, sizeof(double));
	double *tilp = calloc((size_t)iters, sizeof(double));
	double *cstep = calloc((size_t)iters, sizeof(double));
	double *cgreedy = calloc((size_t)iters, sizeof(double));
	double docs = 0, feasible = 0, ilp_gap = 0;
	int ilp_opt = 0;
	struct bp_ilp_opts io;
	bp_ilp_opts_default(&io);
	io.node_limit = 200;
	io.work_limit = 5e6;
	struct bp_hyd_step_opts o = {trials, 0, 0, NULL, NULL, 1};
	struct bp_rng rng;
	bp_rng_seed(&rng, 7);
	for (size_t s = 0; s < b.n; s++) {
		const struct bp_batch *bb = &b.b[s];
		uint64_t seed = bp_rng_next(&rng);
		int sel;
		for (size_t i = 0; i < bb->ndocs; i++)
			len[i] = bb->docs[i].len;
		/* Alg. 1 alone, every candidate that can hold the batch */
		double t0 = now_ms(), c0 = cpu_ms();
		int nfeas = 0;
		for (size_t i = 0; i < set.n; i++) {
			int64_t longest = 0;
			for (size_t q = 0; q < bb->ndocs; q++)
				longest = len[q] > longest ? len[q] : longest;
			if (longest > cand[i].maxcap)
				continue;
			struct bp_hyd_dispatch d = {len, bb->ndocs, cand[i].dp, cand[i].npipes, 0, 0,
						    trials, seed, NULL};
			double obj;
			int tr;
			if (bp_hyd_dispatch_greedy(&d, pipe_of, &obj, &tr, &err) < 0)
				return fail(&err);
			nfeas++;
		}
		double t1 = now_ms(), c1 = cpu_ms();
		/* the whole step: dispatch, packing, selection */
		if (bp_hyd_step(cand, set.n, len, bb->ndocs, seed, &o, res, &sel, pipe_of, bin_of, pr,
				&err) < 0)
			return fail(&err);
		double t2 = now_ms(), c2 = cpu_ms();
		/* Eq. 3 by GLPK for the chosen candidate, from its greedy */
		struct bp_hyd_dispatch d = {len, bb->ndocs, cand[sel].dp, cand[sel].npipes, 0, 0,
					    trials, seed, NULL};
		struct bp_hyd_ilp_res ir;
		double obj;
		int tr;
		bp_hyd_dispatch_greedy(&d, pipe_of, &obj, &tr, &err);
		double t3 = now_ms();
		if (bp_hyd_dispatch_ilp(&d, &io, pipe_of, alt, &ir, &err) < 0)
			return fail(&err);
		double t4 = now_ms();
		if (s == 0)
			continue; /* warm-up */
		tgreedy[s - 1] = t1 - t0;
		tstep[s - 1] = t2 - t1;
		tilp[s - 1] = t4 - t3;
		cgreedy[s - 1] = c1 - c0;
		cstep[s - 1] = c2 - c1;
		docs += (double)bb->ndocs;
		feasible += nfeas;
		ilp_opt += ir.status == BP_ILP_OPTIMAL;
		ilp_gap += ir.objective > 0 ? (ir.objective - ir.bound) / ir.objective : 0;
	}
	printf("bench_hyd: %d GPUs, %lld tokens per iteration, %s, hydraulis-32b on A800, 32K, "
	       "%d trials, %d iterations, min_prob %g\n", gpus, (long long)tps, dsname, trials,
	       iters, min_prob);
	printf("  proposal: %.1f ms (median of 3; %zu schemes, %zu candidates)\n",
	       median(tprop, 3), set.nschemes, set.n);
	printf("  per iteration (median): dispatch + packing + selection %.2f ms, of which "
	       "greedy dispatch %.2f ms; Eq. 3 ILP of the chosen candidate %.2f ms\n",
	       median(tstep, (size_t)iters), median(tgreedy, (size_t)iters),
	       median(tilp, (size_t)iters));
	printf("  the same in CPU time (median): dispatch + packing + selection %.2f ms, greedy "
	       "dispatch %.2f ms\n", median(cstep, (size_t)iters), median(cgreedy, (size_t)iters));
	printf("  %.0f documents and %.1f feasible candidates per iteration; ILP optimal in %d of "
	       "%d, mean gap %.2f%%\n", docs / iters, feasible / iters, ilp_opt, iters,
	       100.0 * ilp_gap / iters);
	return 0;
}
