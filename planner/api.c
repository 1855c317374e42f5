/* api.c: the public facade (balplan.h) over the planner and the analytic profiler. It sits
 * above every layer of planner/ (planner/README.md) and above profiler/, so it is built
 * into the installed library (libbalplan.a) and into no library the front ends use: the
 * front ends call the layers directly. Each function mirrors what a front end does for the
 * same request (cmd/cmd_solve.c, cmd/cmdutil.c), so a plan made here is byte for byte the
 * one `balplan solve` writes for the same inputs and `balplan check` accepts it. */
#include "balplan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "bp.h"
#include "jsonutil.h"
#include "method.h"
#include "presets.h"
#include "profile.h"
#include "solve.h"

#ifndef BALPLAN_VERSION
#define BALPLAN_VERSION "unknown"
#endif

/* The public error has the internal one's size, so a call fills it through a cast. */
_Static_assert(sizeof(struct balplan_error) == sizeof(struct bp_error),
	       "struct balplan_error and struct bp_error differ");
_Static_assert(BALPLAN_INFEASIBLE == BP_INFEASIBLE, "BALPLAN_INFEASIBLE is not BP_INFEASIBLE");

#define ERR(e) ((struct bp_error *)(e))

/* `balplan solve`'s defaults (cmd/cmd_solve.c). */
#define DEFAULT_GPU "H100"
#define DEFAULT_MODEL "llama3-8b"
#define DEFAULT_MAX_TOKENS 131072
#define DEFAULT_STEPS 20

struct balplan_dataset {
	struct bp_dataset ds;
	char sha[65]; /* of the text it was read from, as the front end records it */
};

struct balplan_costmodel {
	struct bp_profile prof;
	char sha[65]; /* of the profile's text (canonical for an analytic one) */
	int analytic;
	struct bp_gpu gpu;     /* analytic: flexsp's profile is made with its own schemes */
	struct bp_model model;
	struct bp_scheme sc;
	int dp;
	int64_t max_tokens;
	struct bp_costmodel cm; /* pipeline 0 of the request's layout */
};

struct balplan_plan {
	struct bp_plan p;
};

const char *balplan_version(void)
{
	return BALPLAN_VERSION;
}

size_t balplan_method_count(void)
{
	return bp_method_count();
}

const char *balplan_method_name(size_t i)
{
	const struct bp_method *m = bp_method_at(i);
	return m ? m->name : NULL;
}

const char *balplan_method_summary(size_t i)
{
	const struct bp_method *m = bp_method_at(i);
	return m ? m->summary : NULL;
}

size_t balplan_model_count(void)
{
	return bp_model_preset_count();
}

const char *balplan_model_name(size_t i)
{
	const struct bp_model *m = bp_model_preset_at(i);
	return m ? m->name : NULL;
}

size_t balplan_gpu_count(void)
{
	return bp_gpu_preset_count();
}

const char *balplan_gpu_name(size_t i)
{
	const struct bp_gpu *g = bp_gpu_preset_at(i);
	return g ? g->name : NULL;
}

size_t balplan_dataset_preset_count(void)
{
	return bp_dataset_preset_count();
}

const char *balplan_dataset_preset_name(size_t i)
{
	return i < bp_dataset_preset_count() ? bp_dataset_preset_name(i) : NULL;
}

/* ---- datasets ---- */

static balplan_dataset *dataset_new(struct bp_error *err)
{
	balplan_dataset *d = bp_calloc(1, sizeof(*d), err);
	if (d)
		bp_dataset_init(&d->ds);
	return d;
}

balplan_dataset *balplan_dataset_preset(const char *name, struct balplan_error *err)
{
	size_t len = 0;
	const char *text = name ? bp_dataset_preset_text(name, &len) : NULL;
	if (!text) {
		bp_errorf(ERR(err), "unknown dataset preset '%s'", name ? name : "(null)");
		return NULL;
	}
	balplan_dataset *d = dataset_new(ERR(err));
	if (!d)
		return NULL;
	bp_sha256_hex(text, len, d->sha);
	if (bp_dataset_preset(&d->ds, name, ERR(err)) < 0) {
		balplan_dataset_free(d);
		return NULL;
	}
	return d;
}

