/* test_sampler.c: bp_dataset_draw and bp_sample: determinism from the seed, the token budget
 * and its carry-over, fixed documents per step, the truncate/drop/error cap rules, option
 * checks, and sampled means against the dataset mean for both in-bin rules; a sample index
 * in file and shuffle order (issue 22): without replacement, epoch after epoch, the end of
 * the data and the last-batch rule, cut pieces naming their sample and offset. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dataset.h"
#include "documents.h"

static void load_text(struct bp_dataset *ds, const char *text)
{
	struct bp_error err = {""};
	bp_dataset_init(ds);
	if (bp_dataset_parse(ds, text, strlen(text), "t", NULL, &err) < 0)
		fprintf(stderr, "cannot parse test dataset: %s\n", err.text);
}

static void load_preset(struct bp_dataset *ds, const char *name)
{
	struct bp_error err = {""};
	bp_dataset_init(ds);
	if (bp_dataset_preset(ds, name, &err) < 0)
		fprintf(stderr, "cannot load preset: %s\n", err.text);
}

static int same_batches(const struct bp_batches *a, const struct bp_batches *b)
{
	if (a->n != b->n || a->truncated != b->truncated || a->dropped != b->dropped)
		return 0;
	for (size_t s = 0; s < a->n; s++) {
		if (a->b[s].ndocs != b->b[s].ndocs || a->b[s].tokens != b->b[s].tokens)
			return 0;
		for (size_t i = 0; i < a->b[s].ndocs; i++)
			if (a->b[s].docs[i].id != b->b[s].docs[i].id ||
			    a->b[s].docs[i].len != b->b[s].docs[i].len)
				return 0;
	}
	return 1;
}

/* Ids run 0, 1, 2, ... over all steps; each step's tokens are the sum of its lengths; every
 * length is in [1, max_len]. */
static int well_formed(const struct bp_batches *bs, int64_t max_len)
{
	int64_t id = 0;
	for (size_t s = 0; s < bs->n; s++) {
		int64_t sum = 0;
		if (bs->b[s].ndocs == 0)
			return 0;
		for (size_t i = 0; i < bs->b[s].ndocs; i++) {
			const struct bp_doc *d = &bs->b[s].docs[i];
			if (d->id != id++ || d->len < 1 || d->len > max_len)
				return 0;
			sum += d->len;
		}
		if (sum != bs->b[s].tokens)
			return 0;
	}
	return 1;
}

static void test_determinism(void)
{
	struct bp_dataset ds;
	struct bp_batches a, b, c;
	struct bp_error err = {""};
	struct bp_sampler_opts o = {.steps = 20, .tokens_per_step = 262144, .docs_per_step = 0,
				    .max_len = 131072, .overlen = BP_OVERLEN_TRUNCATE, .seed = 42};
	load_preset(&ds, "synthetic-longtail");
	CHECK(bp_sample(&ds, &o, &a, &err) == 0);
	CHECK(bp_sample(&ds, &o, &b, &err) == 0);
	CHECK(same_batches(&a, &b));
	o.seed = 43;
	CHECK(bp_sample(&ds, &o, &c, &err) == 0);
	CHECK(!same_batches(&a, &c));
	CHECK(a.n == 20 && well_formed(&a, 131072) && well_formed(&c, 131072));
	bp_batches_release(&a);
	bp_batches_release(&b);
	bp_batches_release(&c);
	CHECK(a.b == NULL && a.n == 0);
	bp_batches_release(&a); /* twice is fine */
	bp_dataset_release(&ds);
}

/* With a token budget: no step exceeds it, and each step ended because the next document
 * (the first of the following step, carried over) would have exceeded it. */
/* The sampler draws the same stream as bp_dataset_draw with a generator seeded by o.seed
 * (it bisects a cumulative table where bp_dataset_draw scans the bins). */
