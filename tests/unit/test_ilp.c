/* test_ilp.c: the GLPK wrapper (ilp.c) and the packing ILP of fixed-ilp / wlb-ilp
 * (ilp_pack.c, WLB-LLM Eq. 1 and Eq. 2): brute force on tiny instances equals the ILP
 * optimum; the ILP is never worse than its warm start; the deterministic work limit ends
 * searches reproducibly; the time limit is honoured within 0.5 s and is an error for a
 * packing; GLPK errors come back as -1 with a message and the next solve works; nothing is
 * written to stdout; the methods give valid, deterministic plans never worse than "fixed". */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analytic.h"
#include "check.h"
#include "solve_fixture.h"
#include "ilp_pack.h"
#include "pack.h"
#include "rng.h"
#include "solve.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Random instance: lengths in [1, L], cost = quadratic + linear part (Eq. 2's W_a + W_l). */
static void random_items(struct bp_rng *g, size_t n, int64_t L, double lin, int64_t *len,
			 double *w)
{
	for (size_t i = 0; i < n; i++) {
		/* long tail: most short, a few long */
		double u = bp_rng_uniform(g);
		len[i] = 1 + (int64_t)((double)(L - 1) * u * u * u);
		w[i] = (double)len[i] * (double)len[i] / (double)L + lin * (double)len[i];
	}
}

/* Minimum over all assignments of the largest bin cost under the cap (M^n enumeration). */
static double brute_force(const double *w, const int64_t *len, size_t n, size_t M, int64_t cap)
{
	int bin[16] = {0};
	double best = INFINITY;
	for (;;) {
		double load[8] = {0};
		int64_t fill[8] = {0};
		int ok = 1;
		for (size_t i = 0; i < n; i++) {
			load[bin[i]] += w[i];
			fill[bin[i]] += len[i];
		}
		double mx = 0;
		for (size_t j = 0; j < M; j++) {
			ok &= fill[j] <= cap;
			if (load[j] > mx)
				mx = load[j];
		}
		if (ok && mx < best)
			best = mx;
		size_t i = 0;
		while (i < n && ++bin[i] == (int)M)
			bin[i++] = 0;
		if (i == n)
			break;
	}
	return best;
}

static double max_load(const double *w, const int *bin_of, size_t n, size_t M)
{
	double load[64] = {0}, mx = 0;
	for (size_t i = 0; i < n; i++)
		load[bin_of[i]] += w[i];
	for (size_t j = 0; j < M; j++)
		if (load[j] > mx)
			mx = load[j];
	return mx;
}

static int fits(const int64_t *len, const int *bin_of, size_t n, size_t M, int64_t cap)
{
	int64_t fill[64] = {0};
	for (size_t i = 0; i < n; i++) {
		if (bin_of[i] < 0 || (size_t)bin_of[i] >= M)
			return 0;
		fill[bin_of[i]] += len[i];
	}
	for (size_t j = 0; j < M; j++)
		if (fill[j] > cap)
			return 0;
	return 1;
}

/* Brute force equals the ILP optimum, for Eq. 1 (cap L, cost mostly quadratic) and Eq. 2
 * (cap 2L, linear part as large as the quadratic one), with every formulation switch. */
static void test_brute_force(void)
{
	struct bp_rng g;
	struct bp_error err;
	bp_rng_seed(&g, 42);
	int solved = 0;
	for (int t = 0; t < 120; t++) {
		size_t n = 3 + (size_t)bp_rng_below(&g, 6), M = 2 + (size_t)bp_rng_below(&g, 2);
		int64_t L = 1000, len[8];
		double w[8];
		int eq2 = t % 2;
		random_items(&g, n, L, eq2 ? 1.0 : 0.05, len, w);
		int64_t cap = eq2 ? 2 * L : L;
		double load[8];
		int64_t fill[8];
		int warm[8], bin_of[8];
		if (bp_pack_lpt(w, len, n, M, cap, warm, load, fill, &err) != 0)
			continue; /* the greedy needs more bins: the methods would add one */
		double opt = brute_force(w, len, n, M, cap);
		struct bp_ilp_opts o;
		bp_ilp_opts_default(&o);
		o.rel_gap = 0.0;
		o.node_limit = 0;
		struct bp_ilp_pack in = {w, len, n, M, cap, warm, 1, 1, 1};
		in.warm = t % 3 != 0;
		in.symmetry = t % 5 != 0;
		in.lower_bound = t % 7 != 0;
		struct bp_ilp_pack_result res;
		CHECK(bp_ilp_pack_solve(&in, &o, bin_of, &res, &err) == 0);
		CHECK(res.status == BP_ILP_OPTIMAL);
		CHECK_NEAR(res.objective, opt, 1e-9 * opt);
		CHECK_NEAR(max_load(w, bin_of, n, M), opt, 1e-9 * opt);
		CHECK(fits(len, bin_of, n, M, cap));
		CHECK(res.bound <= res.objective);
		CHECK(res.gap >= 0.0 && res.gap <= 1e-9);
		solved++;
	}
	CHECK(solved > 60);
}