balplan_dataset *balplan_dataset_parse(const char *text, size_t len, const char *name,
				       struct balplan_error *err)
{
	if (!text) {
		bp_errorf(ERR(err), "no dataset text");
		return NULL;
	}
	balplan_dataset *d = dataset_new(ERR(err));
	if (!d)
		return NULL;
	bp_sha256_hex(text, len, d->sha);
	if (bp_dataset_read(&d->ds, text, len, name, NULL, ERR(err)) < 0) {
		balplan_dataset_free(d);
		return NULL;
	}
	return d;
}

/* The lengths as the text sample index they equal (one decimal length per line), whose
 * sha256 the plan records. NULL with err. */
static char *lengths_text(const int64_t *lengths, size_t n, size_t *len, struct bp_error *err)
{
	char *t = bp_calloc(n ? n : 1, 21, err); /* 19 digits and a newline, and the NUL */
	if (!t)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += (size_t)snprintf(t + k, 21, "%lld\n", (long long)lengths[i]);
	*len = k;
	return t;
}

balplan_dataset *balplan_dataset_from_lengths(const int64_t *lengths, size_t n,
					      const char *name, struct balplan_error *err)
{
	if (n == 0 || !lengths) {
		bp_errorf(ERR(err), "no document lengths");
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (lengths[i] < 1) {
			bp_errorf(ERR(err), "document %zu has length %lld; lengths are >= 1", i,
				  (long long)lengths[i]);
			return NULL;
		}
	balplan_dataset *d = dataset_new(ERR(err));
	if (!d)
		return NULL;
	struct bp_dataset *ds = &d->ds;
	size_t tlen = 0;
	char *text = lengths_text(lengths, n, &tlen, ERR(err));
	if (!text)
		goto fail;
	bp_sha256_hex(text, tlen, d->sha);
	free(text);
	/* What the text reader (formats/dataset_read.c) makes of the same lengths. */
	if (bp_strlcpy_checked(ds->name, name ? name : "unnamed", sizeof(ds->name),
			       "dataset name", ERR(err)) < 0 ||
	    !(ds->source = bp_strdup("lengths", ERR(err))) ||
	    !(ds->tokenizer = bp_strdup("unknown", ERR(err))) ||
	    !(ds->license = bp_strdup("unknown", ERR(err))) ||
	    !(ds->lengths = bp_calloc(n, sizeof(*ds->lengths), ERR(err))))
		goto fail;
	memcpy(ds->lengths, lengths, n * sizeof(*lengths));
	ds->nlengths = n;
	snprintf(ds->format, sizeof(ds->format), "text");
	bp_dataset_compute_stats(ds);
	return d;
fail:
	balplan_dataset_free(d);
	return NULL;
}

void balplan_dataset_free(balplan_dataset *d)
{
	if (!d)
		return;
	bp_dataset_release(&d->ds);
	free(d);
}

void balplan_dataset_get_stats(const balplan_dataset *d, struct balplan_dataset_stats *out)
{
	const struct bp_dataset_stats *s = &d->ds.stats;
	*out = (struct balplan_dataset_stats){.count = s->count, .tokens = s->tokens,
					      .mean = s->mean, .p50 = s->p50, .p90 = s->p90,
					      .p99 = s->p99, .max = s->max};
}

/* ---- cost models ---- */

/* The analytic profile of gpu and model for nsc schemes, as the front end makes it
 * (cmd/cmdutil.c cmd_analytic_profile_model): tables up to the power of two from 4096 at
 * or above max_tokens, and the sha256 of its canonical text, which a plan records and
 * `balplan check` compares. */
static int analytic_profile(const struct bp_gpu *gpu, const struct bp_model *model,
			    const struct bp_scheme *sc, size_t nsc, int64_t max_tokens,
			    struct bp_profile *p, char sha[65], struct bp_error *err)
{
	return bp_profile_analytic_digest(p, gpu, model, sc, nsc, max_tokens, sha, err);
}

/* The request's layout and recomputation from c, defaults filled in. */
static int take_cluster(balplan_costmodel *cm, const struct balplan_cluster *c,
			struct bp_error *err)
{
	if (!c)
		return bp_errorf(err, "no cluster");
	cm->sc = (struct bp_scheme){.tp = c->tp ? c->tp : 1, .cp = c->cp ? c->cp : 1,
				    .pp = c->pp ? c->pp : 1};
	cm->dp = c->dp ? c->dp : 1;
	cm->max_tokens = c->max_tokens ? c->max_tokens : DEFAULT_MAX_TOKENS;
	if (cm->sc.tp < 1 || cm->sc.cp < 1 || cm->sc.pp < 1 || cm->dp < 1)
		return bp_errorf(err, "parallel degrees must be >= 1 (tp %d cp %d pp %d dp %d)",
				 cm->sc.tp, cm->sc.cp, cm->sc.pp, cm->dp);
	if (cm->max_tokens < 1)
		return bp_errorf(err, "max_tokens must be >= 1");
	enum bp_recompute r = BP_RECOMPUTE_NONE;
	if (c->recompute && bp_recompute_parse(c->recompute, &r) < 0)
		return bp_errorf(err, "recompute '%s' is not none, selective or full",
				 c->recompute);
	cm->prof.recompute = r;
	return 0;
}

static balplan_costmodel *costmodel_new(struct bp_error *err)
{
	balplan_costmodel *cm = bp_calloc(1, sizeof(*cm), err);
	if (cm)
		bp_profile_init(&cm->prof);
	return cm;
}

/* The cost model of pipeline 0 of the request's layout, once the profile is in place. */
static balplan_costmodel *costmodel_finish(balplan_costmodel *cm, struct bp_error *err)
{
	if (cm->sc.pp > cm->prof.model.layers) {
		bp_errorf(err, "pp %d exceeds the %d layers of model '%s'", cm->sc.pp,
			  cm->prof.model.layers, cm->prof.model.name);
		balplan_costmodel_free(cm);
		return NULL;
	}
	if (bp_costmodel_init(&cm->cm, &cm->prof, cm->sc, cm->dp, err) < 0) {
		bp_costmodel_release(&cm->cm);
		memset(&cm->cm, 0, sizeof(cm->cm));
		balplan_costmodel_free(cm);
		return NULL;
	}
	return cm;
}

balplan_costmodel *balplan_costmodel_analytic(const struct balplan_cluster *c,
					      struct balplan_error *err)
{
	balplan_costmodel *cm = costmodel_new(ERR(err));
	if (!cm)
		return NULL;
	if (take_cluster(cm, c, ERR(err)) < 0)
		goto fail;
	const char *gname = c->gpu ? c->gpu : DEFAULT_GPU;
	const char *mname = c->model ? c->model : DEFAULT_MODEL;
	const struct bp_gpu *g = bp_gpu_preset(gname);
	const struct bp_model *m = bp_model_preset(mname);
	if (!g) {
		bp_errorf(ERR(err), "unknown GPU '%s'", gname);
		goto fail;
	}
	if (!m) {
		bp_errorf(ERR(err), "unknown model '%s'", mname);
		goto fail;
	}
	cm->analytic = 1;
	cm->gpu = *g;
	cm->model = *m;
	enum bp_recompute r = cm->prof.recompute;
	if (analytic_profile(g, m, &cm->sc, 1, cm->max_tokens, &cm->prof, cm->sha, ERR(err)) < 0)
		goto fail;
	cm->prof.recompute = r;
	return costmodel_finish(cm, ERR(err));
fail:
	balplan_costmodel_free(cm);
	return NULL;
}

static int profile_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_profile_from_json(out, root, err);
}

