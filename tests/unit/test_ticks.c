/* test_ticks.c: DistCA's tick order (Sec. 4.1, Fig. 8) and byte model (the public code's). */
#include <stdlib.h>
#include <string.h>

#include "ca_sched.h"
#include "check.h"
#include "ticks.h"

/* Every (micro-batch, stage) runs its forward once and its backward once; a forward follows
 * the previous stage's, a backward the next stage's, and each stage runs its micro-batches in
 * order; the closed forms agree with the walk. */
static void test_order(void)
{
	for (int pp = 1; pp <= 5; pp++)
		for (size_t m = 1; m <= 7; m++) {
			size_t n = bp_ticks_count(pp, m);
			CHECK(n == 2 * (m + pp - 1));
			long *fpos = malloc(m * pp * sizeof(long)), *bpos = malloc(m * pp * sizeof(long));
			for (size_t i = 0; i < m * (size_t)pp; i++)
				fpos[i] = bpos[i] = -1;
			for (size_t k = 0; k < n; k++) {
				int phase_bwd = -1;
				for (int s = 0; s < pp; s++) {
					int bwd;
					size_t t;
					int64_t j = bp_tick_op(pp, m, k, s, &bwd, &t);
					/* all stages in the same phase per tick */
					CHECK(phase_bwd < 0 || phase_bwd == bwd);
					phase_bwd = bwd;
					if (j < 0)
						continue;
					long *slot = bwd ? &bpos[j * pp + s] : &fpos[j * pp + s];
					CHECK(*slot < 0);
					*slot = (long)k;
					if (!bwd)
						CHECK(bp_tick_fwd((size_t)j, s) == t);
					else
						CHECK(bp_tick_bwd_position(pp, m, (size_t)j, s) == k);
				}
			}
			for (size_t j = 0; j < m; j++)
				for (int s = 0; s < pp; s++) {
					long f = fpos[j * pp + s], b = bpos[j * pp + s];
					CHECK(f >= 0 && b > f);
					if (s > 0)
						CHECK(f > fpos[j * pp + s - 1]);
					if (s + 1 < pp)
						CHECK(b > bpos[j * pp + s + 1]);
					if (j > 0)
						CHECK(f > fpos[(j - 1) * pp + s] && b > bpos[(j - 1) * pp + s]);
				}
			free(fpos);
			free(bpos);
		}
}

/* CA-task ticks (ca_sched.h bp_ca_task_place): a forward task at its walk's forward position
 * and, reused, at its backward one; a backward tick's own task at the position where the
 * walk runs that (micro-batch, stage) backward; out-of-range ticks refused. Then a hand-worked
 * case: pp 2, m 2 (F = 3; positions F0 F1 B0 F2 B1 B2). */
