/* hydraulis.c: the hydraulis method (Li et al., Hydraulis: "Demystifying Workload Imbalances
 * in Large Transformer Model Training over Variable-length Sequences"; section, equation and
 * appendix numbers are the paper's): dynamic heterogeneous strategies with two-stage sequence
 * assignment. Per step, for every candidate strategy of S^ (ctx->input, from a strategies
 * file or proposed by the front end, Sec. 7): dispatch the step's sequences to the
 * strategy's pipelines (Alg. 1, App. D.2; Eq. 3's ILP where small enough), pack each
 * pipeline over its pruned V range (Eq. 1, App. C), estimate the strategy's propagation time
 * as the largest pipeline's Eq. 1, and train the step on the candidate with the smallest
 * estimate (Sec. 6, Fig. 6 steps 1-4); strategies may change from step to step.
 *
 * Layouts: plan layout 0 is the request's homogeneous layout (in Hydraulis the optimizer's
 * layout, Sec. 5.2); candidate c is layout 1 + c, placed by bp_hyd_place (TP groups
 * within nodes, stages filling nodes), its pipelines listed by MaxLen longest first and
 * capped at their MaxLen (App. B.1 with the simulator's memory functions, aligned down to
 * `align`). Every candidate gets a layout, used or not, so the layouts are the candidate
 * table and `check` can regenerate the analytic profile from them.
 *
 * The step record (kind "hydraulis") keeps every candidate's dispatch objective, certified
 * bound, estimate and status, and, per pipeline of the chosen one, Eq. 2's bound, V*, the
 * searched range, z and Eq. 1 (plans/README.md "Hydraulis plans"). The fitted T(l, P) of
 * every scheme is kept in the plan's parameters (fit_TPxPP). Steps synchronise by Sec. 5.2's
 * disaggregation (parameter sync: "pullpush", the optimizer sharded over every GPU, pull and
 * push overlapped as Fig. 8; "serial", Table 1's "w/o overlap"; "dp-allreduce", the gradient
 * all-reduce among the pipelines of one scheme, as before issue 12 item 7), priced by
 * sim/predict.c's sync models. */
#include "method.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hyd.h"
#include "jsonutil.h"

/* ---- the per-step record ---- */

/* Every candidate's result and the chosen one's pipelines (blocks/hyd.h). */
struct hyd_rec {
	int selected, changed;
	struct bp_hyd_cand_res *c; /* owned */
	size_t nc;
	int *layout;               /* [nc]: each candidate's layout; owned */
	struct bp_hyd_pipe_res *p; /* owned */
	size_t np;
};

static void rec_release(void *r)
{
	struct hyd_rec *h = r;
	free(h->c);
	free(h->layout);
	free(h->p);
	h->c = NULL;
	h->layout = NULL;
	h->p = NULL;
}

