/* analytic.c: the analytic profile (analytic.h), the tables a measured profile would hold,
 * computed from a GPU's datasheet numbers and a model's shape.
 *
 * Called by `balplan profile --analytic`, by the front ends that fall back to or regenerate an
 * analytic profile (cmd/cmdutil.c), by balprof (the grid it measures), the public facade
 * (api.c) and the tests, so everything downstream runs without a GPU. Invariant: the tables pass bp_profile_from_json's validation (strictly
 * increasing axes, finite non-negative values, non-decreasing along every axis), which each
 * formula below keeps by construction; no randomness, so the output is bit-for-bit
 * reproducible. Implements: the (q_len, kv_len) attention grid of DistCA Sec. 4.2
 * ("Profiler"), kernel tile padding to 128 tokens (WLB-LLM Sec. 5.2), the per-token
 * activation memory of Korthikanti et al. 2022 (Sec. 4) that Hydraulis App. B.1's constant A
 * stands for, the T(l,P) = a l^2 + b l + c fit of Hydraulis App. B.2 (bp_fit_scheme), and
 * the block-sparse M[x,k] table of SparseBalance Sec. IV-B (Eq. 10) for MoBA top-k attention
 * (profiler/README.md "Sparse attention"): dense time scaled by MoBA's pair count plus the
 * selection kernels. profiler/README.md explains every constant. */
#include "analytic.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costkinds.h"
#include "costmodel.h"
#include "jsonutil.h"

/* Attention kernels (FlashAttention-3 / cuDNN class), calibrated on causal head-dim-128
 * measurements (profiler/README.md "Calibration"; tools/bench/calib-analytic prints the
 * comparison). Each CTA walks the KV tiles of one 128-query tile; its efficiency ramps as
 * e_max kv / (kv + kv_half) over the KV length it walks.
 * Forward e_max 0.64, kv_half 400: fitted to FlashAttention-3 (arXiv 2407.08608) Fig. 5(d),
 * H100 causal 292/423/521/579/602/616 TFLOP/s at 512..16K, and cuDNN 9.19 on H200 (NVIDIA
 * cudnn-frontend sdpa_benchmark_training results, llama3.1 csv) causal 484..688 at 2K..32K;
 * within 10% of both and of cuDNN's A100 causal prefill (147..184 at 2K..16K).
 * Backward e_max 0.62, kv_half 1100: fitted to the same cuDNN H200 causal backward, 370/474/
 * 541/579/581 at 2K..32K (within 2%); FlashAttention-3 has no causal backward figure.
 * No launch term: the cost model sums one cell per document, while a packed micro-batch runs
 * one varlen kernel per layer whose 3-6 us launch is paid once, not per document (the old
 * 3 us + 6 us per document made 128 documents of 1K cost 1.2 ms of launches per layer). */
#define ATTN_TILE 128.0
#define ATTN_EFF_FWD 0.64
#define ATTN_EFF_BWD 0.62
#define ATTN_KV_HALF_FWD 400.0
#define ATTN_KV_HALF_BWD 1100.0
#define ATTN_BWD_FLOPS 2.5   /* backward FLOPs over forward FLOPs (FlashAttention-2 Sec. 3) */
/* MoBA's second attention call (bp_analytic_sparse_gate_us): its launch, us, forward (one
 * kernel) and backward (preprocess, main and dQ conversion kernels). */
#define ATTN_LAUNCH_FWD 3.0
#define ATTN_LAUNCH_BWD 6.0

/* GEMMs (cuBLAS BF16): 75% of peak at large sizes, 0.93 of the H100's and 0.87 of the A100's
 * best-shape maximum (792 and 268 TFLOP/s, stas00/ml-engineering "Maximum Achievable Matmul
 * FLOPS"), which layer shapes split tp ways do not reach. The time of reading the weights
 * from HBM and the compute time combine as a 2-norm, between no overlap (their sum) and full
 * overlap (their max): within 10% of vLLM pull request 49363's H100 BF16 GEMM at M = 16, 64
 * and 128 (46.5, 182.6, 352.6 TFLOP/s), where the sum was 26% slow at M = 128. Four GEMMs per
 * layer forward (QKV, O, FFN in with gate and up fused, FFN out), each with a launch cost;
 * backward is twice the forward (data and weight gradients). */
