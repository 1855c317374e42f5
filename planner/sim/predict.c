/* predict.c: the step simulator (predict.h). Called by solve (before validating and
 * writing), check (re-prediction), simulate and report (through bp_plan_repredict). Implements
 * the step-level half of the simulator (planner/README.md "Data flow"): per-pipeline
 * schedules from sim.c or the ticks of ticks.c, the gradient synchronisation
 * (distributed optimizer: reduce-scatter + all-gather over each stage's replicas), the
 * three papers' imbalance metrics (WLB-LLM Sec. 6.4, SparseBalance Eq. 11, Hydraulis Sec. 8),
 * the packing objective against its certified bound (pack.h), and the summary. */
#include "predict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "method.h"
#include "pack.h"
#include "sim.h"
#include "ticks.h"
#include "work.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Quantile by the nearest-rank method on a sorted array. */
static double quantile(const double *v, size_t n, double f)
{
	if (!n)
		return 0.0;
	size_t k = (size_t)ceil(f * n);
	if (k < 1)
		k = 1;
	return v[k - 1];
}

/* A micro-batch as the cost model sees it. */
static struct bp_mb_desc mb_desc(const struct bp_mb *mb)
{
	return (struct bp_mb_desc){mb->spans, mb->nspans, mb->shard, mb->attn, mb->sparse_block,
				   mb->sparse_k};
}

/* Predicts one micro-batch's tokens and per-stage times. */
static int predict_mb(struct bp_mb *mb, const struct bp_costmodel *cm, struct bp_error *err)
{
	int pp = cm->sc.pp;
	free(mb->fwd);
	free(mb->bwd);
	mb->fwd = bp_calloc((size_t)pp, sizeof(double), err);
	mb->bwd = bp_calloc((size_t)pp, sizeof(double), err);
	if (!mb->fwd || !mb->bwd)
		return -1;
	mb->tokens = 0;
	for (size_t k = 0; k < mb->nspans; k++)
		mb->tokens += mb->spans[k].len;
	if (bp_shard_resolve(cm, mb->spans, mb->nspans, mb->shard, &mb->shard, err) < 0)
		return -1;
	struct bp_mb_desc d = mb_desc(mb);
	return bp_cost_mb(cm, &d, mb->fwd, mb->bwd, NULL, NULL, err);
}

/* The inputs of sim.c's pipeline loop for one predicted pipeline; arrays caller-freed. */
struct pipe_arrays {
	double *fwd, *bwd, *p2p;
	int64_t *act;
};

static void arrays_free(struct pipe_arrays *a)
{
	free(a->fwd);
	free(a->bwd);
	free(a->p2p);
	free(a->act);
}

/* Per-op inputs of pipeline pi under layout l's schedule, [(j v + c) pp + s] (sim.h). With
 * v model chunks per rank (interleaved) chunk c of stage s holds a v-th of the stage's layers
 * and takes a v-th of its layer time and activations. Such a layout's stages have equal
 * layers and its attention is dense (layout.c, validate.c), so every stage's layers cost the
 * same and the last stage's excess over stage 0 is the LM head, which stays on the last
 * virtual stage (chunk v - 1 of stage pp - 1): no second pricing of the micro-batch. */
static int pipe_arrays(const struct bp_pipe *pi, const struct bp_costmodel *cm,
		       const struct bp_layout *l, struct pipe_arrays *a, struct bp_error *err)
{
	int pp = cm->sc.pp, v = l->vstages > 1 ? l->vstages : 1;
	size_t m = pi->nmbs, nv = (size_t)pp * (size_t)v;
	memset(a, 0, sizeof(*a));
	a->fwd = bp_calloc(m * nv + 1, sizeof(double), err);
	a->bwd = bp_calloc(m * nv + 1, sizeof(double), err);
	a->p2p = bp_calloc(m + 1, sizeof(double), err);
	a->act = bp_calloc(m * nv + 1, sizeof(int64_t), err);
	if (!a->fwd || !a->bwd || !a->p2p || !a->act)
		return -1;
	for (size_t j = 0; j < m; j++) {
		const struct bp_mb *mb = &pi->mbs[j];
		if (!mb->fwd || !mb->bwd)
			return bp_errorf(err, "micro-batch %zu has no predicted times", j);
		/* tokens on the busiest CP rank: within one token of tokens/cp by construction */
		int64_t per_rank = (mb->tokens + cm->sc.cp - 1) / cm->sc.cp;
		double lm_f = fmax(0.0, mb->fwd[pp - 1] - mb->fwd[0]);
		double lm_b = fmax(0.0, mb->bwd[pp - 1] - mb->bwd[0]);
		for (int s = 0; s < pp; s++) {
			int64_t act = bp_cost_act_bytes(cm, s, per_rank);
			int last = s == pp - 1;
			for (int c = 0; c < v; c++) {
				size_t x = j * nv + (size_t)c * (size_t)pp + (size_t)s;
				int head = last && c == v - 1;
				a->fwd[x] = v > 1 ? mb->fwd[last ? 0 : s] / v + (head ? lm_f : 0.0)
						  : mb->fwd[s];
				a->bwd[x] = v > 1 ? mb->bwd[last ? 0 : s] / v + (head ? lm_b : 0.0)
						  : mb->bwd[s];
				a->act[x] = act / v;
			}
		}
		a->p2p[j] = bp_cost_p2p(cm, mb->tokens);
	}
	return 0;
}

