/* test_pack.c: the LPT of planner/blocks/pack.c (bp_pack_lpt, bp_pack_lpt_ex, bp_deal_bins)
 * equal to the naive O(items x bins) scan it replaced, bin for bin and load for load, over
 * random instances on both sides of the scan/treap switch (LPT_SCAN_MAX, 32 open bins), with
 * ties in cost (a few distinct costs, zeros of both signs), count limits and bins opened on
 * the way; bp_order_by_cost equal to qsort by its comparison; and bp_grow_m's count of
 * tries. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pack.h"
#include "rng.h"

/* The reference: the scan of pack.c before the treap (and SparseBalance's private lpt). */
static int ref_lpt(const double *cost, const int64_t *len, size_t n, size_t nb, size_t maxbins,
		   int64_t cap, size_t per, int *bin_of, double *load, int64_t *fill,
		   size_t *nused)
{
	size_t mx = maxbins > nb ? maxbins : nb, open = nb;
	size_t *order = calloc(n + 1, sizeof(size_t)), *cnt = calloc(mx + 1, sizeof(size_t));
	int rc = 0;
	bp_order_by_cost(cost, len, n, order);
	for (size_t b = 0; b < mx; b++) {
		load[b] = 0.0;
		fill[b] = 0;
	}
	for (size_t k = 0; k < n; k++) {
		size_t i = order[k], best = open;
		for (size_t b = 0; b < open; b++)
			if (fill[b] + len[i] <= cap && (!per || cnt[b] < per) &&
			    (best == open || load[b] < load[best]))
				best = b;
		if (best == open) {
			if (open >= mx) {
				rc = 1;
				break;
			}
			open++;
		}
		bin_of[i] = (int)best;
		load[best] += cost[i];
		fill[best] += len[i];
		cnt[best]++;
	}
	*nused = open;
	free(order);
	free(cnt);
	return rc;
}

static double draw_cost(struct bp_rng *r, int shape, int64_t len)
{
	switch (shape) {
	case 0: /* continuous */
		return bp_rng_uniform(r) * 100.0;
	case 1: /* few distinct values: many ties in cost, broken by length then index */
		return (double)bp_rng_below(r, 4);
	case 2: /* zeros of both signs and small integers */
		return bp_rng_below(r, 3) ? (bp_rng_below(r, 2) ? 0.0 : -0.0)
					  : (double)bp_rng_below(r, 3);
	default: /* a convex cost of the length, as bp_cost_doc */
		return (double)len + 1e-4 * (double)len * (double)len;
	}
}

static void one(struct bp_rng *r, int round)
{
	size_t n = (size_t)bp_rng_below(r, 300), nb = 1 + (size_t)bp_rng_below(r, 120);
	int64_t cap = 16 + (int64_t)bp_rng_below(r, 400);
	size_t per = bp_rng_below(r, 3) ? 0 : 1 + (size_t)bp_rng_below(r, 6);
	size_t maxbins = bp_rng_below(r, 2) ? nb : nb + n;
	int shape = (int)(round % 4);
	double *cost = calloc(n + 1, sizeof(double));
	int64_t *len = calloc(n + 1, sizeof(int64_t));
	size_t mx = maxbins > nb ? maxbins : nb, *order = calloc(n + 1, sizeof(size_t));
	int *b1 = calloc(n + 1, sizeof(int)), *b2 = calloc(n + 1, sizeof(int));
	double *l1 = calloc(mx + 1, sizeof(double)), *l2 = calloc(mx + 1, sizeof(double));
	int64_t *f1 = calloc(mx + 1, sizeof(int64_t)), *f2 = calloc(mx + 1, sizeof(int64_t));
	struct bp_error err;
	for (size_t i = 0; i < n; i++) {
		len[i] = 1 + (int64_t)bp_rng_below(r, (uint64_t)(bp_rng_below(r, 2) ? cap : cap / 8));
		cost[i] = draw_cost(r, shape, len[i]);
	}
	size_t u1 = 0, u2 = 0;
	struct bp_lpt_opts o = {.nbins = nb, .maxbins = maxbins, .cap = cap, .per = per};
	int rc1 = ref_lpt(cost, len, n, nb, maxbins, cap, per, b1, l1, f1, &u1);
	int rc2 = bp_pack_lpt_ex(&o, cost, len, n, order, b2, l2, f2, &u2, &err);
	CHECK(rc1 == rc2);
	CHECK(u1 == u2);
	int same = 1;
	for (size_t i = 0; rc1 == 0 && i < n; i++)
		same &= b1[i] == b2[i];
	for (size_t b = 0; rc1 == 0 && b < u1; b++)
		same &= l1[b] == l2[b] && f1[b] == f2[b];
	CHECK(same);
	/* bp_pack_lpt is the case maxbins = nbins, no count limit */
	if (!per && maxbins == nb) {
		rc2 = bp_pack_lpt(cost, len, n, nb, cap, b2, l2, f2, &err);
		CHECK(rc1 == rc2);
		for (size_t i = 0; rc1 == 0 && i < n; i++)
			same &= b1[i] == b2[i];
		CHECK(same);
	}
	free(cost);
	free(len);
	free(order);
	free(b1);
	free(b2);
	free(l1);
	free(l2);
	free(f1);
	free(f2);
}

