/* test_dataset.c: the dataset readers (v1 JSON, plain text, JSONL), the v1 codec's round trip
 * and canonical text, stats, presets, and the exact text of every reader error. The sample
 * index forms (ids, token arrays, Megatron-LM .idx) are test_index_read.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dataset.h"
#include "jsonutil.h"

/* Parses text as a dataset named "x"; returns the reader's result. */
static int parse(struct bp_dataset *ds, const char *text, const char *field,
		 struct bp_error *err)
{
	return bp_dataset_parse(ds, text, strlen(text), "x", field, err);
}

/* A v1 document with the provenance fields filled and body appended; static buffer. */
static const char *v1(const char *body)
{
	static char buf[4096];
	snprintf(buf, sizeof(buf),
		 "{\"format\": \"balplan.dataset/v1\", \"name\": \"x\", \"kind\": \"synthetic\",\n"
		 " \"source\": \"s\", \"tokenizer\": \"t\", \"license\": \"l\",\n %s}\n",
		 body);
	return buf;
}

/* The parse of text must fail with exactly want. */
static void expect_error(const char *text, const char *field, const char *want, int line)
{
	struct bp_dataset ds;
	struct bp_error err = {""};
	bp_dataset_init(&ds);
	int rc = parse(&ds, text, field, &err);
	check_count++;
	if (rc != -1 || strcmp(err.text, want)) {
		fprintf(stderr, "%s:%d: expected error \"%s\", got rc %d \"%s\"\n", __FILE__, line,
			want, rc, err.text);
		check_failures++;
	}
	/* A failed parse leaves the dataset empty, and releasing again is harmless. */
	CHECK(ds.bins == NULL && ds.lengths == NULL && ds.source == NULL);
	bp_dataset_release(&ds);
}
#define EXPECT_ERROR(text, want) expect_error(text, NULL, want, __LINE__)

/* Canonical text of ds; caller frees. */
static char *canonical(const struct bp_dataset *ds)
{
	json_t *j = bp_dataset_to_json(ds);
	char *s = j ? bp_json_dump_canonical(j) : NULL;
	json_decref(j);
	return s;
}

static int same_dataset(const struct bp_dataset *a, const struct bp_dataset *b)
{
	if (strcmp(a->name, b->name) || a->kind != b->kind || a->rule != b->rule ||
	    strcmp(a->source, b->source) || strcmp(a->tokenizer, b->tokenizer) ||
	    strcmp(a->license, b->license) || a->nbins != b->nbins ||
	    a->nlengths != b->nlengths || (a->bins == NULL) != (b->bins == NULL) ||
	    (a->lengths == NULL) != (b->lengths == NULL))
		return 0;
	if (memcmp(&a->stats, &b->stats, sizeof(a->stats)))
		return 0;
	for (size_t i = 0; i < a->nbins; i++)
		if (memcmp(&a->bins[i], &b->bins[i], sizeof(a->bins[i])))
			return 0;
	for (size_t i = 0; i < a->nlengths; i++)
		if (a->lengths[i] != b->lengths[i])
			return 0;
	return 1;
}

static void test_plain_text(void)
{
	struct bp_dataset ds;
	struct bp_error err = {""};
	const char *t = "# lengths of a small corpus\n100\n\n  200  \r\n300 # trailing note\n7";
	bp_dataset_init(&ds);
	CHECK(parse(&ds, t, NULL, &err) == 0);
	CHECK(!strcmp(ds.name, "x"));
	CHECK(ds.kind == BP_DS_MEASURED);
	CHECK(ds.bins == NULL && ds.nlengths == 4);
	CHECK(ds.lengths && ds.lengths[0] == 100 && ds.lengths[1] == 200 &&
	      ds.lengths[2] == 300 && ds.lengths[3] == 7);
	CHECK(ds.stats.count == 4 && ds.stats.tokens == 607 && ds.stats.max == 300);
	CHECK_NEAR(ds.stats.mean, 151.75, 1e-12);
	CHECK(!strcmp(ds.source, "plain text, one length per line"));
	/* A UTF-8 byte order mark is skipped. */
	CHECK(parse(&ds, "\xef\xbb\xbf" "42\n", NULL, &err) == 0);
	CHECK(ds.nlengths == 1 && ds.lengths[0] == 42);
	bp_dataset_release(&ds);
	CHECK(ds.lengths == NULL && ds.source == NULL);
	bp_dataset_release(&ds); /* twice is fine */
}

