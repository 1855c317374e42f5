/* codec.h: the unit tests' helpers around the JSON codecs: a plan, profile or trace as text
 * (canonical, or JSON Lines for a plan), the callbacks bp_json_parse_text decodes each with,
 * and the placeholder digests tests put in a solved plan's inputs. */
#ifndef BP_TEST_CODEC_H
#define BP_TEST_CODEC_H

#include "jsonutil.h"
#include "plan.h"
#include "profile.h"
#include "trace.h"

#define TEST_DATASET_SHA "0000000000000000000000000000000000000000000000000000000000000000"
#define TEST_PROFILE_SHA "1111111111111111111111111111111111111111111111111111111111111111"

enum { TEXT_CANONICAL, TEXT_LINES };

/* j's text (malloc'd; NULL when j is NULL or out of memory); j is released. */
static inline char *json_text(json_t *j, int how)
{
	char *s = !j ? NULL : how == TEXT_LINES ? bp_json_dump_lines(j) : bp_json_dump_canonical(j);
	json_decref(j);
	return s;
}

static inline char *plan_text(const struct bp_plan *p, int how)
{
	return json_text(bp_plan_to_json(p), how);
}

static inline char *profile_text(const struct bp_profile *p)
{
	return json_text(bp_profile_to_json(p), TEXT_CANONICAL);
}

static inline char *trace_text(const struct bp_trace *t)
{
	return json_text(bp_trace_to_json(t), TEXT_CANONICAL);
}

static inline int plan_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_plan_from_json(out, root, err);
}

static inline int profile_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_profile_from_json(out, root, err);
}

static inline int trace_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_trace_from_json(out, root, err);
}

#endif
