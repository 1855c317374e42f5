/* jsonutil.c: strict JSON reading and canonical writing shared by every codec (jsonutil.h). */
#include "jsonutil.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *bp_json_loadb(const char *text, size_t len, struct bp_error *err)
{
	json_error_t je;
	bp_skip_bom(&text, &len);
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		bp_errorf(err, "line %d column %d: %s", je.line, je.column, je.text);
		return NULL;
	}
	return root;
}

/* Finds `"key"` followed by optional blanks and ':' in text; 1-based line and column. */
static int locate_key(const char *text, size_t len, const char *key, int *line, int *col)
{
	size_t klen = strlen(key);
	int ln = 1, c = 1;
	for (size_t i = 0; i < len; i++) {
		if (text[i] == '"' && i + klen + 1 < len && !memcmp(text + i + 1, key, klen) &&
		    text[i + klen + 1] == '"') {
			size_t j = i + klen + 2;
			while (j < len && (text[j] == ' ' || text[j] == '\t' || text[j] == '\r' ||
					   text[j] == '\n'))
				j++;
			if (j < len && text[j] == ':') {
				*line = ln;
				*col = c;
				return 0;
			}
		}
		if (text[i] == '\\' && i + 1 < len) { /* skip escaped char inside strings */
			i++;
			c += 2;
			continue;
		}
		if (text[i] == '\n') {
			ln++;
			c = 1;
		} else {
			c++;
		}
	}
	return -1;
}

int bp_json_parse_text(const char *text, size_t len,
		       int (*fn)(void *out, json_t *root, struct bp_error *err), void *out,
		       struct bp_error *err)
{
	bp_skip_bom(&text, &len); /* before locate_key counts columns */
	json_t *root = bp_json_loadb(text, len, err);
	if (!root)
		return -1;
	int rc = fn(out, root, err);
	json_decref(root);
	if (rc < 0 && err) {
		const char *p = strstr(err->text, "unknown key \"");
		if (p) {
			char key[128];
			p += strlen("unknown key \"");
			size_t k = 0;
			while (*p && *p != '"' && k + 1 < sizeof(key))
				key[k++] = *p++;
			key[k] = 0;
			int line, col;
			if (locate_key(text, len, key, &line, &col) == 0)
				bp_error_prefix(err, "line %d column %d", line, col);
		}
	}
	return rc;
}

int bp_json_check_keys(json_t *obj, const char *const *allowed, const char *where,
		       struct bp_error *err)
{
	if (!json_is_object(obj))
		return bp_errorf(err, "%s is not an object", where);
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v) {
		int ok = 0;
		for (size_t i = 0; allowed[i]; i++)
			if (!strcmp(key, allowed[i])) {
				ok = 1;
				break;
			}
		if (!ok)
			return bp_errorf(err, "unknown key \"%s\" in %s", key, where);
	}
	return 0;
}

static json_t *get(json_t *obj, const char *key, int required, const char *where,
		   struct bp_error *err, int *rc)
{
	json_t *v = json_object_get(obj, key);
	*rc = 0;
	if (!v && required)
		*rc = bp_errorf(err, "missing key \"%s\" in %s", key, where);
	return v;
}

int bp_json_get_int(json_t *obj, const char *key, int required, int64_t lo, int64_t hi,
		    int64_t *out, const char *where, struct bp_error *err)
{
	int rc;
	json_t *v = get(obj, key, required, where, err, &rc);
	if (!v)
		return rc;
	if (!json_is_integer(v))
		return bp_errorf(err, "%s.%s is not an integer", where, key);
	json_int_t x = json_integer_value(v);
	if (x < lo || x > hi)
		return bp_errorf(err, "%s.%s is %lld, outside [%lld, %lld]", where, key,
				 (long long)x, (long long)lo, (long long)hi);
	*out = x;
	return 0;
}