#define GEMM_EFF 0.75
#define GEMM_LAUNCH 2.0 /* us per GEMM */
#define GEMM_PER_LAYER 4
#define GEMM_BWD 2.0

/* Collectives (NCCL ring/tree): bus bandwidth as a share of the link's line rate, start-up
 * latency growing with log2 of the group size. NVLink 0.82: NVIDIA's 370 GB/s busbw of 450
 * on H100 after protocol overhead (nccl-tests issue 212; all-gather, reduce-scatter, ring
 * all-reduce; NVLink SHARP all-reduce reaches ~480 but Megatron's sequence-parallel TP issues
 * all-gather and reduce-scatter). Network 0.94: "46-48GB/s per NIC" on 400 Gb/s NDR
 * (nccl-tests issue 290), 47 of 50. */
#define COLL_BW_EFF_NVLINK 0.82
#define COLL_BW_EFF_NET 0.94
#define COLL_ALPHA_INTRA 5.0  /* us */
#define COLL_ALPHA_INTER 10.0 /* us */
#define COLL_ALPHA_STEP 1.0   /* us per doubling of the group */
#define COLL_MIN_BYTES 1024.0
#define COLL_MAX_BYTES 4294967296.0
#define COLL_MAX_INTER_RANKS 1024

/* Memory (Hydraulis App. B.1): mixed-precision Adam keeps bf16 weights (2) and fp32 gradients
 * (4) per TP shard and fp32 master weights, m and v (12) sharded by the distributed
 * optimizer; 4 GiB for the CUDA context, NCCL buffers, workspaces and fragmentation. */
#define STATE_BYTES_PER_PARAM 18.0
#define RESERVED_BYTES ((int64_t)4 << 30)

#define MAX_LEN_LIMIT ((int64_t)1 << 24)

/* Sparse attention (MoBA, SparseBalance Sec. V-C1: block 256, top-k 32 in the paper). The grid
 * (ours, the paper gives none): x in SPARSE_X within [B, max_len] plus max_len, k in
 * SPARSE_K (includes k_base = 32 and reaches 64; Fig. 4 needs k near 50 for 90% recovery).
 * The selection kernels (block means of K, the fp32 gate Q . mean(K) over every chunk, top-k,
 * index build, and the LSE merge of the two attention calls) cost SPARSE_GATE_LAUNCHES kernel
 * launches of GEMM_LAUNCH each, the gate FLOPs at GEMM_EFF of peak, and their HBM traffic at
 * the HBM bandwidth; MoBA's split into a self-chunk call and a selected-chunks call adds one
 * attention launch. The backward reuses the forward's selection (the gate is parameter-free
 * and not differentiated) and adds only the second attention launch and the sum of the two
 * dQ partials. */
#define SPARSE_BLOCK 256
#define SPARSE_GATE_LAUNCHES_FWD 5 /* mean-pool, gate GEMM, top-k, index build, LSE merge */
#define SPARSE_GATE_LAUNCHES_BWD 1 /* dQ partials summed */
static const double sparse_x[] = {256,	 512,	768,   1024,  1536,  2048,  3072,
				  4096,	 6144,	8192,  12288, 16384, 24576, 32768,
				  49152, 65536, 98304, 131072};
static const int sparse_k[] = {1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64};

/* Appends x to a growing array (capacity doubles). */
static int push(double **v, size_t *n, size_t *cap, double x, struct bp_error *err)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 32;
		double *t = bp_realloc_array(*v, nc, sizeof(*t), err);
		if (!t)
			return -1;
		*v = t;
		*cap = nc;
	}
	(*v)[(*n)++] = x;
	return 0;
}

/* start * 2^k below max_len, with the midpoints 1.5 * start * 2^k once that is >= mid_from,
 * then max_len itself: strictly increasing, ends at max_len. The caller frees *out. */