static void test_jsonl(void)
{
	struct bp_dataset ds;
	struct bp_error err = {""};
	bp_dataset_init(&ds);
	CHECK(parse(&ds, "{\"id\": \"a\", \"tokens\": 50}\n\n{\"tokens\": 70, \"x\": [1]}\n",
		    NULL, &err) == 0);
	CHECK(ds.nlengths == 2 && ds.lengths[0] == 50 && ds.lengths[1] == 70);
	CHECK(!strcmp(ds.source, "JSONL, field \"tokens\""));
	/* The first candidate present in line 1 wins: num_tokens before length. */
	CHECK(parse(&ds, "{\"length\": 1, \"num_tokens\": 9}\n{\"num_tokens\": 11}", NULL,
		    &err) == 0);
	CHECK(ds.nlengths == 2 && ds.lengths[0] == 9 && ds.lengths[1] == 11);
	CHECK(parse(&ds, "{\"len\": 4}\r\n{\"len\": 5}\r\n", NULL, &err) == 0);
	CHECK(ds.stats.tokens == 9);
	/* A named field. */
	CHECK(parse(&ds, "{\"n\": 3, \"tokens\": 1}\n{\"n\": 4}\n", "n", &err) == 0);
	CHECK(ds.stats.count == 2 && ds.stats.tokens == 7);
	/* One line without "format" is JSONL too. */
	CHECK(parse(&ds, "{\"tokens\": 12}", NULL, &err) == 0);
	CHECK(ds.stats.count == 1 && ds.stats.max == 12);
	bp_dataset_release(&ds);
}

static const char *bins_body =
	"\"sampling\": \"log-uniform\",\n"
	" \"bins\": [{\"lo\": 1, \"hi\": 9, \"count\": 4, \"tokens\": 20},\n"
	"  {\"lo\": 10, \"hi\": 99, \"count\": 0, \"tokens\": 0},\n"
	"  {\"lo\": 100, \"hi\": 999, \"count\": 5, \"tokens\": 2500},\n"
	"  {\"lo\": 1000, \"hi\": 1000, \"count\": 1, \"tokens\": 1000}]";

static void test_v1_bins_and_stats(void)
{
	struct bp_dataset ds, again;
	struct bp_error err = {""};
	bp_dataset_init(&ds);
	bp_dataset_init(&again);
	CHECK(parse(&ds, v1(bins_body), NULL, &err) == 0);
	CHECK(ds.nbins == 4 && ds.lengths == NULL);
	CHECK(ds.rule == BP_BIN_LOGUNIFORM && ds.kind == BP_DS_SYNTHETIC);
	CHECK(ds.stats.count == 10 && ds.stats.tokens == 3520 && ds.stats.max == 1000);
	CHECK_NEAR(ds.stats.mean, 352.0, 1e-12);
	/* Upper edge of the bin where the cumulative count reaches 5, 9 and 10 documents. */
	CHECK(ds.stats.p50 == 999 && ds.stats.p90 == 999 && ds.stats.p99 == 1000);

	/* Round trip: equal structs and identical canonical text. */
	char *t1 = canonical(&ds);
	CHECK(t1 != NULL);
	CHECK(t1 && parse(&again, t1, NULL, &err) == 0);
	CHECK(same_dataset(&ds, &again));
	char *t2 = canonical(&again);
	CHECK(t1 && t2 && !strcmp(t1, t2));
	CHECK(t1 && strstr(t1, "\"sampling\": \"log-uniform\""));
	CHECK(t1 && strstr(t1, "\"p50\": 999"));
	free(t1);
	free(t2);

	/* Stats in the file that agree (mean within the writer's rounding) are accepted. */
	CHECK(parse(&ds, v1("\"stats\": {\"count\": 3, \"tokens\": 4, \"mean\": 1.333, "
			    "\"max\": 2, \"p50\": 77},\n \"lengths\": [1, 1, 2]"), NULL,
		    &err) == 0);
	CHECK(ds.stats.p50 == 1 && ds.stats.p90 == 2 && ds.stats.p99 == 2);
	bp_dataset_release(&ds);
	bp_dataset_release(&again);
}