static void test_task_place(void)
{
	for (int pp = 1; pp <= 4; pp++)
		for (size_t m = 1; m <= 5; m++) {
			size_t n = bp_ticks_count(pp, m), F = m + (size_t)pp - 1;
			for (size_t k = 0; k < n; k++)
				for (int s = 0; s < pp; s++) {
					int bwd, st;
					size_t t, pf, pb;
					int64_t j = bp_tick_op(pp, m, k, s, &bwd, &t);
					if (j < 0)
						continue;
					if (!bwd) {
						CHECK(bp_ca_task_place(pp, m, (int64_t)t, (size_t)j, 0, &st,
								       &pf, &pb) == 0);
						CHECK(st == s && pf == k &&
						      pb == bp_tick_bwd_position(pp, m, (size_t)j, s));
						CHECK(bp_ca_task_place(pp, m, (int64_t)t, (size_t)j, 1, &st,
								       &pf, &pb) == 0);
						CHECK(st == s && pf == k && pb == SIZE_MAX);
					} else {
						CHECK(bp_ca_task_place(pp, m, (int64_t)(F + t), (size_t)j, 1,
								       &st, &pf, &pb) == 0);
						CHECK(st == s && pb == k && pf == SIZE_MAX);
						/* without own backward tasks a tick from F is no tick */
						CHECK(bp_ca_task_place(pp, m, (int64_t)(F + t), (size_t)j, 0,
								       &st, &pf, &pb) < 0);
					}
				}
			int st;
			size_t pf, pb;
			CHECK(bp_ca_task_place(pp, m, (int64_t)(2 * F), 0, 1, &st, &pf, &pb) < 0);
			CHECK(bp_ca_task_place(pp, m, -1, 0, 1, &st, &pf, &pb) < 0);
			CHECK(bp_ca_task_place(pp, m, 0, m, 1, &st, &pf, &pb) < 0);
		}
	int st;
	size_t pf, pb;
	/* micro-batch 1 on stage 1: forward tick 2 (position 3), backward tick 1 (position 4),
	 * named 3 + 1 = 4 when it has its own placement; micro-batch 0 on stage 0: backward tick
	 * 1 too (position 4), micro-batch 0 on stage 1: backward tick 0 (position 2) */
	CHECK(bp_ca_task_place(2, 2, 2, 1, 0, &st, &pf, &pb) == 0 && st == 1 && pf == 3 &&
	      pb == 4);
	CHECK(bp_ca_task_place(2, 2, 4, 1, 1, &st, &pf, &pb) == 0 && st == 1 && pb == 4);
	CHECK(bp_ca_task_place(2, 2, 4, 0, 1, &st, &pf, &pb) == 0 && st == 0 && pb == 4);
	CHECK(bp_ca_task_place(2, 2, 3, 0, 1, &st, &pf, &pb) == 0 && st == 1 && pb == 2);
	CHECK(bp_ca_task_place(2, 2, 3, 1, 1, &st, &pf, &pb) < 0); /* stage 2 of 2 */
}

/* A known answer worked out by hand from the byte model: Llama-3-8B at TP 8, per token: Q 1024, K+V
 * 512, O 1024 without the log-sum-exp and 1040 with it; resend's backward Q side 3088 (Q, O,
 * dO, LSE) and K, V again; non-resend's backward dO alone (1024 per query token, no KV) in,
 * dQ 1024 and dK + dV 512 per deduplicated KV token out. The servers keep (non-resend) Q, O
 * and the LSE, 2064 per query token, and K, V, 512. */
static void test_bytes(void)
{
	struct bp_model md;
	memset(&md, 0, sizeof(md));
	md.layers = 32;
	md.hidden = 4096;
	md.heads = 32;
	md.kv_heads = 8;
	for (int resend = 0; resend < 2; resend++) {
		struct bp_ca_bytes f_in = bp_ca_bytes_per_token(&md, 8, 0, 0, resend);
		struct bp_ca_bytes f_out = bp_ca_bytes_per_token(&md, 8, 0, 1, resend);
		struct bp_ca_bytes b_in = bp_ca_bytes_per_token(&md, 8, 1, 0, resend);
		struct bp_ca_bytes b_out = bp_ca_bytes_per_token(&md, 8, 1, 1, resend);
		CHECK_NEAR(f_in.q_in, 1024, 0);
		CHECK_NEAR(f_in.kv_in, 512, 0);
		CHECK_NEAR(f_out.q_out, resend ? 1040 : 1024, 0);
		CHECK_NEAR(f_out.kv_out, 0, 0);
		CHECK_NEAR(b_in.q_in, resend ? 3088 : 1024, 0);
		if (resend) { /* the distca method's backward calls price their buffer so */
			double qb, kvb;
			bp_ca_token_bytes_bwd(&md, 8, &qb, &kvb);
			CHECK_NEAR(qb, b_in.q_in, 0);
			CHECK_NEAR(kvb, b_in.kv_in, 0);
		}
		CHECK_NEAR(b_in.kv_in, resend ? 512 : 0, 0);
		CHECK_NEAR(b_out.q_out, 1024, 0);
		CHECK_NEAR(b_out.kv_out, 512, 0);
	}
	double qk, kvk;
	bp_ca_kept_token_bytes(&md, 8, &qk, &kvk);
	CHECK_NEAR(qk, 2064, 0);
	CHECK_NEAR(kvk, 512, 0);
}

int main(void)
{
	test_order();
	test_task_place();
	test_bytes();
	return CHECK_DONE();
}