static int make_grid(double start, double mid_from, int64_t max_len, double **out, size_t *n,
		     struct bp_error *err)
{
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	for (double v = start; v < (double)max_len; v *= 2) {
		if (push(out, n, &cap, v, err) < 0)
			return -1;
		if (v >= mid_from && 1.5 * v < (double)max_len &&
		    push(out, n, &cap, 1.5 * v, err) < 0)
			return -1;
	}
	return push(out, n, &cap, (double)max_len, err);
}

/* us of causal attention for q queries that end a kv-token prefix, heads_local heads of
 * head_dim: the kernel computes whole 128x128 tiles (WLB-LLM Sec. 5.2), i.e. qt*kt minus the
 * qt(qt-1)/2 tiles above the diagonal, 4*head_dim FLOPs per (query, key) per head forward. */
static double attn_us(const struct bp_gpu *g, double q, double kv, int heads_local,
		      int head_dim, int bwd)
{
	if (kv < q)
		kv = q;
	double qt = ceil(q / ATTN_TILE), kt = ceil(kv / ATTN_TILE);
	double tiles = qt * kt - qt * (qt - 1.0) / 2.0;
	double flops = 4.0 * head_dim * heads_local * ATTN_TILE * ATTN_TILE * tiles;
	double kvp = kt * ATTN_TILE;
	double eff = bwd ? ATTN_EFF_BWD * kvp / (kvp + ATTN_KV_HALF_BWD)
			 : ATTN_EFF_FWD * kvp / (kvp + ATTN_KV_HALF_FWD);
	if (bwd)
		flops *= ATTN_BWD_FLOPS;
	return flops / (g->bf16_tflops * 1e6 * eff);
}

/* us of one layer's GEMMs forward over tokens tokens, weights split tp ways. */
static double linear_fwd_us(const struct bp_gpu *g, const struct bp_model *m, int tp,
			    double tokens)
{
	double h = m->hidden, hd = (double)m->hidden / m->heads;
	double weights = h * (h + 2.0 * m->kv_heads * hd) + h * h + (m->gated ? 3 : 2) * h * m->ffn;
	double rate = g->bf16_tflops * 1e6 * GEMM_EFF;          /* FLOP/us at the plateau */
	double compute = 2.0 * tokens * weights / tp / rate;    /* us */
	double memory = 2.0 * weights / tp / (g->hbm_gbps * 1e3); /* us: bf16 weights read once */
	return GEMM_PER_LAYER * GEMM_LAUNCH + sqrt(compute * compute + memory * memory);
}

static double coll_us(const struct bp_gpu *g, enum bp_coll_op op, int inter, int n,
		      double bytes)
{
	double bw = inter ? g->net_gbps * 1e3 * COLL_BW_EFF_NET
			  : g->nvlink_gbps * 1e3 * COLL_BW_EFF_NVLINK; /* bytes/us */
	double alpha = inter ? COLL_ALPHA_INTER : COLL_ALPHA_INTRA;
	double f = (double)(n - 1) / n;
	switch (op) {
	case BP_COLL_ALLREDUCE: f *= 2.0; break;
	case BP_COLL_SENDRECV: f = 1.0; break;
	default: break;
	}
	if (op != BP_COLL_SENDRECV)
		alpha += COLL_ALPHA_STEP * log2((double)n);
	return alpha + f * bytes / bw;
}

/* Bytes of activations one token keeps per layer until its backward, tp = cp = 1, bf16:
 * Korthikanti et al. 2022 Sec. 4.1 count 34*h for a GPT layer (with attention scores
 * recomputed or never stored, as FlashAttention does). The same count for a Llama layer:
 * inputs of both RMSNorms (2h), QKV input (h), Q (h), K and V (2 kv_heads head_dim), the
 * attention output kept for FlashAttention's backward and the O GEMM (h), the FFN input (h),
 * and the FFN's gate, up and SwiGLU outputs (3 ffn; 2 ffn ungated), 2 bytes each, plus the
 * fp32 softmax statistics (4 bytes per head); no dropout masks. For GPT (ffn 4h, no GQA, no
 * gate) this is 32h, Korthikanti's 34h less the two 1-byte dropout masks. */
