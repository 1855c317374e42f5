/* test_schedule.c: the schedule table (planner/model/schedule.c) and the event simulator
 * running its rows: interleaved 1F1B against a schedule worked out by hand, its op order
 * complete and causal, its closed-form bubble, its in-flight memory; 1F1B unchanged. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "schedule.h"
#include "sim.h"

static const struct bp_schedule *row(const char *name)
{
	const struct bp_schedule *s = bp_schedule_find(name);
	CHECK(s != NULL);
	return s;
}

/* pp 2, v 2, m 4 by hand (Megatron-LM's order with groups of pp micro-batches): the forward
 * ids run (mb, chunk) = (0,0) (1,0) (0,1) (1,1) (2,0) (3,0) (2,1) (3,1); backward ids the
 * same with the chunk reversed. Rank 0 warms up with (2-0-1)*2 + (2-1)*2 = 4 forwards, rank 1
 * with 2. Ops written "F mb chunk" / "B mb chunk". */
static void test_hand(void)
{
	static const char *const want[2][16] = {
		{"F00", "F10", "F01", "F11", "F20", "B01", "F30", "B11", "F21", "B00", "F31", "B10",
		 "B21", "B31", "B20", "B30"},
		{"F00", "F10", "F01", "B01", "F11", "B11", "F20", "B00", "F30", "B10", "F21", "B21",
		 "F31", "B31", "B20", "B30"},
	};
	const struct bp_schedule *s = row("interleaved");
	for (int st = 0; st < 2; st++)
		for (size_t k = 0; k < 16; k++) {
			struct bp_sched_op op;
			char got[4];
			s->op(2, 2, 4, st, k, &op);
			got[0] = op.bwd ? 'B' : 'F';
			got[1] = (char)('0' + op.mb);
			got[2] = (char)('0' + op.chunk);
			got[3] = 0;
			if (strcmp(got, want[st][k]))
				fprintf(stderr, "stage %d op %zu: %s, want %s\n", st, k, got,
					want[st][k]);
			CHECK(!strcmp(got, want[st][k]));
		}
}

/* Every (mb, chunk, direction) exactly once per stage, the forward before the backward. */
static void test_complete(void)
{
	const struct bp_schedule *s = row("interleaved");
	int pps[] = {2, 3, 4, 8};
	int vs[] = {2, 3, 4};
	for (size_t a = 0; a < 4; a++)
		for (size_t b = 0; b < 3; b++)
			for (size_t g = 1; g <= 4; g++) {
				int pp = pps[a], v = vs[b];
				size_t m = g * (size_t)pp, n = 2 * m * (size_t)v;
				for (int st = 0; st < pp; st++) {
					size_t *seen = calloc(n, sizeof(size_t));
					for (size_t k = 0; k < n; k++) {
						struct bp_sched_op op;
						s->op(pp, v, m, st, k, &op);
						CHECK(op.mb < m && op.chunk >= 0 && op.chunk < v);
						size_t at = (op.mb * (size_t)v + (size_t)op.chunk) * 2;
						CHECK(!seen[at + (size_t)op.bwd]);
						seen[at + (size_t)op.bwd] = k + 1;
						if (op.bwd)
							CHECK(seen[at] && seen[at] < k + 1);
					}
					free(seen);
				}
			}
}

static double run(const struct bp_schedule *s, int pp, int v, size_t m, double tf, double tb,
		  const int64_t *act, int64_t *peak)
{
	size_t n = m * (size_t)pp * (size_t)v;
	double *f = calloc(n, sizeof(double)), *b = calloc(n, sizeof(double));
	double busy[16], finish[16];
	int64_t pk[16];
	for (size_t i = 0; i < n; i++) {
		f[i] = tf / v;
		b[i] = tb / v;
	}
	struct bp_sim_pipe in = {.pp = pp, .m = m, .fwd = f, .bwd = b, .act = act, .sched = s,
				 .v = v};
	struct bp_sim_result out = {0, busy, finish, peak ? peak : pk, NULL, NULL};
	struct bp_error err;
	CHECK(bp_sim_pipeline(&in, &out, &err) == 0);
	free(f);
	free(b);
	return out.end;
}

