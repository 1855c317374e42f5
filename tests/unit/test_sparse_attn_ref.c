/* test_sparse_attn_ref.c: the CPU reference of the block-sparse (MoBA top-k) attention
 * (executor/attn_sparse_ref.h), the oracle of the CUDA kernel (executor/attn_sparse.cu).
 *
 * On seeded random inputs (several document lengths, non-multiples of the block among them;
 * budgets below, at and above the block count; GQA; query tiles of 64 rows as the kernel
 * selects, and of 1 row as MoBA does): the sparse path (walking the CSR lists) equals the
 * masked path (full causal attention with the selection's explicit block bitmap), forward
 * (O, lse) and backward (dQ, dK, dV); with k at or above the block count the selection is
 * every earlier block and the result is plain dense causal attention; the selection is the
 * top k - 1 earlier blocks by gate score with ties to the lower index, plus the own block;
 * the keys a document's rows see add up to the planner's work model P(L, k)
 * (bp_moba_pairs); a small budget changes the output; the
 * gradients match central finite differences of sum(dO o O) on a tiny case; bad shapes are
 * rejected with a message. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_sparse_ref.h"
#include "check.h"
#include "costkinds.h"
#include "rng.h"

static double normal(struct bp_rng *r)
{
	double u = bp_rng_uniform(r) + 0x1.0p-54, v = bp_rng_uniform(r);
	return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static double *randn(size_t n, struct bp_rng *r)
{
	double *x = malloc((n ? n : 1) * sizeof(*x));
	for (size_t i = 0; i < n; i++)
		x[i] = normal(r);
	return x;
}

/* max |a - b| / max(max |b|, 1e-12) */
static double rel(const double *a, const double *b, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs(a[i] - b[i]);
		if (!(e <= num))
			num = e;
		den = fmax(den, fabs(b[i]));
	}
	return num / fmax(den, 1e-12);
}

struct tcase {
	const char *name;
	int nseg;
	int32_t lens[8];
	int heads, kv_heads, d, block, qtile, k;
	int kseg[8]; /* all zero: k for every document */
};

static void make_shape(const struct tcase *c, int32_t *cu, struct bp_sparse_ref_shape *s)
{
	cu[0] = 0;
	for (int i = 0; i < c->nseg; i++)
		cu[i + 1] = cu[i] + c->lens[i];
	memset(s, 0, sizeof(*s));
	s->nseg = c->nseg;
	s->cu = cu;
	s->heads = c->heads;
	s->kv_heads = c->kv_heads;
	s->head_dim = c->d;
	s->block = c->block;
	s->qtile = c->qtile;
	s->k = c->k;
	s->k_seg = c->kseg[0] ? c->kseg : NULL;
	s->scale = 1.0 / sqrt((double)c->d);
}

/* The selection's lists: sorted, the own block last, min(k, own + 1) long, and the top k - 1
 * earlier blocks by score (ties: the lower index). */
static void check_selection(const struct bp_sparse_ref_shape *s, const struct bp_sparse_sel *sel,
			    const double *q, const double *k)
{
	int maxb = 0;
	for (int i = 0; i < s->nseg; i++) {
		int nb = (s->cu[i + 1] - s->cu[i] + s->block - 1) / s->block;
		maxb = nb > maxb ? nb : maxb;
	}
	double *scores = malloc((size_t)(maxb + 1) * sizeof(*scores));
	int bad = 0;
	for (int64_t t = 0; t < sel->ntiles; t++) {
		const int seg = sel->tile_seg[t], own = sel->tile_row0[t] / s->block;
		const int kseg = s->k_seg ? s->k_seg[seg] : s->k;
		const int want = kseg < own + 1 ? kseg : own + 1;
		for (int h = 0; h < s->heads; h++) {
			const int64_t r = t * s->heads + h;
			const int32_t *list = sel->blocks + sel->row_ptr[r];
			const int n = (int)(sel->row_ptr[r + 1] - sel->row_ptr[r]);
			if (n != want || list[n - 1] != own) {
				bad++;
				continue;
			}
			for (int j = 1; j < n; j++)
				bad += list[j] <= list[j - 1];
			int np = -1;
			struct bp_error err;
			if (bp_sparse_ref_scores(s, q, k, t, h, scores, &np, &err) != 0 || np != own) {
				bad++;
				continue;
			}
			/* Every kept block beats every dropped one (equal scores: lower index). */
			unsigned char *in = calloc((size_t)own + 1, 1);
			for (int j = 0; j + 1 < n; j++)
				in[list[j]] = 1;
			for (int a = 0; a < own; a++)
				for (int b = 0; b < own; b++)
					if (in[a] && !in[b])
						bad += !(scores[a] > scores[b] ||
							 (scores[a] == scores[b] && a < b));
			free(in);
		}
	}
	free(scores);
	CHECK(bad == 0);
}

