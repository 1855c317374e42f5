/* solve.c: the solve driver (solve.h), called by `balplan solve` and the benchmarks, and
 * the plan check. Every method goes through it, so all are sampled, predicted and validated
 * the same way. */
#include "solve.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "method.h"
#include "predict.h"
#include "rng.h"
#include "schedule_fit.h"
#include "validate.h"
#include "work.h"

/* Memory check before solving: a stage-0 rank holding min(pp, m) micro-batches of max_tokens
 * (the 1F1B in-flight maximum, Hydraulis App. B.1's "accumulated PP times in the first
 * pipeline" stage) must fit the cap. */
static int check_memory(const struct bp_costmodel *cm, int64_t max_tokens,
			struct bp_error *err)
{
	int64_t cap = bp_cost_mem_cap(cm);
	int64_t per_rank = (max_tokens + cm->sc.cp - 1) / cm->sc.cp;
	for (int s = 0; s < cm->sc.pp; s++) {
		/* saturated: a profile's bounds keep it in range, a huge request may not */
		int64_t need = bp_i64_mul_add_sat(cm->sc.pp - s, bp_cost_act_bytes(cm, s, per_rank),
						  bp_cost_state_bytes(cm, s));
		if (need > cap)
			return bp_infeasiblef(err, "max_tokens %lld needs %.1f GiB on stage %d but "
					      "a GPU has %.1f GiB usable; lower --max-tokens or "
					      "raise tp/cp/pp", (long long)max_tokens,
					      need / 1073741824.0, s, cap / 1073741824.0);
	}
	return 0;
}

int bp_plan_costs(const struct bp_plan *p, const struct bp_profile *prof,
		  struct bp_costs *costs, struct bp_error *err)
{
	const struct bp_model *a = &p->model, *b = &prof->model;
	bp_costs_init(costs, prof);
	if (strcmp(a->name, b->name) || a->layers != b->layers || a->hidden != b->hidden ||
	    a->heads != b->heads || a->kv_heads != b->kv_heads || a->ffn != b->ffn ||
	    a->vocab != b->vocab || a->gated != b->gated)
		return bp_errorf(err, "the plan's model '%s' is not the profile's model '%s'",
				 a->name, b->name);
	if (p->cluster.gpus_per_node != prof->hw.gpus_per_node)
		return bp_errorf(err, "the plan's nodes have %d GPUs, the profile's %d",
				 p->cluster.gpus_per_node, prof->hw.gpus_per_node);
	return 0;
}

int bp_plan_repredict(struct bp_plan *p, struct bp_costs *costs, struct bp_error *err)
{
	return bp_plan_predict(p, costs, NULL, err);
}

/* The method's parameters as given, each one it takes (its own, or its packing method's),
 * after cp_shard. */
static int plan_params(const struct bp_method *m, const struct bp_solve_opts *o,
		       struct bp_plan *out, struct bp_error *err)
{
	if (bp_plan_set_param(out, "cp_shard", bp_shard_name(o->shard), err) < 0)
		return -1;
	const char *batching = NULL; /* the packing method the method packs with, if any */
	for (size_t i = 0; m->packer_param && i < o->nparams; i++)
		if (!strcmp(o->params[i].key, m->packer_param))
			batching = o->params[i].value;
	for (size_t i = 0; i < o->nparams; i++) {
		const char *key = o->params[i].key;
		int known = bp_method_takes(m, key, batching);
		if (!known)
			return bp_errorf(err, "method '%s' has no parameter '%s'", m->name, key);
		if (bp_plan_set_param(out, key, o->params[i].value, err) < 0)
			return -1;
	}
	return 0;
}

/* The request's schedule on its layout (lay), for methods that plan on it. */
static int request_schedule(const struct bp_method *m, const struct bp_solve_opts *o,
			    const struct bp_profile *prof, const struct bp_plan *out,
			    struct bp_layout *lay, struct bp_error *err)
{
	const struct bp_schedule *sch = bp_schedule_find(o->schedule);
	char names[128];
	bp_schedule_names(names, sizeof(names));
	if (!sch || sch->world_ticks)
		return bp_errorf(err, "schedule '%s' is not one a request can ask for (%s; "
				 "distca-ticks comes with -m distca)", o->schedule, names);
	if (sch != bp_schedule_default() && !m->schedules)
		return bp_errorf(err, "method '%s' brings its own layouts, schedule or "
				 "attention: schedule '%s' is for the packing methods", m->name,
				 sch->name);
	snprintf(lay->schedule, sizeof(lay->schedule), "%s", sch->name);
	lay->vstages = sch->chunked ? o->vstages : 1;
	return bp_layout_check(lay, out->cluster.gpus, out->cluster.gpus_per_node,
			       prof->model.layers, err) < 0 ? -1 : 0;
}

/* The plan before any step: cluster, model, inputs, sampling options, the method's
 * parameters as given, layout 0 (the request's) and its cost model in costs (*cm_out),
 * and the memory check. 0, -1 or BP_INFEASIBLE; out is released on failure. */
static int solve_header(const struct bp_method *m, const struct bp_profile *prof,
			const struct bp_solve_opts *o, struct bp_plan *out, struct bp_costs *costs,
			const struct bp_costmodel **cm_out, struct bp_error *err)
{
	struct bp_layout lay;
	int rc = -1;
	bp_layout_init(&lay);
	bp_plan_init(out);
	const struct bp_solve_layout *c = &o->cluster;
	memcpy(out->cluster.gpu, prof->hw.gpu, sizeof(out->cluster.gpu));
	out->cluster.gpus = c->gpus;
	out->cluster.gpus_per_node = prof->hw.gpus_per_node;
	if (bp_cluster_check(&out->cluster, err) < 0)
		goto out;
	if (c->tp < 1 || c->cp < 1 || c->pp < 1 || c->dp < 1) {
		bp_errorf(err, "parallel degrees must be >= 1 (tp %d cp %d pp %d dp %d)", c->tp,
			  c->cp, c->pp, c->dp);
		goto out;
	}
	int64_t prod = (int64_t)c->tp * c->cp * c->pp * c->dp;
	if (prod != c->gpus) {
		bp_errorf(err, "tp*cp*pp*dp = %lld does not match %d GPUs", (long long)prod,
			  c->gpus);
		goto out;
	}
	out->model = prof->model;
	out->recompute = prof->recompute;
	out->optimizer_replicated = prof->optimizer_replicated;
	snprintf(out->method, sizeof(out->method), "%s", m->name);
	snprintf(out->dataset, sizeof(out->dataset), "%s", o->dataset_name);
	snprintf(out->dataset_sha, sizeof(out->dataset_sha), "%s", o->dataset_sha);
	snprintf(out->profile, sizeof(out->profile), "%s", prof->name);
	snprintf(out->profile_sha, sizeof(out->profile_sha), "%s", o->profile_sha);
	out->seed = o->seed;
	out->nsteps_drawn = o->steps;
	out->tokens_per_step = o->tokens_per_step;
	out->docs_per_step = o->docs_per_step;
	out->max_tokens = o->max_tokens;
	out->overlen = o->overlen;
	if ((unsigned)o->documents >= BP_DOCS_NMODES) {
		bp_errorf(err, "unknown document mode %d", (int)o->documents);
		goto out;
	}
	out->documents = o->documents;
	if (plan_params(m, o, out, err) < 0)
		goto out;
	if (o->max_tokens < 1) {
		bp_errorf(err, "max_tokens must be >= 1");
		goto out;
	}
	struct bp_scheme sc = {c->tp, c->cp, c->pp};
	if (sc.pp > prof->model.layers) {
		bp_errorf(err, "pp %d exceeds the %d layers of model '%s'", sc.pp,
			  prof->model.layers, prof->model.name);
		goto out;
	}
	if (bp_profile_check_scheme(prof, c->tp, c->cp, c->pp, c->dp, prof->hw.gpus_per_node,
				    err) < 0)
		goto out;
	if (bp_layout_megatron(&lay, sc, c->dp, prof->model.layers, o->max_tokens, err) < 0)
		goto out;
	if (o->schedule && request_schedule(m, o, prof, out, &lay, err) < 0)
		goto out;
	if (bp_plan_add_layout(out, &lay, err) < 0)
		goto out;
	const struct bp_costmodel *cm = bp_costs_pipe(costs, &out->layouts[0], 0, err);
	if (!cm)
		goto out;
	/* A method that spreads a micro-batch's documents over its pipelines holds its row's
	 * mem_tokens_param per rank, not a whole max_tokens document; the plan's validation
	 * checks the memory it predicts either way. */
	int64_t mem_tokens = o->max_tokens;
	const char *rt = m->mem_tokens_param ? bp_plan_param(out, m->mem_tokens_param) : NULL;
	if (rt) {
		int64_t v;
		if (bp_parse_int64(rt, &v, m->mem_tokens_param, err) < 0)
			goto out;
		if (v >= 1 && v < mem_tokens)
			mem_tokens = v;
	}
	rc = bp_method_own_memory(m) ? 0 : check_memory(cm, mem_tokens, err);
	if (rc < 0)
		goto out;
	*cm_out = cm;
out:
	if (rc < 0)
		bp_plan_release(out);
	bp_layout_release(&lay);
	return rc;
}