balplan_costmodel *balplan_costmodel_profile(const char *text, size_t len,
					     const struct balplan_cluster *c,
					     struct balplan_error *err)
{
	if (!text) {
		bp_errorf(ERR(err), "no profile text");
		return NULL;
	}
	balplan_costmodel *cm = costmodel_new(ERR(err));
	if (!cm)
		return NULL;
	if (take_cluster(cm, c, ERR(err)) < 0)
		goto fail;
	enum bp_recompute r = cm->prof.recompute;
	bp_sha256_hex(text, len, cm->sha);
	if (bp_json_parse_text(text, len, profile_cb, &cm->prof, ERR(err)) < 0) {
		bp_error_prefix(ERR(err), "cannot read the profile");
		goto fail;
	}
	cm->prof.recompute = r;
	return costmodel_finish(cm, ERR(err));
fail:
	balplan_costmodel_free(cm);
	return NULL;
}

void balplan_costmodel_free(balplan_costmodel *cm)
{
	if (!cm)
		return;
	if (cm->cm.prof)
		bp_costmodel_release(&cm->cm);
	bp_profile_release(&cm->prof);
	free(cm);
}

int balplan_cost_doc_us(const balplan_costmodel *cm, int64_t len, double *us,
			struct balplan_error *err)
{
	if (len < 1)
		return bp_errorf(ERR(err), "a document of %lld tokens; lengths are >= 1",
				 (long long)len);
	return bp_cost_doc(&cm->cm, len, us, ERR(err));
}

