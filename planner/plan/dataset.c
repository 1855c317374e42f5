/* dataset.c: document length distributions, their statistics and the seeded sampler that
 * turns a dataset into global batches (the readers and the embedded presets are in
 * formats/dataset_read.c and formats/dataset_json.c).
 *
 * Called by bp_solve (bp_sample) and the readers. Invariants kept: a dataset
 * that a reader returns is non-empty, holds either bins (sorted, disjoint, tokens within
 * [count*lo, count*hi]) or raw lengths (all >= 1), and its total token count fits int64;
 * the sampler's output depends only on the dataset and the options (seed included), and its
 * document ids run 0, 1, 2, ... over all steps in draw order. */
#include "dataset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


void bp_dataset_init(struct bp_dataset *ds)
{
	memset(ds, 0, sizeof(*ds));
	ds->kind = BP_DS_MEASURED;
	ds->rule = BP_BIN_UNIFORM;
}

void bp_dataset_release(struct bp_dataset *ds)
{
	if (!ds)
		return;
	free(ds->source);
	free(ds->tokenizer);
	free(ds->license);
	free(ds->bins);
	free(ds->lengths);
	free(ds->ids);
	bp_dataset_init(ds);
}

void bp_dataset_free(struct bp_dataset *ds)
{
	if (!ds)
		return;
	bp_dataset_release(ds);
	free(ds);
}

const char *bp_dataset_kind_name(enum bp_dataset_kind k)
{
	switch (k) {
	case BP_DS_MEASURED:
		return "measured";
	case BP_DS_RECONSTRUCTED:
		return "reconstructed";
	case BP_DS_SYNTHETIC:
		return "synthetic";
	}
	return "unknown";
}

/* ceil(count * q / 100) without overflowing for any count >= 0 and q in [0, 100]. */
static int64_t rank_needed(int64_t count, int q)
{
	return (count / 100) * q + ((count % 100) * q + 99) / 100;
}

/* Nearest-rank percentile of raw lengths: the smallest v with at least `need` lengths <= v.
 * A binary search over values keeps this allocation-free (compute_stats cannot fail). */
static int64_t lengths_percentile(const int64_t *len, size_t n, int64_t max, int64_t need)
{
	int64_t lo = 1, hi = max;
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		int64_t k = 0;
		for (size_t i = 0; i < n; i++)
			k += len[i] <= mid;
		if (k >= need)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static int64_t bins_percentile(const struct bp_bin *b, size_t n, int64_t need)
{
	int64_t cum = 0;
	for (size_t i = 0; i < n; i++) {
		cum += b[i].count;
		if (b[i].count > 0 && cum >= need)
			return b[i].hi;
	}
	return 0;
}

void bp_dataset_compute_stats(struct bp_dataset *ds)
{
	struct bp_dataset_stats *st = &ds->stats;
	static const int q[3] = {50, 90, 99};
	int64_t *p[3] = {&st->p50, &st->p90, &st->p99};

	memset(st, 0, sizeof(*st));
	if (ds->lengths) {
		for (size_t i = 0; i < ds->nlengths; i++) {
			st->tokens += ds->lengths[i];
			if (ds->lengths[i] > st->max)
				st->max = ds->lengths[i];
		}
		st->count = (int64_t)ds->nlengths;
		if (st->count > 0)
			for (int k = 0; k < 3; k++)
				*p[k] = lengths_percentile(ds->lengths, ds->nlengths, st->max,
							   rank_needed(st->count, q[k]));
	} else {
		for (size_t i = 0; i < ds->nbins; i++) {
			st->count += ds->bins[i].count;
			st->tokens += ds->bins[i].tokens;
			if (ds->bins[i].count > 0)
				st->max = ds->bins[i].hi;
		}
		if (st->count > 0)
			for (int k = 0; k < 3; k++)
				*p[k] = bins_percentile(ds->bins, ds->nbins,
							rank_needed(st->count, q[k]));
	}
	if (st->count > 0)
		st->mean = (double)st->tokens / (double)st->count;
}

/* A length in [lo, hi] by the in-bin rule. Log-uniform draws x in [lo, hi + 1) with log x
 * uniform and takes its floor, so every integer in the bin can come out. */
static int64_t draw_in_bin(const struct bp_bin *b, enum bp_bin_rule rule, struct bp_rng *rng)
{
	if (b->lo == b->hi)
		return b->lo;
	if (rule == BP_BIN_LOGUNIFORM) {
		double lo = (double)b->lo, span = log(((double)b->hi + 1.0) / lo);
		double x = floor(lo * exp(bp_rng_uniform(rng) * span));
		if (x < lo)
			return b->lo;
		if (x >= (double)b->hi)
			return b->hi;
		return (int64_t)x;
	}
	return b->lo + (int64_t)bp_rng_below(rng, (uint64_t)(b->hi - b->lo) + 1);
}

/* The draw behind bp_dataset_draw and the sampler. With cum (cum[i]: documents in bins 0..i)
 * the bin is found by bisection; without, by a scan. Both pick the same bin for the same
 * random number, so the two paths give the same stream. */
static int64_t draw_len(const struct bp_dataset *ds, const int64_t *cum, struct bp_rng *rng)
{
	if (ds->lengths) {
		if (ds->nlengths == 0)
			return 0;
		return ds->lengths[bp_rng_below(rng, ds->nlengths)];
	}
	int64_t total = 0;
	if (cum)
		total = ds->nbins ? cum[ds->nbins - 1] : 0;
	else
		for (size_t i = 0; i < ds->nbins; i++)
			total += ds->bins[i].count;
	if (total <= 0)
		return 0;
	/* A bin with probability count / total: the one holding the r-th document. */
	int64_t r = (int64_t)bp_rng_below(rng, (uint64_t)total);
	if (cum) {
		size_t lo = 0, hi = ds->nbins - 1;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (cum[mid] > r)
				hi = mid;
			else
				lo = mid + 1;
		}
		return draw_in_bin(&ds->bins[lo], ds->rule, rng);
	}
	for (size_t i = 0; i < ds->nbins; i++) {
		if (r < ds->bins[i].count)
			return draw_in_bin(&ds->bins[i], ds->rule, rng);
		r -= ds->bins[i].count;
	}
	return 0; /* not reached: r < total */
}