/* sampling.source of a plan of samples, from the index and what the sampler consumed. */
static void set_source(struct bp_plan *out, const struct bp_solve_opts *o,
		       const struct bp_dataset *ds, const struct bp_batches *b)
{
	if (o->order == BP_ORDER_DRAW)
		return;
	struct bp_source *src = &out->source;
	src->order = o->order;
	snprintf(src->format, sizeof(src->format), "%s", ds->format);
	src->samples = (int64_t)ds->nlengths;
	src->sequences = ds->sequences;
	src->tokens = ds->stats.tokens;
	src->epochs = o->epochs;
	src->last = o->last;
	src->first_pos = b->first_pos;
	src->end_pos = b->end_pos;
	src->left = b->left;
	src->data_ended = b->data_ended;
}

/* A step's token budget (method.h step_tokens): tokens_per_step, or docs_per_step times
 * the data's mean document length after the cap rule (a sample index: its lengths; a
 * histogram: its bins, a bin over the cap counted at the cap, or left out under drop). */
static double step_tokens(const struct bp_solve_opts *o, const struct bp_dataset *ds)
{
	if (o->tokens_per_step > 0)
		return (double)o->tokens_per_step;
	double tok = 0.0, n = 0.0, cap = (double)o->max_tokens;
	int drop = o->overlen == BP_OVERLEN_DROP;
	for (size_t i = 0; ds->lengths && i < ds->nlengths; i++) {
		double l = (double)ds->lengths[i];
		if (l > cap && drop)
			continue;
		tok += l < cap ? l : cap;
		n += 1.0;
	}
	for (size_t i = 0; !ds->lengths && i < ds->nbins; i++) {
		const struct bp_bin *b = &ds->bins[i];
		double c = (double)b->count, t = (double)b->tokens;
		if ((double)b->lo > cap && drop)
			continue;
		tok += t < c * cap ? t : c * cap;
		n += c;
	}
	return n > 0 ? (double)o->docs_per_step * tok / n : 0.0;
}

/* What a method is called with (method.h): with run NULL the whole run (ids and steps from
 * 0), else a window of it. */
static struct bp_method_ctx method_ctx(const struct bp_solve_opts *o,
				       const struct bp_dataset *ds, struct bp_costs *costs,
				       const struct bp_costmodel *cm, struct bp_rng *rng,
				       struct bp_method_run *run)
{
	return (struct bp_method_ctx){.cm = cm, .rng = rng, .shard = o->shard, .costs = costs,
				      .input = o->method_input, .run = run,
				      .step_tokens = step_tokens(o, ds)};
}

/* Prediction and validation of what the method returned. */
static int predict_method(const struct bp_method *m, struct bp_plan *out,
			  struct bp_costs *costs, int64_t truncated, int64_t dropped,
			  struct bp_error *err)
{
	/* layouts may have moved (a method adding layouts): the cache keys on addresses */
	bp_costs_release(costs);
	out->summary.truncated = truncated;
	out->summary.dropped = dropped;
	if (bp_plan_fit_schedule(out, costs, NULL, err) < 0)
		return bp_error_prefix(err, "method '%s'", m->name);
	if (bp_plan_predict(out, costs, NULL, err) < 0)
		return -1;
	if (bp_plan_validate(out, costs, err) < 0)
		return bp_error_prefix(err, "method '%s' produced an invalid plan", m->name);
	return 0;
}

static void sampler_opts(const struct bp_solve_opts *o, int64_t steps,
			 struct bp_sampler_opts *so)
{
	*so = (struct bp_sampler_opts){.steps = steps, .tokens_per_step = o->tokens_per_step,
				       .docs_per_step = o->docs_per_step, .max_len = o->max_tokens,
				       .overlen = o->overlen, .seed = o->seed, .order = o->order,
				       .epochs = o->epochs, .last = o->last};
}

/* The method's generator: derived from the seed but apart from the sampler's stream. */
static void method_rng(const struct bp_solve_opts *o, struct bp_rng *rng)
{
	bp_rng_seed(rng, o->seed ^ 0x6d6574686f64ULL);
}

/* bp_solve of a window (first_step, flush_data) and bp_solve_progress: the streaming
 * driver, its steps taken into one plan. */
struct collect {
	struct bp_plan steps;
	void (*progress)(void *arg, int64_t steps);
	void *arg;
};

static int collect_steps(void *arg, const struct bp_plan *w, struct bp_error *err)
{
	struct collect *c = arg;
	struct bp_plan *out = &c->steps;
	struct bp_step *ns = bp_realloc_array(out->steps, out->nsteps + w->nsteps + 1,
					      sizeof(*ns), err);
	if (!ns)
		return -1;
	out->steps = ns;
	memcpy(ns + out->nsteps, w->steps, w->nsteps * sizeof(*ns));
	out->nsteps += w->nsteps;
	((struct bp_plan *)w)->nsteps = 0; /* taken: the driver releases no step of w */
	if (c->progress)
		c->progress(c->arg, (int64_t)out->nsteps);
	return 0;
}

int bp_solve_progress(const struct bp_dataset *ds, const struct bp_profile *prof,
		      const struct bp_solve_opts *o, size_t window,
		      void (*progress)(void *arg, int64_t steps), void *arg, struct bp_plan *out,
		      struct bp_error *err)
{
	struct collect c = {.progress = progress, .arg = arg};
	bp_plan_init(&c.steps);
	struct bp_solve_sink sink = {collect_steps, &c};
	int rc = bp_solve_stream(ds, prof, o, window, &sink, out, err);
	if (rc == 0) {
		out->steps = c.steps.steps;
		out->nsteps = c.steps.nsteps;
		c.steps.steps = NULL;
		c.steps.nsteps = 0;
	}
	bp_plan_release(&c.steps);
	return rc;
}

static int solve_window(const struct bp_dataset *ds, const struct bp_profile *prof,
			const struct bp_solve_opts *o, struct bp_plan *out, struct bp_error *err)
{
	return bp_solve_progress(ds, prof, o, 64, NULL, NULL, out, err);
}

int bp_solve(const struct bp_dataset *ds, const struct bp_profile *prof,
	     const struct bp_solve_opts *o, struct bp_plan *out, struct bp_error *err)
{
	if (o->first_step > 0 || o->flush_data)
		return solve_window(ds, prof, o, out, err);
	struct bp_batches batches = {0};
	struct bp_costs costs;
	struct bp_rng rng;
	const struct bp_costmodel *cm = NULL;
	const struct bp_method *m = bp_method_find(o->method);
	bp_costs_init(&costs, prof);
	if (!m)
		return bp_errorf(err, "unknown method '%s'", o->method);
	int rc = solve_header(m, prof, o, out, &costs, &cm, err);
	if (rc < 0) {
		bp_costs_release(&costs);
		return rc;
	}
	struct bp_sampler_opts so;
	sampler_opts(o, o->steps, &so);
	rc = bp_sample(ds, &so, &batches, err);
	if (rc < 0) {
		if (o->overlen == BP_OVERLEN_ERROR && strstr(err->text, "longer than"))
			rc = BP_INFEASIBLE;
		goto out;
	}
	rc = -1;
	out->nsteps_drawn = (int64_t)batches.n; /* fewer than asked when the data ended */
	set_source(out, o, ds, &batches);
	/* CUT: every method gets the same window-cut pieces (documents.h). */
	if (o->documents == BP_DOCS_CUT && bp_batches_cut(&batches, o->max_tokens, NULL, err) < 0)
		goto out;
	method_rng(o, &rng);
	struct bp_method_ctx ctx = method_ctx(o, ds, &costs, cm, &rng, NULL);
	rc = m->solve(&ctx, &batches, out, err);
	if (rc == 0)
		rc = predict_method(m, out, &costs, batches.truncated, batches.dropped, err);
out:
	if (rc < 0)
		bp_plan_release(out);
	bp_batches_release(&batches);
	bp_costs_release(&costs);
	return rc;
}