static void test_v1_lengths_round_trip(void)
{
	struct bp_dataset ds, again;
	struct bp_error err = {""};
	bp_dataset_init(&ds);
	bp_dataset_init(&again);
	CHECK(parse(&ds, v1("\"lengths\": [5, 3, 9, 1, 7, 3]"), NULL, &err) == 0);
	CHECK(ds.nlengths == 6 && ds.lengths[0] == 5 && ds.lengths[5] == 3);
	/* Nearest rank: 3 of 6 (p50), 6 of 6 (p90 and p99). */
	CHECK(ds.stats.p50 == 3 && ds.stats.p90 == 9 && ds.stats.p99 == 9);
	char *t1 = canonical(&ds);
	CHECK(t1 && !strstr(t1, "sampling"));
	CHECK(t1 && parse(&again, t1, NULL, &err) == 0);
	CHECK(same_dataset(&ds, &again));
	char *t2 = canonical(&again);
	CHECK(t1 && t2 && !strcmp(t1, t2));
	free(t1);
	free(t2);

	/* Text input written out as v1 reads back the same. */
	CHECK(parse(&ds, "10\n20\n", NULL, &err) == 0);
	t1 = canonical(&ds);
	CHECK(t1 && parse(&again, t1, NULL, &err) == 0);
	CHECK(same_dataset(&ds, &again));
	free(t1);
	bp_dataset_release(&ds);
	bp_dataset_release(&again);
}

static void test_presets(void)
{
	struct bp_dataset ds;
	struct bp_error err = {""};
	size_t n = bp_dataset_preset_count(), len = 0;
	bp_dataset_init(&ds);
	CHECK(n >= 2);
	for (size_t i = 0; i + 1 < n; i++)
		CHECK(strcmp(bp_dataset_preset_name(i), bp_dataset_preset_name(i + 1)) < 0);
	CHECK(bp_dataset_preset_name(n) == NULL);
	/* Every preset loads, names itself after its file and is stored in canonical form. */
	for (size_t i = 0; i < n; i++) {
		const char *name = bp_dataset_preset_name(i);
		const char *text = bp_dataset_preset_text(name, &len);
		CHECK(text != NULL && len == strlen(text));
		CHECK(bp_dataset_preset(&ds, name, &err) == 0);
		CHECK(!strcmp(ds.name, name));
		char *c = canonical(&ds);
		CHECK(c && text && !strcmp(c, text));
		free(c);
	}

	CHECK(bp_dataset_preset(&ds, "synthetic-longtail", &err) == 0);
	CHECK(ds.kind == BP_DS_SYNTHETIC && ds.bins && ds.nbins >= 40 && ds.nbins <= 60);
	CHECK(ds.stats.max == 131072);
	CHECK(ds.stats.p50 < 4096 && ds.stats.p99 > 32768);
	CHECK(!strcmp(ds.tokenizer, "n/a (synthetic)") && !strcmp(ds.license, "CC0 (generated)"));
	CHECK(strstr(ds.source, "tools/gen-synthetic-dataset") && strstr(ds.source, "--seed"));

	CHECK(bp_dataset_preset(&ds, "tiny-uniform", &err) == 0);
	CHECK(ds.nlengths == 20 && ds.stats.tokens == 40950 && ds.stats.max == 3995);
	CHECK(ds.stats.p50 == 1945 && ds.stats.p90 == 3585 && ds.stats.p99 == 3995);

	CHECK(bp_dataset_preset(&ds, "nope", &err) == -1);
	CHECK(!strcmp(err.text, "unknown dataset preset 'nope' (see 'balplan dataset list')"));
	CHECK(bp_dataset_preset_text("nope", &len) == NULL);
	bp_dataset_release(&ds);
}

static void test_kind_names(void)
{
	CHECK(!strcmp(bp_dataset_kind_name(BP_DS_MEASURED), "measured"));
	CHECK(!strcmp(bp_dataset_kind_name(BP_DS_RECONSTRUCTED), "reconstructed"));
	CHECK(!strcmp(bp_dataset_kind_name(BP_DS_SYNTHETIC), "synthetic"));
	struct bp_dataset *ds = calloc(1, sizeof(*ds));
	bp_dataset_init(ds);
	bp_dataset_free(ds);
	bp_dataset_free(NULL);
}