int balplan_cost_microbatch_us(const balplan_costmodel *cm, const int64_t *lengths, size_t n,
			       double *us, struct balplan_error *err)
{
	if (n == 0 || !lengths)
		return bp_errorf(ERR(err), "an empty micro-batch");
	int pp = cm->sc.pp, rc = -1;
	struct bp_span *spans = bp_calloc(n, sizeof(*spans), ERR(err));
	double *fwd = bp_calloc((size_t)pp, sizeof(double), ERR(err));
	double *bwd = bp_calloc((size_t)pp, sizeof(double), ERR(err));
	if (!spans || !fwd || !bwd)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (lengths[i] < 1) {
			bp_errorf(ERR(err), "document %zu has length %lld; lengths are >= 1", i,
				  (long long)lengths[i]);
			goto out;
		}
		spans[i] = (struct bp_span){.doc = (int64_t)i, .offset = 0, .len = lengths[i]};
	}
	if (bp_cost_microbatch(&cm->cm, spans, n, BP_SHARD_SEQUENCE, fwd, bwd, NULL,
			       ERR(err)) < 0)
		goto out;
	double mx = 0.0;
	for (int s = 0; s < pp; s++)
		if (fwd[s] + bwd[s] > mx)
			mx = fwd[s] + bwd[s];
	*us = mx;
	rc = 0;
out:
	free(spans);
	free(fwd);
	free(bwd);
	return rc;
}

/* ---- planning ---- */

/* "key=value" parameters into the solver's form. */
static int take_params(const struct balplan_solve_opts *o, struct bp_param **out,
		       struct bp_error *err)
{
	*out = NULL;
	if (o->nparams == 0)
		return 0;
	if (!o->params)
		return bp_errorf(err, "nparams %zu but no params", o->nparams);
	struct bp_param *p = bp_calloc(o->nparams, sizeof(*p), err);
	if (!p)
		return -1;
	for (size_t i = 0; i < o->nparams; i++) {
		const char *kv = o->params[i], *eq = kv ? strchr(kv, '=') : NULL;
		if (!eq || eq == kv) {
			free(p);
			return bp_errorf(err, "parameter '%s' is not KEY=VALUE", kv ? kv : "(null)");
		}
		size_t kl = (size_t)(eq - kv);
		if (kl >= sizeof(p[i].key) || strlen(eq + 1) >= sizeof(p[i].value)) {
			free(p);
			return bp_errorf(err, "parameter '%s' is too long", kv);
		}
		memcpy(p[i].key, kv, kl);
		p[i].key[kl] = 0;
		memcpy(p[i].value, eq + 1, strlen(eq + 1) + 1);
		/* A measured coverage file is read by the front end (cmd/cmd_solve.c). */
		if (!strcmp(p[i].key, "sb_coverage") && !strncmp(p[i].value, "measured:", 9)) {
			free(p);
			return bp_errorf(err, "sb_coverage=measured:FILE is read by `balplan solve`; "
					 "the library takes synthetic coverage only");
		}
	}
	*out = p;
	return 0;
}

