/* ilp_pack.c: the min-max packing ILP (ilp_pack.h) behind fixed-ilp (WLB-LLM Sec. 3.2,
 * Eq. 1) and wlb-ilp (Sec. 4.1, Eq. 2), and the step driver both methods share.
 *
 * Formulation (items i sorted by cost descending, bins j < M):
 *   min z
 *   sum_j x_ij = 1                    each document exactly once
 *   sum_i len_i x_ij <= cap           Eq. 1's L or Eq. 2's L_max
 *   z - sum_i w_i x_ij >= 0           z is the largest micro-batch cost
 *   z >= bp_pack_bound(w, M)          a certified bound: largest item, mean, and two of the
 *                                     M+1 largest sharing a bin
 *   x_ij = 0 for j > i                symmetry breaking: bins are labelled by their costliest
 *                                     item, so item i can only open bin i or join an earlier
 *   x_ij binary
 * w_i = bp_cost_doc(len_i), the document's fwd+bwd time alone: attention (quadratic) plus
 * linear layers and collectives, i.e. Eq. 2's W_a + W_l; Eq. 1's d_i^2 becomes the same cost
 * here so both ILPs balance the time the simulator predicts. Costs are scaled by the largest
 * one before they reach GLPK; objective and bound are reported in us.
 *
 * What this buys (measured, tools/bench/REPRODUCING.md "ILP methods"): from scratch GLPK
 * proves nothing beyond a few dozen documents; with presolve off, the greedy injected as the
 * first incumbent, the lower bound on z and the symmetry breaking, long-tail steps are mostly
 * proven optimal at the root. Invariant: the packing returned is never worse than the greedy
 * it starts from. */
#include "ilp_pack.h"

#include "jsonutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pack.h"

/* What one bp_ilp_pack_solve builds and keeps: items sorted by cost (order), item k's first
 * column (first[k], first[n] the end), per-bin scratch and the row buffers. Costs are scaled
 * by wmax before GLPK; warm_max is the warm start's objective and lb the certified bound,
 * both in us. */
struct pack_work {
	size_t n, M;
	size_t *order, *first;
	int *label;
	int64_t *cols;
	double *vals, *load;
	int64_t *fill;
	double *warm;
	double wmax, warm_max, lb;
	struct bp_ilp *ilp;
};

static int work_alloc(struct pack_work *w, size_t n, size_t M, struct bp_error *err)
{
	memset(w, 0, sizeof(*w));
	w->n = n;
	w->M = M;
	w->order = bp_calloc(n ? n : 1, sizeof(size_t), err);
	w->first = bp_calloc(n + 1, sizeof(size_t), err);
	w->label = bp_calloc(M ? M : 1, sizeof(int), err);
	w->cols = bp_calloc(n + 1, sizeof(int64_t), err);
	w->vals = bp_calloc(n + 1, sizeof(double), err);
	w->load = bp_calloc(M ? M : 1, sizeof(double), err);
	w->fill = bp_calloc(M ? M : 1, sizeof(int64_t), err);
	return w->order && w->first && w->label && w->cols && w->vals && w->load && w->fill
		       ? 0 : -1;
}

static void work_free(struct pack_work *w)
{
	bp_ilp_free(w->ilp);
	free(w->order);
	free(w->first);
	free(w->label);
	free(w->cols);
	free(w->vals);
	free(w->load);
	free(w->fill);
	free(w->warm);
}

/* The warm start's bins, checked, and its objective (w->warm_max, us); w->wmax the largest
 * item cost. */
static int warm_objective(const struct bp_ilp_pack *in, struct pack_work *w,
			  struct bp_error *err)
{
	for (size_t i = 0; i < w->n; i++) {
		if (in->warm_bin[i] < 0 || (size_t)in->warm_bin[i] >= w->M)
			return bp_errorf(err, "internal: warm start puts item %zu in bin %d of %zu",
					 i, in->warm_bin[i], w->M);
		w->load[in->warm_bin[i]] += in->w[i];
		w->fill[in->warm_bin[i]] += in->len[i];
		if (in->w[i] > w->wmax)
			w->wmax = in->w[i];
	}
	for (size_t j = 0; j < w->M; j++) {
		if (w->fill[j] > in->cap)
			return bp_errorf(err, "internal: warm start bin %zu holds %lld tokens over "
					 "%lld", j, (long long)w->fill[j], (long long)in->cap);
		if (w->load[j] > w->warm_max)
			w->warm_max = w->load[j];
	}
	return 0;
}

