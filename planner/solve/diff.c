/* diff.c: plan comparison (diff.h). Called by `balplan diff` and by CI's golden checks. */
#include "diff.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

void bp_diff_init(struct bp_diff *d)
{
	memset(d, 0, sizeof(*d));
}

void bp_diff_release(struct bp_diff *d)
{
	for (size_t i = 0; i < d->nlines; i++)
		free(d->lines[i]);
	free(d->lines);
	bp_diff_init(d);
}

struct ctx {
	struct bp_diff *d;
	size_t max_lines;
	int detail; /* counts against max_lines */
	int failed;
	int layers; /* the layers both plans' sparse budgets cover (the fewer) */
};

static void add(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(struct ctx *c, const char *fmt, ...)
{
	c->d->equivalent = 0;
	if (c->detail && c->max_lines && c->d->nlines >= c->max_lines) {
		c->d->omitted++;
		return;
	}
	struct bp_sb sb = BP_SB_INIT;
	va_list ap;
	va_start(ap, fmt);
	bp_sb_vaddf(&sb, fmt, ap);
	va_end(ap);
	char **nl = realloc(c->d->lines, (c->d->nlines + 1) * sizeof(char *));
	char *s = bp_sb_detach(&sb, NULL);
	if (!nl || !s) {
		if (nl)
			c->d->lines = nl;
		free(s);
		c->failed = 1;
		return;
	}
	c->d->lines = nl;
	c->d->lines[c->d->nlines++] = s;
}

/* bp_sb_fill's writer: a layout's description, whole however many pipeline schemes. */
static void describe_layout(const void *l, char *buf, size_t n)
{
	bp_layout_describe(l, buf, n);
}

static double pct(double a, double b)
{
	return a != 0 ? 100.0 * (b - a) / a : 0.0;
}

static int layout_same(const struct bp_layout *a, const struct bp_layout *b)
{
	if (bp_layout_schedule(a) != bp_layout_schedule(b) || a->vstages != b->vstages ||
	    a->npipes != b->npipes ||
	    a->nservers != b->nservers ||
	    (a->nservers && memcmp(a->servers, b->servers, a->nservers * sizeof(int))))
		return 0;
	for (size_t i = 0; i < a->npipes; i++) {
		const struct bp_lpipe *x = &a->pipes[i], *y = &b->pipes[i];
		size_t n = (size_t)x->sc.tp * x->sc.cp * x->sc.pp;
		if (memcmp(&x->sc, &y->sc, sizeof(x->sc)) || x->mb_max_tokens != y->mb_max_tokens ||
		    memcmp(x->ranks, y->ranks, n * sizeof(int)) ||
		    memcmp(x->stage_layers, y->stage_layers, (size_t)x->sc.pp * sizeof(int)))
			return 0;
	}
	return 1;
}

static int cmp_span(const void *x, const void *y)
{
	const struct bp_span *a = x, *b = y;
	if (a->doc != b->doc)
		return (a->doc > b->doc) - (a->doc < b->doc);
	return (a->offset > b->offset) - (a->offset < b->offset);
}

/* Same micro-batch: same shard mode and the same spans as a set. */
static int mb_same(const struct bp_mb *x, const struct bp_mb *y)
{
	if (x->nspans != y->nspans || x->shard != y->shard || x->attn != y->attn ||
	    x->sparse_block != y->sparse_block || !x->sparse_k != !y->sparse_k)
		return 0;
	size_t n = x->nspans;
	struct bp_span *a = malloc((n ? n : 1) * sizeof(*a) * 2);
	if (!a)
		return 0;
	memcpy(a, x->spans, n * sizeof(*a));
	memcpy(a + n, y->spans, n * sizeof(*a));
	qsort(a, n, sizeof(*a), cmp_span);
	qsort(a + n, n, sizeof(*a), cmp_span);
	int same = 1;
	for (size_t i = 0; i < n && same; i++)
		same = a[i].doc == a[n + i].doc && a[i].offset == a[n + i].offset &&
		       a[i].len == a[n + i].len;
	free(a);
	return same;
}

struct loc {
	int64_t doc, pipe, mb;
};

static int cmp_loc(const void *x, const void *y)
{
	const struct loc *a = x, *b = y;
	return (a->doc > b->doc) - (a->doc < b->doc);
}

/* Where each document's first span sits in a step, sorted by doc. Caller frees. */
static struct loc *locate(const struct bp_step *st, size_t *n)
{
	size_t cnt = 0;
	for (size_t k = 0; k < st->npipes; k++)
		for (size_t j = 0; j < st->pipes[k].nmbs; j++)
			cnt += st->pipes[k].mbs[j].nspans;
	struct loc *v = malloc((cnt ? cnt : 1) * sizeof(*v));
	if (!v)
		return NULL;
	size_t i = 0;
	for (size_t k = 0; k < st->npipes; k++)
		for (size_t j = 0; j < st->pipes[k].nmbs; j++)
			for (size_t s = 0; s < st->pipes[k].mbs[j].nspans; s++)
				v[i++] = (struct loc){st->pipes[k].mbs[j].spans[s].doc, (int64_t)k,
						      (int64_t)j};
	qsort(v, cnt, sizeof(*v), cmp_loc);
	*n = cnt;
	return v;
}

static void diff_step(struct ctx *c, const struct bp_step *a, const struct bp_step *b)
{
	long long si = (long long)a->index;
	if (a->layout != b->layout)
		add(c, "step %lld: layout %d -> %d", si, a->layout, b->layout);
	if (strcmp(a->sync, b->sync))
		add(c, "step %lld: sync %s -> %s", si, a->sync, b->sync);
	if (a->nca != b->nca || (a->nca && memcmp(a->ca, b->ca, a->nca * sizeof(*a->ca))))
		add(c, "step %lld: CA-tasks differ (%zu -> %zu)", si, a->nca, b->nca);
	if (!a->record_ops != !b->record_ops ||
	    (a->record_ops && a->record_ops != b->record_ops)) {
		add(c, "step %lld: record %s -> %s", si, a->record_ops ? a->record_ops->name : "none",
		    b->record_ops ? b->record_ops->name : "none");
	} else if (a->record_ops && a->record_ops->diff) {
		char buf[256];
		a->record_ops->diff(a->record, b->record, buf, sizeof(buf));
		if (buf[0])
			add(c, "step %lld: %s", si, buf);
	}
	int docs_same = a->ndocs == b->ndocs;
	for (size_t i = 0; docs_same && i < a->ndocs; i++)
		docs_same = a->docs[i].id == b->docs[i].id && a->docs[i].len == b->docs[i].len;
	if (!docs_same)
		add(c, "step %lld: drew different documents (%zu vs %zu)", si, a->ndocs, b->ndocs);
	int del_same = a->ndelayed == b->ndelayed;
	for (size_t i = 0; del_same && i < a->ndelayed; i++)
		del_same = a->delayed[i].doc == b->delayed[i].doc &&
			   a->delayed[i].to_step == b->delayed[i].to_step;
	if (!del_same)
		add(c, "step %lld: delays %zu documents, was %zu", si, b->ndelayed, a->ndelayed);
	size_t mba = 0, mbb = 0, changed = 0;
	for (size_t k = 0; k < a->npipes; k++)
		mba += a->pipes[k].nmbs;
	for (size_t k = 0; k < b->npipes; k++)
		mbb += b->pipes[k].nmbs;
	for (size_t k = 0; k < a->npipes && k < b->npipes; k++) {
		const struct bp_pipe *x = &a->pipes[k], *y = &b->pipes[k];
		size_t n = x->nmbs > y->nmbs ? x->nmbs : y->nmbs;
		for (size_t j = 0; j < n; j++)
			if (j >= x->nmbs || j >= y->nmbs || !mb_same(&x->mbs[j], &y->mbs[j]))
				changed++;
	}
	if (changed || mba != mbb || a->npipes != b->npipes) {
		size_t na = 0, nb = 0, moved = 0;
		struct loc *la = locate(a, &na), *lb = locate(b, &nb);
		if (la && lb) {
			struct bp_sb ex = BP_SB_INIT;
			size_t i = 0, j = 0, shown = 0;
			while (i < na && j < nb) {
				if (la[i].doc < lb[j].doc) {
					i++;
				} else if (la[i].doc > lb[j].doc) {
					j++;
				} else {
					if (la[i].pipe != lb[j].pipe || la[i].mb != lb[j].mb) {
						moved++;
						if (shown < 3) {
							bp_sb_addf(&ex, "%sdoc %lld p%lld/mb%lld"
								" -> p%lld/mb%lld",
								shown ? ", " : "",
								(long long)la[i].doc,
								(long long)la[i].pipe,
								(long long)la[i].mb,
								(long long)lb[j].pipe,
								(long long)lb[j].mb);
							shown++;
						}
					}
					/* skip further spans of the same doc */
					int64_t d = la[i].doc;
					while (i < na && la[i].doc == d)
						i++;
					while (j < nb && lb[j].doc == d)
						j++;
				}
			}
			add(c, "step %lld: %zu micro-batches differ (%zu -> %zu in all); %zu "
			       "documents moved%s%s%s", si, changed, mba, mbb, moved,
			    moved ? " (" : "", ex.buf,
			    moved ? (moved > shown ? ", ...)" : ")") : "");
			if (ex.oom)
				c->failed = 1;
			bp_sb_release(&ex);
		} else {
			c->failed = 1;
		}
		free(la);
		free(lb);
	}
	/* Per-layer sparse budgets (SparseBalance) of micro-batches that hold the same spans:
	 * a decision of the plan like the spans, so an edited budget is a difference. */
	size_t kdiff = 0, fk = 0, fj = 0;
	int fl = -1, fa = 0, fb = 0;
	for (size_t k = 0; k < a->npipes && k < b->npipes; k++) {
		const struct bp_pipe *x = &a->pipes[k], *y = &b->pipes[k];
		for (size_t j = 0; j < x->nmbs && j < y->nmbs; j++) {
			const struct bp_mb *p = &x->mbs[j], *q = &y->mbs[j];
			if (!p->sparse_k || !q->sparse_k || !mb_same(p, q))
				continue;
			int l = 0;
			while (l < c->layers && p->sparse_k[l] == q->sparse_k[l])
				l++;
			if (l == c->layers)
				continue;
			if (!kdiff++) {
				fk = k;
				fj = j;
				fl = l;
				fa = p->sparse_k[l];
				fb = q->sparse_k[l];
			}
		}
	}
	if (kdiff)
		add(c, "step %lld: sparse budgets differ in %zu micro-batch%s (first: pipeline %zu "
		       "micro-batch %zu layer %d, %d -> %d blocks)", si, kdiff,
		    kdiff == 1 ? "" : "es", fk, fj, fl, fa, fb);
	if (fabs(a->m.step_us - b->m.step_us) > 1e-3)
		add(c, "step %lld: predicted step time %.3f ms -> %.3f ms (%+.2f%%)", si,
		    a->m.step_us / 1e3, b->m.step_us / 1e3, pct(a->m.step_us, b->m.step_us));
}

int bp_plan_diff(const struct bp_plan *a, const struct bp_plan *b, size_t max_lines,
		 struct bp_diff *out, struct bp_error *err)
{
	struct ctx c = {out, max_lines, 0, 0,
			a->model.layers < b->model.layers ? a->model.layers : b->model.layers};
	bp_diff_init(out);
	out->equivalent = 1;
	if (strcmp(a->dataset, b->dataset) || strcmp(a->dataset_sha, b->dataset_sha))
		add(&c, "dataset: '%s' (%.12s) -> '%s' (%.12s)", a->dataset, a->dataset_sha,
		    b->dataset, b->dataset_sha);
	if (strcmp(a->profile, b->profile) || strcmp(a->profile_sha, b->profile_sha))
		add(&c, "profile: '%s' (%.12s) -> '%s' (%.12s)", a->profile, a->profile_sha,
		    b->profile, b->profile_sha);
	if (a->seed != b->seed)
		add(&c, "seed: %llu -> %llu", (unsigned long long)a->seed,
		    (unsigned long long)b->seed);
	const struct bp_cluster *x = &a->cluster, *y = &b->cluster;
	if (strcmp(x->gpu, y->gpu) || x->gpus != y->gpus || x->gpus_per_node != y->gpus_per_node)
		add(&c, "cluster: %d x %s (%d per node) -> %d x %s (%d per node)", x->gpus, x->gpu,
		    x->gpus_per_node, y->gpus, y->gpu, y->gpus_per_node);
	for (size_t i = 0; i < a->nlayouts || i < b->nlayouts; i++) {
		if (i < a->nlayouts && i < b->nlayouts &&
		    layout_same(&a->layouts[i], &b->layouts[i]))
			continue;
		struct bp_sb da = BP_SB_INIT, db = BP_SB_INIT;
		if (i < a->nlayouts)
			bp_sb_fill(&da, describe_layout, &a->layouts[i]);
		else
			bp_sb_adds(&da, "(none)");
		if (i < b->nlayouts)
			bp_sb_fill(&db, describe_layout, &b->layouts[i]);
		else
			bp_sb_adds(&db, "(none)");
		add(&c, "layout %zu: %s -> %s", i, da.buf, db.buf);
		if (da.oom || db.oom)
			c.failed = 1;
		bp_sb_release(&da);
		bp_sb_release(&db);
	}
	if (memcmp(&a->model, &b->model, sizeof(a->model)))
		add(&c, "model: '%s' -> '%s'", a->model.name, b->model.name);
	if (strcmp(a->method, b->method))
		add(&c, "method: %s -> %s", a->method, b->method);
	for (size_t i = 0, j = 0; i < a->nparams || j < b->nparams;) {
		int k = i >= a->nparams ? 1 : j >= b->nparams ? -1 :
				strcmp(a->params[i].key, b->params[j].key);
		if (k < 0) {
			add(&c, "parameter %s: '%s' -> (unset)", a->params[i].key,
			    a->params[i].value);
			i++;
		} else if (k > 0) {
			add(&c, "parameter %s: (unset) -> '%s'", b->params[j].key,
			    b->params[j].value);
			j++;
		} else {
			if (strcmp(a->params[i].value, b->params[j].value))
				add(&c, "parameter %s: '%s' -> '%s'", a->params[i].key,
				    a->params[i].value, b->params[j].value);
			i++;
			j++;
		}
	}
	if (a->nsteps_drawn != b->nsteps_drawn || a->tokens_per_step != b->tokens_per_step ||
	    a->docs_per_step != b->docs_per_step || a->max_tokens != b->max_tokens ||
	    a->overlen != b->overlen)
		add(&c, "sampling: %lld steps, %lld tokens/step, %lld docs/step, max %lld -> "
			"%lld steps, %lld tokens/step, %lld docs/step, max %lld",
		    (long long)a->nsteps_drawn, (long long)a->tokens_per_step,
		    (long long)a->docs_per_step, (long long)a->max_tokens,
		    (long long)b->nsteps_drawn, (long long)b->tokens_per_step,
		    (long long)b->docs_per_step, (long long)b->max_tokens);
	if (a->documents != b->documents)
		add(&c, "documents: %s -> %s", bp_documents_name(a->documents),
		    bp_documents_name(b->documents));
	if (a->nsteps != b->nsteps)
		add(&c, "steps: %zu -> %zu", a->nsteps, b->nsteps);
	c.detail = 1;
	size_t differing = 0;
	for (size_t i = 0; i < a->nsteps && i < b->nsteps; i++) {
		int before = out->equivalent;
		size_t lines = out->nlines + out->omitted;
		out->equivalent = 1;
		diff_step(&c, &a->steps[i], &b->steps[i]);
		if (out->nlines + out->omitted != lines)
			differing++;
		out->equivalent = before && out->equivalent;
	}
	c.detail = 0;
	const struct bp_summary *p = &a->summary, *q = &b->summary;
	if (!out->equivalent) {
		if (differing)
			add(&c, "%zu of %zu steps differ", differing,
			    a->nsteps < b->nsteps ? a->nsteps : b->nsteps);
		add(&c, "mean step time: %.3f ms -> %.3f ms (%+.2f%%)", p->step_mean_us / 1e3,
		    q->step_mean_us / 1e3, pct(p->step_mean_us, q->step_mean_us));
		add(&c, "mean imbalance (WLB-LLM Sec. 6.4): %.3f -> %.3f", p->imb_wlb_mean,
		    q->imb_wlb_mean);
		/* Work-normalised throughput, when both plans record it (sim/work.h). */
		if (p->model_tflop >= 0 && q->model_tflop >= 0) {
			if (fabs(p->model_tflop - q->model_tflop) > 1e-4 * fmax(p->model_tflop, 1))
				add(&c, "model work: %.3f PFLOP -> %.3f PFLOP (%+.2f%%)",
				    p->model_tflop / 1e3, q->model_tflop / 1e3,
				    pct(p->model_tflop, q->model_tflop));
			add(&c, "model TFLOP/s per GPU: %.1f -> %.1f (%+.2f%%), MFU %.1f%% -> %.1f%%",
			    p->model_tflops_per_gpu, q->model_tflops_per_gpu,
			    pct(p->model_tflops_per_gpu, q->model_tflops_per_gpu), 100 * p->mfu,
			    100 * q->mfu);
		}
	}
	if (c.failed) {
		bp_diff_release(out);
		return bp_errorf(err, "out of memory");
	}
	return 0;
}