/* Query-key pairs the bitmap lets through, per head, against P(L, k) of every document. */
static void check_pairs(const struct bp_sparse_ref_shape *s, const unsigned char *mask,
			int stride, const struct tcase *c)
{
	int64_t t = 0;
	for (int i = 0; i < s->nseg; i++) {
		const int len = s->cu[i + 1] - s->cu[i];
		const int kseg = s->k_seg ? s->k_seg[i] : s->k;
		for (int h = 0; h < s->heads; h++) {
			double pairs = 0;
			for (int r = 0; r < len; r++) {
				const int64_t tt = t + r / s->qtile;
				for (int col = 0; col <= r; col++)
					pairs += mask[(tt * s->heads + h) * stride + col / s->block];
			}
			if (pairs != bp_moba_pairs(len, s->block, kseg))
				fprintf(stderr, "%s: segment %d head %d: %g pairs, P(L,k) %g\n",
					c->name, i, h, pairs, bp_moba_pairs(len, s->block, kseg));
			CHECK(pairs == bp_moba_pairs(len, s->block, kseg));
		}
		t += (len + s->qtile - 1) / s->qtile;
	}
}

static void run_case(const struct tcase *c, uint64_t seed)
{
	int32_t cu[9];
	struct bp_sparse_ref_shape s;
	struct bp_error err;
	struct bp_rng rng;
	make_shape(c, cu, &s);
	bp_rng_seed(&rng, seed);
	const int64_t total = cu[c->nseg];
	const size_t nq = (size_t)total * c->heads * c->d, nk = (size_t)total * c->kv_heads * c->d;
	const size_t nl = (size_t)total * c->heads;
	double *q = randn(nq, &rng), *k = randn(nk, &rng), *v = randn(nk, &rng);
	double *dout = randn(nq, &rng);
	double *o1 = calloc(nq + 1, 8), *o2 = calloc(nq + 1, 8), *l1 = calloc(nl + 1, 8),
	       *l2 = calloc(nl + 1, 8), *dq1 = calloc(nq + 1, 8), *dq2 = calloc(nq + 1, 8),
	       *dk1 = calloc(nk + 1, 8), *dk2 = calloc(nk + 1, 8), *dv1 = calloc(nk + 1, 8),
	       *dv2 = calloc(nk + 1, 8);
	struct bp_sparse_sel sel;
	unsigned char *mask = NULL;
	int stride = 0;
	bp_sparse_sel_init(&sel);

	CHECK(bp_sparse_ref_select(&s, q, k, &sel, &err) == 0);
	CHECK(bp_sparse_ref_mask(&s, &sel, &mask, &stride, &err) == 0);
	check_selection(&s, &sel, q, k);
	check_pairs(&s, mask, stride, c);

	/* Sparse path against the masked path, forward and backward. */
	CHECK(bp_sparse_ref_fwd(&s, &sel, q, k, v, o1, l1, &err) == 0);
	CHECK(bp_masked_ref_fwd(&s, mask, stride, q, k, v, o2, l2, &err) == 0);
	CHECK(bp_sparse_ref_bwd(&s, &sel, q, k, v, o1, l1, dout, dq1, dk1, dv1, &err) == 0);
	CHECK(bp_masked_ref_bwd(&s, mask, stride, q, k, v, o2, l2, dout, dq2, dk2, dv2, &err) == 0);
	const double eo = rel(o1, o2, nq), el = rel(l1, l2, nl), eq = rel(dq1, dq2, nq),
		     ek = rel(dk1, dk2, nk), ev = rel(dv1, dv2, nk);
	fprintf(stderr, "%-14s sparse vs masked: O %.1e lse %.1e dQ %.1e dK %.1e dV %.1e\n",
		c->name, eo, el, eq, ek, ev);
	CHECK(eo < 1e-12 && el < 1e-12 && eq < 1e-12 && ek < 1e-12 && ev < 1e-12);

	/* Against full dense causal attention: equal when every document is dense under its
	 * budget, different otherwise. */
	int dense = 1;
	for (int i = 0; i < c->nseg; i++) {
		int nb = (c->lens[i] + c->block - 1) / c->block;
		dense &= (s.k_seg ? s.k_seg[i] : s.k) >= nb;
	}
	CHECK(bp_masked_ref_fwd(&s, NULL, 0, q, k, v, o2, l2, &err) == 0);
	CHECK(bp_masked_ref_bwd(&s, NULL, 0, q, k, v, o2, l2, dout, dq2, dk2, dv2, &err) == 0);
	const double dd = rel(o1, o2, nq);
	if (dense) {
		CHECK(dd < 1e-12 && rel(l1, l2, nl) < 1e-12 && rel(dq1, dq2, nq) < 1e-12 &&
		      rel(dk1, dk2, nk) < 1e-12 && rel(dv1, dv2, nk) < 1e-12);
	} else {
		fprintf(stderr, "%-14s sparse vs dense O: %.3f (must differ)\n", c->name, dd);
		CHECK(dd > 1e-3);
	}
	bp_sparse_sel_release(&sel);
	free(mask);
	free(q), free(k), free(v), free(dout), free(o1), free(o2), free(l1), free(l2);
	free(dq1), free(dq2), free(dk1), free(dk2), free(dv1), free(dv2);
}