/* bp_deal_bins: LPT of the bins over the groups, per bins a group. */
static void deal(struct bp_rng *r)
{
	size_t groups = 1 + (size_t)bp_rng_below(r, 80), per = 1 + (size_t)bp_rng_below(r, 6);
	size_t nbins = groups * per, u = 0;
	double *load = calloc(nbins, sizeof(double)), *sum = calloc(groups, sizeof(double));
	int64_t *zero = calloc(nbins, sizeof(int64_t)), *fill = calloc(groups, sizeof(int64_t));
	int *g1 = calloc(nbins, sizeof(int)), *g2 = calloc(nbins, sizeof(int));
	struct bp_error err;
	for (size_t b = 0; b < nbins; b++)
		load[b] = bp_rng_below(r, 2) ? (double)bp_rng_below(r, 5) : bp_rng_uniform(r);
	CHECK(ref_lpt(load, zero, nbins, groups, groups, INT64_MAX, per, g1, sum, fill, &u) == 0);
	CHECK(bp_deal_bins(load, nbins, groups, per, g2, &err) == 0);
	int same = 1;
	size_t *count = calloc(groups, sizeof(size_t));
	for (size_t b = 0; b < nbins; b++) {
		same &= g1[b] == g2[b];
		count[g2[b]]++;
	}
	for (size_t g = 0; g < groups; g++)
		same &= count[g] == per;
	CHECK(same);
	free(load);
	free(sum);
	free(zero);
	free(fill);
	free(g1);
	free(g2);
	free(count);
}

/* The reference order: qsort by cost descending, length descending, index ascending. */
struct ref_ord {
	double cost;
	int64_t len;
	size_t i;
};

static int ref_cmp(const void *a, const void *b)
{
	const struct ref_ord *x = a, *y = b;
	if (x->cost != y->cost)
		return x->cost < y->cost ? 1 : -1;
	if (x->len != y->len)
		return x->len < y->len ? 1 : -1;
	return (x->i > y->i) - (x->i < y->i);
}

/* bp_order_by_cost (a radix sort from a few hundred items) against qsort, with ties, zeros of
 * both signs, negative and infinite costs, negative and huge lengths. */