/* The analytic profile of a method whose row lists its own schemes (flexsp's group sizes;
 * as cmd/cmd_solve.c makes it), so every layout its plans hold is priced. */
static int method_profile(const struct bp_method *m, const balplan_costmodel *cm,
			  const struct bp_param *params, size_t nparams, struct bp_profile *p,
			  char sha[65], struct bp_error *err)
{
	struct bp_scheme fsc[32];
	size_t nfsc = m->profile_schemes(&cm->model, cm->sc, cm->dp, params, nparams, fsc,
					 BP_ARRAY_LEN(fsc));
	if (analytic_profile(&cm->gpu, &cm->model, fsc, nfsc, cm->max_tokens, p, sha, err) < 0)
		return -1;
	p->recompute = cm->prof.recompute;
	return 0;
}

static int parse_enum(const char *s, const char *what, int (*parse)(const char *, void *),
		      void *out, struct bp_error *err)
{
	if (s && parse(s, out) < 0)
		return bp_errorf(err, "%s '%s' is not known", what, s);
	return 0;
}

static int parse_shard(const char *s, void *out)
{
	return bp_shard_parse(s, out);
}

static int parse_order(const char *s, void *out)
{
	return bp_order_parse(s, out);
}

static int parse_overlen(const char *s, void *out)
{
	static const char *const names[] = {"truncate", "drop", "error"};
	static const enum bp_overlen modes[] = {BP_OVERLEN_TRUNCATE, BP_OVERLEN_DROP,
						BP_OVERLEN_ERROR};
	for (size_t i = 0; i < BP_ARRAY_LEN(names); i++)
		if (!strcmp(s, names[i])) {
			*(enum bp_overlen *)out = modes[i];
			return 0;
		}
	return -1;
}

/* One method on ds: the solve options from o and the cost model's request, then bp_solve.
 * pack: the whole of ds as one global batch in its order. */
