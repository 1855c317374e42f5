/* strbuf.c: the growable string (strbuf.h). */
#include "strbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char bp_sb_slop[1];

void bp_sb_init(struct bp_sb *sb)
{
	sb->buf = bp_sb_slop;
	sb->len = 0;
	sb->cap = 0;
	sb->oom = 0;
}

int bp_sb_grow(struct bp_sb *sb, size_t extra)
{
	size_t need, cap;
	char *p;

	if (sb->oom)
		return -1;
	if (extra > SIZE_MAX - 1 - sb->len)
		goto oom;
	need = sb->len + extra + 1;
	if (need <= sb->cap)
		return 0;
	cap = sb->cap < 64 ? 64 : sb->cap;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	p = realloc(sb->cap ? sb->buf : NULL, cap);
	if (!p)
		goto oom;
	if (!sb->cap)
		p[0] = '\0';
	sb->buf = p;
	sb->cap = cap;
	return 0;
oom:
	sb->oom = 1;
	return -1;
}

void bp_sb_add(struct bp_sb *sb, const void *data, size_t n)
{
	if (bp_sb_grow(sb, n))
		return;
	memcpy(sb->buf + sb->len, data, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
}

void bp_sb_adds(struct bp_sb *sb, const char *s)
{
	bp_sb_add(sb, s, strlen(s));
}

/* The first vsnprintf writes into the room there is; only when the text did not fit does
 * it grow and format again. */
void bp_sb_vaddf(struct bp_sb *sb, const char *fmt, va_list ap)
{
	va_list cp;
	size_t room;
	int n;

	if (sb->oom)
		return;
	room = sb->cap ? sb->cap - sb->len : 0;
	va_copy(cp, ap);
	n = vsnprintf(room ? sb->buf + sb->len : NULL, room, fmt, cp);
	va_end(cp);
	if (n < 0) {
		/* an encoding error: nothing is appended */
		if (sb->cap)
			sb->buf[sb->len] = '\0';
		return;
	}
	if ((size_t)n >= room) {
		if (bp_sb_grow(sb, (size_t)n)) {
			if (sb->cap)
				sb->buf[sb->len] = '\0';
			return;
		}
		va_copy(cp, ap);
		vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, cp);
		va_end(cp);
	}
	sb->len += (size_t)n;
}

void bp_sb_addf(struct bp_sb *sb, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bp_sb_vaddf(sb, fmt, ap);
	va_end(ap);
}

void bp_sb_fill(struct bp_sb *sb, void (*fill)(const void *arg, char *buf, size_t n),
		const void *arg)
{
	size_t room = 128, n;

	for (;;) {
		if (bp_sb_grow(sb, room))
			return;
		fill(arg, sb->buf + sb->len, room + 1);
		n = strlen(sb->buf + sb->len);
		if (n < room || room > SIZE_MAX / 4) {
			sb->len += n;
			return;
		}
		room *= 2;
	}
}

void bp_sb_reset(struct bp_sb *sb)
{
	sb->len = 0;
	sb->oom = 0;
	if (sb->cap)
		sb->buf[0] = '\0';
}

void bp_sb_release(struct bp_sb *sb)
{
	if (sb->cap)
		free(sb->buf);
	bp_sb_init(sb);
}

char *bp_sb_detach(struct bp_sb *sb, size_t *len)
{
	char *s = NULL;

	if (!sb->oom && !sb->cap)
		s = calloc(1, 1);
	else if (!sb->oom)
		s = sb->buf;
	if (s && len)
		*len = sb->len;
	if (s == sb->buf)
		bp_sb_init(sb);
	else
		bp_sb_release(sb);
	return s;
}

int bp_sb_check(const struct bp_sb *sb, struct bp_error *err)
{
	if (sb->oom)
		return bp_errorf(err, "out of memory");
	return 0;
}
