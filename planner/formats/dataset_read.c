/* dataset_read.c: the dataset readers (dataset.h): balplan.dataset/v1 JSON (through
 * dataset_json.c) and a team's sample index, told apart by their first bytes, and the
 * embedded presets (every datasets/ file compiled in). A sample index lists the samples a
 * training job trains, each with its length and its id:
 *   - a Megatron-LM .idx (dataset_idx.c; found by its magic before anything else): a sample
 *     is a document, its length its sequences summed, its id its index;
 *   - plain text: one sample per line, either its length (the sample's id is then its 0-based
 *     position among the file's lengths) or "id length" (whitespace between); the first data
 *     line decides the form for the file; '#' comments and blank lines allowed;
 *   - JSONL: one object per line; the length is an integer field (tokens, num_tokens, length,
 *     len) or the size of a token array (input_ids, tokens); the id an integer field ("id"
 *     when the first line has one) or the position; struct bp_read_opts names either;
 * any other input with a NUL byte in its first 4 KiB is refused as binary (the likeliest
 * such mistake is an indexed dataset's .bin for its .idx). Ids are unique and >= 0; ds->ids
 * is NULL when they are the positions. A dataset a reader returns keeps dataset.h's
 * invariants: non-empty, lengths >= 1, bins sorted and disjoint, total tokens within int64. */
#include "dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_idx.h"
#include "embedded.h"
#include "jsonutil.h"
#include "strbuf.h"

/* ---- readers ---- */

static int is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

/* One line of the input at a time: [*b, *e) without the newline; returns 0 at the end. */
struct line_iter {
	const char *p, *end;
	int no;
};

static int next_line(struct line_iter *it, const char **b, const char **e)
{
	if (it->p >= it->end)
		return 0;
	const char *nl = memchr(it->p, '\n', (size_t)(it->end - it->p));
	*b = it->p;
	*e = nl ? nl : it->end;
	it->p = nl ? nl + 1 : it->end;
	it->no++;
	return 1;
}

static void trim(const char **b, const char **e)
{
	while (*b < *e && is_blank(**b))
		(*b)++;
	while (*e > *b && is_blank((*e)[-1]))
		(*e)--;
}

/* What a reader has gathered: ds->lengths (grown geometrically; cap tracks the allocation),
 * the running total kept inside int64, and with ids the ids and lines of the samples in file
 * order (ids becomes ds->ids; lines only names a repeat). */
struct acc {
	struct bp_dataset *ds;
	size_t cap;
	int64_t total;
	int64_t *ids; /* NULL: the samples carry no ids */
	int *lines;
	size_t idcap;
};

static int push_length(struct acc *a, int64_t v, int line, struct bp_error *err)
{
	struct bp_dataset *ds = a->ds;
	if (a->total > INT64_MAX - v)
		return bp_errorf(err, "line %d: the total token count overflows int64", line);
	a->total += v;
	if (ds->nlengths == a->cap) {
		size_t ncap = a->cap ? a->cap * 2 : 256;
		int64_t *p = bp_realloc_array(ds->lengths, ncap, sizeof(*p), err);
		if (!p)
			return -1;
		ds->lengths = p;
		a->cap = ncap;
	}
	ds->lengths[ds->nlengths++] = v;
	return 0;
}

/* Records the id of the sample push_length just added. */
static int push_id(struct acc *a, int64_t id, int line, struct bp_error *err)
{
	size_t n = a->ds->nlengths - 1;
	if (n == a->idcap) {
		size_t ncap = a->idcap ? a->idcap * 2 : 256;
		int64_t *p = bp_realloc_array(a->ids, ncap, sizeof(*p), err);
		if (!p)
			return -1;
		a->ids = p;
		int *q = bp_realloc_array(a->lines, ncap, sizeof(*q), err);
		if (!q)
			return -1;
		a->lines = q;
		a->idcap = ncap;
	}
	a->ids[n] = id;
	a->lines[n] = line;
	return 0;
}

/* Sorts n ids >= 0 (both readers refuse negative ones) by LSD radix on 16-bit digits, with
 * tmp (n) and count (65536) as scratch: four linear passes at most, and a pass whose digit is
 * the same in every id (the high digits of ids below 2^32, say) is skipped. 10^7 shuffled ids
 * take a fraction of qsort's time. The result is in s or tmp; returns which. */