static void order(struct bp_rng *r, size_t n, int shape)
{
	double *cost = calloc(n + 1, sizeof(double));
	int64_t *len = calloc(n + 1, sizeof(int64_t));
	size_t *got = calloc(n + 1, sizeof(size_t));
	struct ref_ord *o = calloc(n + 1, sizeof(*o));
	for (size_t i = 0; i < n; i++) {
		uint64_t v = bp_rng_below(r, 8);
		switch (shape) {
		case 0:
			cost[i] = bp_rng_uniform(r) * 1e6 - 1e3;
			len[i] = (int64_t)bp_rng_below(r, 1 << 20);
			break;
		case 1: /* ties in cost, then in length */
			cost[i] = v < 2 ? 0.0 : v < 4 ? -0.0 : (double)(v - 4) - 1.5;
			len[i] = (int64_t)bp_rng_below(r, 4) - 1;
			break;
		default: /* extremes */
			cost[i] = v == 0 ? INFINITY : v == 1 ? -INFINITY : v == 2 ? 5e-324
				: v == 3 ? -1e300 : (double)bp_rng_below(r, 3);
			len[i] = v == 4 ? INT64_MAX : v == 5 ? INT64_MIN : (int64_t)bp_rng_below(r, 3);
			break;
		}
		o[i] = (struct ref_ord){cost[i], len[i], i};
	}
	qsort(o, n, sizeof(*o), ref_cmp);
	bp_order_by_cost(cost, len, n, got);
	int same = 1;
	for (size_t i = 0; i < n; i++)
		same &= got[i] == o[i].i;
	CHECK(same);
	free(cost);
	free(len);
	free(got);
	free(o);
}

struct tries {
	size_t fits_at, calls;
};

static int try_m(size_t m, void *arg, struct bp_error *err)
{
	struct tries *t = arg;
	(void)err;
	t->calls++;
	return m >= t->fits_at ? 0 : 1;
}

static void grow(void)
{
	struct bp_error err;
	size_t m = 0;
	int64_t small[50], mixed[9] = {6, 6, 6, 6, 6, 6, 6, 6, 6};
	for (size_t i = 0; i < 50; i++)
		small[i] = 2;
	/* 100 tokens on 4 pipelines of 10 per micro-batch: from m = 3 */
	CHECK(bp_first_m(100, 4, 10, small, 50, 10) == 3);
	struct tries t = {5, 0};
	CHECK(bp_grow_m(3, 50, try_m, &t, &m, &err) == 0);
	CHECK(m == 5 && t.calls == 3);
	CHECK(bp_first_m(0, 4, 10, small, 0, 10) == 1);
	t = (struct tries){1, 0};
	CHECK(bp_grow_m(1, 50, try_m, &t, &m, &err) == 0);
	CHECK(m == 1 && t.calls == 1);
	/* nine items over half the cap need nine bins: 3 per pipeline on 4 pipelines, not the
	 * 2 their 54 tokens would take; exactly half the cap may share */
	CHECK(bp_first_m(54, 4, 10, mixed, 9, 10) == 3);
	CHECK(bp_first_m(54, 4, 10, mixed, 9, 12) == 2);
	/* far from the first count: eight tries one by one, then doubling steps and a
	 * bisection find the smallest fitting count of a monotone packer in few tries */
	t = (struct tries){100, 0};
	CHECK(bp_grow_m(3, 1000, try_m, &t, &m, &err) == 0);
	CHECK(m == 100 && t.calls <= 8 + 8 + 7 + 1);
	t = (struct tries){11, 0};
	CHECK(bp_grow_m(3, 1000, try_m, &t, &m, &err) == 0);
	CHECK(m == 11);
	/* a packer that never fits stops past n with an error, not a loop */
	t = (struct tries){1000, 0};
	CHECK(bp_grow_m(3, 7, try_m, &t, &m, &err) == -1);
	CHECK(t.calls == 5); /* m = 3..7 */
}

int main(void)
{
	struct bp_rng r;
	bp_rng_seed(&r, 24);
	for (int k = 0; k < 400; k++)
		one(&r, k);
	for (int k = 0; k < 100; k++)
		deal(&r);
	grow();
	static const size_t sizes[] = {0, 1, 7, 255, 256, 1000, 20000};
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		for (int shape = 0; shape < 3; shape++)
			order(&r, sizes[k], shape);
	return CHECK_DONE();
}
