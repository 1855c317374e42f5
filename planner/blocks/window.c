/* window.c: packing over a window of global batches (window.h; WLB-LLM Table 2). */
#include "window.h"

#include <stdlib.h>
#include <string.h>

static int cmp_delayed(const void *a, const void *b)
{
	const struct bp_delayed *x = a, *y = b;
	return (x->doc > y->doc) - (x->doc < y->doc);
}

/* Steps w0 .. w0+k-1 take the window's pipelines in order (dp each); their documents are
 * listed at w0 and those trained at a later step are delayed to it. */
static int split_window(struct bp_plan *out, size_t w0, size_t k, const struct bp_batch *all,
			struct bp_step *tmp, struct bp_error *err)
{
	size_t dp = out->steps[w0].npipes;
	struct bp_step *first = &out->steps[w0];
	int64_t *trained_at = NULL;
	int64_t id0 = all->ndocs ? all->docs[0].id : 0;
	int rc = -1;
	/* ids of one window are consecutive (the sampler numbers documents in draw order) */
	trained_at = bp_calloc(all->ndocs + 1, sizeof(int64_t), err);
	if (!trained_at)
		goto out;
	for (size_t i = 0; i < all->ndocs; i++) {
		if (all->docs[i].id != id0 + (int64_t)i) {
			bp_errorf(err, "internal: window documents are not consecutive");
			goto out;
		}
		trained_at[i] = -1;
	}
	for (size_t s = 0; s < k; s++) {
		struct bp_step *st = &out->steps[w0 + s];
		for (size_t q = 0; q < dp; q++) {
			struct bp_pipe *from = &tmp->pipes[s * dp + q];
			st->pipes[q] = *from;
			memset(from, 0, sizeof(*from));
			for (size_t j = 0; j < st->pipes[q].nmbs; j++)
				for (size_t x = 0; x < st->pipes[q].mbs[j].nspans; x++) {
					int64_t d = st->pipes[q].mbs[j].spans[x].doc - id0;
					if (d >= 0 && (size_t)d < all->ndocs && trained_at[d] < 0)
						trained_at[d] = (int64_t)(w0 + s);
				}
		}
		if (s > 0) {
			free(st->docs);
			st->docs = NULL;
			st->ndocs = 0;
		}
	}
	free(first->docs);
	first->docs = bp_calloc(all->ndocs + 1, sizeof(*first->docs), err);
	if (!first->docs)
		goto out;
	memcpy(first->docs, all->docs, all->ndocs * sizeof(*all->docs));
	first->ndocs = all->ndocs;
	size_t nd = 0;
	for (size_t i = 0; i < all->ndocs; i++)
		nd += trained_at[i] > (int64_t)w0;
	if (nd) {
		first->delayed = bp_calloc(nd, sizeof(*first->delayed), err);
		if (!first->delayed)
			goto out;
		for (size_t i = 0; i < all->ndocs; i++)
			if (trained_at[i] > (int64_t)w0)
				first->delayed[first->ndelayed++] = (struct bp_delayed){
					all->docs[i].id, all->docs[i].len, trained_at[i]};
		qsort(first->delayed, first->ndelayed, sizeof(*first->delayed), cmp_delayed);
	}
	if (tmp->record) {
		first->record = tmp->record;
		first->record_ops = tmp->record_ops;
		tmp->record = NULL;
		tmp->record_ops = NULL;
	}
	rc = 0;
out:
	free(trained_at);
	return rc;
}