/* Bin j's capacity row (when its items could overflow it), then z >= the bin's cost. */
static int add_bin_rows(const struct bp_ilp_pack *in, struct pack_work *w, size_t j,
			struct bp_error *err)
{
	size_t nc = 0;
	int64_t tokens = 0;
	for (size_t k = 0; k < w->n; k++)
		if (w->first[k] + j < w->first[k + 1]) {
			w->cols[nc] = (int64_t)(w->first[k] + j);
			w->vals[nc++] = (double)in->len[w->order[k]];
			tokens += in->len[w->order[k]];
		}
	if (tokens > in->cap &&
	    bp_ilp_add_row(w->ilp, nc, w->cols, w->vals, -INFINITY, (double)in->cap, err) < 0)
		return -1;
	nc = 0;
	for (size_t k = 0; k < w->n; k++)
		if (w->first[k] + j < w->first[k + 1]) {
			w->cols[nc] = (int64_t)(w->first[k] + j);
			w->vals[nc++] = -in->w[w->order[k]] / w->wmax;
		}
	w->cols[nc] = 0;
	w->vals[nc++] = 1.0;
	return bp_ilp_add_row(w->ilp, nc, w->cols, w->vals, 0.0, INFINITY, err) < 0 ? -1 : 0;
}

/* The formulation above: columns z, then item k's x_kj for j <= jmax(k); rows each document
 * once, then every bin's. */
static int build_model(const struct bp_ilp_pack *in, struct pack_work *w, struct bp_error *err)
{
	size_t n = w->n, M = w->M;
	bp_order_by_cost(in->w, in->len, n, w->order);
	w->ilp = bp_ilp_new(err);
	if (!w->ilp ||
	    bp_ilp_add_col(w->ilp, BP_ILP_CONTINUOUS, w->lb / w->wmax, INFINITY, 1.0, err) < 0)
		return -1;
	for (size_t k = 0; k < n; k++) {
		size_t jmax = in->symmetry && k < M - 1 ? k : M - 1;
		w->first[k] = bp_ilp_ncols(w->ilp);
		for (size_t j = 0; j <= jmax; j++)
			if (bp_ilp_add_col(w->ilp, BP_ILP_BINARY, 0, 1, 0.0, err) < 0)
				return -1;
	}
	w->first[n] = bp_ilp_ncols(w->ilp);
	for (size_t k = 0; k < n; k++) { /* each document once */
		size_t nc = w->first[k + 1] - w->first[k];
		for (size_t q = 0; q < nc; q++) {
			w->cols[q] = (int64_t)(w->first[k] + q);
			w->vals[q] = 1.0;
		}
		if (bp_ilp_add_row(w->ilp, nc, w->cols, w->vals, 1.0, 1.0, err) < 0)
			return -1;
	}
	for (size_t j = 0; j < M; j++) /* capacity, then z >= the bin's cost */
		if (add_bin_rows(in, w, j, err) < 0)
			return -1;
	return 0;
}

/* The warm start with bins relabelled by their costliest item (symmetry breaking), as a
 * point of the model (w->warm). */
static int warm_point(const struct bp_ilp_pack *in, struct pack_work *w, struct bp_error *err)
{
	w->warm = bp_calloc(bp_ilp_ncols(w->ilp), sizeof(double), err);
	if (!w->warm)
		return -1;
	for (size_t j = 0; j < w->M; j++)
		w->label[j] = -1;
	int next = 0;
	double zwarm = 0.0;
	for (size_t k = 0; k < w->n; k++) {
		int b = in->warm_bin[w->order[k]];
		if (w->label[b] < 0)
			w->label[b] = next++;
		w->warm[w->first[k] + (size_t)w->label[b]] = 1.0;
	}
	for (size_t j = 0; j < w->M; j++) {
		double s = 0.0;
		for (size_t k = 0; k < w->n; k++)
			if (w->first[k] + j < w->first[k + 1] && w->warm[w->first[k] + j] == 1.0)
				s += in->w[w->order[k]] / w->wmax;
		if (s > zwarm)
			zwarm = s;
	}
	w->warm[0] = zwarm > w->lb / w->wmax ? zwarm : w->lb / w->wmax;
	return 0;
}

