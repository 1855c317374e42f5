/* cmd_solve.c: `balplan solve`: draw global batches from a dataset, solve them with one or
 * more methods on one profile, print a comparison and write the plans. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd_propose.h"
#include "cmd_workload.h"
#include "cmdutil.h"
#include "commands.h"
#include "jsonutil.h"
#include "method.h"
#include "solve.h"
#include "solve_limits.h"
#include "sparse_dst.h"

static void solve_usage(FILE *f)
{
	fprintf(f,
		"usage: balplan solve [options]\n\n"
		"Takes --steps global batches of samples from a dataset, plans them with each\n"
		"method and predicts them on a profile with the shared cost model and 1F1B\n"
		"simulator.\n\n"
		"inputs:\n"
		"  -d, --dataset NAME|FILE  a sample index (text: a length, or 'id length', per\n"
		"                           line; JSONL; a Megatron-LM .idx), or a length\n"
		"                           distribution (v1 JSON, presets) [synthetic-longtail]\n"
		"      --length-field KEY   JSONL: integer token-count field [auto: tokens,\n"
		"                           num_tokens, length, len] (also --jsonl-field)\n"
		"      --tokens-field KEY   JSONL: token array counted for the length [auto:\n"
		"                           input_ids, tokens]\n"
		"      --id-field KEY       JSONL: integer sample id [auto: id, else the line's\n"
		"                           sample position]\n"
		"      --skip-empty         .idx: leave out documents of 0 tokens (Megatron-LM's\n"
		"                           preprocessing writes one per empty text), with a\n"
		"                           warning; refused otherwise\n"
		"  -p, --profile FILE       profile; without it an analytic one is made from\n"
		"                           --gpu and --model\n"
		CMD_WORKLOAD_HELP_GPU
		"      --gpus-per-node N    GPUs per node, for which groups cross nodes [the\n"
		"                           GPU preset's, 8]\n"
		CMD_WORKLOAD_HELP_MODEL
		"cluster:\n"
		CMD_WORKLOAD_HELP_GPUS
		"      --tp N, --cp N, --pp N  tensor, context, pipeline degrees [8, 2, 4];\n"
		"                           dp = gpus / (tp cp pp)\n"
		"sampling:\n"
		"  -L, --max-tokens N       context cap: tokens per micro-batch [131072]; wlb\n"
		"                           packs up to max_len_factor (2) times it, memory\n"
		"                           permitting (--param max_len_factor=1 keeps -L)\n"
		"      --tokens-per-step N  token budget per global batch [pp*dp*max-tokens]\n"
		"      --docs-per-step N    fixed documents per global batch instead\n"
		CMD_WORKLOAD_HELP_UNITS
		"  -n, --steps N            global batches [20; with --epochs: until the data\n"
		"                           ends]\n"
		"      --order MODE         where samples come from: file (the index's samples\n"
		"                           in its order, without replacement, epoch after\n"
		"                           epoch), shuffle (a seeded shuffle per epoch) or draw\n"
		"                           (what-if: lengths drawn with replacement from the\n"
		"                           distribution; the only mode of histograms) [file for\n"
		"                           a sample index, draw otherwise]\n"
		"      --epochs N           file, shuffle: the data ends after N epochs [none]\n"
		"      --first-step K       plan a window of the run: its steps K .. K+N-1\n"
		"                           (the methods' state from the steps before it\n"
		"                           replayed, not written) [0]\n"
		"      --flush WHEN         where a method holding documents (wlb's queues,\n"
		"                           fixed's packing window) trains them all: end (after\n"
		"                           the plan's last step, so every drawn sample trains\n"
		"                           in the plan) or data (only where the data ends: a\n"
		"                           window of a longer run, whose windows concatenate to\n"
		"                           the plan of the whole run) [end; data with\n"
		"                           --first-step]\n"
		"      --last-batch MODE    keep|drop the partial global batch where the data\n"
		"                           ends [keep]\n"
		"  -s, --seed N             seed of every random choice [1]\n"
		"      --over-length MODE   truncate|drop|error for documents over the cap\n"
		"                           [truncate]\n"
		"      --documents MODE     what the loader hands every method [whole]:\n"
		"                           whole: documents whole (plain opens a new window\n"
		"                           for one that does not fit); cut: each step's\n"
		"                           documents concatenated and cut at every --max-tokens\n"
		"                           boundary (Megatron's loader), every method packing\n"
		"                           the same pieces; per-method: plain cuts, the others\n"
		"                           keep documents whole (not like for like)\n"
		"planning:\n"
		"  -m, --method LIST        method, comma-separated methods, or 'all' [all];\n"
		"                           'all' leaves out hydraulis, sparsebalance, sb-lbb,\n"
		"                           distca and flexsp, which run when named\n"
		"      --strategies FILE    hydraulis's candidate strategies ('balplan propose\n"
		"                           -o FILE'); without it they are proposed from the\n"
		"                           dataset\n"
		"      --shard MODE         CP sharding: sequence|document|adaptive|\n"
		"                           ulysses (DeepSpeed-Ulysses SP) [sequence]\n"
		"      --param KEY=VALUE    a method parameter (repeatable); each method takes\n"
		"                           the ones it knows ('balplan presets --params M'\n"
		"                           lists method M's, with types and defaults)\n"
		"output:\n"
		"  -o, --out FILE           write the plan (one method only; '-': standard\n"
		"                           output, and no table)\n"
		"      --out-dir DIR        write DIR/<method>.json for every method\n"
		"      --plan-format F      json (one object, the default) or lines (a header\n"
		"                           line, a line per step, a summary line; --out-dir\n"
		"                           writes <method>.jsonl), planned and written\n"
		"                           --chunk-steps global batches at a time [64], so\n"
		"                           memory holds a window of steps, not the run\n"
		"      --timing             add planning time per step to the table\n"
		"      --schedule NAME      the pipeline schedule of the packing methods: 1f1b\n"
		"                           or interleaved (Megatron-LM's interleaved 1F1B,\n"
		"                           --virtual-stages model chunks per rank; a\n"
		"                           pipeline's micro-batches are made a multiple of pp\n"
		"                           by splitting the costliest at a document boundary)\n"
		"                           [1f1b]\n"
		"      --virtual-stages V   interleaved: model chunks per rank (Megatron-LM's\n"
		"                           layers per stage / --num-layers-per-virtual-\n"
		"                           pipeline-stage) [2]\n"
		"      --recompute MODE     activation recomputation: none, selective or full\n"
		"                           (Megatron-LM's granularity; full keeps each layer's\n"
		"                           input and runs its forward again before the\n"
		"                           backward; selective costs what none does, since\n"
		"                           FlashAttention never keeps what it recomputes)\n"
		"                           [none]\n"
		"      --optimizer MODE     distributed (Megatron-LM's --use-distributed-\n"
		"                           optimizer: Adam's state sharded over the data-\n"
		"                           parallel replicas) or replicated (every replica\n"
		"                           holds all of it) [distributed]; hydraulis shards it\n"
		"                           over every GPU as its paper does, either way\n"
		"      --format F           the table as text, csv (a header row of the column\n"
		"                           names below) or json (an array of objects) [text]\n"
		"      --baseline METHOD    the method speedup is measured against (one of the\n"
		"                           methods run) [plain]\n"
		"  -q, --quiet              print no table and no progress (a run over 2 s\n"
		"                           reports on standard error; BALPLAN_PROGRESS=never\n"
		"                           turns that off, =always reports every window)\n"
		"table columns (csv/json name): method; docs (documents: whole or cut);\n"
		"  step mean/p95 (step_mean_ms, step_p95_ms); ktok/s (ktok_per_s); speedup\n"
		"  (model FLOP/s over the baseline's, plain or --baseline; '-', empty or null\n"
		"  when the baseline did not run); TFLOP/s/GPU (tflops_per_gpu); MFU (mfu, a\n"
		"  fraction in csv/json); imb(WLB) (imb_wlb: the slowest micro-batch over the\n"
		"  mean, WLB-LLM Sec. 3.1); imb(SB) (imb_sb: the slowest micro-batch's fwd+bwd\n"
		"  over the step's mean, SparseBalance Eq. 11); gap(Hyd) (gap_hyd: max-min\n"
		"  pipeline time over the max, Hydraulis Sec. 3); bubble (fraction idle in the\n"
		"  pipeline); peak mem (peak_mem_gib); plan/step (plan_ms_per_step, with\n"
		"  --timing)\n\n"
		"'-' reads the dataset or the profile from standard input (one of them).\n\n"
		"limits: before planning, solve estimates each request's memory and time from\n"
		"the documents per step (--docs-per-step, or --tokens-per-step over the dataset's\n"
		"mean length), the micro-batches (tokens / --max-tokens, at least pp*dp) and the\n"
		"pipelines (dp = --gpus / (tp cp pp)); over 4 GiB or 120 s of planning (per step,\n"
		"over --steps, or over the methods) it stops with exit 2, naming the option, the\n"
		"estimate and the limit; hydraulis's trials, sparsebalance (quadratic in the\n"
		"documents per step), distca and flexsp (growing with the GPUs) are priced too.\n"
		"The ILP methods' searches have their own budget.\n\n"
		"exit status: 0 ok, 1 data or runtime error, 2 usage error, 3 infeasible\n");
}

struct result {
	const char *method;
	const char *trained; /* "whole" or "cut": the documents it trained */
	struct bp_summary s;
	double plan_ms_per_step;
};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The plan files' layout (--plan-format): one JSON object (".json") or a plan of lines
 * (".jsonl", plan.h bp_plan_write_lines). Set once from the options. */
