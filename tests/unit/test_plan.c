/* test_plan.c: plan invariants on every plan the methods produce, codec round trips, and
 * the validator catching each kind of breach. */
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "check.h"
#include "solve_fixture.h"
#include "jsonutil.h"
#include "method.h"
#include "solve.h"
#include "validate.h"

/* The loader's document mode every solve below uses (documents.h). */
static enum bp_documents docs_mode = BP_DOCS_WHOLE;

/* A request of the tests below: tps > 0 a token budget, tps < 0 -tps documents per step. */
struct req {
	const char *dataset;
	struct bp_scheme sc;
	int gpus;
	int64_t max_tokens, tps;
	uint64_t seed;
	enum bp_shard shard;
};

static int solve(const char *method, const struct req *r, struct bp_profile *prof,
		 struct bp_plan *plan)
{
	struct bp_error err;
	struct bp_solve_opts o = test_solve_opts(method, r->dataset, r->sc, r->gpus);
	o.steps = 4;
	o.max_tokens = r->max_tokens;
	o.tokens_per_step = r->tps > 0 ? r->tps : 0;
	o.docs_per_step = r->tps < 0 ? -r->tps : 0;
	o.documents = docs_mode;
	o.seed = r->seed;
	o.shard = r->shard;
	int rc = test_solve_preset(prof, &o, plan, &err);
	if (rc)
		fprintf(stderr, "solve %s: %s\n", method, err.text);
	return rc;
}

/* Every method, several schemes, seeds, datasets and document modes: valid plans, exact
 * round trips, the token budget respected, check passes; under "whole" and "cut" every
 * method trains the same model FLOPs (like for like, issue 10 item 1). */
static void test_all_methods(void)
{
	struct bp_scheme schemes[3] = {{2, 2, 2}, {2, 1, 4}, {2, 4, 1}};
	const char *datasets[2] = {"synthetic-longtail", "tiny-uniform"};
	for (size_t sidx = 0; sidx < 3; sidx++) {
		struct bp_profile prof;
		struct bp_error err;
		bp_profile_init(&prof);
		CHECK(bp_profile_analytic(&prof, bp_gpu_preset("H100"), bp_model_preset("llama3-8b"),
					  &schemes[sidx], 1, 32768, &err) == 0);
		double work[2][4] = {{-1, -1, -1, -1}, {-1, -1, -1, -1}};
		for (size_t m = 0; m < bp_method_count(); m++)
			for (size_t d = 0; d < 2 && bp_method_in_all(bp_method_at(m)); d++)
				for (uint64_t seed = 1; seed <= 3; seed++) {
					struct bp_plan plan, back;
					docs_mode = (enum bp_documents)(seed - 1); /* each mode */
					int gpus = 32;
					int64_t L = d ? 4096 : 16384;
					int64_t tps = 3 * L;
					enum bp_shard sh = seed % 2 ? BP_SHARD_SEQUENCE : BP_SHARD_DOCUMENT;
					const struct req rq = {datasets[d], schemes[sidx], gpus, L,
							       tps, seed, sh};
					if (solve(bp_method_at(m)->name, &rq, &prof, &plan) != 0) {
						CHECK(0);
						continue;
					}
					/* the budget bounds each step unless documents were delayed
					 * into it (then only the total is conserved) */
					int64_t drawn = 0, trained = 0;
					for (size_t i = 0; i < plan.nsteps; i++) {
						if (!plan.summary.delayed)
							CHECK(plan.steps[i].m.tokens <= tps);
						for (size_t k = 0; k < plan.steps[i].ndocs; k++)
							drawn += plan.steps[i].docs[k].len;
						trained += plan.steps[i].m.tokens;
					}
					CHECK(drawn == trained);
					CHECK(bp_plan_validate(&plan, NULL, &err) == 0);
					CHECK(plan.documents == docs_mode);
					CHECK(plan.summary.model_tflop > 0 && plan.summary.mfu > 0 &&
					      plan.summary.mfu < 1);
					if (docs_mode != BP_DOCS_PER_METHOD) {
						double *w = &work[d][seed];
						if (*w < 0)
							*w = plan.summary.model_tflop;
						CHECK_NEAR(plan.summary.model_tflop, *w, 1e-9 * *w);
					}
					char *a = plan_text(&plan, TEXT_LINES);
					CHECK(a != NULL);
					bp_plan_init(&back);
					CHECK(bp_json_parse_text(a, strlen(a), plan_cb, &back, &err) == 0);
					char *b = plan_text(&back, TEXT_LINES);
					CHECK(b && !strcmp(a, b));
					CHECK(bp_plan_check(&back, &prof, &err) == 0 || (fprintf(stderr, "%s\n", err.text), 0));
					free(a);
					free(b);
					bp_plan_release(&back);
					bp_plan_release(&plan);
				}
		bp_profile_release(&prof);
	}
	docs_mode = BP_DOCS_WHOLE;
}