/* The solver's point decoded into bin_of (binaries come back rounded) with its objective
 * recomputed in us (*mx); 0 when some item is in no bin or one bin, or a bin overflows. */
static int decode_point(const struct bp_ilp_pack *in, struct pack_work *w, const double *x,
			int *bin_of, double *mx)
{
	for (size_t j = 0; j < w->M; j++) {
		w->load[j] = 0.0;
		w->fill[j] = 0;
	}
	for (size_t k = 0; k < w->n; k++) {
		int bj = -1;
		for (size_t q = w->first[k]; q < w->first[k + 1]; q++)
			if (x[q] == 1.0)
				bj = bj < 0 ? (int)(q - w->first[k]) : -2;
		if (bj < 0)
			return 0;
		bin_of[w->order[k]] = bj;
		w->load[bj] += in->w[w->order[k]];
		w->fill[bj] += in->len[w->order[k]];
	}
	int ok = 1;
	*mx = 0.0;
	for (size_t j = 0; j < w->M && ok; j++) {
		if (w->fill[j] > in->cap)
			ok = 0;
		if (w->load[j] > *mx)
			*mx = w->load[j];
	}
	return ok;
}

/* res from the search r: the solver's packing when it beats the warm start, else warm_bin,
 * and the bound and gap in us. */
static void take_result(const struct bp_ilp_pack *in, struct pack_work *w,
			const struct bp_ilp_result *r, int *bin_of, struct bp_ilp_pack_result *res)
{
	res->nodes = r->nodes;
	res->iterations = r->iterations;
	res->work = r->work;
	res->limit = r->limit;
	snprintf(res->warning, sizeof(res->warning), "%s", r->warning);
	res->bound = isinf(r->bound) ? w->lb : r->bound * w->wmax;
	if (res->bound < w->lb)
		res->bound = w->lb;
	int from_solver = r->x && r->status != BP_ILP_WARM_START;
	double best = w->warm_max;
	if (r->x) {
		double mx = 0.0;
		if (!decode_point(in, w, r->x, bin_of, &mx))
			from_solver = 0;
		else if (from_solver)
			res->solver_objective = mx;
		if (from_solver && mx < w->warm_max)
			best = mx;
		else
			from_solver = 0;
	}
	if (!from_solver)
		memcpy(bin_of, in->warm_bin, w->n * sizeof(int));
	res->objective = best;
	if (r->status == BP_ILP_OPTIMAL)
		res->status = BP_ILP_OPTIMAL;
	else
		res->status = from_solver ? BP_ILP_FEASIBLE : BP_ILP_WARM_START;
	if (res->status == BP_ILP_OPTIMAL && res->bound > best)
		res->bound = best;
	if (res->bound > best)
		res->bound = best;
	res->gap = best > 0 ? (best - res->bound) / best : 0.0;
}

