/* cmdutil.c: shared front-end helpers (cmdutil.h). */
#include "cmdutil.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analytic.h"
#include "jsonutil.h"
#include "model_json.h"
#include "sparse_dst.h"

int cmd_error(const char *fmt, ...)
{
	va_list ap;
	fputs("balplan: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_DATA;
}

int cmd_usage(const char *sub, const char *fmt, ...)
{
	va_list ap;
	fputs("balplan: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fprintf(stderr, "see 'balplan %s%s--help'\n", sub ? sub : "", sub ? " " : "");
	return EXIT_USAGE;
}

void cmd_warn(const char *fmt, ...)
{
	va_list ap;
	fputs("balplan: warning: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cmd_opt_int(const char *sub, const char *opt, const char *arg, int64_t lo, int64_t hi,
		int64_t *out)
{
	struct bp_error err;
	int64_t v;
	if (bp_parse_int64(arg, &v, opt, &err) < 0) {
		cmd_usage(sub, "%s", err.text);
		return -1;
	}
	if (v < lo || v > hi) {
		cmd_usage(sub, "%s %lld is outside [%lld, %lld]", opt, (long long)v, (long long)lo,
			  (long long)hi);
		return -1;
	}
	*out = v;
	return 0;
}

int cmd_opt_tokens(const char *sub, const char *opt, const char *arg, int64_t lo, int64_t hi,
		   int64_t *out)
{
	struct bp_error err;
	int64_t v;
	if (bp_parse_tokens(arg, &v, opt, &err) < 0) {
		cmd_usage(sub, "%s", err.text);
		return -1;
	}
	if (v < lo || v > hi) {
		cmd_usage(sub, "%s %lld is outside [%lld, %lld]", opt, (long long)v, (long long)lo,
			  (long long)hi);
		return -1;
	}
	*out = v;
	return 0;
}

const char *cmd_cut_n(const char *s, size_t n)
{
	static char bufs[8][96];
	static unsigned next;
	char *b = bufs[next++ % 8];
	if (n <= 60) {
		snprintf(b, sizeof(bufs[0]), "%.*s", (int)n, s);
		return b;
	}
	size_t k = 48;
	while (k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80) /* not inside a UTF-8 sequence */
		k--;
	snprintf(b, sizeof(bufs[0]), "%.*s... (%zu more bytes)", (int)k, s, n - k);
	return b;
}

const char *cmd_cut(const char *s)
{
	size_t n = strlen(s);
	return n <= 60 ? s : cmd_cut_n(s, n);
}

char *cmd_xml_escape(const char *s)
{
	size_t n = 1;
	for (const char *q = s; q && *q; q++)
		n += *q == '&' ? 5 : *q == '<' || *q == '>' ? 4 : *q == '"' || *q == '\'' ? 6 : 1;
	char *out = malloc(n), *o = out;
	if (!out)
		return NULL;
	for (; s && *s; s++) {
		const char *e = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;"
			      : *s == '"' ? "&quot;" : *s == '\'' ? "&apos;" : NULL;
		if (e) {
			size_t k = strlen(e);
			memcpy(o, e, k);
			o += k;
		} else {
			*o++ = (unsigned char)*s < 0x20 ? '?' : *s;
		}
	}
	*o = 0;
	return out;
}

int cmd_same_file(const char *path, const char *input)
{
	struct stat a, b;
	if (!path || !input || !strcmp(path, "-") || !strcmp(input, "-"))
		return 0;
	if (!strcmp(path, input))
		return 1;
	return !stat(path, &a) && !stat(input, &b) && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

int cmd_refuse_overwrite(const char *sub, const char *opt, const char *out, const char *what,
			 const char *in)
{
	if (!cmd_same_file(out, in))
		return 0;
	return cmd_usage(sub, "%s '%s' is the %s being read: refusing to overwrite it", opt,
			 cmd_cut(out), what);
}

int cmd_one_stdin(const char *sub, size_t n, const char *const *names,
		  const char *const *paths)
{
	const char *first = NULL;
	for (size_t i = 0; i < n; i++) {
		if (!paths[i] || strcmp(paths[i], "-"))
			continue;
		if (first)
			return cmd_usage(sub, "%s and %s cannot both be standard input ('-')",
					 first, names[i]);
		first = names[i];
	}
	return 0;
}

int cmd_check_nodes(const char *sub, int64_t gpus, int64_t tp, int gpus_per_node)
{
	int64_t gpn = gpus_per_node > 0 ? gpus_per_node : 1;
	if (gpus <= gpn) /* one node, or part of one: nothing crosses */
		return 0;
	if (gpus % gpn)
		return cmd_usage(sub, "--gpus %lld does not fill nodes of %lld GPUs",
				 (long long)gpus, (long long)gpn);
	if (tp > gpn)
		return cmd_usage(sub, "--tp %lld: a TP group of %lld GPUs would cross nodes of "
				 "%lld GPUs", (long long)tp, (long long)tp, (long long)gpn);
	if (gpn % tp)
		return cmd_usage(sub, "--tp %lld does not divide nodes of %lld GPUs: a TP group "
				 "would cross a node", (long long)tp, (long long)gpn);
	return 0;
}

int cmd_read_file(const char *path, char **buf, size_t *len, struct bp_error *err)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	char *b = NULL;
	size_t n = 0, cap = 0;
	if (!f)
		return bp_errorf(err, "%s", strerror(errno));
	for (;;) {
		if (cap - n < 65536) {
			size_t nc = cap ? cap * 2 : 65536;
			char *nb = realloc(b, nc + 1);
			if (!nb) {
				free(b);
				if (f != stdin)
					fclose(f);
				return bp_errorf(err, "out of memory");
			}
			b = nb;
			cap = nc;
		}
		size_t r = fread(b + n, 1, cap - n, f);
		n += r;
		if (r == 0)
			break;
	}
	int bad = ferror(f);
	int e = errno;
	if (f != stdin)
		fclose(f);
	if (bad) {
		free(b);
		return bp_errorf(err, "%s", strerror(e ? e : EIO));
	}
	b[n] = 0;
	*buf = b;
	*len = n;
	return 0;
}

int cmd_atomic_open(struct cmd_atomic *a, const char *path, struct bp_error *err)
{
	a->f = NULL;
	a->tmp = NULL;
	if (!strcmp(path, "-")) {
		a->f = stdout;
		return 0;
	}
	size_t pl = strlen(path);
	a->tmp = malloc(pl + 32);
	if (!a->tmp)
		return bp_errorf(err, "out of memory");
	snprintf(a->tmp, pl + 32, "%s.tmp.%ld", path, (long)getpid());
	a->f = fopen(a->tmp, "wb");
	if (!a->f) {
		int e = errno;
		free(a->tmp);
		a->tmp = NULL;
		return bp_errorf(err, "%s", strerror(e));
	}
	return 0;
}

int cmd_atomic_close(struct cmd_atomic *a, const char *path, int bad, struct bp_error *err)
{
	bad |= fflush(a->f) != 0;
	int e = errno;
	if (a->tmp) {
		bad |= fclose(a->f) != 0;
		if (bad || rename(a->tmp, path)) {
			e = e ? e : errno;
			unlink(a->tmp);
			bad = 1;
		}
		free(a->tmp);
	}
	a->f = NULL;
	a->tmp = NULL;
	if (bad && !err->text[0]) /* a writer's own message stays */
		bp_errorf(err, "%s", strerror(e ? e : EIO));
	return bad ? -1 : 0;
}

int cmd_write_file(const char *path, const char *data, size_t len, struct bp_error *err)
{
	struct cmd_atomic a;
	if (cmd_atomic_open(&a, path, err) < 0)
		return -1;
	err->text[0] = 0;
	return cmd_atomic_close(&a, path, fwrite(data, 1, len, a.f) != len, err);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

int cmd_load_dataset(const char *spec, const struct bp_read_opts *ro, struct bp_dataset *ds,
		     char sha[65], struct bp_error *err)
{
	size_t len = 0;
	const char *text = bp_dataset_preset_text(spec, &len);
	if (text) {
		bp_sha256_hex(text, len, sha);
		if (bp_dataset_preset(ds, spec, err) < 0)
			return bp_error_prefix(err, "cannot load dataset preset '%s'", spec);
		return 0;
	}
	char *buf = NULL;
	int is_stdin = !strcmp(spec, "-");
	if (!is_stdin && !strchr(spec, '/') && !strchr(spec, '.') && access(spec, F_OK) != 0)
		return bp_errorf(err, "unknown dataset '%s' (not a preset, not a file; see "
				 "'balplan presets')", cmd_cut(spec));
	if (cmd_read_file(spec, &buf, &len, err) < 0)
		return bp_error_prefix(err, "cannot read dataset '%s'", spec);
	bp_sha256_hex(buf, len, sha);
	char name[64];
	snprintf(name, sizeof(name), "%s", is_stdin ? "stdin" : base_name(spec));
	char *dot = strrchr(name, '.');
	if (dot && dot != name)
		*dot = 0;
	int rc = bp_dataset_read(ds, buf, len, name, ro, err);
	free(buf);
	if (rc < 0)
		return bp_error_prefix(err, "cannot read dataset '%s'", spec);
	if (ds->skipped)
		cmd_warn("dataset '%s': %lld documents of 0 tokens left out (--skip-empty)",
			 cmd_cut(spec), (long long)ds->skipped);
	return 0;
}

static int profile_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_profile_from_json(out, root, err);
}

static int coverage_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_sb_coverage_from_json(out, root, err);
}

int cmd_load_coverage(const char *path, struct bp_sb_coverage *c, struct bp_error *err)
{
	char *buf = NULL;
	size_t len = 0;
	if (cmd_read_file(path, &buf, &len, err) < 0)
		return bp_error_prefix(err, "cannot read coverage file '%s'", path);
	bp_sha256_hex(buf, len, c->sha);
	int rc = bp_json_parse_text(buf, len, coverage_cb, c, err);
	free(buf);
	if (rc < 0)
		return bp_error_prefix(err, "cannot read coverage file '%s'", path);
	return 0;
}

const struct bp_embedded_file *cmd_shipped_profile(const char *name)
{
	for (size_t i = 0; name && i < bp_embedded_profiles_count; i++)
		if (!strcmp(bp_embedded_profiles[i].name, name))
			return &bp_embedded_profiles[i];
	return NULL;
}

int cmd_load_profile(const char *path, struct bp_profile *p, char sha[65],
		     struct bp_error *err)
{
	char *buf = NULL;
	size_t len = 0;
	/* A shipped profile's name, unless a file of that name exists (the file wins). */
	const struct bp_embedded_file *f = cmd_shipped_profile(path);
	if (f && access(path, F_OK) != 0) {
		bp_sha256_hex((const char *)f->data, f->len, sha);
		if (bp_json_parse_text((const char *)f->data, f->len, profile_cb, p, err) < 0)
			return bp_error_prefix(err, "cannot read the shipped profile '%s'", path);
		return 0;
	}
	if (cmd_read_file(path, &buf, &len, err) < 0)
		return bp_error_prefix(err, "cannot read profile '%s'", path);
	bp_sha256_hex(buf, len, sha);
	int rc = bp_json_parse_text(buf, len, profile_cb, p, err);
	free(buf);
	if (rc < 0)
		return bp_error_prefix(err, "cannot read profile '%s'", path);
	return 0;
}

int cmd_resolve_model(const char *arg, struct bp_model *m, struct bp_error *err)
{
	const struct bp_model *pre = bp_model_preset(arg);
	if (pre) {
		*m = *pre;
		return 0;
	}
	struct stat sb;
	if (!arg || stat(arg, &sb) != 0 || !S_ISREG(sb.st_mode))
		return bp_errorf(err, "unknown model '%s' (see 'balplan presets'; or give a Hugging "
				 "Face config.json)", cmd_cut(arg ? arg : "(null)"));
	/* The model's name: the folder of a config.json (models ship as NAME/config.json),
	 * else the file name without its extension. */
	char name[sizeof(m->name)];
	const char *base = strrchr(arg, '/');
	base = base ? base + 1 : arg;
	if (!strcmp(base, "config.json")) {
		size_t dl = (size_t)(base - arg);
		while (dl > 0 && arg[dl - 1] == '/')
			dl--;
		size_t s = dl;
		while (s > 0 && arg[s - 1] != '/')
			s--;
		if (dl > s)
			snprintf(name, sizeof(name), "%.*s", (int)(dl - s), arg + s);
		else
			snprintf(name, sizeof(name), "config");
	} else {
		const char *dot = strrchr(base, '.');
		int n = dot && dot > base ? (int)(dot - base) : (int)strlen(base);
		snprintf(name, sizeof(name), "%.*s", n, base);
	}
	char *buf = NULL;
	size_t len = 0;
	if (cmd_read_file(arg, &buf, &len, err) < 0)
		return bp_error_prefix(err, "cannot read model '%s'", cmd_cut(arg));
	int rc = bp_model_from_hf_config(buf, len, name, m, err);
	free(buf);
	if (rc < 0)
		return bp_error_prefix(err, "model '%s'", cmd_cut(arg));
	return 0;
}

int cmd_analytic_profile(const char *gpu, const char *model, const struct bp_scheme *sc,
			 size_t nsc, int64_t max_tokens, struct bp_profile *p, char sha[65],
			 struct bp_error *err)
{
	struct bp_model m;
	if (cmd_resolve_model(model, &m, err) < 0)
		return -1;
	return cmd_analytic_profile_model(gpu, &m, sc, nsc, max_tokens, p, sha, err);
}

/* GPUs per node for the analytic profiles this process makes (solve --gpus-per-node); 0:
 * the GPU preset's. */
static int analytic_gpn;

void cmd_analytic_gpus_per_node(int n)
{
	analytic_gpn = n;
}

int cmd_analytic_profile_model(const char *gpu, const struct bp_model *m,
			       const struct bp_scheme *sc, size_t nsc, int64_t max_tokens,
			       struct bp_profile *p, char sha[65], struct bp_error *err)
{
	const struct bp_gpu *pre = bp_gpu_preset(gpu);
	if (!pre)
		return bp_errorf(err, "unknown GPU '%s' (see 'balplan presets')", gpu);
	struct bp_gpu g = *pre;
	if (analytic_gpn > 0)
		g.gpus_per_node = analytic_gpn;
	return bp_profile_analytic_digest(p, &g, m, sc, nsc, max_tokens, sha, err);
}

int cmd_plan_profile(const struct bp_plan *plan, const char *path, int strict,
		     struct bp_profile *p, struct bp_error *err)
{
	char sha[65];
	if (!path && cmd_shipped_profile(plan->profile))
		path = plan->profile; /* made with a shipped profile: that one, by name */
	if (path) {
		if (cmd_load_profile(path, p, sha, err) < 0)
			return -1;
	} else {
		if (strncmp(plan->profile, "analytic", 8))
			return bp_errorf(err, "the plan was made with profile '%s': give it with "
					 "--profile", plan->profile);
		/* The schemes the plan's layouts use, distinct, in order of first use (solve
		 * makes the profile for the request's scheme, layout 0's pipeline 0). */
		struct bp_scheme sc[CMD_PLAN_MAX_SCHEMES];
		size_t nsc = 0;
		for (size_t i = 0; i < plan->nlayouts; i++)
			for (size_t k = 0; k < plan->layouts[i].npipes; k++) {
				struct bp_scheme x = plan->layouts[i].pipes[k].sc;
				size_t j = 0;
				while (j < nsc && memcmp(&sc[j], &x, sizeof(x)))
					j++;
				if (j == nsc) {
					if (nsc == BP_ARRAY_LEN(sc))
						return bp_errorf(err, "the plan's layouts use more "
								 "than %zu schemes", nsc);
					sc[nsc++] = x;
				}
			}
		cmd_analytic_gpus_per_node(plan->cluster.gpus_per_node);
		if (cmd_analytic_profile_model(plan->cluster.gpu, &plan->model, sc, nsc,
					 plan->max_tokens, p, sha, err) < 0)
			return -1;
	}
	p->recompute = plan->recompute; /* the run's settings, which the file never holds */
	p->optimizer_replicated = plan->optimizer_replicated;
	if (strict && strcmp(sha, plan->profile_sha))
		return bp_errorf(err, "profile sha256 %.12s... is not the plan's %.12s...", sha,
				 plan->profile_sha);
	/* Not strict (simulate): a profile given on purpose may differ; a regenerated one that
	 * does means the plan was made with an edited profile of the same name. */
	if (!path && strcmp(sha, plan->profile_sha))
		cmd_warn("the plan was made with a profile '%s' of sha256 %.12s..., not the "
			 "analytic one regenerated (sha256 %.12s...): the numbers shown come from "
			 "the regenerated profile; give the plan's with --profile",
			 cmd_cut(plan->profile), plan->profile_sha, sha);
	return 0;
}

int cmd_parse_plan(const char *path, const char *text, size_t len, struct bp_plan *plan,
		   struct bp_error *err)
{
	if (bp_plan_parse(plan, text, len, err) < 0)
		return bp_error_prefix(err, "cannot read plan '%s'", path);
	return 0;
}

int cmd_load_plan(const char *path, struct bp_plan *plan, struct bp_error *err)
{
	char *buf = NULL;
	size_t len = 0;
	if (cmd_read_file(path, &buf, &len, err) < 0)
		return bp_error_prefix(err, "cannot read plan '%s'", path);
	int rc = cmd_parse_plan(path, buf, len, plan, err);
	free(buf);
	return rc;
}

int cmd_finish(int rc)
{
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "balplan: error: cannot write standard output: %s\n",
			strerror(errno));
		return rc ? rc : EXIT_DATA;
	}
	return rc;
}

