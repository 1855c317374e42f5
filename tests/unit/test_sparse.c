/* test_sparse.c: SparseBalance's DST building blocks (blocks/sparse_dst.h).
 *
 * Known answers worked out by hand: KAT-2 (Alg. 1 on a 4-micro-batch instance over the
 * kat_sparse.h table: anchors, aligned budgets, k_final and Eq. 11 for five values of p),
 * KAT-3 (Eq. 11). KAT-1 (MoBA work) and Perf.predict on the KAT-2 table are in
 * test_costkinds.c. Properties: DST's invariants (test_invariants) over random instances on
 * the KAT-2 table and the synthetic coverage model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kat_sparse.h"
#include "costkinds.h"
#include "rng.h"
#include "sparse_dst.h"

static const int64_t kat_mb[4] = {32768, 16384, 8192, 4096};

/* The table itself against P(x, 256, k) / 1e6 (the KAT-2 definition). */
static void test_table_is_moba(void)
{
	struct bp_sparse_table t = kat_table();
	for (size_t i = 0; i < 4; i++)
		for (size_t j = 0; j < 6; j++)
			CHECK_NEAR(bp_cost_sparse_attn(&t, kat_x[i], kat_k[j], 0),
				   round(bp_moba_pairs(kat_x[i], 256, kat_k[j]) / 1e3) / 1e3, 1e-9);
}

static void anchors(enum bp_sb_anchor a, double *anchor, int *ka)
{
	struct bp_sparse_table t = kat_table();
	double T[4];
	for (int j = 0; j < 4; j++)
		T[j] = bp_sb_predict(&t, &kat_mb[j], 1, 0.0, 32, 1);
	*anchor = bp_sb_anchor_time(T, 4, a);
	for (int j = 0; j < 4; j++)
		ka[j] = bp_sb_align(&t, &kat_mb[j], 1, 0.0, kat_k, 6, *anchor, 1);
}

static void test_kat2_anchors(void)
{
	struct bp_sparse_table t = kat_table();
	double want_T[4] = {231.752, 99.623, 33.559, 8.391};
	for (int j = 0; j < 4; j++)
		CHECK_NEAR(bp_sb_predict(&t, &kat_mb[j], 1, 0.0, 32, 1), want_T[j], 1e-9);
	double anc;
	int ka[4];
	anchors(BP_SB_MEAN, &anc, ka);
	CHECK_NEAR(anc, 93.33125, 1e-9);
	CHECK(ka[0] == 8 && ka[1] == 24 && ka[2] == 64 && ka[3] == 64);
	anchors(BP_SB_MIN, &anc, ka);
	CHECK_NEAR(anc, 8.391, 1e-12);
	CHECK(ka[0] == 8 && ka[1] == 8 && ka[2] == 8 && ka[3] == 64);
	anchors(BP_SB_MAX, &anc, ka);
	CHECK_NEAR(anc, 231.752, 1e-12);
	CHECK(ka[0] == 32 && ka[1] == 64 && ka[2] == 64 && ka[3] == 64);
}

/* The MEAN anchor with hand-chosen coverage curves, five values of p. */
static void test_kat2_final(void)
{
	struct bp_sparse_table t = kat_table();
	static const double c32[6] = {.55, .70, .80, .86, .93, .97};
	static const double c16[6] = {.80, .90, .95, .97, .99, 1.0};
	static const double c_one[6] = {1, 1, 1, 1, 1, 1};
	const double *cov[4] = {c32, c16, c_one, c_one};
	static const double ps[5] = {0, 0.05, 0.1, 0.2, 0.35};
	static const int want[5][4] = {{32, 32, 64, 64}, {32, 24, 64, 64}, {24, 24, 64, 64},
				       {16, 24, 64, 64}, {8, 24, 64, 64}};
	static const double want_imb[5] = {2.4831, 2.6173, 2.3756, 1.9979, 1.7542};
	double anc;
	int ka[4];
	anchors(BP_SB_MEAN, &anc, ka);
	for (int q = 0; q < 5; q++) {
		double T[4];
		for (int j = 0; j < 4; j++) {
			int kc = bp_sb_kcov(kat_k, 6, cov[j], cov[j][3], 32, ps[q]);
			int kf = bp_sb_kfinal(ka[j], kc);
			CHECK(kf == want[q][j]);
			T[j] = bp_sb_predict(&t, &kat_mb[j], 1, 0.0, kf, 1);
		}
		CHECK_NEAR(bp_sb_imbalance(T, 4), want_imb[q], 5e-5);
	}
	/* p = 0.1, the 32K micro-batch: the empty-F case, k_final = 24 misses the anchor. */
	CHECK(bp_sb_predict(&t, &kat_mb[0], 1, 0.0, 24, 1) > anc);
}