/* Two predicted numbers agree when they round alike (the plan keeps 1e-3 us). */
static int differs(double a, double b)
{
	return fabs(a - b) > 1e-3 * 1.5 + 1e-9 * fabs(a);
}

#define CHECK_REAL(a, b, ...)                                                               \
	do {                                                                                \
		if (differs((a), (b))) {                                                    \
			bp_errorf(err, __VA_ARGS__);                                        \
			bp_error_prefix(err, "%s", ctx);                                    \
			return -1;                                                          \
		}                                                                           \
	} while (0)

/* Compares a field table's worth of numbers: every predicted metric or summary field. */
static int compare_metrics(const struct bp_metrics *a, const struct bp_metrics *b,
			   const char *ctx, struct bp_error *err)
{
	const struct {
		const char *name;
		double x, y;
	} v[] = {
		{"step_us", a->step_us, b->step_us},
		{"pipeline_max_us", a->pipe_max_us, b->pipe_max_us},
		{"pipeline_min_us", a->pipe_min_us, b->pipe_min_us},
		{"grad_sync_us", a->grad_sync_us, b->grad_sync_us},
		{"bubble", a->bubble, b->bubble},
		{"imbalance_wlb", a->imb_wlb, b->imb_wlb},
		{"imbalance_sparsebalance", a->imb_sb, b->imb_sb},
		{"rank_gap_hydraulis", a->gap_hyd, b->gap_hyd},
		{"pack_max_us", a->pack_max_us, b->pack_max_us},
		{"pack_bound_us", a->pack_bound_us, b->pack_bound_us},
		{"pack_gap", a->pack_gap, b->pack_gap},
		/* Hydraulis's pull/push (-1 on both sides for other sync models) */
		{"pull_us", a->pull_us, b->pull_us},
		{"push_us", a->push_us, b->push_us},
		{"optimizer_us", a->optimizer_us, b->optimizer_us},
		{"op_exposed_us", a->op_exposed_us, b->op_exposed_us},
		{"lnk_bytes", a->lnk_bytes, b->lnk_bytes},
		{"lnk_slices_pull", a->lnk_slices_pull, b->lnk_slices_pull},
		{"lnk_slices_push", a->lnk_slices_push, b->lnk_slices_push},
	};
	for (size_t i = 0; i < BP_ARRAY_LEN(v); i++)
		CHECK_REAL(v[i].x, v[i].y, "predicted %s %.3f, the profile gives %.3f", v[i].name,
			   v[i].x, v[i].y);
	/* The work trained (sim/work.h), when the plan records it (< 0: written before it). */
	if (a->model_tflop >= 0)
		CHECK_REAL(a->model_tflop, b->model_tflop, "predicted model_tflop %.3f, the spans "
			   "give %.3f", a->model_tflop, b->model_tflop);
	const struct {
		const char *name;
		int64_t x, y;
	} w[] = {
		{"peak_mem_bytes", a->peak_mem, b->peak_mem},
		{"tokens", a->tokens, b->tokens},
		{"microbatches", a->nmbs, b->nmbs},
	};
	for (size_t i = 0; i < BP_ARRAY_LEN(w); i++)
		if (w[i].x != w[i].y) {
			bp_errorf(err, "predicted %s %lld, the plan's decisions give %lld",
				  w[i].name, (long long)w[i].x, (long long)w[i].y);
			return bp_error_prefix(err, "%s", ctx);
		}
	return 0;
}

static int compare_summary(const struct bp_summary *a, const struct bp_summary *b,
			   struct bp_error *err)
{
	const char *ctx = "summary";
	const struct {
		const char *name;
		double x, y;
	} v[] = {
		{"step_mean_us", a->step_mean_us, b->step_mean_us},
		{"step_p50_us", a->step_p50_us, b->step_p50_us},
		{"step_p95_us", a->step_p95_us, b->step_p95_us},
		{"step_max_us", a->step_max_us, b->step_max_us},
		{"total_us", a->total_us, b->total_us},
		{"tokens_per_s", a->tokens_per_s, b->tokens_per_s},
		{"imbalance_wlb_mean", a->imb_wlb_mean, b->imb_wlb_mean},
		{"imbalance_wlb_p95", a->imb_wlb_p95, b->imb_wlb_p95},
		{"imbalance_sparsebalance_mean", a->imb_sb_mean, b->imb_sb_mean},
		{"rank_gap_hydraulis_mean", a->gap_hyd_mean, b->gap_hyd_mean},
		{"bubble_mean", a->bubble_mean, b->bubble_mean},
		{"delay_steps_mean", a->delay_steps_mean, b->delay_steps_mean},
		{"pack_gap_mean", a->pack_gap_mean, b->pack_gap_mean},
		{"pack_gap_max", a->pack_gap_max, b->pack_gap_max},
	};
	for (size_t i = 0; i < BP_ARRAY_LEN(v); i++)
		CHECK_REAL(v[i].x, v[i].y, "%s %.3f, the steps give %.3f", v[i].name, v[i].x,
			   v[i].y);
	/* Work-normalised throughput (sim/work.h), when recorded (< 0: written before it). */
	const struct {
		const char *name;
		double x, y;
	} u[] = {
		{"model_tflop", a->model_tflop, b->model_tflop},
		{"model_tflops_per_gpu", a->model_tflops_per_gpu, b->model_tflops_per_gpu},
		{"mfu", a->mfu, b->mfu},
	};
	for (size_t i = 0; i < BP_ARRAY_LEN(u); i++)
		if (u[i].x >= 0)
			CHECK_REAL(u[i].x, u[i].y, "%s %.3f, the steps give %.3f", u[i].name,
				   u[i].x, u[i].y);
	const struct {
		const char *name;
		int64_t x, y;
	} w[] = {
		{"steps", a->steps, b->steps},
		{"docs", a->docs, b->docs},
		{"tokens", a->tokens, b->tokens},
		{"delayed_docs", a->delayed, b->delayed},
		{"peak_mem_bytes", a->peak_mem, b->peak_mem},
	};
	for (size_t i = 0; i < BP_ARRAY_LEN(w); i++)
		if (w[i].x != w[i].y) {
			bp_errorf(err, "%s %lld, the steps give %lld", w[i].name, (long long)w[i].x,
				  (long long)w[i].y);
			return bp_error_prefix(err, "%s", ctx);
		}
	return 0;
}

