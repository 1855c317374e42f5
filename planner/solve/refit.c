/* refit.c: the profile-correction loop (refit.h; planner/README.md "Data flow"): split
 * predictions into attention / linear / collective parts, fit measured ~ alpha*attention +
 * beta*linear + collectives by weighted least squares, rescale a profile's tables by the
 * factors.
 *
 * Called by `balplan report --refit` (cmd/cmd_report.c). bp_refit_split takes the cost
 * model's own decomposition (bp_cost_mb's struct bp_mb_part), so prediction and refit share
 * one composition; tests/unit/test_trace.c checks the parts add up to the stage time. */
#include "refit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"

int bp_refit_split(const struct bp_costmodel *cm, const struct bp_span *spans, size_t n,
		   enum bp_shard mode, int stage, struct bp_refit_parts *fwd,
		   struct bp_refit_parts *bwd, struct bp_error *err)
{
	int pp = cm->sc.pp, rc = -1;
	if (stage < 0 || stage >= pp)
		return bp_errorf(err, "stage %d is outside [0, %d)", stage, pp);
	if (mode != BP_SHARD_SEQUENCE && mode != BP_SHARD_DOCUMENT && mode != BP_SHARD_ULYSSES)
		return bp_errorf(err, "shard mode '%s' is not resolved", bp_shard_name(mode));
	double *t = bp_calloc(2 * (size_t)pp, sizeof(double), err);
	struct bp_mb_part *pf = bp_calloc((size_t)pp, sizeof(*pf), err);
	struct bp_mb_part *pb = bp_calloc((size_t)pp, sizeof(*pb), err);
	struct bp_mb_desc d = {spans, n, mode, BP_ATTN_DENSE, 0, NULL};
	if (!t || !pf || !pb || bp_cost_mb(cm, &d, t, t + pp, pf, pb, err) < 0)
		goto out;
	/* The cost model's parts, grouped as the refit scales them: attention tables by alpha,
	 * GEMMs (layers and LM head) by beta, collectives left as they are. */
	const struct bp_mb_part *src[2] = {&pf[stage], &pb[stage]};
	struct bp_refit_parts *dst[2] = {fwd, bwd};
	for (int b = 0; b < 2; b++) {
		dst[b]->attn = src[b]->attn;
		dst[b]->linear = src[b]->linear + src[b]->lm;
		dst[b]->coll = src[b]->tp_coll + src[b]->cp_coll;
	}
	rc = 0;
out:
	free(t);
	free(pf);
	free(pb);
	return rc;
}

double bp_refit_predict(const struct bp_refit *f, const struct bp_refit_parts *p)
{
	return f->alpha * p->attn + f->beta * p->linear + p->coll;
}

static double clamp(double v, int *hit)
{
	if (!(v >= BP_REFIT_MIN)) { /* also NaN */
		*hit = 1;
		return BP_REFIT_MIN;
	}
	if (v > BP_REFIT_MAX) {
		*hit = 1;
		return BP_REFIT_MAX;
	}
	return v;
}

int bp_refit_fit(const struct bp_refit_obs *obs, size_t n, struct bp_refit *out,
		 struct bp_error *err)
{
	/* Normal equations of min sum w (y - alpha a - beta l)^2, y = measured - coll. */
	double saa = 0, sal = 0, sll = 0, say = 0, sly = 0;
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		const struct bp_refit_parts *p = &obs[i].pred;
		double pred = p->attn + p->linear + p->coll;
		if (!(pred > 0))
			continue;
		double w = 1.0 / (pred * pred), y = obs[i].measured - p->coll;
		saa += w * p->attn * p->attn;
		sal += w * p->attn * p->linear;
		sll += w * p->linear * p->linear;
		say += w * p->attn * y;
		sly += w * p->linear * y;
		used++;
	}
	memset(out, 0, sizeof(*out));
	out->nused = used;
	double det = saa * sll - sal * sal;
	/* Well determined when the attention and linear columns are not (nearly) parallel:
	 * det / (saa sll) = 1 - cos^2 of their angle. */
	if (saa > 0 && sll > 0 && det > 1e-6 * saa * sll) {
		int hit = 0;
		double a = (say * sll - sal * sly) / det, b = (saa * sly - sal * say) / det;
		double ca = clamp(a, &hit), cb = clamp(b, &hit);
		if (hit) { /* hold the clamped factor, refit the other on its own */
			if (ca != a)
				cb = clamp((sly - ca * sal) / sll, &hit);
			else
				ca = clamp((say - cb * sal) / saa, &hit);
		}
		out->alpha = ca;
		out->beta = cb;
		out->clamped = hit;
		return 0;
	}
	/* One common factor k: min sum w (y - k (a + l))^2. */
	double sss = saa + 2 * sal + sll, ssy = say + sly;
	if (!(sss > 0))
		return bp_errorf(err, "no micro-batch operation has a predicted attention or "
				 "linear time to fit");
	int hit = 0;
	out->alpha = out->beta = clamp(ssy / sss, &hit);
	out->clamped = hit;
	out->common = 1;
	return 0;
}