static json_t *rec_to_json(const void *r)
{
	const struct hyd_rec *h = r;
	json_t *o = json_object(), *ca = json_array(), *pa = json_array();
	int ok = o && ca && pa;
	bp_json_set(o, "selected", json_integer(h->selected), &ok);
	bp_json_set(o, "changed", json_integer(h->changed), &ok);
	for (size_t i = 0; i < h->nc; i++) {
		const struct bp_hyd_cand_res *c = &h->c[i];
		json_t *x = json_array();
		bp_json_append(x, json_integer(h->layout[i]), &ok);
		bp_json_append(x, json_string(c->status), &ok);
		bp_json_append(x, bp_json_real(c->dispatch_us), &ok);
		bp_json_append(x, bp_json_real(c->bound_us), &ok);
		bp_json_append(x, bp_json_real(c->estimate_us), &ok);
		bp_json_append(x, json_integer(c->trial), &ok);
		bp_json_append(x, json_string(c->dispatch), &ok);
		bp_json_append(ca, x, &ok);
	}
	for (size_t k = 0; k < h->np; k++) {
		const struct bp_hyd_pipe_res *p = &h->p[k];
		json_t *x = json_array();
		bp_json_append(x, bp_json_real(p->eq2_us), &ok);
		bp_json_append(x, json_integer(p->v), &ok);
		bp_json_append(x, json_integer(p->v_min), &ok);
		bp_json_append(x, json_integer(p->v_max), &ok);
		bp_json_append(x, bp_json_real(p->z_us), &ok);
		bp_json_append(x, bp_json_real(p->eq1_us), &ok);
		bp_json_append(pa, x, &ok);
	}
	bp_json_set(o, "candidates", ca, &ok);
	bp_json_set(o, "pipelines", pa, &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int get_num(json_t *a, size_t i, int integer, double lo, double hi, double *out,
		   const char *where, struct bp_error *err)
{
	json_t *v = json_array_get(a, i);
	if (!v || (integer ? !json_is_integer(v) : !json_is_number(v)))
		return bp_errorf(err, "%s[%zu] is not %s", where, i, integer ? "an integer"
									     : "a number");
	double x = json_number_value(v);
	if (!isfinite(x) || x < lo || x > hi)
		return bp_errorf(err, "%s[%zu] is %g, outside [%g, %g]", where, i, x, lo, hi);
	*out = x;
	return 0;
}

static int get_text(json_t *a, size_t i, char *dst, size_t n, const char *const *allowed,
		    const char *where, struct bp_error *err)
{
	json_t *v = json_array_get(a, i);
	if (!v || !json_is_string(v))
		return bp_errorf(err, "%s[%zu] is not a string", where, i);
	const char *s = json_string_value(v);
	for (size_t k = 0; allowed[k]; k++)
		if (!strcmp(s, allowed[k])) {
			snprintf(dst, n, "%s", s);
			return 0;
		}
	return bp_errorf(err, "%s[%zu] \"%.32s\" is not a known value", where, i, s);
}

static int rec_from_json(void *r, json_t *o, const char *where, struct bp_error *err)
{
	static const char *const keys[] = {"kind", "selected", "changed", "candidates",
					   "pipelines", NULL};
	static const char *const statuses[] = {"ok", "too-short", "empty-pipeline", "pruned",
					       NULL};
	static const char *const dispatches[] = {"greedy", "ilp-optimal", "ilp-feasible",
						 "ilp-warm-start", "none", NULL};
	struct hyd_rec *h = r;
	const double big = 1e300;
	char w[256];
	if (bp_json_check_keys(o, keys, where, err) < 0 ||
	    bp_json_get_int32(o, "selected", 1, 0, 1 << 20, &h->selected, where, err) < 0 ||
	    bp_json_get_int32(o, "changed", 1, 0, 1, &h->changed, where, err) < 0)
		return -1;
	json_t *ca = bp_json_get_array(o, "candidates", where, err);
	json_t *pa = ca ? bp_json_get_array(o, "pipelines", where, err) : NULL;
	if (!ca || !pa)
		return -1;
	h->c = bp_calloc(json_array_size(ca) + 1, sizeof(*h->c), err);
	h->layout = bp_calloc(json_array_size(ca) + 1, sizeof(int), err);
	h->p = bp_calloc(json_array_size(pa) + 1, sizeof(*h->p), err);
	if (!h->c || !h->layout || !h->p)
		return -1;
	for (size_t i = 0; i < json_array_size(ca); i++) {
		json_t *x = json_array_get(ca, i);
		struct bp_hyd_cand_res *c = &h->c[i];
		double v[5] = {0};
		snprintf(w, sizeof(w), "%.200s.candidates[%zu]", where, i);
		if (!json_is_array(x) || json_array_size(x) != 7)
			return bp_errorf(err, "%s is not [layout, status, dispatch_us, bound_us, "
					 "estimate_us, trial, dispatch]", w);
		if (get_num(x, 0, 1, 0, 1 << 20, &v[0], w, err) < 0 ||
		    get_text(x, 1, c->status, sizeof(c->status), statuses, w, err) < 0 ||
		    get_num(x, 2, 0, 0, big, &v[1], w, err) < 0 ||
		    get_num(x, 3, 0, 0, big, &v[2], w, err) < 0 ||
		    get_num(x, 4, 0, 0, big, &v[3], w, err) < 0 ||
		    get_num(x, 5, 1, -1, 1 << 30, &v[4], w, err) < 0 ||
		    get_text(x, 6, c->dispatch, sizeof(c->dispatch), dispatches, w, err) < 0)
			return -1;
		h->layout[i] = (int)v[0];
		c->dispatch_us = v[1];
		c->bound_us = v[2];
		c->estimate_us = v[3];
		c->trial = (int)v[4];
		h->nc = i + 1;
	}
	for (size_t k = 0; k < json_array_size(pa); k++) {
		json_t *x = json_array_get(pa, k);
		struct bp_hyd_pipe_res *p = &h->p[k];
		double v[6] = {0};
		snprintf(w, sizeof(w), "%.200s.pipelines[%zu]", where, k);
		if (!json_is_array(x) || json_array_size(x) != 6)
			return bp_errorf(err, "%s is not [eq2_us, v, v_min, v_max, z_us, eq1_us]", w);
		if (get_num(x, 0, 0, 0, big, &v[0], w, err) < 0 ||
		    get_num(x, 1, 1, 0, 1 << 30, &v[1], w, err) < 0 ||
		    get_num(x, 2, 1, 0, 1 << 30, &v[2], w, err) < 0 ||
		    get_num(x, 3, 1, 0, 1 << 30, &v[3], w, err) < 0 ||
		    get_num(x, 4, 0, 0, big, &v[4], w, err) < 0 ||
		    get_num(x, 5, 0, 0, big, &v[5], w, err) < 0)
			return -1;
		*p = (struct bp_hyd_pipe_res){v[0], (int)v[1], (int)v[2], (int)v[3], v[4], v[5]};
		h->np = k + 1;
	}
	return 0;
}

/* The record against its step: the chosen candidate is the step's layout and has the least
 * estimate (P8); bounds below objectives; V* is each pipeline's micro-batch count; Eq. 2 <=
 * Eq. 1 (App. D.1, P3). Numbers in a plan are rounded to 1e-3 us, hence the slack. */
static int rec_validate(const void *r, const struct bp_step *st, struct bp_error *err)
{
	const struct hyd_rec *h = r;
	const double tol = 2e-3;
	if ((size_t)h->selected >= h->nc)
		return bp_errorf(err, "selects candidate %d of %zu", h->selected, h->nc);
	const struct bp_hyd_cand_res *sel = &h->c[h->selected];
	if (h->layout[h->selected] != st->layout)
		return bp_errorf(err, "selects the candidate of layout %d but the step uses layout "
				 "%d", h->layout[h->selected], st->layout);
	if (strcmp(sel->status, "ok"))
		return bp_errorf(err, "selects a candidate of status \"%s\"", sel->status);
	for (size_t i = 0; i < h->nc; i++) {
		const struct bp_hyd_cand_res *c = &h->c[i];
		if (!strcmp(c->status, "pruned") && c->estimate_us + tol < sel->estimate_us)
			return bp_errorf(err, "candidate %zu was pruned at %.3f us, below the selected "
					 "estimate %.3f us", i, c->estimate_us, sel->estimate_us);
		if (strcmp(c->status, "ok"))
			continue;
		if (c->estimate_us + tol < sel->estimate_us)
			return bp_errorf(err, "candidate %zu's estimate %.3f us is below the "
					 "selected one's %.3f us", i, c->estimate_us,
					 sel->estimate_us);
		if (c->bound_us > c->dispatch_us + tol)
			return bp_errorf(err, "candidate %zu's bound %.3f us exceeds its dispatch "
					 "objective %.3f us", i, c->bound_us, c->dispatch_us);
	}
	if (h->np != st->npipes)
		return bp_errorf(err, "has %zu pipelines but the step %zu", h->np, st->npipes);
	double worst = 0.0;
	for (size_t k = 0; k < h->np; k++) {
		const struct bp_hyd_pipe_res *p = &h->p[k];
		if ((size_t)p->v != st->pipes[k].nmbs)
			return bp_errorf(err, "pipeline %zu: V* %d but %zu micro-batches", k, p->v,
					 st->pipes[k].nmbs);
		if (p->v && (p->v < p->v_min || p->v_min > p->v_max))
			return bp_errorf(err, "pipeline %zu: V* %d outside the searched range [%d, "
					 "%d]", k, p->v, p->v_min, p->v_max);
		if (p->eq2_us > p->eq1_us * (1 + 1e-9) + tol)
			return bp_errorf(err, "pipeline %zu: Eq. 2 %.3f us exceeds Eq. 1 %.3f us", k,
					 p->eq2_us, p->eq1_us);
		if (p->eq1_us > worst)
			worst = p->eq1_us;
	}
	if (fabs(worst - sel->estimate_us) > tol)
		return bp_errorf(err, "the selected estimate %.3f us is not its largest pipeline's "
				 "Eq. 1 %.3f us", sel->estimate_us, worst);
	return 0;
}

static void rec_diff(const void *a, const void *b, char *buf, size_t n)
{
	const struct hyd_rec *x = a, *y = b;
	buf[0] = 0;
	int la = x->nc ? x->layout[x->selected] : -1, lb = y->nc ? y->layout[y->selected] : -1;
	double ea = x->nc ? x->c[x->selected].estimate_us : 0, eb = y->nc ? y->c[y->selected].estimate_us : 0;
	if (la != lb || ea != eb)
		snprintf(buf, n, "hydraulis: strategy of layout %d, estimate %.3f us -> layout %d, "
			 "%.3f us", la, ea, lb, eb);
}

const struct bp_record_ops bp_record_hydraulis = {
	.name = "hydraulis",
	.size = sizeof(struct hyd_rec),
	.to_json = rec_to_json,
	.from_json = rec_from_json,
	.validate = rec_validate,
	.diff = rec_diff,
	.release = rec_release,
};

/* ---- the method ---- */

struct scheme_fit {
	int tp, pp;
	struct bp_hyd_fit fit;
	int64_t util;
};

struct cand {
	int layout;
	size_t npipes;
	struct bp_hyd_dpipe *dp; /* per pipeline, layout order (MaxLen descending); owned */
	int64_t *util;           /* owned */
	int64_t maxcap;
};

struct opts {
	int trials, code_c, v_tries, prune;
	const char *sync; /* a BP_SYNC_* name */
	int64_t align;
	double theta;
	struct bp_ilp_opts ilp;      /* dispatch ILP: max_vars over m_ij columns (0: off) */
	struct bp_ilp_opts pack_ilp; /* packing ILP per V: max_vars over sequences x V */
};

/* hydraulis's typed parameters (its row's param_specs; hyd_c and sync keep their own
 * reader and message). Its ILP budgets are its own defaults, not bp_ilp_read_params's. */
static const struct bp_param_spec hyd_specs[] = {
	BP_PARAM_SPEC_INT("prune", 1, 0, 1,
			  "1: skip a candidate whose dispatch bound reaches the best estimate"),
	BP_PARAM_SPEC_INT("trials", 100, 1, 1000000, "dispatch trials per candidate and step"),
	BP_PARAM_SPEC_INT("v_tries", 0, 0, 1 << 20,
			  "V values tried per pipeline from App. C's lower end (0: whole range)"),
	BP_PARAM_SPEC_INT("align", 128, 1, 1 << 20,
			  "token granularity of MaxLen and UtilLen (App. B.1, App. C)"),
	BP_PARAM_SPEC_REAL("util_threshold", 0.85, 0.01, 1.0,
			   "App. C's theta: UtilLen reaches this share of peak l / T(l)"),
	BP_PARAM_SPEC_INT("ilp_max_vars", 400, 0, INT64_MAX,
			  "most m_ij columns for Eq. 3's dispatch ILP (0: greedy only)"),
	BP_PARAM_SPEC_INT("pack_ilp_vars", 0, 0, INT64_MAX,
			  "most sequences x V for Eq. 1's packing ILP (0: LPT only)"),
	BP_PARAM_SPEC_INT("ilp_node_limit", 200, 1, INT32_MAX, "GLPK's node limit"),
	BP_PARAM_SPEC_INT("ilp_work_limit", 5, 1, 1000000000, "GLPK's work limit"),
	BP_PARAM_SPEC_REAL("ilp_time_limit_s", 300.0, 0.001, 86400.0, "GLPK's time limit"),
	BP_PARAM_SPEC_REAL("ilp_gap", 1e-4, 0.0, 1.0, "GLPK's relative gap"),
	{0},
};

static int read_opts(struct bp_plan *out, struct opts *o, struct bp_error *err)
{
	int64_t t, v, al, mv, pv, nl, wl;
	double th, tl, gap;
	const char *c = bp_plan_param(out, "hyd_c");
	if (!c) {
		c = "paper";
		if (bp_plan_set_param(out, "hyd_c", c, err) < 0)
			return -1;
	}
	if (strcmp(c, "paper") && strcmp(c, "code"))
		return bp_errorf(err, "parameter hyd_c '%s' is not paper or code", c);
	o->code_c = !strcmp(c, "code");
	const char *sy = bp_plan_param(out, "sync");
	if (!sy) {
		sy = "pullpush";
		if (bp_plan_set_param(out, "sync", sy, err) < 0)
			return -1;
	}
	if (!strcmp(sy, "pullpush"))
		o->sync = BP_SYNC_HYD_PULLPUSH;
	else if (!strcmp(sy, "serial"))
		o->sync = BP_SYNC_HYD_PULLPUSH_SERIAL;
	else if (!strcmp(sy, "dp-allreduce"))
		o->sync = BP_SYNC_DP_ALLREDUCE;
	else
		return bp_errorf(err, "parameter sync '%s' is not pullpush, serial or dp-allreduce",
				 sy);
	int64_t pr;
	if (bp_param_int(out, hyd_specs, "prune", &pr, err) < 0 ||
	    bp_param_int(out, hyd_specs, "trials", &t, err) < 0 ||
	    bp_param_int(out, hyd_specs, "v_tries", &v, err) < 0 ||
	    bp_param_int(out, hyd_specs, "align", &al, err) < 0 ||
	    bp_param_real(out, hyd_specs, "util_threshold", &th, err) < 0 ||
	    bp_param_int(out, hyd_specs, "ilp_max_vars", &mv, err) < 0 ||
	    bp_param_int(out, hyd_specs, "pack_ilp_vars", &pv, err) < 0 ||
	    bp_param_int(out, hyd_specs, "ilp_node_limit", &nl, err) < 0 ||
	    bp_param_int(out, hyd_specs, "ilp_work_limit", &wl, err) < 0 ||
	    bp_param_real(out, hyd_specs, "ilp_time_limit_s", &tl, err) < 0 ||
	    bp_param_real(out, hyd_specs, "ilp_gap", &gap, err) < 0)
		return -1;
	o->trials = (int)t;
	o->prune = (int)pr;
	o->v_tries = (int)v;
	o->align = al;
	o->theta = th;
	bp_ilp_opts_default(&o->ilp);
	o->ilp.max_vars = mv;
	o->ilp.node_limit = nl;
	o->ilp.work_limit = (double)wl * 1e6;
	o->ilp.time_limit_s = tl;
	o->ilp.rel_gap = gap;
	o->pack_ilp = o->ilp;
	o->pack_ilp.max_vars = pv;
	return 0;
}

int bp_hyd_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			struct bp_error *err)
{
	struct opts o;
	(void)p;
	return read_opts(scratch, &o, err);
}

static const struct scheme_fit *find_fit(const struct scheme_fit *f, size_t n, int tp, int pp)
{
	for (size_t i = 0; i < n; i++)
		if (f[i].tp == tp && f[i].pp == pp)
			return &f[i];
	return NULL;
}

/* Fits T(l, P) and UtilLen for every scheme of the candidates, records them as parameters. */
static int fit_schemes(const struct bp_method_ctx *ctx, const struct bp_hyd_set *set,
		       struct bp_plan *out, const struct opts *o, struct scheme_fit **fits,
		       size_t *nfits, struct bp_error *err)
{
	size_t cap = 0;
	for (size_t i = 0; i < set->n; i++)
		cap += set->s[i].ng;
	struct scheme_fit *f = bp_calloc(cap ? cap : 1, sizeof(*f), err);
	size_t n = 0;
	if (!f)
		return -1;
	*fits = f;
	for (size_t i = 0; i < set->n; i++)
		for (size_t g = 0; g < set->s[i].ng; g++) {
			const struct bp_hyd_group *gr = &set->s[i].g[g];
			if (find_fit(f, n, gr->tp, gr->pp))
				continue;
			struct bp_costmodel cm;
			struct bp_scheme sc = {gr->tp, 1, gr->pp};
			int rc = bp_costmodel_init(&cm, ctx->cm->prof, sc, 1, err);
			if (!rc)
				rc = bp_hyd_fit_cost(&cm, out->max_tokens < 384 ? 384 : out->max_tokens,
						     &f[n].fit, err);
			bp_costmodel_release(&cm);
			if (rc < 0)
				return bp_error_prefix(err, "scheme <%d,%d>", gr->tp, gr->pp);
			f[n].tp = gr->tp;
			f[n].pp = gr->pp;
			f[n].util = bp_hyd_util_len(&f[n].fit, out->max_tokens, o->align, o->theta);
			char key[32], val[64];
			snprintf(key, sizeof(key), "fit_%dx%d", gr->tp, gr->pp);
			snprintf(val, sizeof(val), "a=%.5g b=%.5g c=%.5g err=%.4f util=%lld",
				 f[n].fit.a, f[n].fit.b, f[n].fit.c, f[n].fit.max_err,
				 (long long)f[n].util);
			if (bp_plan_set_param(out, key, val, err) < 0)
				return -1;
			n++;
		}
	*nfits = n;
	return 0;
}

/* Builds candidate c's layout (added to the plan) and its dispatch view. */
static int make_candidate(const struct bp_method_ctx *ctx, const struct bp_hyd_strategy *st,
			  const struct scheme_fit *fits, size_t nfits, const struct opts *o,
			  struct bp_plan *out, struct cand *c, struct bp_error *err)
{
	char d[256];
	size_t order[BP_HYD_MAX_GROUPS];
	int64_t caps[BP_HYD_MAX_GROUPS];
	const struct bp_profile *prof = ctx->cm->prof;
	bp_hyd_strategy_describe(st, d, sizeof(d));
	if (bp_hyd_strategy_check(st, out->cluster.gpus, out->cluster.gpus_per_node,
				  &out->model, err) < 0)
		return -1;
	for (size_t g = 0; g < st->ng; g++) {
		struct bp_costmodel cm;
		struct bp_scheme sc = {st->g[g].tp, 1, st->g[g].pp};
		if (bp_costmodel_init(&cm, prof, sc, st->g[g].count, err) < 0) {
			bp_costmodel_release(&cm);
			return bp_error_prefix(err, "strategy %s", d);
		}
		caps[g] = bp_hyd_maxlen(&cm, st->g[g].count, o->align);
		bp_costmodel_release(&cm);
		if (caps[g] < 1)
			return bp_infeasiblef(err, "strategy %s: a pipeline of scheme <%d,%d> cannot "
					      "hold %lld tokens in memory (MaxLen 0)", d, sc.tp, sc.pp,
					      (long long)o->align);
		order[g] = g;
	}
	/* Pipelines by MaxLen, longest first (Sec. 6.2); equal caps keep canonical order. */
	for (size_t i = 1; i < st->ng; i++)
		for (size_t k = i; k > 0 && caps[order[k]] > caps[order[k - 1]]; k--) {
			size_t t = order[k];
			order[k] = order[k - 1];
			order[k - 1] = t;
		}
	struct bp_layout l;
	bp_layout_init(&l);
	if (bp_hyd_place(st, out->cluster.gpus, out->cluster.gpus_per_node, out->model.layers,
			 order, caps, &l, err) < 0 ||
	    (c->layout = bp_plan_add_layout(out, &l, err)) < 0) {
		bp_layout_release(&l);
		return -1;
	}
	c->npipes = 0;
	for (size_t g = 0; g < st->ng; g++)
		c->npipes += (size_t)st->g[g].count;
	c->dp = bp_calloc(c->npipes, sizeof(*c->dp), err);
	c->util = bp_calloc(c->npipes, sizeof(int64_t), err);
	if (!c->dp || !c->util)
		return -1;
	size_t j = 0;
	for (size_t q = 0; q < st->ng; q++) {
		const struct bp_hyd_group *g = &st->g[order[q]];
		const struct scheme_fit *f = find_fit(fits, nfits, g->tp, g->pp);
		for (int r = 0; r < g->count; r++, j++) {
			c->dp[j] = (struct bp_hyd_dpipe){&f->fit, g->pp, caps[order[q]]};
			c->util[j] = f->util;
		}
	}
	c->maxcap = caps[order[0]];
	return 0;
}

/* Item order inside a micro-batch and micro-batch order inside a pipeline: longest (most
 * tokens) first, then draw order (the code runs micro-batches by tokens descending). */
struct key {
	int64_t v;
	size_t i;
};
static int cmp_key_desc(const void *a, const void *b)
{
	const struct key *x = a, *y = b;
	if (x->v != y->v)
		return x->v > y->v ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* The step's pipelines from the chosen candidate's dispatch and packing. The documents are
 * grouped by (pipeline, micro-batch) once, a counting sort over the micro-batches of all
 * pipelines, so a step costs O(documents + micro-batches), not O(documents x pipelines). */
static int emit_step(const struct bp_batch *b, const struct cand *c, const int *pipe_of,
		     const int *bin_of, const struct bp_hyd_pipe_res *pr, struct bp_step *st,
		     struct bp_error *err)
{
	size_t n = b->ndocs;
	int rc = -1;
	free(st->pipes);
	st->pipes = bp_calloc(c->npipes, sizeof(*st->pipes), err);
	st->npipes = c->npipes;
	st->layout = c->layout;
	struct key *items = bp_calloc(n ? n : 1, sizeof(*items), err);
	struct key *mbs = bp_calloc(n ? n : 1, sizeof(*mbs), err);
	struct bp_span *spans = bp_calloc(n ? n : 1, sizeof(*spans), err);
	int64_t *tok = bp_calloc(n ? n : 1, sizeof(int64_t), err);
	size_t *off = bp_calloc(c->npipes + 1, sizeof(size_t), err); /* pipeline j's first bin */
	size_t nb = 0;
	for (size_t j = 0; off && j < c->npipes; j++) {
		off[j] = nb;
		nb += (size_t)pr[j].v;
	}
	size_t *first = bp_calloc(nb + 2, sizeof(size_t), err); /* bin k's documents: by_bin */
	size_t *by_bin = bp_calloc(n ? n : 1, sizeof(size_t), err); /* [first[k], first[k+1]) */
	if (!st->pipes || !items || !mbs || !spans || !tok || !off || !first || !by_bin)
		goto out;
	for (size_t i = 0; i < n; i++)
		first[off[pipe_of[i]] + (size_t)bin_of[i] + 1]++;
	for (size_t k = 0; k < nb; k++)
		first[k + 1] += first[k];
	for (size_t i = 0; i < n; i++)
		by_bin[first[off[pipe_of[i]] + (size_t)bin_of[i]]++] = i;
	for (size_t k = nb; k > 0; k--)
		first[k] = first[k - 1];
	first[0] = 0;
	for (size_t j = 0; j < c->npipes; j++) {
		int v = pr[j].v;
		if (!v)
			continue;
		memset(tok, 0, (size_t)v * sizeof(int64_t));
		for (int k = 0; k < v; k++)
			for (size_t q = first[off[j] + (size_t)k]; q < first[off[j] + (size_t)k + 1];
			     q++)
				tok[k] += b->docs[by_bin[q]].len;
		for (int k = 0; k < v; k++)
			mbs[k] = (struct key){tok[k], (size_t)k};
		qsort(mbs, (size_t)v, sizeof(*mbs), cmp_key_desc);
		for (int k = 0; k < v; k++) {
			size_t m = 0, bk = off[j] + mbs[k].i;
			for (size_t q = first[bk]; q < first[bk + 1]; q++)
				items[m++] = (struct key){b->docs[by_bin[q]].len, by_bin[q]};
			qsort(items, m, sizeof(*items), cmp_key_desc);
			for (size_t q = 0; q < m; q++)
				spans[q] = (struct bp_span){b->docs[items[q].i].id, 0,
							    b->docs[items[q].i].len};
			if (bp_pipe_add_mb(&st->pipes[j], spans, m, BP_SHARD_SEQUENCE, err) < 0)
				goto out;
		}
	}
	rc = 0;
out:
	free(items);
	free(mbs);
	free(spans);
	free(tok);
	free(off);
	free(first);
	free(by_bin);
	return rc;
}

int bp_method_hydraulis(const struct bp_method_ctx *ctx, const struct bp_batches *in,
			struct bp_plan *out, struct bp_error *err)
{
	const struct bp_hyd_set *set = ctx->input;
	struct opts o;
	struct scheme_fit *fits = NULL;
	size_t nfits = 0, nc = 0;
	struct cand *cands = NULL;
	struct bp_hyd_cand *view = NULL;
	int64_t *len = NULL;
	int *pipe_of = NULL, *bin_of = NULL;
	struct bp_hyd_pipe_res *pr = NULL;
	int rc = -1;
	if (!set || !set->n)
		return bp_errorf(err, "method 'hydraulis' needs candidate strategies (balplan solve "
				 "--strategies FILE, or proposed by solve without it)");
	if (set->model[0] && strcmp(set->model, out->model.name))
		return bp_errorf(err, "the strategies were made for model '%s', the profile's is "
				 "'%s'", set->model, out->model.name);
	if (read_opts(out, &o, err) < 0)
		return -1;
	if (fit_schemes(ctx, set, out, &o, &fits, &nfits, err) < 0)
		goto out;
	cands = bp_calloc(set->n, sizeof(*cands), err);
	view = bp_calloc(set->n, sizeof(*view), err);
	if (!cands || !view)
		goto out;
	for (nc = 0; nc < set->n; nc++) {
		int r = make_candidate(ctx, &set->s[nc], fits, nfits, &o, out, &cands[nc], err);
		if (r < 0) {
			rc = r;
			nc++;
			goto out;
		}
		view[nc] = (struct bp_hyd_cand){cands[nc].npipes, cands[nc].dp, cands[nc].util,
						cands[nc].maxcap};
	}
	if (bp_method_alloc_steps(out, in, in->n, err) < 0)
		goto out;
	size_t maxn = 1, maxp = 1;
	for (size_t s = 0; s < in->n; s++)
		if (in->b[s].ndocs > maxn)
			maxn = in->b[s].ndocs;
	for (size_t i = 0; i < nc; i++)
		if (cands[i].npipes > maxp)
			maxp = cands[i].npipes;
	len = bp_calloc(maxn, sizeof(int64_t), err);
	pipe_of = bp_calloc(maxn, sizeof(int), err);
	bin_of = bp_calloc(maxn, sizeof(int), err);
	pr = bp_calloc(maxp, sizeof(*pr), err);
	if (!len || !pipe_of || !bin_of || !pr)
		goto out;
	struct bp_hyd_step_opts so = {o.trials, o.code_c, o.v_tries, &o.ilp, &o.pack_ilp,
				      o.prune};
	/* the last step's selection, kept between the windows of a run (method.h) */
	int prev = -1, *kept = NULL;
	if (ctx->run) {
		struct {
			int started, prev;
		} *st = bp_method_state(ctx, 2 * sizeof(int), free, err);
		if (!st)
			goto out;
		if (!st->started)
			st->prev = -1;
		st->started = 1;
		prev = st->prev;
		kept = &st->prev;
	}
	for (size_t s = 0; s < in->n; s++) {
		const struct bp_batch *b = &in->b[s];
		struct bp_step *st = &out->steps[s];
		uint64_t seed = bp_rng_next(ctx->rng); /* trial t of every candidate: seed + t */
		for (size_t i = 0; i < b->ndocs; i++)
			len[i] = b->docs[i].len;
		struct hyd_rec *rec = bp_step_set_record(st, &bp_record_hydraulis, err);
		if (!rec)
			goto out;
		rec->c = bp_calloc(nc, sizeof(*rec->c), err);
		rec->layout = bp_calloc(nc, sizeof(int), err);
		if (!rec->c || !rec->layout)
			goto out;
		rec->nc = nc;
		for (size_t i = 0; i < nc; i++)
			rec->layout[i] = cands[i].layout;
		int sel;
		int r = bp_hyd_step(view, nc, len, b->ndocs, seed, &so, rec->c, &sel, pipe_of,
				    bin_of, pr, err);
		if (r < 0) {
			rc = r;
			bp_error_prefix(err, "step %lld",
					(long long)(s + (ctx->run ? (size_t)ctx->run->step0 : 0)));
			goto out;
		}
		rec->selected = sel;
		rec->changed = prev >= 0 && prev != sel;
		prev = sel;
		rec->p = bp_calloc(cands[sel].npipes, sizeof(*rec->p), err);
		if (!rec->p)
			goto out;
		rec->np = cands[sel].npipes;
		memcpy(rec->p, pr, rec->np * sizeof(*rec->p));
		if (emit_step(b, &cands[sel], pipe_of, bin_of, pr, st, err) < 0)
			goto out;
		snprintf(st->sync, sizeof(st->sync), "%s", o.sync);
	}
	if (kept)
		*kept = prev;
	bp_method_place_steps(ctx, out);
	rc = 0;
out:
	for (size_t i = 0; i < nc; i++) {
		free(cands[i].dp);
		free(cands[i].util);
	}
	free(cands);
	free(view);
	free(fits);
	free(len);
	free(pipe_of);
	free(bin_of);
	free(pr);
	return rc;
}

void bp_hyd_warn(const struct bp_plan *p, char *buf, size_t n)
{
	/* GPU-steps idle: pipelines of a step's strategy that got no micro-batch (issue 25
	 * item 2: at small global batches most of them can sit idle, and nothing said so) */
	double idle = 0.0, all = 0.0;
	size_t steps = 0;
	buf[0] = 0;
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *st = &p->steps[i];
		const struct bp_layout *l = bp_plan_layout(p, st);
		int any = 0;
		for (size_t k = 0; k < st->npipes && k < l->npipes; k++) {
			const struct bp_scheme sc = l->pipes[k].sc;
			double g = (double)sc.tp * sc.cp * sc.pp;
			all += g;
			if (!st->pipes[k].nmbs) {
				idle += g;
				any = 1;
			}
		}
		steps += (size_t)any;
	}
	if (all > 0 && idle / all > 0.05)
		snprintf(buf, n, "%.0f%% of GPU-steps are idle (%zu of %zu steps leave pipelines of "
			 "their strategy without a micro-batch): the steps' documents do not fill the "
			 "strategies' pipelines (too few, or too long for the small ones); a larger "
			 "--tokens-per-step or other candidate strategies (balplan propose) may "
			 "fill them", 100.0 * idle / all,
			 steps, p->nsteps);
}

int bp_hyd_recheck(const struct bp_plan *p, struct bp_error *err)
{
	/* what a step's record and pipelines say across steps, beyond one step's record: the
	 * strategy changed exactly where the selection did (a window's first step has no
	 * previous step in the plan: only a plan from step 0 starts unchanged), and every
	 * pipeline runs its micro-batches most tokens first (plans/README.md "Hydraulis plans") */
	int prev = -1;
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *st = &p->steps[i];
		const struct hyd_rec *r = st->record;
		if (!r || st->record_ops != &bp_record_hydraulis)
			return bp_errorf(err, "step %lld has no hydraulis record", (long long)st->index);
		int want = i ? prev != r->selected : 0;
		if ((i || p->first_step == 0) && r->changed != want)
			return bp_errorf(err, "step %lld: record changed is %d, but the strategy "
					 "%s the previous step's", (long long)st->index, r->changed,
					 want ? "differs from" : "is");
		prev = r->selected;
		for (size_t k = 0; k < st->npipes; k++)
			for (size_t j = 1; j < st->pipes[k].nmbs; j++) {
				int64_t a = 0, b = 0;
				const struct bp_mb *x = &st->pipes[k].mbs[j - 1], *y = &st->pipes[k].mbs[j];
				for (size_t q = 0; q < x->nspans; q++)
					a += x->spans[q].len;
				for (size_t q = 0; q < y->nspans; q++)
					b += y->spans[q].len;
				if (b > a)
					return bp_errorf(err, "step %lld pipeline %zu: micro-batch %zu (%lld "
							 "tokens) runs before micro-batch %zu (%lld "
							 "tokens); hydraulis runs them most tokens first",
							 (long long)st->index, k, j - 1, (long long)a, j,
							 (long long)b);
			}
	}
	return 0;
}