static double act_bytes(const struct bp_model *m)
{
	double h = m->hidden, hd = (double)m->hidden / m->heads;
	double elems = 6.0 * h + 2.0 * m->kv_heads * hd + (m->gated ? 3.0 : 2.0) * m->ffn;
	return 2.0 * elems + 4.0 * m->heads;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return x < y ? -1 : x > y;
}

static int check_scheme(const struct bp_model *m, const struct bp_scheme *s,
			struct bp_error *err)
{
	if (s->tp < 1 || s->cp < 1 || s->pp < 1)
		return bp_errorf(err, "scheme tp %d cp %d pp %d: degrees must be >= 1", s->tp,
				 s->cp, s->pp);
	if (m->heads % s->tp)
		return bp_errorf(err, "scheme tp %d cp %d pp %d: tp does not divide the %d heads "
				 "of model \"%s\"", s->tp, s->cp, s->pp, m->heads, m->name);
	if (s->pp > m->layers)
		return bp_errorf(err, "scheme tp %d cp %d pp %d: pp exceeds the %d layers of "
				 "model \"%s\"", s->tp, s->cp, s->pp, m->layers, m->name);
	return 0;
}

static int fill_attention(struct bp_attn_table *t, const struct bp_gpu *g,
			  const struct bp_model *m, int tp, int64_t max_len,
			  struct bp_error *err)
{
	t->tp = tp;
	if (make_grid(ATTN_TILE, 2 * ATTN_TILE, max_len, &t->q, &t->nq, err) < 0 ||
	    make_grid(ATTN_TILE, 2 * ATTN_TILE, max_len, &t->kv, &t->nkv, err) < 0)
		return -1;
	t->fwd = bp_calloc(t->nq * t->nkv, sizeof(double), err);
	t->bwd = bp_calloc(t->nq * t->nkv, sizeof(double), err);
	if (!t->fwd || !t->bwd)
		return -1;
	int hl = m->heads / tp, hd = m->hidden / m->heads;
	for (size_t i = 0; i < t->nq; i++)
		for (size_t j = 0; j < t->nkv; j++) {
			t->fwd[i * t->nkv + j] = attn_us(g, t->q[i], t->kv[j], hl, hd, 0);
			t->bwd[i * t->nkv + j] = attn_us(g, t->q[i], t->kv[j], hl, hd, 1);
		}
	return 0;
}

double bp_analytic_sparse_gate_us(const struct bp_gpu *g, const struct bp_model *m, int tp,
				  int block, double x, int bwd)
{
	if (!(x > 0) || block < 1 || tp < 1)
		return 0.0;
	double hl = (double)m->heads / tp, d = (double)m->hidden / m->heads;
	double kvl = ceil((double)m->kv_heads / tp); /* KV heads are replicated below one each */
	double n = ceil(x / block);
	double hbm = g->hbm_gbps * 1e3; /* bytes per us */
	if (bwd) {
		/* Second backward call's launch; dQ of both calls read and summed (bf16). */
		return ATTN_LAUNCH_BWD + SPARSE_GATE_LAUNCHES_BWD * GEMM_LAUNCH +
		       3.0 * 2.0 * x * hl * d / hbm;
	}
	/* Gate: every query token of every head against every chunk's mean key (the official
	 * code scores all chunks, then masks), 2 d FLOPs each, a GEMM. */
	double flops = 2.0 * x * n * hl * d;
	double bytes = 2.0 * x * kvl * d          /* K read by the block mean */
		       + 2.0 * x * hl * d         /* Q read by the gate GEMM */
		       + 2.0 * 4.0 * x * n * hl   /* fp32 gate written, read by top-k */
		       + 3.0 * 2.0 * x * hl * d;  /* LSE merge: two partial outputs in, one out */
	return ATTN_LAUNCH_FWD + SPARSE_GATE_LAUNCHES_FWD * GEMM_LAUNCH +
	       flops / (g->bf16_tflops * 1e6 * GEMM_EFF) + bytes / hbm;
}