static uint64_t *radix_sort(uint64_t *s, uint64_t *tmp, uint64_t *count, size_t n)
{
	for (int shift = 0; shift < 64; shift += 16) {
		memset(count, 0, 65536 * sizeof(*count));
		for (size_t i = 0; i < n; i++)
			count[(s[i] >> shift) & 0xffff]++;
		if (count[(s[0] >> shift) & 0xffff] == n)
			continue;
		uint64_t at = 0;
		for (size_t d = 0; d < 65536; d++) {
			uint64_t c = count[d];
			count[d] = at;
			at += c;
		}
		for (size_t i = 0; i < n; i++)
			tmp[count[(s[i] >> shift) & 0xffff]++] = s[i];
		uint64_t *t = s;
		s = tmp;
		tmp = t;
	}
	return s;
}

/* A sample's id and the line it came from, to name a repeat. */
struct id_line {
	int64_t id, line;
};

static int cmp_id_line(const void *x, const void *y)
{
	const struct id_line *a = x, *b = y;
	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	return (a->line > b->line) - (a->line < b->line);
}

/* Names the first repeat in file order and the line it repeats, from the (id, line) pairs
 * sorted: in each run of equal ids the second line is that id's first repeat. Only reached
 * when there is one. */
static int report_repeat(const struct acc *a, size_t n, struct bp_error *err)
{
	struct id_line *p = bp_calloc(n, sizeof(*p), err);
	if (!p)
		return -1;
	for (size_t i = 0; i < n; i++)
		p[i] = (struct id_line){a->ids[i], a->lines[i]};
	qsort(p, n, sizeof(*p), cmp_id_line);
	const struct id_line *rep = NULL, *orig = NULL;
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && p[j].id == p[i].id; j++)
			;
		if (j - i > 1 && (!rep || p[i + 1].line < rep->line)) {
			rep = &p[i + 1];
			orig = &p[i];
		}
	}
	if (rep)
		bp_errorf(err, "line %lld: sample id %lld repeats line %lld", (long long)rep->line,
			  (long long)rep->id, (long long)orig->line);
	else
		bp_errorf(err, "sample ids repeat"); /* not reached: the caller saw a repeat */
	free(p);
	return -1;
}

/* Hands the ids gathered to ds->ids (file order) and refuses a repeated one. Ids in
 * increasing order, the common case, take one pass; any other order a radix sort of a copy,
 * linear; the lines are looked at only to name a repeat (an O(n log n) sort of the pairs). */
static int finish_ids(struct acc *a, struct bp_error *err)
{
	struct bp_dataset *ds = a->ds;
	size_t n = ds->nlengths;
	if (!a->ids || !n)
		return 0;
	size_t i = 1;
	while (i < n && a->ids[i] > a->ids[i - 1])
		i++;
	if (i < n) {
		if (n > (SIZE_MAX / sizeof(uint64_t) - 65536) / 2)
			return bp_errorf(err, "out of memory");
		uint64_t *s = bp_realloc_array(NULL, 2 * n + 65536, sizeof(*s), err);
		if (!s)
			return -1;
		for (i = 0; i < n; i++)
			s[i] = (uint64_t)a->ids[i];
		uint64_t *sorted = radix_sort(s, s + n, s + 2 * n, n);
		for (i = 1; i < n && sorted[i] != sorted[i - 1]; i++)
			;
		free(s);
		if (i < n)
			return report_repeat(a, n, err);
	}
	ds->ids = a->ids;
	a->ids = NULL;
	return 0;
}

/* Fills the provenance of a dataset read from a bare list (text, JSONL or an .idx). */
static int set_bare_fields(struct bp_dataset *ds, const char *name, const char *source,
			   struct bp_error *err)
{
	if (bp_strlcpy_checked(ds->name, name ? name : "unnamed", sizeof(ds->name),
			       "dataset name", err) < 0)
		return -1;
	ds->kind = BP_DS_MEASURED;
	ds->rule = BP_BIN_UNIFORM;
	if (!(ds->source = bp_strdup(source, err)) ||
	    !(ds->tokenizer = bp_strdup("unknown", err)) ||
	    !(ds->license = bp_strdup("unknown", err)))
		return -1;
	return 0;
}

/* A decimal integer of digits only in [b, e): 0 with *out, -1 when not digits (or none), -2
 * when past INT64_MAX. */