/* A copy of the plan's decisions only (nothing predicted). */
static int copy_decisions(const struct bp_plan *p, struct bp_plan *q, struct bp_error *err)
{
	q->cluster = p->cluster;
	q->model = p->model;
	q->max_tokens = p->max_tokens;
	q->summary.truncated = p->summary.truncated;
	q->summary.dropped = p->summary.dropped;
	/* the method's parameters: the simulator reads grad_sync (sim/predict.c) */
	for (size_t i = 0; i < p->nparams; i++)
		if (bp_plan_set_param(q, p->params[i].key, p->params[i].value, err) < 0)
			return -1;
	for (size_t i = 0; i < p->nlayouts; i++) {
		struct bp_layout l;
		if (bp_layout_copy(&l, &p->layouts[i], err) < 0)
			return -1;
		if (bp_plan_add_layout(q, &l, err) < 0) {
			bp_layout_release(&l);
			return -1;
		}
	}
	q->steps = bp_calloc(p->nsteps + 1, sizeof(*q->steps), err);
	if (!q->steps)
		return -1;
	q->nsteps = p->nsteps;
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *a = &p->steps[i];
		struct bp_step *b = &q->steps[i];
		b->index = a->index;
		b->layout = a->layout;
		memcpy(b->sync, a->sync, sizeof(b->sync));
		b->docs = bp_calloc(a->ndocs + 1, sizeof(*b->docs), err);
		b->delayed = bp_calloc(a->ndelayed + 1, sizeof(*b->delayed), err);
		b->ca = bp_calloc(a->nca + 1, sizeof(*b->ca), err);
		b->pipes = bp_calloc(a->npipes + 1, sizeof(*b->pipes), err);
		if (!b->docs || !b->delayed || !b->ca || !b->pipes)
			return -1;
		if (a->ndocs)
			memcpy(b->docs, a->docs, a->ndocs * sizeof(*a->docs));
		b->ndocs = a->ndocs;
		if (a->ndelayed)
			memcpy(b->delayed, a->delayed, a->ndelayed * sizeof(*a->delayed));
		b->ndelayed = a->ndelayed;
		if (a->nca)
			memcpy(b->ca, a->ca, a->nca * sizeof(*a->ca));
		b->nca = a->nca;
		/* a record may hold decisions the prediction reads (distca's ping/pong split):
		 * copied through its codec */
		if (a->record && a->record_ops) {
			json_t *j = a->record_ops->to_json(a->record);
			void *r = j ? bp_step_set_record(b, a->record_ops, err) : NULL;
			int ok = r && a->record_ops->from_json(r, j, "record", err) == 0;
			json_decref(j);
			if (!ok)
				return j ? -1 : bp_errorf(err, "step %zu: cannot copy its record", i);
		}
		b->npipes = a->npipes;
		for (size_t k = 0; k < a->npipes; k++) {
			const struct bp_pipe *pa = &a->pipes[k];
			struct bp_pipe *pb = &b->pipes[k];
			pb->mbs = bp_calloc(pa->nmbs + 1, sizeof(*pb->mbs), err);
			if (!pb->mbs)
				return -1;
			for (size_t j = 0; j < pa->nmbs; j++) {
				pb->nmbs = j + 1;
				if (bp_mb_copy_decisions(&pb->mbs[j], &pa->mbs[j], p->model.layers,
							 err) < 0)
					return -1;
			}
		}
	}
	return 0;
}

static int keep_stubs(struct bp_plan *ledger, size_t *cap, const struct bp_plan *w,
		      int64_t step0, struct bp_error *err);

/* Pipeline k of step i: the recorded micro-batches' tokens and times (a) against the
 * re-predicted ones (b), then the pipeline's time, busy time and peak memory per stage. */
static int compare_pipe(const struct bp_pipe *pa, const struct bp_pipe *pb, int pp, size_t i,
			size_t k, struct bp_error *err)
{
	char ctx[128];
	for (size_t j = 0; j < pa->nmbs; j++) {
		const struct bp_mb *x = &pa->mbs[j], *y = &pb->mbs[j];
		if (x->tokens != y->tokens)
			return bp_errorf(err, "step %zu pipeline %zu micro-batch %zu: tokens %lld, "
					 "the spans hold %lld", i, k, j, (long long)x->tokens,
					 (long long)y->tokens);
		for (int s = 0; s < pp; s++)
			if (differs(x->fwd[s], y->fwd[s]) || differs(x->bwd[s], y->bwd[s]))
				return bp_errorf(err, "step %zu pipeline %zu micro-batch %zu stage "
						 "%d: predicted %.3f/%.3f us, the profile gives "
						 "%.3f/%.3f us", i, k, j, s, x->fwd[s], x->bwd[s],
						 y->fwd[s], y->bwd[s]);
	}
	snprintf(ctx, sizeof(ctx), "step %zu pipeline %zu", i, k);
	if (differs(pa->time_us, pb->time_us))
		return bp_errorf(err, "%s: predicted time %.3f us, the profile gives %.3f us", ctx,
				 pa->time_us, pb->time_us);
	for (int s = 0; s < pp; s++) {
		if (differs(pa->busy_us[s], pb->busy_us[s]))
			return bp_errorf(err, "%s stage %d: predicted busy %.3f us, the profile "
					 "gives %.3f us", ctx, s, pa->busy_us[s], pb->busy_us[s]);
		if (pa->peak_mem[s] != pb->peak_mem[s])
			return bp_errorf(err, "%s stage %d: predicted peak memory %lld bytes, the "
					 "profile gives %lld", ctx, s, (long long)pa->peak_mem[s],
					 (long long)pb->peak_mem[s]);
	}
	return 0;
}

/* What a plan says of its method before its steps are checked: the method is one of the
 * table, its cp_shard known, and every record one the method keeps. */
static int check_method_of(const struct bp_plan *p, const struct bp_method *m,
			   struct bp_error *err)
{
	if (!m)
		return bp_errorf(err, "method \"%.64s\" is not a method of this balplan",
				 p->method);
	enum bp_shard sh;
	const char *cs = bp_plan_param(p, "cp_shard");
	if (!cs || bp_shard_parse(cs, &sh) < 0)
		return bp_errorf(err, "method parameter cp_shard \"%.64s\" is not sequence, "
				 "document or adaptive", cs ? cs : "");
	for (size_t i = 0; i < p->nsteps; i++)
		if (p->steps[i].record_ops && p->steps[i].record_ops != m->record)
			return bp_errorf(err, "step %zu carries a \"%s\" record, which method '%s' "
					 "does not keep", i, p->steps[i].record_ops->name, m->name);
	return 0;
}

/* bp_plan_check, or with a ledger (a window of a plan of lines) its steps checked alone:
 * their re-predicted stubs go to the ledger (indices from step0) and their FLOPs to *flops,
 * for the run's summary. */
static int check_plan(const struct bp_plan *p, const struct bp_profile *prof,
		      struct bp_plan *ledger, size_t *ledger_cap, int64_t step0, double *flops,
		      struct bp_error *err)
{
	struct bp_costs costs;
	struct bp_plan q;
	char ctx[128];
	int rc = -1;
	bp_plan_init(&q);
	bp_costs_init(&costs, prof);
	const struct bp_method *m = bp_method_find(p->method);
	if (check_method_of(p, m, err) < 0)
		goto out;
	if (bp_plan_costs(p, prof, &costs, err) < 0)
		goto out;
	if (bp_plan_validate(p, &costs, err) < 0)
		goto out;
	/* the method's parameters as solve reads them, and its records against them */
	if (bp_method_check_params(m, p, err) < 0)
		goto out;
	if (m->recheck && m->recheck(p, &costs, err) < 0) /* its decisions re-derived */
		goto out;
	if (copy_decisions(p, &q, err) < 0)
		goto out;
	bp_costs_release(&costs);
	if (bp_plan_predict(&q, &costs, NULL, err) < 0)
		goto out;
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *a = &p->steps[i], *b = &q.steps[i];
		const struct bp_layout *l = bp_plan_layout(p, a);
		for (size_t k = 0; k < a->npipes; k++)
			if (compare_pipe(&a->pipes[k], &b->pipes[k], l->pipes[k].sc.pp, i, k,
					 err) < 0)
				goto out;
		snprintf(ctx, sizeof(ctx), "step %zu", i);
		if (compare_metrics(&a->m, &b->m, ctx, err) < 0)
			goto out;
	}
	if (ledger) {
		bp_plan_step_work(&q, flops);
		if (keep_stubs(ledger, ledger_cap, &q, step0, err) < 0)
			goto out;
	} else if (compare_summary(&p->summary, &q.summary, err) < 0) {
		goto out;
	}
	rc = 0;
out:
	bp_plan_release(&q);
	bp_costs_release(&costs);
	return rc;
}

int bp_plan_check(const struct bp_plan *p, const struct bp_profile *prof,
		  struct bp_error *err)
{
	return check_plan(p, prof, NULL, NULL, 0, NULL, err);
}