int64_t bp_dataset_draw(const struct bp_dataset *ds, struct bp_rng *rng)
{
	return draw_len(ds, NULL, rng);
}

/* ---- sampler ---- */

void bp_batches_release(struct bp_batches *b)
{
	if (!b)
		return;
	if (b->b)
		for (size_t i = 0; i < b->n; i++)
			free(b->b[i].docs);
	free(b->b);
	memset(b, 0, sizeof(*b));
}

/* A drawn document waiting to be placed (the sampler's carry-over). */
struct pending {
	int64_t len;
	int truncated;
	int64_t sample, pos;
};

static const char *const order_names[BP_ORDER_N] = {"draw", "file", "shuffle"};
static const char *const last_names[BP_LAST_N] = {"keep", "drop"};

const char *bp_order_name(enum bp_order o)
{
	return (unsigned)o < BP_ORDER_N ? order_names[o] : "?";
}

int bp_order_parse(const char *s, enum bp_order *out)
{
	for (int i = 0; i < BP_ORDER_N; i++)
		if (!strcmp(s, order_names[i])) {
			*out = (enum bp_order)i;
			return 0;
		}
	return -1;
}

const char *bp_last_batch_name(enum bp_last_batch l)
{
	return (unsigned)l < BP_LAST_N ? last_names[l] : "?";
}

int bp_last_batch_parse(const char *s, enum bp_last_batch *out)
{
	for (int i = 0; i < BP_LAST_N; i++)
		if (!strcmp(s, last_names[i])) {
			*out = (enum bp_last_batch)i;
			return 0;
		}
	return -1;
}

uint64_t bp_shuffle_seed(uint64_t seed, int64_t epoch)
{
	/* splitmix64's finaliser over the pair, so neighbouring epochs are unrelated streams */
	uint64_t z = seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(epoch + 1));
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Smallest length the dataset can produce. */
static int64_t dataset_min_len(const struct bp_dataset *ds)
{
	int64_t m = INT64_MAX;
	if (ds->lengths) {
		for (size_t i = 0; i < ds->nlengths; i++)
			if (ds->lengths[i] < m)
				m = ds->lengths[i];
	} else {
		for (size_t i = 0; i < ds->nbins; i++)
			if (ds->bins[i].count > 0 && ds->bins[i].lo < m)
				m = ds->bins[i].lo;
	}
	return m;
}

/* Consecutive dropped draws after which the cap is judged to leave (almost) nothing. */
#define BP_MAX_DROPS_IN_A_ROW 1000000

