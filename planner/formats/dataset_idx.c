/* dataset_idx.c: the index (.idx) of a Megatron-LM indexed dataset read as a sample index
 * (dataset.h, issue 22). Megatron-LM's GPT datasets treat a document as the unit they shuffle
 * and pack, so a sample here is a DOCUMENT: its length is the sum of its sequences' lengths
 * (a document of several sequences is what `preprocess_data.py --split-sentences` writes),
 * its id is its index among the documents (ds->ids stays NULL), and ds->sequences keeps the
 * sequence count. The .bin (the tokens) is never read: the lengths are all in the .idx.
 *
 * The layout, as megatron/core/datasets/indexed_dataset.py writes it (_IndexWriter, from
 * IndexedDatasetBuilder) and reads it (_IndexReader); integers little-endian, no padding:
 *   byte  0  9 bytes   magic "MMIDIDX\0\0"
 *         9  u64       version, 1
 *        17  u8        dtype code of the .bin's tokens: 1 uint8, 2 int8, 3 int16, 4 int32,
 *                      5 int64, 6 float64, 7 float32, 8 uint16
 *        18  u64       S, the sequence count
 *        26  u64       D, the count of document indices (the documents plus one)
 *        34  i32[S]    sequence lengths in tokens
 *            i64[S]    sequence pointers: byte offsets into the .bin; the writer computes
 *                      them from the lengths (0, then each the previous plus its length
 *                      times the dtype's size), so they are checked to be exactly that
 *            i64[D]    document indices: document d is sequences [idx[d], idx[d+1]); the
 *                      builder starts the list with 0 and appends the sequence count at
 *                      every document's end, so it is non-decreasing and ends with S
 *            i8[S]     sequence modes, only in multimodal datasets
 * and nothing else. Old Megatron-LM (megatron/data/indexed_dataset.py) wrote the same bytes;
 * its code 7 meant float64 where the core's means float32, which matters only to the pointer
 * check of a float-token index (none is written by the tokenizing tools). Empty sequences and
 * documents (an empty text gives a document without sequences) are refused: a sample of no
 * tokens has nothing to plan. */
#include "dataset_idx.h"

#include <stdio.h>
#include <string.h>

#define IDX_MAGIC "MMIDIDX\0\0"
#define IDX_MAGIC_LEN 9
#define IDX_HEADER 34

static const struct {
	const char *name;
	int size;
} dtypes[] = {
	{NULL, 0}, /* codes start at 1 */
	{"uint8", 1},   {"int8", 1},    {"int16", 2},   {"int32", 4},
	{"int64", 8},   {"float64", 8}, {"float32", 4}, {"uint16", 2},
};

static uint64_t rd_u64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Two's complement without relying on the implementation-defined unsigned-to-signed cast. */
static int64_t rd_i64(const unsigned char *p)
{
	uint64_t u = rd_u64(p);
	return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}

static int32_t rd_i32(const unsigned char *p)
{
	uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		     (uint32_t)p[3] << 24;
	return u <= (uint32_t)INT32_MAX ? (int32_t)u : -(int32_t)(~u) - 1;
}

/* n bytes as a C string literal's contents: printable ASCII as is, the rest \xNN. */
static void show_bytes(char *out, size_t cap, const unsigned char *p, size_t n)
{
	size_t o = 0;
	out[0] = 0;
	for (size_t i = 0; i < n && o + 5 <= cap; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\')
			out[o++] = (char)p[i];
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", p[i]);
		out[o] = 0;
	}
}

int bp_idx_detect(const char *buf, size_t len)
{
	return (len >= 7 && !memcmp(buf, "MMIDIDX", 7)) || (len >= 6 && !memcmp(buf, "TNTIDX", 6));
}

/* *acc += n * k, or -1 when it would pass UINT64_MAX. */
static int add_mul(uint64_t *acc, uint64_t n, uint64_t k)
{
	if (n > (UINT64_MAX - *acc) / k)
		return -1;
	*acc += n * k;
	return 0;
}

