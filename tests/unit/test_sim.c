/* test_sim.c: the pipeline simulator on the 1F1B row against hand-computed schedules. */
#include <stdlib.h>

#include "check.h"
#include "sim.h"

static double run(int pp, size_t m, const double *f, const double *b, const double *p2p,
		  double *busy)
{
	double finish[16];
	int64_t peak[16];
	double bz[16];
	struct bp_sim_pipe in = {.pp = pp, .m = m, .fwd = f, .bwd = b, .p2p = p2p};
	struct bp_sim_result out = {0, busy ? busy : bz, finish, peak, NULL, NULL};
	struct bp_error err;
	CHECK(bp_sim_pipeline(&in, &out, &err) == 0);
	return out.end;
}

/* Equal micro-batches: (m + p - 1)(t_f + t_b) for several shapes and ratios. */
static void test_equal(void)
{
	int pps[] = {1, 2, 4, 8};
	size_t ms[] = {1, 2, 4, 8, 13};
	double ratios[] = {1.0, 2.0, 3.5};
	for (size_t a = 0; a < 4; a++)
		for (size_t c = 0; c < 5; c++)
			for (size_t r = 0; r < 3; r++) {
				int pp = pps[a];
				size_t m = ms[c];
				double *f = calloc(m * pp, sizeof(double));
				double *b = calloc(m * pp, sizeof(double));
				for (size_t i = 0; i < m * (size_t)pp; i++) {
					f[i] = 10.0;
					b[i] = 10.0 * ratios[r];
				}
				double want = (double)(m + pp - 1) * (10.0 + 10.0 * ratios[r]);
				CHECK_NEAR(run(pp, m, f, b, NULL, NULL), want, 1e-9);
				free(f);
				free(b);
			}
}

/* One slow micro-batch (WLB-LLM Fig. 5): with the slow micro-batch first, the critical path
 * is exactly the slow micro-batch through every stage plus every micro-batch's forward and
 * backward on the first stage: (p - 1)(F_max + B_max) + sum_j (F_j + B_j). Elsewhere in the
 * order 1F1B hides part of it, so that value is an upper bound and the balanced schedule
 * with the same total work a lower one. */
static void test_one_slow(void)
{
	int pp = 4;
	size_t m = 6;
	for (size_t slow = 0; slow < m; slow++) {
		double f[24], b[24], sum = 0.0;
		for (size_t j = 0; j < m; j++)
			for (int s = 0; s < pp; s++) {
				f[j * pp + s] = j == slow ? 30.0 : 10.0;
				b[j * pp + s] = j == slow ? 60.0 : 20.0;
			}
		for (size_t j = 0; j < m; j++)
			sum += f[j * pp] + b[j * pp];
		double want = (pp - 1) * (30.0 + 60.0) + sum;
		double got = run(pp, m, f, b, NULL, NULL);
		double balanced = (m + pp - 1) * (sum / m);
		if (slow == 0)
			CHECK_NEAR(got, want, 1e-9);
		CHECK(got <= want + 1e-9);
		CHECK(got > balanced);
	}
}

/* Hand-traced case: pp 2, m 2, t_f 1, t_b 2, p2p 0.5.
 * stage0: F0 [0,1]            F1 [1,2]   B0 waits B0@s1: s1 F0 [1.5,2.5] B0 [2.5,4.5]
 * -> B0@s0 [5,7]; s1 F1 ready 2.5, starts 4.5 [4.5,5.5], B1 [5.5,7.5]; B1@s0 [8,10]. */
static void test_p2p(void)
{
	double f[4] = {1, 1, 1, 1}, b[4] = {2, 2, 2, 2}, p2p[2] = {0.5, 0.5}, busy[2];
	CHECK_NEAR(run(2, 2, f, b, p2p, busy), 10.0, 1e-9);
	CHECK_NEAR(busy[0], 6.0, 1e-9);
	CHECK_NEAR(busy[1], 6.0, 1e-9);
}

/* Activation memory: stage s holds at most min(p - s, m) micro-batches at once. */
static void test_memory(void)
{
	int pp = 4;
	size_t m = 8;
	double f[32], b[32], finish[4], busy[4];
	int64_t act[32], peak[4];
	for (int i = 0; i < 32; i++) {
		f[i] = 1;
		b[i] = 2;
		act[i] = 100;
	}
	struct bp_sim_pipe in = {.pp = pp, .m = m, .fwd = f, .bwd = b, .act = act};
	struct bp_sim_result out = {0, busy, finish, peak, NULL, NULL};
	struct bp_error err;
	CHECK(bp_sim_pipeline(&in, &out, &err) == 0);
	for (int s = 0; s < pp; s++)
		CHECK(peak[s] == 100 * (pp - s));
}

static void test_bad(void)
{
	double f[1] = {-1}, b[1] = {1}, finish[1], busy[1];
	int64_t peak[1];
	struct bp_sim_pipe in = {.pp = 1, .m = 1, .fwd = f, .bwd = b};
	struct bp_sim_result out = {0, busy, finish, peak, NULL, NULL};
	struct bp_error err;
	CHECK(bp_sim_pipeline(&in, &out, &err) == -1);
	in.pp = 0;
	CHECK(bp_sim_pipeline(&in, &out, &err) == -1);
	/* an idle pipeline */
	in.pp = 1;
	in.m = 0;
	CHECK(bp_sim_pipeline(&in, &out, &err) == 0 && out.end == 0.0);
}

int main(void)
{
	test_equal();
	test_one_slow();
	test_p2p();
	test_memory();
	test_bad();
	return CHECK_DONE();
}