static int plan_lines;

/* A plan of lines, written step by step (plan.h bp_plan_write_lines). */
static int write_plan_lines(const struct bp_plan *plan, const char *path)
{
	struct bp_error err = {""};
	struct cmd_atomic a;
	if (cmd_atomic_open(&a, path, &err) < 0 ||
	    cmd_atomic_close(&a, path, bp_plan_write_lines(plan, a.f, &err) < 0, &err) < 0)
		return cmd_error("cannot write plan '%s': %s", path, err.text);
	return EXIT_OK;
}

static int write_plan(const struct bp_plan *plan, const char *path)
{
	struct bp_error err;
	err.text[0] = 0;
	if (plan_lines)
		return write_plan_lines(plan, path);
	json_t *j = bp_plan_to_json(plan);
	char *text = j ? bp_json_dump_lines(j) : NULL;
	json_decref(j);
	if (!text)
		return cmd_error("cannot encode plan '%s': out of memory", path);
	int rc = cmd_write_file(path, text, strlen(text), &err);
	free(text);
	if (rc < 0)
		return cmd_error("cannot write plan '%s': %s", path, err.text);
	return EXIT_OK;
}

/* Asks every method named whether the request's layout suits it (bp_method_check_request),
 * before any of them runs: a usage error naming the method and what it needs. */
static int preflight(const struct bp_method *const *list, size_t nm, struct bp_scheme sc,
		     const struct bp_model *m, enum bp_shard shard,
		     const struct bp_schedule *sched, int64_t v)
{
	for (size_t i = 0; i < nm; i++) {
		struct bp_error err = {""};
		if (bp_method_check_request(list[i], sc, m, shard, &err) < 0)
			return cmd_usage("solve", "method '%s': %s", list[i]->name, err.text);
		if (sched && sched != bp_schedule_default() && !list[i]->schedules)
			return cmd_usage("solve", "method '%s' brings its own layouts, schedule or "
					 "attention; --schedule %s is for the packing methods "
					 "(those -m all runs)", list[i]->name, sched->name);
	}
	/* interleaving splits each stage's layers into v equal chunks (Megatron-LM's rule) */
	if (sched && sched->chunked) {
		if (sc.pp < 2)
			return cmd_usage("solve", "--schedule %s needs --pp 2 or more", sched->name);
		if (m->layers % sc.pp || (m->layers / sc.pp) % v)
			return cmd_usage("solve", "--virtual-stages %lld: model '%s' has %d layers; "
					 "interleaving needs them split evenly over pp %d stages "
					 "and each stage's into %lld chunks", (long long)v,
					 m->name, m->layers, sc.pp, (long long)v);
	}
	return EXIT_OK;
}

/* --out-dir is all or nothing: the plans go into a fresh directory beside DIR
 * (DIR.tmp.XXXXXX) and move into DIR only when every method succeeded, so a failing method
 * leaves DIR as it was. */
static int outdir_open(const char *dir, char **tmp)
{
	struct stat st;
	size_t n = strlen(dir);
	*tmp = NULL;
	if (!stat(dir, &st) && !S_ISDIR(st.st_mode))
		return cmd_error("cannot write plans into '%s': not a directory", dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	/* DIR's parents are made as mkdir -p would (they stay if a method then fails: they
	 * hold nothing of the run). */
	char *par = strndup(dir, n);
	if (!par)
		return cmd_error("cannot write plans into '%s': out of memory", dir);
	for (char *p = par + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(par, 0777) < 0 && errno != EEXIST) {
			int e = errno;
			char shown[96];
			snprintf(shown, sizeof(shown), "%s", cmd_cut(par));
			free(par);
			return cmd_error("cannot create '%s' for --out-dir '%s': %s", shown,
					 cmd_cut(dir), strerror(e));
		}
		*p = '/';
	}
	free(par);
	char *t = malloc(n + 16);
	if (!t)
		return cmd_error("cannot write plans into '%s': out of memory", dir);
	snprintf(t, n + 16, "%.*s.tmp.XXXXXX", (int)n, dir);
	if (!mkdtemp(t)) {
		int e = errno;
		free(t);
		return cmd_error("cannot create a directory beside '%s': %s", dir, strerror(e));
	}
	mode_t mask = umask(0); /* mkdtemp makes 0700; DIR gets what mkdir would give it */
	umask(mask);
	chmod(t, 0777 & ~mask);
	*tmp = t;
	return EXIT_OK;
}

static void outdir_path(char *buf, size_t n, const char *dir, const char *method)
{
	snprintf(buf, n, "%s/%s.%s", dir, method, plan_lines ? "jsonl" : "json");
}

/* Removes the temporary directory and what was written into it. */
static void outdir_abort(const char *tmp, const struct bp_method *const *list, size_t nm)
{
	char path[4096];
	for (size_t i = 0; i < nm; i++) {
		outdir_path(path, sizeof(path), tmp, list[i]->name);
		unlink(path);
	}
	rmdir(tmp);
}

/* Concurrent runs into one DIR commit one at a time (issue 27 item 10): each holds an
 * exclusive flock on DIR's parent directory (where DIR.tmp.XXXXXX lives too) from before it
 * looks at DIR until its last rename, so DIR ends with every plan of one run, never some of
 * each. The lock goes with the descriptor. */
static int outdir_commit(const char *dir, const char *tmp, const struct bp_method *const *list,
			 size_t nm)
{
	char from[4096], to[4096], parent[4096];
	struct stat st;
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	while (n > 0 && dir[n - 1] != '/')
		n--;
	while (n > 1 && dir[n - 1] == '/')
		n--;
	snprintf(parent, sizeof(parent), "%.*s", (int)(n ? n : 1), n ? dir : ".");
	int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX)) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return cmd_error("cannot lock '%s' to write plans into '%s': %s", parent, dir,
				 strerror(e));
	}
	int rc = EXIT_OK;
	if (stat(dir, &st) && errno == ENOENT && !rename(tmp, dir)) {
		close(fd);
		return EXIT_OK; /* a new DIR: one rename */
	}
	for (size_t i = 0; i < nm && rc == EXIT_OK; i++) {
		outdir_path(from, sizeof(from), tmp, list[i]->name);
		outdir_path(to, sizeof(to), dir, list[i]->name);
		if (rename(from, to))
			rc = cmd_error("cannot write plan '%s': %s", to, strerror(errno));
	}
	if (rc == EXIT_OK)
		rmdir(tmp);
	close(fd);
	return rc;
}

/* The table for scripts: csv (RFC 4180) or a JSON array (cmdutil.h cmd_table), the same
 * numbers as the text table at full precision, speedup empty / null without its baseline. */
static void print_table_data(const struct result *r, size_t n, int timing,
			     enum cmd_format fmt, double base)
{
	static const char *const cols[] = {"method", "docs", "step_mean_ms", "step_p95_ms",
					   "ktok_per_s", "speedup", "tflops_per_gpu", "mfu",
					   "imb_wlb", "imb_sb", "gap_hyd", "bubble",
					   "peak_mem_gib", "plan_ms_per_step"};
	size_t nc = BP_ARRAY_LEN(cols) - (timing ? 0 : 1);
	struct cmd_table t;
	cmd_table_begin(&t, stdout, fmt, cols, nc);
	for (size_t i = 0; i < n; i++) {
		const struct bp_summary *s = &r[i].s;
		double v[] = {s->step_mean_us / 1e3, s->step_p95_us / 1e3, s->tokens_per_s / 1e3,
			      base > 0 ? s->model_tflops_per_gpu / base : NAN,
			      s->model_tflops_per_gpu, s->mfu, s->imb_wlb_mean, s->imb_sb_mean,
			      s->gap_hyd_mean, s->bubble_mean, s->peak_mem / 1073741824.0,
			      r[i].plan_ms_per_step};
		cmd_table_str(&t, r[i].method);
		cmd_table_str(&t, r[i].trained);
		for (size_t c = 2; c < nc; c++)
			cmd_table_num(&t, v[c - 2]);
	}
	cmd_table_end(&t);
	if (fmt == CMD_FORMAT_JSON)
		printf("\n");
}