int bp_ilp_pack_solve(const struct bp_ilp_pack *in, const struct bp_ilp_opts *o, int *bin_of,
		      struct bp_ilp_pack_result *res, struct bp_error *err)
{
	size_t n = in->n, M = in->nbins;
	int rc = -1;
	struct pack_work w;
	struct bp_ilp_result r;
	memset(&r, 0, sizeof(r));
	memset(res, 0, sizeof(*res));
	res->solver_objective = INFINITY;
	if (work_alloc(&w, n, M, err) < 0)
		goto out;
	if (!M) {
		bp_errorf(err, "internal: packing into no bins");
		goto out;
	}
	if (warm_objective(in, &w, err) < 0)
		goto out;
	w.lb = in->lower_bound ? bp_pack_bound(in->w, n, M) : 0.0;
	if (!n || w.wmax <= 0.0 || w.warm_max <= w.lb * (1.0 + 1e-12)) {
		/* Nothing to search: the greedy meets the certified bound (or there is no cost). */
		memcpy(bin_of, in->warm_bin, n * sizeof(int));
		res->status = BP_ILP_OPTIMAL;
		res->objective = res->solver_objective = w.warm_max;
		res->bound = w.warm_max;
		res->gap = 0.0;
		rc = 0;
		goto out;
	}
	if (build_model(in, &w, err) < 0 || warm_point(in, &w, err) < 0)
		goto out;
	struct bp_ilp_opts oo = *o;
	oo.warm = in->warm ? w.warm : NULL;
	if (bp_ilp_solve(w.ilp, &oo, &r, err) < 0)
		goto out;
	if (r.limit == BP_ILP_LIMIT_TIME) {
		/* The clock, not the budget, ended the search: what it found depends on how fast
		 * and how busy the machine was, and plans must not. An error, so no
		 * plan ever holds such a step. */
		bp_errorf(err, "the ilp search of %zu documents into %zu micro-batches reached "
			  "ilp_time_limit_s %g before its deterministic budget (ilp_node_limit "
			  "%lld, ilp_work_limit %g million) ended it, so its result would depend on "
			  "machine speed; raise ilp_time_limit_s or lower the budget", n, M,
			  o->time_limit_s, (long long)o->node_limit, o->work_limit / 1e6);
		goto out;
	}
	take_result(in, &w, &r, bin_of, res);
	rc = 0;
out:
	bp_ilp_result_release(&r);
	work_free(&w);
	return rc;
}

int bp_ilp_read_params(struct bp_plan *out, struct bp_ilp_opts *o, struct bp_error *err)
{
	int64_t work_m = BP_ILP_WORK_LIMIT_M;
	bp_ilp_opts_default(o);
	if (bp_method_param_real(out, "ilp_time_limit_s", o->time_limit_s, 0.001, 86400.0,
				 &o->time_limit_s, err) < 0 ||
	    bp_method_param_real(out, "ilp_gap", o->rel_gap, 0.0, 1.0, &o->rel_gap, err) < 0 ||
	    bp_method_param_int(out, "ilp_node_limit", o->node_limit, 1, INT32_MAX,
				&o->node_limit, err) < 0 ||
	    bp_method_param_int(out, "ilp_work_limit", work_m, 1, 1000000000, &work_m, err) < 0 ||
	    bp_method_param_int(out, "ilp_max_vars", o->max_vars, 0, INT64_MAX, &o->max_vars,
				err) < 0)
		return -1;
	o->work_limit = (double)work_m * 1e6;
	return 0;
}

int bp_ilp_pack_step(const struct bp_method_ctx *ctx, const struct bp_batch *b,
		     struct bp_step *st, int dp, int64_t window, int64_t cap,
		     const struct bp_ilp_opts *o, struct bp_error *err)
{
	size_t n = b->ndocs, m = 0;
	int rc = -1;
	double *cost = bp_calloc(n ? n : 1, sizeof(double), err), *load = NULL;
	int64_t *len = bp_calloc(n ? n : 1, sizeof(int64_t), err);
	int *warm = bp_calloc(n ? n : 1, sizeof(int), err);
	int *bin_of = bp_calloc(n ? n : 1, sizeof(int), err);
	struct bp_ilp_pack_result res;
	if (!cost || !len || !warm || !bin_of)
		goto out;
	if (!n) {
		rc = 0;
		goto out;
	}
	/* The greedy warm start fixes the micro-batch count (as fixed.c). */
	rc = bp_pack_fixed_greedy(ctx->cm, b, dp, window, cap, cost, len, warm, &load, &m, err);
	if (rc < 0)
		goto out;
	rc = -1;
	size_t nbins = m * (size_t)dp;
	struct bp_solver *sv = bp_step_set_record(st, &bp_record_ilp, err);
	if (!sv)
		goto out;
	if (o->max_vars > 0 && (double)n * (double)nbins > (double)o->max_vars) {
		/* Too large for a reproducible search: keep the greedy, report its bound. */
		double obj = 0.0;
		for (size_t k = 0; k < nbins; k++)
			if (load[k] > obj)
				obj = load[k];
		memcpy(bin_of, warm, n * sizeof(*bin_of));
		snprintf(sv->status, sizeof(sv->status), "too-large");
		sv->objective = obj;
		sv->bound = bp_pack_bound(cost, n, nbins);
		sv->gap = obj > 0 ? (obj - sv->bound) / obj : 0.0;
	} else {
		struct bp_ilp_pack in = {cost, len, n, nbins, cap, warm, 1, 1, 1};
		if (bp_ilp_pack_solve(&in, o, bin_of, &res, err) < 0)
			goto out;
		snprintf(sv->status, sizeof(sv->status), "%s",
			 bp_ilp_status_name(res.status));
		sv->objective = res.objective;
		sv->bound = res.bound;
		sv->gap = res.gap;
	}
	/* Deal and emit as fixed.c: bins in decreasing cost, spans in packing order. */
	rc = bp_emit_balanced(b, cost, len, bin_of, m, st, ctx->shard, err);
out:
	free(cost);
	free(len);
	free(warm);
	free(bin_of);
	free(load);
	return rc;
}