/* The validator names each breach. */
static void test_breaches(void)
{
	struct bp_profile prof;
	struct bp_plan plan;
	struct bp_error err;
	struct bp_scheme sc = {2, 2, 2};
	struct bp_costs cm;
	bp_profile_init(&prof);
	CHECK(bp_profile_analytic(&prof, bp_gpu_preset("H100"), bp_model_preset("llama3-8b"), &sc,
				  1, 16384, &err) == 0);
	const struct req rq = {"synthetic-longtail", sc, 16, 16384, 3 * 16384, 7,
			       BP_SHARD_SEQUENCE};
	CHECK(solve("fixed", &rq, &prof, &plan) == 0);
	CHECK(bp_plan_costs(&plan, &prof, &cm, &err) == 0);
	CHECK(bp_plan_validate(&plan, &cm, &err) == 0);
	struct bp_mb *mb = &plan.steps[0].pipes[0].mbs[0];
	/* whole documents: a span that covers part of its document is a cut */
	mb->spans[0].len--;
	CHECK(bp_plan_validate(&plan, &cm, &err) == -1 && strstr(err.text, "cuts document") &&
	      strstr(err.text, "\"whole\""));
	mb->spans[0].len++;
	/* the tiling invariants, where a method may cut (per-method) */
	plan.documents = BP_DOCS_PER_METHOD;
	/* a token lost */
	mb->spans[0].len--;
	CHECK(bp_plan_validate(&plan, &cm, &err) == -1 && strstr(err.text, "is trained for"));
	/* a span past the end of its document */
	mb->spans[0].len += 2;
	CHECK(bp_plan_validate(&plan, &cm, &err) == -1 && strstr(err.text, "lies outside"));
	mb->spans[0].len--;
	/* overlapping spans: split the first span in two that overlap by one token */
	struct bp_span s0 = mb->spans[0];
	if (s0.len >= 4) {
		struct bp_span two[2] = {{s0.doc, 0, s0.len / 2 + 1}, {s0.doc, s0.len / 2, s0.len - s0.len / 2}};
		struct bp_span *ns = realloc(mb->spans, (mb->nspans + 1) * sizeof(*ns));
		CHECK(ns != NULL);
		mb->spans = ns;
		memmove(&ns[2], &ns[1], (mb->nspans - 1) * sizeof(*ns));
		ns[0] = two[0];
		ns[1] = two[1];
		mb->nspans++;
		CHECK(bp_plan_validate(&plan, &cm, &err) == -1 &&
		      (strstr(err.text, "overlapping") || strstr(err.text, "more than max_microbatch_tokens")));
		memmove(&ns[1], &ns[2], (mb->nspans - 2) * sizeof(*ns));
		ns[0] = s0;
		mb->nspans--;
	}
	CHECK(bp_plan_validate(&plan, &cm, &err) == 0);
	/* token cap */
	int64_t keep = bp_plan_mb_cap(&plan);
	bp_plan_set_mb_cap(&plan, 1);
	plan.max_tokens = 1;
	CHECK(bp_plan_validate(&plan, &cm, &err) == -1 && strstr(err.text, "max_microbatch_tokens"));
	bp_plan_set_mb_cap(&plan, keep);
	plan.max_tokens = keep;
	/* memory cap */
	int64_t mem = plan.steps[0].pipes[0].peak_mem[0];
	plan.steps[0].pipes[0].peak_mem[0] = (int64_t)1 << 50;
	CHECK(bp_plan_validate(&plan, &cm, &err) == -1 && strstr(err.text, "GiB cap"));
	plan.steps[0].pipes[0].peak_mem[0] = mem;
	/* ranks that do not match the cluster */
	plan.cluster.gpus = 8;
	CHECK(bp_plan_validate(&plan, &cm, &err) == -1 && strstr(err.text, "outside the cluster"));
	plan.cluster.gpus = 16;
	/* a layout whose pipelines overlap */
	int r0 = plan.layouts[0].pipes[1].ranks[0];
	plan.layouts[0].pipes[1].ranks[0] = plan.layouts[0].pipes[0].ranks[0];
	CHECK(bp_plan_validate(&plan, &cm, &err) == -1 && strstr(err.text, "two pipelines"));
	plan.layouts[0].pipes[1].ranks[0] = r0;
	/* a delay to a step that does not exist */
	plan.steps[0].delayed = calloc(1, sizeof(struct bp_delayed));
	plan.steps[0].delayed[0] = (struct bp_delayed){plan.steps[0].docs[0].id, 1, 99};
	plan.steps[0].ndelayed = 1;
	CHECK(bp_plan_validate(&plan, &cm, &err) == -1 && strstr(err.text, "to step 99"));
	bp_costs_release(&cm);
	bp_plan_release(&plan);
	bp_profile_release(&prof);
}

/* The loader's window cut (documents.h): a known answer, and plain under "cut" trains the
 * same micro-batches as plain cutting by itself ("per-method"), which trains fewer model
 * FLOPs than whole documents. */