static void test_same_stream_as_draw(void)
{
	struct bp_dataset ds;
	struct bp_batches bs;
	struct bp_rng rng;
	struct bp_error err = {""};
	struct bp_sampler_opts o = {.steps = 4, .tokens_per_step = 0, .docs_per_step = 500,
				    .max_len = 131072, .overlen = BP_OVERLEN_ERROR, .seed = 99};
	int diff = 0;
	load_preset(&ds, "synthetic-longtail");
	for (int rule = 0; rule < 2; rule++) {
		ds.rule = rule ? BP_BIN_LOGUNIFORM : BP_BIN_UNIFORM;
		CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
		bp_rng_seed(&rng, o.seed);
		for (size_t s = 0; s < bs.n; s++)
			for (size_t i = 0; i < bs.b[s].ndocs; i++)
				diff += bs.b[s].docs[i].len != bp_dataset_draw(&ds, &rng);
		bp_batches_release(&bs);
	}
	CHECK(diff == 0);
	bp_dataset_release(&ds);
}

static void test_token_budget(void)
{
	struct bp_dataset ds;
	struct bp_batches bs;
	struct bp_error err = {""};
	struct bp_sampler_opts o = {.steps = 50, .tokens_per_step = 131072, .docs_per_step = 0,
				    .max_len = 65536, .overlen = BP_OVERLEN_TRUNCATE, .seed = 7};
	load_preset(&ds, "synthetic-longtail");
	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	CHECK(well_formed(&bs, o.max_len));
	int over = 0, not_full = 0;
	for (size_t s = 0; s < bs.n; s++) {
		over += bs.b[s].tokens > o.tokens_per_step;
		if (s + 1 < bs.n && bs.b[s].tokens < o.tokens_per_step &&
		    bs.b[s].tokens + bs.b[s + 1].docs[0].len <= o.tokens_per_step)
			not_full++;
	}
	CHECK(over == 0);
	CHECK(not_full == 0);
	CHECK(bs.truncated > 0 && bs.dropped == 0);
	bp_batches_release(&bs);
	bp_dataset_release(&ds);
}

static void test_carry_over(void)
{
	struct bp_dataset ds;
	struct bp_batches bs;
	struct bp_error err = {""};
	/* Every document is 1500 tokens: two fit in 4000, the third opens the next step. */
	struct bp_sampler_opts o = {.steps = 5, .tokens_per_step = 4000, .docs_per_step = 0,
				    .max_len = 4000, .overlen = BP_OVERLEN_ERROR, .seed = 1};
	load_text(&ds, "1500\n");
	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	CHECK(bs.n == 5 && well_formed(&bs, 4000));
	for (size_t s = 0; s < bs.n; s++)
		CHECK(bs.b[s].ndocs == 2 && bs.b[s].tokens == 3000 &&
		      bs.b[s].docs[0].id == (int64_t)(2 * s));
	bp_batches_release(&bs);
	bp_dataset_release(&ds);

	/* A step that exactly fills its budget closes without drawing again. */
	load_text(&ds, "1000\n");
	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	for (size_t s = 0; s < bs.n; s++)
		CHECK(bs.b[s].ndocs == 4 && bs.b[s].tokens == 4000);
	bp_batches_release(&bs);
	bp_dataset_release(&ds);

	/* Alternating 3000 and 1000 from a two-document list: whatever comes, a step holds at
	 * least one document and the carried one is the next step's first, in draw order. */
	load_text(&ds, "3000\n1000\n");
	o.steps = 200;
	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	CHECK(well_formed(&bs, 4000));
	int64_t ones = 0;
	for (size_t s = 0; s < bs.n; s++) {
		CHECK(bs.b[s].tokens <= 4000 && bs.b[s].ndocs >= 1);
		for (size_t i = 0; i < bs.b[s].ndocs; i++)
			ones += bs.b[s].docs[i].len == 1000;
	}
	CHECK(ones > 0);
	bp_batches_release(&bs);
	bp_dataset_release(&ds);
}

static void test_docs_per_step(void)
{
	struct bp_dataset ds;
	struct bp_batches bs;
	struct bp_error err = {""};
	struct bp_sampler_opts o = {.steps = 8, .tokens_per_step = 0, .docs_per_step = 16,
				    .max_len = 131072, .overlen = BP_OVERLEN_ERROR, .seed = 5};
	load_preset(&ds, "tiny-uniform");
	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	CHECK(bs.n == 8 && well_formed(&bs, 4000));
	for (size_t s = 0; s < bs.n; s++) {
		CHECK(bs.b[s].ndocs == 16);
		for (size_t i = 0; i < bs.b[s].ndocs; i++) {
			int64_t len = bs.b[s].docs[i].len;
			CHECK(len >= 100 && len <= 3995 && (len - 100) % 205 == 0);
		}
	}
	CHECK(bs.b[7].docs[15].id == 8 * 16 - 1);
	bp_batches_release(&bs);
	bp_dataset_release(&ds);
}

