/* documents.h: what the data loader hands to the methods (plan v2 sampling.documents), so
 * that every method in a comparison trains the same attention work (issue 10 item 1).
 *
 * Attention costs grow with the square of a sequence's length, so cutting a document into
 * pieces trained as separate causal sequences (Megatron's loader: documents concatenated and
 * cut into context windows) removes attention work and changes what the model learns. A
 * comparison of methods is like for like only when every method trains the same sequences:
 *   WHOLE      every drawn document reaches every method whole (the default; no drawn
 *              document is longer than the context window, dataset.h's cap rule);
 *   CUT        the loader concatenates each step's documents in draw order and cuts the
 *              stream at every multiple of the context window (max_tokens), as Megatron-LM's
 *              GPT dataset does; the pieces are the step's documents, numbered 0, 1, 2, ...
 *              over the run in stream order, and every method packs the same pieces;
 *   PER_METHOD each method decides (what solve did before this option): `plain` cuts at
 *              windows as CUT does, the other methods keep documents whole. Not like for
 *              like; plans written before the option read as this.
 * Under WHOLE and CUT every method trains each of the loader's documents in one span
 * (validate.c checks it). */
#ifndef BP_DOCUMENTS_H
#define BP_DOCUMENTS_H

#include "bp.h"
#include "dataset.h"

enum bp_documents { BP_DOCS_WHOLE, BP_DOCS_CUT, BP_DOCS_PER_METHOD, BP_DOCS_NMODES };

const char *bp_documents_name(enum bp_documents d); /* static; "?" when out of range */
int bp_documents_parse(const char *s, enum bp_documents *out); /* 0, or -1 when unknown */

/* CUT: replaces every batch's documents by the pieces of its stream cut at multiples of
 * window tokens (window >= 1), renumbered 0, 1, 2, ... over all batches in order; tokens per
 * batch are unchanged. cut_docs (may be NULL) gets how many documents became more than one
 * piece. On failure b is left as it was. */
int bp_batches_cut(struct bp_batches *b, int64_t window, int64_t *cut_docs,
		   struct bp_error *err);

struct bp_plan;
/* Which documents a plan's method trains, for tables: "whole" (each drawn document in one
 * span) or "cut" (pieces: the loader's under CUT, or the method's own cuts under PER_METHOD,
 * read from the spans). Static string. */
const char *bp_plan_documents_trained(const struct bp_plan *p);

#endif
