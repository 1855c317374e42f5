/* plan_json.c: the balplan.plan/v1 codec (plan.h, plans/README.md). Used by solve (write),
 * check, simulate, diff and balexec (read). Reading is strict (unknown keys, types, ranges);
 * writing is canonical so the same plan gives the same bytes. */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "model_json.h"

static const char *const overlen_names[] = {"truncate", "drop", "error"};

static json_t *int_array(const int64_t *v, size_t n)
{
	json_t *a = json_array();
	int ok = a != NULL;
	for (size_t i = 0; ok && i < n; i++)
		bp_json_append(a, json_integer(v[i]), &ok);
	if (!ok) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static json_t *mb_to_json(const struct bp_mb *mb, int pp)
{
	json_t *o = json_object(), *spans = json_array();
	int ok = o && spans;
	for (size_t i = 0; ok && i < mb->nspans; i++) {
		int64_t t[3] = {mb->spans[i].doc, mb->spans[i].offset, mb->spans[i].len};
		bp_json_append(spans, int_array(t, 3), &ok);
	}
	bp_json_set(o, "spans", spans, &ok);
	bp_json_set(o, "shard", json_string(bp_shard_name(mb->shard)), &ok);
	bp_json_set(o, "tokens", json_integer(mb->tokens), &ok);
	if (mb->fwd && mb->bwd) {
		bp_json_set(o, "fwd_us", bp_json_real_array(mb->fwd, (size_t)pp), &ok);
		bp_json_set(o, "bwd_us", bp_json_real_array(mb->bwd, (size_t)pp), &ok);
	}
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *metrics_to_json(const struct bp_metrics *m)
{
	json_t *o = json_object();
	int ok = o != NULL;
	bp_json_set(o, "step_us", bp_json_real(m->step_us), &ok);
	bp_json_set(o, "pipeline_max_us", bp_json_real(m->pipe_max_us), &ok);
	bp_json_set(o, "pipeline_min_us", bp_json_real(m->pipe_min_us), &ok);
	bp_json_set(o, "grad_sync_us", bp_json_real(m->grad_sync_us), &ok);
	bp_json_set(o, "bubble", bp_json_real(m->bubble), &ok);
	bp_json_set(o, "imbalance_wlb", bp_json_real(m->imb_wlb), &ok);
	bp_json_set(o, "imbalance_sparsebalance", bp_json_real(m->imb_sb), &ok);
	bp_json_set(o, "rank_gap_hydraulis", bp_json_real(m->gap_hyd), &ok);
	bp_json_set(o, "peak_mem_bytes", json_integer(m->peak_mem), &ok);
	bp_json_set(o, "tokens", json_integer(m->tokens), &ok);
	bp_json_set(o, "microbatches", json_integer(m->nmbs), &ok);
	bp_json_set(o, "pack_max_us", bp_json_real(m->pack_max_us), &ok);
	bp_json_set(o, "pack_bound_us", bp_json_real(m->pack_bound_us), &ok);
	bp_json_set(o, "pack_gap", bp_json_real(m->pack_gap), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *step_to_json(const struct bp_step *st, int pp)
{
	json_t *o = json_object(), *docs = json_array(), *del = json_array(),
	       *pipes = json_array();
	int ok = o && docs && del && pipes;
	for (size_t i = 0; ok && i < st->ndocs; i++) {
		int64_t t[2] = {st->docs[i].id, st->docs[i].len};
		bp_json_append(docs, int_array(t, 2), &ok);
	}
	for (size_t i = 0; ok && i < st->ndelayed; i++) {
		int64_t t[3] = {st->delayed[i].doc, st->delayed[i].len, st->delayed[i].to_step};
		bp_json_append(del, int_array(t, 3), &ok);
	}
	for (size_t i = 0; ok && i < st->npipes; i++) {
		const struct bp_pipe *pi = &st->pipes[i];
		json_t *po = json_object(), *mbs = json_array();
		int pok = po && mbs;
		for (size_t j = 0; pok && j < pi->nmbs; j++)
			bp_json_append(mbs, mb_to_json(&pi->mbs[j], pp), &pok);
		bp_json_set(po, "microbatches", mbs, &pok);
		mbs = NULL;
		bp_json_set(po, "time_us", bp_json_real(pi->time_us), &pok);
		if (pi->busy_us)
			bp_json_set(po, "busy_us", bp_json_real_array(pi->busy_us, (size_t)pp), &pok);
		if (pi->peak_mem)
			bp_json_set(po, "peak_mem_bytes", int_array(pi->peak_mem, (size_t)pp), &pok);
		if (!pok) {
			json_decref(mbs);
			json_decref(po);
			po = NULL;
		}
		bp_json_append(pipes, po, &ok);
	}
	bp_json_set(o, "index", json_integer(st->index), &ok);
	bp_json_set(o, "docs", docs, &ok);
	bp_json_set(o, "delayed", del, &ok);
	bp_json_set(o, "pipelines", pipes, &ok);
	bp_json_set(o, "metrics", metrics_to_json(&st->m), &ok);
	if (st->solver.present) {
		json_t *so = json_object();
		int sok = so != NULL;
		bp_json_set(so, "status", json_string(st->solver.status), &sok);
		bp_json_set(so, "objective_us", bp_json_real(st->solver.objective), &sok);
		bp_json_set(so, "bound_us", bp_json_real(st->solver.bound), &sok);
		bp_json_set(so, "gap", bp_json_real(st->solver.gap), &sok);
		if (!sok) {
			json_decref(so);
			so = NULL;
		}
		bp_json_set(o, "solver", so, &ok);
	}
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *summary_to_json(const struct bp_summary *s)
{
	json_t *o = json_object();
	int ok = o != NULL;
	bp_json_set(o, "steps", json_integer(s->steps), &ok);
	bp_json_set(o, "docs", json_integer(s->docs), &ok);
	bp_json_set(o, "tokens", json_integer(s->tokens), &ok);
	bp_json_set(o, "truncated_docs", json_integer(s->truncated), &ok);
	bp_json_set(o, "dropped_docs", json_integer(s->dropped), &ok);
	bp_json_set(o, "delayed_docs", json_integer(s->delayed), &ok);
	bp_json_set(o, "step_mean_us", bp_json_real(s->step_mean_us), &ok);
	bp_json_set(o, "step_p50_us", bp_json_real(s->step_p50_us), &ok);
	bp_json_set(o, "step_p95_us", bp_json_real(s->step_p95_us), &ok);
	bp_json_set(o, "step_max_us", bp_json_real(s->step_max_us), &ok);
	bp_json_set(o, "total_us", bp_json_real(s->total_us), &ok);
	bp_json_set(o, "tokens_per_s", bp_json_real(s->tokens_per_s), &ok);
	bp_json_set(o, "imbalance_wlb_mean", bp_json_real(s->imb_wlb_mean), &ok);
	bp_json_set(o, "imbalance_wlb_p95", bp_json_real(s->imb_wlb_p95), &ok);
	bp_json_set(o, "imbalance_sparsebalance_mean", bp_json_real(s->imb_sb_mean), &ok);
	bp_json_set(o, "rank_gap_hydraulis_mean", bp_json_real(s->gap_hyd_mean), &ok);
	bp_json_set(o, "bubble_mean", bp_json_real(s->bubble_mean), &ok);
	bp_json_set(o, "delay_steps_mean", bp_json_real(s->delay_steps_mean), &ok);
	bp_json_set(o, "peak_mem_bytes", json_integer(s->peak_mem), &ok);
	bp_json_set(o, "pack_gap_mean", bp_json_real(s->pack_gap_mean), &ok);
	bp_json_set(o, "pack_gap_max", bp_json_real(s->pack_gap_max), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *bp_plan_to_json(const struct bp_plan *p)
{
	json_t *root = json_object(), *inputs = json_object(), *ds = json_object(),
	       *pr = json_object(), *cl = json_object(), *me = json_object(),
	       *params = json_object(), *sa = json_object(), *steps = json_array();
	int ok = root && inputs && ds && pr && cl && me && params && sa && steps;
	const struct bp_cluster *c = &p->cluster;
	bp_json_set(ds, "name", json_string(p->dataset), &ok);
	bp_json_set(ds, "sha256", json_string(p->dataset_sha), &ok);
	bp_json_set(pr, "name", json_string(p->profile), &ok);
	bp_json_set(pr, "sha256", json_string(p->profile_sha), &ok);
	bp_json_set(inputs, "dataset", ds, &ok);
	bp_json_set(inputs, "profile", pr, &ok);
	bp_json_set(inputs, "seed", json_integer((json_int_t)p->seed), &ok);
	bp_json_set(cl, "gpu", json_string(c->gpu), &ok);
	bp_json_set(cl, "gpus", json_integer(c->gpus), &ok);
	bp_json_set(cl, "gpus_per_node", json_integer(c->gpus_per_node), &ok);
	bp_json_set(cl, "tp", json_integer(c->tp), &ok);
	bp_json_set(cl, "cp", json_integer(c->cp), &ok);
	bp_json_set(cl, "pp", json_integer(c->pp), &ok);
	bp_json_set(cl, "dp", json_integer(c->dp), &ok);
	for (size_t i = 0; i < p->nparams; i++)
		bp_json_set(params, p->params[i].key, json_string(p->params[i].value), &ok);
	bp_json_set(me, "name", json_string(p->method), &ok);
	bp_json_set(me, "max_microbatch_tokens", json_integer(p->mb_max_tokens), &ok);
	bp_json_set(me, "params", params, &ok);
	bp_json_set(sa, "steps", json_integer(p->nsteps_drawn), &ok);
	bp_json_set(sa, "tokens_per_step", json_integer(p->tokens_per_step), &ok);
	bp_json_set(sa, "docs_per_step", json_integer(p->docs_per_step), &ok);
	bp_json_set(sa, "max_tokens", json_integer(p->max_tokens), &ok);
	bp_json_set(sa, "over_length", json_string(overlen_names[p->overlen]), &ok);
	for (size_t i = 0; ok && i < p->nsteps; i++)
		bp_json_append(steps, step_to_json(&p->steps[i], c->pp), &ok);
	bp_json_set(root, "format", json_string(BP_PLAN_FORMAT), &ok);
	bp_json_set(root, "inputs", inputs, &ok);
	bp_json_set(root, "cluster", cl, &ok);
	bp_json_set(root, "model", bp_model_to_json(&p->model), &ok);
	bp_json_set(root, "method", me, &ok);
	bp_json_set(root, "sampling", sa, &ok);
	bp_json_set(root, "steps", steps, &ok);
	bp_json_set(root, "summary", summary_to_json(&p->summary), &ok);
	if (!ok) {
		json_decref(root);
		return NULL;
	}
	return root;
}

/* ---- reading ---- */

static int read_int_tuple(json_t *a, size_t n, int64_t *out, const char *where,
			  struct bp_error *err)
{
	if (!json_is_array(a) || json_array_size(a) != n)
		return bp_errorf(err, "%s is not an array of %zu integers", where, n);
	for (size_t i = 0; i < n; i++) {
		json_t *x = json_array_get(a, i);
		if (!json_is_integer(x))
			return bp_errorf(err, "%s[%zu] is not an integer", where, i);
		out[i] = json_integer_value(x);
	}
	return 0;
}

static int read_real_vec(json_t *o, const char *key, int pp, double **out, const char *where,
			 struct bp_error *err)
{
	size_t n = 0;
	if (bp_json_get_real_array(o, key, 0, out, &n, where, err) < 0)
		return -1;
	if (n != (size_t)pp)
		return bp_errorf(err, "%s.%s has %zu entries, expected pp = %d", where, key, n, pp);
	for (size_t i = 0; i < n; i++)
		if ((*out)[i] < 0)
			return bp_errorf(err, "%s.%s[%zu] is negative", where, key, i);
	return 0;
}

static int mb_from_json(struct bp_mb *mb, json_t *o, int pp, const char *where,
			struct bp_error *err)
{
	static const char *const keys[] = {"spans", "shard", "tokens", "fwd_us", "bwd_us",
					   NULL};
	char shard[32], w[256];
	if (bp_json_check_keys(o, keys, where, err) < 0)
		return -1;
	json_t *spans = bp_json_get_array(o, "spans", where, err);
	if (!spans)
		return -1;
	mb->nspans = json_array_size(spans);
	mb->spans = bp_calloc(mb->nspans, sizeof(*mb->spans), err);
	if (!mb->spans)
		return -1;
	for (size_t i = 0; i < mb->nspans; i++) {
		int64_t t[3] = {0, 0, 0};
		snprintf(w, sizeof(w), "%.200s.spans[%zu]", where, i);
		if (read_int_tuple(json_array_get(spans, i), 3, t, w, err) < 0)
			return -1;
		mb->spans[i] = (struct bp_span){t[0], t[1], t[2]};
	}
	if (bp_json_get_str(o, "shard", 1, shard, sizeof(shard), where, err) < 0)
		return -1;
	if (bp_shard_parse(shard, &mb->shard) < 0 || mb->shard == BP_SHARD_ADAPTIVE)
		return bp_errorf(err, "%s.shard \"%s\" is not a sharding mode", where, shard);
	if (bp_json_get_int(o, "tokens", 1, 0, INT64_MAX, &mb->tokens, where, err) < 0 ||
	    read_real_vec(o, "fwd_us", pp, &mb->fwd, where, err) < 0 ||
	    read_real_vec(o, "bwd_us", pp, &mb->bwd, where, err) < 0)
		return -1;
	return 0;
}

static int read_i64_vec(json_t *o, const char *key, int pp, int64_t **out, const char *where,
			struct bp_error *err)
{
	json_t *a = bp_json_get_array(o, key, where, err);
	if (!a)
		return -1;
	if (json_array_size(a) != (size_t)pp)
		return bp_errorf(err, "%s.%s has %zu entries, expected pp = %d", where, key,
				 json_array_size(a), pp);
	*out = bp_calloc((size_t)pp, sizeof(int64_t), err);
	if (!*out)
		return -1;
	for (int i = 0; i < pp; i++) {
		json_t *x = json_array_get(a, (size_t)i);
		if (!json_is_integer(x) || json_integer_value(x) < 0)
			return bp_errorf(err, "%s.%s[%d] is not a non-negative integer", where, key,
					 i);
		(*out)[i] = json_integer_value(x);
	}
	return 0;
}

static int pipe_from_json(struct bp_pipe *pi, json_t *o, int pp, const char *where,
			  struct bp_error *err)
{
	static const char *const keys[] = {"microbatches", "time_us", "busy_us",
					   "peak_mem_bytes", NULL};
	char w[256];
	if (bp_json_check_keys(o, keys, where, err) < 0)
		return -1;
	json_t *mbs = bp_json_get_array(o, "microbatches", where, err);
	if (!mbs)
		return -1;
	pi->mbs = bp_calloc(json_array_size(mbs), sizeof(*pi->mbs), err);
	if (!pi->mbs)
		return -1;
	for (size_t j = 0; j < json_array_size(mbs); j++) {
		snprintf(w, sizeof(w), "%.200s.microbatches[%zu]", where, j);
		pi->nmbs = j + 1;
		if (mb_from_json(&pi->mbs[j], json_array_get(mbs, j), pp, w, err) < 0)
			return -1;
	}
	if (bp_json_get_real(o, "time_us", 1, 0, 1e300, &pi->time_us, where, err) < 0 ||
	    read_real_vec(o, "busy_us", pp, &pi->busy_us, where, err) < 0 ||
	    read_i64_vec(o, "peak_mem_bytes", pp, &pi->peak_mem, where, err) < 0)
		return -1;
	return 0;
}

static int metrics_from_json(struct bp_metrics *m, json_t *o, const char *where,
			     struct bp_error *err)
{
	static const char *const keys[] = {
		"step_us",	 "pipeline_max_us",	 "pipeline_min_us",
		"grad_sync_us",	 "bubble",		 "imbalance_wlb",
		"imbalance_sparsebalance", "rank_gap_hydraulis", "peak_mem_bytes",
		"tokens",	 "microbatches",	 "pack_max_us", "pack_bound_us", "pack_gap",
		NULL};
	const double big = 1e300;
	if (!o)
		return -1;
	if (bp_json_check_keys(o, keys, where, err) < 0 ||
	    bp_json_get_real(o, "step_us", 1, 0, big, &m->step_us, where, err) < 0 ||
	    bp_json_get_real(o, "pipeline_max_us", 1, 0, big, &m->pipe_max_us, where, err) < 0 ||
	    bp_json_get_real(o, "pipeline_min_us", 1, 0, big, &m->pipe_min_us, where, err) < 0 ||
	    bp_json_get_real(o, "grad_sync_us", 1, 0, big, &m->grad_sync_us, where, err) < 0 ||
	    bp_json_get_real(o, "bubble", 1, -1, 1, &m->bubble, where, err) < 0 ||
	    bp_json_get_real(o, "imbalance_wlb", 1, 0, big, &m->imb_wlb, where, err) < 0 ||
	    bp_json_get_real(o, "imbalance_sparsebalance", 1, 0, big, &m->imb_sb, where, err) <
		    0 ||
	    bp_json_get_real(o, "rank_gap_hydraulis", 1, 0, 1, &m->gap_hyd, where, err) < 0 ||
	    bp_json_get_int(o, "peak_mem_bytes", 1, 0, INT64_MAX, &m->peak_mem, where, err) < 0 ||
	    bp_json_get_int(o, "tokens", 1, 0, INT64_MAX, &m->tokens, where, err) < 0 ||
	    bp_json_get_int(o, "microbatches", 1, 0, INT64_MAX, &m->nmbs, where, err) < 0 ||
	    bp_json_get_real(o, "pack_max_us", 1, 0, big, &m->pack_max_us, where, err) < 0 ||
	    bp_json_get_real(o, "pack_bound_us", 1, 0, big, &m->pack_bound_us, where, err) < 0 ||
	    bp_json_get_real(o, "pack_gap", 1, -1, big, &m->pack_gap, where, err) < 0)
		return -1;
	return 0;
}

static int solver_from_json(struct bp_solver *s, json_t *o, const char *where,
			    struct bp_error *err)
{
	static const char *const keys[] = {"status", "objective_us", "bound_us", "gap", NULL};
	const double big = 1e300;
	if (bp_json_check_keys(o, keys, where, err) < 0 ||
	    bp_json_get_str(o, "status", 1, s->status, sizeof(s->status), where, err) < 0 ||
	    bp_json_get_real(o, "objective_us", 1, 0, big, &s->objective, where, err) < 0 ||
	    bp_json_get_real(o, "bound_us", 1, 0, big, &s->bound, where, err) < 0 ||
	    bp_json_get_real(o, "gap", 1, -big, big, &s->gap, where, err) < 0)
		return -1;
	s->present = 1;
	return 0;
}

static int step_from_json(struct bp_step *st, json_t *o, int pp, const char *where,
			  struct bp_error *err)
{
	static const char *const keys[] = {"index", "docs", "delayed", "pipelines", "metrics",
					   "solver", NULL};
	char w[256];
	if (bp_json_check_keys(o, keys, where, err) < 0 ||
	    bp_json_get_int(o, "index", 1, 0, INT64_MAX, &st->index, where, err) < 0)
		return -1;
	json_t *docs = bp_json_get_array(o, "docs", where, err);
	json_t *del = docs ? bp_json_get_array(o, "delayed", where, err) : NULL;
	json_t *pipes = del ? bp_json_get_array(o, "pipelines", where, err) : NULL;
	if (!pipes)
		return -1;
	st->docs = bp_calloc(json_array_size(docs), sizeof(*st->docs), err);
	st->delayed = bp_calloc(json_array_size(del), sizeof(*st->delayed), err);
	st->pipes = bp_calloc(json_array_size(pipes), sizeof(*st->pipes), err);
	if (!st->docs || !st->delayed || !st->pipes)
		return -1;
	for (size_t i = 0; i < json_array_size(docs); i++) {
		int64_t t[2] = {0, 0};
		snprintf(w, sizeof(w), "%.200s.docs[%zu]", where, i);
		if (read_int_tuple(json_array_get(docs, i), 2, t, w, err) < 0)
			return -1;
		st->docs[i] = (struct bp_doc){t[0], t[1]};
		st->ndocs = i + 1;
	}
	for (size_t i = 0; i < json_array_size(del); i++) {
		int64_t t[3] = {0, 0, 0};
		snprintf(w, sizeof(w), "%.200s.delayed[%zu]", where, i);
		if (read_int_tuple(json_array_get(del, i), 3, t, w, err) < 0)
			return -1;
		st->delayed[i] = (struct bp_delayed){t[0], t[1], t[2]};
		st->ndelayed = i + 1;
	}
	for (size_t i = 0; i < json_array_size(pipes); i++) {
		snprintf(w, sizeof(w), "%.200s.pipelines[%zu]", where, i);
		st->npipes = i + 1;
		if (pipe_from_json(&st->pipes[i], json_array_get(pipes, i), pp, w, err) < 0)
			return -1;
	}
	json_t *so = json_object_get(o, "solver");
	if (so) {
		snprintf(w, sizeof(w), "%.200s.solver", where);
		if (solver_from_json(&st->solver, so, w, err) < 0)
			return -1;
	}
	snprintf(w, sizeof(w), "%.200s.metrics", where);
	return metrics_from_json(&st->m, bp_json_get_object(o, "metrics", where, err), w, err);
}

static int summary_from_json(struct bp_summary *s, json_t *o, struct bp_error *err)
{
	static const char *const keys[] = {
		"steps", "docs", "tokens", "truncated_docs", "dropped_docs", "delayed_docs",
		"step_mean_us", "step_p50_us", "step_p95_us", "step_max_us", "total_us",
		"tokens_per_s", "imbalance_wlb_mean", "imbalance_wlb_p95",
		"imbalance_sparsebalance_mean", "rank_gap_hydraulis_mean", "bubble_mean",
		"delay_steps_mean", "peak_mem_bytes", "pack_gap_mean", "pack_gap_max", NULL};
	const char *w = "plan.summary";
	const double big = 1e300;
	if (!o)
		return -1;
	if (bp_json_check_keys(o, keys, w, err) < 0 ||
	    bp_json_get_int(o, "steps", 1, 0, INT64_MAX, &s->steps, w, err) < 0 ||
	    bp_json_get_int(o, "docs", 1, 0, INT64_MAX, &s->docs, w, err) < 0 ||
	    bp_json_get_int(o, "tokens", 1, 0, INT64_MAX, &s->tokens, w, err) < 0 ||
	    bp_json_get_int(o, "truncated_docs", 1, 0, INT64_MAX, &s->truncated, w, err) < 0 ||
	    bp_json_get_int(o, "dropped_docs", 1, 0, INT64_MAX, &s->dropped, w, err) < 0 ||
	    bp_json_get_int(o, "delayed_docs", 1, 0, INT64_MAX, &s->delayed, w, err) < 0 ||
	    bp_json_get_real(o, "step_mean_us", 1, 0, big, &s->step_mean_us, w, err) < 0 ||
	    bp_json_get_real(o, "step_p50_us", 1, 0, big, &s->step_p50_us, w, err) < 0 ||
	    bp_json_get_real(o, "step_p95_us", 1, 0, big, &s->step_p95_us, w, err) < 0 ||
	    bp_json_get_real(o, "step_max_us", 1, 0, big, &s->step_max_us, w, err) < 0 ||
	    bp_json_get_real(o, "total_us", 1, 0, big, &s->total_us, w, err) < 0 ||
	    bp_json_get_real(o, "tokens_per_s", 1, 0, big, &s->tokens_per_s, w, err) < 0 ||
	    bp_json_get_real(o, "imbalance_wlb_mean", 1, 0, big, &s->imb_wlb_mean, w, err) < 0 ||
	    bp_json_get_real(o, "imbalance_wlb_p95", 1, 0, big, &s->imb_wlb_p95, w, err) < 0 ||
	    bp_json_get_real(o, "imbalance_sparsebalance_mean", 1, 0, big, &s->imb_sb_mean, w,
			     err) < 0 ||
	    bp_json_get_real(o, "rank_gap_hydraulis_mean", 1, 0, 1, &s->gap_hyd_mean, w, err) <
		    0 ||
	    bp_json_get_real(o, "bubble_mean", 1, -1, 1, &s->bubble_mean, w, err) < 0 ||
	    bp_json_get_real(o, "delay_steps_mean", 1, 0, big, &s->delay_steps_mean, w, err) <
		    0 ||
	    bp_json_get_int(o, "peak_mem_bytes", 1, 0, INT64_MAX, &s->peak_mem, w, err) < 0 ||
	    bp_json_get_real(o, "pack_gap_mean", 1, -1, big, &s->pack_gap_mean, w, err) < 0 ||
	    bp_json_get_real(o, "pack_gap_max", 1, -1, big, &s->pack_gap_max, w, err) < 0)
		return -1;
	return 0;
}

static int sha_ok(const char *s)
{
	if (strlen(s) != 64)
		return 0;
	for (const char *c = s; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return 0;
	return 1;
}

static int read_named(json_t *o, const char *key, char *name, size_t nn, char *sha,
		      struct bp_error *err)
{
	static const char *const keys[] = {"name", "sha256", NULL};
	char w[64];
	snprintf(w, sizeof(w), "plan.inputs.%s", key);
	json_t *x = bp_json_get_object(o, key, "plan.inputs", err);
	if (!x || bp_json_check_keys(x, keys, w, err) < 0 ||
	    bp_json_get_str(x, "name", 1, name, nn, w, err) < 0 ||
	    bp_json_get_str(x, "sha256", 1, sha, 65, w, err) < 0)
		return -1;
	if (!sha_ok(sha))
		return bp_errorf(err, "%s.sha256 is not 64 lowercase hex digits", w);
	return 0;
}

int bp_plan_from_json(struct bp_plan *p, json_t *root, struct bp_error *err)
{
	static const char *const keys[] = {"format", "inputs", "cluster", "model", "method",
					   "sampling", "steps", "summary", NULL};
	static const char *const ikeys[] = {"dataset", "profile", "seed", NULL};
	static const char *const ckeys[] = {"gpu", "gpus", "gpus_per_node", "tp", "cp", "pp",
					    "dp", NULL};
	static const char *const mkeys[] = {"name", "params", "max_microbatch_tokens", NULL};
	static const char *const skeys[] = {"steps", "tokens_per_step", "docs_per_step",
					    "max_tokens", "over_length", NULL};
	char w[64], ol[16];
	int64_t seed = 0;
	struct bp_cluster *c = &p->cluster;
	if (bp_json_check_format(root, BP_PLAN_FORMAT, "plan", err) < 0 ||
	    bp_json_check_keys(root, keys, "plan", err) < 0)
		return -1;
	json_t *in = bp_json_get_object(root, "inputs", "plan", err);
	if (!in || bp_json_check_keys(in, ikeys, "plan.inputs", err) < 0 ||
	    read_named(in, "dataset", p->dataset, sizeof(p->dataset), p->dataset_sha, err) < 0 ||
	    read_named(in, "profile", p->profile, sizeof(p->profile), p->profile_sha, err) < 0 ||
	    bp_json_get_int(in, "seed", 1, 0, INT64_MAX, &seed, "plan.inputs", err) < 0)
		return -1;
	p->seed = (uint64_t)seed;
	json_t *co = bp_json_get_object(root, "cluster", "plan", err);
	if (!co || bp_json_check_keys(co, ckeys, "plan.cluster", err) < 0 ||
	    bp_json_get_str(co, "gpu", 1, c->gpu, sizeof(c->gpu), "plan.cluster", err) < 0 ||
	    bp_json_get_int32(co, "gpus", 1, 0, 1 << 24, &c->gpus, "plan.cluster", err) < 0 ||
	    bp_json_get_int32(co, "gpus_per_node", 1, 0, 1024, &c->gpus_per_node,
			      "plan.cluster", err) < 0 ||
	    bp_json_get_int32(co, "tp", 1, 0, 1 << 24, &c->tp, "plan.cluster", err) < 0 ||
	    bp_json_get_int32(co, "cp", 1, 0, 1 << 24, &c->cp, "plan.cluster", err) < 0 ||
	    bp_json_get_int32(co, "pp", 1, 0, 1 << 24, &c->pp, "plan.cluster", err) < 0 ||
	    bp_json_get_int32(co, "dp", 1, 0, 1 << 24, &c->dp, "plan.cluster", err) < 0)
		return -1;
	if (bp_cluster_check(c, err) < 0)
		return bp_error_prefix(err, "plan.cluster");
	json_t *mo = bp_json_get_object(root, "model", "plan", err);
	if (!mo || bp_model_from_json(&p->model, mo, "plan.model", err) < 0)
		return -1;
	json_t *me = bp_json_get_object(root, "method", "plan", err);
	if (!me || bp_json_check_keys(me, mkeys, "plan.method", err) < 0 ||
	    bp_json_get_str(me, "name", 1, p->method, sizeof(p->method), "plan.method", err) < 0 ||
	    bp_json_get_int(me, "max_microbatch_tokens", 1, 1, INT64_MAX, &p->mb_max_tokens,
			    "plan.method", err) < 0)
		return -1;
	json_t *params = bp_json_get_object(me, "params", "plan.method", err);
	if (!params)
		return -1;
	const char *key;
	json_t *val;
	json_object_foreach(params, key, val) {
		if (!json_is_string(val))
			return bp_errorf(err, "plan.method.params.%s is not a string", key);
		if (bp_plan_set_param(p, key, json_string_value(val), err) < 0)
			return -1;
	}
	json_t *sa = bp_json_get_object(root, "sampling", "plan", err);
	if (!sa || bp_json_check_keys(sa, skeys, "plan.sampling", err) < 0 ||
	    bp_json_get_int(sa, "steps", 1, 1, INT64_MAX, &p->nsteps_drawn, "plan.sampling",
			    err) < 0 ||
	    bp_json_get_int(sa, "tokens_per_step", 1, 0, INT64_MAX, &p->tokens_per_step,
			    "plan.sampling", err) < 0 ||
	    bp_json_get_int(sa, "docs_per_step", 1, 0, INT64_MAX, &p->docs_per_step,
			    "plan.sampling", err) < 0 ||
	    bp_json_get_int(sa, "max_tokens", 1, 1, INT64_MAX, &p->max_tokens, "plan.sampling",
			    err) < 0 ||
	    bp_json_get_str(sa, "over_length", 1, ol, sizeof(ol), "plan.sampling", err) < 0)
		return -1;
	int found = 0;
	for (int i = 0; i < 3; i++)
		if (!strcmp(ol, overlen_names[i])) {
			p->overlen = (enum bp_overlen)i;
			found = 1;
		}
	if (!found)
		return bp_errorf(err, "plan.sampling.over_length \"%s\" is not truncate, drop or "
				 "error", ol);
	json_t *steps = bp_json_get_array(root, "steps", "plan", err);
	if (!steps)
		return -1;
	p->steps = bp_calloc(json_array_size(steps), sizeof(*p->steps), err);
	if (!p->steps)
		return -1;
	for (size_t i = 0; i < json_array_size(steps); i++) {
		snprintf(w, sizeof(w), "plan.steps[%zu]", i);
		p->nsteps = i + 1;
		if (step_from_json(&p->steps[i], json_array_get(steps, i), c->pp, w, err) < 0)
			return -1;
	}
	return summary_from_json(&p->summary, bp_json_get_object(root, "summary", "plan", err),
				 err);
}
