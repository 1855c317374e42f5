/* test_flexsp.c: the FlexSP-like baseline (blocks/sp_ilp.h, methods/flexsp.c): the aligned
 * group enumeration, the buckets, a small instance solved by hand, the program never worse
 * than its warm start, and the method's conservation, determinism and request errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "check.h"
#include "plan_same.h"
#include "jsonutil.h"
#include "method.h"
#include "solve.h"
#include "sp_ilp.h"
#include "validate.h"

static void test_groups(void)
{
	struct bp_sp_group g[64];
	for (int u = 1; u <= 32; u *= 2)
		CHECK(bp_sp_groups(u, 0, NULL) == (size_t)(2 * u - 1));
	CHECK(bp_sp_groups(6, 0, NULL) == 6 + 3 + 1);  /* sizes 1, 2, 4 */
	CHECK(bp_sp_groups(8, 2, NULL) == 8 + 4);      /* max_size 2 */
	CHECK(bp_sp_groups(8, 64, NULL) == 15);        /* capped at the units */
	size_t n = bp_sp_groups(16, 0, g);
	CHECK(n == 31);
	for (size_t i = 0; i < n; i++) {
		CHECK(g[i].size >= 1 && !(g[i].size & (g[i].size - 1)));
		CHECK(g[i].first % g[i].size == 0 && g[i].first + g[i].size <= 16);
		if (i)
			CHECK(g[i].size > g[i - 1].size ||
			      (g[i].size == g[i - 1].size && g[i].first > g[i - 1].first));
	}
}

static void test_buckets(void)
{
	struct bp_error err;
	struct bp_sp_buckets b;
	const int64_t few[] = {5, 9, 5, 100, 9};
	CHECK(bp_sp_bucketize(few, 5, 16, 10, &b, &err) == 0);
	CHECK(b.exact == 1 && b.n == 3);
	CHECK(b.len[0] == 100 && b.len[1] == 9 && b.len[2] == 5);
	CHECK(b.count[0] == 1 && b.count[1] == 2 && b.count[2] == 2);
	CHECK(b.of[0] == 2 && b.of[1] == 1 && b.of[3] == 0);
	bp_sp_buckets_release(&b);
	int64_t many[500];
	for (int i = 0; i < 500; i++)
		many[i] = 1 + (i * 7919) % 3000 + (i % 50 == 0 ? 60000 : 0);
	CHECK(bp_sp_bucketize(many, 500, 8, 1000, &b, &err) == 0);
	CHECK(!b.exact && b.n >= 2 && b.n <= 8);
	int64_t total = 0;
	for (size_t q = 0; q < b.n; q++) {
		total += b.count[q];
		if (q)
			CHECK(b.len[q] < b.len[q - 1]);
	}
	CHECK(total == 500);
	for (int i = 0; i < 500; i++) {
		CHECK(many[i] <= b.len[b.of[i]]); /* the representative bounds its documents */
		CHECK(b.of[i] + 1 == b.n || many[i] > b.len[b.of[i] + 1]);
	}
	bp_sp_buckets_release(&b);
	CHECK(bp_sp_bucketize((const int64_t[]){0}, 1, 4, 1, &b, &err) == -1);
	bp_sp_buckets_release(&b);
}

/* Two units, groups {0}, {1}, {0, 1}. Bucket 0: two documents of 3 us on one unit, bucket
 * 1: three of 2 us; the pair costs more (3 and 2 us a document, on both units). LPT on the
 * single units gives 3+2+2 | 3+2 = 7; the optimum is 3+3 | 2+2+2 = 6, which the work bound
 * (2 x 3 + 3 x 2) / 2 = 6 certifies. */