int bp_idx_read(struct bp_dataset *ds, const char *buf, size_t len, int skip_empty,
		char *source, size_t cap, struct bp_error *err)
{
	const unsigned char *b = (const unsigned char *)buf;
	size_t m = len < IDX_MAGIC_LEN ? len : IDX_MAGIC_LEN;

	if (memcmp(b, IDX_MAGIC, m)) {
		char got[64];
		show_bytes(got, sizeof(got), b, m);
		return bp_errorf(err, "byte 0: magic \"%s\" is not a Megatron-LM index's "
				 "\"MMIDIDX\\x00\\x00\"%s", got,
				 len >= 6 && !memcmp(b, "TNTIDX", 6)
					 ? " (TNTIDX is the legacy non-mmap IndexedDataset, which is "
					   "not read)"
					 : "");
	}
	if (len < IDX_HEADER)
		return bp_errorf(err, "truncated: the header needs %d bytes, the file has %zu",
				 IDX_HEADER, len);
	uint64_t version = rd_u64(b + 9);
	if (version != 1)
		return bp_errorf(err, "byte 9: version %llu, not 1 (the only Megatron-LM index "
				 "version)", (unsigned long long)version);
	unsigned code = b[17];
	if (code < 1 || code >= BP_ARRAY_LEN(dtypes))
		return bp_errorf(err, "byte 17: unknown dtype code %u (1 to 8: uint8, int8, int16, "
				 "int32, int64, float64, float32, uint16)", code);
	uint64_t S = rd_u64(b + 18), D = rd_u64(b + 26);
	uint64_t need = IDX_HEADER;
	if (add_mul(&need, S, 12) < 0 || add_mul(&need, D, 8) < 0)
		return bp_errorf(err, "byte 18: the header says %llu sequences and %llu document "
				 "indices, which need more than 2^64 bytes: a corrupt header",
				 (unsigned long long)S, (unsigned long long)D);
	if (need > (uint64_t)len)
		return bp_errorf(err, "truncated: the header says %llu sequences and %llu document "
				 "indices, which need %llu bytes, the file has %zu",
				 (unsigned long long)S, (unsigned long long)D,
				 (unsigned long long)need, len);
	if (D == 0)
		return bp_errorf(err, "byte 26: the header says 0 document indices; the list "
				 "starts with 0, so it holds at least 1");
	/* need <= len: every count below indexes bytes that are there, and fits size_t */
	size_t ns = (size_t)S, nd = (size_t)D, rest = len - (size_t)need;
	if (rest != 0 && rest != ns)
		return bp_errorf(err, "byte %llu: the file goes on for %zu bytes after the document "
				 "indices; only the %zu-byte sequence modes may follow",
				 (unsigned long long)need, rest, ns);

	const unsigned char *lens = b + IDX_HEADER, *ptrs = lens + 4 * ns, *idx = ptrs + 8 * ns;
	int size = dtypes[code].size;
	for (size_t i = 0; i < ns; i++) {
		int32_t l = rd_i32(lens + 4 * i);
		if (l < 1)
			return bp_errorf(err, "byte %zu: sequence %zu has length %d; lengths must be "
					 ">= 1", IDX_HEADER + 4 * i, i, (int)l);
	}
	int64_t at = 0; /* where the next sequence starts in the .bin */
	for (size_t i = 0; i < ns; i++) {
		int64_t p = rd_i64(ptrs + 8 * i), l = rd_i32(lens + 4 * i);
		if (p != at)
			return bp_errorf(err, "byte %zu: sequence %zu starts at byte %lld of the .bin, "
					 "expected %lld (the tokens before it times %d bytes, %s)",
					 (size_t)(ptrs - b) + 8 * i, i, (long long)p, (long long)at,
					 size, dtypes[code].name);
		if (at > INT64_MAX - l * size)
			return bp_errorf(err, "byte %zu: sequence %zu ends past byte 2^63 of the .bin",
					 (size_t)(ptrs - b) + 8 * i, i);
		at += l * size;
	}

	int64_t first = rd_i64(idx);
	if (first != 0)
		return bp_errorf(err, "byte %zu: document index 0 is %lld, not 0",
				 (size_t)(idx - b), (long long)first);
	ds->lengths = bp_calloc(nd - 1 ? nd - 1 : 1, sizeof(*ds->lengths), err);
	if (!ds->lengths)
		return -1;
	int64_t prev = 0, total = 0;
	size_t kept = 0;
	for (size_t d = 1; d < nd; d++) {
		size_t off = (size_t)(idx - b) + 8 * d;
		int64_t v = rd_i64(idx + 8 * d);
		if (v < prev)
			return bp_errorf(err, "byte %zu: document index %zu is %lld, less than index "
					 "%zu's %lld: document indices must not decrease", off, d,
					 (long long)v, d - 1, (long long)prev);
		if ((uint64_t)v > S)
			return bp_errorf(err, "byte %zu: document index %zu is %lld, past the sequence "
					 "count %llu", off, d, (long long)v, (unsigned long long)S);
		if (v == prev && !skip_empty)
			return bp_errorf(err, "byte %zu: document %zu has 0 tokens (document indices "
					 "%zu and %zu are both %lld: no sequences; --skip-empty "
					 "leaves such documents out)", off, d - 1, d - 1, d,
					 (long long)v);
		if (v == prev) { /* skipped: the kept ones keep their document index as id */
			if (!ds->ids) {
				ds->ids = bp_calloc(nd - 1, sizeof(*ds->ids), err);
				if (!ds->ids)
					return -1;
				for (size_t k = 0; k < kept; k++)
					ds->ids[k] = (int64_t)k;
			}
			ds->skipped++;
			continue;
		}
		int64_t sum = 0;
		for (int64_t s = prev; s < v; s++) {
			int32_t l = rd_i32(lens + 4 * (size_t)s);
			if (sum > INT64_MAX - l)
				return bp_errorf(err, "byte %zu: document %zu holds more tokens than "
						 "int64 can count", off, d - 1);
			sum += l;
		}
		if (total > INT64_MAX - sum)
			return bp_errorf(err, "byte %zu: the total token count overflows int64", off);
		total += sum;
		if (ds->ids)
			ds->ids[kept] = (int64_t)(d - 1);
		ds->lengths[kept++] = sum;
		prev = v;
	}
	if ((uint64_t)prev != S)
		return bp_errorf(err, "byte %zu: the last document index (%zu) is %lld, not the "
				 "sequence count %llu", (size_t)(idx - b) + 8 * (nd - 1), nd - 1,
				 (long long)prev, (unsigned long long)S);
	ds->nlengths = kept;
	ds->sequences = (int64_t)S;
	snprintf(source, cap, "Megatron-LM index (.idx) of %s tokens%s; a sample is a document, "
		 "its sequences summed", dtypes[code].name, rest ? ", with sequence modes" : "");
	return 0;
}