static void print_table(const struct result *r, size_t n, int timing, enum cmd_format format,
			const char *baseline)
{
	/* Speedup is model FLOP/s over the baseline's (plain, or --baseline; sim/work.h):
	 * methods that delay documents train the same work over a different number of steps,
	 * so step times alone would mislead, and a method that trains less attention (cut
	 * documents) would win on tokens per second alone. With the same work it equals the
	 * ratio of ktok/s. */
	double base = 0.0, wmin = INFINITY, wmax = 0.0;
	const struct bp_method *bm = bp_method_baseline();
	if (!baseline)
		baseline = bm ? bm->name : "";
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(r[i].method, baseline))
			base = r[i].s.model_tflops_per_gpu;
		wmin = fmin(wmin, r[i].s.model_tflop);
		wmax = fmax(wmax, r[i].s.model_tflop);
	}
	if (format != CMD_FORMAT_TEXT) {
		print_table_data(r, n, timing, format, base);
		return;
	}
	int mw = 10; /* the method column: 10 wide, or as wide as the longest name */
	for (size_t i = 0; i < n; i++)
		if ((int)strlen(r[i].method) > mw)
			mw = (int)strlen(r[i].method);
	printf("%-*s %-5s %11s %11s %8s %8s %11s %6s %9s %9s %9s %7s %9s", mw, "method", "docs",
	       "step mean", "step p95", "ktok/s", "speedup", "TFLOP/s/GPU", "MFU", "imb(WLB)",
	       "imb(SB)", "gap(Hyd)", "bubble", "peak mem");
	if (timing)
		printf(" %12s", "plan/step");
	printf("\n");
	for (size_t i = 0; i < n; i++) {
		const struct bp_summary *s = &r[i].s;
		char sp[16] = "-";
		if (base > 0)
			snprintf(sp, sizeof(sp), "%.3fx", s->model_tflops_per_gpu / base);
		printf("%-*s %-5s %8.2f ms %8.2f ms %8.1f %8s %11.1f %5.1f%% %9.3f %9.3f %9.3f "
		       "%6.1f%% %5.1f GiB", mw, r[i].method, r[i].trained, s->step_mean_us / 1e3,
		       s->step_p95_us / 1e3, s->tokens_per_s / 1e3, sp, s->model_tflops_per_gpu,
		       100.0 * s->mfu, s->imb_wlb_mean, s->imb_sb_mean, s->gap_hyd_mean,
		       100.0 * s->bubble_mean, s->peak_mem / 1073741824.0);
		if (timing)
			printf(" %9.3f ms", r[i].plan_ms_per_step);
		printf("\n");
	}
	/* Acceptance of issue 10 item 1: no method wins by training less attention unseen. */
	if (n > 1 && wmax > 0 && (wmax - wmin) / wmax > 1e-4)
		printf("note: the methods train different work (%.1f to %.1f model PFLOP): compare "
		       "speedup, TFLOP/s/GPU and MFU, which are work-normalised, not ktok/s\n",
		       wmin / 1e3, wmax / 1e3);
}

/* A streamed plan's steps, parked in a temporary file until the header (known at the end:
 * the run's length, the stream's end) can be written first. */
struct streamed_out {
	FILE *steps;
	int cut;          /* some span starts inside its document: the documents trained are cut */
	int progress;     /* report on stderr (not -q) */
	const char *method;
	size_t method_i, nmethods;
	int64_t steps_total; /* the run's steps as estimated (--epochs: about), 0 unknown */
	int64_t steps_done, steps_told;
	double t0, last;  /* ms */
};

/* Progress of a long run on stderr (issue 26 item 4): the first report after 2 s, then at
 * most every 2 s: the method (and which of how many), the steps planned of the run's, the
 * time so far and an estimate of the rest; over a line of its own when stderr is a
 * terminal, as plain lines otherwise; nothing with -q. */
static void report_progress(struct streamed_out *so, int final)
{
	double t = now_ms();
	/* BALPLAN_PROGRESS: never (none), always (every window, whatever the time: what a
	 * test can rely on), else after 2 s; so the output of a run never depends on how fast
	 * the machine is unless asked */
	const char *env = getenv("BALPLAN_PROGRESS");
	if (env && !strcmp(env, "never"))
		return;
	if (env && !strcmp(env, "always") && so->progress && !final) {
		so->last = t - 2000.0;
	}
	if (!so->progress || (!final && t - so->last < 2000.0) ||
	    (final && (so->last == so->t0 || so->steps_told == so->steps_done)))
		return;
	so->steps_told = so->steps_done;
	int tty = isatty(STDERR_FILENO);
	char of[64] = "", left[64] = "", which[48] = "";
	if (so->nmethods > 1)
		snprintf(which, sizeof(which), " (%zu of %zu)", so->method_i + 1, so->nmethods);
	if (so->steps_total > 0) {
		snprintf(of, sizeof(of), " of %lld",
			 (long long)so->steps_total);
		if (!final && so->steps_done > 0 && so->steps_done < so->steps_total)
			snprintf(left, sizeof(left), ", about %.0f s left",
				 (t - so->t0) / 1e3 * (double)(so->steps_total - so->steps_done) /
					 (double)so->steps_done);
	}
	fprintf(stderr, "%sbalplan: solve: method '%s'%s: %lld%s steps planned in %.1f s%s%s",
		tty ? "\r" : "", so->method, which, (long long)so->steps_done, of,
		(t - so->t0) / 1e3, left, tty && !final ? "" : "\n");
	so->last = t;
}

/* bp_solve_progress's report: steps planned so far. */
static void solve_progress(void *arg, int64_t steps)
{
	struct streamed_out *so = arg;
	so->steps_done = steps;
	report_progress(so, 0);
}

static int sink_steps(void *arg, const struct bp_plan *w, struct bp_error *err)
{
	struct streamed_out *so = arg;
	so->cut |= !strcmp(bp_plan_documents_trained(w), "cut");
	so->steps_done += (int64_t)w->nsteps;
	report_progress(so, 0);
	return bp_plan_write_steps(w, so->steps, err);
}

static int solve_streamed(const struct bp_dataset *ds, const struct bp_profile *prof,
			  const struct bp_solve_opts *o, int64_t chunk, struct streamed_out *so,
			  struct bp_plan *header, struct bp_error *err)
{
	so->steps = tmpfile();
	if (!so->steps)
		return bp_errorf(err, "cannot make a temporary file for the steps: %s",
				 strerror(errno));
	struct bp_solve_sink sink = {sink_steps, so};
	so->method = o->method;
	so->t0 = so->last = now_ms();
	int r = bp_solve_stream(ds, prof, o, (size_t)chunk, &sink, header, err);
	report_progress(so, 1);
	if (r < 0) {
		fclose(so->steps);
		so->steps = NULL;
	}
	return r;
}

/* Header line, the parked step lines, summary line: to a temporary file renamed into place
 * ('-': standard output). Closes so->steps. */
static int write_streamed(const struct bp_plan *header, struct streamed_out *so,
			  const char *path)
{
	struct bp_error err = {""};
	struct cmd_atomic a;
	int rc = EXIT_OK;
	if (cmd_atomic_open(&a, path, &err) < 0) {
		rc = cmd_error("cannot write plan '%s': %s", path, err.text);
		goto out;
	}
	int bad = bp_plan_write_header(header, a.f, &err) < 0;
	rewind(so->steps);
	char buf[1 << 16];
	size_t n;
	while (!bad && (n = fread(buf, 1, sizeof(buf), so->steps)) > 0)
		bad = fwrite(buf, 1, n, a.f) != n;
	bad |= ferror(so->steps) != 0;
	bad = bad || bp_plan_write_summary(header, a.f, &err) < 0;
	if (cmd_atomic_close(&a, path, bad, &err) < 0)
		rc = cmd_error("cannot write plan '%s': %s", path, err.text);
out:
	fclose(so->steps);
	so->steps = NULL;
	return rc;
}

/* The options of a run as parsed (solve_parse) and completed (solve_check, solve_pick). */
struct solve_args {
	struct cmd_workload w; /* the options propose takes too */
	const char *tokens_field, *id_field;
	const char *methods, *out, *out_dir, *strategies;
	const char *baseline; /* --baseline: speedup's reference method [plain] */
	int skip_empty;
	struct bp_param params[32];
	size_t nparams;
	int64_t tp, cp, pp;
	int64_t steps, seed, epochs, chunk_steps, first_step;
	int flush_data, first_set;              /* --flush: -1 not given */
	const struct bp_schedule *sched;        /* --schedule; NULL: 1f1b */
	int64_t vstages;                        /* --virtual-stages; 0: not given */
	enum bp_order order;
	enum bp_last_batch last;
	int order_set, steps_set, last_set;
	int timing, quiet;
	enum cmd_format table_format;
	enum bp_recompute recompute;
	int opt_replicated;
	int64_t gpn_opt;
	enum bp_documents documents;
	enum bp_shard shard;
	/* completed */
	int64_t dp;
	int64_t est_steps;    /* the steps the limits are estimated for (solve_load_dataset) */
	const char *cov_file; /* --param sb_coverage=measured:FILE's FILE, or NULL */
	const char *batching; /* --param sb_batching's value: the packing method it names takes
			       * its own parameters */
	const struct bp_method *list[64];
	size_t nm;
	int strategies_in; /* a method named takes candidate strategies (BP_INPUT_STRATEGIES) */
};

/* A method's own analytic profile (its row's profile_schemes). */
struct own_profile {
	struct bp_profile prof;
	char sha[65];
};

/* What a run reads and makes before and while its methods plan. */
struct solve_run {
	struct bp_dataset ds;
	char ds_sha[65];
	struct bp_profile prof;
	char prof_sha[65];
	/* the candidate strategies (BP_INPUT_STRATEGIES) and the profile their method plans on:
	 * the file, or analytic with its layouts' schemes */
	struct bp_profile hprof;
	struct bp_hyd_set hset;
	char hprof_sha[65];
	struct own_profile *own[64]; /* list[i]'s own analytic profile, or NULL */
	struct bp_sb_coverage sbcov; /* measured coverage (BP_INPUT_COVERAGE) */
	int have_sbcov;
	struct result res[64];
	char *tmp_dir; /* --out-dir's temporary directory */
};

