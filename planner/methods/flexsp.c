/* flexsp.c: the "flexsp" method, a FlexSP-like sequence-parallel baseline (Wang et al.,
 * "FlexSP", ASPLOS 2025, arXiv 2412.01523), as DistCA's evaluation runs it: "FlexSP+", the
 * FlexSP ILP re-implemented with TP (DistCA Sec. 6.1, "Baselines"). The request
 * (cp 1, pp 1) gives the units: its dp TP groups, in rank order. Per step:
 *   1. length buckets (blocks/sp_ilp.c bp_sp_bucketize: one per distinct length when the
 *      step has few, else `buckets` runs of equal quadratic weight, each priced at its
 *      longest document);
 *   2. the warm start (bp_sp_greedy): the best of the homogeneous partitions and those of
 *      k large groups beside smaller ones, LPT by bucket;
 *   3. with `milp` 1 (default 0: it bought nothing measurable over the warm start, whose
 *      plan it then is; tools/bench/flexsp-budget), FlexSP's MILP (bp_sp_solve, sp_ilp.h):
 *      a partition of the units into aligned power-of-two groups (sizes up to
 *      `max_group`; by default Ulysses's own limit, the largest power of two dividing a TP
 *      rank's query heads, heads / tp, so every rank of a group keeps whole heads;
 *      bp_flexsp_max_group) and counts of every bucket's documents per group, minimising
 *      the slowest group's time, by GLPK with the deterministic budget of ilp.h
 *      (ilp_node_limit, ilp_work_limit; never the clock), never worse than the warm start;
 *   4. the documents themselves: bucket by bucket, longest first, each to the group (of
 *      those the program gave a place in its bucket) whose exact time grows least; inside a
 *      group first-fit-decreasing into micro-batches under the group's memory cap;
 *   5. the step's layout: one pipeline {tp, cp = group size, pp 1} per group, Ulysses
 *      sharding (costmodel.h BP_SHARD_ULYSSES), units no group uses as empty pipelines of
 *      the largest aligned free runs, so every unit stays a data-parallel replica
 *      (costmodel.h sync_ranks: the gradient sync and the optimizer's sharding span all
 *      units whatever the partition). Equal partitions share a layout.
 * Costs (the shared cost model, bp_cost_mb's parts): t(b, g) = the attention of bucket b's
 * representative on group g (exact: spans attend apart) plus its tokens at the group's
 * token rate, the chord of the token-wise time (GEMMs, TP all-reduces, Ulysses
 * all-to-alls, LM head) from one token to a full micro-batch; fix_g = the token-wise time
 * of one token, per micro-batch. Pricing each document alone instead (less a one-token
 * micro-batch) underestimated large groups by up to a third: a document's share of a rank
 * sits on the kernels' and collectives' flat floor, a full micro-batch does not. A group's
 * cap is the most tokens whose activations fit beside the model state on each of its GPUs
 * (pp 1: one micro-batch in flight). A document no group holds makes the step infeasible.
 * The step's record (kind "flexsp") keeps the partition, the program's size, the greedy's
 * and the program's makespan estimates, the bound, what GLPK spent and whether the budget
 * ended the search. */
#include "method.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ilp_pack.h"
#include "jsonutil.h"
#include "pack.h"
#include "sp_ilp.h"

/* ---- the per-step record ---- */

struct fsp_rec {
	int units, groups, buckets, exact, greedy_size;
	int64_t cols, rows, nodes;
	double work, greedy_us, objective_us, bound_us, gap;
	char status[16], limit[8];
	int *part; /* [2 * npart]: first unit and size of each pipeline of the step's layout */
	size_t npart;
};

static const char *const statuses[] = {"optimal", "feasible", "warm-start", "too-large", NULL};
static const char *const limits[] = {"none", "nodes", "work", NULL};

static void rec_release(void *r)
{
	struct fsp_rec *f = r;
	free(f->part);
	f->part = NULL;
	f->npart = 0;
}

