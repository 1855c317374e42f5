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

/* LPT of every bucket's documents, longest bucket first, onto the k groups gl (all marked
 * used): each to the group whose time grows least, with the per-micro-batch cost; ties to
 * the earlier group in gl. Returns cur's makespan, INFINITY when a bucket fits none. */
static double lpt_on(const struct bp_sp_problem *p, const size_t *gl, size_t k,
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
					   (double)(ceil_div(tok[g] + p->len[b], p->cap[g]) -
						    ceil_div(tok[g], p->cap[g])) * p->fix[g];
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

/* The group of the given first unit and size (groups come size ascending, then first). */
static size_t group_at(const struct bp_sp_problem *p, int first, int size)
{
	for (size_t g = 0; g < p->ng; g++)
		if (p->g[g].first == first && p->g[g].size == size)
			return g;
	return p->ng;
}

int bp_sp_greedy(const struct bp_sp_problem *p, struct bp_sp_sol *s, int *size, double *obj,
		 struct bp_error *err)
{
	struct bp_sp_sol cur;
	double *load = bp_calloc(p->ng + 1, sizeof(double), err);
	int64_t *tok = bp_calloc(p->ng + 1, sizeof(int64_t), err);
	size_t *gl = bp_calloc(p->ng + 1, sizeof(size_t), err);
	int rc = -1, maxs = 0;
	memset(&cur, 0, sizeof(cur));
	*obj = INFINITY;
	*size = 0;
	if (!load || !tok || !gl || bp_sp_sol_alloc(&cur, p->nb, p->ng, err) < 0)
		goto out;
	for (size_t g = 0; g < p->ng; g++)
		if (p->g[g].size > maxs)
			maxs = p->g[g].size;
	/* Partitions tried, in this order: every homogeneous one (size ascending), then k
	 * groups of size S from unit 0 and the rest in groups of a smaller size s2 (S
	 * ascending, k descending, s2 ascending): canonical placements, so they also satisfy
	 * the program's canonical rows. */
	for (int pass = 0; pass < 2; pass++)
		for (int S = 1; S <= maxs; S *= 2)
			for (int kk = p->units / S; kk >= 1; kk--)
				for (int s2 = pass ? 1 : S; s2 <= S; s2 *= 2) {
					int homog = kk * S == p->units - p->units % S;
					if (pass ? s2 == S || kk * S == p->units : !homog)
						continue;
					size_t k = 0;
					for (int q = 0; q < kk; q++)
						gl[k++] = group_at(p, q * S, S);
					for (int a = kk * S; pass && a + s2 <= p->units; a += s2)
						gl[k++] = group_at(p, a, s2);
					int miss = 0;
					for (size_t q = 0; q < k; q++)
						miss |= gl[q] == p->ng;
					if (miss)
						continue;
					double v = lpt_on(p, gl, k, &cur, load, tok);
					if (v < *obj) {
						*obj = v;
						*size = S;
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
	free(load);
	free(tok);
	free(gl);
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
