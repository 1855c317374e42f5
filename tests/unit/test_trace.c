/* test_trace.c: the balplan.trace/v1 codec (trace_json.c: round trip, strict reading) and the
 * refit of planner/solve/refit.c (the split of a micro-batch time into attention, linear and
 * collective parts matches bp_cost_microbatch; least squares recovers known factors; the
 * rescaled profile predicts what the factors say). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "check.h"
#include "codec.h"
#include "costmodel.h"
#include "jsonutil.h"
#include "presets.h"
#include "profile.h"
#include "refit.h"
#include "trace.h"

/* A trace of world 4 (tp 1, cp 2, pp 2, dp 1), two steps, two micro-batches per rank. */
static void make_trace(struct bp_trace *t)
{
	bp_trace_init(t);
	memset(t->plan_sha, 'a', 64);
	strcpy(t->method, "fixed");
	strcpy(t->backend, "host");
	t->time_scale = 0.25;
	t->timeout_s = 300;
	t->max_bytes = 65536;
	t->warmup = 1;
	t->world = 4;
	t->nsteps = 2;
	t->steps = calloc(2, sizeof(*t->steps));
	for (size_t i = 0; i < 2; i++) {
		struct bp_trace_step *s = &t->steps[i];
		s->index = (int64_t)(3 + 2 * i);
		s->predicted_us = 1000.5 + i;
		s->nranks = 4;
		s->ranks = calloc(4, sizeof(*s->ranks));
		for (int r = 0; r < 4; r++) {
			struct bp_trace_rank *k = &s->ranks[r];
			k->rank = r;
			k->cp_i = r % 2;
			k->stage = r / 2;
			k->pipeline_us = 200.125 + r;
			k->grad_sync_us = 50.5;
			k->step_us = k->pipeline_us + k->grad_sync_us;
			if (k->step_us > s->step_us)
				s->step_us = k->step_us;
			k->nmbs = 2;
			k->mbs = calloc(2, sizeof(*k->mbs));
			for (int j = 0; j < 2; j++)
				k->mbs[j] = (struct bp_trace_mb){10.0 * j + r, 20.25 + j, 100.0 + j,
								 40.5 + r};
		}
	}
}

/* Decodes text into a fresh trace; returns the codec's result, err filled. */
static int decode(const char *text, struct bp_error *err)
{
	struct bp_trace t;
	bp_trace_init(&t);
	int rc = bp_json_parse_text(text, strlen(text), trace_cb, &t, err);
	bp_trace_release(&t);
	return rc;
}

static void test_round_trip(void)
{
	struct bp_trace t, u;
	struct bp_error err;
	make_trace(&t);
	char *a = trace_text(&t);
	CHECK(a != NULL);
	bp_trace_init(&u);
	CHECK(bp_json_parse_text(a, strlen(a), trace_cb, &u, &err) == 0);
	char *b = trace_text(&u);
	CHECK(b && !strcmp(a, b));
	CHECK(u.nsteps == 2 && u.steps[1].index == 5 && u.world == 4);
	CHECK(!strcmp(u.plan_sha, t.plan_sha) && !strcmp(u.backend, "host"));
	CHECK_NEAR(u.time_scale, 0.25, 0);
	CHECK(u.steps[1].ranks[3].nmbs == 2 && u.steps[1].ranks[3].stage == 1);
	CHECK_NEAR(u.steps[1].ranks[3].mbs[1].bwd_us, 43.5, 0);
	CHECK_NEAR(u.steps[0].ranks[2].mbs[1].fwd_start_us, 12.0, 0);
	free(a);
	free(b);
	bp_trace_release(&t);
	bp_trace_release(&u);
	bp_trace_release(&u); /* idempotent */
}

/* Applies one mutation to the canonical JSON of the test trace and expects decoding to fail
 * with an error containing want. */
static void expect_error(void (*mutate)(json_t *), const char *want)
{
	struct bp_trace t;
	struct bp_error err = {""};
	make_trace(&t);
	json_t *j = bp_trace_to_json(&t);
	mutate(j);
	char *text = bp_json_dump_canonical(j);
	json_decref(j);
	CHECK(text && decode(text, &err) < 0);
	if (!strstr(err.text, want)) {
		fprintf(stderr, "error \"%s\" does not contain \"%s\"\n", err.text, want);
		CHECK(!"error text");
	}
	free(text);
	bp_trace_release(&t);
}

static json_t *rank_obj(json_t *j, size_t step, size_t rank)
{
	return json_array_get(json_object_get(json_array_get(json_object_get(j, "steps"), step),
					      "ranks"),
			      rank);
}

