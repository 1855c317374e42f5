/* test_grad_sync.c: plan parameter grad_sync (plan/method.h; the model in sim/predict.c,
 * sync_overlap_times): the exposed default keeps dp-allreduce's model and records nothing;
 * overlap (Megatron-LM's --overlap-grad-reduce) and overlap-gather (with
 * --overlap-param-gather) against values computed here from the plan's micro-batch times and
 * the cost model's collectives, on one-stage pipelines, where a pipeline's ops run back to
 * back; the closed forms where compute hides every bucket but the last; the replay's wait
 * (bp_sync_overlap_wait); check's re-prediction; a bad value refused. */
#include <math.h>
#include <string.h>

#include "analytic.h"
#include "check.h"
#include "method.h"
#include "predict.h"
#include "solve_fixture.h"

/* wlb-550m on 4 H100s, one-stage pipelines, dp 4: 0.55B parameters per rank, so with
 * Megatron-LM's 40M-parameter buckets 14 of them. */
static int solve_gs(const struct bp_profile *prof, struct bp_scheme sc, int gpus, const char *gs,
		    struct bp_plan *p, struct bp_error *err)
{
	struct bp_param par;
	memset(&par, 0, sizeof(par));
	strcpy(par.key, "grad_sync");
	if (gs)
		strcpy(par.value, gs);
	struct bp_solve_opts o = test_solve_opts("plain", "slimpajama-commoncrawl", sc, gpus);
	o.steps = 3;
	o.max_tokens = 8192;
	o.tokens_per_step = 16 * 8192;
	o.seed = 1;
	o.params = &par;
	o.nparams = gs ? 1 : 0;
	bp_plan_init(p);
	return test_solve_preset(prof, &o, p, err);
}

/* What the test derives for step st of a one-stage plan: the end of the step's sync from its
 * start, with gather 1 for overlap-gather. closed: set to 1 when every bucket's collective
 * is shorter than the compute between two buckets (the closed form's condition). */
static double hand_end(const struct bp_plan *p, const struct bp_step *st,
		       const struct bp_costmodel *cm, int gather, int *closed, double *rem_rs,
		       double *rem_ag)
{
	const struct bp_model *m = &p->model;
	double E = (double)m->layers * (double)bp_model_layer_params(m) +
		   2.0 * (double)m->hidden * m->vocab; /* embedding and LM head, tp 1 */
	double B = fmax(40e6, 1e6 * (double)st->npipes);
	int nb = (int)ceil(E / B);
	double rem = E - (nb - 1) * B; /* the last bucket in backward order, first in forward */
	double end_max = 0.0, shift[16] = {0}, end[16] = {0}, dur[16] = {0}, rs = 0.0, ag = 0.0;
	*rem_rs = bp_coll_cost(&cm->sync_reducescatter, 2.0 * rem);
	*rem_ag = bp_coll_cost(&cm->sync_allgather, 2.0 * rem);
	*closed = 1;
	for (size_t k = 0; k < st->npipes && k < 16; k++) {
		const struct bp_pipe *pi = &st->pipes[k];
		double f0 = pi->mbs[0].fwd[0], before = 0.0, c = 0.0;
		end[k] = pi->time_us; /* one stage: the last op is the last backward */
		dur[k] = pi->mbs[pi->nmbs - 1].bwd[0];
		for (int q = nb - 1; gather && q >= 0; q--) {
			double size = q == nb - 1 ? rem : B;
			c += bp_coll_cost(&cm->sync_allgather, 2.0 * size);
			shift[k] = fmax(shift[k], c - f0 * before / E);
			*closed &= bp_coll_cost(&cm->sync_allgather, 2.0 * B) < f0 * B / E;
			before += size;
		}
		end[k] += shift[k];
		end_max = fmax(end_max, end[k]);
		*closed &= bp_coll_cost(&cm->sync_reducescatter, 2.0 * B) < dur[k] * B / E;
	}
	for (int q = 0; q < nb; q++) {
		double size = q == nb - 1 ? rem : B, ready = 0.0;
		for (size_t k = 0; k < st->npipes && k < 16; k++)
			ready = fmax(ready, end[k] - dur[k] * (1.0 - fmin(1.0, (q + 1) * B / E)));
		rs = fmax(rs, ready) + bp_coll_cost(&cm->sync_reducescatter, 2.0 * size);
		ag += bp_coll_cost(&cm->sync_allgather, 2.0 * size);
	}
	CHECK(nb == 14);
	return fmax(fmax(st->m.pipe_max_us, end_max), rs) + (gather ? 0.0 : ag);
}