/* solve's steps return this to go on, or an exit status to stop with. */
#define SOLVE_GO (-1)
#define SOLVE_UNKNOWN (-2) /* parse_opt: not an option of solve's */

static const struct option solve_opts[] = {
	CMD_WORKLOAD_OPTIONS,
	{"length-field", required_argument, NULL, 'J'},
	{"tokens-field", required_argument, NULL, 'j'},
	{"id-field", required_argument, NULL, 'I'},
	{"skip-empty", no_argument, NULL, 'e'},
	{"order", required_argument, NULL, 'X'},
	{"epochs", required_argument, NULL, 'E'},
	{"last-batch", required_argument, NULL, 'B'},
	{"tp", required_argument, NULL, 'T'},
	{"cp", required_argument, NULL, 'C'},
	{"pp", required_argument, NULL, 'P'},
	{"steps", required_argument, NULL, 'n'},
	{"seed", required_argument, NULL, 's'},
	{"documents", required_argument, NULL, 'W'},
	{"method", required_argument, NULL, 'm'},
	{"shard", required_argument, NULL, 'S'},
	{"out", required_argument, NULL, 'o'},
	{"out-dir", required_argument, NULL, 'R'},
	{"plan-format", required_argument, NULL, 'F'},
	{"chunk-steps", required_argument, NULL, 'H'},
	{"first-step", required_argument, NULL, 1001},
	{"flush", required_argument, NULL, 1002},
	{"timing", no_argument, NULL, 't'},
	{"format", required_argument, NULL, 'f'},
	{"baseline", required_argument, NULL, 1003},
	{"recompute", required_argument, NULL, 'r'},
	{"optimizer", required_argument, NULL, 1004},
	{"schedule", required_argument, NULL, 1005},
	{"virtual-stages", required_argument, NULL, 1006},
	{"gpus-per-node", required_argument, NULL, 'N'},
	{"param", required_argument, NULL, 'Q'},
	{"strategies", required_argument, NULL, 'Y'},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

static void solve_defaults(struct solve_args *a)
{
	memset(a, 0, sizeof(*a));
	cmd_workload_defaults(&a->w);
	a->methods = "all";
	a->tp = 8;
	a->cp = 2;
	a->pp = 4;
	a->steps = 20;
	a->seed = 1;
	a->chunk_steps = 64;
	a->flush_data = -1;
	a->order = BP_ORDER_DRAW;
	a->last = BP_LAST_KEEP;
	a->table_format = CMD_FORMAT_TEXT;
	a->recompute = BP_RECOMPUTE_NONE;
	a->documents = BP_DOCS_WHOLE;
	a->shard = BP_SHARD_SEQUENCE;
}

/* --param KEY=VALUE: one value per key, at most 32. */
static int add_param(struct solve_args *a, const char *arg)
{
	struct bp_param *params = a->params;
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg || !eq[1])
		return cmd_usage("solve", "--param '%s' is not KEY=VALUE", cmd_cut(arg));
	if (a->nparams == 32)
		return cmd_usage("solve", "at most 32 --param options");
	size_t kl = (size_t)(eq - arg);
	if (kl >= sizeof(params[0].key))
		return cmd_usage("solve", "--param key '%.*s' is longer than %zu bytes",
				 (int)(kl > 48 ? 48 : kl), arg, sizeof(params[0].key) - 1);
	if (strlen(eq + 1) >= sizeof(params[0].value))
		return cmd_usage("solve", "--param %.*s: value '%s' is longer than %zu bytes",
				 (int)kl, arg, cmd_cut(eq + 1), sizeof(params[0].value) - 1);
	for (size_t k = 0; k < a->nparams; k++) /* one value per key (issue 27) */
		if (strlen(params[k].key) == kl && !memcmp(params[k].key, arg, kl))
			return cmd_usage("solve", "--param %s is given twice ('%s' and '%s')",
					 params[k].key, cmd_cut(params[k].value), cmd_cut(eq + 1));
	memset(&params[a->nparams], 0, sizeof(params[0]));
	memcpy(params[a->nparams].key, arg, kl);
	strcpy(params[a->nparams].value, eq + 1);
	a->nparams++;
	return SOLVE_GO;
}

static const struct cmd_workload_spec solve_workload = {
	.cmd = "solve", .gpus_max = 1 << 20, .tokens_min = 1, .tokens_max = (int64_t)1 << 40,
	.overlen_error = 1};

/* One option c with its argument arg (getopt's optarg). */
static int parse_opt(struct solve_args *a, int c, const char *arg)
{
	int wr = cmd_workload_opt(&a->w, &solve_workload, c, arg), bad = 0;
	if (wr != CMD_WORKLOAD_OTHER)
		return wr ? wr : SOLVE_GO;
	switch (c) {
	case 'j': a->tokens_field = arg; break;
	case 'I': a->id_field = arg; break;
	case 'e': a->skip_empty = 1; break;
	case 'X':
		if (bp_order_parse(arg, &a->order) < 0)
			return cmd_usage("solve", "--order '%s' is not file, shuffle or draw",
					 cmd_cut(arg));
		a->order_set = 1;
		break;
	case 'E': bad = cmd_opt_int("solve", "--epochs", arg, 1, 1000000, &a->epochs); break;
	case 'B':
		if (bp_last_batch_parse(arg, &a->last) < 0)
			return cmd_usage("solve", "--last-batch '%s' is not keep or drop",
					 cmd_cut(arg));
		a->last_set = 1;
		break;
	case 'T': bad = cmd_opt_int("solve", "--tp", arg, 1, 1 << 20, &a->tp); break;
	case 'C': bad = cmd_opt_int("solve", "--cp", arg, 1, 1 << 20, &a->cp); break;
	case 'P': bad = cmd_opt_int("solve", "--pp", arg, 1, 1 << 20, &a->pp); break;
	case 'n': bad = cmd_opt_int("solve", "--steps", arg, 1, 1000000, &a->steps);
		a->steps_set = 1;
		break;
	case 's': bad = cmd_opt_int("solve", "--seed", arg, 0, INT64_MAX, &a->seed); break;
	case 'W':
		if (bp_documents_parse(arg, &a->documents) < 0)
			return cmd_usage("solve", "--documents '%s' is not whole, cut or per-method",
					 cmd_cut(arg));
		break;
	case 'm': a->methods = arg; break;
	case 'S':
		if (bp_shard_parse(arg, &a->shard) < 0)
			return cmd_usage("solve", "--shard '%s' is not sequence, document, adaptive "
					 "or ulysses", cmd_cut(arg));
		break;
	case 'Q': return add_param(a, arg);
	case 'o': a->out = arg; break;
	case 'R': a->out_dir = arg; break;
	case 'H': bad = cmd_opt_int("solve", "--chunk-steps", arg, 1, 1 << 20, &a->chunk_steps);
		break;
	case 'F':
		if (strcmp(arg, "json") && strcmp(arg, "lines"))
			return cmd_usage("solve", "--plan-format '%s' is not json or lines",
					 cmd_cut(arg));
		plan_lines = !strcmp(arg, "lines");
		break;
	case 'Y': a->strategies = arg; break;
	case 't': a->timing = 1; break;
	case 1001: bad = cmd_opt_int("solve", "--first-step", arg, 0, INT64_C(1) << 40,
				    &a->first_step);
		a->first_set = 1;
		break;
	case 1002:
		if (strcmp(arg, "end") && strcmp(arg, "data"))
			return cmd_usage("solve", "--flush '%s' is not end or data", arg);
		a->flush_data = !strcmp(arg, "data");
		break;
	case 1005:
		a->sched = bp_schedule_find(arg);
		if (!a->sched || a->sched->world_ticks) {
			char names[128];
			bp_schedule_names(names, sizeof(names));
			return cmd_usage("solve", "--schedule '%s' is not 1f1b or interleaved (the "
					 "table: %s; distca-ticks comes with -m distca)",
					 cmd_cut(arg), names);
		}
		break;
	case 1006: bad = cmd_opt_int("solve", "--virtual-stages", arg, 1, 64, &a->vstages); break;
	case 'q': a->quiet = 1; break;
	case 'N': bad = cmd_opt_int("solve", "--gpus-per-node", arg, 1, 1024, &a->gpn_opt); break;
	case 1004:
		if (strcmp(arg, "distributed") && strcmp(arg, "replicated"))
			return cmd_usage("solve", "--optimizer '%s' is not distributed or replicated",
					 cmd_cut(arg));
		a->opt_replicated = !strcmp(arg, "replicated");
		break;
	case 'r':
		if (bp_recompute_parse(arg, &a->recompute) < 0)
			return cmd_usage("solve", "--recompute '%s' is not none, selective or full",
					 cmd_cut(arg));
		break;
	case 'f':
		if (cmd_opt_format("solve", arg, &a->table_format) < 0)
			return EXIT_USAGE;
		break;
	case 1003: a->baseline = arg; break;
	default: return SOLVE_UNKNOWN;
	}
	return bad ? EXIT_USAGE : SOLVE_GO;
}