static void test_cap_rules(void)
{
	struct bp_dataset ds;
	struct bp_batches bs;
	struct bp_error err = {""};
	struct bp_sampler_opts o = {.steps = 10, .tokens_per_step = 0, .docs_per_step = 10,
				    .max_len = 1000, .overlen = BP_OVERLEN_TRUNCATE, .seed = 3};
	load_text(&ds, "100\n5000\n");

	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	CHECK(well_formed(&bs, 1000));
	int64_t capped = 0;
	for (size_t s = 0; s < bs.n; s++)
		for (size_t i = 0; i < bs.b[s].ndocs; i++)
			capped += bs.b[s].docs[i].len == 1000;
	CHECK(capped > 0 && capped == bs.truncated && bs.dropped == 0);
	bp_batches_release(&bs);

	o.overlen = BP_OVERLEN_DROP;
	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	CHECK(well_formed(&bs, 1000));
	for (size_t s = 0; s < bs.n; s++)
		for (size_t i = 0; i < bs.b[s].ndocs; i++)
			CHECK(bs.b[s].docs[i].len == 100);
	CHECK(bs.dropped > 0 && bs.truncated == 0 && bs.b[9].docs[9].id == 99);
	bp_batches_release(&bs);

	/* Error: names the document that would have been next and its length. */
	o.overlen = BP_OVERLEN_ERROR;
	CHECK(bp_sample(&ds, &o, &bs, &err) == -1);
	long long id = -1;
	CHECK(sscanf(err.text, "document %lld (5000 tokens) is longer than the length cap 1000",
		     &id) == 1 && id >= 0);
	char want[128];
	snprintf(want, sizeof(want),
		 "document %lld (5000 tokens) is longer than the length cap 1000", id);
	CHECK(!strcmp(err.text, want));
	CHECK(bs.b == NULL && bs.n == 0);
	/* The same seed with truncation shows document id as the first capped one. */
	o.overlen = BP_OVERLEN_TRUNCATE;
	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	int64_t first = -1;
	for (size_t s = 0; s < bs.n && first < 0; s++)
		for (size_t i = 0; i < bs.b[s].ndocs && first < 0; i++)
			if (bs.b[s].docs[i].len == 1000)
				first = bs.b[s].docs[i].id;
	CHECK(first == id);
	bp_batches_release(&bs);

	/* Truncation under a token budget: the cap equals the budget, each capped document
	 * fills a step by itself. */
	struct bp_sampler_opts t = {.steps = 30, .tokens_per_step = 1000, .docs_per_step = 0,
				    .max_len = 1000, .overlen = BP_OVERLEN_TRUNCATE, .seed = 9};
	CHECK(bp_sample(&ds, &t, &bs, &err) == 0);
	CHECK(well_formed(&bs, 1000));
	for (size_t s = 0; s < bs.n; s++)
		CHECK(bs.b[s].tokens <= 1000);
	bp_batches_release(&bs);
	bp_dataset_release(&ds);

	/* Dropping everything is refused up front. */
	load_text(&ds, "5000\n6000\n");
	o.overlen = BP_OVERLEN_DROP;
	CHECK(bp_sample(&ds, &o, &bs, &err) == -1);
	CHECK(!strcmp(err.text, "every document of dataset 't' is longer than the length cap "
				"1000: all would be dropped"));
	bp_dataset_release(&ds);
}

