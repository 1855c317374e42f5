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
		"      --gpu NAME           GPU preset for the analytic profile [H100]\n"
		"      --gpus-per-node N    GPUs per node, for which groups cross nodes [the\n"
		"                           GPU preset's, 8]\n"
		"      --model NAME         model preset or a Hugging Face config.json (dense\n"
		"                           Llama-style or GPT-2) for the analytic profile\n"
		"                           [llama3-8b]\n"
		"cluster:\n"
		"  -g, --gpus N             GPUs in all [64]\n"
		"      --tp N, --cp N, --pp N  tensor, context, pipeline degrees [8, 2, 4];\n"
		"                           dp = gpus / (tp cp pp)\n"
		"sampling:\n"
		"  -L, --max-tokens N       context cap: tokens per micro-batch [131072]; wlb\n"
		"                           packs up to max_len_factor (2) times it, memory\n"
		"                           permitting (--param max_len_factor=1 keeps -L)\n"
		"      --tokens-per-step N  token budget per global batch [pp*dp*max-tokens]\n"
		"      --docs-per-step N    fixed documents per global batch instead\n"
		"                           (token counts take k, M, G: 128k = 131072)\n"
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
		"                           the ones it knows ('balplan presets' lists them)\n"
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
		"  mean, WLB-LLM Sec. 3.1); imb(SB) (imb_sb: the slowest data-parallel rank\n"
		"  over the mean, SparseBalance Sec. III); gap(Hyd) (gap_hyd: max-min pipeline\n"
		"  time over the max, Hydraulis Sec. 3); bubble (fraction idle in the\n"
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

/* Every method's parameter values as solve and check read them (bp_method_check_params), on
 * a plan of the request's cluster, model and layout, before any method runs: a bad value is
 * a usage error naming the method (issue 26 item 5: it was exit 1, after other methods ran). */
static int preflight_params(const struct bp_method *const *list, size_t nm,
			    const struct bp_param *params, size_t nparams, const char *batching,
			    struct bp_scheme sc, int64_t dp, int64_t gpus, int gpn,
			    int64_t max_tokens, const struct bp_model *m, enum bp_shard shard)
{
	for (size_t i = 0; i < nm; i++) {
		struct bp_error err = {""};
		struct bp_plan p;
		int bad;
		bp_plan_init(&p);
		p.cluster.gpus = (int)gpus;
		p.cluster.gpus_per_node = gpn;
		p.model = *m;
		p.max_tokens = max_tokens;
		bad = bp_plan_set_param(&p, "cp_shard", bp_shard_name(shard), &err) < 0 ||
		      bp_plan_add_megatron(&p, sc, (int)dp, max_tokens, &err) < 0;
		for (size_t k = 0; !bad && k < nparams; k++)
			if (bp_method_takes(list[i], params[k].key, batching))
				bad = bp_plan_set_param(&p, params[k].key, params[k].value, &err) < 0;
		bad = bad || bp_method_check_params(list[i], &p, &err) < 0;
		bp_plan_release(&p);
		if (bad)
			return cmd_usage("solve", "method '%s': %s", list[i]->name, err.text);
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
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(r[i].method, baseline ? baseline : "plain"))
			base = r[i].s.model_tflops_per_gpu;
		wmin = fmin(wmin, r[i].s.model_tflop);
		wmax = fmax(wmax, r[i].s.model_tflop);
	}
	if (format != CMD_FORMAT_TEXT) {
		print_table_data(r, n, timing, format, base);
		return;
	}
	int mw = 10; /* the method column: as wide as the longest name ("sparsebalance") */
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