static void test_text_errors(void)
{
	EXPECT_ERROR("", "dataset 'x' is empty");
	EXPECT_ERROR("  \n# only a comment\n\n", "dataset 'x' is empty");
	EXPECT_ERROR("100\n200\n-5\n", "line 3: '-5' is not a positive integer");
	EXPECT_ERROR("100\n0\n", "line 2: '0' is not a positive integer");
	EXPECT_ERROR("12abc", "line 1: '12abc' is not a positive integer");
	EXPECT_ERROR("1 2 3\n", "line 1: '1 2 3' has more than two fields (a line is 'length' or "
		     "'id length')");
	EXPECT_ERROR("+3\n", "line 1: '+3' is not a positive integer");
	EXPECT_ERROR("99999999999999999999\n", "line 1: '99999999999999999999' is out of range");
	EXPECT_ERROR("9223372036854775807\n1\n", "line 2: the total token count overflows int64");
	/* JSONL. */
	EXPECT_ERROR("{\"tokens\": 5}\n{\"id\": 3}\n", "line 2: no integer field \"tokens\"");
	EXPECT_ERROR("{\"tokens\": 5}\n{\"tokens\": \"5\"}\n",
		     "line 2: no integer field \"tokens\"");
	EXPECT_ERROR("{\"tokens\": 5}\n\n{\"tokens\": -5}\n",
		     "line 3: \"tokens\" is -5, not a positive integer");
	EXPECT_ERROR("{\"id\": 1}\n{\"id\": 2}\n",
		     "line 1: no integer field \"tokens\", \"num_tokens\", \"length\" or \"len\" and "
		     "no token array \"input_ids\" or \"tokens\"");
	EXPECT_ERROR("{\"tokens\": 5}\n[1]\n", "line 2: not a JSON object");
	EXPECT_ERROR("{\"tokens\": 9223372036854775807}\n{\"tokens\": 1}\n",
		     "line 2: the total token count overflows int64");
	expect_error("{\"n\": 5}\n{\"tokens\": 5}\n", "n", "line 2: no integer field \"n\"",
		     __LINE__);

	struct bp_dataset ds;
	struct bp_error err = {""};
	bp_dataset_init(&ds);
	CHECK(parse(&ds, "{\"tokens\": 5}\n{\"tokens\": \n", NULL, &err) == -1);
	CHECK(!strncmp(err.text, "line 2: invalid JSON: ", 22));
	/* A first line that is no JSON object by itself is read as (broken) v1 JSON. */
	CHECK(parse(&ds, "{\"tokens\": 5, \"tokens\": 6}\n", NULL, &err) == -1);
	CHECK(!strncmp(err.text, "line 1 column ", 14) && strstr(err.text, "duplicate"));
	/* Broken v1 JSON keeps the decoder's line and column. */
	CHECK(parse(&ds, "{\"format\": \"balplan.dataset/v1\",\n \"name\": }\n", NULL, &err) ==
	      -1);
	CHECK(!strncmp(err.text, "line 2 column ", 14));
	bp_dataset_release(&ds);
}

