/* hyd_dispatch.c: Hydraulis's sequence dispatch across the pipelines of a heterogeneous
 * strategy (Sec. 6.2, App. D): Eq. 2's per-pipeline lower bound, Alg. 1 (the randomised
 * greedy the paper runs with T = 100 trials, App. D.2, footnote 6), Eq. 3 as an exact mixed
 * integer program through GLPK (the "ideal dispatching" of App. D.3 and Table 2) and a
 * certified lower bound on Eq. 3. Called by methods/hydraulis.c per step and candidate.
 *
 * Invariants: pipelines come ordered by cap (MaxLen) longest first, so the pipelines a
 * sequence may use are a prefix (J_i of Sec. 6.2); costs are non-decreasing in length, so
 * Eq. 2's T(max_i m_ij l_i)(PP - 1) is max_i T(l_i)(PP - 1) and the greedy's warm-up E_j only
 * grows; every trial reseeds its own generator (seed + trial), so the result does not depend
 * on how trials would be spread over threads. */
#include "hyd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

/* min and max without libm calls (no NaN here: costs are finite). */
static inline double dmin(double a, double b)
{
	return b < a ? b : a;
}
static inline double dmax(double a, double b)
{
	return b > a ? b : a;
}

double bp_hyd_seq_cost(const struct bp_hyd_dispatch *d, size_t j, int64_t len)
{
	const struct bp_hyd_fit *f = d->pipes[j].T;
	return d->no_c ? bp_hyd_T_noc(f, (double)len) : bp_hyd_T(f, (double)len);
}

double bp_hyd_eq2(const struct bp_hyd_dispatch *d, const int *pipe_of, double *per)
{
	double worst = 0.0;
	double *sum = calloc(d->npipes ? d->npipes : 1, sizeof(double));
	int64_t *lmax = calloc(d->npipes ? d->npipes : 1, sizeof(int64_t));
	if (!sum || !lmax) {
		free(sum);
		free(lmax);
		return INFINITY;
	}
	for (size_t i = 0; i < d->n; i++) {
		size_t j = (size_t)pipe_of[i];
		sum[j] += bp_hyd_seq_cost(d, j, d->len[i]);
		if (d->len[i] > lmax[j])
			lmax[j] = d->len[i];
	}
	for (size_t j = 0; j < d->npipes; j++) {
		double v = sum[j];
		if (lmax[j] > 0)
			v += (d->pipes[j].pp - 1) * bp_hyd_seq_cost(d, j, lmax[j]);
		if (per)
			per[j] = v;
		if (v > worst)
			worst = v;
	}
	free(sum);
	free(lmax);
	return worst;
}

/* Runs of consecutive pipelines with the same model, PP and cap: within a run pipelines
 * are interchangeable, so one segment tree serves it. A node keeps the least C + E and the
 * least C of its pipelines side by side (one cache line serves a probe); the sequence
 * counts, which only the code's tie-break reads, sit in a tree of their own. */
struct tnode {
	double cost, c; /* min of C + E and of C over a node */
};

struct group {
	size_t start, size, tsize; /* pipelines [start, start + size); tree leaves tsize */
	int pp;
	int64_t cap;
	struct tnode *t;           /* [2 tsize] */
	double *mn;                /* [2 tsize]: min sequence count (0: an empty pipeline) */
};

struct groups {
	struct group *g;
	size_t n;
	struct tnode *tstore;
	double *store;
};

static void groups_release(struct groups *gs)
{
	free(gs->g);
	free(gs->tstore);
	free(gs->store);
}