void cmd_plan_layout(const struct bp_plan *p, char *buf, size_t n)
{
	struct bp_scheme sc;
	int dp;
	if (bp_plan_uniform(p, &sc, &dp)) {
		snprintf(buf, n, "tp %d cp %d pp %d dp %d", sc.tp, sc.cp, sc.pp, dp);
		return;
	}
	bp_layout_describe(&p->layouts[0], buf, n);
	size_t k = strlen(buf);
	if (p->nlayouts > 1 && k < n)
		snprintf(buf + k, n - k, "; +%zu more layouts", p->nlayouts - 1);
}

/* ---- tables for scripts ---- */

int cmd_opt_format(const char *sub, const char *arg, enum cmd_format *out)
{
	if (!strcmp(arg, "text"))
		*out = CMD_FORMAT_TEXT;
	else if (!strcmp(arg, "csv"))
		*out = CMD_FORMAT_CSV;
	else if (!strcmp(arg, "json"))
		*out = CMD_FORMAT_JSON;
	else {
		cmd_usage(sub, "--format '%s' is not text, csv or json", cmd_cut(arg));
		return -1;
	}
	return 0;
}

/* The length of the valid UTF-8 sequence at s (1 to 4), or 0 when s[0] starts none
 * (overlong forms, surrogates and code points past U+10FFFF are not valid). */
