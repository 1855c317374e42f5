/* bp.c: error records, checked allocation and number parsing, SHA-256 (FIPS 180-4) for the
 * input digests a plan records. Used by every planner module. */
#include "bp.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A message that did not fit (n: what vsnprintf wanted, negative on an encoding error) ends
 * in "..." so the cut shows. */
static void mark_cut(char *text, size_t size, int n)
{
	if (size > 3 && (n < 0 || (size_t)n >= size))
		memcpy(text + size - 4, "...", 4);
}

int bp_errorf(struct bp_error *err, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(err->text, sizeof(err->text), fmt, ap);
		va_end(ap);
		mark_cut(err->text, sizeof(err->text), n);
	}
	return -1;
}

int bp_error_prefix(struct bp_error *err, const char *fmt, ...)
{
	if (err) {
		char buf[sizeof(err->text)];
		va_list ap;
		va_start(ap, fmt);
		int w = vsnprintf(buf, sizeof(buf), fmt, ap);
		va_end(ap);
		/* buf = prefix ": " old text, cut at the buffer's end (marked) */
		size_t n = strlen(buf), old = strnlen(err->text, sizeof(err->text) - 1);
		int cut = w < 0 || (size_t)w >= sizeof(buf);
		if (n + 2 < sizeof(buf)) {
			memcpy(buf + n, ": ", 2);
			n += 2;
			size_t take = old < sizeof(buf) - 1 - n ? old : sizeof(buf) - 1 - n;
			cut |= take < old;
			memcpy(buf + n, err->text, take);
			n += take;
		} else {
			cut = 1;
		}
		buf[n] = 0;
		if (cut && n + 1 == sizeof(buf))
			mark_cut(buf, sizeof(buf), (int)sizeof(buf));
		memcpy(err->text, buf, n + 1);
	}
	return -1;
}

void *bp_calloc(size_t n, size_t size, struct bp_error *err)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		bp_errorf(err, "out of memory");
	return p;
}

void *bp_realloc_array(void *p, size_t n, size_t size, struct bp_error *err)
{
	if (size && n > SIZE_MAX / size) {
		bp_errorf(err, "out of memory");
		return NULL;
	}
	void *q = realloc(p, n && size ? n * size : 1);
	if (!q)
		bp_errorf(err, "out of memory");
	return q;
}

char *bp_strdup(const char *s, struct bp_error *err)
{
	size_t n = strlen(s) + 1;
	char *d = malloc(n);
	if (!d) {
		bp_errorf(err, "out of memory");
		return NULL;
	}
	memcpy(d, s, n);
	return d;
}

int bp_strlcpy_checked(char *dst, const char *s, size_t n, const char *what,
		       struct bp_error *err)
{
	size_t len = strlen(s);
	if (len >= n)
		return bp_errorf(err, "%s is too long (%zu bytes, at most %zu)", what, len, n - 1);
	memcpy(dst, s, len + 1);
	return 0;
}

/* The one grammar of user-given numbers (issue 27 item 22): plain decimal, nothing around
 * it. Integers: [+-]?[0-9]+. Reals: [+-]?(D+(.D*)?|.D+)([eE][+-]?D+)?. No hex, no inf or
 * nan, no leading or trailing spaces; strtoll/strtod then convert what is known to be
 * decimal. Returns 1 when the whole of s matches. */
static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int decimal_syntax(const char *s, int real)
{
	const char *p = s;
	size_t mant = 0;
	if (*p == '+' || *p == '-')
		p++;
	while (is_digit(*p))
		p++, mant++;
	if (real && *p == '.') {
		p++;
		while (is_digit(*p))
			p++, mant++;
	}
	if (!mant)
		return 0;
	if (real && (*p == 'e' || *p == 'E')) {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!is_digit(*p))
			return 0;
		while (is_digit(*p))
			p++;
	}
	return *p == 0;
}

int bp_parse_int64(const char *s, int64_t *out, const char *what, struct bp_error *err)
{
	char *end = NULL;
	if (!decimal_syntax(s, 0))
		return bp_errorf(err, "%s '%s' is not an integer", what, s);
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (end == s || *end)
		return bp_errorf(err, "%s '%s' is not an integer", what, s);
	if (errno == ERANGE)
		return bp_errorf(err, "%s '%s' is out of range", what, s);
	*out = (int64_t)v;
	return 0;
}