static void test_v1_errors(void)
{
	EXPECT_ERROR(v1("\"foo\": 1, \"lengths\": [1]"),
		     "line 3 column 2: unknown key \"foo\" in dataset");
	EXPECT_ERROR(v1("\"bins\": [{\"lo\": 1, \"hi\": 2, \"count\": 1, \"tokens\": 1},\n"
			"  {\"lo\": 3, \"hi\": 4, \"count\": 1, \"tokens\": 3, \"bar\": 0}]"),
		     "line 4 column 47: unknown key \"bar\" in dataset.bins[1]");
	EXPECT_ERROR(v1("\"stats\": {\"median\": 1}, \"lengths\": [1]"),
		     "line 3 column 12: unknown key \"median\" in dataset.stats");
	EXPECT_ERROR(v1("\"lengths\": [5, 6, 7, 8, 0]"),
		     "dataset.lengths[4] is 0: lengths must be >= 1");
	EXPECT_ERROR(v1("\"lengths\": [5, -2]"), "dataset.lengths[1] is -2: lengths must be >= 1");
	EXPECT_ERROR(v1("\"lengths\": [5, 2.5]"), "dataset.lengths[1] is not an integer");
	EXPECT_ERROR(v1("\"lengths\": []"), "dataset 'x' is empty");
	EXPECT_ERROR(v1("\"lengths\": [9223372036854775807, 1]"),
		     "dataset 'x' holds more tokens than int64 can count");
	EXPECT_ERROR(v1("\"lengths\": 5"), "dataset.lengths is not an array");
	EXPECT_ERROR(v1("\"bins\": []"), "dataset 'x' is empty");
	EXPECT_ERROR(v1("\"bins\": [{\"lo\": 1, \"hi\": 2, \"count\": 0, \"tokens\": 0}]"),
		     "dataset 'x' is empty");
	EXPECT_ERROR(v1("\"bins\": [{\"lo\": 10, \"hi\": 5, \"count\": 1, \"tokens\": 7}]"),
		     "dataset.bins[0].lo is 10, greater than hi 5");
	EXPECT_ERROR(v1("\"bins\": [{\"lo\": 0, \"hi\": 5, \"count\": 1, \"tokens\": 3}]"),
		     "dataset.bins[0].lo is 0, outside [1, 9223372036854775807]");
	EXPECT_ERROR(v1("\"bins\": [{\"lo\": 1, \"hi\": 5, \"count\": -1, \"tokens\": 3}]"),
		     "dataset.bins[0].count is -1, outside [0, 9223372036854775807]");
	EXPECT_ERROR(v1("\"bins\": [{\"lo\": 1, \"hi\": 5, \"tokens\": 3}]"),
		     "missing key \"count\" in dataset.bins[0]");
	EXPECT_ERROR(v1("\"bins\": [3]"), "dataset.bins[0] is not an object");
	EXPECT_ERROR(v1("\"bins\": [{\"lo\": 10, \"hi\": 20, \"count\": 2, \"tokens\": 5}]"),
		     "dataset.bins[0].tokens is 5, outside [count*lo, count*hi] for count 2 in "
		     "[10, 20]");
	EXPECT_ERROR(v1("\"bins\": [{\"lo\": 10, \"hi\": 20, \"count\": 2, \"tokens\": 41}]"),
		     "dataset.bins[0].tokens is 41, outside [count*lo, count*hi] for count 2 in "
		     "[10, 20]");
	EXPECT_ERROR(v1("\"bins\": [{\"lo\": 10, \"hi\": 20, \"count\": 1, \"tokens\": 10},\n"
			"  {\"lo\": 15, \"hi\": 30, \"count\": 1, \"tokens\": 15}]"),
		     "dataset.bins[1] [15, 30] does not come after dataset.bins[0] [10, 20]: "
		     "bins must be sorted and disjoint");
	EXPECT_ERROR(v1("\"bins\": [{\"lo\": 10, \"hi\": 20, \"count\": 1, \"tokens\": 10},\n"
			"  {\"lo\": 1, \"hi\": 5, \"count\": 1, \"tokens\": 1}]"),
		     "dataset.bins[1] [1, 5] does not come after dataset.bins[0] [10, 20]: "
		     "bins must be sorted and disjoint");
	EXPECT_ERROR(v1("\"bins\": [{\"lo\": 1, \"hi\": 9223372036854775807, \"count\": 1, "
			"\"tokens\": 9223372036854775807},\n"
			"  {\"lo\": 9223372036854775807, \"hi\": 9223372036854775807, "
			"\"count\": 0, \"tokens\": 0}]"),
		     "dataset.bins[1] [9223372036854775807, 9223372036854775807] does not come "
		     "after dataset.bins[0] [1, 9223372036854775807]: bins must be sorted and "
		     "disjoint");
	EXPECT_ERROR(v1("\"bins\": [{\"lo\": 1, \"hi\": 5000000000000000000, \"count\": 1, "
			"\"tokens\": 5000000000000000000},\n"
			"  {\"lo\": 5000000000000000001, \"hi\": 5000000000000000001, "
			"\"count\": 1, \"tokens\": 5000000000000000001}]"),
		     "dataset 'x' holds more tokens than int64 can count");
	EXPECT_ERROR(v1("\"stats\": {\"count\": 3}, \"bins\": [{\"lo\": 1, \"hi\": 2, \"count\": 2, "
			"\"tokens\": 3}]"),
		     "dataset.stats.count is 3 but the bins hold 2");
	EXPECT_ERROR(v1("\"stats\": {\"tokens\": 4}, \"lengths\": [1, 2]"),
		     "dataset.stats.tokens is 4 but the lengths hold 3");
	EXPECT_ERROR(v1("\"stats\": {\"max\": 3}, \"lengths\": [1, 2]"),
		     "dataset.stats.max is 3 but the lengths give 2");
	EXPECT_ERROR(v1("\"stats\": {\"mean\": 1.6}, \"lengths\": [1, 2]"),
		     "dataset.stats.mean is 1.600000 but the lengths give 1.500000");
	EXPECT_ERROR(v1("\"stats\": {\"p50\": 1.5}, \"lengths\": [1, 2]"),
		     "dataset.stats.p50 is not an integer");
	EXPECT_ERROR(v1("\"stats\": [], \"lengths\": [1, 2]"), "dataset.stats is not an object");
	EXPECT_ERROR(v1("\"lengths\": [1], \"bins\": []"),
		     "dataset has both \"bins\" and \"lengths\"");
	EXPECT_ERROR(v1("\"stats\": {}"), "dataset has neither \"bins\" nor \"lengths\"");
	EXPECT_ERROR(v1("\"sampling\": \"log-uniform\", \"lengths\": [1]"),
		     "dataset.sampling applies to bins only");
	EXPECT_ERROR(v1("\"sampling\": \"normal\", \"bins\": []"),
		     "dataset.sampling is \"normal\", not \"uniform\" or \"log-uniform\"");
	EXPECT_ERROR("{\"format\": \"balplan.dataset/v1\", \"name\": \"x\", \"kind\": \"guessed\", "
		     "\"source\": \"s\", \"tokenizer\": \"t\", \"license\": \"l\", "
		     "\"lengths\": [1]}",
		     "dataset.kind is \"guessed\", not \"measured\", \"reconstructed\" or "
		     "\"synthetic\"");
	EXPECT_ERROR("{\"format\": \"balplan.dataset/v1\", \"name\": \"\", \"kind\": \"synthetic\", "
		     "\"source\": \"s\", \"tokenizer\": \"t\", \"license\": \"l\", "
		     "\"lengths\": [1]}",
		     "dataset.name is empty");
	EXPECT_ERROR("{\"format\": \"balplan.dataset/v1\", \"name\": \"x\", \"kind\": \"synthetic\", "
		     "\"tokenizer\": \"t\", \"license\": \"l\", \"lengths\": [1]}",
		     "missing key \"source\" in dataset");
	EXPECT_ERROR("{\"format\": \"balplan.profile/v1\"}",
		     "unsupported format \"balplan.profile/v1\" (expected \"balplan.dataset/v1\")");
	EXPECT_ERROR("{\n \"name\": \"x\",\n \"lengths\": [1]\n}\n",
		     "missing key \"format\" in dataset");
}

