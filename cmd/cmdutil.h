/* cmdutil.h: what the front ends share: error printing, option parsing, files, and loading
 * the inputs (datasets by preset name or path, profiles from a file or made analytically).
 * Only cmd/ prints; every message is "balplan: error: <what failed>: <why>". */
#ifndef BP_CMDUTIL_H
#define BP_CMDUTIL_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "bp.h"
#include "dataset.h"
#include "embedded.h"
#include "plan.h"
#include "profile.h"

/* The planning limits solve and propose refuse requests over (their estimates:
 * cmd_solve_limits.c, cmd_propose.c); the CLI fuzz target (tests/fuzz) builds with smaller
 * ones. */
#ifndef LIMIT_MEM_GIB
#define LIMIT_MEM_GIB 4.0
#endif
#ifndef LIMIT_TIME_S
#define LIMIT_TIME_S 120.0
#endif

enum { EXIT_OK = 0, EXIT_DATA = 1, EXIT_USAGE = 2, EXIT_INFEASIBLE = 3 };

/* Prints "balplan: error: ..." to stderr; returns EXIT_DATA. */
int cmd_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "balplan: error: ..." and a hint to run --help; returns EXIT_USAGE. */
int cmd_usage(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "balplan: warning: ..." to stderr. */
void cmd_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parses an integer option in [lo, hi]; on failure prints a usage error and returns -1. */
/* As cmd_opt_int for a token count: k, M and G suffixes taken (bp_parse_tokens). */
int cmd_opt_tokens(const char *sub, const char *opt, const char *arg, int64_t lo, int64_t hi,
		   int64_t *out);
int cmd_opt_int(const char *sub, const char *opt, const char *arg, int64_t lo, int64_t hi,
		int64_t *out);

/* s for a message: itself when at most 60 bytes, else its first 48 bytes (cut at a UTF-8
 * character boundary), "...", and how many bytes were left out. The result lives in one of
 * eight static buffers, so up to eight calls may appear in one printf. */
const char *cmd_cut(const char *s);
/* The same for the first n bytes of s (not NUL-terminated there). */
const char *cmd_cut_n(const char *s, size_t n);

/* s with the five XML special characters escaped (&amp; &lt; &gt; &quot; &apos;) and control
 * characters as '?', for SVG text and attribute values: a new string (caller frees), NULL
 * when out of memory. */
char *cmd_xml_escape(const char *s);

/* 1 when path names the same file as input: the same string, or the same device and inode
 * (both exist). "-" (standard input or output) is never the same as anything. */
int cmd_same_file(const char *path, const char *input);
/* Refuses an output that would overwrite an input: when cmd_same_file(out, in), prints
 * "balplan: error: <opt> '<out>' is the <what> being read: refusing to overwrite it" and
 * returns EXIT_USAGE; else 0. */
int cmd_refuse_overwrite(const char *sub, const char *opt, const char *out, const char *what,
			 const char *in);
/* At most one file argument may be standard input: names[i] says what paths[i] is (NULL
 * paths are skipped). Prints a usage error and returns EXIT_USAGE when two are "-"; else 0. */
int cmd_one_stdin(const char *sub, size_t n, const char *const *names,
		  const char *const *paths);

/* The request's layout against the node size, before any planning (solve and propose):
 * more GPUs than one node must fill whole nodes, and a TP group (tp consecutive ranks,
 * Megatron order) must stay inside a node, so tp must divide gpus_per_node when there is
 * more than one node. Prints a usage error naming the option and returns EXIT_USAGE; else 0. */
int cmd_check_nodes(const char *sub, int64_t gpus, int64_t tp, int gpus_per_node);

/* Reads a whole file ("-" is standard input); *buf (caller frees) is NUL-terminated. */
int cmd_read_file(const char *path, char **buf, size_t *len, struct bp_error *err);
/* Writes data to path atomically (a temporary file renamed into place); "-" is stdout. */
int cmd_write_file(const char *path, const char *data, size_t len, struct bp_error *err);

/* A file written whole or not at all, by a writer that streams: open gives a->f, a
 * temporary beside path ("-": standard output); close flushes it and, unless bad, renames
 * it into place (else removes it). close keeps a message already in err, else names the
 * system's error. 0 or -1. */
struct cmd_atomic {
	FILE *f;
	char *tmp;
};
int cmd_atomic_open(struct cmd_atomic *a, const char *path, struct bp_error *err);
int cmd_atomic_close(struct cmd_atomic *a, const char *path, int bad, struct bp_error *err);

/* Loads a dataset from a preset name or a file path; name gets the dataset's name and sha
 * the sha256 of the bytes read. */
int cmd_load_dataset(const char *spec, const struct bp_read_opts *ro, struct bp_dataset *ds,
		     char sha[65], struct bp_error *err);

/* Loads a balplan.coverage/v1 file (SparseBalance's measured coverage) into an initialised
 * c; c->sha gets the sha256 of its bytes. */
struct bp_sb_coverage;
int cmd_load_coverage(const char *path, struct bp_sb_coverage *c, struct bp_error *err);

/* Loads a profile file; sha gets the sha256 of its bytes. */
/* The measured profile shipped under this name (profiler/profiles/NAME.json, embedded), or
 * NULL. */
const struct bp_embedded_file *cmd_shipped_profile(const char *name);
/* Reads a profile from path ('-': standard input), or the shipped profile of that name when
 * no such file exists; sha gets the sha256 of its bytes. */
int cmd_load_profile(const char *path, struct bp_profile *p, char sha[65],
		     struct bp_error *err);
/* Makes the analytic profile solve uses for (gpu, model, scheme, max_tokens): the grid goes
 * up to the next power of two >= max_tokens (at least 4096). sha is that of its canonical
 * JSON, so a plan made with it can be checked by regenerating it. */
int cmd_analytic_profile(const char *gpu, const char *model, const struct bp_scheme *sc,
			 size_t nsc, int64_t max_tokens, struct bp_profile *p, char sha[65],
			 struct bp_error *err);
/* GPUs per node in the analytic profiles made from here on (0: the GPU preset's). */
void cmd_analytic_gpus_per_node(int n);
/* The same for a model already resolved (a plan's model object). */
int cmd_analytic_profile_model(const char *gpu, const struct bp_model *m,
			       const struct bp_scheme *sc, size_t nsc, int64_t max_tokens,
			       struct bp_profile *p, char sha[65], struct bp_error *err);
/* A model by preset name (balplan presets) or from a Hugging Face config.json file (named
 * after its folder, or the file's stem: planner/formats/model_json.h). 0, or -1 with err
 * ("unknown model ..." when it is neither). */
int cmd_resolve_model(const char *arg, struct bp_model *m, struct bp_error *err);
/* The most distinct schemes a plan's layouts may use when its analytic profile is regenerated
 * from them (cmd_plan_profile); solve refuses more up front (cmd_hyd_candidates), so it never
 * writes a plan check, simulate and balexec cannot price. */
#define CMD_PLAN_MAX_SCHEMES 32
/* The profile a plan was made with: path when given (its sha must match when strict), else
 * the analytic profile regenerated from the plan when the plan names one (its sha must match
 * when strict; else a warning names both digests). */
int cmd_plan_profile(const struct bp_plan *plan, const char *path, int strict,
		     struct bp_profile *p, struct bp_error *err);

/* Reads and decodes a plan file. */
int cmd_load_plan(const char *path, struct bp_plan *plan, struct bp_error *err);
/* Decodes a plan from text already read from path (named in errors). */
int cmd_parse_plan(const char *path, const char *text, size_t len, struct bp_plan *plan,
		   struct bp_error *err);

/* Flushes stdout and reports a failed write; returns rc or EXIT_DATA. */
int cmd_finish(int rc);

/* The plan's parallel layout for headers: "tp 8 cp 2 pp 4 dp 1" when every step uses one
 * Megatron-like scheme, else layout 0 described by bp_layout_describe (and how many more
 * layouts there are). */
void cmd_plan_layout(const struct bp_plan *p, char *buf, size_t n);

/* ---- tables for scripts (--format text|csv|json; issue 26 item 3) ----
 * The conventions every command's --format keeps (cmd/cmd_solve.c's table first): csv is
 * RFC 4180 with one header row; json an array of objects or an object Python's json module
 * reads; numbers unformatted (the fewest of 15 to 17 significant digits that read back
 * exactly; integers as integers), units in the column names, never in cells; a number that
 * is not finite is an empty cell / null. */
enum cmd_format { CMD_FORMAT_TEXT, CMD_FORMAT_CSV, CMD_FORMAT_JSON };
/* Parses --format's argument; on failure prints "--format 'X' is not text, csv or json" as a
 * usage error of sub and returns -1. */
int cmd_opt_format(const char *sub, const char *arg, enum cmd_format *out);

/* s as a JSON string: quoted, '"', '\\' and control characters escaped, valid UTF-8 kept,
 * any byte that is not valid UTF-8 written as U+FFFD. NULL is null. */
void cmd_json_str(FILE *f, const char *s);
/* x as a JSON number (exact, in as few digits as that takes), null when not finite. */
void cmd_json_num(FILE *f, double x);
/* ", "KEY": " (or without the comma when *first, which it clears): one member of an object
 * being written; the value follows. */
void cmd_json_key(FILE *f, int *first, const char *key);
/* s as a CSV field: quoted (inner quotes doubled) when it holds a comma, a quote, CR or LF. */
void cmd_csv_str(FILE *f, const char *s);

/* One table written row by row: csv (the header row, then a line per row) or a JSON array of
 * objects, one per line ("[", " {...},", "]"). Cells come in column order; a row ends by
 * itself after its last column. cmd_table_end closes it without a final newline (the JSON
 * array may sit inside an object), so a whole output ends with one more "\n". */
struct cmd_table {
	FILE *f;
	int json;
	const char *const *cols;
	size_t ncols, col, rows;
};
void cmd_table_begin(struct cmd_table *t, FILE *f, enum cmd_format fmt,
		     const char *const *cols, size_t ncols);
void cmd_table_str(struct cmd_table *t, const char *s);
void cmd_table_num(struct cmd_table *t, double x);
void cmd_table_int(struct cmd_table *t, long long x);
void cmd_table_end(struct cmd_table *t);

/* ---- the Chrome trace event format (JSON object form; Perfetto, chrome://tracing) ----
 * Events appended to an array of traceEvents, as `balplan report --chrome` (cmd/cmd_report.c)
 * writes them for measured traces: metadata naming a process (pid) or thread (tid) and its
 * sort order, and complete events ("ph": "X", ts and dur in microseconds). ok goes to 0 when
 * something cannot be made (jsonutil.h bp_json_set). */
void cmd_chrome_meta(json_t *ev, int pid, int tid, const char *name, int *ok);
/* A complete event; args (owned, may be NULL) is attached as "args". */
void cmd_chrome_complete(json_t *ev, const char *name, const char *cat, double ts_us,
			 double dur_us, int pid, int tid, json_t *args, int *ok);

#endif