int bp_ilp_pack_improve(const double *cost, const int64_t *len, size_t n, size_t nbins,
			int64_t cap, int *bin_of, const struct bp_ilp_opts *o,
			struct bp_solver *sv, struct bp_error *err)
{
	int rc = -1;
	double *load = bp_calloc(nbins ? nbins : 1, sizeof(double), err);
	int *warm = bp_calloc(n ? n : 1, sizeof(int), err);
	struct bp_ilp_pack_result res;
	if (!load || !warm)
		goto out;
	double obj = 0.0;
	for (size_t i = 0; i < n; i++) {
		if (bin_of[i] < 0 || (size_t)bin_of[i] >= nbins) {
			bp_errorf(err, "internal: greedy puts item %zu in bin %d of %zu", i, bin_of[i],
				  nbins);
			goto out;
		}
		load[bin_of[i]] += cost[i];
	}
	for (size_t j = 0; j < nbins; j++)
		if (load[j] > obj)
			obj = load[j];
	sv->has_greedy = 1;
	sv->greedy = obj;
	if (o->max_vars > 0 && (double)n * (double)nbins > (double)o->max_vars) {
		/* Too large for a reproducible search: keep the greedy, report its bound. */
		snprintf(sv->status, sizeof(sv->status), "too-large");
		sv->objective = obj;
		sv->bound = bp_pack_bound(cost, n, nbins);
		sv->gap = obj > 0 ? (obj - sv->bound) / obj : 0.0;
		rc = 0;
		goto out;
	}
	memcpy(warm, bin_of, n * sizeof(*warm));
	struct bp_ilp_pack in = {cost, len, n, nbins, cap, warm, 1, 1, 1};
	if (bp_ilp_pack_solve(&in, o, bin_of, &res, err) < 0)
		goto out;
	snprintf(sv->status, sizeof(sv->status), "%s", bp_ilp_status_name(res.status));
	sv->objective = res.objective;
	sv->bound = res.bound;
	sv->gap = res.gap;
	rc = 0;
out:
	free(load);
	free(warm);
	return rc;
}

/* ---- the per-step record (plan.h struct bp_record_ops) ---- */

