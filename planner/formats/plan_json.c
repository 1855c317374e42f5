/* plan_json.c: the plan codec (plan.h, plans/README.md). Writes balplan.plan/v2; reads v2
 * and v1 (a v1 plan becomes one Megatron layout, its `solver` records the ILP methods'
 * record). Used by solve (write), check, simulate, diff, report and balexec (read).
 *
 * Reading is strict (unknown keys, types, ranges). Decisions and predictions are apart: each
 * micro-batch, pipeline and step keeps what the cost model and simulator computed under its
 * own "predicted" key, so a diff of decisions reads on its own. Flat fields are named once,
 * in the field tables below, which drive reader and writer. */
#include "plan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "method.h"
#include "model_json.h"

#define BIG 1e300
#define I64MAX 9.3e18

static const char *const overlen_names[] = {"truncate", "drop", "error"};

/* ---- field tables (each key once) ---- */

static const struct bp_field metric_fields[] = {
	BP_FIELD_REAL(struct bp_metrics, step_us, "step_us", 0, BIG),
	BP_FIELD_REAL(struct bp_metrics, pipe_max_us, "pipeline_max_us", 0, BIG),
	BP_FIELD_REAL(struct bp_metrics, pipe_min_us, "pipeline_min_us", 0, BIG),
	BP_FIELD_REAL(struct bp_metrics, grad_sync_us, "grad_sync_us", 0, BIG),
	BP_FIELD_REAL(struct bp_metrics, bubble, "bubble", -1, 1),
	BP_FIELD_REAL(struct bp_metrics, imb_wlb, "imbalance_wlb", 0, BIG),
	BP_FIELD_REAL(struct bp_metrics, imb_sb, "imbalance_sparsebalance", 0, BIG),
	BP_FIELD_REAL(struct bp_metrics, gap_hyd, "rank_gap_hydraulis", 0, 1),
	BP_FIELD_I64(struct bp_metrics, peak_mem, "peak_mem_bytes", 0, I64MAX),
	BP_FIELD_I64(struct bp_metrics, tokens, "tokens", 0, I64MAX),
	BP_FIELD_I64(struct bp_metrics, nmbs, "microbatches", 0, I64MAX),
	BP_FIELD_REAL(struct bp_metrics, pack_max_us, "pack_max_us", 0, BIG),
	BP_FIELD_REAL(struct bp_metrics, pack_bound_us, "pack_bound_us", 0, BIG),
	BP_FIELD_REAL(struct bp_metrics, pack_gap, "pack_gap", -1, BIG),
	/* Optional: absent (a plan written before it) reads as -1, not recorded. */
	BP_FIELD_REALF(struct bp_metrics, model_tflop, "model_tflop", 0, BIG, BP_FF_OPT),
	/* Optional: only steps with a hydraulis-pullpush sync have them (-1: absent). */
	BP_FIELD_REALF(struct bp_metrics, pull_us, "pull_us", 0, BIG, BP_FF_OPT),
	BP_FIELD_REALF(struct bp_metrics, push_us, "push_us", 0, BIG, BP_FF_OPT),
	BP_FIELD_REALF(struct bp_metrics, optimizer_us, "optimizer_us", 0, BIG, BP_FF_OPT),
	BP_FIELD_REALF(struct bp_metrics, op_exposed_us, "op_exposed_us", 0, BIG, BP_FF_OPT),
	BP_FIELD_REALF(struct bp_metrics, lnk_bytes, "lnk_bytes", 0, BIG, BP_FF_OPT),
	BP_FIELD_REALF(struct bp_metrics, lnk_slices_pull, "lnk_slices_pull", 0, BIG, BP_FF_OPT),
	BP_FIELD_REALF(struct bp_metrics, lnk_slices_push, "lnk_slices_push", 0, BIG, BP_FF_OPT),
};

static const struct bp_field summary_fields[] = {
	BP_FIELD_I64(struct bp_summary, steps, "steps", 0, I64MAX),
	BP_FIELD_I64(struct bp_summary, docs, "docs", 0, I64MAX),
	BP_FIELD_I64(struct bp_summary, tokens, "tokens", 0, I64MAX),
	BP_FIELD_I64(struct bp_summary, truncated, "truncated_docs", 0, I64MAX),
	BP_FIELD_I64(struct bp_summary, dropped, "dropped_docs", 0, I64MAX),
	BP_FIELD_I64(struct bp_summary, delayed, "delayed_docs", 0, I64MAX),
	BP_FIELD_REAL(struct bp_summary, step_mean_us, "step_mean_us", 0, BIG),
	BP_FIELD_REAL(struct bp_summary, step_p50_us, "step_p50_us", 0, BIG),
	BP_FIELD_REAL(struct bp_summary, step_p95_us, "step_p95_us", 0, BIG),
	BP_FIELD_REAL(struct bp_summary, step_max_us, "step_max_us", 0, BIG),
	BP_FIELD_REAL(struct bp_summary, total_us, "total_us", 0, BIG),
	BP_FIELD_REAL(struct bp_summary, tokens_per_s, "tokens_per_s", 0, BIG),
	BP_FIELD_REAL(struct bp_summary, imb_wlb_mean, "imbalance_wlb_mean", 0, BIG),
	BP_FIELD_REAL(struct bp_summary, imb_wlb_p95, "imbalance_wlb_p95", 0, BIG),
	BP_FIELD_REAL(struct bp_summary, imb_sb_mean, "imbalance_sparsebalance_mean", 0, BIG),
	BP_FIELD_REAL(struct bp_summary, gap_hyd_mean, "rank_gap_hydraulis_mean", 0, 1),
	BP_FIELD_REAL(struct bp_summary, bubble_mean, "bubble_mean", -1, 1),
	BP_FIELD_REAL(struct bp_summary, delay_steps_mean, "delay_steps_mean", 0, BIG),
	BP_FIELD_I64(struct bp_summary, peak_mem, "peak_mem_bytes", 0, I64MAX),
	BP_FIELD_REAL(struct bp_summary, pack_gap_mean, "pack_gap_mean", -1, BIG),
	BP_FIELD_REAL(struct bp_summary, pack_gap_max, "pack_gap_max", -1, BIG),
	/* Optional: absent (a plan written before them) reads as -1, not recorded. */
	BP_FIELD_REALF(struct bp_summary, model_tflop, "model_tflop", 0, BIG, BP_FF_OPT),
	BP_FIELD_REALF(struct bp_summary, model_tflops_per_gpu, "model_tflops_per_gpu", 0, BIG,
		       BP_FF_OPT),
	BP_FIELD_REALF(struct bp_summary, mfu, "mfu", 0, BIG, BP_FF_OPT),
};

/* The work fields above, dropped on writing while not recorded (< 0), so a plan read from
 * an older file writes back as it was. */
static void drop_unrecorded(json_t *o, const struct bp_field *f, size_t n, const void *base)
{
	for (size_t i = 0; i < n; i++)
		if ((f[i].flags & BP_FF_OPT) && f[i].type == BP_FT_REAL &&
		    *(const double *)((const char *)base + f[i].off) < 0)
			json_object_del(o, f[i].key);
}

static const struct bp_field sampling_fields[] = {
	BP_FIELD_I64(struct bp_plan, nsteps_drawn, "steps", 1, I64MAX),
	BP_FIELD_I64(struct bp_plan, tokens_per_step, "tokens_per_step", 0, I64MAX),
	BP_FIELD_I64(struct bp_plan, docs_per_step, "docs_per_step", 0, I64MAX),
	BP_FIELD_I64(struct bp_plan, max_tokens, "max_tokens", 1, I64MAX),
};

/* sampling.source (plan.h struct bp_source): a plan of the team's own samples (issue 22). */
static const struct bp_field source_fields[] = {
	BP_FIELD_STR(struct bp_source, format, "format"),
	BP_FIELD_I64(struct bp_source, samples, "samples", 1, I64MAX),
	BP_FIELD_I64(struct bp_source, sequences, "sequences", 0, I64MAX),
	BP_FIELD_I64(struct bp_source, tokens, "tokens", 1, I64MAX),
	BP_FIELD_I64(struct bp_source, epochs, "epochs", 0, I64MAX),
	BP_FIELD_I64(struct bp_source, first_pos, "first_position", 0, I64MAX),
	BP_FIELD_I64(struct bp_source, end_pos, "end_position", 0, I64MAX),
	BP_FIELD_I64(struct bp_source, left, "left_samples", 0, I64MAX),
};

static const struct bp_field cluster_fields[] = {
	BP_FIELD_STR(struct bp_cluster, gpu, "gpu"),
	BP_FIELD_INT(struct bp_cluster, gpus, "gpus", 0, 1 << 24),
	BP_FIELD_INT(struct bp_cluster, gpus_per_node, "gpus_per_node", 0, 1024),
};

/* ---- writing ---- */