/* Never worse than the warm start, whatever the budget; rounds and caps always hold. */
static void test_never_worse(void)
{
	struct bp_rng g;
	struct bp_error err;
	bp_rng_seed(&g, 7);
	int runs = 0, improved = 0;
	for (int t = 0; t < 60; t++) {
		size_t n = 10 + (size_t)bp_rng_below(&g, 50), M = 2 + (size_t)bp_rng_below(&g, 7);
		int64_t L = 4096, len[64];
		double w[64], load[64];
		int64_t fill[64];
		int warm[64], bin_of[64];
		random_items(&g, n, L, t % 2 ? 0.5 : 0.02, len, w);
		int64_t cap = t % 2 ? 2 * L : L;
		while (bp_pack_lpt(w, len, n, M, cap, warm, load, fill, &err) != 0)
			M++;
		struct bp_ilp_opts o;
		bp_ilp_opts_default(&o);
		o.node_limit = 1 + (int64_t)bp_rng_below(&g, 200);
		struct bp_ilp_pack in = {w, len, n, M, cap, warm, 1, 1, 1};
		struct bp_ilp_pack_result res;
		CHECK(bp_ilp_pack_solve(&in, &o, bin_of, &res, &err) == 0);
		double greedy = max_load(w, warm, n, M), got = max_load(w, bin_of, n, M);
		CHECK(got <= greedy);
		CHECK(res.objective == got);
		CHECK(fits(len, bin_of, n, M, cap));
		CHECK(res.bound <= res.objective * (1 + 1e-12));
		CHECK(res.status == BP_ILP_OPTIMAL || res.status == BP_ILP_FEASIBLE ||
		      res.status == BP_ILP_WARM_START);
		CHECK(res.status != BP_ILP_WARM_START || got == greedy);
		CHECK(res.status == BP_ILP_OPTIMAL || res.limit == BP_ILP_LIMIT_NODES ||
		      res.limit == BP_ILP_LIMIT_WORK);
		CHECK(res.status == BP_ILP_OPTIMAL || res.warning[0]);
		improved += got < greedy;
		runs++;
	}
	CHECK(runs == 60);
	CHECK(improved > 0);
}

/* A hard instance: near-equal costs, so LP bounds prove nothing and the search runs until
 * a limit ends it. */
static void hard_instance(int64_t *len, double *w, size_t n, int *warm, size_t M)
{
	struct bp_rng g;
	struct bp_error err;
	double load[64];
	int64_t fill[64];
	bp_rng_seed(&g, 99);
	for (size_t i = 0; i < n; i++) {
		len[i] = 1000 + (int64_t)bp_rng_below(&g, 1000);
		w[i] = 1e3 + (double)bp_rng_below(&g, 1000000) / 1e3;
	}
	CHECK(bp_pack_lpt(w, len, n, M, 1 << 30, warm, load, fill, &err) == 0);
}

/* The wall-clock safety net: with no deterministic budget a hard instance stops within 0.5 s
 * of the limit, and since what it found would depend on the machine's speed, packing it is
 * an error naming the limit (no plan may hold such a step). */
static void test_time_limit(void)
{
	struct bp_error err;
	size_t n = 60, M = 7;
	int64_t len[60];
	double w[60];
	int warm[60], bin_of[60];
	hard_instance(len, w, n, warm, M);
	struct bp_ilp_opts o;
	bp_ilp_opts_default(&o);
	o.rel_gap = 0.0;
	o.node_limit = 0;
	o.work_limit = 0;
	o.time_limit_s = 0.3;
	struct bp_ilp_pack in = {w, len, n, M, 1 << 30, warm, 1, 1, 1};
	struct bp_ilp_pack_result res;
	double t0 = now_s();
	CHECK(bp_ilp_pack_solve(&in, &o, bin_of, &res, &err) == -1);
	double dt = now_s() - t0;
	fprintf(stderr, "time limit 0.3 s: returned after %.3f s: %s\n", dt, err.text);
	CHECK(dt <= 0.3 + 0.5);
	CHECK(strstr(err.text, "ilp_time_limit_s 0.3") && strstr(err.text, "machine speed"));
}

