/* bench_attn.cu: times balexec's attention kernels (executor/attn.cu) on long-context shapes:
 * 8K, 32K and 128K tokens as one document or packed 8K / 2K documents, 32 query heads, 8 kv
 * heads, head_dim 128, bf16, causal; and one TP-8 rank's share of those heads (4 and 1: the
 * backward's short grid, split over several blocks per key tile, attn.h bwd_split) at 8K and
 * 32K, also with the split off ("-unsplit", compared with the same SDPA shape). Per shape: bp_attn_fwd and bp_attn_bwd each timed with
 * CUDA events, WARMUP untimed calls then the median of ITERS. tools/bench/bench-attn runs
 * this next to PyTorch's SDPA (bench-attn-sdpa.py, same shape names) and prints the ratios.
 *
 * FLOPs (causal, what FlashAttention-2's benchmarks count): a segment has
 * pairs = q_len * (kv_len - q_len + 1) + q_len * (q_len - 1) / 2 visible (query, key) pairs
 * (L (L + 1) / 2 for one document), forward = 4 * head_dim * heads * pairs (S = QK^T and PV,
 * 2 flops per multiply-add), backward = 2.5 x forward (five products: QK^T again, dV, dP, dQ,
 * dK). Inputs are seeded pseudo-random bf16 values; outputs are not checked here
 * (tests/gpu/test_attention.cu does that).
 *
 * usage: bench_attn [ITERS]   (default 10)
 * Output: a table, then one line per shape: shape=NAME tokens=N docs=N fwd_ms=X
 * fwd_tflops=X bwd_ms=X bwd_tflops=X. Exit status 0, 1 on any error, 2 usage. */
#include <cuda_runtime.h>

#include <algorithm>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "attn.h"

#define CUDA_OK(x)                                                                          \
	do {                                                                                \
		cudaError_t e_ = (x);                                                       \
		if (e_ != cudaSuccess) {                                                    \
			fprintf(stderr, "bench_attn: error: %s:%d: %s: %s\n", __FILE__, __LINE__, \
				#x, cudaGetErrorString(e_));                                \
			exit(1);                                                            \
		}                                                                           \
	} while (0)

static const int HEADS = 32, KV_HEADS = 8, HEAD_DIM = 128, WARMUP = 2;

struct shape {
	const char *name;
	int64_t total; /* tokens */
	int doc;       /* document length; total / doc documents */
	int heads, kv_heads;
	int split;     /* bp_attn_shape.bwd_split: 0 the kernels' choice */
};

static const shape SHAPES[] = {
	{"8K-1x8K", 8192, 8192, HEADS, KV_HEADS, 0},
	{"8K-4x2K", 8192, 2048, HEADS, KV_HEADS, 0},
	{"32K-1x32K", 32768, 32768, HEADS, KV_HEADS, 0},
	{"32K-4x8K", 32768, 8192, HEADS, KV_HEADS, 0},
	{"32K-16x2K", 32768, 2048, HEADS, KV_HEADS, 0},
	{"128K-1x128K", 131072, 131072, HEADS, KV_HEADS, 0},
	{"128K-16x8K", 131072, 8192, HEADS, KV_HEADS, 0},
	{"128K-64x2K", 131072, 2048, HEADS, KV_HEADS, 0},
	{"8K-1x8K-tp8", 8192, 8192, 4, 1, 0},
	{"8K-1x8K-tp8-unsplit", 8192, 8192, 4, 1, 1},
	{"32K-1x32K-tp8", 32768, 32768, 4, 1, 0},
	{"32K-1x32K-tp8-unsplit", 32768, 32768, 4, 1, 1},
};

/* The kernels' view of a shape: its documents one after another. */
static struct bp_attn_shape attn_shape(const shape &sh)
{
	struct bp_attn_shape s;
	memset(&s, 0, sizeof s);
	s.nseg = (int)(sh.total / sh.doc);
	s.heads = sh.heads;
	s.kv_heads = sh.kv_heads;
	s.bwd_split = sh.split;
	s.head_dim = HEAD_DIM;
	s.total_q = s.total_kv = sh.total;
	s.max_q = s.max_kv = sh.doc;
	s.scale = 1.0f / sqrtf((float)HEAD_DIM);
	return s;
}

/* Seeded pseudo-random bf16 in [-1.7, 1.7) (unit variance), from a hash of the index. */
__global__ void fill_kernel(uint16_t *p, int64_t n, uint32_t seed)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		uint32_t h = (uint32_t)i * 0x9e3779b9u ^ seed ^ (uint32_t)(i >> 32);
		h ^= h >> 16;
		h *= 0x85ebca6bu;
		h ^= h >> 13;
		h *= 0xc2b2ae35u;
		h ^= h >> 16;
		float x = ((float)(h & 0xffffff) / 16777216.0f - 0.5f) * 3.4641016f;
		uint32_t u;
		memcpy(&u, &x, 4);
		p[i] = (uint16_t)(u >> 16); /* truncation is fine for benchmark inputs */
	}
}

