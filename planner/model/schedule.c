/* schedule.c: the schedule table (schedule.h). A new schedule is a row here: its op order
 * and its rules; the simulator (planner/sim/sim.c), validation and balexec's engine run it
 * from the row. */
#include "schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

/* 1F1B (PipeDream-Flush, as Megatron-LM runs it without virtual stages): stage s runs
 * min(pp - s - 1, m) warm-up forwards, then alternates one forward and one backward, then
 * drains backwards. */
static void op_1f1b(int pp, int v, size_t m, int s, size_t k, struct bp_sched_op *out)
{
	size_t warm = (size_t)(pp - s - 1);
	(void)v;
	if (warm > m)
		warm = m;
	out->chunk = 0;
	if (k < warm) {
		out->mb = k;
		out->bwd = 0;
		return;
	}
	size_t steady = m - warm; /* pairs of (F, B) */
	size_t t = k - warm;
	if (t < 2 * steady) {
		out->bwd = (int)(t % 2);
		out->mb = t % 2 ? t / 2 : warm + t / 2;
		return;
	}
	out->mb = steady + (t - 2 * steady);
	out->bwd = 1;
}

/* Megatron-LM's interleaved 1F1B (Narayanan et al. 2021, Sec. 2.2.2; Megatron-LM's
 * --num-layers-per-virtual-pipeline-stage), with its default group of pp micro-batches per
 * virtual stage: the forwards visit micro-batches in groups of pp, each group through chunk
 * 0, then chunk 1, ..., then chunk v-1; the backwards visit the same groups with the chunks
 * reversed. Rank s first runs (pp - s - 1) * 2 + (v - 1) * pp warm-up forwards (all of them
 * when that is not fewer than the m v it has), then alternates one forward and one backward,
 * then drains backwards. */
static void interleaved_entry(int pp, int v, size_t m, size_t id, size_t *mb, int *chunk)
{
	size_t g = (size_t)pp, per = g * (size_t)v;
	size_t group = id / per, e = id % per;
	size_t first = group * g, size = m - first < g ? m - first : g;
	if (size < g) /* the last, shorter group (count rules keep it from plans) */
		e = id - first * (size_t)v;
	*chunk = (int)(e / size);
	*mb = first + e % size;
}

static void op_interleaved(int pp, int v, size_t m, int s, size_t k, struct bp_sched_op *out)
{
	size_t total = m * (size_t)v;
	size_t warm = (size_t)(pp - s - 1) * 2 + (size_t)(v - 1) * (size_t)pp;
	if (warm > total)
		warm = total;
	size_t rest = total - warm, id;
	if (k < warm) {
		out->bwd = 0;
		id = k;
	} else if (k - warm < 2 * rest) {
		size_t t = k - warm;
		out->bwd = (int)(t % 2);
		id = t % 2 ? t / 2 : warm + t / 2;
	} else {
		out->bwd = 1;
		id = rest + (k - warm - 2 * rest);
	}
	interleaved_entry(pp, v, m, id, &out->mb, &out->chunk);
	if (out->bwd)
		out->chunk = v - 1 - out->chunk;
}

/* Interleaving splits every stage's layers into v equal chunks (Megatron-LM needs the layers
 * per stage divisible by v) and needs at least two stages. */
static int check_interleaved(const struct bp_layout *l, struct bp_error *err)
{
	if (l->vstages < 2)
		return bp_errorf(err, "interleaved: virtual_stages is %d (it needs at least 2; 1 is "
				 "the 1f1b schedule)", l->vstages);
	if (l->nservers)
		return bp_errorf(err, "interleaved: a layout with attention servers runs the "
				 "distca-ticks schedule");
	for (size_t i = 0; i < l->npipes; i++) {
		const struct bp_lpipe *p = &l->pipes[i];
		if (p->sc.pp < 2)
			return bp_errorf(err, "interleaved: pipeline %zu has pp %d (virtual stages "
					 "need at least 2 stages)", i, p->sc.pp);
		for (int s = 0; s < p->sc.pp; s++) {
			if (p->stage_layers[s] != p->stage_layers[0])
				return bp_errorf(err, "interleaved: pipeline %zu stage %d has %d "
						 "layers, stage 0 %d (virtual stages need equal "
						 "layers per stage)", i, s, p->stage_layers[s],
						 p->stage_layers[0]);
			if (p->stage_layers[s] % l->vstages)
				return bp_errorf(err, "interleaved: pipeline %zu has %d layers per "
						 "stage, not divisible by %d virtual stages", i,
						 p->stage_layers[s], l->vstages);
		}
	}
	return 0;
}

/* Megatron-LM refuses a last group of fewer than pp micro-batches (it would stall the
 * pipeline); with groups of pp that is any m not a multiple of pp. An idle pipeline (m 0)
 * runs nothing. */
