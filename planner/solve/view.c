/* view.c: a rank's view of a plan step (view.h). Everything in it is read off the plan: the
 * step's layout places the rank (model/layout.c), spans name their samples through the
 * plan's documents (plan.h bp_doc_index), and the CP ranges come from the same sharding the
 * cost model prices (model/costmodel.c bp_shard_ranges). */
#include "view.h"

#include <stdlib.h>

#include "jsonutil.h"

/* o when everything was set, else NULL with err (out of memory unless already said). */
static json_t *finish(json_t *o, int ok, struct bp_error *err)
{
	if (ok)
		return o;
	json_decref(o);
	if (!err->text[0])
		bp_errorf(err, "out of memory");
	return NULL;
}

static json_t *int_pair(int64_t a, int64_t b)
{
	return json_pack("[II]", (json_int_t)a, (json_int_t)b);
}

/* A span as the plan writes it: [doc, offset, len, sample, sample_offset]; sample and
 * sample_offset are -1 in a plan of draws. */
static json_t *span_json(const struct bp_span *sp, const struct bp_doc_index *docs,
			 int samples)
{
	const struct bp_doc *d = samples ? bp_doc_index_find(docs, sp->doc) : NULL;
	return json_pack("[IIIII]", (json_int_t)sp->doc, (json_int_t)sp->offset,
			 (json_int_t)sp->len, (json_int_t)(d ? d->sample : -1),
			 (json_int_t)(d ? d->soff + sp->offset : -1));
}

static json_t *mb_json(const struct bp_mb *mb, size_t j, int cp, int cp_i,
		       const struct bp_doc_index *docs, int samples, struct bp_error *err)
{
	json_t *o = json_object(), *spans = json_array(), *cu = json_array(),
	       *ranges = json_array();
	int ok = o && spans && cu && ranges;
	int64_t pos = 0, tokens = 0;
	bp_json_append(cu, json_integer(0), &ok);
	for (size_t q = 0; ok && q < mb->nspans; q++) {
		bp_json_append(spans, span_json(&mb->spans[q], docs, samples), &ok);
		pos += mb->spans[q].len;
		bp_json_append(cu, json_integer(pos), &ok);
	}
	size_t cap = 2 * mb->nspans + 2;
	int64_t(*r)[2] = bp_calloc(cap, sizeof(*r), err);
	size_t nr = r ? bp_shard_ranges(mb->spans, mb->nspans, mb->shard, cp, cp_i, r, cap,
				       &tokens) : 0;
	ok &= r != NULL && nr <= cap;
	for (size_t i = 0; ok && i < nr; i++)
		bp_json_append(ranges, int_pair(r[i][0], r[i][1]), &ok);
	free(r);
	bp_json_set(o, "index", json_integer((json_int_t)j), &ok);
	bp_json_set(o, "tokens", json_integer(pos), &ok);
	bp_json_set(o, "shard", json_string(bp_shard_name(mb->shard)), &ok);
	bp_json_set(o, "attention", json_string(bp_attn_kind_name(mb->attn)), &ok);
	bp_json_set(o, "spans", spans, &ok);
	bp_json_set(o, "cu_seqlens", cu, &ok);
	bp_json_set(o, "cp_ranges", ranges, &ok);
	bp_json_set(o, "cp_tokens", json_integer(tokens), &ok);
	return finish(o, ok, err);
}

json_t *bp_rank_view(const struct bp_plan *p, const struct bp_doc_index *docs, int64_t step,
		     int rank, struct bp_error *err)
{
	err->text[0] = 0;
	/* a window of a run (plan.h) is addressed by the run's step numbers */
	if (step < p->first_step || step - p->first_step >= (int64_t)p->nsteps) {
		bp_errorf(err, "step %lld is %s the plan's %s: it has steps %lld to %lld",
			  (long long)step, step < p->first_step ? "before" : "past",
			  step < p->first_step ? "first" : "end", (long long)p->first_step,
			  (long long)(p->first_step + (int64_t)p->nsteps - 1));
		return NULL;
	}
	step -= p->first_step;
	if (rank < 0 || rank >= p->cluster.gpus) {
		bp_errorf(err, "rank %d is outside the plan's world of %d GPUs", rank,
			  p->cluster.gpus);
		return NULL;
	}
	const struct bp_step *st = &p->steps[step];
	const struct bp_layout *l = bp_plan_layout(p, st);
	struct bp_place pl = bp_layout_place(l, rank);
	int samples = p->source.order != BP_ORDER_DRAW;
	json_t *o = json_object(), *mbs = json_array(), *role = json_null();
	int ok = o && mbs && role;
	if (pl.pipe >= 0) {
		const struct bp_lpipe *lp = &l->pipes[pl.pipe];
		int first = 0;
		for (int s = 0; s < pl.stage; s++)
			first += lp->stage_layers[s];
		json_decref(role);
		role = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:[ii]}", "pipeline",
				 pl.pipe, "stage", pl.stage, "tp_rank", pl.tp_i, "cp_rank", pl.cp_i,
				 "tp", lp->sc.tp, "cp", lp->sc.cp, "pp", lp->sc.pp, "pipelines",
				 (int)l->npipes, "layers", first, lp->stage_layers[pl.stage]);
		ok &= role != NULL;
		const struct bp_pipe *pi = &st->pipes[pl.pipe];
		for (size_t j = 0; ok && j < pi->nmbs; j++) {
			json_t *m = mb_json(&pi->mbs[j], j, lp->sc.cp, pl.cp_i, docs, samples, err);
			if (!m) {
				ok = 0;
				break;
			}
			bp_json_append(mbs, m, &ok);
		}
	}
	bp_json_set(o, "format", json_string(BP_RANKVIEW_FORMAT), &ok);
	bp_json_set(o, "method", json_string(p->method), &ok);
	bp_json_set(o, "order", json_string(bp_order_name(p->source.order)), &ok);
	bp_json_set(o, "step", json_integer((json_int_t)st->index), &ok);
	bp_json_set(o, "steps", json_integer((json_int_t)p->nsteps), &ok);
	bp_json_set(o, "rank", json_integer(rank), &ok);
	bp_json_set(o, "world_size", json_integer(p->cluster.gpus), &ok);
	bp_json_set(o, "layout", json_integer(st->layout), &ok);
	bp_json_set(o, "schedule", json_string(l->schedule), &ok);
	if (l->vstages > 1)
		bp_json_set(o, "virtual_stages", json_integer(l->vstages), &ok);
	bp_json_set(o, "role", role, &ok);
	bp_json_set(o, "server", json_integer(pl.server), &ok);
	bp_json_set(o, "step_tokens", json_integer(st->m.tokens), &ok);
	bp_json_set(o, "microbatches", mbs, &ok);
	return finish(o, ok, err);
}