/* The sampler's source of documents: draws (DRAW) or the index stream (FILE, SHUFFLE). */
struct source {
	const struct bp_dataset *ds;
	const struct bp_sampler_opts *o;
	const int64_t *cum;   /* DRAW over bins: cumulative counts */
	struct bp_rng rng;    /* DRAW: the draws; SHUFFLE: the epoch's permutation */
	int64_t n;            /* FILE, SHUFFLE: samples per epoch */
	int64_t pos, end;     /* next stream position; the end (INT64_MAX: no end) */
	int64_t epoch;        /* of the permutation held, -1 none */
	uint32_t *perm;       /* SHUFFLE: epoch's order of sample rows */
};

static int64_t sample_id(const struct bp_dataset *ds, int64_t row)
{
	return ds->ids ? ds->ids[row] : row;
}

/* FILE, SHUFFLE: the row of the sample at stream position pos. */
static int64_t stream_row(struct source *sc, int64_t pos)
{
	int64_t e = pos / sc->n, i = pos % sc->n;
	if (sc->o->order != BP_ORDER_SHUFFLE)
		return i;
	if (e != sc->epoch) {
		for (int64_t k = 0; k < sc->n; k++)
			sc->perm[k] = (uint32_t)k;
		bp_rng_seed(&sc->rng, bp_shuffle_seed(sc->o->seed, e));
		for (int64_t k = sc->n - 1; k > 0; k--) {
			int64_t j = (int64_t)bp_rng_below(&sc->rng, (uint64_t)k + 1);
			uint32_t t = sc->perm[k];
			sc->perm[k] = sc->perm[j];
			sc->perm[j] = t;
		}
		sc->epoch = e;
	}
	return sc->perm[i];
}

/* The next kept document under the cap rule: 1, 0 when the data has ended, -1 on error.
 * next_id is the id it will get. */
static int next_doc(struct source *sc, int64_t next_id, struct bp_batches *out,
		    struct pending *d, struct bp_error *err)
{
	const struct bp_sampler_opts *o = sc->o;
	for (int64_t drops = 0;;) {
		int64_t len, sample = 0, pos = 0;
		if (o->order == BP_ORDER_DRAW) {
			len = draw_len(sc->ds, sc->cum, &sc->rng);
		} else {
			if (sc->pos >= sc->end)
				return 0;
			pos = sc->pos++;
			int64_t row = stream_row(sc, pos);
			len = sc->ds->lengths[row];
			sample = sample_id(sc->ds, row);
		}
		*d = (struct pending){len, 0, sample, pos};
		if (len <= o->max_len)
			return 1;
		switch (o->overlen) {
		case BP_OVERLEN_TRUNCATE:
			d->len = o->max_len;
			d->truncated = 1;
			return 1;
		case BP_OVERLEN_DROP:
			out->dropped++;
			if (o->order == BP_ORDER_DRAW && ++drops >= BP_MAX_DROPS_IN_A_ROW)
				return bp_errorf(err, "dropped %lld documents in a row longer than "
						 "the length cap %lld", (long long)drops,
						 (long long)o->max_len);
			break;
		default:
			if (o->order != BP_ORDER_DRAW)
				return bp_errorf(err, "sample %lld (position %lld, %lld tokens) is "
						 "longer than the length cap %lld; --over-length "
						 "truncate or drop keeps or skips it",
						 (long long)sample, (long long)pos, (long long)len,
						 (long long)o->max_len);
			return bp_errorf(err, "document %lld (%lld tokens) is longer than the "
					 "length cap %lld", (long long)next_id, (long long)len,
					 (long long)o->max_len);
		}
	}
}

static int batch_push(struct bp_batch *bt, size_t *cap, int64_t id, const struct pending *d,
		      struct bp_error *err)
{
	if (bt->ndocs == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct bp_doc *p = bp_realloc_array(bt->docs, ncap, sizeof(*p), err);
		if (!p)
			return -1;
		bt->docs = p;
		*cap = ncap;
	}
	bt->docs[bt->ndocs++] = (struct bp_doc){id, d->len, d->sample, 0, d->pos};
	bt->tokens += d->len;
	return 0;
}

