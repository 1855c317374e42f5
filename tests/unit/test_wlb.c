/* test_wlb.c: the wlb method (WLB-LLM Alg. 1 with outlier queues): no document is ever lost
 * or trained twice across steps, over many seeds, datasets and queue settings; delays are
 * recorded; a releasing queue puts one outlier in each micro-batch; adaptive CP sharding
 * picks the cheaper mode on hand-made micro-batches (WLB-LLM Sec. 5.3). */
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "check.h"
#include "method.h"
#include "solve.h"
#include "validate.h"

static struct bp_profile prof;

static int solve_wlb(const char *ds_name, uint64_t seed, int gpus, struct bp_scheme sc,
		     int64_t L, int64_t tps, int64_t dps, const char *queues,
		     const char *thresholds, struct bp_plan *plan, int64_t *drawn_tokens)
{
	struct bp_dataset ds;
	struct bp_error err;
	struct bp_param params[2];
	size_t np = 0;
	bp_dataset_init(&ds);
	CHECK(bp_dataset_preset(&ds, ds_name, &err) == 0);
	if (queues) {
		memset(&params[np], 0, sizeof(params[np]));
		strcpy(params[np].key, "queues");
		strcpy(params[np++].value, queues);
	}
	if (thresholds) {
		memset(&params[np], 0, sizeof(params[np]));
		strcpy(params[np].key, "thresholds");
		strcpy(params[np++].value, thresholds);
	}
	struct bp_solve_opts o = {
		.method = "wlb",
		.cluster = {.gpus = gpus, .tp = sc.tp, .cp = sc.cp, .pp = sc.pp,
			    .dp = gpus / (sc.tp * sc.cp * sc.pp)},
		.steps = 12, .tokens_per_step = tps, .docs_per_step = dps, .max_tokens = L,
		.overlen = BP_OVERLEN_TRUNCATE, .seed = seed, .shard = BP_SHARD_SEQUENCE,
		.dataset_name = ds_name,
		.dataset_sha = "0000000000000000000000000000000000000000000000000000000000000000",
		.profile_sha = "1111111111111111111111111111111111111111111111111111111111111111",
		.params = params, .nparams = np,
	};
	int rc = bp_solve(&ds, &prof, &o, plan, &err);
	if (rc)
		fprintf(stderr, "wlb: %s\n", err.text);
	/* what was drawn: the same sampler with the same options */
	struct bp_batches b = {0};
	struct bp_sampler_opts so = {12, tps, dps, L, BP_OVERLEN_TRUNCATE, seed};
	*drawn_tokens = 0;
	if (bp_sample(&ds, &so, &b, &err) == 0)
		for (size_t i = 0; i < b.n; i++)
			*drawn_tokens += b.b[i].tokens;
	bp_batches_release(&b);
	bp_dataset_release(&ds);
	return rc;
}

/* Property: every drawn document trained exactly once (bp_plan_validate checks the tiling of
 * spans, the delay records and the caps), all drawn tokens trained, delays consistent. */
static void test_no_loss(void)
{
	struct bp_scheme sc = {2, 2, 2};
	const char *datasets[2] = {"synthetic-longtail", "tiny-uniform"};
	const char *queues[4] = {"0", "1", "2", "3"};
	struct bp_error err;
	int runs = 0;
	for (int d = 0; d < 2; d++)
		for (int q = 0; q < 4; q++)
			for (uint64_t seed = 1; seed <= 6; seed++) {
				struct bp_plan plan;
				int64_t drawn = 0, L = d ? 2048 : 16384;
				int64_t tps = seed % 2 ? 4 * L : 0, dps = seed % 2 ? 0 : 40;
				if (solve_wlb(datasets[d], seed, 16, sc, L, tps, dps, queues[q], NULL,
					      &plan, &drawn) != 0) {
					CHECK(0);
					continue;
				}
				runs++;
				CHECK(bp_plan_validate(&plan, NULL, &err) == 0);
				CHECK(plan.summary.tokens == drawn);
				CHECK(plan.nsteps >= 12);
				CHECK(bp_plan_mb_cap(&plan) >= plan.max_tokens);
				int64_t delayed = 0;
				for (size_t s = 0; s < plan.nsteps; s++)
					for (size_t k = 0; k < plan.steps[s].ndelayed; k++) {
						const struct bp_delayed *dl = &plan.steps[s].delayed[k];
						CHECK(dl->to_step > (int64_t)s);
						delayed++;
					}
				CHECK(delayed == plan.summary.delayed);
				if (!strcmp(queues[q], "0") && d == 1)
					CHECK(plan.summary.delay_steps_mean < 1.0);
				bp_plan_release(&plan);
			}
	CHECK(runs == 48);
}

/* Outlier queue release (WLB-LLM Sec. 4.2): with N = 4 micro-batches and one queue for
 * documents >= 8192 tokens, outliers wait until four are queued, then each micro-batch of
 * the releasing step holds exactly one. */
