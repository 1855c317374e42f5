/* test_costkinds.c: costkinds.h (MoBA pair count, sparse-attention Perf.predict, CA-task
 * cost, all-to-all-v), the analytic sparse table, bp_profile_check_scheme, and the v1 -> v2
 * profile path.
 *
 * Known answers: KAT-1, P(L,k) worked out by hand from its definition; the KAT-2 table
 * (M = P(x,256,k)/1e6 us) for hand-computed interpolation, clamping and extrapolation;
 * a hand-made (q, kv) table with a saturated corner for the CA-task rule (DistCA Sec. 4.2);
 * a hand-made all_to_all table for the all-to-all-v. Properties: monotone in x and k, k at or
 * above the block count equals dense + gate on the analytic table, round trips byte for byte. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "check.h"
#include "codec.h"
#include "kat_sparse.h"
#include "costkinds.h"
#include "costmodel.h"
#include "jsonutil.h"
#include "presets.h"
#include "profile.h"

/* ---- MoBA work, KAT-1 ---------------------------------------------------------------------- */

static void test_pairs(void)
{
	CHECK(bp_moba_pairs(32768, 256, 32) == 231751680.0);
	CHECK(bp_moba_pairs(32768, 256, 128) == 536887296.0); /* dense: k = ceil(L/B) */
	CHECK(bp_moba_pairs(32768, 256, 1e6) == 536887296.0);
	CHECK(bp_moba_pairs(8192, 256, 32) == 33558528.0);
	CHECK(bp_moba_pairs(8192, 256, 64) == 33558528.0);
	CHECK(bp_moba_pairs(8192, 256, 8) == 13897728.0);
	CHECK(bp_moba_pairs(1000, 256, 1) == 125716.0);
	CHECK(bp_moba_pairs(1000, 256, 2) == 316180.0);
	CHECK(bp_moba_pairs(1000, 256, 4) == 500500.0);
	CHECK(bp_moba_pairs(1000, 256, 0) == 125716.0); /* k < 1 counts as 1 */
	CHECK(bp_moba_pairs(0, 256, 4) == 0.0);
	/* L >= kB: affine in L, P(L, 32) = 8064.5 L - 32505856. */
	for (double L = 8192; L <= 131072; L *= 2)
		CHECK(bp_moba_pairs(L, 256, 32) == 8064.5 * L - 32505856.0);
	/* A FLOP ratio worked out by hand: P(64K, 8)/dense = .058. */
	CHECK(fabs(bp_moba_pairs(65536, 256, 8) / (65536.0 * 65537 / 2) - 0.058) < 0.0005);
	/* Monotone in L and k, fractional arguments included. */
	double prev = 0;
	for (double L = 1; L < 5000; L += 7.5) {
		double p = bp_moba_pairs(L, 256, 3.5);
		CHECK(p >= prev);
		prev = p;
	}
	prev = 0;
	for (double k = 1; k < 40; k += 0.25) {
		double p = bp_moba_pairs(6000, 256, k);
		CHECK(p >= prev);
		prev = p;
	}
}

/* ---- sparse Perf.predict on the KAT-2 table -------------------------------------------------- */

/* Non-decreasing in x and k over a fine sweep, inside and outside the grid. */
static void check_monotone(const struct bp_sparse_table *t, double xmax)
{
	int bad = 0;
	for (int b = 0; b < 2; b++)
		for (double k = 0.5; k < 300; k = k < 4 ? k + 0.5 : k * 1.13) {
			double prev = 0;
			for (double x = 1; x < xmax; x = x * 1.031 + 3) {
				double v = bp_cost_sparse_attn(t, x, k, b);
				if (!(v >= prev * (1 - 1e-12)) && bad++ < 5)
					fprintf(stderr, "not monotone in x: %.1f %.2f: %.9g < %.9g\n", x,
						k, v, prev);
				prev = v;
			}
		}
	for (int b = 0; b < 2; b++)
		for (double x = 1; x < xmax; x = x * 1.07 + 11) {
			double prev = 0;
			for (double k = 0.5; k < 300; k = k < 4 ? k + 0.25 : k * 1.05) {
				double v = bp_cost_sparse_attn(t, x, k, b);
				if (!(v >= prev * (1 - 1e-12)) && bad++ < 5)
					fprintf(stderr, "not monotone in k: %.1f %.2f: %.9g < %.9g\n", x,
						k, v, prev);
				prev = v;
			}
		}
	CHECK(bad == 0);
}