int cmd_solve(int argc, char **argv)
{
	static const struct option opts[] = {
		{"dataset", required_argument, NULL, 'd'},
		{"jsonl-field", required_argument, NULL, 'J'},
		{"length-field", required_argument, NULL, 'J'},
		{"tokens-field", required_argument, NULL, 'j'},
		{"id-field", required_argument, NULL, 'I'},
		{"skip-empty", no_argument, NULL, 'e'},
		{"order", required_argument, NULL, 'X'},
		{"epochs", required_argument, NULL, 'E'},
		{"last-batch", required_argument, NULL, 'B'},
		{"profile", required_argument, NULL, 'p'},
		{"gpu", required_argument, NULL, 'G'},
		{"model", required_argument, NULL, 'M'},
		{"gpus", required_argument, NULL, 'g'},
		{"tp", required_argument, NULL, 'T'},
		{"cp", required_argument, NULL, 'C'},
		{"pp", required_argument, NULL, 'P'},
		{"max-tokens", required_argument, NULL, 'L'},
		{"tokens-per-step", required_argument, NULL, 'K'},
		{"docs-per-step", required_argument, NULL, 'D'},
		{"steps", required_argument, NULL, 'n'},
		{"seed", required_argument, NULL, 's'},
		{"over-length", required_argument, NULL, 'O'},
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
	const char *dataset = "synthetic-longtail", *jsonl_field = NULL, *profile = NULL;
	const char *tokens_field = NULL, *id_field = NULL;
	int skip_empty = 0;
	const char *gpu = "H100", *model = "llama3-8b", *methods = "all", *out = NULL;
	const char *out_dir = NULL, *strategies = NULL;
	struct bp_param params[32];
	size_t nparams = 0;
	int64_t gpus = 64, tp = 8, cp = 2, pp = 4, max_tokens = 131072, tps = -1, dps = 0;
	int64_t steps = 20, seed = 1, epochs = 0, chunk_steps = 64, first_step = 0;
	int flush_data = -1, first_set = 0; /* --flush: -1 not given */
	const struct bp_schedule *sched = NULL; /* --schedule; NULL: 1f1b */
	int64_t vstages = 0;                   /* --virtual-stages; 0: not given */
	enum bp_order order = BP_ORDER_DRAW;
	enum bp_last_batch last = BP_LAST_KEEP;
	int order_set = 0, steps_set = 0, last_set = 0;
	int timing = 0, quiet = 0, gpu_set = 0, model_set = 0, tps_given = 0;
	enum cmd_format table_format = CMD_FORMAT_TEXT;
	const char *baseline = NULL; /* --baseline: speedup's reference method [plain] */
	enum bp_recompute recompute = BP_RECOMPUTE_NONE;
	int opt_replicated = 0;
	int64_t gpn_opt = 0;
	enum bp_overlen overlen = BP_OVERLEN_TRUNCATE;
	enum bp_documents documents = BP_DOCS_WHOLE;
	enum bp_shard shard = BP_SHARD_SEQUENCE;
	const int64_t big = (int64_t)1 << 40;
	int c;
	plan_lines = 0; /* the CLI fuzz target calls cmd_solve many times in one process */
	while ((c = getopt_long(argc, argv, "d:p:g:L:n:s:m:o:qh", opts, NULL)) != -1) {
		int bad = 0;
		switch (c) {
		case 'd': dataset = optarg; break;
		case 'J': jsonl_field = optarg; break;
		case 'j': tokens_field = optarg; break;
		case 'I': id_field = optarg; break;
		case 'e': skip_empty = 1; break;
		case 'X':
			if (bp_order_parse(optarg, &order) < 0)
				return cmd_usage("solve", "--order '%s' is not file, shuffle or draw",
						 cmd_cut(optarg));
			order_set = 1;
			break;
		case 'E': bad = cmd_opt_int("solve", "--epochs", optarg, 1, 1000000, &epochs);
			break;
		case 'B':
			if (bp_last_batch_parse(optarg, &last) < 0)
				return cmd_usage("solve", "--last-batch '%s' is not keep or drop",
						 cmd_cut(optarg));
			last_set = 1;
			break;
		case 'p': profile = optarg; break;
		case 'G': gpu = optarg; gpu_set = 1; break;
		case 'M': model = optarg; model_set = 1; break;
		case 'g': bad = cmd_opt_int("solve", "--gpus", optarg, 1, 1 << 20, &gpus); break;
		case 'T': bad = cmd_opt_int("solve", "--tp", optarg, 1, 1 << 20, &tp); break;
		case 'C': bad = cmd_opt_int("solve", "--cp", optarg, 1, 1 << 20, &cp); break;
		case 'P': bad = cmd_opt_int("solve", "--pp", optarg, 1, 1 << 20, &pp); break;
		case 'L': bad = cmd_opt_tokens("solve", "--max-tokens", optarg, 1, big, &max_tokens);
			break;
		case 'K': bad = cmd_opt_tokens("solve", "--tokens-per-step", optarg, 1, big, &tps);
			tps_given = 1;
			break;
		case 'D': bad = cmd_opt_int("solve", "--docs-per-step", optarg, 1, 1 << 24, &dps);
			break;
		case 'n': bad = cmd_opt_int("solve", "--steps", optarg, 1, 1000000, &steps);
			steps_set = 1;
			break;
		case 's': bad = cmd_opt_int("solve", "--seed", optarg, 0, INT64_MAX, &seed); break;
		case 'O':
			if (!strcmp(optarg, "truncate"))
				overlen = BP_OVERLEN_TRUNCATE;
			else if (!strcmp(optarg, "drop"))
				overlen = BP_OVERLEN_DROP;
			else if (!strcmp(optarg, "error"))
				overlen = BP_OVERLEN_ERROR;
			else
				return cmd_usage("solve", "--over-length '%s' is not truncate, drop or "
						 "error", cmd_cut(optarg));
			break;
		case 'W':
			if (bp_documents_parse(optarg, &documents) < 0)
				return cmd_usage("solve", "--documents '%s' is not whole, cut or "
						 "per-method", cmd_cut(optarg));
			break;
		case 'm': methods = optarg; break;
		case 'S':
			if (bp_shard_parse(optarg, &shard) < 0)
				return cmd_usage("solve", "--shard '%s' is not sequence, document, "
						 "adaptive or ulysses", cmd_cut(optarg));
			break;
		case 'Q': {
			const char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg || !eq[1])
				return cmd_usage("solve", "--param '%s' is not KEY=VALUE",
						 cmd_cut(optarg));
			if (nparams == 32)
				return cmd_usage("solve", "at most 32 --param options");
			size_t kl = (size_t)(eq - optarg);
			if (kl >= sizeof(params[0].key))
				return cmd_usage("solve", "--param key '%.*s' is longer than %zu bytes",
						 (int)(kl > 48 ? 48 : kl), optarg,
						 sizeof(params[0].key) - 1);
			if (strlen(eq + 1) >= sizeof(params[0].value))
				return cmd_usage("solve", "--param %.*s: value '%s' is longer than %zu "
						 "bytes", (int)kl, optarg, cmd_cut(eq + 1),
						 sizeof(params[0].value) - 1);
			for (size_t k = 0; k < nparams; k++) /* one value per key (issue 27) */
				if (strlen(params[k].key) == kl && !memcmp(params[k].key, optarg, kl))
					return cmd_usage("solve", "--param %s is given twice ('%s' "
							 "and '%s')", params[k].key,
							 cmd_cut(params[k].value), cmd_cut(eq + 1));
			memset(&params[nparams], 0, sizeof(params[0]));
			memcpy(params[nparams].key, optarg, kl);
			strcpy(params[nparams].value, eq + 1);
			nparams++;
			break;
		}
		case 'o': out = optarg; break;
		case 'R': out_dir = optarg; break;
		case 'H': bad = cmd_opt_int("solve", "--chunk-steps", optarg, 1, 1 << 20,
					    &chunk_steps);
			break;
		case 'F':
			if (strcmp(optarg, "json") && strcmp(optarg, "lines"))
				return cmd_usage("solve", "--plan-format '%s' is not json or lines",
						 cmd_cut(optarg));
			plan_lines = !strcmp(optarg, "lines");
			break;
		case 'Y': strategies = optarg; break;
		case 't': timing = 1; break;
		case 1001: bad = cmd_opt_int("solve", "--first-step", optarg, 0, INT64_C(1) << 40,
					    &first_step);
			first_set = 1;
			break;
		case 1002:
			if (strcmp(optarg, "end") && strcmp(optarg, "data"))
				return cmd_usage("solve", "--flush '%s' is not end or data", optarg);
			flush_data = !strcmp(optarg, "data");
			break;
		case 1005:
			sched = bp_schedule_find(optarg);
			if (!sched || sched->world_ticks) {
				char names[128];
				bp_schedule_names(names, sizeof(names));
				return cmd_usage("solve", "--schedule '%s' is not 1f1b or interleaved "
						 "(the table: %s; distca-ticks comes with -m "
						 "distca)", cmd_cut(optarg), names);
			}
			break;
		case 1006:
			bad = cmd_opt_int("solve", "--virtual-stages", optarg, 1, 64, &vstages);
			break;
		case 'q': quiet = 1; break;
		case 'N':
			bad = cmd_opt_int("solve", "--gpus-per-node", optarg, 1, 1024, &gpn_opt);
			break;
		case 1004:
			if (strcmp(optarg, "distributed") && strcmp(optarg, "replicated"))
				return cmd_usage("solve", "--optimizer '%s' is not distributed or "
						 "replicated", cmd_cut(optarg));
			opt_replicated = !strcmp(optarg, "replicated");
			break;
		case 'r':
			if (bp_recompute_parse(optarg, &recompute) < 0)
				return cmd_usage("solve", "--recompute '%s' is not none, selective or "
						 "full", cmd_cut(optarg));
			break;
		case 'f':
			if (cmd_opt_format("solve", optarg, &table_format) < 0)
				return EXIT_USAGE;
			break;
		case 1003: baseline = optarg; break;
		case 'h': solve_usage(stdout); return EXIT_OK;
		default:
			return cmd_usage("solve", "unknown or incomplete option '%s'",
					 cmd_cut(argv[optind - 1]));
		}
		if (bad)
			return EXIT_USAGE;
	}
	if (optind < argc)
		return cmd_usage("solve", "unexpected argument '%s'", cmd_cut(argv[optind]));
	if (profile && (gpu_set || model_set))
		return cmd_usage("solve", "--profile cannot be combined with --gpu or --model");
	if (profile && gpn_opt)
		return cmd_usage("solve", "--gpus-per-node is for the analytic profile: a profile "
				 "file gives its own (hardware.gpus_per_node)");
	cmd_analytic_gpus_per_node((int)gpn_opt);
	/* Unknown names are usage errors, found before any work (a config.json that cannot be
	 * read is a data error). */
	if (!profile) {
		struct bp_model chk;
		struct bp_error merr = {""};
		if (!bp_gpu_preset(gpu))
			return cmd_usage("solve", "unknown GPU '%s' (see 'balplan presets')",
					 cmd_cut(gpu));
		if (cmd_resolve_model(model, &chk, &merr) < 0)
			return !strncmp(merr.text, "unknown model", 13)
				       ? cmd_usage("solve", "%s", merr.text)
				       : cmd_error("%s", merr.text);
	}
	if (tps >= 0 && dps > 0)
		return cmd_usage("solve", "--tokens-per-step and --docs-per-step exclude each other");
	if (out && out_dir)
		return cmd_usage("solve", "--out and --out-dir exclude each other");
	/* sparsebalance's coverage file (--param sb_coverage=measured:FILE): an input like the
	 * others, for standard input and for overwriting */
	const char *cov_file = NULL;
	for (size_t i = 0; i < nparams; i++)
		if (!strcmp(params[i].key, "sb_coverage") &&
		    !strncmp(params[i].value, "measured:", 9))
			cov_file = params[i].value + 9;
	{
		const char *names[] = {"--dataset", "--profile", "--strategies",
				       "--param sb_coverage=measured:"};
		const char *paths[] = {dataset, profile, strategies, cov_file};
		int r = cmd_one_stdin("solve", 4, names, paths);
		if (r)
			return r;
	}
	if (out && !strcmp(out, "-"))
		quiet = 1; /* the plan is standard output: no table mixed into it */
	if (gpus % (tp * cp * pp))
		return cmd_usage("solve", "%lld GPUs are not divisible by tp*cp*pp = %lld",
				 (long long)gpus, (long long)(tp * cp * pp));
	/* The layout against the node size, before any input is read (issue 27 item 17); with
	 * --profile, once it is read, before planning. */
	if (!profile && bp_gpu_preset(gpu)) {
		int r = cmd_check_nodes("solve", gpus, tp, bp_gpu_preset(gpu)->gpus_per_node);
		if (r)
			return r;
	}
	int64_t dp = gpus / (tp * cp * pp);
	if (tps < 0 && dps == 0)
		tps = pp * dp * max_tokens;
	if (tps < 0)
		tps = 0;
	if (tps > 0 && tps < max_tokens)
		return cmd_usage("solve", "--tokens-per-step %lld is below --max-tokens %lld",
				 (long long)tps, (long long)max_tokens);

	/* Method list. */
	const struct bp_method *list[64];
	size_t nm = 0;
	if (!strcmp(methods, "all")) {
		for (size_t i = 0; i < bp_method_count() && nm < 64; i++)
			if (bp_method_in_all(bp_method_at(i)))
				list[nm++] = bp_method_at(i);
	} else {
		/* Walked in place, any length: a name is never cut, so an error names what the
		 * user typed. */
		for (const char *p = methods; *p;) {
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
	if (out && nm != 1)
		return cmd_usage("solve", "--out takes one method; use --out-dir for %zu", nm);
	if (baseline) { /* speedup's reference must be in the table */
		size_t k = 0;
		while (k < nm && strcmp(list[k]->name, baseline))
			k++;
		if (k == nm)
			return cmd_usage("solve", "--baseline '%s' is not among the methods run "
					 "(-m %s)", cmd_cut(baseline), cmd_cut(methods));
	}
	if (vstages && (!sched || !sched->chunked))
		return cmd_usage("solve", "--virtual-stages is for --schedule interleaved");
	if (sched && sched->chunked && !vstages)
		vstages = 2;
	if (sched && sched->chunked && vstages < 2)
		return cmd_usage("solve", "--virtual-stages %lld: interleaving needs 2 or more "
				 "(1 is --schedule 1f1b)", (long long)vstages);
	/* Every method's layout constraints before any work (with --profile, once it is read:
	 * its model decides). */
	if (!profile) {
		struct bp_model rm;
		struct bp_error merr = {""};
		int pr = EXIT_OK;
		if (cmd_resolve_model(model, &rm, &merr) == 0 &&
		    (pr = preflight(list, nm, (struct bp_scheme){(int)tp, (int)cp, (int)pp}, &rm,
				    shard, sched, vstages)) != EXIT_OK)
			return pr;
	}
	int hyd = 0; /* hydraulis among the methods: its candidates and profile */
	for (size_t i = 0; i < nm; i++)
		hyd |= list[i]->solve == bp_method_hydraulis;
	if (strategies && !hyd)
		return cmd_usage("solve", "--strategies is for method hydraulis (-m hydraulis)");
	if (strategies) {
		const char *names[] = {"--dataset", "--profile", "--strategies"};
		const char *paths[] = {dataset, profile, strategies};
		int r = cmd_one_stdin("solve", 3, names, paths);
		if (r)
			return r;
	}
	const char *batching = NULL; /* sparsebalance's packing method takes its own */
	for (size_t i = 0; i < nparams; i++)
		if (!strcmp(params[i].key, "sb_batching"))
			batching = params[i].value;
	for (size_t i = 0; i < nparams; i++) {
		int used = 0;
		for (size_t k = 0; k < nm; k++)
			used |= bp_method_takes(list[k], params[i].key, batching);
		if (!used)
			return cmd_usage("solve", "no method chosen takes parameter '%s'",
					 params[i].key);
	}

	/* No output may overwrite an input: the dataset file (a preset is no file), the
	 * profile, the strategies file or the coverage file, by name or by device and inode. */
	const char *ds_file = bp_dataset_preset_text(dataset, &(size_t){0}) ? NULL : dataset;
	for (size_t i = 0; i < (out ? 1 : out_dir ? nm : 0); i++) {
		char path[4096];
		const char *opt = "--out";
		if (out)
			snprintf(path, sizeof(path), "%s", out);
		else
			outdir_path(path, sizeof(path), out_dir, list[i]->name);
		for (int k = 0; k < 4; k++) {
			const char *const ins[] = {ds_file, profile, strategies, cov_file};
			const char *const whats[] = {"dataset", "profile", "strategies file",
						     "coverage file"};
			const char *in = ins[k], *what = whats[k];
			if (out && cmd_refuse_overwrite("solve", opt, path, what, in))
				return EXIT_USAGE;
			if (!out && cmd_same_file(path, in))
				return cmd_usage("solve", "--out-dir '%s' would overwrite '%s', the %s "
						 "being read", cmd_cut(out_dir), cmd_cut(path), what);
		}
	}

	struct bp_error err;
	struct bp_dataset ds;
	struct bp_profile prof;
	char ds_sha[65], prof_sha[65];
	int rc = EXIT_DATA;
	struct result res[64];
	char *tmp_dir = NULL;
	struct bp_profile hprof; /* hydraulis's: the file, or analytic with its layouts' schemes */
	struct bp_hyd_set hset;
	char hprof_sha[65];
	/* flexsp's analytic profile: one scheme per group size it may use ({tp, s, 1} for s a
	 * power of two up to dp or its max_group), the schemes of the layouts its plans hold, so
	 * that check regenerates the same profile */
	struct bp_profile fprof;
	char fprof_sha[65];
	int fsp = 0;
	bp_dataset_init(&ds);
	bp_profile_init(&prof);
	bp_profile_init(&hprof);
	bp_profile_init(&fprof);
	bp_hyd_set_init(&hset);
	struct bp_sb_coverage sbcov; /* sparsebalance's sb_coverage=measured:FILE */
	bp_sb_coverage_init(&sbcov);
	int have_sbcov = 0;
	struct bp_scheme sc = {(int)tp, (int)cp, (int)pp};
	struct bp_read_opts ro = {.length_field = jsonl_field, .tokens_field = tokens_field,
				  .id_field = id_field, .skip_empty = skip_empty};
	if (cmd_load_dataset(dataset, &ro,
			     &ds, ds_sha, &err) < 0) {
		rc = cmd_error("%s", err.text);
		goto out;
	}
	/* A sample index (a reader's rows: text, JSONL, .idx) is read in order by default; a
	 * distribution (v1 JSON, the presets) can only be drawn from. */
	int is_index = ds.lengths && strcmp(ds.format, "balplan") != 0;
	if (!order_set)
		order = is_index ? BP_ORDER_FILE : BP_ORDER_DRAW;
	if (order != BP_ORDER_DRAW && !ds.lengths) {
		rc = cmd_usage("solve", "--order %s needs a sample index; dataset '%s' is a "
			       "histogram, whose lengths can only be drawn (--order draw)",
			       bp_order_name(order), ds.name);
		goto out;
	}
	if (order == BP_ORDER_DRAW && (epochs || last_set)) {
		rc = cmd_usage("solve", "%s needs samples read in order (--order file or shuffle), "
			       "not drawn", epochs ? "--epochs" : "--last-batch");
		goto out;
	}
	if (epochs && !steps_set)
		steps = 0; /* until the data ends */
	/* Steps the limits below are estimated for: with --epochs, the ones the data fills. */
	int64_t est_steps = steps;
	if (epochs) {
		double need = dps ? (double)epochs * (double)ds.nlengths / (double)dps
				  : (double)epochs * (double)ds.stats.tokens / (double)tps;
		double cap = ceil(need) + 1;
		if (!steps || cap < (double)steps)
			est_steps = cap > 1e12 ? (int64_t)1e12 : (int64_t)cap;
	}
	{
		/* Every method's price (solve_limits.h), checked before anything is drawn: a
		 * method whose own work is the larger part of its price is named, else the option
		 * that asked for the work. A run written a window at a time (a plan of lines to a
		 * file) holds --chunk-steps steps and reports its progress: only a window's memory
		 * is limited, and its time to the first step (a method's setup and one step). */
		struct bp_model lm;
		struct bp_error lerr = {""};
		int layers = !profile && cmd_resolve_model(model, &lm, &lerr) == 0 ? lm.layers : 0;
		struct solve_request rq = {&ds, max_tokens, tps, dps, gpus, tp, cp, pp, dp, layers,
					   params, nparams,
					   hyd ? solve_count_strategies(strategies) : 0};
		struct solve_price pr[64];
		const double gib = 1073741824.0;
		int stream_run = plan_lines && (out || out_dir);
		double nsteps = (double)est_steps, mem_steps = nsteps;
		if (stream_run && mem_steps > (double)chunk_steps)
			mem_steps = (double)chunk_steps;
		double run_steps = stream_run ? 1.0 : nsteps; /* the steps a run's time counts */
		double run_max = 0.0, run_sum = 0.0, s_step_max = 0.0, mem_once_max = 0.0;
		for (size_t i = 0; i < nm; i++) {
			solve_price(list[i], &rq, &pr[i]);
			const struct solve_price *p = &pr[i];
			double own = p->s_once + run_steps * p->s_own;
			double run = own + run_steps * p->s_common;
			run_max = fmax(run_max, run);
			run_sum += run;
			s_step_max = fmax(s_step_max, p->s_step);
			mem_once_max = fmax(mem_once_max, p->mem_once);
		}
		if (getenv("BALPLAN_ESTIMATE")) { /* the price alone, for tests/scripts */
			for (size_t i = 0; i < nm; i++) {
				const struct solve_price *p = &pr[i];
				printf("estimate method=%s steps=%lld docs=%.0f mbs=%.0f trials=%lld "
				       "candidates=%lld s_once=%.6g s_step=%.6g s_own=%.6g s_total=%.6g "
				       "mem_step=%.6g mem_total=%.6g instr_per_s=%.6g\n", list[i]->name,
				       (long long)est_steps, p->docs, p->mbs, (long long)p->trials,
				       (long long)p->candidates, p->s_once, p->s_step, p->s_own,
				       p->s_once + nsteps * p->s_step,
				       p->mem_step, p->mem_once + mem_steps * p->mem_step,
				       SOLVE_INSTR_PER_S);
			}
			rc = EXIT_OK;
			goto out;
		}
		const struct solve_price e = pr[0]; /* documents, micro-batches: every method's */
		char per[160];
		snprintf(per, sizeof(per), "about %.0f documents, %.0f micro-batches and %lld "
			 "pipeline%s per step", e.docs, e.mbs, (long long)dp, dp == 1 ? "" : "s");
		char subject[160];
		if (e.pipes_dominate)
			snprintf(subject, sizeof(subject), "--gpus %lld", (long long)gpus);
		else if (dps)
			snprintf(subject, sizeof(subject), "--docs-per-step %lld", (long long)dps);
		else if (tps_given && e.mbs > e.docs) /* windows smaller than documents */
			snprintf(subject, sizeof(subject), "--tokens-per-step %lld with "
				 "--max-tokens %lld", (long long)tps, (long long)max_tokens);
		else if (tps_given)
			snprintf(subject, sizeof(subject), "--tokens-per-step %lld", (long long)tps);
		else
			snprintf(subject, sizeof(subject), "--gpus %lld (tokens per step "
				 "pp*dp*max-tokens = %lld)", (long long)gpus, (long long)tps);
		if (e.mem_step > LIMIT_MEM_GIB * gib) {
			rc = cmd_usage("solve", "%s is beyond the planning limits: an estimated "
				       "%.1f GiB of memory per step (limit %.0f GiB) for %s", subject,
				       e.mem_step / gib, LIMIT_MEM_GIB, per);
			goto out;
		}
		for (size_t i = 0; i < nm; i++) {
			const struct solve_price *p = &pr[i];
			const char *name = list[i]->name;
			double own = p->s_once + run_steps * p->s_own;
			double run = own + run_steps * p->s_common;
			if (run > LIMIT_TIME_S && 2.0 * own >= run) {
				if (list[i]->solve == bp_method_distca ||
				    list[i]->solve == bp_method_flexsp)
					rc = cmd_usage("solve", "%s at --gpus %lld is beyond the planning "
						       "limits: an estimated %.0f s for %lld steps (limit "
						       "%.0f s)", name, (long long)gpus, run,
						       (long long)run_steps, LIMIT_TIME_S);
				else if (list[i]->solve == bp_method_sparsebalance ||
					 list[i]->solve == bp_method_sb_lbb)
					rc = cmd_usage("solve", "%s is beyond the planning limits: an "
						       "estimated %.0f s for about %.0f documents per step "
						       "over %lld steps (limit %.0f s; its cost grows with "
						       "the square of the documents per step)", name, run,
						       p->docs, (long long)run_steps, LIMIT_TIME_S);
				else if (list[i]->solve == bp_method_hydraulis)
					rc = cmd_usage("solve", "--param trials=%lld is beyond the planning "
						       "limits: an estimated %.0f s of hydraulis dispatch "
						       "trials (limit %.0f s) for about %.0f documents per "
						       "step over %lld steps", (long long)p->trials, run,
						       LIMIT_TIME_S, p->docs, (long long)run_steps);
				else
					rc = cmd_usage("solve", "method '%s' is beyond the planning limits: "
						       "an estimated %.0f s of planning (limit %.0f s) for "
						       "%s over %lld steps", name, run, LIMIT_TIME_S, per,
						       (long long)run_steps);
				goto out;
			}
			double mem = p->mem_once + mem_steps * p->mem_step;
			if (mem > LIMIT_MEM_GIB * gib && 2.0 * p->mem_once >= mem) {
				rc = cmd_usage("solve", "method '%s' is beyond the planning limits: an "
					       "estimated %.1f GiB of memory (limit %.0f GiB) for %s",
					       name, mem / gib, LIMIT_MEM_GIB, per);
				goto out;
			}
		}
		if (s_step_max > LIMIT_TIME_S) {
			rc = cmd_usage("solve", "%s is beyond the planning limits: an estimated "
				       "%.0f s of planning per step (limit %.0f s) for %s", subject,
				       s_step_max, LIMIT_TIME_S, per);
			goto out;
		}
		if (mem_once_max + e.mem_step * mem_steps > LIMIT_MEM_GIB * gib) {
			rc = cmd_usage("solve", "%s %lld is beyond the planning limits: an "
				       "estimated %.1f GiB of memory (limit %.0f GiB) for %s",
				       steps ? "--steps" : "--epochs",
				       (long long)(steps ? steps : epochs),
				       (mem_once_max + e.mem_step * mem_steps) / gib, LIMIT_MEM_GIB,
				       per);
			goto out;
		}
		if (!stream_run && run_max > LIMIT_TIME_S) {
			rc = cmd_usage("solve", "%s %lld is beyond the planning limits: an "
				       "estimated %.0f s of planning per method (limit %.0f s) for %s",
				       steps ? "--steps" : "--epochs",
				       (long long)(steps ? steps : epochs), run_max, LIMIT_TIME_S, per);
			goto out;
		}
		if (!stream_run && run_sum > LIMIT_TIME_S) {
			rc = cmd_usage("solve", "--method '%s' (%zu methods) is beyond the planning "
				       "limits: an estimated %.0f s of planning (limit %.0f s) for %s "
				       "over %lld steps", cmd_cut(methods), nm, run_sum, LIMIT_TIME_S,
				       per, (long long)est_steps);
			goto out;
		}
	}
	if (profile ? cmd_load_profile(profile, &prof, prof_sha, &err)
		    : cmd_analytic_profile(gpu, model, &sc, 1, max_tokens, &prof, prof_sha, &err)) {
		rc = cmd_error("%s", err.text);
		goto out;
	}
	prof.recompute = recompute;
	prof.optimizer_replicated = opt_replicated;
	if (profile && (rc = preflight(list, nm, sc, &prof.model, shard, sched, vstages)) !=
			       EXIT_OK)
		goto out;
	if ((rc = preflight_params(list, nm, params, nparams, batching, sc, dp, gpus,
				   prof.hw.gpus_per_node, max_tokens, &prof.model, shard)) != EXIT_OK)
		goto out;
	if ((rc = cmd_check_nodes("solve", gpus, tp, prof.hw.gpus_per_node)) != EXIT_OK)
		goto out;
	rc = EXIT_DATA;
	for (size_t i = 0; i < nparams; i++)
		if (!strcmp(params[i].key, "sb_coverage") &&
		    !strncmp(params[i].value, "measured:", 9)) {
			if (cmd_load_coverage(params[i].value + 9, &sbcov, &err) < 0) {
				rc = cmd_error("%s", err.text);
				goto out;
			}
			have_sbcov = 1;
		}
	for (size_t i = 0; i < nm; i++)
		fsp |= list[i]->solve == bp_method_flexsp;
	if (fsp && !profile) {
		struct bp_scheme fsc[32];
		size_t nfsc = 0;
		long long mg = 0;
		for (size_t i = 0; i < nparams; i++)
			if (!strcmp(params[i].key, "max_group")) {
				int64_t v = 0;
				if (!bp_parse_int64(params[i].value, &v, "max_group", NULL) && v > 0)
					mg = v; /* a bad value is the method's error */
			}
		struct bp_model rmd;
		const struct bp_model *md = cmd_resolve_model(model, &rmd, &err) == 0 ? &rmd : NULL;
		long long maxg = md ? bp_flexsp_max_group(md, (int)tp, (int)dp, mg) : 1;
		for (long long s = 1; s <= maxg && nfsc < BP_ARRAY_LEN(fsc); s *= 2)
			fsc[nfsc++] = (struct bp_scheme){(int)tp, (int)s, 1};
		if (cmd_analytic_profile(gpu, model, fsc, nfsc, max_tokens, &fprof, fprof_sha,
					 &err)) {
			rc = cmd_error("%s", err.text);
			goto out;
		}
	}
	if (hyd) {
		struct cmd_hyd_req hr = {strategies, &ds, ds_sha, profile, gpu, model, (int)gpus,
					 sc, max_tokens, tps, dps, overlen};
		if ((rc = cmd_hyd_candidates(&hr, &hset, &hprof, hprof_sha)) != EXIT_OK)
			goto out;
	}
	if (out_dir && (rc = outdir_open(out_dir, &tmp_dir)) != EXIT_OK)
		goto out;
	rc = EXIT_DATA;
	/* The setting line heads the text table only: csv and json are the table alone. */
	if (!quiet && table_format)
		;
	else if (!quiet && order != BP_ORDER_DRAW) {
		char span[64];
		if (!steps)
			snprintf(span, sizeof(span), "%lld epoch%s", (long long)epochs,
				 epochs == 1 ? "" : "s");
		else
			snprintf(span, sizeof(span), "%lld steps", (long long)steps);
		printf("samples %s (%s, %zu samples, order %s), %d x %s (tp %lld cp %lld pp %lld "
		       "dp %lld), model %s, max %lld tokens, %s of %lld %s, seed %lld, documents "
		       "%s\n", ds.name, ds.format, ds.nlengths, bp_order_name(order), (int)gpus,
		       prof.hw.gpu, (long long)tp, (long long)cp, (long long)pp, (long long)dp,
		       prof.model.name, (long long)max_tokens, span, (long long)(dps ? dps : tps),
		       dps ? "samples" : "tokens", (long long)seed, bp_documents_name(documents));
	} else if (!quiet) {
		printf("dataset %s, %d x %s (tp %lld cp %lld pp %lld dp %lld), model %s, "
		       "max %lld tokens, %lld steps of %lld %s, seed %lld, documents %s\n", ds.name,
		       (int)gpus, prof.hw.gpu, (long long)tp, (long long)cp, (long long)pp,
		       (long long)dp, prof.model.name, (long long)max_tokens, (long long)steps,
		       (long long)(dps ? dps : tps), dps ? "documents" : "tokens", (long long)seed,
		       bp_documents_name(documents));
	}
	for (size_t i = 0; i < nm; i++) {
		struct bp_plan plan;
		struct bp_solve_opts o = {
			.method = list[i]->name,
			.cluster = {.gpus = (int)gpus, .tp = (int)tp, .cp = (int)cp, .pp = (int)pp,
				    .dp = (int)dp},
			.steps = steps, .tokens_per_step = tps, .docs_per_step = dps,
			.max_tokens = max_tokens, .overlen = overlen, .documents = documents,
			.order = order, .epochs = epochs, .last = last, .seed = (uint64_t)seed,
			.shard = shard, .dataset_name = ds.name, .dataset_sha = ds_sha,
			.profile_sha = prof_sha, .first_step = first_step,
			.flush_data = flush_data < 0 ? first_set : flush_data,
			.schedule = sched ? sched->name : NULL, .vstages = (int)vstages,
		};
		/* the run's recomputation, applied by every cost model of the plan */
		prof.recompute = hprof.recompute = fprof.recompute = recompute;
		prof.optimizer_replicated = fprof.optimizer_replicated = opt_replicated;
		const struct bp_profile *use = &prof;
		if (list[i]->solve == bp_method_hydraulis) {
			use = &hprof;
			o.profile_sha = hprof_sha;
			o.method_input = &hset;
		} else if (list[i]->solve == bp_method_flexsp && !profile) {
			use = &fprof;
			o.profile_sha = fprof_sha;
		} else if (have_sbcov) {
			o.method_input = &sbcov;
		}
		struct bp_param mine[32];
		size_t nmine = 0;
		for (size_t k = 0; k < nparams; k++)
			if (bp_method_takes(list[i], params[k].key, batching))
				mine[nmine++] = params[k];
		o.params = mine;
		o.nparams = nmine;
		double t0 = now_ms();
		/* A plan of lines is planned and written a window of steps at a time: memory
		 * holds one window, not the run. */
		char spath[4096] = "";
		if (out)
			snprintf(spath, sizeof(spath), "%s", out);
		else if (out_dir)
			outdir_path(spath, sizeof(spath), tmp_dir, list[i]->name);
		int streamed = plan_lines && spath[0];
		struct streamed_out so = {.progress = !quiet, .method = list[i]->name,
					  .method_i = i, .nmethods = nm, .steps_total = est_steps};
		so.t0 = so.last = now_ms();
		/* a plan held whole is planned --chunk-steps at a time too, so that it reports */
		int r = streamed ? solve_streamed(&ds, use, &o, chunk_steps, &so, &plan, &err)
				 : bp_solve_progress(&ds, use, &o, (size_t)chunk_steps, solve_progress,
						     &so, &plan, &err);
		if (!streamed)
			report_progress(&so, 1);
		double t1 = now_ms();
		if (r < 0) {
			if (r == BP_INFEASIBLE) {
				fprintf(stderr, "balplan: error: method '%s' is infeasible: %s\n",
					list[i]->name, err.text);
				rc = EXIT_INFEASIBLE;
			} else {
				rc = cmd_error("method '%s' failed: %s", list[i]->name, err.text);
			}
			goto out;
		}
		/* The method's own warning about the finished plan (ILP: steps not proven
		 * optimal), one line each. */
		if (list[i]->warn) {
			char wbuf[1024];
			list[i]->warn(&plan, wbuf, sizeof(wbuf));
			for (char *line = wbuf, *nl; *line; line = nl + 1) {
				nl = strchr(line, '\n');
				if (nl)
					*nl = 0;
				cmd_warn("method '%s': %s", list[i]->name, line);
				if (!nl)
					break;
			}
		}
		res[i].method = list[i]->name;
		res[i].trained = streamed ? (so.cut ? "cut" : "whole")
					  : bp_plan_documents_trained(&plan);
		res[i].s = plan.summary;
		res[i].plan_ms_per_step = (t1 - t0) / (double)(plan.summary.steps ? plan.summary.steps
										  : 1);
		int wr = EXIT_OK;
		if (streamed) {
			wr = write_streamed(&plan, &so, spath);
		} else if (out) {
			wr = write_plan(&plan, out);
		} else if (out_dir) {
			char path[4096];
			outdir_path(path, sizeof(path), tmp_dir, list[i]->name);
			wr = write_plan(&plan, path);
		}
		bp_plan_release(&plan);
		if (wr != EXIT_OK) {
			rc = wr;
			goto out;
		}
	}
	if (tmp_dir) {
		rc = outdir_commit(out_dir, tmp_dir, list, nm);
		if (rc != EXIT_OK)
			goto out;
	}
	/* Documents over the cap are not trained as they are: said once (every method sees the
	 * same samples), with the counts and the option that decides. */
	if (nm > 0 && (res[0].s.truncated > 0 || res[0].s.dropped > 0))
		cmd_warn("%lld document%s longer than --max-tokens %lld %s (--over-length %s)",
			 (long long)(res[0].s.truncated + res[0].s.dropped),
			 res[0].s.truncated + res[0].s.dropped == 1 ? "" : "s",
			 (long long)max_tokens,
			 res[0].s.dropped > 0 ? "were left out" : "were cut to it",
			 res[0].s.dropped > 0 ? "drop" : "truncate");
	if (!quiet)
		print_table(res, nm, timing, table_format, baseline);
	rc = EXIT_OK;
out:
	if (tmp_dir) {
		if (rc != EXIT_OK)
			outdir_abort(tmp_dir, list, nm);
		free(tmp_dir);
	}
	bp_dataset_release(&ds);
	bp_profile_release(&prof);
	bp_profile_release(&hprof);
	bp_profile_release(&fprof);
	bp_hyd_set_release(&hset);
	bp_sb_coverage_release(&sbcov);
	return rc;
}