int bp_plan_check_lines(struct bp_plan_lines *r, const struct bp_plan *header,
			const struct bp_profile *prof, size_t window, struct bp_summary *file,
			struct bp_error *err)
{
	struct bp_plan w, ledger;
	size_t cap = 0;
	double flops = 0.0;
	int64_t first, last_id = -1;
	int rc = -1;
	bp_plan_init(&w);
	bp_plan_init(&ledger);
	for (;;) {
		bp_plan_release(&w);
		int got = bp_plan_lines_window(r, window, header, &w, &first, err);
		if (got < 0)
			goto out;
		if (!got)
			break;
		/* documents ascend over the run, so windows checked alone cannot share one */
		for (size_t i = 0; i < w.nsteps; i++)
			for (size_t k = 0; k < w.steps[i].ndocs; k++) {
				int64_t id = w.steps[i].docs[k].id;
				if (id <= last_id) {
					bp_errorf(err, "step %lld: document %lld does not follow "
						  "document %lld", (long long)(first + (int64_t)i),
						  (long long)id, (long long)last_id);
					goto out;
				}
				last_id = id;
			}
		if (check_plan(&w, prof, &ledger, &cap, 0, &flops, err) < 0) {
			bp_error_prefix(err, "steps %lld to %lld", (long long)first,
					(long long)(first + (int64_t)w.nsteps - 1));
			goto out;
		}
	}
	if (bp_plan_lines_summary(r, file, err) < 0)
		goto out;
	if (ledger.nsteps < (size_t)header->nsteps_drawn) {
		bp_errorf(err, "sampling.steps is %lld, the plan has %zu steps",
			  (long long)header->nsteps_drawn, ledger.nsteps);
		goto out;
	}
	ledger.cluster = header->cluster;
	ledger.summary.truncated = file->truncated;
	ledger.summary.dropped = file->dropped;
	if (bp_plan_summarize(&ledger, err) < 0)
		goto out;
	bp_plan_work_summary(&ledger, flops, prof);
	if (compare_summary(file, &ledger.summary, err) < 0)
		goto out;
	rc = 0;
out:
	bp_plan_release(&w);
	bp_plan_release(&ledger);
	return rc;
}

/* ---- a plan's samples against its index (issue 22) ---- */

/* One document of a step, keyed by the sample it trains: where it is, for messages. */
struct sample_at {
	int64_t sample, soff, len;
	size_t step, k;
};

static int cmp_sample_at(const void *a, const void *b)
{
	const struct sample_at *x = a, *y = b;
	if (x->sample != y->sample)
		return (x->sample > y->sample) - (x->sample < y->sample);
	if (x->soff != y->soff)
		return (x->soff > y->soff) - (x->soff < y->soff);
	if (x->step != y->step)
		return (x->step > y->step) - (x->step < y->step);
	return (x->k > y->k) - (x->k < y->k);
}

/* The entries of a sorted table for (sample, soff): [*lo, *hi). */
static void sample_range(const struct sample_at *t, size_t n, int64_t sample, int64_t soff,
			 size_t *lo, size_t *hi)
{
	size_t a = 0, b = n;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		if (t[m].sample < sample || (t[m].sample == sample && t[m].soff < soff))
			a = m + 1;
		else
			b = m;
	}
	*lo = a;
	while (a < n && t[a].sample == sample && t[a].soff == soff)
		a++;
	*hi = a;
}

/* Every document of nsteps steps keyed by its sample, steps numbered from step0. */
static struct sample_at *sample_table(const struct bp_doc *const *docs, const size_t *ndocs,
				      size_t nsteps, size_t step0, size_t *n,
				      struct bp_error *err)
{
	size_t total = 0;
	for (size_t s = 0; s < nsteps; s++)
		total += ndocs[s];
	struct sample_at *t = bp_calloc(total + 1, sizeof(*t), err);
	if (!t)
		return NULL;
	*n = 0;
	for (size_t s = 0; s < nsteps; s++)
		for (size_t k = 0; k < ndocs[s]; k++)
			t[(*n)++] = (struct sample_at){docs[s][k].sample, docs[s][k].soff,
						       docs[s][k].len, s + step0, k};
	qsort(t, *n, sizeof(*t), cmp_sample_at);
	return t;
}

/* Why plan document g (step s) is not expected document e: dropped, duplicated, moved or
 * foreign, from the two sorted tables. */
static int explain_mismatch(const struct sample_at *want, size_t nw, const struct sample_at *got,
			    size_t ng, const struct bp_doc *e, const struct bp_doc *g, size_t s,
			    struct bp_error *err)
{
	size_t wl, wh, gl, gh;
	if (e) {
		sample_range(want, nw, e->sample, e->soff, &wl, &wh);
		sample_range(got, ng, e->sample, e->soff, &gl, &gh);
		if (gh - gl < wh - wl)
			return bp_errorf(err, "sample %lld (offset %lld, %lld tokens) is missing: "
					 "the index's order puts it in step %zu, the plan trains "
					 "it %zu time%s and the order %zu", (long long)e->sample,
					 (long long)e->soff, (long long)e->len, s, gh - gl,
					 gh - gl == 1 ? "" : "s", wh - wl);
		for (size_t i = gl; i < gh; i++)
			if (got[i].step != s)
				return bp_errorf(err, "sample %lld (offset %lld) is in step %zu, but "
						 "the index's order puts it in step %zu",
						 (long long)e->sample, (long long)e->soff,
						 got[i].step, s);
	}
	if (g) {
		sample_range(want, nw, g->sample, g->soff, &wl, &wh);
		sample_range(got, ng, g->sample, g->soff, &gl, &gh);
		if (wh == wl)
			return bp_errorf(err, "step %zu trains sample %lld (offset %lld), which the "
					 "index's order does not put in the planned range",
					 s, (long long)g->sample, (long long)g->soff);
		if (gh - gl > wh - wl)
			return bp_errorf(err, "sample %lld (offset %lld) is duplicated: the plan "
					 "has it %zu times (steps %zu and %zu), the index's order "
					 "%zu", (long long)g->sample, (long long)g->soff, gh - gl,
					 got[gl].step, got[gl + 1].step, wh - wl);
		for (size_t i = wl; i < wh; i++)
			if (want[i].step != s)
				return bp_errorf(err, "sample %lld (offset %lld) is in step %zu, but "
						 "the index's order puts it in step %zu",
						 (long long)g->sample, (long long)g->soff, s,
						 want[i].step);
	}
	if (e && g)
		return bp_errorf(err, "step %zu: document %lld is sample %lld (offset %lld, %lld "
				 "tokens), the index's order gives sample %lld (offset %lld, "
				 "%lld tokens) as document %lld", s, (long long)g->id,
				 (long long)g->sample, (long long)g->soff, (long long)g->len,
				 (long long)e->sample, (long long)e->soff, (long long)e->len,
				 (long long)e->id);
	return bp_errorf(err, "step %zu: the plan's documents and the index's order differ", s);
}

/* The plan names samples of this index: an order of samples, the same file read the same
 * way. */
static int check_index_of(const struct bp_plan *p, const struct bp_dataset *ds,
			  const char *ds_sha, struct bp_error *err)
{
	const struct bp_source *src = &p->source;
	if (src->order == BP_ORDER_DRAW)
		return bp_errorf(err, "the plan draws lengths (sampling.order draw, a what-if "
				 "plan): it names no samples to check against an index");
	if (strcmp(p->dataset_sha, ds_sha))
		return bp_errorf(err, "the index's sha256 %.12s... is not the plan's %.12s... "
				 "(another file, or changed since it was planned)", ds_sha,
				 p->dataset_sha);
	if (!ds->lengths || (int64_t)ds->nlengths != src->samples)
		return bp_errorf(err, "the index has %zu samples, the plan's source %lld",
				 ds->nlengths, (long long)src->samples);
	if (strcmp(ds->format, src->format))
		return bp_errorf(err, "the index was read as %s, the plan's source as %s "
				 "(other field options?)", ds->format, src->format);
	return 0;
}

/* Documents drawn before the window (from step F) and trained in it: the order's (b), in
 * their step. */
static int check_carried_samples(const struct bp_plan *p, const struct bp_batches *b,
				 int64_t F, struct bp_error *err)
{
	for (size_t i = 0; i < p->ncarried; i++) {
		const struct bp_carried *c = &p->carried[i];
		const struct bp_doc *e = NULL;
		for (size_t k = 0; c->step >= 0 && c->step < F && k < b->b[c->step].ndocs; k++)
			if (b->b[c->step].docs[k].id == c->d.id)
				e = &b->b[c->step].docs[k];
		if (!e || e->len != c->d.len || e->sample != c->d.sample || e->soff != c->d.soff)
			return bp_errorf(err, "carried document %lld (sample %lld offset %lld, %lld "
					 "tokens) is not what the index's order draws in step %lld",
					 (long long)c->d.id, (long long)c->d.sample,
					 (long long)c->d.soff, (long long)c->d.len,
					 (long long)c->step);
	}
	return 0;
}