/* from_json directly: a failed call leaves the dataset released. */
static void test_from_json_direct(void)
{
	struct bp_dataset ds;
	struct bp_error err = {""};
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:[i,i]}", "format",
			      BP_DATASET_FORMAT, "name", "d", "kind", "reconstructed", "source",
			      "s", "tokenizer", "t", "license", "l", "lengths", 4, 6);
	bp_dataset_init(&ds);
	CHECK(j && bp_dataset_from_json(&ds, j, &err) == 0);
	CHECK(ds.kind == BP_DS_RECONSTRUCTED && ds.stats.tokens == 10);
	json_object_set_new(j, "lengths", json_pack("[i,i]", 4, 0));
	CHECK(bp_dataset_from_json(&ds, j, &err) == -1);
	CHECK(!strcmp(err.text, "dataset.lengths[1] is 0: lengths must be >= 1"));
	CHECK(ds.lengths == NULL && ds.source == NULL);
	json_decref(j);
	bp_dataset_release(&ds);
}

int main(void)
{
	test_kind_names();
	test_plain_text();
	test_jsonl();
	test_v1_bins_and_stats();
	test_v1_lengths_round_trip();
	test_presets();
	test_text_errors();
	test_v1_errors();
	test_from_json_direct();
	return CHECK_DONE();
}