/* Runs one pipeline's schedule: time, busy time and peak memory per stage. */
static int simulate_pipe(struct bp_pipe *pi, const struct bp_costmodel *cm,
			 const struct bp_layout *l, int full_gpus, struct bp_error *err)
{
	int pp = cm->sc.pp, rc = -1;
	struct pipe_arrays a;
	double *finish = NULL;
	int64_t *peak = NULL;
	free(pi->busy_us);
	free(pi->peak_mem);
	pi->busy_us = bp_calloc((size_t)pp, sizeof(double), err);
	pi->peak_mem = bp_calloc((size_t)pp, sizeof(int64_t), err);
	finish = bp_calloc((size_t)pp, sizeof(double), err);
	peak = bp_calloc((size_t)pp, sizeof(int64_t), err);
	if (pipe_arrays(pi, cm, l, &a, err) < 0 || !pi->busy_us || !pi->peak_mem || !finish ||
	    !peak)
		goto out;
	struct bp_sim_pipe in = {.pp = pp, .m = pi->nmbs, .fwd = a.fwd, .bwd = a.bwd,
				 .p2p = a.p2p, .act = a.act, .sched = bp_layout_schedule(l),
				 .v = l->vstages};
	struct bp_sim_result res = {0, pi->busy_us, finish, peak, NULL, NULL};
	if (bp_sim_pipeline(&in, &res, err) < 0)
		goto out;
	pi->time_us = res.end;
	for (int s = 0; s < pp; s++)
		pi->peak_mem[s] = bp_i64_mul_add_sat(
			peak[s], 1,
			full_gpus > 0 ? bp_cost_state_bytes_full(cm, s, full_gpus)
				      : bp_cost_state_bytes(cm, s));
	rc = 0;
out:
	arrays_free(&a);
	free(finish);
	free(peak);
	return rc;
}

/* The packing objective of a step and its certified bound (plan.h, bp_pack_bound). */
static int pack_metrics(struct bp_step *st, const struct bp_costmodel *const *cms,
			bp_item_cost_fn item_cost, struct bp_error *err)
{
	size_t nspans = 0, k = 0;
	for (size_t i = 0; i < st->npipes; i++)
		for (size_t j = 0; j < st->pipes[i].nmbs; j++)
			nspans += st->pipes[i].mbs[j].nspans;
	double *w = bp_calloc(nspans + 1, sizeof(double), err);
	if (!w)
		return -1;
	double wmax = 0.0;
	for (size_t i = 0; i < st->npipes; i++)
		for (size_t j = 0; j < st->pipes[i].nmbs; j++) {
			const struct bp_mb *mb = &st->pipes[i].mbs[j];
			double sum = 0.0;
			for (size_t q = 0; q < mb->nspans; q++) {
				if (item_cost(cms[i], mb->spans[q].len, &w[k], err) < 0) {
					free(w);
					return -1;
				}
				sum += w[k++];
			}
			if (sum > wmax)
				wmax = sum;
		}
	st->m.pack_max_us = wmax;
	st->m.pack_bound_us = bp_pack_bound(w, nspans, (size_t)st->m.nmbs);
	st->m.pack_gap = st->m.pack_bound_us > 0 ? wmax / st->m.pack_bound_us - 1.0 : 0.0;
	free(w);
	return 0;
}

/* dp-allreduce (v1's model): every stage's gradients reduce-scattered and all-gathered over
 * the replicas of its scheme; the step waits for the slowest (pipeline, stage). */
static double sync_dp_allreduce(const struct bp_step *st, const struct bp_costmodel *const *cms)
{
	double sync = 0.0;
	for (size_t i = 0; i < st->npipes; i++)
		for (int s = 0; s < cms[i]->sc.pp; s++) {
			double g = bp_cost_grad_sync(cms[i], s);
			if (g > sync)
				sync = g;
		}
	return sync;
}

