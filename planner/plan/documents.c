/* documents.c: the loader's document mode (documents.h): names, the window cut that every
 * method sees under CUT (called by bp_solve after sampling), and what a plan trained (for
 * solve's table). The cut is a pure function of the batches, so plans stay seeded. */
#include "documents.h"

#include <stdlib.h>
#include <string.h>

#include "plan.h"

static const char *const names[BP_DOCS_NMODES] = {"whole", "cut", "per-method"};

const char *bp_documents_name(enum bp_documents d)
{
	return (unsigned)d < BP_DOCS_NMODES ? names[d] : "?";
}

int bp_documents_parse(const char *s, enum bp_documents *out)
{
	for (int i = 0; i < BP_DOCS_NMODES; i++)
		if (!strcmp(s, names[i])) {
			*out = (enum bp_documents)i;
			return 0;
		}
	return -1;
}

int bp_batches_cut(struct bp_batches *b, int64_t window, int64_t *cut_docs,
		   struct bp_error *err)
{
	if (window < 1)
		return bp_errorf(err, "the context window must be >= 1 (got %lld)",
				 (long long)window);
	struct bp_doc **pieces = bp_calloc(b->n + 1, sizeof(*pieces), err);
	size_t *npieces = bp_calloc(b->n + 1, sizeof(*npieces), err);
	int64_t next_id = 0, cut = 0;
	int rc = -1;
	if (!pieces || !npieces)
		goto out;
	for (size_t s = 0; s < b->n; s++) {
		const struct bp_batch *bt = &b->b[s];
		/* A document of len tokens starting at stream position pos crosses
		 * floor((pos + len - 1) / window) - floor(pos / window) boundaries. */
		size_t n = 0;
		int64_t pos = 0;
		for (size_t i = 0; i < bt->ndocs; i++) {
			int64_t len = bt->docs[i].len;
			n += (size_t)((pos + len - 1) / window - pos / window) + 1;
			pos += len;
		}
		pieces[s] = bp_calloc(n + 1, sizeof(**pieces), err);
		if (!pieces[s])
			goto out;
		pos = 0;
		for (size_t i = 0; i < bt->ndocs; i++) {
			const struct bp_doc *d = &bt->docs[i];
			int64_t left = d->len, parts = 0;
			while (left > 0) {
				int64_t room = window - pos % window;
				int64_t take = left < room ? left : room;
				/* a piece names its source sample and where in it it starts */
				pieces[s][npieces[s]++] = (struct bp_doc){
					next_id++, take, d->sample, d->soff + (d->len - left), d->pos};
				pos += take;
				left -= take;
				parts++;
			}
			cut += parts > 1;
		}
	}
	for (size_t s = 0; s < b->n; s++) {
		free(b->b[s].docs);
		b->b[s].docs = pieces[s];
		b->b[s].ndocs = npieces[s];
		pieces[s] = NULL;
	}
	if (cut_docs)
		*cut_docs = cut;
	rc = 0;
out:
	if (pieces)
		for (size_t s = 0; s < b->n; s++)
			free(pieces[s]);
	free(pieces);
	free(npieces);
	return rc;
}

const char *bp_plan_documents_trained(const struct bp_plan *p)
{
	if (p->documents == BP_DOCS_CUT)
		return "cut";
	if (p->documents == BP_DOCS_WHOLE)
		return "whole";
	/* PER_METHOD: a document trained in more than one span was cut by the method. */
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *st = &p->steps[i];
		for (size_t k = 0; k < st->npipes; k++)
			for (size_t j = 0; j < st->pipes[k].nmbs; j++) {
				const struct bp_mb *mb = &st->pipes[k].mbs[j];
				for (size_t q = 0; q < mb->nspans; q++)
					if (mb->spans[q].offset > 0)
						return "cut";
			}
	}
	return "whole";
}