int bp_parse_tokens(const char *s, int64_t *out, const char *what, struct bp_error *err)
{
	size_t n = strlen(s);
	int64_t mult = 1;
	if (n > 1) {
		switch (s[n - 1]) {
		case 'k': case 'K': mult = (int64_t)1 << 10; break;
		case 'm': case 'M': mult = (int64_t)1 << 20; break;
		case 'g': case 'G': mult = (int64_t)1 << 30; break;
		default: break;
		}
	}
	if (mult == 1)
		return bp_parse_int64(s, out, what, err);
	char num[32];
	if (n - 1 >= sizeof(num))
		return bp_errorf(err, "%s '%s' is out of range", what, s);
	memcpy(num, s, n - 1);
	num[n - 1] = '\0';
	int64_t v = 0;
	if (!decimal_syntax(num, 0) || bp_parse_int64(num, &v, what, err) < 0)
		return bp_errorf(err, "%s '%s' is not a token count (an integer, or one with k, M "
				 "or G: 128k = 131072)", what, s);
	if (v > INT64_MAX / mult || v < INT64_MIN / mult)
		return bp_errorf(err, "%s '%s' is out of range", what, s);
	*out = v * mult;
	return 0;
}

/* Subnormal values (below DBL_MIN, e.g. 1e-308) are numbers like any other: strtod's ERANGE
 * for them is not an error; the caller's range decides. What underflows to zero from nonzero
 * digits, or overflows, is out of range. */
int bp_parse_double(const char *s, double *out, const char *what, struct bp_error *err)
{
	char *end = NULL;
	if (!decimal_syntax(s, 1))
		return bp_errorf(err, "%s '%s' is not a number", what, s);
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end)
		return bp_errorf(err, "%s '%s' is not a number", what, s);
	if (!isfinite(v) || (errno == ERANGE && v == 0.0 && strpbrk(s, "123456789")))
		return bp_errorf(err, "%s '%s' is out of range", what, s);
	*out = v;
	return 0;
}

/* SHA-256, FIPS 180-4 Sec. 6.2. */
static const uint32_t sha_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
	0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
	0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
	0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
	0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
	0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
	0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(uint32_t h[8], const unsigned char *p)
{
	uint32_t w[64];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) +
			      sha_k[i] + w[i];
		uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		hh = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
	h[4] += e;
	h[5] += f;
	h[6] += g;
	h[7] += hh;
}

int bp_i64_mul_add(int64_t a, int64_t b, int64_t c, int64_t *out)
{
	int64_t p;
	if (__builtin_mul_overflow(a, b, &p)) {
		*out = (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
		return -1;
	}
	if (__builtin_add_overflow(p, c, out)) {
		*out = c < 0 ? INT64_MIN : INT64_MAX;
		return -1;
	}
	return 0;
}

int64_t bp_i64_mul_add_sat(int64_t a, int64_t b, int64_t c)
{
	int64_t v;
	bp_i64_mul_add(a, b, c, &v);
	return v;
}

int64_t bp_i64_from_real_sat(double v)
{
	if (v != v)
		return 0;
	if (v >= 9223372036854775807.0) /* 2^63: the first double past INT64_MAX */
		return INT64_MAX;
	if (v <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)v;
}

void bp_sha256_hex(const void *data, size_t len, char out[65])
{
	uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
			 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	const unsigned char *p = data;
	size_t n = len;
	while (n >= 64) {
		sha_block(h, p);
		p += 64;
		n -= 64;
	}
	unsigned char tail[128] = {0};
	memcpy(tail, p, n);
	tail[n] = 0x80;
	size_t tl = n + 1 + 8 <= 64 ? 64 : 128;
	uint64_t bits = (uint64_t)len * 8;
	for (int i = 0; i < 8; i++)
		tail[tl - 1 - i] = (unsigned char)(bits >> (8 * i));
	sha_block(h, tail);
	if (tl == 128)
		sha_block(h, tail + 64);
	for (int i = 0; i < 8; i++)
		snprintf(out + 8 * i, 9, "%08x", h[i]);
}

int bp_infeasiblef(struct bp_error *err, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(err->text, sizeof(err->text), fmt, ap);
		va_end(ap);
		mark_cut(err->text, sizeof(err->text), n);
	}
	return BP_INFEASIBLE;
}

void bp_skip_bom(const char **text, size_t *len)
{
	if (*len >= 3 && !memcmp(*text, "\xef\xbb\xbf", 3)) {
		*text += 3;
		*len -= 3;
	}
}