static int run_solve(const balplan_costmodel *cm, const balplan_dataset *d,
		     const struct balplan_solve_opts *o, int pack, balplan_plan **out,
		     struct bp_error *err)
{
	if (!out)
		return bp_errorf(err, "no place for the plan");
	*out = NULL;
	if (!cm || !d || !o)
		return bp_errorf(err, "a cost model, a dataset and options are required");
	const struct bp_method *m = o->method ? bp_method_find(o->method) : NULL;
	if (!m)
		return bp_errorf(err, "unknown method '%s'", o->method ? o->method : "(null)");
	if (m->input == BP_INPUT_STRATEGIES)
		return bp_errorf(err, "method '%s' plans over candidate strategies that "
				 "`balplan solve` (or `balplan propose`) makes; the library does "
				 "not run it", m->name);
	struct bp_solve_opts so = {
		.method = m->name,
		.cluster = {.gpus = cm->sc.tp * cm->sc.cp * cm->sc.pp * cm->dp, .tp = cm->sc.tp,
			    .cp = cm->sc.cp, .pp = cm->sc.pp, .dp = cm->dp},
		.steps = o->steps ? o->steps : DEFAULT_STEPS,
		.tokens_per_step = o->tokens_per_step,
		.docs_per_step = o->docs_per_step,
		.max_tokens = cm->max_tokens,
		.overlen = pack ? BP_OVERLEN_ERROR : BP_OVERLEN_TRUNCATE,
		.documents = BP_DOCS_WHOLE,
		.order = d->ds.lengths && strcmp(d->ds.format, "balplan") ? BP_ORDER_FILE
									   : BP_ORDER_DRAW,
		.last = BP_LAST_KEEP,
		.seed = o->seed,
		.shard = BP_SHARD_SEQUENCE,
		.dataset_name = d->ds.name,
		.dataset_sha = d->sha,
		.profile_sha = cm->sha,
	};
	if (parse_enum(o->cp_shard, "cp_shard", parse_shard, &so.shard, err) < 0 ||
	    parse_enum(o->order, "order", parse_order, &so.order, err) < 0 ||
	    parse_enum(o->over_length, "over_length", parse_overlen, &so.overlen, err) < 0)
		return -1;
	if (pack) {
		so.steps = 1;
		so.order = BP_ORDER_FILE;
		so.tokens_per_step = 0;
		so.docs_per_step = (int64_t)d->ds.nlengths;
	} else if (!so.tokens_per_step && !so.docs_per_step) {
		so.tokens_per_step = (int64_t)cm->sc.pp * cm->dp * cm->max_tokens;
	}
	if (so.steps < 1)
		return bp_errorf(err, "steps must be >= 1");
	if (so.order != BP_ORDER_DRAW && !d->ds.lengths)
		return bp_errorf(err, "order %s needs a sample index; dataset '%s' is a histogram, "
				 "whose lengths can only be drawn", bp_order_name(so.order),
				 d->ds.name);
	struct bp_param *params = NULL;
	if (take_params(o, &params, err) < 0)
		return -1;
	so.params = params;
	so.nparams = o->nparams;
	struct bp_profile fprof;
	char fsha[65];
	const struct bp_profile *prof = &cm->prof;
	bp_profile_init(&fprof);
	int rc = -1;
	if (m->profile_schemes && cm->analytic) {
		if (method_profile(m, cm, params, o->nparams, &fprof, fsha, err) < 0)
			goto done;
		prof = &fprof;
		so.profile_sha = fsha;
	}
	balplan_plan *p = bp_calloc(1, sizeof(*p), err);
	if (!p)
		goto done;
	bp_plan_init(&p->p);
	rc = bp_solve(&d->ds, prof, &so, &p->p, err);
	if (rc < 0) {
		free(p);
		goto done;
	}
	*out = p;
done:
	bp_profile_release(&fprof);
	free(params);
	return rc;
}

int balplan_pack(const balplan_costmodel *cm, const int64_t *lengths, size_t n,
		 const struct balplan_solve_opts *o, balplan_plan **out,
		 struct balplan_error *err)
{
	balplan_dataset *d = balplan_dataset_from_lengths(lengths, n, "batch", err);
	if (!d) {
		if (out)
			*out = NULL;
		return -1;
	}
	int rc = run_solve(cm, d, o, 1, out, ERR(err));
	balplan_dataset_free(d);
	return rc;
}

int balplan_solve(const balplan_costmodel *cm, const balplan_dataset *ds,
		  const struct balplan_solve_opts *o, balplan_plan **out,
		  struct balplan_error *err)
{
	return run_solve(cm, ds, o, 0, out, ERR(err));
}

void balplan_plan_free(balplan_plan *p)
{
	if (!p)
		return;
	bp_plan_release(&p->p);
	free(p);
}

/* ---- reading a plan ---- */

static const struct bp_step *get_step(const balplan_plan *p, size_t step)
{
	return p && step < p->p.nsteps ? &p->p.steps[step] : NULL;
}

static const struct bp_pipe *get_pipe(const balplan_plan *p, size_t step, size_t pipe)
{
	const struct bp_step *st = get_step(p, step);
	return st && pipe < st->npipes ? &st->pipes[pipe] : NULL;
}

static const struct bp_mb *get_mb(const balplan_plan *p, size_t step, size_t pipe, size_t mb)
{
	const struct bp_pipe *pp = get_pipe(p, step, pipe);
	return pp && mb < pp->nmbs ? &pp->mbs[mb] : NULL;
}

size_t balplan_plan_steps(const balplan_plan *p)
{
	return p ? p->p.nsteps : 0;
}

size_t balplan_plan_pipelines(const balplan_plan *p, size_t step)
{
	const struct bp_step *st = get_step(p, step);
	return st ? st->npipes : 0;
}

