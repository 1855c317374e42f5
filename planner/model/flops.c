/* flops.c: model FLOPs of sequences and micro-batches (flops.h has the formula and its
 * sources). Called by sim/work.c for the plan's work-normalised throughput and MFU. */
#include "flops.h"

#include "costkinds.h"

/* GEMM weights of one layer (the FLOP-bearing part of bp_model_layer_params). */
static double layer_gemm_weights(const struct bp_model *m)
{
	double h = m->hidden, hd = m->heads > 0 ? h / m->heads : 0.0;
	double kv = (double)m->kv_heads * hd;
	return h * (h + 2.0 * kv) + h * h + (m->gated ? 3.0 : 2.0) * h * m->ffn;
}

double bp_flops_seq(const struct bp_model *m, int64_t len, double *gemm, double *attn,
		    double *head)
{
	double s = len > 0 ? (double)len : 0.0, h = m->hidden;
	double g = 3.0 * m->layers * 2.0 * s * layer_gemm_weights(m);
	double a = 3.0 * m->layers * 4.0 * h * (s * (s + 1.0) / 2.0);
	double lm = 3.0 * 2.0 * s * h * m->vocab;
	if (gemm)
		*gemm = g;
	if (attn)
		*attn = a;
	if (head)
		*head = lm;
	return g + a + lm;
}

double bp_flops_mb(const struct bp_model *m, const struct bp_mb_desc *d)
{
	double total = 0.0, h = m->hidden;
	for (size_t i = 0; i < d->n; i++) {
		int64_t len = d->spans[i].len;
		double g, a, lm;
		bp_flops_seq(m, len, &g, &a, &lm);
		if (d->attn == BP_ATTN_SPARSE && d->sparse_k && d->sparse_block > 0) {
			a = 0.0;
			for (int l = 0; l < m->layers; l++)
				a += 3.0 * 4.0 * h *
				     bp_moba_pairs((double)len, (double)d->sparse_block,
						   (double)d->sparse_k[l]);
		}
		total += g + a + lm;
	}
	return total;
}
