/* costkinds.h: the costs of the attention and communication kinds the newer methods add,
 * beside costmodel.h's dense ones: block-sparse (MoBA) attention from the profile's M[x,k]
 * tables (SparseBalance Sec. IV-B, Eq. 8-10), a disaggregated core-attention task (DistCA
 * Sec. 4.2 "Profiler", Fig. 5) and a variable all-to-all (the exchange that feeds DistCA's
 * attention servers and returns their outputs, Sec. 4.1 and 5).
 * Pure functions of a profile's tables: no allocation, nothing kept between calls. */
#ifndef BP_COSTKINDS_H
#define BP_COSTKINDS_H

#include "bp.h"
#include "profile.h"

/* Query-key pairs one head computes for a causal document of len tokens under MoBA top-k
 * block selection with block size block and budget k blocks counting the token's own block
 * (SparseBalance Sec. II-B runs MoBA; the count is derived from MoBA's moba_attn_varlen,
 * which always selects the own chunk): with n = ceil(len/block) chunks,
 * chunk c of len_c tokens attends itself causally and min(k-1, c) earlier chunks in full:
 *   P(len, k) = sum_c len_c (len_c + 1) / 2 + len_c * block * min(k - 1, c).
 * k >= n gives the dense len (len + 1) / 2. len and k may be fractional (k is taken as is in
 * min(k - 1, c); k < 1 counts as 1); closed form, O(1). 0 for len <= 0. */
double bp_moba_pairs(double len, double block, double k);

/* Perf.predict (SparseBalance Eq. 8, over the profiled M[x,k] of Eq. 10): us per layer of
 * sparse attention for one causal document of x tokens at budget k blocks, forward (bwd = 0)
 * or backward. k is clamped to [1, ceil(x/block)]: more blocks than the document has cost
 * the same as all of them (dense). Inside the grid: bilinear interpolation over (x, k), the
 * weight between two k columns taken in P(x_row, k) instead of k (exact for a table affine in
 * P per row, and dense at k = ceil(x/B) when that falls between two columns), linear in x.
 * Below the first x: the first row. Below the first k: the first column. Above the last k
 * (x > k_last blocks): affine in P(x,k) through the last two columns, so the fixed selection
 * overhead stays fixed and k = ceil(x/B) reaches the dense time. Above the last x: the
 * value at the last x scaled by P(x,k)/P(x_last,k') (k' = k clamped at x_last): the MoBA
 * work law, quadratic in x while k covers every block and linear in x (about x*B*(k - 1/2)
 * pairs) for a fixed k below the block count. Monotone non-decreasing in x and in k. 0 for
 * x <= 0. */
double bp_cost_sparse_attn(const struct bp_sparse_table *t, double x, double k, int bwd);

/* The fractional tolerance under which a grid cell counts as at peak throughput for
 * bp_cost_ca_task's saturation rule (measured medians vary by about this much). */
#define BP_CA_SATURATION_TOL 0.02

/* Time of one CA-task (DistCA Sec. 4.2 "Profiler", Fig. 5): q query tokens that are
 * the last q positions of a causal kv-token prefix (kv < q is raised to q), us per layer. The
 * bilinear (q, kv) lookup of bp_cost_attn, except in the saturation region: where the four
 * grid cells around (q, kv) all run within BP_CA_SATURATION_TOL of the table's peak
 * throughput (pairs per us), time = pairs / peak with pairs = q (kv - q + 1) + q (q - 1) / 2.
 * A server's fused call (one kernel for all its tasks, Sec. 4.1) is priced as the sum of its
 * tasks' times, our reading, as the paper prices tasks one by one. 0 for q <= 0. */
double bp_cost_ca_task(const struct bp_attn_table *t, double q, double kv, int bwd);

/* Time of one variable all-to-all over ranks ranks (inter: the group crosses nodes), us:
 * send_bytes[i] and recv_bytes[i] are rank i's bytes to and from the other ranks (non-self
 * traffic only: a rank's share for itself is a local copy). The slowest rank decides: max
 * over ranks of max(send, recv), priced on the profile's all_to_all table as the uniform
 * all-to-all whose off-rank share (n-1)/n moves that many bytes (the table's bytes are the
 * whole send buffer, as NCCL's tests count it). 0 when no rank moves a byte or ranks == 1.
 * Returns -1 with err when the profile has no all_to_all table for that placement
 * (bp_profile_has_coll), when ranks < 1, or when a byte count is negative or not finite. */
double bp_cost_alltoallv(const struct bp_profile *p, int ranks, int inter,
			 const double *send_bytes, const double *recv_bytes,
			 struct bp_error *err);

#endif