static int groups_make(const struct bp_hyd_dispatch *d, struct groups *gs, struct bp_error *err)
{
	memset(gs, 0, sizeof(*gs));
	gs->g = bp_calloc(d->npipes ? d->npipes : 1, sizeof(*gs->g), err);
	if (!gs->g)
		return -1;
	size_t total = 0;
	for (size_t j = 0; j < d->npipes; j++) {
		const struct bp_hyd_dpipe *p = &d->pipes[j];
		if (j && p->cap > d->pipes[j - 1].cap)
			return bp_errorf(err, "internal: pipelines are not ordered by MaxLen");
		struct group *last = gs->n ? &gs->g[gs->n - 1] : NULL;
		const struct bp_hyd_dpipe *q = last ? &d->pipes[last->start] : NULL;
		if (last && q->T == p->T && q->pp == p->pp && q->cap == p->cap) {
			last->size++;
			continue;
		}
		gs->g[gs->n++] = (struct group){j, 1, 0, p->pp, p->cap, NULL, NULL};
	}
	for (size_t k = 0; k < gs->n; k++) {
		size_t t = 1;
		while (t < gs->g[k].size)
			t *= 2;
		gs->g[k].tsize = t;
		total += 2 * t;
	}
	gs->tstore = bp_calloc(total ? total : 1, sizeof(struct tnode), err);
	gs->store = bp_calloc(total ? total : 1, sizeof(double), err);
	if (!gs->tstore || !gs->store)
		return -1;
	size_t off = 0;
	for (size_t k = 0; k < gs->n; k++) {
		gs->g[k].t = gs->tstore + off;
		gs->g[k].mn = gs->store + off;
		off += 2 * gs->g[k].tsize;
	}
	return 0;
}

static void group_reset(struct group *g)
{
	for (size_t x = 0; x < g->tsize; x++) {
		double v = x < g->size ? 0.0 : INFINITY;
		g->t[g->tsize + x] = (struct tnode){v, v};
		g->mn[g->tsize + x] = v;
	}
	for (size_t x = g->tsize - 1; x >= 1; x--) {
		g->t[x].cost = dmin(g->t[2 * x].cost, g->t[2 * x + 1].cost);
		g->t[x].c = dmin(g->t[2 * x].c, g->t[2 * x + 1].c);
		g->mn[x] = dmin(g->mn[2 * x], g->mn[2 * x + 1]);
	}
}

/* A pipeline's C + E and C only grow, so a node whose minima did not change leaves every
 * ancestor as it was: the update stops there. The count tree is kept only where read. */
static void group_set(struct group *g, size_t local, double cost, double c, double cnt,
		      int counts)
{
	size_t x = g->tsize + local;
	g->t[x] = (struct tnode){cost, c};
	for (x /= 2; x >= 1; x /= 2) {
		struct tnode nv = {dmin(g->t[2 * x].cost, g->t[2 * x + 1].cost),
				   dmin(g->t[2 * x].c, g->t[2 * x + 1].c)};
		if (nv.cost == g->t[x].cost && nv.c == g->t[x].c)
			break;
		g->t[x] = nv;
	}
	if (!counts)
		return;
	x = g->tsize + local;
	g->mn[x] = cnt;
	for (x /= 2; x >= 1; x /= 2) {
		double nv = dmin(g->mn[2 * x], g->mn[2 * x + 1]);
		if (nv == g->mn[x])
			break;
		g->mn[x] = nv;
	}
}

/* The group's leftmost pipeline without sequences, or -1. */
static long first_empty(const struct group *g)
{
	if (g->mn[1] > 0)
		return -1;
	size_t x = 1;
	while (x < g->tsize)
		x = g->mn[2 * x] == 0 ? 2 * x : 2 * x + 1;
	return (long)(x - g->tsize);
}

/* One placement's view of a group: the sequence's cost t on it, the pipelines' C and E. */
struct probe {
	const struct group *g;
	const double *C, *E;
	double t, pm1t; /* t and (PP - 1) t */
};

/* Alg. 1 lines 8-10: the pipeline's C' + E' if the sequence joins it. */
static double newcost(const struct probe *pr, size_t local)
{
	size_t j = pr->g->start + local;
	return (pr->C[j] + pr->t) + dmax(pr->E[j], pr->pm1t);
}

/* A lower bound on newcost over a node's pipelines (infinite for padding). */
static inline double node_lb_raw(const struct probe *pr, size_t x)
{
	const struct tnode *n = &pr->g->t[x];
	return dmax(n->cost + pr->t, n->c + pr->t + pr->pm1t);
}

/* The same loosened by a relative 1e-12 so float rounding never prunes a pipeline that
 * meets the exact test at its leaf. */
static double node_lb(const struct probe *pr, size_t x)
{
	double lb = node_lb_raw(pr, x);
	return lb - 1e-12 * fabs(lb) - 1e-12;
}

