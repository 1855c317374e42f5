/* strbuf.h: the planner's one growable string (issue 28: names lists, warnings, diff lines
 * and error contexts were built in fixed char arrays that truncated silently).
 *
 * A struct bp_sb always holds a NUL-terminated string at buf, also right after init: buf
 * then points at the shared empty string bp_sb_slop (cap 0), which is never written, so an
 * empty buffer costs no allocation. Appends grow buf geometrically.
 *
 * An allocation failure (or a length that would overflow size_t) sets oom and drops that
 * append and every later one: buf stays a valid string (a prefix of the intended one), so
 * callers append freely and check once at the end (bp_sb_check). */
#ifndef BP_STRBUF_H
#define BP_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

#include "bp.h"

struct bp_sb {
	char *buf;   /* the string: bp_sb_slop until the first growth */
	size_t len;  /* bytes before the NUL */
	size_t cap;  /* bytes allocated at buf; 0 while buf is bp_sb_slop */
	int oom;     /* an append was dropped */
};

extern char bp_sb_slop[1];

#define BP_SB_INIT { bp_sb_slop, 0, 0, 0 }

/* An empty string; allocates nothing. */
void bp_sb_init(struct bp_sb *sb);
/* Room for extra more bytes and the NUL. Returns 0, or -1 with oom set. */
int bp_sb_grow(struct bp_sb *sb, size_t extra);
/* Appends n bytes of data (may hold NULs), a C string, or a printf-formatted text. */
void bp_sb_add(struct bp_sb *sb, const void *data, size_t n);
void bp_sb_adds(struct bp_sb *sb, const char *s);
void bp_sb_addf(struct bp_sb *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void bp_sb_vaddf(struct bp_sb *sb, const char *fmt, va_list ap);
/* Appends the text of a writer into a caller's fixed buffer (fill(arg, buf, n) writes at
 * most n - 1 bytes and a NUL, as snprintf does, and returns nothing): a text that filled
 * the room (first 128 bytes) is written again into twice the room, until it fits. For the
 * planner's describe functions, which take a buffer. */
void bp_sb_fill(struct bp_sb *sb, void (*fill)(const void *arg, char *buf, size_t n),
		const void *arg);
/* Empties the string and clears oom; keeps the room. */
void bp_sb_reset(struct bp_sb *sb);
/* Frees the room; sb is empty (as after bp_sb_init) after. */
void bp_sb_release(struct bp_sb *sb);
/* Hands the string to the caller (free() it), its length in *len when len is not NULL; an
 * empty string is allocated here. Returns NULL when oom was set or the allocation fails.
 * sb is empty after either way. */
char *bp_sb_detach(struct bp_sb *sb, size_t *len);
/* Returns 0, or -1 with "out of memory" in err when an append was dropped. */
int bp_sb_check(const struct bp_sb *sb, struct bp_error *err);

#endif
