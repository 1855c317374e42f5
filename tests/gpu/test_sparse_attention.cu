/* test_sparse_attention.cu: balexec's block-sparse (MoBA top-k) attention kernels
 * (executor/attn_sparse.cu) against the float64 CPU reference (executor/attn_sparse_ref.h)
 * and against the dense kernel (executor/attn.cu), on the GPU (label gpu; exit 77 without a
 * device). executor/README.md "Block-sparse attention kernels".
 *
 * Per layout: seeded bf16 inputs around N(0, 1); outputs, lse, gradients and the workspace
 * start as NaN (all ones bits) so that anything left unwritten fails; bp_sparse_fwd then
 * bp_sparse_bwd on a non-default stream. Then:
 * - the selection the kernel wrote equals the reference's (tile-level MoBA gate, top k - 1
 *   plus the own block, ties to the lower index), or differs only where the float64 scores
 *   are within 2e-3 (relative) of a tie: fp32 against float64 may order near ties apart;
 * - O, lse, dQ, dK, dV equal the reference's under the kernel's own selection,
 *   max |gpu - ref| / max |ref| < 1e-2;
 * - the tile-visit counter equals the number of 64-key tiles the lists name (the own block
 *   trimmed at each tile's causal limit);
 * - where every document is dense under its budget, the dense kernel gives the same O and
 *   gradients (< 1e-2).
 * With every block's keys equal (all scores tie) the lists must be exactly the reference's
 * (the lowest k - 1 indices). Also, before looking for a device (so without one too): bad
 * shapes are refused with -1 and a message, and the workspace size is as counted by hand. With --time, a timing table of the
 * forward (selection included) and the backward over (x, k), medians of 10 runs after 3
 * warm-ups, next to the dense kernel (correctness first, timing apart). --quick runs the
 * first five layouts only (for compute-sanitizer). --small runs a few small layouts instead
 * that still select among several blocks (sorted, per-document budgets, exact ties, a dense
 * document checked against the dense kernel) at both head dimensions: what the CPU
 * emulation (tests/emu, label emu) can run on every submission.
 * Exit status: 0 all passed, 1 a failure, 2 usage, 77 no CUDA device. */
#include <cuda_runtime.h>

#include <algorithm>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#define GPU_TEST_NAME "test_sparse_attention"
#include "gpu_util.h"
#include "attn.h"
#include "attn_sparse.h"
#include "attn_sparse_ref.h"

static const double LIMIT = 1e-2;
static const double TIE = 2e-3;

struct layout {
	std::string name;
	int heads, kv_heads, d, block, k;
	std::vector<int> lens;
	std::vector<int> kseg; /* empty: k for every document */
	bool ties = false;     /* every block's keys a copy of block 0's: all scores tie */
};

