/* dataset_json.c: the balplan.dataset/v1 codec (schema in datasets/README.md).
 *
 * Called by bp_dataset_parse (and so by presets and cmd/) to read, and by cmd/ and the tests
 * to write. Reading is strict and checks every invariant dataset.h promises (non-empty, bins
 * sorted and disjoint with consistent token totals, lengths >= 1, total tokens within int64,
 * stats in the file agreeing with the data); writing is canonical (stats recomputed, bins in
 * order, "sampling" only with bins), so from_json then to_json is the identity on canonical
 * text. */
#include "dataset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"

static const char *const top_keys[] = {"format", "name",     "kind",  "source", "tokenizer",
				       "license", "sampling", "stats", "bins",   "lengths",
				       NULL};
/* The bins' and the stats' fields, named once for the reader and the writer. */
static const struct bp_field bin_fields[] = {
	BP_FIELD_I64(struct bp_bin, lo, "lo", 1, 9.3e18),
	BP_FIELD_I64(struct bp_bin, hi, "hi", 1, 9.3e18),
	BP_FIELD_I64(struct bp_bin, count, "count", 0, 9.3e18),
	BP_FIELD_I64(struct bp_bin, tokens, "tokens", 0, 9.3e18),
};
/* Optional on read: the file's stats are compared with the computed ones (check_stats). */
static const struct bp_field stats_fields[] = {
	BP_FIELD_I64F(struct bp_dataset_stats, count, "count", 0, 9.3e18, BP_FF_OPT),
	BP_FIELD_I64F(struct bp_dataset_stats, tokens, "tokens", 0, 9.3e18, BP_FF_OPT),
	BP_FIELD_REALF(struct bp_dataset_stats, mean, "mean", 0, INFINITY, BP_FF_OPT),
	BP_FIELD_I64F(struct bp_dataset_stats, p50, "p50", 0, 9.3e18, BP_FF_OPT),
	BP_FIELD_I64F(struct bp_dataset_stats, p90, "p90", 0, 9.3e18, BP_FF_OPT),
	BP_FIELD_I64F(struct bp_dataset_stats, p99, "p99", 0, 9.3e18, BP_FF_OPT),
	BP_FIELD_I64F(struct bp_dataset_stats, max, "max", 0, 9.3e18, BP_FF_OPT),
};

static const char *rule_name(enum bp_bin_rule r)
{
	return r == BP_BIN_LOGUNIFORM ? "log-uniform" : "uniform";
}

/* Whether count * v fits int64 (count, v >= 0); the product goes to *out when it does. */
static int mul_fits(int64_t count, int64_t v, int64_t *out)
{
	if (v != 0 && count > INT64_MAX / v)
		return 0;
	*out = count * v;
	return 1;
}

static int read_bins(struct bp_dataset *ds, json_t *arr, struct bp_error *err)
{
	size_t n = json_array_size(arr);
	int64_t total = 0;
	char where[64];

	ds->bins = bp_calloc(n, sizeof(*ds->bins), err);
	if (!ds->bins)
		return -1;
	ds->nbins = n;
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_array_get(arr, i);
		struct bp_bin *b = &ds->bins[i];
		int64_t lo_tok, hi_tok;
		snprintf(where, sizeof(where), "dataset.bins[%zu]", i);
		if (bp_json_read_fields(o, bin_fields, BP_ARRAY_LEN(bin_fields), b, NULL, 1, where,
					err) < 0)
			return -1;
		if (b->lo > b->hi)
			return bp_errorf(err, "%s.lo is %lld, greater than hi %lld", where,
					 (long long)b->lo, (long long)b->hi);
		int lo_ok = mul_fits(b->count, b->lo, &lo_tok) && b->tokens >= lo_tok;
		int hi_ok = !mul_fits(b->count, b->hi, &hi_tok) || b->tokens <= hi_tok;
		if (!lo_ok || !hi_ok)
			return bp_errorf(err, "%s.tokens is %lld, outside [count*lo, count*hi] "
					 "for count %lld in [%lld, %lld]", where,
					 (long long)b->tokens, (long long)b->count,
					 (long long)b->lo, (long long)b->hi);
		if (i > 0 && b->lo <= ds->bins[i - 1].hi)
			return bp_errorf(err, "%s [%lld, %lld] does not come after dataset.bins[%zu] "
					 "[%lld, %lld]: bins must be sorted and disjoint", where,
					 (long long)b->lo, (long long)b->hi, i - 1,
					 (long long)ds->bins[i - 1].lo,
					 (long long)ds->bins[i - 1].hi);
		if (total > INT64_MAX - b->tokens)
			return bp_errorf(err, "dataset '%s' holds more tokens than int64 can count",
					 ds->name);
		total += b->tokens;
	}
	return 0;
}