static void test_opts_errors(void)
{
	struct bp_dataset ds;
	struct bp_batches bs;
	struct bp_error err = {""};
	load_text(&ds, "10\n");
	struct bp_sampler_opts o = {.steps = 0, .tokens_per_step = 100, .docs_per_step = 0,
				    .max_len = 100, .overlen = BP_OVERLEN_ERROR, .seed = 1};
	CHECK(bp_sample(&ds, &o, &bs, &err) == -1);
	CHECK(!strcmp(err.text, "steps must be >= 1 (got 0)"));
	o.steps = 1;
	o.docs_per_step = 4;
	CHECK(bp_sample(&ds, &o, &bs, &err) == -1);
	CHECK(!strcmp(err.text, "exactly one of tokens_per_step and docs_per_step must be > 0 "
				"(got 100 and 4)"));
	o.tokens_per_step = 0;
	o.docs_per_step = 0;
	CHECK(bp_sample(&ds, &o, &bs, &err) == -1);
	CHECK(!strcmp(err.text, "exactly one of tokens_per_step and docs_per_step must be > 0 "
				"(got 0 and 0)"));
	o.tokens_per_step = 100;
	o.max_len = 0;
	CHECK(bp_sample(&ds, &o, &bs, &err) == -1);
	CHECK(!strcmp(err.text, "max_len must be >= 1 (got 0)"));
	o.max_len = 101;
	CHECK(bp_sample(&ds, &o, &bs, &err) == -1);
	CHECK(!strcmp(err.text, "max_len 101 is larger than tokens_per_step 100"));
	bp_dataset_release(&ds);

	bp_dataset_init(&ds); /* empty */
	snprintf(ds.name, sizeof(ds.name), "e");
	o.max_len = 100;
	CHECK(bp_sample(&ds, &o, &bs, &err) == -1);
	CHECK(!strcmp(err.text, "dataset 'e' is empty"));
	bp_dataset_release(&ds);
}

/* The mean of many draws is within 2% of the dataset's mean, for both in-bin rules, and
 * every draw lands in a non-empty bin. */
static void test_draw_mean(void)
{
	struct bp_dataset ds;
	struct bp_rng rng;
	const int n = 1000000;
	load_preset(&ds, "synthetic-longtail");
	for (int rule = 0; rule < 2; rule++) {
		ds.rule = rule ? BP_BIN_LOGUNIFORM : BP_BIN_UNIFORM;
		bp_rng_seed(&rng, 11);
		double sum = 0;
		int outside = 0;
		for (int i = 0; i < n; i++) {
			int64_t len = bp_dataset_draw(&ds, &rng);
			int in = 0;
			for (size_t b = 0; b < ds.nbins && !in; b++)
				in = ds.bins[b].count > 0 && len >= ds.bins[b].lo &&
				     len <= ds.bins[b].hi;
			outside += !in;
			sum += (double)len;
		}
		CHECK(outside == 0);
		CHECK_NEAR(sum / n / ds.stats.mean, 1.0, 0.02);
	}
	bp_dataset_release(&ds);

	load_preset(&ds, "tiny-uniform");
	bp_rng_seed(&rng, 12);
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += (double)bp_dataset_draw(&ds, &rng);
	CHECK_NEAR(sum / n / ds.stats.mean, 1.0, 0.02);
	bp_dataset_release(&ds);

	/* Log-uniform reaches both ends of a bin and nothing outside it. */
	load_text(&ds, "{\"format\": \"balplan.dataset/v1\", \"name\": \"b\", \"kind\": \"synthetic\", "
		       "\"source\": \"s\", \"tokenizer\": \"t\", \"license\": \"l\", "
		       "\"sampling\": \"log-uniform\", "
		       "\"bins\": [{\"lo\": 10, \"hi\": 13, \"count\": 2, \"tokens\": 23}]}");
	int seen[4] = {0, 0, 0, 0}, bad = 0;
	for (int i = 0; i < 10000; i++) {
		int64_t len = bp_dataset_draw(&ds, &rng);
		if (len < 10 || len > 13)
			bad++;
		else
			seen[len - 10]++;
	}
	CHECK(bad == 0 && seen[0] > 0 && seen[1] > 0 && seen[2] > 0 && seen[3] > 0);
	/* Smaller lengths are likelier under log-uniform. */
	CHECK(seen[0] > seen[3]);
	bp_dataset_release(&ds);
}

/* A sample index in file order: every sample once per epoch, in order, by id and position;
 * the token budget's carry-over keeps the order; the data ends after the epochs. */