/* grad_sync=overlap and overlap-gather (plan parameter, plans/README.md "Gradient sync"):
 * Megatron-LM's --overlap-grad-reduce, and with it --overlap-param-gather, under its
 * distributed optimizer (megatron/core/distributed). Gradient reduction is off for every
 * micro-batch but a stage's last; during that last backward the stage's gradients fill
 * buckets in backward order, and a full bucket's reduce-scatter over the stage's replicas
 * starts at once, on one stream: bucket b starts when it is full on every replica and the
 * reduce-scatter before it is done. Buckets: bp_cost_grad_bucket_params (Megatron-LM's
 * default size on the first stage, one bucket on every later stage, whose sync runs while
 * the stages before it drain). The model:
 *  - a stage produces its gradients at an even rate over its last op's backward (1F1B: the
 *    last micro-batch's; interleaved 1F1B: its last chunk's, so the other chunks' gradients
 *    wait with it, a pessimistic reading), so bucket b of a stage with E parameters per rank
 *    and buckets of B is full once min(1, (b + 1) B / E) of that backward is done; a
 *    pipeline with no micro-batch has its (zero) gradients ready at the start;
 *  - the optimizer step clips by the global gradient norm, an all-reduce over every rank,
 *    so it waits for every stage's last reduce-scatter;
 *  - overlap: then each stage all-gathers its updated bf16 parameters bucket by bucket,
 *    exposed, and the step ends with the slowest stage's all-gathers;
 *  - overlap-gather: the all-gathers run ahead of the forward that needs them instead (the
 *    next step's in Megatron-LM; charged to this step's start, as Hydraulis's pull is, so a
 *    step's cost stays its own): the buckets in forward order, one after another from the
 *    step's start, and the stage's first op's forward reaching bucket b after the fraction
 *    of its parameters before b (interleaved: every bucket is needed at the first op's start,
 *    pessimistic), so a stage starts late by the most any bucket arrives after it is needed;
 *    a pipeline's ops are its schedule shifted by its stages' largest delay (as
 *    sync_hyd_pullpush shifts a pipeline), and the step ends with the slowest shifted
 *    pipeline or the last reduce-scatter, whichever is later.
 * *t_end: when the step's sync ends, from the step's start (at least pipe_max, the slowest
 * pipeline's end as predicted). ends (NULL: not wanted): [k * ppmax + s], when stage s of
 * pipeline k ends its last op in the schedule as predicted, unshifted (0 for an idle
 * pipeline). mode: 1 overlap, 2 overlap-gather. */
static int sync_overlap_times(const struct bp_plan *p, const struct bp_step *st,
			      const struct bp_costmodel *const *cms, struct bp_costs *costs,
			      int mode, double pipe_max, double *t_end, double *ends_out,
			      struct bp_error *err)
{
	const struct bp_layout *l = bp_plan_layout(p, st);
	int v = l->vstages > 1 ? l->vstages : 1, ppmax = 1, rc = -1;
	size_t D = st->npipes, cap = 0;
	double *f = NULL, *b = NULL, *fd = NULL, *bd = NULL, *end = NULL, *dur = NULL;
	double *shift = NULL, rs_end = 0.0, ag_max = 0.0, t = pipe_max;
	for (size_t k = 0; k < D; k++) {
		if (cms[k]->sc.pp > ppmax)
			ppmax = cms[k]->sc.pp;
		size_t n = st->pipes[k].nmbs * (size_t)v * (size_t)cms[k]->sc.pp;
		if (n > cap)
			cap = n;
	}
	f = bp_calloc(cap + 1, sizeof(double), err);
	b = bp_calloc(cap + 1, sizeof(double), err);
	fd = bp_calloc(cap + 1, sizeof(double), err);
	bd = bp_calloc(cap + 1, sizeof(double), err);
	end = bp_calloc(D * (size_t)ppmax + 1, sizeof(double), err);
	dur = bp_calloc(D * (size_t)ppmax + 1, sizeof(double), err);
	shift = bp_calloc(D + 1, sizeof(double), err);
	if (!f || !b || !fd || !bd || !end || !dur || !shift)
		goto out;
	for (size_t k = 0; k < D; k++) {
		const struct bp_costmodel *cm = cms[k];
		int pp = cm->sc.pp;
		size_t n = st->pipes[k].nmbs * (size_t)v * (size_t)pp;
		if (!n)
			continue;
		if (bp_pipe_schedule(p, st, k, costs, f, b, fd, bd, err) < 0)
			goto out;
		/* each stage's last op: its end and its backward's duration */
		for (size_t x = 0; x < n; x++) {
			size_t y = k * (size_t)ppmax + x % (size_t)pp;
			if (b[x] + bd[x] >= end[y]) {
				end[y] = b[x] + bd[x];
				dur[y] = bd[x];
			}
		}
		/* overlap-gather: each stage's delay, its first op being [s] */
		for (int s = 0; mode == 2 && cm->sync_ranks > 1 && s < pp; s++) {
			double E = bp_cost_stage_params(cm, s) / cm->sc.tp;
			double B = bp_cost_grad_bucket_params(cm, s), c = 0.0, before = 0.0;
			int64_t nb = (int64_t)ceil(E / B);
			for (int64_t q = nb - 1; q >= 0; q--) { /* forward order */
				double size = fmin(B, E - (double)q * B);
				double need = f[s] + (v > 1 ? 0.0 : fd[s] * before / E);
				c += bp_coll_cost(&cm->sync_allgather, 2.0 * size);
				shift[k] = fmax(shift[k], c - need);
				before += size;
			}
		}
		for (int s = 0; s < pp; s++)
			end[k * (size_t)ppmax + (size_t)s] += shift[k];
	}
	/* per sync group (the pipelines of one tp and pp, costmodel.c's sync_ranks), led by its
	 * first pipeline, and stage: the reduce-scatters in bucket order */
	for (size_t k = 0; k < D; k++) {
		const struct bp_costmodel *cm = cms[k];
		int lead = 1;
		for (size_t j = 0; j < k && lead; j++)
			lead = cms[j]->sc.tp != cm->sc.tp || cms[j]->sc.pp != cm->sc.pp;
		if (!lead || cm->sync_ranks < 2)
			continue;
		for (int s = 0; s < cm->sc.pp; s++) {
			double E = bp_cost_stage_params(cm, s) / cm->sc.tp;
			double B = bp_cost_grad_bucket_params(cm, s), rs = 0.0, ag = 0.0;
			int64_t nb = (int64_t)ceil(E / B);
			for (int64_t q = 0; q < nb; q++) {
				double frac = fmin(1.0, (double)(q + 1) * B / E), ready = 0.0;
				double bytes = 2.0 * fmin(B, E - (double)q * B);
				for (size_t j = k; j < D; j++) {
					if (cms[j]->sc.tp != cm->sc.tp || cms[j]->sc.pp != cm->sc.pp ||
					    !st->pipes[j].nmbs)
						continue;
					size_t y = j * (size_t)ppmax + (size_t)s;
					ready = fmax(ready, end[y] - dur[y] * (1.0 - frac));
				}
				rs = fmax(rs, ready) + bp_coll_cost(&cm->sync_reducescatter, bytes);
				ag += bp_coll_cost(&cm->sync_allgather, bytes);
			}
			rs_end = fmax(rs_end, rs);
			ag_max = fmax(ag_max, ag);
		}
	}
	for (size_t k = 0; k < D; k++)
		t = fmax(t, st->pipes[k].time_us + shift[k]);
	*t_end = fmax(t, rs_end) + (mode == 1 ? ag_max : 0.0);
	for (size_t k = 0; ends_out && k < D; k++)
		for (int s = 0; s < ppmax; s++)
			ends_out[k * (size_t)ppmax + (size_t)s] =
				end[k * (size_t)ppmax + (size_t)s] - shift[k];
	rc = 0;
out:
	free(f);
	free(b);
	free(fd);
	free(bd);
	free(end);
	free(dur);
	free(shift);
	return rc;
}

