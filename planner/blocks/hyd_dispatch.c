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
 * on how trials would be spread over threads. Every shortcut of the greedy (the trees and
 * their pruning, the scans, the trials' early stops) is exact in rounded arithmetic: the
 * placements, the winning trial and its objective are Alg. 1's as printed, bit for bit
 * (tests/unit/test_hydraulis.c holds it to a literal implementation). */
#include "hyd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

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
 * counts, which only the code's tie-break reads, sit in a tree of their own. In a run of
 * PP 1, E stays 0 and C + E is C: only the c half of its nodes is kept (see find_le1). */
struct tnode {
	double cost, c; /* min of C + E and of C over a node */
};

struct group {
	size_t start, size, tsize; /* pipelines [start, start + size); tree leaves tsize */
	int pp;
	int flat;                  /* no tree: at most FLAT_MAX pipelines, scanned in turn */
	int64_t cap;
	struct tnode *t;           /* [2 tsize] */
	double *mn;                /* [2 tsize]: min sequence count (0: an empty pipeline) */
};

/* A run of up to FLAT_MAX pipelines is scanned, not searched: its pipelines' tests are
 * independent of one another (no chain of loads down a tree) and the placement updates no
 * tree. The greedy spends most placements on its first run (the longest MaxLen), often a
 * few dozen pipelines. */
#define FLAT_MAX 64

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
		gs->g[gs->n++] = (struct group){j, 1, 0, p->pp, 0, p->cap, NULL, NULL};
	}
	for (size_t k = 0; k < gs->n; k++) {
		gs->g[k].flat = gs->g[k].size <= FLAT_MAX;
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

static void group_reset(struct group *g, int counts)
{
	if (g->flat)
		return;
	for (size_t x = 0; x < g->tsize; x++) {
		double v = x < g->size ? 0.0 : INFINITY;
		g->t[g->tsize + x] = (struct tnode){v, v};
	}
	for (size_t x = g->tsize - 1; x >= 1; x--) {
		g->t[x].cost = dmin(g->t[2 * x].cost, g->t[2 * x + 1].cost);
		g->t[x].c = dmin(g->t[2 * x].c, g->t[2 * x + 1].c);
	}
	if (!counts)
		return;
	for (size_t x = 0; x < g->tsize; x++)
		g->mn[g->tsize + x] = x < g->size ? 0.0 : INFINITY;
	for (size_t x = g->tsize - 1; x >= 1; x--)
		g->mn[x] = dmin(g->mn[2 * x], g->mn[2 * x + 1]);
}

/* A pipeline's C + E and C only grow, so a node whose minima did not change leaves every
 * ancestor as it was: the update stops there. The count tree is kept only where read. */
static void group_set(struct group *g, size_t local, double cost, double c, double cnt,
		      int counts)
{
	size_t x = g->tsize + local;
	if (g->flat)
		return;
	if (g->pp == 1) { /* C + E is C: the c half alone */
		g->t[x].c = c;
		for (x /= 2; x >= 1; x /= 2) {
			double nv = dmin(g->t[2 * x].c, g->t[2 * x + 1].c);
			if (nv == g->t[x].c)
				break;
			g->t[x].c = nv;
		}
	} else {
		g->t[x] = (struct tnode){cost, c};
		for (x /= 2; x >= 1; x /= 2) {
			struct tnode nv = {dmin(g->t[2 * x].cost, g->t[2 * x + 1].cost),
					   dmin(g->t[2 * x].c, g->t[2 * x + 1].c)};
			if (nv.cost == g->t[x].cost && nv.c == g->t[x].c)
				break;
			g->t[x] = nv;
		}
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

/* The group's leftmost pipeline without sequences (N: every pipeline's count), or -1. */
static long first_empty(const struct group *g, const double *N)
{
	if (g->flat) {
		for (size_t x = 0; x < g->size; x++)
			if (N[g->start + x] == 0)
				return (long)x;
		return -1;
	}
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
static inline double newcost(const struct probe *pr, size_t local)
{
	size_t j = pr->g->start + local;
	return (pr->C[j] + pr->t) + dmax(pr->E[j], pr->pm1t);
}

/* A lower bound on newcost over a node's pipelines (infinite for padding). Its second term,
 * (min C + t) + (PP - 1) t, is exact in floating point: newcost is rounded additions of
 * C + t and of max(E, (PP - 1) t), both monotone, so no pipeline of the node is below it. The
 * first, min (C + E) + t, adds in another order than newcost and may exceed it by an ulp. */
static inline double node_lb_raw(const struct probe *pr, size_t x)
{
	const struct tnode *n = &pr->g->t[x];
	return dmax(n->cost + pr->t, n->c + pr->t + pr->pm1t);
}

/* The same loosened by a relative 1e-12 so float rounding never prunes a pipeline that
 * meets the exact test at its leaf. */
static inline double loosen(double lb)
{
	return lb - 1e-12 * fabs(lb) - 1e-12;
}

/* Leftmost pipeline of the group with newcost <= thr, or -1: a left-first walk of the tree
 * without recursion, skipping every node whose bound exceeds thr (loosened as loosen's:
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

/* find_le for a group of PP 1, where newcost is C + t (E and (PP - 1) t are 0): C + t <= thr
 * holds for every C up to some value and for none above it (rounded addition is monotone),
 * so a node passes exactly when its least C does, and the pipeline it stands for passes. A
 * node that passes has a child that passes, the left one or else the right: one walk down,
 * no backtracking, no loosening. */
static inline long find_le1(const struct group *g, double t, double thr)
{
	const struct tnode *n = g->t;
	if (!(n[1].c + t <= thr))
		return -1;
	size_t x = 1, T = g->tsize;
	while (x < T) {
		x *= 2;
		x += !(n[x].c + t <= thr);
	}
	return (long)(x - T);
}

/* The least newcost over the group, by a depth-first search that skips every node whose
 * exact bound already reaches the best found (it cannot improve on it) or whose loosened
 * bound exceeds it; the child with the smaller exact bound first. Pipelines whose newcost
 * ties (empty ones, all alike) are seen once: the others' exact bound equals the best. */
static double min_value(const struct probe *pr)
{
	const size_t T = pr->g->tsize;
	const struct tnode *tr = pr->g->t;
	size_t stack[2 * 64 + 2];
	size_t sp = 0;
	double best = INFINITY;
	stack[sp++] = 1;
	while (sp) {
		size_t x = stack[--sp];
		double ex = tr[x].c + pr->t + pr->pm1t;
		if (ex >= best || loosen(dmax(tr[x].cost + pr->t, ex)) > best)
			continue;
		if (x >= T) {
			double v = newcost(pr, x - T);
			if (v < best)
				best = v;
			continue;
		}
		double el = tr[2 * x].c + pr->t + pr->pm1t, er = tr[2 * x + 1].c + pr->t + pr->pm1t;
		if (er < el) { /* the right child first */
			stack[sp++] = 2 * x;
			stack[sp++] = 2 * x + 1;
		} else {
			stack[sp++] = 2 * x + 1;
			stack[sp++] = 2 * x;
		}
	}
	return best;
}

/* The first of a flat group's pipelines with newcost <= thr, or -1: four tests at a time,
 * without a branch among them. scan_le1 for PP 1, where newcost is C + t (E and (PP - 1) t
 * are 0), over the group's m values of C. */
static inline unsigned first_bit(unsigned k)
{
	return k & 1 ? 0 : k & 2 ? 1 : k & 4 ? 2 : 3;
}

static inline long scan_le1(const double *C, size_t m, double t, double thr)
{
	size_t j = 0;
#ifdef __SSE2__
	/* the same tests two at a time: C + t <= thr per lane, rounded as the scalar */
	const __m128d tv = _mm_set1_pd(t), hv = _mm_set1_pd(thr);
	for (; j + 4 <= m; j += 4) {
		__m128d a = _mm_cmple_pd(_mm_add_pd(_mm_loadu_pd(C + j), tv), hv);
		__m128d b = _mm_cmple_pd(_mm_add_pd(_mm_loadu_pd(C + j + 2), tv), hv);
		unsigned k = (unsigned)_mm_movemask_pd(a) | (unsigned)_mm_movemask_pd(b) << 2;
		if (k)
			return (long)(j + first_bit(k));
	}
#endif
	for (; j + 4 <= m; j += 4) {
		unsigned k = (unsigned)(C[j] + t <= thr) | (unsigned)(C[j + 1] + t <= thr) << 1 |
			     (unsigned)(C[j + 2] + t <= thr) << 2 | (unsigned)(C[j + 3] + t <= thr) << 3;
		if (k)
			return (long)(j + first_bit(k));
	}
	for (; j < m; j++)
		if (C[j] + t <= thr)
			return (long)j;
	return -1;
}

static long scan_le(const struct probe *pr, double thr)
{
	const size_t m = pr->g->size;
	const double *C = pr->C + pr->g->start, *E = pr->E + pr->g->start;
	const double t = pr->t, pm1t = pr->pm1t;
	size_t j = 0;
	if (pr->g->pp == 1)
		return scan_le1(C, m, t, thr);
	for (; j + 4 <= m; j += 4) {
		unsigned k = (unsigned)((C[j] + t) + dmax(E[j], pm1t) <= thr) |
			     (unsigned)((C[j + 1] + t) + dmax(E[j + 1], pm1t) <= thr) << 1 |
			     (unsigned)((C[j + 2] + t) + dmax(E[j + 2], pm1t) <= thr) << 2 |
			     (unsigned)((C[j + 3] + t) + dmax(E[j + 3], pm1t) <= thr) << 3;
		if (k)
			return (long)(j + first_bit(k));
	}
	for (; j < m; j++)
		if ((C[j] + t) + dmax(E[j], pm1t) <= thr)
			return (long)j;
	return -1;
}

/* The least newcost of a flat group and its first pipeline (strict <: the leftmost). */
static long scan_min(const struct probe *pr, double *v)
{
	double best = INFINITY;
	long arg = -1;
	for (size_t j = 0; j < pr->g->size; j++) {
		double x = newcost(pr, j);
		if (x < best) {
			best = x;
			arg = (long)j;
		}
	}
	*v = best;
	return arg;
}

/* Alg. 1 lines 8-13 over one group when no pipeline stays within the current maximum: the
 * least newcost *v and the leftmost pipeline that has it. With PP 1 the least is the root's
 * least C + t (monotone, as find_le1); otherwise min_value. Either way the leftmost pipeline
 * at most that value is the leftmost of least newcost. */
static long group_min(const struct probe *pr, double *v)
{
	if (pr->g->flat)
		return scan_min(pr, v);
	if (pr->g->pp == 1) {
		*v = pr->g->t[1].c + pr->t;
		return find_le1(pr->g, pr->t, *v);
	}
	*v = min_value(pr);
	return find_le(pr, *v);
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

/* trial_order's shuffle of trial t, written into a table row of 32-bit entries. */
static void table_row(uint32_t *ord, size_t n, uint64_t seed, int t)
{
	struct bp_rng rng;
	bp_rng_seed(&rng, seed + (uint64_t)t);
	for (size_t i = 0; i < n; i++)
		ord[i] = (uint32_t)i;
	for (size_t i = n; i > 1; i--) {
		size_t r = (size_t)bp_rng_below(&rng, i);
		uint32_t tmp = ord[i - 1];
		ord[i - 1] = ord[r];
		ord[r] = tmp;
	}
}

static uint32_t *table_alloc(size_t n, int trials, struct bp_error *err)
{
	if (n >= UINT32_MAX) {
		bp_errorf(err, "internal: %zu sequences are too many for a shuffle table", n);
		return NULL;
	}
	return bp_calloc((n ? n : 1) * (size_t)trials, sizeof(uint32_t), err);
}

uint32_t *bp_hyd_orders(size_t n, int trials, uint64_t seed, struct bp_error *err)
{
	if (trials < 1)
		trials = 1;
	uint32_t *o = table_alloc(n, trials, err);
	for (int t = 0; o && t < trials; t++)
		table_row(o + (size_t)t * n, n, seed, t);
	return o;
}

int bp_hyd_shuffles_init(struct bp_hyd_shuffles *s, size_t n, int trials, uint64_t seed,
			 struct bp_error *err)
{
	if (trials < 1)
		trials = 1;
	/* not zeroed: rows are written before they are read, and the pages of rows no trial
	 * reaches are never touched */
	if (n >= UINT32_MAX) {
		bp_errorf(err, "internal: %zu sequences are too many for a shuffle table", n);
		return -1;
	}
	*s = (struct bp_hyd_shuffles){bp_realloc_array(NULL, (n ? n : 1) * (size_t)trials,
						      sizeof(uint32_t), err), n, trials, 0, seed};
	return s->o ? 0 : -1;
}

void bp_hyd_shuffles_release(struct bp_hyd_shuffles *s)
{
	free(s->o);
	s->o = NULL;
	s->made = 0;
}

/* Trial t's row of a shared table, drawn now if no candidate reached trial t before. */
static const uint32_t *shuffle_row(struct bp_hyd_shuffles *s, int t)
{
	for (; s->made <= t; s->made++)
		table_row(s->o + (size_t)s->made * s->n, s->n, s->seed, s->made);
	return s->o + (size_t)t * s->n;
}

/* A sequence's cost on a group and (PP - 1) times it, side by side for the placement. */
struct scost {
	double t, pm1t;
};


int bp_hyd_dispatch_greedy(const struct bp_hyd_dispatch *d, int *pipe_of, double *objective,
			   int *trial, struct bp_error *err)
{
	return bp_hyd_dispatch_greedy_shared(d, NULL, pipe_of, objective, trial, err);
}

/* What one bp_hyd_dispatch_greedy_shared keeps across its trials: the pipelines' groups,
 * each sequence's groups that hold it (allowed[i]: the first allowed[i], J_i) and its cost on
 * each (cost[i G + g]), the trial's order and placement (cur), and per pipeline C_j, E_j and,
 * under the code's variant, its sequences N_j. */
struct greedy {
	const struct bp_hyd_dispatch *d;
	struct groups gs;
	size_t n, G;
	size_t *order, *allowed;
	int *cur;
	double *C, *E, *N;
	struct scost *cost;
	int code, prepass;
};

static int greedy_alloc(const struct bp_hyd_dispatch *d, struct greedy *w, struct bp_error *err)
{
	size_t n = d->n, np = d->npipes ? d->npipes : 1;
	memset(w, 0, sizeof(*w));
	w->d = d;
	w->n = n;
	w->order = bp_calloc(n ? n : 1, sizeof(size_t), err);
	w->allowed = bp_calloc(n ? n : 1, sizeof(size_t), err);
	w->cur = bp_calloc(n ? n : 1, sizeof(int), err);
	w->C = bp_calloc(np, sizeof(double), err);
	w->E = bp_calloc(np, sizeof(double), err);
	w->N = bp_calloc(np, sizeof(double), err);
	if (!w->order || !w->allowed || !w->cur || !w->C || !w->E || !w->N ||
	    groups_make(d, &w->gs, err) < 0)
		return -1;
	if (!d->npipes)
		return bp_errorf(err, "internal: dispatch to no pipelines");
	w->G = w->gs.n;
	w->cost = bp_calloc(w->G * (n ? n : 1), sizeof(*w->cost), err);
	w->code = d->code;
	w->prepass = d->code && w->gs.g[0].size == 1;
	return w->cost ? 0 : -1;
}

static void greedy_free(struct greedy *w)
{
	groups_release(&w->gs);
	free(w->order);
	free(w->allowed);
	free(w->cur);
	free(w->C);
	free(w->E);
	free(w->N);
	free(w->cost);
}

/* Every sequence's groups and costs, and floor_obj: no trial ends below it. Sequence i's
 * pipeline j ends at least at its C' + E' when i joins, (C + t) + max(E, (PP - 1) t) >= t +
 * (PP - 1) t in rounded arithmetic too (C, E >= 0, additions monotone), and C + E never falls
 * after. So once the best trial is at or below the largest over sequences of the least t +
 * (PP - 1) t over their groups, no later trial can beat it strictly: the trials stop there.
 * Returns 0 or BP_INFEASIBLE (a sequence no pipeline holds). */
static int greedy_costs(struct greedy *w, double *floor_obj, struct bp_error *err)
{
	const struct bp_hyd_dispatch *d = w->d;
	*floor_obj = 0.0;
	for (size_t i = 0; i < w->n; i++) {
		size_t k = 0;
		while (k < w->G && w->gs.g[k].cap >= d->len[i])
			k++;
		if (!k)
			return bp_infeasiblef(err, "a sequence of %lld tokens is longer than every "
					      "pipeline's MaxLen (the longest is %lld)",
					      (long long)d->len[i], (long long)d->pipes[0].cap);
		w->allowed[i] = k;
		double alone = INFINITY;
		for (size_t g = 0; g < k; g++) {
			double c = bp_hyd_seq_cost(d, w->gs.g[g].start, d->len[i]);
			w->cost[i * w->G + g] = (struct scost){c, (w->gs.g[g].pp - 1) * c};
			alone = dmin(alone, c + w->cost[i * w->G + g].pm1t);
		}
		*floor_obj = dmax(*floor_obj, alone);
	}
	return 0;
}

/* Alg. 1 line 3: trial t's random permutation, the shared table's or drawn here. Returns the
 * shared row to place the sequences in (NULL: in w->order), after the code's pre-pass:
 * sequences only pipeline 0 can hold go there first (when it alone has the largest MaxLen),
 * in shuffled order. */
static const uint32_t *trial_sequence(struct greedy *w, struct bp_hyd_shuffles *sh, int t)
{
	const struct bp_hyd_dispatch *d = w->d;
	size_t n = w->n;
	const uint32_t *shared = NULL;
	if (d->orders)
		shared = d->orders + (size_t)t * n;
	else if (sh && t < sh->trials)
		shared = shuffle_row(sh, t);
	if (shared && w->prepass)
		for (size_t i = 0; i < n; i++)
			w->order[i] = shared[i];
	else if (!shared)
		trial_order(n, d->seed, t, w->order);
	if (!w->prepass)
		return shared;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (w->allowed[w->order[i]] == 1)
			w->cur[k++] = (int)w->order[i];
	for (size_t i = 0; i < n; i++)
		if (w->allowed[w->order[i]] != 1)
			w->cur[k++] = (int)w->order[i];
	for (size_t i = 0; i < n; i++)
		w->order[i] = (size_t)w->cur[i];
	return NULL;
}

/* One trial: every sequence in order (shared's, or w->order) onto its pipeline (w->cur).
 * Returns its objective, the largest C_j + E_j, or INFINITY once it reaches best (costs only
 * grow: it cannot win, strict <). */
static double run_trial(struct greedy *w, const uint32_t *shared, double best)
{
	const struct bp_hyd_dispatch *d = w->d;
	const int code = w->code;
	const size_t G = w->G, n = w->n;
	struct group *gs = w->gs.g;
	double *C = w->C, *E = w->E, *N = w->N;
	const size_t *order = w->order, *allowed = w->allowed;
	const struct scost *cost = w->cost;
	int *cur = w->cur;
	memset(C, 0, d->npipes * sizeof(double));
	memset(E, 0, d->npipes * sizeof(double));
	if (code)
		memset(N, 0, d->npipes * sizeof(double));
	for (size_t g = 0; g < G; g++)
		group_reset(&gs[g], code);
	double m1 = 0.0; /* the largest C_j + E_j so far */
	for (size_t q = 0; q < n; q++) {
		size_t i = shared ? (size_t)shared[q] : order[q];
		const struct scost *ci = &cost[i * G];
		const size_t k = allowed[i];
		struct probe pr;
		long hit = -1;
		size_t hg = 0;
		/* Lines 7-13. For pipeline j the score is max(C'_j + E'_j, the largest other
		 * cost); every score is at least m1, and exactly m1 for the pipelines whose
		 * C'_j + E'_j <= m1 (the current maximum among them: its other cost is at most
		 * m1 and its own only grows). So the first such pipeline wins; if there is none,
		 * every score is C'_j + E'_j and the least wins. */
		/* The code's tie-break: among the pipelines of least score, the first empty one
		 * if there is one. */
		if (code)
			for (size_t g = 0; g < k && hit < 0; g++) {
				long e = first_empty(&gs[g], N);
				pr = (struct probe){&gs[g], C, E, ci[g].t, ci[g].pm1t};
				if (e >= 0 && newcost(&pr, (size_t)e) <= m1) {
					hit = e;
					hg = g;
				}
			}
		for (size_t g = 0; g < k && hit < 0; g++) {
			const struct group *gg = &gs[g];
			hg = g;
			if (gg->flat && gg->pp == 1) {
				hit = scan_le1(C + gg->start, gg->size, ci[g].t, m1);
				continue;
			}
			pr = (struct probe){gg, C, E, ci[g].t, ci[g].pm1t};
			if (gg->flat)
				hit = scan_le(&pr, m1);
			else if (gg->pp == 1)
				hit = find_le1(gg, ci[g].t, m1);
			else
				hit = find_le(&pr, m1);
		}
		if (hit < 0) {
			double bv = INFINITY;
			int bempty = 0;
			for (size_t g = 0; g < k; g++) {
				double v;
				pr = (struct probe){&gs[g], C, E, ci[g].t, ci[g].pm1t};
				long a = group_min(&pr, &v);
				long e = code ? first_empty(&gs[g], N) : -1;
				int is_empty = e >= 0 && newcost(&pr, (size_t)e) == v;
				if (is_empty)
					a = e;
				/* strict: the earlier group on ties, unless the code's rule prefers
				 * a later empty pipeline */
				if (v < bv || (v == bv && is_empty && !bempty)) {
					bv = v;
					hit = a;
					hg = g;
					bempty = is_empty;
				}
			}
		}
		struct group *Gp = &gs[hg];
		size_t j = Gp->start + (size_t)hit;
		C[j] += ci[hg].t;
		E[j] = dmax(E[j], ci[hg].pm1t);
		double cj = C[j] + E[j];
		if (code)
			N[j] += 1;
		if (!Gp->flat || code)
			group_set(Gp, (size_t)hit, cj, C[j], N[j], code);
		cur[i] = (int)j;
		if (cj > m1)
			m1 = cj;
		if (m1 >= best)
			return INFINITY;
	}
	return m1;
}

int bp_hyd_dispatch_greedy_shared(const struct bp_hyd_dispatch *d, struct bp_hyd_shuffles *sh,
				  int *pipe_of, double *objective, int *trial,
				  struct bp_error *err)
{
	struct greedy w;
	int rc = -1;
	double floor_obj;
	*objective = INFINITY;
	*trial = -1;
	if (greedy_alloc(d, &w, err) < 0)
		goto out;
	rc = greedy_costs(&w, &floor_obj, err);
	if (rc < 0)
		goto out;
	rc = -1;
	double best = INFINITY;
	int trials = d->trials < 1 ? 1 : d->trials;
	for (int t = 0; t < trials && !(best <= floor_obj); t++) {
		const uint32_t *shared = trial_sequence(&w, sh, t);
		double m1 = run_trial(&w, shared, best);
		if (m1 < best) { /* lines 15-17 */
			best = m1;
			*trial = t;
			memcpy(pipe_of, w.cur, w.n * sizeof(int));
		}
	}
	if (!w.n) {
		best = 0.0;
		*trial = 0;
	}
	*objective = best;
	rc = 0;
out:
	greedy_free(&w);
	return rc;
}

double bp_hyd_dispatch_bound(const struct bp_hyd_dispatch *d)
{
	double lb = 0.0;
	size_t np = d->npipes;
	if (!np)
		return 0.0;
	/* Runs of pipelines alike (model, PP, cap) cost a sequence the same: one cost per run,
	 * so a sequence takes O(runs), not O(pipelines). run_end[r]: one past run r. */
	double *conf = calloc(np, sizeof(double)); /* cost confined to pipelines [0, j] */
	size_t *run_end = calloc(np, sizeof(size_t));
	if (!conf || !run_end) {
		free(conf);
		free(run_end);
		return 0.0;
	}
	size_t nr = 0;
	for (size_t j = 1; j <= np; j++)
		if (j == np || d->pipes[j].T != d->pipes[j - 1].T ||
		    d->pipes[j].pp != d->pipes[j - 1].pp || d->pipes[j].cap != d->pipes[j - 1].cap)
			run_end[nr++] = j;
	for (size_t i = 0; i < d->n; i++) {
		size_t J = 0;
		double cheapest = INFINITY, alone = INFINITY;
		for (size_t r = 0; r < nr && d->pipes[J].cap >= d->len[i]; r++) {
			double c = bp_hyd_seq_cost(d, J, d->len[i]);
			if (c < cheapest)
				cheapest = c;
			if (d->pipes[J].pp * c < alone)
				alone = d->pipes[J].pp * c;
			J = run_end[r];
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
	free(run_end);
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

/* What one bp_hyd_dispatch_ilp builds and keeps: the pipelines' groups, sequences by length
 * (order, rank), the warm start's pipeline labels (label: warm pipeline -> ILP label; next:
 * per group the next free one), item i's column on pipeline j (mcol[i][j], -1: none), E_j's
 * column (ecol[j], -1: none), the row buffers and the warm point (x, relab). Costs are scaled
 * by scale before GLPK; lb and warm_obj in us. */
struct dispatch_work {
	size_t n, np;
	struct groups gs;
	struct item *order;
	size_t *rank;
	int *label, *next, *relab;
	int64_t *ecol, *cols;
	int64_t **mcol;
	double *vals, *x, *per;
	double scale, lb, warm_obj;
	struct bp_ilp *ilp;
};

static int dispatch_alloc(const struct bp_hyd_dispatch *d, struct dispatch_work *w,
			  struct bp_error *err)
{
	size_t n = d->n, np = d->npipes;
	memset(w, 0, sizeof(*w));
	w->n = n;
	w->np = np;
	w->order = bp_calloc(n ? n : 1, sizeof(*w->order), err);
	w->rank = bp_calloc(n ? n : 1, sizeof(size_t), err);
	w->label = bp_calloc(np ? np : 1, sizeof(int), err);
	w->ecol = bp_calloc(np ? np : 1, sizeof(int64_t), err);
	if (!w->order || !w->rank || !w->label || !w->ecol || groups_make(d, &w->gs, err) < 0)
		return -1;
	w->next = bp_calloc(w->gs.n ? w->gs.n : 1, sizeof(int), err);
	w->cols = bp_calloc(n + 2 * np + 2, sizeof(int64_t), err);
	w->vals = bp_calloc(n + 2 * np + 2, sizeof(double), err);
	w->per = bp_calloc(np ? np : 1, sizeof(double), err);
	return w->next && w->cols && w->vals && w->per ? 0 : -1;
}

static void dispatch_free(struct dispatch_work *w)
{
	for (size_t i = 0; w->mcol && i < w->n; i++)
		free(w->mcol[i]);
	free(w->mcol);
	bp_ilp_free(w->ilp);
	groups_release(&w->gs);
	free(w->order);
	free(w->rank);
	free(w->label);
	free(w->next);
	free(w->relab);
	free(w->ecol);
	free(w->cols);
	free(w->vals);
	free(w->x);
	free(w->per);
}

/* Symmetry: within a group the pipelines are alike, so label them by their longest sequence;
 * the r-th longest sequence may only use group labels <= r. */
static void warm_labels(const struct bp_hyd_dispatch *d, struct dispatch_work *w,
			const int *warm)
{
	size_t n = w->n;
	for (size_t i = 0; i < n; i++)
		w->order[i] = (struct item){d->len[i], i};
	qsort(w->order, n, sizeof(*w->order), cmp_item);
	for (size_t k = 0; k < n; k++)
		w->rank[w->order[k].i] = k;
	for (size_t j = 0; j < w->np; j++)
		w->label[j] = -1;
	for (size_t k = 0; k < n; k++) {
		size_t j = (size_t)warm[w->order[k].i];
		size_t g = 0;
		while (!(w->gs.g[g].start <= j && j < w->gs.g[g].start + w->gs.g[g].size))
			g++;
		if (w->label[j] < 0)
			w->label[j] = (int)w->gs.g[g].start + w->next[g]++;
	}
}

/* Item i's columns m_ij: the pipelines of every group that holds it, within the label rule. */
static int add_item_cols(const struct bp_hyd_dispatch *d, struct dispatch_work *w, size_t i,
			 struct bp_error *err)
{
	w->mcol[i] = bp_calloc(w->np, sizeof(int64_t), err);
	if (!w->mcol[i])
		return -1;
	for (size_t j = 0; j < w->np; j++)
		w->mcol[i][j] = -1;
	for (size_t g = 0; g < w->gs.n; g++) {
		if (w->gs.g[g].cap < d->len[i])
			break;
		size_t lim = w->gs.g[g].size;
		if (w->rank[i] + 1 < lim)
			lim = w->rank[i] + 1;
		for (size_t q = 0; q < lim; q++) {
			int64_t c = bp_ilp_add_col(w->ilp, BP_ILP_BINARY, 0, 1, 0.0, err);
			if (c < 0)
				return -1;
			w->mcol[i][w->gs.g[g].start + q] = c;
		}
	}
	return 0;
}

/* Columns: Z, every item's m_ij, then E_j of every pipeline with more than one stage. */
static int add_columns(const struct bp_hyd_dispatch *d, struct dispatch_work *w,
		       struct bp_error *err)
{
	w->ilp = bp_ilp_new(err);
	if (!w->ilp ||
	    bp_ilp_add_col(w->ilp, BP_ILP_CONTINUOUS, w->lb / w->scale, INFINITY, 1.0, err) < 0)
		return -1;
	w->mcol = bp_calloc(w->n ? w->n : 1, sizeof(int64_t *), err);
	if (!w->mcol)
		return -1;
	for (size_t i = 0; i < w->n; i++)
		if (add_item_cols(d, w, i, err) < 0)
			return -1;
	for (size_t j = 0; j < w->np; j++) {
		w->ecol[j] = -1;
		if (d->pipes[j].pp > 1 &&
		    (w->ecol[j] = bp_ilp_add_col(w->ilp, BP_ILP_CONTINUOUS, 0, INFINITY, 0.0,
						 err)) < 0)
			return -1;
	}
	return 0;
}

/* Pipeline j's rows: E_j >= (PP - 1) c_ij m_ij per item, then Z >= C_j + E_j. */
static int add_pipe_rows(const struct bp_hyd_dispatch *d, struct dispatch_work *w, size_t j,
			 struct bp_error *err)
{
	size_t nc = 0;
	int pm1 = d->pipes[j].pp - 1;
	for (size_t i = 0; i < w->n; i++) {
		if (w->mcol[i][j] < 0)
			continue;
		double c = bp_hyd_seq_cost(d, j, d->len[i]) / w->scale;
		w->cols[nc] = w->mcol[i][j];
		w->vals[nc++] = -c;
		if (pm1 > 0) {
			int64_t ec[2] = {w->ecol[j], w->mcol[i][j]};
			double ev[2] = {1.0, -pm1 * c};
			if (bp_ilp_add_row(w->ilp, 2, ec, ev, 0.0, INFINITY, err) < 0)
				return -1;
		}
	}
	if (!nc)
		return 0;
	if (w->ecol[j] >= 0) {
		w->cols[nc] = w->ecol[j];
		w->vals[nc++] = -1.0;
	}
	w->cols[nc] = 0;
	w->vals[nc++] = 1.0;
	return bp_ilp_add_row(w->ilp, nc, w->cols, w->vals, 0.0, INFINITY, err) < 0 ? -1 : 0;
}

/* Rows: each sequence once; Z >= C_j + E_j; E_j >= (PP - 1) c_ij m_ij. */
static int add_rows(const struct bp_hyd_dispatch *d, struct dispatch_work *w,
		    struct bp_error *err)
{
	for (size_t i = 0; i < w->n; i++) {
		size_t nc = 0;
		for (size_t j = 0; j < w->np; j++)
			if (w->mcol[i][j] >= 0) {
				w->cols[nc] = w->mcol[i][j];
				w->vals[nc++] = 1.0;
			}
		if (bp_ilp_add_row(w->ilp, nc, w->cols, w->vals, 1.0, 1.0, err) < 0)
			return -1;
	}
	for (size_t j = 0; j < w->np; j++)
		if (add_pipe_rows(d, w, j, err) < 0)
			return -1;
	return 0;
}

/* The warm start with relabelled pipelines, as a point of the model (w->x; w->relab its
 * pipelines). */
static int warm_point(const struct bp_hyd_dispatch *d, struct dispatch_work *w,
		      const int *warm, struct bp_error *err)
{
	size_t n = w->n;
	w->x = bp_calloc(bp_ilp_ncols(w->ilp), sizeof(double), err);
	w->relab = bp_calloc(n ? n : 1, sizeof(int), err);
	if (!w->x || !w->relab)
		return -1;
	for (size_t i = 0; i < n; i++) {
		w->relab[i] = w->label[warm[i]];
		if (w->mcol[i][w->relab[i]] < 0)
			return bp_errorf(err, "internal: warm start outside the symmetry rule");
		w->x[w->mcol[i][w->relab[i]]] = 1.0;
	}
	double wobj = bp_hyd_eq2(d, w->relab, w->per);
	for (size_t j = 0; j < w->np; j++) {
		if (w->ecol[j] < 0)
			continue;
		double e = 0.0;
		for (size_t i = 0; i < n; i++)
			if (w->relab[i] == (int)j)
				e = dmax(e, (d->pipes[j].pp - 1) * bp_hyd_seq_cost(d, j, d->len[i]) /
						    w->scale);
		w->x[w->ecol[j]] = e;
	}
	w->x[0] = dmax(wobj / w->scale, w->lb / w->scale) * (1 + 1e-12);
	return 0;
}

/* The search's point decoded into pipe_of and res: the solver's dispatch when it beats the
 * warm start by Eq. 2, else warm. */
static void take_dispatch(const struct bp_hyd_dispatch *d, struct dispatch_work *w,
			  const struct bp_ilp_result *r, const int *warm, int *pipe_of,
			  struct bp_hyd_ilp_res *res)
{
	double best = w->warm_obj;
	int from = 0;
	if (r->x) {
		int ok = 1;
		for (size_t i = 0; i < w->n && ok; i++) {
			int pj = -1;
			for (size_t j = 0; j < w->np; j++)
				if (w->mcol[i][j] >= 0 && r->x[w->mcol[i][j]] == 1.0)
					pj = pj < 0 ? (int)j : -2;
			if (pj < 0)
				ok = 0;
			w->relab[i] = pj;
		}
		if (ok) {
			double v = bp_hyd_eq2(d, w->relab, NULL);
			if (v < best) {
				best = v;
				from = 1;
				memcpy(pipe_of, w->relab, w->n * sizeof(int));
			}
		}
	}
	if (!from)
		memcpy(pipe_of, warm, w->n * sizeof(int));
	res->objective = best;
	res->nodes = r->nodes;
	double b = isinf(r->bound) ? w->lb : dmax(w->lb, r->bound * w->scale);
	res->status = r->status == BP_ILP_OPTIMAL ? BP_ILP_OPTIMAL
		      : from ? BP_ILP_FEASIBLE : BP_ILP_WARM_START;
	if (res->status == BP_ILP_OPTIMAL || b > best)
		b = best;
	res->bound = b;
}

int bp_hyd_dispatch_ilp(const struct bp_hyd_dispatch *d, const struct bp_ilp_opts *o,
			const int *warm, int *pipe_of, struct bp_hyd_ilp_res *res,
			struct bp_error *err)
{
	size_t n = d->n, np = d->npipes;
	int rc = -1;
	struct dispatch_work w;
	struct bp_ilp_result r;
	memset(&r, 0, sizeof(r));
	memset(res, 0, sizeof(*res));
	if (dispatch_alloc(d, &w, err) < 0)
		goto out;
	w.warm_obj = bp_hyd_eq2(d, warm, NULL);
	w.lb = bp_hyd_dispatch_bound(d);
	for (size_t i = 0; i < n; i++) {
		double c = bp_hyd_seq_cost(d, 0, d->len[i]) * d->pipes[0].pp;
		if (c > w.scale)
			w.scale = c;
	}
	if (!n || w.scale <= 0 || w.warm_obj <= w.lb * (1 + 1e-12)) {
		memcpy(pipe_of, warm, n * sizeof(int));
		res->status = BP_ILP_OPTIMAL;
		res->objective = res->bound = w.warm_obj;
		rc = 0;
		goto out;
	}
	warm_labels(d, &w, warm);
	if (add_columns(d, &w, err) < 0 || add_rows(d, &w, err) < 0 ||
	    warm_point(d, &w, warm, err) < 0)
		goto out;
	struct bp_ilp_opts oo = *o;
	oo.warm = w.x;
	if (bp_ilp_solve(w.ilp, &oo, &r, err) < 0)
		goto out;
	if (r.limit == BP_ILP_LIMIT_TIME) {
		bp_errorf(err, "the dispatch ilp of %zu sequences over %zu pipelines reached "
			  "ilp_time_limit_s %g before its deterministic budget; raise "
			  "ilp_time_limit_s or lower ilp_work_limit", n, np, o->time_limit_s);
		goto out;
	}
	take_dispatch(d, &w, &r, warm, pipe_of, res);
	rc = 0;
out:
	bp_ilp_result_release(&r);
	dispatch_free(&w);
	return rc;
}