int bp_json_get_int32(json_t *obj, const char *key, int required, int lo, int hi, int *out,
		      const char *where, struct bp_error *err)
{
	int64_t v = *out;
	if (bp_json_get_int(obj, key, required, lo, hi, &v, where, err) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

int bp_json_get_real(json_t *obj, const char *key, int required, double lo, double hi,
		     double *out, const char *where, struct bp_error *err)
{
	int rc;
	json_t *v = get(obj, key, required, where, err, &rc);
	if (!v)
		return rc;
	if (!json_is_number(v))
		return bp_errorf(err, "%s.%s is not a number", where, key);
	double x = json_number_value(v);
	if (!isfinite(x))
		return bp_errorf(err, "%s.%s is not finite", where, key);
	if (x < lo || x > hi)
		return bp_errorf(err, "%s.%s is %g, outside [%g, %g]", where, key, x, lo, hi);
	*out = x;
	return 0;
}

int bp_json_get_str(json_t *obj, const char *key, int required, char *dst, size_t n,
		    const char *where, struct bp_error *err)
{
	int rc;
	json_t *v = get(obj, key, required, where, err, &rc);
	if (!v)
		return rc;
	if (!json_is_string(v))
		return bp_errorf(err, "%s.%s is not a string", where, key);
	const char *s = json_string_value(v);
	if (strlen(s) >= n)
		return bp_errorf(err, "%s.%s is too long (at most %zu bytes)", where, key, n - 1);
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

int bp_json_get_strdup(json_t *obj, const char *key, int required, char **out,
		       const char *where, struct bp_error *err)
{
	int rc;
	json_t *v = get(obj, key, required, where, err, &rc);
	if (!v)
		return rc;
	if (!json_is_string(v))
		return bp_errorf(err, "%s.%s is not a string", where, key);
	char *s = bp_strdup(json_string_value(v), err);
	if (!s)
		return -1;
	free(*out);
	*out = s;
	return 0;
}

json_t *bp_json_get_array(json_t *obj, const char *key, const char *where,
			  struct bp_error *err)
{
	json_t *v = json_object_get(obj, key);
	if (!v) {
		bp_errorf(err, "missing key \"%s\" in %s", key, where);
		return NULL;
	}
	if (!json_is_array(v)) {
		bp_errorf(err, "%s.%s is not an array", where, key);
		return NULL;
	}
	return v;
}

json_t *bp_json_get_object(json_t *obj, const char *key, const char *where,
			   struct bp_error *err)
{
	json_t *v = json_object_get(obj, key);
	if (!v) {
		bp_errorf(err, "missing key \"%s\" in %s", key, where);
		return NULL;
	}
	if (!json_is_object(v)) {
		bp_errorf(err, "%s.%s is not an object", where, key);
		return NULL;
	}
	return v;
}

int bp_json_get_real_array(json_t *obj, const char *key, int nonempty, double **out,
			   size_t *n, const char *where, struct bp_error *err)
{
	json_t *a = bp_json_get_array(obj, key, where, err);
	if (!a)
		return -1;
	size_t len = json_array_size(a);
	if (nonempty && len == 0)
		return bp_errorf(err, "%s.%s is empty", where, key);
	double *v = bp_calloc(len, sizeof(*v), err);
	if (!v)
		return -1;
	for (size_t i = 0; i < len; i++) {
		json_t *x = json_array_get(a, i);
		if (!json_is_number(x)) {
			free(v);
			return bp_errorf(err, "%s.%s[%zu] is not a number", where, key, i);
		}
		v[i] = json_number_value(x);
		if (!isfinite(v[i])) {
			free(v);
			return bp_errorf(err, "%s.%s[%zu] is not finite", where, key, i);
		}
	}
	free(*out);
	*out = v;
	*n = len;
	return 0;
}

int bp_json_check_format(json_t *obj, const char *want, const char *where,
			 struct bp_error *err)
{
	char fmt[64];
	if (!json_is_object(obj))
		return bp_errorf(err, "%s is not a JSON object", where);
	if (bp_json_get_str(obj, "format", 1, fmt, sizeof(fmt), where, err) < 0)
		return -1;
	if (strcmp(fmt, want))
		return bp_errorf(err, "unsupported format \"%s\" (expected \"%s\")", fmt, want);
	return 0;
}

json_t *bp_json_real(double v)
{
	if (!isfinite(v))
		return NULL;
	double r = round(v * 1000.0) / 1000.0;
	if (r == 0.0)
		r = 0.0; /* no negative zero in canonical output */
	return json_real(r);
}

json_t *bp_json_real_array(const double *v, size_t n)
{
	json_t *a = json_array();
	int ok = a != NULL;
	for (size_t i = 0; ok && i < n; i++)
		bp_json_append(a, bp_json_real(v[i]), &ok);
	if (!ok) {
		json_decref(a);
		return NULL;
	}
	return a;
}

void bp_json_set(json_t *obj, const char *key, json_t *value, int *ok)
{
	if (!value || !obj) {
		json_decref(value);
		*ok = 0;
		return;
	}
	if (json_object_set_new(obj, key, value) < 0)
		*ok = 0;
}

void bp_json_append(json_t *arr, json_t *value, int *ok)
{
	if (!value || !arr) {
		json_decref(value);
		*ok = 0;
		return;
	}
	if (json_array_append_new(arr, value) < 0)
		*ok = 0;
}

/* A growing text buffer for the canonical emitter. */
struct outbuf {
	char *s;
	size_t n, cap;
	int failed;
};

static void put(struct outbuf *b, const char *t, size_t n)
{
	if (b->failed)
		return;
	if (b->n + n + 2 > b->cap) {
		size_t nc = b->cap ? b->cap : 4096;
		while (b->n + n + 2 > nc)
			nc *= 2;
		char *ns = realloc(b->s, nc);
		if (!ns) {
			b->failed = 1;
			return;
		}
		b->s = ns;
		b->cap = nc;
	}
	memcpy(b->s + b->n, t, n);
	b->n += n;
	b->s[b->n] = 0;
}

static void puts_(struct outbuf *b, const char *t)
{
	put(b, t, strlen(t));
}

static void indent(struct outbuf *b, int depth)
{
	put(b, "\n", 1);
	for (int i = 0; i < depth; i++)
		put(b, " ", 1);
}

static void scalar(struct outbuf *b, const json_t *v)
{
	char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
	if (!t) {
		b->failed = 1;
		return;
	}
	puts_(b, t);
	free(t);
}

static int all_scalars(const json_t *a)
{
	size_t i;
	const json_t *x;
	json_array_foreach(a, i, x) if (json_is_array(x) || json_is_object(x)) return 0;
	return 1;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Objects: one key per line, sorted; arrays of scalars on one line; other arrays one
 * element per line. */
static void emit(struct outbuf *b, const json_t *v, int depth)
{
	if (json_is_object(v)) {
		size_t n = json_object_size(v), k = 0;
		if (!n) {
			puts_(b, "{}");
			return;
		}
		const char **keys = malloc(n * sizeof(*keys));
		if (!keys) {
			b->failed = 1;
			return;
		}
		const char *key;
		json_t *x;
		json_object_foreach((json_t *)v, key, x) keys[k++] = key;
		qsort(keys, n, sizeof(*keys), cmp_key);
		puts_(b, "{");
		for (size_t i = 0; i < n; i++) {
			indent(b, depth + 1);
			json_t *ks = json_string(keys[i]);
			if (!ks) {
				b->failed = 1;
				break;
			}
			scalar(b, ks);
			json_decref(ks);
			puts_(b, ": ");
			emit(b, json_object_get(v, keys[i]), depth + 1);
			if (i + 1 < n)
				puts_(b, ",");
		}
		free(keys);
		indent(b, depth);
		puts_(b, "}");
	} else if (json_is_array(v)) {
		size_t n = json_array_size(v);
		if (!n) {
			puts_(b, "[]");
			return;
		}
		int flat = all_scalars(v);
		puts_(b, "[");
		for (size_t i = 0; i < n; i++) {
			if (!flat)
				indent(b, depth + 1);
			emit(b, json_array_get(v, i), depth + 1);
			if (i + 1 < n)
				puts_(b, flat ? ", " : ",");
		}
		if (!flat)
			indent(b, depth);
		puts_(b, "]");
	} else {
		scalar(b, v);
	}
}

char *bp_json_dump_canonical(const json_t *root)
{
	char *s = json_dumps(root, JSON_SORT_KEYS | JSON_INDENT(1) | JSON_REAL_PRECISION(15));
	if (!s)
		return NULL;
	size_t n = strlen(s);
	char *t = realloc(s, n + 2);
	if (!t) {
		free(s);
		return NULL;
	}
	t[n] = '\n';
	t[n + 1] = 0;
	return t;
}

char *bp_json_dump_lines(const json_t *root)
{
	struct outbuf b = {NULL, 0, 0, 0};
	emit(&b, root, 0);
	put(&b, "\n", 1);
	if (b.failed) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

/* A number that must be >= 0 (pos: > 0), named "negative" or "zero" when not. */
static int sign_check(const struct bp_field *x, double v, const char *where,
		      struct bp_error *err)
{
	if ((x->flags & (BP_FF_NONNEG | BP_FF_POS)) && v < 0)
		return bp_errorf(err, "%s.%s is negative", where, x->key);
	if ((x->flags & BP_FF_POS) && v == 0)
		return bp_errorf(err, "%s.%s is zero", where, x->key);
	/* A signed field with a range (hi > 0): physical-sense bounds, named as limits. */
	if ((x->flags & (BP_FF_NONNEG | BP_FF_POS)) && x->hi > 0 && v > x->hi)
		return bp_errorf(err, "%s.%s is %g, above the %g limit", where, x->key, v, x->hi);
	if ((x->flags & (BP_FF_NONNEG | BP_FF_POS)) && x->lo > 0 && v < x->lo)
		return bp_errorf(err, "%s.%s is %g, below the %g limit", where, x->key, v, x->lo);
	return 0;
}

int bp_json_read_fields(json_t *obj, const struct bp_field *f, size_t n, void *base,
			const char *const *extra, int strict, const char *where,
			struct bp_error *err)
{
	char *b = base;
	if (!json_is_object(obj))
		return bp_errorf(err, "%s is not an object", where);
	if (strict) {
		const char *key;
		json_t *v;
		json_object_foreach(obj, key, v) {
			int known = 0;
			for (size_t i = 0; i < n && !known; i++)
				known = !strcmp(f[i].key, key);
			for (size_t i = 0; extra && extra[i] && !known; i++)
				known = !strcmp(extra[i], key);
			if (!known)
				return bp_errorf(err, "unknown key \"%s\" in %s", key, where);
		}
	}
	for (size_t i = 0; i < n; i++) {
		const struct bp_field *x = &f[i];
		int rc = 0, req = !(x->flags & BP_FF_OPT);
		int signed_ = (x->flags & (BP_FF_NONNEG | BP_FF_POS)) != 0;
		switch (x->type) {
		case BP_FT_I64: {
			int64_t *p = (int64_t *)(b + x->off), v = *p;
			rc = bp_json_get_int(obj, x->key, req,
					     signed_ || x->lo <= -9.2e18 ? INT64_MIN : (int64_t)x->lo,
					     signed_ || x->hi >= 9.2e18 ? INT64_MAX : (int64_t)x->hi,
					     &v, where, err);
			if (!rc && (rc = sign_check(x, (double)v, where, err)) == 0)
				*p = v;
			break;
		}
		case BP_FT_INT:
			rc = bp_json_get_int32(obj, x->key, req, (int)x->lo, (int)x->hi,
					       (int *)(b + x->off), where, err);
			break;
		case BP_FT_REAL: {
			double *p = (double *)(b + x->off), v = *p;
			rc = bp_json_get_real(obj, x->key, req, signed_ ? -DBL_MAX : x->lo,
					      signed_ ? DBL_MAX : x->hi, &v, where, err);
			if (!rc && (rc = sign_check(x, v, where, err)) == 0)
				*p = v;
			break;
		}
		case BP_FT_STR:
			rc = bp_json_get_str(obj, x->key, req, b + x->off, x->size, where, err);
			break;
		}
		if (rc < 0)
			return -1;
	}
	return 0;
}

int bp_json_write_fields(json_t *obj, const struct bp_field *f, size_t n, const void *base)
{
	const char *b = base;
	int ok = obj != NULL;
	for (size_t i = 0; ok && i < n; i++) {
		const struct bp_field *x = &f[i];
		json_t *v = NULL;
		if (x->type == BP_FT_STR && (x->flags & BP_FF_OPT) && !b[x->off])
			continue; /* an optional string left empty is not written */
		switch (x->type) {
		case BP_FT_I64: v = json_integer(*(const int64_t *)(b + x->off)); break;
		case BP_FT_INT: v = json_integer(*(const int *)(b + x->off)); break;
		case BP_FT_REAL:
			v = x->flags & BP_FF_EXACT ? json_real(*(const double *)(b + x->off))
						   : bp_json_real(*(const double *)(b + x->off));
			break;
		case BP_FT_STR: v = json_string(b + x->off); break;
		}
		bp_json_set(obj, x->key, v, &ok);
	}
	return ok ? 0 : -1;
}