int bp_step_grad_overlap(const struct bp_plan *p, const struct bp_step *st,
			 struct bp_error *err)
{
	if (strcmp(st->sync, BP_SYNC_DP_ALLREDUCE))
		return 0;
	return bp_param_grad_sync(p, err);
}

int bp_sync_overlap_wait(const struct bp_plan *p, const struct bp_step *st,
			 struct bp_costs *costs, size_t k, int s, double *wait_us,
			 struct bp_error *err)
{
	const struct bp_layout *l = bp_plan_layout(p, st);
	const struct bp_costmodel **cms = bp_calloc(st->npipes + 1, sizeof(*cms), err);
	double *ends = NULL, t_end;
	int ppmax = 1, rc = -1, mode = bp_step_grad_overlap(p, st, err);
	if (!cms || mode < 0)
		goto out;
	for (size_t i = 0; i < st->npipes; i++) {
		if (!(cms[i] = bp_costs_pipe(costs, l, i, err)))
			goto out;
		if (cms[i]->sc.pp > ppmax)
			ppmax = cms[i]->sc.pp;
	}
	if (!mode || k >= st->npipes || s < 0 || s >= cms[k]->sc.pp) {
		bp_errorf(err, "step %lld: no overlapped gradient sync for stage %d of pipeline %zu",
			  (long long)st->index, s, k);
		goto out;
	}
	ends = bp_calloc(st->npipes * (size_t)ppmax + 1, sizeof(double), err);
	if (!ends || sync_overlap_times(p, st, cms, costs, mode, st->m.pipe_max_us, &t_end, ends,
					err) < 0)
		goto out;
	*wait_us = fmax(0.0, t_end - ends[k * (size_t)ppmax + (size_t)s]);
	rc = 0;
out:
	free(cms);
	free(ends);
	return rc;
}

