/* costkinds.c: sparse-attention, CA-task and all-to-all-v costs (costkinds.h).
 *
 * Called by the cost model (costmodel.c, bp_cost_mb's sparse attention), SparseBalance's DST
 * (blocks/sparse_dst.c), the ticks simulator (sim/ticks.c: CA-tasks and the all-to-all),
 * balexec's host shares and ticks (executor/shares.c, engine_ticks.c); bp_moba_pairs also by
 * flops.c and profiler/analytic.c. Implements:
 *   - MoBA's work P(L, k) per head (SparseBalance Sec. II-B's sparse attention; the count
 *     derived from MoBA's moba_attn_varlen: own chunk causal plus k - 1 earlier chunks in
 *     full), in closed form;
 *   - Perf.predict of SparseBalance Sec. IV-B, Eq. 8, on the profiled M[x,k] of Eq. 10:
 *     bilinear over (x, k) (the paper: "optionally interpolating between neighbouring
 *     buckets"), the k weight taken in MoBA's pair count so that k = ceil(x/B) is dense;
 *     the MoBA work law outside the grid (beyond the last x, the last row scaled by
 *     P(x,k)/P(x_last,k): our extrapolation, the paper gives none); k clamped to the
 *     document's block count;
 *   - DistCA Sec. 4.2 ("Profiler") CA-task time: bilinear on the (q, kv) grid, and in the
 *     saturation region (Fig. 5: throughput flat once the kernel is saturated) work over the
 *     peak measured throughput;
 *   - the all-to-all of DistCA's dispatch (Sec. 5; the paper gives no cost formula): the
 *     slowest rank's non-self bytes on the profile's all_to_all table.
 * Invariant: every function is monotone non-decreasing in its sizes when the tables are (the
 * profile reader enforces that), so predictions never reward more work. */
#include "costkinds.h"

#include <math.h>

#include "costmodel.h"

double bp_moba_pairs(double len, double block, double k)
{
	if (!(len > 0) || !(block > 0))
		return 0.0;
	if (!(k >= 1))
		k = 1;
	double n = ceil(len / block), m = n - 1.0; /* m full chunks, then the last */
	double last = len - m * block, j = k - 1.0;
	/* sum_{c=0}^{m-1} min(j, c): c <= floor(j) contributes c, the rest j each. */
	double f = floor(j), s;
	if (f >= m - 1.0)
		s = m * (m - 1.0) / 2.0;
	else
		s = f * (f + 1.0) / 2.0 + (m - 1.0 - f) * j;
	double own = m * block * (block + 1.0) / 2.0 + last * (last + 1.0) / 2.0;
	return own + block * block * s + last * block * (j < m ? j : m);
}