/* Leftmost pipeline of the group with newcost <= thr, or -1: a left-first walk of the tree
 * without recursion, skipping every node whose bound exceeds thr (loosened as node_lb's:
 * the walk prunes only nodes without a pipeline that passes the exact test at its leaf, so
 * it finds the leftmost one). Padding leaves have infinite bounds and are never entered. */
static long find_le(const struct probe *pr, double thr)
{
	const size_t T = pr->g->tsize;
	const double lim = thr + 1e-12 * fabs(thr) + 2e-12;
	size_t x = 1;
	int ok = node_lb_raw(pr, 1) <= lim;
	for (;;) {
		if (ok) {
			if (x >= T) {
				if (newcost(pr, x - T) <= thr)
					return (long)(x - T);
				ok = 0;
			} else {
				x = 2 * x;
				ok = node_lb_raw(pr, x) <= lim;
			}
			continue;
		}
		while (x & 1) /* a right child (or the root) failed: climb */
			x >>= 1;
		if (!x)
			return -1;
		x++; /* the right sibling */
		ok = node_lb_raw(pr, x) <= lim;
	}
}

/* The least newcost of the group (leftmost on ties) below *best, by a left-first search
 * with pruning; *best and *arg updated. */
static void find_min(const struct probe *pr, size_t x, size_t lo, size_t width, double *best,
		     long *arg)
{
	if (lo >= pr->g->size || node_lb(pr, x) > *best)
		return;
	if (width == 1) {
		double v = newcost(pr, lo);
		if (v < *best || (v == *best && (*arg < 0 || (long)lo < *arg))) {
			*best = v;
			*arg = (long)lo;
		}
		return;
	}
	find_min(pr, 2 * x, lo, width / 2, best, arg);
	find_min(pr, 2 * x + 1, lo + width / 2, width / 2, best, arg);
}

/* A first candidate for find_min: follow the child with the smaller bound to a leaf, so the
 * pruning starts from a good value. */
static void descend(const struct probe *pr, double *best, long *arg)
{
	size_t x = 1, lo = 0, width = pr->g->tsize;
	while (width > 1) {
		size_t half = width / 2;
		int right = lo + half < pr->g->size && node_lb(pr, 2 * x + 1) < node_lb(pr, 2 * x);
		x = 2 * x + (size_t)right;
		lo += right ? half : 0;
		width = half;
	}
	double v = newcost(pr, lo);
	*best = v;
	*arg = (long)lo;
}

/* Alg. 1 line 3: a Fisher-Yates shuffle of 0..n-1 from trial t's own generator. */
static void trial_order(size_t n, uint64_t seed, int t, size_t *order)
{
	struct bp_rng rng;
	bp_rng_seed(&rng, seed + (uint64_t)t);
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	for (size_t i = n; i > 1; i--) {
		size_t r = (size_t)bp_rng_below(&rng, i);
		size_t tmp = order[i - 1];
		order[i - 1] = order[r];
		order[r] = tmp;
	}
}

uint32_t *bp_hyd_orders(size_t n, int trials, uint64_t seed, struct bp_error *err)
{
	if (trials < 1)
		trials = 1;
	if (n >= UINT32_MAX) {
		bp_errorf(err, "internal: %zu sequences are too many for a shuffle table", n);
		return NULL;
	}
	uint32_t *o = bp_calloc((n ? n : 1) * (size_t)trials, sizeof(uint32_t), err);
	size_t *tmp = bp_calloc(n ? n : 1, sizeof(size_t), err);
	if (!o || !tmp) {
		free(o);
		free(tmp);
		return NULL;
	}
	for (int t = 0; t < trials; t++) {
		trial_order(n, seed, t, tmp);
		for (size_t i = 0; i < n; i++)
			o[(size_t)t * n + i] = (uint32_t)tmp[i];
	}
	free(tmp);
	return o;
}