/* Every step's documents, in draw order, against the order's batches b from step F; the
 * first difference explained (explain_mismatch). */
static int check_step_samples(const struct bp_plan *p, const struct bp_batches *b, int64_t F,
			      struct bp_error *err)
{
	struct sample_at *want = NULL, *got = NULL;
	size_t nb = b->n - (size_t)F, nw = 0, ng = 0;
	int rc = -1;
	const struct bp_doc **wd = bp_calloc(nb + 1, sizeof(*wd), err);
	const struct bp_doc **gd = bp_calloc(p->nsteps + 1, sizeof(*gd), err);
	size_t *wn = bp_calloc(nb + 1, sizeof(*wn), err);
	size_t *gn = bp_calloc(p->nsteps + 1, sizeof(*gn), err);
	if (!wd || !gd || !wn || !gn)
		goto out;
	for (size_t s = 0; s < nb; s++) {
		wd[s] = b->b[F + (int64_t)s].docs;
		wn[s] = b->b[F + (int64_t)s].ndocs;
	}
	for (size_t s = 0; s < p->nsteps; s++) {
		gd[s] = p->steps[s].docs;
		gn[s] = p->steps[s].ndocs;
	}
	if (!(want = sample_table(wd, wn, nb, (size_t)F, &nw, err)) ||
	    !(got = sample_table(gd, gn, p->nsteps, (size_t)F, &ng, err)))
		goto out;
	for (size_t s = 0; s < p->nsteps; s++) {
		size_t n = s < nb ? wn[s] : 0, k = 0;
		for (; k < n && k < gn[s]; k++) {
			const struct bp_doc *e = &wd[s][k], *g = &gd[s][k];
			if (e->id != g->id || e->len != g->len || e->sample != g->sample ||
			    e->soff != g->soff) {
				explain_mismatch(want, nw, got, ng, e, g, s + (size_t)F, err);
				goto out;
			}
		}
		if (k < n || k < gn[s]) {
			explain_mismatch(want, nw, got, ng, k < n ? &wd[s][k] : NULL,
					 k < gn[s] ? &gd[s][k] : NULL, s + (size_t)F, err);
			goto out;
		}
	}
	rc = 0;
out:
	free(want);
	free(got);
	free(wd);
	free(gd);
	free(wn);
	free(gn);
	return rc;
}

/* The plan's source counters against the order's: b the whole order, at_f its part before
 * the window (from step F; empty when F is 0). */
static int check_source_counts(const struct bp_plan *p, const struct bp_dataset *ds,
			       const struct bp_batches *b, const struct bp_batches *at_f,
			       int64_t F, struct bp_error *err)
{
	const struct bp_source *src = &p->source;
	const struct {
		const char *name;
		int64_t plan, index;
	} f[] = {
		{"first_position", src->first_pos, F > 0 ? at_f->end_pos : b->first_pos},
		{"end_position", src->end_pos, b->end_pos},
		{"left_samples", src->left, b->left},
		{"data_ended", src->data_ended, b->data_ended},
		{"tokens", src->tokens, ds->stats.tokens},
		{"sequences", src->sequences, ds->sequences},
		{"truncated_docs", p->summary.truncated, b->truncated - at_f->truncated},
		{"dropped_docs", p->summary.dropped, b->dropped - at_f->dropped},
	};
	for (size_t i = 0; i < BP_ARRAY_LEN(f); i++)
		if (f[i].plan != f[i].index)
			return bp_errorf(err, "the plan records %s %lld, the index's order gives %lld",
					 f[i].name, (long long)f[i].plan, (long long)f[i].index);
	return 0;
}

int bp_plan_check_samples(const struct bp_plan *p, const struct bp_dataset *ds,
			  const char *ds_sha, struct bp_error *err)
{
	const struct bp_source *src = &p->source;
	struct bp_batches b = {0};
	int rc = -1;
	if (check_index_of(p, ds, ds_sha, err) < 0)
		return -1;
	/* Where the data ended inside the plan, the sampler runs to that end, reading what solve
	 * read after the last step (a dropped last batch, samples dropped over the cap). */
	/* A window of a run (plan.h) from step F: the order from step 0, its steps from F; the
	 * stream's counters at F (a second, shorter sampling) start the window's. */
	const int64_t F = p->first_step;
	struct bp_batches at_f = {0};
	int64_t steps = src->data_ended && src->epochs > 0 ? 0 : F + p->nsteps_drawn;
	struct bp_sampler_opts so = {.steps = steps, .tokens_per_step = p->tokens_per_step,
				     .docs_per_step = p->docs_per_step, .max_len = p->max_tokens,
				     .overlen = p->overlen, .seed = p->seed, .order = src->order,
				     .epochs = src->epochs, .last = src->last};
	if (bp_sample(ds, &so, &b, err) < 0)
		return bp_error_prefix(err, "the index in the plan's order");
	if (F > 0) {
		struct bp_sampler_opts sf = so;
		sf.steps = F;
		if (bp_sample(ds, &sf, &at_f, err) < 0) {
			bp_error_prefix(err, "the index in the plan's order up to step %lld",
					(long long)F);
			goto out;
		}
	}
	if (p->documents == BP_DOCS_CUT && bp_batches_cut(&b, p->max_tokens, NULL, err) < 0)
		goto out;
	if ((int64_t)b.n < F || (int64_t)b.n - F != p->nsteps_drawn) {
		bp_errorf(err, "the index's order fills %zu steps, the plan %lld from step %lld",
			  b.n, (long long)p->nsteps_drawn, (long long)F);
		goto out;
	}
	if (check_carried_samples(p, &b, F, err) < 0 || check_step_samples(p, &b, F, err) < 0 ||
	    check_source_counts(p, ds, &b, &at_f, F, err) < 0)
		goto out;
	rc = 0;
out:
	bp_batches_release(&b);
	bp_batches_release(&at_f);
	return rc;
}

/* ---- a whole run a window of steps at a time (solve.h bp_solve_stream) ---- */

/* Moves a window's steps to their place in the run: step indices from step0, document ids
 * from id0 (in documents, spans, delays and CA-tasks). */
static void shift_steps(struct bp_plan *w, int64_t step0, int64_t id0)
{
	for (size_t i = 0; i < w->nsteps; i++) {
		struct bp_step *st = &w->steps[i];
		st->index += step0;
		for (size_t k = 0; k < st->ndocs; k++)
			st->docs[k].id += id0;
		for (size_t k = 0; k < st->ndelayed; k++) {
			st->delayed[k].doc += id0;
			st->delayed[k].to_step += step0;
		}
		for (size_t k = 0; k < st->nca; k++)
			st->ca[k].doc += id0;
		for (size_t k = 0; k < st->npipes; k++)
			for (size_t j = 0; j < st->pipes[k].nmbs; j++)
				for (size_t q = 0; q < st->pipes[k].mbs[j].nspans; q++)
					st->pipes[k].mbs[j].spans[q].doc += id0;
	}
}

/* Keeps what the run's summary needs of a window's steps: their index, documents counted
 * (not kept) and predicted metrics, as stubs in ledger. */
static int keep_stubs(struct bp_plan *ledger, size_t *cap, const struct bp_plan *w,
		      int64_t step0, struct bp_error *err)
{
	if (ledger->nsteps + w->nsteps > *cap) {
		size_t nc = *cap ? *cap : 256;
		while (nc < ledger->nsteps + w->nsteps)
			nc *= 2;
		struct bp_step *ns = bp_realloc_array(ledger->steps, nc, sizeof(*ns), err);
		if (!ns)
			return -1;
		ledger->steps = ns;
		*cap = nc;
	}
	for (size_t i = 0; i < w->nsteps; i++) {
		const struct bp_step *st = &w->steps[i];
		struct bp_step *d = &ledger->steps[ledger->nsteps++];
		memset(d, 0, sizeof(*d));
		d->index = st->index + step0;
		d->layout = st->layout;
		d->ndocs = st->ndocs; /* counted by the summary, never read: docs stays NULL */
		d->m = st->m;
		if (st->ndelayed) { /* the summary's delay in steps */
			d->delayed = bp_calloc(st->ndelayed, sizeof(*d->delayed), err);
			if (!d->delayed)
				return -1;
			for (size_t k = 0; k < st->ndelayed; k++) {
				d->delayed[k] = st->delayed[k];
				d->delayed[k].to_step += step0;
			}
			d->ndelayed = st->ndelayed;
		}
	}
	return 0;
}