/* M[x,k] per SparseBalance Eq. 10, analytic (profiler/README.md "Sparse attention"): the dense
 * kernel's time at (x, x) times the share of (query, key) pairs MoBA computes, P(x,k)/P(x,inf),
 * plus the selection term. Monotone in k because P is; in x because the dense time, P and the
 * gate grow with x, except that the dense time per pair falls with x (tile padding, efficiency
 * ramp): a running maximum down each column guards that, and leaves the k >= ceil(x/B) cells at
 * exactly dense + gate (the row above is at most its own dense + gate, smaller). */
static int fill_sparse(struct bp_sparse_table *t, const struct bp_gpu *g,
		       const struct bp_model *m, int tp, int64_t max_len, struct bp_error *err)
{
	size_t cap = 0;
	t->tp = tp;
	t->block = SPARSE_BLOCK;
	for (size_t i = 0; i < BP_ARRAY_LEN(sparse_x); i++)
		if (sparse_x[i] >= SPARSE_BLOCK && sparse_x[i] < (double)max_len &&
		    push(&t->x, &t->nx, &cap, sparse_x[i], err) < 0)
			return -1;
	if (push(&t->x, &t->nx, &cap, (double)max_len, err) < 0)
		return -1;
	t->nk = BP_ARRAY_LEN(sparse_k);
	t->k = bp_calloc(t->nk, sizeof(int), err);
	t->fwd = bp_calloc(t->nx * t->nk, sizeof(double), err);
	t->bwd = bp_calloc(t->nx * t->nk, sizeof(double), err);
	if (!t->k || !t->fwd || !t->bwd)
		return -1;
	memcpy(t->k, sparse_k, sizeof(sparse_k));
	int hl = m->heads / tp, hd = m->hidden / m->heads;
	for (size_t i = 0; i < t->nx; i++) {
		double x = t->x[i], dense = x * (x + 1.0) / 2.0;
		for (int b = 0; b < 2; b++) {
			double *v = b ? t->bwd : t->fwd;
			double full = attn_us(g, x, x, hl, hd, b);
			double gate = bp_analytic_sparse_gate_us(g, m, tp, t->block, x, b);
			for (size_t j = 0; j < t->nk; j++) {
				double share = bp_moba_pairs(x, t->block, t->k[j]) / dense;
				double c = full * (share > 1.0 ? 1.0 : share) + gate;
				if (i > 0 && c < v[(i - 1) * t->nk + j])
					c = v[(i - 1) * t->nk + j];
				v[i * t->nk + j] = c;
			}
		}
	}
	return 0;
}

static int fill_linear(struct bp_linear_table *t, const struct bp_gpu *g,
		       const struct bp_model *m, int tp, int64_t max_len, struct bp_error *err)
{
	t->tp = tp;
	if (make_grid(1.0, 2.0, max_len, &t->tokens, &t->n, err) < 0)
		return -1;
	t->fwd = bp_calloc(t->n, sizeof(double), err);
	t->bwd = bp_calloc(t->n, sizeof(double), err);
	if (!t->fwd || !t->bwd)
		return -1;
	for (size_t i = 0; i < t->n; i++) {
		t->fwd[i] = linear_fwd_us(g, m, tp, t->tokens[i]);
		t->bwd[i] = GEMM_BWD * t->fwd[i];
	}
	return 0;
}

static int fill_coll(struct bp_coll_table *t, const struct bp_gpu *g, enum bp_coll_op op,
		     int inter, int ranks, struct bp_error *err)
{
	size_t cap = 0;
	t->op = op;
	t->inter = inter;
	t->ranks = ranks;
	for (double b = COLL_MIN_BYTES; b <= COLL_MAX_BYTES; b *= 2)
		if (push(&t->bytes, &t->n, &cap, b, err) < 0)
			return -1;
	t->us = bp_calloc(t->n, sizeof(double), err);
	if (!t->us)
		return -1;
	for (size_t i = 0; i < t->n; i++)
		t->us[i] = coll_us(g, op, inter, ranks, t->bytes[i]);
	return 0;
}