static int read_lengths(struct bp_dataset *ds, json_t *arr, struct bp_error *err)
{
	size_t n = json_array_size(arr);
	int64_t total = 0;

	ds->lengths = bp_calloc(n, sizeof(*ds->lengths), err);
	if (!ds->lengths)
		return -1;
	ds->nlengths = n;
	for (size_t i = 0; i < n; i++) {
		json_t *v = json_array_get(arr, i);
		if (!json_is_integer(v))
			return bp_errorf(err, "dataset.lengths[%zu] is not an integer", i);
		json_int_t x = json_integer_value(v);
		if (x < 1)
			return bp_errorf(err, "dataset.lengths[%zu] is %lld: lengths must be >= 1",
					 i, (long long)x);
		if (total > INT64_MAX - x)
			return bp_errorf(err, "dataset '%s' holds more tokens than int64 can count",
					 ds->name);
		total += x;
		ds->lengths[i] = x;
	}
	return 0;
}

/* Checks the file's stats against the computed ones. Percentiles are type-checked only: they
 * depend on a percentile rule the file's author may not share, and the writer recomputes
 * them. The mean may differ by the writer's rounding (1e-3) or 1e-6 relative. */
static int check_stats(const struct bp_dataset *ds, json_t *st, struct bp_error *err)
{
	const char *what = ds->bins ? "bins" : "lengths";
	const struct bp_dataset_stats *c = &ds->stats;
	struct bp_dataset_stats f = *c; /* absent fields agree */
	if (bp_json_read_fields(st, stats_fields, BP_ARRAY_LEN(stats_fields), &f, NULL, 1,
				"dataset.stats", err) < 0)
		return -1;
	if (f.count != c->count)
		return bp_errorf(err, "dataset.stats.count is %lld but the %s hold %lld",
				 (long long)f.count, what, (long long)c->count);
	if (f.tokens != c->tokens)
		return bp_errorf(err, "dataset.stats.tokens is %lld but the %s hold %lld",
				 (long long)f.tokens, what, (long long)c->tokens);
	if (f.max != c->max)
		return bp_errorf(err, "dataset.stats.max is %lld but the %s give %lld",
				 (long long)f.max, what, (long long)c->max);
	if (fabs(f.mean - c->mean) > fmax(1e-6 * fabs(c->mean), 5.000001e-4))
		return bp_errorf(err, "dataset.stats.mean is %.6f but the %s give %.6f", f.mean,
				 what, c->mean);
	return 0;
}