static size_t utf8_len(const unsigned char *s)
{
	unsigned c = s[0];
	size_t n;
	unsigned cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void cmd_json_str(FILE *f, const char *s)
{
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		size_t n = utf8_len(p);
		if (!n) {
			fputs("\\ufffd", f);
			p++;
		} else if (*p == '"' || *p == '\\') {
			fputc('\\', f);
			fputc(*p++, f);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(f, "\\u%04x", *p++);
		} else {
			fwrite(p, 1, n, f);
			p += n;
		}
	}
	fputc('"', f);
}

/* x in the fewest significant digits (15 to 17) that read back as x: 0.1, not
 * 0.10000000000000001, and every double exactly. */
static void put_num(FILE *f, double x)
{
	char buf[32];
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, x);
		if (prec == 17 || strtod(buf, NULL) == x)
			break;
	}
	fputs(buf, f);
}

void cmd_json_num(FILE *f, double x)
{
	if (isfinite(x))
		put_num(f, x);
	else
		fputs("null", f);
}

void cmd_json_key(FILE *f, int *first, const char *key)
{
	if (!*first)
		fputs(", ", f);
	*first = 0;
	cmd_json_str(f, key);
	fputs(": ", f);
}

void cmd_csv_str(FILE *f, const char *s)
{
	if (!s)
		return;
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (const char *p = s; *p; p++) {
		if (*p == '"')
			fputc('"', f);
		fputc(*p, f);
	}
	fputc('"', f);
}