static void test_sparse_predict(void)
{
	struct bp_sparse_table t = kat_table();
	/* Grid points are the cells. */
	CHECK(bp_cost_sparse_attn(&t, 8192, 32, 0) == 33.559);
	CHECK(bp_cost_sparse_attn(&t, 32768, 8, 0) == 61.096);
	CHECK(bp_cost_sparse_attn(&t, 32768, 8, 1) == 2 * 61.096);
	/* Bilinear between neighbouring buckets. */
	CHECK_NEAR(bp_cost_sparse_attn(&t, 6144, 16, 0), (8.391 + 24.646) / 2, 1e-12);
	/* Between two k columns the weight is in MoBA's pairs of the row's length: exact on
	 * this table (P / 1e6) up to the cells' rounding. */
	CHECK_NEAR(bp_cost_sparse_attn(&t, 16384, 40, 0), bp_moba_pairs(16384, 256, 40) / 1e6,
		   1e-3);
	CHECK_NEAR(bp_cost_sparse_attn(&t, 8192, 20, 0), bp_moba_pairs(8192, 256, 20) / 1e6, 1e-3);
	{
		double w8 = (bp_moba_pairs(8192, 256, 20) - bp_moba_pairs(8192, 256, 16)) /
			    (bp_moba_pairs(8192, 256, 24) - bp_moba_pairs(8192, 256, 16));
		double w16 = (bp_moba_pairs(16384, 256, 20) - bp_moba_pairs(16384, 256, 16)) /
			     (bp_moba_pairs(16384, 256, 24) - bp_moba_pairs(16384, 256, 16));
		double r8 = 24.646 + w8 * (31.199 - 24.646), r16 = 57.156 + w16 * (80.486 - 57.156);
		CHECK(w8 > 0.5 && w8 < 0.6 && w16 > 0.5 && w16 < 0.6);
		CHECK_NEAR(bp_cost_sparse_attn(&t, 12288, 20, 0), (r8 + r16) / 2, 1e-12);
	}
	/* k clamped to the block count: 4096 tokens have 16 blocks, more cost the same. */
	CHECK(bp_cost_sparse_attn(&t, 4096, 64, 0) == 8.391);
	CHECK(bp_cost_sparse_attn(&t, 4096, 1e9, 0) == 8.391);
	CHECK(bp_cost_sparse_attn(&t, 4096, 20, 0) == bp_cost_sparse_attn(&t, 4096, 16, 0));
	/* k below 1 is 1; below the first k, the first column. */
	CHECK(bp_cost_sparse_attn(&t, 4096, 0.5, 0) == 6.031);
	CHECK(bp_cost_sparse_attn(&t, 4096, 2, 0) == 6.031);
	/* Below the first x: the first row (k clamped to 1000 tokens' 4 blocks, then to k_0). */
	CHECK(bp_cost_sparse_attn(&t, 1000, 2, 0) == 6.031);
	CHECK(bp_cost_sparse_attn(&t, 0, 8, 0) == 0.0);
	CHECK(bp_cost_sparse_attn(&t, -5, 8, 0) == 0.0);
	/* Above the last k: affine in MoBA's work through the last two columns. */
	{
		double s = (400.572 - 324.551) /
			   (bp_moba_pairs(32768, 256, 64) - bp_moba_pairs(32768, 256, 48));
		CHECK_NEAR(bp_cost_sparse_attn(&t, 32768, 100, 0),
			   400.572 + s * (bp_moba_pairs(32768, 256, 100) -
					  bp_moba_pairs(32768, 256, 64)), 1e-9);
		CHECK_NEAR(s, 1e-6, 1e-9); /* the KAT-2 table is P / 1e6 */
	}
	/* Beyond the last x at a fixed k: linear in x (P ~ x B (k - 1/2)). */
	double r = bp_cost_sparse_attn(&t, 65536, 32, 0) / 231.752;
	CHECK_NEAR(r, (8064.5 * 65536 - 32505856.0) / 231751680.0, 1e-12);
	CHECK(r > 2.1 && r < 2.2);
	/* Beyond the last x with k covering every block: the quadratic law of dense attention. */
	double d32 = bp_cost_sparse_attn(&t, 32768, 1e9, 0);
	double d64 = bp_cost_sparse_attn(&t, 65536, 1e9, 0);
	CHECK_NEAR(d32, 536.887, 2e-3); /* dense P(32768) / 1e6, from the rounded cells */
	CHECK_NEAR(d64 / d32, 65536.0 * 65537 / (32768.0 * 32769), 1e-12);
	check_monotone(&t, 300000);

	/* One-row and one-column tables. */
	double x1[] = {8192}, f1[] = {10, 20}, b1[] = {30, 40};
	int k1[] = {4, 8};
	struct bp_sparse_table one = {.tp = 1, .block = 256, .nx = 1, .nk = 2, .x = x1, .k = k1,
				      .fwd = f1, .bwd = b1};
	double w = (bp_moba_pairs(8192, 256, 6) - bp_moba_pairs(8192, 256, 4)) /
		   (bp_moba_pairs(8192, 256, 8) - bp_moba_pairs(8192, 256, 4));
	CHECK_NEAR(bp_cost_sparse_attn(&one, 8192, 6, 0), 10 + 10 * w, 1e-12);
	CHECK_NEAR(bp_cost_sparse_attn(&one, 8192, 6, 1), 30 + 10 * w, 1e-12);
	CHECK(bp_cost_sparse_attn(&one, 100, 6, 0) == 10.0);
	check_monotone(&one, 100000);
}

