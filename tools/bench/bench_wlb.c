/* bench_wlb.c: the packing time of the wlb method alone (WLB-LLM Alg. 1 with two outlier
 * queues) per global batch, at WLB-LLM Table 1's 7B-128K configuration (llama2-7b, 64 H100s
 * as tp 8 cp 2 pp 4 dp 1, 128K context, 4 micro-batches per step), without the sampling,
 * prediction and validation `balplan solve` adds. The paper reports 20 ms per batch (Table 2,
 * Sec. 6.4); the target here is under 0.2 ms on one core. Also times `fixed` for reference.
 * One warm-up, then the median of R runs over S steps (CLOCK_MONOTONIC); pin with taskset.
 * usage: bench_wlb [STEPS [RUNS [DATASET]]]   defaults 1000 5 synthetic-longtail */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analytic.h"
#include "method.h"
#include "bench_util.h"

int main(int argc, char **argv)
{
	int64_t steps = argc > 1 ? atoll(argv[1]) : 1000, runs = argc > 2 ? atoll(argv[2]) : 5;
	const char *dsname = argc > 3 ? argv[3] : "synthetic-longtail";
	struct bp_error err;
	struct bp_dataset ds;
	struct bp_profile prof;
	struct bp_costmodel cm;
	struct bp_batches b = {0};
	struct bp_scheme sc = {8, 2, 4};
	const int64_t L = 131072;
	if (steps < 1 || runs < 1) {
		fprintf(stderr, "bench_wlb: STEPS and RUNS must be positive\n");
		return 2;
	}
	bp_dataset_init(&ds);
	bp_profile_init(&prof);
	if (bp_dataset_preset(&ds, dsname, &err) < 0 ||
	    bp_profile_analytic(&prof, bp_gpu_preset("H100"), bp_model_preset("llama2-7b"), &sc, 1,
				L, &err) < 0 ||
	    bp_costmodel_init(&cm, &prof, sc, 1, &err) < 0) {
		fprintf(stderr, "bench_wlb: %s\n", err.text);
		return 1;
	}
	struct bp_sampler_opts so = {.steps = steps, .tokens_per_step = 4 * L, .docs_per_step = 0,
				     .max_len = L, .overlen = BP_OVERLEN_TRUNCATE, .seed = 1};
	if (bp_sample(&ds, &so, &b, &err) < 0) {
		fprintf(stderr, "bench_wlb: %s\n", err.text);
		return 1;
	}
	const char *methods[2] = {"wlb", "fixed"};
	printf("%-6s %14s %12s   (%lld global batches of %lld tokens, %s)\n", "method",
	       "ms per batch", "docs/batch", (long long)steps, (long long)(4 * L), dsname);
	for (int k = 0; k < 2; k++) {
		const struct bp_method *m = bp_method_find(methods[k]);
		double *t = calloc((size_t)runs, sizeof(double));
		size_t docs = 0;
		for (size_t i = 0; i < b.n; i++)
			docs += b.b[i].ndocs;
		for (int64_t r = -1; r < runs; r++) {
			struct bp_plan plan;
			struct bp_rng rng;
			bp_plan_init(&plan);
			plan.cluster = (struct bp_cluster){"H100", 64, 8};
			plan.model = prof.model;
			plan.max_tokens = L;
			plan.tokens_per_step = 4 * L;
			if (bp_plan_add_megatron(&plan, sc, 1, L, &err) < 0) {
				fprintf(stderr, "bench_wlb: %s\n", err.text);
				return 1;
			}
			bp_rng_seed(&rng, 1);
			struct bp_method_ctx ctx = {.cm = &cm, .rng = &rng, .shard = BP_SHARD_SEQUENCE,
						    .step_tokens = 4.0 * (double)L};
			double t0 = now_ms();
			if (m->solve(&ctx, &b, &plan, &err) < 0) {
				fprintf(stderr, "bench_wlb: %s: %s\n", m->name, err.text);
				return 1;
			}
			double t1 = now_ms();
			if (r >= 0)
				t[r] = (t1 - t0) / (double)steps;
			bp_plan_release(&plan);
		}
		qsort(t, (size_t)runs, sizeof(double), cmp_double);
		printf("%-6s %14.4f %12.1f\n", m->name, t[runs / 2], (double)docs / (double)steps);
		free(t);
	}
	bp_batches_release(&b);
	bp_costmodel_release(&cm);
	bp_profile_release(&prof);
	bp_dataset_release(&ds);
	return 0;
}