int bp_hyd_dispatch_greedy(const struct bp_hyd_dispatch *d, int *pipe_of, double *objective,
			   int *trial, struct bp_error *err)
{
	struct groups gs;
	int rc = -1;
	size_t n = d->n;
	size_t *order = bp_calloc(n ? n : 1, sizeof(size_t), err);
	size_t *allowed = bp_calloc(n ? n : 1, sizeof(size_t), err); /* groups J_i */
	int *cur = bp_calloc(n ? n : 1, sizeof(int), err);
	double *C = bp_calloc(d->npipes ? d->npipes : 1, sizeof(double), err);
	double *E = bp_calloc(d->npipes ? d->npipes : 1, sizeof(double), err);
	double *N = bp_calloc(d->npipes ? d->npipes : 1, sizeof(double), err); /* sequences */
	double *cost = NULL; /* [group][sequence] */
	memset(&gs, 0, sizeof(gs));
	*objective = INFINITY;
	*trial = -1;
	if (!order || !allowed || !cur || !C || !E || !N || groups_make(d, &gs, err) < 0)
		goto out;
	if (!d->npipes) {
		bp_errorf(err, "internal: dispatch to no pipelines");
		goto out;
	}
	cost = bp_calloc(gs.n * (n ? n : 1), sizeof(double), err);
	if (!cost)
		goto out;
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;
		while (k < gs.n && gs.g[k].cap >= d->len[i])
			k++;
		if (!k) {
			rc = bp_infeasiblef(err, "a sequence of %lld tokens is longer than every "
					    "pipeline's MaxLen (the longest is %lld)",
					    (long long)d->len[i], (long long)d->pipes[0].cap);
			goto out;
		}
		allowed[i] = k;
		for (size_t g = 0; g < k; g++)
			cost[g * n + i] = bp_hyd_seq_cost(d, gs.g[g].start, d->len[i]);
	}
	double best = INFINITY;
	int trials = d->trials < 1 ? 1 : d->trials;
	for (int t = 0; t < trials; t++) {
		if (d->orders) /* Alg. 1 line 3: a random permutation */
			for (size_t i = 0; i < n; i++)
				order[i] = d->orders[(size_t)t * n + i];
		else
			trial_order(n, d->seed, t, order);
		if (d->code && gs.g[0].size == 1) {
			/* The code's pre-pass: sequences only pipeline 0 can hold go there first
			 * (when it alone has the largest MaxLen), in shuffled order. */
			size_t k = 0;
			for (size_t i = 0; i < n; i++)
				if (allowed[order[i]] == 1)
					cur[k++] = (int)order[i];
			for (size_t i = 0; i < n; i++)
				if (allowed[order[i]] != 1)
					cur[k++] = (int)order[i];
			for (size_t i = 0; i < n; i++)
				order[i] = (size_t)cur[i];
		}
		memset(C, 0, d->npipes * sizeof(double));
		memset(E, 0, d->npipes * sizeof(double));
		memset(N, 0, d->npipes * sizeof(double));
		for (size_t g = 0; g < gs.n; g++)
			group_reset(&gs.g[g]);
		double m1 = 0.0; /* the largest C_j + E_j so far */
		int aborted = 0;
		for (size_t q = 0; q < n; q++) {
			size_t i = order[q];
			struct probe pr;
			long hit = -1;
			size_t hg = 0;
			/* Lines 7-13. For pipeline j the score is max(C'_j + E'_j, the largest
			 * other cost); every score is at least m1, and exactly m1 for the pipelines
			 * whose C'_j + E'_j <= m1 (the current maximum among them: its other cost is
			 * at most m1 and its own only grows). So the first such pipeline wins; if
			 * there is none, every score is C'_j + E'_j and the least wins. */
			/* The code's tie-break: among the pipelines of least score, the first
			 * empty one if there is one. */
			for (size_t g = 0; d->code && g < allowed[i] && hit < 0; g++) {
				long e = first_empty(&gs.g[g]);
				pr = (struct probe){&gs.g[g], C, E, cost[g * n + i],
						    (gs.g[g].pp - 1) * cost[g * n + i]};
				if (e >= 0 && newcost(&pr, (size_t)e) <= m1) {
					hit = e;
					hg = g;
				}
			}
			for (size_t g = 0; g < allowed[i] && hit < 0; g++) {
				pr = (struct probe){&gs.g[g], C, E, cost[g * n + i],
						    (gs.g[g].pp - 1) * cost[g * n + i]};
				hit = find_le(&pr, m1);
				hg = g;
			}
			if (hit < 0) {
				double bv = INFINITY;
				int bempty = 0;
				for (size_t g = 0; g < allowed[i]; g++) {
					double v;
					long a;
					pr = (struct probe){&gs.g[g], C, E, cost[g * n + i],
							    (gs.g[g].pp - 1) * cost[g * n + i]};
					descend(&pr, &v, &a);
					find_min(&pr, 1, 0, gs.g[g].tsize, &v, &a);
					long e = d->code ? first_empty(&gs.g[g]) : -1;
					int is_empty = e >= 0 && newcost(&pr, (size_t)e) == v;
					if (is_empty)
						a = e;
					/* strict: the earlier group on ties, unless the code's rule
					 * prefers a later empty pipeline */
					if (v < bv || (v == bv && is_empty && !bempty)) {
						bv = v;
						hit = a;
						hg = g;
						bempty = is_empty;
					}
				}
			}
			struct group *G = &gs.g[hg];
			size_t j = G->start + (size_t)hit;
			double t1 = cost[hg * n + i];
			C[j] += t1;
			E[j] = dmax(E[j], (G->pp - 1) * t1);
			N[j] += 1;
			double cj = C[j] + E[j];
			group_set(G, (size_t)hit, cj, C[j], N[j], d->code);
			cur[i] = (int)j;
			if (cj > m1)
				m1 = cj;
			if (m1 >= best) { /* costs only grow: this trial cannot win (strict <) */
				aborted = 1;
				break;
			}
		}
		if (!aborted && m1 < best) { /* lines 15-17 */
			best = m1;
			*trial = t;
			memcpy(pipe_of, cur, n * sizeof(int));
		}
	}
	if (!n) {
		best = 0.0;
		*trial = 0;
	}
	*objective = best;
	rc = 0;