/* ---- the analytic sparse table -------------------------------------------------------------- */

static void test_analytic_sparse(void)
{
	struct bp_profile p;
	struct bp_error err = {{0}};
	const struct bp_gpu *g = bp_gpu_preset("H100");
	const struct bp_model *m = bp_model_preset("llama3-8b");
	struct bp_scheme sc[] = {{8, 1, 1}, {2, 1, 1}};
	bp_profile_init(&p);
	int rc = bp_profile_analytic(&p, g, m, sc, 2, 131072, &err);
	CHECK(rc == 0);
	if (rc < 0) {
		fprintf(stderr, "analytic: %s\n", err.text);
		return;
	}
	CHECK(p.nsparse == 2 && p.sparse[0].tp == 2 && p.sparse[1].tp == 8);
	const struct bp_sparse_table *t = bp_profile_sparse(&p, 8, 256);
	const struct bp_attn_table *a = bp_profile_attn(&p, 8);
	CHECK(t && a && !bp_profile_sparse(&p, 8, 128) && !bp_profile_sparse(&p, 4, 256));
	if (!t || !a)
		goto out;
	/* The grid of profiler/README.md "Sparse attention". */
	CHECK(t->nx == 18 && t->x[0] == 256 && t->x[17] == 131072 && t->nk == 14 &&
	      t->k[0] == 1 && t->k[9] == 32 && t->k[13] == 64);
	/* k >= ceil(x/B): dense attention + the selection overhead, at every grid x. */
	for (size_t i = 0; i < t->nx; i++) {
		double x = t->x[i], nb = ceil(x / 256);
		for (int b = 0; b < 2; b++) {
			double dense = bp_cost_attn(a, x, x, b);
			double gate = bp_analytic_sparse_gate_us(g, m, 8, 256, x, b);
			CHECK(gate > 0);
			for (double k = nb; k <= nb + 70; k += 7) {
				double v = bp_cost_sparse_attn(t, x, k, b);
				CHECK(fabs(v / (dense + gate) - 1) < 1e-12);
			}
			/* Sparse is cheaper than dense once k is below the block count. */
			if (nb > 2)
				CHECK(bp_cost_sparse_attn(t, x, nb - 2, b) < dense + gate);
		}
	}
	/* The gate is quadratic in x: about 4x per doubling at long lengths. */
	double g64 = bp_analytic_sparse_gate_us(g, m, 8, 256, 65536, 0);
	double g128 = bp_analytic_sparse_gate_us(g, m, 8, 256, 131072, 0);
	CHECK(g128 / g64 > 3.0 && g128 / g64 < 4.01);
	/* At 128K with k = 32 MoBA computes ~12% of the pairs; the time is well below dense. */
	double d = bp_cost_attn(a, 131072, 131072, 0), s32 = bp_cost_sparse_attn(t, 131072, 32, 0);
	CHECK(s32 < 0.25 * d && s32 > 0.1 * d);
	/* Roughly affine in k for x >> kB (MoBA's pairs are then about x B (k - 1/2)). */
	double s16 = bp_cost_sparse_attn(t, 131072, 16, 0);
	double s48 = bp_cost_sparse_attn(t, 131072, 48, 0);
	CHECK(fabs((s48 - s32) / (s32 - s16) - 1) < 0.05);
	check_monotone(t, 400000);
	check_monotone(bp_profile_sparse(&p, 2, 256), 200000);
out:
	bp_profile_release(&p);
}