void cmd_table_begin(struct cmd_table *t, FILE *f, enum cmd_format fmt,
		     const char *const *cols, size_t ncols)
{
	*t = (struct cmd_table){.f = f, .json = fmt == CMD_FORMAT_JSON, .cols = cols,
				.ncols = ncols, .col = 0, .rows = 0};
	if (t->json) {
		fputc('[', f);
		return;
	}
	for (size_t c = 0; c < ncols; c++) {
		cmd_csv_str(f, cols[c]);
		fputc(c + 1 < ncols ? ',' : '\n', f);
	}
}

/* Before a cell: opens the row or separates it from the one before. */
static void table_cell(struct cmd_table *t)
{
	if (t->json) {
		if (!t->col)
			fputs(t->rows ? ",\n {" : "\n {", t->f);
		else
			fputs(", ", t->f);
		cmd_json_str(t->f, t->cols[t->col]);
		fputs(": ", t->f);
	} else if (t->col) {
		fputc(',', t->f);
	}
}

/* After a cell: ends the row after its last column. */
static void table_next(struct cmd_table *t)
{
	if (++t->col < t->ncols)
		return;
	fputs(t->json ? "}" : "\n", t->f);
	t->col = 0;
	t->rows++;
}

void cmd_table_str(struct cmd_table *t, const char *s)
{
	table_cell(t);
	if (t->json)
		cmd_json_str(t->f, s);
	else
		cmd_csv_str(t->f, s);
	table_next(t);
}

