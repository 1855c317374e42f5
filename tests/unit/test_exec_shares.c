/* test_exec_shares.c: executor/shares.h, how the engine spreads an op's predicted time over
 * the primitives of its layer loop. The shares of every op add up to the target (the plan's
 * op time); without scaling they reproduce bp_cost_mb's parts (attention, GEMMs, TP, CP, LM
 * head); sparse attention follows each layer's budget; a disaggregated micro-batch has no
 * attention where its tokens are. */
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "check.h"
#include "costkinds.h"
#include "shares.h"

static struct bp_profile prof;

static double layer_sum(const struct bp_layer_share *s)
{
	return s->qkv + s->cp + s->attn + s->o + s->tp_a + s->ffn + s->tp_b;
}

/* fwd and bwd of mb on every stage: the shares' sum is the target, and at the cost model's
 * own time (target = bp_cost_mb's) each part is bp_cost_mb's. */
static void check_mb(const struct bp_costmodel *cm, struct bp_mb *mb)
{
	struct bp_error err;
	int pp = cm->sc.pp;
	double fwd[8], bwd[8];
	struct bp_mb_part pf[8], pb[8];
	struct bp_mb_desc d = {mb->spans, mb->nspans, mb->shard, mb->attn, mb->sparse_block,
			       mb->sparse_k};
	CHECK(bp_cost_mb(cm, &d, fwd, bwd, pf, pb, &err) == 0);
	struct bp_layer_share ls[64];
	double gf[3];
	bp_gemm_fractions(&cm->prof->model, gf);
	CHECK_NEAR(gf[0] + gf[1] + gf[2], 1.0, 1e-12);
	int first = 0;
	for (int s = 0; s < pp; s++) {
		for (int b = 0; b < 2; b++) {
			const struct bp_mb_part *p = b ? &pb[s] : &pf[s];
			double t = b ? bwd[s] : fwd[s];
			struct bp_op_shares sh = {0, 0, 0, 0, ls};
			/* at the model's own time: the parts themselves */
			CHECK(bp_op_shares(cm, mb, s, b, t, &sh, &err) == 0);
			CHECK(sh.layers == cm->stage_layers[s] && sh.first_layer == first);
			double sum = sh.lm, attn = 0, lin = 0, tpc = 0, cpc = 0;
			for (int l = 0; l < sh.layers; l++) {
				sum += layer_sum(&ls[l]);
				attn += ls[l].attn;
				lin += ls[l].qkv + ls[l].o + ls[l].ffn;
				tpc += ls[l].tp_a + ls[l].tp_b;
				cpc += ls[l].cp;
				CHECK_NEAR(ls[l].qkv / (ls[l].qkv + ls[l].o + ls[l].ffn), gf[0], 1e-9);
				CHECK_NEAR(ls[l].tp_a, ls[l].tp_b, 1e-9);
			}
			CHECK_NEAR(sum, t, 1e-6 * t + 1e-9);
			CHECK_NEAR(sh.total, t, 1e-6 * t + 1e-9);
			CHECK_NEAR(attn, p->attn, 1e-6 * t + 1e-9);
			CHECK_NEAR(lin, p->linear, 1e-6 * t + 1e-9);
			CHECK_NEAR(tpc, p->tp_coll, 1e-6 * t + 1e-9);
			CHECK_NEAR(cpc, p->cp_coll, 1e-6 * t + 1e-9);
			CHECK_NEAR(sh.lm, p->lm, 1e-6 * t + 1e-9);
			CHECK((s == pp - 1) == (sh.lm > 0));
			if (mb->attn == BP_ATTN_DISAGG)
				CHECK(attn == 0.0);
			if (mb->attn == BP_ATTN_SPARSE) {
				/* per layer as the layer's budget prices it */
				const struct bp_sparse_table *st =
					bp_profile_sparse(cm->prof, cm->sc.tp, mb->sparse_block);
				CHECK(st != NULL);
				for (int l = 0; st && l < sh.layers; l++) {
					double w = 0;
					for (size_t i = 0; i < mb->nspans; i++)
						w += bp_cost_sparse_attn(st, (double)mb->spans[i].len,
									 mb->sparse_k[first + l], b);
					CHECK_NEAR(ls[l].attn, w, 1e-6 * w + 1e-9);
				}
			}
			/* at another target: scaled, the sum is the target */
			CHECK(bp_op_shares(cm, mb, s, b, 1.75 * t + 3.0, &sh, &err) == 0);
			sum = sh.lm;
			for (int l = 0; l < sh.layers; l++)
				sum += layer_sum(&ls[l]);
			CHECK_NEAR(sum, 1.75 * t + 3.0, 1e-6 * t + 1e-9);
		}
		first += cm->stage_layers[s];
	}
}