out:
	groups_release(&gs);
	free(order);
	free(allowed);
	free(cur);
	free(C);
	free(E);
	free(N);
	free(cost);
	return rc;
}

double bp_hyd_dispatch_bound(const struct bp_hyd_dispatch *d)
{
	double lb = 0.0;
	size_t np = d->npipes;
	if (!np)
		return 0.0;
	/* Group ends: the pipelines' prefixes at which the cap drops. */
	double *conf = calloc(np, sizeof(double)); /* cost confined to pipelines [0, j] */
	if (!conf)
		return 0.0;
	for (size_t i = 0; i < d->n; i++) {
		size_t J = 0;
		double cheapest = INFINITY, alone = INFINITY;
		while (J < np && d->pipes[J].cap >= d->len[i]) {
			double c = bp_hyd_seq_cost(d, J, d->len[i]);
			if (c < cheapest)
				cheapest = c;
			if (d->pipes[J].pp * c < alone)
				alone = d->pipes[J].pp * c;
			J++;
		}
		if (!J)
			continue; /* infeasible: the greedy says so */
		if (alone > lb)
			lb = alone; /* (a): C_j + E_j >= PP T(l) for the pipeline it joins */
		conf[J - 1] += cheapest;
	}
	double acc = 0.0;
	for (size_t j = 0; j < np; j++) {
		acc += conf[j];
		/* (b): sequences allowed only on pipelines 0..j cost at least acc there */
		if (acc / (double)(j + 1) > lb)
			lb = acc / (double)(j + 1);
	}
	free(conf);
	return lb;
}

