/* test_attention.cu: balexec's attention kernels (executor/attn.cu) against a float64 CPU
 * reference, on the GPU (label gpu; exit 77 without a device). Per layout: seeded bf16 inputs
 * around N(0, 1), bp_attn_fwd then bp_attn_bwd on a non-default stream, and the reference
 * O, lse, dQ, dK, dV from the same bf16 values; each tensor must have
 * max |gpu - ref| / max |ref| below 1e-2. Outputs start as NaN so that a row left unwritten,
 * or gradients accumulated instead of written, fail. Also checks that bad shapes (head_dim
 * 96, heads not a multiple of kv_heads) are rejected with -1 and a message, that the
 * backward gives the same gradients with its key tiles split over several blocks (their dK,
 * dV added in fp32) as with one block each (bwd_split 1), and that a
 * DistCA server's CA-tasks (query shards with their causal prefixes) reproduce the dense
 * kernel's rows and, summed, its dK and dV on the same document.
 * --small runs a few small layouts instead, that still cover several query and key tiles,
 * partial tiles, empty and one-token segments, context-parallel shards, GQA, both head
 * dimensions and a DistCA server: what the CPU emulation (tests/emu, label emu) can run on
 * every submission; the GPU run keeps the full set.
 * Exit status: 0 all passed, 1 a failure, 2 usage, 77 no CUDA device. */
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#define GPU_TEST_NAME "test_attention"
#include "gpu_util.h"
#include "attn.h"

static const double LIMIT = 1e-2;

struct layout {
	std::string name;
	int heads, kv_heads, d;
	std::vector<int> lq, lk; /* per segment */
	int split = 0;           /* bp_attn_shape.bwd_split: 0 the kernels' choice */
};

static int report(const layout &L, const char *tensor, double e)
{
	bool ok = e < LIMIT; /* false for NaN */
	printf("test_attention: %-14s h%d/%d d%-3d %-3s max rel err %.3e %s\n", L.name.c_str(),
	       L.heads, L.kv_heads, L.d, tensor, e, ok ? "ok" : "FAIL");
	return ok ? 0 : 1;
}

/* The float64 reference of attn.h's definition, straight from the formulas (no tiling). */
static void reference(const layout &L, const std::vector<int> &cu_q, const std::vector<int> &cu_kv,
		      const std::vector<double> &q, const std::vector<double> &k,
		      const std::vector<double> &v, const std::vector<double> &dout, double scale,
		      std::vector<double> &o, std::vector<double> &lse, std::vector<double> &dq,
		      std::vector<double> &dk, std::vector<double> &dv)
{
	const int H = L.heads, KH = L.kv_heads, D = L.d, group = H / KH;
	const int64_t total_q = cu_q.back();
	std::vector<double> p, dp;
	for (size_t i = 0; i + 1 < cu_q.size(); i++) {
		const int64_t qs = cu_q[i], ks = cu_kv[i];
		const int lq = cu_q[i + 1] - cu_q[i], lk = cu_kv[i + 1] - cu_kv[i];
		const int off = lk - lq;
		for (int h = 0; h < H; h++) {
			const int g = h / group;
			for (int r = 0; r < lq; r++) {
				const int nvis = r + off + 1;
				const double *qr = &q[((qs + r) * H + h) * D];
				const double *dor = &dout[((qs + r) * H + h) * D];
				p.assign(nvis, 0);
				dp.assign(nvis, 0);
				double m = -INFINITY;
				for (int c = 0; c < nvis; c++) {
					const double *kc = &k[((ks + c) * KH + g) * D];
					double s = 0;
					for (int e = 0; e < D; e++)
						s += qr[e] * kc[e];
					p[c] = s * scale;
					m = fmax(m, p[c]);
				}
				double l = 0;
				for (int c = 0; c < nvis; c++) {
					p[c] = exp(p[c] - m);
					l += p[c];
				}
				lse[(int64_t)h * total_q + qs + r] = m + log(l);
				double *orow = &o[((qs + r) * H + h) * D];
				double dsum = 0;
				for (int c = 0; c < nvis; c++) {
					p[c] /= l;
					const double *vc = &v[((ks + c) * KH + g) * D];
					double x = 0;
					for (int e = 0; e < D; e++) {
						orow[e] += p[c] * vc[e];
						x += dor[e] * vc[e];
					}
					dp[c] = x;
					dsum += p[c] * x;
				}
				double *dqr = &dq[((qs + r) * H + h) * D];
				for (int c = 0; c < nvis; c++) {
					const double ds = p[c] * (dp[c] - dsum);
					const double *kc = &k[((ks + c) * KH + g) * D];
					double *dkc = &dk[((ks + c) * KH + g) * D];
					double *dvc = &dv[((ks + c) * KH + g) * D];
					for (int e = 0; e < D; e++) {
						dqr[e] += scale * ds * kc[e];
						dkc[e] += scale * ds * qr[e];
						dvc[e] += p[c] * dor[e];
					}
				}
			}
		}
	}
}

