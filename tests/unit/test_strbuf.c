/* test_strbuf.c: the growable string (planner/base/strbuf.h, issue 28): an empty string
 * without allocation, appends across growth against a reference built by hand, formatted
 * appends that fit the room and that do not, a 100 KB string, reset, detach, and the oom
 * path (a length that would overflow size_t) keeping the string valid; and a converted
 * site: `balplan diff` (solve/diff.c) shows a layout of many pipeline schemes whole, where
 * its 160-byte description used to cut it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "diff.h"
#include "layout.h"
#include "strbuf.h"

static void test_empty(void)
{
	struct bp_sb sb = BP_SB_INIT;
	char *s;
	size_t len = 7;

	CHECK(sb.buf && sb.buf[0] == '\0' && sb.len == 0 && sb.cap == 0);
	bp_sb_reset(&sb);
	CHECK(sb.buf == bp_sb_slop && bp_sb_slop[0] == '\0');
	bp_sb_addf(&sb, "%s", "");
	CHECK(sb.len == 0 && sb.buf[0] == '\0' && !sb.oom);
	bp_sb_release(&sb);
	CHECK(sb.buf == bp_sb_slop && sb.cap == 0);
	s = bp_sb_detach(&sb, &len);
	CHECK(s && s[0] == '\0' && len == 0);
	free(s);
	CHECK(bp_sb_check(&sb, NULL) == 0);
}

/* Appends of every kind, many growths, against a plain array. */
static void test_growth(void)
{
	static char ref[200000];
	struct bp_sb sb;
	size_t n = 0;
	int i;

	bp_sb_init(&sb);
	for (i = 0; i < 5000; i++) {
		char piece[64];
		int k;

		switch (i % 3) {
		case 0:
			k = snprintf(piece, sizeof(piece), "%d,", i);
			bp_sb_addf(&sb, "%d,", i);
			break;
		case 1:
			k = snprintf(piece, sizeof(piece), "name-%03d ", i % 1000);
			bp_sb_adds(&sb, piece);
			break;
		default:
			k = 3;
			memcpy(piece, "a\0b", 3);
			bp_sb_add(&sb, piece, 3);
			break;
		}
		memcpy(ref + n, piece, (size_t)k);
		n += (size_t)k;
	}
	CHECK(!sb.oom && sb.len == n && sb.cap > n);
	CHECK(memcmp(sb.buf, ref, n) == 0 && sb.buf[n] == '\0');
	bp_sb_release(&sb);
}

/* One formatted append larger than any room so far (the second vsnprintf), then 100 KB. */
static void test_long(void)
{
	struct bp_sb sb = BP_SB_INIT;
	char *big = malloc(100001), *s;
	size_t len = 0, i;

	CHECK(big != NULL);
	if (!big)
		return;
	for (i = 0; i < 100000; i++)
		big[i] = (char)('a' + i % 26);
	big[100000] = '\0';
	bp_sb_addf(&sb, "[%s]", "x");
	bp_sb_addf(&sb, "<%s|%.3f>", big, 1.5);
	CHECK(!sb.oom && sb.len == 3 + 100000 + 8);
	CHECK(strncmp(sb.buf, "[x]<abc", 7) == 0);
	CHECK(memcmp(sb.buf + 4, big, 100000) == 0);
	CHECK(strcmp(sb.buf + 4 + 100000, "|1.500>") == 0);
	bp_sb_reset(&sb);
	CHECK(sb.len == 0 && sb.buf[0] == '\0' && sb.cap > 100000);
	bp_sb_addf(&sb, "%d-%s", 42, "ok");
	CHECK(strcmp(sb.buf, "42-ok") == 0);
	s = bp_sb_detach(&sb, &len);
	CHECK(s && strcmp(s, "42-ok") == 0 && len == 5);
	CHECK(sb.buf == bp_sb_slop && sb.len == 0 && sb.cap == 0);
	free(s);
	free(big);
}

/* A writer of 1000 letters, cut at n - 1 as snprintf cuts. */
static void write_letters(const void *arg, char *buf, size_t n)
{
	char text[1001];

	memset(text, *(const char *)arg, 1000);
	text[1000] = '\0';
	snprintf(buf, n, "%s", text);
}

