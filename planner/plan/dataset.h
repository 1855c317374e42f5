/* dataset.h: document length distributions (format balplan.dataset/v1, datasets/README.md)
 * and the seeded sampler that draws global batches from them.
 *
 * A dataset holds either a histogram (bins, lengths drawn inside a bin by the dataset's
 * in-bin rule) or a raw list of lengths (drawn uniformly with replacement). Readers accept
 * the v1 JSON and a team's sample index: plain text (a length, or "id length", per line; '#'
 * comments and blank lines allowed), JSONL (one object per line with an integer token count
 * or a token array, and optionally an integer id) and a Megatron-LM .idx (a sample is a
 * document, its sequences summed); formats/dataset_read.c and datasets/README.md say how. */
#ifndef BP_DATASET_H
#define BP_DATASET_H

#include <jansson.h>
#include <stdint.h>

#include "bp.h"
#include "rng.h"

#define BP_DATASET_FORMAT "balplan.dataset/v1"

enum bp_dataset_kind { BP_DS_MEASURED, BP_DS_RECONSTRUCTED, BP_DS_SYNTHETIC };
/* How a length is drawn inside a bin [lo, hi]. */
enum bp_bin_rule { BP_BIN_UNIFORM, BP_BIN_LOGUNIFORM };

struct bp_bin {
	int64_t lo, hi;  /* inclusive token lengths, 1 <= lo <= hi */
	int64_t count;   /* documents in the bin, >= 0 */
	int64_t tokens;  /* their total tokens, in [count*lo, count*hi] */
};

struct bp_dataset_stats {
	int64_t count, tokens;
	double mean;
	int64_t p50, p90, p99, max;
};

struct bp_dataset {
	char name[64];
	enum bp_dataset_kind kind;
	char *source;     /* provenance text; owned */
	char *tokenizer;  /* owned */
	char *license;    /* owned */
	enum bp_bin_rule rule;
	struct bp_dataset_stats stats; /* computed on load, checked against the file's if given */
	struct bp_bin *bins;           /* sorted by lo, disjoint; owned; NULL when lengths used */
	size_t nbins;
	int64_t *lengths;              /* raw lengths in file order; owned; NULL when bins used */
	size_t nlengths;
	/* A sample index (the team's samples, issue 22): the readers of text, JSONL and
	 * Megatron-LM .idx files give every length its sample id. ids[i] is the id of lengths[i]
	 * (unique, >= 0; owned); NULL means the id is the position i. format names the reader
	 * ("balplan" v1 JSON, "text", "jsonl", "megatron-idx"); sequences is the .idx's sequence
	 * count (a document may hold several), 0 for the other readers. */
	int64_t *ids;
	char format[16];
	int64_t sequences;
	int64_t skipped; /* documents of 0 tokens a reader left out (bp_read_opts skip_empty) */
};

void bp_dataset_init(struct bp_dataset *ds);
void bp_dataset_release(struct bp_dataset *ds);
void bp_dataset_free(struct bp_dataset *ds); /* releases and frees; NULL is a no-op */

const char *bp_dataset_kind_name(enum bp_dataset_kind k);

/* Codec for balplan.dataset/v1. from_json fills an initialised ds (release it after a
 * failure too). to_json returns a new reference (caller decrefs) or NULL. */
int bp_dataset_from_json(struct bp_dataset *ds, json_t *root, struct bp_error *err);
json_t *bp_dataset_to_json(const struct bp_dataset *ds);

/* Field names of a JSONL sample index; NULL fields are chosen automatically from the first
 * non-blank line (dataset_read.c says how). */
struct bp_read_opts {
	const char *length_field; /* integer token count: tokens, num_tokens, length, len */
	const char *tokens_field; /* token array whose length is the count: input_ids, tokens */
	const char *id_field;     /* integer sample id: id; absent: the line's sample position */
	int skip_empty;           /* .idx: leave documents of 0 tokens out (counted in skipped;
				   * the others keep their document index as sample id) */
};

/* Reads any accepted input (v1 JSON, text, JSONL, a Megatron-LM .idx; len bytes, told apart
 * by their first bytes) into an initialised ds. o may be NULL (all automatic). Returns 0 or
 * -1 with a message naming the line or byte offset. */
int bp_dataset_read(struct bp_dataset *ds, const char *buf, size_t len, const char *name,
		    const struct bp_read_opts *o, struct bp_error *err);

/* Reads any accepted input format from text (len bytes). name is used when the input does not
 * name itself (text, JSONL). jsonl_field names the token-count field of JSONL lines (NULL:
 * try "tokens", "num_tokens", "length", "len" in that order). Returns 0 or -1; messages
 * carry "line N" of the input. */
int bp_dataset_parse(struct bp_dataset *ds, const char *text, size_t len, const char *name,
		     const char *jsonl_field, struct bp_error *err);

/* Embedded presets: the datasets/ folder compiled in. */
size_t bp_dataset_preset_count(void);
const char *bp_dataset_preset_name(size_t i);
/* Loads the named preset; -1 with err when unknown. The raw text (borrowed, static) and its
 * length can be had for digests with bp_dataset_preset_text. */
int bp_dataset_preset(struct bp_dataset *ds, const char *name, struct bp_error *err);
const char *bp_dataset_preset_text(const char *name, size_t *len);

