/* test_index_read.c: the readers of a team's sample index (issue 22): text with 'id length'
 * lines, JSONL with token arrays and sample ids, and the Megatron-LM .idx read from in-memory
 * images (documents of several sequences summed); duplicates, the refusal of binary input,
 * and the exact text of every error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dataset.h"

static int read_opts(struct bp_dataset *ds, const char *buf, size_t len,
		     const struct bp_read_opts *o, struct bp_error *err)
{
	return bp_dataset_read(ds, buf, len, "x", o, err);
}

/* The read of buf must fail with exactly want and leave ds released. */
static void expect_error_n(const char *buf, size_t len, const struct bp_read_opts *o,
			   const char *want, int line)
{
	struct bp_dataset ds;
	struct bp_error err = {""};
	bp_dataset_init(&ds);
	int rc = read_opts(&ds, buf, len, o, &err);
	check_count++;
	if (rc != -1 || strcmp(err.text, want)) {
		fprintf(stderr, "%s:%d: expected error \"%s\", got rc %d \"%s\"\n", __FILE__, line,
			want, rc, err.text);
		check_failures++;
	}
	CHECK(ds.lengths == NULL && ds.ids == NULL && ds.source == NULL && !ds.format[0]);
	bp_dataset_release(&ds);
}
#define EXPECT_ERROR(text, want) expect_error_n(text, strlen(text), NULL, want, __LINE__)
#define EXPECT_ERROR_O(text, o, want) expect_error_n(text, strlen(text), o, want, __LINE__)

