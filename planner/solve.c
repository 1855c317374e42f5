/* solve.c: the solve driver (solve.h), called by `balplan solve` and the benchmarks. Every
 * method goes through it, so all are sampled, predicted and validated the same way. */
#include "solve.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "method.h"
#include "rng.h"

/* Memory check before solving: a stage-0 rank holding min(pp, m) micro-batches of max_tokens
 * (the 1F1B in-flight maximum, Hydraulis App. B.1's "accumulated PP times in the first
 * pipeline" stage) must fit the cap. */
static int check_memory(const struct bp_costmodel *cm, int64_t max_tokens,
			struct bp_error *err)
{
	int64_t cap = bp_cost_mem_cap(cm);
	int64_t per_rank = (max_tokens + cm->sc.cp - 1) / cm->sc.cp;
	for (int s = 0; s < cm->sc.pp; s++) {
		int64_t need = bp_cost_state_bytes(cm, s) +
			       (int64_t)(cm->sc.pp - s) * bp_cost_act_bytes(cm, s, per_rank);
		if (need > cap)
			return bp_infeasiblef(err, "max_tokens %lld needs %.1f GiB on stage %d but "
					      "a GPU has %.1f GiB usable; lower --max-tokens or "
					      "raise tp/cp/pp", (long long)max_tokens,
					      need / 1073741824.0, s, cap / 1073741824.0);
	}
	return 0;
}

int bp_plan_costmodel(const struct bp_plan *p, const struct bp_profile *prof,
		      struct bp_costmodel *cm, struct bp_error *err)
{
	const struct bp_model *a = &p->model, *b = &prof->model;
	if (strcmp(a->name, b->name) || a->layers != b->layers || a->hidden != b->hidden ||
	    a->heads != b->heads || a->kv_heads != b->kv_heads || a->ffn != b->ffn ||
	    a->vocab != b->vocab || a->gated != b->gated) {
		memset(cm, 0, sizeof(*cm));
		return bp_errorf(err, "the plan's model '%s' is not the profile's model '%s'",
				 a->name, b->name);
	}
	struct bp_scheme sc = {p->cluster.tp, p->cluster.cp, p->cluster.pp};
	return bp_costmodel_init(cm, prof, sc, p->cluster.dp, err);
}

int bp_solve(const struct bp_dataset *ds, const struct bp_profile *prof,
	     const struct bp_solve_opts *o, struct bp_plan *out, struct bp_error *err)
{
	struct bp_batches batches = {0};
	struct bp_costmodel cm = {0};
	struct bp_rng rng;
	int rc = -1;
	const struct bp_method *m = bp_method_find(o->method);
	if (!m)
		return bp_errorf(err, "unknown method '%s'", o->method);
	bp_plan_init(out);
	out->cluster = o->cluster;
	memcpy(out->cluster.gpu, prof->hw.gpu, sizeof(out->cluster.gpu));
	out->cluster.gpus_per_node = prof->hw.gpus_per_node;
	if (bp_cluster_check(&out->cluster, err) < 0)
		goto out;
	out->model = prof->model;
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
	out->mb_max_tokens = o->max_tokens;
	out->overlen = o->overlen;
	if (bp_plan_set_param(out, "cp_shard", bp_shard_name(o->shard), err) < 0)
		goto out;
	for (size_t i = 0; i < o->nparams; i++) {
		const char *key = o->params[i].key;
		int known = 0;
		for (size_t k = 0; m->params && m->params[k]; k++)
			known |= !strcmp(m->params[k], key);
		if (!known) {
			bp_errorf(err, "method '%s' has no parameter '%s'", m->name, key);
			goto out;
		}
		if (bp_plan_set_param(out, key, o->params[i].value, err) < 0)
			goto out;
	}
	if (o->max_tokens < 1) {
		bp_errorf(err, "max_tokens must be >= 1");
		goto out;
	}
	if (bp_plan_costmodel(out, prof, &cm, err) < 0)
		goto out;
	rc = check_memory(&cm, o->max_tokens, err);
	if (rc < 0)
		goto out;
	rc = -1;
	struct bp_sampler_opts so = {o->steps, o->tokens_per_step, o->docs_per_step,
				     o->max_tokens, o->overlen, o->seed};
	rc = bp_sample(ds, &so, &batches, err);
	if (rc < 0) {
		if (o->overlen == BP_OVERLEN_ERROR && strstr(err->text, "longer than"))
			rc = BP_INFEASIBLE;
		goto out;
	}
	rc = -1;
	/* The method's generator: derived from the seed but apart from the sampler's stream. */
	bp_rng_seed(&rng, o->seed ^ 0x6d6574686f64ULL);
	struct bp_method_ctx ctx = {&cm, &rng, o->shard};
	rc = m->solve(&ctx, &batches, out, err);
	if (rc < 0)
		goto out;
	rc = -1;
	if (bp_plan_predict(out, &cm, err) < 0)
		goto out;
	out->summary.truncated = batches.truncated;
	out->summary.dropped = batches.dropped;
	if (bp_plan_validate(out, &cm, err) < 0) {
		bp_error_prefix(err, "method '%s' produced an invalid plan", m->name);
		goto out;
	}
	rc = 0;
out:
	if (rc < 0)
		bp_plan_release(out);
	bp_batches_release(&batches);
	bp_costmodel_release(&cm);
	return rc;
}