static void test_kinds(void)
{
	struct bp_error err;
	const struct bp_model *md = bp_model_preset("llama3-8b");
	struct bp_scheme schemes[] = {{2, 2, 2}, {1, 1, 2}, {2, 1, 4}};
	CHECK(bp_profile_analytic(&prof, bp_gpu_preset("H100"), md, schemes, 3, 65536, &err) ==
	      0);
	struct bp_span spans[] = {{1, 0, 3000}, {2, 100, 900}, {3, 0, 64}};
	int k[32];
	for (int l = 0; l < 32; l++)
		k[l] = 1 + l % 12;
	for (size_t i = 0; i < BP_ARRAY_LEN(schemes); i++) {
		struct bp_costmodel cm;
		CHECK(bp_costmodel_init(&cm, &prof, schemes[i], 1, &err) == 0);
		struct bp_mb mb;
		memset(&mb, 0, sizeof(mb));
		mb.spans = spans;
		mb.nspans = 3;
		for (int sh = 0; sh < 2; sh++) {
			mb.shard = (enum bp_shard)sh;
			mb.attn = BP_ATTN_DENSE;
			check_mb(&cm, &mb);
		}
		if (schemes[i].cp == 1) {
			mb.shard = BP_SHARD_SEQUENCE;
			mb.attn = BP_ATTN_DISAGG;
			check_mb(&cm, &mb);
			mb.attn = BP_ATTN_SPARSE;
			mb.sparse_block = 256;
			mb.sparse_k = k;
			check_mb(&cm, &mb);
			mb.sparse_k = NULL;
		}
		bp_costmodel_release(&cm);
	}
	bp_profile_release(&prof);
}

/* Nothing to split by (a target with all parts zero is impossible with a real profile, but
 * a zero target must give zero shares, and stage bounds are checked). */
static void test_edges(void)
{
	struct bp_error err;
	const struct bp_model *md = bp_model_preset("llama3-8b");
	struct bp_scheme sc = {1, 1, 2};
	bp_profile_init(&prof);
	CHECK(bp_profile_analytic(&prof, bp_gpu_preset("H100"), md, &sc, 1, 16384, &err) == 0);
	struct bp_costmodel cm;
	CHECK(bp_costmodel_init(&cm, &prof, sc, 1, &err) == 0);
	struct bp_span sp = {7, 0, 512};
	struct bp_mb mb;
	memset(&mb, 0, sizeof(mb));
	mb.spans = &sp;
	mb.nspans = 1;
	struct bp_layer_share ls[64];
	struct bp_op_shares sh = {0, 0, 0, 0, ls};
	CHECK(bp_op_shares(&cm, &mb, 0, 0, 0.0, &sh, &err) == 0);
	CHECK(sh.total == 0.0);
	CHECK(bp_op_shares(&cm, &mb, 2, 0, 1.0, &sh, &err) == -1);
	bp_costmodel_release(&cm);
	bp_profile_release(&prof);
}

int main(void)
{
	bp_profile_init(&prof);
	test_kinds();
	test_edges();
	return CHECK_DONE();
}