/* ---- CA-task cost --------------------------------------------------------------------------- */

static double ca_q[] = {128, 256, 512}, ca_kv[] = {128, 256, 512};
static double ca_f[9], ca_b[9];

static double pairs(double q, double kv)
{
	return q * (kv - q + 1) + q * (q - 1) / 2;
}

static void test_ca_task(void)
{
	/* Rate 100 pairs/us where q and kv >= 256 (saturated), 50 below. */
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++) {
			double q = ca_q[i], kv = ca_kv[j] < q ? q : ca_kv[j];
			double rate = q >= 256 && kv >= 256 ? 100.0 : 50.0;
			ca_f[i * 3 + j] = pairs(q, kv) / rate;
			ca_b[i * 3 + j] = 2.5 * ca_f[i * 3 + j];
		}
	struct bp_attn_table t = {.tp = 1, .nq = 3, .nkv = 3, .q = ca_q, .kv = ca_kv,
				  .fwd = ca_f, .bwd = ca_b};
	/* Saturated region: work over the peak rate, not the bilinear value. */
	CHECK_NEAR(bp_cost_ca_task(&t, 384, 384, 0), pairs(384, 384) / 100.0, 1e-9);
	CHECK_NEAR(bp_cost_ca_task(&t, 300, 500, 0), pairs(300, 500) / 100.0, 1e-9);
	CHECK_NEAR(bp_cost_ca_task(&t, 300, 500, 1), pairs(300, 500) / 40.0, 1e-9);
	CHECK(fabs(bp_cost_ca_task(&t, 384, 384, 0) - bp_cost_attn(&t, 384, 384, 0)) > 1);
	/* A bracket touching an unsaturated cell: the bilinear lookup. */
	CHECK(bp_cost_ca_task(&t, 200, 300, 0) == bp_cost_attn(&t, 200, 300, 0));
	/* kv below q is raised to q; outside the grid: bp_cost_attn (tile padding below, the
	 * work law beyond). */
	CHECK(bp_cost_ca_task(&t, 384, 10, 0) == bp_cost_ca_task(&t, 384, 384, 0));
	CHECK(bp_cost_ca_task(&t, 64, 64, 0) == bp_cost_attn(&t, 64, 64, 0));
	CHECK(bp_cost_ca_task(&t, 1024, 2048, 0) == bp_cost_attn(&t, 1024, 2048, 0));
	CHECK(bp_cost_ca_task(&t, 0, 100, 0) == 0.0);
	/* Grid points that are saturated stay their cell. */
	CHECK_NEAR(bp_cost_ca_task(&t, 512, 512, 0), ca_f[8], 1e-9);
	/* On the analytic H100 table the long cells saturate: work / peak within 2% of the
	 * bilinear value, and never below the work at peak rate. */
	struct bp_profile p;
	struct bp_error err = {{0}};
	struct bp_scheme sc = {8, 1, 1};
	bp_profile_init(&p);
	CHECK(bp_profile_analytic(&p, bp_gpu_preset("H100"), bp_model_preset("llama3-8b"), &sc, 1,
				  65536, &err) == 0);
	const struct bp_attn_table *a = bp_profile_attn(&p, 8);
	if (a) {
		double v = bp_cost_ca_task(a, 40000, 60000, 0);
		double w = bp_cost_attn(a, 40000, 60000, 0);
		CHECK(fabs(v / w - 1) < 0.03);
		CHECK(bp_cost_ca_task(a, 1000, 3000, 0) == bp_cost_attn(a, 1000, 3000, 0));
	}
	bp_profile_release(&p);
}

/* ---- all-to-all-v --------------------------------------------------------------------------- */

static double a2a_bytes[] = {1e3, 1e9}, a2a_us[] = {10, 10010};