/* bp_bracket for an integer axis. */
static size_t bracket_int(const int *axis, size_t n, double x)
{
	size_t lo = 0, hi = n - 1;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (axis[mid] <= x)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Row r of v at budget k in [k_0, k_last]: piecewise linear between the two bracketing
 * columns, with the weight taken in MoBA's pair count of the row's length rather than in k:
 * t = (P(x_r,k) - P(x_r,k_j)) / (P(x_r,k_j+1) - P(x_r,k_j)). Where a row's block count
 * n = ceil(x_r/B) falls between two columns (x_r = 768: n = 3, columns 2 and 4), k = n gets
 * the dense column's value, as MoBA computes every pair there; and a table that is affine in
 * P (the analytic one) is reproduced exactly at every k. Equal pair counts: the lower cell. */
static double sparse_row(const struct bp_sparse_table *t, const double *v, size_t r, double k)
{
	size_t nk = t->nk;
	if (nk == 1)
		return v[r * nk];
	size_t j = bracket_int(t->k, nk, k);
	double x = t->x[r], b = t->block;
	double p0 = bp_moba_pairs(x, b, t->k[j]), p1 = bp_moba_pairs(x, b, t->k[j + 1]);
	double w = p1 > p0 ? (bp_moba_pairs(x, b, k) - p0) / (p1 - p0) : 0.0;
	if (w < 0)
		w = 0;
	if (w > 1)
		w = 1;
	return v[r * nk + j] + w * (v[r * nk + j + 1] - v[r * nk + j]);
}

/* v at (x, k) with x in [x_0, x_last] and k in [k_0, k_last]: the two bracketing rows at k
 * (sparse_row), then linear in x between them (the paper leaves the interpolation open). */
static double sparse_grid(const struct bp_sparse_table *t, const double *v, double x, double k)
{
	if (t->nx == 1)
		return sparse_row(t, v, 0, k);
	size_t i = bp_bracket(t->x, t->nx, x);
	double tx = (x - t->x[i]) / (t->x[i + 1] - t->x[i]);
	double a = sparse_row(t, v, i, k), c = sparse_row(t, v, i + 1, k);
	return a + tx * (c - a);
}

/* M at (x, k) for x inside the x range. Below the first k: the first column (an upper bound
 * the grid can vouch for). Above the last k (only reached while k < ceil(x/B), else k was
 * clamped): affine in MoBA's pair count through the last two columns, M(x,k_l) + s (P(x,k) -
 * P(x,k_l)) with s the time per extra pair between k_{l-1} and k_l. The fixed part (selection
 * kernels, launches) stays fixed, the attention part follows P, which is linear in k for
 * x >> kB and reaches the dense count at k = ceil(x/B). With one column: scaled by P. */
static double sparse_at(const struct bp_sparse_table *t, const double *v, double x, double k)
{
	size_t nk = t->nk;
	double k0 = t->k[0], kl = t->k[nk - 1], b = t->block;
	if (k <= k0)
		return sparse_grid(t, v, x, k0);
	if (k <= kl)
		return sparse_grid(t, v, x, k);
	double ml = sparse_grid(t, v, x, kl), pl = bp_moba_pairs(x, b, kl);
	if (nk == 1)
		return ml * bp_moba_pairs(x, b, k) / pl;
	double kp = t->k[nk - 2], pp = bp_moba_pairs(x, b, kp);
	double slope = pl > pp ? (ml - sparse_grid(t, v, x, kp)) / (pl - pp) : 0.0;
	return ml + slope * (bp_moba_pairs(x, b, k) - pl);
}

double bp_cost_sparse_attn(const struct bp_sparse_table *t, double x, double k, int bwd)
{
	if (!(x > 0))
		return 0.0;
	const double *v = bwd ? t->bwd : t->fwd;
	double b = t->block;
	/* A budget of more blocks than the document has selects them all (MoBA caps the past
	 * chunks at the ones that exist): clamp to [1, ceil(x/B)]. */
	double nb = ceil(x / b), kc = k;
	if (!(kc >= 1))
		kc = 1;
	if (kc > nb)
		kc = nb;
	double x0 = t->x[0], xl = t->x[t->nx - 1];
	if (x <= xl)
		return sparse_at(t, v, x < x0 ? x0 : x, kc);
	/* Beyond the grid: the last row at the same budget (clamped to what x_last has), scaled
	 * by P(x,k)/P(x_last,k'). While k covers every block, P is x(x+1)/2, the quadratic law
	 * of dense attention; for a fixed k below the block count, P ~ x B (k - 1/2), linear in
	 * x and in k (bp_moba_pairs), which is how MoBA's cost grows: each new block
	 * attends k blocks, not all earlier ones. */
	double kl = kc, nbl = ceil(xl / b);
	if (kl > nbl)
		kl = nbl;
	return sparse_at(t, v, xl, kl) * bp_moba_pairs(x, b, kc) / bp_moba_pairs(xl, b, kl);
}

/* (query, key) pairs of q queries ending a causal kv prefix, kv >= q. */
static double causal_pairs(double q, double kv)
{
	return q * (kv - q + 1.0) + q * (q - 1.0) / 2.0;
}

/* Throughput of cell (i, j), pairs per us; cells with kv < q hold the kv = q value. 0 for a
 * cell without a positive time. */
static double cell_rate(const struct bp_attn_table *t, const double *v, size_t i, size_t j)
{
	double q = t->q[i], kv = t->kv[j] < q ? q : t->kv[j], us = v[i * t->nkv + j];
	return us > 0 ? causal_pairs(q, kv) / us : 0.0;
}

double bp_cost_ca_task(const struct bp_attn_table *t, double q, double kv, int bwd)
{
	if (!(q > 0))
		return 0.0;
	if (kv < q)
		kv = q;
	double base = bp_cost_attn(t, q, kv, bwd);
	/* Outside the grid bp_cost_attn already does the right thing: below it, the first cell
	 * (tile padding, far from saturation); beyond it, the edge scaled by the work law, i.e.
	 * the edge's throughput. */
	if (t->nq < 2 || t->nkv < 2 || q < t->q[0] || q > t->q[t->nq - 1] || kv < t->kv[0] ||
	    kv > t->kv[t->nkv - 1])
		return base;
	const double *v = bwd ? t->bwd : t->fwd;
	double peak = 0.0;
	for (size_t i = 0; i < t->nq; i++)
		for (size_t j = 0; j < t->nkv; j++) {
			double r = cell_rate(t, v, i, j);
			if (r > peak)
				peak = r;
		}
	if (!(peak > 0))
		return base;
	size_t i = bp_bracket(t->q, t->nq, q), j = bp_bracket(t->kv, t->nkv, kv);
	double floor_rate = (1.0 - BP_CA_SATURATION_TOL) * peak;
	for (size_t a = i; a <= i + 1; a++)
		for (size_t c = j; c <= j + 1; c++)
			if (cell_rate(t, v, a, c) < floor_rate)
				return base;
	/* Saturated (DistCA Sec. 4.2): the kernel runs at its peak rate, time = work / peak. */
	return causal_pairs(q, kv) / peak;
}

double bp_cost_alltoallv(const struct bp_profile *p, int ranks, int inter,
			 const double *send_bytes, const double *recv_bytes,
			 struct bp_error *err)
{
	if (ranks < 1)
		return bp_errorf(err, "all-to-all over %d ranks", ranks);
	double worst = 0.0;
	for (int r = 0; r < ranks; r++) {
		const double s = send_bytes[r], v = recv_bytes[r];
		if (!isfinite(s) || !isfinite(v))
			return bp_errorf(err, "all-to-all %s_bytes[%d] is not finite",
					 isfinite(s) ? "recv" : "send", r);
		if (s < 0 || v < 0)
			return bp_errorf(err, "all-to-all %s_bytes[%d] is negative",
					 s < 0 ? "send" : "recv", r);
		if (s > worst)
			worst = s;
		if (v > worst)
			worst = v;
	}
	if (ranks == 1)
		return 0.0;
	if (!bp_profile_has_coll(p, BP_COLL_ALLTOALL, inter))
		return bp_errorf(err, "profile '%s' has no all_to_all table %s, needed for an "
				 "all-to-all over %d ranks", p->name,
				 inter ? "across nodes" : "within a node", ranks);
	if (!(worst > 0))
		return 0.0;
	/* A uniform all-to-all of buffer S per rank moves (n-1)/n S off the rank each way. */
	return bp_cost_coll(p, BP_COLL_ALLTOALL, ranks, inter, worst * ranks / (ranks - 1.0));
}
