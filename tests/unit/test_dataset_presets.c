/* test_dataset_presets.c: every dataset compiled into the binary (the JSON files of
 * datasets/) loads, says what it is (kind, provenance, tokenizer, license), has statistics
 * consistent with its bins or lengths, and samples true: 1,000,000 seeded draws reproduce its
 * mean and percentiles.
 *
 * The sampling criterion (also in datasets/README.md, "Sampling inside a bin"):
 * - mean: the sampled mean is within 2% of the file's stats.mean (which is the true mean of
 *   the documents: tokens / count);
 * - percentiles: a binned file's p50/p90/p99 are upper bin edges, an upper bound, so draws are
 *   compared with what the bin model implies instead: the model's q-quantile m (the bin where
 *   the cumulative count reaches q, then the in-bin rule's inverse: uniform or log-uniform).
 *   The sampled nearest-rank quantile v passes when |v - m| <= 2% of m, or when v is a
 *   quantile of the model at a rank within 0.2 percentage points of q (P(X < v) <= q + 0.002
 *   and P(X <= v) >= q - 0.002). The second arm covers percentiles that fall where the density
 *   is nearly zero (the gap of a bimodal mix, the step between two raw lengths), where a rank
 *   error of 1e-4 moves the length a lot; with 1e6 draws the rank's standard error is at most
 *   5e-4, so 0.002 is four of them. For raw lengths the model quantile is the file's own.
 *   The model quantile itself must lie in the bin whose upper edge the file reports. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dataset.h"
#include "rng.h"

#define DRAWS 1000000

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* ceil(n * q / 100) for q in [0, 100], as the planner ranks percentiles. */
static int64_t need_rank(int64_t n, int q)
{
	return (n / 100) * q + ((n % 100) * q + 99) / 100;
}

/* P(X <= v) for one draw from the dataset's model. */
static double model_cdf(const struct bp_dataset *ds, int64_t v)
{
	double below = 0;
	if (ds->lengths) {
		for (size_t i = 0; i < ds->nlengths; i++)
			below += ds->lengths[i] <= v;
		return below / (double)ds->nlengths;
	}
	for (size_t i = 0; i < ds->nbins; i++) {
		const struct bp_bin *b = &ds->bins[i];
		double f;
		if (v >= b->hi)
			f = 1;
		else if (v < b->lo)
			f = 0;
		else if (ds->rule == BP_BIN_LOGUNIFORM)
			/* the sampler floors lo * ((hi + 1) / lo)^u: X <= v iff x < v + 1 */
			f = log((double)(v + 1) / (double)b->lo) /
			    log(((double)b->hi + 1.0) / (double)b->lo);
		else
			f = (double)(v - b->lo + 1) / (double)(b->hi - b->lo + 1);
		below += f * (double)b->count;
	}
	return below / (double)ds->stats.count;
}

/* The model's q-quantile (continuous inside a bin); *hi gets the upper edge of its bin. */
static double model_quantile(const struct bp_dataset *ds, int q, int64_t *hi)
{
	int64_t need = need_rank(ds->stats.count, q), cum = 0;
	if (ds->lengths) {
		int64_t *s = malloc(ds->nlengths * sizeof(*s));
		if (!s)
			return -1;
		memcpy(s, ds->lengths, ds->nlengths * sizeof(*s));
		qsort(s, ds->nlengths, sizeof(*s), cmp_i64);
		double m = (double)s[need - 1];
		*hi = s[need - 1];
		free(s);
		return m;
	}
	for (size_t i = 0; i < ds->nbins; i++) {
		const struct bp_bin *b = &ds->bins[i];
		if (b->count == 0 || cum + b->count < need) {
			cum += b->count;
			continue;
		}
		double f = (double)(need - cum) / (double)b->count;
		*hi = b->hi;
		if (b->lo == b->hi)
			return (double)b->lo;
		if (ds->rule == BP_BIN_LOGUNIFORM)
			return (double)b->lo * pow(((double)b->hi + 1.0) / (double)b->lo, f);
		return (double)b->lo + f * (double)(b->hi - b->lo + 1);
	}
	*hi = 0;
	return -1;
}

/* The provenance every shipped file owes its reader (datasets/README.md). */
static void check_provenance(const struct bp_dataset *ds)
{
	CHECK(ds->source && strlen(ds->source) >= 40);
	CHECK(ds->tokenizer && ds->tokenizer[0]);
	CHECK(ds->license && ds->license[0]);
	switch (ds->kind) {
	case BP_DS_MEASURED:
		/* says it was measured and names the recipe that reproduces it */
		CHECK(!strncmp(ds->source, "measured: ", 10));
		CHECK(strstr(ds->source, "datasets/recipes/") != NULL);
		break;
	case BP_DS_RECONSTRUCTED:
		/* says it is a reconstruction, how sure we are, and how to replace it */
		CHECK(!strncmp(ds->source, "reconstructed, confidence: ", 27));
		CHECK(strstr(ds->source, "To replace it with measured lengths") != NULL);
		CHECK(strstr(ds->source, "tools/gen-reconstructed-datasets") != NULL);
		break;
	case BP_DS_SYNTHETIC:
		break;
	}
}