size_t balplan_plan_microbatches(const balplan_plan *p, size_t step, size_t pipe)
{
	const struct bp_pipe *pp = get_pipe(p, step, pipe);
	return pp ? pp->nmbs : 0;
}

size_t balplan_plan_spans(const balplan_plan *p, size_t step, size_t pipe, size_t mb)
{
	const struct bp_mb *m = get_mb(p, step, pipe, mb);
	return m ? m->nspans : 0;
}

int balplan_plan_span(const balplan_plan *p, size_t step, size_t pipe, size_t mb, size_t k,
		      struct balplan_span *out)
{
	const struct bp_mb *m = get_mb(p, step, pipe, mb);
	if (!m || k >= m->nspans)
		return -1;
	const struct bp_span *s = &m->spans[k];
	*out = (struct balplan_span){.doc = s->doc, .offset = s->offset, .len = s->len};
	return 0;
}

size_t balplan_plan_docs(const balplan_plan *p, size_t step)
{
	const struct bp_step *st = get_step(p, step);
	return st ? st->ndocs : 0;
}

int balplan_plan_doc(const balplan_plan *p, size_t step, size_t i, struct balplan_doc *out)
{
	const struct bp_step *st = get_step(p, step);
	if (!st || i >= st->ndocs)
		return -1;
	const struct bp_doc *d = &st->docs[i];
	int64_t train = st->index;
	for (size_t k = 0; k < st->ndelayed; k++)
		if (st->delayed[k].doc == d->id)
			train = st->delayed[k].to_step;
	*out = (struct balplan_doc){
		.id = d->id,
		.len = d->len,
		.sample = p->p.source.order == BP_ORDER_DRAW ? -1 : d->sample,
		.train_step = train - p->p.first_step,
	};
	return 0;
}

int balplan_plan_step_metrics(const balplan_plan *p, size_t step,
			      struct balplan_step_metrics *out)
{
	const struct bp_step *st = get_step(p, step);
	if (!st)
		return -1;
	const struct bp_metrics *m = &st->m;
	*out = (struct balplan_step_metrics){.step_us = m->step_us, .imbalance_wlb = m->imb_wlb,
					     .bubble = m->bubble, .peak_mem_bytes = m->peak_mem,
					     .tokens = m->tokens, .microbatches = m->nmbs};
	return 0;
}

void balplan_plan_get_summary(const balplan_plan *p, struct balplan_summary *out)
{
	const struct bp_summary *s = &p->p.summary;
	*out = (struct balplan_summary){
		.steps = s->steps, .docs = s->docs, .tokens = s->tokens, .delayed = s->delayed,
		.step_mean_us = s->step_mean_us, .step_p95_us = s->step_p95_us,
		.step_max_us = s->step_max_us, .total_us = s->total_us,
		.tokens_per_s = s->tokens_per_s, .imbalance_wlb_mean = s->imb_wlb_mean,
		.bubble_mean = s->bubble_mean, .pack_gap_mean = s->pack_gap_mean,
		.model_tflops_per_gpu = s->model_tflops_per_gpu, .mfu = s->mfu,
		.peak_mem_bytes = s->peak_mem,
	};
}

size_t balplan_plan_warning(const balplan_plan *p, char *buf, size_t n)
{
	if (!buf || n == 0)
		return 0;
	buf[0] = 0;
	const struct bp_method *m = p ? bp_method_find(p->p.method) : NULL;
	if (m && m->warn)
		m->warn(&p->p, buf, n);
	return strlen(buf);
}

char *balplan_plan_json(const balplan_plan *p, struct balplan_error *err)
{
	if (!p) {
		bp_errorf(ERR(err), "no plan");
		return NULL;
	}
	json_t *j = bp_plan_to_json(&p->p);
	char *text = j ? bp_json_dump_lines(j) : NULL;
	json_decref(j);
	if (!text)
		bp_errorf(ERR(err), "cannot encode the plan: out of memory");
	return text;
}