static void test_one_stage(void)
{
	struct bp_error err = {""};
	struct bp_profile prof;
	struct bp_scheme sc = {1, 1, 1};
	test_h100_profile(&prof, "wlb-550m", sc, 8192);
	struct bp_plan p[4];
	const char *modes[] = {NULL, "exposed", "overlap", "overlap-gather"};
	for (int i = 0; i < 4; i++)
		CHECK(solve_gs(&prof, sc, 4, modes[i], &p[i], &err) == 0);
	/* the default records nothing; a given value is recorded */
	CHECK(!bp_plan_param(&p[0], "grad_sync"));
	CHECK(!strcmp(bp_plan_param(&p[2], "grad_sync"), "overlap"));
	struct bp_costs costs;
	bp_costs_init(&costs, &prof);
	const struct bp_costmodel *cm = bp_costs_pipe(&costs, &p[2].layouts[0], 0, &err);
	CHECK(cm && cm->sync_ranks == 4);
	int closed_seen = 0;
	for (size_t s = 0; cm && s < p[0].nsteps; s++) {
		const struct bp_step *a = &p[0].steps[s], *e = &p[1].steps[s], *o = &p[2].steps[s],
				     *g = &p[3].steps[s];
		/* exposed: v1's model, the whole reduce-scatter and all-gather in one call each */
		CHECK(a->m.grad_sync_us == e->m.grad_sync_us);
		CHECK_NEAR(a->m.grad_sync_us, bp_cost_grad_sync(cm, 0), 1e-9);
		CHECK(a->m.pipe_max_us == o->m.pipe_max_us && a->m.pipe_max_us == g->m.pipe_max_us);
		int closed, closed_g;
		double rrs, rag;
		double want_o = hand_end(&p[2], o, cm, 0, &closed, &rrs, &rag) - o->m.pipe_max_us;
		double want_g = hand_end(&p[3], g, cm, 1, &closed_g, &rrs, &rag) - g->m.pipe_max_us;
		CHECK_NEAR(o->m.grad_sync_us, want_o, 1e-6);
		CHECK_NEAR(g->m.grad_sync_us, want_g, 1e-6);
		CHECK_NEAR(o->m.step_us, o->m.pipe_max_us + o->m.grad_sync_us, 1e-6);
		CHECK(g->m.grad_sync_us < o->m.grad_sync_us && o->m.grad_sync_us < a->m.grad_sync_us);
		if (closed && closed_g) {
			/* compute hides every reduce-scatter but the last bucket's: what is left is
			 * that one and every all-gather; with the gather overlapped, the first
			 * bucket's all-gather before the first forward and the last reduce-scatter */
			double ag = 13 * bp_coll_cost(&cm->sync_allgather, 2.0 * 40e6) + rag;
			CHECK_NEAR(o->m.grad_sync_us, rrs + ag, 1e-6);
			CHECK_NEAR(g->m.grad_sync_us, rag + rrs, 1e-6);
			closed_seen++;
		}
		/* the replay's wait: from each pipeline's end to the step's sync end */
		for (size_t k = 0; k < o->npipes; k++) {
			double w;
			CHECK(bp_sync_overlap_wait(&p[2], o, &costs, k, 0, &w, &err) == 0);
			CHECK_NEAR(w, o->m.pipe_max_us + o->m.grad_sync_us - o->pipes[k].time_us,
				   1e-6);
			CHECK(bp_sync_overlap_wait(&p[3], g, &costs, k, 0, &w, &err) == 0);
			CHECK_NEAR(w, g->m.pipe_max_us + g->m.grad_sync_us - g->pipes[k].time_us,
				   1e-6);
		}
		CHECK(bp_sync_overlap_wait(&p[1], e, &costs, 0, 0, &(double){0}, &err) < 0);
		CHECK(bp_step_grad_overlap(&p[0], a, &err) == 0);
		CHECK(bp_step_grad_overlap(&p[2], o, &err) == 1);
		CHECK(bp_step_grad_overlap(&p[3], g, &err) == 2);
	}
	CHECK(closed_seen > 0);
	/* check re-predicts with the parameter */
	for (int i = 0; i < 4; i++)
		CHECK(bp_plan_check(&p[i], &prof, &err) == 0);
	/* a bad value: refused by the reader and by the simulator */
	CHECK(bp_plan_set_param(&p[2], "grad_sync", "sometimes", &err) == 0);
	CHECK(bp_param_grad_sync(&p[2], &err) < 0);
	CHECK(!strcmp(err.text, "parameter grad_sync is 'sometimes', not 'exposed', 'overlap' or "
				"'overlap-gather'"));
	bp_costs_release(&costs);
	bp_costs_init(&costs, &prof);
	CHECK(bp_plan_repredict(&p[2], &costs, &err) < 0);
	CHECK(strstr(err.text, "step 0") && strstr(err.text, "parameter grad_sync is 'sometimes'"));
	bp_costs_release(&costs);
	for (int i = 0; i < 4; i++)
		bp_plan_release(&p[i]);
	bp_profile_release(&prof);
}

/* Two stages (pp 2, dp 2): later stages keep one bucket and sync while stage 0 drains; the
 * overlapped sync is never longer than the exposed one, and check re-predicts it. */
static void test_two_stages(void)
{
	struct bp_error err = {""};
	struct bp_profile prof;
	struct bp_scheme sc = {1, 1, 2};
	test_h100_profile(&prof, "wlb-550m", sc, 8192);
	struct bp_plan p[3];
	const char *modes[] = {NULL, "overlap", "overlap-gather"};
	for (int i = 0; i < 3; i++) {
		CHECK(solve_gs(&prof, sc, 4, modes[i], &p[i], &err) == 0);
		CHECK(bp_plan_check(&p[i], &prof, &err) == 0);
	}
	struct bp_costs costs;
	bp_costs_init(&costs, &prof);
	const struct bp_costmodel *cm = bp_costs_pipe(&costs, &p[0].layouts[0], 0, &err);
	CHECK(cm && bp_cost_grad_bucket_params(cm, 0) == 40e6);
	CHECK(cm && bp_cost_grad_bucket_params(cm, 1) == bp_cost_stage_params(cm, 1));
	for (size_t s = 0; s < p[0].nsteps; s++) {
		CHECK(p[1].steps[s].m.grad_sync_us <= p[0].steps[s].m.grad_sync_us);
		CHECK(p[2].steps[s].m.grad_sync_us <= p[1].steps[s].m.grad_sync_us);
		CHECK(p[1].steps[s].m.grad_sync_us > 0);
	}
	bp_costs_release(&costs);
	for (int i = 0; i < 3; i++)
		bp_plan_release(&p[i]);
	bp_profile_release(&prof);
}

int main(void)
{
	test_one_stage();
	test_two_stages();
	return CHECK_DONE();
}
