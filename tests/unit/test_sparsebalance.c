/* test_sparsebalance.c: the sparsebalance and sb-lbb methods through bp_solve (methods/
 * sparsebalance.c) on the analytic H200 / Qwen2.5-0.5B profile and the LongAlign-10k
 * reconstruction.
 *
 * Checks: plans validate and repeat byte for byte; KAT-4 (SAB against a reference packer):
 * without DST SAB's packing equals a reference two-level cost-LPT on W = Perf.predict(L,
 * k_base) and sb-lbb's the same on W = L, and one sample per micro-batch with
 * sb_cardinality=exact; LBB's packing does
 * not depend on DST (so sb-lbb and sparsebalance with sb_batching=lbb agree on the spans);
 * the invariants on whole plans: none-upper gives k_final = k_anchor in every layer, none-lower
 * and p = 0 never compress, the MAX anchor never compresses, k_final is non-increasing in p
 * for a fixed packing, every budget lies between k_anchor and k_base (clamped to the blocks of
 * the longest span), without DST every layer runs k_base. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "costkinds.h"
#include "costmodel.h"
#include "sparse_dst.h"
#include "check.h"
#include "solve_fixture.h"
#include "jsonutil.h"
#include "method.h"
#include "plan.h"
#include "presets.h"
#include "solve.h"
#include "validate.h"

static struct bp_profile prof;

static int solve(const char *method, const char *const *kv, size_t n, struct bp_plan *plan)
{
	struct bp_error err;
	struct bp_param ps[16];
	memset(ps, 0, sizeof(ps));
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(kv[i], '=');
		memcpy(ps[i].key, kv[i], (size_t)(eq - kv[i]));
		strcpy(ps[i].value, eq + 1);
	}
	const struct bp_scheme sc = {1, 1, 2};
	struct bp_solve_opts o = test_solve_opts(method, "longalign-10k", sc, 8);
	o.steps = 4;
	o.max_tokens = 32768;
	o.docs_per_step = 16;
	o.seed = 3;
	o.params = ps;
	o.nparams = n;
	int rc = test_solve_preset(&prof, &o, plan, &err);
	if (rc)
		fprintf(stderr, "solve %s: %s\n", method, err.text);
	else if (bp_plan_validate(plan, NULL, &err) < 0) {
		fprintf(stderr, "validate %s: %s\n", method, err.text);
		rc = -1;
	}
	return rc;
}

/* The record's k_anchor and counts, read back through the codec (the struct is private). */
static json_t *record(const struct bp_plan *p, size_t s)
{
	return p->steps[s].record_ops->to_json(p->steps[s].record);
}

static int blocks_of(const struct bp_mb *mb)
{
	int64_t m = 0;
	for (size_t i = 0; i < mb->nspans; i++)
		m = mb->spans[i].len > m ? mb->spans[i].len : m;
	return (int)((m + 255) / 256);
}

static int imin(int a, int b)
{
	return a < b ? a : b;
}

/* Every budget against the record: mode 0 any DST plan, 1 k_final = k_anchor, 2 no compression,
 * 3 k_base everywhere. */
static void check_budgets(const struct bp_plan *p, int mode)
{
	for (size_t s = 0; s < p->nsteps; s++) {
		json_t *r = record(p, s);
		json_t *ka = json_object_get(r, "k_anchor");
		size_t j = 0;
		for (size_t q = 0; q < p->steps[s].npipes; q++)
			for (size_t i = 0; i < p->steps[s].pipes[q].nmbs; i++, j++) {
				const struct bp_mb *mb = &p->steps[s].pipes[q].mbs[i];
				int a = (int)json_integer_value(json_array_get(ka, j)), nb = blocks_of(mb);
				for (int l = 0; l < p->model.layers; l++) {
					int k = mb->sparse_k[l];
					CHECK(mb->attn == BP_ATTN_SPARSE && mb->sparse_block == 256);
					if (mode == 3) {
						CHECK(k == imin(32, nb));
						continue;
					}
					if (a >= 32 || mode == 1)
						CHECK(k == imin(a, nb));
					else
						CHECK(k >= imin(a, nb) && k <= imin(32, nb));
					if (mode == 2)
						CHECK(k >= imin(32, nb));
				}
			}
		if (mode >= 2)
			CHECK(json_integer_value(json_object_get(r, "compressed")) == 0);
		json_decref(r);
	}
}

