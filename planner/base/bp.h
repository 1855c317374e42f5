/* bp.h: what every planner module shares: the error record, small helpers.
 *
 * libbalplan never prints, never exits and never reads the environment: a failing call
 * returns -1 (or NULL) and fills a struct bp_error that the front end prints as
 * "balplan: error: <text>". Texts are lowercase, name their subject in quotes and have no
 * trailing period. Units everywhere in the planner: time in microseconds (double), memory in
 * bytes (int64_t), lengths in tokens (int64_t). */
#ifndef BP_BP_H
#define BP_BP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* the CUDA kernels (executor/attn.cu) report through bp_errorf */
#endif

struct bp_error {
	char text[256];
};

/* Fills err (if not NULL) from a printf format and returns -1, so callers can write
 * `return bp_errorf(err, "...")`. A message longer than text (255 characters; the public
 * struct balplan_error has the same size) ends in "..." where it was cut. */
int bp_errorf(struct bp_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Prefixes err->text with a printf-formatted context and ": " (cut and marked as
 * bp_errorf's). Returns -1. */
int bp_error_prefix(struct bp_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Every reader of text input (datasets in any format, profiles, plans, traces) calls this
 * first: a leading UTF-8 byte order mark (EF BB BF) is skipped, so a file saved by an editor
 * that writes one reads the same everywhere. Digests stay those of the bytes as read. */
void bp_skip_bom(const char **text, size_t *len);

/* Allocation helpers: like calloc/realloc but fill err on failure. The caller frees. */
void *bp_calloc(size_t n, size_t size, struct bp_error *err);
void *bp_realloc_array(void *p, size_t n, size_t size, struct bp_error *err);
/* strdup that fills err on failure; the caller frees. */
char *bp_strdup(const char *s, struct bp_error *err);

/* Copies s into a fixed buffer of size n; returns -1 (filling err, naming what) if too long. */
int bp_strlcpy_checked(char *dst, const char *s, size_t n, const char *what,
		       struct bp_error *err);

/* Exact decimal parsing for user-given numbers, the one parser of every option and
 * parameter: the whole string must be a plain decimal number ([+-]digits; reals also with a
 * fraction and an exponent), no hex, inf, nan or spaces; reals may be subnormal, what
 * overflows or underflows to zero is out of range. Return 0 or -1 (err names what with the
 * text given: "<what> '<s>' is not an integer|not a number|out of range"). */
int bp_parse_int64(const char *s, int64_t *out, const char *what, struct bp_error *err);
int bp_parse_double(const char *s, double *out, const char *what, struct bp_error *err);
/* A token count: an integer, or one followed by k, M or G (binary: 128k = 131072, 1M =
 * 1048576), as long-context sizes are named. */
int bp_parse_tokens(const char *s, int64_t *out, const char *what, struct bp_error *err);

/* SHA-256 of a buffer as 64 lowercase hex digits plus NUL (FIPS 180-4). */
void bp_sha256_hex(const void *data, size_t len, char out[65]);

#define BP_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Checked int64 arithmetic for memory and other byte counts: *out = a * b + c; returns -1
 * (leaving *out INT64_MAX or INT64_MIN, the side it overflowed to) when the product or the
 * sum leaves int64's range, else 0. bp_i64_mul_add_sat returns that saturated value. */
int bp_i64_mul_add(int64_t a, int64_t b, int64_t c, int64_t *out);
int64_t bp_i64_mul_add_sat(int64_t a, int64_t b, int64_t c);
/* A double rounded toward zero into int64, saturated at the ends (NaN gives 0). */
int64_t bp_i64_from_real_sat(double v);

/* Return code of solvers for an infeasible problem (the front end exits 3). */
#define BP_INFEASIBLE (-3)
/* Like bp_errorf but returns BP_INFEASIBLE. */
int bp_infeasiblef(struct bp_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif
