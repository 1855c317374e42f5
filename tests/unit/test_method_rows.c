/* test_method_rows.c: what the method table's rows tell the front end instead of their names
 * (plan/method.h): the input each takes, the schemes of flexsp's analytic profile, the price
 * hooks (a packing's price shared with the methods that pack with it), and the per-step loop
 * with a method's own argument. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "method.h"
#include "presets.h"

/* One row takes the candidate strategies (solve's --strategies names it); the sparse methods
 * take the measured coverage; no other row takes an input. */
static void test_inputs(void)
{
	size_t nstrat = 0, ncov = 0;
	for (size_t i = 0; i < bp_method_count(); i++) {
		const struct bp_method *m = bp_method_at(i);
		nstrat += m->input == BP_INPUT_STRATEGIES;
		ncov += m->input == BP_INPUT_COVERAGE;
	}
	CHECK(nstrat == 1);
	CHECK(bp_method_find("hydraulis")->input == BP_INPUT_STRATEGIES);
	CHECK(ncov == 2);
	CHECK(bp_method_find("sparsebalance")->input == BP_INPUT_COVERAGE);
	CHECK(bp_method_find("sb-lbb")->input == BP_INPUT_COVERAGE);
	CHECK(bp_method_find("plain")->input == BP_INPUT_NONE);
}

/* flexsp's profile: {tp, s, 1} for s = 1, 2, 4, ... up to its largest group. */
static void test_profile_schemes(void)
{
	const struct bp_method *f = bp_method_find("flexsp");
	const struct bp_model *m = bp_model_preset("llama3-8b");
	struct bp_scheme sc[32], req = {8, 1, 1};
	CHECK(f && f->profile_schemes && m);
	size_t n = f->profile_schemes(m, req, 8, NULL, 0, sc, 32);
	int want = bp_flexsp_max_group(m, 8, 8, 0);
	CHECK(want >= 1 && n == (size_t)log2(want) + 1);
	for (size_t i = 0; i < n; i++)
		CHECK(sc[i].tp == 8 && sc[i].cp == 1 << i && sc[i].pp == 1);
	struct bp_param two = {"max_group", "2"}, bad = {"max_group", "x"};
	CHECK(f->profile_schemes(m, req, 8, &two, 1, sc, 32) == 2);
	CHECK(f->profile_schemes(m, req, 8, &bad, 1, sc, 32) == n); /* the method's error */
	CHECK(f->profile_schemes(NULL, req, 8, NULL, 0, sc, 32) == 1);
	CHECK(f->profile_schemes(m, req, 8, NULL, 0, sc, 1) == 1); /* capped */
	for (size_t i = 0; i < bp_method_count(); i++) {
		const struct bp_method *r = bp_method_at(i);
		CHECK(!r->profile_schemes || r == f);
	}
}

static struct bp_price price_of(const char *name, const struct bp_price_req *r)
{
	struct bp_price p;
	memset(&p, 0, sizeof(p));
	p.once = 1.0;
	bp_method_find(name)->price(r, &p);
	return p;
}

static void test_prices(void)
{
	struct bp_param params[2] = {{"sb_batching", "fixed-ilp"}, {"window", "2"}};
	struct bp_price_req r = {.docs = 100, .tokens = 1e6, .mb0 = 8, .long_share = 0.05,
				 .max_tokens = 131072, .gpus = 64, .tp = 8, .cp = 1, .pp = 1,
				 .dp = 8, .layers = 32, .params = params, .nparams = 2,
				 .instr_per_s = 4e9};
	for (size_t i = 0; i < bp_method_count(); i++) {
		const struct bp_method *m = bp_method_at(i);
		if (!m->price)
			continue;
		struct bp_price a = price_of(m->name, &r), b = price_of(m->name, &r);
		CHECK(!memcmp(&a, &b, sizeof(a)));    /* from the request alone */
		CHECK(a.own > 0 && a.pack >= 0 && a.pack <= a.own && a.once >= 1.0);
	}
	CHECK(!bp_method_find("plain")->price);
	/* fixed-ilp packs as fixed does, then searches; wlb-ilp as wlb */
	struct bp_price fx = price_of("fixed", &r), fi = price_of("fixed-ilp", &r);
	CHECK(fx.own == fx.pack && fi.pack == fx.pack && fi.own > fi.pack);
	CHECK(fx.pack == bp_fixed_pack_price(&r));
	CHECK(price_of("wlb-ilp", &r).pack == bp_wlb_pack_price(&r));
	/* sparsebalance packing with fixed-ilp pays fixed-ilp's packing, not its search */
	struct bp_price sb = price_of("sparsebalance", &r);
	params[0] = (struct bp_param){"sb_batching", "default"};
	struct bp_price sb0 = price_of("sparsebalance", &r);
	CHECK(sb.own == sb0.own + fi.pack);
	CHECK(sb.grows == BP_GROWS_DOCS_SQUARED);
	params[0] = (struct bp_param){"sb_batching", "sparsebalance"}; /* no loop */
	CHECK(price_of("sb-lbb", &r).own == sb0.own);
	/* what each method's own work grows with */
	CHECK(price_of("hydraulis", &r).grows == BP_GROWS_TRIALS);
	CHECK(price_of("hydraulis", &r).trials == 100);
	CHECK(price_of("flexsp", &r).grows == BP_GROWS_GPUS);
	CHECK(price_of("distca", &r).grows == BP_GROWS_GPUS);
	CHECK(price_of("kk", &r).grows == BP_GROWS_STEPS);
	/* hydraulis: the strategies given replace the 32 proposed, and the proposal's DP */
	r.inputs = 4;
	struct bp_price h4 = price_of("hydraulis", &r);
	r.inputs = 0;
	struct bp_price h0 = price_of("hydraulis", &r);
	CHECK(h4.candidates == 4 && h0.candidates == 32 && h4.once < h0.once);
}

