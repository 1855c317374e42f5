/* ilp-ablation.c: what each GLPK choice of the packing ILP (planner/blocks/ilp_pack.c) is worth, on
 * steps drawn as `balplan solve` draws them. Built and run by tools/bench/bench-ilp; not part
 * of the library. Per variant: time per step (median and max), steps proven optimal, mean gap
 * to the proven bound, steps improved over the greedy and by how much (mean relative drop of
 * the largest micro-batch cost), and, without a warm start, steps where GLPK's own best was
 * worse than the greedy or missing.
 *
 * usage: ilp-ablation GPUS TP CP PP MAX_TOKENS MODEL STEPS CAP_FACTOR NODE_LIMIT */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analytic.h"
#include "costmodel.h"
#include "ilp_pack.h"
#include "pack.h"
#include "bench_util.h"

struct variant {
	const char *name;
	int presolve, warm, symmetry, lower_bound;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 10) {
		fprintf(stderr, "usage: ilp-ablation GPUS TP CP PP MAX_TOKENS MODEL STEPS "
				"CAP_FACTOR NODE_LIMIT\n");
		return 2;
	}
	int gpus = atoi(argv[1]);
	struct bp_scheme sc = {atoi(argv[2]), atoi(argv[3]), atoi(argv[4])};
	int64_t L = atoll(argv[5]), steps = atoll(argv[7]), nodes = atoll(argv[9]);
	double factor = atof(argv[8]);
	int dp = gpus / (sc.tp * sc.cp * sc.pp);
	struct bp_error err;
	struct bp_profile prof;
	struct bp_dataset ds;
	struct bp_costmodel cm;
	struct bp_batches b = {0};
	bp_profile_init(&prof);
	bp_dataset_init(&ds);
	int64_t top = 4096;
	while (top < L)
		top *= 2;
	if (bp_profile_analytic(&prof, bp_gpu_preset("H100"), bp_model_preset(argv[6]), &sc, 1,
				top, &err) < 0 ||
	    bp_dataset_preset(&ds, "synthetic-longtail", &err) < 0 ||
	    bp_costmodel_init(&cm, &prof, sc, dp, &err) < 0) {
		fprintf(stderr, "ilp-ablation: %s\n", err.text);
		return 1;
	}
	struct bp_sampler_opts so = {steps, (int64_t)sc.pp * dp * L, 0, L, BP_OVERLEN_TRUNCATE, 1};
	if (bp_sample(&ds, &so, &b, &err) < 0) {
		fprintf(stderr, "ilp-ablation: %s\n", err.text);
		return 1;
	}
	int64_t cap = (int64_t)(factor * (double)L);
	static const struct variant vs[] = {
		{"all on (methods)", 0, 1, 1, 1},
		{"no warm start", 0, 0, 1, 1},
		{"no symmetry breaking", 0, 1, 0, 1},
		{"no z lower bound", 0, 1, 1, 0},
		{"presolve on (no warm)", 1, 0, 1, 1},
		{"from scratch", 1, 0, 0, 0},
	};
	printf("%-24s %9s %9s %8s %9s %9s %11s %8s %10s\n", "variant", "med ms", "max ms", "optimal",
	       "mean gap", "improved", "glpk worse", "nodes", "vs greedy");
	double *t = calloc((size_t)steps, sizeof(double));
	for (size_t v = 0; v < BP_ARRAY_LEN(vs); v++) {
		int opt = 0, worse = 0, improved = 0;
		double gap = 0, nsum = 0, gain = 0;
		for (int64_t s = 0; s < steps; s++) {
			size_t n = b.b[s].ndocs;
			double *w = calloc(n, sizeof(double)), *load = NULL;
			int64_t *len = calloc(n, sizeof(int64_t)), *fill = NULL;
			int *warm = calloc(n, sizeof(int)), *bin_of = calloc(n, sizeof(int));
			for (size_t i = 0; i < n; i++) {
				len[i] = b.b[s].docs[i].len;
				if (bp_cost_doc(&cm, len[i], &w[i], &err) < 0) {
					fprintf(stderr, "ilp-ablation: %s\n", err.text);
					exit(1);
				}
			}
			size_t m = (size_t)((b.b[s].tokens + (int64_t)dp * L - 1) / ((int64_t)dp * L));
			if (m < 1)
				m = 1;
			for (;; m++) {
				free(load);
				free(fill);
				load = calloc(m * (size_t)dp, sizeof(double));
				fill = calloc(m * (size_t)dp, sizeof(int64_t));
				if (!bp_pack_lpt(w, len, n, m * (size_t)dp, cap, warm, load, fill, &err))
					break;
			}
			double greedy = 0;
			for (size_t j = 0; j < m * (size_t)dp; j++)
				greedy = load[j] > greedy ? load[j] : greedy;
			struct bp_ilp_opts o;
			bp_ilp_opts_default(&o);
			o.node_limit = nodes;
			o.presolve = vs[v].presolve;
			struct bp_ilp_pack in = {w,    len, n, m * (size_t)dp, cap, warm, vs[v].warm,
						 vs[v].symmetry, vs[v].lower_bound};
			struct bp_ilp_pack_result res;
			double t0 = now_s();
			if (bp_ilp_pack_solve(&in, &o, bin_of, &res, &err) < 0) {
				fprintf(stderr, "ilp-ablation: %s\n", err.text);
				return 1;
			}
			t[s] = (now_s() - t0) * 1e3;
			opt += res.status == BP_ILP_OPTIMAL;
			gap += res.gap;
			nsum += (double)res.nodes;
			improved += res.objective < greedy;
			gain += greedy > 0 ? 1.0 - res.objective / greedy : 0.0;
			/* GLPK's own answer (without a warm start), before the fall-back */
			worse += !(res.solver_objective <= greedy);
			free(w);
			free(len);
			free(warm);
			free(bin_of);
			free(load);
			free(fill);
		}
		qsort(t, (size_t)steps, sizeof(double), cmp_double);
		char wbuf[16] = "-";
		if (!vs[v].warm)
			snprintf(wbuf, sizeof(wbuf), "%.0f%%", 100.0 * worse / steps);
		printf("%-24s %9.1f %9.1f %7.0f%% %8.3f%% %8.0f%% %11s %8.0f %9.3f%%\n",
		       vs[v].name, t[steps / 2], t[steps - 1], 100.0 * opt / steps,
		       100.0 * gap / steps, 100.0 * improved / steps, wbuf, nsum / steps,
		       100.0 * gain / steps);
	}
	free(t);
	bp_batches_release(&b);
	bp_costmodel_release(&cm);
	bp_dataset_release(&ds);
	bp_profile_release(&prof);
	return 0;
}