static void fill(std::vector<uint16_t> &h, std::vector<double> &d, size_t n, uint64_t *rng)
{
	h.resize(n);
	d.resize(n);
	for (size_t i = 0; i < n; i++) {
		h[i] = to_bf16((float)normal(rng));
		d[i] = from_bf16(h[i]);
	}
}

static std::vector<double> from_device_bf16(const void *p, size_t n)
{
	std::vector<uint16_t> h(n);
	CUDA_OK(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
	std::vector<double> d(n);
	for (size_t i = 0; i < n; i++)
		d[i] = from_bf16(h[i]);
	return d;
}

/* What one kernel call returns, on the host. */
struct outputs {
	std::vector<double> o, lse, dq, dk, dv;
};

/* bp_attn_fwd then bp_attn_bwd on a non-default stream over the segments (cu_q, cu_kv) with
 * the given bf16 inputs; outputs start as NaN. Returns 0, or 1 (printed) when a call fails. */
static int kernel(const char *name, int heads, int kv_heads, int d, int split,
		  const std::vector<int> &cu_q,
		  const std::vector<int> &cu_kv, const std::vector<uint16_t> &hq,
		  const std::vector<uint16_t> &hk, const std::vector<uint16_t> &hv,
		  const std::vector<uint16_t> &hdo, outputs &out)
{
	const int nseg = (int)cu_q.size() - 1;
	int max_q = 0, max_kv = 0;
	for (int i = 0; i < nseg; i++) {
		max_q = cu_q[i + 1] - cu_q[i] > max_q ? cu_q[i + 1] - cu_q[i] : max_q;
		max_kv = cu_kv[i + 1] - cu_kv[i] > max_kv ? cu_kv[i + 1] - cu_kv[i] : max_kv;
	}
	const int64_t tq = cu_q[nseg], tk = cu_kv[nseg];
	const size_t nq = (size_t)tq * heads * d, nk = (size_t)tk * kv_heads * d;

	struct bp_attn_shape s;
	memset(&s, 0, sizeof s);
	s.bwd_split = split;
	s.nseg = nseg;
	s.heads = heads;
	s.kv_heads = kv_heads;
	s.head_dim = d;
	s.total_q = tq;
	s.total_kv = tk;
	s.max_q = max_q;
	s.max_kv = max_kv;
	s.scale = (float)(1.0 / sqrt((double)d));
	const size_t ws_bytes = bp_attn_bwd_workspace(&s);

	buf dcq((nseg + 1) * 4), dckv((nseg + 1) * 4), dq_in(nq * 2), dk_in(nk * 2), dv_in(nk * 2),
		ddo(nq * 2), dO(nq * 2), dlse((size_t)tq * heads * 4), ddq(nq * 2), ddk(nk * 2),
		ddv(nk * 2), dws(ws_bytes);
	CUDA_OK(cudaMemcpy(dcq.p, cu_q.data(), (nseg + 1) * 4, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(dckv.p, cu_kv.data(), (nseg + 1) * 4, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(dq_in.p, hq.data(), nq * 2, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(dk_in.p, hk.data(), nk * 2, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(dv_in.p, hv.data(), nk * 2, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(ddo.p, hdo.data(), nq * 2, cudaMemcpyHostToDevice));
	/* All ones bits: NaN in bf16 and fp32. */
	CUDA_OK(cudaMemset(dO.p, 0xff, nq * 2));
	CUDA_OK(cudaMemset(dlse.p, 0xff, (size_t)tq * heads * 4));
	CUDA_OK(cudaMemset(ddq.p, 0xff, nq * 2));
	CUDA_OK(cudaMemset(ddk.p, 0xff, nk * 2));
	CUDA_OK(cudaMemset(ddv.p, 0xff, nk * 2));
	CUDA_OK(cudaMemset(dws.p, 0xff, ws_bytes));

	cudaStream_t st;
	CUDA_OK(cudaStreamCreate(&st));
	struct bp_error err;
	err.text[0] = '\0';
	const int32_t *cq = (const int32_t *)dcq.p, *ckv = (const int32_t *)dckv.p;
	if (bp_attn_fwd(&s, cq, ckv, (const uint16_t *)dq_in.p, (const uint16_t *)dk_in.p,
			(const uint16_t *)dv_in.p, (uint16_t *)dO.p, (float *)dlse.p, st, &err) != 0 ||
	    bp_attn_bwd(&s, cq, ckv, (const uint16_t *)dq_in.p, (const uint16_t *)dk_in.p,
			(const uint16_t *)dv_in.p, (const uint16_t *)dO.p, (const uint16_t *)ddo.p,
			(const float *)dlse.p, (uint16_t *)ddq.p, (uint16_t *)ddk.p,
			(uint16_t *)ddv.p, dws.p, st, &err) != 0) {
		printf("test_attention: %-14s FAIL: %s\n", name, err.text);
		cudaStreamDestroy(st);
		return 1;
	}
	CUDA_OK(cudaStreamSynchronize(st));
	CUDA_OK(cudaGetLastError());
	CUDA_OK(cudaStreamDestroy(st));

	out.o = from_device_bf16(dO.p, nq);
	out.dq = from_device_bf16(ddq.p, nq);
	out.dk = from_device_bf16(ddk.p, nk);
	out.dv = from_device_bf16(ddv.p, nk);
	std::vector<float> lsef((size_t)tq * heads);
	CUDA_OK(cudaMemcpy(lsef.data(), dlse.p, lsef.size() * 4, cudaMemcpyDeviceToHost));
	out.lse.assign(lsef.begin(), lsef.end());
	return 0;
}

static int run_layout(const layout &L, uint64_t seed)
{
	const int nseg = (int)L.lq.size();
	std::vector<int> cu_q(nseg + 1, 0), cu_kv(nseg + 1, 0);
	for (int i = 0; i < nseg; i++) {
		cu_q[i + 1] = cu_q[i] + L.lq[i];
		cu_kv[i + 1] = cu_kv[i] + L.lk[i];
	}
	const int64_t tq = cu_q[nseg], tk = cu_kv[nseg];
	const size_t nq = (size_t)tq * L.heads * L.d, nk = (size_t)tk * L.kv_heads * L.d;

	uint64_t rng = seed;
	std::vector<uint16_t> hq, hk, hv, hdo;
	std::vector<double> q, k, v, dout;
	fill(hq, q, nq, &rng);
	fill(hk, k, nk, &rng);
	fill(hv, v, nk, &rng);
	fill(hdo, dout, nq, &rng);

	outputs g;
	if (kernel(L.name.c_str(), L.heads, L.kv_heads, L.d, L.split, cu_q, cu_kv, hq, hk, hv,
		   hdo, g))
		return 1;
	std::vector<double> o(nq, 0), lse((size_t)tq * L.heads, 0), dq(nq, 0), dk(nk, 0),
		dv(nk, 0);
	reference(L, cu_q, cu_kv, q, k, v, dout, (double)(float)(1.0 / sqrt((double)L.d)), o, lse,
		  dq, dk, dv);
	int bad = 0;
	bad += report(L, "O", rel_err(g.o, o));
	bad += report(L, "lse", rel_err(g.lse, lse));
	bad += report(L, "dQ", rel_err(g.dq, dq));
	bad += report(L, "dK", rel_err(g.dk, dk));
	bad += report(L, "dV", rel_err(g.dv, dv));
	return bad;
}

/* A DistCA attention server (issue 13 item 9; DistCA Sec. 4.1): the CA-tasks of one document,
 * each a query shard [cut[i], cut[i + 1]) with its whole causal prefix [0, cut[i + 1]) as keys,
 * run as the segments of one kernel call (as backend_cuda.c's cuda_attn_dense does for a
 * server), must give the rows the dense kernel gives on the whole document: O, lse and dQ row
 * by row, and dK, dV once every task's prefix gradient is added up (the reduction the
 * all-to-all back to the owners performs). */
static int run_ca_tasks(const char *name, int heads, int kv_heads, int d, int len,
			const std::vector<int> &cut, uint64_t seed)
{
	const size_t qrow = (size_t)heads * d, krow = (size_t)kv_heads * d;
	uint64_t rng = seed;
	std::vector<uint16_t> hq, hk, hv, hdo;
	std::vector<double> q, k, v, dout;
	fill(hq, q, len * qrow, &rng);
	fill(hk, k, len * krow, &rng);
	fill(hv, v, len * krow, &rng);
	fill(hdo, dout, len * qrow, &rng);
	outputs whole, tasks;
	if (kernel(name, heads, kv_heads, d, 0, {0, len}, {0, len}, hq, hk, hv, hdo, whole))
		return 1;

	/* The server's inputs: the shards' queries (and output gradients) in task order, each
	 * task's prefix keys and values copied out, as the all-to-all delivers them. */
	const int ntask = (int)cut.size() - 1;
	std::vector<int> cu_q(ntask + 1, 0), cu_kv(ntask + 1, 0);
	std::vector<uint16_t> tq, tk, tv, tdo;
	for (int i = 0; i < ntask; i++) {
		cu_q[i + 1] = cu_q[i] + cut[i + 1] - cut[i];
		cu_kv[i + 1] = cu_kv[i] + cut[i + 1];
		tq.insert(tq.end(), hq.begin() + cut[i] * qrow, hq.begin() + cut[i + 1] * qrow);
		tdo.insert(tdo.end(), hdo.begin() + cut[i] * qrow, hdo.begin() + cut[i + 1] * qrow);
		tk.insert(tk.end(), hk.begin(), hk.begin() + cut[i + 1] * krow);
		tv.insert(tv.end(), hv.begin(), hv.begin() + cut[i + 1] * krow);
	}
	if (kernel(name, heads, kv_heads, d, 0, cu_q, cu_kv, tq, tk, tv, tdo, tasks))
		return 1;

	/* The shards tile the document in order, so the task rows are the document's rows. */
	std::vector<double> dk(len * krow, 0), dv(len * krow, 0);
	for (int i = 0; i < ntask; i++)
		for (size_t j = 0; j < cut[i + 1] * krow; j++) {
			dk[j] += tasks.dk[cu_kv[i] * krow + j];
			dv[j] += tasks.dv[cu_kv[i] * krow + j];
		}
	layout L{name, heads, kv_heads, d, {}, {}};
	int bad = 0;
	bad += report(L, "O", rel_err(tasks.o, whole.o));
	bad += report(L, "lse", rel_err(tasks.lse, whole.lse));
	bad += report(L, "dQ", rel_err(tasks.dq, whole.dq));
	bad += report(L, "dK", rel_err(dk, whole.dk));
	bad += report(L, "dV", rel_err(dv, whole.dv));
	return bad;
}

/* A bad shape must give -1 and a message naming the problem, before touching any pointer. */
static int expect_reject(const char *label, int heads, int kv_heads, int head_dim,
			 const char *needle, int split = 0)
{
	struct bp_attn_shape s;
	memset(&s, 0, sizeof s);
	s.bwd_split = split;
	s.nseg = 1;
	s.heads = heads;
	s.kv_heads = kv_heads;
	s.head_dim = head_dim;
	s.total_q = s.total_kv = 16;
	s.max_q = s.max_kv = 16;
	s.scale = 0.125f;
	int bad = 0;
	for (int dir = 0; dir < 2; dir++) {
		struct bp_error err;
		err.text[0] = '\0';
		int rc = dir == 0 ? bp_attn_fwd(&s, nullptr, nullptr, nullptr, nullptr, nullptr,
						nullptr, nullptr, nullptr, &err)
				  : bp_attn_bwd(&s, nullptr, nullptr, nullptr, nullptr, nullptr,
						nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
						nullptr, nullptr, &err);
		bool ok = rc == -1 && strstr(err.text, needle) != nullptr;
		printf("test_attention: %s (%s) rejected: rc %d, \"%s\" %s\n", label,
		       dir == 0 ? "fwd" : "bwd", rc, err.text, ok ? "ok" : "FAIL");
		bad += !ok;
	}
	return bad;
}

int main(int argc, char **argv)
{
	bool small = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--small")) {
			small = true;
		} else {
			fprintf(stderr, "usage: test_attention [--small]\n");
			return 2;
		}
	}
	int ndev = 0;
	cudaError_t e = cudaGetDeviceCount(&ndev);
	if (e != cudaSuccess || ndev == 0) {
		printf("test_attention: SKIP: no CUDA device (%s)\n",
		       e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
		return 77;
	}

	std::vector<layout> layouts;
	if (small) {
		/* Three query tiles (the last partial) over three key tiles, GQA; segments of
		 * 1, 64, 0, 70 and 17 tokens (spare padded tiles, an empty segment, a tile and a
		 * bit); context-parallel shards at head_dim 128, one with no query row. */
		layouts.push_back({"small-tiles", 2, 1, 64, {150}, {150}});
		layouts.push_back({"small-varlen", 2, 2, 64, {1, 64, 0, 70, 17}, {1, 64, 0, 70, 17}});
		layouts.push_back({"small-cp-d128", 2, 1, 128, {40, 0, 65}, {100, 30, 130}});
		/* The backward both ways: dK, dV written by one block per key tile (split 1)
		 * and added up over 3 shares of the tile's query tiles (the kernels' choice
		 * above is a split too: these launches are far below a GPU's worth). */
		layouts.push_back({"small-gqa-unsplit", 4, 1, 64, {150, 0, 1}, {150, 0, 1}, 1});
		layouts.push_back({"small-cp-split3", 2, 1, 128, {40, 0, 65}, {100, 30, 130}, 3});
	} else {
		layouts.push_back({"one-doc-1000", 2, 2, 128, {1000}, {1000}});
		layout L{"short-37", 4, 2, 64, {}, {}};
		uint64_t r = 37;
		for (int i = 0; i < 37; i++) {
			int n = 1 + (int)(splitmix(&r) % 80);
			L.lq.push_back(n);
			L.lk.push_back(n);
		}
		layouts.push_back(L);
		layouts.push_back({"mixed", 2, 1, 128, {1, 127, 128, 0, 129, 513, 64, 65},
				   {1, 127, 128, 0, 129, 513, 64, 65}});
		/* Context-parallel shards: q_len < kv_len, incl. q_len 0 with keys (dK = dV = 0). */
		layouts.push_back({"cp-shard", 2, 2, 64, {100, 64, 1, 0, 257, 63, 33},
				   {300, 192, 77, 50, 1000, 63, 40}});
		layouts.push_back({"cp-shard-d128", 4, 4, 128, {130, 31, 64}, {500, 31, 1024}});
		layouts.push_back({"gqa-8-2", 8, 2, 128, {200, 333}, {200, 333}});
		layouts.push_back({"gqa-d64", 8, 2, 64, {70, 190}, {70, 250}});
		layouts.push_back({"one-doc-700", 2, 1, 64, {700}, {700}});
		layouts.push_back({"one-doc-700-unsplit", 2, 1, 64, {700}, {700}, 1});
		layouts.push_back({"cp-shard-unsplit", 2, 2, 64, {100, 64, 1, 0, 257, 63, 33},
				   {300, 192, 77, 50, 1000, 63, 40}, 1});
	}

	int bad = 0;
	uint64_t seed = 20240601;
	for (const layout &L : layouts)
		bad += run_layout(L, seed++);
	/* DistCA servers: shards at 128-token granules and odd cuts, GQA, a 1-token shard. */
	if (small) {
		bad += run_ca_tasks("small-ca", 2, 1, 64, 200, {0, 1, 64, 130, 200}, seed++);
	} else {
		bad += run_ca_tasks("ca-server", 4, 2, 128, 1500, {0, 128, 512, 1024, 1500}, seed++);
		bad += run_ca_tasks("ca-server-d64", 8, 2, 64, 777, {0, 1, 300, 301, 640, 777},
				    seed++);
	}
	bad += expect_reject("head_dim 96", 4, 2, 96, "head_dim 96");
	bad += expect_reject("heads 6, kv_heads 4", 6, 4, 64, "not a multiple of kv_heads");
	bad += expect_reject("negative head_dim", 4, 2, -64, "negative size");
	bad += expect_reject("bwd_split 65", 4, 2, 64, "bwd_split 65 outside 0..64", 65);

	printf("test_attention: %s\n", bad ? "FAILED" : "all passed");
	if (fflush(stdout) != 0 || ferror(stdout))
		return 1;
	return bad ? 1 : 0;
}