static void test_known(void)
{
	struct bp_error err;
	struct bp_sp_group g[3];
	CHECK(bp_sp_groups(2, 0, g) == 3);
	const int64_t len[] = {300, 200}, count[] = {2, 3}, cap[] = {10000, 10000, 20000};
	const double t[] = {3, 3, 3, 2, 2, 2}, fix[] = {0, 0, 0};
	struct bp_sp_problem p = {2, g, 3, len, count, 2, t, fix, cap, 1, 0};
	struct bp_sp_sol s;
	struct bp_sp_result r;
	int size;
	double obj;
	CHECK(bp_sp_sol_alloc(&s, 2, 3, &err) == 0);
	CHECK(bp_sp_greedy(&p, &s, &size, &obj, &err) == 0);
	CHECK_NEAR(obj, 7.0, 1e-12);
	CHECK(size == 1 && s.used[0] && s.used[1] && !s.used[2]);
	/* no search asked for: the warm start stays, with its gap to the bound */
	CHECK(bp_sp_solve(&p, NULL, &s, &r, &err) == 0);
	CHECK(!strcmp(r.status, "warm-start") && r.limit == BP_ILP_LIMIT_NONE && !r.nodes);
	CHECK(r.objective == 7.0 && r.greedy == 7.0);
	CHECK_NEAR(r.bound, 6.0, 1e-9);
	CHECK_NEAR(r.gap, 1.0 / 7.0, 1e-9);
	CHECK(s.n[0 * 3 + 0] + s.n[0 * 3 + 1] == 2 && bp_sp_eval(&p, &s) == 7.0);
	struct bp_ilp_opts o;
	bp_ilp_opts_default(&o);
	CHECK(bp_sp_solve(&p, &o, &s, &r, &err) == 0);
	CHECK(!strcmp(r.status, "optimal"));
	CHECK_NEAR(r.greedy, 7.0, 1e-12);
	CHECK_NEAR(r.objective, 6.0, 1e-9);
	CHECK_NEAR(r.bound, 6.0, 1e-9);
	CHECK_NEAR(bp_sp_eval(&p, &s), 6.0, 1e-9);
	CHECK(s.used[0] && s.used[1] && !s.used[2]);
	CHECK((s.n[0 * 3 + 0] == 2 && s.n[1 * 3 + 1] == 3) ||
	      (s.n[0 * 3 + 1] == 2 && s.n[1 * 3 + 0] == 3));
	CHECK(s.m[0] == 1 && s.m[1] == 1 && s.m[2] == 0);
	/* the broken solutions bp_sp_eval refuses */
	s.used[2] = 1; /* overlaps both units */
	CHECK(isinf(bp_sp_eval(&p, &s)));
	s.used[2] = 0;
	s.n[0]++;
	CHECK(isinf(bp_sp_eval(&p, &s)));
	bp_sp_sol_release(&s);
	/* a bucket no group holds */
	const int64_t small[] = {100, 100, 100};
	p.cap = small;
	CHECK(bp_sp_sol_alloc(&s, 2, 3, &err) == 0);
	CHECK(bp_sp_greedy(&p, &s, &size, &obj, &err) == BP_INFEASIBLE);
	bp_sp_sol_release(&s);
}

static uint64_t lcg(uint64_t *x)
{
	*x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
	return *x >> 33;
}

/* ---- bp_sp_greedy against its definition ----
 * The exhaustive search sp_ilp.h defines (every partition in order, LPT scanning every
 * group for each document, the first best makespan wins), written out plainly here. */