/* Whether a method carries state from step to step: its row's flag, or its carries_param
 * at a value other than 1. */
static int method_carries(const struct bp_method *m, const struct bp_solve_opts *o)
{
	if (m->carries)
		return 1;
	for (size_t i = 0; m->carries_param && i < o->nparams; i++)
		if (!strcmp(o->params[i].key, m->carries_param) && strcmp(o->params[i].value, "1"))
			return 1;
	return 0;
}

/* The documents delayed past the steps handed on so far, by id: the carried documents of
 * the windows that train them. */
struct carry_map {
	struct bp_carried *v;
	size_t n, cap;
};

static int cmp_carried(const void *a, const void *b)
{
	const struct bp_carried *x = a, *y = b;
	return (x->d.id > y->d.id) - (x->d.id < y->d.id);
}

static int carry_add(struct carry_map *c, const struct bp_carried *x, struct bp_error *err)
{
	if (c->n == c->cap) {
		size_t nc = c->cap ? 2 * c->cap : 64;
		struct bp_carried *nv = bp_realloc_array(c->v, nc, sizeof(*nv), err);
		if (!nv)
			return -1;
		c->v = nv;
		c->cap = nc;
	}
	c->v[c->n++] = *x;
	return 0;
}

/* Adds the delays of steps [from, to) of w that reach step `beyond` or later. */
static int carry_delays(struct carry_map *c, const struct bp_plan *w, size_t from, size_t to,
			int64_t beyond, struct bp_error *err)
{
	for (size_t i = from; i < to; i++) {
		const struct bp_step *st = &w->steps[i];
		for (size_t k = 0; k < st->ndelayed; k++) {
			const struct bp_delayed *dl = &st->delayed[k];
			if (dl->to_step < beyond)
				continue;
			struct bp_carried x = {.d = {.id = dl->doc, .len = dl->len},
					       .step = st->index, .to_step = dl->to_step};
			for (size_t j = 0; j < st->ndocs; j++)
				if (st->docs[j].id == dl->doc)
					x.d = st->docs[j];
			if (carry_add(c, &x, err) < 0)
				return -1;
		}
	}
	return 0;
}

/* Moves the map's documents trained in [first, end) into w->carried (by id). */
static int carry_take(struct carry_map *c, struct bp_plan *w, int64_t first, int64_t end,
		      struct bp_error *err)
{
	size_t n = 0, k = 0;
	for (size_t i = 0; i < c->n; i++)
		n += c->v[i].to_step >= first && c->v[i].to_step < end;
	free(w->carried);
	w->carried = bp_calloc(n + 1, sizeof(*w->carried), err);
	w->ncarried = 0;
	if (!w->carried)
		return -1;
	for (size_t i = 0; i < c->n; i++) {
		if (c->v[i].to_step >= first && c->v[i].to_step < end)
			w->carried[w->ncarried++] = c->v[i];
		else
			c->v[k++] = c->v[i];
	}
	c->n = k;
	qsort(w->carried, w->ncarried, sizeof(*w->carried), cmp_carried);
	return 0;
}

/* Drops w's first n steps (planned before the window the request asks for). */
static void drop_front(struct bp_plan *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		bp_step_release(&w->steps[i]);
	memmove(w->steps, w->steps + n, (w->nsteps - n) * sizeof(*w->steps));
	w->nsteps -= n;
	if (w->nsteps)
		w->first_step = w->steps[0].index;
}

/* The sampler's counters at a point of the stream, for a window's source and summary. */
struct stream_mark {
	int64_t pos, truncated, dropped, left;
	int data_ended;
};

/* One bp_solve_stream: the request, the run's steps [first, end) (end: the run's end), the
 * sampler and its last batches (b), the window being planned (w), the summary's stubs
 * (ledger), the method's run and the documents delayed past the steps handed on (carry; head:
 * those the plan carries in). pos is the next batch's step, id0 the next document's id,
 * emitted the next step the method hands on. */
struct stream {
	const struct bp_dataset *ds;
	const struct bp_profile *prof;
	const struct bp_solve_opts *o;
	const struct bp_method *m;
	const struct bp_solve_sink *sink;
	struct bp_plan *header;
	size_t window;
	int carries;
	int64_t first, end;
	struct bp_sampler *sp;
	struct bp_batches b;
	struct bp_plan w, ledger;
	struct bp_costs costs;
	struct bp_rng rng;
	struct bp_method_run run;
	struct carry_map carry, head;
	struct stream_mark at, start, stop;
	size_t ledger_cap;
	int64_t pos, id0, emitted;
	double flops;
	int have_header, ended, stopped, lookahead;
};

/* Draws the next call's batches into s->b, up to a window and never across the plan's first
 * or end step, numbering their documents from 0 (cut when the documents are), with their
 * count in *ndocs. Returns how many were drawn, -1 or BP_INFEASIBLE. */
static int stream_draw(struct stream *s, int64_t *ndocs, struct bp_error *err)
{
	const struct bp_solve_opts *o = s->o;
	size_t want = s->window;
	if (s->pos < s->first && (size_t)(s->first - s->pos) < want)
		want = (size_t)(s->first - s->pos); /* a call ends where the window starts */
	else if (s->pos < s->end && (size_t)(s->end - s->pos) < want)
		want = (size_t)(s->end - s->pos); /* ... and where it ends */
	if (s->pos == s->first)
		s->start = s->at;
	bp_batches_release(&s->b);
	int got = bp_sampler_next(s->sp, want, &s->b, err);
	if (got < 0)
		return o->overlen == BP_OVERLEN_ERROR && strstr(err->text, "longer than")
			       ? BP_INFEASIBLE : -1;
	struct bp_batches *b = &s->b;
	s->at = (struct stream_mark){b->end_pos, b->truncated, b->dropped, b->left,
				     b->data_ended};
	if (!got && s->pos <= s->first) {
		if (!s->first)
			return bp_errorf(err, "the data ends before the first step: no samples "
					 "left to plan");
		return bp_errorf(err, "the window starts at step %lld, but the data ends after "
				 "%lld steps: no samples left to plan", (long long)s->first,
				 (long long)s->pos);
	}
	/* batches drawn past the plan only finish its last steps */
	s->lookahead = s->pos > s->end || (s->pos == s->end && got > 0);
	if (!s->stopped && s->pos <= s->end && (s->pos + (int64_t)b->n >= s->end || !got)) {
		s->stop = s->at;
		s->stopped = 1;
	}
	/* the window's documents numbered from 0, as a method expects */
	int64_t first_id = b->n && b->b[0].ndocs ? b->b[0].docs[0].id : 0;
	for (size_t i = 0; i < b->n; i++)
		for (size_t k = 0; k < b->b[i].ndocs; k++)
			b->b[i].docs[k].id -= first_id;
	if (o->documents == BP_DOCS_CUT && bp_batches_cut(b, o->max_tokens, NULL, err) < 0)
		return -1;
	*ndocs = 0;
	for (size_t i = 0; i < b->n; i++)
		*ndocs += (int64_t)b->b[i].ndocs;
	return got;
}

/* The method on the batches drawn (got of them, ndocs documents) into a fresh window s->w:
 * with the run's ids and steps when it carries state, else shifted there after. Returns 0,
 * -1 or BP_INFEASIBLE. */