static json_t *rec_to_json(const void *r)
{
	const struct fsp_rec *f = r;
	json_t *o = json_object(), *pa = json_array();
	int ok = o && pa;
	bp_json_set(o, "units", json_integer(f->units), &ok);
	bp_json_set(o, "groups", json_integer(f->groups), &ok);
	bp_json_set(o, "buckets", json_integer(f->buckets), &ok);
	bp_json_set(o, "exact", json_integer(f->exact), &ok);
	bp_json_set(o, "greedy_size", json_integer(f->greedy_size), &ok);
	bp_json_set(o, "ilp_cols", json_integer(f->cols), &ok);
	bp_json_set(o, "ilp_rows", json_integer(f->rows), &ok);
	bp_json_set(o, "nodes", json_integer(f->nodes), &ok);
	bp_json_set(o, "work", json_integer((json_int_t)f->work), &ok);
	bp_json_set(o, "greedy_us", bp_json_real(f->greedy_us), &ok);
	bp_json_set(o, "objective_us", bp_json_real(f->objective_us), &ok);
	bp_json_set(o, "bound_us", bp_json_real(f->bound_us), &ok);
	bp_json_set(o, "gap", bp_json_real(f->gap), &ok);
	bp_json_set(o, "status", json_string(f->status), &ok);
	bp_json_set(o, "limit", json_string(f->limit), &ok);
	for (size_t k = 0; k < f->npart; k++) {
		json_t *x = json_array();
		bp_json_append(x, json_integer(f->part[2 * k]), &ok);
		bp_json_append(x, json_integer(f->part[2 * k + 1]), &ok);
		bp_json_append(pa, x, &ok);
	}
	bp_json_set(o, "partition", pa, &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int one_of(const char *s, const char *const *allowed)
{
	for (size_t k = 0; allowed[k]; k++)
		if (!strcmp(s, allowed[k]))
			return 1;
	return 0;
}

static int rec_from_json(void *r, json_t *o, const char *where, struct bp_error *err)
{
	static const char *const keys[] = {"kind", "units", "groups", "buckets", "exact",
					   "greedy_size", "ilp_cols", "ilp_rows", "nodes", "work",
					   "greedy_us", "objective_us", "bound_us", "gap", "status",
					   "limit", "partition", NULL};
	struct fsp_rec *f = r;
	const double big = 1e300;
	int64_t work;
	if (bp_json_check_keys(o, keys, where, err) < 0 ||
	    bp_json_get_int32(o, "units", 1, 1, 1 << 24, &f->units, where, err) < 0 ||
	    bp_json_get_int32(o, "groups", 1, 0, 1 << 25, &f->groups, where, err) < 0 ||
	    bp_json_get_int32(o, "buckets", 1, 0, 1 << 30, &f->buckets, where, err) < 0 ||
	    bp_json_get_int32(o, "exact", 1, 0, 1, &f->exact, where, err) < 0 ||
	    bp_json_get_int32(o, "greedy_size", 1, 0, 1 << 24, &f->greedy_size, where, err) < 0 ||
	    bp_json_get_int(o, "ilp_cols", 1, 0, INT64_MAX, &f->cols, where, err) < 0 ||
	    bp_json_get_int(o, "ilp_rows", 1, 0, INT64_MAX, &f->rows, where, err) < 0 ||
	    bp_json_get_int(o, "nodes", 1, 0, INT64_MAX, &f->nodes, where, err) < 0 ||
	    bp_json_get_int(o, "work", 1, 0, INT64_MAX, &work, where, err) < 0 ||
	    bp_json_get_real(o, "greedy_us", 1, 0, big, &f->greedy_us, where, err) < 0 ||
	    bp_json_get_real(o, "objective_us", 1, 0, big, &f->objective_us, where, err) < 0 ||
	    bp_json_get_real(o, "bound_us", 1, 0, big, &f->bound_us, where, err) < 0 ||
	    bp_json_get_real(o, "gap", 1, 0, 1, &f->gap, where, err) < 0 ||
	    bp_json_get_str(o, "status", 1, f->status, sizeof(f->status), where, err) < 0 ||
	    bp_json_get_str(o, "limit", 1, f->limit, sizeof(f->limit), where, err) < 0)
		return -1;
	f->work = (double)work;
	if (!one_of(f->status, statuses))
		return bp_errorf(err, "%s.status \"%s\" is not optimal, feasible, warm-start or "
				 "too-large", where, f->status);
	if (!one_of(f->limit, limits))
		return bp_errorf(err, "%s.limit \"%s\" is not none, nodes or work", where, f->limit);
	json_t *pa = bp_json_get_array(o, "partition", where, err);
	if (!pa)
		return -1;
	f->part = bp_calloc(2 * json_array_size(pa) + 2, sizeof(int), err);
	if (!f->part)
		return -1;
	for (size_t k = 0; k < json_array_size(pa); k++) {
		json_t *x = json_array_get(pa, k);
		json_t *a = json_array_get(x, 0), *b = json_array_get(x, 1);
		if (!json_is_array(x) || json_array_size(x) != 2 || !json_is_integer(a) ||
		    !json_is_integer(b) || json_integer_value(a) < 0 ||
		    json_integer_value(a) >= (1 << 24) || json_integer_value(b) < 1 ||
		    json_integer_value(b) > (1 << 24))
			return bp_errorf(err, "%s.partition[%zu] is not [first unit, size]", where, k);
		f->part[2 * k] = (int)json_integer_value(a);
		f->part[2 * k + 1] = (int)json_integer_value(b);
		f->npart = k + 1;
	}
	return 0;
}

/* The record against its step: the partition is one aligned power-of-two group per
 * pipeline, in unit order, disjoint, covering the units; the program never ends worse than
 * its warm start, bounds lie below objectives, and a budget-ended search is not optimal.
 * Plans keep 1e-3 us, hence the slack. */
static int rec_validate(const void *r, const struct bp_step *st, struct bp_error *err)
{
	const struct fsp_rec *f = r;
	const double tol = 2e-3;
	if (f->npart != st->npipes)
		return bp_errorf(err, "partition has %zu groups but the step %zu pipelines", f->npart,
				 st->npipes);
	int next = 0;
	for (size_t k = 0; k < f->npart; k++) {
		int a = f->part[2 * k], s = f->part[2 * k + 1];
		if (s & (s - 1) || a % s)
			return bp_errorf(err, "partition[%zu] [%d, %d] is not an aligned power-of-two "
					 "group", k, a, s);
		if (a != next)
			return bp_errorf(err, "partition[%zu] starts at unit %d, not %d", k, a, next);
		next = a + s;
	}
	if (next != f->units)
		return bp_errorf(err, "partition covers %d of %d units", next, f->units);
	if (f->objective_us > f->greedy_us * (1 + 1e-9) + tol)
		return bp_errorf(err, "objective %.3f us is worse than the greedy's %.3f us",
				 f->objective_us, f->greedy_us);
	if (f->bound_us > f->objective_us * (1 + 1e-9) + tol)
		return bp_errorf(err, "bound %.3f us exceeds the objective %.3f us", f->bound_us,
				 f->objective_us);
	if (!strcmp(f->status, "optimal") && strcmp(f->limit, "none"))
		return bp_errorf(err, "status optimal but the %s limit ended the search", f->limit);
	if (strcmp(f->limit, "none") && strcmp(f->status, "feasible") &&
	    strcmp(f->status, "warm-start"))
		return bp_errorf(err, "the %s limit ended a search of status %s", f->limit,
				 f->status);
	return 0;
}

static void rec_diff(const void *a, const void *b, char *buf, size_t n)
{
	const struct fsp_rec *x = a, *y = b;
	buf[0] = 0;
	if (x->npart != y->npart || x->objective_us != y->objective_us ||
	    strcmp(x->status, y->status))
		snprintf(buf, n, "flexsp: %zu groups, %s %.3f us -> %zu groups, %s %.3f us",
			 x->npart, x->status, x->objective_us, y->npart, y->status,
			 y->objective_us);
}

const struct bp_record_ops bp_record_flexsp = {
	.name = "flexsp",
	.size = sizeof(struct fsp_rec),
	.to_json = rec_to_json,
	.from_json = rec_from_json,
	.validate = rec_validate,
	.diff = rec_diff,
	.release = rec_release,
};

void bp_flexsp_warn(const struct bp_plan *p, char *buf, size_t n)
{
	int64_t steps = 0, budget = 0, large = 0;
	double gap = 0.0;
	buf[0] = 0;
	for (size_t s = 0; s < p->nsteps; s++) {
		const struct fsp_rec *f = p->steps[s].record;
		if (!f || p->steps[s].record_ops != &bp_record_flexsp)
			continue;
		steps++;
		large += !strcmp(f->status, "too-large");
		if (strcmp(f->limit, "none")) {
			budget++;
			if (f->gap > gap)
				gap = f->gap;
		}
	}
	if (budget)
		snprintf(buf, n, "%lld of %lld steps: the ilp budget (ilp_node_limit, ilp_work_limit) "
			 "ended the search before optimality (largest gap %.2f%%); each keeps its "
			 "best partition, never worse than the greedy%s", (long long)budget,
			 (long long)steps, 100.0 * gap,
			 large ? "; some were too large for ilp_max_vars" : "");
	else if (large)
		snprintf(buf, n, "%lld of %lld steps have more columns than ilp_max_vars and keep "
			 "the greedy partition unsearched", (long long)large, (long long)steps);
}

/* ---- the method ---- */

/* What every step shares: the groups, their cost models and caps. */
struct fsp_ctx {
	int units, tp, max_group;
	size_t buckets;
	struct bp_sp_group *g;
	size_t ng;
	struct bp_costmodel *cm; /* [ng] */
	size_t ncm;
	int64_t *cap;            /* [ng] */
	double *fix;             /* [ng] us per micro-batch: the token-wise time of 1 token */
	double *slope;           /* [ng] us per token: the token-wise time's chord from 1 token
				  * to a full micro-batch (cap), so fix + slope x tokens bounds a
				  * micro-batch's token-wise time from above where that time is
				  * convex in tokens (flat kernel and latency floors, then linear) */
	int canonical;
	size_t *cls;             /* [ng] the group's cost class: the first group whose cost
				  * model and slope are the same (cm_same), so doc_us is too */
	size_t *off;             /* [levels] index of the first group of size 2^l in g */
	int nlvl;
	int *ranks;              /* [units * tp]: the request's rank of (unit, TP position) */
	struct bp_ilp_opts ilp;
	int milp;                /* run the MILP after the greedy (parameter milp) */
	int64_t coef;
	/* the step layouts made so far: partition keys (first, size pairs) */
	int **keys;
	size_t *nkeys;
	int *layout;
	size_t nlayouts;
};

/* One span of len tokens alone in a micro-batch of the group (pp 1): its attention (fwd +
 * bwd) into *attn, the rest (GEMMs, TP all-reduces, Ulysses all-to-alls, LM head) into
 * *rest. Returns 0 or -1. */
static int span_parts(const struct bp_costmodel *cm, int64_t len, double *attn, double *rest,
		      struct bp_error *err)
{
	struct bp_span sp = {0, 0, len};
	struct bp_mb_desc d = {&sp, 1, BP_SHARD_ULYSSES, BP_ATTN_DENSE, 0, NULL};
	double f = 0.0, b = 0.0;
	struct bp_mb_part pf, pb;
	if (bp_cost_mb(cm, &d, &f, &b, &pf, &pb, err) < 0)
		return -1;
	*attn = pf.attn + pb.attn;
	*rest = f + b - *attn;
	return 0;
}

/* The program's time of one document of len tokens in group g, beside the group's fixed
 * cost per micro-batch (fsp_prepare): its own attention (spans attend apart, so attention
 * adds up exactly) plus len tokens at the group's token rate. */
static double doc_us(const struct fsp_ctx *c, size_t g, int64_t len, struct bp_error *err)
{
	double attn, rest;
	if (span_parts(&c->cm[g], len, &attn, &rest, err) < 0)
		return -1.0;
	return attn + c->slope[g] * (double)len;
}

/* The most tokens a micro-batch of the group may hold: the largest per-rank count whose
 * activations fit beside the model state (Hydraulis App. B.1's memory model, one
 * micro-batch in flight at pp 1), times the group's size. */
static int64_t group_cap(const struct bp_costmodel *cm)
{
	int64_t cap = bp_cost_mem_cap(cm), state = bp_cost_state_bytes(cm, 0);
	const int64_t probe = 1 << 20;
	int64_t per = bp_cost_act_bytes(cm, 0, probe);
	if (state >= cap || per <= 0)
		return 0;
	double guess = floor((double)(cap - state) / (double)per * (double)probe);
	int64_t l = guess > 1e12 ? (int64_t)1e12 : (int64_t)guess;
	while (l > 0 && bp_i64_mul_add_sat(1, bp_cost_act_bytes(cm, 0, l), state) > cap)
		l--;
	while (l < (int64_t)1e12 &&
	       bp_i64_mul_add_sat(1, bp_cost_act_bytes(cm, 0, l + 1), state) <= cap)
		l++;
	return l * cm->sc.cp;
}

/* Ranks of the group's pipeline: unit u's TP group is the request's pipeline u. */
static void group_ranks(const struct fsp_ctx *c, int first, int size, int *ranks)
{
	for (int k = 0; k < size; k++)
		for (int t = 0; t < c->tp; t++)
			ranks[k * c->tp + t] = c->ranks[(first + k) * c->tp + t];
}

/* The group of the given first unit and size: bp_sp_groups's order (size ascending, then
 * first), indexed by c->off once fsp_prepare has it. */
static size_t find_group(const struct fsp_ctx *c, int first, int size)
{
	if (c->off) {
		int l = 0;
		while ((1 << l) < size)
			l++;
		size_t g = l < c->nlvl && first % size == 0 ? c->off[l] + (size_t)(first / size)
							      : c->ng;
		return g < c->ng && c->g[g].first == first && c->g[g].size == size ? g : c->ng;
	}
	for (size_t g = 0; g < c->ng; g++)
		if (c->g[g].first == first && c->g[g].size == size)
			return g;
	return c->ng;
}

/* A layout of the given partition (pairs first, size, in unit order), each pipeline capped
 * at its group's cap. */
static int make_layout(const struct fsp_ctx *c, const int *part, size_t npart, int layers,
		       struct bp_layout *l, struct bp_error *err)
{
	int *ranks = bp_calloc((size_t)c->units * c->tp + 1, sizeof(int), err);
	int rc = -1;
	if (!ranks)
		return -1;
	bp_layout_init(l);
	for (size_t k = 0; k < npart; k++) {
		int first = part[2 * k], size = part[2 * k + 1];
		size_t g = find_group(c, first, size);
		struct bp_scheme sc = {c->tp, size, 1};
		group_ranks(c, first, size, ranks);
		if (bp_layout_add_pipe(l, sc, ranks, NULL, layers, g < c->ng ? c->cap[g] : 1, err) <
		    0)
			goto out;
	}
	rc = 0;
out:
	free(ranks);
	return rc;
}

static void fsp_release(struct fsp_ctx *c)
{
	for (size_t g = 0; g < c->ncm; g++)
		bp_costmodel_release(&c->cm[g]);
	for (size_t i = 0; i < c->nlayouts; i++)
		free(c->keys[i]);
	free(c->keys);
	free(c->nkeys);
	free(c->layout);
	free(c->cm);
	free(c->cap);
	free(c->fix);
	free(c->slope);
	free(c->cls);
	free(c->off);
	free(c->g);
	free(c->ranks);
}

static int pick_same(const struct bp_coll_pick *a, const struct bp_coll_pick *b)
{
	return a->lo == b->lo && a->hi == b->hi && a->scale == b->scale && a->t == b->t;
}

/* Whether two cost models answer every bp_cost_mb alike: every field of struct
 * bp_costmodel (model/costmodel.h) equal, the stage layers by value. */
static int cm_same(const struct bp_costmodel *a, const struct bp_costmodel *b)
{
	if (a->prof != b->prof || a->sc.tp != b->sc.tp || a->sc.cp != b->sc.cp ||
	    a->sc.pp != b->sc.pp || a->dp != b->dp || a->sync_ranks != b->sync_ranks ||
	    a->attn != b->attn || a->linear != b->linear || a->tp_inter != b->tp_inter ||
	    a->cp_inter != b->cp_inter || a->pp_inter != b->pp_inter ||
	    a->dp_inter != b->dp_inter || a->token_bytes != b->token_bytes ||
	    a->kv_token_bytes != b->kv_token_bytes || a->lm_ratio != b->lm_ratio ||
	    a->mb_cap != b->mb_cap || !pick_same(&a->tp_allreduce, &b->tp_allreduce) ||
	    !pick_same(&a->cp_allgather, &b->cp_allgather) ||
	    !pick_same(&a->cp_reducescatter, &b->cp_reducescatter) ||
	    !pick_same(&a->pp_sendrecv, &b->pp_sendrecv) ||
	    !pick_same(&a->sync_reducescatter, &b->sync_reducescatter) ||
	    !pick_same(&a->sync_allgather, &b->sync_allgather))
		return 0;
	for (int k = 0; k < a->sc.pp; k++)
		if (a->stage_layers[k] != b->stage_layers[k])
			return 0;
	return 1;
}

/* Each group's cost class (c->cls): the first group of its size with the same cost model
 * and slope, so that a document's time (doc_us) is computed once per class. */
static int cost_classes(struct fsp_ctx *c, struct bp_error *err)
{
	size_t *rep = bp_calloc(c->ng + 1, sizeof(size_t), err), nrep = 0;
	c->cls = bp_calloc(c->ng + 1, sizeof(size_t), err);
	if (!rep || !c->cls) {
		free(rep);
		return -1;
	}
	for (size_t g = 0; g < c->ng; g++) {
		size_t k = 0;
		if (g && c->g[g].size != c->g[g - 1].size)
			nrep = 0; /* classes do not span sizes */
		while (k < nrep && !(c->slope[rep[k]] == c->slope[g] && cm_same(&c->cm[rep[k]],
										   &c->cm[g])))
			k++;
		if (k == nrep)
			rep[nrep++] = g;
		c->cls[g] = rep[k];
	}
	free(rep);
	return 0;
}

/* c->off: the groups are bp_sp_groups's, size ascending, then first. */
static int group_index(struct fsp_ctx *c, struct bp_error *err)
{
	c->nlvl = 0;
	while (c->nlvl < 31 && (1 << c->nlvl) <= c->max_group && (1 << c->nlvl) <= c->units)
		c->nlvl++;
	c->off = bp_calloc((size_t)c->nlvl + 1, sizeof(size_t), err);
	if (!c->off)
		return -1;
	size_t n = 0;
	for (int l = 0; l < c->nlvl; l++) {
		c->off[l] = n;
		n += (size_t)(c->units >> l);
	}
	if (n != c->ng)
		return bp_errorf(err, "internal: %zu sequence-parallel groups, %zu by size", c->ng, n);
	return 0;
}

/* The layout make_layout gives the partition of group g and single units (pp 1), as a view
 * into pipes (units entries) that borrows the ranks and the stage layers (*layers): for
 * bp_costmodel_init_pipe, which only reads it; never released. Each pipeline's token cap is
 * its group's so far (0 before fsp_prepare sets it), as make_layout would give. */
static void view_layout(const struct fsp_ctx *c, size_t g, int *layers, struct bp_lpipe *pipes,
			struct bp_layout *l)
{
	size_t np = 0;
	bp_layout_init(l);
	for (int u = 0; u < c->units;) {
		int s = u == c->g[g].first ? c->g[g].size : 1;
		size_t h = find_group(c, u, s);
		pipes[np++] = (struct bp_lpipe){{c->tp, s, 1}, c->ranks + (size_t)u * c->tp, layers,
						h < c->ng ? c->cap[h] : 1};
		u += s;
	}
	l->pipes = pipes;
	l->npipes = np;
}

/* Every aligned group's cost model (in a layout of the group and single units, so its sync
 * group is all units), cap and per micro-batch cost; canonical when groups of one size
 * cost alike. */
static int fsp_prepare(struct fsp_ctx *c, const struct bp_method_ctx *ctx,
		       const struct bp_plan *out, struct bp_error *err)
{
	c->ng = bp_sp_groups(c->units, c->max_group, NULL);
	c->g = bp_calloc(c->ng, sizeof(*c->g), err);
	c->cm = bp_calloc(c->ng, sizeof(*c->cm), err);
	c->cap = bp_calloc(c->ng, sizeof(int64_t), err);
	c->fix = bp_calloc(c->ng, sizeof(double), err);
	c->slope = bp_calloc(c->ng, sizeof(double), err);
	struct bp_lpipe *pipes = bp_calloc((size_t)c->units + 1, sizeof(*pipes), err);
	int rc = -1, layers = out->model.layers;
	if (!c->g || !c->cm || !c->cap || !c->fix || !c->slope || !pipes)
		goto out;
	bp_sp_groups(c->units, c->max_group, c->g);
	if (group_index(c, err) < 0)
		goto out;
	c->canonical = 1;
	for (size_t g = 0, h0 = 0; g < c->ng; g++) {
		struct bp_layout l;
		view_layout(c, g, &layers, pipes, &l);
		int r = bp_costmodel_init_pipe(&c->cm[g], ctx->cm->prof, &l,
					       (size_t)c->g[g].first, err);
		c->ncm = g + 1;
		if (r < 0) {
			bp_error_prefix(err, "sequence-parallel group of %d units at unit %d",
					c->g[g].size, c->g[g].first);
			goto out;
		}
		c->cap[g] = group_cap(&c->cm[g]);
		double a1 = 0.0, r1 = 0.0, ac = 0.0, rc2 = 0.0;
		if (span_parts(&c->cm[g], 1, &a1, &r1, err) < 0 ||
		    (c->cap[g] > 1 && span_parts(&c->cm[g], c->cap[g], &ac, &rc2, err) < 0))
			goto out;
		c->fix[g] = r1;
		c->slope[g] = c->cap[g] > 1 && rc2 > r1 ? (rc2 - r1) / (double)(c->cap[g] - 1) : 0.0;
		/* groups of one size cost alike iff each is the size's first group's equal */
		if (g && c->g[g].size != c->g[g - 1].size)
			h0 = g;
		if (c->cap[h0] != c->cap[g] || c->fix[h0] != c->fix[g] ||
		    c->slope[h0] != c->slope[g] || c->cm[h0].cp_inter != c->cm[g].cp_inter ||
		    c->cm[h0].tp_inter != c->cm[g].tp_inter)
			c->canonical = 0;
	}
	rc = cost_classes(c, err);
out:
	free(pipes);
	return rc;
}

/* The plan layout of a partition, made once per distinct partition. */
static int step_layout(struct fsp_ctx *c, const int *part, size_t npart, struct bp_plan *out,
		       struct bp_error *err)
{
	for (size_t i = 0; i < c->nlayouts; i++)
		if (c->nkeys[i] == npart && !memcmp(c->keys[i], part, 2 * npart * sizeof(int)))
			return c->layout[i];
	struct bp_layout l;
	int **nk = bp_realloc_array(c->keys, c->nlayouts + 1, sizeof(*nk), err);
	if (!nk)
		return -1;
	c->keys = nk;
	size_t *nn = bp_realloc_array(c->nkeys, c->nlayouts + 1, sizeof(*nn), err);
	if (!nn)
		return -1;
	c->nkeys = nn;
	int *nl = bp_realloc_array(c->layout, c->nlayouts + 1, sizeof(*nl), err);
	if (!nl)
		return -1;
	c->layout = nl;
	int *key = bp_calloc(2 * npart + 1, sizeof(int), err);
	if (!key)
		return -1;
	memcpy(key, part, 2 * npart * sizeof(int));
	if (make_layout(c, part, npart, out->model.layers, &l, err) < 0) {
		bp_layout_release(&l);
		free(key);
		return -1;
	}
	int idx = bp_plan_add_layout(out, &l, err);
	bp_layout_release(&l);
	if (idx < 0) {
		free(key);
		return -1;
	}
	c->keys[c->nlayouts] = key;
	c->nkeys[c->nlayouts] = npart;
	c->layout[c->nlayouts++] = idx;
	return idx;
}

/* The partition of the used groups, the units they leave in the largest aligned free
 * groups: (first, size) pairs in unit order into part, each one's group into pgroup; start
 * (units size_t) and cover (units bytes) are scratch. Returns the count, 0 when a unit is
 * left over (cannot happen: single units are groups). */
static size_t partition_of(const struct fsp_ctx *c, const unsigned char *used, int *part,
			   int *pgroup, size_t *start, unsigned char *cover)
{
	size_t ng = c->ng, np = 0;
	memset(cover, 0, (size_t)c->units);
	for (int u = 0; u < c->units; u++)
		start[u] = ng;
	for (size_t g = 0; g < ng; g++)
		if (used[g]) {
			start[c->g[g].first] = g; /* the last used group starting there */
			for (int u = c->g[g].first; u < c->g[g].first + c->g[g].size; u++)
				cover[u] = 1;
		}
	for (int u = 0; u < c->units;) {
		size_t g = start[u];
		/* else the largest free group starting at u */
		for (int l = c->nlvl - 1; g == ng && l >= 0; l--) {
			size_t h = find_group(c, u, 1 << l);
			int ok = h < ng;
			for (int v = u; ok && v < u + (1 << l); v++)
				ok = !cover[v];
			if (ok)
				g = h;
		}
		if (g == ng)
			return 0;
		part[2 * np] = u;
		part[2 * np + 1] = c->g[g].size;
		pgroup[np++] = (int)g;
		u += c->g[g].size;
	}
	return np;
}

/* Every homogeneous partition (one group size over all units, the rest in the largest
 * aligned groups) gets its layout first, used or not: the plan's layouts then name every
 * scheme {tp, size, 1} the method may use, the analytic profile `check` regenerates from
 * them is the one solve made (cmd_solve.c), and homogeneous steps share them. */
static int catalog_layouts(struct fsp_ctx *c, struct bp_plan *out, struct bp_error *err)
{
	unsigned char *used = bp_calloc(c->ng + 1, 1, err), *cover = NULL;
	int *part = bp_calloc(2 * (size_t)c->units + 2, sizeof(int), err);
	int *pgroup = bp_calloc((size_t)c->units + 1, sizeof(int), err);
	size_t *start = bp_calloc((size_t)c->units + 1, sizeof(size_t), err);
	int rc = -1;
	cover = bp_calloc((size_t)c->units + 1, 1, err);
	if (!used || !part || !pgroup || !start || !cover)
		goto out;
	for (int s = 1; s <= c->units && s <= c->max_group; s *= 2) {
		for (size_t g = 0; g < c->ng; g++)
			used[g] = c->g[g].size == s;
		size_t np = partition_of(c, used, part, pgroup, start, cover);
		if (!np || step_layout(c, part, np, out, err) < 0)
			goto out;
	}
	rc = 0;
out:
	free(used);
	free(start);
	free(cover);
	free(part);
	free(pgroup);
	return rc;
}

struct doc_key {
	size_t bucket;
	int64_t len;
	size_t i;
};

static int cmp_doc_key(const void *a, const void *b)
{
	const struct doc_key *x = a, *y = b;
	if (x->bucket != y->bucket)
		return (x->bucket > y->bucket) - (x->bucket < y->bucket);
	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

/* Step 4's choice for one bucket's documents, the group (of those the program left a place
 * in the bucket) whose exact time grows least, ties to the first group: a segment tree per
 * cost class over its groups with a place, in group order, holding their loads (a
 * document's time is its class's, and load + time grows with the load, so the least load
 * of a subtree says whether it holds the best group). */
struct rtree {
	size_t n, P, *g; /* leaves, P the power of two >= n, each leaf's group */
	double *v;       /* [2 P] least load below each node; INFINITY: no place left */
	size_t *leaf;    /* [ng] each group's leaf in its class's tree */
};

/* After leaf x changed: its ancestors, up to the first that does not. */
static void rtree_pull(struct rtree *t, size_t x)
{
	for (x /= 2; x >= 1; x /= 2) {
		double m = t->v[2 * x] < t->v[2 * x + 1] ? t->v[2 * x] : t->v[2 * x + 1];
		if (m == t->v[x])
			break;
		t->v[x] = m;
	}
}

/* The first leaf whose load plus tt is v (v the least such sum). */
static size_t rtree_first(const struct rtree *t, double tt, double v)
{
	size_t x = 1;
	while (x < t->P) {
		x *= 2;
		if (!(t->v[x] + tt == v))
			x++;
	}
	return x - t->P;
}

/* The documents of keys[k0, k1) (one bucket bb) to groups: group_of and load. ncls classes
 * (their first groups in cls, each group's index into cls in ci), tr their trees (leaves
 * and nodes in pools of ng and 6 ng: 2 P <= max(2, 4 n) a class). */
static int assign_bucket(const struct fsp_ctx *c, const struct bp_batch *b,
			 const struct doc_key *keys, size_t k0, size_t k1, size_t bb,
			 int64_t *rem, double *load, int *group_of, const size_t *cls, size_t ncls,
			 const size_t *ci, struct rtree *tr, size_t *gpool, double *vpool,
			 double *tcls, struct bp_error *err)
{
	size_t ng = c->ng, gused = 0, vused = 0;
	for (size_t j = 0; j < ncls; j++)
		tr[j].n = 0;
	for (size_t g = 0; g < ng; g++)
		if (rem[bb * ng + g])
			tr[ci[g]].n++;
	for (size_t j = 0; j < ncls; j++) {
		struct rtree *t = &tr[j];
		for (t->P = 1; t->P < t->n; t->P *= 2)
			;
		t->g = gpool + gused;
		t->v = vpool + vused;
		gused += t->n;
		vused += 2 * t->P;
		for (size_t x = 0; x < 2 * t->P; x++)
			t->v[x] = INFINITY;
		t->n = 0;
	}
	for (size_t g = 0; g < ng; g++)
		if (rem[bb * ng + g]) {
			struct rtree *t = &tr[ci[g]];
			t->leaf[g] = t->n;
			t->g[t->n] = g;
			t->v[t->P + t->n++] = load[g];
		}
	for (size_t j = 0; j < ncls; j++)
		for (size_t x = tr[j].P - 1; x >= 1; x--)
			tr[j].v[x] = tr[j].v[2 * x] < tr[j].v[2 * x + 1] ? tr[j].v[2 * x]
									  : tr[j].v[2 * x + 1];
	for (size_t k = k0; k < k1; k++) {
		size_t i = keys[k].i, best = ng, bj = ncls;
		double bv = INFINITY, bt = 0.0;
		for (size_t j = 0; j < ncls; j++) {
			if (!tr[j].n || !isfinite(tr[j].v[1]))
				continue;
			tcls[j] = doc_us(c, cls[j], b->docs[i].len, err);
			if (tcls[j] < 0)
				return -1;
			double v = tr[j].v[1] + tcls[j];
			if (v > bv)
				continue;
			size_t g = tr[j].g[rtree_first(&tr[j], tcls[j], v)];
			if (v < bv || g < best) {
				bv = v;
				bt = tcls[j];
				best = g;
				bj = j;
			}
		}
		if (best == ng)
			return bp_errorf(err, "internal: bucket %zu has no place left for document "
					 "%lld", bb, (long long)b->docs[i].id);
		struct rtree *t = &tr[bj];
		size_t x = t->P + t->leaf[best];
		rem[bb * ng + best]--;
		load[best] += bt;
		group_of[i] = (int)best;
		t->v[x] = rem[bb * ng + best] ? load[best] : INFINITY;
		rtree_pull(t, x);
	}
	return 0;
}

/* Steps 4-5 of the header: documents to groups by the program's counts, micro-batches,
 * the partition and its layout. */
static int realise(struct fsp_ctx *c, const struct bp_batch *b, const struct bp_sp_buckets *bk,
		   const struct bp_sp_sol *sol, struct bp_step *st, struct fsp_rec *rec,
		   struct bp_plan *out, struct bp_error *err)
{
	size_t n = b->ndocs, ng = c->ng, ncls = 0;
	int rc = -1;
	struct doc_key *keys = bp_calloc(n + 1, sizeof(*keys), err);
	int64_t *rem = bp_calloc(bk->n * ng + 1, sizeof(int64_t), err);
	double *load = bp_calloc(ng + 1, sizeof(double), err);
	int *group_of = bp_calloc(n + 1, sizeof(int), err);
	int *part = bp_calloc(2 * (size_t)c->units + 2, sizeof(int), err);
	int *pgroup = bp_calloc((size_t)c->units + 1, sizeof(int), err);
	unsigned char *cover = bp_calloc((size_t)c->units + 1, 1, err);
	int64_t *len = bp_calloc(n + 1, sizeof(int64_t), err);
	size_t *idx = bp_calloc(n + 1, sizeof(size_t), err);
	int *bin_of = bp_calloc(n + 1, sizeof(int), err);
	struct bp_span *spans = bp_calloc(n + 1, sizeof(*spans), err);
	size_t *cls = bp_calloc(ng + 1, sizeof(size_t), err);
	size_t *ci = bp_calloc(ng + 1, sizeof(size_t), err);
	size_t *leaf = bp_calloc(ng + 1, sizeof(size_t), err);
	size_t *gpool = bp_calloc(ng + 1, sizeof(size_t), err);
	double *vpool = bp_calloc(6 * ng + 2, sizeof(double), err);
	double *tcls = bp_calloc(ng + 1, sizeof(double), err);
	struct rtree *tr = bp_calloc(ng + 1, sizeof(*tr), err);
	size_t *first = bp_calloc(ng + 2, sizeof(size_t), err);
	size_t *start = bp_calloc((size_t)c->units + 1, sizeof(size_t), err);
	if (!keys || !rem || !load || !group_of || !part || !pgroup || !cover || !len || !idx ||
	    !bin_of || !spans || !cls || !ci || !leaf || !gpool || !vpool || !tcls || !tr ||
	    !first || !start)
		goto out;
	memcpy(rem, sol->n, bk->n * ng * sizeof(int64_t));
	for (size_t g = 0; g < ng; g++) {
		if (c->cls[g] == g)
			cls[ncls++] = g;
		ci[g] = c->cls[g] == g ? ncls - 1 : ci[c->cls[g]];
	}
	for (size_t j = 0; j < ncls; j++)
		tr[j].leaf = leaf;
	for (size_t i = 0; i < n; i++)
		keys[i] = (struct doc_key){bk->of[i], b->docs[i].len, i};
	qsort(keys, n, sizeof(*keys), cmp_doc_key);
	for (size_t k0 = 0, k1; k0 < n; k0 = k1) {
		for (k1 = k0 + 1; k1 < n && keys[k1].bucket == keys[k0].bucket; k1++)
			;
		if (assign_bucket(c, b, keys, k0, k1, keys[k0].bucket, rem, load, group_of, cls,
				  ncls, ci, tr, gpool, vpool, tcls, err) < 0)
			goto out;
	}
	size_t np = partition_of(c, sol->used, part, pgroup, start, cover);
	if (!np) {
		bp_errorf(err, "internal: the units have no partition");
		goto out;
	}
	int li = step_layout(c, part, np, out, err);
	if (li < 0)
		goto out;
	for (size_t k = 0; k < st->npipes; k++)
		free(st->pipes[k].mbs);
	free(st->pipes);
	st->pipes = bp_calloc(np, sizeof(*st->pipes), err);
	if (!st->pipes) {
		st->npipes = 0;
		goto out;
	}
	st->npipes = np;
	st->layout = li;
	/* the documents by group, in draw order: idx[first[g] .. first[g + 1]) */
	for (size_t k = 0; k < n; k++)
		first[group_of[k] + 1]++;
	for (size_t g = 0; g < ng; g++)
		first[g + 1] += first[g];
	for (size_t k = 0; k < n; k++)
		idx[first[group_of[k]]++] = k;
	for (size_t g = ng; g > 0; g--)
		first[g] = first[g - 1];
	first[0] = 0;
	for (size_t q = 0; q < np; q++) {
		size_t m = 0, nb = 0;
		int g = pgroup[q];
		if (!sol->used[g])
			continue;
		size_t *gi = idx + first[g];
		m = first[g + 1] - first[g];
		for (size_t k = 0; k < m; k++)
			len[k] = b->docs[gi[k]].len;
		if (!m)
			continue;
		if (bp_pack_ffd(len, m, c->cap[g], bin_of, &nb, err) < 0)
			goto out;
		for (size_t j = 0; j < nb; j++) {
			size_t ns = 0;
			for (size_t k = 0; k < m; k++)
				if (bin_of[k] == (int)j)
					spans[ns++] = (struct bp_span){b->docs[gi[k]].id, 0, len[k]};
			/* spans longest first, then draw order */
			for (size_t x = 1; x < ns; x++)
				for (size_t y = x; y > 0 && spans[y].len > spans[y - 1].len; y--) {
					struct bp_span t = spans[y];
					spans[y] = spans[y - 1];
					spans[y - 1] = t;
				}
			if (bp_pipe_add_mb(&st->pipes[q], spans, ns, BP_SHARD_ULYSSES, err) < 0)
				goto out;
		}
	}
	rec->part = bp_calloc(2 * np + 1, sizeof(int), err);
	if (!rec->part)
		goto out;
	memcpy(rec->part, part, 2 * np * sizeof(int));
	rec->npart = np;
	rc = 0;
out:
	free(keys);
	free(rem);
	free(load);
	free(group_of);
	free(part);
	free(pgroup);
	free(cover);
	free(len);
	free(idx);
	free(bin_of);
	free(spans);
	free(cls);
	free(ci);
	free(leaf);
	free(gpool);
	free(vpool);
	free(tcls);
	free(tr);
	free(first);
	free(start);
	return rc;
}

/* Steps 1-3 of the header for one step, then realise. */
static int plan_step(struct fsp_ctx *c, const struct bp_batch *b, struct bp_step *st,
		     struct bp_plan *out, struct bp_error *err)
{
	size_t n = b->ndocs, ng = c->ng;
	struct bp_sp_buckets bk;
	struct bp_sp_sol sol;
	struct bp_sp_result res;
	int rc = -1;
	int64_t *len = bp_calloc(n + 1, sizeof(int64_t), err);
	double *t = NULL;
	memset(&bk, 0, sizeof(bk));
	memset(&sol, 0, sizeof(sol));
	struct fsp_rec *rec = bp_step_set_record(st, &bp_record_flexsp, err);
	if (!len || !rec)
		goto out;
	int64_t capmax = 0, lmax = 0, dmax = 0;
	size_t gmax = 0;
	for (size_t g = 0; g < ng; g++)
		if (c->cap[g] > capmax) {
			capmax = c->cap[g];
			gmax = g;
		}
	for (size_t i = 0; i < n; i++) {
		len[i] = b->docs[i].len;
		if (len[i] > lmax) {
			lmax = len[i];
			dmax = b->docs[i].id;
		}
	}
	if (lmax > capmax) {
		rc = bp_infeasiblef(err, "document %lld of %lld tokens fits no sequence-parallel "
				    "group: the largest, %d units (%d GPUs), holds %lld tokens per "
				    "micro-batch", (long long)dmax, (long long)lmax,
				    c->g[gmax].size, c->g[gmax].size * c->tp, (long long)capmax);
		goto out;
	}
	if (bp_sp_bucketize(len, n, c->buckets, c->coef, &bk, err) < 0 ||
	    bp_sp_sol_alloc(&sol, bk.n, ng, err) < 0)
		goto out;
	t = bp_calloc(bk.n * ng + 1, sizeof(double), err);
	if (!t)
		goto out;
	for (size_t q = 0; q < bk.n; q++)
		for (size_t g = 0; g < ng; g++) {
			if (bk.len[q] > c->cap[g])
				continue;
			if (c->cls[g] != g) { /* its class's first group is computed */
				t[q * ng + g] = t[q * ng + c->cls[g]];
				continue;
			}
			t[q * ng + g] = doc_us(c, g, bk.len[q], err);
			if (t[q * ng + g] < 0)
				goto out;
		}
	struct bp_sp_problem p = {c->units, c->g, ng, bk.len, bk.count, bk.n, t, c->fix, c->cap,
				  c->canonical, 0};
	int gsize = 0;
	double gobj = 0.0;
	if (n) {
		rc = bp_sp_greedy(&p, &sol, &gsize, &gobj, err);
		if (rc < 0)
			goto out;
		rc = -1;
		if (bp_sp_solve(&p, c->milp ? &c->ilp : NULL, &sol, &res, err) < 0)
			goto out;
	} else {
		memset(&res, 0, sizeof(res));
		snprintf(res.status, sizeof(res.status), "optimal");
	}
	*rec = (struct fsp_rec){c->units, (int)ng, (int)bk.n, bk.exact, gsize, res.cols, res.rows,
				res.nodes, res.work, res.greedy, res.objective, res.bound, res.gap,
				"", "", NULL, 0};
	snprintf(rec->status, sizeof(rec->status), "%s", res.status);
	snprintf(rec->limit, sizeof(rec->limit), "%s",
		 res.limit == BP_ILP_LIMIT_NODES  ? "nodes"
		 : res.limit == BP_ILP_LIMIT_WORK ? "work"
						  : "none");
	rc = realise(c, b, &bk, &sol, st, rec, out, err);
out:
	if (rc < 0 && rc != BP_INFEASIBLE)
		rc = -1;
	bp_sp_buckets_release(&bk);
	bp_sp_sol_release(&sol);
	free(len);
	free(t);
	return rc;
}

int bp_flexsp_max_group(const struct bp_model *m, int tp, int units, int64_t max_group)
{
	int64_t lim = 1;
	if (max_group > 0) {
		lim = max_group;
	} else if (tp > 0 && m->heads % tp == 0) {
		int heads = m->heads / tp; /* Ulysses splits a TP rank's query heads */
		while (heads % (2 * lim) == 0)
			lim *= 2;
	}
	while (lim > units && lim > 1)
		lim /= 2;
	return (int)lim;
}

/* Whether FlexSP's MILP runs after the greedy by default (parameter milp): no, measured to
 * buy nothing (tools/bench/flexsp-budget: the predicted step time of its plans at 1/8 to 2x
 * the default budget equals the greedy's at 64 and 256 GPUs on three workloads), while it
 * took 99% of a step's planning. */
#define FSP_MILP_DEFAULT 0

/* flexsp's own typed parameters (its row's param_specs; the ILP budgets keep
 * bp_ilp_read_params, blocks/ilp_pack.c). */
static const struct bp_param_spec fsp_specs[] = {
	BP_PARAM_SPEC_INT("buckets", 16, 1, 4096,
			  "most length buckets per step (fewer: one per distinct length)"),
	BP_PARAM_SPEC_INT("max_group", 0, 0, 1 << 20,
			  "largest group, in tp GPUs (0: heads / tp)"),
	BP_PARAM_SPEC_INT("milp", FSP_MILP_DEFAULT, 0, 1, "1: the MILP after the greedy"),
	{0},
};

/* flexsp's parameters: solve's reader and check's (bp_flexsp_check_params). */
static int read_params(struct bp_plan *out, int64_t *buckets, int64_t *max_group,
		       int64_t *milp, struct bp_ilp_opts *ilp, struct bp_error *err)
{
	if (bp_param_int(out, fsp_specs, "buckets", buckets, err) < 0 ||
	    bp_param_int(out, fsp_specs, "max_group", max_group, err) < 0 ||
	    bp_param_int(out, fsp_specs, "milp", milp, err) < 0 ||
	    bp_ilp_read_params(out, ilp, err) < 0)
		return -1;
	if (*max_group & (*max_group - 1))
		return bp_errorf(err, "parameter max_group is %lld, not a power of two (0: "
				 "Ulysses's limit, heads / tp)", (long long)*max_group);
	return 0;
}

int bp_flexsp_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			   struct bp_error *err)
{
	int64_t buckets, max_group, milp;
	struct bp_ilp_opts ilp;
	(void)p;
	return read_params(scratch, &buckets, &max_group, &milp, &ilp, err);
}

int bp_flexsp_check_request(struct bp_scheme sc, const struct bp_model *m,
			    enum bp_shard shard, struct bp_error *err)
{
	(void)m;
	if (sc.cp != 1)
		return bp_errorf(err, "flexsp needs cp 1 (its sequence-parallel groups of TP groups "
				 "replace context parallelism), not cp %d", sc.cp);
	if (sc.pp != 1)
		return bp_errorf(err, "flexsp needs pp 1 (FlexSP's groups run without pipeline "
				 "parallelism), not pp %d", sc.pp);
	if (shard != BP_SHARD_SEQUENCE && shard != BP_SHARD_ULYSSES)
		return bp_errorf(err, "flexsp's groups run Ulysses sequence parallelism, not --shard "
				 "%s", bp_shard_name(shard));
	return 0;
}

int bp_method_flexsp(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		     struct bp_plan *out, struct bp_error *err)
{
	const struct bp_layout *l0 = &out->layouts[0];
	const struct bp_scheme sc = l0->pipes[0].sc;
	struct fsp_ctx c;
	int64_t buckets, max_group, milp;
	int rc = -1;
	memset(&c, 0, sizeof(c));
	if (bp_flexsp_check_request(sc, &out->model, ctx->shard, err) < 0)
		return -1;
	c.units = (int)l0->npipes;
	c.tp = sc.tp;
	c.ranks = bp_calloc((size_t)c.units * c.tp, sizeof(int), err);
	if (!c.ranks)
		return -1;
	for (int u = 0; u < c.units; u++)
		memcpy(c.ranks + (size_t)u * c.tp, l0->pipes[u].ranks, (size_t)c.tp * sizeof(int));
	if (read_params(out, &buckets, &max_group, &milp, &c.ilp, err) < 0)
		goto out;
	c.milp = (int)milp;
	c.buckets = (size_t)buckets;
	c.max_group = bp_flexsp_max_group(&out->model, c.tp, c.units, max_group);
	c.coef = bp_kk_coef(&out->model);
	if (fsp_prepare(&c, ctx, out, err) < 0 || catalog_layouts(&c, out, err) < 0)
		goto out;
	if (bp_method_alloc_steps(out, in, in->n, err) < 0)
		goto out;
	for (size_t s = 0; s < in->n; s++) {
		int r = plan_step(&c, &in->b[s], &out->steps[s], out, err);
		if (r < 0) {
			rc = r;
			bp_error_prefix(err, "step %zu", s);
			goto out;
		}
	}
	rc = 0;
out:
	fsp_release(&c);
	return rc;
}

size_t bp_flexsp_profile_schemes(const struct bp_model *m, struct bp_scheme sc, int dp,
				 const struct bp_param *params, size_t nparams,
				 struct bp_scheme *out, size_t cap)
{
	/* one scheme {tp, s, 1} per group size s, a power of two up to its largest group (the
	 * schemes of the layouts its plans hold: catalog_layouts) */
	int64_t mg = 0;
	size_t n = 0;
	for (size_t i = 0; i < nparams; i++)
		if (!strcmp(params[i].key, "max_group")) {
			int64_t v = 0;
			if (!bp_parse_int64(params[i].value, &v, "max_group", NULL) && v > 0)
				mg = v; /* a bad value is read_params's error */
		}
	long long maxg = m ? bp_flexsp_max_group(m, sc.tp, dp, mg) : 1;
	for (long long s = 1; s <= maxg && n < cap; s *= 2)
		out[n++] = (struct bp_scheme){sc.tp, (int)s, 1};
	return n;
}

/* Its price (cmd/cmd_solve_limits.c), in instructions per step: with milp 1 its MILP,
 * W (60 + 1.5 u) over u = dp units (62 a work unit measured at 8 units, 149 at 64) at most
 * ilp_time_limit_s, where the program's columns fit ilp_max_vars; the warm start and the
 * realisation, I_FSP_DOC D log2(2 u) + I_FSP_UNIT u; once I_FSP_ONCE + I_FSP_UNIT_PAIR u^2
 * (a cost model per group, each from a layout of all units). Callgrind, 2026-11-27,
 * llama3-8b synthetic-longtail tp 8, milp 0: 65 M, 258 M and 1,145 M instructions a step at
 * 1,024, 4,096 and 16,384 GPUs, priced 3.0-3.5x over with the front end's terms. */
#define I_FSP_WORK 60.0
#define I_FSP_WORK_UNIT 1.5
#define I_FSP_DOC 5e3
#define I_FSP_UNIT 1e5
#define I_FSP_UNIT_PAIR 250.0
#define I_FSP_ONCE 2e8

/* Whether GLPK runs (milp 1): the program's columns (sp_ilp.h: 1 + 2 ng + one per fitting
 * bucket and group) within ilp_max_vars; the groups counted low (those of max_group's sizes,
 * of size 1 alone when the price cannot know Ulysses's limit), the buckets as min(buckets,
 * D), each fitting every group (a step with fewer distinct lengths has fewer columns, and
 * may run GLPK where this says it does not). */
static int flexsp_runs_glpk(const struct bp_price_req *r)
{
	double mv = bp_price_param(r, "ilp_max_vars", 10000.0);
	double mg = bp_price_param(r, "max_group", 0.0), ng = 0.0;
	double nb = fmin(bp_price_param(r, "buckets", 16.0), fmax(r->docs, 1.0));
	if (mv <= 0)
		return 1;
	for (double s = 1.0; s <= fmax(mg, 1.0) && s <= (double)r->dp; s *= 2.0)
		ng += floor((double)r->dp / s);
	return 1.0 + (2.0 + nb) * ng <= mv;
}

static void flexsp_price(const struct bp_price_req *r, struct bp_price *p)
{
	double u = (double)r->dp;
	double w = bp_price_param(r, "ilp_work_limit", BP_ILP_WORK_LIMIT_M) * 1e6;
	double tl = bp_price_param(r, "ilp_time_limit_s", 300.0);
	p->grows = BP_GROWS_GPUS;
	p->own = I_FSP_DOC * r->docs * log2(2.0 * u) + I_FSP_UNIT * u;
	if (bp_price_param(r, "milp", FSP_MILP_DEFAULT) != 0 && flexsp_runs_glpk(r))
		p->own += fmin(w * (I_FSP_WORK + I_FSP_WORK_UNIT * u), tl * r->instr_per_s);
	p->once += I_FSP_ONCE + I_FSP_UNIT_PAIR * u * u;
}

static const char *const flexsp_params[] = {"buckets", "max_group", "milp",
					    "ilp_time_limit_s", "ilp_gap", "ilp_node_limit",
					    "ilp_work_limit", "ilp_max_vars", NULL};

/* The method's row of the table (plan/method.h struct bp_method). */
BP_METHOD_ROW(flexsp) = {
	.name = "flexsp",
	.solve = bp_method_flexsp,
	.summary = "per-step power-of-two Ulysses SP groups of TP groups, documents "
		   "assigned greedily (the MILP with milp=1)",
	.paper = "FlexSP (arXiv 2412.01523) as DistCA Sec. 6's FlexSP+",
	.params = flexsp_params,
	.param_specs = fsp_specs,
	.record = &bp_record_flexsp,
	.warn = bp_flexsp_warn,
	.check_params = bp_flexsp_check_params,
	.check_request = bp_flexsp_check_request,
	.own_memory = 1,
	.rank = 140,
	.profile_schemes = bp_flexsp_profile_schemes,
	.price = flexsp_price,
};