static void test_index_file_order(void)
{
	struct bp_dataset ds;
	struct bp_batches bs;
	struct bp_error err = {""};
	load_text(&ds, "7 30\n3 50\n9 20\n1 40\n5 60\n");
	CHECK(ds.ids != NULL && ds.nlengths == 5);
	struct bp_sampler_opts o = {.steps = 0, .tokens_per_step = 100, .max_len = 100,
				    .overlen = BP_OVERLEN_ERROR, .seed = 1,
				    .order = BP_ORDER_FILE, .epochs = 2};
	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	/* epoch stream 30 50 20 | 40 60 | 30 50 20 | 40 60 -> steps {30,50,20} {40,60}
	 * {30,50,20} {40,60} */
	static const int64_t want_sample[] = {7, 3, 9, 1, 5, 7, 3, 9, 1, 5};
	CHECK(bs.n == 4);
	size_t k = 0;
	int64_t pos = 0, id = 0;
	int in_order = 1;
	for (size_t s = 0; s < bs.n; s++)
		for (size_t i = 0; i < bs.b[s].ndocs; i++, k++, pos++, id++) {
			const struct bp_doc *d = &bs.b[s].docs[i];
			in_order &= k < 10 && d->sample == want_sample[k] && d->pos == pos &&
				    d->id == id && d->soff == 0;
		}
	CHECK(in_order && k == 10);
	CHECK(bs.b[0].ndocs == 3 && bs.b[1].ndocs == 2 && bs.b[1].tokens == 100);
	CHECK(bs.first_pos == 0 && bs.end_pos == 10 && bs.data_ended && bs.left == 0);
	bp_batches_release(&bs);

	/* Steps end the plan first: the sample carried over is not consumed. */
	o.steps = 1;
	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	CHECK(bs.n == 1 && bs.end_pos == 3 && !bs.data_ended);
	bp_batches_release(&bs);

	/* No end: the stream wraps into the next epoch. */
	o.steps = 5;
	o.epochs = 0;
	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	CHECK(bs.n == 5 && bs.b[4].docs[0].sample == 7 && bs.b[4].docs[0].pos == 10);
	bp_batches_release(&bs);
	bp_dataset_release(&ds);
}

/* The last partial batch: kept as a smaller step, or its samples left untrained. */
static void test_index_last_batch(void)
{
	struct bp_dataset ds;
	struct bp_batches bs;
	struct bp_error err = {""};
	load_text(&ds, "10\n20\n30\n40\n50\n60\n70\n");
	struct bp_sampler_opts o = {.steps = 0, .docs_per_step = 3, .max_len = 100,
				    .overlen = BP_OVERLEN_ERROR, .seed = 1,
				    .order = BP_ORDER_FILE, .epochs = 1, .last = BP_LAST_KEEP};
	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	CHECK(bs.n == 3 && bs.b[2].ndocs == 1 && bs.b[2].docs[0].sample == 6 && bs.left == 0);
	bp_batches_release(&bs);
	o.last = BP_LAST_DROP;
	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	CHECK(bs.n == 2 && bs.left == 1 && bs.end_pos == 7 && bs.data_ended);
	bp_batches_release(&bs);
	/* A window past the end of the data. */
	o.docs_per_step = 8;
	CHECK(bp_sample(&ds, &o, &bs, &err) == -1);
	CHECK(strstr(err.text, "no samples left") != NULL);
	bp_dataset_release(&ds);
}

/* Over the cap: truncated in place, dropped (never trained, counted) or an error naming the
 * sample and its position. */
static void test_index_cap(void)
{
	struct bp_dataset ds;
	struct bp_batches bs;
	struct bp_error err = {""};
	load_text(&ds, "11 10\n12 500\n13 20\n");
	struct bp_sampler_opts o = {.steps = 0, .docs_per_step = 2, .max_len = 100,
				    .overlen = BP_OVERLEN_DROP, .seed = 1,
				    .order = BP_ORDER_FILE, .epochs = 1};
	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	CHECK(bs.n == 1 && bs.dropped == 1 && bs.b[0].docs[0].sample == 11 &&
	      bs.b[0].docs[1].sample == 13 && bs.b[0].docs[1].pos == 2 &&
	      bs.b[0].docs[1].id == 1);
	bp_batches_release(&bs);
	o.overlen = BP_OVERLEN_TRUNCATE;
	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	CHECK(bs.truncated == 1 && bs.b[0].docs[1].len == 100 && bs.b[0].docs[1].sample == 12);
	bp_batches_release(&bs);
	o.overlen = BP_OVERLEN_ERROR;
	CHECK(bp_sample(&ds, &o, &bs, &err) == -1);
	CHECK(strstr(err.text, "sample 12 (position 1, 500 tokens)") != NULL);
	bp_dataset_release(&ds);
}