static void test_alltoallv(void)
{
	struct bp_coll_table c = {.op = BP_COLL_ALLTOALL, .inter = 0, .ranks = 8, .n = 2,
				  .bytes = a2a_bytes, .us = a2a_us};
	struct bp_profile p;
	struct bp_error err = {{0}};
	bp_profile_init(&p);
	snprintf(p.name, sizeof(p.name), "hand");
	p.coll = &c;
	p.ncoll = 1;
	double send[8] = {0, 7e6, 1e6, 0, 0, 0, 0, 0}, recv[8] = {0, 0, 3.5e6, 3.5e6, 1e6, 0, 0, 0};
	/* Slowest rank: 7e6 non-self bytes, the uniform all-to-all of 8e6 per rank. */
	double want = 10 + (8e6 - 1e3) * (10000 / (1e9 - 1e3));
	CHECK_NEAR(bp_cost_alltoallv(&p, 8, 0, send, recv, &err), want, 1e-9);
	/* Receiving is as slow as sending. */
	CHECK_NEAR(bp_cost_alltoallv(&p, 8, 0, recv, send, &err), want, 1e-9);
	/* Uniform traffic equals the collective of that buffer. */
	double u[8];
	for (int i = 0; i < 8; i++)
		u[i] = 5e8 * 7 / 8;
	CHECK_NEAR(bp_cost_alltoallv(&p, 8, 0, u, u, &err),
		   bp_cost_coll(&p, BP_COLL_ALLTOALL, 8, 0, 5e8), 1e-9);
	/* Nothing moves, or one rank: free. */
	double z[8] = {0};
	CHECK(bp_cost_alltoallv(&p, 8, 0, z, z, &err) == 0.0);
	CHECK(bp_cost_alltoallv(&p, 1, 1, send, recv, &err) == 0.0);
	/* No table across nodes: an error, not a free all-to-all. */
	double z16[16] = {0};
	z16[3] = 1e6;
	CHECK(bp_cost_alltoallv(&p, 16, 1, z16, z16, &err) == -1.0);
	CHECK(!strcmp(err.text, "profile 'hand' has no all_to_all table across nodes, needed for "
				"an all-to-all over 16 ranks"));
	CHECK(bp_cost_alltoallv(&p, 2, 1, z, z, &err) == -1.0);
	/* Within a node with only a network table: the cost model's fallback. */
	c.inter = 1;
	CHECK_NEAR(bp_cost_alltoallv(&p, 8, 0, send, recv, &err), want, 1e-9);
	c.inter = 0;
	/* Bad inputs. */
	send[3] = -1;
	CHECK(bp_cost_alltoallv(&p, 8, 0, send, recv, &err) == -1.0);
	CHECK(!strcmp(err.text, "all-to-all send_bytes[3] is negative"));
	send[3] = 0;
	recv[5] = NAN;
	CHECK(bp_cost_alltoallv(&p, 8, 0, send, recv, &err) == -1.0);
	CHECK(!strcmp(err.text, "all-to-all recv_bytes[5] is not finite"));
	CHECK(bp_cost_alltoallv(&p, 0, 0, send, recv, &err) == -1.0);
	CHECK(!strcmp(err.text, "all-to-all over 0 ranks"));
	/* p borrows the static table: nothing to release. */
}

/* ---- bp_profile_check_scheme ---------------------------------------------------------------- */

/* Reads root after removing the collectives tables that match (op, inter); op NULL: all. */
static int read_without(json_t *root, const char *op, int inter, struct bp_profile *out)
{
	json_t *r = json_deep_copy(root), *c = json_object_get(r, "collectives");
	for (size_t i = json_array_size(c); i-- > 0;) {
		json_t *t = json_array_get(c, i);
		if (!op || (!strcmp(json_string_value(json_object_get(t, "op")), op) &&
			    json_is_true(json_object_get(t, "inter")) == inter))
			json_array_remove(c, i);
	}
	struct bp_error err = {{0}};
	int rc = bp_profile_from_json(out, r, &err);
	if (rc < 0)
		fprintf(stderr, "read_without: %s\n", err.text);
	json_decref(r);
	return rc;
}