static void m_top_key(json_t *j) { json_object_set_new(j, "bogus", json_integer(1)); }
static void m_rank_key(json_t *j)
{
	json_object_set_new(rank_obj(j, 1, 2), "color", json_true());
}
static void m_mb_key(json_t *j)
{
	json_object_set_new(json_array_get(json_object_get(rank_obj(j, 0, 1), "microbatches"), 1),
			    "kernel_us", json_real(1.0));
}
static void m_world_type(json_t *j) { json_object_set_new(j, "world", json_string("4")); }
static void m_scale_type(json_t *j) { json_object_set_new(j, "time_scale", json_string("x")); }
static void m_mb_type(json_t *j)
{
	json_object_set_new(json_array_get(json_object_get(rank_obj(j, 0, 1), "microbatches"), 1),
			    "fwd_us", json_string("20"));
}
static void m_rank_type(json_t *j)
{
	json_object_set_new(rank_obj(j, 0, 0), "microbatches", json_object());
}
static void m_ranks_count(json_t *j)
{
	json_array_remove(json_object_get(json_array_get(json_object_get(j, "steps"), 1), "ranks"),
			  3);
}
static void m_world_count(json_t *j) { json_object_set_new(j, "world", json_integer(8)); }
static void m_rank_order(json_t *j)
{
	json_t *ranks = json_object_get(json_array_get(json_object_get(j, "steps"), 0), "ranks");
	json_t *r1 = json_incref(json_array_get(ranks, 1));
	json_array_remove(ranks, 1);
	json_array_append_new(ranks, r1);
}
static void m_step_order(json_t *j)
{
	json_object_set_new(json_array_get(json_object_get(j, "steps"), 1), "index",
			    json_integer(3));
}
static void m_role_range(json_t *j)
{
	json_object_set_new(rank_obj(j, 0, 3), "cp_i", json_integer(-2));
}
static void m_negative(json_t *j)
{
	json_object_set_new(rank_obj(j, 0, 3), "step_us", json_real(-1));
}
static void m_format(json_t *j)
{
	json_object_set_new(j, "format", json_string("balplan.trace/v9"));
}
static void m_missing(json_t *j) { json_object_del(j, "backend"); }

static void test_strict(void)
{
	expect_error(m_top_key, "unknown key \"bogus\" in trace");
	expect_error(m_rank_key, "unknown key \"color\" in trace.steps[1].ranks[2]");
	expect_error(m_rank_key, "line "); /* bp_json_parse_text adds where the key stands */
	expect_error(m_mb_key, "trace.steps[0].ranks[1].microbatches[1]");
	expect_error(m_world_type, "world");
	expect_error(m_scale_type, "time_scale");
	expect_error(m_mb_type, "trace.steps[0].ranks[1].microbatches[1]");
	expect_error(m_rank_type, "microbatches");
	expect_error(m_ranks_count, "trace.steps[1].ranks has 3 entries, expected world = 4");
	expect_error(m_world_count, "expected world = 8");
	expect_error(m_rank_order, "trace.steps[0].ranks[1]");
	expect_error(m_step_order, "trace.steps[1].index");
	expect_error(m_role_range, "cp_i");
	expect_error(m_negative, "step_us");
	expect_error(m_format, "format");
	expect_error(m_missing, "backend");

	struct bp_error err;
	CHECK(decode("{\"format\": \"balplan.trace/v1\",", &err) < 0);
	CHECK(strstr(err.text, "line 1") != NULL);
	CHECK(decode("[]", &err) < 0);
}

/* A deterministic value in [lo, hi). */
static double lcg(uint64_t *s, double lo, double hi)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return lo + (hi - lo) * (double)(*s >> 11) / 9007199254740992.0;
}

