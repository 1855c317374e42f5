/* trace_json.c: the balplan.trace/v1 codec (trace.h, executor/README.md "Trace"). Written through
 * the planner's canonical JSON helpers (sorted keys, reals rounded to 1e-3 us); read strictly
 * (unknown keys, wrong types, counts that disagree with world are errors naming the path). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "trace.h"

void bp_trace_init(struct bp_trace *t)
{
	memset(t, 0, sizeof(*t));
}

void bp_trace_release(struct bp_trace *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nsteps; i++) {
		for (size_t r = 0; r < t->steps[i].nranks; r++)
			free(t->steps[i].ranks[r].mbs);
		free(t->steps[i].ranks);
	}
	free(t->steps);
	bp_trace_init(t);
}

/* Every field named once (jsonutil.h's field tables): the reader and the writer use them.
 * Times are microseconds on a real clock: below 1e15 us (about 32 years), so that no report
 * prints a 300-digit number (issue 27 item 20). */
#define BIG 1e15
static const struct bp_field mb_fields[] = {
	BP_FIELD_REAL(struct bp_trace_mb, fwd_start_us, "fwd_start_us", 0, BIG),
	BP_FIELD_REAL(struct bp_trace_mb, fwd_us, "fwd_us", 0, BIG),
	BP_FIELD_REAL(struct bp_trace_mb, bwd_start_us, "bwd_start_us", 0, BIG),
	BP_FIELD_REAL(struct bp_trace_mb, bwd_us, "bwd_us", 0, BIG),
};
/* A rank's role in a v2 trace; "rank" itself is range-checked against the world. */
static const struct bp_field role_fields[] = {
	BP_FIELD_INT(struct bp_trace_rank, layout, "layout", 0, 1 << 24),
	BP_FIELD_INT(struct bp_trace_rank, pipe, "pipeline", -1, 1 << 24),
	BP_FIELD_INT(struct bp_trace_rank, stage, "stage", -1, 1 << 24),
	BP_FIELD_INT(struct bp_trace_rank, cp_i, "cp_i", -1, 1 << 24),
	BP_FIELD_INT(struct bp_trace_rank, tp_i, "tp_i", -1, 1 << 24),
};
static const struct bp_field rank_time_fields[] = {
	BP_FIELD_REAL(struct bp_trace_rank, step_us, "step_us", 0, BIG),
	BP_FIELD_REAL(struct bp_trace_rank, pipeline_us, "pipeline_us", 0, BIG),
	BP_FIELD_REAL(struct bp_trace_rank, grad_sync_us, "grad_sync_us", 0, BIG),
};
static const struct bp_field step_fields[] = {
	BP_FIELD_I64(struct bp_trace_step, index, "index", 0, 9.3e18),
	BP_FIELD_REAL(struct bp_trace_step, predicted_us, "predicted_us", 0, BIG),
	BP_FIELD_REAL(struct bp_trace_step, step_us, "step_us", 0, BIG),
};
static const struct bp_field top_fields[] = {
	BP_FIELD_STR(struct bp_trace, plan_sha, "plan_sha256"),
	BP_FIELD_STR(struct bp_trace, method, "method"),
	BP_FIELD_STR(struct bp_trace, backend, "backend"),
	BP_FIELD_REALF(struct bp_trace, time_scale, "time_scale", 1e-9, 1e9, BP_FF_EXACT),
	BP_FIELD_REALF(struct bp_trace, timeout_s, "timeout_s", 1e-9, 1e9, BP_FF_EXACT),
	BP_FIELD_I64(struct bp_trace, max_bytes, "max_bytes", 0, 9.3e18),
	BP_FIELD_INT(struct bp_trace, warmup, "warmup", 0, 1 << 30),
	BP_FIELD_INT(struct bp_trace, world, "world", 1, 1 << 24),
};

static json_t *fields_obj(const struct bp_field *f, size_t n, const void *base, int *ok)
{
	json_t *o = json_object();
	if (bp_json_write_fields(o, f, n, base) < 0)
		*ok = 0;
	return o;
}

static json_t *rank_to_json(const struct bp_trace_rank *r, int *ok)
{
	json_t *o = fields_obj(role_fields, BP_ARRAY_LEN(role_fields), r, ok), *mbs = json_array();
	if (bp_json_write_fields(o, rank_time_fields, BP_ARRAY_LEN(rank_time_fields), r) < 0)
		*ok = 0;
	bp_json_set(o, "rank", json_integer(r->rank), ok);
	for (size_t j = 0; mbs && j < r->nmbs; j++)
		bp_json_append(mbs, fields_obj(mb_fields, BP_ARRAY_LEN(mb_fields), &r->mbs[j], ok),
			       ok);
	bp_json_set(o, "microbatches", mbs, ok);
	return o;
}