static int64_t ref_ceil(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

static double ref_lpt(const struct bp_sp_problem *p, const size_t *gl, size_t k,
		      struct bp_sp_sol *cur, double *load, int64_t *tok)
{
	memset(cur->used, 0, p->ng);
	memset(cur->n, 0, p->nb * p->ng * sizeof(int64_t));
	for (size_t q = 0; q < k; q++) {
		load[gl[q]] = 0.0;
		tok[gl[q]] = 0;
		cur->used[gl[q]] = 1;
	}
	for (size_t b = 0; b < p->nb; b++)
		for (int64_t c = 0; c < p->count[b]; c++) {
			size_t best = p->ng;
			double bv = INFINITY;
			for (size_t q = 0; q < k; q++) {
				size_t g = gl[q];
				if (p->len[b] > p->cap[g])
					continue;
				double v = load[g] + p->t[b * p->ng + g] +
					   (double)(ref_ceil(tok[g] + p->len[b], p->cap[g]) -
						    ref_ceil(tok[g], p->cap[g])) * p->fix[g];
				if (v < bv) {
					bv = v;
					best = g;
				}
			}
			if (best == p->ng)
				return INFINITY;
			load[best] += p->t[b * p->ng + best];
			tok[best] += p->len[b];
			cur->n[b * p->ng + best]++;
		}
	return bp_sp_eval(p, cur);
}

static size_t ref_group(const struct bp_sp_problem *p, int first, int size)
{
	for (size_t g = 0; g < p->ng; g++)
		if (p->g[g].first == first && p->g[g].size == size)
			return g;
	return p->ng;
}

static double ref_greedy(const struct bp_sp_problem *p, struct bp_sp_sol *s, int *size)
{
	struct bp_sp_sol cur;
	struct bp_error err;
	double *load = calloc(p->ng + 1, sizeof(double)), obj = INFINITY;
	int64_t *tok = calloc(p->ng + 1, sizeof(int64_t));
	size_t *gl = calloc(p->ng + 1, sizeof(size_t));
	int maxs = 0;
	CHECK(load && tok && gl && bp_sp_sol_alloc(&cur, p->nb, p->ng, &err) == 0);
	for (size_t g = 0; g < p->ng; g++)
		if (p->g[g].size > maxs)
			maxs = p->g[g].size;
	*size = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int S = 1; S <= maxs; S *= 2)
			for (int kk = p->units / S; kk >= 1; kk--)
				for (int s2 = pass ? 1 : S; s2 <= S; s2 *= 2) {
					int homog = kk * S == p->units - p->units % S;
					if (pass ? s2 == S || kk * S == p->units : !homog)
						continue;
					size_t k = 0;
					int miss = 0;
					for (int q = 0; q < kk; q++)
						gl[k++] = ref_group(p, q * S, S);
					for (int a = kk * S; pass && a + s2 <= p->units; a += s2)
						gl[k++] = ref_group(p, a, s2);
					for (size_t q = 0; q < k; q++)
						miss |= gl[q] == p->ng;
					if (miss)
						continue;
					double v = ref_lpt(p, gl, k, &cur, load, tok);
					if (v < obj) {
						obj = v;
						*size = S;
						memcpy(s->used, cur.used, p->ng);
						memcpy(s->n, cur.n, p->nb * p->ng * sizeof(int64_t));
					}
				}
	bp_sp_sol_release(&cur);
	free(load);
	free(tok);
	free(gl);
	return obj;
}

/* Random instances, costs alike per size (the trees) or per group (the scan), small
 * integer costs so that loads tie often, units 1 to 70, every group size limit: the
 * pruned search without a run limit gives the exhaustive search's partition, counts and
 * makespan bit for bit, and so does the default limit up to 12 units (at most 420
 * documents: 156 runs, more than the partitions). */
static void test_greedy_exact(void)
{
	uint64_t x = 7;
	struct bp_error err;
	for (int trial = 0; trial < 300; trial++) {
		int units = 1 + (int)(lcg(&x) % (trial % 3 ? 12 : 70));
		int maxg = 1 << (lcg(&x) % 7);
		size_t ng = bp_sp_groups(units, maxg, NULL), nb = 1 + lcg(&x) % 7;
		struct bp_sp_group *g = calloc(ng, sizeof(*g));
		int64_t len[8], count[8], *cap = calloc(ng, sizeof(int64_t));
		double *t = calloc(nb * ng, sizeof(double)), *fix = calloc(ng, sizeof(double));
		int alike = trial % 4 != 3, ties = trial % 2;
		CHECK(g && cap && t && fix);
		bp_sp_groups(units, maxg, g);
		for (size_t b = 0; b < nb; b++) {
			len[b] = (int64_t)(nb - b) * 1000 + (int64_t)(lcg(&x) % 900);
			count[b] = (int64_t)(lcg(&x) % (trial % 5 ? 12 : 60));
		}
		for (size_t k = 0; k < ng; k++) {
			int s = g[k].size;
			uint64_t r = alike ? 0 : lcg(&x) % 3;
			cap[k] = (int64_t)s * (3000 + (alike ? 2000 : (int64_t)(lcg(&x) % 4000)));
			fix[k] = ties ? (double)(5 * s) : 50.0 + 10.0 * s + (double)r;
			for (size_t b = 0; b < nb; b++) {
				double l = (double)len[b];
				t[b * ng + k] = ties ? floor(l / 1000.0 / s) + (s > 1)
						     : (1e-4 * l * l + 0.5 * l) / s + (s > 1 ? 0.05 * l : 0.0) +
							       (double)r;
			}
		}
		struct bp_sp_problem p = {units, g, ng, len, count, nb, t, fix, cap, alike, -1};
		struct bp_sp_sol a, r;
		int sa = 0, sr = 0;
		double oa = 0.0;
		CHECK(bp_sp_sol_alloc(&a, nb, ng, &err) == 0 && bp_sp_sol_alloc(&r, nb, ng, &err) == 0);
		double orf = ref_greedy(&p, &r, &sr);
		for (int lim = 0; lim < 2; lim++) {
			if (lim && units > 12)
				break;
			p.max_runs = lim ? 0 : -1;
			int rc = bp_sp_greedy(&p, &a, &sa, &oa, &err);
			if (!isfinite(orf)) {
				CHECK(rc == BP_INFEASIBLE);
				continue;
			}
			CHECK(rc == 0);
			CHECK(oa == orf && sa == sr);
			CHECK(!memcmp(a.used, r.used, ng));
			CHECK(!memcmp(a.n, r.n, nb * ng * sizeof(int64_t)));
		}
		bp_sp_sol_release(&a);
		bp_sp_sol_release(&r);
		free(g);
		free(cap);
		free(t);
		free(fix);
	}
}

