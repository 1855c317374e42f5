/* hyd_step.c: one step of Hydraulis's per-iteration planner (Sec. 6 and Fig. 6 steps 1-4):
 * every candidate strategy gets its sequences dispatched (Alg. 1; Eq. 3's ILP where small
 * enough) and every pipeline packed (Eq. 1 over App. C's range); the strategy's estimate is
 * its slowest pipeline's Eq. 1, and the least estimate wins (the first candidate on ties,
 * as the code's selection). Called by methods/hydraulis.c and tools/bench/bench_hyd.c.
 * Invariant: the chosen assignment puts every sequence on a pipeline whose MaxLen holds it
 * and in exactly one of that pipeline's V* micro-batches. */
#include "hyd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct scratch {
	int *pipe_of, *bin_of;
	struct bp_hyd_pipe_res *pr;
	double *eq2, *w;
	int64_t *l;
	size_t *idx;
	int *bins;
	size_t *first;    /* [npipes + 1]: pipeline j's sequences are by_pipe[first[j] ..] */
	size_t *by_pipe;  /* [n]: the sequences grouped by pipeline, each group ascending */
	struct bp_hyd_shuffles sh; /* the trials' shuffles, as the candidates' trials need them */
};

static void scratch_free(struct scratch *s)
{
	free(s->pipe_of);
	free(s->bin_of);
	free(s->pr);
	free(s->eq2);
	free(s->w);
	free(s->l);
	free(s->idx);
	free(s->bins);
	free(s->first);
	free(s->by_pipe);
	bp_hyd_shuffles_release(&s->sh);
}

static int scratch_alloc(struct scratch *s, size_t n, size_t np, struct bp_error *err)
{
	memset(s, 0, sizeof(*s));
	n = n ? n : 1;
	np = np ? np : 1;
	s->pipe_of = bp_calloc(n, sizeof(int), err);
	s->bin_of = bp_calloc(n, sizeof(int), err);
	s->pr = bp_calloc(np, sizeof(*s->pr), err);
	s->eq2 = bp_calloc(np, sizeof(double), err);
	s->w = bp_calloc(n, sizeof(double), err);
	s->l = bp_calloc(n, sizeof(int64_t), err);
	s->idx = bp_calloc(n, sizeof(size_t), err);
	s->bins = bp_calloc(n, sizeof(int), err);
	s->first = bp_calloc(np + 1, sizeof(size_t), err);
	s->by_pipe = bp_calloc(n, sizeof(size_t), err);
	return s->pipe_of && s->bin_of && s->pr && s->eq2 && s->w && s->l && s->idx && s->bins &&
		       s->first && s->by_pipe ? 0 : -1;
}

/* The m_ij columns of Eq. 3 (every sequence's allowed pipelines: a prefix of the pipelines,
 * ordered by MaxLen longest first), counted only up to limit + 1: whether they exceed limit
 * is all the caller asks. A binary search per sequence. */
static int64_t count_cols(const struct bp_hyd_cand *c, const int64_t *len, size_t n,
			  int64_t limit)
{
	int64_t cols = 0;
	for (size_t i = 0; i < n && cols <= limit; i++) {
		size_t lo = 0, hi = c->npipes; /* pipelines [0, lo) hold len[i], [hi, np) do not */
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (c->dp[mid].cap >= len[i])
				lo = mid + 1;
			else
				hi = mid;
		}
		cols += (int64_t)lo;
	}
	return cols;
}

/* Dispatch, pack and estimate one candidate (Sec. 6). Returns 0 (selectable), 1 (not:
 * res->status says why), -1 or BP_INFEASIBLE. */
