/* method.c: what every method shares (method.h): allocating a run's steps with their drawn
 * documents, planning each global batch on its own, and reading typed method parameters that
 * the plan records with their defaults. Below the method table (methods/methods.c), so the
 * shared blocks (blocks/) may call it. */
#include "method.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bp_method_alloc_steps(struct bp_plan *out, const struct bp_batches *in, size_t n,
			  struct bp_error *err)
{
	out->steps = bp_calloc(n, sizeof(*out->steps), err);
	if (!out->steps)
		return -1;
	out->nsteps = n;
	for (size_t i = 0; i < n; i++) {
		struct bp_step *st = &out->steps[i];
		st->index = (int64_t)i;
		st->npipes = out->layouts[0].npipes;
		strcpy(st->sync, "dp-allreduce");
		st->pipes = bp_calloc(st->npipes, sizeof(*st->pipes), err);
		if (!st->pipes)
			return -1;
		if (i < in->n && in->b[i].ndocs) {
			st->docs = bp_calloc(in->b[i].ndocs, sizeof(*st->docs), err);
			if (!st->docs)
				return -1;
			memcpy(st->docs, in->b[i].docs, in->b[i].ndocs * sizeof(*st->docs));
			st->ndocs = in->b[i].ndocs;
		}
	}
	return 0;
}

int bp_method_each_step(const struct bp_method_ctx *ctx, const struct bp_batches *in,
			struct bp_plan *out, bp_step_fn fn, void *arg, struct bp_error *err)
{
	if (bp_method_alloc_steps(out, in, in->n, err) < 0)
		return -1;
	for (size_t s = 0; s < in->n; s++) {
		int rc = fn(ctx, &in->b[s], &out->steps[s], out, arg, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void bp_method_place_steps(const struct bp_method_ctx *ctx, struct bp_plan *out)
{
	int64_t s0 = ctx->run ? ctx->run->step0 : 0;
	out->first_step = s0;
	for (size_t i = 0; s0 && i < out->nsteps; i++) {
		struct bp_step *st = &out->steps[i];
		st->index += s0;
		for (size_t k = 0; k < st->ndelayed; k++)
			st->delayed[k].to_step += s0;
	}
}

void *bp_method_state(const struct bp_method_ctx *ctx, size_t size, void (*release)(void *),
		      struct bp_error *err)
{
	struct bp_method_run *run = ctx->run;
	if (!run)
		return NULL;
	if (!run->state) {
		run->state = bp_calloc(1, size, err);
		run->release = run->state ? release : NULL;
	}
	return run->state;
}

int bp_method_param_int(struct bp_plan *p, const char *key, int64_t def, int64_t lo,
			int64_t hi, int64_t *out, struct bp_error *err)
{
	const char *v = bp_plan_param(p, key);
	char buf[32];
	if (!v) {
		snprintf(buf, sizeof(buf), "%lld", (long long)def);
		*out = def;
		return bp_plan_set_param(p, key, buf, err);
	}
	char what[80];
	snprintf(what, sizeof(what), "parameter %s", key);
	if (bp_parse_int64(v, out, what, err) < 0)
		return -1;
	if (*out < lo || *out > hi)
		return bp_errorf(err, "parameter %s is %lld, outside [%lld, %lld]", key,
				 (long long)*out, (long long)lo, (long long)hi);
	return 0;
}

int bp_method_param_real(struct bp_plan *p, const char *key, double def, double lo,
			 double hi, double *out, struct bp_error *err)
{
	const char *v = bp_plan_param(p, key);
	char buf[32];
	if (!v) {
		snprintf(buf, sizeof(buf), "%.17g", def);
		*out = def;
		return bp_plan_set_param(p, key, buf, err);
	}
	char what[80];
	snprintf(what, sizeof(what), "parameter %s", key);
	if (bp_parse_double(v, out, what, err) < 0)
		return -1;
	if (*out < lo || *out > hi)
		return bp_errorf(err, "parameter %s is %g, outside [%g, %g]", key, *out, lo, hi);
	return 0;
}