/* Random instances with a FlexSP-like cost (attention over the group, a per-size
 * communication term) and small budgets: the program ends no worse than its warm start on
 * its own objective, its solution is what bp_sp_eval says, its bound lies below. */
static void test_never_worse(void)
{
	struct bp_error err;
	uint64_t x = 42;
	for (int trial = 0; trial < 40; trial++) {
		int units = 1 << (1 + trial % 3); /* 2, 4, 8 */
		struct bp_sp_group g[15];
		size_t ng = bp_sp_groups(units, 0, g), nb = 2 + lcg(&x) % 6;
		int64_t len[8], count[8], cap[15];
		double t[8 * 15], fix[15];
		for (size_t b = 0; b < nb; b++) {
			len[b] = (int64_t)(nb - b) * 1000 + (int64_t)(lcg(&x) % 900);
			count[b] = 1 + (int64_t)(lcg(&x) % 6);
		}
		for (size_t k = 0; k < ng; k++) {
			int s = g[k].size;
			cap[k] = (int64_t)s * (4000 + (int64_t)(lcg(&x) % 4000));
			fix[k] = 50.0 + 10.0 * s;
			for (size_t b = 0; b < nb; b++) {
				double l = (double)len[b];
				t[b * ng + k] = (1e-4 * l * l + 0.5 * l) / s + (s > 1 ? 0.05 * l : 0.0);
			}
		}
		struct bp_sp_problem p = {units, g, ng, len, count, nb, t, fix, cap, 1, 0};
		struct bp_sp_sol s;
		struct bp_sp_result r;
		int size;
		double obj;
		CHECK(bp_sp_sol_alloc(&s, nb, ng, &err) == 0);
		if (bp_sp_greedy(&p, &s, &size, &obj, &err) != 0) {
			bp_sp_sol_release(&s);
			continue;
		}
		struct bp_ilp_opts o;
		bp_ilp_opts_default(&o);
		o.node_limit = 1 + trial % 30;
		CHECK(bp_sp_solve(&p, &o, &s, &r, &err) == 0);
		CHECK(r.objective <= obj * (1 + 1e-12));
		CHECK_NEAR(r.greedy, obj, 1e-9 * obj);
		CHECK_NEAR(bp_sp_eval(&p, &s), r.objective, 1e-9 * obj);
		CHECK(r.bound <= r.objective * (1 + 1e-12));
		CHECK(r.gap >= 0 && r.gap <= 1);
		CHECK(strcmp(r.status, "optimal") || r.limit == BP_ILP_LIMIT_NONE);
		bp_sp_sol_release(&s);
	}
}

