/* dataset_read.c: the dataset readers (dataset.h): balplan.dataset/v1 JSON (through
 * dataset_json.c), plain text (one length per line, '#' comments) and JSONL (one object per
 * line with a token count), told apart by their first bytes; and the embedded presets
 * (every datasets/ file compiled in). A dataset a reader returns keeps dataset.h's invariants:
 * non-empty, lengths >= 1, bins sorted and disjoint, total tokens within int64. */
#include "dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded.h"
#include "jsonutil.h"

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

/* Appends one length to ds->lengths (grown geometrically; cap tracks the allocation), keeping
 * the running total inside int64. */
static int push_length(struct bp_dataset *ds, size_t *cap, int64_t v, int64_t *total, int line,
		       struct bp_error *err)
{
	if (*total > INT64_MAX - v)
		return bp_errorf(err, "line %d: the total token count overflows int64", line);
	*total += v;
	if (ds->nlengths == *cap) {
		size_t ncap = *cap ? *cap * 2 : 256;
		int64_t *p = bp_realloc_array(ds->lengths, ncap, sizeof(*p), err);
		if (!p)
			return -1;
		ds->lengths = p;
		*cap = ncap;
	}
	ds->lengths[ds->nlengths++] = v;
	return 0;
}

/* Fills the provenance of a dataset read from a bare list (text or JSONL). */
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

static int parse_text(struct bp_dataset *ds, const char *text, size_t len, const char *name,
		      struct bp_error *err)
{
	struct line_iter it = {text, text + len, 0};
	const char *b, *e;
	size_t cap = 0;
	int64_t total = 0;

	if (set_bare_fields(ds, name, "plain text, one length per line", err) < 0)
		return -1;
	while (next_line(&it, &b, &e)) {
		const char *hash = memchr(b, '#', (size_t)(e - b));
		if (hash)
			e = hash;
		trim(&b, &e);
		if (b == e)
			continue;
		int64_t v = 0;
		int ok = 1;
		for (const char *c = b; c < e; c++) {
			if (*c < '0' || *c > '9') {
				ok = 0;
				break;
			}
			int d = *c - '0';
			if (v > (INT64_MAX - d) / 10)
				return bp_errorf(err, "line %d: '%.*s' is out of range", it.no,
						 (int)(e - b > 40 ? 40 : e - b), b);
			v = v * 10 + d;
		}
		if (!ok || v < 1)
			return bp_errorf(err, "line %d: '%.*s' is not a positive integer", it.no,
					 (int)(e - b > 40 ? 40 : e - b), b);
		if (push_length(ds, &cap, v, &total, it.no, err) < 0)
			return -1;
	}
	return 0;
}

static const char *const jsonl_fields[] = {"tokens", "num_tokens", "length", "len", NULL};

static int parse_jsonl(struct bp_dataset *ds, const char *text, size_t len, const char *name,
		       const char *field, struct bp_error *err)
{
	struct line_iter it = {text, text + len, 0};
	const char *b, *e;
	size_t cap = 0;
	int64_t total = 0;
	json_t *obj = NULL;
	char source[128];
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
		if (!field) {
			/* The first line decides which field every line carries. */
			for (size_t i = 0; jsonl_fields[i] && !field; i++)
				if (json_is_integer(json_object_get(obj, jsonl_fields[i])))
					field = jsonl_fields[i];
			if (!field) {
				bp_errorf(err, "line %d: no integer field \"tokens\", \"num_tokens\", "
					  "\"length\" or \"len\"", it.no);
				goto out;
			}
		}
		if (!ds->source) {
			snprintf(source, sizeof(source), "JSONL, field \"%.80s\"", field);
			if (set_bare_fields(ds, name, source, err) < 0)
				goto out;
		}
		json_t *v = json_object_get(obj, field);
		if (!json_is_integer(v)) {
			bp_errorf(err, "line %d: no integer field \"%s\"", it.no, field);
			goto out;
		}
		json_int_t x = json_integer_value(v);
		if (x < 1) {
			bp_errorf(err, "line %d: \"%s\" is %lld, not a positive integer", it.no,
				  field, (long long)x);
			goto out;
		}
		if (push_length(ds, &cap, (int64_t)x, &total, it.no, err) < 0)
			goto out;
		json_decref(obj);
		obj = NULL;
	}
	if (!ds->source && set_bare_fields(ds, name, "JSONL", err) < 0)
		goto out;
	rc = 0;
out:
	json_decref(obj);
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
	struct bp_read_opts o = {jsonl_field, NULL, NULL};
	return bp_dataset_read(ds, text, len, name, &o, err);
}

int bp_dataset_read(struct bp_dataset *ds, const char *text, size_t len, const char *name,
		    const struct bp_read_opts *ro, struct bp_error *err)
{
	int rc = -1;
	const char *jsonl_field = ro ? ro->length_field : NULL;

	bp_dataset_release(ds);
	bp_skip_bom(&text, &len);
	switch (detect(text, len)) {
	case 'j':
		if (bp_json_parse_text(text, len, from_json_cb, ds, err) < 0)
			goto out;
		break;
	case 'l':
		if (parse_jsonl(ds, text, len, name, jsonl_field, err) < 0)
			goto out;
		break;
	default:
		if (parse_text(ds, text, len, name, err) < 0)
			goto out;
		break;
	}
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