static const char *const hyd_params[] = {"trials", "hyd_c", "prune", "v_tries", "align",
					 "util_threshold", "ilp_max_vars", "pack_ilp_vars",
					 "ilp_node_limit", "ilp_work_limit", "ilp_time_limit_s",
					 "ilp_gap", "sync", NULL};

/* Its price (cmd/cmd_solve_limits.c), in instructions: per step C D (150 trials + 25,000)
 * over the C candidates (--strategies, or as many as the proposal made: the front end prices
 * a request twice when it proposes, before with C = 1 and after with the proposal's count,
 * which is 1 to 98 in our scans and not predictable from the request: 1 at 1,024 GPUs and
 * 8,192 tokens per GPU, 22 at 64; 32 is assumed where nothing says), and their dispatch ILP (bp_price_ilp_search at 5 M work
 * units) where D max(2, GPUs/8) <= 2 ilp_max_vars (a candidate holds GPUs/8 pipelines or
 * more, a short document fits them all); once 1e8 + 2e6 C, a cost model per candidate
 * pipeline pair as every method's (20 C (GPUs/8)^2) and, proposed, the proposal's DP,
 * 3e8 + 2,500 N_u^2 L_b (units and length buckets of bp_hyd_default_steps; 0.2-11.6 G
 * measured at 16-4,096 GPUs); memory 4 bytes a trial and document (its shuffles, up to
 * 2^24) and 128 a document and candidate. Its own work grows with its trials. */