/* sum(dO o O) under a fixed selection. */
static double loss(const struct bp_sparse_ref_shape *s, const struct bp_sparse_sel *sel,
		   const double *q, const double *k, const double *v, const double *dout,
		   double *o, double *lse, size_t nq)
{
	struct bp_error err;
	CHECK(bp_sparse_ref_fwd(s, sel, q, k, v, o, lse, &err) == 0);
	double x = 0;
	for (size_t i = 0; i < nq; i++)
		x += dout[i] * o[i];
	return x;
}

/* Central differences of the loss against bp_sparse_ref_bwd, every input element, with the
 * selection held fixed (it is piecewise constant). */
static void test_finite_differences(void)
{
	const struct tcase c = {"fd", 2, {40, 23}, 2, 1, 4, 8, 4, 2, {0}};
	int32_t cu[3];
	struct bp_sparse_ref_shape s;
	struct bp_error err;
	struct bp_rng rng;
	make_shape(&c, cu, &s);
	bp_rng_seed(&rng, 99);
	const int64_t total = cu[2];
	const size_t nq = (size_t)total * c.heads * c.d, nk = (size_t)total * c.kv_heads * c.d;
	double *q = randn(nq, &rng), *k = randn(nk, &rng), *v = randn(nk, &rng);
	double *dout = randn(nq, &rng);
	double *o = calloc(nq, 8), *lse = calloc((size_t)total * c.heads, 8);
	double *dq = calloc(nq, 8), *dk = calloc(nk, 8), *dv = calloc(nk, 8);
	struct bp_sparse_sel sel;
	bp_sparse_sel_init(&sel);
	CHECK(bp_sparse_ref_select(&s, q, k, &sel, &err) == 0);
	loss(&s, &sel, q, k, v, dout, o, lse, nq);
	CHECK(bp_sparse_ref_bwd(&s, &sel, q, k, v, o, lse, dout, dq, dk, dv, &err) == 0);
	const double h = 1e-6;
	double *ins[3] = {q, k, v}, *grads[3] = {dq, dk, dv};
	size_t ns[3] = {nq, nk, nk};
	double worst = 0;
	for (int w = 0; w < 3; w++) {
		for (size_t i = 0; i < ns[w]; i++) {
			const double x0 = ins[w][i];
			ins[w][i] = x0 + h;
			const double lp = loss(&s, &sel, q, k, v, dout, o, lse, nq);
			ins[w][i] = x0 - h;
			const double lm = loss(&s, &sel, q, k, v, dout, o, lse, nq);
			ins[w][i] = x0;
			const double fd = (lp - lm) / (2 * h);
			const double e = fabs(fd - grads[w][i]) / fmax(1.0, fabs(fd));
			worst = fmax(worst, e);
		}
	}
	fprintf(stderr, "finite differences: worst error %.2e over %zu inputs\n", worst,
		nq + 2 * nk);
	CHECK(worst < 1e-6);
	bp_sparse_sel_release(&sel);
	free(q), free(k), free(v), free(dout), free(o), free(lse), free(dq), free(dk), free(dv);
}