static int parse_digits(const char *b, const char *e, int64_t *out)
{
	int64_t v = 0;
	if (b == e)
		return -1;
	for (const char *c = b; c < e; c++) {
		if (*c < '0' || *c > '9')
			return -1;
		int d = *c - '0';
		if (v > (INT64_MAX - d) / 10) {
			for (; c < e; c++) /* a non-digit further on is the worse news */
				if (*c < '0' || *c > '9')
					return -1;
			return -2;
		}
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/* The whitespace-separated fields of [b, e) (trimmed, not empty): up to 3 of them in f;
 * returns how many there are, 3 meaning three or more. */
static int split_fields(const char *b, const char *e, const char *f[3][2])
{
	int n = 0;
	while (b < e && n < 3) {
		const char *s = b;
		while (b < e && !is_blank(*b))
			b++;
		f[n][0] = s;
		f[n][1] = b;
		n++;
		while (b < e && is_blank(*b))
			b++;
	}
	return n;
}

#define CUT(b, e) (int)((e) - (b) > 40 ? 40 : (e) - (b)), (b)

/* Plain text: one sample per line, either its length alone (the sample's id is then its
 * 0-based position among the file's lengths) or "id length". The first data line decides
 * which; '#' starts a comment. */
static int parse_text(struct bp_dataset *ds, const char *text, size_t len, const char *name,
		      struct bp_error *err)
{
	struct line_iter it = {text, text + len, 0};
	struct acc a = {ds, 0, 0, NULL, NULL, 0};
	const char *b, *e, *f[3][2];
	int form = 0, form_line = 0, rc = -1;

	while (next_line(&it, &b, &e)) {
		const char *hash = memchr(b, '#', (size_t)(e - b));
		if (hash)
			e = hash;
		trim(&b, &e);
		if (b == e)
			continue;
		int n = split_fields(b, e, f);
		if (n > 2) {
			bp_errorf(err, "line %d: '%.*s' has more than two fields (a line is 'length' "
				  "or 'id length')", it.no, CUT(b, e));
			goto out;
		}
		if (!form) {
			form = n;
			form_line = it.no;
		} else if (n != form) {
			bp_errorf(err, "line %d: %s, but line %d has %s: every line must have the "
				  "same form", it.no, n == 1 ? "one field (a length)" :
				  "two fields ('id length')", form_line,
				  form == 1 ? "one (a length)" : "two ('id length')");
			goto out;
		}
		int64_t id = 0, v = 0;
		const char *lb = f[n - 1][0], *le = f[n - 1][1];
		if (n == 2) {
			int r = parse_digits(f[0][0], f[0][1], &id);
			if (r < 0) {
				bp_errorf(err, "line %d: sample id '%.*s' is %s", it.no,
					  CUT(f[0][0], f[0][1]),
					  r == -2 ? "out of range" : "not a non-negative integer");
				goto out;
			}
		}
		int r = parse_digits(lb, le, &v);
		if (r < 0 || v < 1) {
			const char *why = r == -2 ? "out of range" : "not a positive integer";
			if (n == 1)
				bp_errorf(err, "line %d: '%.*s' is %s", it.no, CUT(lb, le), why);
			else
				bp_errorf(err, "line %d: length '%.*s' is %s", it.no, CUT(lb, le), why);
			goto out;
		}
		if (push_length(&a, v, it.no, err) < 0 || (n == 2 && push_id(&a, id, it.no, err) < 0))
			goto out;
	}
	if (set_bare_fields(ds, name, form == 2 ? "plain text, 'id length' per line" :
				  "plain text, one length per line", err) < 0 ||
	    finish_ids(&a, err) < 0)
		goto out;
	rc = 0;
out:
	free(a.ids);
	free(a.lines);
	return rc;
}

static const char *const jsonl_fields[] = {"tokens", "num_tokens", "length", "len", NULL};
static const char *const jsonl_arrays[] = {"input_ids", "tokens", NULL};

/* JSONL: one object per line; the length is an integer field or the size of a token array,
 * the id an integer field or the line's position among the samples. The first line decides
 * the fields every line carries (bp_read_opts names them, or they are chosen from it). */
static int parse_jsonl(struct bp_dataset *ds, const char *text, size_t len, const char *name,
		       const struct bp_read_opts *o, struct bp_error *err)
{
	struct line_iter it = {text, text + len, 0};
	struct acc a = {ds, 0, 0, NULL, NULL, 0};
	const char *b, *e;
	const char *field = o ? o->length_field : NULL, *array = o ? o->tokens_field : NULL;
	const char *idf = o ? o->id_field : NULL;
	int decided = 0, id_line = 0;
	json_t *obj = NULL;
	struct bp_sb source = BP_SB_INIT;
	int rc = -1;

	while (next_line(&it, &b, &e)) {
		trim(&b, &e);
		if (b == e)
			continue;
		json_error_t je;
		obj = json_loadb(b, (size_t)(e - b), JSON_REJECT_DUPLICATES, &je);
		if (!obj) {
			bp_errorf(err, "line %d: invalid JSON: %s", it.no, je.text);
			goto out;
		}
		if (!json_is_object(obj)) {
			bp_errorf(err, "line %d: not a JSON object", it.no);
			goto out;
		}
		if (!decided) {
			/* The first line decides which fields every line carries. */
			for (size_t i = 0; !field && !array && jsonl_fields[i]; i++)
				if (json_is_integer(json_object_get(obj, jsonl_fields[i])))
					field = jsonl_fields[i];
			for (size_t i = 0; !field && !array && jsonl_arrays[i]; i++)
				if (json_is_array(json_object_get(obj, jsonl_arrays[i])))
					array = jsonl_arrays[i];
			if (!field && !array) {
				bp_errorf(err, "line %d: no integer field \"tokens\", \"num_tokens\", "
					  "\"length\" or \"len\" and no token array \"input_ids\" or "
					  "\"tokens\"", it.no);
				goto out;
			}
			if (!idf && json_is_integer(json_object_get(obj, "id"))) {
				idf = "id";
				id_line = it.no;
			}
			if (field)
				bp_sb_addf(&source, "JSONL, field \"%s\"", field);
			else
				bp_sb_addf(&source, "JSONL, token array \"%s\"", array);
			if (idf)
				bp_sb_addf(&source, ", sample id \"%s\"", idf);
			decided = 1;
		}
		json_int_t x;
		if (field) {
			json_t *v = json_object_get(obj, field);
			if (json_is_array(v)) {
				bp_errorf(err, "line %d: \"%s\" is an array, not an integer token count "
					  "(name it as the token array field)", it.no, field);
				goto out;
			}
			if (!json_is_integer(v)) {
				bp_errorf(err, "line %d: no integer field \"%s\"", it.no, field);
				goto out;
			}
			x = json_integer_value(v);
			if (x < 1) {
				bp_errorf(err, "line %d: \"%s\" is %lld, not a positive integer", it.no,
					  field, (long long)x);
				goto out;
			}
		} else {
			json_t *v = json_object_get(obj, array);
			if (!v) {
				bp_errorf(err, "line %d: no token array \"%s\"", it.no, array);
				goto out;
			}
			if (!json_is_array(v)) {
				bp_errorf(err, "line %d: \"%s\" is not an array of tokens", it.no, array);
				goto out;
			}
			x = (json_int_t)json_array_size(v);
			if (x < 1) {
				bp_errorf(err, "line %d: token array \"%s\" is empty", it.no, array);
				goto out;
			}
		}
		if (push_length(&a, (int64_t)x, it.no, err) < 0)
			goto out;
		if (idf) {
			json_t *v = json_object_get(obj, idf);
			if (!v) {
				if (id_line)
					bp_errorf(err, "line %d: no sample id \"%s\" (line %d has one, so "
						  "every line needs one)", it.no, idf, id_line);
				else
					bp_errorf(err, "line %d: no sample id field \"%s\"", it.no, idf);
				goto out;
			}
			if (!json_is_integer(v)) {
				bp_errorf(err, "line %d: sample id \"%s\" is not an integer", it.no, idf);
				goto out;
			}
			json_int_t id = json_integer_value(v);
			if (id < 0) {
				bp_errorf(err, "line %d: sample id \"%s\" is %lld, not a non-negative "
					  "integer", it.no, idf, (long long)id);
				goto out;
			}
			if (push_id(&a, (int64_t)id, it.no, err) < 0)
				goto out;
		}
		json_decref(obj);
		obj = NULL;
	}
	if (bp_sb_check(&source, err) < 0 ||
	    set_bare_fields(ds, name, decided ? source.buf : "JSONL", err) < 0 ||
	    finish_ids(&a, err) < 0)
		goto out;
	rc = 0;
out:
	bp_sb_release(&source);
	json_decref(obj);
	free(a.ids);
	free(a.lines);
	return rc;
}

static int from_json_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_dataset_from_json(out, root, err);
}

/* Whether text holds exactly one non-blank line. */
static int single_line(const char *text, size_t len)
{
	int lines = 0, content = 0;
	for (size_t i = 0; i < len; i++) {
		if (text[i] == '\n') {
			lines += content;
			content = 0;
		} else if (!is_blank(text[i])) {
			content = 1;
		}
	}
	return lines + content == 1;
}

/* Which reader: 'j' v1 JSON, 'l' JSONL, 't' plain text. A text that is one JSON object with
 * "format" is v1; otherwise a first line that is a JSON object by itself means JSONL; any
 * other text starting with '{' is taken as (broken) v1 JSON so the decoder's line and column
 * reach the user. */
static char detect(const char *text, size_t len)
{
	size_t i = 0;
	while (i < len && is_blank(text[i]))
		i++;
	if (i == len || text[i] != '{')
		return 't';
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	int is_obj = json_is_object(root);
	int has_format = is_obj && json_object_get(root, "format");
	json_decref(root);
	if (has_format)
		return 'j';
	if (is_obj && !single_line(text, len))
		return 'j'; /* a pretty-printed object without "format": say so */
	const char *nl = memchr(text + i, '\n', len - i);
	size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
	json_t *first = json_loadb(text + i, n, JSON_REJECT_DUPLICATES, NULL);
	int jsonl = json_is_object(first);
	json_decref(first);
	return jsonl ? 'l' : 'j';
}

int bp_dataset_parse(struct bp_dataset *ds, const char *text, size_t len, const char *name,
		     const char *jsonl_field, struct bp_error *err)
{
	struct bp_read_opts o = {.length_field = jsonl_field, .tokens_field = NULL, .id_field = NULL};
	return bp_dataset_read(ds, text, len, name, &o, err);
}

/* How far into the input a NUL byte marks it as binary. */
#define BINARY_PROBE 4096

int bp_dataset_read(struct bp_dataset *ds, const char *text, size_t len, const char *name,
		    const struct bp_read_opts *ro, struct bp_error *err)
{
	int rc = -1;
	char source[160];

	bp_dataset_release(ds);
	if (ro && ro->length_field && ro->tokens_field) {
		bp_errorf(err, "both a length field \"%s\" and a token array field \"%s\" named: a "
			  "sample's length comes from one of them", ro->length_field,
			  ro->tokens_field);
		goto out;
	}
	if (bp_idx_detect(text, len)) {
		if (bp_idx_read(ds, text, len, ro && ro->skip_empty, source, sizeof(source), err) < 0 ||
		    set_bare_fields(ds, name, source, err) < 0)
			goto out;
		snprintf(ds->format, sizeof(ds->format), "megatron-idx");
		goto read;
	}
	bp_skip_bom(&text, &len);
	/* Binary input would otherwise reach the text reader and be refused for its first
	 * "line"; the likeliest mistake is the .bin of a Megatron-LM dataset for its .idx. */
	if (len && memchr(text, 0, len < BINARY_PROBE ? len : BINARY_PROBE)) {
		bp_errorf(err, "binary data, not a sample index (a Megatron-LM .bin? give its .idx)");
		goto out;
	}
	switch (detect(text, len)) {
	case 'j':
		if (bp_json_parse_text(text, len, from_json_cb, ds, err) < 0)
			goto out;
		snprintf(ds->format, sizeof(ds->format), "balplan");
		break;
	case 'l':
		if (parse_jsonl(ds, text, len, name, ro, err) < 0)
			goto out;
		snprintf(ds->format, sizeof(ds->format), "jsonl");
		break;
	default:
		if (parse_text(ds, text, len, name, err) < 0)
			goto out;
		snprintf(ds->format, sizeof(ds->format), "text");
		break;
	}
read:
	bp_dataset_compute_stats(ds);
	if (ds->stats.count == 0) {
		bp_errorf(err, "dataset '%s' is empty", ds->name);
		goto out;
	}
	rc = 0;
out:
	if (rc < 0)
		bp_dataset_release(ds);
	return rc;
}

/* ---- presets ---- */

size_t bp_dataset_preset_count(void)
{
	return bp_embedded_datasets_count;
}

const char *bp_dataset_preset_name(size_t i)
{
	return i < bp_embedded_datasets_count ? bp_embedded_datasets[i].name : NULL;
}

static const struct bp_embedded_file *find_preset(const char *name)
{
	for (size_t i = 0; i < bp_embedded_datasets_count; i++)
		if (!strcmp(bp_embedded_datasets[i].name, name))
			return &bp_embedded_datasets[i];
	return NULL;
}

const char *bp_dataset_preset_text(const char *name, size_t *len)
{
	const struct bp_embedded_file *f = find_preset(name);
	if (!f)
		return NULL;
	if (len)
		*len = f->len;
	return (const char *)f->data;
}

int bp_dataset_preset(struct bp_dataset *ds, const char *name, struct bp_error *err)
{
	const struct bp_embedded_file *f = find_preset(name);
	if (!f)
		return bp_errorf(err, "unknown dataset preset '%s' (see 'balplan dataset list')",
				 name);
	if (bp_dataset_parse(ds, (const char *)f->data, f->len, f->name, NULL, err) < 0)
		return bp_error_prefix(err, "dataset preset '%s'", name);
	return 0;
}
