/* work.c: model FLOPs per step and work-normalised throughput (work.h). */
#include "work.h"

#include "flops.h"

void bp_plan_predict_work(struct bp_plan *p, const struct bp_profile *prof)
{
	struct bp_summary *s = &p->summary;
	double total = 0.0;
	for (size_t i = 0; i < p->nsteps; i++) {
		struct bp_step *st = &p->steps[i];
		double f = 0.0;
		for (size_t k = 0; k < st->npipes; k++)
			for (size_t j = 0; j < st->pipes[k].nmbs; j++) {
				const struct bp_mb *mb = &st->pipes[k].mbs[j];
				struct bp_mb_desc d = {mb->spans, mb->nspans, mb->shard, mb->attn,
						       mb->sparse_block, mb->sparse_k};
				f += bp_flops_mb(&p->model, &d);
			}
		st->m.model_tflop = f / 1e12;
		total += f;
	}
	s->model_tflop = total / 1e12;
	double secs = s->total_us * 1e-6;
	s->model_tflops_per_gpu = secs > 0 && p->cluster.gpus > 0
					  ? s->model_tflop / secs / p->cluster.gpus : 0.0;
	double peak = prof ? prof->hw.bf16_tflops : 0.0;
	s->mfu = peak > 0 ? s->model_tflops_per_gpu / peak : 0.0;
}
