/* plain.c: the "plain" method, the Megatron-LM baseline every paper compares against
 * (WLB-LLM Sec. 3 and Sec. 6 "Plain-4D"): documents in the order the loader drew them fill
 * context windows of max_tokens tokens, and window w of a step goes to pipeline w mod dp.
 * Balance is whatever the data gives. What a window holds follows the plan's document mode
 * (documents.h), so plain trains the same work as every other method:
 *   whole       a document that does not fit the window's remaining room opens the next
 *               window (no drawn document is longer than a window, so none is cut);
 *   cut         the loader's pieces fill each window exactly (they were cut at its
 *               boundaries), so this is Megatron's loader;
 *   per-method  plain cuts itself: the documents are concatenated and cut at window
 *               boundaries, a document crossing one split into two spans, each trained as its
 *               own sequence (less attention than whole documents; solve before the option). */
#include "method.h"

#include <stdlib.h>

int bp_method_plain(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		    struct bp_plan *out, struct bp_error *err)
{
	int dp = bp_plan_dp(out);
	int64_t cap = out->max_tokens;
	int cut = out->documents == BP_DOCS_PER_METHOD;
	struct bp_span *win = NULL;
	size_t nwin = 0, capwin = 0;
	int rc = -1;
	if (bp_method_alloc_steps(out, in, in->n, err) < 0)
		return -1;
	for (size_t s = 0; s < in->n; s++) {
		const struct bp_batch *b = &in->b[s];
		struct bp_step *st = &out->steps[s];
		int64_t fill = 0;
		size_t w = 0;
		nwin = 0;
		for (size_t i = 0; i < b->ndocs; i++) {
			int64_t off = 0, len = b->docs[i].len;
			if (!cut && nwin && len > cap - fill) { /* next-fit: close the window */
				if (bp_pipe_add_mb(&st->pipes[w % (size_t)dp], win, nwin,
						   ctx->shard, err) < 0)
					goto out;
				w++;
				nwin = 0;
				fill = 0;
			}
			while (off < len) {
				int64_t take = len - off;
				if (take > cap - fill)
					take = cap - fill;
				if (nwin == capwin) {
					size_t nc = capwin ? capwin * 2 : 64;
					struct bp_span *nw = bp_realloc_array(win, nc, sizeof(*nw), err);
					if (!nw)
						goto out;
					win = nw;
					capwin = nc;
				}
				win[nwin++] = (struct bp_span){b->docs[i].id, off, take};
				off += take;
				fill += take;
				if (fill == cap) {
					if (bp_pipe_add_mb(&st->pipes[w % (size_t)dp], win, nwin,
							   ctx->shard, err) < 0)
						goto out;
					w++;
					nwin = 0;
					fill = 0;
				}
			}
		}
		if (nwin && bp_pipe_add_mb(&st->pipes[w % (size_t)dp], win, nwin, ctx->shard,
					   err) < 0)
			goto out;
	}
	rc = 0;
out:
	free(win);
	return rc;
}