static void test_fit(void)
{
	enum { N = 200 };
	struct bp_refit_obs obs[N];
	struct bp_refit f;
	struct bp_error err;
	uint64_t s = 42;
	/* Exact data: the factors come back. */
	for (int i = 0; i < N; i++) {
		obs[i].pred = (struct bp_refit_parts){lcg(&s, 0, 5000), lcg(&s, 100, 3000),
						      lcg(&s, 0, 400)};
		obs[i].measured = 1.37 * obs[i].pred.attn + 0.82 * obs[i].pred.linear +
				  obs[i].pred.coll;
	}
	obs[7].pred = (struct bp_refit_parts){0, 0, 0}; /* no information: skipped */
	obs[7].measured = 1e6;
	CHECK(bp_refit_fit(obs, N, &f, &err) == 0);
	CHECK_NEAR(f.alpha, 1.37, 1e-6);
	CHECK_NEAR(f.beta, 0.82, 1e-6);
	CHECK(!f.common && !f.clamped && f.nused == N - 1);
	CHECK_NEAR(bp_refit_predict(&f, &obs[3].pred), obs[3].measured, 1e-6 * obs[3].measured);

	/* Noise that is symmetric in relative terms leaves the factors near the truth. */
	for (int i = 0; i < N; i++)
		obs[i].measured = (1.37 * obs[i].pred.attn + 0.82 * obs[i].pred.linear +
				   obs[i].pred.coll) * (i % 2 ? 1.01 : 0.99);
	CHECK(bp_refit_fit(obs, N, &f, &err) == 0);
	CHECK(fabs(f.alpha - 1.37) < 0.05 && fabs(f.beta - 0.82) < 0.05);

	/* No attention anywhere: one common factor. */
	for (int i = 0; i < N; i++) {
		obs[i].pred.attn = 0;
		obs[i].measured = 0.82 * obs[i].pred.linear + obs[i].pred.coll;
	}
	CHECK(bp_refit_fit(obs, N, &f, &err) == 0);
	CHECK(f.common && !f.clamped);
	CHECK_NEAR(f.alpha, 0.82, 1e-6);
	CHECK_NEAR(f.beta, 0.82, 1e-6);

	/* Attention always twice the linear time: not separable either. */
	for (int i = 0; i < N; i++) {
		obs[i].pred.attn = 2 * obs[i].pred.linear;
		obs[i].measured = 1.5 * (obs[i].pred.attn + obs[i].pred.linear) + obs[i].pred.coll;
	}
	CHECK(bp_refit_fit(obs, N, &f, &err) == 0);
	CHECK(f.common);
	CHECK_NEAR(f.alpha, 1.5, 1e-6);

	/* Far off: clamped to the range, the other factor refitted then clamped too. */
	s = 7;
	for (int i = 0; i < N; i++) {
		obs[i].pred = (struct bp_refit_parts){lcg(&s, 0, 5000), lcg(&s, 100, 3000), 0};
		obs[i].measured = 500 * obs[i].pred.attn + 1.0 * obs[i].pred.linear;
	}
	CHECK(bp_refit_fit(obs, N, &f, &err) == 0);
	CHECK(f.clamped && !f.common);
	CHECK_NEAR(f.alpha, BP_REFIT_MAX, 0);
	CHECK(f.beta >= BP_REFIT_MIN && f.beta <= BP_REFIT_MAX);

	/* Negative attention factor from the data: clamped low, beta refitted. */
	for (int i = 0; i < N; i++)
		obs[i].measured = 1.0 * obs[i].pred.linear; /* alpha = 0 */
	CHECK(bp_refit_fit(obs, N, &f, &err) == 0);
	CHECK(f.clamped);
	CHECK_NEAR(f.alpha, BP_REFIT_MIN, 0);
	CHECK(f.beta > 0.9 && f.beta < 1.0);

	/* Nothing to fit. */
	for (int i = 0; i < N; i++)
		obs[i].pred = (struct bp_refit_parts){0, 0, 5};
	CHECK(bp_refit_fit(obs, N, &f, &err) < 0);
	CHECK(strstr(err.text, "no micro-batch operation") != NULL);
	CHECK(bp_refit_fit(obs, 0, &f, &err) < 0);
}

static const struct bp_span spans_a[] = {{0, 0, 3000}, {1, 0, 700}, {2, 0, 129}, {3, 0, 5}};
static const struct bp_span spans_b[] = {{4, 100, 8000}};
static const struct bp_span spans_c[] = {{5, 0, 17}, {6, 0, 33}, {7, 0, 1}};

/* The split adds up to bp_cost_microbatch for every stage, direction and shard mode. */
static void check_split(const struct bp_costmodel *cm)
{
	const struct bp_span *sets[3] = {spans_a, spans_b, spans_c};
	size_t ns[3] = {4, 1, 3};
	int pp = cm->sc.pp;
	double *fwd = calloc((size_t)pp, sizeof(double)), *bwd = calloc((size_t)pp, sizeof(double));
	struct bp_error err;
	for (int k = 0; k < 3; k++)
		for (int m = 0; m < 2; m++) {
			CHECK(bp_cost_microbatch(cm, sets[k], ns[k], (enum bp_shard)m, fwd, bwd, NULL,
						 &err) == 0);
			for (int s = 0; s < pp; s++) {
				struct bp_refit_parts f, b;
				CHECK(bp_refit_split(cm, sets[k], ns[k], (enum bp_shard)m, s, &f, &b,
						     &err) == 0);
				CHECK_NEAR(f.attn + f.linear + f.coll, fwd[s], 1e-9 * fwd[s]);
				CHECK_NEAR(b.attn + b.linear + b.coll, bwd[s], 1e-9 * bwd[s]);
				CHECK(f.attn > 0 && f.linear > 0 && b.attn > f.attn);
				CHECK((cm->sc.tp * cm->sc.cp > 1) == (f.coll > 0));
			}
		}
	struct bp_refit_parts f, b;
	CHECK(bp_refit_split(cm, spans_a, 4, BP_SHARD_ADAPTIVE, 0, &f, &b, &err) < 0);
	CHECK(bp_refit_split(cm, spans_a, 4, BP_SHARD_SEQUENCE, pp, &f, &b, &err) < 0);
	free(fwd);
	free(bwd);
}