json_t *bp_trace_to_json(const struct bp_trace *t)
{
	int ok = 1;
	json_t *root = fields_obj(top_fields, BP_ARRAY_LEN(top_fields), t, &ok);
	json_t *steps = json_array();
	bp_json_set(root, "format", json_string(BP_TRACE_FORMAT), &ok);
	for (size_t i = 0; steps && i < t->nsteps; i++) {
		const struct bp_trace_step *s = &t->steps[i];
		json_t *o = fields_obj(step_fields, BP_ARRAY_LEN(step_fields), s, &ok);
		json_t *ranks = json_array();
		for (size_t r = 0; ranks && r < s->nranks; r++)
			bp_json_append(ranks, rank_to_json(&s->ranks[r], &ok), &ok);
		bp_json_set(o, "ranks", ranks, &ok);
		bp_json_append(steps, o, &ok);
	}
	bp_json_set(root, "steps", steps, &ok);
	if (!ok) {
		json_decref(root);
		return NULL;
	}
	return root;
}

static int mb_from_json(struct bp_trace_mb *m, json_t *o, const char *where,
			struct bp_error *err)
{
	return bp_json_read_fields(o, mb_fields, BP_ARRAY_LEN(mb_fields), m, NULL, 1, where, err);
}

/* v1's global degrees, used only to range-check a v1 trace's per-rank roles. */
struct v1_degrees {
	int tp, cp, pp, dp;
};

static int rank_from_json(struct bp_trace_rank *r, json_t *o, const struct bp_trace *t,
			  const struct v1_degrees *v1, const char *where, struct bp_error *err)
{
	static const char *const keys1[] = {"rank", "tp_i", "cp_i", "dp_i", "pp_i", "step_us",
					    "pipeline_us", "grad_sync_us", "microbatches", NULL};
	static const char *const extra2[] = {"rank", "step_us", "pipeline_us", "grad_sync_us",
					     "microbatches", NULL};
	char w[300];
	if ((v1 ? bp_json_check_keys(o, keys1, where, err)
		: bp_json_read_fields(o, role_fields, BP_ARRAY_LEN(role_fields), r, extra2, 1,
				      where, err)) < 0 ||
	    bp_json_get_int32(o, "rank", 1, 0, t->world - 1, &r->rank, where, err) < 0)
		return -1;
	if (v1) {
		r->layout = 0;
		if (bp_json_get_int32(o, "tp_i", 1, 0, v1->tp - 1, &r->tp_i, where, err) < 0 ||
		    bp_json_get_int32(o, "cp_i", 1, 0, v1->cp - 1, &r->cp_i, where, err) < 0 ||
		    bp_json_get_int32(o, "dp_i", 1, 0, v1->dp - 1, &r->pipe, where, err) < 0 ||
		    bp_json_get_int32(o, "pp_i", 1, 0, v1->pp - 1, &r->stage, where, err) < 0)
			return -1;
	}
	if (bp_json_read_fields(o, rank_time_fields, BP_ARRAY_LEN(rank_time_fields), r, NULL, 0,
				where, err) < 0)
		return -1;
	json_t *mbs = bp_json_get_array(o, "microbatches", where, err);
	if (!mbs)
		return -1;
	size_t n = json_array_size(mbs);
	r->mbs = bp_calloc(n ? n : 1, sizeof(*r->mbs), err);
	if (!r->mbs)
		return -1;
	for (size_t j = 0; j < n; j++) {
		snprintf(w, sizeof(w), "%.200s.microbatches[%zu]", where, j);
		r->nmbs = j + 1;
		if (mb_from_json(&r->mbs[j], json_array_get(mbs, j), w, err) < 0)
			return -1;
	}
	return 0;
}

static int step_from_json(struct bp_trace_step *s, json_t *o, const struct bp_trace *t,
			  const struct v1_degrees *v1, const char *where, struct bp_error *err)
{
	static const char *const extra[] = {"ranks", NULL};
	char w[300];
	if (bp_json_read_fields(o, step_fields, BP_ARRAY_LEN(step_fields), s, extra, 1, where,
				err) < 0)
		return -1;
	json_t *ranks = bp_json_get_array(o, "ranks", where, err);
	if (!ranks)
		return -1;
	if (json_array_size(ranks) != (size_t)t->world)
		return bp_errorf(err, "%s.ranks has %zu entries, expected world = %d", where,
				 json_array_size(ranks), t->world);
	s->ranks = bp_calloc((size_t)t->world, sizeof(*s->ranks), err);
	if (!s->ranks)
		return -1;
	for (size_t r = 0; r < (size_t)t->world; r++) {
		snprintf(w, sizeof(w), "%.200s.ranks[%zu]", where, r);
		s->nranks = r + 1;
		if (rank_from_json(&s->ranks[r], json_array_get(ranks, r), t, v1, w, err) < 0)
			return -1;
		if (s->ranks[r].rank != (int)r)
			return bp_errorf(err, "%s.rank is %d, expected %zu (ranks are in order)", w,
					 s->ranks[r].rank, r);
	}
	return 0;
}

