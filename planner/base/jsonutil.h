/* jsonutil.h: the shared pieces of every bp_X_from_json / bp_X_to_json codec.
 *
 * Reading is strict: duplicate keys are rejected by the decoder (with line and column),
 * unknown keys by bp_json_check_keys, and every getter checks type and range. Error texts
 * name the JSON path ("profile.hardware.gpus_per_node"). bp_json_parse_text turns an
 * "unknown key" error into one that also carries the key's line and column in the text.
 * Writing is canonical: sorted keys, one-space indent, scalar arrays on one line, reals
 * rounded to 1e-3 and printed with 15 significant digits, trailing newline, so the same
 * structs give the same bytes.
 *
 * Field tables name each field of a struct once (key, type, offset, range): the same table
 * drives the reader, the writer and the unknown-key check. */
#ifndef BP_JSONUTIL_H
#define BP_JSONUTIL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "bp.h"

/* Decodes text (len bytes) with JSON_REJECT_DUPLICATES. Returns a new reference the caller
 * json_decref()s, or NULL with err = "line L column C: <why>". */
json_t *bp_json_loadb(const char *text, size_t len, struct bp_error *err);

/* Decodes text and hands the root to fn(out, root, err). If fn fails with an error whose text
 * contains `unknown key "K"`, the first place where "K" stands as a key in text is found and
 * the error becomes "line L column C: <text>". Returns fn's result (0 or -1). */
int bp_json_parse_text(const char *text, size_t len,
		       int (*fn)(void *out, json_t *root, struct bp_error *err), void *out,
		       struct bp_error *err);

/* Fails with `unknown key "K" in WHERE` if obj (an object) has a key not in allowed (a NULL-
 * terminated list). Fails with "WHERE is not an object" when obj is not an object. */
int bp_json_check_keys(json_t *obj, const char *const *allowed, const char *where,
		       struct bp_error *err);

/* Getters. where names the containing object for messages. required = 0 leaves *out as it is
 * when the key is absent. Integers must be JSON integers; reals accept integers too and must
 * be finite. Ranges are inclusive. Strings are copied into dst (size n) or duplicated
 * (bp_json_get_strdup: the caller frees). */
int bp_json_get_int(json_t *obj, const char *key, int required, int64_t lo, int64_t hi,
		    int64_t *out, const char *where, struct bp_error *err);
int bp_json_get_int32(json_t *obj, const char *key, int required, int lo, int hi, int *out,
		      const char *where, struct bp_error *err);
int bp_json_get_real(json_t *obj, const char *key, int required, double lo, double hi,
		     double *out, const char *where, struct bp_error *err);
int bp_json_get_str(json_t *obj, const char *key, int required, char *dst, size_t n,
		    const char *where, struct bp_error *err);
int bp_json_get_strdup(json_t *obj, const char *key, int required, char **out,
		       const char *where, struct bp_error *err);
/* The array at key (borrowed reference), or NULL with err when absent/not an array. */
json_t *bp_json_get_array(json_t *obj, const char *key, const char *where,
			  struct bp_error *err);
/* The object at key (borrowed), or NULL with err when absent/not an object. */
json_t *bp_json_get_object(json_t *obj, const char *key, const char *where,
			   struct bp_error *err);
/* Reads a JSON array of finite numbers into a new double array (caller frees); n gets the
 * length. Fails on an empty array when nonempty is set. */
int bp_json_get_real_array(json_t *obj, const char *key, int nonempty, double **out,
			   size_t *n, const char *where, struct bp_error *err);
/* Checks the "format" field equals want. */
int bp_json_check_format(json_t *obj, const char *want, const char *where,
			 struct bp_error *err);

/* Builders. Each returns a new reference or NULL. bp_json_real rounds to 1e-3. */
json_t *bp_json_real(double v);
json_t *bp_json_real_array(const double *v, size_t n);
/* json_object_set_new that remembers failure: sets *ok = 0 when value is NULL or the set
 * fails. Lets a to_json function build the whole object and check once. */
void bp_json_set(json_t *obj, const char *key, json_t *value, int *ok);
void bp_json_append(json_t *arr, json_t *value, int *ok);

/* Canonical text of root: sorted keys, indent 1, trailing newline (datasets, profiles,
 * traces). Caller free()s. NULL on failure. */
char *bp_json_dump_canonical(const json_t *root);
/* Canonical text for plans: sorted keys, one key per line with one space of indent per
 * level, an array of scalars on one line ("[3, 0, 4096]"), any other array one element per
 * line, trailing newline. So a plan's tuples read one per line and a git diff of two plans
 * shows what moved (plans/README.md). Caller free()s. NULL on failure. */
char *bp_json_dump_lines(const json_t *root);

/* A struct field as JSON sees it. */
enum bp_ftype { BP_FT_I64, BP_FT_INT, BP_FT_REAL, BP_FT_STR };
/* Field flags: OPT, absent on read keeps the member's value; EXACT, a real written as it is
 * (not rounded to 1e-3); NONNEG and POS, a number must be >= 0 (> 0) and is otherwise named
 * "negative" ("zero") rather than out of [lo, hi]; with them, hi > 0 (lo > 0) is an upper
 * (lower) limit, named "above (below) the limit" (a profile's physical-sense bounds). */
enum { BP_FF_OPT = 1, BP_FF_EXACT = 2, BP_FF_NONNEG = 4, BP_FF_POS = 8 };
struct bp_field {
	const char *key;
	enum bp_ftype type;
	size_t off;   /* offsetof the member */
	size_t size;  /* BP_FT_STR: the buffer's size */
	double lo, hi; /* inclusive range (numbers) */
	unsigned flags;
};
#define BP_FIELD_I64(T, m, k, lo, hi) {k, BP_FT_I64, offsetof(T, m), 0, lo, hi, 0}
#define BP_FIELD_INT(T, m, k, lo, hi) {k, BP_FT_INT, offsetof(T, m), 0, lo, hi, 0}
#define BP_FIELD_REAL(T, m, k, lo, hi) {k, BP_FT_REAL, offsetof(T, m), 0, lo, hi, 0}
#define BP_FIELD_STR(T, m, k) {k, BP_FT_STR, offsetof(T, m), sizeof(((T *)0)->m), 0, 0, 0}
/* An optional string: absent reads as "", and "" is not written. */
#define BP_FIELD_STR_OPT(T, m, k)                                                             \
	{k, BP_FT_STR, offsetof(T, m), sizeof(((T *)0)->m), 0, 0, BP_FF_OPT}
/* The same with flags. */
#define BP_FIELD_I64F(T, m, k, lo, hi, fl) {k, BP_FT_I64, offsetof(T, m), 0, lo, hi, fl}
#define BP_FIELD_REALF(T, m, k, lo, hi, fl) {k, BP_FT_REAL, offsetof(T, m), 0, lo, hi, fl}

/* Reads every field of the table (required unless BP_FF_OPT) from obj into base. When extra
 * is not NULL it lists the other keys obj may have (NULL-terminated); with strict set, any
 * key outside the table and extra is an error. */
int bp_json_read_fields(json_t *obj, const struct bp_field *f, size_t n, void *base,
			const char *const *extra, int strict, const char *where,
			struct bp_error *err);
/* Writes every field of the table from base into obj. Returns 0 or -1 (allocation). */
int bp_json_write_fields(json_t *obj, const struct bp_field *f, size_t n, const void *base);

#endif