static void test_kat3(void)
{
	double a[3] = {4, 2, 2}, b[4] = {3, 3, 3, 3};
	CHECK_NEAR(bp_sb_imbalance(a, 3), 1.5, 1e-12);
	CHECK_NEAR(bp_sb_imbalance(b, 4), 1.0, 1e-12);
	/* Per-slot reading: 2 pipelines x 2 slots; slot means 3 and 1 -> 3 / 2. */
	double c[4] = {4, 1, 2, 1};
	CHECK_NEAR(bp_sb_imbalance_slot(c, 2, 2), 1.5, 1e-12);
	CHECK_NEAR(bp_sb_imbalance(c, 4), 2.0, 1e-12);
	CHECK(bp_sb_imbalance_slot(c, 2, 2) <= bp_sb_imbalance(c, 4));
}

static void test_parse(void)
{
	struct bp_error err;
	int *k = NULL;
	size_t n = 0;
	CHECK(bp_sb_kset_parse("1,2,4,64", &k, &n, &err) == 0 && n == 4 && k[3] == 64);
	free(k);
	CHECK(bp_sb_kset_parse("1,2,2", &k, &n, &err) < 0);
	CHECK(strstr(err.text, "entry 3") != NULL);
	CHECK(bp_sb_kset_parse("0,2", &k, &n, &err) < 0);
	CHECK(bp_sb_kset_parse("", &k, &n, &err) < 0);
	CHECK(bp_sb_kset_parse("4,x", &k, &n, &err) < 0);
	CHECK(bp_sb_kset_parse("4,", &k, &n, &err) < 0);
	enum bp_sb_anchor a;
	CHECK(bp_sb_anchor_parse("mean", &a) == 0 && a == BP_SB_MEAN);
	CHECK(bp_sb_anchor_parse("median", &a) < 0);
}

/* Synthetic coverage: C(k90) = 0.9, monotone, 1 once every past chunk is selected; the k90
 * draw is in range and depends only on (seed, doc, layer). */
static void test_synthetic(void)
{
	static const int ks[] = {1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64};
	for (int64_t m = 40; m <= 511; m += 47)
		for (int k90 = 10; k90 <= 50; k90 += 8) {
			if (m <= k90 - 1)
				continue;
			double al = bp_sb_syn_alpha(m, k90);
			int kk[1] = {k90};
			double c[1], cb, call[14], cb2;
			bp_sb_syn_cov(m, al, kk, 1, 32, c, &cb);
			if (al > 0)
				CHECK_NEAR(c[0], 0.9, 1e-6);
			else
				CHECK(c[0] >= 0.9);
			bp_sb_syn_cov(m, al, ks, 14, 32, call, &cb2);
			CHECK(cb == cb2);
			for (int i = 1; i < 14; i++)
				CHECK(call[i] >= call[i - 1]);
			CHECK(call[0] == 0.0); /* k = 1: the own chunk only */
		}
	double c[1], cb;
	int k64[1] = {64};
	bp_sb_syn_cov(63, 1.0, k64, 1, 32, c, &cb);
	CHECK(c[0] == 1.0);
	int lo = 1000, hi = 0;
	for (int d = 0; d < 2000; d++) {
		int v = bp_sb_syn_k90(7, d, d % 36, 36, 10, 50, 0);
		lo = v < lo ? v : lo;
		hi = v > hi ? v : hi;
		CHECK(v == bp_sb_syn_k90(7, d, d % 36, 36, 10, 50, 0));
	}
	CHECK(lo == 10 && hi == 50);
	CHECK(bp_sb_syn_k90(7, 5, 35, 36, 10, 10, 1.0) == 20); /* slope 1 doubles the last layer */
}