static int check_opts(const struct bp_dataset *ds, const struct bp_sampler_opts *o,
		      struct bp_error *err)
{
	if ((unsigned)o->order >= BP_ORDER_N || (unsigned)o->last >= BP_LAST_N)
		return bp_errorf(err, "unknown order %d or last-batch rule %d", (int)o->order,
				 (int)o->last);
	if (o->epochs < 0)
		return bp_errorf(err, "epochs must be >= 0 (got %lld)", (long long)o->epochs);
	if (o->order == BP_ORDER_DRAW && o->epochs > 0)
		return bp_errorf(err, "epochs need a sample index read in order (file or "
				 "shuffle), not draws");
	if (o->steps < 1 && !(o->steps == 0 && o->epochs > 0))
		return bp_errorf(err, "steps must be >= 1 (got %lld)", (long long)o->steps);
	if ((uint64_t)o->steps > SIZE_MAX / sizeof(struct bp_batch))
		return bp_errorf(err, "steps %lld is too many", (long long)o->steps);
	if (o->tokens_per_step < 0 || o->docs_per_step < 0 ||
	    (o->tokens_per_step > 0) == (o->docs_per_step > 0))
		return bp_errorf(err, "exactly one of tokens_per_step and docs_per_step must be "
				 "> 0 (got %lld and %lld)", (long long)o->tokens_per_step,
				 (long long)o->docs_per_step);
	if (o->max_len < 1)
		return bp_errorf(err, "max_len must be >= 1 (got %lld)", (long long)o->max_len);
	if (o->tokens_per_step > 0 && o->max_len > o->tokens_per_step)
		return bp_errorf(err, "max_len %lld is larger than tokens_per_step %lld",
				 (long long)o->max_len, (long long)o->tokens_per_step);
	if (o->overlen != BP_OVERLEN_TRUNCATE && o->overlen != BP_OVERLEN_DROP &&
	    o->overlen != BP_OVERLEN_ERROR)
		return bp_errorf(err, "unknown over-length rule %d", (int)o->overlen);
	int64_t count = 0;
	if (ds->lengths)
		count = (int64_t)ds->nlengths;
	else
		for (size_t i = 0; i < ds->nbins; i++)
			count += ds->bins[i].count;
	if (count <= 0)
		return bp_errorf(err, "dataset '%s' is empty", ds->name);
	if (o->order != BP_ORDER_DRAW) {
		if (!ds->lengths)
			return bp_errorf(err, "dataset '%s' is a histogram, not a sample index: "
					 "its lengths can only be drawn (order draw)", ds->name);
		if (ds->nlengths > UINT32_MAX)
			return bp_errorf(err, "dataset '%s' has %zu samples, more than %u",
					 ds->name, ds->nlengths, UINT32_MAX);
		if (o->epochs > 0 && o->epochs > INT64_MAX / (int64_t)ds->nlengths)
			return bp_errorf(err, "%lld epochs of %zu samples overflow",
					 (long long)o->epochs, ds->nlengths);
		return 0;
	}
	if (o->overlen == BP_OVERLEN_DROP && dataset_min_len(ds) > o->max_len)
		return bp_errorf(err, "every document of dataset '%s' is longer than the length "
				 "cap %lld: all would be dropped", ds->name, (long long)o->max_len);
	return 0;
}