static int stream_plan(struct stream *s, int got, int64_t ndocs, struct bp_error *err)
{
	const struct bp_costmodel *cm = NULL;
	struct bp_batches *b = &s->b;
	bp_plan_release(&s->w);
	int rc = solve_header(s->m, s->prof, s->o, &s->w, &s->costs, &cm, err);
	if (rc < 0)
		return rc;
	set_source(&s->w, s->o, s->ds, b); /* its order: how its steps name samples */
	int last = !got || (!s->o->flush_data && s->pos + (int64_t)b->n == s->end);
	struct bp_method_ctx ctx = method_ctx(s->o, s->ds, &s->costs, cm, &s->rng,
					      s->carries ? &s->run : NULL);
	if (s->carries) { /* the run's ids and steps */
		for (size_t i = 0; i < b->n; i++)
			for (size_t k = 0; k < b->b[i].ndocs; k++)
				b->b[i].docs[k].id += s->id0;
		s->run.step0 = s->pos;
		s->run.last = last;
		rc = s->m->solve(&ctx, b, &s->w, err);
	} else {
		rc = s->m->solve(&ctx, b, &s->w, err);
		if (rc == 0) {
			shift_steps(&s->w, s->pos, s->id0);
			s->w.first_step = s->pos;
		}
	}
	if (rc < 0)
		return rc;
	s->pos += (int64_t)b->n;
	s->id0 += ndocs;
	s->ended = last;
	return 0;
}

/* Keeps the window's steps of the plan: those before it hand their delays into it to the
 * carried documents, those past its end (batches drawn ahead) are dropped. The steps kept
 * are s->w's (none: nothing to hand on). */
static int stream_trim(struct stream *s, struct bp_error *err)
{
	struct bp_plan *w = &s->w;
	s->emitted = w->steps[w->nsteps - 1].index + 1;
	size_t before = 0, keep;
	while (before < w->nsteps && w->steps[before].index < s->first)
		before++;
	if (carry_delays(&s->carry, w, 0, before, s->first, err) < 0)
		return -1;
	drop_front(w, before);
	keep = w->nsteps;
	if (s->lookahead)
		while (keep > 0 && w->steps[keep - 1].index >= s->end)
			keep--;
	for (size_t i = keep; i < w->nsteps; i++)
		bp_step_release(&w->steps[i]);
	w->nsteps = keep;
	return 0;
}

/* Hands the window's steps on: their carried documents in and delays out, predicted and
 * validated, to the ledger and the sink; the first window's plan becomes the header (the
 * method's recorded defaults and caps). */
static int stream_emit(struct stream *s, struct bp_error *err)
{
	struct bp_plan *w = &s->w;
	int64_t wend = w->first_step + (int64_t)w->nsteps;
	if (carry_take(&s->carry, w, w->first_step, wend, err) < 0)
		return -1;
	for (size_t i = 0; i < w->ncarried; i++) /* the plan's own carried documents */
		if (w->carried[i].step < s->first && carry_add(&s->head, &w->carried[i], err) < 0)
			return -1;
	if (carry_delays(&s->carry, w, 0, w->nsteps, wend, err) < 0)
		return -1;
	w->open = s->carry.n > 0;
	int64_t drawn = 0;
	for (size_t i = 0; i < w->nsteps; i++)
		drawn += w->steps[i].index < s->end && (!s->ended || w->steps[i].index < s->pos);
	w->nsteps_drawn = drawn > 0 ? drawn : 1;
	if (predict_method(s->m, w, &s->costs, 0, 0, err) < 0)
		return -1;
	bp_plan_step_work(w, &s->flops);
	if (keep_stubs(&s->ledger, &s->ledger_cap, w, 0, err) < 0)
		return -1;
	if (s->sink->steps(s->sink->arg, w, err) < 0)
		return -1;
	if (!s->have_header) { /* the method's recorded defaults and caps, once */
		for (size_t i = 0; i < w->nsteps; i++)
			bp_step_release(&w->steps[i]);
		free(w->steps);
		free(w->carried);
		w->steps = NULL;
		w->carried = NULL;
		w->nsteps = w->ncarried = 0;
		*s->header = *w;
		bp_plan_init(w);
		s->have_header = 1;
	}
	return 0;
}

/* The plan's header after the last window: its drawn steps, where it starts, what it carries
 * in, whether the run goes on; the sampler's counters over its own steps, and the summary of
 * every step as bp_plan_predict sums it (in step order). */
static int stream_finish(struct stream *s, struct bp_error *err)
{
	struct bp_plan *header = s->header;
	if (!s->have_header)
		return bp_errorf(err, "the data ends before the first step: no samples left to "
				 "plan");
	if (!s->stopped)
		s->stop = s->at;
	header->first_step = s->first;
	header->nsteps_drawn = (s->pos < s->end ? s->pos : s->end) - s->first;
	header->open = !s->ended || (s->o->flush_data && s->pos > s->end);
	header->ncarried = 0;
	if (s->head.n) {
		qsort(s->head.v, s->head.n, sizeof(*s->head.v), cmp_carried);
		header->carried = s->head.v;
		header->ncarried = s->head.n;
		s->head.v = NULL;
	}
	struct bp_batches src = {.first_pos = s->start.pos, .end_pos = s->stop.pos,
				 .left = s->stop.left, .data_ended = s->stop.data_ended,
				 .truncated = s->stop.truncated - s->start.truncated,
				 .dropped = s->stop.dropped - s->start.dropped};
	set_source(header, s->o, s->ds, &src);
	s->ledger.cluster = header->cluster;
	s->ledger.summary.truncated = src.truncated;
	s->ledger.summary.dropped = src.dropped;
	if (bp_plan_summarize(&s->ledger, err) < 0)
		return -1;
	bp_plan_work_summary(&s->ledger, s->flops, s->prof);
	header->summary = s->ledger.summary;
	return 0;
}

int bp_solve_stream(const struct bp_dataset *ds, const struct bp_profile *prof,
		    const struct bp_solve_opts *o, size_t window,
		    const struct bp_solve_sink *sink, struct bp_plan *header,
		    struct bp_error *err)
{
	struct stream s = {.ds = ds, .prof = prof, .o = o, .sink = sink, .header = header,
			   .window = window, .m = bp_method_find(o->method)};
	struct bp_sampler_opts so;
	int rc = -1;
	bp_plan_init(header);
	bp_plan_init(&s.w);
	bp_plan_init(&s.ledger);
	bp_costs_init(&s.costs, prof);
	if (!s.m)
		return bp_errorf(err, "unknown method '%s'", o->method);
	if (window < 1)
		return bp_errorf(err, "a window of %zu steps", window);
	if (o->first_step < 0 || o->steps < 0 || (!o->steps && o->epochs < 1))
		return bp_errorf(err, "a window of %lld steps from step %lld%s",
				 (long long)o->steps, (long long)o->first_step,
				 o->steps ? "" : " without an end of the data (epochs)");
	s.carries = method_carries(s.m, o);
	/* The plan draws steps [first, end); the run ends there, or with flush_data where the
	 * data ends (a window of a longer run: the method plans past `end` until every step
	 * before it is finished, and those later steps are the next window's). */
	const int64_t unbounded = INT64_C(1) << 40; /* steps 0: as many as the epochs fill */
	s.first = o->first_step;
	s.end = o->steps ? s.first + o->steps : unbounded;
	sampler_opts(o, o->flush_data || !o->steps ? unbounded : s.end, &so);
	if (!(s.sp = bp_sampler_new(ds, &so, err)))
		goto out;
	method_rng(o, &s.rng);
	while (!s.ended && !(s.pos >= s.end && s.emitted >= s.end)) {
		int64_t ndocs = 0;
		int got = stream_draw(&s, &ndocs, err);
		if (got < 0) {
			rc = got;
			goto out;
		}
		if (!s.carries && s.pos + (int64_t)s.b.n <= s.first) { /* before the window */
			s.pos += (int64_t)s.b.n;
			s.id0 += ndocs;
			s.emitted = s.pos;
			continue;
		}
		rc = stream_plan(&s, got, ndocs, err);
		if (rc < 0)
			goto out;
		rc = -1;
		if (!s.w.nsteps)
			continue;
		if (stream_trim(&s, err) < 0)
			goto out;
		if (s.w.nsteps && stream_emit(&s, err) < 0)
			goto out;
	}
	if (stream_finish(&s, err) < 0)
		goto out;
	rc = 0;
out:
	if (rc != 0 && s.have_header)
		bp_plan_release(header);
	if (s.run.state && s.run.release)
		s.run.release(s.run.state);
	free(s.carry.v);
	free(s.head.v);
	bp_sampler_free(s.sp);
	bp_batches_release(&s.b);
	bp_plan_release(&s.w);
	bp_plan_release(&s.ledger);
	bp_costs_release(&s.costs);
	return rc;
}