#define EXPECT_SCHEME(p, tp, cp, pp, dp, gpn, want)                                        \
	do {                                                                               \
		struct bp_error e_ = {{0}};                                                \
		int rc_ = bp_profile_check_scheme(p, tp, cp, pp, dp, gpn, &e_);            \
		const char *w_ = (want);                                                   \
		if (w_ ? rc_ == 0 || strcmp(e_.text, w_) : rc_ != 0)                       \
			fprintf(stderr, "line %d: rc %d '%s'\n", __LINE__, rc_, e_.text);  \
		CHECK(w_ ? rc_ < 0 && !strcmp(e_.text, w_) : rc_ == 0);                    \
	} while (0)

static void test_check_scheme(void)
{
	struct bp_profile p, q;
	struct bp_error err = {{0}};
	struct bp_scheme sc[] = {{8, 2, 4}, {1, 1, 1}};
	bp_profile_init(&p);
	bp_profile_init(&q);
	CHECK(bp_profile_analytic(&p, bp_gpu_preset("H100"), bp_model_preset("llama3-8b"), sc, 2,
				  8192, &err) == 0);
	json_t *root = bp_profile_to_json(&p);
	CHECK(root != NULL);
	if (!root)
		goto out;
	const char *nm = "profile 'analytic-H100-llama3-8b' has no ";
	char want[256];
	/* The analytic profile has every table. */
	EXPECT_SCHEME(&p, 8, 2, 4, 4, 8, NULL);
	EXPECT_SCHEME(&p, 1, 1, 1, 1, 0, NULL);
	EXPECT_SCHEME(&p, 2, 1, 1, 1, 8, "profile 'analytic-H100-llama3-8b' has no attention "
					 "table for tp 2");
	EXPECT_SCHEME(&p, 0, 1, 1, 1, 8, "parallel degrees must be >= 1");
	/* No collectives at all: a single GPU is fine, anything else is not. */
	CHECK(read_without(root, NULL, 0, &q) == 0);
	EXPECT_SCHEME(&q, 1, 1, 1, 1, 8, NULL);
	snprintf(want, sizeof(want), "%sall_reduce table within a node, needed for the tp 8 group "
		 "(it would cost nothing)", nm);
	EXPECT_SCHEME(&q, 8, 1, 1, 1, 8, want);
	snprintf(want, sizeof(want), "%sall_gather table within a node, needed for the cp 2 group "
		 "(it would cost nothing)", nm);
	EXPECT_SCHEME(&q, 1, 2, 1, 1, 8, want);
	snprintf(want, sizeof(want), "%ssend_recv table within a node, needed for the stages of "
		 "pp 4 (it would cost nothing)", nm);
	EXPECT_SCHEME(&q, 1, 1, 4, 1, 8, want);
	snprintf(want, sizeof(want), "%sreduce_scatter table within a node, needed for the "
		 "gradient sync over dp 2 x cp 1 replicas (it would cost nothing)", nm);
	EXPECT_SCHEME(&q, 1, 1, 1, 2, 8, want);
	/* Without network tables: groups inside a node pass, groups across nodes fail. */
	CHECK(read_without(root, "all_reduce", 1, &q) == 0);
	EXPECT_SCHEME(&q, 8, 1, 1, 1, 8, NULL);
	snprintf(want, sizeof(want), "%sall_reduce table across nodes, needed for the tp 8 group "
		 "(it would cost nothing)", nm);
	EXPECT_SCHEME(&q, 8, 1, 1, 1, 4, want);
	CHECK(read_without(root, "send_recv", 1, &q) == 0);
	EXPECT_SCHEME(&q, 8, 1, 1, 1, 8, NULL);
	EXPECT_SCHEME(&q, 1, 1, 8, 1, 8, NULL); /* 8 stages on one node */
	snprintf(want, sizeof(want), "%ssend_recv table across nodes, needed for the stages of "
		 "pp 4 (it would cost nothing)", nm);
	EXPECT_SCHEME(&q, 8, 2, 4, 1, 8, want);
	/* Gradient sync placement: across nodes once tp*cp*dp exceeds the node. */
	CHECK(read_without(root, "reduce_scatter", 1, &q) == 0);
	EXPECT_SCHEME(&q, 1, 1, 1, 8, 8, NULL);
	snprintf(want, sizeof(want), "%sreduce_scatter table across nodes, needed for the "
		 "gradient sync over dp 4 x cp 4 replicas (it would cost nothing)", nm);
	EXPECT_SCHEME(&q, 1, 4, 1, 4, 8, want); /* the cp group fits a node, the replicas not */
	/* Without intra-node tables the network's price them (as bp_cost_coll does). */
	CHECK(read_without(root, "all_reduce", 0, &q) == 0);
	EXPECT_SCHEME(&q, 8, 1, 1, 1, 8, NULL);
	CHECK(bp_profile_has_coll(&q, BP_COLL_ALLREDUCE, 0) &&
	      bp_profile_has_coll(&q, BP_COLL_ALLREDUCE, 1));
	json_decref(root);
out:
	bp_profile_release(&p);
	bp_profile_release(&q);
}