static int same_lengths(const struct bp_dataset *ds, const int64_t *want, size_t n)
{
	if (!ds->lengths || ds->nlengths != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (ds->lengths[i] != want[i])
			return 0;
	return 1;
}

static int same_ids(const struct bp_dataset *ds, const int64_t *want, size_t n)
{
	if (!ds->ids || ds->nlengths != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (ds->ids[i] != want[i])
			return 0;
	return 1;
}

static void test_text_forms(void)
{
	struct bp_dataset ds;
	struct bp_error err = {""};
	const char *t;
	bp_dataset_init(&ds);

	/* One column: ids are the positions. */
	t = "# lengths\n100\n\n200 # note\n";
	CHECK(read_opts(&ds, t, strlen(t), NULL, &err) == 0);
	CHECK(same_lengths(&ds, (int64_t[]){100, 200}, 2) && ds.ids == NULL);
	CHECK(!strcmp(ds.format, "text") && ds.sequences == 0);
	CHECK(!strcmp(ds.source, "plain text, one length per line"));

	/* Two columns, ids increasing (the one-pass case), tabs, comments, CRLF. */
	t = "# id length\n0 512\r\n1\t300\n\n7   12 # last\n";
	CHECK(read_opts(&ds, t, strlen(t), NULL, &err) == 0);
	CHECK(same_lengths(&ds, (int64_t[]){512, 300, 12}, 3));
	CHECK(same_ids(&ds, (int64_t[]){0, 1, 7}, 3));
	CHECK(!strcmp(ds.format, "text") && !strcmp(ds.source, "plain text, 'id length' per line"));
	CHECK(ds.stats.count == 3 && ds.stats.tokens == 824);

	/* Ids in any order are kept in file order (the sorting case). */
	t = "42 5\n3 6\n9223372036854775807 7\n0 8\n";
	CHECK(read_opts(&ds, t, strlen(t), NULL, &err) == 0);
	CHECK(same_ids(&ds, (int64_t[]){42, 3, INT64_MAX, 0}, 4));
	CHECK(same_lengths(&ds, (int64_t[]){5, 6, 7, 8}, 4));

	/* Many shuffled ids across every radix digit: accepted, then one repeat named. */
	size_t n = 100000, cap = n * 48;
	char *big = malloc(cap);
	int64_t *perm = malloc(n * sizeof(*perm));
	CHECK(big && perm);
	if (big && perm) {
		for (size_t i = 0; i < n; i++)
			perm[i] = (int64_t)i;
		uint64_t x = 88172645463325252ull;
		for (size_t i = n - 1; i > 0; i--) { /* xorshift Fisher-Yates */
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			size_t j = (size_t)(x % (i + 1));
			int64_t tmp = perm[i];
			perm[i] = perm[j];
			perm[j] = tmp;
		}
		size_t k = 0;
		for (size_t i = 0; i < n; i++) /* spread over all four 16-bit digits */
			k += (size_t)snprintf(big + k, cap - k, "%lld 5\n",
					      (long long)((uint64_t)perm[i] * 92233720368547ull));
		CHECK(read_opts(&ds, big, k, NULL, &err) == 0 && ds.nlengths == n);
		CHECK(ds.ids && ds.ids[77] == perm[77] * 92233720368547ll);
		/* line 60001 repeats the id of line 12 (and a later line repeats another) */
		k = 0;
		for (size_t i = 0; i < n; i++) {
			int64_t id = i == 60000 ? perm[11] : i == 90000 ? perm[5] : perm[i];
			k += (size_t)snprintf(big + k, cap - k, "%lld 5\n",
					      (long long)((uint64_t)id * 92233720368547ull));
		}
		CHECK(read_opts(&ds, big, k, NULL, &err) == -1);
		char want[128];
		snprintf(want, sizeof(want), "line 60001: sample id %lld repeats line 12",
			 (long long)(perm[11] * 92233720368547ll));
		CHECK(!strcmp(err.text, want));
	}
	free(big);
	free(perm);

	/* The options are JSONL's: text ignores them, but a conflict is refused everywhere. */
	struct bp_read_opts o = {.length_field = NULL, .tokens_field = NULL, .id_field = "doc"};
	CHECK(read_opts(&ds, "5\n", 2, &o, &err) == 0 && ds.ids == NULL);
	bp_dataset_release(&ds);
}

static void test_text_errors(void)
{
	/* Duplicates name the later line and the first one, earliest repeat in file order. */
	EXPECT_ERROR("1 10\n2 10\n42 10\n# c\n\n5 10\n42 10\n", "line 7: sample id 42 repeats line 3");
	EXPECT_ERROR("9 1\n8 1\n7 1\n8 1\n9 1\n", "line 4: sample id 8 repeats line 2");
	EXPECT_ERROR("3 1\n3 2\n", "line 2: sample id 3 repeats line 1");
	/* The first data line decides the form. */
	EXPECT_ERROR("# x\n5 100\n200\n",
		     "line 3: one field (a length), but line 2 has two ('id length'): every line "
		     "must have the same form");
	EXPECT_ERROR("100\n\n1 200\n",
		     "line 3: two fields ('id length'), but line 1 has one (a length): every line "
		     "must have the same form");
	EXPECT_ERROR("1 2 3\n", "line 1: '1 2 3' has more than two fields (a line is 'length' or "
		     "'id length')");
	EXPECT_ERROR("1 2\n3 4 # ok\n5 6 7\n", "line 3: '5 6 7' has more than two fields (a line "
		     "is 'length' or 'id length')");
	/* Bad ids and lengths. */
	EXPECT_ERROR("-1 5\n", "line 1: sample id '-1' is not a non-negative integer");
	EXPECT_ERROR("a 5\n", "line 1: sample id 'a' is not a non-negative integer");
	EXPECT_ERROR("99999999999999999999 5\n", "line 1: sample id '99999999999999999999' is out "
		     "of range");
	EXPECT_ERROR("1 5\n2 0\n", "line 2: length '0' is not a positive integer");
	EXPECT_ERROR("1 5\n2 -3\n", "line 2: length '-3' is not a positive integer");
	EXPECT_ERROR("1 5\n2 5x\n", "line 2: length '5x' is not a positive integer");
	EXPECT_ERROR("1 99999999999999999999\n",
		     "line 1: length '99999999999999999999' is out of range");
	EXPECT_ERROR("0 9223372036854775807\n1 1\n", "line 2: the total token count overflows int64");
	EXPECT_ERROR("100\n0\n", "line 2: '0' is not a positive integer");
	/* Both count fields named: a usage conflict, whatever the input. */
	struct bp_read_opts both = {.length_field = "n", .tokens_field = "input_ids", .id_field = NULL};
	EXPECT_ERROR_O("5\n", &both, "both a length field \"n\" and a token array field "
		       "\"input_ids\" named: a sample's length comes from one of them");
}

static void test_jsonl_forms(void)
{
	struct bp_dataset ds;
	struct bp_error err = {""};
	const char *t;
	bp_dataset_init(&ds);

	/* A token array by default: input_ids; an integer "id" in line 1 gives ids. */
	t = "{\"id\": 4, \"input_ids\": [1, 2, 3]}\n{\"id\": 2, \"input_ids\": [9, 9, 9, 9, 9]}\n";
	CHECK(read_opts(&ds, t, strlen(t), NULL, &err) == 0);
	CHECK(same_lengths(&ds, (int64_t[]){3, 5}, 2) && same_ids(&ds, (int64_t[]){4, 2}, 2));
	CHECK(!strcmp(ds.format, "jsonl"));
	CHECK(!strcmp(ds.source, "JSONL, token array \"input_ids\", sample id \"id\""));

	/* "tokens" as an array; elements are counted, not checked; a string id gives positions. */
	t = "{\"id\": \"a\", \"tokens\": [1, \"x\", null]}\n{\"tokens\": [[], {}]}\n";
	CHECK(read_opts(&ds, t, strlen(t), NULL, &err) == 0);
	CHECK(same_lengths(&ds, (int64_t[]){3, 2}, 2) && ds.ids == NULL);
	CHECK(!strcmp(ds.source, "JSONL, token array \"tokens\""));

	/* An integer count wins over an array; input_ids wins over an array "tokens". */
	t = "{\"input_ids\": [1, 2], \"length\": 7}\n{\"length\": 8}\n";
	CHECK(read_opts(&ds, t, strlen(t), NULL, &err) == 0);
	CHECK(same_lengths(&ds, (int64_t[]){7, 8}, 2));
	t = "{\"tokens\": [1], \"input_ids\": [1, 2]}\n";
	CHECK(read_opts(&ds, t, strlen(t), NULL, &err) == 0);
	CHECK(same_lengths(&ds, (int64_t[]){2}, 1));

	/* Named fields. */
	struct bp_read_opts o = {.length_field = NULL, .tokens_field = "ids", .id_field = "doc"};
	t = "{\"doc\": 10, \"ids\": [1, 1], \"id\": \"z\"}\n\n{\"doc\": 0, \"ids\": [1]}\n";
	CHECK(read_opts(&ds, t, strlen(t), &o, &err) == 0);
	CHECK(same_lengths(&ds, (int64_t[]){2, 1}, 2) && same_ids(&ds, (int64_t[]){10, 0}, 2));
	CHECK(!strcmp(ds.source, "JSONL, token array \"ids\", sample id \"doc\""));
	struct bp_read_opts o2 = {.length_field = "n", .tokens_field = NULL, .id_field = "id"};
	t = "{\"id\": 1, \"n\": 5}\n{\"id\": 3, \"n\": 6}\n";
	CHECK(read_opts(&ds, t, strlen(t), &o2, &err) == 0);
	CHECK(same_lengths(&ds, (int64_t[]){5, 6}, 2) && same_ids(&ds, (int64_t[]){1, 3}, 2));
	CHECK(!strcmp(ds.source, "JSONL, field \"n\", sample id \"id\""));
	/* No integer id in line 1: positions, whatever later lines carry. */
	t = "{\"tokens\": 5}\n{\"tokens\": 6, \"id\": 3}\n";
	CHECK(read_opts(&ds, t, strlen(t), NULL, &err) == 0);
	CHECK(ds.ids == NULL && !strcmp(ds.source, "JSONL, field \"tokens\""));

	/* A long line of token ids. */
	size_t n = 200000, cap = n * 2 + 64;
	char *big = malloc(cap);
	CHECK(big != NULL);
	if (big) {
		size_t k = (size_t)snprintf(big, cap, "{\"input_ids\": [");
		for (size_t i = 0; i < n; i++) {
			big[k++] = '7';
			big[k++] = i + 1 < n ? ',' : ']';
		}
		k += (size_t)snprintf(big + k, cap - k, "}\n{\"input_ids\": [1]}\n");
		CHECK(read_opts(&ds, big, k, NULL, &err) == 0);
		CHECK(same_lengths(&ds, (int64_t[]){(int64_t)n, 1}, 2));
		free(big);
	}
	bp_dataset_release(&ds);
}

static void test_jsonl_errors(void)
{
	EXPECT_ERROR("{\"id\": 1}\n",
		     "line 1: no integer field \"tokens\", \"num_tokens\", \"length\" or \"len\" and "
		     "no token array \"input_ids\" or \"tokens\"");
	EXPECT_ERROR("{\"input_ids\": [1]}\n{\"input_ids\": 5}\n",
		     "line 2: \"input_ids\" is not an array of tokens");
	EXPECT_ERROR("{\"input_ids\": [1]}\n{\"tokens\": [5]}\n",
		     "line 2: no token array \"input_ids\"");
	EXPECT_ERROR("{\"input_ids\": [1]}\n\n{\"input_ids\": []}\n",
		     "line 3: token array \"input_ids\" is empty");
	EXPECT_ERROR("{\"input_ids\": []}\n", "line 1: token array \"input_ids\" is empty");
	struct bp_read_opts len_arr = {.length_field = "input_ids", .tokens_field = NULL, .id_field = NULL};
	EXPECT_ERROR_O("{\"input_ids\": [1, 2]}\n", &len_arr,
		       "line 1: \"input_ids\" is an array, not an integer token count (name it as "
		       "the token array field)");
	/* Ids: chosen automatically, then required on every line. */
	EXPECT_ERROR("{\"id\": 1, \"tokens\": 5}\n{\"id\": 2, \"tokens\": 5}\n{\"tokens\": 5}\n",
		     "line 3: no sample id \"id\" (line 1 has one, so every line needs one)");
	EXPECT_ERROR("{\"id\": 1, \"tokens\": 5}\n{\"id\": \"2\", \"tokens\": 5}\n",
		     "line 2: sample id \"id\" is not an integer");
	EXPECT_ERROR("{\"id\": -1, \"tokens\": 5}\n",
		     "line 1: sample id \"id\" is -1, not a non-negative integer");
	EXPECT_ERROR("{\"id\": 7, \"tokens\": 5}\n{\"id\": 8, \"tokens\": 5}\n"
		     "{\"id\": 7, \"tokens\": 5}\n",
		     "line 3: sample id 7 repeats line 1");
	/* A named id field. */
	struct bp_read_opts doc = {.length_field = NULL, .tokens_field = NULL, .id_field = "doc"};
	EXPECT_ERROR_O("{\"doc\": 1, \"tokens\": 5}\n{\"tokens\": 5}\n", &doc,
		       "line 2: no sample id field \"doc\"");
	EXPECT_ERROR_O("{\"tokens\": 5, \"id\": 1}\n", &doc, "line 1: no sample id field \"doc\"");
	EXPECT_ERROR_O("{\"doc\": 1.5, \"tokens\": 5}\n", &doc,
		       "line 1: sample id \"doc\" is not an integer");
	EXPECT_ERROR_O("{\"doc\": 0, \"tokens\": 5}\n{\"doc\": 0, \"tokens\": 6}\n", &doc,
		       "line 2: sample id 0 repeats line 1");
	struct bp_read_opts arr = {.length_field = NULL, .tokens_field = "ids", .id_field = NULL};
	EXPECT_ERROR_O("{\"input_ids\": [1]}\n", &arr, "line 1: no token array \"ids\"");
}

/* ---- Megatron-LM .idx images ---- */

struct img {
	unsigned char b[2048];
	size_t n;
};

static void put(struct img *m, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		m->b[m->n++] = (unsigned char)(v >> (8 * i));
}

static void set64(struct img *m, size_t off, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		m->b[off + (size_t)i] = (unsigned char)(v >> (8 * i));
}

/* An index of documents given as sequence-length lists: docs[d] has nseq[d] sequences taken
 * in turn from lens; dtype code and item size for the pointers; modes appends S bytes. */
static void build(struct img *m, int code, int size, const int32_t *lens, const int *nseq,
		  size_t ndocs, int modes)
{
	size_t S = 0;
	for (size_t d = 0; d < ndocs; d++)
		S += (size_t)nseq[d];
	m->n = 0;
	memcpy(m->b, "MMIDIDX\0\0", 9);
	m->n = 9;
	put(m, 1, 8);
	put(m, (uint64_t)code, 1);
	put(m, S, 8);
	put(m, ndocs + 1, 8);
	for (size_t i = 0; i < S; i++)
		put(m, (uint64_t)(uint32_t)lens[i], 4);
	int64_t at = 0;
	for (size_t i = 0; i < S; i++) {
		put(m, (uint64_t)at, 8);
		at += (int64_t)lens[i] * size;
	}
	uint64_t end = 0;
	put(m, 0, 8);
	for (size_t d = 0; d < ndocs; d++) {
		end += (uint64_t)nseq[d];
		put(m, end, 8);
	}
	for (size_t i = 0; modes && i < S; i++)
		put(m, i % 2, 1);
}

/* The reference image: documents 3+4, 5 and 1+1+1 tokens, uint16 (code 8): S 6, D 4; lengths
 * at 34, pointers at 58, document indices at 106, 138 bytes. */
static const int32_t ref_lens[] = {3, 4, 5, 1, 1, 1};
static const int ref_nseq[] = {2, 1, 3};

static void ref(struct img *m)
{
	build(m, 8, 2, ref_lens, ref_nseq, 3, 0);
}

#define EXPECT_IMG(m, want) expect_error_n((const char *)(m)->b, (m)->n, NULL, want, __LINE__)

static void test_idx_read(void)
{
	struct bp_dataset ds;
	struct bp_error err = {""};
	struct img m;
	bp_dataset_init(&ds);

	ref(&m);
	CHECK(m.n == 138);
	CHECK(read_opts(&ds, (const char *)m.b, m.n, NULL, &err) == 0);
	CHECK(same_lengths(&ds, (int64_t[]){7, 5, 3}, 3));
	CHECK(ds.ids == NULL && ds.sequences == 6 && !strcmp(ds.format, "megatron-idx"));
	CHECK(!strcmp(ds.name, "x") && ds.kind == BP_DS_MEASURED);
	CHECK(!strcmp(ds.source, "Megatron-LM index (.idx) of uint16 tokens; a sample is a "
			       "document, its sequences summed"));
	CHECK(ds.stats.count == 3 && ds.stats.tokens == 15 && ds.stats.max == 7);

	/* Multimodal: the sequence modes follow. Field options do not apply and are ignored. */
	build(&m, 4, 4, ref_lens, ref_nseq, 3, 1);
	struct bp_read_opts o = {.length_field = "n", .tokens_field = NULL, .id_field = "id"};
	CHECK(read_opts(&ds, (const char *)m.b, m.n, &o, &err) == 0);
	CHECK(same_lengths(&ds, (int64_t[]){7, 5, 3}, 3) && ds.sequences == 6);
	CHECK(strstr(ds.source, "of int32 tokens, with sequence modes") != NULL);

	/* Every dtype's item size in the pointers. */
	static const int sizes[] = {0, 1, 1, 2, 4, 8, 8, 4, 2};
	for (int code = 1; code <= 8; code++) {
		build(&m, code, sizes[code], ref_lens, ref_nseq, 3, 0);
		CHECK(read_opts(&ds, (const char *)m.b, m.n, NULL, &err) == 0);
	}

	/* One document of one sequence; a big one. */
	build(&m, 5, 8, (int32_t[]){INT32_MAX}, (int[]){1}, 1, 0);
	CHECK(read_opts(&ds, (const char *)m.b, m.n, NULL, &err) == 0);
	CHECK(same_lengths(&ds, (int64_t[]){INT32_MAX}, 1) && ds.sequences == 1);
	/* Documents summed past int32. */
	build(&m, 1, 1, (int32_t[]){INT32_MAX, INT32_MAX, 2}, (int[]){2, 1}, 2, 0);
	CHECK(read_opts(&ds, (const char *)m.b, m.n, NULL, &err) == 0);
	CHECK(same_lengths(&ds, (int64_t[]){2 * (int64_t)INT32_MAX, 2}, 2));
	bp_dataset_release(&ds);
}

static void test_idx_errors(void)
{
	struct img m;

	ref(&m);
	m.b[8] = 1;
	EXPECT_IMG(&m, "byte 0: magic \"MMIDIDX\\x00\\x01\" is not a Megatron-LM index's "
		       "\"MMIDIDX\\x00\\x00\"");
	ref(&m);
	memcpy(m.b, "TNTIDX\0\0", 8);
	EXPECT_IMG(&m, "byte 0: magic \"TNTIDX\\x00\\x00\\x00\" is not a Megatron-LM index's "
		       "\"MMIDIDX\\x00\\x00\" (TNTIDX is the legacy non-mmap IndexedDataset, which "
		       "is not read)");
	ref(&m);
	m.n = 8;
	EXPECT_IMG(&m, "truncated: the header needs 34 bytes, the file has 8");
	m.n = 33;
	EXPECT_IMG(&m, "truncated: the header needs 34 bytes, the file has 33");
	ref(&m);
	set64(&m, 9, 2);
	EXPECT_IMG(&m, "byte 9: version 2, not 1 (the only Megatron-LM index version)");
	ref(&m);
	m.b[17] = 9;
	EXPECT_IMG(&m, "byte 17: unknown dtype code 9 (1 to 8: uint8, int8, int16, int32, int64, "
		       "float64, float32, uint16)");
	m.b[17] = 0;
	EXPECT_IMG(&m, "byte 17: unknown dtype code 0 (1 to 8: uint8, int8, int16, int32, int64, "
		       "float64, float32, uint16)");
	ref(&m);
	m.n = 137;
	EXPECT_IMG(&m, "truncated: the header says 6 sequences and 4 document indices, which need "
		       "138 bytes, the file has 137");
	ref(&m);
	set64(&m, 18, 1000);
	EXPECT_IMG(&m, "truncated: the header says 1000 sequences and 4 document indices, which "
		       "need 12066 bytes, the file has 138");
	ref(&m);
	set64(&m, 18, (uint64_t)1 << 62);
	EXPECT_IMG(&m, "byte 18: the header says 4611686018427387904 sequences and 4 document "
		       "indices, which need more than 2^64 bytes: a corrupt header");
	ref(&m);
	set64(&m, 26, UINT64_MAX);
	EXPECT_IMG(&m, "byte 18: the header says 6 sequences and 18446744073709551615 document "
		       "indices, which need more than 2^64 bytes: a corrupt header");
	ref(&m);
	set64(&m, 26, 0);
	EXPECT_IMG(&m, "byte 26: the header says 0 document indices; the list starts with 0, so "
		       "it holds at least 1");
	ref(&m);
	m.b[m.n++] = 0;
	EXPECT_IMG(&m, "byte 138: the file goes on for 1 bytes after the document indices; only "
		       "the 6-byte sequence modes may follow");
	build(&m, 8, 2, ref_lens, ref_nseq, 3, 1);
	m.b[m.n++] = 0;
	EXPECT_IMG(&m, "byte 138: the file goes on for 7 bytes after the document indices; only "
		       "the 6-byte sequence modes may follow");
	/* Sequences. */
	build(&m, 8, 2, (int32_t[]){3, 4, 0, 1, 1, 1}, ref_nseq, 3, 0);
	EXPECT_IMG(&m, "byte 42: sequence 2 has length 0; lengths must be >= 1");
	build(&m, 8, 2, (int32_t[]){3, 4, 5, 1, 1, -5}, ref_nseq, 3, 0);
	EXPECT_IMG(&m, "byte 54: sequence 5 has length -5; lengths must be >= 1");
	ref(&m);
	set64(&m, 66, 8);
	EXPECT_IMG(&m, "byte 66: sequence 1 starts at byte 8 of the .bin, expected 6 (the tokens "
		       "before it times 2 bytes, uint16)");
	ref(&m);
	set64(&m, 58, 2);
	EXPECT_IMG(&m, "byte 58: sequence 0 starts at byte 2 of the .bin, expected 0 (the tokens "
		       "before it times 2 bytes, uint16)");
	ref(&m);
	set64(&m, 98, (uint64_t)-1);
	EXPECT_IMG(&m, "byte 98: sequence 5 starts at byte -1 of the .bin, expected 28 (the tokens "
		       "before it times 2 bytes, uint16)");
	/* Document indices. */
	ref(&m);
	set64(&m, 106, 1);
	EXPECT_IMG(&m, "byte 106: document index 0 is 1, not 0");
	ref(&m);
	set64(&m, 114, 3);
	set64(&m, 122, 2);
	EXPECT_IMG(&m, "byte 122: document index 2 is 2, less than index 1's 3: document indices "
		       "must not decrease");
	ref(&m);
	set64(&m, 114, 7);
	EXPECT_IMG(&m, "byte 114: document index 1 is 7, past the sequence count 6");
	ref(&m);
	set64(&m, 114, (uint64_t)-2);
	EXPECT_IMG(&m, "byte 114: document index 1 is -2, less than index 0's 0: document indices "
		       "must not decrease");
	ref(&m);
	set64(&m, 130, 5);
	EXPECT_IMG(&m, "byte 130: the last document index (3) is 5, not the sequence count 6");
	ref(&m);
	set64(&m, 122, 2);
	EXPECT_IMG(&m, "byte 122: document 1 has 0 tokens (document indices 1 and 2 are both 2: "
		       "no sequences; --skip-empty leaves such documents out)");
	build(&m, 8, 2, ref_lens, (int[]){2, 0, 1, 3}, 4, 0);
	EXPECT_IMG(&m, "byte 122: document 1 has 0 tokens (document indices 1 and 2 are both 2: "
		       "no sequences; --skip-empty leaves such documents out)");
	build(&m, 8, 2, ref_lens, (int[]){6, 0}, 2, 0);
	EXPECT_IMG(&m, "byte 122: document 1 has 0 tokens (document indices 1 and 2 are both 6: "
		       "no sequences; --skip-empty leaves such documents out)");
	/* --skip-empty: the empty document left out, the others keep their index as id. */
	{
		struct bp_read_opts skip = {.skip_empty = 1};
		struct bp_error err = {""};
		struct bp_dataset sk;
		bp_dataset_init(&sk);
		build(&m, 8, 2, ref_lens, (int[]){2, 0, 1, 3}, 4, 0);
		CHECK(bp_dataset_read(&sk, (const char *)m.b, m.n, "s", &skip, &err) == 0);
		CHECK(sk.nlengths == 3 && sk.skipped == 1 && sk.ids && sk.ids[0] == 0 &&
		      sk.ids[1] == 2 && sk.ids[2] == 3);
		bp_dataset_release(&sk);
	}
	/* No documents at all (D 1, S 0), and D 1 with sequences. */
	build(&m, 8, 2, NULL, NULL, 0, 0);
	CHECK(m.n == 42);
	EXPECT_IMG(&m, "dataset 'x' is empty");
	ref(&m);
	set64(&m, 26, 1);
	m.n = 114;
	EXPECT_IMG(&m, "byte 106: the last document index (0) is 0, not the sequence count 6");
}

static void test_binary(void)
{
	char buf[6000];
	/* A NUL early on: binary, whatever comes first. */
	memcpy(buf, "12\n34\n\0\0", 8);
	expect_error_n(buf, 8, NULL,
		       "binary data, not a sample index (a Megatron-LM .bin? give its .idx)",
		       __LINE__);
	memcpy(buf, "\x01\x00\x02\x00", 4);
	expect_error_n(buf, 4, NULL,
		       "binary data, not a sample index (a Megatron-LM .bin? give its .idx)",
		       __LINE__);
	/* Past the probe, a NUL is just a bad line of text. */
	memset(buf, '\n', sizeof(buf));
	buf[0] = '5';
	buf[5000] = 0;
	expect_error_n(buf, sizeof(buf), NULL, "line 5000: '' is not a positive integer", __LINE__);
	/* Text that merely starts like the magic's letters is not an index. */
	EXPECT_ERROR("MMID\n", "line 1: 'MMID' is not a positive integer");
}

int main(void)
{
	test_text_forms();
	test_text_errors();
	test_jsonl_forms();
	test_jsonl_errors();
	test_idx_read();
	test_idx_errors();
	test_binary();
	return CHECK_DONE();
}