/* Equal micro-batches of forward tf and backward tb per stage, split evenly over v chunks:
 * the pipeline takes (m + (pp - 1) / v)(tf + tb), the closed form of Megatron-LM's
 * interleaved schedule; v = 1 on the 1f1b row gives (m + pp - 1)(tf + tb). */
static void test_closed_form(void)
{
	const struct bp_schedule *il = row("interleaved"), *one = row("1f1b");
	int pps[] = {2, 4, 8};
	int vs[] = {2, 3, 4};
	double ratios[] = {1.0, 2.0};
	for (size_t a = 0; a < 3; a++)
		for (size_t c = 0; c < 3; c++)
			for (size_t g = 1; g <= 4; g++)
				for (size_t r = 0; r < 2; r++) {
					int pp = pps[a], v = vs[c];
					size_t m = g * (size_t)pp;
					double tf = 12.0, tb = 12.0 * ratios[r];
					double got = run(il, pp, v, m, tf, tb, NULL, NULL);
					double want = bp_schedule_closed_form(pp, v, m, tf + tb);
					if (fabs(got - want) > 1e-6)
						fprintf(stderr, "pp %d v %d m %zu: %.3f, want %.3f\n", pp,
							v, m, got, want);
					CHECK_NEAR(got, want, 1e-6);
					CHECK_NEAR(run(one, pp, 1, m, tf, tb, NULL, NULL),
						   bp_schedule_closed_form(pp, 1, m, tf + tb), 1e-6);
				}
}

/* In-flight chunks: rank 0 of pp 4, v 2 runs (4-1)*2 + 4 = 10 warm-up forwards and one more
 * forward before its first backward, so it holds 11 chunks of half a stage's activations
 * (5.5 stages' worth) where 1F1B holds pp = 4 micro-batches. */
static void test_memory(void)
{
	int pp = 4, v = 2;
	size_t m = 8, n = m * (size_t)pp * (size_t)v;
	int64_t *act = calloc(n, sizeof(int64_t)), peak[4];
	for (size_t i = 0; i < n; i++)
		act[i] = 50; /* a stage's 100 bytes over 2 chunks */
	run(row("interleaved"), pp, v, m, 10.0, 20.0, act, peak);
	CHECK(peak[0] == 11 * 50);
	CHECK(peak[pp - 1] == (int64_t)((v - 1) * pp + 1) * 50);
	for (size_t i = 0; i < m * (size_t)pp; i++)
		act[i] = 100;
	run(row("1f1b"), pp, 1, m, 10.0, 20.0, act, peak);
	CHECK(peak[0] == 4 * 100 && peak[pp - 1] == 100);
	free(act);
}

/* The rules: interleaved needs m a multiple of pp; the table's names. */
static void test_rules(void)
{
	const struct bp_schedule *il = row("interleaved");
	struct bp_error err;
	CHECK(il->check_count(4, 2, 8, &err) == 0);
	CHECK(il->check_count(4, 2, 0, &err) == 0);
	CHECK(il->check_count(4, 2, 6, &err) < 0 && strstr(err.text, "multiple of pp 4"));
	CHECK(row("1f1b")->check_count == NULL && !row("1f1b")->chunked);
	CHECK(row("distca-ticks")->world_ticks && row("distca-ticks")->op == NULL);
	CHECK(bp_schedule_find("gpipe") == NULL && bp_schedule_find(NULL) == NULL);
	char names[128];
	bp_schedule_names(names, sizeof(names));
	CHECK(!strcmp(names, "1f1b, interleaved or distca-ticks"));
}

int main(void)
{
	test_hand();
	test_complete();
	test_closed_form();
	test_memory();
	test_rules();
	printf("test_schedule: %d checks, %d failed\n", check_count, check_failures);
	return check_failures != 0;
}