/* The per-step loop hands every step the method's argument, in order, and stops at the first
 * step that fails with its status. */
struct count {
	size_t calls, fail_at;
};

static int count_step(const struct bp_method_ctx *ctx, const struct bp_batch *b,
		      struct bp_step *st, const struct bp_plan *out, void *arg,
		      struct bp_error *err)
{
	struct count *c = arg;
	(void)ctx;
	(void)out;
	CHECK(st->ndocs == b->ndocs && st->index == (int64_t)c->calls);
	if (c->calls++ == c->fail_at)
		return bp_errorf(err, "step %zu fails", c->fail_at);
	return 0;
}

static void test_each_step(void)
{
	struct bp_error err = {""};
	struct bp_doc docs[3] = {{.id = 1, .len = 10}, {.id = 2, .len = 20}, {.id = 3, .len = 30}};
	struct bp_batch b[3] = {{docs, 1, 10}, {docs + 1, 1, 20}, {docs + 2, 1, 30}};
	struct bp_batches in = {.b = b, .n = 3};
	struct bp_method_ctx ctx;
	memset(&ctx, 0, sizeof(ctx));
	for (size_t fail = 0; fail <= 3; fail++) {
		struct bp_plan p;
		struct count c = {0, fail};
		bp_plan_init(&p);
		CHECK(bp_plan_add_megatron(&p, (struct bp_scheme){1, 1, 1}, 2, 64, &err) == 0);
		int rc = bp_method_each_step(&ctx, &in, &p, count_step, &c, &err);
		CHECK(rc == (fail < 3 ? -1 : 0));
		CHECK(c.calls == (fail < 3 ? fail + 1 : 3));
		CHECK(p.nsteps == 3);
		bp_plan_release(&p);
	}
}

/* Every row's typed specs (method.h struct bp_param_spec) name parameters it takes, their
 * defaults lie in their ranges, and the one reader records a default as the old readers did
 * and refuses a bad value with their messages. */
static void test_param_specs(void)
{
	for (size_t i = 0; i < bp_method_count(); i++) {
		const struct bp_method *m = bp_method_at(i);
		for (size_t k = 0; m->param_specs && m->param_specs[k].name; k++) {
			const struct bp_param_spec *s = &m->param_specs[k];
			CHECK(bp_method_takes(m, s->name, NULL));
			if (s->type == BP_PARAM_INT)
				CHECK(s->imin <= s->idef && s->idef <= s->imax);
			if (s->type == BP_PARAM_REAL)
				CHECK(s->rmin <= s->rdef && s->rdef <= s->rmax);
			if (s->type == BP_PARAM_CHOICE)
				CHECK(s->choices && s->choices[0] && s->choices[1]);
		}
	}
	static const char *const three[] = {"a", "b", "c", NULL};
	static const struct bp_param_spec specs[] = {
		BP_PARAM_SPEC_INT("n", 8, 1, 64, NULL),
		BP_PARAM_SPEC_REAL("x", 0.85, 0.01, 1.0, NULL),
		BP_PARAM_SPEC_CHOICE("c", three, NULL),
		{0},
	};
	struct bp_error err = {""};
	struct bp_plan p;
	int64_t n;
	double x;
	int c;
	bp_plan_init(&p);
	CHECK(bp_param_int(&p, specs, "n", &n, &err) == 0 && n == 8);
	CHECK(!strcmp(bp_plan_param(&p, "n"), "8"));
	CHECK(bp_param_real(&p, specs, "x", &x, &err) == 0 && x == 0.85);
	CHECK(!strcmp(bp_plan_param(&p, "x"), "0.84999999999999998"));
	CHECK(bp_param_choice(&p, specs, "c", &c, &err) == 0 && c == 0);
	CHECK(!strcmp(bp_plan_param(&p, "c"), "a"));
	CHECK(bp_plan_set_param(&p, "c", "b", &err) == 0);
	CHECK(bp_param_choice(&p, specs, "c", &c, &err) == 0 && c == 1);
	CHECK(bp_plan_set_param(&p, "n", "65", &err) == 0);
	CHECK(bp_param_int(&p, specs, "n", &n, &err) < 0);
	CHECK(!strcmp(err.text, "parameter n is 65, outside [1, 64]"));
	CHECK(bp_plan_set_param(&p, "x", "2", &err) == 0);
	CHECK(bp_param_real(&p, specs, "x", &x, &err) < 0);
	CHECK(!strcmp(err.text, "parameter x is 2, outside [0.01, 1]"));
	CHECK(bp_plan_set_param(&p, "c", "d", &err) == 0);
	CHECK(bp_param_choice(&p, specs, "c", &c, &err) < 0);
	CHECK(!strcmp(err.text, "parameter c is 'd', not 'a', 'b' or 'c'"));
	CHECK(bp_param_int(&p, specs, "x", &n, &err) < 0); /* a real, not an integer */
	CHECK(bp_param_int(&p, specs, "none", &n, &err) < 0);
	bp_plan_release(&p);
}

int main(void)
{
	test_param_specs();
	test_inputs();
	test_profile_schemes();
	test_prices();
	test_each_step();
	return CHECK_DONE();
}