/* Shuffle: each epoch a permutation (every sample exactly once), epochs differ, the same
 * seed gives the same order and another seed another. */
static void test_index_shuffle(void)
{
	struct bp_dataset ds;
	struct bp_batches a, b;
	struct bp_error err = {""};
	char text[4096] = "";
	for (int i = 0; i < 200; i++)
		snprintf(text + strlen(text), sizeof(text) - strlen(text), "%d\n", 1 + i % 17);
	load_text(&ds, text);
	struct bp_sampler_opts o = {.steps = 0, .docs_per_step = 10, .max_len = 100,
				    .overlen = BP_OVERLEN_ERROR, .seed = 5,
				    .order = BP_ORDER_SHUFFLE, .epochs = 2};
	CHECK(bp_sample(&ds, &o, &a, &err) == 0);
	CHECK(bp_sample(&ds, &o, &b, &err) == 0);
	CHECK(same_batches(&a, &b) && a.n == 40);
	int seen[2][200] = {{0}}, moved = 0, epochs_differ = 0;
	for (size_t s = 0; s < a.n; s++)
		for (size_t i = 0; i < a.b[s].ndocs; i++) {
			const struct bp_doc *d = &a.b[s].docs[i];
			if (d->sample >= 0 && d->sample < 200 && d->pos < 400)
				seen[d->pos / 200][d->sample]++;
			moved += d->pos < 200 && d->sample != d->pos;
			if (d->pos < 200) {
				const struct bp_doc *e = &a.b[s + 20].docs[i];
				epochs_differ += e->sample != d->sample;
			}
		}
	int perm = 1;
	for (int e = 0; e < 2; e++)
		for (int i = 0; i < 200; i++)
			perm &= seen[e][i] == 1;
	CHECK(perm && moved > 150 && epochs_differ > 150);
	bp_batches_release(&b);
	o.seed = 6;
	CHECK(bp_sample(&ds, &o, &b, &err) == 0);
	CHECK(!same_batches(&a, &b));
	bp_batches_release(&a);
	bp_batches_release(&b);
	bp_dataset_release(&ds);
	/* A histogram has no samples to take in order. */
	load_preset(&ds, "synthetic-longtail");
	CHECK(bp_sample(&ds, &o, &a, &err) == -1 && strstr(err.text, "histogram") != NULL);
	o.order = BP_ORDER_DRAW;
	CHECK(bp_sample(&ds, &o, &a, &err) == -1 && strstr(err.text, "epochs") != NULL);
	bp_dataset_release(&ds);
}

/* Cut pieces keep their sample and where in it they start. */
static void test_index_cut(void)
{
	struct bp_dataset ds;
	struct bp_batches bs;
	struct bp_error err = {""};
	load_text(&ds, "4 30\n8 90\n");
	struct bp_sampler_opts o = {.steps = 1, .docs_per_step = 2, .max_len = 100,
				    .overlen = BP_OVERLEN_ERROR, .seed = 1,
				    .order = BP_ORDER_FILE};
	CHECK(bp_sample(&ds, &o, &bs, &err) == 0);
	CHECK(bp_batches_cut(&bs, 50, NULL, &err) == 0);
	/* stream 30 | 90 cut at 50 and 100: [4:0+30] [8:0+20] [8:20+50] [8:70+20] */
	CHECK(bs.b[0].ndocs == 4);
	const struct bp_doc *d = bs.b[0].docs;
	CHECK(d[0].sample == 4 && d[0].soff == 0 && d[0].len == 30);
	CHECK(d[1].sample == 8 && d[1].soff == 0 && d[1].len == 20);
	CHECK(d[2].sample == 8 && d[2].soff == 20 && d[2].len == 50);
	CHECK(d[3].sample == 8 && d[3].soff == 70 && d[3].len == 20 && d[3].id == 3);
	bp_batches_release(&bs);
	bp_dataset_release(&ds);
}

int main(void)
{
	test_determinism();
	test_same_stream_as_draw();
	test_token_budget();
	test_carry_over();
	test_docs_per_step();
	test_cap_rules();
	test_opts_errors();
	test_draw_mean();
	test_index_file_order();
	test_index_last_batch();
	test_index_cap();
	test_index_shuffle();
	test_index_cut();
	return CHECK_DONE();
}