/* Items by length descending, then index (cost order for every pipeline: T is monotone). */
struct item {
	int64_t len;
	size_t i;
};
static int cmp_item(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

int bp_hyd_dispatch_ilp(const struct bp_hyd_dispatch *d, const struct bp_ilp_opts *o,
			const int *warm, int *pipe_of, struct bp_hyd_ilp_res *res,
			struct bp_error *err)
{
	size_t n = d->n, np = d->npipes;
	int rc = -1;
	struct groups gs;
	struct bp_ilp *ilp = NULL;
	struct bp_ilp_result r;
	memset(&r, 0, sizeof(r));
	memset(&gs, 0, sizeof(gs));
	memset(res, 0, sizeof(*res));
	struct item *order = bp_calloc(n ? n : 1, sizeof(*order), err);
	size_t *rank = bp_calloc(n ? n : 1, sizeof(size_t), err);
	int *label = bp_calloc(np ? np : 1, sizeof(int), err); /* warm pipeline -> ILP label */
	int *next = NULL;
	int64_t *ecol = bp_calloc(np ? np : 1, sizeof(int64_t), err);
	int64_t *cols = NULL;
	double *vals = NULL, *x = NULL, *per = NULL;
	if (!order || !rank || !label || !ecol || groups_make(d, &gs, err) < 0)
		goto out;
	next = bp_calloc(gs.n ? gs.n : 1, sizeof(int), err);
	cols = bp_calloc(n + 2 * np + 2, sizeof(int64_t), err);
	vals = bp_calloc(n + 2 * np + 2, sizeof(double), err);
	per = bp_calloc(np ? np : 1, sizeof(double), err);
	if (!next || !cols || !vals || !per)
		goto out;
	double warm_obj = bp_hyd_eq2(d, warm, NULL);
	double lb = bp_hyd_dispatch_bound(d);
	double scale = 0.0;
	for (size_t i = 0; i < n; i++) {
		double c = bp_hyd_seq_cost(d, 0, d->len[i]) * d->pipes[0].pp;
		if (c > scale)
			scale = c;
	}
	if (!n || scale <= 0 || warm_obj <= lb * (1 + 1e-12)) {
		memcpy(pipe_of, warm, n * sizeof(int));
		res->status = BP_ILP_OPTIMAL;
		res->objective = res->bound = warm_obj;
		rc = 0;
		goto out;
	}
	/* Symmetry: within a group the pipelines are alike, so label them by their longest
	 * sequence; the r-th longest sequence may only use group labels <= r. */
	for (size_t i = 0; i < n; i++)
		order[i] = (struct item){d->len[i], i};
	qsort(order, n, sizeof(*order), cmp_item);
	for (size_t k = 0; k < n; k++)
		rank[order[k].i] = k;
	for (size_t j = 0; j < np; j++)
		label[j] = -1;
	for (size_t k = 0; k < n; k++) {
		size_t j = (size_t)warm[order[k].i];
		size_t g = 0;
		while (!(gs.g[g].start <= j && j < gs.g[g].start + gs.g[g].size))
			g++;
		if (label[j] < 0)
			label[j] = (int)gs.g[g].start + next[g]++;
	}
	ilp = bp_ilp_new(err);
	if (!ilp || bp_ilp_add_col(ilp, BP_ILP_CONTINUOUS, lb / scale, INFINITY, 1.0, err) < 0)
		goto out;
	/* m_ij for allowed j with label rule; columns of item i at first[i]... */
	int64_t **mcol = bp_calloc(n ? n : 1, sizeof(int64_t *), err);
	if (!mcol)
		goto out;
	int fail = 0;
	for (size_t i = 0; i < n && !fail; i++) {
		mcol[i] = bp_calloc(np, sizeof(int64_t), err);
		if (!mcol[i]) {
			fail = 1;
			break;
		}
		for (size_t j = 0; j < np; j++)
			mcol[i][j] = -1;
		for (size_t g = 0; g < gs.n; g++) {
			if (gs.g[g].cap < d->len[i])
				break;
			size_t lim = gs.g[g].size;
			if (rank[i] + 1 < lim)
				lim = rank[i] + 1;
			for (size_t q = 0; q < lim; q++) {
				int64_t c = bp_ilp_add_col(ilp, BP_ILP_BINARY, 0, 1, 0.0, err);
				if (c < 0) {
					fail = 1;
					break;
				}
				mcol[i][gs.g[g].start + q] = c;
			}
		}
	}
	for (size_t j = 0; j < np && !fail; j++) {
		ecol[j] = -1;
		if (d->pipes[j].pp > 1 &&
		    (ecol[j] = bp_ilp_add_col(ilp, BP_ILP_CONTINUOUS, 0, INFINITY, 0.0, err)) < 0)
			fail = 1;
	}
	/* Rows: each sequence once; Z >= C_j + E_j; E_j >= (PP - 1) c_ij m_ij. */
	for (size_t i = 0; i < n && !fail; i++) {
		size_t nc = 0;
		for (size_t j = 0; j < np; j++)
			if (mcol[i][j] >= 0) {
				cols[nc] = mcol[i][j];
				vals[nc++] = 1.0;
			}
		if (bp_ilp_add_row(ilp, nc, cols, vals, 1.0, 1.0, err) < 0)
			fail = 1;
	}
	for (size_t j = 0; j < np && !fail; j++) {
		size_t nc = 0;
		int pm1 = d->pipes[j].pp - 1;
		for (size_t i = 0; i < n && !fail; i++) {
			if (mcol[i][j] < 0)
				continue;
			double c = bp_hyd_seq_cost(d, j, d->len[i]) / scale;
			cols[nc] = mcol[i][j];
			vals[nc++] = -c;
			if (pm1 > 0) {
				int64_t ec[2] = {ecol[j], mcol[i][j]};
				double ev[2] = {1.0, -pm1 * c};
				if (bp_ilp_add_row(ilp, 2, ec, ev, 0.0, INFINITY, err) < 0)
					fail = 1;
			}
		}
		if (!nc)
			continue;
		if (ecol[j] >= 0) {
			cols[nc] = ecol[j];
			vals[nc++] = -1.0;
		}
		cols[nc] = 0;
		vals[nc++] = 1.0;
		if (!fail && bp_ilp_add_row(ilp, nc, cols, vals, 0.0, INFINITY, err) < 0)
			fail = 1;
	}
	if (!fail) {
		/* The warm start with relabelled pipelines. */
		x = bp_calloc(bp_ilp_ncols(ilp), sizeof(double), err);
		int *relab = bp_calloc(n ? n : 1, sizeof(int), err);
		if (!x || !relab)
			fail = 1;
		for (size_t i = 0; i < n && !fail; i++) {
			relab[i] = label[warm[i]];
			if (mcol[i][relab[i]] < 0) {
				bp_errorf(err, "internal: warm start outside the symmetry rule");
				fail = 1;
				break;
			}
			x[mcol[i][relab[i]]] = 1.0;
		}
		if (!fail) {
			double wobj = bp_hyd_eq2(d, relab, per);
			for (size_t j = 0; j < np; j++) {
				if (ecol[j] < 0)
					continue;
				double e = 0.0;
				for (size_t i = 0; i < n; i++)
					if (relab[i] == (int)j)
						e = dmax(e, (d->pipes[j].pp - 1) *
							 bp_hyd_seq_cost(d, j, d->len[i]) / scale);
				x[ecol[j]] = e;
			}
			x[0] = dmax(wobj / scale, lb / scale) * (1 + 1e-12);
			struct bp_ilp_opts oo = *o;
			oo.warm = x;
			if (bp_ilp_solve(ilp, &oo, &r, err) < 0)
				fail = 1;
			else if (r.limit == BP_ILP_LIMIT_TIME) {
				bp_errorf(err, "the dispatch ilp of %zu sequences over %zu pipelines "
					  "reached ilp_time_limit_s %g before its deterministic budget; "
					  "raise ilp_time_limit_s or lower ilp_work_limit", n, np,
					  o->time_limit_s);
				fail = 1;
			}
		}
		/* Decode. */
		double best = warm_obj;
		int from = 0;
		if (!fail && r.x) {
			int ok = 1;
			for (size_t i = 0; i < n && ok; i++) {
				int pj = -1;
				for (size_t j = 0; j < np; j++)
					if (mcol[i][j] >= 0 && r.x[mcol[i][j]] == 1.0)
						pj = pj < 0 ? (int)j : -2;
				if (pj < 0)
					ok = 0;
				relab[i] = pj;
			}
			if (ok) {
				double v = bp_hyd_eq2(d, relab, NULL);
				if (v < best) {
					best = v;
					from = 1;
					memcpy(pipe_of, relab, n * sizeof(int));
				}
			}
		}
		if (!fail) {
			if (!from)
				memcpy(pipe_of, warm, n * sizeof(int));
			res->objective = best;
			res->nodes = r.nodes;
			double b = isinf(r.bound) ? lb : dmax(lb, r.bound * scale);
			res->status = r.status == BP_ILP_OPTIMAL ? BP_ILP_OPTIMAL
				      : from ? BP_ILP_FEASIBLE : BP_ILP_WARM_START;
			if (res->status == BP_ILP_OPTIMAL || b > best)
				b = best;
			res->bound = b;
			rc = 0;
		}
		free(relab);
	}
	for (size_t i = 0; i < n; i++)
		free(mcol[i]);
	free(mcol);
out:
	bp_ilp_result_release(&r);
	bp_ilp_free(ilp);
	groups_release(&gs);
	free(order);
	free(rank);
	free(label);
	free(next);
	free(ecol);
	free(cols);
	free(vals);
	free(x);
	free(per);
	return rc;
}