static int64_t gcd64(int64_t a, int64_t b)
{
	while (b) {
		int64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static double lcm_real(int64_t a, int64_t b)
{
	return a > 0 && b > 0 ? (double)(a / gcd64(a, b)) * (double)b : 0.0;
}

/* Hydraulis's optimisation-propagation disaggregation (Sec. 5.2, Fig. 2b, Fig. 7, Fig. 8,
 * Table 1). The optimizer states and fp32 master parameters are sharded over all N GPUs of
 * the cluster (footnote 3), whatever the step's strategy. Each step:
 *  - pull (Fig. 2b steps 1-2): every pipeline receives the whole model in bf16, each GPU
 *    the 2 stage_params / TP bytes of its (stage, TP shard), cut into LCM(N, TP_max) mutual
 *    slices; every optimizer shard sends its 2 P / N bytes to each of the D pipelines. One
 *    LNK (bp_cost_lnk) moves, for the GPUs of a stage, the larger of the two; local moves
 *    (at most 1/N of a stage) are not subtracted;
 *  - push (steps 4-5): the mirror, bf16 gradients to the owners of LCM(N, D TP_max) slices,
 *    reduced there over the D pipelines;
 *  - the optimizer step (step 6) on one shard of P / N parameters (bp_cost_adam_shard).
 * Overlap (Fig. 8, "w/ overlap"): the first stage pulls layer by layer just before its first
 * forward needs the layer, so only the first layer's slice, or what the first forward cannot
 * cover, delays it; later stages pull at the start, hidden by their warm-up bubble until
 * their first forward; the first stage pushes each layer's gradient as its last backward
 * produces it, later stages push after their last backward, during the drain of the stages
 * before them. A pipeline's end is its schedule shifted by its worst pull delay, or its last
 * push if later; the step ends with the slowest pipeline and the optimizer step. serial
 * (Table 1's "w/o overlap"): pull, then every pipeline, then push, then the optimizer. */
static int sync_hyd_pullpush(const struct bp_plan *p, const struct bp_step *st,
			     struct bp_metrics *mt, const struct bp_costmodel *const *cms,
			     struct bp_costs *costs, int serial, struct bp_error *err)
{
	const struct bp_profile *prof = costs->prof;
	int N = p->cluster.gpus, gpn = p->cluster.gpus_per_node, tpmax = 1;
	size_t D = st->npipes;
	double P = 0.0, *f = NULL, *b = NULL;
	int rc = -1;
	if (D)
		for (int s = 0; s < cms[0]->sc.pp; s++)
			P += bp_cost_stage_params(cms[0], s);
	else
		P = (double)bp_model_params(&p->model);
	double send = (double)D * 2.0 * P / N; /* one optimizer shard to every pipeline */
	double pull_max = 0.0, push_max = 0.0, bytes_max = 0.0, end_max = 0.0;
	for (size_t k = 0; k < D; k++)
		if (cms[k]->sc.tp > tpmax)
			tpmax = cms[k]->sc.tp;
	for (size_t k = 0; k < D; k++) {
		const struct bp_costmodel *cm = cms[k];
		const struct bp_pipe *pi = &st->pipes[k];
		int pp = cm->sc.pp;
		double shift = 0.0, end = pi->time_us, tpull = 0.0, tpush = 0.0;
		if (pi->nmbs && !serial) {
			free(f);
			free(b);
			f = bp_calloc(pi->nmbs * (size_t)pp, sizeof(double), err);
			b = bp_calloc(pi->nmbs * (size_t)pp, sizeof(double), err);
			if (!f || !b || bp_pipe_schedule(p, st, k, costs, f, b, NULL, NULL, err) < 0)
				goto out;
		}
		for (int s = 0; s < pp; s++) {
			double need = 2.0 * bp_cost_stage_params(cm, s) / cm->sc.tp;
			double bytes = need > send ? need : send;
			double t = bp_cost_lnk(prof, N, gpn, bytes); /* pull and push alike */
			double L = cm->stage_layers[s] > 0 ? cm->stage_layers[s] : 1;
			if (bytes > bytes_max)
				bytes_max = bytes;
			if (t > tpull)
				tpull = t;
			if (t > tpush)
				tpush = t;
			if (serial || !pi->nmbs)
				continue;
			size_t last = (pi->nmbs - 1) * (size_t)pp + (size_t)s;
			double f0 = pi->mbs[0].fwd[s], bs = b[last];
			double bf = bs + pi->mbs[pi->nmbs - 1].bwd[s], d, e;
			if (s == 0) {
				d = fmax(t / L, t - f0 * (L - 1) / L);
				e = fmax(bf + t / L, bs + t);
			} else {
				d = fmax(0.0, t - f[s]);
				e = bf + t;
			}
			if (d > shift)
				shift = d;
			if (e > end)
				end = e;
		}
		if (tpull > pull_max)
			pull_max = tpull;
		if (tpush > push_max)
			push_max = tpush;
		if (!serial) {
			/* an idle pipeline pulls nothing and pushes zero gradients */
			double fin = pi->nmbs ? shift + end : tpush;
			if (fin > end_max)
				end_max = fin;
		}
	}
	mt->pull_us = pull_max;
	mt->push_us = push_max;
	mt->lnk_bytes = bytes_max;
	mt->lnk_slices_pull = lcm_real(N, tpmax);
	mt->lnk_slices_push = lcm_real(N, (int64_t)(D ? D : 1) * tpmax);
	mt->optimizer_us = bp_cost_adam_shard(prof, P / N);
	if (serial)
		mt->op_exposed_us = pull_max + push_max;
	else
		mt->op_exposed_us = end_max > mt->pipe_max_us ? end_max - mt->pipe_max_us : 0.0;
	mt->grad_sync_us = mt->op_exposed_us + mt->optimizer_us;
	rc = 0;
out:
	free(f);
	free(b);
	return rc;
}

/* The distca-ticks schedule of a step (ticks.h): every pipeline ends with the last tick; a
 * stage's busy time is its token-wise work plus the attention its ranks serve; its memory
 * holds each micro-batch's activations from its forward tick to its backward tick, and in
 * non-resend mode what its first rank keeps as a server (the received Q, deduplicated K
 * and V, O and the LSE of the CA-tasks it served, forward to backward, as DistCA's code does
 * at pp 1; resend mode keeps nothing on the servers). A server rank's TP slices keep
 * equal bytes, and with pp 1 at most one micro-batch is between its forward and backward,
 * so the stage's first rank stands for its group. */
static int simulate_ticks(const struct bp_plan *p, struct bp_step *st,
			  const struct bp_costmodel *const *cms, struct bp_costs *costs,
			  struct bp_error *err)
{
	const struct bp_layout *l = bp_plan_layout(p, st);
	struct bp_ticks tk;
	int rc = -1;
	int64_t *held = NULL;
	if (bp_ticks_eval(p, st, costs, &tk, err) < 0)
		goto out;
	double total = 0.0;
	for (size_t k = 0; k < tk.nticks; k++)
		total += tk.tick_us[k];
	held = bp_calloc((size_t)tk.pp + 1, sizeof(int64_t), err);
	if (!held)
		goto out;
	for (size_t q = 0; q < st->npipes; q++) {
		struct bp_pipe *pi = &st->pipes[q];
		const struct bp_lpipe *lp = &l->pipes[q];
		const struct bp_costmodel *cm = cms[q];
		free(pi->busy_us);
		free(pi->peak_mem);
		pi->busy_us = bp_calloc((size_t)tk.pp, sizeof(double), err);
		pi->peak_mem = bp_calloc((size_t)tk.pp, sizeof(int64_t), err);
		if (!pi->busy_us || !pi->peak_mem)
			goto out;
		pi->time_us = total;
		memset(held, 0, (size_t)tk.pp * sizeof(int64_t));
		for (size_t k = 0; k < tk.nticks; k++)
			for (int s = 0; s < tk.pp; s++) {
				int r = bp_lpipe_rank(lp, s, 0, 0), bwd;
				size_t phase;
				pi->busy_us[s] += tk.compute[k * tk.world + r] +
						  tk.attn[k * tk.world + r];
				int64_t j = bp_tick_op(tk.pp, tk.m, k, s, &bwd, &phase);
				if (j >= 0 && (size_t)j < pi->nmbs) {
					int64_t act = bp_cost_act_bytes(cm, s, pi->mbs[j].tokens);
					held[s] = bp_i64_mul_add_sat(act, bwd ? -1 : 1,
								     held[s]);
				}
				/* non-resend: what the rank keeps as a server (ticks.h kept) */
				int64_t now = bp_i64_mul_add_sat(
					1, held[s],
					bp_i64_from_real_sat(ceil(tk.kept[k * tk.world + r])));
				if (now > pi->peak_mem[s])
					pi->peak_mem[s] = now;
			}
		for (int s = 0; s < tk.pp; s++)
			pi->peak_mem[s] = bp_i64_mul_add_sat(pi->peak_mem[s], 1,
							     bp_cost_state_bytes(cm, s));
	}
	rc = 0;
out:
	free(held);
	bp_ticks_release(&tk);
	return rc;
}

static int predict_step(const struct bp_plan *p, struct bp_step *st, struct bp_costs *costs,
			bp_item_cost_fn item_cost, struct bp_error *err)
{
	struct bp_metrics *mt = &st->m;
	const struct bp_layout *l = bp_plan_layout(p, st);
	const struct bp_costmodel **cms = bp_calloc(st->npipes + 1, sizeof(*cms), err);
	int rc = -1, ticks = bp_layout_schedule(l)->world_ticks;
	if (!cms)
		return -1;
	memset(mt, 0, sizeof(*mt));
	double busy_max = 0.0, busy_min = INFINITY, busy_sum = 0.0;
	double fmax = 0.0, fsum = 0.0, tmax = 0.0, tsum = 0.0;
	size_t ranks = 0;
	mt->pipe_min_us = INFINITY;
	for (size_t i = 0; i < st->npipes; i++) {
		struct bp_pipe *pi = &st->pipes[i];
		cms[i] = bp_costs_pipe(costs, l, i, err);
		if (!cms[i])
			goto out;
		for (size_t j = 0; j < pi->nmbs; j++)
			if (predict_mb(&pi->mbs[j], cms[i], err) < 0) {
				bp_error_prefix(err, "step %lld pipeline %zu micro-batch %zu",
						(long long)st->index, i, j);
				goto out;
			}
		/* Hydraulis's pull/push keeps the optimizer sharded over every GPU (Sec. 5.2) */
		int full = !strcmp(st->sync, BP_SYNC_HYD_PULLPUSH) ||
				   !strcmp(st->sync, BP_SYNC_HYD_PULLPUSH_SERIAL)
			   ? p->cluster.gpus
			   : 0;
		if (!ticks && simulate_pipe(pi, cms[i], l, full, err) < 0) {
			bp_error_prefix(err, "step %lld pipeline %zu", (long long)st->index, i);
			goto out;
		}
	}
	if (ticks && simulate_ticks(p, st, cms, costs, err) < 0) {
		bp_error_prefix(err, "step %lld", (long long)st->index);
		goto out;
	}
	for (size_t i = 0; i < st->npipes; i++) {
		struct bp_pipe *pi = &st->pipes[i];
		int pp = cms[i]->sc.pp;
		if (pi->time_us > mt->pipe_max_us)
			mt->pipe_max_us = pi->time_us;
		if (pi->time_us < mt->pipe_min_us)
			mt->pipe_min_us = pi->time_us;
		ranks += (size_t)pp;
		for (int s = 0; s < pp; s++) {
			double b = pi->busy_us[s];
			busy_sum += b;
			if (b > busy_max)
				busy_max = b;
			if (b < busy_min)
				busy_min = b;
			if (pi->peak_mem[s] > mt->peak_mem)
				mt->peak_mem = pi->peak_mem[s];
		}
		for (size_t j = 0; j < pi->nmbs; j++) {
			double f = 0.0, t = 0.0;
			for (int s = 0; s < pp; s++) {
				f += pi->mbs[j].fwd[s];
				t += pi->mbs[j].fwd[s] + pi->mbs[j].bwd[s];
			}
			fsum += f;
			tsum += t;
			if (f > fmax)
				fmax = f;
			if (t > tmax)
				tmax = t;
			mt->tokens += pi->mbs[j].tokens;
			mt->nmbs++;
		}
	}
	if (!st->npipes)
		mt->pipe_min_us = 0.0;
	if (pack_metrics(st, cms, item_cost, err) < 0)
		goto out;
	mt->pull_us = mt->push_us = mt->optimizer_us = mt->op_exposed_us = -1;
	mt->lnk_bytes = mt->lnk_slices_pull = mt->lnk_slices_push = -1;
	if (!strcmp(st->sync, BP_SYNC_DP_ALLREDUCE)) {
		int mode = bp_param_grad_sync(p, err);
		double t_end = 0.0;
		if (mode < 0 || (mode && sync_overlap_times(p, st, cms, costs, mode,
							    mt->pipe_max_us, &t_end, NULL,
							    err) < 0)) {
			bp_error_prefix(err, "step %lld", (long long)st->index);
			goto out;
		}
		mt->grad_sync_us = mode ? t_end - mt->pipe_max_us : sync_dp_allreduce(st, cms);
	} else if (!strcmp(st->sync, BP_SYNC_HYD_PULLPUSH) ||
		   !strcmp(st->sync, BP_SYNC_HYD_PULLPUSH_SERIAL)) {
		if (sync_hyd_pullpush(p, st, mt, cms, costs,
				      !strcmp(st->sync, BP_SYNC_HYD_PULLPUSH_SERIAL), err) < 0) {
			bp_error_prefix(err, "step %lld", (long long)st->index);
			goto out;
		}
	} else {
		bp_errorf(err, "step %lld: unknown sync model \"%s\"", (long long)st->index,
			  st->sync);
		goto out;
	}
	mt->step_us = mt->pipe_max_us + mt->grad_sync_us;
	mt->bubble = mt->pipe_max_us > 0 ? 1.0 - busy_sum / (ranks * mt->pipe_max_us) : 0.0;
	mt->imb_wlb = fsum > 0 ? fmax * mt->nmbs / fsum : 1.0;
	mt->imb_sb = tsum > 0 ? tmax * mt->nmbs / tsum : 1.0;
	mt->gap_hyd = busy_max > 0 ? (busy_max - busy_min) / busy_max : 0.0;
	rc = 0;
out:
	free(cms);
	return rc;
}

int bp_plan_summarize(struct bp_plan *p, struct bp_error *err)
{
	struct bp_summary *s = &p->summary;
	int64_t truncated = s->truncated, dropped = s->dropped;
	memset(s, 0, sizeof(*s));
	s->truncated = truncated;
	s->dropped = dropped;
	size_t n = p->nsteps;
	double *v = bp_calloc(n + 1, sizeof(double), err);
	double *w = bp_calloc(n + 1, sizeof(double), err);
	if (!v || !w) {
		free(v);
		free(w);
		return -1;
	}
	double delay_tok_steps = 0.0;
	s->steps = (int64_t)n;
	for (size_t i = 0; i < n; i++) {
		const struct bp_step *st = &p->steps[i];
		s->docs += (int64_t)st->ndocs;
		s->tokens += st->m.tokens;
		s->delayed += (int64_t)st->ndelayed;
		for (size_t k = 0; k < st->ndelayed; k++)
			delay_tok_steps += (double)st->delayed[k].len *
					   (double)(st->delayed[k].to_step - st->index);
		s->total_us += st->m.step_us;
		s->imb_wlb_mean += st->m.imb_wlb;
		s->imb_sb_mean += st->m.imb_sb;
		s->gap_hyd_mean += st->m.gap_hyd;
		s->bubble_mean += st->m.bubble;
		s->pack_gap_mean += st->m.pack_gap;
		if (st->m.pack_gap > s->pack_gap_max)
			s->pack_gap_max = st->m.pack_gap;
		if (st->m.peak_mem > s->peak_mem)
			s->peak_mem = st->m.peak_mem;
		v[i] = st->m.step_us;
		w[i] = st->m.imb_wlb;
	}
	if (n) {
		s->step_mean_us = s->total_us / n;
		s->imb_wlb_mean /= n;
		s->imb_sb_mean /= n;
		s->gap_hyd_mean /= n;
		s->bubble_mean /= n;
		s->pack_gap_mean /= n;
		qsort(v, n, sizeof(double), cmp_double);
		qsort(w, n, sizeof(double), cmp_double);
		s->step_p50_us = quantile(v, n, 0.5);
		s->step_p95_us = quantile(v, n, 0.95);
		s->step_max_us = v[n - 1];
		s->imb_wlb_p95 = quantile(w, n, 0.95);
	}
	s->tokens_per_s = s->total_us > 0 ? s->tokens / (s->total_us * 1e-6) : 0.0;
	s->delay_steps_mean = s->tokens > 0 ? delay_tok_steps / s->tokens : 0.0;
	free(v);
	free(w);
	return 0;
}

int bp_plan_predict(struct bp_plan *p, struct bp_costs *costs, bp_item_cost_fn item_cost,
		    struct bp_error *err)
{
	if (!item_cost)
		item_cost = bp_cost_doc;
	for (size_t i = 0; i < p->nsteps; i++) {
		struct bp_step *st = &p->steps[i];
		if (st->layout < 0 || (size_t)st->layout >= p->nlayouts)
			return bp_errorf(err, "step %zu names layout %d of %zu", i, st->layout,
					 p->nlayouts);
		if (st->npipes != p->layouts[st->layout].npipes)
			return bp_errorf(err, "step %zu has %zu pipelines but its layout has %zu", i,
					 st->npipes, p->layouts[st->layout].npipes);
		if (predict_step(p, st, costs, item_cost, err) < 0)
			return -1;
	}
	if (bp_plan_summarize(p, err) < 0)
		return -1;
	bp_plan_predict_work(p, costs->prof); /* the work trained and its FLOP/s (work.h) */
	return 0;
}

/* Op start times of pipeline k in the tick timeline (ticks.h). */
static int ticks_schedule(const struct bp_plan *p, const struct bp_step *st, size_t k,
			  struct bp_costs *costs, double *f_start, double *b_start,
			  struct bp_error *err)
{
	struct bp_ticks tk;
	if (bp_ticks_eval(p, st, costs, &tk, err) < 0) {
		bp_ticks_release(&tk);
		return -1;
	}
	double t0 = 0.0;
	for (size_t q = 0; q < tk.nticks; q++) {
		for (int s = 0; s < tk.pp; s++) {
			int bwd;
			size_t phase;
			int64_t j = bp_tick_op(tk.pp, tk.m, q, s, &bwd, &phase);
			if (j < 0 || (size_t)j >= st->pipes[k].nmbs)
				continue;
			(bwd ? b_start : f_start)[(size_t)j * tk.pp + s] = t0;
		}
		t0 += tk.tick_us[q];
	}
	bp_ticks_release(&tk);
	return 0;
}

int bp_pipe_schedule(const struct bp_plan *p, const struct bp_step *st, size_t k,
		     struct bp_costs *costs, double *f_start, double *b_start, double *f_dur,
		     double *b_dur, struct bp_error *err)
{
	const struct bp_layout *l = bp_plan_layout(p, st);
	const struct bp_costmodel *cm = bp_costs_pipe(costs, l, k, err);
	if (!cm)
		return -1;
	const struct bp_pipe *pi = &st->pipes[k];
	int pp = cm->sc.pp, rc = -1;
	if (bp_layout_schedule(l)->world_ticks) {
		for (size_t j = 0; j < pi->nmbs; j++)
			for (int s = 0; s < pp; s++) {
				if (f_dur)
					f_dur[j * (size_t)pp + (size_t)s] = pi->mbs[j].fwd[s];
				if (b_dur)
					b_dur[j * (size_t)pp + (size_t)s] = pi->mbs[j].bwd[s];
			}
		return ticks_schedule(p, st, k, costs, f_start, b_start, err);
	}
	struct pipe_arrays a;
	double *busy = bp_calloc((size_t)pp, sizeof(double), err);
	double *finish = bp_calloc((size_t)pp, sizeof(double), err);
	int64_t *peak = bp_calloc((size_t)pp, sizeof(int64_t), err);
	if (pipe_arrays(pi, cm, l, &a, err) < 0 || !busy || !finish || !peak)
		goto out;
	struct bp_sim_pipe in = {.pp = pp, .m = pi->nmbs, .fwd = a.fwd, .bwd = a.bwd,
				 .p2p = a.p2p, .sched = bp_layout_schedule(l), .v = l->vstages};
	struct bp_sim_result res = {0, busy, finish, peak, f_start, b_start};
	rc = bp_sim_pipeline(&in, &res, err);
	for (size_t x = 0; !rc && x < pi->nmbs * (size_t)pp * (size_t)in.v; x++) {
		if (f_dur)
			f_dur[x] = a.fwd[x];
		if (b_dur)
			b_dur[x] = a.bwd[x];
	}
out:
	arrays_free(&a);
	free(busy);
	free(finish);
	free(peak);
	return rc;
}
