/* test_exec_grad_sync.c: a plan with grad_sync=overlap (sim/predict.c) before the replay
 * engine (executor/engine.c bp_engine_check): an emulating backend (idle_until) replays it, a
 * backend that runs its collectives for real is refused with the reason, and a plan without
 * the parameter is replayed by both. */
#include <string.h>

#include "analytic.h"
#include "check.h"
#include "engine.h"
#include "solve_fixture.h"

static int idle(void *st, double t_us, struct bp_error *err)
{
	(void)st;
	(void)t_us;
	(void)err;
	return 0;
}

int main(void)
{
	struct bp_error err = {""};
	struct bp_profile prof;
	struct bp_scheme sc = {1, 1, 1};
	test_h100_profile(&prof, "wlb-550m", sc, 8192);
	struct bp_param par = {"grad_sync", "overlap"};
	struct bp_solve_opts o = test_solve_opts("plain", "slimpajama-commoncrawl", sc, 4);
	o.steps = 2;
	o.max_tokens = 8192;
	o.tokens_per_step = 8 * 8192;
	o.seed = 1;
	struct bp_plan plain, overlap;
	bp_plan_init(&plain);
	bp_plan_init(&overlap);
	CHECK(test_solve_preset(&prof, &o, &plain, &err) == 0);
	o.params = &par;
	o.nparams = 1;
	CHECK(test_solve_preset(&prof, &o, &overlap, &err) == 0);
	struct bp_backend real = {.name = "real"}, emu = {.name = "emu", .idle_until = idle};
	CHECK(bp_engine_check(&plain, &real, 0, 2, &err) == 0);
	CHECK(bp_engine_check(&plain, &emu, 0, 2, &err) == 0);
	CHECK(bp_engine_check(&overlap, &emu, 0, 2, &err) == 0);
	CHECK(bp_engine_check(&overlap, &real, 0, 2, &err) < 0);
	CHECK(!strcmp(err.text, "step 0 asks for grad_sync=overlap (the gradient reduce-scatter "
				"during the last backward), which the real backend cannot replay: it "
				"runs the sync after the pipeline; the host backend emulates it, or "
				"solve without the parameter"));
	bp_plan_release(&plain);
	bp_plan_release(&overlap);
	bp_profile_release(&prof);
	return CHECK_DONE();
}