/* Group sizes tabulated: within a node powers of two up to gpus_per_node (and the node size
 * itself), across nodes powers of two up to 1024. */
static size_t group_sizes(int gpus_per_node, int inter, int *out, size_t cap)
{
	size_t n = 0;
	int top = inter ? COLL_MAX_INTER_RANKS : gpus_per_node;
	for (int r = 2; r <= top && n < cap; r *= 2)
		out[n++] = r;
	if (!inter && top >= 2 && n < cap && out[n - 1] != top)
		out[n++] = top;
	return n;
}

static int build(struct bp_profile *p, const struct bp_gpu *g, const struct bp_model *m,
		 const struct bp_scheme *schemes, size_t nschemes, int64_t max_len,
		 struct bp_error *err)
{
	char name[256];
	int *tps = NULL;
	int rc = -1;
	snprintf(name, sizeof(name), "analytic-%s-%s", g->name, m->name);
	if (bp_strlcpy_checked(p->name, name, sizeof(p->name), "profile name", err) < 0 ||
	    bp_strlcpy_checked(p->kind, "analytic", sizeof(p->kind), "profile kind", err) < 0 ||
	    bp_strlcpy_checked(p->hw.gpu, g->name, sizeof(p->hw.gpu), "gpu name", err) < 0)
		goto out;
	p->hw.gpus_per_node = g->gpus_per_node;
	p->hw.hbm_bytes = g->hbm_bytes;
	p->hw.hbm_gbps = g->hbm_gbps;
	p->hw.nvlink_gbps = g->nvlink_gbps;
	p->hw.net_gbps = g->net_gbps;
	p->hw.bf16_tflops = g->bf16_tflops;
	p->model = *m;
	p->mem.act_bytes_per_token_layer = act_bytes(m);
	p->mem.state_bytes_per_param = STATE_BYTES_PER_PARAM;
	p->mem.reserved_bytes = RESERVED_BYTES;

	/* Schemes, sorted and without repeats; their distinct TP degrees. */
	p->schemes = bp_calloc(nschemes, sizeof(*p->schemes), err);
	tps = bp_calloc(nschemes, sizeof(*tps), err);
	if (!p->schemes || !tps)
		goto out;
	for (size_t i = 0; i < nschemes; i++) {
		struct bp_scheme s = schemes[i];
		int dup = 0;
		for (size_t k = 0; k < p->nschemes; k++)
			dup |= p->schemes[k].tp == s.tp && p->schemes[k].cp == s.cp &&
			       p->schemes[k].pp == s.pp;
		if (!dup)
			p->schemes[p->nschemes++] = s;
	}
	for (size_t i = 1; i < p->nschemes; i++) /* insertion sort by (tp, cp, pp) */
		for (size_t k = i; k > 0; k--) {
			struct bp_scheme *a = &p->schemes[k - 1], *b = &p->schemes[k];
			if (a->tp < b->tp || (a->tp == b->tp && (a->cp < b->cp ||
							       (a->cp == b->cp && a->pp < b->pp))))
				break;
			struct bp_scheme t = *a;
			*a = *b;
			*b = t;
		}
	size_t ntp = 0;
	for (size_t i = 0; i < p->nschemes; i++) {
		int seen = 0;
		for (size_t k = 0; k < ntp; k++)
			seen |= tps[k] == p->schemes[i].tp;
		if (!seen)
			tps[ntp++] = p->schemes[i].tp;
	}
	qsort(tps, ntp, sizeof(*tps), cmp_int);

	/* Attention, linear and sparse-attention tables per TP degree. */
	p->attn = bp_calloc(ntp, sizeof(*p->attn), err);
	p->linear = bp_calloc(ntp, sizeof(*p->linear), err);
	p->sparse = bp_calloc(ntp, sizeof(*p->sparse), err);
	if (!p->attn || !p->linear || !p->sparse)
		goto out;
	p->nattn = p->nlinear = p->nsparse = ntp;
	for (size_t i = 0; i < ntp; i++)
		if (fill_attention(&p->attn[i], g, m, tps[i], max_len, err) < 0 ||
		    fill_linear(&p->linear[i], g, m, tps[i], max_len, err) < 0 ||
		    fill_sparse(&p->sparse[i], g, m, tps[i], max_len, err) < 0)
			goto out;