static int solve_parse(int argc, char **argv, struct solve_args *a)
{
	int c;
	solve_defaults(a);
	plan_lines = 0; /* the CLI fuzz target calls cmd_solve many times in one process */
	while ((c = getopt_long(argc, argv, "d:p:g:L:n:s:m:o:qh", solve_opts, NULL)) != -1) {
		if (c == 'h') {
			solve_usage(stdout);
			return EXIT_OK;
		}
		int r = parse_opt(a, c, optarg);
		if (r == SOLVE_UNKNOWN)
			return cmd_usage("solve", "unknown or incomplete option '%s'",
					 cmd_cut(argv[optind - 1]));
		if (r != SOLVE_GO)
			return r;
	}
	if (optind < argc)
		return cmd_usage("solve", "unexpected argument '%s'", cmd_cut(argv[optind]));
	return SOLVE_GO;
}

/* The options against each other, before any input is read. */
static int solve_check(struct solve_args *a)
{
	int r = cmd_workload_check_inputs(&a->w, "solve");
	if (r)
		return r;
	if (a->w.profile && a->gpn_opt)
		return cmd_usage("solve", "--gpus-per-node is for the analytic profile: a profile "
				 "file gives its own (hardware.gpus_per_node)");
	cmd_analytic_gpus_per_node((int)a->gpn_opt);
	/* Unknown names are usage errors, found before any work (a config.json that cannot be
	 * read is a data error). */
	struct bp_model chk;
	if (!a->w.profile && (r = cmd_workload_hardware(&a->w, "solve", &chk, NULL)) != 0)
		return r;
	if ((r = cmd_workload_check_step(&a->w, "solve")) != 0)
		return r;
	if (a->out && a->out_dir)
		return cmd_usage("solve", "--out and --out-dir exclude each other");
	/* the coverage file (--param sb_coverage=measured:FILE, BP_INPUT_COVERAGE): an input
	 * like the others, for standard input and for overwriting */
	for (size_t i = 0; i < a->nparams; i++)
		if (!strcmp(a->params[i].key, "sb_coverage") &&
		    !strncmp(a->params[i].value, "measured:", 9))
			a->cov_file = a->params[i].value + 9;
	{
		const char *names[] = {"--dataset", "--profile", "--strategies",
				       "--param sb_coverage=measured:"};
		const char *paths[] = {a->w.dataset, a->w.profile, a->strategies, a->cov_file};
		r = cmd_one_stdin("solve", 4, names, paths);
		if (r)
			return r;
	}
	if (a->out && !strcmp(a->out, "-"))
		a->quiet = 1; /* the plan is standard output: no table mixed into it */
	int64_t tp = a->tp, cp = a->cp, pp = a->pp;
	if (a->w.gpus % (tp * cp * pp))
		return cmd_usage("solve", "%lld GPUs are not divisible by tp*cp*pp = %lld",
				 (long long)a->w.gpus, (long long)(tp * cp * pp));
	/* The layout against the node size, before any input is read (issue 27 item 17); with
	 * --profile, once it is read, before planning. */
	if (!a->w.profile && bp_gpu_preset(a->w.gpu)) {
		r = cmd_check_nodes("solve", a->w.gpus, tp, bp_gpu_preset(a->w.gpu)->gpus_per_node);
		if (r)
			return r;
	}
	a->dp = a->w.gpus / (tp * cp * pp);
	if (a->w.tps < 0 && a->w.dps == 0)
		a->w.tps = pp * a->dp * a->w.max_tokens;
	if (a->w.tps < 0)
		a->w.tps = 0;
	if (a->w.tps > 0 && a->w.tps < a->w.max_tokens)
		return cmd_usage("solve", "--tokens-per-step %lld is below --max-tokens %lld",
				 (long long)a->w.tps, (long long)a->w.max_tokens);
	return SOLVE_GO;
}

/* -m: 'all' (the rows that say in_all), or names walked in place, any length: a name is
 * never cut, so an error names what the user typed. */
static int pick_methods(struct solve_args *a)
{
	const struct bp_method **list = a->list;
	size_t nm = 0;
	if (!strcmp(a->methods, "all")) {
		for (size_t i = 0; i < bp_method_count() && nm < 64; i++)
			if (bp_method_in_all(bp_method_at(i)))
				list[nm++] = bp_method_at(i);
	} else {
		for (const char *p = a->methods; *p;) {
			size_t n = strcspn(p, ",");
			if (n) {
				const struct bp_method *m = NULL;
				for (size_t i = 0; i < bp_method_count(); i++) {
					const char *name = bp_method_at(i)->name;
					if (strlen(name) == n && !memcmp(name, p, n))
						m = bp_method_at(i);
				}
				if (!m)
					return cmd_usage("solve", "unknown method '%s' (see 'balplan "
							 "presets')", cmd_cut_n(p, n));
				for (size_t k = 0; k < nm; k++)
					if (list[k] == m)
						return cmd_usage("solve", "method '%s' is listed twice",
								 m->name);
				list[nm++] = m; /* distinct methods: nm <= bp_method_count() */
			}
			p += n + (p[n] == ',');
		}
		if (!nm)
			return cmd_usage("solve", "--method names no method");
	}
	a->nm = nm;
	return SOLVE_GO;
}

/* The name of the method whose input is the candidate strategies (its row's input), for the
 * message that --strategies is its. */
static const char *strategies_method(void)
{
	for (size_t i = 0; i < bp_method_count(); i++)
		if (bp_method_at(i)->input == BP_INPUT_STRATEGIES)
			return bp_method_at(i)->name;
	return "(none)";
}

/* The methods and what they are asked: the list, --out, --baseline, the schedule, every
 * method's layout constraints, --strategies and the parameters. */
static int solve_pick(struct solve_args *a)
{
	int r = pick_methods(a);
	if (r != SOLVE_GO)
		return r;
	const struct bp_method *const *list = a->list;
	size_t nm = a->nm;
	if (a->out && nm != 1)
		return cmd_usage("solve", "--out takes one method; use --out-dir for %zu", nm);
	if (a->baseline) { /* speedup's reference must be in the table */
		size_t k = 0;
		while (k < nm && strcmp(list[k]->name, a->baseline))
			k++;
		if (k == nm)
			return cmd_usage("solve", "--baseline '%s' is not among the methods run "
					 "(-m %s)", cmd_cut(a->baseline), cmd_cut(a->methods));
	}
	const struct bp_schedule *sched = a->sched;
	if (a->vstages && (!sched || !sched->chunked))
		return cmd_usage("solve", "--virtual-stages is for --schedule interleaved");
	if (sched && sched->chunked && !a->vstages)
		a->vstages = 2;
	if (sched && sched->chunked && a->vstages < 2)
		return cmd_usage("solve", "--virtual-stages %lld: interleaving needs 2 or more "
				 "(1 is --schedule 1f1b)", (long long)a->vstages);
	/* Every method's layout constraints before any work (with --profile, once it is read:
	 * its model decides). */
	if (!a->w.profile) {
		struct bp_model rm;
		struct bp_error merr = {""};
		struct bp_scheme sc = {(int)a->tp, (int)a->cp, (int)a->pp};
		if (cmd_resolve_model(a->w.model, &rm, &merr) == 0 &&
		    (r = preflight(list, nm, sc, &rm, a->shard, sched, a->vstages)) != EXIT_OK)
			return r;
	}
	for (size_t i = 0; i < nm; i++)
		a->strategies_in |= list[i]->input == BP_INPUT_STRATEGIES;
	if (a->strategies && !a->strategies_in)
		return cmd_usage("solve", "--strategies is for method %s (-m %s)",
				 strategies_method(), strategies_method());
	if (a->strategies) {
		const char *names[] = {"--dataset", "--profile", "--strategies"};
		const char *paths[] = {a->w.dataset, a->w.profile, a->strategies};
		r = cmd_one_stdin("solve", 3, names, paths);
		if (r)
			return r;
	}
	for (size_t i = 0; i < a->nparams; i++)
		if (!strcmp(a->params[i].key, "sb_batching"))
			a->batching = a->params[i].value;
	for (size_t i = 0; i < a->nparams; i++) {
		int used = 0;
		for (size_t k = 0; k < nm; k++)
			used |= bp_method_takes(list[k], a->params[i].key, a->batching);
		if (!used)
			return cmd_usage("solve", "no method chosen takes parameter '%s'",
					 a->params[i].key);
	}
	return SOLVE_GO;
}

/* No output may overwrite an input: the dataset file (a preset is no file), the profile, the
 * strategies file or the coverage file, by name or by device and inode. */