static int solve_flexsp(const struct bp_profile *prof, const struct bp_dataset *ds, int cp,
			int pp, struct bp_plan *out, struct bp_error *err)
{
	struct bp_param par[] = {{"buckets", "6"}, {"ilp_node_limit", "50"}, {"milp", "1"}};
	struct bp_solve_opts o = {
		.method = "flexsp",
		.cluster = {.gpus = 16, .tp = 2, .cp = cp, .pp = pp, .dp = 8 / (cp * pp)},
		.steps = 3, .max_tokens = 32768, .tokens_per_step = 6 * 32768,
		.overlen = BP_OVERLEN_TRUNCATE, .seed = 7, .shard = BP_SHARD_SEQUENCE,
		.dataset_name = "synthetic-longtail",
		.dataset_sha = "0000000000000000000000000000000000000000000000000000000000000000",
		.profile_sha = "1111111111111111111111111111111111111111111111111111111111111111",
		.params = par, .nparams = 3,
	};
	bp_plan_init(out);
	return bp_solve(ds, prof, &o, out, err);
}

/* The method on 16 GPUs (tp 2: 8 units): two solves give the same bytes; every document
 * lies in exactly one micro-batch of one group of its step, under the group's cap; the
 * record's partition is the step's layout. cp 2 and pp 2 are refused. */
static void test_method(void)
{
	struct bp_scheme sc[] = {{2, 1, 1}, {2, 2, 1}, {2, 4, 1}, {2, 8, 1}};
	struct bp_profile prof;
	struct bp_error err;
	struct bp_dataset ds;
	bp_profile_init(&prof);
	bp_dataset_init(&ds);
	CHECK(bp_profile_analytic(&prof, bp_gpu_preset("H100"), bp_model_preset("llama3-8b"), sc,
				  4, 32768, &err) == 0);
	CHECK(bp_dataset_preset(&ds, "synthetic-longtail", &err) == 0);
	struct bp_plan a, b;
	CHECK(solve_flexsp(&prof, &ds, 1, 1, &a, &err) == 0);
	CHECK(solve_flexsp(&prof, &ds, 1, 1, &b, &err) == 0);
	CHECK(plans_same(&a, &b));
	CHECK(bp_plan_validate(&a, NULL, &err) == 0);
	CHECK(a.nlayouts >= 1 + 4); /* the request's and the four homogeneous ones */
	for (size_t i = 0; i < a.nsteps; i++) {
		const struct bp_step *st = &a.steps[i];
		const struct bp_layout *l = bp_plan_layout(&a, st);
		CHECK(st->layout >= 1 && st->record_ops == bp_method_find("flexsp")->record);
		for (size_t d = 0; d < st->ndocs; d++) {
			int seen = 0;
			for (size_t k = 0; k < st->npipes; k++)
				for (size_t j = 0; j < st->pipes[k].nmbs; j++)
					for (size_t q = 0; q < st->pipes[k].mbs[j].nspans; q++) {
						const struct bp_span *sp = &st->pipes[k].mbs[j].spans[q];
						if (sp->doc == st->docs[d].id) {
							seen++;
							CHECK(sp->offset == 0 && sp->len == st->docs[d].len);
						}
					}
			CHECK(seen == 1);
		}
		int units = 0;
		for (size_t k = 0; k < st->npipes; k++) {
			const struct bp_lpipe *lp = &l->pipes[k];
			CHECK(lp->sc.tp == 2 && lp->sc.pp == 1 && !(lp->sc.cp & (lp->sc.cp - 1)));
			CHECK(lp->ranks[0] == units * 2); /* aligned runs of units, in unit order */
			units += lp->sc.cp;
			for (size_t j = 0; j < st->pipes[k].nmbs; j++) {
				CHECK(st->pipes[k].mbs[j].shard == BP_SHARD_ULYSSES);
				CHECK(st->pipes[k].mbs[j].tokens <= lp->mb_max_tokens);
			}
		}
		CHECK(units == 8);
	}
	bp_plan_release(&a);
	bp_plan_release(&b);
	CHECK(solve_flexsp(&prof, &ds, 2, 1, &a, &err) == -1);
	CHECK(strstr(err.text, "flexsp needs cp 1") != NULL);
	bp_plan_release(&a);
	CHECK(solve_flexsp(&prof, &ds, 1, 2, &a, &err) == -1);
	CHECK(strstr(err.text, "flexsp needs pp 1") != NULL);
	bp_plan_release(&a);
	bp_dataset_release(&ds);
	bp_profile_release(&prof);
}

int main(void)
{
	test_groups();
	test_buckets();
	test_known();
	test_never_worse();
	test_greedy_exact();
	test_method();
	return CHECK_DONE();
}