int bp_trace_from_json(struct bp_trace *t, json_t *root, struct bp_error *err)
{
	static const char *const keys1[] = {"format", "plan_sha256", "method", "backend",
					    "time_scale", "timeout_s", "max_bytes", "warmup",
					    "world", "cluster", "steps", NULL};
	static const char *const extra2[] = {"format", "steps", NULL};
	static const char *const ckeys[] = {"tp", "cp", "pp", "dp", NULL};
	const char *where = "trace";
	char w[64], fmt[32];
	struct v1_degrees deg, *v1 = NULL;
	if (!json_is_object(root))
		return bp_errorf(err, "trace is not a JSON object");
	if (bp_json_get_str(root, "format", 1, fmt, sizeof(fmt), where, err) < 0)
		return -1;
	if (!strcmp(fmt, BP_TRACE_FORMAT_V1))
		v1 = &deg;
	else if (strcmp(fmt, BP_TRACE_FORMAT))
		return bp_errorf(err, "unsupported format \"%s\" (expected \"%s\" or \"%s\")", fmt,
				 BP_TRACE_FORMAT, BP_TRACE_FORMAT_V1);
	if ((v1 && bp_json_check_keys(root, keys1, where, err) < 0) ||
	    bp_json_read_fields(root, top_fields, BP_ARRAY_LEN(top_fields), t, extra2, !v1, where,
				err) < 0)
		return -1;
	/* balexec's backends, or a training job's own measurements ("trainer:NAME",
	 * executor/README.md: tests/torch writes "trainer:torch-gloo") */
	if (strcmp(t->backend, "host") && strcmp(t->backend, "cuda") &&
	    (strncmp(t->backend, "trainer:", 8) || !t->backend[8]))
		return bp_errorf(err, "trace.backend \"%s\" is not host, cuda or trainer:NAME",
				 t->backend);
	if (v1) {
		json_t *cl = bp_json_get_object(root, "cluster", where, err);
		if (!cl || bp_json_check_keys(cl, ckeys, "trace.cluster", err) < 0 ||
		    bp_json_get_int32(cl, "tp", 1, 1, 1 << 24, &deg.tp, "trace.cluster", err) < 0 ||
		    bp_json_get_int32(cl, "cp", 1, 1, 1 << 24, &deg.cp, "trace.cluster", err) < 0 ||
		    bp_json_get_int32(cl, "pp", 1, 1, 1 << 24, &deg.pp, "trace.cluster", err) < 0 ||
		    bp_json_get_int32(cl, "dp", 1, 1, 1 << 24, &deg.dp, "trace.cluster", err) < 0)
			return -1;
		if ((int64_t)deg.tp * deg.cp * deg.pp * deg.dp != t->world)
			return bp_errorf(err, "trace.world is %d, not tp*cp*pp*dp = %lld", t->world,
					 (long long)deg.tp * deg.cp * deg.pp * deg.dp);
	}
	json_t *steps = bp_json_get_array(root, "steps", where, err);
	if (!steps)
		return -1;
	size_t n = json_array_size(steps);
	t->steps = bp_calloc(n ? n : 1, sizeof(*t->steps), err);
	if (!t->steps)
		return -1;
	for (size_t i = 0; i < n; i++) {
		snprintf(w, sizeof(w), "trace.steps[%zu]", i);
		t->nsteps = i + 1;
		if (step_from_json(&t->steps[i], json_array_get(steps, i), t, v1, w, err) < 0)
			return -1;
		if (i > 0 && t->steps[i].index <= t->steps[i - 1].index)
			return bp_errorf(err, "%s.index %lld is not after the previous step's", w,
					 (long long)t->steps[i].index);
	}
	return 0;
}

/* ---- the early order check: a scanner over the text that understands just enough JSON ---- */

struct scan {
	const char *p, *e;
};