static json_t *int_array(const int64_t *v, size_t n)
{
	json_t *a = json_array();
	int ok = a != NULL;
	for (size_t i = 0; ok && i < n; i++)
		bp_json_append(a, json_integer(v[i]), &ok);
	if (!ok) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static json_t *int32_array(const int *v, size_t n)
{
	json_t *a = json_array();
	int ok = a != NULL;
	for (size_t i = 0; ok && i < n; i++)
		bp_json_append(a, json_integer(v[i]), &ok);
	if (!ok) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static json_t *done(json_t *o, int ok)
{
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* A span: [doc, offset, len], and with a doc map (sampling.source plans) the sample it
 * trains and where in the sample it starts: [doc, offset, len, sample, sample_offset]. */
static json_t *span_to_json(const struct bp_span *sp, const struct bp_doc_index *m)
{
	int64_t t[5] = {sp->doc, sp->offset, sp->len, -1, -1};
	const struct bp_doc *d = m ? bp_doc_index_find(m, sp->doc) : NULL;
	if (d) {
		t[3] = d->sample;
		t[4] = d->soff + sp->offset;
	}
	return int_array(t, m ? 5 : 3);
}

static json_t *mb_to_json(const struct bp_mb *mb, int pp, int layers, const struct bp_doc_index *m)
{
	json_t *o = json_object(), *spans = json_array(), *pr = json_object();
	int ok = o && spans && pr;
	for (size_t i = 0; ok && i < mb->nspans; i++)
		bp_json_append(spans, span_to_json(&mb->spans[i], m), &ok);
	bp_json_set(o, "spans", spans, &ok);
	bp_json_set(o, "shard", json_string(bp_shard_name(mb->shard)), &ok);
	if (mb->attn != BP_ATTN_DENSE) {
		json_t *a = json_object();
		int aok = a != NULL;
		bp_json_set(a, "kind", json_string(bp_attn_kind_name(mb->attn)), &aok);
		if (mb->attn == BP_ATTN_SPARSE) {
			bp_json_set(a, "block", json_integer(mb->sparse_block), &aok);
			bp_json_set(a, "k", int32_array(mb->sparse_k, (size_t)layers), &aok);
		}
		bp_json_set(o, "attention", done(a, aok), &ok);
	}
	bp_json_set(pr, "tokens", json_integer(mb->tokens), &ok);
	if (mb->fwd && mb->bwd) {
		bp_json_set(pr, "fwd_us", bp_json_real_array(mb->fwd, (size_t)pp), &ok);
		bp_json_set(pr, "bwd_us", bp_json_real_array(mb->bwd, (size_t)pp), &ok);
	}
	bp_json_set(o, "predicted", pr, &ok);
	return done(o, ok);
}

static json_t *pipe_to_json(const struct bp_pipe *pi, int pp, int layers,
			    const struct bp_doc_index *m)
{
	json_t *o = json_object(), *mbs = json_array(), *pr = json_object();
	int ok = o && mbs && pr;
	for (size_t j = 0; ok && j < pi->nmbs; j++)
		bp_json_append(mbs, mb_to_json(&pi->mbs[j], pp, layers, m), &ok);
	bp_json_set(o, "microbatches", mbs, &ok);
	bp_json_set(pr, "time_us", bp_json_real(pi->time_us), &ok);
	if (pi->busy_us)
		bp_json_set(pr, "busy_us", bp_json_real_array(pi->busy_us, (size_t)pp), &ok);
	if (pi->peak_mem)
		bp_json_set(pr, "peak_mem_bytes", int_array(pi->peak_mem, (size_t)pp), &ok);
	bp_json_set(o, "predicted", pr, &ok);
	return done(o, ok);
}

static json_t *step_to_json(const struct bp_plan *p, const struct bp_step *st,
			    const struct bp_doc_index *m)
{
	json_t *o = json_object(), *docs = json_array(), *del = json_array(),
	       *pipes = json_array(), *pr = json_object();
	int ok = o && docs && del && pipes && pr;
	const struct bp_layout *l = bp_plan_layout(p, st);
	for (size_t i = 0; ok && i < st->ndocs; i++) {
		const struct bp_doc *d = &st->docs[i];
		int64_t t[4] = {d->id, d->len, d->sample, d->soff};
		bp_json_append(docs, int_array(t, m ? 4 : 2), &ok);
	}
	for (size_t i = 0; ok && i < st->ndelayed; i++) {
		int64_t t[3] = {st->delayed[i].doc, st->delayed[i].len, st->delayed[i].to_step};
		bp_json_append(del, int_array(t, 3), &ok);
	}
	for (size_t i = 0; ok && i < st->npipes; i++)
		bp_json_append(pipes, pipe_to_json(&st->pipes[i], l->pipes[i].sc.pp,
						   p->model.layers, m), &ok);
	bp_json_set(o, "index", json_integer(st->index), &ok);
	bp_json_set(o, "layout", json_integer(st->layout), &ok);
	bp_json_set(o, "docs", docs, &ok);
	bp_json_set(o, "delayed", del, &ok);
	bp_json_set(o, "pipelines", pipes, &ok);
	bp_json_set(o, "sync", json_string(st->sync), &ok);
	if (st->nca) {
		json_t *ca = json_array();
		int cok = ca != NULL;
		for (size_t i = 0; cok && i < st->nca; i++) {
			const struct bp_ca_task *c = &st->ca[i];
			int64_t t[7] = {c->tick, c->server, c->doc, c->q0, c->q1, c->kv0, c->kv1};
			bp_json_append(ca, int_array(t, 7), &cok);
		}
		bp_json_set(o, "ca_tasks", done(ca, cok), &ok);
	}
	if (st->record && st->record_ops) {
		json_t *r = st->record_ops->to_json(st->record);
		if (r && json_object_set_new(r, "kind", json_string(st->record_ops->name)) < 0) {
			json_decref(r);
			r = NULL;
		}
		bp_json_set(o, "record", r, &ok);
	}
	if (bp_json_write_fields(pr, metric_fields, BP_ARRAY_LEN(metric_fields), &st->m) < 0)
		ok = 0;
	else
		drop_unrecorded(pr, metric_fields, BP_ARRAY_LEN(metric_fields), &st->m);
	bp_json_set(o, "predicted", pr, &ok);
	return done(o, ok);
}

static json_t *layout_to_json(const struct bp_layout *l)
{
	json_t *o = json_object(), *pipes = json_array();
	int ok = o && pipes;
	for (size_t i = 0; ok && i < l->npipes; i++) {
		const struct bp_lpipe *p = &l->pipes[i];
		json_t *po = json_object(), *ranks = json_array();
		int pok = po && ranks;
		size_t per = (size_t)p->sc.tp * p->sc.cp;
		for (int s = 0; pok && s < p->sc.pp; s++)
			bp_json_append(ranks, int32_array(p->ranks + (size_t)s * per, per), &pok);
		bp_json_set(po, "tp", json_integer(p->sc.tp), &pok);
		bp_json_set(po, "cp", json_integer(p->sc.cp), &pok);
		bp_json_set(po, "pp", json_integer(p->sc.pp), &pok);
		bp_json_set(po, "ranks", ranks, &pok);
		bp_json_set(po, "stage_layers", int32_array(p->stage_layers, (size_t)p->sc.pp),
			    &pok);
		bp_json_set(po, "max_microbatch_tokens", json_integer(p->mb_max_tokens), &pok);
		bp_json_append(pipes, done(po, pok), &ok);
	}
	bp_json_set(o, "schedule", json_string(l->schedule), &ok);
	if (l->vstages > 1) /* absent: 1, as every plan before interleaved 1F1B */
		bp_json_set(o, "virtual_stages", json_integer(l->vstages), &ok);
	bp_json_set(o, "pipelines", pipes, &ok);
	bp_json_set(o, "servers", int32_array(l->servers, l->nservers), &ok);
	return done(o, ok);
}

static json_t *named(const char *name, const char *sha)
{
	json_t *o = json_object();
	int ok = o != NULL;
	bp_json_set(o, "name", json_string(name), &ok);
	bp_json_set(o, "sha256", json_string(sha), &ok);
	return done(o, ok);
}

/* A window of a longer run (plan.h): its first step, whether the run goes on, and the
 * documents it trains that earlier steps drew, [id, len, step, to_step] (and sample,
 * sample_offset in a plan of samples). */
static json_t *window_to_json(const struct bp_plan *p)
{
	json_t *o = json_object(), *c = json_array();
	int ok = o && c, samples = p->source.order != BP_ORDER_DRAW;
	for (size_t i = 0; ok && i < p->ncarried; i++) {
		const struct bp_carried *x = &p->carried[i];
		int64_t t[6] = {x->d.id, x->d.len, x->step, x->to_step, x->d.sample, x->d.soff};
		bp_json_append(c, int_array(t, samples ? 6 : 4), &ok);
	}
	bp_json_set(o, "first_step", json_integer(p->first_step), &ok);
	bp_json_set(o, "open", json_boolean(p->open), &ok);
	bp_json_set(o, "carried_in", c, &ok);
	return done(o, ok);
}

/* The plan without its steps and summary: what a plan of lines writes as its first line. */
static json_t *header_to_json(const struct bp_plan *p)
{
	json_t *root = json_object(), *inputs = json_object(), *cl = json_object(),
	       *me = json_object(), *params = json_object(), *sa = json_object(),
	       *lays = json_array();
	int ok = root && inputs && cl && me && params && sa && lays;
	bp_json_set(inputs, "dataset", named(p->dataset, p->dataset_sha), &ok);
	bp_json_set(inputs, "profile", named(p->profile, p->profile_sha), &ok);
	bp_json_set(inputs, "seed", json_integer((json_int_t)p->seed), &ok);
	if (bp_json_write_fields(cl, cluster_fields, BP_ARRAY_LEN(cluster_fields),
				 &p->cluster) < 0 ||
	    bp_json_write_fields(sa, sampling_fields, BP_ARRAY_LEN(sampling_fields), p) < 0)
		ok = 0;
	for (size_t i = 0; i < p->nparams; i++)
		bp_json_set(params, p->params[i].key, json_string(p->params[i].value), &ok);
	bp_json_set(me, "name", json_string(p->method), &ok);
	bp_json_set(me, "params", params, &ok);
	bp_json_set(sa, "over_length", json_string(overlen_names[p->overlen]), &ok);
	bp_json_set(sa, "documents", json_string(bp_documents_name(p->documents)), &ok);
	/* draw: a what-if plan of lengths drawn from a distribution; file, shuffle: the
	 * team's samples (source) */
	bp_json_set(sa, "order", json_string(bp_order_name(p->source.order)), &ok);
	if (p->source.order != BP_ORDER_DRAW) {
		json_t *so = json_object();
		int sok = so != NULL;
		if (sok && bp_json_write_fields(so, source_fields, BP_ARRAY_LEN(source_fields),
						&p->source) < 0)
			sok = 0;
		bp_json_set(so, "last_batch", json_string(bp_last_batch_name(p->source.last)),
			    &sok);
		bp_json_set(so, "data_ended", json_boolean(p->source.data_ended), &sok);
		bp_json_set(sa, "source", done(so, sok), &ok);
	}
	for (size_t i = 0; ok && i < p->nlayouts; i++)
		bp_json_append(lays, layout_to_json(&p->layouts[i]), &ok);
	bp_json_set(root, "format", json_string(BP_PLAN_FORMAT), &ok);
	bp_json_set(root, "inputs", inputs, &ok);
	bp_json_set(root, "cluster", cl, &ok);
	bp_json_set(root, "model", bp_model_to_json(&p->model), &ok);
	bp_json_set(root, "method", me, &ok);
	bp_json_set(root, "sampling", sa, &ok);
	/* the training settings the predictions assume, present only when not the default */
	if (p->recompute != BP_RECOMPUTE_NONE || p->optimizer_replicated) {
		json_t *tr = json_object();
		int tok = tr != NULL;
		if (p->recompute != BP_RECOMPUTE_NONE)
			bp_json_set(tr, "recompute", json_string(bp_recompute_name(p->recompute)),
				    &tok);
		if (p->optimizer_replicated)
			bp_json_set(tr, "optimizer", json_string("replicated"), &tok);
		bp_json_set(root, "training", done(tr, tok), &ok);
	}
	bp_json_set(root, "layouts", lays, &ok);
	if (p->first_step || p->open || p->ncarried)
		bp_json_set(root, "window", window_to_json(p), &ok);
	return done(root, ok);
}

static json_t *summary_to_json(const struct bp_plan *p)
{
	json_t *sum = json_object();
	if (!sum || bp_json_write_fields(sum, summary_fields, BP_ARRAY_LEN(summary_fields),
					 &p->summary) < 0) {
		json_decref(sum);
		return NULL;
	}
	drop_unrecorded(sum, summary_fields, BP_ARRAY_LEN(summary_fields), &p->summary);
	return sum;
}

/* The documents by id when spans name samples (a plan of samples), else m->d NULL. */
static int sample_map(const struct bp_plan *p, struct bp_doc_index *m)
{
	struct bp_error e;
	m->d = NULL;
	m->n = 0;
	return p->source.order != BP_ORDER_DRAW ? bp_doc_index_build(m, p, &e) : 0;
}

json_t *bp_plan_to_json(const struct bp_plan *p)
{
	json_t *root = header_to_json(p), *steps = json_array();
	struct bp_doc_index map;
	int ok = root && steps && sample_map(p, &map) == 0;
	const struct bp_doc_index *m = p->source.order != BP_ORDER_DRAW ? &map : NULL;
	for (size_t i = 0; ok && i < p->nsteps; i++)
		bp_json_append(steps, step_to_json(p, &p->steps[i], m), &ok);
	free(map.d);
	bp_json_set(root, "steps", steps, &ok);
	bp_json_set(root, "summary", summary_to_json(p), &ok);
	return done(root, ok);
}

/* One object as one line: compact, keys sorted. */
static int put_line(FILE *f, json_t *o)
{
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	if (!text)
		return -1;
	int bad = fputs(text, f) < 0 || fputc('\n', f) == EOF;
	free(text);
	return bad ? -1 : 0;
}

int bp_plan_write_header(const struct bp_plan *p, FILE *f, struct bp_error *err)
{
	json_t *h = header_to_json(p);
	int ok = h != NULL && json_object_set_new(h, "layout", json_string("lines")) == 0;
	if (!ok)
		json_decref(h);
	if (!ok || put_line(f, h) < 0)
		return bp_errorf(err, "cannot write the plan's header: %s",
				 ferror(f) ? "write error" : "out of memory");
	return 0;
}

int bp_plan_write_steps(const struct bp_plan *p, FILE *f, struct bp_error *err)
{
	struct bp_doc_index map;
	if (sample_map(p, &map) < 0)
		return bp_errorf(err, "out of memory");
	const struct bp_doc_index *m = p->source.order != BP_ORDER_DRAW ? &map : NULL;
	int ok = 1;
	for (size_t i = 0; ok && i < p->nsteps; i++)
		ok = put_line(f, step_to_json(p, &p->steps[i], m)) == 0;
	free(map.d);
	if (!ok)
		return bp_errorf(err, "cannot write the plan's steps: %s",
				 ferror(f) ? "write error" : "out of memory");
	return 0;
}

int bp_plan_write_summary(const struct bp_plan *p, FILE *f, struct bp_error *err)
{
	json_t *s = summary_to_json(p);
	json_t *sum = s ? json_pack("{s:o}", "summary", s) : NULL; /* "o" takes s */
	if (!sum || put_line(f, sum) < 0)
		return bp_errorf(err, "cannot write the plan's summary: %s",
				 ferror(f) ? "write error" : "out of memory");
	return 0;
}

int bp_plan_write_lines(const struct bp_plan *p, FILE *f, struct bp_error *err)
{
	if (bp_plan_write_header(p, f, err) < 0 || bp_plan_write_steps(p, f, err) < 0 ||
	    bp_plan_write_summary(p, f, err) < 0)
		return -1;
	return 0;
}

int bp_plan_text_is_lines(const char *text, size_t len)
{
	const char *nl = memchr(text, '\n', len);
	size_t n = nl ? (size_t)(nl - text) : len;
	json_t *o = n > 1 ? json_loadb(text, n, JSON_REJECT_DUPLICATES, NULL) : NULL;
	int yes = json_is_object(o) && json_object_get(o, "layout") != NULL;
	json_decref(o);
	return yes;
}

static int from_json_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_plan_from_json(out, root, err);
}

int bp_plan_parse(struct bp_plan *p, const char *text, size_t len, struct bp_error *err)
{
	if (!bp_plan_text_is_lines(text, len))
		return bp_json_parse_text(text, len, from_json_cb, p, err);
	/* a plan of lines: the window reader (below) over the text, one window for all */
	struct bp_plan_lines r;
	struct bp_plan header;
	int64_t first;
	int rc = -1;
	memset(&r, 0, sizeof(r));
	bp_plan_init(&header);
	FILE *f = fmemopen((void *)text, len, "r");
	if (!f)
		return bp_errorf(err, "cannot read the plan: %s", strerror(errno));
	if (bp_plan_lines_open(&r, f, &header, err) < 0)
		goto out;
	int got = bp_plan_lines_window(&r, SIZE_MAX, &header, p, &first, err);
	if (got < 0)
		goto out;
	if (!got) { /* no step line: the header is the plan */
		*p = header;
		bp_plan_init(&header);
	}
	rc = bp_plan_lines_summary(&r, &p->summary, err);
out:
	bp_plan_lines_close(&r);
	fclose(f);
	bp_plan_release(&header);
	return rc;
}

/* ---- reading ---- */

static int read_int_tuple(json_t *a, size_t n, int64_t *out, const char *where,
			  struct bp_error *err)
{
	if (!json_is_array(a) || json_array_size(a) != n)
		return bp_errorf(err, "%s is not an array of %zu integers", where, n);
	for (size_t i = 0; i < n; i++) {
		json_t *x = json_array_get(a, i);
		if (!json_is_integer(x))
			return bp_errorf(err, "%s[%zu] is not an integer", where, i);
		out[i] = json_integer_value(x);
	}
	return 0;
}

static int read_int32_vec(json_t *o, const char *key, size_t n, int lo, int hi, int **out,
			  const char *where, struct bp_error *err)
{
	json_t *a = bp_json_get_array(o, key, where, err);
	if (!a)
		return -1;
	if (json_array_size(a) != n)
		return bp_errorf(err, "%s.%s has %zu entries, expected %zu", where, key,
				 json_array_size(a), n);
	*out = bp_calloc(n ? n : 1, sizeof(int), err);
	if (!*out)
		return -1;
	for (size_t i = 0; i < n; i++) {
		json_t *x = json_array_get(a, i);
		if (!json_is_integer(x) || json_integer_value(x) < lo ||
		    json_integer_value(x) > hi)
			return bp_errorf(err, "%s.%s[%zu] is not an integer in [%d, %d]", where,
					 key, i, lo, hi);
		(*out)[i] = (int)json_integer_value(x);
	}
	return 0;
}

static int read_real_vec(json_t *o, const char *key, int pp, double **out, const char *where,
			 struct bp_error *err)
{
	size_t n = 0;
	if (bp_json_get_real_array(o, key, 0, out, &n, where, err) < 0)
		return -1;
	if (n != (size_t)pp)
		return bp_errorf(err, "%s.%s has %zu entries, expected pp = %d", where, key, n, pp);
	for (size_t i = 0; i < n; i++)
		if ((*out)[i] < 0 || (*out)[i] > BIG)
			return bp_errorf(err, "%s.%s[%zu] is outside [0, 1e300]", where, key, i);
	return 0;
}

static int read_i64_vec(json_t *o, const char *key, int pp, int64_t **out, const char *where,
			struct bp_error *err)
{
	json_t *a = bp_json_get_array(o, key, where, err);
	if (!a)
		return -1;
	if (json_array_size(a) != (size_t)pp)
		return bp_errorf(err, "%s.%s has %zu entries, expected pp = %d", where, key,
				 json_array_size(a), pp);
	*out = bp_calloc((size_t)pp, sizeof(int64_t), err);
	if (!*out)
		return -1;
	for (int i = 0; i < pp; i++) {
		json_t *x = json_array_get(a, (size_t)i);
		if (!json_is_integer(x) || json_integer_value(x) < 0)
			return bp_errorf(err, "%s.%s[%d] is not a non-negative integer", where, key,
					 i);
		(*out)[i] = json_integer_value(x);
	}
	return 0;
}

static int read_spans(struct bp_mb *mb, json_t *o, const char *where, struct bp_error *err)
{
	char w[256];
	json_t *spans = bp_json_get_array(o, "spans", where, err);
	if (!spans)
		return -1;
	mb->nspans = json_array_size(spans);
	mb->spans = bp_calloc(mb->nspans ? mb->nspans : 1, sizeof(*mb->spans), err);
	if (!mb->spans)
		return -1;
	for (size_t i = 0; i < mb->nspans; i++) {
		int64_t t[5] = {0, 0, 0, 0, 0};
		snprintf(w, sizeof(w), "%.200s.spans[%zu]", where, i);
		/* 5 entries in a plan of samples (sampling.source): checked against the
		 * documents by check_span_samples once every step is read */
		json_t *tu = json_array_get(spans, i);
		size_t k = json_is_array(tu) && json_array_size(tu) == 5 ? 5 : 3;
		if (read_int_tuple(tu, k, t, w, err) < 0)
			return -1;
		mb->spans[i] = (struct bp_span){t[0], t[1], t[2]};
	}
	return 0;
}

static int read_shard(struct bp_mb *mb, json_t *o, const char *where, struct bp_error *err)
{
	char shard[32];
	if (bp_json_get_str(o, "shard", 1, shard, sizeof(shard), where, err) < 0)
		return -1;
	if (bp_shard_parse(shard, &mb->shard) < 0 || mb->shard == BP_SHARD_ADAPTIVE)
		return bp_errorf(err, "%s.shard \"%s\" is not a sharding mode", where, shard);
	return 0;
}

/* v1 micro-batch: {spans, shard, tokens, fwd_us, bwd_us}. */
static int mb_from_v1(struct bp_mb *mb, json_t *o, int pp, const char *where,
		      struct bp_error *err)
{
	static const char *const keys[] = {"spans", "shard", "tokens", "fwd_us", "bwd_us",
					   NULL};
	if (bp_json_check_keys(o, keys, where, err) < 0 || read_spans(mb, o, where, err) < 0 ||
	    read_shard(mb, o, where, err) < 0 ||
	    bp_json_get_int(o, "tokens", 1, 0, INT64_MAX, &mb->tokens, where, err) < 0 ||
	    read_real_vec(o, "fwd_us", pp, &mb->fwd, where, err) < 0 ||
	    read_real_vec(o, "bwd_us", pp, &mb->bwd, where, err) < 0)
		return -1;
	return 0;
}

static int attention_from_json(struct bp_mb *mb, json_t *a, int layers, const char *where,
			       struct bp_error *err)
{
	static const char *const keys[] = {"kind", "block", "k", NULL};
	char kind[32], w[256];
	snprintf(w, sizeof(w), "%.200s.attention", where);
	if (bp_json_check_keys(a, keys, w, err) < 0 ||
	    bp_json_get_str(a, "kind", 1, kind, sizeof(kind), w, err) < 0)
		return -1;
	if (bp_attn_kind_parse(kind, &mb->attn) < 0)
		return bp_errorf(err, "%s.kind \"%s\" is not dense, sparse or disaggregated", w,
				 kind);
	int has_k = json_object_get(a, "k") != NULL, has_b = json_object_get(a, "block") != NULL;
	if (mb->attn != BP_ATTN_SPARSE) {
		if (has_k || has_b)
			return bp_errorf(err, "%s: block and k belong to sparse attention only", w);
		return 0;
	}
	if (bp_json_get_int32(a, "block", 1, 1, 1 << 20, &mb->sparse_block, w, err) < 0 ||
	    read_int32_vec(a, "k", (size_t)layers, -(1 << 30), 1 << 30, &mb->sparse_k, w,
			   err) < 0)
		return -1;
	return 0;
}

/* v2 micro-batch: {spans, shard, attention?, predicted {tokens, fwd_us, bwd_us}}. */
static int mb_from_v2(struct bp_mb *mb, json_t *o, int pp, int layers, const char *where,
		      struct bp_error *err)
{
	static const char *const keys[] = {"spans", "shard", "attention", "predicted", NULL};
	static const char *const pkeys[] = {"tokens", "fwd_us", "bwd_us", NULL};
	char w[256];
	if (bp_json_check_keys(o, keys, where, err) < 0 || read_spans(mb, o, where, err) < 0 ||
	    read_shard(mb, o, where, err) < 0)
		return -1;
	json_t *a = json_object_get(o, "attention");
	if (a && attention_from_json(mb, a, layers, where, err) < 0)
		return -1;
	json_t *pr = bp_json_get_object(o, "predicted", where, err);
	snprintf(w, sizeof(w), "%.200s.predicted", where);
	if (!pr || bp_json_check_keys(pr, pkeys, w, err) < 0 ||
	    bp_json_get_int(pr, "tokens", 1, 0, INT64_MAX, &mb->tokens, w, err) < 0 ||
	    read_real_vec(pr, "fwd_us", pp, &mb->fwd, w, err) < 0 ||
	    read_real_vec(pr, "bwd_us", pp, &mb->bwd, w, err) < 0)
		return -1;
	return 0;
}

static int pipe_from_json(struct bp_pipe *pi, json_t *o, int pp, int layers, int v1,
			  const char *where, struct bp_error *err)
{
	static const char *const keys1[] = {"microbatches", "time_us", "busy_us",
					    "peak_mem_bytes", NULL};
	static const char *const keys2[] = {"microbatches", "predicted", NULL};
	static const char *const pkeys[] = {"time_us", "busy_us", "peak_mem_bytes", NULL};
	char w[256];
	if (bp_json_check_keys(o, v1 ? keys1 : keys2, where, err) < 0)
		return -1;
	json_t *mbs = bp_json_get_array(o, "microbatches", where, err);
	if (!mbs)
		return -1;
	pi->mbs = bp_calloc(json_array_size(mbs) + 1, sizeof(*pi->mbs), err);
	if (!pi->mbs)
		return -1;
	for (size_t j = 0; j < json_array_size(mbs); j++) {
		snprintf(w, sizeof(w), "%.200s.microbatches[%zu]", where, j);
		pi->nmbs = j + 1;
		json_t *m = json_array_get(mbs, j);
		if ((v1 ? mb_from_v1(&pi->mbs[j], m, pp, w, err)
			: mb_from_v2(&pi->mbs[j], m, pp, layers, w, err)) < 0)
			return -1;
	}
	json_t *pr = o;
	const char *pw = where;
	if (!v1) {
		snprintf(w, sizeof(w), "%.200s.predicted", where);
		pw = w;
		pr = bp_json_get_object(o, "predicted", where, err);
		if (!pr || bp_json_check_keys(pr, pkeys, pw, err) < 0)
			return -1;
	}
	if (bp_json_get_real(pr, "time_us", 1, 0, BIG, &pi->time_us, pw, err) < 0 ||
	    read_real_vec(pr, "busy_us", pp, &pi->busy_us, pw, err) < 0 ||
	    read_i64_vec(pr, "peak_mem_bytes", pp, &pi->peak_mem, pw, err) < 0)
		return -1;
	return 0;
}

static int record_from_json(struct bp_step *st, json_t *ro, const char *where,
			    struct bp_error *err)
{
	char kind[32];
	if (bp_json_get_str(ro, "kind", 1, kind, sizeof(kind), where, err) < 0)
		return -1;
	const struct bp_record_ops *ops = bp_record_find(kind);
	if (!ops)
		return bp_errorf(err, "%s.kind \"%s\" is no method's record", where, kind);
	void *r = bp_step_set_record(st, ops, err);
	if (!r)
		return -1;
	json_t *copy = json_copy(ro);
	if (!copy)
		return bp_errorf(err, "out of memory");
	json_object_del(copy, "kind");
	int rc = ops->from_json(r, copy, where, err);
	json_decref(copy);
	return rc;
}

static int step_from_json(const struct bp_plan *p, struct bp_step *st, json_t *o, int v1,
			  const char *where, struct bp_error *err)
{
	static const char *const keys1[] = {"index", "docs", "delayed", "pipelines", "metrics",
					    "solver", NULL};
	static const char *const keys2[] = {"index", "layout", "docs", "delayed", "pipelines",
					    "sync", "ca_tasks", "record", "predicted", NULL};
	char w[256];
	int64_t layout = 0;
	if (bp_json_check_keys(o, v1 ? keys1 : keys2, where, err) < 0 ||
	    bp_json_get_int(o, "index", 1, 0, INT64_MAX, &st->index, where, err) < 0)
		return -1;
	if (!v1) {
		if (bp_json_get_int(o, "layout", 1, 0, (int64_t)p->nlayouts - 1, &layout, where,
				    err) < 0 ||
		    bp_json_get_str(o, "sync", 1, st->sync, sizeof(st->sync), where, err) < 0)
			return -1;
	} else {
		strcpy(st->sync, "dp-allreduce");
	}
	st->layout = (int)layout;
	const struct bp_layout *l = &p->layouts[st->layout];
	json_t *docs = bp_json_get_array(o, "docs", where, err);
	json_t *del = docs ? bp_json_get_array(o, "delayed", where, err) : NULL;
	json_t *pipes = del ? bp_json_get_array(o, "pipelines", where, err) : NULL;
	if (!pipes)
		return -1;
	if (json_array_size(pipes) != l->npipes)
		return bp_errorf(err, "%s has %zu pipelines but layout %d has %zu", where,
				 json_array_size(pipes), st->layout, l->npipes);
	st->docs = bp_calloc(json_array_size(docs) + 1, sizeof(*st->docs), err);
	st->delayed = bp_calloc(json_array_size(del) + 1, sizeof(*st->delayed), err);
	st->pipes = bp_calloc(json_array_size(pipes) + 1, sizeof(*st->pipes), err);
	if (!st->docs || !st->delayed || !st->pipes)
		return -1;
	for (size_t i = 0; i < json_array_size(docs); i++) {
		/* [id, len], or [id, len, sample, sample_offset] in a plan of samples */
		int64_t t[4] = {0, 0, 0, 0};
		int samples = p->source.order != BP_ORDER_DRAW;
		snprintf(w, sizeof(w), "%.200s.docs[%zu]", where, i);
		if (read_int_tuple(json_array_get(docs, i), samples ? 4 : 2, t, w, err) < 0)
			return -1;
		if (samples && (t[2] < 0 || t[3] < 0))
			return bp_errorf(err, "%s: sample %lld at offset %lld is negative", w,
					 (long long)t[2], (long long)t[3]);
		st->docs[i] = (struct bp_doc){.id = t[0], .len = t[1], .sample = t[2],
					      .soff = t[3]};
		st->ndocs = i + 1;
	}
	for (size_t i = 0; i < json_array_size(del); i++) {
		int64_t t[3] = {0, 0, 0};
		snprintf(w, sizeof(w), "%.200s.delayed[%zu]", where, i);
		if (read_int_tuple(json_array_get(del, i), 3, t, w, err) < 0)
			return -1;
		st->delayed[i] = (struct bp_delayed){t[0], t[1], t[2]};
		st->ndelayed = i + 1;
	}
	for (size_t i = 0; i < json_array_size(pipes); i++) {
		snprintf(w, sizeof(w), "%.200s.pipelines[%zu]", where, i);
		st->npipes = i + 1;
		if (pipe_from_json(&st->pipes[i], json_array_get(pipes, i), l->pipes[i].sc.pp,
				   p->model.layers, v1, w, err) < 0)
			return -1;
	}
	json_t *ca = json_object_get(o, "ca_tasks");
	if (ca) {
		if (!json_is_array(ca))
			return bp_errorf(err, "%s.ca_tasks is not an array", where);
		st->ca = bp_calloc(json_array_size(ca) + 1, sizeof(*st->ca), err);
		if (!st->ca)
			return -1;
		for (size_t i = 0; i < json_array_size(ca); i++) {
			int64_t t[7];
			snprintf(w, sizeof(w), "%.200s.ca_tasks[%zu]", where, i);
			if (read_int_tuple(json_array_get(ca, i), 7, t, w, err) < 0)
				return -1;
			if (t[1] < -1 || t[1] > (1 << 24))
				return bp_errorf(err, "%s[1] (server) is out of range", w);
			st->ca[i] = (struct bp_ca_task){t[0], (int)t[1], t[2], t[3], t[4], t[5], t[6]};
			st->nca = i + 1;
		}
	}
	json_t *ro = json_object_get(o, v1 ? "solver" : "record");
	if (ro) {
		snprintf(w, sizeof(w), "%.200s.%s", where, v1 ? "solver" : "record");
		if (v1) { /* v1's solver record is the ILP methods' */
			json_t *c = json_copy(ro);
			int rc = !c || json_object_set_new(c, "kind", json_string("ilp")) < 0
					 ? bp_errorf(err, "out of memory")
					 : record_from_json(st, c, w, err);
			json_decref(c);
			if (rc < 0)
				return -1;
		} else if (record_from_json(st, ro, w, err) < 0) {
			return -1;
		}
	}
	snprintf(w, sizeof(w), "%.200s.%s", where, v1 ? "metrics" : "predicted");
	json_t *mo = bp_json_get_object(o, v1 ? "metrics" : "predicted", where, err);
	if (!mo)
		return -1;
	st->m.model_tflop = -1; /* not recorded unless present */
	st->m.pull_us = st->m.push_us = st->m.optimizer_us = st->m.op_exposed_us = -1;
	st->m.lnk_bytes = st->m.lnk_slices_pull = st->m.lnk_slices_push = -1;
	return bp_json_read_fields(mo, metric_fields, BP_ARRAY_LEN(metric_fields), &st->m, NULL,
				   1, w, err);
}

static int sha_ok(const char *s)
{
	if (strlen(s) != 64)
		return 0;
	for (const char *c = s; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return 0;
	return 1;
}

static int read_named(json_t *o, const char *key, char *name, size_t nn, char *sha,
		      struct bp_error *err)
{
	static const char *const keys[] = {"name", "sha256", NULL};
	char w[64];
	snprintf(w, sizeof(w), "plan.inputs.%s", key);
	json_t *x = bp_json_get_object(o, key, "plan.inputs", err);
	if (!x || bp_json_check_keys(x, keys, w, err) < 0 ||
	    bp_json_get_str(x, "name", 1, name, nn, w, err) < 0 ||
	    bp_json_get_str(x, "sha256", 1, sha, 65, w, err) < 0)
		return -1;
	if (!sha_ok(sha))
		return bp_errorf(err, "%s.sha256 is not 64 lowercase hex digits", w);
	return 0;
}

static int layout_from_json(struct bp_layout *l, json_t *o, int layers, const char *where,
			    struct bp_error *err)
{
	static const char *const keys[] = {"schedule", "virtual_stages", "pipelines", "servers",
					   NULL};
	static const char *const pkeys[] = {"tp", "cp", "pp", "ranks", "stage_layers",
					    "max_microbatch_tokens", NULL};
	char w[256];
	int *ranks = NULL, *sl = NULL, rc = -1;
	int64_t vst = 1;
	if (bp_json_check_keys(o, keys, where, err) < 0 ||
	    bp_json_get_str(o, "schedule", 1, l->schedule, sizeof(l->schedule), where, err) < 0 ||
	    bp_json_get_int(o, "virtual_stages", 0, 1, 1024, &vst, where, err) < 0)
		return -1;
	l->vstages = (int)vst;
	json_t *pipes = bp_json_get_array(o, "pipelines", where, err);
	json_t *servers = pipes ? bp_json_get_array(o, "servers", where, err) : NULL;
	if (!servers)
		return -1;
	for (size_t i = 0; i < json_array_size(pipes); i++) {
		json_t *po = json_array_get(pipes, i);
		struct bp_scheme sc = {0, 0, 0};
		int64_t cap = 0;
		snprintf(w, sizeof(w), "%.200s.pipelines[%zu]", where, i);
		if (bp_json_check_keys(po, pkeys, w, err) < 0 ||
		    bp_json_get_int32(po, "tp", 1, 1, 1 << 20, &sc.tp, w, err) < 0 ||
		    bp_json_get_int32(po, "cp", 1, 1, 1 << 20, &sc.cp, w, err) < 0 ||
		    bp_json_get_int32(po, "pp", 1, 1, 1 << 20, &sc.pp, w, err) < 0 ||
		    bp_json_get_int(po, "max_microbatch_tokens", 1, 1, INT64_MAX, &cap, w, err) < 0)
			goto out;
		if ((int64_t)sc.tp * sc.cp * sc.pp > (1 << 24)) {
			bp_errorf(err, "%s: tp*cp*pp exceeds %d", w, 1 << 24);
			goto out;
		}
		json_t *ra = bp_json_get_array(po, "ranks", w, err);
		if (!ra)
			goto out;
		if (json_array_size(ra) != (size_t)sc.pp) {
			bp_errorf(err, "%s.ranks has %zu stages, expected pp = %d", w,
				  json_array_size(ra), sc.pp);
			goto out;
		}
		size_t per = (size_t)sc.tp * sc.cp;
		ranks = bp_calloc(per * sc.pp, sizeof(int), err);
		if (!ranks)
			goto out;
		for (int s = 0; s < sc.pp; s++) {
			json_t *st = json_array_get(ra, (size_t)s);
			char ws[300];
			snprintf(ws, sizeof(ws), "%.200s.ranks[%d]", w, s);
			if (!json_is_array(st) || json_array_size(st) != per) {
				bp_errorf(err, "%s is not an array of tp*cp = %zu ranks", ws, per);
				goto out;
			}
			for (size_t k = 0; k < per; k++) {
				json_t *x = json_array_get(st, k);
				if (!json_is_integer(x) || json_integer_value(x) < 0 ||
				    json_integer_value(x) >= (1 << 24)) {
					bp_errorf(err, "%s[%zu] is not a rank", ws, k);
					goto out;
				}
				ranks[s * per + k] = (int)json_integer_value(x);
			}
		}
		if (read_int32_vec(po, "stage_layers", (size_t)sc.pp, 0, 1 << 20, &sl, w, err) < 0 ||
		    bp_layout_add_pipe(l, sc, ranks, sl, layers, cap, err) < 0)
			goto out;
		free(ranks);
		free(sl);
		ranks = sl = NULL;
	}
	if (json_array_size(servers)) {
		if (read_int32_vec(o, "servers", json_array_size(servers), 0, (1 << 24) - 1,
				   &l->servers, where, err) < 0)
			goto out;
		l->nservers = json_array_size(servers);
	}
	rc = 0;
out:
	free(ranks);
	free(sl);
	return rc;
}

/* v1's cluster {tp, cp, pp, dp} and method.max_microbatch_tokens: one Megatron layout. */
static int layout_from_v1(struct bp_plan *p, json_t *co, json_t *me, struct bp_error *err)
{
	struct bp_scheme sc;
	int dp;
	int64_t cap;
	struct bp_layout l;
	const char *w = "plan.cluster";
	if (bp_json_get_int32(co, "tp", 1, 1, 1 << 24, &sc.tp, w, err) < 0 ||
	    bp_json_get_int32(co, "cp", 1, 1, 1 << 24, &sc.cp, w, err) < 0 ||
	    bp_json_get_int32(co, "pp", 1, 1, 1 << 24, &sc.pp, w, err) < 0 ||
	    bp_json_get_int32(co, "dp", 1, 1, 1 << 24, &dp, w, err) < 0 ||
	    bp_json_get_int(me, "max_microbatch_tokens", 1, 1, INT64_MAX, &cap, "plan.method",
			    err) < 0)
		return -1;
	int64_t prod = (int64_t)sc.tp * sc.cp * sc.pp * dp;
	if (prod != p->cluster.gpus)
		return bp_errorf(err, "plan.cluster: tp*cp*pp*dp = %lld does not match %d GPUs",
				 (long long)prod, p->cluster.gpus);
	if (sc.pp > p->model.layers)
		return bp_errorf(err, "plan.cluster: pp %d exceeds the model's %d layers", sc.pp,
				 p->model.layers);
	bp_layout_init(&l);
	if (bp_layout_megatron(&l, sc, dp, p->model.layers, cap, err) < 0 ||
	    bp_plan_add_layout(p, &l, err) < 0) {
		bp_layout_release(&l);
		return -1;
	}
	return 0;
}

static int source_from_json(struct bp_source *src, json_t *o, struct bp_error *err)
{
	static const char *const extra[] = {"last_batch", "data_ended", NULL};
	const char *w = "plan.sampling.source";
	char last[16];
	if (!json_is_object(o))
		return bp_errorf(err, "%s is not an object", w);
	if (bp_json_read_fields(o, source_fields, BP_ARRAY_LEN(source_fields), src, extra, 1, w,
				err) < 0 ||
	    bp_json_get_str(o, "last_batch", 1, last, sizeof(last), w, err) < 0)
		return -1;
	if (bp_last_batch_parse(last, &src->last) < 0)
		return bp_errorf(err, "%s.last_batch \"%s\" is not keep or drop", w, last);
	json_t *de = json_object_get(o, "data_ended");
	if (!json_is_boolean(de))
		return bp_errorf(err, "%s.data_ended is not true or false", w);
	src->data_ended = json_is_true(de);
	if (src->end_pos < src->first_pos)
		return bp_errorf(err, "%s: end_position %lld is before first_position %lld", w,
				 (long long)src->end_pos, (long long)src->first_pos);
	return 0;
}

static int window_from_json(struct bp_plan *p, json_t *o, struct bp_error *err)
{
	static const char *const keys[] = {"first_step", "open", "carried_in", NULL};
	const char *w = "plan.window";
	int samples = p->source.order != BP_ORDER_DRAW;
	if (!json_is_object(o))
		return bp_errorf(err, "%s is not an object", w);
	if (bp_json_check_keys(o, keys, w, err) < 0 ||
	    bp_json_get_int(o, "first_step", 1, 0, INT64_MAX / 2, &p->first_step, w, err) < 0)
		return -1;
	json_t *op = json_object_get(o, "open");
	if (!json_is_boolean(op))
		return bp_errorf(err, "%s.open is missing or not true or false", w);
	p->open = json_is_true(op);
	json_t *c = bp_json_get_array(o, "carried_in", w, err);
	if (!c)
		return -1;
	p->carried = bp_calloc(json_array_size(c) + 1, sizeof(*p->carried), err);
	if (!p->carried)
		return -1;
	for (size_t i = 0; i < json_array_size(c); i++) {
		int64_t t[6] = {0, 0, 0, 0, 0, 0};
		char wi[64];
		snprintf(wi, sizeof(wi), "%s.carried_in[%zu]", w, i);
		if (read_int_tuple(json_array_get(c, i), samples ? 6 : 4, t, wi, err) < 0)
			return -1;
		if (t[0] < 0 || t[1] < 1 || t[2] < 0 || t[2] >= p->first_step ||
		    t[3] < p->first_step || t[4] < 0 || t[5] < 0)
			return bp_errorf(err, "%s: document %lld of %lld tokens drawn in step %lld "
					 "for step %lld is not a document an earlier step drew for "
					 "this window (first step %lld)", wi, (long long)t[0],
					 (long long)t[1], (long long)t[2], (long long)t[3],
					 (long long)p->first_step);
		if (i && t[0] <= p->carried[i - 1].d.id)
			return bp_errorf(err, "%s: document %lld does not follow %lld (ids ascend)",
					 wi, (long long)t[0], (long long)p->carried[i - 1].d.id);
		p->carried[i] = (struct bp_carried){
			.d = {.id = t[0], .len = t[1], .sample = t[4], .soff = t[5]},
			.step = t[2], .to_step = t[3]};
		p->ncarried = i + 1;
	}
	return 0;
}

/* Every span of a plan of samples names the sample its document is and where in it the
 * span starts, [doc, offset, len, sample, sample_offset]; a plan of draws names neither. */
static int check_span_samples(const struct bp_plan *p, json_t *steps, struct bp_error *err)
{
	struct bp_doc_index m = {NULL, 0};
	int samples = p->source.order != BP_ORDER_DRAW, rc = -1;
	if (samples && bp_doc_index_build(&m, p, err) < 0)
		return -1;
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *st = &p->steps[i];
		json_t *pipes = json_object_get(json_array_get(steps, i), "pipelines");
		for (size_t k = 0; k < st->npipes; k++) {
			json_t *mbs = json_object_get(json_array_get(pipes, k), "microbatches");
			for (size_t j = 0; j < st->pipes[k].nmbs; j++) {
				const struct bp_mb *mb = &st->pipes[k].mbs[j];
				json_t *sp = json_object_get(json_array_get(mbs, j), "spans");
				for (size_t q = 0; q < mb->nspans; q++) {
					json_t *t = json_array_get(sp, q);
					const struct bp_span *s = &mb->spans[q];
					char w[160];
					snprintf(w, sizeof(w), "plan.steps[%zu].pipelines[%zu]."
						 "microbatches[%zu].spans[%zu]", i, k, j, q);
					if (json_array_size(t) != (samples ? 5u : 3u)) {
						bp_errorf(err, "%s has %zu entries; a plan %s has %d",
							  w, json_array_size(t),
							  samples ? "of samples (sampling.source)"
								  : "of draws",
							  samples ? 5 : 3);
						goto out;
					}
					if (!samples)
						continue;
					const struct bp_doc *d = bp_doc_index_find(&m, s->doc);
					int64_t smp = json_integer_value(json_array_get(t, 3));
					int64_t off = json_integer_value(json_array_get(t, 4));
					if (d && (smp != d->sample || off != d->soff + s->offset)) {
						bp_errorf(err, "%s names sample %lld at offset %lld, "
							  "but document %lld is sample %lld from "
							  "offset %lld", w, (long long)smp,
							  (long long)off, (long long)s->doc,
							  (long long)d->sample, (long long)d->soff);
						goto out;
					}
				}
			}
		}
	}
	rc = 0;
out:
	free(m.d);
	return rc;
}

int bp_plan_from_json(struct bp_plan *p, json_t *root, struct bp_error *err)
{
	static const char *const keys1[] = {"format", "inputs", "cluster", "model", "method",
					    "sampling", "steps", "summary", NULL};
	static const char *const keys2[] = {"format", "inputs", "cluster", "model", "method",
					    "sampling", "training", "layouts", "window", "steps",
					    "summary", NULL};
	static const char *const ikeys[] = {"dataset", "profile", "seed", NULL};
	static const char *const cextra1[] = {"tp", "cp", "pp", "dp", NULL};
	static const char *const mkeys1[] = {"name", "params", "max_microbatch_tokens", NULL};
	static const char *const mkeys2[] = {"name", "params", NULL};
	static const char *const sextra1[] = {"over_length", NULL};
	static const char *const sextra[] = {"over_length", "documents", "order", "source",
					     NULL};
	char w[64], ol[16], dm[16] = "per-method", fmt[32];
	int64_t seed = 0;
	if (!json_is_object(root))
		return bp_errorf(err, "plan is not a JSON object");
	if (bp_json_get_str(root, "format", 1, fmt, sizeof(fmt), "plan", err) < 0)
		return -1;
	int v1 = !strcmp(fmt, BP_PLAN_FORMAT_V1);
	if (!v1 && strcmp(fmt, BP_PLAN_FORMAT))
		return bp_errorf(err, "unsupported format \"%s\" (expected \"%s\" or \"%s\")", fmt,
				 BP_PLAN_FORMAT, BP_PLAN_FORMAT_V1);
	if (bp_json_check_keys(root, v1 ? keys1 : keys2, "plan", err) < 0)
		return -1;
	json_t *in = bp_json_get_object(root, "inputs", "plan", err);
	if (!in || bp_json_check_keys(in, ikeys, "plan.inputs", err) < 0 ||
	    read_named(in, "dataset", p->dataset, sizeof(p->dataset), p->dataset_sha, err) < 0 ||
	    read_named(in, "profile", p->profile, sizeof(p->profile), p->profile_sha, err) < 0 ||
	    bp_json_get_int(in, "seed", 1, 0, INT64_MAX, &seed, "plan.inputs", err) < 0)
		return -1;
	p->seed = (uint64_t)seed;
	json_t *co = bp_json_get_object(root, "cluster", "plan", err);
	if (!co || bp_json_read_fields(co, cluster_fields, BP_ARRAY_LEN(cluster_fields),
				       &p->cluster, v1 ? cextra1 : NULL, 1, "plan.cluster",
				       err) < 0)
		return -1;
	if (bp_cluster_check(&p->cluster, err) < 0)
		return bp_error_prefix(err, "plan.cluster");
	json_t *mo = bp_json_get_object(root, "model", "plan", err);
	if (!mo || bp_model_from_json(&p->model, mo, "plan.model", err) < 0)
		return -1;
	json_t *me = bp_json_get_object(root, "method", "plan", err);
	if (!me || bp_json_check_keys(me, v1 ? mkeys1 : mkeys2, "plan.method", err) < 0 ||
	    bp_json_get_str(me, "name", 1, p->method, sizeof(p->method), "plan.method", err) < 0)
		return -1;
	json_t *params = bp_json_get_object(me, "params", "plan.method", err);
	if (!params)
		return -1;
	const char *key;
	json_t *val;
	json_object_foreach(params, key, val) {
		if (!json_is_string(val))
			return bp_errorf(err, "plan.method.params.%.64s is not a string", key);
		if (bp_plan_set_param(p, key, json_string_value(val), err) < 0)
			return -1;
	}
	json_t *tr = json_object_get(root, "training");
	p->recompute = BP_RECOMPUTE_NONE;
	p->optimizer_replicated = 0;
	if (tr) {
		static const char *const tkeys[] = {"recompute", "optimizer", NULL};
		char rs[16] = "none", os[16] = "distributed";
		if (bp_json_check_keys(tr, tkeys, "plan.training", err) < 0 ||
		    bp_json_get_str(tr, "recompute", 0, rs, sizeof(rs), "plan.training", err) < 0 ||
		    bp_json_get_str(tr, "optimizer", 0, os, sizeof(os), "plan.training", err) < 0)
			return -1;
		if (strcmp(os, "distributed") && strcmp(os, "replicated"))
			return bp_errorf(err, "plan.training.optimizer \"%s\" is not distributed or "
					 "replicated", os);
		p->optimizer_replicated = !strcmp(os, "replicated");
		if (bp_recompute_parse(rs, &p->recompute) < 0)
			return bp_errorf(err, "plan.training.recompute \"%s\" is not none, selective "
					 "or full", rs);
	}
	json_t *sa = bp_json_get_object(root, "sampling", "plan", err);
	if (!sa || bp_json_read_fields(sa, sampling_fields, BP_ARRAY_LEN(sampling_fields), p,
				       v1 ? sextra1 : sextra, 1, "plan.sampling", err) < 0 ||
	    bp_json_get_str(sa, "over_length", 1, ol, sizeof(ol), "plan.sampling", err) < 0)
		return -1;
	int found = 0;
	for (int i = 0; i < 3; i++)
		if (!strcmp(ol, overlen_names[i])) {
			p->overlen = (enum bp_overlen)i;
			found = 1;
		}
	if (!found)
		return bp_errorf(err, "plan.sampling.over_length \"%s\" is not truncate, drop or "
				 "error", ol);
	/* Absent: a plan written before the option, when each method decided (documents.h). */
	if ((!v1 && bp_json_get_str(sa, "documents", 0, dm, sizeof(dm), "plan.sampling",
				    err) < 0))
		return -1;
	if (bp_documents_parse(dm, &p->documents) < 0)
		return bp_errorf(err, "plan.sampling.documents \"%s\" is not whole, cut or "
				 "per-method", dm);
	/* Absent: a plan written before issue 22, of draws. */
	char order[16] = "draw";
	if (!v1 && bp_json_get_str(sa, "order", 0, order, sizeof(order), "plan.sampling",
				   err) < 0)
		return -1;
	if (bp_order_parse(order, &p->source.order) < 0)
		return bp_errorf(err, "plan.sampling.order \"%s\" is not draw, file or shuffle",
				 order);
	json_t *src = v1 ? NULL : json_object_get(sa, "source");
	if ((src != NULL) != (p->source.order != BP_ORDER_DRAW))
		return bp_errorf(err, "plan.sampling: order %s %s a source", order,
				 src ? "has no" : "needs");
	if (src && source_from_json(&p->source, src, err) < 0)
		return -1;
	if (v1) {
		if (layout_from_v1(p, co, me, err) < 0)
			return -1;
	} else {
		json_t *lays = bp_json_get_array(root, "layouts", "plan", err);
		if (!lays)
			return -1;
		for (size_t i = 0; i < json_array_size(lays); i++) {
			struct bp_layout l;
			bp_layout_init(&l);
			snprintf(w, sizeof(w), "plan.layouts[%zu]", i);
			if (layout_from_json(&l, json_array_get(lays, i), p->model.layers, w,
					     err) < 0 ||
			    bp_plan_add_layout(p, &l, err) < 0) {
				bp_layout_release(&l);
				return -1;
			}
		}
		if (!p->nlayouts)
			return bp_errorf(err, "plan.layouts is empty");
	}
	for (size_t i = 0; i < p->nlayouts; i++)
		if (bp_layout_check(&p->layouts[i], p->cluster.gpus, p->cluster.gpus_per_node,
				    p->model.layers, err) < 0)
			return bp_error_prefix(err, "plan.layouts[%zu]", i);
	json_t *wo = v1 ? NULL : json_object_get(root, "window");
	if (wo && window_from_json(p, wo, err) < 0)
		return -1;
	json_t *steps = bp_json_get_array(root, "steps", "plan", err);
	if (!steps)
		return -1;
	p->steps = bp_calloc(json_array_size(steps) + 1, sizeof(*p->steps), err);
	if (!p->steps)
		return -1;
	for (size_t i = 0; i < json_array_size(steps); i++) {
		snprintf(w, sizeof(w), "plan.steps[%zu]", i);
		p->nsteps = i + 1;
		if (step_from_json(p, &p->steps[i], json_array_get(steps, i), v1, w, err) < 0)
			return -1;
	}
	if (check_span_samples(p, steps, err) < 0)
		return -1;
	json_t *so = bp_json_get_object(root, "summary", "plan", err);
	if (!so)
		return -1;
	p->summary.model_tflop = p->summary.model_tflops_per_gpu = p->summary.mfu = -1;
	return bp_json_read_fields(so, summary_fields, BP_ARRAY_LEN(summary_fields), &p->summary,
				   NULL, 1, "plan.summary", err);
}

/* ---- a plan of lines read a window of steps at a time (plan.h bp_plan_lines) ---- */

/* Reads the next line into r->line (without its newline): 1, 0 at the end, -1. */
static int next_plan_line(struct bp_plan_lines *r, struct bp_error *err)
{
	ssize_t n = getline(&r->line, &r->cap, r->f);
	if (n < 0) {
		if (ferror(r->f))
			return bp_errorf(err, "cannot read the plan: %s", strerror(errno));
		return 0;
	}
	r->lineno++;
	if (n > 0 && r->line[n - 1] == '\n')
		r->line[--n] = 0;
	if (n > 0 && r->line[n - 1] == '\r')
		r->line[--n] = 0;
	r->len = (size_t)n;
	return 1;
}

/* A plan object from the header, the given steps and a summary: what bp_plan_from_json
 * reads. sampling.steps is set to drawn (the window's drawn steps). */
static json_t *window_root(const struct bp_plan_lines *r, json_t *steps, json_t *summary,
			   int64_t drawn)
{
	json_t *root = json_copy(r->header), *sa = json_copy(json_object_get(r->header,
									   "sampling"));
	int ok = root && sa;
	bp_json_set(sa, "steps", json_integer(drawn), &ok);
	bp_json_set(root, "sampling", sa, &ok);
	bp_json_set(root, "steps", json_incref(steps), &ok);
	bp_json_set(root, "summary", json_incref(summary), &ok);
	if (!ok) {
		json_decref(root);
		return NULL;
	}
	return root;
}

int bp_plan_lines_open(struct bp_plan_lines *r, FILE *f, struct bp_plan *header,
		       struct bp_error *err)
{
	memset(r, 0, sizeof(*r));
	r->f = f;
	int got = next_plan_line(r, err);
	if (got <= 0)
		return got < 0 ? -1 : bp_errorf(err, "the plan is empty");
	json_error_t je;
	r->header = json_loadb(r->line, r->len, JSON_REJECT_DUPLICATES, &je);
	json_t *lay = json_object_get(r->header, "layout");
	if (!json_is_object(r->header) || !json_is_string(lay) ||
	    strcmp(json_string_value(lay), "lines"))
		return bp_errorf(err, "line 1 of the plan is not a header with \"layout\": "
				 "\"lines\"");
	if (json_object_get(r->header, "steps"))
		return bp_errorf(err, "line 1 of the plan holds steps; a plan of lines has one "
				 "per line");
	json_object_del(r->header, "layout");
	/* a header reads as a plan of no steps; its summary arrives on the last line */
	struct bp_plan zero;
	bp_plan_init(&zero);
	r->zero_summary = summary_to_json(&zero);
	json_t *steps = json_array();
	json_t *root = steps && r->zero_summary ? window_root(r, steps, r->zero_summary, 1)
						: NULL;
	json_decref(steps);
	if (!root)
		return bp_errorf(err, "out of memory");
	int rc = bp_plan_from_json(header, root, err);
	json_decref(root);
	if (rc < 0)
		return bp_error_prefix(err, "line 1 of the plan");
	header->nsteps_drawn = json_integer_value(json_object_get(
		json_object_get(r->header, "sampling"), "steps"));
	r->next_index = header->first_step;
	return 0;
}

/* Reads min step lines (or up to the summary line) into a window plan of their own: the
 * run's step numbers, the documents earlier lines delayed into it carried, open when a delay
 * crosses its end (plan.h bp_plan_lines). */
int bp_plan_lines_window(struct bp_plan_lines *r, size_t min, const struct bp_plan *header,
			 struct bp_plan *w, int64_t *first, struct bp_error *err)
{
	json_t *steps = json_array();
	int64_t drawn = 0;
	int rc = -1;
	*first = r->next_index;
	bp_plan_init(w);
	if (!steps)
		return bp_errorf(err, "out of memory");
	json_t *later = json_array(); /* this window's delays past its end, so far */
	if (!later || (!r->pending && !(r->pending = json_array()))) {
		json_decref(steps);
		json_decref(later);
		return bp_errorf(err, "out of memory");
	}
	while (!r->done && json_array_size(steps) < min) {
		int got = next_plan_line(r, err);
		if (got < 0)
			goto out;
		if (!got) {
			bp_errorf(err, "the plan of lines ends after %ld lines without its summary "
				  "line (a truncated file?)", r->lineno);
			goto out;
		}
		json_error_t je;
		json_t *o = json_loadb(r->line, r->len, JSON_REJECT_DUPLICATES, &je);
		if (!json_is_object(o)) {
			bp_errorf(err, "line %ld of the plan: %s", r->lineno,
				  o ? "not a JSON object" : je.text);
			json_decref(o);
			goto out;
		}
		if (json_object_size(o) == 1 && json_object_get(o, "summary")) {
			r->summary = json_incref(json_object_get(o, "summary"));
			json_decref(o);
			r->done = 1;
			break;
		}
		/* steps keep the run's numbers (plan.h's window) */
		json_t *ix = json_object_get(o, "index");
		if (!json_is_integer(ix) || json_integer_value(ix) != r->next_index) {
			json_decref(o);
			bp_errorf(err, "line %ld of the plan: step index is not %lld", r->lineno,
				  (long long)r->next_index);
			goto out;
		}
		/* every delay, with its document, as a carried_in entry [id, len, step, to
		 * (, sample, sample_offset)]: those past the window go to later windows */
		json_t *del = json_object_get(o, "delayed"), *d, *docs = json_object_get(o, "docs");
		size_t k, q;
		json_array_foreach(del, k, d) {
			json_t *e = json_pack("[OOIO]", json_array_get(d, 0), json_array_get(d, 1),
					      (json_int_t)r->next_index, json_array_get(d, 2));
			json_t *x;
			json_array_foreach(docs, q, x)
				if (json_equal(json_array_get(x, 0), json_array_get(d, 0)) &&
				    json_array_size(x) == 4) {
					json_array_append(e, json_array_get(x, 2));
					json_array_append(e, json_array_get(x, 3));
				}
			if (!e) /* a malformed entry: the step's reader names it */
				continue;
			if (json_array_append_new(later, e) < 0) {
				json_decref(o);
				bp_errorf(err, "out of memory");
				goto out;
			}
		}
		if (r->next_index < header->first_step + header->nsteps_drawn)
			drawn++;
		r->next_index++;
		if (json_array_append_new(steps, o) < 0) {
			bp_errorf(err, "out of memory");
			goto out;
		}
	}
	if (json_array_size(steps) == 0) {
		rc = 0;
		goto out;
	}
	/* a window that is the whole plan is the plan as written, sampling.steps included */
	int whole = *first == header->first_step && r->done;
	json_t *root = window_root(r, steps, r->zero_summary,
				   whole ? header->nsteps_drawn : drawn ? drawn : 1);
	/* a window of the file (plan.h): where it starts, the documents earlier steps (or
	 * the file's own carried_in) delayed into it, open when a delay crosses its end */
	if (root && !whole) {
		json_t *wo = json_copy(json_object_get(r->header, "window"));
		int ok = 1, open = 0;
		if (!wo)
			wo = json_pack("{s:b,s:[]}", "open", 0, "carried_in");
		json_t *cin = json_array(), *keep = json_array(), *e;
		size_t k;
		ok = wo && cin && keep;
		if (ok && *first == header->first_step) /* the file's own, into the first windows */
			json_array_extend(r->pending, json_object_get(wo, "carried_in"));
		json_array_foreach(r->pending, k, e) {
			int64_t to = json_integer_value(json_array_get(e, 3));
			json_array_append(to < r->next_index ? cin : keep, e);
		}
		json_array_foreach(later, k, e) {
			if (json_integer_value(json_array_get(e, 3)) >= r->next_index) {
				json_array_append(keep, e);
				open = 1;
			}
		}
		json_decref(r->pending);
		r->pending = keep;
		bp_json_set(wo, "carried_in", cin, &ok);
		if (!r->done || open)
			bp_json_set(wo, "open", json_boolean(open || json_is_true(json_object_get(
							wo, "open"))), &ok);
		bp_json_set(wo, "first_step", json_integer(*first), &ok);
		bp_json_set(root, "window", wo, &ok);
		if (!ok) {
			json_decref(root);
			root = NULL;
		}
	}
	if (!root) {
		bp_errorf(err, "out of memory");
		goto out;
	}
	rc = bp_plan_from_json(w, root, err);
	json_decref(root);
	if (rc < 0) {
		if (!whole)
			bp_error_prefix(err, "steps %lld to %lld", (long long)*first,
					(long long)r->next_index - 1);
		goto out;
	}
	rc = (int)json_array_size(steps) > 0;
out:
	json_decref(steps);
	json_decref(later);
	return rc;
}

int bp_plan_lines_summary(struct bp_plan_lines *r, struct bp_summary *s, struct bp_error *err)
{
	if (!r->done || !r->summary)
		return bp_errorf(err, "the plan's summary line was not read");
	int got = next_plan_line(r, err);
	if (got < 0)
		return -1;
	if (got && r->len > 0)
		return bp_errorf(err, "line %ld of the plan follows the summary line", r->lineno);
	memset(s, 0, sizeof(*s));
	s->model_tflop = s->model_tflops_per_gpu = s->mfu = -1;
	return bp_json_read_fields(r->summary, summary_fields, BP_ARRAY_LEN(summary_fields), s,
				   NULL, 1, "plan.summary", err);
}

void bp_plan_lines_close(struct bp_plan_lines *r)
{
	json_decref(r->header);
	json_decref(r->zero_summary);
	json_decref(r->summary);
	json_decref(r->pending);
	free(r->line);
	memset(r, 0, sizeof(*r));
}