/* DST's invariants (the checks below: anchors, budgets in the set, the coverage bound,
 * monotone in p) over random micro-batches on the KAT-2 table and random coverage. */
static void test_invariants(void)
{
	struct bp_sparse_table t = kat_table();
	struct bp_rng r;
	bp_rng_seed(&r, 11);
	for (int trial = 0; trial < 300; trial++) {
		size_t n = 1 + bp_rng_below(&r, 8);
		int64_t lens[8];
		double T[8];
		for (size_t j = 0; j < n; j++) {
			lens[j] = 256 + (int64_t)bp_rng_below(&r, 60000);
			T[j] = bp_sb_predict(&t, &lens[j], 1, 1.0, 32, 0);
		}
		enum bp_sb_anchor a = (enum bp_sb_anchor)bp_rng_below(&r, 3);
		double anc = bp_sb_anchor_time(T, n, a);
		if (n == 1)
			CHECK(anc == T[0]);
		for (size_t j = 0; j < n; j++) {
			int ka = bp_sb_align(&t, &lens[j], 1, 1.0, kat_k, 6, anc, 0);
			/* align(x, predict(x, k)) >= k */
			CHECK(bp_sb_align(&t, &lens[j], 1, 1.0, kat_k, 6, T[j], 0) >= 32);
			if (a == BP_SB_MAX || n == 1)
				CHECK(ka >= 32);
			double c[6], cb;
			int64_t m = (lens[j] + 255) / 256 - 1;
			double al = bp_sb_syn_alpha(m, 10 + (int)bp_rng_below(&r, 41));
			bp_sb_syn_cov(m, al, kat_k, 6, 32, c, &cb);
			int prev = 1 << 20;
			for (double p = 0; p <= 0.5; p += 0.05) {
				int kc = bp_sb_kcov(kat_k, 6, c, cb, 32, p);
				int kf = bp_sb_kfinal(ka, kc);
				CHECK(kf <= prev); /* non-increasing in p */
				prev = kf;
				int idx = 0;
				while (idx < 6 && kat_k[idx] != kf)
					idx++;
				CHECK(idx < 6);                          /* k_final in K */
				CHECK(cb - c[idx] <= p + 1e-9);          /* coverage bound */
				if (T[j] > anc)
					CHECK(ka <= kf && kf <= 32);
				else
					CHECK(kf == ka && ka >= 32);
				if (p == 0)
					CHECK(kf >= 32 || cb - c[idx] == 0); /* no compression */
			}
		}
	}
}

/* bp_sb_syn_solve gives bp_sb_syn_alpha then bp_sb_syn_cov's doubles bit for bit: one
 * struct over every key (its tables grow past their first 256 when m does), budget sets below
 * and above the 64 that bp_sb_syn_cov passes in one sweep, every k90 branch (alpha 0, the
 * bracket's tabulated points, Newton), and the tables rebuilt after bp_sb_syn_free. */
static void test_syn_solve(void)
{
	static const int ks[] = {1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64};
	int big[80];
	for (int i = 0; i < 80; i++)
		big[i] = 1 + 3 * i;
	struct bp_sb_syn s;
	memset(&s, 0, sizeof(s));
	for (int pass = 0; pass < 2; pass++) {
		for (int64_t m = 0; m <= 700; m += m < 80 ? 1 : 37)
			for (int k90 = 2; k90 <= 200; k90 += k90 < 20 ? 1 : 13) {
				const int *kset = (m + k90) % 3 ? ks : big;
				size_t nk = kset == ks ? 14 : 80;
				int k_base = 16 + (int)(m % 40);
				double a[81], b[81];
				bp_sb_syn_cov(m, bp_sb_syn_alpha(m, k90), kset, nk, k_base, a, &a[nk]);
				bp_sb_syn_solve(&s, m, k90, kset, nk, k_base, b, &b[nk]);
				CHECK(!memcmp(a, b, (nk + 1) * sizeof(*a)));
			}
		bp_sb_syn_free(&s);
		CHECK(s.cap == 0 && !s.lj);
	}
}

int main(void)
{
	test_table_is_moba();
	test_kat2_anchors();
	test_kat2_final();
	test_kat3();
	test_parse();
	test_synthetic();
	test_syn_solve();
	test_invariants();
	return CHECK_DONE();
}