	/* Collectives, in (op, inter, ranks) order. */
	int intra[32], inter[32];
	size_t nin = group_sizes(g->gpus_per_node, 0, intra, 32);
	size_t nout = group_sizes(g->gpus_per_node, 1, inter, 32);
	p->coll = bp_calloc((size_t)BP_COLL_NOPS * (nin + nout), sizeof(*p->coll), err);
	if (!p->coll)
		goto out;
	for (int op = 0; op < BP_COLL_NOPS; op++)
		for (int x = 0; x < 2; x++)
			for (size_t k = 0; k < (x ? nout : nin); k++)
				if (fill_coll(&p->coll[p->ncoll++], g, (enum bp_coll_op)op, x,
					      x ? inter[k] : intra[k], err) < 0)
					goto out;

	/* Fits last: bp_fit_scheme reads the tables above through the cost model. */
	p->fits = bp_calloc(p->nschemes, sizeof(*p->fits), err);
	if (!p->fits)
		goto out;
	for (size_t i = 0; i < p->nschemes; i++) {
		if (bp_fit_scheme(p, p->schemes[i], max_len, &p->fits[i], err) < 0)
			goto out;
		p->nfits++;
	}
	rc = 0;
out:
	free(tps);
	return rc;
}

int bp_profile_analytic(struct bp_profile *p, const struct bp_gpu *gpu,
			const struct bp_model *m, const struct bp_scheme *schemes,
			size_t nschemes, int64_t max_len, struct bp_error *err)
{
	struct bp_profile tmp;
	if (max_len < 256 || max_len > MAX_LEN_LIMIT)
		return bp_errorf(err, "max length %lld is outside [256, %lld]", (long long)max_len,
				 (long long)MAX_LEN_LIMIT);
	if (!nschemes)
		return bp_errorf(err, "no parallel scheme to profile");
	if (!(gpu->bf16_tflops > 0) || !(gpu->hbm_gbps > 0) || !(gpu->nvlink_gbps > 0) ||
	    !(gpu->net_gbps > 0) || gpu->hbm_bytes <= 0 || gpu->gpus_per_node < 1)
		return bp_errorf(err, "gpu \"%s\" has a non-positive specification", gpu->name);
	if (m->layers < 1 || m->hidden < 1 || m->heads < 1 || m->kv_heads < 1 || m->ffn < 1 ||
	    m->vocab < 1 || m->hidden % m->heads || m->heads % m->kv_heads)
		return bp_errorf(err, "model \"%s\" has an inconsistent shape", m->name);
	for (size_t i = 0; i < nschemes; i++)
		if (check_scheme(m, &schemes[i], err) < 0)
			return -1;
	bp_profile_init(&tmp);
	if (build(&tmp, gpu, m, schemes, nschemes, max_len, err) < 0) {
		bp_profile_release(&tmp);
		return -1;
	}
	bp_profile_release(p);
	*p = tmp;
	return 0;
}

int bp_profile_analytic_digest(struct bp_profile *p, const struct bp_gpu *gpu,
			       const struct bp_model *m, const struct bp_scheme *schemes,
			       size_t nschemes, int64_t max_tokens, char sha[65],
			       struct bp_error *err)
{
	int64_t top = 4096;
	while (top < max_tokens && top < ((int64_t)1 << 40))
		top *= 2;
	if (bp_profile_analytic(p, gpu, m, schemes, nschemes, top, err) < 0)
		return bp_error_prefix(err, "cannot make the analytic profile");
	json_t *j = bp_profile_to_json(p);
	char *text = j ? bp_json_dump_canonical(j) : NULL;
	json_decref(j);
	if (!text)
		return bp_errorf(err, "cannot encode the analytic profile");
	bp_sha256_hex(text, strlen(text), sha);
	free(text);
	return 0;
}
