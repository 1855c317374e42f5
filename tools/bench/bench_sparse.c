/* bench_sparse.c: SparseBalance's planning overhead per iteration (Table I's "overheads"
 * column; the paper: 37.14 ms for +DST, 44.23 ms for +SAB+DST, 1.81 ms for +SAB) for balplan's
 * sparsebalance method alone, without the sampling, prediction and validation `balplan solve`
 * adds, at the paper's default configuration: Qwen2.5-3B, 32 H200 as dp 4 pp 4 tp 2 cp 1,
 * global batch 16, micro-batch 1, 65,536-token cap, on the LongAlign-10k and ChatQA2-Long-SFT
 * reconstructions. Rows as Table I (batching x DST) under coverage none-upper (DST's planner
 * arithmetic: predict, anchor, align) and synthetic (plus the seeded coverage model, which in
 * training comes from the routing logits on the GPU). "overhead" subtracts the Baseline row
 * (default batching, fixed k = 32). One warm-up, then the median of RUNS runs of STEPS
 * iterations (CLOCK_MONOTONIC); pin with taskset. Target: at most 0.5 ms per iteration.
 * usage: bench_sparse [STEPS [RUNS [DATASET [GPU [MODEL]]]]]
 *        defaults 200 5 longalign-10k H200 qwen2.5-3b */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analytic.h"
#include "method.h"
#include "bench_util.h"

int main(int argc, char **argv)
{
	int64_t steps = argc > 1 ? atoll(argv[1]) : 200, runs = argc > 2 ? atoll(argv[2]) : 5;
	const char *dsname = argc > 3 ? argv[3] : "longalign-10k";
	const char *gpu = argc > 4 ? argv[4] : "H200", *model = argc > 5 ? argv[5] : "qwen2.5-3b";
	struct bp_error err;
	struct bp_dataset ds;
	struct bp_profile prof;
	struct bp_costmodel cm;
	struct bp_batches b = {0};
	struct bp_scheme sc = {2, 1, 4};
	const int dp = 4;
	const int64_t L = 65536;
	if (steps < 1 || runs < 1) {
		fprintf(stderr, "bench_sparse: STEPS and RUNS must be positive\n");
		return 2;
	}
	bp_dataset_init(&ds);
	bp_profile_init(&prof);
	if (!bp_gpu_preset(gpu) || !bp_model_preset(model)) {
		fprintf(stderr, "bench_sparse: unknown GPU or model preset\n");
		return 2;
	}
	if (bp_dataset_preset(&ds, dsname, &err) < 0 ||
	    bp_profile_analytic(&prof, bp_gpu_preset(gpu), bp_model_preset(model), &sc, 1, L,
				&err) < 0 ||
	    bp_costmodel_init(&cm, &prof, sc, dp, &err) < 0) {
		fprintf(stderr, "bench_sparse: %s\n", err.text);
		return 1;
	}
	struct bp_sampler_opts so = {.steps = steps, .tokens_per_step = 0, .docs_per_step = 16,
				     .max_len = L, .overlen = BP_OVERLEN_TRUNCATE, .seed = 1};
	if (bp_sample(&ds, &so, &b, &err) < 0) {
		fprintf(stderr, "bench_sparse: %s\n", err.text);
		return 1;
	}
	static const char *const rows[6][3] = {
		{"Baseline", "default", "0"}, {"+DST", "default", "1"}, {"+SAB", "sab", "0"},
		{"+LBB", "lbb", "0"},	      {"+SAB+DST", "sab", "1"}, {"+LBB+DST", "lbb", "1"},
	};
	static const char *const covs[2] = {"none-upper", "synthetic"};
	printf("# %s, %s, 32 GPUs (dp %d pp %d tp %d cp 1), gbs 16, mbs 1, max %lld tokens, %s, "
	       "%lld iterations, median of %lld runs\n", model, gpu, dp, sc.pp, sc.tp,
	       (long long)L, dsname, (long long)steps, (long long)runs);
	printf("%-10s %-11s %14s %14s\n", "config", "coverage", "ms/iteration", "overhead ms");
	for (int c = 0; c < 2; c++) {
		double base = 0.0;
		for (int k = 0; k < 6; k++) {
			double *t = calloc((size_t)runs, sizeof(double));
			if (!t)
				return 1;
			for (int64_t r = -1; r < runs; r++) {
				struct bp_plan plan;
				struct bp_rng rng;
				bp_plan_init(&plan);
				plan.cluster = (struct bp_cluster){"", 32, 8};
				snprintf(plan.cluster.gpu, sizeof(plan.cluster.gpu), "%s", gpu);
				plan.model = prof.model;
				plan.max_tokens = L;
				plan.docs_per_step = 16;
				plan.seed = 1;
				if (bp_plan_add_megatron(&plan, sc, dp, L, &err) < 0 ||
				    bp_plan_set_param(&plan, "sb_batching", rows[k][1], &err) < 0 ||
				    bp_plan_set_param(&plan, "sb_dst", rows[k][2], &err) < 0 ||
				    bp_plan_set_param(&plan, "sb_coverage", covs[c], &err) < 0) {
					fprintf(stderr, "bench_sparse: %s\n", err.text);
					return 1;
				}
				bp_rng_seed(&rng, 1);
				struct bp_method_ctx ctx = {.cm = &cm, .rng = &rng, .shard = BP_SHARD_SEQUENCE};
				double t0 = now_ms();
				if (bp_method_sparsebalance(&ctx, &b, &plan, &err) < 0) {
					fprintf(stderr, "bench_sparse: %s\n", err.text);
					return 1;
				}
				double t1 = now_ms();
				if (r >= 0)
					t[r] = (t1 - t0) / (double)steps;
				bp_plan_release(&plan);
			}
			qsort(t, (size_t)runs, sizeof(double), cmp_double);
			double med = t[runs / 2];
			if (k == 0)
				base = med;
			printf("%-10s %-11s %14.4f %14.4f\n", rows[k][0], covs[c], med, med - base);
			free(t);
		}
	}
	bp_batches_release(&b);
	bp_costmodel_release(&cm);
	bp_profile_release(&prof);
	bp_dataset_release(&ds);
	return 0;
}