void cmd_table_num(struct cmd_table *t, double x)
{
	table_cell(t);
	if (t->json)
		cmd_json_num(t->f, x);
	else if (isfinite(x))
		put_num(t->f, x);
	table_next(t);
}

void cmd_table_int(struct cmd_table *t, long long x)
{
	table_cell(t);
	fprintf(t->f, "%lld", x);
	table_next(t);
}

void cmd_table_end(struct cmd_table *t)
{
	if (t->json)
		fputs("\n]", t->f);
}

/* ---- the Chrome trace event format ---- */

void cmd_chrome_meta(json_t *ev, int pid, int tid, const char *name, int *ok)
{
	for (int sort = 0; sort < 2; sort++) {
		json_t *e = json_object(), *a = json_object();
		if (sort)
			bp_json_set(a, "sort_index", json_integer(tid >= 0 ? tid : pid), ok);
		else
			bp_json_set(a, "name", json_string(name), ok);
		bp_json_set(e, "name",
			    json_string(tid >= 0 ? (sort ? "thread_sort_index" : "thread_name")
						 : (sort ? "process_sort_index" : "process_name")),
			    ok);
		bp_json_set(e, "ph", json_string("M"), ok);
		bp_json_set(e, "pid", json_integer(pid), ok);
		if (tid >= 0)
			bp_json_set(e, "tid", json_integer(tid), ok);
		bp_json_set(e, "args", a, ok);
		bp_json_append(ev, e, ok);
	}
}

void cmd_chrome_complete(json_t *ev, const char *name, const char *cat, double ts_us,
			 double dur_us, int pid, int tid, json_t *args, int *ok)
{
	json_t *e = json_object();
	bp_json_set(e, "name", json_string(name), ok);
	bp_json_set(e, "cat", json_string(cat), ok);
	bp_json_set(e, "ph", json_string("X"), ok);
	bp_json_set(e, "ts", bp_json_real(ts_us), ok);
	bp_json_set(e, "dur", bp_json_real(dur_us), ok);
	bp_json_set(e, "pid", json_integer(pid), ok);
	bp_json_set(e, "tid", json_integer(tid), ok);
	if (args)
		bp_json_set(e, "args", args, ok);
	bp_json_append(ev, e, ok);
}
