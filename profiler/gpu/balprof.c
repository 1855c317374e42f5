/* balprof.c: the measuring profiler behind `balplan profile` (profiler/README.md
 * "Measuring"; issue 15 item 1). One process on one GPU.
 *
 * It starts from the analytic profile of the same inputs (profiler/analytic.c), so every
 * table has the analytic one's grid and shape, and replaces each cell it measures with the
 * median of timed runs (CUDA events around each run, after warm-up runs):
 * - attention: balexec's own varlen causal kernels (executor/attn.h, FlashAttention-2
 *   Alg. 1 and 2) per TP degree with heads/tp query and kv_heads/tp KV heads, forward and
 *   backward, at every (q, kv) grid cell with kv >= q (DistCA Sec. 4.2 "Profiler": q query
 *   tokens that are the last q positions of a causal kv-token prefix). A cell is a document
 *   inside a packed varlen launch, not a launch of its own (profiler/README.md "Caveat"):
 *   small cells run as n copies in one launch, n sized to fill the GPU, and the time is
 *   divided by n, so the launch is amortised as in a packed micro-batch; and each cell
 *   again alone in its launch (fwd_alone / bwd_alone: a micro-batch costs at least its
 *   longest document alone, costmodel.h bp_cost_attn_launch), reusing the packed
 *   measurement where that launch held one copy;
 * - sparse attention: balexec's block-sparse MoBA top-k kernels (executor/attn_sparse.h) per
 *   TP degree and block B at every (x, k) cell of M[x,k] (SparseBalance Sec. IV-B Eq. 10):
 *   one causal document of x tokens at budget k blocks,
 *   copies of it per launch as for dense attention; the forward includes the selection, the
 *   backward runs the selection again before the gradients, as balexec's CUDA backend does;
 * - linear: one layer's GEMMs at each token count through cublasGemmEx (bf16 in and out,
 *   fp32 accumulation): forward QKV, O, FFN in (gate and up fused), FFN out; backward the
 *   two GEMMs (data and weight gradient) of each, as backend_cuda.c runs them; and the LM
 *   head at the same token counts (lm_head_fwd / lm_head_bwd), in backend_cuda.c's chunks;
 * - memory: reserved_bytes = total - free device memory after the CUDA context, cuBLAS with
 *   its workspace and an NCCL communicator exist; hbm_bytes the device's total.
 * Kept analytic, and said so in the provenance: the collective tables (one process has no
 * group to time: a 1-rank world), the bandwidths and peak of the hardware object, act_bytes
 * and state_bytes (model facts).
 *
 * Resumable: each finished cell is appended to the state file (measure.h) and flushed; a
 * rerun with the same options skips the cells it holds. The state file keeps every cell's
 * median, min and max and the run count: the spread the profile format has no place for.
 * The profile is written only when every cell is measured, then read back with the
 * profile reader (bp_profile_from_json) before the run reports success. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <errno.h>
#include <ctype.h>
#include <math.h>
#include <nccl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analytic.h"
#include "attn.h"
#include "attn_geom.h"
#include "attn_sparse.h"
#include "cmdutil.h"
#include "costkinds.h"
#include "devbuf.h"
#include "jsonutil.h"
#include "measure.h"
#include "rendezvous.h"

#define BLAS_WORKSPACE (32u << 20)   /* cuBLAS workspace, as backend_cuda.c */
#define FILL_SEED 0x62616c70726f66ULL /* the seed of the values buffers are filled with */
#define TARGET_BLOCKS BP_PROF_TARGET_BLOCKS /* CTAs per attention launch (profile.h) */
#define COPY_BYTES (12.0 * (1 << 30)) /* device bytes the copies of a cell may use */
#define LONG_RUN_MS 200.0            /* a run this long: fewer reps (below) */
#define LONG_CELL_MS 2000.0          /* timed milliseconds per long cell at most */

struct gpu {
	cudaStream_t stream;
	cublasHandle_t blas;
	cudaEvent_t ev0, ev1;
	ncclComm_t comm;
	struct bp_dbuf blas_ws;
	/* attention */
	struct bp_dbuf q, k, v, o, dout, dq, dk, dv, lse, ws, cu;
	/* linear */
	struct bp_dbuf w_qkv, w_o, w_up, w_down, dw, x, qkv, ao, y, dy, dx, dob, u;
	/* the LM head */
	struct bp_dbuf w_lm, dw_lm, lm;
	/* collectives */
	struct bp_dbuf cin, cout, times;
	uint16_t *fill;
	int sms, dev;
};

struct dims { /* one TP rank's share of the model, as backend_cuda.c model_dims */
	int64_t h, hl, kvl, hd, nq, nkv, nqkv, fl, nup, vl;
};

static struct gpu G;

/* ---- errors ---- */

static int cu_fail(struct bp_error *err, cudaError_t e, const char *call, int line)
{
	return bp_errorf(err, "%s failed (balprof.c:%d): %s", call, line, cudaGetErrorString(e));
}