static int read_dataset(struct bp_dataset *ds, json_t *root, struct bp_error *err)
{
	char word[32] = "";
	json_t *bins, *lengths, *st;

	if (bp_json_check_format(root, BP_DATASET_FORMAT, "dataset", err) < 0 ||
	    bp_json_check_keys(root, top_keys, "dataset", err) < 0 ||
	    bp_json_get_str(root, "name", 1, ds->name, sizeof(ds->name), "dataset", err) < 0)
		return -1;
	if (!ds->name[0])
		return bp_errorf(err, "dataset.name is empty");
	if (bp_json_get_str(root, "kind", 1, word, sizeof(word), "dataset", err) < 0)
		return -1;
	if (!strcmp(word, "measured"))
		ds->kind = BP_DS_MEASURED;
	else if (!strcmp(word, "reconstructed"))
		ds->kind = BP_DS_RECONSTRUCTED;
	else if (!strcmp(word, "synthetic"))
		ds->kind = BP_DS_SYNTHETIC;
	else
		return bp_errorf(err, "dataset.kind is \"%s\", not \"measured\", "
				 "\"reconstructed\" or \"synthetic\"", word);
	if (bp_json_get_strdup(root, "source", 1, &ds->source, "dataset", err) < 0 ||
	    bp_json_get_strdup(root, "tokenizer", 1, &ds->tokenizer, "dataset", err) < 0 ||
	    bp_json_get_strdup(root, "license", 1, &ds->license, "dataset", err) < 0)
		return -1;

	bins = json_object_get(root, "bins");
	lengths = json_object_get(root, "lengths");
	if (bins && lengths)
		return bp_errorf(err, "dataset has both \"bins\" and \"lengths\"");
	if (!bins && !lengths)
		return bp_errorf(err, "dataset has neither \"bins\" nor \"lengths\"");
	if (bins && !json_is_array(bins))
		return bp_errorf(err, "dataset.bins is not an array");
	if (lengths && !json_is_array(lengths))
		return bp_errorf(err, "dataset.lengths is not an array");

	ds->rule = BP_BIN_UNIFORM;
	if (json_object_get(root, "sampling")) {
		if (!bins)
			return bp_errorf(err, "dataset.sampling applies to bins only");
		if (bp_json_get_str(root, "sampling", 1, word, sizeof(word), "dataset", err) < 0)
			return -1;
		if (!strcmp(word, "uniform"))
			ds->rule = BP_BIN_UNIFORM;
		else if (!strcmp(word, "log-uniform"))
			ds->rule = BP_BIN_LOGUNIFORM;
		else
			return bp_errorf(err, "dataset.sampling is \"%s\", not \"uniform\" or "
					 "\"log-uniform\"", word);
	}
	if ((bins ? read_bins(ds, bins, err) : read_lengths(ds, lengths, err)) < 0)
		return -1;
	bp_dataset_compute_stats(ds);
	if (ds->stats.count == 0)
		return bp_errorf(err, "dataset '%s' is empty", ds->name);
	st = json_object_get(root, "stats");
	if (st && check_stats(ds, st, err) < 0)
		return -1;
	return 0;
}

int bp_dataset_from_json(struct bp_dataset *ds, json_t *root, struct bp_error *err)
{
	bp_dataset_release(ds);
	if (read_dataset(ds, root, err) < 0) {
		bp_dataset_release(ds);
		return -1;
	}
	return 0;
}

static json_t *str_or_empty(const char *s)
{
	return json_string(s ? s : "");
}

json_t *bp_dataset_to_json(const struct bp_dataset *ds)
{
	struct bp_dataset tmp = *ds; /* shallow: only its stats are recomputed */
	json_t *root = json_object(), *st = json_object(), *arr = json_array();
	int ok = root && st && arr;

	bp_dataset_compute_stats(&tmp);
	bp_json_set(root, "format", json_string(BP_DATASET_FORMAT), &ok);
	bp_json_set(root, "name", json_string(ds->name), &ok);
	bp_json_set(root, "kind", json_string(bp_dataset_kind_name(ds->kind)), &ok);
	bp_json_set(root, "source", str_or_empty(ds->source), &ok);
	bp_json_set(root, "tokenizer", str_or_empty(ds->tokenizer), &ok);
	bp_json_set(root, "license", str_or_empty(ds->license), &ok);

	if (bp_json_write_fields(st, stats_fields, BP_ARRAY_LEN(stats_fields), &tmp.stats) < 0)
		ok = 0;
	bp_json_set(root, "stats", st, &ok);
	st = NULL; /* owned by root now, or already released by bp_json_set */

	if (ds->lengths) {
		for (size_t i = 0; ok && i < ds->nlengths; i++)
			bp_json_append(arr, json_integer(ds->lengths[i]), &ok);
		bp_json_set(root, "lengths", arr, &ok);
	} else {
		bp_json_set(root, "sampling", json_string(rule_name(ds->rule)), &ok);
		for (size_t i = 0; ok && i < ds->nbins; i++) {
			const struct bp_bin *b = &ds->bins[i];
			json_t *o = json_object();
			if (bp_json_write_fields(o, bin_fields, BP_ARRAY_LEN(bin_fields), b) < 0) {
				json_decref(o);
				o = NULL;
			}
			bp_json_append(arr, o, &ok);
		}
		bp_json_set(root, "bins", arr, &ok);
	}
	arr = NULL;
	if (!ok) {
		json_decref(root);
		return NULL;
	}
	return root;
}
