/* test_flops.c: the model FLOP formula (model/flops.h) on known answers, and the plan's
 * work-normalised throughput (sim/work.h). */
#include <string.h>

#include "analytic.h"
#include "check.h"
#include "costkinds.h"
#include "flops.h"
#include "work.h"

/* A model small enough to count by hand. */
static void test_known_answer(void)
{
	/* 2 layers, hidden 8, 2 heads of 4, 1 KV head, gated FFN 16, vocab 10 */
	struct bp_model m = {"tiny", 2, 8, 2, 1, 16, 10, 1};
	double g, a, lm;
	/* W = 8 (8 + 2*4) + 8*8 + 3*8*16 = 576 weights per layer. A sequence of 4 tokens:
	 * GEMMs 3 x 2 layers x 2 x 4 x 576 = 27648; attention: the causal mask's 4*5/2 = 10
	 * pairs, 3 x 2 x 4 x 8 x 10 = 1920; LM head 3 x 2 x 4 x 8 x 10 = 1920. */
	double f = bp_flops_seq(&m, 4, &g, &a, &lm);
	CHECK_NEAR(g, 27648.0, 0);
	CHECK_NEAR(a, 1920.0, 0);
	CHECK_NEAR(lm, 1920.0, 0);
	CHECK_NEAR(f, 31488.0, 0);
	CHECK_NEAR(bp_flops_seq(&m, 0, NULL, NULL, NULL), 0.0, 0);

	/* Megatron-LM's num_floating_point_operations (causal, "seq_length / 2") for one
	 * sequence of s tokens of Llama-3-8B; ours counts the diagonal too, s (s + 1) / 2 pairs
	 * instead of s^2 / 2: exactly 3 x layers x 4 h x s / 2 more. */
	struct bp_model l3 = {"llama3-8b", 32, 4096, 32, 8, 14336, 128256, 1};
	double s = 131072, h = 4096, q = 4096, kv = 1024;
	double meg = s * (3 * 2 * h * (q + kv + kv) + 3 * 2 * q * s / 2 * 2 + 3 * 2 * q * h) * 32 +
		     s * 3 * 2 * h * 14336 * 3 * 32 + s * 3 * 2 * h * 128256;
	double ours = bp_flops_seq(&l3, (int64_t)s, NULL, NULL, NULL);
	CHECK_NEAR(ours - meg, 3.0 * 32 * 4 * h * s / 2, 1e-6 * meg);
	/* the PaLM per-token count at the window: 6N + 6 L h s (causal half of 12 L H Q T) */
	double n_gemm = 32 * (h * (h + 2 * kv) + h * h + 3 * h * 14336) + h * 128256;
	CHECK_NEAR(ours, s * (6 * n_gemm + 6 * 32 * h * s) + 3 * 32 * 4 * h * s / 2, 1e-6 * ours);
}

/* A micro-batch is the sum of its spans as separate sequences; one long span costs more than
 * the same tokens cut in two (the attention a cut removes); sparse layers at a budget that
 * covers every block count as dense, a small budget as fewer pairs. */
static void test_microbatch(void)
{
	struct bp_model m = {"tiny", 2, 8, 2, 1, 16, 10, 1};
	struct bp_span whole[1] = {{0, 0, 1000}}, cut[2] = {{0, 0, 600}, {0, 600, 400}};
	struct bp_mb_desc dw = {whole, 1, BP_SHARD_SEQUENCE, BP_ATTN_DENSE, 0, NULL};
	struct bp_mb_desc dc = {cut, 2, BP_SHARD_SEQUENCE, BP_ATTN_DENSE, 0, NULL};
	double fw = bp_flops_mb(&m, &dw), fc = bp_flops_mb(&m, &dc);
	CHECK_NEAR(fc, bp_flops_seq(&m, 600, NULL, NULL, NULL) +
			       bp_flops_seq(&m, 400, NULL, NULL, NULL), 0);
	/* the difference is attention only: 3 x 2 layers x 4 x 8 x (500500 - 180300 - 80200) */
	CHECK_NEAR(fw - fc, 3.0 * 2 * 4 * 8 * (500500.0 - 180300.0 - 80200.0), 1e-6);
	dw.attn = BP_ATTN_DISAGG;
	CHECK_NEAR(bp_flops_mb(&m, &dw), fw, 0);
	int kall[2] = {8, 8}, k1[2] = {1, 1};
	struct bp_mb_desc ds = {whole, 1, BP_SHARD_SEQUENCE, BP_ATTN_SPARSE, 128, kall};
	CHECK_NEAR(bp_flops_mb(&m, &ds), fw, 1e-6 * fw);
	ds.sparse_k = k1;
	double g, a, lm;
	bp_flops_seq(&m, 1000, &g, &a, &lm);
	CHECK_NEAR(bp_flops_mb(&m, &ds), g + lm + 3.0 * 2 * 4 * 8 * bp_moba_pairs(1000, 128, 1),
		   1e-6 * fw);
	CHECK(bp_flops_mb(&m, &ds) < fw);
}

/* The summary: TFLOP/s per GPU over the run's time, MFU against the profile's peak. */
static void test_work_summary(void)
{
	struct bp_plan p;
	struct bp_profile prof;
	struct bp_span sp[1] = {{0, 0, 4}};
	struct bp_mb mb;
	struct bp_pipe pipe;
	struct bp_step st;
	bp_plan_init(&p);
	bp_profile_init(&prof);
	memset(&mb, 0, sizeof(mb));
	memset(&pipe, 0, sizeof(pipe));
	memset(&st, 0, sizeof(st));
	p.model = (struct bp_model){"tiny", 2, 8, 2, 1, 16, 10, 1};
	p.cluster.gpus = 4;
	mb.spans = sp;
	mb.nspans = 1;
	pipe.mbs = &mb;
	pipe.nmbs = 1;
	st.pipes = &pipe;
	st.npipes = 1;
	p.steps = &st;
	p.nsteps = 1;
	p.summary.total_us = 2.0; /* 31488 FLOPs in 2 us on 4 GPUs: 3.936e9 FLOP/s each */
	prof.hw.bf16_tflops = 0.01;
	bp_plan_predict_work(&p, &prof);
	CHECK_NEAR(st.m.model_tflop, 31488e-12, 1e-20);
	CHECK_NEAR(p.summary.model_tflop, 31488e-12, 1e-20);
	CHECK_NEAR(p.summary.model_tflops_per_gpu, 31488e-12 / 2e-6 / 4, 1e-12);
	CHECK_NEAR(p.summary.mfu, 31488e-12 / 2e-6 / 4 / 0.01, 1e-9);
	prof.hw.bf16_tflops = 0;
	bp_plan_predict_work(&p, &prof);
	CHECK(p.summary.mfu == 0);
}

int main(void)
{
	test_known_answer();
	test_microbatch();
	test_work_summary();
	return CHECK_DONE();
}