/* ---- v1 in, v2 out -------------------------------------------------------------------------- */

static void test_versions(void)
{
	struct bp_profile p, q, r;
	struct bp_error err = {{0}};
	struct bp_scheme sc[] = {{4, 1, 2}, {8, 2, 4}};
	char *s1 = NULL, *s2 = NULL, *s3 = NULL, *v1text = NULL;
	json_t *root = NULL;
	bp_profile_init(&p);
	bp_profile_init(&q);
	bp_profile_init(&r);
	CHECK(bp_profile_analytic(&p, bp_gpu_preset("A800"), bp_model_preset("qwen2.5-3b"), sc, 2,
				  20000, &err) == 0);
	/* v2 round trip: write, read, write gives the same bytes, sparse tables included. */
	s1 = profile_text(&p);
	CHECK(s1 && strstr(s1, "\"format\": \"balplan.profile/v2\"") &&
	      strstr(s1, "\"sparse_attention\": ["));
	if (!s1)
		goto out;
	CHECK(bp_json_parse_text(s1, strlen(s1), profile_cb, &q, &err) == 0);
	s2 = profile_text(&q);
	CHECK(s2 && !strcmp(s1, s2));
	CHECK(q.nsparse == 2 && q.sparse[0].tp == 4 && q.sparse[0].x[q.sparse[0].nx - 1] == 20000);
	/* The same profile as v1: no sparse tables, everything else kept; written back as v2
	 * it equals the v2 text with an empty sparse_attention. */
	root = bp_json_loadb(s1, strlen(s1), &err);
	CHECK(root != NULL);
	if (!root)
		goto out;
	json_object_set_new(root, "format", json_string("balplan.profile/v1"));
	json_object_del(root, "sparse_attention");
	v1text = bp_json_dump_canonical(root);
	CHECK(v1text && bp_json_parse_text(v1text, strlen(v1text), profile_cb, &r, &err) == 0);
	CHECK(r.nsparse == 0 && r.sparse == NULL && r.nattn == 2 && r.ncoll == q.ncoll);
	s3 = profile_text(&r);
	json_object_set_new(root, "format", json_string("balplan.profile/v2"));
	json_object_set_new(root, "sparse_attention", json_array());
	char *want = bp_json_dump_canonical(root);
	CHECK(s3 && want && !strcmp(s3, want));
	free(want);
	/* ...and reading that v2 text and writing it again changes nothing. */
	bp_profile_release(&q);
	CHECK(s3 && bp_json_parse_text(s3, strlen(s3), profile_cb, &q, &err) == 0);
	free(s2);
	s2 = profile_text(&q);
	CHECK(s2 && s3 && !strcmp(s2, s3));
	/* v1 does not know sparse_attention; v2 requires it. */
	json_object_set_new(root, "format", json_string("balplan.profile/v1"));
	CHECK(bp_profile_from_json(&r, root, &err) < 0);
	CHECK(!strcmp(err.text, "unknown key \"sparse_attention\" in profile"));
	json_object_set_new(root, "format", json_string("balplan.profile/v2"));
	json_object_del(root, "sparse_attention");
	CHECK(bp_profile_from_json(&r, root, &err) < 0);
	CHECK(!strcmp(err.text, "missing key \"sparse_attention\" in profile"));
	CHECK(r.nsparse == 0 && r.nattn == 2); /* a failed read leaves it as it was */
out:
	json_decref(root);
	free(s1);
	free(s2);
	free(s3);
	free(v1text);
	bp_profile_release(&p);
	bp_profile_release(&q);
	bp_profile_release(&r);
}

int main(void)
{
	test_pairs();
	test_sparse_predict();
	test_analytic_sparse();
	test_ca_task();
	test_alltoallv();
	test_check_scheme();
	test_versions();
	return CHECK_DONE();
}
