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

const struct bp_param_spec *bp_param_spec_find(const struct bp_param_spec *specs,
					       const char *key)
{
	for (size_t i = 0; specs && specs[i].name; i++)
		if (!strcmp(specs[i].name, key))
			return &specs[i];
	return NULL;
}

/* key's spec of type t, or NULL with err set (a method reading a parameter it has no spec
 * for is the method's own bug). */
static const struct bp_param_spec *spec_of(const struct bp_param_spec *specs,
					   const char *key, enum bp_param_type t,
					   struct bp_error *err)
{
	const struct bp_param_spec *s = bp_param_spec_find(specs, key);
	if (!s || s->type != t) {
		bp_errorf(err, "internal: no %s spec for parameter %s",
			  t == BP_PARAM_INT ? "integer" : t == BP_PARAM_REAL ? "real" : "choice",
			  key);
		return NULL;
	}
	return s;
}

int bp_param_int(struct bp_plan *p, const struct bp_param_spec *specs, const char *key,
		 int64_t *out, struct bp_error *err)
{
	const struct bp_param_spec *s = spec_of(specs, key, BP_PARAM_INT, err);
	if (!s)
		return -1;
	return bp_method_param_int(p, key, s->idef, s->imin, s->imax, out, err);
}

int bp_param_real(struct bp_plan *p, const struct bp_param_spec *specs, const char *key,
		  double *out, struct bp_error *err)
{
	const struct bp_param_spec *s = spec_of(specs, key, BP_PARAM_REAL, err);
	if (!s)
		return -1;
	return bp_method_param_real(p, key, s->rdef, s->rmin, s->rmax, out, err);
}

/* "'a' or 'b'", "'a', 'b' or 'c'": the choices as a refusal names them. */
static void choices_text(const char *const *ch, char *buf, size_t n)
{
	size_t k = 0, len = 0;
	while (ch[k])
		k++;
	buf[0] = '\0';
	for (size_t i = 0; i < k && len < n; i++) {
		const char *sep = !i ? "" : i + 1 == k ? " or " : ", ";
		int w = snprintf(buf + len, n - len, "%s'%s'", sep, ch[i]);
		if (w < 0)
			break;
		len += (size_t)w;
	}
}

int bp_param_choice(struct bp_plan *p, const struct bp_param_spec *specs, const char *key,
		    int *out, struct bp_error *err)
{
	const struct bp_param_spec *s = spec_of(specs, key, BP_PARAM_CHOICE, err);
	if (!s)
		return -1;
	const char *v = bp_plan_param(p, key);
	*out = 0;
	if (!v)
		return bp_plan_set_param(p, key, s->choices[0], err);
	for (int i = 0; s->choices[i]; i++) {
		if (!strcmp(s->choices[i], v)) {
			*out = i;
			return 0;
		}
	}
	char names[256];
	choices_text(s->choices, names, sizeof(names));
	return bp_errorf(err, "parameter %s is '%s', not %s", key, v, names);
}

const char *const bp_grad_sync_names[] = {"exposed", "overlap", "overlap-gather", NULL};

/* Parameters several rows share, each read by its own reader (above). */
static const struct bp_param_spec shared_specs[] = {
	BP_PARAM_SPEC_CHOICE(BP_GRAD_SYNC_PARAM, bp_grad_sync_names,
			     "Megatron-LM's gradient sync (plans/README.md \"Gradient sync\")"),
	{0},
};

const struct bp_param_spec *bp_method_param_spec(const struct bp_method *m, const char *key)
{
	const struct bp_param_spec *s = bp_param_spec_find(m->param_specs, key);
	return s ? s : bp_param_spec_find(shared_specs, key);
}

int bp_param_grad_sync(const struct bp_plan *p, struct bp_error *err)
{
	const char *v = bp_plan_param(p, BP_GRAD_SYNC_PARAM);
	if (!v)
		return 0;
	for (int i = 0; bp_grad_sync_names[i]; i++)
		if (!strcmp(bp_grad_sync_names[i], v))
			return i;
	char names[128];
	choices_text(bp_grad_sync_names, names, sizeof(names));
	return bp_errorf(err, "parameter %s is '%s', not %s", BP_GRAD_SYNC_PARAM, v, names);
}