static void test_split_and_profile(void)
{
	const struct bp_gpu *g = bp_gpu_preset("H100");
	const struct bp_model *m = bp_model_preset("llama3-8b");
	struct bp_scheme sc[3] = {{2, 2, 2}, {1, 1, 1}, {2, 1, 4}};
	struct bp_profile p, q, q2;
	struct bp_costmodel cm, cmq;
	struct bp_error err;
	bp_profile_init(&p);
	bp_profile_init(&q);
	bp_profile_init(&q2);
	CHECK(g && m);
	CHECK(bp_profile_analytic(&p, g, m, sc, 3, 8192, &err) == 0);
	for (int i = 0; i < 3; i++) {
		CHECK(bp_costmodel_init(&cm, &p, sc[i], 2, &err) == 0);
		check_split(&cm);
		bp_costmodel_release(&cm);
	}

	struct bp_refit f = {1.5, 0.7, 0, 0, 1};
	CHECK(bp_refit_profile(&p, &f, &q, &err) == 0);
	CHECK(!strcmp(q.kind, "measured"));
	CHECK(!strcmp(q.name, "refit-analytic-H100-llama3-8b"));
	CHECK(q.nattn == p.nattn && q.nlinear == p.nlinear && q.ncoll == p.ncoll);
	CHECK(q.nfits == p.nfits);
	for (size_t i = 0; i < q.nattn; i++) {
		size_t n = q.attn[i].nq * q.attn[i].nkv;
		for (size_t k = 0; k < n; k += 7) {
			CHECK_NEAR(q.attn[i].fwd[k], 1.5 * p.attn[i].fwd[k], 2e-3);
			CHECK_NEAR(q.attn[i].bwd[k], 1.5 * p.attn[i].bwd[k], 2e-3);
		}
	}
	for (size_t i = 0; i < q.nlinear; i++)
		for (size_t k = 0; k < q.linear[i].n; k++)
			CHECK_NEAR(q.linear[i].fwd[k], 0.7 * p.linear[i].fwd[k], 2e-3);
	for (size_t i = 0; i < q.ncoll; i++)
		for (size_t k = 0; k < q.coll[i].n; k++)
			CHECK_NEAR(q.coll[i].us[k], p.coll[i].us[k], 1e-3);
	/* The T(l,P) fits follow the tables: a long sequence costs more with alpha > 1. */
	CHECK(q.fits[0].a > p.fits[0].a);

	/* Re-predicting on the refit profile gives alpha*attn + beta*linear + coll (one CP rank:
	 * no other rank can become the slowest; tables rounded to 1e-3 per entry). */
	CHECK(bp_costmodel_init(&cm, &p, sc[2], 1, &err) == 0);
	CHECK(bp_costmodel_init(&cmq, &q, sc[2], 1, &err) == 0);
	double fwd[4], bwd[4];
	CHECK(bp_cost_microbatch(&cmq, spans_a, 4, BP_SHARD_SEQUENCE, fwd, bwd, NULL, &err) == 0);
	for (int s = 0; s < 4; s++) {
		struct bp_refit_parts pf, pb;
		CHECK(bp_refit_split(&cm, spans_a, 4, BP_SHARD_SEQUENCE, s, &pf, &pb, &err) == 0);
		CHECK_NEAR(bp_refit_predict(&f, &pf), fwd[s], 1e-5 * fwd[s]);
		CHECK_NEAR(bp_refit_predict(&f, &pb), bwd[s], 1e-5 * bwd[s]);
	}
	bp_costmodel_release(&cm);
	bp_costmodel_release(&cmq);

	/* A refit of a refit keeps its name; a codec round trip of it holds. */
	CHECK(bp_refit_profile(&q, &f, &q2, &err) == 0);
	CHECK(!strcmp(q2.name, "refit-analytic-H100-llama3-8b"));
	json_t *j = bp_profile_to_json(&q2);
	struct bp_profile r;
	bp_profile_init(&r);
	CHECK(j && bp_profile_from_json(&r, j, &err) == 0);
	json_decref(j);
	bp_profile_release(&r);

	struct bp_refit bad = {0.0, 1.0, 0, 0, 1};
	CHECK(bp_refit_profile(&p, &bad, &q2, &err) < 0);
	CHECK(q2.nattn == 0); /* released on failure */
	bp_profile_release(&p);
	bp_profile_release(&q);
	bp_profile_release(&q2);
}

int main(void)
{
	test_round_trip();
	test_strict();
	test_fit();
	test_split_and_profile();
	return CHECK_DONE();
}