#define I_HYD_TRIAL 150.0
#define I_HYD_DOC 25e3
#define I_HYD_ONCE 1e8
#define I_HYD_STRATEGY 2e6
#define I_HYD_PIPE_PAIR 20.0
#define I_HYD_PROPOSE 3e8
#define I_HYD_PROPOSE_CELL 2.5e3
#define HYD_PROPOSED 32 /* candidates assumed when proposed */

static void hyd_price(const struct bp_price_req *r, struct bp_price *p)
{
	double d = r->docs, gpus = (double)r->gpus;
	double c = r->inputs > 0 ? (double)r->inputs : HYD_PROPOSED;
	double trials = bp_price_param(r, "trials", 100);
	double mv = bp_price_param(r, "ilp_max_vars", 400);
	p->trials = (int64_t)trials;
	p->candidates = (int64_t)c;
	p->grows = BP_GROWS_TRIALS;
	p->own = c * d * (I_HYD_TRIAL * trials + I_HYD_DOC);
	if (mv > 0 && d * fmax(2.0, gpus / 8.0) <= 2.0 * mv)
		p->own += c * bp_price_ilp_search(r, 5, 300.0);
	p->once += I_HYD_ONCE + I_HYD_STRATEGY * c +
		   c * I_HYD_PIPE_PAIR * (gpus / 8) * (gpus / 8);
	if (r->inputs <= 0 || r->inputs_made) {
		int gs = 1;
		int64_t ls = 1;
		bp_hyd_default_steps((int)r->gpus, r->max_tokens, &gs, &ls);
		double nu = floor(gpus / (double)gs), lb = ceil((double)r->max_tokens / ls);
		p->once += I_HYD_PROPOSE + I_HYD_PROPOSE_CELL * nu * nu * lb;
	}
	p->mem_once = 4.0 * fmin(trials * d, 16777216.0) + 128.0 * d * c;
}

/* The fits it records per strategy (fit_*), beyond its parameters. */
static const char *const hyd_recorded[] = {"fit_*", NULL};

/* check's re-derivation (its row's recheck): bp_hyd_recheck, which needs no cost model. */
static int hyd_recheck(const struct bp_plan *p, struct bp_costs *costs, struct bp_error *err)
{
	(void)costs;
	return bp_hyd_recheck(p, err);
}

/* The method's row of the table (plan/method.h struct bp_method). */
BP_METHOD_ROW(hydraulis) = {
	.name = "hydraulis",
	.solve = bp_method_hydraulis,
	.summary = "per-step heterogeneous strategy: dispatch (Alg. 1), packing (Eq. 1), "
		   "selection",
	.paper = "Hydraulis Sec. 5-7, Eq. 1-4, Alg. 1",
	.params = hyd_params,
	.param_specs = hyd_specs,
	.record = &bp_record_hydraulis,
	.warn = bp_hyd_warn,
	.check_params = bp_hyd_check_params,
	.carries = 1,
	.rank = 100,
	.input = BP_INPUT_STRATEGIES,
	.price = hyd_price,
	.recorded = hyd_recorded,
	.recheck = hyd_recheck,
};