/* Recomputes ds->stats from the bins or lengths. For bins, percentiles are the upper edge of
 * the bin where the cumulative count reaches the fraction (an upper bound); max is the last
 * non-empty bin's hi. */
void bp_dataset_compute_stats(struct bp_dataset *ds);

/* Draws one document length. */
int64_t bp_dataset_draw(const struct bp_dataset *ds, struct bp_rng *rng);

/* What to do with a drawn document longer than the cap. */
enum bp_overlen { BP_OVERLEN_TRUNCATE, BP_OVERLEN_DROP, BP_OVERLEN_ERROR };

/* Where a step's documents come from (plan v2 sampling.source.order, issue 22):
 *   DRAW     what-if: lengths drawn with replacement from the dataset's distribution
 *            (histogram bins or a list of lengths), numbered in draw order; the only mode
 *            for histograms and presets;
 *   FILE     the team's sample index in its own order, without replacement, epoch after
 *            epoch (epoch e trains positions e*N .. e*N+N-1 of the stream);
 *   SHUFFLE  the index in a seeded permutation per epoch (as Megatron-LM's dataset shuffles
 *            its documents per epoch): epoch e's order is a Fisher-Yates shuffle by the
 *            generator seeded with bp_shuffle_seed(seed, e). */
enum bp_order { BP_ORDER_DRAW, BP_ORDER_FILE, BP_ORDER_SHUFFLE, BP_ORDER_N };
/* The last global batch when the data ends inside it: KEEP trains it as a smaller step,
 * DROP leaves its samples untrained (counted in bp_batches.left). */
enum bp_last_batch { BP_LAST_KEEP, BP_LAST_DROP, BP_LAST_N };

const char *bp_order_name(enum bp_order o);            /* static; "?" when out of range */
int bp_order_parse(const char *s, enum bp_order *out);  /* 0, or -1 when unknown */
const char *bp_last_batch_name(enum bp_last_batch l);
int bp_last_batch_parse(const char *s, enum bp_last_batch *out);
uint64_t bp_shuffle_seed(uint64_t seed, int64_t epoch);

struct bp_sampler_opts {
	int64_t steps;            /* global batches to draw, >= 1; 0 (FILE, SHUFFLE with
				   * epochs > 0): as many as the epochs fill */
	int64_t tokens_per_step;  /* token budget per step (Hydraulis Sec. 8: by tokens), or 0 */
	int64_t docs_per_step;    /* fixed documents per step, or 0; exactly one of the two > 0 */
	int64_t max_len;          /* context-length cap, >= 1 */
	enum bp_overlen overlen;
	uint64_t seed;
	enum bp_order order;      /* DRAW unless the dataset is a sample index */
	int64_t epochs;           /* FILE, SHUFFLE: the data ends after this many epochs; 0 none */
	enum bp_last_batch last;
};

struct bp_doc {
	int64_t id;     /* plan-local, consecutive from 0 in draw order */
	int64_t len;    /* tokens after the cap rule */
	/* FILE, SHUFFLE: the sample this document (or cut piece) trains, the offset of its
	 * first token in that sample, and the stream position the sample was taken at. Zero
	 * under DRAW. */
	int64_t sample, soff, pos;
};

struct bp_batch {
	struct bp_doc *docs; /* owned */
	size_t ndocs;
	int64_t tokens;
};

struct bp_batches {
	struct bp_batch *b; /* owned, one per step */
	size_t n;
	int64_t truncated, dropped; /* documents affected by the cap */
	/* FILE, SHUFFLE: the stream positions [first_pos, end_pos) the batches consumed (a
	 * sample carried over to a step past the last is not consumed), samples left untrained
	 * by the last-batch rule, and whether the data ended (the epochs ran out). */
	int64_t first_pos, end_pos, left;
	int data_ended;
};

/* Draws the global batches. With a token budget, documents are drawn until the next one would
 * exceed the budget; that document is carried over as the first of the next step (the first
 * document of a step is always taken), so no draw is wasted. The step's tokens never exceed
 * the budget when max_len <= tokens_per_step (checked: an error otherwise). Fails
 * (BP_OVERLEN_ERROR) on the first over-length document, naming its id and length (its
 * sample id and position under FILE and SHUFFLE). FILE and SHUFFLE need ds->lengths. */
int bp_sample(const struct bp_dataset *ds, const struct bp_sampler_opts *o,
	      struct bp_batches *out, struct bp_error *err);
void bp_batches_release(struct bp_batches *b);

/* The sampler as a stream of global batches, for plans solved a window at a time: new
 * checks the options (o is borrowed and must outlive it); next appends up to n batches to
 * out (an initialised or earlier-filled bp_batches; its b grows) and sets out's counters to
 * the stream's so far; it returns 1 when it added any, 0 at the end of the steps or the
 * data, -1 on error. Ids run on across calls; bp_sample is new + next(all). */
struct bp_sampler;
struct bp_sampler *bp_sampler_new(const struct bp_dataset *ds, const struct bp_sampler_opts *o,
				  struct bp_error *err);
int bp_sampler_next(struct bp_sampler *sp, size_t n, struct bp_batches *out,
		    struct bp_error *err);
void bp_sampler_free(struct bp_sampler *sp);

#endif