static int differs(double a, double b)
{
	return fabs(a - b) > 1e-3 * 1.5 + 1e-9 * fabs(a);
}

int bp_plan_check(const struct bp_plan *p, const struct bp_profile *prof,
		  struct bp_error *err)
{
	struct bp_costmodel cm;
	struct bp_plan q;
	int rc = -1;
	bp_plan_init(&q);
	if (bp_plan_costmodel(p, prof, &cm, err) < 0)
		goto out;
	if (bp_plan_validate(p, &cm, err) < 0)
		goto out;
	/* Re-predict a copy made of the plan's decisions only. */
	q.cluster = p->cluster;
	q.model = p->model;
	q.max_tokens = p->max_tokens;
	q.mb_max_tokens = p->mb_max_tokens;
	q.steps = bp_calloc(p->nsteps, sizeof(*q.steps), err);
	if (!q.steps)
		goto out;
	q.nsteps = p->nsteps;
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *a = &p->steps[i];
		struct bp_step *b = &q.steps[i];
		b->index = a->index;
		b->pipes = bp_calloc(a->npipes, sizeof(*b->pipes), err);
		if (!b->pipes)
			goto out;
		b->npipes = a->npipes;
		for (size_t k = 0; k < a->npipes; k++)
			for (size_t j = 0; j < a->pipes[k].nmbs; j++) {
				const struct bp_mb *mb = &a->pipes[k].mbs[j];
				if (bp_pipe_add_mb(&b->pipes[k], mb->spans, mb->nspans, mb->shard,
						   err) < 0)
					goto out;
			}
	}
	if (bp_plan_predict(&q, &cm, err) < 0)
		goto out;
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *a = &p->steps[i], *b = &q.steps[i];
		for (size_t k = 0; k < a->npipes; k++)
			for (size_t j = 0; j < a->pipes[k].nmbs; j++) {
				const struct bp_mb *x = &a->pipes[k].mbs[j], *y = &b->pipes[k].mbs[j];
				if (x->tokens != y->tokens) {
					bp_errorf(err, "step %zu pipeline %zu micro-batch %zu: tokens "
						  "%lld, the spans hold %lld", i, k, j,
						  (long long)x->tokens, (long long)y->tokens);
					goto out;
				}
				for (int s = 0; s < p->cluster.pp; s++)
					if (differs(x->fwd[s], y->fwd[s]) ||
					    differs(x->bwd[s], y->bwd[s])) {
						bp_errorf(err, "step %zu pipeline %zu micro-batch %zu "
							  "stage %d: predicted %.3f/%.3f us, the "
							  "profile gives %.3f/%.3f us", i, k, j, s,
							  x->fwd[s], x->bwd[s], y->fwd[s], y->bwd[s]);
						goto out;
					}
			}
		if (differs(a->m.step_us, b->m.step_us)) {
			bp_errorf(err, "step %zu: predicted step time %.3f us, the profile gives "
				  "%.3f us", i, a->m.step_us, b->m.step_us);
			goto out;
		}
	}
	rc = 0;
out:
	bp_plan_release(&q);
	bp_costmodel_release(&cm);
	return rc;
}