static void write_short(const void *arg, char *buf, size_t n)
{
	snprintf(buf, n, "%s", (const char *)arg);
}

/* bp_sb_fill: a text longer than the first room, after what the string holds, whole. */
static void test_fill(void)
{
	struct bp_sb sb = BP_SB_INIT;

	bp_sb_adds(&sb, "head:");
	bp_sb_fill(&sb, write_letters, "q");
	CHECK(!sb.oom && sb.len == 1005 && strlen(sb.buf) == 1005);
	CHECK(strncmp(sb.buf, "head:qqq", 8) == 0 && sb.buf[1004] == 'q');
	bp_sb_fill(&sb, write_short, ":tail");
	CHECK(sb.len == 1010 && strcmp(sb.buf + 1005, ":tail") == 0);
	bp_sb_release(&sb);
}

/* A length that would overflow: oom, the string kept, later appends dropped, one check. */
static void test_oom(void)
{
	struct bp_sb sb = BP_SB_INIT;
	struct bp_error err;

	bp_sb_adds(&sb, "kept");
	bp_sb_add(&sb, "", SIZE_MAX - 2);
	CHECK(sb.oom && sb.len == 4 && strcmp(sb.buf, "kept") == 0);
	bp_sb_addf(&sb, "%s", "dropped");
	CHECK(strcmp(sb.buf, "kept") == 0);
	CHECK(bp_sb_check(&sb, &err) == -1 && strcmp(err.text, "out of memory") == 0);
	CHECK(bp_sb_detach(&sb, NULL) == NULL && !sb.oom && sb.cap == 0);
	bp_sb_adds(&sb, "again");
	bp_sb_add(&sb, "", SIZE_MAX);
	CHECK(sb.oom);
	bp_sb_reset(&sb);
	CHECK(!sb.oom && sb.len == 0);
	bp_sb_adds(&sb, "fresh");
	CHECK(strcmp(sb.buf, "fresh") == 0);
	bp_sb_release(&sb);
}

/* Plan a: one layout of 12 pipelines of distinct schemes (about 330 bytes described); plan
 * b: one pipeline. The diff's layout line holds a's description to its last field. */
static void test_diff_layout(void)
{
	struct bp_plan a, b;
	struct bp_layout l;
	struct bp_diff d;
	struct bp_error err;
	int ranks[16], rank = 0, ok = 1;

	bp_plan_init(&a);
	bp_plan_init(&b);
	bp_diff_init(&d);
	bp_layout_init(&l);
	for (int i = 0; i < 12 && ok; i++) {
		struct bp_scheme sc = {i % 4 + 1, i / 4 + 1, 1};
		for (int r = 0; r < sc.tp * sc.cp; r++)
			ranks[r] = rank++;
		ok = bp_layout_add_pipe(&l, sc, ranks, NULL, 8, 4096, &err) == 0;
	}
	CHECK(ok && bp_plan_add_layout(&a, &l, &err) == 0);
	struct bp_scheme one = {1, 1, 1};
	ranks[0] = 0;
	CHECK(bp_layout_add_pipe(&l, one, ranks, NULL, 8, 4096, &err) == 0);
	CHECK(bp_plan_add_layout(&b, &l, &err) == 0);
	CHECK(bp_plan_diff(&a, &b, 0, &d, &err) == 0);
	int seen = 0;
	for (size_t i = 0; i < d.nlines; i++) {
		const char *s = d.lines[i];
		if (strncmp(s, "layout 0: 1 x <tp 1 cp 1 pp 1>, 1 x <tp 2 cp 1 pp 1>", 52))
			continue;
		seen = 1;
		CHECK(strstr(s, "1 x <tp 4 cp 3 pp 1>, 1f1b, cap 4096 -> 1 x <tp 1 cp 1 pp 1>, "
			      "1f1b, cap 4096") != NULL);
		CHECK(strlen(s) > 300);
	}
	CHECK(seen);
	bp_layout_release(&l);
	bp_diff_release(&d);
	bp_plan_release(&a);
	bp_plan_release(&b);
}

int main(void)
{
	test_empty();
	test_growth();
	test_long();
	test_oom();
	test_fill();
	test_diff_layout();
	return CHECK_DONE();
}