/* Equal scores everywhere (every block's keys the same): the lowest k - 1 indices win. */
static void test_ties(void)
{
	const struct tcase c = {"ties", 1, {700}, 2, 2, 8, 64, 16, 4, {0}};
	int32_t cu[2];
	struct bp_sparse_ref_shape s;
	struct bp_error err;
	struct bp_rng rng;
	make_shape(&c, cu, &s);
	bp_rng_seed(&rng, 5);
	const size_t nq = 700 * 2 * 8, nk = 700 * 2 * 8;
	double *q = randn(nq, &rng), *k = randn(nk, &rng);
	for (int r = 64; r < 700; r++) /* every block a copy of block 0 */
		memcpy(k + (size_t)r * 16, k + (size_t)(r % 64) * 16, 16 * sizeof(*k));
	struct bp_sparse_sel sel;
	bp_sparse_sel_init(&sel);
	CHECK(bp_sparse_ref_select(&s, q, k, &sel, &err) == 0);
	int bad = 0;
	for (int64_t t = 0; t < sel.ntiles; t++) {
		const int own = sel.tile_row0[t] / 64;
		for (int h = 0; h < 2; h++) {
			const int64_t r = t * 2 + h;
			const int n = (int)(sel.row_ptr[r + 1] - sel.row_ptr[r]);
			const int32_t *list = sel.blocks + sel.row_ptr[r];
			for (int j = 0; j + 1 < n; j++)
				bad += list[j] != j;
			bad += list[n - 1] != own;
		}
	}
	CHECK(bad == 0);
	bp_sparse_sel_release(&sel);
	free(q), free(k);
}

static void test_bad_shapes(void)
{
	int32_t cu[2] = {0, 100};
	struct bp_sparse_ref_shape s = {1, cu, 6, 4, 8, 64, 16, NULL, 2, 0.25};
	struct bp_sparse_sel sel;
	struct bp_error err;
	double x[100 * 6 * 8] = {0};
	bp_sparse_sel_init(&sel);
	CHECK(bp_sparse_ref_select(&s, x, x, &sel, &err) == -1 &&
	      strstr(err.text, "not a multiple of kv_heads"));
	s.kv_heads = 2;
	s.qtile = 48;
	CHECK(bp_sparse_ref_select(&s, x, x, &sel, &err) == -1 &&
	      strstr(err.text, "block 64 is not a positive multiple of the query tile 48"));
	s.qtile = 16;
	s.k = 0;
	CHECK(bp_sparse_ref_select(&s, x, x, &sel, &err) == -1 &&
	      strstr(err.text, "budget 0 of segment 0"));
	s.k = 2;
	cu[1] = -1;
	CHECK(bp_sparse_ref_select(&s, x, x, &sel, &err) == -1 && strstr(err.text, "decreases"));
	cu[1] = 100;
	CHECK(bp_sparse_ref_select(&s, x, x, &sel, &err) == 0);
	cu[1] = 90; /* a selection of another shape */
	double o[100 * 6 * 8], lse[600];
	CHECK(bp_sparse_ref_fwd(&s, &sel, x, x, x, o, lse, &err) == -1 &&
	      strstr(err.text, "does not match"));
	bp_sparse_sel_release(&sel);
}

int main(void)
{
	/* name, nseg, lens, heads, kv_heads, d, block, qtile, k, per-segment k */
	static const struct tcase cases[] = {
		/* The kernel's geometry scaled down: block 4 tiles, tile-level selection. */
		{"mixed-k3", 4, {700, 256, 1, 300}, 4, 2, 16, 64, 16, 3, {0}},
		{"per-seg-k", 4, {700, 256, 1, 300}, 4, 2, 16, 64, 16, 0, {2, 4, 1, 9}},
		{"k-dense", 3, {700, 256, 300}, 4, 2, 16, 64, 16, 11, {0}},
		{"k-above", 2, {129, 64}, 2, 2, 8, 64, 16, 40, {0}},
		{"k1-own-only", 2, {300, 65}, 2, 1, 8, 64, 64, 1, {0}},
		/* MoBA per token (query tile 1). */
		{"moba-token", 2, {100, 65}, 4, 1, 8, 32, 1, 2, {0}},
		/* The real block and tile sizes: B = 256, 64-row tiles, GQA 4:1. */
		{"b256-gqa", 2, {1000, 513}, 4, 1, 8, 256, 64, 2, {0}},
		{"b256-k3", 1, {1100}, 2, 2, 8, 256, 64, 3, {0}},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i], 1000 + i);
	test_finite_differences();
	test_ties();
	test_bad_shapes();
	return CHECK_DONE();
}
