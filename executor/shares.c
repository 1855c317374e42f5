/* shares.c: an operation's predicted time spread over its primitives (shares.h). */
#include "shares.h"

#include <stdlib.h>
#include <string.h>

#include "costkinds.h"

void bp_gemm_fractions(const struct bp_model *m, double f[3])
{
	double h = m->hidden, d = m->heads > 0 ? (double)m->hidden / m->heads : 0.0;
	double qkv = h * (h + 2.0 * m->kv_heads * d), o = h * h;
	double ffn = (m->gated ? 3.0 : 2.0) * h * m->ffn;
	double sum = qkv + o + ffn;
	if (!(sum > 0)) {
		f[0] = f[1] = f[2] = 1.0 / 3.0;
		return;
	}
	f[0] = qkv / sum;
	f[1] = o / sum;
	f[2] = ffn / sum;
}

int bp_op_shares(const struct bp_costmodel *cm, const struct bp_mb *mb, int stage, int bwd,
		 double target_us, struct bp_op_shares *out, struct bp_error *err)
{
	int pp = cm->sc.pp, rc = -1;
	if (stage < 0 || stage >= pp)
		return bp_errorf(err, "stage %d of a pipeline of %d", stage, pp);
	int L = cm->stage_layers[stage];
	const struct bp_model *md = &cm->prof->model;
	double *fwd = bp_calloc((size_t)pp, sizeof(double), err);
	double *bw = bp_calloc((size_t)pp, sizeof(double), err);
	struct bp_mb_part *pf = bp_calloc((size_t)pp, sizeof(*pf), err);
	struct bp_mb_part *pb = bp_calloc((size_t)pp, sizeof(*pb), err);
	if (!fwd || !bw || !pf || !pb)
		goto out;
	struct bp_mb_desc d = {mb->spans, mb->nspans, mb->shard, mb->attn, mb->sparse_block,
			       mb->sparse_k};
	if (bp_cost_mb(cm, &d, fwd, bw, pf, pb, err) < 0)
		goto out;
	const struct bp_mb_part *p = bwd ? &pb[stage] : &pf[stage];
	out->layers = L;
	out->first_layer = 0;
	for (int s = 0; s < stage; s++)
		out->first_layer += cm->stage_layers[s];
	double g[3];
	bp_gemm_fractions(md, g);
	double sum = p->attn + p->linear + p->tp_coll + p->cp_coll + p->lm;
	double linear = p->linear, lm = p->lm;
	double f = 1.0;
	if (sum > 0)
		f = target_us / sum;
	else /* nothing to split by: the GEMMs take it */
		linear = target_us;
	/* Attention per layer: sparse by each layer's budget (SparseBalance Eq. 8 per layer),
	 * otherwise even. */
	const struct bp_sparse_table *sp = NULL;
	double wsum = 0.0;
	if (mb->attn == BP_ATTN_SPARSE && mb->sparse_k && p->attn > 0) {
		sp = bp_profile_sparse(cm->prof, cm->sc.tp, mb->sparse_block);
		for (int l = 0; sp && l < L; l++) {
			double w = 0.0;
			for (size_t i = 0; i < mb->nspans; i++)
				w += bp_cost_sparse_attn(sp, (double)mb->spans[i].len,
							 (double)mb->sparse_k[out->first_layer + l], bwd);
			out->l[l].attn = w;
			wsum += w;
		}
	}
	for (int l = 0; l < L; l++) {
		struct bp_layer_share *s = &out->l[l];
		double a = wsum > 0 ? p->attn * s->attn / wsum : p->attn / L;
		double lin = linear / L;
		*s = (struct bp_layer_share){lin * g[0] * f, p->cp_coll / L * f, a * f, lin * g[1] * f,
					     p->tp_coll / (2.0 * L) * f, lin * g[2] * f,
					     p->tp_coll / (2.0 * L) * f};
	}
	out->lm = sum > 0 ? lm * f : 0.0;
	/* The total as the engine will add it up (equal to target_us to rounding). */
	double t = out->lm;
	for (int l = 0; l < L; l++) {
		const struct bp_layer_share *s = &out->l[l];
		t += s->qkv + s->cp + s->attn + s->o + s->tp_a + s->ffn + s->tp_b;
	}
	out->total = t;
	rc = 0;
out:
	free(fwd);
	free(bw);
	free(pf);
	free(pb);
	return rc;
}