static void fill(void *p, int64_t n, uint32_t seed)
{
	fill_kernel<<<4096, 256>>>((uint16_t *)p, n, seed);
	CUDA_OK(cudaGetLastError());
}

static void die(const struct bp_error *err)
{
	fprintf(stderr, "bench_attn: error: %s\n", err->text);
	exit(1);
}

static double median(std::vector<float> v)
{
	std::sort(v.begin(), v.end());
	size_t n = v.size();
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
	int iters = 10;
	if (argc > 2 || (argc == 2 && (iters = atoi(argv[1])) < 1)) {
		fprintf(stderr, "usage: bench_attn [ITERS]\n");
		return 2;
	}
	int ndev = 0;
	cudaError_t e = cudaGetDeviceCount(&ndev);
	if (e != cudaSuccess || ndev == 0) {
		fprintf(stderr, "bench_attn: error: no CUDA device (%s)\n",
			e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
		return 1;
	}
	cudaDeviceProp prop;
	CUDA_OK(cudaGetDeviceProperties(&prop, 0));

	int64_t maxt = 0;
	for (const shape &sh : SHAPES)
		maxt = std::max(maxt, sh.total);
	const int64_t nq = maxt * HEADS * HEAD_DIM, nk = maxt * KV_HEADS * HEAD_DIM;
	/* The largest workspace of the shapes (a short launch's backward splits its key tiles
	 * and adds their dK, dV in the workspace: attn.h bwd_split). */
	size_t ws_bytes = 0;
	for (const shape &sh : SHAPES) {
		const struct bp_attn_shape s0 = attn_shape(sh);
		ws_bytes = std::max(ws_bytes, bp_attn_bwd_workspace(&s0));
	}

	void *q, *k, *v, *o, *dout, *dq, *dk, *dv, *ws, *lse, *cu;
	CUDA_OK(cudaMalloc(&q, nq * 2));
	CUDA_OK(cudaMalloc(&o, nq * 2));
	CUDA_OK(cudaMalloc(&dout, nq * 2));
	CUDA_OK(cudaMalloc(&dq, nq * 2));
	CUDA_OK(cudaMalloc(&k, nk * 2));
	CUDA_OK(cudaMalloc(&v, nk * 2));
	CUDA_OK(cudaMalloc(&dk, nk * 2));
	CUDA_OK(cudaMalloc(&dv, nk * 2));
	CUDA_OK(cudaMalloc(&lse, maxt * HEADS * 4));
	CUDA_OK(cudaMalloc(&ws, ws_bytes));
	CUDA_OK(cudaMalloc(&cu, (maxt + 1) * 4));
	fill(q, nq, 1);
	fill(k, nk, 2);
	fill(v, nk, 3);
	fill(dout, nq, 4);
	cudaStream_t st;
	CUDA_OK(cudaStreamCreate(&st));
	cudaEvent_t t0, t1;
	CUDA_OK(cudaEventCreate(&t0));
	CUDA_OK(cudaEventCreate(&t1));

	printf("bench_attn: %s, heads %d, kv_heads %d (tp8 shapes: 4, 1), head_dim %d, bf16, "
	       "causal; median of %d after %d warm-up\n",
	       prop.name, HEADS, KV_HEADS, HEAD_DIM, iters, WARMUP);
	printf("%-21s %8s %5s %10s %11s %10s %11s %5s\n", "shape", "tokens", "docs", "fwd ms",
	       "fwd TFLOP/s", "bwd ms", "bwd TFLOP/s", "split");
	std::vector<char> lines;
	struct bp_error err;
	err.text[0] = '\0';
	for (const shape &sh : SHAPES) {
		const int docs = (int)(sh.total / sh.doc);
		std::vector<int32_t> cu_h(docs + 1);
		for (int i = 0; i <= docs; i++)
			cu_h[i] = i * sh.doc;
		CUDA_OK(cudaMemcpy(cu, cu_h.data(), (docs + 1) * 4, cudaMemcpyHostToDevice));
		const struct bp_attn_shape s = attn_shape(sh);
		const int32_t *c = (const int32_t *)cu;
		double ms[2];
		for (int dir = 0; dir < 2; dir++) {
			std::vector<float> t;
			for (int it = 0; it < WARMUP + iters; it++) {
				CUDA_OK(cudaEventRecord(t0, st));
				int rc = dir == 0
						 ? bp_attn_fwd(&s, c, c, (const uint16_t *)q,
							       (const uint16_t *)k, (const uint16_t *)v,
							       (uint16_t *)o, (float *)lse, st, &err)
						 : bp_attn_bwd(&s, c, c, (const uint16_t *)q,
							       (const uint16_t *)k, (const uint16_t *)v,
							       (const uint16_t *)o, (const uint16_t *)dout,
							       (const float *)lse, (uint16_t *)dq,
							       (uint16_t *)dk, (uint16_t *)dv, ws, st, &err);
				if (rc != 0)
					die(&err);
				CUDA_OK(cudaEventRecord(t1, st));
				CUDA_OK(cudaEventSynchronize(t1));
				float x;
				CUDA_OK(cudaEventElapsedTime(&x, t0, t1));
				if (it >= WARMUP)
					t.push_back(x);
			}
			ms[dir] = median(t);
		}
		const double pairs = (double)docs * sh.doc * (sh.doc + 1.0) / 2.0;
		const double fwd_flops = 4.0 * HEAD_DIM * sh.heads * pairs, bwd_flops = 2.5 * fwd_flops;
		const double ft = fwd_flops / (ms[0] * 1e-3) / 1e12, bt = bwd_flops / (ms[1] * 1e-3) / 1e12;
		printf("%-21s %8lld %5d %10.3f %11.1f %10.3f %11.1f %5d\n", sh.name,
		       (long long)sh.total, docs, ms[0], ft, ms[1], bt, bp_attn_bwd_blocks(&s));
		char line[256];
		int n = snprintf(line, sizeof line,
				 "shape=%s tokens=%lld docs=%d fwd_ms=%.4f fwd_tflops=%.2f bwd_ms=%.4f "
				 "bwd_tflops=%.2f split=%d\n",
				 sh.name, (long long)sh.total, docs, ms[0], ft, ms[1], bt,
				 bp_attn_bwd_blocks(&s));
		lines.insert(lines.end(), line, line + n);
	}
	fwrite(lines.data(), 1, lines.size(), stdout);

	cudaFree(q);
	cudaFree(k);
	cudaFree(v);
	cudaFree(o);
	cudaFree(dout);
	cudaFree(dq);
	cudaFree(dk);
	cudaFree(dv);
	cudaFree(lse);
	cudaFree(ws);
	cudaFree(cu);
	cudaStreamDestroy(st);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "bench_attn: error: cannot write the output\n");
		return 1;
	}
	return 0;
}