static void test_plans(void)
{
	struct bp_plan a, b;
	bp_plan_init(&a);
	bp_plan_init(&b);
	CHECK(solve("sparsebalance", NULL, 0, &a) == 0);
	CHECK(solve("sparsebalance", NULL, 0, &b) == 0);
	char *x = plan_text(&a, TEXT_CANONICAL), *y = plan_text(&b, TEXT_CANONICAL);
	CHECK(x && y && !strcmp(x, y));
	free(x);
	free(y);
	check_budgets(&a, 0);
	/* the default coverage is synthetic, and the plan says so */
	CHECK(!strcmp(bp_plan_param(&a, "sb_coverage"), "synthetic"));
	bp_plan_release(&a);
	bp_plan_release(&b);

	static const char *const up[] = {"sb_coverage=none-upper"};
	static const char *const lo[] = {"sb_coverage=none-lower"};
	static const char *const mx[] = {"sb_anchor=max"};
	static const char *const p0[] = {"sb_p=0"};
	static const char *const nodst[] = {"sb_dst=0", "sb_batching=default"};
	const char *const *cases[] = {up, lo, mx, p0, nodst};
	int modes[] = {1, 2, 2, 2, 3};
	size_t ns[] = {1, 1, 1, 1, 2};
	for (size_t c = 0; c < 5; c++) {
		bp_plan_init(&a);
		CHECK(solve("sparsebalance", cases[c], ns[c], &a) == 0);
		check_budgets(&a, modes[c]);
		bp_plan_release(&a);
	}
}

/* KAT-4: with sb_cardinality=exact and as many samples as micro-batch slots, one sample per
 * micro-batch, four per pipeline. */
static void test_exact(void)
{
	static const char *const ex[] = {"sb_cardinality=exact"};
	struct bp_plan a;
	bp_plan_init(&a);
	CHECK(solve("sparsebalance", ex, 1, &a) == 0);
	for (size_t s = 0; s < a.nsteps; s++)
		for (size_t q = 0; q < a.steps[s].npipes; q++) {
			CHECK(a.steps[s].pipes[q].nmbs == 4);
			for (size_t i = 0; i < a.steps[s].pipes[q].nmbs; i++)
				CHECK(a.steps[s].pipes[q].mbs[i].nspans == 1);
		}
	bp_plan_release(&a);
}

static int same_spans(const struct bp_plan *a, const struct bp_plan *b)
{
	if (a->nsteps != b->nsteps)
		return 0;
	for (size_t s = 0; s < a->nsteps; s++)
		for (size_t q = 0; q < a->steps[s].npipes; q++) {
			const struct bp_pipe *x = &a->steps[s].pipes[q], *y = &b->steps[s].pipes[q];
			if (x->nmbs != y->nmbs)
				return 0;
			for (size_t i = 0; i < x->nmbs; i++)
				if (x->mbs[i].nspans != y->mbs[i].nspans ||
				    memcmp(x->mbs[i].spans, y->mbs[i].spans,
					   x->mbs[i].nspans * sizeof(struct bp_span)))
					return 0;
		}
	return 1;
}

/* LBB's weights are lengths, so DST and p cannot change its packing; k_final falls with p. */
static void test_lbb_and_p(void)
{
	static const char *const l1[] = {"sb_dst=0"};
	static const char *const l2[] = {"sb_batching=lbb"};
	struct bp_plan a, b;
	bp_plan_init(&a);
	bp_plan_init(&b);
	CHECK(solve("sb-lbb", l1, 1, &a) == 0);
	CHECK(solve("sparsebalance", l2, 1, &b) == 0);
	CHECK(same_spans(&a, &b));
	bp_plan_release(&a);
	bp_plan_release(&b);
	static const char *const ps[4][1] = {{"sb_p=0"}, {"sb_p=0.05"}, {"sb_p=0.2"},
					     {"sb_p=0.5"}};
	struct bp_plan pl[4];
	for (int i = 0; i < 4; i++) {
		bp_plan_init(&pl[i]);
		CHECK(solve("sb-lbb", ps[i], 1, &pl[i]) == 0);
	}
	for (int i = 1; i < 4; i++) {
		CHECK(same_spans(&pl[0], &pl[i]));
		for (size_t s = 0; s < pl[0].nsteps; s++)
			for (size_t q = 0; q < pl[0].steps[s].npipes; q++)
				for (size_t m = 0; m < pl[0].steps[s].pipes[q].nmbs; m++)
					for (int l = 0; l < pl[0].model.layers; l++)
						CHECK(pl[i].steps[s].pipes[q].mbs[m].sparse_k[l] <=
						      pl[i - 1].steps[s].pipes[q].mbs[m].sparse_k[l]);
	}
	for (int i = 0; i < 4; i++)
		bp_plan_release(&pl[i]);
}

/* A reference two-level LPT written apart from the method (KAT-4): n items of weight w and
 * length len in draw order; DP level into dp groups (least load, ties lowest), then each
 * group into m bins under cap (least load among bins with room, ties lowest, a new bin when
 * none has room); items placed largest weight first (ties: longer, then earlier). Returns the
 * micro-batches of pipeline q as a flat list of item indices per bin in emission order
 * (bins by decreasing load, stable), -1 separating bins. */