/* The deterministic work budget (ilp.h): it ends the hard instance's search, the packing is
 * valid and never worse than the greedy, the same budget gives the same nodes, iterations
 * and packing on every run, a larger budget searches further, and a budget too small for
 * the root relaxation keeps the greedy with the certified bound. */
static void test_work_limit(void)
{
	struct bp_error err;
	size_t n = 60, M = 7;
	int64_t len[60];
	double w[60];
	int warm[60], a[60], b[60];
	hard_instance(len, w, n, warm, M);
	struct bp_ilp_opts o;
	bp_ilp_opts_default(&o);
	o.rel_gap = 0.0;
	o.node_limit = 0;
	o.time_limit_s = 60;
	o.work_limit = 3e6;
	struct bp_ilp_pack in = {w, len, n, M, 1 << 30, warm, 1, 1, 1};
	struct bp_ilp_pack_result r1, r2, r3;
	CHECK(bp_ilp_pack_solve(&in, &o, a, &r1, &err) == 0);
	CHECK(bp_ilp_pack_solve(&in, &o, b, &r2, &err) == 0);
	CHECK(r1.limit == BP_ILP_LIMIT_WORK && strstr(r1.warning, "work limit"));
	CHECK(r1.status == BP_ILP_FEASIBLE || r1.status == BP_ILP_WARM_START);
	CHECK(r1.nodes > 1 && r1.nodes == r2.nodes && r1.iterations == r2.iterations);
	CHECK(r1.work >= o.work_limit && r1.work == r2.work);
	CHECK(!memcmp(a, b, sizeof(a)) && r1.objective == r2.objective);
	CHECK(fits(len, a, n, M, 1 << 30));
	CHECK(max_load(w, a, n, M) <= max_load(w, warm, n, M));
	o.work_limit = 12e6;
	CHECK(bp_ilp_pack_solve(&in, &o, b, &r3, &err) == 0);
	CHECK(r3.limit == BP_ILP_LIMIT_WORK && r3.nodes > r1.nodes && r3.objective <= r1.objective);
	o.work_limit = 1; /* one simplex iteration: the root relaxation is not solved */
	CHECK(bp_ilp_pack_solve(&in, &o, b, &r3, &err) == 0);
	CHECK(r3.limit == BP_ILP_LIMIT_WORK && r3.status == BP_ILP_WARM_START && r3.nodes == 0);
	CHECK(!memcmp(b, warm, sizeof(b)));
	CHECK_NEAR(r3.bound, bp_pack_bound(w, n, M), 1e-9 * r3.bound);
}

/* The generic interface: a small integer program with a known optimum, integers read back
 * exactly; an infeasible one; and GLPK's error path (duplicate column indices in a row make
 * glp_set_mat_row fail) returning -1 with GLPK's message, after which GLPK works again. */