static int profile_copy_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_profile_from_json(out, root, err);
}

/* out (initialised) = in through its canonical JSON. */
static int copy_profile(const struct bp_profile *in, struct bp_profile *out,
			struct bp_error *err)
{
	json_t *j = bp_profile_to_json(in);
	char *text = j ? bp_json_dump_canonical(j) : NULL;
	json_decref(j);
	if (!text)
		return bp_errorf(err, "cannot encode profile '%s'", in->name);
	int rc = bp_json_parse_text(text, strlen(text), profile_copy_cb, out, err);
	free(text);
	return rc;
}

static void scale(double *v, size_t n, double k)
{
	for (size_t i = 0; i < n; i++)
		v[i] *= k;
}

int bp_refit_profile(const struct bp_profile *in, const struct bp_refit *f,
		     struct bp_profile *out, struct bp_error *err)
{
	struct bp_profile tmp;
	int rc = -1;
	bp_profile_init(&tmp);
	if (!(f->alpha > 0) || !(f->beta > 0)) {
		bp_errorf(err, "refit factors must be positive");
		goto out;
	}
	if (copy_profile(in, &tmp, err) < 0)
		goto out;
	for (size_t i = 0; i < tmp.nattn; i++) {
		struct bp_attn_table *t = &tmp.attn[i];
		scale(t->fwd, t->nq * t->nkv, f->alpha);
		scale(t->bwd, t->nq * t->nkv, f->alpha);
		if (t->fwd_alone) {
			scale(t->fwd_alone, t->nq * t->nkv, f->alpha);
			scale(t->bwd_alone, t->nq * t->nkv, f->alpha);
		}
		bp_attn_fit_launch(t, t->heads, t->kv_heads); /* per-tile times of the scaled cells */
	}
	for (size_t i = 0; i < tmp.nlinear; i++) {
		struct bp_linear_table *t = &tmp.linear[i];
		scale(t->fwd, t->n, f->beta);
		scale(t->bwd, t->n, f->beta);
		if (t->lm_fwd) {
			scale(t->lm_fwd, t->n, f->beta);
			scale(t->lm_bwd, t->n, f->beta);
		}
	}
	char name[sizeof(tmp.name)];
	if (!strncmp(in->name, "refit-", 6))
		snprintf(name, sizeof(name), "%s", in->name);
	else
		snprintf(name, sizeof(name), "refit-%.*s", (int)sizeof(name) - 7, in->name);
	memcpy(tmp.name, name, sizeof(name));
	memcpy(tmp.kind, "measured", sizeof("measured"));
	/* Round the tables as the file will hold them, then fit on what the file holds. */
	if (copy_profile(&tmp, out, err) < 0)
		goto out;
	for (size_t i = 0; i < out->nfits; i++) {
		struct bp_fit *fit = &out->fits[i];
		struct bp_scheme sc = {fit->tp, fit->cp, fit->pp};
		const struct bp_attn_table *at = bp_profile_attn(out, fit->tp);
		double top = at ? at->q[at->nq - 1] : 0.0;
		int64_t max_len = top > 256 ? (int64_t)llround(top) : 256;
		if (bp_fit_scheme(out, sc, max_len, fit, err) < 0)
			goto out;
	}
	rc = 0;
out:
	bp_profile_release(&tmp);
	if (rc < 0) {
		bp_profile_release(out);
		bp_error_prefix(err, "cannot refit profile '%s'", in->name);
	}
	return rc;
}