static int pack_all(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		    struct bp_plan *out, int64_t window, bp_window_fn fn, void *arg,
		    struct bp_error *err)
{
	if (bp_method_alloc_steps(out, in, in->n, err) < 0)
		return -1;
	for (size_t w0 = 0; w0 < in->n; w0 += (size_t)window) {
		size_t k = in->n - w0 < (size_t)window ? in->n - w0 : (size_t)window;
		if (k == 1) {
			int rc = fn(ctx, &in->b[w0], &out->steps[w0], out, arg, err);
			if (rc != 0)
				return rc;
			continue;
		}
		struct bp_batch all = {NULL, 0, 0};
		struct bp_step tmp;
		size_t n = 0, dp = out->steps[w0].npipes;
		int rc = -1;
		memset(&tmp, 0, sizeof(tmp));
		for (size_t s = 0; s < k; s++)
			n += in->b[w0 + s].ndocs;
		all.docs = bp_calloc(n + 1, sizeof(*all.docs), err);
		tmp.pipes = bp_calloc(k * dp, sizeof(*tmp.pipes), err);
		if (all.docs && tmp.pipes) {
			for (size_t s = 0; s < k; s++) {
				memcpy(all.docs + all.ndocs, in->b[w0 + s].docs,
				       in->b[w0 + s].ndocs * sizeof(*all.docs));
				all.ndocs += in->b[w0 + s].ndocs;
				all.tokens += in->b[w0 + s].tokens;
			}
			tmp.npipes = k * dp;
			tmp.index = (int64_t)w0;
			rc = fn(ctx, &all, &tmp, out, arg, err);
			if (rc == 0)
				rc = split_window(out, w0, k, &all, &tmp, err);
		}
		free(all.docs);
		tmp.ndocs = 0;
		bp_step_release(&tmp);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* A run a window of batches at a time (method.h): the batches of an unfinished packing
 * window wait here for the rest of it. */
struct win_state {
	struct bp_batches buf; /* buf.b[0] is the run's step next */
	size_t cap;
	int64_t next;
};

static void win_free(void *p)
{
	struct win_state *ws = p;
	if (!ws)
		return;
	bp_batches_release(&ws->buf);
	free(ws);
}

int bp_pack_windowed(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		     struct bp_plan *out, int64_t window, bp_window_fn fn, void *arg,
		     struct bp_error *err)
{
	if (!ctx->run)
		return pack_all(ctx, in, out, window, fn, arg, err);
	struct win_state *ws = bp_method_state(ctx, sizeof(*ws), win_free, err);
	if (!ws)
		return -1;
	if (!ws->buf.n)
		ws->next = ctx->run->step0;
	if (ws->buf.n + in->n > ws->cap) {
		size_t nc = ws->buf.n + in->n + 8;
		struct bp_batch *nb = bp_realloc_array(ws->buf.b, nc, sizeof(*nb), err);
		if (!nb)
			return -1;
		ws->buf.b = nb;
		ws->cap = nc;
	}
	for (size_t s = 0; s < in->n; s++) {
		struct bp_batch *d = &ws->buf.b[ws->buf.n];
		*d = in->b[s];
		d->docs = bp_calloc(in->b[s].ndocs + 1, sizeof(*d->docs), err);
		if (!d->docs)
			return -1;
		if (in->b[s].ndocs)
			memcpy(d->docs, in->b[s].docs, in->b[s].ndocs * sizeof(*d->docs));
		ws->buf.n++;
	}
	/* whole packing windows, counted from the run's step 0; the rest where the run ends */
	size_t k = ctx->run->last ? ws->buf.n : ws->buf.n / (size_t)window * (size_t)window;
	if (!k)
		return 0;
	struct bp_batches grp = {.b = ws->buf.b, .n = k};
	int rc = pack_all(ctx, &grp, out, window, fn, arg, err);
	if (rc != 0)
		return rc;
	out->first_step = ws->next;
	for (size_t i = 0; i < out->nsteps; i++) {
		struct bp_step *st = &out->steps[i];
		st->index += ws->next;
		for (size_t j = 0; j < st->ndelayed; j++)
			st->delayed[j].to_step += ws->next;
	}
	for (size_t s = 0; s < k; s++)
		free(ws->buf.b[s].docs);
	memmove(ws->buf.b, ws->buf.b + k, (ws->buf.n - k) * sizeof(*ws->buf.b));
	ws->buf.n -= k;
	ws->next += (int64_t)k;
	return 0;
}