static int check_overwrite(const struct solve_args *a)
{
	const char *ds = a->w.dataset;
	const char *ds_file = bp_dataset_preset_text(ds, &(size_t){0}) ? NULL : ds;
	for (size_t i = 0; i < (a->out ? 1 : a->out_dir ? a->nm : 0); i++) {
		char path[4096];
		const char *opt = "--out";
		if (a->out)
			snprintf(path, sizeof(path), "%s", a->out);
		else
			outdir_path(path, sizeof(path), a->out_dir, a->list[i]->name);
		for (int k = 0; k < 4; k++) {
			const char *const ins[] = {ds_file, a->w.profile, a->strategies,
						   a->cov_file};
			const char *const whats[] = {"dataset", "profile", "strategies file",
						     "coverage file"};
			const char *in = ins[k], *what = whats[k];
			if (a->out && cmd_refuse_overwrite("solve", opt, path, what, in))
				return EXIT_USAGE;
			if (!a->out && cmd_same_file(path, in))
				return cmd_usage("solve", "--out-dir '%s' would overwrite '%s', the %s "
						 "being read", cmd_cut(a->out_dir), cmd_cut(path), what);
		}
	}
	return SOLVE_GO;
}

static void solve_run_init(struct solve_run *r)
{
	memset(r, 0, sizeof(*r));
	bp_dataset_init(&r->ds);
	bp_profile_init(&r->prof);
	bp_profile_init(&r->hprof);
	bp_hyd_set_init(&r->hset);
	bp_sb_coverage_init(&r->sbcov);
}

static void solve_run_release(struct solve_run *r, const struct solve_args *a, int rc)
{
	if (r->tmp_dir) {
		if (rc != EXIT_OK)
			outdir_abort(r->tmp_dir, a->list, a->nm);
		free(r->tmp_dir);
	}
	bp_dataset_release(&r->ds);
	bp_profile_release(&r->prof);
	bp_profile_release(&r->hprof);
	for (size_t i = 0; i < BP_ARRAY_LEN(r->own); i++)
		if (r->own[i]) {
			bp_profile_release(&r->own[i]->prof);
			free(r->own[i]);
		}
	bp_hyd_set_release(&r->hset);
	bp_sb_coverage_release(&r->sbcov);
}

/* The dataset, the order it is read in and the steps the limits are estimated for. */
static int solve_load_dataset(struct solve_args *a, struct solve_run *r)
{
	struct bp_error err;
	struct bp_read_opts ro = {.length_field = a->w.jsonl_field, .tokens_field = a->tokens_field,
				  .id_field = a->id_field, .skip_empty = a->skip_empty};
	if (cmd_load_dataset(a->w.dataset, &ro, &r->ds, r->ds_sha, &err) < 0)
		return cmd_error("%s", err.text);
	const struct bp_dataset *ds = &r->ds;
	/* A sample index (a reader's rows: text, JSONL, .idx) is read in order by default; a
	 * distribution (v1 JSON, the presets) can only be drawn from. */
	int is_index = ds->lengths && strcmp(ds->format, "balplan") != 0;
	if (!a->order_set)
		a->order = is_index ? BP_ORDER_FILE : BP_ORDER_DRAW;
	if (a->order != BP_ORDER_DRAW && !ds->lengths)
		return cmd_usage("solve", "--order %s needs a sample index; dataset '%s' is a "
				 "histogram, whose lengths can only be drawn (--order draw)",
				 bp_order_name(a->order), ds->name);
	if (a->order == BP_ORDER_DRAW && (a->epochs || a->last_set))
		return cmd_usage("solve", "%s needs samples read in order (--order file or "
				 "shuffle), not drawn", a->epochs ? "--epochs" : "--last-batch");
	if (a->epochs && !a->steps_set)
		a->steps = 0; /* until the data ends */
	/* Steps the limits are estimated for: with --epochs, the ones the data fills. */
	a->est_steps = a->steps;
	if (a->epochs) {
		double e = (double)a->epochs;
		double need = a->w.dps ? e * (double)ds->nlengths / (double)a->w.dps
				     : e * (double)ds->stats.tokens / (double)a->w.tps;
		double cap = ceil(need) + 1;
		if (!a->steps || cap < (double)a->steps)
			a->est_steps = cap > 1e12 ? (int64_t)1e12 : (int64_t)cap;
	}
	return SOLVE_GO;
}

/* The limits message of a method whose own work is the larger part of a price over the time
 * limit, by what its own work grows with (its price's grows). */
static int method_over_time(const struct solve_args *a, const struct bp_method *m,
			    const struct solve_price *p, double run, double run_steps,
			    const char *per)
{
	const char *name = m->name;
	switch (p->grows) {
	case BP_GROWS_GPUS:
		return cmd_usage("solve", "%s at --gpus %lld is beyond the planning limits: an "
				 "estimated %.0f s for %lld steps (limit %.0f s)", name,
				 (long long)a->w.gpus, run, (long long)run_steps, LIMIT_TIME_S);
	case BP_GROWS_DOCS_SQUARED:
		return cmd_usage("solve", "%s is beyond the planning limits: an estimated %.0f s "
				 "for about %.0f documents per step over %lld steps (limit %.0f "
				 "s; its cost grows with the square of the documents per step)",
				 name, run, p->docs, (long long)run_steps, LIMIT_TIME_S);
	case BP_GROWS_TRIALS:
		return cmd_usage("solve", "--param trials=%lld is beyond the planning limits: an "
				 "estimated %.0f s of %s dispatch trials (limit %.0f s) for about "
				 "%.0f documents per step over %lld steps", (long long)p->trials,
				 run, name, LIMIT_TIME_S, p->docs, (long long)run_steps);
	case BP_GROWS_STEPS:
		break;
	}
	return cmd_usage("solve", "method '%s' is beyond the planning limits: an estimated %.0f "
			 "s of planning (limit %.0f s) for %s over %lld steps", name, run,
			 LIMIT_TIME_S, per, (long long)run_steps);
}

/* What the limits messages say a step holds (per) and which option asked for the work
 * (subject), from every method's documents and micro-batches (e). */
static void limit_words(const struct solve_args *a, const struct solve_price *e, char *per,
			size_t nper, char *subject, size_t nsubject)
{
	long long dp = (long long)a->dp;
	snprintf(per, nper, "about %.0f documents, %.0f micro-batches and %lld pipeline%s per "
		 "step", e->docs, e->mbs, dp, dp == 1 ? "" : "s");
	if (e->pipes_dominate)
		snprintf(subject, nsubject, "--gpus %lld", (long long)a->w.gpus);
	else if (a->w.dps)
		snprintf(subject, nsubject, "--docs-per-step %lld", (long long)a->w.dps);
	else if (a->w.tps_given && e->mbs > e->docs) /* windows smaller than documents */
		snprintf(subject, nsubject, "--tokens-per-step %lld with --max-tokens %lld",
			 (long long)a->w.tps, (long long)a->w.max_tokens);
	else if (a->w.tps_given)
		snprintf(subject, nsubject, "--tokens-per-step %lld", (long long)a->w.tps);
	else
		snprintf(subject, nsubject, "--gpus %lld (tokens per step pp*dp*max-tokens = "
			 "%lld)", (long long)a->w.gpus, (long long)a->w.tps);
}

/* BALPLAN_ESTIMATE: the price alone, for tests/scripts. */
static void print_estimates(const struct solve_args *a, const struct solve_price *pr,
			    double nsteps, double mem_steps)
{
	for (size_t i = 0; i < a->nm; i++) {
		const struct solve_price *p = &pr[i];
		printf("estimate method=%s steps=%lld docs=%.0f mbs=%.0f trials=%lld "
		       "candidates=%lld s_once=%.6g s_step=%.6g s_own=%.6g s_total=%.6g "
		       "mem_step=%.6g mem_total=%.6g instr_per_s=%.6g\n", a->list[i]->name,
		       (long long)a->est_steps, p->docs, p->mbs, (long long)p->trials,
		       (long long)p->candidates, p->s_once, p->s_step, p->s_own,
		       p->s_once + nsteps * p->s_step, p->mem_step,
		       p->mem_once + mem_steps * p->mem_step, SOLVE_INSTR_PER_S);
	}
}

/* Every method's price (solve_limits.h), checked before anything is drawn: a method whose own
 * work is the larger part of its price is named, else the option that asked for the work. A
 * run written a window at a time (a plan of lines to a file) holds --chunk-steps steps and
 * reports its progress: only a window's memory is limited, and its time to the first step (a
 * method's setup and one step). */