static void test_documents(void)
{
	struct bp_error err;
	struct bp_batches b = {0};
	b.n = 2;
	b.b = calloc(2, sizeof(*b.b));
	b.b[0].docs = calloc(3, sizeof(struct bp_doc));
	b.b[1].docs = calloc(1, sizeof(struct bp_doc));
	CHECK(b.b && b.b[0].docs && b.b[1].docs);
	int64_t lens[3] = {5, 7, 3};
	for (int i = 0; i < 3; i++)
		b.b[0].docs[i] = (struct bp_doc){.id = i, .len = lens[i]};
	b.b[0].ndocs = 3;
	b.b[0].tokens = 15;
	b.b[1].docs[0] = (struct bp_doc){.id = 3, .len = 4};
	b.b[1].ndocs = 1;
	b.b[1].tokens = 4;
	int64_t cut = -1;
	CHECK(bp_batches_cut(&b, 4, &cut, &err) == 0);
	/* stream 5 | 7 | 3 cut every 4 tokens: 4 1 | 3 4 | 3, then the next step's 4 alone */
	int64_t want[5] = {4, 1, 3, 4, 3};
	CHECK(cut == 2 && b.b[0].ndocs == 5 && b.b[0].tokens == 15);
	for (size_t i = 0; i < b.b[0].ndocs && i < 5; i++)
		CHECK(b.b[0].docs[i].id == (int64_t)i && b.b[0].docs[i].len == want[i]);
	CHECK(b.b[1].ndocs == 1 && b.b[1].docs[0].id == 5 && b.b[1].docs[0].len == 4);
	CHECK(bp_batches_cut(&b, 0, NULL, &err) == -1);
	bp_batches_release(&b);
	enum bp_documents m;
	CHECK(bp_documents_parse("per-method", &m) == 0 && m == BP_DOCS_PER_METHOD);
	CHECK(bp_documents_parse("window", &m) == -1);
	CHECK(!strcmp(bp_documents_name(BP_DOCS_CUT), "cut"));

	struct bp_profile prof;
	struct bp_scheme sc = {2, 2, 2};
	bp_profile_init(&prof);
	CHECK(bp_profile_analytic(&prof, bp_gpu_preset("H100"), bp_model_preset("llama3-8b"), &sc,
				  1, 16384, &err) == 0);
	struct bp_plan p[3];
	for (int k = 0; k < 3; k++) {
		docs_mode = (enum bp_documents)k;
		const struct req rq = {"synthetic-longtail", sc, 16, 16384, 4 * 16384, 5,
				       BP_SHARD_SEQUENCE};
		CHECK(solve("plain", &rq, &prof, &p[k]) == 0);
	}
	docs_mode = BP_DOCS_WHOLE;
	const struct bp_plan *whole = &p[BP_DOCS_WHOLE], *lc = &p[BP_DOCS_CUT],
			     *self = &p[BP_DOCS_PER_METHOD];
	CHECK(!strcmp(bp_plan_documents_trained(whole), "whole"));
	CHECK(!strcmp(bp_plan_documents_trained(lc), "cut"));
	CHECK(!strcmp(bp_plan_documents_trained(self), "cut"));
	CHECK(lc->nsteps == self->nsteps);
	for (size_t i = 0; i < lc->nsteps && i < self->nsteps; i++) {
		CHECK_NEAR(lc->steps[i].m.step_us, self->steps[i].m.step_us, 1e-9);
		CHECK_NEAR(lc->steps[i].m.model_tflop, self->steps[i].m.model_tflop, 1e-9);
		CHECK(lc->steps[i].m.nmbs == self->steps[i].m.nmbs);
	}
	CHECK(whole->summary.tokens == lc->summary.tokens);
	CHECK(lc->summary.model_tflop < whole->summary.model_tflop);
	for (int k = 0; k < 3; k++)
		bp_plan_release(&p[k]);
	bp_profile_release(&prof);
}

/* Balancing by the cost model lowers the micro-batch imbalance of dataloader order on a
 * long-tailed dataset (step time need not drop: a full token budget leaves fixed-length
 * packing no room to isolate an outlier; WLB-LLM Sec. 4.1). */
static void test_fixed_beats_plain(void)
{
	struct bp_profile prof;
	struct bp_error err;
	struct bp_scheme sc = {8, 2, 4};
	bp_profile_init(&prof);
	CHECK(bp_profile_analytic(&prof, bp_gpu_preset("H100"), bp_model_preset("llama3-8b"), &sc,
				  1, 131072, &err) == 0);
	for (uint64_t seed = 1; seed <= 3; seed++) {
		struct bp_plan a, b;
		const struct req rq = {"synthetic-longtail", sc, 64, 131072, -100, seed,
				       BP_SHARD_SEQUENCE};
		CHECK(solve("plain", &rq, &prof, &a) == 0);
		CHECK(solve("fixed", &rq, &prof, &b) == 0);
		CHECK(b.summary.imb_wlb_mean < a.summary.imb_wlb_mean);
		CHECK(a.summary.tokens == b.summary.tokens);
		bp_plan_release(&a);
		bp_plan_release(&b);
	}
	bp_profile_release(&prof);
}

int main(void)
{
	test_all_methods();
	test_breaches();
	test_documents();
	test_fixed_beats_plain();
	return CHECK_DONE();
}