/* Room for one more batch (steps unbounded: grown geometrically). */
static int batches_grow(struct bp_batches *out, size_t *cap, struct bp_error *err)
{
	if (out->n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 64;
	struct bp_batch *p = bp_realloc_array(out->b, ncap, sizeof(*p), err);
	if (!p)
		return -1;
	memset(p + *cap, 0, (ncap - *cap) * sizeof(*p));
	out->b = p;
	*cap = ncap;
	return 0;
}

struct bp_sampler {
	struct source sc;
	const struct bp_sampler_opts *o;
	int64_t *cum;
	struct pending carry;
	int have_carry, ended;
	int64_t next_id, steps_done;
	struct bp_batches tally; /* counters only: truncated, dropped, left, data_ended */
};

struct bp_sampler *bp_sampler_new(const struct bp_dataset *ds, const struct bp_sampler_opts *o,
				  struct bp_error *err)
{
	if (check_opts(ds, o, err) < 0)
		return NULL;
	struct bp_sampler *sp = bp_calloc(1, sizeof(*sp), err);
	if (!sp)
		return NULL;
	sp->o = o;
	sp->sc = (struct source){.ds = ds, .o = o, .epoch = -1, .end = INT64_MAX};
	if (o->order == BP_ORDER_DRAW && ds->bins && ds->nbins > 0) {
		sp->cum = bp_calloc(ds->nbins, sizeof(*sp->cum), err);
		if (!sp->cum)
			goto fail;
		for (size_t i = 0; i < ds->nbins; i++)
			sp->cum[i] = (i ? sp->cum[i - 1] : 0) + ds->bins[i].count;
		sp->sc.cum = sp->cum;
	}
	if (o->order != BP_ORDER_DRAW) {
		sp->sc.n = (int64_t)ds->nlengths;
		if (o->epochs > 0)
			sp->sc.end = o->epochs * sp->sc.n;
		if (o->order == BP_ORDER_SHUFFLE) {
			sp->sc.perm = bp_calloc((size_t)sp->sc.n, sizeof(*sp->sc.perm), err);
			if (!sp->sc.perm)
				goto fail;
		}
	} else {
		bp_rng_seed(&sp->sc.rng, o->seed);
	}
	return sp;
fail:
	bp_sampler_free(sp);
	return NULL;
}

void bp_sampler_free(struct bp_sampler *sp)
{
	if (!sp)
		return;
	free(sp->cum);
	free(sp->sc.perm);
	free(sp);
}

/* One more global batch into out (grown): 1, 0 when the steps or the data are done, -1. */
static int sampler_step(struct bp_sampler *sp, struct bp_batches *out, size_t *bcap,
			struct bp_error *err)
{
	const struct bp_sampler_opts *o = sp->o;
	struct bp_batches *t = &sp->tally;
	if (sp->ended || (o->steps > 0 && sp->steps_done == o->steps))
		return 0;
	if (!sp->have_carry && sp->sc.pos >= sp->sc.end) {
		sp->ended = 1; /* the data ended at a step boundary */
		t->data_ended = 1;
		return 0;
	}
	if (batches_grow(out, bcap, err) < 0)
		return -1;
	struct bp_batch *bt = &out->b[out->n++];
	size_t cap = 0;
	int ended = 0;
	int64_t bt_truncated = 0; /* of this batch: undone when the last batch drops */
	for (;;) {
		struct pending d;
		if (sp->have_carry) {
			d = sp->carry;
			sp->have_carry = 0;
		} else {
			int got = next_doc(&sp->sc, sp->next_id, t, &d, err);
			if (got < 0)
				return -1;
			if (!got) {
				ended = 1;
				break;
			}
		}
		/* Over budget: the document opens the next step instead. */
		if (o->tokens_per_step > 0 && bt->ndocs > 0 &&
		    d.len > o->tokens_per_step - bt->tokens) {
			sp->carry = d;
			sp->have_carry = 1;
			break;
		}
		if (batch_push(bt, &cap, sp->next_id, &d, err) < 0)
			return -1;
		sp->next_id++;
		t->truncated += d.truncated;
		bt_truncated += d.truncated;
		if (o->tokens_per_step > 0 ? bt->tokens >= o->tokens_per_step
					   : (int64_t)bt->ndocs >= o->docs_per_step)
			break;
	}
	if (ended) {
		sp->ended = 1;
		t->data_ended = 1;
		/* The data ended inside this step: a partial last batch (or nothing). */
		if (bt->ndocs == 0 || o->last == BP_LAST_DROP) {
			t->left += (int64_t)bt->ndocs;
			t->truncated -= bt_truncated;
			free(bt->docs);
			*bt = (struct bp_batch){0};
			out->n--;
			return 0;
		}
	}
	sp->steps_done++;
	return 1;
}

int bp_sampler_next(struct bp_sampler *sp, size_t n, struct bp_batches *out,
		    struct bp_error *err)
{
	size_t bcap = out->n, got = 0; /* out->b holds exactly n: batches_grow reallocs */
	while (got < n) {
		int r = sampler_step(sp, out, &bcap, err);
		if (r < 0)
			return -1;
		if (!r)
			break;
		got++;
	}
	/* the counters so far, and where the stream stands */
	const struct bp_batches *t = &sp->tally;
	out->truncated = t->truncated;
	out->dropped = t->dropped;
	out->left = t->left;
	out->data_ended = t->data_ended;
	out->first_pos = 0;
	if (sp->o->order != BP_ORDER_DRAW) {
		out->end_pos = sp->have_carry ? sp->carry.pos : sp->sc.pos;
		out->data_ended |= !sp->have_carry && sp->sc.pos >= sp->sc.end;
	}
	return (int)(got > 0);
}

int bp_sample(const struct bp_dataset *ds, const struct bp_sampler_opts *o,
	      struct bp_batches *out, struct bp_error *err)
{
	memset(out, 0, sizeof(*out));
	struct bp_sampler *sp = bp_sampler_new(ds, o, err);
	if (!sp)
		return -1;
	int rc = -1;
	if (bp_sampler_next(sp, o->steps > 0 ? (size_t)o->steps : SIZE_MAX, out, err) < 0)
		goto out;
	if (out->n == 0) {
		bp_errorf(err, "the data ends before the first step: no samples left to plan");
		goto out;
	}
	rc = 0;
out:
	bp_sampler_free(sp);
	if (rc < 0)
		bp_batches_release(out);
	return rc;
}