static int solve_limits(const struct solve_args *a, const struct solve_run *sr, int phase)
{
	struct bp_model lm;
	struct bp_error lerr = {""};
	struct stat pst;
	int layers = !a->w.profile && cmd_resolve_model(a->w.model, &lm, &lerr) == 0 ? lm.layers : 0;
	/* the strategies: a file's count; proposed (or read from standard input) they are known
	 * after solve_prepare, so the first phase prices one (the least) and the second the
	 * real set */
	int64_t nstrat = !a->strategies_in ? 0
			 : phase == 2 ? (int64_t)sr->hset.n
				      : solve_count_strategies(a->strategies);
	int later = phase == 1 && a->strategies_in && nstrat <= 0;
	struct solve_request rq = {
		.ds = &sr->ds, .max_tokens = a->w.max_tokens, .tokens_per_step = a->w.tps,
		.docs_per_step = a->w.dps, .gpus = a->w.gpus, .tp = a->tp, .cp = a->cp,
		.pp = a->pp, .dp = a->dp, .layers = layers, .params = a->params,
		.nparams = a->nparams,
		.profile_bytes = a->w.profile && strcmp(a->w.profile, "-") &&
					 stat(a->w.profile, &pst) == 0 ? (int64_t)pst.st_size : 0};
	if (later)
		nstrat = 1;
	struct solve_price pr[64];
	const double gib = 1073741824.0;
	int stream_run = plan_lines && (a->out || a->out_dir);
	double nsteps = (double)a->est_steps, mem_steps = nsteps;
	if (stream_run && mem_steps > (double)a->chunk_steps)
		mem_steps = (double)a->chunk_steps;
	double run_steps = stream_run ? 1.0 : nsteps; /* the steps a run's time counts */
	double run_max = 0.0, run_sum = 0.0, s_step_max = 0.0, mem_once_max = 0.0;
	for (size_t i = 0; i < a->nm; i++) {
		rq.inputs = a->list[i]->input == BP_INPUT_STRATEGIES ? nstrat : 0;
		rq.inputs_made = a->list[i]->input == BP_INPUT_STRATEGIES && !a->strategies;
		solve_price(a->list[i], &rq, &pr[i]);
		const struct solve_price *p = &pr[i];
		double own = p->s_once + run_steps * p->s_own;
		double run = own + run_steps * p->s_common;
		run_max = fmax(run_max, run);
		run_sum += run;
		s_step_max = fmax(s_step_max, p->s_step);
		mem_once_max = fmax(mem_once_max, p->mem_once);
	}
	if (getenv("BALPLAN_ESTIMATE") && !later) {
		print_estimates(a, pr, nsteps, mem_steps);
		return EXIT_OK;
	}
	const struct solve_price e = pr[0]; /* documents, micro-batches: every method's */
	char per[160], subject[160];
	limit_words(a, &e, per, sizeof(per), subject, sizeof(subject));
	if (e.mem_step > LIMIT_MEM_GIB * gib)
		return cmd_usage("solve", "%s is beyond the planning limits: an estimated %.1f GiB "
				 "of memory per step (limit %.0f GiB) for %s", subject,
				 e.mem_step / gib, LIMIT_MEM_GIB, per);
	for (size_t i = 0; i < a->nm; i++) {
		const struct solve_price *p = &pr[i];
		double own = p->s_once + run_steps * p->s_own;
		double run = own + run_steps * p->s_common;
		if (run > LIMIT_TIME_S && 2.0 * own >= run)
			return method_over_time(a, a->list[i], p, run, run_steps, per);
		double mem = p->mem_once + mem_steps * p->mem_step;
		if (mem > LIMIT_MEM_GIB * gib && 2.0 * p->mem_once >= mem)
			return cmd_usage("solve", "method '%s' is beyond the planning limits: an "
					 "estimated %.1f GiB of memory (limit %.0f GiB) for %s",
					 a->list[i]->name, mem / gib, LIMIT_MEM_GIB, per);
	}
	if (s_step_max > LIMIT_TIME_S)
		return cmd_usage("solve", "%s is beyond the planning limits: an estimated %.0f s "
				 "of planning per step (limit %.0f s) for %s", subject, s_step_max,
				 LIMIT_TIME_S, per);
	const char *span = a->steps ? "--steps" : "--epochs";
	long long nspan = (long long)(a->steps ? a->steps : a->epochs);
	if (mem_once_max + e.mem_step * mem_steps > LIMIT_MEM_GIB * gib)
		return cmd_usage("solve", "%s %lld is beyond the planning limits: an estimated "
				 "%.1f GiB of memory (limit %.0f GiB) for %s", span, nspan,
				 (mem_once_max + e.mem_step * mem_steps) / gib, LIMIT_MEM_GIB, per);
	if (!stream_run && run_max > LIMIT_TIME_S)
		return cmd_usage("solve", "%s %lld is beyond the planning limits: an estimated "
				 "%.0f s of planning per method (limit %.0f s) for %s", span, nspan,
				 run_max, LIMIT_TIME_S, per);
	if (!stream_run && run_sum > LIMIT_TIME_S)
		return cmd_usage("solve", "--method '%s' (%zu methods) is beyond the planning "
				 "limits: an estimated %.0f s of planning (limit %.0f s) for %s over "
				 "%lld steps", cmd_cut(a->methods), a->nm, run_sum, LIMIT_TIME_S, per,
				 (long long)a->est_steps);
	return SOLVE_GO;
}

/* Every method's parameter values as solve and check read them (bp_method_check_params), on
 * a plan of the request's cluster, model and layout, before any method runs: a bad value is
 * a usage error naming the method (issue 26 item 5: it was exit 1, after other methods ran). */
static int preflight_params(const struct solve_args *a, struct bp_scheme sc, int gpn,
			    const struct bp_model *m)
{
	const struct bp_method *const *list = a->list;
	const struct bp_param *params = a->params;
	int64_t max_tokens = a->w.max_tokens;
	for (size_t i = 0; i < a->nm; i++) {
		struct bp_error err = {""};
		struct bp_plan p;
		int bad;
		bp_plan_init(&p);
		p.cluster.gpus = (int)a->w.gpus;
		p.cluster.gpus_per_node = gpn;
		p.model = *m;
		p.max_tokens = max_tokens;
		bad = bp_plan_set_param(&p, "cp_shard", bp_shard_name(a->shard), &err) < 0 ||
		      bp_plan_add_megatron(&p, sc, (int)a->dp, max_tokens, &err) < 0;
		for (size_t k = 0; !bad && k < a->nparams; k++)
			if (bp_method_takes(list[i], params[k].key, a->batching))
				bad = bp_plan_set_param(&p, params[k].key, params[k].value,
							&err) < 0;
		bad = bad || bp_method_check_params(list[i], &p, &err) < 0;
		bp_plan_release(&p);
		if (bad)
			return cmd_usage("solve", "method '%s': %s", list[i]->name, err.text);
	}
	return EXIT_OK;
}

/* The profile (the file, or analytic for the request), with the run's settings, and what
 * needs it: the methods' constraints and parameters, the layout against the node size. */
static int solve_load_profile(const struct solve_args *a, struct solve_run *r)
{
	struct bp_error err;
	struct bp_scheme sc = {(int)a->tp, (int)a->cp, (int)a->pp};
	int rc;
	const struct cmd_workload *w = &a->w;
	if (w->profile ? cmd_load_profile(w->profile, &r->prof, r->prof_sha, &err)
		       : cmd_analytic_profile(w->gpu, w->model, &sc, 1, w->max_tokens, &r->prof,
					      r->prof_sha, &err))
		return cmd_error("%s", err.text);
	r->prof.recompute = a->recompute;
	r->prof.optimizer_replicated = a->opt_replicated;
	if (a->w.profile && (rc = preflight(a->list, a->nm, sc, &r->prof.model, a->shard, a->sched,
					  a->vstages)) != EXIT_OK)
		return rc;
	if ((rc = preflight_params(a, sc, r->prof.hw.gpus_per_node, &r->prof.model)) != EXIT_OK)
		return rc;
	if ((rc = cmd_check_nodes("solve", a->w.gpus, a->tp, r->prof.hw.gpus_per_node)) != EXIT_OK)
		return rc;
	return SOLVE_GO;
}

/* The methods' own inputs and profiles, as their rows ask: the measured coverage
 * (BP_INPUT_COVERAGE), an analytic profile of the schemes a method lists (profile_schemes;
 * with --profile every method plans on the file's), the candidate strategies and their
 * profile (BP_INPUT_STRATEGIES). */
static int solve_prepare(const struct solve_args *a, struct solve_run *r)
{
	struct bp_error err;
	if (a->cov_file) {
		if (cmd_load_coverage(a->cov_file, &r->sbcov, &err) < 0)
			return cmd_error("%s", err.text);
		r->have_sbcov = 1;
	}
	for (size_t i = 0; i < a->nm && !a->w.profile; i++) {
		const struct bp_method *m = a->list[i];
		struct bp_scheme sc[32];
		struct bp_model rmd;
		if (!m->profile_schemes)
			continue;
		const struct bp_model *md =
			cmd_resolve_model(a->w.model, &rmd, &err) == 0 ? &rmd : NULL;
		size_t n = m->profile_schemes(md, (struct bp_scheme){(int)a->tp, (int)a->cp,
								     (int)a->pp},
					      (int)a->dp, a->params, a->nparams, sc,
					      BP_ARRAY_LEN(sc));
		struct own_profile *op = calloc(1, sizeof(*op));
		if (!op)
			return cmd_error("out of memory");
		bp_profile_init(&op->prof);
		r->own[i] = op;
		if (cmd_analytic_profile(a->w.gpu, a->w.model, sc, n, a->w.max_tokens, &op->prof,
					 op->sha, &err))
			return cmd_error("%s", err.text);
	}
	if (a->strategies_in) {
		struct cmd_hyd_req hr = {a->strategies, &r->ds, r->ds_sha, a->w.profile, a->w.gpu,
					 a->w.model, (int)a->w.gpus,
					 (struct bp_scheme){(int)a->tp, (int)a->cp, (int)a->pp},
					 a->w.max_tokens, a->w.tps, a->w.dps, a->w.overlen};
		int rc = cmd_hyd_candidates(&hr, &r->hset, &r->hprof, r->hprof_sha);
		if (rc != EXIT_OK)
			return rc;
	}
	return SOLVE_GO;
}

