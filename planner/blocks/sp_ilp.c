/* sp_ilp.c: FlexSP's group enumeration, length buckets, warm start and MILP (sp_ilp.h;
 * arXiv 2412.01523), on GLPK through ilp.h. Called by methods/flexsp.c. Invariant: the
 * solution returned is never worse than the warm start under bp_sp_eval, and it depends
 * only on the inputs and the deterministic budget. */
#include "sp_ilp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


size_t bp_sp_groups(int units, int max_size, struct bp_sp_group *g)
{
	size_t n = 0;
	if (max_size <= 0 || max_size > units)
		max_size = units;
	for (int s = 1; s <= max_size; s *= 2)
		for (int a = 0; a + s <= units; a += s) {
			if (g)
				g[n] = (struct bp_sp_group){a, s};
			n++;
		}
	return n;
}

void bp_sp_buckets_release(struct bp_sp_buckets *b)
{
	free(b->len);
	free(b->count);
	free(b->of);
	memset(b, 0, sizeof(*b));
}

struct len_idx {
	int64_t len;
	size_t i;
};

static int cmp_len_desc(const void *a, const void *b)
{
	const struct len_idx *x = a, *y = b;
	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

/* The weight buckets share: attention's len^2 and the GEMMs' coef len (the proxy of
 * pack.h's bp_kk_proxy, in floating point). */
static double weight(int64_t len, int64_t coef)
{
	return (double)len * ((double)len + (double)coef);
}

/* FlexSP's bucketing keeps its MILP small (arXiv 2412.01523: sequences of similar length
 * share a variable); here by equal shares of the quadratic proxy (sp_ilp.h). */
int bp_sp_bucketize(const int64_t *len, size_t ndocs, size_t max_buckets, int64_t coef,
		    struct bp_sp_buckets *b, struct bp_error *err)
{
	struct len_idx *o = bp_calloc(ndocs + 1, sizeof(*o), err);
	int rc = -1;
	memset(b, 0, sizeof(*b));
	if (!o)
		return -1;
	if (max_buckets < 1)
		max_buckets = 1;
	b->len = bp_calloc(ndocs + 1, sizeof(int64_t), err);
	b->count = bp_calloc(ndocs + 1, sizeof(int64_t), err);
	b->of = bp_calloc(ndocs + 1, sizeof(size_t), err);
	if (!b->len || !b->count || !b->of)
		goto out;
	size_t distinct = 0;
	double total = 0.0;
	for (size_t i = 0; i < ndocs; i++) {
		if (len[i] < 1) {
			bp_errorf(err, "document %zu has length %lld", i, (long long)len[i]);
			goto out;
		}
		o[i] = (struct len_idx){len[i], i};
		total += weight(len[i], coef);
	}
	qsort(o, ndocs, sizeof(*o), cmp_len_desc);
	for (size_t i = 0; i < ndocs; i++)
		distinct += !i || o[i].len != o[i - 1].len;
	b->exact = distinct <= max_buckets;
	/* a bucket closes at a length change once it holds its share of what is left: the
	 * weight from its first document on over the buckets still free, so a few heavy
	 * documents do not leave the many light ones one bucket */
	double left = total, acc = 0.0;
	for (size_t i = 0; i < ndocs; i++) {
		int open = !b->n;
		if (!open && o[i].len != o[i - 1].len)
			open = b->exact || (b->n < max_buckets &&
					    acc >= left / (double)(max_buckets - b->n + 1));
		if (open) {
			if (b->n)
				left -= acc;
			b->len[b->n++] = o[i].len;
			acc = 0.0;
		}
		b->count[b->n - 1]++;
		b->of[o[i].i] = b->n - 1;
		acc += weight(o[i].len, coef);
	}
	rc = 0;
out:
	free(o);
	return rc;
}

int bp_sp_sol_alloc(struct bp_sp_sol *s, size_t nb, size_t ng, struct bp_error *err)
{
	s->used = bp_calloc(ng + 1, 1, err);
	s->n = bp_calloc(nb * ng + 1, sizeof(int64_t), err);
	s->m = bp_calloc(ng + 1, sizeof(int64_t), err);
	return s->used && s->n && s->m ? 0 : -1;
}

void bp_sp_sol_release(struct bp_sp_sol *s)
{
	free(s->used);
	free(s->n);
	free(s->m);
	memset(s, 0, sizeof(*s));
}

static int64_t ceil_div(int64_t a, int64_t b)
{
	return b > 0 ? (a + b - 1) / b : 0;
}

double bp_sp_eval(const struct bp_sp_problem *p, struct bp_sp_sol *s)
{
	unsigned char *cover = calloc((size_t)p->units + 1, 1);
	double worst = 0.0;
	if (!cover)
		return INFINITY;
	for (size_t g = 0; g < p->ng; g++) {
		if (!s->used[g])
			continue;
		for (int u = p->g[g].first; u < p->g[g].first + p->g[g].size; u++) {
			if (cover[u])
				worst = INFINITY;
			cover[u] = 1;
		}
	}
	free(cover);
	for (size_t b = 0; b < p->nb && isfinite(worst); b++) {
		int64_t placed = 0;
		for (size_t g = 0; g < p->ng; g++) {
			int64_t n = s->n[b * p->ng + g];
			if (n < 0 || (n > 0 && (!s->used[g] || p->len[b] > p->cap[g])))
				return INFINITY;
			placed += n;
		}
		if (placed != p->count[b])
			return INFINITY;
	}
	for (size_t g = 0; g < p->ng && isfinite(worst); g++) {
		double load = 0.0;
		int64_t tok = 0;
		for (size_t b = 0; b < p->nb; b++) {
			int64_t n = s->n[b * p->ng + g];
			load += (double)n * p->t[b * p->ng + g];
			tok += n * p->len[b];
		}
		s->m[g] = ceil_div(tok, p->cap[g]);
		load += (double)s->m[g] * p->fix[g];
		if (load > worst)
			worst = load;
	}
	return worst;
}

/* ---- the warm start ----
 * bp_sp_greedy's result is defined by the exhaustive search of sp_ilp.h (every partition
 * tried in order, LPT on each, the first best makespan wins). Three things make it cheaper
 * without changing it: LPT's choice of the group whose time grows least comes from two
 * segment trees per size (equal groups of one size), a partition whose certified lower
 * bound (its fractional relaxation) exceeds the best makespan found is never run, and a run
 * whose partial makespan exceeds it stops early; partitions run in order of their bounds,
 * ties broken by the exhaustive order. tests/unit/test_flexsp.c checks the result against
 * the exhaustive search. A fourth may change it on large steps: a cap on the runs
 * (GREEDY_RUNS). */

/* Relative slack between the bounds and LPT's loads (summed in another order than
 * bp_sp_eval's) and bp_sp_eval's makespan: rounding is below 1e-12 of a load. */
#define GREEDY_SLACK 1e-9

/* At most max(GREEDY_RUNS, GREEDY_PLACEMENTS / documents) partitions get an LPT run
 * (aborted runs counted), so that the search costs O(documents log units) from 16,384
 * documents a step on; past it the search keeps the best found. Runs go in ascending order
 * of the partitions' bounds, where the best comes early: 2026-11-27, llama3-8b tp 8 on
 * synthetic-longtail (64K), pretrain-upsampled-long and chatqa2-long-sft (128K) and
 * slimpajama-c4 (8K), 3 steps each, the exhaustive search's makespan at 4,096 and 16,384
 * GPUs in every step (its partition but in 4 of 12 steps at 16,384, those ties). A
 * search of U units has at most 2 U + log2(U) + 1 partitions: always exhaustive up to 4
 * units, up to 14 where a step has at most 2,048 documents, up to 29 at most 1,024. */
#define GREEDY_RUNS 4
#define GREEDY_PLACEMENTS 65536

/* One partition the warm start tries: kk groups of size 2^l1 from unit 0, then groups of
 * size 2^l2 over the rest (homogeneous: n2 0); idx its place in the exhaustive order. */
struct gpart {
	int l1, l2, kk, n2;
	size_t idx;
	double lb;
};

/* A segment tree over the groups of one size in a partition, in unit order: per node the
 * least load of its leaves that take the current bucket's document into their last
 * micro-batch (e: the time grows by t alone) and of the others (i: t plus a micro-batch's
 * fixed cost). */
struct gseg {
	size_t n, P; /* leaves, P the power of two >= n */
	double (*v)[2];  /* [2 P] per node the least load of each side (0: e, 1: i), node 1
			  * the root */
	size_t *g;       /* [n] each leaf's group */
};

struct gws {
	double *load;           /* [ng] */
	int64_t *tok;           /* [ng] */
	size_t *gl;             /* [units + 1] the partition's groups */
	int nlvl;               /* sizes 2^0 .. 2^(nlvl - 1) */
	size_t *off;            /* [nlvl] index of the first group of each size */
	int indexed;            /* p->g in bp_sp_groups's order, power-of-two sizes */
	unsigned char *uniform; /* [nlvl] groups of the size share cap, fix and t */
	int bounded;            /* t and fix >= 0: the bounds hold */
	double *tt;             /* [nlvl * nb] least t + fix len / cap over the size's groups */
	double *one;            /* [nlvl * nb] least t + fix (a document alone) */
	double *tmin;           /* [nlvl * nb] least t */
	double *fixmin;         /* [nlvl] least fix */
	unsigned char *free_;   /* [nb] part_fits's scratch */
	size_t **order;         /* [2 * nlvl * nlvl] ratio_order's, computed on demand */
	struct gseg seg[2];
	double limit;           /* a run stops once a load exceeds it */
};

static int lvl_of(int size)
{
	int l = 0;
	while ((1 << l) < size)
		l++;
	return l;
}

/* The group of the given first unit and size: by arithmetic on bp_sp_groups's order
 * (size ascending, then first), else by search. */
static size_t group_at(const struct bp_sp_problem *p, const struct gws *w, int first,
		       int size)
{
	if (w->indexed) {
		int l = lvl_of(size);
		size_t g = l < w->nlvl ? w->off[l] + (size_t)(first / size) : p->ng;
		if (g < p->ng && p->g[g].first == first && p->g[g].size == size)
			return g;
		return p->ng;
	}
	for (size_t g = 0; g < p->ng; g++)
		if (p->g[g].first == first && p->g[g].size == size)
			return g;
	return p->ng;
}

/* The index of p->g by size, each size's sameness and the per-size bucket costs of the
 * bounds. Returns 0 or -1. */
static int gws_init(const struct bp_sp_problem *p, struct gws *w, struct bp_error *err)
{
	size_t ng = p->ng, nb = p->nb;
	memset(w, 0, sizeof(*w));
	w->load = bp_calloc(ng + 1, sizeof(double), err);
	w->tok = bp_calloc(ng + 1, sizeof(int64_t), err);
	w->gl = bp_calloc((size_t)p->units + 1, sizeof(size_t), err);
	if (!w->load || !w->tok || !w->gl)
		return -1;
	int maxs = 0;
	w->indexed = 1;
	for (size_t g = 0; g < ng; g++) {
		int s = p->g[g].size;
		if (s > maxs)
			maxs = s;
		if (s < 1 || (s & (s - 1)))
			w->indexed = 0;
	}
	if (!w->indexed || maxs < 1)
		return 0;
	w->nlvl = lvl_of(maxs) + 1;
	w->off = bp_calloc((size_t)w->nlvl + 1, sizeof(size_t), err);
	w->uniform = bp_calloc((size_t)w->nlvl + 1, 1, err);
	w->tt = bp_calloc((size_t)w->nlvl * nb + 1, sizeof(double), err);
	w->one = bp_calloc((size_t)w->nlvl * nb + 1, sizeof(double), err);
	w->tmin = bp_calloc((size_t)w->nlvl * nb + 1, sizeof(double), err);
	w->order = bp_calloc(2 * (size_t)w->nlvl * w->nlvl + 1, sizeof(size_t *), err);
	w->fixmin = bp_calloc((size_t)w->nlvl + 1, sizeof(double), err);
	w->free_ = bp_calloc(nb + 1, 1, err);
	for (int k = 0; k < 2; k++) {
		w->seg[k].v = bp_calloc(4 * (size_t)p->units + 2, sizeof(*w->seg[k].v), err);
		w->seg[k].g = bp_calloc((size_t)p->units + 1, sizeof(size_t), err);
		if (!w->seg[k].v || !w->seg[k].g)
			return -1;
	}
	if (!w->off || !w->uniform || !w->tt || !w->one || !w->tmin || !w->order || !w->fixmin ||
	    !w->free_)
		return -1;
	/* bp_sp_groups's order, checked group by group */
	size_t n = 0;
	for (int l = 0; l < w->nlvl; l++) {
		int s = 1 << l;
		w->off[l] = n;
		w->uniform[l] = 1;
		for (int a = 0; a + s <= p->units; a += s, n++)
			if (n >= ng || p->g[n].first != a || p->g[n].size != s)
				w->indexed = 0;
	}
	if (n != ng)
		w->indexed = 0;
	if (!w->indexed)
		return 0;
	w->bounded = 1;
	for (size_t q = 0; q < (size_t)w->nlvl * nb; q++)
		w->tt[q] = w->one[q] = w->tmin[q] = INFINITY;
	for (int l = 0; l < w->nlvl; l++)
		w->fixmin[l] = INFINITY;
	for (size_t g = 0; g < ng; g++) {
		int l = lvl_of(p->g[g].size);
		size_t g0 = w->off[l];
		if (p->fix[g] < 0 || !isfinite(p->fix[g]) || p->cap[g] < 1)
			w->bounded = 0;
		if (p->cap[g] != p->cap[g0] || p->fix[g] != p->fix[g0])
			w->uniform[l] = 0;
		if (p->fix[g] < w->fixmin[l])
			w->fixmin[l] = p->fix[g];
		for (size_t b = 0; b < nb; b++) {
			double t = p->t[b * ng + g];
			if (t != p->t[b * ng + g0])
				w->uniform[l] = 0;
			if (p->len[b] > p->cap[g])
				continue;
			if (t < 0 || !isfinite(t))
				w->bounded = 0;
			double a = t + p->fix[g] * (double)p->len[b] / (double)p->cap[g];
			if (a < w->tt[l * nb + b])
				w->tt[l * nb + b] = a;
			if (t + p->fix[g] < w->one[l * nb + b])
				w->one[l * nb + b] = t + p->fix[g];
			if (t < w->tmin[l * nb + b])
				w->tmin[l * nb + b] = t;
		}
	}
	return 0;
}

static void gws_release(struct gws *w)
{
	for (size_t k = 0; w->order && k < 2 * (size_t)w->nlvl * w->nlvl; k++)
		free(w->order[k]);
	for (int k = 0; k < 2; k++) {
		free(w->seg[k].v);
		free(w->seg[k].g);
	}
	free(w->load);
	free(w->tok);
	free(w->gl);
	free(w->off);
	free(w->uniform);
	free(w->tt);
	free(w->one);
	free(w->tmin);
	free(w->fixmin);
	free(w->free_);
	free(w->order);
}

/* A bucket's costs in the two sizes being ordered. */
struct ratio_key {
	double t1, t2;
	size_t b;
};

/* Buckets by the ratio of their cost in the first size to the second, ascending (cross
 * multiplied: costs may be 0), then bucket. */
static int cmp_ratio(const void *a, const void *b)
{
	const struct ratio_key *x = a, *y = b;
	double u = x->t1 * y->t2, v = y->t1 * x->t2;
	if (u != v)
		return u < v ? -1 : 1;
	return (x->b > y->b) - (x->b < y->b);
}

/* The buckets in ascending ratio of their cost cost[l1 * nb + b] to cost[l2 * nb + b]
 * (kind 0: w->tt, 1: w->tmin), computed once per pair of sizes. */
static const size_t *ratio_order(const struct bp_sp_problem *p, struct gws *w, int kind,
				 int l1, int l2, struct bp_error *err)
{
	const double *cost = kind ? w->tmin : w->tt;
	size_t **o = &w->order[((size_t)kind * w->nlvl + l1) * w->nlvl + l2];
	if (*o)
		return *o;
	struct ratio_key *k = bp_calloc(p->nb + 1, sizeof(*k), err);
	*o = bp_calloc(p->nb + 1, sizeof(size_t), err);
	if (!k || !*o) {
		free(k);
		return NULL;
	}
	for (size_t b = 0; b < p->nb; b++)
		k[b] = (struct ratio_key){cost[(size_t)l1 * p->nb + b], cost[(size_t)l2 * p->nb + b],
					  b};
	qsort(k, p->nb, sizeof(*k), cmp_ratio);
	for (size_t b = 0; b < p->nb; b++)
		(*o)[b] = k[b].b;
	free(k);
	return *o;
}

/* One size's bound on its groups' makespan given its documents' summed cost s over n
 * groups: the average, plus the fixed cost c of the micro-batch every group with a document
 * has, when there is a document. */
static double size_bound(double s, double n, double c, int any)
{
	return any ? s / n + c : 0.0;
}

/* The least, over the fractional assignments of the free buckets (mask free) between the
 * two sizes, of the larger size_bound: the free buckets start in the second size and move
 * to the first in ord's order (ascending ratio of their costs c1 / c2, so the pairs of sums
 * passed are the least ones), where the first size's bound only grows and the second's
 * only shrinks; a and b hold the forced buckets' sums, any1 and any2 whether they are
 * documents. */
static double walk(const struct bp_sp_problem *p, const size_t *ord, const unsigned char *free_,
		   const double *c1, const double *c2, double n1, double n2, double f1, double f2,
		   double a, double b, int any1, int any2)
{
	size_t left = 0; /* free buckets not moved yet */
	int force2 = any2;
	for (size_t k = 0; k < p->nb; k++)
		if (free_[k]) {
			b += (double)p->count[k] * c2[k];
			left++;
		}
	double best = INFINITY, v;
	any2 |= left > 0;
	for (size_t j = 0; j < p->nb; j++) {
		size_t k = ord[j];
		if (!free_[k])
			continue;
		double g1 = size_bound(a, n1, f1, any1), g2 = size_bound(b, n2, f2, any2);
		v = g1 > g2 ? g1 : g2;
		best = v < best ? v : best;
		if (g1 >= g2)
			return best; /* from here on the first only grows */
		double d1 = (double)p->count[k] * c1[k], d2 = (double)p->count[k] * c2[k];
		double den = d1 / n1 + d2 / n2;
		/* inside the move both sizes hold documents */
		double th = den > 0 ? ((b / n2 + f2) - (a / n1 + f1)) / den : 2.0;
		if (th > 0 && th < 1) {
			v = (a + th * d1) / n1 + f1;
			best = v < best ? v : best;
			return best;
		}
		a += d1;
		b -= d2;
		any1 = 1;
		any2 = force2 || --left > 0;
	}
	double g1 = size_bound(a, n1, f1, any1), g2 = size_bound(b, n2, f2, any2);
	v = g1 > g2 ? g1 : g2;
	return v < best ? v : best;
}

/* Whether an assignment to the partition might reach makespan T, by a relaxation of the
 * problem (false: every assignment's bp_sp_eval makespan exceeds T; monotone in T): a
 * document goes only to a size where it alone takes at most T (t + fix); a document taking
 * over T / 2 (t) in its size is heavy there, one per group, counted for the documents one
 * size alone takes and, jointly, for those heavy in both; and the least fractional
 * assignment (walk) must fit T under each of two bounds on a size's makespan: its
 * documents' time plus their share (len / cap) of the micro-batches' fixed costs, spread
 * evenly over its groups; and their time spread evenly plus one micro-batch's fixed cost
 * (a group with documents has one; the average over the groups with documents is at least
 * the average over all). ord1 and ord2 order the buckets for the two (ratio_order). */
static int part_fits(const struct bp_sp_problem *p, const struct gws *w, const struct gpart *q,
		     const size_t *ord1, const size_t *ord2, unsigned char *free_, double T)
{
	size_t nb = p->nb, l1 = (size_t)q->l1 * nb, l2 = (size_t)q->l2 * nb;
	double n1 = q->kk, n2 = q->n2, a = 0.0, b = 0.0, at = 0.0, bt = 0.0;
	double h1 = 0.0, h2 = 0.0, hb = 0.0;
	int any1 = 0, any2 = 0;
	for (size_t k = 0; k < nb; k++) {
		free_[k] = 0;
		if (!p->count[k])
			continue;
		double c = (double)p->count[k];
		int a1 = isfinite(w->one[l1 + k]) && w->one[l1 + k] <= T;
		int a2 = q->n2 && isfinite(w->one[l2 + k]) && w->one[l2 + k] <= T;
		int x1 = w->tmin[l1 + k] > T / 2, x2 = w->tmin[l2 + k] > T / 2;
		if (!a1 && !a2)
			return 0;
		if (!a2) {
			a += c * w->tt[l1 + k];
			at += c * w->tmin[l1 + k];
			h1 += x1 ? c : 0.0;
			any1 = 1;
		} else if (!a1) {
			b += c * w->tt[l2 + k];
			bt += c * w->tmin[l2 + k];
			h2 += x2 ? c : 0.0;
			any2 = 1;
		} else {
			free_[k] = 1;
			hb += x1 && x2 ? c : 0.0;
		}
	}
	if (h1 > n1 || h2 > n2 || h1 + h2 + hb > n1 + n2)
		return 0;
	if (!q->n2)
		return a / n1 <= T && size_bound(at, n1, w->fixmin[q->l1], any1) <= T;
	return walk(p, ord1, free_, w->tt + l1, w->tt + l2, n1, n2, 0.0, 0.0, a, b, any1,
		    any2) <= T &&
	       walk(p, ord2, free_, w->tmin + l1, w->tmin + l2, n1, n2, w->fixmin[q->l1],
		    w->fixmin[q->l2], at, bt, any1, any2) <= T;
}

/* A lower bound on bp_sp_eval's makespan of any assignment to the partition: the largest T
 * part_fits refuses, by bisection. -INFINITY when the costs allow no bound; INFINITY when
 * a bucket fits no group of the partition; NAN on an allocation failure. */
static double part_lb(const struct bp_sp_problem *p, struct gws *w, const struct gpart *q,
		      struct bp_error *err)
{
	const size_t *o1 = NULL, *o2 = NULL;
	unsigned char *fr = w->free_;
	if (!w->bounded)
		return -INFINITY;
	if (q->n2 && (!(o1 = ratio_order(p, w, 0, q->l1, q->l2, err)) ||
		      !(o2 = ratio_order(p, w, 1, q->l1, q->l2, err))))
		return NAN;
	if (!part_fits(p, w, q, o1, o2, fr, INFINITY))
		return INFINITY;
	/* from the documents' least work spread over all groups, doubled until it fits; then
	 * halving to a millionth (the bound orders and prunes; a looser one stays valid) */
	double lo = 0.0, hi = 0.0;
	for (size_t k = 0; k < p->nb; k++) {
		double c = w->tt[(size_t)q->l1 * p->nb + k];
		if (q->n2 && w->tt[(size_t)q->l2 * p->nb + k] < c)
			c = w->tt[(size_t)q->l2 * p->nb + k];
		hi += isfinite(c) ? (double)p->count[k] * c : 0.0;
	}
	hi = hi / (q->kk + q->n2) > 1.0 ? hi / (q->kk + q->n2) : 1.0;
	while (!part_fits(p, w, q, o1, o2, fr, hi) && isfinite(hi)) {
		lo = hi;
		hi *= 2.0;
	}
	if (!isfinite(hi))
		return INFINITY;
	for (int it = 0; it < 64 && hi - lo > 1e-6 * hi; it++) {
		double mid = lo + (hi - lo) / 2.0;
		if (mid <= lo || mid >= hi)
			break;
		if (part_fits(p, w, q, o1, o2, fr, mid))
			hi = mid;
		else
			lo = mid;
	}
	return lo;
}

static int cmp_gpart(const void *a, const void *b)
{
	const struct gpart *x = a, *y = b;
	if (x->lb != y->lb)
		return x->lb < y->lb ? -1 : 1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

/* The partition's groups into w->gl (the first kk of size 2^l1, then the others). Returns
 * their count, 0 when one is missing from p->g. */
static size_t part_groups(const struct bp_sp_problem *p, struct gws *w, const struct gpart *q)
{
	int s1 = 1 << q->l1, s2 = 1 << q->l2;
	size_t k = 0;
	for (int j = 0; j < q->kk; j++)
		w->gl[k++] = group_at(p, w, j * s1, s1);
	for (int j = 0; j < q->n2; j++)
		w->gl[k++] = group_at(p, w, q->kk * s1 + j * s2, s2);
	for (size_t j = 0; j < k; j++)
		if (w->gl[j] == p->ng)
			return 0;
	return k;
}

/* The time of group g after one more document of bucket b, as LPT compares it (sp_ilp.h
 * bp_sp_greedy): its load, the document's time, a fixed cost when it opens a micro-batch. */
static double grown(const struct bp_sp_problem *p, double load, size_t b, size_t g, int opens)
{
	return load + p->t[b * p->ng + g] + (double)opens * p->fix[g];
}

/* Whether a document of len tokens opens a micro-batch on a group holding tok (cap per
 * micro-batch): ceil((tok + len) / cap) > ceil(tok / cap). */
static int opens_mb(int64_t tok, int64_t len, int64_t cap)
{
	return ceil_div(tok + len, cap) != ceil_div(tok, cap);
}

/* Node x's least loads from its children's; whether they changed. */
static int seg_node(struct gseg *s, size_t x)
{
	double (*v)[2] = s->v;
	double e = v[2 * x][0] < v[2 * x + 1][0] ? v[2 * x][0] : v[2 * x + 1][0];
	double i = v[2 * x][1] < v[2 * x + 1][1] ? v[2 * x][1] : v[2 * x + 1][1];
	int changed = e != v[x][0] || i != v[x][1];
	v[x][0] = e;
	v[x][1] = i;
	return changed;
}

/* After leaf x changed: its ancestors, up to the first that does not. */
static void seg_pull(struct gseg *s, size_t x)
{
	for (x /= 2; x >= 1 && seg_node(s, x); x /= 2)
		;
}

/* Every leaf's side for a document of len tokens, then the inner nodes. */
static void seg_build(const struct bp_sp_problem *p, struct gseg *s, const struct gws *w,
		      int64_t len)
{
	for (size_t j = 0; j < s->P; j++) {
		double e = INFINITY, i = INFINITY;
		if (j < s->n) {
			size_t g = s->g[j];
			if (opens_mb(w->tok[g], len, p->cap[g]))
				i = w->load[g];
			else
				e = w->load[g];
		}
		s->v[s->P + j][0] = e;
		s->v[s->P + j][1] = i;
	}
	for (size_t x = s->P - 1; x >= 1; x--)
		seg_node(s, x);
}

/* The first leaf whose grown time is v, the least over the side (opens: i, else e): grown
 * is monotone in the load, so a subtree holds such a leaf iff its least load grows to v. */
static size_t seg_first(const struct bp_sp_problem *p, const struct gseg *s, size_t b,
			int opens, double v)
{
	size_t x = 1, g = s->g[0];
	while (x < s->P) {
		x *= 2;
		if (!(grown(p, s->v[x][opens], b, g, opens) == v))
			x++;
	}
	return x - s->P;
}

/* The least grown time in one size's tree for bucket b (INFINITY: none), and the first
 * leaf reaching it (the tree's leaves in unit order, the side taking the document into a
 * micro-batch it has or opening one). */
static double seg_least(const struct bp_sp_problem *p, const struct gseg *s, size_t b)
{
	size_t g = s->g[0];
	if (!s->n || p->len[b] > p->cap[g])
		return INFINITY;
	double ve = grown(p, s->v[1][0], b, g, 0), vi = grown(p, s->v[1][1], b, g, 1);
	return ve < vi ? ve : vi;
}

static size_t seg_at(const struct bp_sp_problem *p, const struct gseg *s, size_t b, double v)
{
	size_t g = s->g[0], at = s->n;
	if (grown(p, s->v[1][0], b, g, 0) == v)
		at = seg_first(p, s, b, 0, v);
	if (grown(p, s->v[1][1], b, g, 1) == v) {
		size_t a2 = seg_first(p, s, b, 1, v);
		if (a2 < at)
			at = a2;
	}
	return at;
}

static void lpt_reset(const struct bp_sp_problem *p, struct gws *w, size_t k,
		      struct bp_sp_sol *cur)
{
	memset(cur->used, 0, p->ng);
	memset(cur->n, 0, p->nb * p->ng * sizeof(int64_t));
	for (size_t q = 0; q < k; q++) {
		w->load[w->gl[q]] = 0.0;
		w->tok[w->gl[q]] = 0;
		cur->used[w->gl[q]] = 1;
	}
}

/* LPT by scanning the k groups w->gl for each document (any costs). */
static double lpt_scan(const struct bp_sp_problem *p, struct gws *w, size_t k,
		       struct bp_sp_sol *cur)
{
	const size_t *gl = w->gl;
	double *load = w->load;
	lpt_reset(p, w, k, cur);
	for (size_t b = 0; b < p->nb; b++)
		for (int64_t c = 0; c < p->count[b]; c++) {
			size_t best = p->ng;
			double bv = INFINITY;
			for (size_t q = 0; q < k; q++) {
				size_t g = gl[q];
				if (p->len[b] > p->cap[g])
					continue;
				double v = grown(p, load[g], b, g,
						 opens_mb(w->tok[g], p->len[b], p->cap[g]));
				if (v < bv) {
					bv = v;
					best = g;
				}
			}
			if (best == p->ng)
				return INFINITY;
			load[best] += p->t[b * p->ng + best];
			w->tok[best] += p->len[b];
			cur->n[b * p->ng + best]++;
			if (load[best] > w->limit)
				return INFINITY;
		}
	return bp_sp_eval(p, cur);
}

/* LPT with a tree per size (both sizes uniform): the same choices as lpt_scan, whose ties
 * go to the earlier group of gl (the first size's before the second's, unit order within
 * one), in O(log k) per document. */
static double lpt_tree(const struct bp_sp_problem *p, struct gws *w, const struct gpart *q,
		       size_t k, struct bp_sp_sol *cur)
{
	size_t nseg = q->n2 ? 2 : 1;
	lpt_reset(p, w, k, cur);
	for (size_t j = 0; j < nseg; j++) {
		struct gseg *s = &w->seg[j];
		s->n = j ? (size_t)q->n2 : (size_t)q->kk;
		for (s->P = 1; s->P < s->n; s->P *= 2)
			;
		memcpy(s->g, w->gl + (j ? q->kk : 0), s->n * sizeof(size_t));
	}
	for (size_t b = 0; b < p->nb; b++) {
		if (!p->count[b])
			continue;
		for (size_t j = 0; j < nseg; j++)
			seg_build(p, &w->seg[j], w, p->len[b]);
		for (int64_t c = 0; c < p->count[b]; c++) {
			double bv = INFINITY;
			size_t bj = nseg;
			for (size_t j = 0; j < nseg; j++) {
				double v = seg_least(p, &w->seg[j], b);
				if (v < bv) {
					bv = v;
					bj = j;
				}
			}
			if (bj == nseg)
				return INFINITY;
			struct gseg *s = &w->seg[bj];
			size_t bl = seg_at(p, s, b, bv);
			size_t g = s->g[bl];
			w->load[g] += p->t[b * p->ng + g];
			w->tok[g] += p->len[b];
			cur->n[b * p->ng + g]++;
			if (w->load[g] > w->limit)
				return INFINITY;
			int opens = opens_mb(w->tok[g], p->len[b], p->cap[g]);
			s->v[s->P + bl][0] = opens ? INFINITY : w->load[g];
			s->v[s->P + bl][1] = opens ? w->load[g] : INFINITY;
			seg_pull(s, s->P + bl);
		}
	}
	return bp_sp_eval(p, cur);
}

/* The partitions of sp_ilp.h's exhaustive order into *out (allocated): every homogeneous
 * one (size ascending), then k groups of size S from unit 0 and the rest in groups of a
 * smaller size s2 (S ascending, k descending, s2 ascending); *count gets their count.
 * Returns 0 or -1. */
static int enum_parts(const struct bp_sp_problem *p, const struct gws *w, struct gpart **out,
		      size_t *count, struct bp_error *err)
{
	size_t cap = 2 * (size_t)p->units + (size_t)w->nlvl * w->nlvl + 8, n = 0;
	struct gpart *v = bp_calloc(cap, sizeof(*v), err);
	*out = v;
	if (!v)
		return -1;
	for (int pass = 0; pass < 2; pass++)
		for (int l1 = 0; l1 < w->nlvl; l1++) {
			int S = 1 << l1;
			for (int kk = p->units / S; kk >= 1; kk--)
				for (int l2 = pass ? 0 : l1; l2 <= l1; l2++) {
					int s2 = 1 << l2;
					int homog = kk * S == p->units - p->units % S;
					if (pass ? s2 == S || kk * S == p->units : !homog)
						continue;
					if (n == cap)
						return bp_errorf(err, "internal: more partitions than "
								 "counted");
					v[n] = (struct gpart){l1, l2, kk,
							      pass ? (p->units - kk * S) / s2 : 0, n,
							      0.0};
					n++;
				}
		}
	*count = n;
	return 0;
}

int bp_sp_greedy(const struct bp_sp_problem *p, struct bp_sp_sol *s, int *size, double *obj,
		 struct bp_error *err)
{
	struct bp_sp_sol cur;
	struct gws w;
	struct gpart *parts = NULL;
	int rc = -1;
	size_t bidx = 0, runs = 0;
	size_t docs = 0, max_runs;
	for (size_t b = 0; b < p->nb; b++)
		docs += (size_t)p->count[b];
	max_runs = GREEDY_PLACEMENTS / (docs ? docs : 1);
	if (max_runs < GREEDY_RUNS)
		max_runs = GREEDY_RUNS;
	if (p->max_runs)
		max_runs = p->max_runs < 0 ? SIZE_MAX : (size_t)p->max_runs;
	memset(&cur, 0, sizeof(cur));
	*obj = INFINITY;
	*size = 0;
	if (gws_init(p, &w, err) < 0 || bp_sp_sol_alloc(&cur, p->nb, p->ng, err) < 0)
		goto out;
	if (!w.indexed) {
		/* groups not in bp_sp_groups's order: take the sizes present, scan */
		int maxs = 0;
		for (size_t g = 0; g < p->ng; g++)
			if (p->g[g].size > maxs)
				maxs = p->g[g].size;
		for (w.nlvl = 0; (1 << w.nlvl) <= maxs; w.nlvl++)
			;
		w.bounded = 0;
	}
	size_t np = 0;
	if (enum_parts(p, &w, &parts, &np, err) < 0)
		goto out;
	for (size_t j = 0; j < np; j++) {
		parts[j].lb = part_lb(p, &w, &parts[j], err);
		if (isnan(parts[j].lb))
			goto out;
	}
	qsort(parts, np, sizeof(*parts), cmp_gpart);
	for (size_t j = 0; j < np; j++) {
		struct gpart *q = &parts[j];
		/* a partition whose bound exceeds the best cannot beat or tie it */
		if (isfinite(*obj) && q->lb * (1.0 - GREEDY_SLACK) > *obj)
			break;
		if (!isfinite(q->lb) && q->lb > 0)
			continue;
		size_t k = part_groups(p, &w, q);
		if (!k)
			continue;
		if (runs++ == max_runs && isfinite(*obj))
			break;
		w.limit = w.bounded && isfinite(*obj) ? *obj * (1.0 + GREEDY_SLACK) : INFINITY;
		double v = w.indexed && w.uniform[q->l1] && w.uniform[q->l2]
				   ? lpt_tree(p, &w, q, k, &cur)
				   : lpt_scan(p, &w, k, &cur);
		if (v < *obj || (isfinite(v) && v == *obj && q->idx < bidx)) {
			*obj = v;
			*size = 1 << q->l1;
			bidx = q->idx;
			memcpy(s->used, cur.used, p->ng);
			memcpy(s->n, cur.n, p->nb * p->ng * sizeof(int64_t));
			memcpy(s->m, cur.m, p->ng * sizeof(int64_t));
		}
	}
	if (!isfinite(*obj)) {
		int64_t capmax = 0;
		for (size_t g = 0; g < p->ng; g++)
			if (p->cap[g] > capmax)
				capmax = p->cap[g];
		rc = bp_infeasiblef(err, "a document of %lld tokens fits no sequence-parallel group: "
				    "the largest holds %lld tokens per micro-batch",
				    (long long)(p->nb ? p->len[0] : 0), (long long)capmax);
		goto out;
	}
	rc = 0;
out:
	bp_sp_sol_release(&cur);
	gws_release(&w);
	free(parts);
	return rc;
}

/* The certified lower bounds of sp_ilp.h: the longest bucket's cheapest group, and the
 * size-weighted work over all units. */
static double lower_bound(const struct bp_sp_problem *p)
{
	double lb = 0.0, work = 0.0;
	for (size_t b = 0; b < p->nb; b++) {
		double one = INFINITY, w = INFINITY;
		for (size_t g = 0; g < p->ng; g++) {
			if (p->len[b] > p->cap[g])
				continue;
			double t = p->t[b * p->ng + g];
			if (t + p->fix[g] < one)
				one = t + p->fix[g];
			if (t * p->g[g].size < w)
				w = t * p->g[g].size;
		}
		if (!p->count[b] || !isfinite(one))
			continue;
		if (one > lb)
			lb = one;
		work += (double)p->count[b] * w;
	}
	work /= p->units > 0 ? p->units : 1;
	return work > lb ? work : lb;
}

/* Builds the program of sp_ilp.h. Columns: T, then y_g, m_g per group, then n_bg where the
 * bucket fits (nidx gets each (b, g)'s column or -1). */
static struct bp_ilp *build(const struct bp_sp_problem *p, double scale, double lb,
			    int64_t *nidx, size_t *ycol, size_t *mcol, struct bp_error *err)
{
	size_t ng = p->ng, nb = p->nb;
	struct bp_ilp *ilp = bp_ilp_new(err);
	int64_t *cols = bp_calloc(nb + 2 * ng + 2, sizeof(int64_t), err);
	double *vals = bp_calloc(nb + 2 * ng + 2, sizeof(double), err);
	int ok = ilp && cols && vals;
	*ycol = 1;
	*mcol = 1 + ng;
	if (ok && bp_ilp_add_col(ilp, BP_ILP_CONTINUOUS, lb / scale, INFINITY, 1.0, err) < 0)
		ok = 0;
	for (size_t g = 0; ok && g < ng; g++)
		ok = bp_ilp_add_col(ilp, BP_ILP_BINARY, 0, 1, 0.0, err) >= 0;
	for (size_t g = 0; ok && g < ng; g++) {
		int64_t tok = 0;
		for (size_t b = 0; b < nb; b++)
			if (p->len[b] <= p->cap[g])
				tok += p->count[b] * p->len[b];
		ok = bp_ilp_add_col(ilp, BP_ILP_INTEGER, 0, (double)ceil_div(tok, p->cap[g]), 0.0,
				    err) >= 0;
	}
	for (size_t b = 0; ok && b < nb; b++)
		for (size_t g = 0; ok && g < ng; g++) {
			nidx[b * ng + g] = -1;
			if (p->len[b] > p->cap[g] || !p->count[b])
				continue;
			nidx[b * ng + g] = bp_ilp_add_col(ilp, BP_ILP_INTEGER, 0,
							  (double)p->count[b], 0.0, err);
			ok = nidx[b * ng + g] >= 0;
		}
	/* every unit in at most one used group */
	for (int u = 0; ok && u < p->units; u++) {
		size_t k = 0;
		for (size_t g = 0; g < ng; g++)
			if (u >= p->g[g].first && u < p->g[g].first + p->g[g].size) {
				cols[k] = (int64_t)(*ycol + g);
				vals[k++] = 1.0;
			}
		ok = bp_ilp_add_row(ilp, k, cols, vals, -INFINITY, 1.0, err) >= 0;
	}
	/* every bucket's documents placed; only in used groups */
	for (size_t b = 0; ok && b < nb; b++) {
		size_t k = 0;
		for (size_t g = 0; g < ng; g++)
			if (nidx[b * ng + g] >= 0) {
				cols[k] = nidx[b * ng + g];
				vals[k++] = 1.0;
			}
		if (!p->count[b])
			continue;
		ok = bp_ilp_add_row(ilp, k, cols, vals, (double)p->count[b], (double)p->count[b],
				    err) >= 0;
		for (size_t g = 0; ok && g < ng; g++) {
			if (nidx[b * ng + g] < 0)
				continue;
			int64_t c2[2] = {nidx[b * ng + g], (int64_t)(*ycol + g)};
			double v2[2] = {1.0, -(double)p->count[b]};
			ok = bp_ilp_add_row(ilp, 2, c2, v2, -INFINITY, 0.0, err) >= 0;
		}
	}
	for (size_t g = 0; ok && g < ng; g++) {
		/* tokens into m_g micro-batches; m_g only on a used group */
		size_t k = 0;
		int64_t mmax = 0;
		for (size_t b = 0; b < nb; b++)
			if (nidx[b * ng + g] >= 0) {
				cols[k] = nidx[b * ng + g];
				vals[k++] = (double)p->len[b];
				mmax += p->count[b] * p->len[b];
			}
		mmax = ceil_div(mmax, p->cap[g]);
		cols[k] = (int64_t)(*mcol + g);
		vals[k++] = -(double)p->cap[g];
		ok = bp_ilp_add_row(ilp, k, cols, vals, -INFINITY, 0.0, err) >= 0;
		int64_t c2[2] = {(int64_t)(*mcol + g), (int64_t)(*ycol + g)};
		double v2[2] = {1.0, -(double)mmax};
		if (ok)
			ok = bp_ilp_add_row(ilp, 2, c2, v2, -INFINITY, 0.0, err) >= 0;
		/* T >= the group's time */
		k = 0;
		cols[k] = 0;
		vals[k++] = 1.0;
		for (size_t b = 0; b < nb; b++)
			if (nidx[b * ng + g] >= 0) {
				cols[k] = nidx[b * ng + g];
				vals[k++] = -p->t[b * ng + g] / scale;
			}
		cols[k] = (int64_t)(*mcol + g);
		vals[k++] = -p->fix[g] / scale;
		if (ok)
			ok = bp_ilp_add_row(ilp, k, cols, vals, 0.0, INFINITY, err) >= 0;
	}
	/* the canonical placement: a used group's left neighbour unit is covered by a group at
	 * least as large */
	for (size_t g = 0; ok && p->canonical && g < ng; g++) {
		int a = p->g[g].first;
		if (!a)
			continue;
		size_t k = 0;
		cols[k] = (int64_t)(*ycol + g);
		vals[k++] = 1.0;
		for (size_t h = 0; h < ng; h++)
			if (p->g[h].size >= p->g[g].size && a - 1 >= p->g[h].first &&
			    a - 1 < p->g[h].first + p->g[h].size) {
				cols[k] = (int64_t)(*ycol + h);
				vals[k++] = -1.0;
			}
		ok = bp_ilp_add_row(ilp, k, cols, vals, -INFINITY, 0.0, err) >= 0;
	}
	free(cols);
	free(vals);
	if (!ok) {
		bp_ilp_free(ilp);
		return NULL;
	}
	return ilp;
}

/* Rows of the program, counted as build adds them (for the record). */
static int64_t count_rows(const struct bp_sp_problem *p, const int64_t *nidx)
{
	int64_t rows = p->units + 3 * (int64_t)p->ng;
	for (size_t b = 0; b < p->nb; b++) {
		rows += p->count[b] > 0;
		for (size_t g = 0; g < p->ng; g++)
			rows += nidx[b * p->ng + g] >= 0;
	}
	for (size_t g = 0; p->canonical && g < p->ng; g++)
		rows += p->g[g].first > 0;
	return rows;
}

int bp_sp_solve(const struct bp_sp_problem *p, const struct bp_ilp_opts *o,
		struct bp_sp_sol *s, struct bp_sp_result *r, struct bp_error *err)
{
	size_t ng = p->ng, nb = p->nb, ycol, mcol;
	int64_t *nidx = bp_calloc(nb * ng + 1, sizeof(int64_t), err);
	double *warm = NULL;
	struct bp_ilp *ilp = NULL;
	struct bp_ilp_result ir;
	struct bp_sp_sol cand;
	int rc = -1;
	memset(&ir, 0, sizeof(ir));
	memset(&cand, 0, sizeof(cand));
	memset(r, 0, sizeof(*r));
	if (!nidx)
		goto out;
	double greedy = bp_sp_eval(p, s), lb = lower_bound(p);
	if (!isfinite(greedy)) {
		bp_errorf(err, "internal: the warm start breaks a constraint of the sequence-parallel "
			  "program");
		goto out;
	}
	r->greedy = r->objective = greedy;
	r->bound = lb < greedy ? lb : greedy;
	r->cols = 1 + 2 * (int64_t)ng;
	for (size_t b = 0; b < nb; b++)
		for (size_t g = 0; g < ng; g++) {
			nidx[b * ng + g] = p->count[b] && p->len[b] <= p->cap[g] ? 0 : -1;
			r->cols += nidx[b * ng + g] >= 0;
		}
	r->rows = count_rows(p, nidx);
	if (greedy <= 0.0 || greedy <= lb * (1.0 + 1e-12)) {
		/* the warm start meets a certified bound: nothing to search */
		snprintf(r->status, sizeof(r->status), "optimal");
		r->bound = greedy;
		rc = 0;
		goto out;
	}
	if (!o) {
		/* no search asked for: the warm start, its gap to the certified bound */
		snprintf(r->status, sizeof(r->status), "warm-start");
		r->gap = (greedy - r->bound) / greedy;
		rc = 0;
		goto out;
	}
	if (o->max_vars > 0 && r->cols > o->max_vars) {
		snprintf(r->status, sizeof(r->status), "too-large");
		r->gap = (greedy - r->bound) / greedy;
		rc = 0;
		goto out;
	}
	double scale = greedy;
	ilp = build(p, scale, lb, nidx, &ycol, &mcol, err);
	if (!ilp)
		goto out;
	warm = bp_calloc(bp_ilp_ncols(ilp), sizeof(double), err);
	if (!warm)
		goto out;
	warm[0] = (greedy > lb ? greedy : lb) / scale;
	for (size_t g = 0; g < ng; g++) {
		warm[ycol + g] = s->used[g] ? 1.0 : 0.0;
		warm[mcol + g] = (double)s->m[g];
	}
	for (size_t k = 0; k < nb * ng; k++)
		if (nidx[k] >= 0)
			warm[nidx[k]] = (double)s->n[k];
	/* the makespan rows hold at warm[0] = greedy / scale up to rounding: take the largest
	 * row sum exactly as the check computes it */
	struct bp_ilp_opts oo = *o;
	oo.warm = warm;
	for (size_t g = 0; g < ng; g++) {
		double v = 0.0;
		for (size_t b = 0; b < nb; b++)
			if (nidx[b * ng + g] >= 0)
				v += p->t[b * ng + g] / scale * warm[nidx[b * ng + g]];
		v += p->fix[g] / scale * warm[mcol + g];
		if (v > warm[0])
			warm[0] = v;
	}
	if (bp_ilp_solve(ilp, &oo, &ir, err) < 0)
		goto out;
	if (ir.limit == BP_ILP_LIMIT_TIME) {
		bp_errorf(err, "the sequence-parallel ilp (%lld columns, %lld rows) reached "
			  "ilp_time_limit_s %g before its deterministic budget (ilp_node_limit %lld, "
			  "ilp_work_limit %g million) ended it, so its result would depend on machine "
			  "speed; raise ilp_time_limit_s or lower the budget", (long long)r->cols,
			  (long long)r->rows, o->time_limit_s, (long long)o->node_limit,
			  o->work_limit / 1e6);
		goto out;
	}
	r->nodes = ir.nodes;
	r->work = ir.work;
	r->limit = ir.limit;
	if (!isinf(ir.bound) && ir.bound * scale > r->bound)
		r->bound = ir.bound * scale;
	int better = 0;
	if (ir.x && ir.status != BP_ILP_WARM_START) {
		if (bp_sp_sol_alloc(&cand, nb, ng, err) < 0)
			goto out;
		for (size_t g = 0; g < ng; g++)
			cand.used[g] = ir.x[ycol + g] == 1.0;
		for (size_t k = 0; k < nb * ng; k++)
			cand.n[k] = nidx[k] >= 0 ? (int64_t)ir.x[nidx[k]] : 0;
		double v = bp_sp_eval(p, &cand);
		if (v < greedy) {
			better = 1;
			memcpy(s->used, cand.used, ng);
			memcpy(s->n, cand.n, nb * ng * sizeof(int64_t));
			memcpy(s->m, cand.m, ng * sizeof(int64_t));
			r->objective = v;
		}
	}
	if (ir.status == BP_ILP_OPTIMAL)
		snprintf(r->status, sizeof(r->status), "optimal");
	else
		snprintf(r->status, sizeof(r->status), "%s", better ? "feasible" : "warm-start");
	if (r->bound > r->objective)
		r->bound = r->objective;
	r->gap = r->objective > 0 ? (r->objective - r->bound) / r->objective : 0.0;
	rc = 0;
out:
	bp_ilp_result_release(&ir);
	bp_ilp_free(ilp);
	bp_sp_sol_release(&cand);
	free(nidx);
	free(warm);
	return rc;
}
