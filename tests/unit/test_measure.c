/* test_measure.c: the measuring profiler's plain-C half (profiler/measure.h): the options
 * `balplan profile` and balprof share, the cells to measure, the resumable state file, and
 * the merge of measured medians into the analytic skeleton (monotone, validated, refitted,
 * provenance written and read back), the block-sparse M[x,k] cells among them. No GPU: measurements are made up here. */
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "attn_geom.h"
#include "check.h"
#include "jsonutil.h"
#include "measure.h"
#include "presets.h"
#include "profile.h"

static int parse(struct bp_prof_opts *o, struct bp_error *err, const char *a1, const char *a2,
		 const char *a3, const char *a4)
{
	char *argv[6] = {(char *)"profile", (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL};
	int argc = 1;
	while (argc < 5 && argv[argc])
		argc++;
	return bp_prof_parse(argc, argv, o, err);
}

static void test_options(void)
{
	struct bp_prof_opts o;
	struct bp_error err = {{0}};
	CHECK(parse(&o, &err, NULL, NULL, NULL, NULL) == 0);
	CHECK(!o.analytic && o.reps == 10 && o.warmup == 2 && o.max_len == 131072);
	CHECK(o.nschemes == 1 && o.schemes[0].tp == 8 && o.schemes[0].cp == 2);
	CHECK(!strcmp(o.gpu, "H100") && !strcmp(o.out, "-") && !o.state);
	CHECK(parse(&o, &err, "--quick", NULL, NULL, NULL) == 0);
	CHECK(o.quick && o.max_len == 2048 && o.reps == 3 && o.warmup == 1);
	CHECK(parse(&o, &err, "--quick", "--reps", "7", NULL) == 0);
	CHECK(o.reps == 7 && o.warmup == 1);
	CHECK(parse(&o, &err, "--state", "s.txt", "--scheme", "4x1x2") == 0);
	CHECK(!strcmp(o.state, "s.txt") && o.nschemes == 1 && o.schemes[0].tp == 4);
	CHECK(parse(&o, &err, "--analytic", "--state", "x", NULL) < 0);
	CHECK(strstr(err.text, "--state is for measuring") != NULL);
	CHECK(parse(&o, &err, "--analytic", "--quick", NULL, NULL) < 0);
	CHECK(parse(&o, &err, "--reps", "0", NULL, NULL) < 0);
	CHECK(!strcmp(err.text, "--reps 0 is outside [1, 1000]"));
	CHECK(parse(&o, &err, "--reps", "x", NULL, NULL) < 0);
	CHECK(parse(&o, &err, "--scheme", "8x2", NULL, NULL) < 0);
	CHECK(!strcmp(err.text, "--scheme '8x2' is not TPxCPxPP with positive degrees"));
	CHECK(parse(&o, &err, "--max-len", "100", NULL, NULL) < 0);
	CHECK(parse(&o, &err, "--bogus", NULL, NULL, NULL) < 0);
	CHECK(strstr(err.text, "unknown or incomplete option '--bogus'") != NULL);
	CHECK(parse(&o, &err, "extra", NULL, NULL, NULL) < 0);
	CHECK(!strcmp(err.text, "unexpected argument 'extra'"));
	CHECK(parse(&o, &err, "--help", NULL, NULL, NULL) == 0 && o.help);
	CHECK(parse(&o, &err, "--state", "p.json", "-o", "p.json") < 0);
	CHECK(!strcmp(err.text, "--state 'p.json' cannot be the output file"));
	CHECK(parse(&o, &err, "--state", "-", NULL, NULL) < 0);
}

static int skeleton(struct bp_profile *p, int64_t max_len)
{
	struct bp_error err = {{0}};
	struct bp_scheme sc[2] = {{8, 2, 4}, {4, 1, 2}};
	bp_profile_init(p);
	int rc = bp_profile_analytic(p, bp_gpu_preset("H100"), bp_model_preset("llama3-8b"), sc,
				     2, max_len, &err);
	CHECK(rc == 0);
	return rc;
}

static void test_tasks(void)
{
	struct bp_profile p;
	struct bp_error err = {{0}};
	struct bp_task *t = NULL;
	size_t n = 0;
	if (skeleton(&p, 1024) < 0)
		return;
	CHECK(bp_prof_tasks(&p, NULL, &t, &n, &err) == 0);
	size_t want = 1;
	for (size_t a = 0; a < p.nlinear; a++) /* the layer's GEMMs and the LM head */
		want += 4 * p.linear[a].n;
	for (size_t a = 0; a < p.nattn; a++) /* packed and alone */
		for (size_t i = 0; i < p.attn[a].nq; i++)
			for (size_t j = 0; j < p.attn[a].nkv; j++)
				want += 4 * (p.attn[a].kv[j] >= p.attn[a].q[i]);
	size_t nsp = 0;
	for (size_t a = 0; a < p.nsparse; a++)
		nsp += 2 * p.sparse[a].nx * p.sparse[a].nk;
	CHECK(p.nsparse == 2 && nsp > 0);
	CHECK(n == want + nsp);
	CHECK(n > 0 && t[0].kind == BP_TASK_MEMORY && !strcmp(t[0].key, "memory reserved"));
	int saw = 0, saw_sp = 0, saw_alone = 0, saw_lm = 0;
	for (size_t i = 0; i < n; i++) {
		if (t[i].kind == BP_TASK_ATTN || t[i].kind == BP_TASK_ATTN_ALONE) {
			CHECK(t[i].kv >= t[i].q);
			saw |= !strcmp(t[i].key, "attn tp=4 q=128 kv=256 bwd");
			saw_alone |= !strcmp(t[i].key, "attn1 tp=4 q=128 kv=256 bwd");
		}
		saw_lm |= t[i].kind == BP_TASK_LM_HEAD && !strcmp(t[i].key, "lmhead tp=8 t=128 fwd");
		saw_sp |= !strcmp(t[i].key, "sparse tp=8 block=256 x=768 k=4 bwd");
		for (size_t k = 0; k < i; k++)
			if (!strcmp(t[i].key, t[k].key)) {
				CHECK(!"keys are unique");
				break;
			}
	}
	CHECK(saw && saw_sp && saw_alone && saw_lm);
	/* The sparse cells last, in the documented order: per table (p->sparse order), x
	 * ascending, then k ascending, forward then backward. */
	size_t k0 = n - nsp;
	CHECK(t[k0 - 1].kind == BP_TASK_ATTN_ALONE);
	for (size_t a = 0, k = k0; a < p.nsparse; a++) {
		const struct bp_sparse_table *st = &p.sparse[a];
		for (size_t i = 0; i < st->nx; i++)
			for (size_t j = 0; j < st->nk; j++)
				for (int b = 0; b < 2; b++, k++) {
					char key[BP_PROF_KEY];
					snprintf(key, sizeof(key), "sparse tp=%d block=%d x=%.0f k=%d %s",
						 st->tp, st->block, st->x[i], st->k[j],
						 b ? "bwd" : "fwd");
					CHECK(k < n && t[k].kind == BP_TASK_SPARSE &&
					      t[k].table == a && t[k].i == i && t[k].j == j &&
					      t[k].bwd == b && t[k].tp == st->tp &&
					      t[k].block == st->block && t[k].budget == st->k[j] &&
					      t[k].q == (int64_t)st->x[i] && t[k].kv == t[k].q &&
					      !strcmp(t[k].key, key));
				}
	}
	CHECK(!strcmp(t[k0].key, "sparse tp=4 block=256 x=256 k=1 fwd"));
	CHECK(!strcmp(t[n - 1].key, "sparse tp=8 block=256 x=1024 k=64 bwd"));
	free(t);
	bp_profile_release(&p);
}

static void test_state(void)
{
	struct bp_state s;
	struct bp_error err = {{0}};
	const char *sig = "gpu=H100,model=m,max_len=2048,reps=3,warmup=1,tp=8,device=X";
	char text[1024];
	bp_state_init(&s);
	CHECK(bp_state_parse(&s, NULL, 0, sig, &err) == 0 && s.n == 0 && s.valid_bytes == 0);
	int k = snprintf(text, sizeof(text),
			 "# balprof-state v1 %s\nattn tp=8 q=128 kv=128 fwd\t5 4 6 3\n"
			 "linear tp=8 t=1 bwd\t12.5 12 13 3\nattn tp=8 q=128 kv=128 fwd\t7 6 8 3\n"
			 "linear tp=8 t=2 fw",
			 sig);
	CHECK(bp_state_parse(&s, text, (size_t)k, sig, &err) == 0);
	CHECK(s.n == 2); /* a repeated key keeps the last; the torn tail is no entry */
	const struct bp_meas *m = bp_state_find(&s, "attn tp=8 q=128 kv=128 fwd");
	CHECK(m && m->median == 7 && m->min == 6 && m->max == 8 && m->n == 3);
	CHECK(!bp_state_find(&s, "linear tp=8 t=2 fwd"));
	CHECK(s.valid_bytes == (long)(strrchr(text, '\n') - text) + 1);
	bp_state_release(&s);

	/* Another run's state, a bad header, malformed and impossible lines. */
	bp_state_init(&s);
	CHECK(bp_state_parse(&s, text, (size_t)k, "gpu=H200", &err) < 0);
	CHECK(strstr(err.text, "made by another run") != NULL);
	const char *bad[] = {"hello\n", "# balprof-state v1 S\nno tab here\n",
			     "# balprof-state v1 S\nk\t1 2 3\n",
			     "# balprof-state v1 S\nk\t5 6 7 3\n",
			     "# balprof-state v1 S\nk\t0 0 0 3\n",
			     "# balprof-state v1 S\nk\t1 1 1 0\n",
			     "# balprof-state v1 S\nk\t1 1 1 1 junk\n"};
	for (size_t i = 0; i < BP_ARRAY_LEN(bad); i++) {
		bp_state_release(&s);
		CHECK(bp_state_parse(&s, bad[i], strlen(bad[i]), "S", &err) < 0);
	}
	CHECK(strstr(err.text, "line 2") != NULL);
	bp_state_release(&s);

	/* What bp_state_header and bp_state_write print reads back exactly. */
	FILE *f = tmpfile();
	CHECK(f != NULL);
	if (!f)
		return;
	struct bp_meas w = {"attn tp=1 q=384 kv=512 bwd", 1.0 / 3.0, 0.25, 0.5, 10};
	CHECK(bp_state_header(f, "S") == 0 && bp_state_write(f, &w) == 0);
	long len = ftell(f);
	rewind(f);
	char buf[256];
	size_t got = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	CHECK((long)got == len);
	bp_state_init(&s);
	CHECK(bp_state_parse(&s, buf, got, "S", &err) == 0 && s.n == 1);
	CHECK(s.n == 1 && s.m[0].median == 1.0 / 3.0 && s.m[0].n == 10);
	bp_state_release(&s);

	char sigb[256];
	struct bp_prof_opts o;
	CHECK(parse(&o, &err, "--scheme", "8x2x4", "--scheme", "8x1x8") == 0);
	bp_prof_signature(&o, NULL, "NVIDIA H100 80GB HBM3", sigb, sizeof(sigb));
	CHECK(!strcmp(sigb, "cells=3,gpu=H100,model=llama3-8b,max_len=131072,reps=10,warmup=2,"
			    "tp=8,ranks=1/1,device=NVIDIA_H100_80GB_HBM3"));
	/* A state from before the sparse cells (no "cells=") is refused: its cells have
	 * another meaning set (BP_PROF_CELLS). */
	const char *old = "# balprof-state v1 gpu=H100,model=llama3-8b,max_len=131072,reps=10,"
			  "warmup=2,tp=8,ranks=1/1,device=NVIDIA_H100_80GB_HBM3\n"
			  "memory reserved\t1 1 1 1\n";
	bp_state_init(&s);
	CHECK(bp_state_parse(&s, old, strlen(old), sigb, &err) < 0);
	CHECK(strstr(err.text, "made by another run") != NULL);
	bp_state_release(&s);
	struct bp_prof_world w16 = {16, 8};
	bp_prof_signature(&o, &w16, "X", sigb, sizeof(sigb));
	CHECK(strstr(sigb, ",ranks=16/8,device=X") != NULL);
}

/* Which collective groups a world can time, and their cells. */
static void test_world(void)
{
	struct bp_prof_world one = {1, 1}, w = {16, 8}, w4 = {32, 8};
	int gn, gp;
	CHECK(!bp_prof_group(NULL, 0, 2, &gn, &gp) && !bp_prof_group(&one, 0, 2, &gn, &gp));
	CHECK(bp_prof_group(&w, 0, 8, &gn, &gp) && gn == 1 && gp == 8);
	CHECK(bp_prof_group(&w, 0, 2, &gn, &gp) && gn == 1 && gp == 2);
	CHECK(!bp_prof_group(&w, 0, 16, &gn, &gp)); /* not inside one node */
	CHECK(bp_prof_group(&w, 1, 2, &gn, &gp) && gn == 2 && gp == 1);
	CHECK(bp_prof_group(&w, 1, 16, &gn, &gp) && gn == 2 && gp == 8);
	CHECK(!bp_prof_group(&w, 1, 32, &gn, &gp)); /* more than the world */
	CHECK(bp_prof_group(&w4, 1, 4, &gn, &gp) && gn == 4 && gp == 1);
	CHECK(bp_prof_group(&w4, 1, 8, &gn, &gp) && gn == 4 && gp == 2);
	CHECK(!bp_prof_group(&w4, 1, 2 * 3, &gn, &gp) || gn * gp == 6);

	struct bp_profile p;
	struct bp_error err = {{0}};
	struct bp_task *t = NULL;
	size_t n = 0, n1 = 0, meas = 0, total = 0;
	if (skeleton(&p, 1024) < 0)
		return;
	CHECK(bp_prof_tasks(&p, NULL, &t, &n1, &err) == 0);
	free(t);
	CHECK(bp_prof_tasks(&p, &w, &t, &n, &err) == 0);
	/* intra 2, 4, 8 and inter 2, 4, 8, 16 (two nodes) of every op, over every size */
	size_t ncoll = 0, nsize = 0;
	for (size_t a = 0; a < p.ncoll; a++) {
		int ok = bp_prof_group(&w, p.coll[a].inter, p.coll[a].ranks, &gn, &gp);
		ncoll += ok ? p.coll[a].n : 0;
		nsize = p.coll[a].n;
	}
	CHECK(ncoll == 5 * 7 * nsize);
	CHECK(n == n1 + ncoll);
	CHECK(t[1].kind == BP_TASK_COLL && !strcmp(t[1].key, "coll all_reduce intra r=2 b=1024"));
	struct bp_state s;
	bp_state_init(&s);
	for (size_t i = 0; i < n; i++) {
		struct bp_meas m;
		memset(&m, 0, sizeof(m));
		snprintf(m.key, sizeof(m.key), "%s", t[i].key);
		/* collectives: a flat 7 us with one dip, which the merge raises */
		m.median = m.min = m.max = t[i].kind == BP_TASK_COLL ? (t[i].i == 5 ? 6.0 : 7.0)
				    : t[i].kind == BP_TASK_MEMORY ? 1e9 : 100.0 + (double)i;
		m.n = 1;
		CHECK(bp_state_add(&s, &m, &err) == 0);
	}
	CHECK(bp_prof_merge(&p, &w, &s, &meas, &total, &err) == 0 && meas == n && total == n);
	const struct bp_coll_table *c = &p.coll[0];
	CHECK(c->op == BP_COLL_ALLREDUCE && !c->inter && c->ranks == 2);
	CHECK(c->us[0] == 7.0 && c->us[5] == 7.0 && c->us[c->n - 1] == 7.0);
	for (size_t a = 0; a < p.ncoll; a++) /* tables w cannot form stay analytic */
		if (p.coll[a].inter && p.coll[a].ranks == 1024)
			CHECK(p.coll[a].us[0] != 7.0);
	bp_state_release(&s);
	free(t);
	bp_profile_release(&p);
}

/* Every cell but the sparse ones measured: M[x,k] stays the analytic table, cell for cell,
 * the counts say so, and the profile finishes and reads back. */
static void test_merge_no_sparse(void)
{
	struct bp_profile p, a;
	struct bp_state s;
	struct bp_error err = {{0}};
	struct bp_task *t = NULL;
	size_t n = 0, nsp = 0, meas = 0, total = 0;
	if (skeleton(&p, 2048) < 0 || skeleton(&a, 2048) < 0)
		return;
	bp_state_init(&s);
	CHECK(bp_prof_tasks(&p, NULL, &t, &n, &err) == 0);
	for (size_t i = 0; i < n; i++) {
		struct bp_meas m;
		if (t[i].kind == BP_TASK_SPARSE) {
			nsp++;
			continue;
		}
		memset(&m, 0, sizeof(m));
		snprintf(m.key, sizeof(m.key), "%s", t[i].key);
		m.median = m.min = m.max = t[i].kind == BP_TASK_MEMORY ? 2e9 : 50.0 + (double)i;
		m.n = 1;
		CHECK(bp_state_add(&s, &m, &err) == 0);
	}
	CHECK(nsp > 0);
	CHECK(bp_prof_merge(&p, NULL, &s, &meas, &total, &err) == 0);
	CHECK(total == n && meas == n - nsp);
	CHECK(p.nsparse == a.nsparse);
	for (size_t q = 0; q < p.nsparse && q < a.nsparse; q++)
		for (size_t c = 0; c < p.sparse[q].nx * p.sparse[q].nk; c++)
			CHECK(p.sparse[q].fwd[c] == a.sparse[q].fwd[c] &&
			      p.sparse[q].bwd[c] == a.sparse[q].bwd[c]);
	struct bp_provenance pv;
	memset(&pv, 0, sizeof(pv));
	snprintf(pv.tool, sizeof(pv.tool), "balprof test");
	pv.ranks = pv.reps = 1;
	CHECK(bp_prof_finish(&p, &pv, 2048, &err) == 0);
	free(t);
	bp_state_release(&s);
	bp_profile_release(&p);
	bp_profile_release(&a);
}

static void test_stats(void)
{
	double v[] = {5, 1, 4, 2, 3}, w[] = {4, 1, 3, 2};
	double md, mn, mx;
	bp_prof_stats(v, 5, &md, &mn, &mx);
	CHECK(md == 3 && mn == 1 && mx == 5);
	bp_prof_stats(w, 4, &md, &mn, &mx);
	CHECK(md == 2.5 && mn == 1 && mx == 4);
}

/* Every cell measured as 1.5 x the analytic one, with noise that breaks monotonicity. */
static void test_merge(void)
{
	struct bp_profile p, a;
	struct bp_state s;
	struct bp_error err = {{0}};
	struct bp_task *t = NULL;
	size_t n = 0, meas = 0, total = 0;
	if (skeleton(&p, 1024) < 0 || skeleton(&a, 1024) < 0)
		return;
	bp_state_init(&s);
	CHECK(bp_prof_tasks(&p, NULL, &t, &n, &err) == 0);
	/* Half the cells first: a partial merge leaves the rest analytic. */
	for (size_t i = 0; i < n; i += 2) {
		struct bp_meas m;
		memset(&m, 0, sizeof(m));
		snprintf(m.key, sizeof(m.key), "%s", t[i].key);
		m.median = m.min = m.max = 1e9;
		m.n = 1;
		if (t[i].kind == BP_TASK_MEMORY)
			m.median = m.min = m.max = 3e9;
		CHECK(bp_state_add(&s, &m, &err) == 0);
	}
	CHECK(bp_prof_merge(&p, NULL, &s, &meas, &total, &err) == 0);
	CHECK(total == n && meas == (n + 1) / 2);
	CHECK(p.mem.reserved_bytes == 3000000000LL);
	/* backward cells were left out (odd task indices): an alone cell not measured takes
	 * the packed one */
	CHECK(p.attn[0].bwd_alone[p.attn[0].nkv + 3] == p.attn[0].bwd[p.attn[0].nkv + 3]);
	bp_state_release(&s);
	bp_profile_release(&p);
	skeleton(&p, 1024);
	bp_state_init(&s);
	for (size_t i = 0; i < n; i++) {
		struct bp_meas m;
		memset(&m, 0, sizeof(m));
		snprintf(m.key, sizeof(m.key), "%s", t[i].key);
		double v;
		if (t[i].kind == BP_TASK_MEMORY) {
			v = 1.5 * (double)(1LL << 30);
		} else if (t[i].kind == BP_TASK_LINEAR) {
			const struct bp_linear_table *lt = &a.linear[t[i].table];
			v = 1.5 * (t[i].bwd ? lt->bwd : lt->fwd)[t[i].i];
			if (t[i].i == 3)
				v *= 0.5; /* a dip: must be raised to its left neighbour */
		} else if (t[i].kind == BP_TASK_SPARSE) {
			const struct bp_sparse_table *st = &a.sparse[t[i].table];
			v = 2.0 * (t[i].bwd ? st->bwd : st->fwd)[t[i].i * st->nk + t[i].j];
			if (t[i].i == 2 && t[i].j == 5)
				v *= 0.25; /* a dip along x and k: raised to the larger neighbour */
		} else if (t[i].kind == BP_TASK_LM_HEAD) {
			const struct bp_linear_table *lt = &a.linear[t[i].table];
			v = 7.0 * (t[i].bwd ? lt->bwd : lt->fwd)[t[i].i];
		} else if (t[i].kind == BP_TASK_ATTN_ALONE) {
			const struct bp_attn_table *at = &a.attn[t[i].table];
			v = 2.5 * (t[i].bwd ? at->bwd : at->fwd)[t[i].i * at->nkv + t[i].j];
		} else {
			const struct bp_attn_table *at = &a.attn[t[i].table];
			v = 1.5 * (t[i].bwd ? at->bwd : at->fwd)[t[i].i * at->nkv + t[i].j];
			if (t[i].i == 2 && t[i].j == 4)
				v *= 0.5;
		}
		m.median = m.min = m.max = v;
		m.n = 3;
		CHECK(bp_state_add(&s, &m, &err) == 0);
	}
	CHECK(bp_prof_merge(&p, NULL, &s, &meas, &total, &err) == 0);
	CHECK(meas == n && total == n);
	const struct bp_attn_table *pa = &p.attn[0], *aa = &a.attn[0];
	CHECK_NEAR(pa->fwd[1 * pa->nkv + 3], 1.5 * aa->fwd[1 * aa->nkv + 3], 1e-9);
	/* kv < q copies kv = q */
	CHECK(pa->fwd[3 * pa->nkv + 0] == pa->fwd[3 * pa->nkv + 3]);
	/* the dip at [2][4] is raised to max([2][3], [1][4]) */
	double want = pa->fwd[2 * pa->nkv + 3] > pa->fwd[1 * pa->nkv + 4]
			      ? pa->fwd[2 * pa->nkv + 3] : pa->fwd[1 * pa->nkv + 4];
	CHECK(pa->fwd[2 * pa->nkv + 4] == want);
	CHECK(p.linear[0].fwd[3] == p.linear[0].fwd[2]);
	/* the optional tables: the LM head and the alone cells as measured */
	CHECK_NEAR(p.linear[0].lm_bwd[5], 7.0 * a.linear[0].bwd[5], 1e-9);
	CHECK_NEAR(pa->bwd_alone[1 * pa->nkv + 3], 2.5 * aa->bwd[1 * aa->nkv + 3], 1e-9);
	CHECK(pa->fwd_alone[3 * pa->nkv + 0] == pa->fwd_alone[3 * pa->nkv + 3]);
	CHECK(p.mem.reserved_bytes == (int64_t)1 << 30 || p.mem.reserved_bytes == 1610612736);
	/* Sparse: the medians in M[x,k]; the dip at [2][5] raised to max([2][4], [1][5]). */
	for (size_t q = 0; q < p.nsparse; q++) {
		const struct bp_sparse_table *ps = &p.sparse[q], *as = &a.sparse[q];
		CHECK(ps->tp == as->tp && ps->nx == as->nx && ps->nk == as->nk && ps->nx > 2 &&
		      ps->nk > 5);
		for (int b = 0; b < 2; b++) {
			const double *pv = b ? ps->bwd : ps->fwd, *av = b ? as->bwd : as->fwd;
			size_t nk = ps->nk;
			CHECK(pv[1 * nk + 3] == 2.0 * av[1 * nk + 3]);
			CHECK(pv[0] == 2.0 * av[0]);
			double wk = pv[2 * nk + 4] > pv[1 * nk + 5] ? pv[2 * nk + 4] : pv[1 * nk + 5];
			CHECK(pv[2 * nk + 5] == wk && pv[2 * nk + 5] > 0.25 * 2.0 * av[2 * nk + 5]);
			for (size_t i = 0; i < ps->nx; i++) /* non-decreasing along x and k */
				for (size_t j = 0; j < nk; j++)
					CHECK((!i || pv[i * nk + j] >= pv[(i - 1) * nk + j]) &&
					      (!j || pv[i * nk + j] >= pv[i * nk + j - 1]));
		}
	}

	/* Finish: measured kind and name, provenance, fits redone; the text reads back. */
	struct bp_provenance pv;
	memset(&pv, 0, sizeof(pv));
	snprintf(pv.tool, sizeof(pv.tool), "balprof test");
	snprintf(pv.device, sizeof(pv.device), "NVIDIA H100 80GB HBM3");
	snprintf(pv.nccl, sizeof(pv.nccl), "2.27.3");
	pv.ranks = 1;
	pv.reps = 3;
	pv.warmup = 1;
	double a0 = p.fits[0].a;
	CHECK(bp_prof_finish(&p, &pv, 1024, &err) == 0);
	CHECK(!strcmp(p.kind, "measured") && !strcmp(p.name, "measured-H100-llama3-8b"));
	CHECK(p.prov.present && !strcmp(p.prov.nccl, "2.27.3"));
	CHECK(p.fits[0].a != a0); /* refitted on the measured tables */
	json_t *j = bp_profile_to_json(&p);
	char *text = j ? bp_json_dump_canonical(j) : NULL;
	json_decref(j);
	CHECK(text && strstr(text, "\"provenance\"") && strstr(text, "NVIDIA H100 80GB HBM3"));
	struct bp_profile back;
	bp_profile_init(&back);
	json_t *r = text ? bp_json_loadb(text, strlen(text), &err) : NULL;
	CHECK(r && bp_profile_from_json(&back, r, &err) == 0);
	CHECK(back.prov.present && back.prov.reps == 3 && !strcmp(back.prov.tool, "balprof test"));
	/* No attn_kernels given: the key is not written, and the tables are the WMMA
	 * kernels' (attn_geom.h), as every profile measured before the key existed. */
	CHECK(text && !strstr(text, "attn_kernels"));
	CHECK(back.nattn > 0 && back.attn[0].geom == BP_ATTN_GEOM_WMMA);
	/* The merged sparse tables read back (the reader checks them: > 0, monotone). */
	CHECK(back.nsparse == p.nsparse && back.nsparse > 0);
	for (size_t q = 0; q < back.nsparse && q < p.nsparse; q++) {
		const struct bp_sparse_table *bs = &back.sparse[q], *ps = &p.sparse[q];
		CHECK(bs->nx == ps->nx && bs->nk == ps->nk);
		for (size_t c = 0; c < bs->nx * bs->nk && bs->nx == ps->nx && bs->nk == ps->nk; c++)
			CHECK(bs->fwd[c] == ps->fwd[c] && bs->bwd[c] == ps->bwd[c]);
	}
	json_t *j2 = bp_profile_to_json(&back);
	char *text2 = j2 ? bp_json_dump_canonical(j2) : NULL;
	CHECK(text && text2 && !strcmp(text, text2)); /* canonical: the same bytes */
	/* attn_kernels "mma16816" (what balprof writes) sets every table's geometry and reads
	 * back; another name is refused with the one it knows. */
	json_object_set_new(json_object_get(r, "provenance"), "attn_kernels",
			    json_string(BP_ATTN_GEOM_NAME));
	CHECK(bp_profile_from_json(&back, r, &err) == 0);
	for (size_t i = 0; i < back.nattn; i++)
		CHECK(back.attn[i].geom == BP_ATTN_GEOM_MMA);
	json_t *j3 = bp_profile_to_json(&back);
	CHECK(j3 && !strcmp(json_string_value(json_object_get(json_object_get(j3, "provenance"),
							      "attn_kernels")),
			    BP_ATTN_GEOM_NAME));
	json_decref(j3);
	json_object_set_new(json_object_get(r, "provenance"), "attn_kernels", json_string("wgmma"));
	CHECK(bp_profile_from_json(&back, r, &err) < 0);
	CHECK(strstr(err.text, "profile.provenance.attn_kernels \"wgmma\" is not \"mma16816\"") !=
	      NULL);
	json_object_del(json_object_get(r, "provenance"), "attn_kernels");
	/* An unknown key inside provenance is an error; an analytic profile has none. */
	json_object_set_new(json_object_get(r, "provenance"), "colour", json_string("x"));
	CHECK(bp_profile_from_json(&back, r, &err) < 0);
	CHECK(strstr(err.text, "unknown key \"colour\" in profile.provenance") != NULL);
	CHECK(!a.prov.present);
	json_t *ja = bp_profile_to_json(&a);
	CHECK(ja && !json_object_get(ja, "provenance"));
	json_decref(ja);
	json_decref(j2);
	json_decref(r);
	free(text);
	free(text2);
	bp_profile_release(&back);
	free(t);
	bp_state_release(&s);
	bp_profile_release(&p);
	bp_profile_release(&a);
}

int main(void)
{
	test_options();
	test_tasks();
	test_state();
	test_stats();
	test_merge();
	test_merge_no_sparse();
	test_world();
	return CHECK_DONE();
}