static void test_generic(void)
{
	struct bp_error err;
	struct bp_ilp_opts o;
	struct bp_ilp_result r;
	bp_ilp_opts_default(&o);
	/* max 5a + 4b + 3c s.t. 2a + 3b + c <= 5, 4a + b + 2c <= 11, 3a + 4b + 2c <= 8, a,b,c
	 * integer >= 0 (optimum 13 at a=2, b=0, c=1); minimised as its negation. */
	for (int round = 0; round < 2; round++) {
		struct bp_ilp *p = bp_ilp_new(&err);
		CHECK(p != NULL);
		if (!p)
			return;
		const double obj[3] = {-5, -4, -3};
		for (int j = 0; j < 3; j++)
			CHECK(bp_ilp_add_col(p, BP_ILP_INTEGER, 0, INFINITY, obj[j], &err) == j);
		const int64_t cols[3] = {0, 1, 2};
		const double r1[3] = {2, 3, 1}, r2[3] = {4, 1, 2}, r3[3] = {3, 4, 2};
		CHECK(bp_ilp_add_row(p, 3, cols, r1, -INFINITY, 5, &err) == 0);
		CHECK(bp_ilp_add_row(p, 3, cols, r2, -INFINITY, 11, &err) == 1);
		CHECK(bp_ilp_add_row(p, 3, cols, r3, -INFINITY, 8, &err) == 2);
		const double warm[3] = {1, 0, 2}; /* feasible, objective -11 */
		o.warm = round ? warm : NULL;
		CHECK(bp_ilp_solve(p, &o, &r, &err) == 0);
		CHECK(r.status == BP_ILP_OPTIMAL);
		CHECK_NEAR(r.objective, -13, 1e-9);
		CHECK(r.x && r.x[0] == 2 && r.x[1] == 0 && r.x[2] == 1);
		CHECK_NEAR(r.bound, -13, 1e-6);
		bp_ilp_result_release(&r);

		/* A warm start breaking a row is the caller's bug: an error, not a solve. */
		const double bad[3] = {3, 0, 0};
		o.warm = bad;
		CHECK(bp_ilp_solve(p, &o, &r, &err) == -1);
		CHECK(strstr(err.text, "warm start violates ilp row") != NULL);
		bp_ilp_result_release(&r);
		o.warm = NULL;

		/* Infeasible: a + b >= 3 with a + b <= 2 (through the rows above plus one). */
		const int64_t ab[2] = {0, 1};
		const double one[2] = {1, 1};
		CHECK(bp_ilp_add_row(p, 2, ab, one, 3, 3, &err) == 3);
		CHECK(bp_ilp_add_row(p, 2, ab, one, -INFINITY, 2, &err) == 4);
		CHECK(bp_ilp_solve(p, &o, &r, &err) == 0);
		CHECK(r.status == BP_ILP_INFEASIBLE);
		CHECK(r.x == NULL);
		bp_ilp_result_release(&r);

		/* GLPK's error path: duplicate indices. */
		const int64_t dup[2] = {1, 1};
		CHECK(bp_ilp_add_row(p, 2, dup, one, 0, 1, &err) == 5);
		memset(&err, 0, sizeof(err));
		CHECK(bp_ilp_solve(p, &o, &r, &err) == -1);
		CHECK(r.status == BP_ILP_ERROR && r.x == NULL);
		CHECK(strstr(err.text, "glpk failed") != NULL);
		CHECK(strstr(err.text, "duplicate") != NULL);
		fprintf(stderr, "error path: %s\n", err.text);
		bp_ilp_result_release(&r);
		/* Out-of-range column index: also GLPK's to reject. */
		bp_ilp_free(p);
		p = bp_ilp_new(&err);
		CHECK(bp_ilp_add_col(p, BP_ILP_BINARY, 0, 1, 1, &err) == 0);
		const int64_t far[1] = {7};
		CHECK(bp_ilp_add_row(p, 1, far, one, 0, 1, &err) == 0);
		CHECK(bp_ilp_solve(p, &o, &r, &err) == -1);
		CHECK(strstr(err.text, "glpk failed") != NULL);
		bp_ilp_result_release(&r);
		bp_ilp_free(p);
		/* the next round solves the same problem again: GLPK recovered */
	}
	CHECK(strcmp(bp_ilp_status_name(BP_ILP_WARM_START), "warm-start") == 0);
}

static struct bp_profile prof;

static int solve(const char *method, uint64_t seed, const char *node_limit,
		 struct bp_plan *plan)
{
	struct bp_error err;
	struct bp_param params[1];
	memset(params, 0, sizeof(params));
	strcpy(params[0].key, "ilp_node_limit");
	strcpy(params[0].value, node_limit);
	struct bp_solve_opts o = test_solve_opts(method, "synthetic-longtail",
						 (struct bp_scheme){2, 2, 2}, 16);
	o.steps = 6;
	o.docs_per_step = 24;
	o.max_tokens = 16384;
	o.seed = seed;
	o.params = params;
	o.nparams = strstr(method, "-ilp") ? 1 : 0;
	int rc = test_solve_preset(&prof, &o, plan, &err);
	if (rc)
		fprintf(stderr, "%s: %s\n", method, err.text);
	return rc;
}

/* The methods: valid plans (bp_solve validates), a solver record on every step, fixed-ilp
 * never worse than the fixed greedy and wlb-ilp never worse than wlb on the packing objective
 * of the same step (the same documents: wlb-ilp keeps wlb's queues), wlb-ilp's micro-batches
 * within L_max and L_max above the window; the same inputs give the same plan. */