static int report(const layout &L, const char *what, double e)
{
	bool ok = e < LIMIT;
	printf("test_sparse_attention: %-16s h%d/%d d%-3d B%-3d %-10s max rel err %.3e %s\n",
	       L.name.c_str(), L.heads, L.kv_heads, L.d, L.block, what, e, ok ? "ok" : "FAIL");
	return ok ? 0 : 1;
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

static std::vector<double> bf16_from_device(const void *p, size_t n)
{
	std::vector<uint16_t> h(n);
	CUDA_OK(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
	std::vector<double> d(n);
	for (size_t i = 0; i < n; i++)
		d[i] = from_bf16(h[i]);
	return d;
}

static std::vector<double> f32_from_device(const void *p, size_t n)
{
	std::vector<float> h(n);
	CUDA_OK(cudaMemcpy(h.data(), p, n * 4, cudaMemcpyDeviceToHost));
	return std::vector<double>(h.begin(), h.end());
}

/* Whether list `got` (ascending, own block last) is a top-(keep) of the float64 scores up to
 * near ties: every kept earlier block scores at least every dropped one minus TIE. */
static bool near_top(const std::vector<double> &sc, int own, const int32_t *got, int n)
{
	double mx = 1;
	for (int b = 0; b < own; b++)
		mx = fmax(mx, fabs(sc[b]));
	std::vector<char> in(own + 1, 0);
	for (int j = 0; j + 1 < n; j++) {
		if (got[j] < 0 || got[j] >= own)
			return false;
		in[got[j]] = 1;
	}
	double lo = INFINITY, hi = -INFINITY;
	for (int b = 0; b < own; b++) {
		if (in[b])
			lo = fmin(lo, sc[b]);
		else
			hi = fmax(hi, sc[b]);
	}
	return !(lo < hi - TIE * mx);
}

static int run_layout(const layout &L, uint64_t seed)
{
	const int nseg = (int)L.lens.size();
	std::vector<int32_t> cu(nseg + 1, 0);
	int max_len = 0, max_k = L.k;
	for (int i = 0; i < nseg; i++) {
		cu[i + 1] = cu[i] + L.lens[i];
		max_len = std::max(max_len, L.lens[i]);
		if (!L.kseg.empty())
			max_k = std::max(max_k, L.kseg[i]);
	}
	const int64_t T = cu[nseg];
	const size_t nq = (size_t)T * L.heads * L.d, nk = (size_t)T * L.kv_heads * L.d;
	const size_t nl = (size_t)T * L.heads;
	uint64_t rng = seed;
	std::vector<uint16_t> hq, hk, hv, hdo;
	std::vector<double> q, k, v, dout;
	fill(hq, q, nq, &rng);
	fill(hk, k, nk, &rng);
	fill(hv, v, nk, &rng);
	fill(hdo, dout, nq, &rng);
	if (L.ties) { /* equal block means, so equal scores in fp32 and float64 alike */
		const size_t row = (size_t)L.kv_heads * L.d;
		for (int i = 0; i < nseg; i++)
			for (int r = L.block; r < L.lens[i]; r++) {
				const size_t to = ((size_t)cu[i] + r) * row;
				const size_t from = ((size_t)cu[i] + r % L.block) * row;
				memcpy(&hk[to], &hk[from], row * sizeof(hk[0]));
				memcpy(&k[to], &k[from], row * sizeof(k[0]));
			}
	}

	struct bp_sparse_shape s;
	memset(&s, 0, sizeof s);
	s.nseg = nseg;
	s.heads = L.heads;
	s.kv_heads = L.kv_heads;
	s.head_dim = L.d;
	s.total = T;
	s.max_len = max_len;
	s.block = L.block;
	s.k = L.k;
	s.max_k = max_k;
	s.scale = (float)(1.0 / sqrt((double)L.d));
	const size_t wsb = bp_sparse_workspace(&s);
	if (!wsb) {
		printf("test_sparse_attention: %-16s FAIL: no workspace size\n", L.name.c_str());
		return 1;
	}
	buf dcu((nseg + 1) * 4), dks(nseg * 4 + 4), dq_in(nq * 2), dk_in(nk * 2), dv_in(nk * 2),
		ddo(nq * 2), dO(nq * 2), dlse(nl * 4), ddq(nq * 2), ddk(nk * 2), ddv(nk * 2),
		dws(wsb), dvis(8);
	CUDA_OK(cudaMemcpy(dcu.p, cu.data(), (nseg + 1) * 4, cudaMemcpyHostToDevice));
	if (!L.kseg.empty())
		CUDA_OK(cudaMemcpy(dks.p, L.kseg.data(), nseg * 4, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(dq_in.p, hq.data(), nq * 2, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(dk_in.p, hk.data(), nk * 2, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(dv_in.p, hv.data(), nk * 2, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(ddo.p, hdo.data(), nq * 2, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemset(dO.p, 0xff, nq * 2));
	CUDA_OK(cudaMemset(dlse.p, 0xff, nl * 4));
	CUDA_OK(cudaMemset(ddq.p, 0xff, nq * 2));
	CUDA_OK(cudaMemset(ddk.p, 0xff, nk * 2));
	CUDA_OK(cudaMemset(ddv.p, 0xff, nk * 2));
	CUDA_OK(cudaMemset(dws.p, 0xff, wsb));
	CUDA_OK(cudaMemset(dvis.p, 0, 8));
	s.visits = (unsigned long long *)dvis.p;

	cudaStream_t st;
	CUDA_OK(cudaStreamCreate(&st));
	struct bp_error err;
	err.text[0] = '\0';
	const int32_t *dc = (const int32_t *)dcu.p;
	const int32_t *dk_seg = L.kseg.empty() ? nullptr : (const int32_t *)dks.p;
	if (bp_sparse_fwd(&s, dc, dk_seg, (const uint16_t *)dq_in.p, (const uint16_t *)dk_in.p,
			  (const uint16_t *)dv_in.p, (uint16_t *)dO.p, (float *)dlse.p, dws.p, st,
			  &err) != 0 ||
	    bp_sparse_bwd(&s, dc, (const uint16_t *)dq_in.p, (const uint16_t *)dk_in.p,
			  (const uint16_t *)dv_in.p, (const uint16_t *)dO.p, (const uint16_t *)ddo.p,
			  (const float *)dlse.p, (uint16_t *)ddq.p, (uint16_t *)ddk.p,
			  (uint16_t *)ddv.p, dws.p, st, &err) != 0) {
		printf("test_sparse_attention: %-16s FAIL: %s\n", L.name.c_str(), err.text);
		cudaStreamDestroy(st);
		return 1;
	}
	CUDA_OK(cudaStreamSynchronize(st));
	CUDA_OK(cudaGetLastError());

	/* The kernel's lists. */
	struct bp_sparse_lists li;
	if (bp_sparse_lists(&s, dws.p, &li, &err) != 0) {
		printf("test_sparse_attention: %-16s FAIL: %s\n", L.name.c_str(), err.text);
		return 1;
	}
	std::vector<int32_t> gcount((size_t)li.ntiles * L.heads),
		gblocks((size_t)li.ntiles * L.heads * li.cap);
	CUDA_OK(cudaMemcpy(gcount.data(), li.count, gcount.size() * 4, cudaMemcpyDeviceToHost));
	CUDA_OK(cudaMemcpy(gblocks.data(), li.blocks, gblocks.size() * 4, cudaMemcpyDeviceToHost));
	unsigned long long visits = 0;
	CUDA_OK(cudaMemcpy(&visits, dvis.p, 8, cudaMemcpyDeviceToHost));

	/* The reference's selection, and the kernel's as a reference selection. */
	struct bp_sparse_ref_shape rs;
	memset(&rs, 0, sizeof rs);
	rs.nseg = nseg;
	rs.cu = cu.data();
	rs.heads = L.heads;
	rs.kv_heads = L.kv_heads;
	rs.head_dim = L.d;
	rs.block = L.block;
	rs.qtile = 64;
	rs.k_seg = L.kseg.empty() ? nullptr : L.kseg.data();
	rs.k = L.k;
	rs.scale = (double)s.scale;
	struct bp_sparse_sel ref, mine;
	bp_sparse_sel_init(&ref);
	bp_sparse_sel_init(&mine);
	int bad = 0;
	if (bp_sparse_ref_select(&rs, q.data(), k.data(), &ref, &err) != 0) {
		printf("test_sparse_attention: %-16s FAIL: %s\n", L.name.c_str(), err.text);
		return 1;
	}
	mine.ntiles = ref.ntiles;
	mine.heads = L.heads;
	mine.row_ptr = (int64_t *)calloc((size_t)(ref.ntiles * L.heads + 1), sizeof(int64_t));
	mine.blocks = (int32_t *)calloc((size_t)(ref.ntiles * L.heads * li.cap + 1), 4);
	mine.tile_seg = (int32_t *)calloc((size_t)ref.ntiles + 1, 4);
	mine.tile_row0 = (int32_t *)calloc((size_t)ref.ntiles + 1, 4);
	int64_t same = 0, ties = 0, wrong = 0;
	unsigned long long want_visits = 0;
	std::vector<double> sc(max_len / L.block + 2);
	int64_t at = 0;
	for (int64_t t = 0; t < ref.ntiles; t++) {
		const int seg = ref.tile_seg[t], row0 = ref.tile_row0[t];
		const int len = L.lens[seg], own = row0 / L.block;
		const int64_t gt = cu[seg] / 64 + seg + row0 / 64; /* the kernel's padded tile */
		mine.tile_seg[t] = seg;
		mine.tile_row0[t] = row0;
		for (int h = 0; h < L.heads; h++) {
			const int64_t r = t * L.heads + h;
			const int n = gcount[gt * L.heads + h];
			const int32_t *got = &gblocks[(gt * L.heads + h) * li.cap];
			const int nref = (int)(ref.row_ptr[r + 1] - ref.row_ptr[r]);
			bool ok = n == nref && n >= 1 && n <= li.cap && got[n - 1] == own;
			for (int j = 1; ok && j < n; j++)
				ok = got[j] > got[j - 1];
			if (ok && memcmp(got, ref.blocks + ref.row_ptr[r], (size_t)n * 4) == 0) {
				same++;
			} else if (ok) {
				int ns = 0;
				bp_sparse_ref_scores(&rs, q.data(), k.data(), t, h, sc.data(), &ns, &err);
				if (near_top(sc, own, got, n))
					ties++;
				else
					wrong++, ok = false;
			} else {
				wrong++;
			}
			if (!ok) { /* keep the reference's list so the numbers below still compare */
				memcpy(mine.blocks + at, ref.blocks + ref.row_ptr[r], (size_t)nref * 4);
				at += nref;
			} else {
				memcpy(mine.blocks + at, got, (size_t)n * 4);
				at += n;
				for (int j = 0; j < n; j++) {
					const int b = got[j];
					const int end = b == own ? std::min(row0 + 64, len)
								 : std::min((b + 1) * L.block, len);
					want_visits += (unsigned long long)((end - b * L.block + 63) / 64);
				}
			}
			mine.row_ptr[r + 1] = at;
		}
	}
	printf("test_sparse_attention: %-16s selection: %lld lists equal, %lld near ties, %lld "
	       "wrong %s\n", L.name.c_str(), (long long)same, (long long)ties, (long long)wrong,
	       wrong ? "FAIL" : "ok");
	bad += wrong != 0;
	if (L.ties && ties) { /* exact ties must break to the lower index, as the reference */
		printf("test_sparse_attention: %-16s FAIL: exact ties broken differently\n",
		       L.name.c_str());
		bad++;
	}
	const bool vis_ok = wrong || visits == want_visits;
	printf("test_sparse_attention: %-16s tile visits %llu, lists name %llu %s\n",
	       L.name.c_str(), visits, want_visits, vis_ok ? "ok" : "FAIL");
	bad += !vis_ok;

	std::vector<double> go = bf16_from_device(dO.p, nq), gdq = bf16_from_device(ddq.p, nq),
			    gdk = bf16_from_device(ddk.p, nk), gdv = bf16_from_device(ddv.p, nk),
			    glse = f32_from_device(dlse.p, nl);
	std::vector<double> o(nq), lse(nl), dq(nq), dk(nk), dv(nk);
	if (bp_sparse_ref_fwd(&rs, &mine, q.data(), k.data(), v.data(), o.data(), lse.data(),
			      &err) != 0 ||
	    bp_sparse_ref_bwd(&rs, &mine, q.data(), k.data(), v.data(), o.data(), lse.data(),
			      dout.data(), dq.data(), dk.data(), dv.data(), &err) != 0) {
		printf("test_sparse_attention: %-16s FAIL: %s\n", L.name.c_str(), err.text);
		bad++;
	} else {
		bad += report(L, "O", rel_err(go, o));
		bad += report(L, "lse", rel_err(glse, lse));
		bad += report(L, "dQ", rel_err(gdq, dq));
		bad += report(L, "dK", rel_err(gdk, dk));
		bad += report(L, "dV", rel_err(gdv, dv));
	}

	/* Dense under every budget: the dense kernel must agree. */
	bool dense = true;
	for (int i = 0; i < nseg; i++) {
		const int kk = L.kseg.empty() ? L.k : L.kseg[i];
		dense = dense && kk >= (L.lens[i] + L.block - 1) / L.block;
	}
	if (dense) {
		struct bp_attn_shape as;
		memset(&as, 0, sizeof as);
		as.nseg = nseg;
		as.heads = L.heads;
		as.kv_heads = L.kv_heads;
		as.head_dim = L.d;
		as.total_q = as.total_kv = T;
		as.max_q = as.max_kv = max_len;
		as.scale = s.scale;
		buf eO(nq * 2), dls(nl * 4), edq(nq * 2), edk(nk * 2), edv(nk * 2),
			ews(bp_attn_bwd_workspace(&as));
		if (bp_attn_fwd(&as, dc, dc, (const uint16_t *)dq_in.p, (const uint16_t *)dk_in.p,
				(const uint16_t *)dv_in.p, (uint16_t *)eO.p, (float *)dls.p, st,
				&err) != 0 ||
		    bp_attn_bwd(&as, dc, dc, (const uint16_t *)dq_in.p, (const uint16_t *)dk_in.p,
				(const uint16_t *)dv_in.p, (const uint16_t *)eO.p,
				(const uint16_t *)ddo.p, (const float *)dls.p, (uint16_t *)edq.p,
				(uint16_t *)edk.p, (uint16_t *)edv.p, ews.p, st, &err) != 0) {
			printf("test_sparse_attention: %-16s FAIL: dense: %s\n", L.name.c_str(),
			       err.text);
			bad++;
		} else {
			CUDA_OK(cudaStreamSynchronize(st));
			bad += report(L, "O=dense", rel_err(go, bf16_from_device(eO.p, nq)));
			bad += report(L, "dQ=dense", rel_err(gdq, bf16_from_device(edq.p, nq)));
			bad += report(L, "dK=dense", rel_err(gdk, bf16_from_device(edk.p, nk)));
			bad += report(L, "dV=dense", rel_err(gdv, bf16_from_device(edv.p, nk)));
		}
	}
	CUDA_OK(cudaStreamDestroy(st));
	bp_sparse_sel_release(&ref);
	bp_sparse_sel_release(&mine);
	return bad;
}

static int expect_reject(const char *label, int head_dim, int block, int k, const char *needle)
{
	struct bp_sparse_shape s;
	memset(&s, 0, sizeof s);
	s.nseg = 1;
	s.heads = 4;
	s.kv_heads = 2;
	s.head_dim = head_dim;
	s.total = s.max_len = 256;
	s.block = block;
	s.k = k;
	s.scale = 0.125f;
	struct bp_error err;
	err.text[0] = '\0';
	int rc = bp_sparse_fwd(&s, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
			       nullptr, nullptr, &err);
	struct bp_error err2;
	err2.text[0] = '\0';
	bool ok = rc == -1 && strstr(err.text, needle) != nullptr && bp_sparse_workspace(&s) == 0 &&
		  bp_sparse_check(&s, &err2) == -1 && strstr(err2.text, needle) != nullptr;
	printf("test_sparse_attention: %s rejected: rc %d, \"%s\" %s\n", label, rc, err.text,
	       ok ? "ok" : "FAIL");
	return ok ? 0 : 1;
}

/* The workspace of a known shape, counted by hand from attn_sparse.h: two documents of 1000
 * and 300 tokens, heads 8, kv_heads 2, head_dim 128, B 256, k 3. */
static int check_workspace(void)
{
	struct bp_sparse_shape s;
	memset(&s, 0, sizeof s);
	s.nseg = 2;
	s.heads = 8;
	s.kv_heads = 2;
	s.head_dim = 128;
	s.total = 1300;
	s.max_len = 1000;
	s.block = 256;
	s.k = 3;
	s.scale = 0.125f;
	auto up = [](size_t x) { return (x + 255) / 256 * 256; };
	const size_t nb = 1300 / 256 + 2, nt = 1300 / 64 + 2, cap = 3; /* min(k, 4 blocks) */
	size_t want = up(nb * 2 * 128 * 4);      /* block means */
	want = up(want + nt * 8 * 4);             /* list lengths */
	want = up(want + nt * 8 * cap * 4);       /* lists */
	want = up(want + 1300 * 8 * 128 * 4);     /* dQ accumulator */
	want = up(want + 1300 * 8 * 4);           /* row sums */
	const size_t got = bp_sparse_workspace(&s);
	s.max_len = 1301; /* longer than the total: refused */
	const size_t bad_shape = bp_sparse_workspace(&s);
	const bool ok = got == want && bad_shape == 0;
	printf("test_sparse_attention: workspace %zu bytes, counted %zu; max_len > total: %zu %s\n",
	       got, want, bad_shape, ok ? "ok" : "FAIL");
	return ok ? 0 : 1;
}

static double median(std::vector<float> x)
{
	std::sort(x.begin(), x.end());
	return x.empty() ? 0 : x[x.size() / 2];
}

/* Timing: one causal document of x tokens, heads 16, kv heads 4, head_dim 128 (a
 * Qwen2.5-7B-like layer at tp 2), B = 256; forward = selection + forward. */
static int timing(void)
{
	const int H = 16, KH = 4, D = 128, B = 256;
	const int xs[] = {8192, 32768, 65536};
	const int ks[] = {1, 4, 8, 16, 32, 64};
	printf("\ntiming: one document, heads %d/%d, head_dim %d, block %d; medians of 10 after "
	       "3 warm-ups (ms)\n", H, KH, D, B);
	printf("%7s %4s %10s %10s %10s %10s %8s\n", "x", "k", "fwd+sel", "bwd", "dense fwd",
	       "dense bwd", "P/dense");
	for (int x : xs) {
		const size_t nq = (size_t)x * H * D, nk = (size_t)x * KH * D;
		buf q(nq * 2), k(nk * 2), v(nk * 2), o(nq * 2), dout(nq * 2), lse((size_t)x * H * 4),
			dq(nq * 2), dk(nk * 2), dv(nk * 2), cu(8);
		std::vector<uint16_t> h(nq);
		uint64_t rng = 7;
		for (auto &e : h)
			e = to_bf16((float)normal(&rng));
		CUDA_OK(cudaMemcpy(q.p, h.data(), nq * 2, cudaMemcpyHostToDevice));
		CUDA_OK(cudaMemcpy(dout.p, h.data(), nq * 2, cudaMemcpyHostToDevice));
		CUDA_OK(cudaMemcpy(k.p, h.data(), nk * 2, cudaMemcpyHostToDevice));
		CUDA_OK(cudaMemcpy(v.p, h.data() + 1, nk * 2, cudaMemcpyHostToDevice));
		int32_t hcu[2] = {0, x};
		CUDA_OK(cudaMemcpy(cu.p, hcu, 8, cudaMemcpyHostToDevice));
		cudaEvent_t e0, e1;
		CUDA_OK(cudaEventCreate(&e0));
		CUDA_OK(cudaEventCreate(&e1));
		struct bp_error err;
		const int32_t *c = (const int32_t *)cu.p;
		/* Dense reference. */
		struct bp_attn_shape as;
		memset(&as, 0, sizeof as);
		as.nseg = 1;
		as.heads = H;
		as.kv_heads = KH;
		as.head_dim = D;
		as.total_q = as.total_kv = x;
		as.max_q = as.max_kv = x;
		as.scale = 1.0f / sqrtf((float)D);
		buf aws(bp_attn_bwd_workspace(&as));
		std::vector<float> df, db;
		for (int it = 0; it < 13; it++) {
			float ms;
			CUDA_OK(cudaEventRecord(e0, 0));
			if (bp_attn_fwd(&as, c, c, (uint16_t *)q.p, (uint16_t *)k.p, (uint16_t *)v.p,
					(uint16_t *)o.p, (float *)lse.p, 0, &err))
				return printf("timing: %s\n", err.text), 1;
			CUDA_OK(cudaEventRecord(e1, 0));
			CUDA_OK(cudaEventSynchronize(e1));
			CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
			if (it >= 3)
				df.push_back(ms);
			CUDA_OK(cudaEventRecord(e0, 0));
			if (bp_attn_bwd(&as, c, c, (uint16_t *)q.p, (uint16_t *)k.p, (uint16_t *)v.p,
					(uint16_t *)o.p, (uint16_t *)dout.p, (float *)lse.p,
					(uint16_t *)dq.p, (uint16_t *)dk.p, (uint16_t *)dv.p, aws.p, 0,
					&err))
				return printf("timing: %s\n", err.text), 1;
			CUDA_OK(cudaEventRecord(e1, 0));
			CUDA_OK(cudaEventSynchronize(e1));
			CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
			if (it >= 3)
				db.push_back(ms);
		}
		for (int kk : ks) {
			struct bp_sparse_shape s;
			memset(&s, 0, sizeof s);
			s.nseg = 1;
			s.heads = H;
			s.kv_heads = KH;
			s.head_dim = D;
			s.total = s.max_len = x;
			s.block = B;
			s.k = kk;
			s.scale = 1.0f / sqrtf((float)D);
			buf ws(bp_sparse_workspace(&s));
			std::vector<float> sf, sb;
			for (int it = 0; it < 13; it++) {
				float ms;
				CUDA_OK(cudaEventRecord(e0, 0));
				if (bp_sparse_fwd(&s, c, nullptr, (uint16_t *)q.p, (uint16_t *)k.p,
						  (uint16_t *)v.p, (uint16_t *)o.p, (float *)lse.p, ws.p,
						  0, &err))
					return printf("timing: %s\n", err.text), 1;
				CUDA_OK(cudaEventRecord(e1, 0));
				CUDA_OK(cudaEventSynchronize(e1));
				CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
				if (it >= 3)
					sf.push_back(ms);
				CUDA_OK(cudaEventRecord(e0, 0));
				if (bp_sparse_bwd(&s, c, (uint16_t *)q.p, (uint16_t *)k.p,
						  (uint16_t *)v.p, (uint16_t *)o.p, (uint16_t *)dout.p,
						  (float *)lse.p, (uint16_t *)dq.p, (uint16_t *)dk.p,
						  (uint16_t *)dv.p, ws.p, 0, &err))
					return printf("timing: %s\n", err.text), 1;
				CUDA_OK(cudaEventRecord(e1, 0));
				CUDA_OK(cudaEventSynchronize(e1));
				CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
				if (it >= 3)
					sb.push_back(ms);
			}
			/* P(x, k) / dense pairs, MoBA's work (bp_moba_pairs). */
			double p = 0, n = (x + B - 1) / B;
			for (int cc = 0; cc < (int)n; cc++)
				p += (double)B * (B + 1) / 2 + (double)B * B * std::min(kk - 1, cc);
			printf("%7d %4d %10.3f %10.3f %10.3f %10.3f %8.3f\n", x, kk, median(sf),
			       median(sb), median(df), median(db), p / ((double)x * (x + 1) / 2));
		}
		CUDA_OK(cudaEventDestroy(e0));
		CUDA_OK(cudaEventDestroy(e1));
	}
	return 0;
}

int main(int argc, char **argv)
{
	bool time_it = false, quick = false, small = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--time")) {
			time_it = true;
		} else if (!strcmp(argv[i], "--quick")) {
			quick = true;
		} else if (!strcmp(argv[i], "--small")) {
			small = true;
		} else {
			fprintf(stderr, "usage: test_sparse_attention [--time] [--quick | --small]\n");
			return 2;
		}
	}
	if (quick && small) {
		fprintf(stderr, "test_sparse_attention: error: --quick and --small choose different "
			"layouts; give one\n");
		return 2;
	}
	/* The host-side checks need no device: they run (and can fail) everywhere. */
	int bad = 0;
	bad += expect_reject("head_dim 96", 96, 256, 4, "head_dim 96");
	bad += expect_reject("block 100", 128, 100, 4, "block 100 is not a positive multiple of 64");
	bad += expect_reject("k 0", 128, 256, 0, "budget k 0 is below 1");
	bad += check_workspace();
	if (bad) {
		printf("test_sparse_attention: FAILED\n");
		return 1;
	}
	int ndev = 0;
	cudaError_t e = cudaGetDeviceCount(&ndev);
	if (e != cudaSuccess || ndev == 0) {
		printf("test_sparse_attention: SKIP: no CUDA device (%s)\n",
		       e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
		return 77;
	}
	std::vector<layout> layouts;
	/* name, heads, kv_heads, d, block, k, lens, per-document k */
	if (small) {
		/* Up to four earlier blocks to rank, GQA; budgets per document with a 128-token
		 * block over two key tiles at head_dim 128; documents dense under their budget
		 * (against the dense kernel); four blocks of equal keys (exact ties). */
		layouts.push_back({"small-b64-k2", 2, 1, 64, 64, 2, {300, 130}, {}});
		layouts.push_back({"small-per-doc-k", 2, 2, 128, 128, 1, {400, 200, 65}, {3, 1, 2}});
		layouts.push_back({"small-dense", 2, 1, 64, 64, 8, {200, 65}, {}});
		layouts.push_back({"small-ties", 2, 1, 64, 64, 3, {320}, {}, true});
		layouts.push_back({"small-chunks", 8, 1, 64, 64, 2, {1088}, {}});
	} else {
		layouts.push_back({"one-doc-k2", 2, 2, 128, 256, 2, {1000}, {}});
		layouts.push_back({"mixed-b128-k3", 4, 2, 64, 128, 3, {700, 256, 1, 300, 1500}, {}});
		layouts.push_back({"per-doc-k", 4, 1, 128, 256, 1, {1100, 900, 2000, 513},
				   {1, 2, 3, 8}});
		layouts.push_back({"dense-k16", 2, 1, 64, 256, 16, {1000, 513, 64, 65}, {}});
		layouts.push_back({"dense-d128", 4, 2, 128, 128, 40, {2000, 37}, {}});
		layouts.push_back({"b64-k4-gqa", 8, 2, 128, 64, 4, {777, 1200}, {}});
		layout L{"short-37-b64", 4, 2, 64, 64, 2, {}, {}};
		uint64_t r = 37;
		for (int i = 0; i < 37; i++)
			L.lens.push_back(1 + (int)(splitmix(&r) % 300));
		layouts.push_back(L);
		layouts.push_back({"long-3000-k4", 8, 2, 128, 256, 4, {3000}, {}});
		layouts.push_back({"ties-b128-k3", 4, 2, 64, 128, 3, {1000, 700}, {}, true});
	}
	uint64_t seed = 20261123;
	for (size_t i = 0; i < layouts.size() && (!quick || i < 5); i++)
		bad += run_layout(layouts[i], seed++);
	if (time_it && !bad)
		bad += timing();
	printf("test_sparse_attention: %s\n", bad ? "FAILED" : "all passed");
	if (fflush(stdout) != 0 || ferror(stdout))
		return 1;
	return bad ? 1 : 0;
}