/* The setting line heads the text table only: csv and json are the table alone. */
static void print_setting(const struct solve_args *a, const struct solve_run *r)
{
	const struct bp_dataset *ds = &r->ds;
	long long per = (long long)(a->w.dps ? a->w.dps : a->w.tps);
	if (a->quiet || a->table_format)
		return;
	if (a->order != BP_ORDER_DRAW) {
		char span[64];
		if (!a->steps)
			snprintf(span, sizeof(span), "%lld epoch%s", (long long)a->epochs,
				 a->epochs == 1 ? "" : "s");
		else
			snprintf(span, sizeof(span), "%lld steps", (long long)a->steps);
		printf("samples %s (%s, %zu samples, order %s), %d x %s (tp %lld cp %lld pp %lld "
		       "dp %lld), model %s, max %lld tokens, %s of %lld %s, seed %lld, documents "
		       "%s\n", ds->name, ds->format, ds->nlengths, bp_order_name(a->order),
		       (int)a->w.gpus, r->prof.hw.gpu, (long long)a->tp, (long long)a->cp,
		       (long long)a->pp, (long long)a->dp, r->prof.model.name,
		       (long long)a->w.max_tokens, span, per, a->w.dps ? "samples" : "tokens",
		       (long long)a->seed, bp_documents_name(a->documents));
	} else {
		printf("dataset %s, %d x %s (tp %lld cp %lld pp %lld dp %lld), model %s, "
		       "max %lld tokens, %lld steps of %lld %s, seed %lld, documents %s\n",
		       ds->name, (int)a->w.gpus, r->prof.hw.gpu, (long long)a->tp, (long long)a->cp,
		       (long long)a->pp, (long long)a->dp, r->prof.model.name,
		       (long long)a->w.max_tokens, (long long)a->steps, per,
		       a->w.dps ? "documents" : "tokens", (long long)a->seed,
		       bp_documents_name(a->documents));
	}
}

/* The method's own warning about the finished plan (ILP: steps not proven optimal), one
 * line each. */
static void print_warning(const struct bp_method *m, const struct bp_plan *plan)
{
	char wbuf[1024];
	if (!m->warn)
		return;
	m->warn(plan, wbuf, sizeof(wbuf));
	for (char *line = wbuf, *nl; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		cmd_warn("method '%s': %s", m->name, line);
		if (!nl)
			break;
	}
}

/* Method i: its options, profile and input (its row's), planned (a plan of lines to a file
 * a window of steps at a time: memory holds one window, not the run), its warning, its
 * result and its plan written. */
static int run_method(const struct solve_args *a, struct solve_run *r, size_t i)
{
	const struct bp_method *m = a->list[i];
	struct bp_error err;
	struct bp_plan plan;
	struct bp_solve_opts o = {
		.method = m->name,
		.cluster = {.gpus = (int)a->w.gpus, .tp = (int)a->tp, .cp = (int)a->cp,
			    .pp = (int)a->pp, .dp = (int)a->dp},
		.steps = a->steps, .tokens_per_step = a->w.tps, .docs_per_step = a->w.dps,
		.max_tokens = a->w.max_tokens, .overlen = a->w.overlen, .documents = a->documents,
		.order = a->order, .epochs = a->epochs, .last = a->last,
		.seed = (uint64_t)a->seed, .shard = a->shard, .dataset_name = r->ds.name,
		.dataset_sha = r->ds_sha, .profile_sha = r->prof_sha, .first_step = a->first_step,
		.flush_data = a->flush_data < 0 ? a->first_set : a->flush_data,
		.schedule = a->sched ? a->sched->name : NULL, .vstages = (int)a->vstages,
	};
	/* the run's recomputation, applied by every cost model of the plan */
	r->prof.recompute = r->hprof.recompute = a->recompute;
	r->prof.optimizer_replicated = a->opt_replicated;
	const struct bp_profile *use = &r->prof;
	switch (m->input) {
	case BP_INPUT_STRATEGIES:
		use = &r->hprof;
		o.profile_sha = r->hprof_sha;
		o.method_input = &r->hset;
		break;
	case BP_INPUT_COVERAGE:
		o.method_input = r->have_sbcov ? &r->sbcov : NULL;
		break;
	case BP_INPUT_NONE:
		break;
	}
	if (r->own[i]) {
		r->own[i]->prof.recompute = a->recompute;
		r->own[i]->prof.optimizer_replicated = a->opt_replicated;
		use = &r->own[i]->prof;
		o.profile_sha = r->own[i]->sha;
	}
	struct bp_param mine[32];
	size_t nmine = 0;
	for (size_t k = 0; k < a->nparams; k++)
		if (bp_method_takes(m, a->params[k].key, a->batching))
			mine[nmine++] = a->params[k];
	o.params = mine;
	o.nparams = nmine;
	double t0 = now_ms();
	char spath[4096] = "";
	if (a->out)
		snprintf(spath, sizeof(spath), "%s", a->out);
	else if (a->out_dir)
		outdir_path(spath, sizeof(spath), r->tmp_dir, m->name);
	int streamed = plan_lines && spath[0];
	struct streamed_out so = {.progress = !a->quiet, .method = m->name, .method_i = i,
				  .nmethods = a->nm, .steps_total = a->est_steps};
	so.t0 = so.last = now_ms();
	/* a plan held whole is planned --chunk-steps at a time too, so that it reports */
	int rs = streamed ? solve_streamed(&r->ds, use, &o, a->chunk_steps, &so, &plan, &err)
			  : bp_solve_progress(&r->ds, use, &o, (size_t)a->chunk_steps,
					      solve_progress, &so, &plan, &err);
	if (!streamed)
		report_progress(&so, 1);
	double t1 = now_ms();
	if (rs < 0) {
		if (rs == BP_INFEASIBLE) {
			fprintf(stderr, "balplan: error: method '%s' is infeasible: %s\n", m->name,
				err.text);
			return EXIT_INFEASIBLE;
		}
		return cmd_error("method '%s' failed: %s", m->name, err.text);
	}
	print_warning(m, &plan);
	struct result *res = &r->res[i];
	res->method = m->name;
	res->trained = streamed ? (so.cut ? "cut" : "whole") : bp_plan_documents_trained(&plan);
	res->s = plan.summary;
	res->plan_ms_per_step = (t1 - t0) / (double)(plan.summary.steps ? plan.summary.steps : 1);
	int wr = EXIT_OK;
	if (streamed)
		wr = write_streamed(&plan, &so, spath);
	else if (a->out)
		wr = write_plan(&plan, a->out);
	else if (a->out_dir)
		wr = write_plan(&plan, spath);
	bp_plan_release(&plan);
	return wr == EXIT_OK ? SOLVE_GO : wr;
}

/* After every method: --out-dir's plans moved into place, the documents over the cap said
 * once (every method sees the same samples, with the counts and the option that decides),
 * the table. */
static int solve_finish(const struct solve_args *a, struct solve_run *r)
{
	const struct bp_summary *s0 = &r->res[0].s;
	if (r->tmp_dir) {
		int rc = outdir_commit(a->out_dir, r->tmp_dir, a->list, a->nm);
		if (rc != EXIT_OK)
			return rc;
	}
	if (a->nm > 0 && (s0->truncated > 0 || s0->dropped > 0))
		cmd_warn("%lld document%s longer than --max-tokens %lld %s (--over-length %s)",
			 (long long)(s0->truncated + s0->dropped),
			 s0->truncated + s0->dropped == 1 ? "" : "s", (long long)a->w.max_tokens,
			 s0->dropped > 0 ? "were left out" : "were cut to it",
			 s0->dropped > 0 ? "drop" : "truncate");
	if (!a->quiet)
		print_table(r->res, a->nm, a->timing, a->table_format, a->baseline);
	return EXIT_OK;
}

int cmd_solve(int argc, char **argv)
{
	struct solve_args a;
	int rc = solve_parse(argc, argv, &a);
	if (rc == SOLVE_GO)
		rc = solve_check(&a);
	if (rc == SOLVE_GO)
		rc = solve_pick(&a);
	if (rc == SOLVE_GO)
		rc = check_overwrite(&a);
	if (rc != SOLVE_GO)
		return rc;
	struct solve_run run, *r = &run;
	solve_run_init(r);
	rc = solve_load_dataset(&a, r);
	if (rc == SOLVE_GO)
		rc = solve_limits(&a, r, 1);
	if (rc == SOLVE_GO)
		rc = solve_load_profile(&a, r);
	if (rc == SOLVE_GO)
		rc = solve_prepare(&a, r);
	if (rc == SOLVE_GO && a.strategies_in && (!a.strategies || !strcmp(a.strategies, "-")))
		rc = solve_limits(&a, r, 2); /* priced again with the candidates made or read */
	if (rc == SOLVE_GO && a.out_dir && (rc = outdir_open(a.out_dir, &r->tmp_dir)) == EXIT_OK)
		rc = SOLVE_GO;
	if (rc == SOLVE_GO)
		print_setting(&a, r);
	for (size_t i = 0; i < a.nm && rc == SOLVE_GO; i++)
		rc = run_method(&a, r, i);
	if (rc == SOLVE_GO)
		rc = solve_finish(&a, r);
	solve_run_release(r, &a, rc);
	return rc;
}