static void test_methods(void)
{
	for (uint64_t seed = 1; seed <= 4; seed++) {
		struct bp_plan fx, fi, wi, fi2, wl;
		CHECK(solve("fixed", seed, "", &fx) == 0);
		CHECK(solve("fixed-ilp", seed, "300", &fi) == 0);
		CHECK(solve("wlb-ilp", seed, "300", &wi) == 0);
		CHECK(solve("fixed-ilp", seed, "300", &fi2) == 0);
		CHECK(solve("wlb", seed, "", &wl) == 0);
		CHECK(fx.nsteps == fi.nsteps && wl.nsteps == wi.nsteps);
		for (size_t s = 0; s < wi.nsteps && s < wl.nsteps; s++) {
			const struct bp_step *a = &wl.steps[s], *c = &wi.steps[s];
			const struct bp_solver *cs = c->record;
			CHECK(!a->record && cs && c->record_ops == &bp_record_ilp);
			if (!cs)
				continue;
			CHECK(cs->has_greedy && cs->bound <= cs->objective);
			CHECK_NEAR(cs->greedy, a->m.pack_max_us, 1e-6 * a->m.pack_max_us);
			CHECK_NEAR(cs->objective, c->m.pack_max_us, 1e-6 * c->m.pack_max_us);
			CHECK(c->m.pack_max_us <= a->m.pack_max_us * (1 + 1e-9));
			CHECK(c->ndocs == a->ndocs && c->ndelayed == a->ndelayed &&
			      c->m.tokens == a->m.tokens);
			for (size_t k = 0; k < c->ndelayed && k < a->ndelayed; k++)
				CHECK(c->delayed[k].doc == a->delayed[k].doc &&
				      c->delayed[k].to_step == a->delayed[k].to_step);
		}
		CHECK(bp_plan_mb_cap(&wi) > wi.max_tokens);
		CHECK(bp_plan_mb_cap(&fi) == fi.max_tokens);
		CHECK(strcmp(bp_plan_param(&wi, "max_len_factor"), "2") == 0);
		CHECK(strcmp(bp_plan_param(&fi, "ilp_node_limit"), "300") == 0);
		CHECK(bp_plan_param(&fi, "ilp_gap") && bp_plan_param(&fi, "ilp_time_limit_s"));
		for (size_t s = 0; s < fi.nsteps && s < fx.nsteps; s++) {
			const struct bp_step *a = &fx.steps[s], *b = &fi.steps[s];
			CHECK(!a->record && b->record && b->record_ops == &bp_record_ilp);
			const struct bp_solver *bs = b->record, *fs = fi2.steps[s].record;
			CHECK(!bs->has_greedy);
			CHECK(b->m.pack_max_us <= a->m.pack_max_us * (1 + 1e-12));
			CHECK(b->m.nmbs == a->m.nmbs);
			CHECK_NEAR(bs->objective, b->m.pack_max_us, 1e-6 * b->m.pack_max_us);
			CHECK(bs->bound <= bs->objective);
			CHECK(!strcmp(bs->status, "optimal") ||
			      !strcmp(bs->status, "feasible") ||
			      !strcmp(bs->status, "warm-start"));
			CHECK(bs->objective == fs->objective);
			CHECK(!strcmp(bs->status, fs->status));
		}
		json_t *j1 = bp_plan_to_json(&fi), *j2 = bp_plan_to_json(&fi2);
		char *t1 = json_dumps(j1, JSON_SORT_KEYS), *t2 = json_dumps(j2, JSON_SORT_KEYS);
		CHECK(t1 && t2 && !strcmp(t1, t2));
		free(t1);
		free(t2);
		json_decref(j1);
		json_decref(j2);
		bp_plan_release(&fx);
		bp_plan_release(&fi);
		bp_plan_release(&wi);
		bp_plan_release(&fi2);
		bp_plan_release(&wl);
	}
}

int main(void)
{
	struct bp_error err;
	struct bp_scheme sc = {2, 2, 2};
	/* Everything below runs with stdout redirected to a file that must stay empty. */
	fflush(stdout);
	FILE *cap = tmpfile();
	int saved = dup(STDOUT_FILENO);
	if (!cap || saved < 0 || dup2(fileno(cap), STDOUT_FILENO) < 0) {
		fprintf(stderr, "cannot redirect stdout\n");
		return 1;
	}
	bp_profile_init(&prof);
	if (bp_profile_analytic(&prof, bp_gpu_preset("H100"), bp_model_preset("qwen2.5-0.5b"),
				&sc, 1, 16384, &err) < 0) {
		fprintf(stderr, "%s\n", err.text);
		return 1;
	}
	test_generic();
	test_brute_force();
	test_never_worse();
	test_time_limit();
	test_work_limit();
	test_methods();
	bp_profile_release(&prof);
	fflush(stdout);
	long written = ftell(cap);
	fseek(cap, 0, SEEK_END);
	written = ftell(cap);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	fclose(cap);
	CHECK(written == 0);
	return CHECK_DONE();
}