static int count_interleaved(int pp, int v, size_t m, struct bp_error *err)
{
	(void)v;
	if (m % (size_t)pp)
		return bp_errorf(err, "interleaved 1F1B needs the micro-batches of a pipeline to "
				 "be a multiple of pp %d (Megatron-LM's groups of pp), not %zu", pp,
				 m);
	return 0;
}

/* DistCA's ticks (DistCA Sec. 4.1 and Fig. 8; planner/sim/ticks.h): every stage of every
 * pipeline issues the same per-layer all-to-alls per tick, so all pipelines share pp and
 * tp, stages have equal layers, cp is 1 (CA-tasks replace context parallelism), and a
 * server is the TP group of its rank: a rank at TP position 0, or any rank when tp is 1. */
static int check_ticks(const struct bp_layout *l, struct bp_error *err)
{
	const struct bp_lpipe *p0 = &l->pipes[0];
	for (size_t i = 0; i < l->npipes; i++) {
		const struct bp_lpipe *p = &l->pipes[i];
		if (p->sc.pp != p0->sc.pp || p->sc.tp != p0->sc.tp)
			return bp_errorf(err, "distca-ticks: pipeline %zu is <tp %d pp %d>, pipeline "
					 "0 <tp %d pp %d> (ticks need one tp and pp)", i, p->sc.tp,
					 p->sc.pp, p0->sc.tp, p0->sc.pp);
		if (p->sc.cp != 1)
			return bp_errorf(err, "distca-ticks: pipeline %zu has cp %d (CA-tasks "
					 "replace context parallelism: cp must be 1)", i, p->sc.cp);
		for (int s = 1; s < p->sc.pp; s++)
			if (p->stage_layers[s] != p->stage_layers[0])
				return bp_errorf(err, "distca-ticks: pipeline %zu stage %d has %d "
						 "layers, stage 0 %d (ticks need equal layers per "
						 "stage)", i, s, p->stage_layers[s],
						 p->stage_layers[0]);
	}
	if (p0->sc.tp <= 1)
		return 0;
	/* every server's place from one pass over the layout (a search per server grows with
	 * the square of the GPUs) */
	int world = 0;
	for (size_t i = 0; i < l->nservers; i++)
		if (l->servers[i] >= world)
			world = l->servers[i] + 1;
	struct bp_place *pl = bp_calloc(world ? (size_t)world : 1, sizeof(*pl), err);
	if (!pl)
		return -1;
	bp_layout_place_all(l, world, pl);
	for (size_t i = 0; i < l->nservers; i++) {
		int r = l->servers[i];
		struct bp_place at = r >= 0 ? pl[r] : bp_layout_place(l, r);
		if (at.pipe < 0 || at.tp_i != 0) {
			free(pl);
			return bp_errorf(err, "distca-ticks: attention server rank %d is not the "
					 "first rank of a TP group (with tp %d a server is a TP group)",
					 r, p0->sc.tp);
		}
	}
	free(pl);
	return 0;
}

static const struct bp_schedule table[] = {
	{.name = BP_SCHEDULE_1F1B,
	 .about = "1F1B (PipeDream-Flush, Megatron-LM's default): warm-up forwards, then one "
		  "forward and one backward, then the drain",
	 .op = op_1f1b},
	{.name = BP_SCHEDULE_INTERLEAVED,
	 .about = "Megatron-LM's interleaved 1F1B: v model chunks per rank, bubble (pp-1)/v",
	 .chunked = 1,
	 .check_layout = check_interleaved,
	 .check_count = count_interleaved,
	 .op = op_interleaved},
	{.name = BP_SCHEDULE_TICKS,
	 .about = "DistCA's world-synchronous ticks with attention servers (Fig. 8)",
	 .world_ticks = 1,
	 .check_layout = check_ticks},
};

const struct bp_schedule *bp_schedule_find(const char *name)
{
	for (size_t i = 0; name && i < sizeof(table) / sizeof(table[0]); i++)
		if (!strcmp(table[i].name, name))
			return &table[i];
	return NULL;
}

const struct bp_schedule *bp_schedule_table(size_t *n)
{
	*n = sizeof(table) / sizeof(table[0]);
	return table;
}

void bp_schedule_names(char *buf, size_t n)
{
	size_t nr = sizeof(table) / sizeof(table[0]), k = 0;
	if (!n)
		return;
	buf[0] = 0;
	for (size_t i = 0; i < nr && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%s", i == 0 ? "" : i + 1 == nr ? " or " : ", ",
				      table[i].name);
}

const struct bp_schedule *bp_schedule_default(void)
{
	return &table[0];
}

double bp_schedule_closed_form(int pp, int v, size_t m, double t)
{
	return ((double)m + (double)(pp - 1) / (double)v) * t;
}