static void test_release(void)
{
	struct bp_scheme sc = {1, 1, 4};
	struct bp_costmodel cm;
	struct bp_error err;
	struct bp_plan out;
	struct bp_rng rng;
	CHECK(bp_costmodel_init(&cm, &prof, sc, 1, &err) == 0);
	bp_rng_seed(&rng, 1);
	struct bp_method_ctx ctx = {&cm, &rng, BP_SHARD_SEQUENCE, NULL, NULL};
	/* step 0: three outliers + small docs; step 1: one outlier + small docs */
	int64_t lens0[] = {9000, 500, 9500, 700, 10000, 300, 800};
	int64_t lens1[] = {600, 9100, 400, 900, 200, 1000};
	struct bp_doc d0[7], d1[6];
	int64_t id = 0, t0 = 0, t1 = 0;
	for (int i = 0; i < 7; i++) {
		d0[i] = (struct bp_doc){id++, lens0[i]};
		t0 += lens0[i];
	}
	for (int i = 0; i < 6; i++) {
		d1[i] = (struct bp_doc){id++, lens1[i]};
		t1 += lens1[i];
	}
	struct bp_batch b[2] = {{d0, 7, t0}, {d1, 6, t1}};
	struct bp_batches in = {b, 2, 0, 0};
	bp_plan_init(&out);
	out.cluster = (struct bp_cluster){"H100", 4, 8};
	out.model = prof.model;
	out.max_tokens = 16384;
	CHECK(bp_plan_add_megatron(&out, sc, 1, 16384, &err) == 0);
	out.tokens_per_step = 4 * 16384;
	CHECK(bp_plan_set_param(&out, "queues", "1", &err) == 0);
	CHECK(bp_plan_set_param(&out, "thresholds", "8192", &err) == 0);
	CHECK(bp_method_wlb(&ctx, &in, &out, &err) == 0);
	CHECK(out.nsteps == 2);
	/* step 0 trains no outlier; step 1 trains all four, one per micro-batch */
	size_t mbs1 = 0;
	for (size_t s = 0; s < out.nsteps && s < 2; s++)
		for (size_t k = 0; k < out.steps[s].npipes; k++)
			for (size_t j = 0; j < out.steps[s].pipes[k].nmbs; j++) {
				const struct bp_mb *mb = &out.steps[s].pipes[k].mbs[j];
				int outliers = 0;
				for (size_t q = 0; q < mb->nspans; q++)
					outliers += mb->spans[q].len >= 8192;
				CHECK(s == 0 ? outliers == 0 : outliers == 1);
				mbs1 += s == 1;
			}
	CHECK(mbs1 == 4);
	CHECK(out.steps[0].ndelayed == 3);
	for (size_t k = 0; k < out.steps[0].ndelayed; k++)
		CHECK(out.steps[0].delayed[k].to_step == 1 && out.steps[0].delayed[k].len >= 8192);
	bp_plan_release(&out);
	bp_costmodel_release(&cm);
}

/* Adaptive sharding (WLB-LLM Sec. 5.2-5.3): one long document next to short ones leaves
 * sequence sharding's ranks unequal, so per-document wins; many documents shorter than a
 * tile make per-document chunks pay 128-token padding each, so per-sequence wins. */
static void test_adaptive(void)
{
	struct bp_profile p2;
	struct bp_error err;
	struct bp_scheme sc = {1, 4, 1};
	struct bp_costmodel cm;
	bp_profile_init(&p2);
	CHECK(bp_profile_analytic(&p2, bp_gpu_preset("H100"), bp_model_preset("llama3-8b"), &sc, 1,
				  131072, &err) == 0);
	CHECK(bp_costmodel_init(&cm, &p2, sc, 1, &err) == 0);
	struct bp_span skew[9];
	skew[0] = (struct bp_span){0, 0, 65536};
	for (int i = 1; i < 9; i++)
		skew[i] = (struct bp_span){i, 0, 4096};
	enum bp_shard got;
	CHECK(bp_shard_resolve(&cm, skew, 9, BP_SHARD_ADAPTIVE, &got, &err) == 0);
	CHECK(got == BP_SHARD_DOCUMENT);
	struct bp_span tiny[256];
	for (int i = 0; i < 256; i++)
		tiny[i] = (struct bp_span){i, 0, 64};
	CHECK(bp_shard_resolve(&cm, tiny, 256, BP_SHARD_ADAPTIVE, &got, &err) == 0);
	CHECK(got == BP_SHARD_SEQUENCE);
	/* fixed modes pass through */
	CHECK(bp_shard_resolve(&cm, tiny, 256, BP_SHARD_DOCUMENT, &got, &err) == 0);
	CHECK(got == BP_SHARD_DOCUMENT);
	bp_costmodel_release(&cm);
	bp_profile_release(&p2);
}

int main(void)
{
	struct bp_error err;
	struct bp_scheme schemes[2] = {{2, 2, 2}, {1, 1, 4}};
	bp_profile_init(&prof);
	if (bp_profile_analytic(&prof, bp_gpu_preset("H100"), bp_model_preset("qwen2.5-0.5b"),
				schemes, 2, 32768, &err) < 0) {
		fprintf(stderr, "%s\n", err.text);
		return 1;
	}
	test_no_loss();
	test_release();
	test_adaptive();
	bp_profile_release(&prof);
	return CHECK_DONE();
}
