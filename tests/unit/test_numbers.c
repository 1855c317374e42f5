/* test_numbers.c: the one number grammar of options and parameters (bp.h bp_parse_int64,
 * bp_parse_double; issue 27 item 22): plain decimal only, no hex, inf, nan or spaces;
 * subnormal reals accepted, overflow and underflow to zero refused; and the messages. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "bp.h"
#include "check.h"
#include "sparse_dst.h"

static int int_ok(const char *s, int64_t want)
{
	struct bp_error err = {{0}};
	int64_t v = -12345;
	return bp_parse_int64(s, &v, "x", &err) == 0 && v == want;
}

static int int_bad(const char *s, const char *msg)
{
	struct bp_error err = {{0}};
	int64_t v = 0;
	return bp_parse_int64(s, &v, "x", &err) < 0 && strstr(err.text, msg);
}

static int real_ok(const char *s, double want)
{
	struct bp_error err = {{0}};
	double v = -12345;
	return bp_parse_double(s, &v, "x", &err) == 0 && v == want;
}

static int real_bad(const char *s, const char *msg)
{
	struct bp_error err = {{0}};
	double v = 0;
	return bp_parse_double(s, &v, "x", &err) < 0 && strstr(err.text, msg);
}

static int tok_ok(const char *s, int64_t want)
{
	struct bp_error err;
	int64_t v = -1;
	return bp_parse_tokens(s, &v, "x", &err) == 0 && v == want;
}

static int tok_bad(const char *s, const char *msg)
{
	struct bp_error err;
	int64_t v = 0;
	return bp_parse_tokens(s, &v, "x", &err) < 0 && strstr(err.text, msg);
}

int main(void)
{
	/* token counts: binary k, M, G suffixes */
	CHECK(tok_ok("131072", 131072));
	CHECK(tok_ok("128k", 131072));
	CHECK(tok_ok("128K", 131072));
	CHECK(tok_ok("1M", 1048576));
	CHECK(tok_ok("2g", (int64_t)2 << 30));
	CHECK(tok_bad("k", "is not an integer"));
	CHECK(tok_bad("1.5k", "is not a token count"));
	CHECK(tok_bad("0x1k", "is not a token count"));
	CHECK(tok_bad(" 1k", "is not a token count"));
	CHECK(tok_bad("1kk", "is not a token count"));
	CHECK(tok_bad("9999999999999G", "out of range"));
	CHECK(tok_bad("128q", "is not an integer"));
	CHECK(int_ok("0", 0));
	CHECK(int_ok("-7", -7));
	CHECK(int_ok("+7", 7));
	CHECK(int_ok("9223372036854775807", INT64_MAX));
	CHECK(int_bad("9223372036854775808", "out of range"));
	CHECK(int_bad("", "is not an integer"));
	CHECK(int_bad(" 1", "is not an integer"));
	CHECK(int_bad("1 ", "is not an integer"));
	CHECK(int_bad("0x10", "is not an integer"));
	CHECK(int_bad("1e3", "is not an integer"));
	CHECK(int_bad("-", "is not an integer"));
	CHECK(int_bad("1.0", "is not an integer"));

	CHECK(real_ok("1", 1.0));
	CHECK(real_ok("-2.5", -2.5));
	CHECK(real_ok(".5", 0.5));
	CHECK(real_ok("5.", 5.0));
	CHECK(real_ok("1e3", 1000.0));
	CHECK(real_ok("1E+3", 1000.0));
	CHECK(real_ok("0e-999", 0.0));
	CHECK(real_ok("1e-308", 1e-308)); /* subnormal: a number; the caller's range decides */
	CHECK(real_ok("4.9406564584124654e-324", 4.9406564584124654e-324));
	CHECK(real_ok("2.2250738585072014e-308", DBL_MIN));
	CHECK(real_bad("1e-400", "out of range"));
	CHECK(real_bad("1e309", "out of range"));
	CHECK(real_bad("0x10", "is not a number"));
	CHECK(real_bad("0x1p3", "is not a number"));
	CHECK(real_bad(" 1", "is not a number"));
	CHECK(real_bad("1 ", "is not a number"));
	CHECK(real_bad("\t1", "is not a number"));
	CHECK(real_bad("inf", "is not a number"));
	CHECK(real_bad("nan", "is not a number"));
	CHECK(real_bad("1e", "is not a number"));
	CHECK(real_bad(".", "is not a number"));
	CHECK(real_bad("", "is not a number"));
	CHECK(real_bad("1,5", "is not a number"));

	/* the sparse budget set takes the same integers */
	int *k = NULL;
	size_t n = 0;
	struct bp_error err = {{0}};
	CHECK(bp_sb_kset_parse("8,16", &k, &n, &err) == 0 && n == 2 && k[0] == 8 && k[1] == 16);
	free(k);
	k = NULL;
	CHECK(bp_sb_kset_parse("8, 16", &k, &n, &err) < 0 && !k);
	CHECK(bp_sb_kset_parse("0x8", &k, &n, &err) < 0 && !k);
	CHECK(bp_sb_kset_parse("8,", &k, &n, &err) < 0 && !k);
	return CHECK_DONE();
}