#define CU(call)                                                                       \
	do {                                                                           \
		cudaError_t e_ = (call);                                               \
		if (e_ != cudaSuccess)                                                 \
			return cu_fail(err, e_, #call, __LINE__);                      \
	} while (0)

#define BL(call)                                                                       \
	do {                                                                           \
		cublasStatus_t s_ = (call);                                            \
		if (s_ != CUBLAS_STATUS_SUCCESS)                                       \
			return bp_errorf(err, "%s failed (balprof.c:%d): %s", #call, __LINE__, \
					 cublasGetStatusString(s_));                   \
	} while (0)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- device memory ---- */

/* Makes b hold at least bytes (grow only, after synchronising the stream), filled as
 * asked (executor/devbuf.h). */
static int ensure(struct bp_dbuf *b, size_t bytes, int fill, struct bp_error *err)
{
	const struct bp_dev d = {G.stream, G.fill, 0};
	return bp_dbuf_ensure(&d, b, bytes, fill, NULL, err);
}

static void free_attn_bufs(void)
{
	struct bp_dbuf *all[] = {&G.q, &G.k, &G.v, &G.o, &G.dout, &G.dq, &G.dk, &G.dv, &G.lse,
			      &G.ws, &G.cu};
	for (size_t i = 0; i < BP_ARRAY_LEN(all); i++)
		bp_dbuf_free(all[i]);
}

static void free_linear_bufs(void)
{
	struct bp_dbuf *all[] = {&G.w_qkv, &G.w_o, &G.w_up, &G.w_down, &G.dw, &G.x, &G.qkv, &G.ao,
			      &G.y, &G.dy, &G.dx, &G.dob, &G.u, &G.w_lm, &G.dw_lm, &G.lm};
	for (size_t i = 0; i < BP_ARRAY_LEN(all); i++)
		bp_dbuf_free(all[i]);
}

/* ---- versions ---- */

/* The NVIDIA driver's version through NVML, opened at run time so that balprof needs no
 * NVML at link time ("unknown" when it cannot be had). */
static void driver_version(char *out, size_t n)
{
	typedef int (*init_fn)(void);
	typedef int (*ver_fn)(char *, unsigned);
	snprintf(out, n, "unknown");
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	init_fn init = (init_fn)dlsym(h, "nvmlInit_v2");
	ver_fn ver = (ver_fn)dlsym(h, "nvmlSystemGetDriverVersion");
	init_fn down = (init_fn)dlsym(h, "nvmlShutdown");
	char buf[96];
	if (init && ver && init() == 0) {
		if (ver(buf, sizeof(buf)) == 0) {
			buf[sizeof(buf) - 1] = 0;
			size_t len = strlen(buf) < n - 1 ? strlen(buf) : n - 1;
			memcpy(out, buf, len);
			out[len] = 0;
		}
		if (down)
			down();
	}
	dlclose(h);
}

static void cuda_version_text(int v, char *out, size_t n)
{
	snprintf(out, n, "%d.%d", v / 1000, (v % 1000) / 10);
}

/* ---- timing ---- */

typedef int (*run_fn)(void *ctx, struct bp_error *err);

/* warmup untimed runs, then reps runs timed one by one with CUDA events; per-run time
 * divided by div. A run longer than LONG_RUN_MS cuts the reps to what fits in LONG_CELL_MS,
 * at least 3 (the median of three still drops one outlier). */
static int time_runs(run_fn run, void *ctx, int warmup, int reps, double div,
		     struct bp_meas *m, struct bp_error *err)
{
	double *v = NULL;
	float ms = 0;
	int rc = -1;
	for (int i = 0; i < warmup; i++)
		if (run(ctx, err) < 0)
			return -1;
	CU(cudaStreamSynchronize(G.stream));
	CU(cudaGetLastError());
	v = bp_calloc((size_t)reps, sizeof(*v), err);
	if (!v)
		return -1;
	int n = 0;
	for (; n < reps; n++) {
		cudaError_t e = cudaEventRecord(G.ev0, G.stream);
		if (e == cudaSuccess && run(ctx, err) < 0)
			goto out;
		if (e == cudaSuccess)
			e = cudaEventRecord(G.ev1, G.stream);
		if (e == cudaSuccess)
			e = cudaEventSynchronize(G.ev1);
		if (e == cudaSuccess)
			e = cudaEventElapsedTime(&ms, G.ev0, G.ev1);
		if (e != cudaSuccess) {
			cu_fail(err, e, "timing a run", __LINE__);
			goto out;
		}
		v[n] = (double)ms * 1000.0 / div;
		if (n == 0 && ms > LONG_RUN_MS) {
			int fit = (int)(LONG_CELL_MS / ms);
			if (fit < 3)
				fit = 3;
			if (fit < reps)
				reps = fit;
		}
	}
	/* The writer rounds cells to 1e-3 us and the reader wants them > 0: a run the events
	 * read as 0 (below their resolution) counts as 1e-3 us. */
	for (int i = 0; i < n; i++)
		if (!(v[i] >= 1e-3))
			v[i] = 1e-3;
	bp_prof_stats(v, (size_t)n, &m->median, &m->min, &m->max);
	m->n = n;
	rc = 0;
out:
	free(v);
	return rc;
}

/* ---- attention ---- */

static void model_dims(const struct bp_model *m, int tp, struct dims *d)
{
	int64_t hd = m->hidden / m->heads;
	d->hd = hd <= 96 ? 64 : 128; /* attn.h supports 64 and 128: others run the nearer */
	d->h = m->hidden;
	d->hl = m->heads / tp > 0 ? m->heads / tp : 1;
	d->kvl = m->kv_heads / tp > 0 ? m->kv_heads / tp : 1;
	if (d->hl % d->kvl != 0)
		d->kvl = 1;
	d->nq = d->hl * d->hd;
	d->nkv = d->kvl * d->hd;
	d->nqkv = d->nq + 2 * d->nkv;
	d->fl = (m->ffn + tp - 1) / tp;
	d->nup = (m->gated ? 2 : 1) * d->fl;
	d->vl = (m->vocab + tp - 1) / tp;
}

struct attn_ctx {
	struct bp_attn_shape s;
	int bwd;
};

static int attn_run(void *p, struct bp_error *err)
{
	struct attn_ctx *c = p;
	const int32_t *cq = G.cu.p, *ck = (const int32_t *)G.cu.p + c->s.nseg + 1;
	if (!c->bwd)
		return bp_attn_fwd(&c->s, cq, ck, G.q.p, G.k.p, G.v.p, G.o.p, G.lse.p, G.stream,
				   err);
	return bp_attn_bwd(&c->s, cq, ck, G.q.p, G.k.p, G.v.p, G.o.p, G.dout.p, G.lse.p,
			   G.dq.p, G.dk.p, G.dv.p, G.ws.p, G.stream, err);
}

/* How many copies of the document (q, kv) one launch runs: enough CTAs for TARGET_BLOCKS,
 * no more than COPY_BYTES of memory; at least one. No cap on the work: a cap (cells 2 had
 * one, 4e8 pairs) left mid-length documents alone in their launch, and a document that
 * cannot fill the GPU alone is slower per copy than packed (on the H100, 2026-11-26: a
 * qwen2.5-0.5b backward of 6,144 tokens ran 2.2x its packed rate), which then priced every
 * packed micro-batch of such documents as if each ran alone (profiler/README.md
 * "Packed and alone"). */
static int64_t attn_copies(const struct dims *d, int64_t q, int64_t kv, int bwd)
{
	const int64_t rows = BP_ATTN_FWD_ROWS_MMA, keys = BP_ATTN_BWD_KEYS; /* the kernels' blocks */
	double blocks = bwd ? (double)((kv + keys - 1) / keys * d->kvl)
			    : (double)((q + rows - 1) / rows * d->hl);
	double bytes = (double)q * (double)d->nq * 2 * 5 + (double)q * (double)d->hl * 8 +
		       (double)q * (double)d->nq * 4 + (double)kv * (double)d->nkv * 2 * 4;
	double n = ceil(TARGET_BLOCKS / blocks);
	if (n > floor(COPY_BYTES / bytes))
		n = floor(COPY_BYTES / bytes);
	if (n > 1 << 16)
		n = 1 << 16;
	return n < 1 ? 1 : (int64_t)n;
}

/* The device buffers one attention launch reads and writes, for tq query and tk key tokens
 * (bf16 Q, O, dO, dQ; fp32 log-sum-exp; bf16 K, V, dK, dV): dense and sparse alike. */
static int ensure_attn_io(const struct dims *d, size_t tq, size_t tk, struct bp_error *err)
{
	size_t nq = (size_t)d->nq, nkv = (size_t)d->nkv;
	if (ensure(&G.q, tq * nq * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.o, tq * nq * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.dout, tq * nq * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.dq, tq * nq * 2, BP_FILL_NONE, err) < 0 ||
	    ensure(&G.lse, tq * (size_t)d->hl * 4, BP_FILL_LSE, err) < 0 ||
	    ensure(&G.k, tk * nkv * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.v, tk * nkv * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.dk, tk * nkv * 2, BP_FILL_NONE, err) < 0 ||
	    ensure(&G.dv, tk * nkv * 2, BP_FILL_NONE, err) < 0)
		return -1;
	return 0;
}

/* n equal segments' cumulative offsets into G.cu: [0, q, 2q, .. nq], then, when kv > 0, the
 * same for kv (the dense kernel's cu_q and cu_kv; the sparse one takes cu_q alone). */
static int upload_offsets(int64_t n, int64_t q, int64_t kv, struct bp_error *err)
{
	size_t len = (size_t)(n + 1) * (kv > 0 ? 2 : 1);
	if (ensure(&G.cu, len * sizeof(int32_t), BP_FILL_NONE, err) < 0)
		return -1;
	int32_t *h = bp_calloc(len, sizeof(int32_t), err);
	if (!h)
		return -1;
	for (int64_t i = 0; i <= n; i++) {
		h[i] = (int32_t)(i * q);
		if (kv > 0)
			h[n + 1 + i] = (int32_t)(i * kv);
	}
	/* On the kernels' stream, then waited for: a synchronous copy from pageable memory may
	 * return before its DMA ends, and the legacy stream does not order it before the
	 * non-blocking stream the kernels run on (they could read stale offsets). */
	cudaError_t e = cudaMemcpyAsync(G.cu.p, h, len * sizeof(int32_t), cudaMemcpyHostToDevice,
					G.stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(G.stream);
	free(h);
	return e != cudaSuccess ? cu_fail(err, e, "cudaMemcpy", __LINE__) : 0;
}

/* A cell of the attention grid: packed (n copies per launch, time / n) or, alone, the one
 * document in its launch (fwd_alone / bwd_alone: the latency when nothing runs beside it). */
static int measure_attn(const struct bp_model *m, const struct bp_task *t, int alone,
			int warmup, int reps, struct bp_meas *out, struct bp_error *err)
{
	struct dims d;
	struct attn_ctx c;
	model_dims(m, t->tp, &d);
	int64_t n = alone ? 1 : attn_copies(&d, t->q, t->kv, t->bwd);
	if (n * t->kv > INT32_MAX)
		n = INT32_MAX / t->kv;
	memset(&c, 0, sizeof(c));
	c.bwd = t->bwd;
	c.s.nseg = (int)n;
	c.s.heads = (int)d.hl;
	c.s.kv_heads = (int)d.kvl;
	c.s.head_dim = (int)d.hd;
	c.s.total_q = n * t->q;
	c.s.total_kv = n * t->kv;
	c.s.max_q = (int)t->q;
	c.s.max_kv = (int)t->kv;
	c.s.scale = 1.0f / sqrtf((float)d.hd);
	if (ensure_attn_io(&d, (size_t)c.s.total_q, (size_t)c.s.total_kv, err) < 0 ||
	    (t->bwd && ensure(&G.ws, bp_attn_bwd_workspace(&c.s), BP_FILL_NONE, err) < 0) ||
	    upload_offsets(n, t->q, t->kv, err) < 0)
		return -1;
	if (t->bwd) { /* the forward's O and lse, what the backward reads */
		struct attn_ctx f = c;
		f.bwd = 0;
		if (attn_run(&f, err) < 0)
			return -1;
	}
	return time_runs(attn_run, &c, warmup, reps, (double)n, out, err);
}

/* ---- block-sparse attention ---- */

struct sparse_ctx {
	struct bp_sparse_shape s;
	int bwd;
};

/* One run of a sparse cell. Forward: bp_sparse_fwd, the selection (block means, gate
 * scores, top-k) included, as M[x,k] is defined here (FLOP models miss the selection's
 * length-quadratic cost, SparseBalance Fig. 6). Backward: what backend_cuda.c's
 * cuda_attn_sparse runs for a backward, bp_sparse_select then bp_sparse_bwd: there the
 * forward's lists are overwritten by the forwards of the micro-batches in between, so the
 * replayed backward pays one more selection, and the table prices what balexec replays. */
static int sparse_run(void *p, struct bp_error *err)
{
	struct sparse_ctx *c = p;
	const int32_t *cu = G.cu.p;
	if (!c->bwd)
		return bp_sparse_fwd(&c->s, cu, NULL, G.q.p, G.k.p, G.v.p, G.o.p, G.lse.p, G.ws.p,
				     G.stream, err);
	if (bp_sparse_select(&c->s, cu, NULL, G.q.p, G.k.p, G.ws.p, G.stream, err) < 0)
		return -1;
	return bp_sparse_bwd(&c->s, cu, G.q.p, G.k.p, G.v.p, G.o.p, G.dout.p, G.lse.p, G.dq.p,
			     G.dk.p, G.dv.p, G.ws.p, G.stream, err);
}

/* n copies of task t's document (x = t->q tokens) in one launch: one budget for all
 * (k_seg NULL), B the table's block, heads as the dense cells (model_dims). */
static void sparse_shape(const struct dims *d, const struct bp_task *t, int64_t n,
			 struct bp_sparse_shape *s)
{
	memset(s, 0, sizeof(*s));
	s->nseg = (int)n;
	s->heads = (int)d->hl;
	s->kv_heads = (int)d->kvl;
	s->head_dim = (int)d->hd;
	s->total = n * t->q;
	s->max_len = (int)t->q;
	s->block = t->block;
	s->k = t->budget;
	s->max_k = t->budget;
	s->scale = 1.0f / sqrtf((float)d->hd);
}

/* How many copies of the document one launch runs, as attn_copies: enough CTAs for
 * TARGET_BLOCKS (forward and selection: one per query tile and head; backward: one per key
 * tile and kv head), no more than COPY_BYTES of memory (inputs, outputs, gradients and the
 * workspace); at least one. */
static int64_t sparse_copies(const struct dims *d, const struct bp_task *t)
{
	struct bp_sparse_shape one;
	double x = (double)t->q, tiles = ceil(x / 64);
	double blocks = t->bwd ? tiles * (double)d->kvl : tiles * (double)d->hl;
	sparse_shape(d, t, 1, &one);
	double bytes = x * (double)d->nq * 2 * 4 + x * (double)d->hl * 4 +
		       x * (double)d->nkv * 2 * 4 + (double)bp_sparse_workspace(&one);
	double n = ceil(TARGET_BLOCKS / blocks);
	if (n > floor(COPY_BYTES / bytes))
		n = floor(COPY_BYTES / bytes);
	if (n > 1 << 16)
		n = 1 << 16;
	return n < 1 ? 1 : (int64_t)n;
}

static int measure_sparse(const struct bp_model *m, const struct bp_task *t, int warmup,
			  int reps, struct bp_meas *out, struct bp_error *err)
{
	struct dims d;
	struct sparse_ctx c;
	model_dims(m, t->tp, &d);
	int64_t n = sparse_copies(&d, t);
	if (n * t->q > INT32_MAX)
		n = INT32_MAX / t->q;
	memset(&c, 0, sizeof(c));
	c.bwd = t->bwd;
	sparse_shape(&d, t, n, &c.s);
	if (bp_sparse_check(&c.s, err) < 0)
		return -1;
	if (ensure_attn_io(&d, (size_t)c.s.total, (size_t)c.s.total, err) < 0 ||
	    ensure(&G.ws, bp_sparse_workspace(&c.s), BP_FILL_NONE, err) < 0 ||
	    upload_offsets(n, t->q, 0, err) < 0)
		return -1;
	if (t->bwd) { /* the forward's O and lse, what the backward reads */
		struct sparse_ctx f = c;
		f.bwd = 0;
		if (sparse_run(&f, err) < 0)
			return -1;
	}
	return time_runs(sparse_run, &c, warmup, reps, (double)n, out, err);
}

/* ---- linear ---- */

/* Row-major C[M x N] = op(A)[M x K] op(B)[K x N], bf16 with fp32 accumulation (as
 * backend_cuda.c gemm: cuBLAS is column-major, so it computes C^T with operands swapped). */
static int gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const void *a, const void *b,
		void *c, struct bp_error *err)
{
	const float one = 1.0f, zero = 0.0f;
	if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
		return bp_errorf(err, "a GEMM of %lld x %lld x %lld is too large for cuBLAS",
				 (long long)m, (long long)n, (long long)k);
	BL(cublasGemmEx(G.blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
			(int)n, (int)m, (int)k, &one, b, CUDA_R_16BF, (int)(tb ? k : n), a,
			CUDA_R_16BF, (int)(ta ? m : k), &zero, c, CUDA_R_16BF, (int)n,
			CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
	return 0;
}

struct lin_ctx {
	struct dims d;
	int64_t t;
	int bwd;
};

#define GEMM(ta, tb, m, n, k, a, b, c)                                                 \
	do {                                                                           \
		if (gemm(ta, tb, m, n, k, a, b, c, err) < 0)                           \
			return -1;                                                     \
	} while (0)

/* One layer's GEMMs (profiler/README.md "Linear layers"): forward QKV, O, FFN in, FFN out;
 * backward the data and weight gradient of each, FFN first (the order of the backward). */
static int lin_run(void *p, struct bp_error *err)
{
	struct lin_ctx *c = p;
	const struct dims *d = &c->d;
	int64_t t = c->t;
	if (!c->bwd) {
		GEMM(0, 0, t, d->nqkv, d->h, G.x.p, G.w_qkv.p, G.qkv.p);
		GEMM(0, 0, t, d->h, d->nq, G.ao.p, G.w_o.p, G.y.p);
		GEMM(0, 0, t, d->nup, d->h, G.x.p, G.w_up.p, G.u.p);
		GEMM(0, 0, t, d->h, d->fl, G.u.p, G.w_down.p, G.y.p);
	} else {
		GEMM(0, 1, t, d->fl, d->h, G.dy.p, G.w_down.p, G.u.p);
		GEMM(1, 0, d->fl, d->h, t, G.u.p, G.dy.p, G.dw.p);
		GEMM(0, 1, t, d->h, d->nup, G.u.p, G.w_up.p, G.dx.p);
		GEMM(1, 0, d->h, d->nup, t, G.x.p, G.u.p, G.dw.p);
		GEMM(0, 1, t, d->nq, d->h, G.dy.p, G.w_o.p, G.dob.p);
		GEMM(1, 0, d->nq, d->h, t, G.ao.p, G.dy.p, G.dw.p);
		GEMM(0, 1, t, d->h, d->nqkv, G.qkv.p, G.w_qkv.p, G.dx.p);
		GEMM(1, 0, d->h, d->nqkv, t, G.x.p, G.qkv.p, G.dw.p);
	}
	return 0;
}
#undef GEMM

static int measure_linear(const struct bp_model *m, const struct bp_task *t, int warmup,
			  int reps, struct bp_meas *out, struct bp_error *err)
{
	struct lin_ctx c;
	model_dims(m, t->tp, &c.d);
	c.t = t->q;
	c.bwd = t->bwd;
	size_t tt = (size_t)c.t, h = (size_t)c.d.h, nq = (size_t)c.d.nq;
	size_t nqkv = (size_t)c.d.nqkv, nup = (size_t)c.d.nup, fl = (size_t)c.d.fl;
	size_t wmax = h * nqkv;
	if (h * nup > wmax)
		wmax = h * nup;
	if (fl * h > wmax)
		wmax = fl * h;
	if (ensure(&G.w_qkv, h * nqkv * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.w_o, nq * h * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.w_up, h * nup * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.w_down, fl * h * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.dw, wmax * 2, BP_FILL_NONE, err) < 0 ||
	    ensure(&G.x, tt * h * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.qkv, tt * nqkv * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.ao, tt * nq * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.y, tt * h * 2, BP_FILL_NONE, err) < 0 ||
	    ensure(&G.dy, tt * h * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.dx, tt * h * 2, BP_FILL_NONE, err) < 0 ||
	    ensure(&G.dob, tt * nq * 2, BP_FILL_NONE, err) < 0 ||
	    ensure(&G.u, tt * nup * 2, BP_FILL_BF16, err) < 0)
		return -1;
	return time_runs(lin_run, &c, warmup, reps, 1.0, out, err);
}

/* The LM head as backend_cuda.c lm_head runs it: rows in chunks of LM_CHUNK (the logits of
 * a long micro-batch would not fit at once), forward the logits GEMM, backward its data and
 * weight gradients. */
#define LM_CHUNK 2048
static int lm_run(void *p, struct bp_error *err)
{
	struct lin_ctx *c = p;
	const struct dims *d = &c->d;
	for (int64_t r0 = 0; r0 < c->t; r0 += LM_CHUNK) {
		int64_t n = c->t - r0 < LM_CHUNK ? c->t - r0 : LM_CHUNK;
		char *x = (char *)G.x.p + (size_t)r0 * (size_t)d->h * 2;
		char *dx = (char *)G.dx.p + (size_t)r0 * (size_t)d->h * 2;
		if (!c->bwd) {
			if (gemm(0, 0, n, d->vl, d->h, x, G.w_lm.p, G.lm.p, err) < 0)
				return -1;
		} else if (gemm(0, 1, n, d->h, d->vl, G.lm.p, G.w_lm.p, dx, err) < 0 ||
			   gemm(1, 0, d->h, d->vl, n, x, G.lm.p, G.dw_lm.p, err) < 0) {
			return -1;
		}
	}
	return 0;
}

static int measure_lm_head(const struct bp_model *m, const struct bp_task *t, int warmup,
			   int reps, struct bp_meas *out, struct bp_error *err)
{
	struct lin_ctx c;
	model_dims(m, t->tp, &c.d);
	c.t = t->q;
	c.bwd = t->bwd;
	size_t tt = (size_t)c.t, h = (size_t)c.d.h, vl = (size_t)c.d.vl;
	size_t rows = tt < LM_CHUNK ? tt : LM_CHUNK;
	if (ensure(&G.w_lm, h * vl * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.dw_lm, h * vl * 2, BP_FILL_NONE, err) < 0 ||
	    ensure(&G.lm, rows * vl * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.x, tt * h * 2, BP_FILL_BF16, err) < 0 ||
	    ensure(&G.dx, tt * h * 2, BP_FILL_NONE, err) < 0)
		return -1;
	return time_runs(lm_run, &c, warmup, reps, 1.0, out, err);
}

/* ---- collectives (N processes under srun) ---- */

#define NC(call)                                                                       \
	do {                                                                           \
		ncclResult_t r_ = (call);                                              \
		if (r_ != ncclSuccess)                                                 \
			return bp_errorf(err, "%s failed (balprof.c:%d): %s", #call, __LINE__, \
					 ncclGetErrorString(r_));                      \
	} while (0)

struct coll_ctx {
	ncclComm_t comm;
	int me, n;          /* rank in the group, group size */
	enum bp_coll_op op;
	size_t bytes;       /* as the table counts them (profiler/README.md "collectives") */
	void *in, *out;
};

/* One call, nccl-tests' byte convention: the all-reduce buffer, the all-gather output, the
 * reduce-scatter input, the all-to-all send buffer (bytes / n to each peer, as grouped
 * ncclSend/ncclRecv: NCCL's documented all-to-all), the message sent (member 0 to 1). */
static int coll_run(void *p, struct bp_error *err)
{
	struct coll_ctx *c = p;
	size_t per = c->bytes / (size_t)c->n, half = c->bytes / 2, halfper = per / 2;
	if (per < 1)
		per = 1;
	if (halfper < 1)
		halfper = 1;
	switch (c->op) {
	case BP_COLL_ALLREDUCE:
		NC(ncclAllReduce(c->out, c->out, half, ncclBfloat16, ncclSum, c->comm, G.stream));
		break;
	case BP_COLL_ALLGATHER:
		NC(ncclAllGather(c->in, c->out, per, ncclInt8, c->comm, G.stream));
		break;
	case BP_COLL_REDUCESCATTER:
		NC(ncclReduceScatter(c->in, c->out, halfper, ncclBfloat16, ncclSum, c->comm,
				     G.stream));
		break;
	case BP_COLL_ALLTOALL:
		NC(ncclGroupStart());
		for (int q = 0; q < c->n; q++) {
			NC(ncclSend((char *)c->in + (size_t)q * per, per, ncclInt8, q, c->comm,
				    G.stream));
			NC(ncclRecv((char *)c->out + (size_t)q * per, per, ncclInt8, q, c->comm,
				    G.stream));
		}
		NC(ncclGroupEnd());
		break;
	default:
		if (c->me == 0)
			NC(ncclSend(c->in, c->bytes, ncclInt8, 1, c->comm, G.stream));
		else if (c->me == 1)
			NC(ncclRecv(c->out, c->bytes, ncclInt8, 0, c->comm, G.stream));
		break;
	}
	return 0;
}

/* Times one cell on every member of the group: warm-ups, then reps runs between events
 * (a fixed count: every member must make the same calls), each run's time the slowest
 * member's (an ncclMax all-reduce of the per-run times), the median kept. */
static int time_coll(struct coll_ctx *c, int warmup, int reps, struct bp_meas *m,
		     struct bp_error *err)
{
	float *h = NULL, ms = 0;
	double *v = NULL;
	int rc = -1;
	for (int i = 0; i < warmup; i++)
		if (coll_run(c, err) < 0)
			return -1;
	h = bp_calloc((size_t)reps, sizeof(*h), err);
	v = bp_calloc((size_t)reps, sizeof(*v), err);
	if (!h || !v)
		goto out;
	for (int i = 0; i < reps; i++) {
		cudaError_t e = cudaEventRecord(G.ev0, G.stream);
		if (e == cudaSuccess && coll_run(c, err) < 0)
			goto out;
		if (e == cudaSuccess)
			e = cudaEventRecord(G.ev1, G.stream);
		if (e == cudaSuccess)
			e = cudaEventSynchronize(G.ev1);
		if (e == cudaSuccess)
			e = cudaEventElapsedTime(&ms, G.ev0, G.ev1);
		if (e != cudaSuccess) {
			cu_fail(err, e, "timing a collective", __LINE__);
			goto out;
		}
		h[i] = ms;
	}
	/* On G.stream (see upload_offsets): the all-reduce below must read these times. */
	cudaError_t e = cudaMemcpyAsync(G.times.p, h, (size_t)reps * sizeof(float),
					cudaMemcpyHostToDevice, G.stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(G.stream);
	ncclResult_t r = e == cudaSuccess ? ncclAllReduce(G.times.p, G.times.p, (size_t)reps,
							  ncclFloat32, ncclMax, c->comm,
							  G.stream) : ncclSuccess;
	if (e == cudaSuccess && r == ncclSuccess)
		e = cudaStreamSynchronize(G.stream);
	if (e == cudaSuccess && r == ncclSuccess)
		e = cudaMemcpy(h, G.times.p, (size_t)reps * sizeof(float), cudaMemcpyDeviceToHost);
	if (r != ncclSuccess) {
		bp_errorf(err, "ncclAllReduce of the run times failed: %s", ncclGetErrorString(r));
		goto out;
	}
	if (e != cudaSuccess) {
		cu_fail(err, e, "gathering the run times", __LINE__);
		goto out;
	}
	for (int i = 0; i < reps; i++)
		v[i] = (double)h[i] * 1000.0 >= 1e-3 ? (double)h[i] * 1000.0 : 1e-3;
	bp_prof_stats(v, (size_t)reps, &m->median, &m->min, &m->max);
	m->n = reps;
	rc = 0;
out:
	free(h);
	free(v);
	return rc;
}

typedef int (*record_fn)(void *ctx, const struct bp_meas *m, struct bp_error *err);

/* How the collectives are measured: on which rank of which world, the runs, and where
 * rank 0 records each cell (rec with rctx). */
struct coll_run {
	const struct bp_prof_world *w;
	int rank, warmup, reps;
	record_fn rec;
	void *rctx;
};

/* Every collective task, on every rank of the world in the same order: per table one
 * ncclCommSplit of the world (collective over it: members colour 0, the others
 * NCCL_SPLIT_NOCOLOR), the members time each size, rank 0 (a member of every group,
 * bp_prof_group) records each cell through rec. */
static int measure_colls(const struct bp_task *t, size_t nt, const struct coll_run *cr,
			 struct bp_error *err)
{
	const struct bp_prof_world *w = cr->w;
	int rank = cr->rank, reps = cr->reps;
	size_t maxb = 0;
	for (size_t i = 0; i < nt; i++)
		if (t[i].kind == BP_TASK_COLL && (size_t)t[i].q > maxb)
			maxb = (size_t)t[i].q;
	if (!maxb)
		return 0;
	if (ensure(&G.cin, maxb, BP_FILL_NONE, err) < 0 ||
	    ensure(&G.cout, maxb, BP_FILL_NONE, err) < 0 ||
	    ensure(&G.times, (size_t)reps * sizeof(float), BP_FILL_NONE, err) < 0)
		return -1;
	CU(cudaMemset(G.cin.p, 0, maxb));
	CU(cudaMemset(G.cout.p, 0, maxb));
	for (size_t i = 0; i < nt;) {
		if (t[i].kind != BP_TASK_COLL) {
			i++;
			continue;
		}
		size_t end = i;
		while (end < nt && t[end].kind == BP_TASK_COLL && t[end].table == t[i].table)
			end++;
		int node = rank / w->per_node, j = rank % w->per_node;
		int member = node < t[i].gnodes && j < t[i].gper;
		ncclComm_t gc = NULL;
		NC(ncclCommSplit(G.comm, member ? 0 : NCCL_SPLIT_NOCOLOR, rank, &gc, NULL));
		if (member) {
			struct coll_ctx c;
			int n = 0, me = 0;
			memset(&c, 0, sizeof(c));
			if (!gc || ncclCommCount(gc, &n) != ncclSuccess ||
			    ncclCommUserRank(gc, &me) != ncclSuccess || n != t[i].ranks) {
				if (gc)
					ncclCommDestroy(gc);
				return bp_errorf(err, "ncclCommSplit made a group of %d ranks for '%s'",
						 n, t[i].key);
			}
			c.comm = gc;
			c.me = me;
			c.n = n;
			c.op = (enum bp_coll_op)t[i].op;
			c.in = G.cin.p;
			c.out = G.cout.p;
			for (size_t k = i; k < end; k++) {
				struct bp_meas m;
				memset(&m, 0, sizeof(m));
				snprintf(m.key, sizeof(m.key), "%s", t[k].key);
				c.bytes = (size_t)t[k].q;
				if (time_coll(&c, cr->warmup, reps, &m, err) < 0 ||
				    (rank == 0 && cr->rec(cr->rctx, &m, err) < 0)) {
					bp_error_prefix(err, "%s", t[k].key);
					ncclCommDestroy(gc);
					return -1;
				}
			}
			CU(cudaStreamSynchronize(G.stream));
			ncclCommDestroy(gc);
		}
		i = end;
	}
	bp_dbuf_free(&G.cin);
	bp_dbuf_free(&G.cout);
	bp_dbuf_free(&G.times);
	return 0;
}

/* Checks the block placement bp_prof_group assumes (rank r on node r / per_node) by
 * gathering every rank's host name over the world. */
static int check_placement(const struct bp_prof_world *w, int rank, struct bp_error *err)
{
	char me[64] = {0};
	if (gethostname(me, sizeof(me) - 1) < 0)
		snprintf(me, sizeof(me), "?");
	size_t all_n = (size_t)w->ranks * sizeof(me);
	if (ensure(&G.cin, sizeof(me), BP_FILL_NONE, err) < 0 ||
	    ensure(&G.cout, all_n, BP_FILL_NONE, err) < 0)
		return -1;
	char *all = bp_calloc((size_t)w->ranks, sizeof(me), err);
	if (!all)
		return -1;
	/* On G.stream and waited for (see upload_offsets), ahead of the gather that reads it. */
	cudaError_t e = cudaMemcpyAsync(G.cin.p, me, sizeof(me), cudaMemcpyHostToDevice, G.stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(G.stream);
	ncclResult_t r = e == cudaSuccess ? ncclAllGather(G.cin.p, G.cout.p, sizeof(me), ncclChar,
							  G.comm, G.stream) : ncclSuccess;
	if (e == cudaSuccess && r == ncclSuccess)
		e = cudaStreamSynchronize(G.stream);
	if (e == cudaSuccess && r == ncclSuccess)
		e = cudaMemcpy(all, G.cout.p, all_n, cudaMemcpyDeviceToHost);
	int rc = 0;
	if (r != ncclSuccess)
		rc = bp_errorf(err, "gathering host names failed: %s", ncclGetErrorString(r));
	else if (e != cudaSuccess)
		rc = cu_fail(err, e, "gathering host names", __LINE__);
	for (int k = 0; rc == 0 && k < w->ranks; k++) {
		const char *hk = all + (size_t)k * sizeof(me);
		const char *h0 = all + (size_t)(k / w->per_node * w->per_node) * sizeof(me);
		if (strncmp(hk, h0, sizeof(me)))
			rc = bp_errorf(err, "rank %d runs on '%.63s' but rank %d on '%.63s': balprof "
				       "needs ranks placed in blocks of %d per node (srun -m block)",
				       k, hk, k / w->per_node * w->per_node, h0, w->per_node);
	}
	(void)rank;
	free(all);
	return rc;
}

/* ---- start ---- */

/* The device, its stream, cuBLAS with its workspace, and the versions. */
static int start_device(struct bp_provenance *pv, struct bp_error *err)
{
	int n = 0, dev = 0, v = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess)
		return bp_errorf(err, "no CUDA device: %s", cudaGetErrorString(e));
	if (n < 1)
		return bp_errorf(err, "no CUDA device: cudaGetDeviceCount found none");
	const char *lr = getenv("SLURM_LOCALID");
	if (lr && *lr)
		dev = atoi(lr) % n;
	CU(cudaSetDevice(dev));
	struct cudaDeviceProp prop;
	CU(cudaGetDeviceProperties(&prop, dev));
	snprintf(pv->device, sizeof(pv->device), "%.127s", prop.name);
	G.sms = prop.multiProcessorCount;
	G.dev = dev;
	CU(cudaStreamCreateWithFlags(&G.stream, cudaStreamNonBlocking));
	CU(cudaEventCreate(&G.ev0));
	CU(cudaEventCreate(&G.ev1));
	BL(cublasCreate(&G.blas));
	BL(cublasSetStream(G.blas, G.stream));
	CU(cudaMalloc(&G.blas_ws.p, BLAS_WORKSPACE));
	G.blas_ws.cap = BLAS_WORKSPACE;
	BL(cublasSetWorkspace(G.blas, G.blas_ws.p, BLAS_WORKSPACE));
	CU(cudaDriverGetVersion(&v));
	cuda_version_text(v, pv->cuda_driver, sizeof(pv->cuda_driver));
	CU(cudaRuntimeGetVersion(&v));
	cuda_version_text(v, pv->cuda_runtime, sizeof(pv->cuda_runtime));
	int ma = 0, mi = 0, pa = 0;
	BL(cublasGetProperty(MAJOR_VERSION, &ma));
	BL(cublasGetProperty(MINOR_VERSION, &mi));
	BL(cublasGetProperty(PATCH_LEVEL, &pa));
	snprintf(pv->cublas, sizeof(pv->cublas), "%d.%d.%d", ma, mi, pa);
	if (ncclGetVersion(&v) == ncclSuccess) /* NCCL_VERSION_CODE: X*10000 + Y*100 + Z */
		snprintf(pv->nccl, sizeof(pv->nccl), "%d.%d.%d", v / 10000, (v / 100) % 100,
			 v % 100);
	else
		snprintf(pv->nccl, sizeof(pv->nccl), "unknown");
	driver_version(pv->driver, sizeof(pv->driver));
	G.fill = bp_calloc(BP_DEV_FILL_CHUNK / 2, sizeof(uint16_t), err);
	if (!G.fill)
		return -1;
	bp_dev_make_fill(G.fill, BP_DEV_FILL_CHUNK / 2, FILL_SEED);
	return 0;
}

/* The NCCL world (blocking communicators: a profiler has nothing else to do while it
 * waits; srun --kill-on-bad-exit ends a world whose rank failed), then the memory reserve:
 * total - free once the context, cuBLAS and NCCL hold theirs. One process: a one-rank
 * communicator, whose failure only leaves NCCL's buffers out of the reserve. */
static int start_comm(int world, int rank, const ncclUniqueId *uid, int64_t *total,
		      int64_t *reserved, struct bp_error *err)
{
	ncclResult_t r;
	if (world > 1) {
		r = ncclCommInitRank(&G.comm, world, *uid, rank);
		if (r != ncclSuccess) {
			G.comm = NULL;
			return bp_errorf(err, "ncclCommInitRank (rank %d of %d) failed: %s%s%s",
					 rank, world, ncclGetErrorString(r),
					 ncclGetLastError(NULL)[0] ? ": " : "",
					 ncclGetLastError(NULL));
		}
	} else {
		int devs[1] = {G.dev};
		r = ncclCommInitAll(&G.comm, 1, devs);
		if (r != ncclSuccess) {
			G.comm = NULL;
			fprintf(stderr, "balprof: warning: ncclCommInitAll failed: %s; the memory "
				"reserve leaves NCCL's buffers out\n", ncclGetErrorString(r));
		}
	}
	CU(cudaDeviceSynchronize());
	size_t fr = 0, tot = 0;
	CU(cudaMemGetInfo(&fr, &tot));
	*total = (int64_t)tot;
	*reserved = (int64_t)(tot - fr);
	return 0;
}

static void stop_gpu(void)
{
	free_attn_bufs();
	free_linear_bufs();
	bp_dbuf_free(&G.cin);
	bp_dbuf_free(&G.cout);
	bp_dbuf_free(&G.times);
	bp_dbuf_free(&G.blas_ws);
	if (G.comm)
		ncclCommDestroy(G.comm);
	if (G.blas)
		cublasDestroy(G.blas);
	if (G.ev0)
		cudaEventDestroy(G.ev0);
	if (G.ev1)
		cudaEventDestroy(G.ev1);
	if (G.stream)
		cudaStreamDestroy(G.stream);
	free(G.fill);
}

/* An alone cell whose packed twin ran one copy per launch (attn_copies 1: a long document
 * fills the GPU by itself) is that measurement: copied into me from the state, nothing run.
 * Returns 1 when copied, 0 when the cell must be measured. */
static int alone_is_packed(const struct bp_model *m, const struct bp_task *t,
			   const struct bp_state *st, struct bp_meas *me)
{
	struct dims d;
	char key[BP_PROF_KEY];
	model_dims(m, t->tp, &d);
	if (attn_copies(&d, t->q, t->kv, t->bwd) != 1)
		return 0;
	snprintf(key, sizeof(key), "attn tp=%d q=%lld kv=%lld %s", t->tp, (long long)t->q,
		 (long long)t->kv, t->bwd ? "bwd" : "fwd");
	const struct bp_meas *packed = bp_state_find(st, key);
	if (!packed)
		return 0;
	me->median = packed->median;
	me->min = packed->min;
	me->max = packed->max;
	me->n = packed->n;
	return 1;
}

/* ---- progress ---- */

static const char *task_table(const struct bp_task *t, char *buf, size_t n)
{
	if (t->kind == BP_TASK_MEMORY)
		snprintf(buf, n, "memory");
	else if (t->kind == BP_TASK_SPARSE)
		snprintf(buf, n, "sparse attention tp %d block %d", t->tp, t->block);
	else
		snprintf(buf, n, "%s tp %d",
			 t->kind == BP_TASK_ATTN	 ? "attention"
			 : t->kind == BP_TASK_ATTN_ALONE ? "attention alone"
			 : t->kind == BP_TASK_LM_HEAD	 ? "LM head"
							 : "linear",
			 t->tp);
	return buf;
}

static void progress(int tty, size_t done, size_t total, const struct bp_task *t, double t0)
{
	if (!tty)
		return;
	char bar[31];
	size_t w = total ? done * 30 / total : 30;
	for (size_t i = 0; i < 30; i++)
		bar[i] = i < w ? '#' : '.';
	bar[30] = 0;
	double el = now_s() - t0;
	fprintf(stderr, "\r[%s] %zu/%zu %-44.44s %6.0f s", bar, done, total, t ? t->key : "done",
		el);
	fflush(stderr);
}

/* ---- main ---- */

/* 1 when hay contains needle, ignoring ASCII case ("NVIDIA H100 80GB HBM3", "h100"). */
static int contains_nocase(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	for (; *hay; hay++) {
		size_t i = 0;
		while (i < n && hay[i] &&
		       tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
			i++;
		if (i == n)
			return 1;
	}
	return n == 0;
}

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "balprof: error: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	if (code == EXIT_USAGE)
		fprintf(stderr, "see 'balplan profile --help'\n");
	return code;
}

/* The state file: read (resume), its torn tail cut, opened for appending, the header
 * written when new. */
static FILE *open_state(const char *path, const char *sig, struct bp_state *s,
			struct bp_error *err)
{
	char *text = NULL;
	size_t len = 0;
	struct stat sb;
	if (stat(path, &sb) == 0) {
		if (cmd_read_file(path, &text, &len, err) < 0)
			return NULL;
		int rc = bp_state_parse(s, text, len, sig, err);
		free(text);
		if (rc < 0)
			return NULL;
		if ((size_t)s->valid_bytes < len && truncate(path, s->valid_bytes) < 0) {
			bp_errorf(err, "cannot cut its torn last line: %s", strerror(errno));
			return NULL;
		}
	}
	FILE *f = fopen(path, "a");
	if (!f) {
		bp_errorf(err, "%s", strerror(errno));
		return NULL;
	}
	if (s->valid_bytes == 0 && (bp_state_header(f, sig) < 0 || fflush(f) != 0)) {
		bp_errorf(err, "cannot write: %s", strerror(errno));
		fclose(f);
		return NULL;
	}
	return f;
}

struct rec_ctx {
	FILE *f;
	struct bp_state *st;
	const char *path;
	size_t *done;
};

/* Appends a finished cell to the state file (flushed at once) and to the state. */
static int record(void *p, const struct bp_meas *m, struct bp_error *err)
{
	struct rec_ctx *r = p;
	if (bp_state_write(r->f, m) < 0 || fflush(r->f) != 0)
		return bp_errorf(err, "cannot append to state file '%s': %s", cmd_cut(r->path),
				 strerror(errno));
	if (bp_state_add(r->st, m, err) < 0)
		return -1;
	(*r->done)++;
	return 0;
}

/* The processes measuring: one, or srun's tasks (SLURM_NTASKS > 1: rank SLURM_PROCID, the
 * nodes SLURM_STEP_NUM_NODES, else SLURM_NNODES, with the same number of ranks on each). */
static int find_world(struct bp_prof_world *w, int *rank, struct bp_error *err)
{
	const char *nt = getenv("SLURM_NTASKS"), *pid = getenv("SLURM_PROCID");
	const char *nn = getenv("SLURM_STEP_NUM_NODES");
	int64_t ranks = 1, r = 0, nodes = 1;
	w->ranks = w->per_node = 1;
	*rank = 0;
	if (!nt || !*nt)
		return 0;
	if (!nn || !*nn)
		nn = getenv("SLURM_NNODES");
	if (bp_parse_int64(nt, &ranks, "SLURM_NTASKS", err) < 0 || ranks < 1 || ranks > 65536)
		return bp_errorf(err, "SLURM_NTASKS '%s' is not a task count", nt);
	if (ranks == 1)
		return 0;
	if (!pid || bp_parse_int64(pid, &r, "SLURM_PROCID", err) < 0 || r < 0 || r >= ranks)
		return bp_errorf(err, "SLURM_PROCID '%s' is not a rank of %lld", pid ? pid : "",
				 (long long)ranks);
	if (nn && *nn && (bp_parse_int64(nn, &nodes, "SLURM_NNODES", err) < 0 || nodes < 1))
		return bp_errorf(err, "SLURM_STEP_NUM_NODES / SLURM_NNODES '%s' is not a node count",
				 nn);
	if (ranks % nodes)
		return bp_errorf(err, "%lld tasks on %lld nodes: balprof needs the same number of "
				 "tasks on every node", (long long)ranks, (long long)nodes);
	w->ranks = (int)ranks;
	w->per_node = (int)(ranks / nodes);
	*rank = (int)r;
	return 0;
}

/* Every rank meets rank 0 (executor/rendezvous.h, as balexec does: the first node of the
 * step and the port of srun --resv-ports=1, or BALPLAN_RENDEZVOUS=HOST:PORT) and gets its
 * blob: the NCCL unique id and whether the collectives are in rank 0's state file. */
static int meet(const struct bp_prof_world *w, int rank, const char *check, ncclUniqueId *uid,
		int *coll_done, struct bp_error *err)
{
	char host[256], self[64] = "?", blob[sizeof(ncclUniqueId) + 1];
	int port = 0;
	size_t len = sizeof(blob);
	const char *spec = getenv("BALPLAN_RENDEZVOUS");
	if (spec && *spec) {
		const char *colon = strrchr(spec, ':');
		int64_t v;
		if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(host) ||
		    bp_parse_int64(colon + 1, &v, "port", err) < 0 || v < 1 || v > 65535)
			return bp_errorf(err, "BALPLAN_RENDEZVOUS '%s' is not HOST:PORT", spec);
		memcpy(host, spec, (size_t)(colon - spec));
		host[colon - spec] = 0;
		port = (int)v;
	} else {
		const char *ports = getenv("SLURM_STEP_RESV_PORTS");
		const char *nodes = getenv("SLURM_STEP_NODELIST");
		if (!nodes || !*nodes)
			nodes = getenv("SLURM_JOB_NODELIST");
		if (!ports || !*ports || !nodes || !*nodes)
			return bp_errorf(err, "%d processes need a rendezvous: run under 'srun "
					 "--resv-ports=1' or set BALPLAN_RENDEZVOUS=HOST:PORT (rank "
					 "0's node)", w->ranks);
		if (bp_slurm_first_port(ports, &port, err) < 0 ||
		    bp_slurm_first_host(nodes, host, sizeof(host), err) < 0)
			return -1;
	}
	gethostname(self, sizeof(self) - 1);
	if (rank == 0) {
		ncclResult_t r = ncclGetUniqueId(uid);
		if (r != ncclSuccess)
			return bp_errorf(err, "ncclGetUniqueId failed: %s", ncclGetErrorString(r));
		memcpy(blob, uid, sizeof(*uid));
		blob[sizeof(*uid)] = (char)(*coll_done ? 1 : 0);
		len = sizeof(blob);
	}
	struct bp_rdv_opts ro = {host, port, rank, w->ranks, 300.0, check, self};
	if (bp_rendezvous(&ro, blob, &len, sizeof(blob), err) != 0)
		return -1;
	if (len != sizeof(blob))
		return bp_errorf(err, "the rendezvous gave %zu bytes, expected %zu", len,
				 sizeof(blob));
	memcpy(uid, blob, sizeof(*uid));
	*coll_done = blob[sizeof(*uid)] != 0;
	return 0;
}

/* What one balprof run reads, measures and writes; released by prof_release. */
struct prof_run {
	struct bp_prof_opts o;
	struct bp_profile p;
	struct bp_state st;
	struct bp_provenance pv;
	struct bp_prof_world w;
	const struct bp_gpu *g;
	struct bp_model m;
	struct bp_task *tasks;
	size_t ntasks, ncoll, nsparse, done, todo;
	FILE *sf;               /* the state file, rank 0's */
	const char *spath;      /* its path */
	char statebuf[4096];
	char *text;             /* the profile written */
	int rank, coll_done, tty;
	double t0;
	int64_t total_mem, reserved;
	ncclUniqueId uid;
};

#define PROF_GO (-1) /* main's steps: go on, else the exit status */

/* The options, the GPU and the model; 0 for --help, else PROF_GO or the exit status. */
static int prof_parse(int argc, char **argv, struct prof_run *r)
{
	struct bp_error err;
	if (bp_prof_parse(argc, argv, &r->o, &err) < 0)
		return fail(EXIT_USAGE, "%s", err.text);
	if (r->o.help) {
		printf("balprof: the measuring profiler of `balplan profile`; its options are "
		       "balplan profile's (balplan profile --help)\n");
		return EXIT_OK;
	}
	if (r->o.analytic)
		return fail(EXIT_USAGE, "balprof measures; for the analytic profile run "
			    "'balplan profile --analytic'");
	r->g = bp_gpu_preset(r->o.gpu);
	if (!r->g)
		return fail(EXIT_USAGE, "unknown GPU '%s' (see 'balplan presets')",
			    cmd_cut(r->o.gpu));
	if (cmd_resolve_model(r->o.model, &r->m, &err) < 0)
		return fail(strncmp(err.text, "unknown model", 13) ? EXIT_DATA : EXIT_USAGE, "%s",
			    err.text);
	if (find_world(&r->w, &r->rank, &err) < 0)
		return fail(EXIT_DATA, "%s", err.text);
	return PROF_GO;
}

/* The analytic skeleton and its cells to measure; the block-sparse kernel's limits (a
 * document of at most 8192 blocks, ...) checked before anything is measured, not after
 * hours of dense cells. */
static int prof_tasks(struct prof_run *r)
{
	struct bp_error err;
	const struct bp_prof_opts *o = &r->o;
	if (bp_profile_analytic(&r->p, r->g, &r->m, o->schemes, o->nschemes, o->max_len,
				&err) < 0)
		return fail(EXIT_DATA, "cannot make the analytic skeleton: %s", err.text);
	if (bp_prof_tasks(&r->p, &r->w, &r->tasks, &r->ntasks, &err) < 0)
		return fail(EXIT_DATA, "%s", err.text);
	for (size_t i = 0; i < r->ntasks; i++) {
		const struct bp_task *t = &r->tasks[i];
		struct bp_sparse_shape ss;
		struct dims d;
		r->ncoll += t->kind == BP_TASK_COLL;
		r->nsparse += t->kind == BP_TASK_SPARSE;
		if (t->kind != BP_TASK_SPARSE)
			continue;
		model_dims(&r->m, t->tp, &d);
		sparse_shape(&d, t, 1, &ss);
		if (bp_sparse_check(&ss, &err) < 0)
			return fail(EXIT_DATA, "cannot measure '%s': %s (a smaller --max-len?)",
				    t->key, err.text);
	}
	return PROF_GO;
}

/* Rank 0's state file: opened (resumed), and whether it holds every collective cell. */
static int prof_state(struct prof_run *r)
{
	struct bp_error err;
	char sig[1024];
	r->spath = r->o.state;
	if (!r->spath) {
		if (!strcmp(r->o.out, "-"))
			r->spath = "balprof.state";
		else {
			snprintf(r->statebuf, sizeof(r->statebuf), "%s.state", r->o.out);
			r->spath = r->statebuf;
		}
	}
	if (r->rank != 0)
		return PROF_GO;
	if (!contains_nocase(r->pv.device, r->g->name))
		fprintf(stderr, "balprof: warning: measuring on '%s' for the GPU preset '%s': the "
			"hardware object's bandwidths and peak stay the preset's\n", r->pv.device,
			r->g->name);
	bp_prof_signature(&r->o, &r->w, r->pv.device, sig, sizeof(sig));
	r->sf = open_state(r->spath, sig, &r->st, &err);
	if (!r->sf) {
		fail(EXIT_DATA, "cannot use state file '%s': %s", cmd_cut(r->spath), err.text);
		if (r->w.ranks > 1) { /* tell the others now rather than at their timeout */
			struct bp_error e2;
			meet(&r->w, r->rank, "rank 0 could not start: see its error", &r->uid,
			     &r->coll_done, &e2);
		}
		return EXIT_DATA;
	}
	r->coll_done = 1;
	for (size_t i = 0; i < r->ntasks; i++)
		if (r->tasks[i].kind == BP_TASK_COLL && !bp_state_find(&r->st, r->tasks[i].key))
			r->coll_done = 0;
	return PROF_GO;
}

/* The ranks meet (the same options on every one), start NCCL and check their placement. */
static int prof_world(struct prof_run *r)
{
	struct bp_error err;
	if (r->w.ranks > 1) {
		char s2[1024], sha[65], check[BP_RDV_MAX_CHECK + 1];
		bp_prof_signature(&r->o, &r->w, "-", s2, sizeof(s2));
		bp_sha256_hex(s2, strlen(s2), sha);
		snprintf(check, sizeof(check), "balprof %s", sha);
		if (meet(&r->w, r->rank, check, &r->uid, &r->coll_done, &err) < 0)
			return fail(EXIT_DATA, "rank %d: %s", r->rank, err.text);
	}
	if (start_comm(r->w.ranks, r->rank, &r->uid, &r->total_mem, &r->reserved, &err) < 0)
		return fail(EXIT_DATA, "rank %d: cannot start NCCL: %s", r->rank, err.text);
	r->p.hw.hbm_bytes = r->total_mem;
	if (r->w.ranks > 1 && check_placement(&r->w, r->rank, &err) < 0)
		return fail(EXIT_DATA, "rank %d: %s", r->rank, err.text);
	return PROF_GO;
}

/* The collective tables, on every rank; then the compute tables are rank 0's alone. */
static int prof_colls(struct prof_run *r, struct rec_ctx *rctx)
{
	struct bp_error err;
	r->tty = r->rank == 0 && isatty(2);
	for (size_t i = 0; i < r->ntasks; i++)
		r->todo += r->rank == 0 && !bp_state_find(&r->st, r->tasks[i].key);
	if (r->rank == 0)
		fprintf(stderr, "balprof: %s, %s on '%s', %d process%s: %zu cells, %zu to measure "
			"(%zu in '%s'); %d reps, %d warm-up\n", r->g->name, r->m.name, r->pv.device,
			r->w.ranks, r->w.ranks > 1 ? "es" : "", r->ntasks, r->todo,
			r->ntasks - r->todo, cmd_cut(r->spath), r->o.reps, r->o.warmup);
	if (r->ncoll && !r->coll_done) {
		double c0 = now_s();
		struct coll_run cr = {&r->w, r->rank, r->o.warmup, r->o.reps, record, rctx};
		if (measure_colls(r->tasks, r->ntasks, &cr, &err) < 0)
			return fail(EXIT_DATA, "rank %d: measuring the collectives failed: %s",
				    r->rank, err.text);
		if (r->rank == 0)
			fprintf(stderr, "balprof: collectives: %zu cells in %.1f s\n", r->ncoll,
				now_s() - c0);
	}
	return r->rank != 0 ? EXIT_OK : PROF_GO;
}

/* One compute cell into me: 0, or -1 with err. */
static int measure_task(struct prof_run *r, const struct bp_task *t, struct bp_meas *me,
			struct bp_error *err)
{
	const struct bp_model *m = &r->m;
	int warmup = r->o.warmup, reps = r->o.reps;
	memset(me, 0, sizeof(*me));
	snprintf(me->key, sizeof(me->key), "%s", t->key);
	if (t->kind == BP_TASK_MEMORY) {
		me->median = me->min = me->max = (double)r->reserved;
		me->n = 1;
		return 0;
	}
	if (t->kind == BP_TASK_LINEAR)
		return measure_linear(m, t, warmup, reps, me, err);
	if (t->kind == BP_TASK_LM_HEAD)
		return measure_lm_head(m, t, warmup, reps, me, err);
	if (t->kind == BP_TASK_ATTN_ALONE && alone_is_packed(m, t, &r->st, me))
		return 0; /* the packed launch held one copy: the same measurement */
	if (G.x.p)
		free_linear_bufs(); /* the attention copies want the room */
	if (t->kind == BP_TASK_SPARSE)
		return measure_sparse(m, t, warmup, reps, me, err);
	return measure_attn(m, t, t->kind == BP_TASK_ATTN_ALONE, warmup, reps, me, err);
}

/* Every compute cell the state file does not hold, table after table, each recorded as
 * it is done. */
static int prof_compute(struct prof_run *r, struct rec_ctx *rctx)
{
	struct bp_error err;
	char cur[64] = "", nxt[64];
	double tab0 = now_s();
	size_t tabn = 0;
	for (size_t i = 0; i < r->ntasks; i++) {
		const struct bp_task *t = &r->tasks[i];
		struct bp_meas me;
		if (t->kind == BP_TASK_COLL)
			continue;
		task_table(t, nxt, sizeof(nxt));
		if (strcmp(cur, nxt)) {
			if (!r->tty && cur[0])
				fprintf(stderr, "balprof: %s: %zu cells in %.1f s\n", cur, tabn,
					now_s() - tab0);
			snprintf(cur, sizeof(cur), "%s", nxt);
			tab0 = now_s();
			tabn = 0;
		}
		if (bp_state_find(&r->st, t->key))
			continue;
		progress(r->tty, r->done, r->todo, t, r->t0);
		if (measure_task(r, t, &me, &err) < 0) {
			if (r->tty)
				fprintf(stderr, "\n");
			return fail(EXIT_DATA, "measuring '%s' failed: %s (the %zu cells done are "
				    "in '%s'; a rerun resumes)", t->key, err.text, r->done,
				    cmd_cut(r->spath));
		}
		if (record(rctx, &me, &err) < 0)
			return fail(EXIT_DATA, "%s", err.text);
		tabn++;
	}
	if (!r->tty && cur[0])
		fprintf(stderr, "balprof: %s: %zu cells in %.1f s\n", cur, tabn, now_s() - tab0);
	progress(r->tty, r->done, r->todo, NULL, r->t0);
	if (r->tty)
		fprintf(stderr, "\n");
	return PROF_GO;
}

/* The provenance: what was measured and what stayed analytic; the collective tables in
 * *ctab. */
static void prof_provenance(struct prof_run *r, size_t *ctab)
{
	struct bp_provenance *pv = &r->pv;
	const struct bp_task *t = r->tasks;
	snprintf(pv->tool, sizeof(pv->tool), "balprof %s", BALPLAN_VERSION);
	time_t now = time(NULL);
	struct tm tmv;
	gmtime_r(&now, &tmv);
	strftime(pv->date, sizeof(pv->date), "%Y-%m-%dT%H:%M:%SZ", &tmv);
	snprintf(pv->attn_kernels, sizeof(pv->attn_kernels), "%s", BP_ATTN_GEOM_NAME);
	*ctab = 0;
	for (size_t i = 0; i < r->ntasks; i++)
		*ctab += t[i].kind == BP_TASK_COLL &&
			 (i == 0 || t[i - 1].table != t[i].table || t[i - 1].kind != BP_TASK_COLL);
	snprintf(pv->measured, sizeof(pv->measured), "attention%s linear%s "
		 "memory.reserved_bytes hardware.hbm_bytes", r->nsparse ? " sparse_attention" : "",
		 r->ncoll ? " collectives" : "");
	if (r->ncoll)
		snprintf(pv->analytic, sizeof(pv->analytic), "collectives other than the %zu of "
			 "%zu tables %d ranks (%d per node) can form, other hardware and memory",
			 *ctab, r->p.ncoll, r->w.ranks, r->w.per_node);
	else
		snprintf(pv->analytic, sizeof(pv->analytic), "collectives (one process: a 1-rank "
			 "world), other hardware and memory");
	pv->ranks = r->w.ranks;
	pv->reps = r->o.reps;
	pv->warmup = r->o.warmup;
}

/* The measurements merged into the skeleton, the profile written and read back through
 * the reader every other command uses. */
static int prof_write(struct prof_run *r)
{
	struct bp_error err;
	const char *out = r->o.out;
	size_t nmeas = 0, ncells = 0, ctab;
	if (bp_prof_merge(&r->p, &r->w, &r->st, &nmeas, &ncells, &err) < 0)
		return fail(EXIT_DATA, "cannot merge the measurements: %s", err.text);
	if (nmeas != ncells)
		return fail(EXIT_DATA, "only %zu of %zu cells are measured", nmeas, ncells);
	prof_provenance(r, &ctab);
	if (bp_prof_finish(&r->p, &r->pv, r->o.max_len, &err) < 0)
		return fail(EXIT_DATA, "%s", err.text);
	json_t *j = bp_profile_to_json(&r->p);
	r->text = j ? bp_json_dump_canonical(j) : NULL;
	json_decref(j);
	if (!r->text)
		return fail(EXIT_DATA, "cannot encode the profile: out of memory");
	if (cmd_write_file(out, r->text, strlen(r->text), &err) < 0)
		return fail(EXIT_DATA, "cannot write profile '%s': %s", cmd_cut(out), err.text);
	if (strcmp(out, "-")) {
		struct bp_profile back;
		char sha[65];
		bp_profile_init(&back);
		int lr = cmd_load_profile(out, &back, sha, &err);
		bp_profile_release(&back);
		if (lr < 0)
			return fail(EXIT_DATA, "the profile written to '%s' does not read back: %s",
				    cmd_cut(out), err.text);
	}
	fprintf(stderr, "balprof: wrote %s to '%s': %zu cells measured (attention, %zu sparse "
		"attention, linear, %zu collective tables, memory reserve %.2f GiB); analytic: %s; "
		"%.1f s\n", r->p.name, cmd_cut(out), nmeas, r->nsparse, ctab,
		(double)r->p.mem.reserved_bytes / (1 << 30), r->pv.analytic, now_s() - r->t0);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	static struct prof_run run; /* large (the state buffers): not on the stack */
	struct prof_run *r = &run;
	struct bp_error err;
	r->t0 = now_s();
	bp_profile_init(&r->p);
	bp_state_init(&r->st);
	int rc = prof_parse(argc, argv, r);
	if (rc != PROF_GO)
		return rc;
	struct rec_ctx rctx = {NULL, &r->st, NULL, &r->done};
	rc = prof_tasks(r);
	if (rc == PROF_GO && start_device(&r->pv, &err) < 0)
		rc = fail(EXIT_DATA, "rank %d: cannot start the GPU: %s", r->rank, err.text);
	if (rc == PROF_GO)
		rc = prof_state(r);
	if (rc == PROF_GO)
		rc = prof_world(r);
	rctx.f = r->sf;
	rctx.path = r->spath;
	if (rc == PROF_GO)
		rc = prof_colls(r, &rctx);
	if (rc == PROF_GO)
		rc = prof_compute(r, &rctx);
	if (rc == PROF_GO)
		rc = prof_write(r);
	if (r->sf)
		fclose(r->sf);
	stop_gpu();
	free(r->text);
	free(r->tasks);
	bp_state_release(&r->st);
	bp_profile_release(&r->p);
	return rc;
}