static json_t *solver_to_json(const void *rec)
{
	const struct bp_solver *s = rec;
	json_t *o = json_object();
	int ok = o != NULL;
	bp_json_set(o, "status", json_string(s->status), &ok);
	bp_json_set(o, "objective_us", bp_json_real(s->objective), &ok);
	bp_json_set(o, "bound_us", bp_json_real(s->bound), &ok);
	bp_json_set(o, "gap", bp_json_real(s->gap), &ok);
	if (s->has_greedy)
		bp_json_set(o, "greedy_us", bp_json_real(s->greedy), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int solver_from_json(void *rec, json_t *o, const char *where, struct bp_error *err)
{
	static const char *const keys[] = {"status", "objective_us", "bound_us", "gap",
					   "greedy_us", NULL};
	static const char *const statuses[] = {"optimal", "feasible", "warm-start",
					       "too-large", NULL};
	struct bp_solver *s = rec;
	const double big = 1e300;
	if (bp_json_check_keys(o, keys, where, err) < 0 ||
	    bp_json_get_str(o, "status", 1, s->status, sizeof(s->status), where, err) < 0 ||
	    bp_json_get_real(o, "objective_us", 1, 0, big, &s->objective, where, err) < 0 ||
	    bp_json_get_real(o, "bound_us", 1, 0, big, &s->bound, where, err) < 0 ||
	    bp_json_get_real(o, "gap", 1, -big, big, &s->gap, where, err) < 0 ||
	    bp_json_get_real(o, "greedy_us", 0, 0, big, &s->greedy, where, err) < 0)
		return -1;
	s->has_greedy = json_object_get(o, "greedy_us") != NULL;
	for (size_t i = 0; statuses[i]; i++)
		if (!strcmp(s->status, statuses[i]))
			return 0;
	return bp_errorf(err, "%s.status \"%s\" is not optimal, feasible, warm-start or "
			 "too-large", where, s->status);
}

/* The record's objective is the step's packing objective (the largest micro-batch cost). */
static int solver_validate(const void *rec, const struct bp_step *st, struct bp_error *err)
{
	const struct bp_solver *s = rec;
	if (s->bound > s->objective * (1 + 1e-9) + 1e-3)
		return bp_errorf(err, "bound %.3f us exceeds the objective %.3f us", s->bound,
				 s->objective);
	if (s->has_greedy && s->objective > s->greedy * (1 + 1e-9) + 1e-3)
		return bp_errorf(err, "objective %.3f us is worse than the greedy's %.3f us",
				 s->objective, s->greedy);
	(void)st;
	return 0;
}

static void solver_diff(const void *a, const void *b, char *buf, size_t n)
{
	const struct bp_solver *x = a, *y = b;
	buf[0] = 0;
	if (strcmp(x->status, y->status) || x->objective != y->objective ||
	    x->bound != y->bound)
		snprintf(buf, n, "solver %s %.3f us (bound %.3f) -> %s %.3f us (bound %.3f)",
			 x->status, x->objective, x->bound, y->status, y->objective, y->bound);
}

const struct bp_record_ops bp_record_ilp = {
	.name = "ilp",
	.size = sizeof(struct bp_solver),
	.to_json = solver_to_json,
	.from_json = solver_from_json,
	.validate = solver_validate,
	.diff = solver_diff,
};

void bp_ilp_warn(const struct bp_plan *p, char *buf, size_t n)
{
	int64_t nonopt = 0, ilp_steps = 0, too_large = 0;
	double gap_max = 0.0;
	size_t k = 0;
	/* with a packing window (window.h) one problem covers several steps */
	const char *w = bp_plan_param(p, "window");
	const char *unit = w && strcmp(w, "1") ? "windows" : "steps";
	buf[0] = 0;
	for (size_t s = 0; s < p->nsteps; s++) {
		const struct bp_solver *sv = p->steps[s].record;
		if (!sv || p->steps[s].record_ops != &bp_record_ilp)
			continue;
		ilp_steps++;
		too_large += !strcmp(sv->status, "too-large");
		if (strcmp(sv->status, "optimal")) {
			nonopt++;
			if (sv->gap > gap_max)
				gap_max = sv->gap;
		}
	}
	if (too_large)
		k += (size_t)snprintf(buf, n, "%lld of %lld %s have more documents x "
				      "micro-batches than ilp_max_vars and keep the greedy packing "
				      "unsearched", (long long)too_large, (long long)ilp_steps, unit);
	nonopt -= too_large;
	if (nonopt && k < n)
		snprintf(buf + k, n - k, "%s%lld of %lld %s not proven optimal (ilp_node_limit "
			 "or ilp_work_limit reached, largest gap %.2f%%); each keeps its best "
			 "packing, never worse than the greedy", k ? "\n" : "", (long long)nonopt,
			 (long long)ilp_steps, unit, 100.0 * gap_max);
}