static void check_stats(const struct bp_dataset *ds)
{
	const struct bp_dataset_stats *s = &ds->stats;
	int64_t count = 0, tokens = 0, max = 0;
	CHECK(s->count > 0 && s->tokens >= s->count);
	if (ds->bins) {
		CHECK(ds->nbins > 0 && ds->lengths == NULL);
		for (size_t i = 0; i < ds->nbins; i++) {
			const struct bp_bin *b = &ds->bins[i];
			CHECK(b->lo >= 1 && b->lo <= b->hi);
			CHECK(i == 0 || b->lo > ds->bins[i - 1].hi);
			count += b->count;
			tokens += b->tokens;
			if (b->count)
				max = b->hi;
		}
	} else {
		CHECK(ds->nlengths > 0);
		for (size_t i = 0; i < ds->nlengths; i++) {
			count++;
			tokens += ds->lengths[i];
			max = ds->lengths[i] > max ? ds->lengths[i] : max;
		}
	}
	CHECK(count == s->count && tokens == s->tokens && max == s->max);
	CHECK_NEAR(s->mean, (double)tokens / (double)count, 1e-9 * s->mean);
	CHECK(s->p50 >= 1 && s->p50 <= s->p90 && s->p90 <= s->p99 && s->p99 <= s->max);
}

static void check_sampling(const struct bp_dataset *ds, uint64_t seed)
{
	static int64_t draws[DRAWS];
	struct bp_rng rng;
	double sum = 0;
	static const int qs[3] = {50, 90, 99};
	const int64_t file_p[3] = {ds->stats.p50, ds->stats.p90, ds->stats.p99};

	bp_rng_seed(&rng, seed);
	for (size_t i = 0; i < DRAWS; i++) {
		draws[i] = bp_dataset_draw(ds, &rng);
		sum += (double)draws[i];
	}
	double mean = sum / DRAWS;
	if (!(fabs(mean - ds->stats.mean) <= 0.02 * ds->stats.mean))
		fprintf(stderr, "%s: sampled mean %.1f, file mean %.1f\n", ds->name, mean,
			ds->stats.mean);
	CHECK(fabs(mean - ds->stats.mean) <= 0.02 * ds->stats.mean);

	qsort(draws, DRAWS, sizeof(draws[0]), cmp_i64);
	CHECK(draws[0] >= 1 && draws[DRAWS - 1] <= ds->stats.max);
	for (int k = 0; k < 3; k++) {
		int64_t v = draws[need_rank(DRAWS, qs[k]) - 1], edge = 0;
		double m = model_quantile(ds, qs[k], &edge);
		double q = qs[k] / 100.0;
		/* the file's percentile is the upper edge of the bin holding the model's */
		CHECK(m >= 1 && m <= (double)file_p[k] + 1 && edge == file_p[k]);
		int near = fabs((double)v - m) <= 0.02 * m;
		int rank = model_cdf(ds, v - 1) <= q + 0.002 && model_cdf(ds, v) >= q - 0.002;
		if (!(near || rank))
			fprintf(stderr, "%s: sampled p%d %lld, model %.1f "
				"(P(X<v) %.5f, P(X<=v) %.5f)\n", ds->name, qs[k], (long long)v, m, model_cdf(ds, v - 1),
				model_cdf(ds, v));
		CHECK(near || rank);
	}
}

int main(void)
{
	size_t n = bp_dataset_preset_count();
	int measured = 0, reconstructed = 0;
	CHECK(n >= 2);
	for (size_t i = 0; i < n; i++) {
		struct bp_dataset ds;
		struct bp_error err = {""};
		const char *name = bp_dataset_preset_name(i);
		bp_dataset_init(&ds);
		CHECK(bp_dataset_preset(&ds, name, &err) == 0);
		if (ds.stats.count == 0) {
			fprintf(stderr, "preset '%s' does not load: %s\n", name, err.text);
			bp_dataset_release(&ds);
			continue;
		}
		measured += ds.kind == BP_DS_MEASURED;
		reconstructed += ds.kind == BP_DS_RECONSTRUCTED;
		check_provenance(&ds);
		check_stats(&ds);
		check_sampling(&ds, 0x5eed0000u + i);
		bp_dataset_release(&ds);
	}
	/* The shipped files the README promises (issue 5): two measured corpora and the
	 * reconstructions of the papers' datasets. */
	static const char *const expect[] = {
		"linux-kernel-code", "linux-kernel-docs", "slimpajama-commoncrawl",
		"slimpajama-github", "pretrain-upsampled-long", "prolong-64k", "prolong-512k",
		"chatqa2-long-sft", "longalign-10k", NULL,
	};
	for (size_t k = 0; expect[k]; k++) {
		size_t len;
		CHECK(bp_dataset_preset_text(expect[k], &len) != NULL);
	}
	CHECK(measured >= 2 && reconstructed >= 7);

	/* The measured corpora are what the recipe produced (datasets/README.md). */
	struct bp_dataset ds;
	struct bp_error err = {""};
	bp_dataset_init(&ds);
	CHECK(bp_dataset_preset(&ds, "linux-kernel-code", &err) == 0);
	CHECK(ds.kind == BP_DS_MEASURED && ds.stats.count == 55296 && ds.stats.max == 643892);
	CHECK(ds.stats.tokens == 265442861);
	CHECK(bp_dataset_preset(&ds, "linux-kernel-docs", &err) == 0);
	CHECK(ds.kind == BP_DS_MEASURED && ds.stats.count == 8868 && ds.lengths != NULL);
	CHECK(ds.stats.p50 == 561 && ds.stats.p99 == 11606);
	CHECK(bp_dataset_preset(&ds, "longalign-10k", &err) == 0);
	CHECK(ds.stats.count == 10000 && ds.bins[0].lo >= 8192 && ds.stats.max <= 73728);
	bp_dataset_release(&ds);
	return CHECK_DONE();
}
