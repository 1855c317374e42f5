/* bench_ilp_steps.c: the time of fixed-ilp's search per step (issue 10, item 4) at WLB-LLM
 * Table 1's 7B-128K layout (llama2-7b on 64 H100s as tp 8 cp 2 pp 4 dp 1, L = 131072, a
 * global batch of 4 x L tokens, analytic profile), on one dataset. Per step it runs what
 * bp_ilp_pack_step runs: the fixed greedy, then the Eq. 1 ILP warm-started from it under the
 * default deterministic budget (ilp_node_limit, ilp_work_limit; ilp.h) and the default
 * ilp_max_vars, and times the two together (CLOCK_MONOTONIC). Prints one line: documents
 * and documents x micro-batches per step, ms per step (mean, median, max), the steps proven
 * optimal, ended by the node limit, by the work limit, or kept unsearched (too large), and
 * the mean work in millions.
 * Not a test; tools/bench/bench-ilp-datasets runs it on every dataset, pinned to one core.
 * usage: bench_ilp_steps DATASET [STEPS [WORK_LIMIT_M [NODE_LIMIT]]]   defaults 20 100 2000 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analytic.h"
#include "costmodel.h"
#include "ilp_pack.h"
#include "pack.h"
#include "bench_util.h"

int main(int argc, char **argv)
{
	struct bp_error err;
	int64_t steps = 20, work_m = BP_ILP_WORK_LIMIT_M, nodes = -1;
	if (argc < 2 || argc > 5 ||
	    (argc > 2 && (bp_parse_int64(argv[2], &steps, "STEPS", &err) < 0 || steps < 1)) ||
	    (argc > 3 && (bp_parse_int64(argv[3], &work_m, "WORK_LIMIT_M", &err) < 0 ||
			  work_m < 1)) ||
	    (argc > 4 && (bp_parse_int64(argv[4], &nodes, "NODE_LIMIT", &err) < 0 || nodes < 1))) {
		fprintf(stderr, "usage: bench_ilp_steps DATASET [STEPS [WORK_LIMIT_M "
				"[NODE_LIMIT]]]\n");
		return 2;
	}
	const int64_t L = 131072;
	const int dp = 1;
	struct bp_scheme sc = {8, 2, 4};
	struct bp_dataset ds;
	struct bp_profile prof;
	struct bp_costmodel cm;
	struct bp_batches b = {0};
	bp_dataset_init(&ds);
	bp_profile_init(&prof);
	if (bp_dataset_preset(&ds, argv[1], &err) < 0 ||
	    bp_profile_analytic(&prof, bp_gpu_preset("H100"), bp_model_preset("llama2-7b"), &sc, 1,
				L, &err) < 0 ||
	    bp_costmodel_init(&cm, &prof, sc, dp, &err) < 0) {
		fprintf(stderr, "bench_ilp_steps: error: %s\n", err.text);
		return 1;
	}
	struct bp_sampler_opts so = {.steps = steps, .tokens_per_step = 4 * L, .docs_per_step = 0,
				     .max_len = L, .overlen = BP_OVERLEN_TRUNCATE, .seed = 1};
	if (bp_sample(&ds, &so, &b, &err) < 0) {
		fprintf(stderr, "bench_ilp_steps: error: %s\n", err.text);
		return 1;
	}
	struct bp_ilp_opts o;
	bp_ilp_opts_default(&o);
	o.work_limit = (double)work_m * 1e6;
	if (nodes > 0)
		o.node_limit = nodes;
	double *t = calloc(b.n, sizeof(double)), sum = 0.0, work = 0.0, docs = 0.0, bins = 0.0;
	int optimal = 0, by_nodes = 0, by_work = 0, too_large = 0;
	for (size_t s = 0; s < b.n; s++) {
		size_t n = b.b[s].ndocs, m = 0;
		double *w = calloc(n + 1, sizeof(double)), *load = NULL;
		int64_t *len = calloc(n + 1, sizeof(int64_t));
		int *warm = calloc(n + 1, sizeof(int)), *bin = calloc(n + 1, sizeof(int));
		struct bp_ilp_pack_result res;
		memset(&res, 0, sizeof(res));
		double t0 = now_ms();
		if (bp_pack_fixed_greedy(&cm, &b.b[s], dp, L, L, w, len, warm, &load, &m, &err) < 0) {
			fprintf(stderr, "bench_ilp_steps: error: %s\n", err.text);
			return 1;
		}
		size_t M = m * (size_t)dp;
		if (o.max_vars > 0 && (double)n * (double)M > (double)o.max_vars) {
			too_large++;
		} else {
			struct bp_ilp_pack in = {w, len, n, M, L, warm, 1, 1, 1};
			if (bp_ilp_pack_solve(&in, &o, bin, &res, &err) < 0) {
				fprintf(stderr, "bench_ilp_steps: error: %s\n", err.text);
				return 1;
			}
		}
		t[s] = now_ms() - t0;
		sum += t[s];
		docs += (double)n;
		bins += (double)n * (double)M;
		work += res.work;
		optimal += res.status == BP_ILP_OPTIMAL;
		by_nodes += res.limit == BP_ILP_LIMIT_NODES;
		by_work += res.limit == BP_ILP_LIMIT_WORK;
		free(w);
		free(load);
		free(len);
		free(warm);
		free(bin);
	}
	qsort(t, b.n, sizeof(double), cmp_double);
	double ns = (double)b.n;
	printf("%-26s %7.0f %8.0f %9.1f %9.1f %9.1f %7.0f%% %6d %6d %6d %9.1f\n", argv[1], docs / ns,
	       bins / ns, sum / ns, t[b.n / 2], t[b.n - 1], 100.0 * optimal / ns, by_nodes, by_work,
	       too_large, work / ns / 1e6);
	free(t);
	bp_batches_release(&b);
	bp_costmodel_release(&cm);
	bp_profile_release(&prof);
	bp_dataset_release(&ds);
	return 0;
}