static int run_candidate(const struct bp_hyd_cand *c, const int64_t *len, size_t n,
			 uint64_t seed, const struct bp_hyd_step_opts *o, double best,
			 struct bp_hyd_cand_res *res, struct scratch *t, struct bp_error *err)
{
	int64_t longest = 0;
	for (size_t i = 0; i < n; i++)
		if (len[i] > longest)
			longest = len[i];
	memset(res, 0, sizeof(*res));
	res->trial = -1;
	snprintf(res->dispatch, sizeof(res->dispatch), "none");
	if (longest > c->maxcap) {
		snprintf(res->status, sizeof(res->status), "too-short");
		return 1;
	}
	struct bp_hyd_dispatch d = {len, n, c->dp, c->npipes, o->code_c, o->code_c, o->trials,
				    seed, NULL};
	double obj;
	/* Every estimate is at least Eq. 2 of its dispatch (App. D.1), so at least Eq. 3's
	 * optimum and its certified bound: a candidate whose bound, then whose dispatch,
	 * reaches the best estimate so far cannot be chosen (ties go to the earlier one). */
	res->bound_us = bp_hyd_dispatch_bound(&d);
	if (o->prune && res->bound_us >= best) {
		snprintf(res->status, sizeof(res->status), "pruned");
		res->estimate_us = res->bound_us;
		return 1;
	}
	/* One shuffle table per step: every candidate draws the same permutations (seed + t),
	 * so each is made once, when a first candidate's greedy reaches its trial (when the
	 * table is small enough: trials x n <= 2^24 entries). */
	if (!t->sh.o && (double)n * (o->trials < 1 ? 1 : o->trials) <= 16777216.0 &&
	    bp_hyd_shuffles_init(&t->sh, n, o->trials, seed, err) < 0)
		return -1;
	int r = bp_hyd_dispatch_greedy_shared(&d, t->sh.o ? &t->sh : NULL, t->pipe_of, &obj,
					      &res->trial, err);
	if (r < 0)
		return r;
	res->dispatch_us = obj;
	if (res->bound_us > obj)
		res->bound_us = obj;
	snprintf(res->dispatch, sizeof(res->dispatch), "greedy");
	if (o->prune && obj >= best) {
		snprintf(res->status, sizeof(res->status), "pruned");
		res->estimate_us = obj;
		return 1;
	}
	/* Eq. 3 exactly where the instance is small enough (its m_ij columns). */
	if (o->ilp && o->ilp->max_vars > 0 && n && c->npipes > 1 && res->bound_us < obj &&
	    count_cols(c, len, n, o->ilp->max_vars) <= o->ilp->max_vars) {
		struct bp_hyd_ilp_res ir;
		int *alt = bp_calloc(n, sizeof(int), err);
		if (!alt || bp_hyd_dispatch_ilp(&d, o->ilp, t->pipe_of, alt, &ir, err) < 0) {
			free(alt);
			return -1;
		}
		memcpy(t->pipe_of, alt, n * sizeof(int));
		free(alt);
		res->dispatch_us = ir.objective;
		res->bound_us = ir.bound;
		snprintf(res->dispatch, sizeof(res->dispatch), "ilp-%s",
			 bp_ilp_status_name(ir.status));
	}
	bp_hyd_eq2(&d, t->pipe_of, t->eq2);
	snprintf(res->status, sizeof(res->status), "ok");
	double est = 0.0;
	/* the sequences by pipeline (a counting sort, each pipeline's in ascending order) */
	memset(t->first, 0, (c->npipes + 1) * sizeof(size_t));
	for (size_t i = 0; i < n; i++)
		t->first[t->pipe_of[i] + 1]++;
	for (size_t j = 0; j < c->npipes; j++)
		t->first[j + 1] += t->first[j];
	for (size_t i = 0; i < n; i++)
		t->by_pipe[t->first[t->pipe_of[i]]++] = i;
	for (size_t j = c->npipes; j > 0; j--)
		t->first[j] = t->first[j - 1];
	t->first[0] = 0;
	for (size_t j = 0; j < c->npipes; j++) {
		size_t m = 0;
		for (size_t q = t->first[j]; q < t->first[j + 1]; q++) {
			size_t i = t->by_pipe[q];
			t->idx[m] = i;
			t->l[m] = len[i];
			t->w[m++] = bp_hyd_seq_cost(&d, j, len[i]);
		}
		struct bp_hyd_pipe_res *p = &t->pr[j];
		memset(p, 0, sizeof(*p));
		p->eq2_us = t->eq2[j];
		if (!m) {
			if (o->code_c) /* the code rejects a strategy that leaves a pipeline idle */
				snprintf(res->status, sizeof(res->status), "empty-pipeline");
			continue;
		}
		const struct bp_hyd_fit *f = c->dp[j].T;
		const struct bp_ilp_opts *pi = o->pack_ilp && o->pack_ilp->max_vars > 0
						       ? o->pack_ilp : NULL;
		struct bp_hyd_pack_in in = {t->w, t->l, m, c->dp[j].pp, c->dp[j].cap, c->util[j],
					    o->code_c ? fmax(f->c, 0.0) : 0.0, o->v_tries, pi};
		struct bp_hyd_pack_out po;
		r = bp_hyd_pack(&in, t->bins, &po, err);
		if (r < 0)
			return r;
		for (size_t q = 0; q < m; q++)
			t->bin_of[t->idx[q]] = t->bins[q];
		*p = (struct bp_hyd_pipe_res){t->eq2[j], po.v, po.v_min, po.v_max, po.z, po.obj};
		if (po.obj > est)
			est = po.obj;
	}
	res->estimate_us = est;
	return strcmp(res->status, "ok") ? 1 : 0;
}

int bp_hyd_step(const struct bp_hyd_cand *c, size_t nc, const int64_t *len, size_t n,
		uint64_t seed, const struct bp_hyd_step_opts *o, struct bp_hyd_cand_res *res,
		int *selected, int *pipe_of, int *bin_of, struct bp_hyd_pipe_res *pr,
		struct bp_error *err)
{
	struct scratch t;
	size_t maxp = 0;
	int rc = -1, sel = -1;
	for (size_t i = 0; i < nc; i++)
		if (c[i].npipes > maxp)
			maxp = c[i].npipes;
	if (scratch_alloc(&t, n, maxp, err) < 0)
		goto out;
	for (size_t i = 0; i < nc; i++) {
		int r = run_candidate(&c[i], len, n, seed, o, sel < 0 ? INFINITY : res[sel].estimate_us,
				      &res[i], &t, err);
		if (r < 0) {
			rc = r;
			goto out;
		}
		if (r == 0 && (sel < 0 || res[i].estimate_us < res[sel].estimate_us)) {
			sel = (int)i; /* Fig. 6 step 4: the least estimate, the first on ties */
			memcpy(pipe_of, t.pipe_of, n * sizeof(int));
			memcpy(bin_of, t.bin_of, n * sizeof(int));
			memcpy(pr, t.pr, c[i].npipes * sizeof(*pr));
		}
	}
	if (sel < 0) {
		int64_t longest = 0, cap = 0;
		for (size_t i = 0; i < n; i++)
			longest = len[i] > longest ? len[i] : longest;
		for (size_t i = 0; i < nc; i++)
			cap = c[i].maxcap > cap ? c[i].maxcap : cap;
		rc = longest > cap
			? bp_infeasiblef(err, "a document of %lld tokens is longer than every "
					 "candidate strategy's MaxLen (the longest is %lld)",
					 (long long)longest, (long long)cap)
			: bp_infeasiblef(err, "every candidate strategy leaves a pipeline without "
					 "sequences (hyd_c=code rejects that)");
		goto out;
	}
	*selected = sel;
	rc = 0;
out:
	scratch_free(&t);
	return rc;
}