static void sc_ws(struct scan *s)
{
	while (s->p < s->e && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

/* Skips a string starting at '"'; returns its raw contents (escapes left in) or -1. */
static int sc_string(struct scan *s, const char **b, size_t *n)
{
	if (s->p >= s->e || *s->p != '"')
		return -1;
	const char *q = ++s->p;
	while (s->p < s->e && *s->p != '"')
		s->p += (*s->p == '\\') ? 2 : 1;
	if (s->p >= s->e)
		return -1;
	*b = q;
	*n = (size_t)(s->p - q);
	s->p++;
	return 0;
}

/* Skips any value; -1 on text this scanner cannot follow (jansson then says what is wrong). */
static int sc_skip(struct scan *s)
{
	const char *b;
	size_t n;
	sc_ws(s);
	if (s->p >= s->e)
		return -1;
	if (*s->p == '"')
		return sc_string(s, &b, &n);
	if (*s->p != '{' && *s->p != '[') {
		while (s->p < s->e && !strchr(",}] \t\r\n", *s->p))
			s->p++;
		return 0;
	}
	size_t depth = 0;
	while (s->p < s->e) {
		char c = *s->p;
		if (c == '"') {
			if (sc_string(s, &b, &n) < 0)
				return -1;
			continue;
		}
		s->p++;
		if (c == '{' || c == '[')
			depth++;
		else if ((c == '}' || c == ']') && --depth == 0)
			return 0;
	}
	return -1;
}

static int sc_key(struct scan *s, const char **k, size_t *n)
{
	sc_ws(s);
	if (sc_string(s, k, n) < 0)
		return -1;
	sc_ws(s);
	if (s->p >= s->e || *s->p != ':')
		return -1;
	s->p++;
	sc_ws(s);
	return 0;
}

/* One step object: its "index" when it is a plain integer (else *have = 0). */
static int sc_step_index(struct scan *s, long long *index, int *have)
{
	const char *k;
	size_t n;
	*have = 0;
	if (s->p >= s->e || *s->p != '{')
		return sc_skip(s);
	s->p++;
	for (;;) {
		sc_ws(s);
		if (s->p < s->e && *s->p == '}') {
			s->p++;
			return 0;
		}
		if (sc_key(s, &k, &n) < 0)
			return -1;
		if (n == 5 && !memcmp(k, "index", 5) && !*have && s->p < s->e &&
		    (*s->p == '-' || (*s->p >= '0' && *s->p <= '9'))) {
			char num[24];
			size_t m = 0;
			while (s->p < s->e && m + 1 < sizeof(num) &&
			       (*s->p == '-' || (*s->p >= '0' && *s->p <= '9')))
				num[m++] = *s->p++;
			num[m] = 0;
			if (s->p < s->e && strchr(".eE", *s->p))
				return -1; /* not an integer: from_json says so */
			char *end;
			*index = strtoll(num, &end, 10);
			*have = *end == 0;
		} else if (sc_skip(s) < 0) {
			return -1;
		}
		sc_ws(s);
		if (s->p < s->e && *s->p == ',')
			s->p++;
	}
}

/* Walks the top-level object to "steps" and its elements' indices; fills err and returns -1
 * only for a step whose index is not after the previous one. Anything it cannot follow ends
 * the scan with 0: the full decoder reports it. */
static int order_scan(const char *text, size_t len, struct bp_error *err)
{
	struct scan s = {text, text + len};
	const char *k;
	size_t n;
	sc_ws(&s);
	if (s.p >= s.e || *s.p != '{')
		return 0;
	s.p++;
	for (;;) {
		sc_ws(&s);
		if (s.p >= s.e || *s.p == '}' || sc_key(&s, &k, &n) < 0)
			return 0;
		if (n == 5 && !memcmp(k, "steps", 5) && s.p < s.e && *s.p == '[')
			break;
		if (sc_skip(&s) < 0)
			return 0;
		sc_ws(&s);
		if (s.p < s.e && *s.p == ',')
			s.p++;
	}
	s.p++;
	long long prev = 0;
	for (size_t i = 0;; i++) {
		long long idx = 0;
		int have = 0;
		sc_ws(&s);
		if (s.p >= s.e || *s.p == ']')
			return 0;
		if (sc_step_index(&s, &idx, &have) < 0)
			return 0;
		if (have && i > 0 && idx <= prev)
			return bp_errorf(err, "trace.steps[%zu].index %lld is not after the previous "
					 "step's", i, idx);
		if (!have)
			return 0;
		prev = idx;
		sc_ws(&s);
		if (s.p < s.e && *s.p == ',')
			s.p++;
	}
}

static int trace_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_trace_from_json(out, root, err);
}

int bp_trace_parse(struct bp_trace *t, const char *text, size_t len, struct bp_error *err)
{
	bp_skip_bom(&text, &len);
	if (order_scan(text, len, err) < 0)
		return -1;
	return bp_json_parse_text(text, len, trace_cb, t, err);
}
