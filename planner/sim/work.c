/* work.c: model FLOPs per step and work-normalised throughput (work.h). */
#include "work.h"

#include "ca_sched.h"
#include "flops.h"

void bp_plan_step_work(struct bp_plan *p, double *total)
{
	for (size_t i = 0; i < p->nsteps; i++) {
		struct bp_step *st = &p->steps[i];
		double f = 0.0;
		for (size_t k = 0; k < st->npipes; k++)
			for (size_t j = 0; j < st->pipes[k].nmbs; j++) {
				const struct bp_mb *mb = &st->pipes[k].mbs[j];
				struct bp_mb_desc d = {mb->spans, mb->nspans, mb->shard, mb->attn,
						       mb->sparse_block, mb->sparse_k};
				f += bp_flops_mb(&p->model, &d);
				/* disaggregated: the pairs come from the CA-tasks below (a
				 * piece's queries attend the document's prefix on other
				 * pipelines too, DistCA Sec. 6.1), not from the spans alone */
				for (size_t q = 0; mb->attn == BP_ATTN_DISAGG && q < mb->nspans; q++) {
					double a;
					bp_flops_seq(&p->model, mb->spans[q].len, NULL, &a, NULL);
					f -= a;
				}
			}
		/* each (micro-batch, stage) has its own CA-tasks; the pairs are the model's
		 * once per micro-batch, so a stage's share is layers / pp of them; backward
		 * ticks' own placements (ca_sched.h bp_ca_task_place: ticks from m + pp - 1 on)
		 * serve the same pairs again and are not counted */
		const struct bp_layout *l = st->nca && p->nlayouts ? bp_plan_layout(p, st) : NULL;
		double pp = l && l->npipes ? l->pipes[0].sc.pp : 1;
		size_t m = 0;
		for (size_t k = 0; k < st->npipes; k++)
			if (st->pipes[k].nmbs > m)
				m = st->pipes[k].nmbs;
		const int64_t F = (int64_t)m + (int64_t)pp - 1;
		for (size_t t = 0; t < st->nca; t++) {
			const struct bp_ca_task *c = &st->ca[t];
			if (c->tick >= F)
				continue;
			f += 3.0 * p->model.layers * 4.0 * p->model.hidden *
			     (double)bp_ca_pairs(c->q0 - c->kv0, c->q1 - c->kv0) / pp;
		}
		st->m.model_tflop = f / 1e12;
		*total += f;
	}
}

void bp_plan_work_summary(struct bp_plan *p, double total, const struct bp_profile *prof)
{
	struct bp_summary *s = &p->summary;
	s->model_tflop = total / 1e12;
	double secs = s->total_us * 1e-6;
	s->model_tflops_per_gpu = secs > 0 && p->cluster.gpus > 0
					  ? s->model_tflop / secs / p->cluster.gpus : 0.0;
	double peak = prof ? prof->hw.bf16_tflops : 0.0;
	s->mfu = peak > 0 ? s->model_tflops_per_gpu / peak : 0.0;
}

void bp_plan_predict_work(struct bp_plan *p, const struct bp_profile *prof)
{
	double total = 0.0;
	bp_plan_step_work(p, &total);
	bp_plan_work_summary(p, total, prof);
}