static size_t ref_pack(const double *w, const int64_t *len, size_t n, size_t dp, size_t m,
		       int64_t cap, size_t q, int *outl)
{
	size_t ord[64];
	for (size_t i = 0; i < n; i++)
		ord[i] = i;
	for (size_t i = 1; i < n; i++) /* insertion sort by (w desc, len desc, index) */
		for (size_t j = i; j > 0; j--) {
			size_t a = ord[j - 1], b = ord[j];
			int before = w[b] > w[a] || (w[b] == w[a] && (len[b] > len[a] ||
								   (len[b] == len[a] && b < a)));
			if (!before)
				break;
			ord[j - 1] = b;
			ord[j] = a;
		}
	double gl[16] = {0};
	int grp[64];
	for (size_t r = 0; r < n; r++) {
		size_t best = 0;
		for (size_t g = 1; g < dp; g++)
			if (gl[g] < gl[best])
				best = g;
		grp[ord[r]] = (int)best;
		gl[best] += w[ord[r]];
	}
	double bl[64] = {0};
	int64_t bf[64] = {0};
	int bin[64];
	size_t nb = m;
	for (size_t r = 0; r < n; r++) {
		size_t i = ord[r];
		if ((size_t)grp[i] != q)
			continue;
		size_t best = nb;
		for (size_t b = 0; b < nb; b++)
			if (bf[b] + len[i] <= cap && (best == nb || bl[b] < bl[best]))
				best = b;
		if (best == nb)
			nb++;
		bin[i] = (int)best;
		bl[best] += w[i];
		bf[best] += len[i];
	}
	size_t bo[64], k = 0;
	for (size_t b = 0; b < nb; b++)
		bo[b] = b;
	for (size_t i = 1; i < nb; i++)
		for (size_t j = i; j > 0 && bl[bo[j]] > bl[bo[j - 1]]; j--) {
			size_t t = bo[j];
			bo[j] = bo[j - 1];
			bo[j - 1] = t;
		}
	for (size_t b = 0; b < nb; b++) {
		int any = 0;
		for (size_t r = 0; r < n; r++)
			if ((size_t)grp[ord[r]] == q && (size_t)bin[ord[r]] == bo[b]) {
				outl[k++] = (int)ord[r];
				any = 1;
			}
		if (any)
			outl[k++] = -1;
	}
	return k;
}

/* KAT-4: without DST the Spar state stays k_base, so SAB's weights are W = Perf.predict(L,
 * k_base) (attention from the sparse table plus the layer's GEMMs) and its packing is the
 * reference LPT on them; sb-lbb's is the reference LPT on W = L. */
static void test_kat4(void)
{
	static const char *const sab[] = {"sb_dst=0"};
	struct bp_costmodel cm;
	struct bp_error err;
	struct bp_scheme sc = {1, 1, 2};
	CHECK(bp_costmodel_init(&cm, &prof, sc, 4, &err) == 0);
	const struct bp_sparse_table *t = bp_profile_sparse(&prof, 1, 256);
	CHECK(t != NULL);
	for (int lbb = 0; lbb < 2 && t; lbb++) {
		struct bp_plan a;
		bp_plan_init(&a);
		CHECK(solve(lbb ? "sb-lbb" : "sparsebalance", sab, 1, &a) == 0);
		for (size_t s = 0; s < a.nsteps; s++) {
			const struct bp_step *st = &a.steps[s];
			double w[64];
			int64_t len[64];
			for (size_t i = 0; i < st->ndocs; i++) {
				len[i] = st->docs[i].len;
				w[i] = lbb ? (double)len[i]
					   : bp_cost_sparse_attn(t, (double)len[i], 32, 0) +
						     bp_cost_sparse_attn(t, (double)len[i], 32, 1) +
						     bp_cost_linear(cm.linear, (double)len[i], 0) +
						     bp_cost_linear(cm.linear, (double)len[i], 1);
			}
			for (size_t q = 0; q < st->npipes; q++) {
				int ref[160];
				size_t k = ref_pack(w, len, st->ndocs, st->npipes, 4, 32768, q, ref), r = 0;
				for (size_t i = 0; i < st->pipes[q].nmbs; i++) {
					const struct bp_mb *mb = &st->pipes[q].mbs[i];
					for (size_t x = 0; x < mb->nspans; x++, r++)
						CHECK(r < k && ref[r] >= 0 &&
						      st->docs[ref[r]].id == mb->spans[x].doc);
					CHECK(r < k && ref[r] == -1);
					r++;
				}
				CHECK(r == k);
			}
		}
		bp_plan_release(&a);
	}
	bp_costmodel_release(&cm);
}

int main(void)
{
	struct bp_error err;
	struct bp_scheme sc = {1, 1, 2};
	bp_profile_init(&prof);
	CHECK(bp_profile_analytic(&prof, bp_gpu_preset("H200"), bp_model_preset("qwen2.5-0.5b"),
				  &sc, 1, 32768, &err) == 0);
	test_plans();
	test_exact();
	test_lbb_and_p();
	test_kat4();
	bp_profile_release(&prof);
	return CHECK_DONE();
}
