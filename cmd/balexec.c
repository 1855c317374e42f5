/* balexec.c: the executor's front end (executor/README.md; issue 4).
 *
 * One process per GPU (or, with the host backend, per emulated GPU) under srun or mpirun:
 * parse options, start the backend, check the world against the launcher and the plan on
 * every rank, replay the plan (executor/engine.c), gather the trace to rank 0, which writes
 * it and prints measured against predicted step times. Every error names the rank and host:
 * "balexec: error: rank 3 (node1): ...". A rank that fails once the replay has started ends
 * every rank (the backend's abort), so srun and mpirun exit non-zero. */
#include <getopt.h>
#include <signal.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmdutil.h"
#include "engine.h"
#include "jsonutil.h"
#include "rendezvous.h"
#include "solve.h"
#include "strbuf.h"
#include "trace.h"

enum { EXIT_TIMEOUT = 3 };

static int g_rank = -1;
static char g_host[256] = "?";

static void exec_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void exec_error(const char *fmt, ...)
{
	struct bp_sb msg = BP_SB_INIT;
	va_list ap;
	/* one write of the whole line, so ranks sharing a terminal do not interleave */
	if (g_rank >= 0)
		bp_sb_addf(&msg, "balexec: error: rank %d (%s): ", g_rank, g_host);
	else
		bp_sb_adds(&msg, "balexec: error: ");
	va_start(ap, fmt);
	bp_sb_vaddf(&msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", msg.buf); /* out of memory: what fit */
	fflush(stderr);
	bp_sb_release(&msg);
}

static void usage(FILE *f)
{
	const char *names = bp_backend_names();
	fprintf(f,
		"usage: balexec [--backend NAME] [--steps A:B] [--warmup N] [--trace FILE]\n"
		"               [--time-scale X] [--timeout S] [--max-bytes N] [--profile FILE]\n"
		"               [--rendezvous HOST:PORT] [--rank R --world W] [--local-rank L]\n"
		"               [--gpu-times FILE]\n"
		"               PLAN\n\n"
		"Replays a plan, one process per GPU of the plan, under srun (or mpirun for the\n"
		"host backend):\n"
		"  srun -n 8 --mpi=pmix --resv-ports=1 balexec --backend host plan.json\n"
		"  srun -N 2 --ntasks-per-node=8 --gpus-per-node=8 --resv-ports=1 \\\n"
		"       --kill-on-bad-exit=1 balexec --backend cuda --trace t.json plan.json\n\n"
		"  --backend NAME    built in: %s (cuda: cuBLAS, own dense and block-sparse\n"
		"                    attention kernels, NCCL; host: compute emulated by sleeping\n"
		"                    each primitive's share of the predicted time, communication\n"
		"                    real over MPI) (default host)\n"
		"  --steps A:B       plan steps A to B-1 (default: all; A: or :B allowed)\n"
		"  --warmup N        untimed replays of step A first (default 1)\n"
		"  --trace FILE      write the measured balplan.trace/v2 (rank 0 writes)\n"
		"  --time-scale X    host: emulated compute = predicted x X (default 1)\n"
		"  --timeout S       seconds any rank waits for a peer before all end (default 300)\n"
		"  --max-bytes N     cap on any message or collective buffer (default: host 4096,\n"
		"                    cuda 2^30)\n"
		"  --profile FILE    the profile the plan was made with (default: regenerate the\n"
		"                    analytic profile the plan names)\n"
		"  --rendezvous HOST:PORT  where rank 0 listens (default: the first node of the\n"
		"                    Slurm step and the port of srun --resv-ports=1; or the\n"
		"                    BALPLAN_RENDEZVOUS environment variable); 'none': skip it\n"
		"                    (host backend: MPI's own start-up then checks the world)\n"
		"  --rank R, --world W  this process's rank and the world size, for launchers that\n"
		"                    set no SLURM_PROCID / SLURM_NTASKS\n"
		"  --local-rank L    the GPU of this node to use (default SLURM_LOCALID, else 0)\n"
		"  --gpu-times FILE  cuda: each rank writes its kernels' time per operation and\n"
		"                    family (GEMMs by kind, LM head, attention) from CUDA events\n"
		"                    to FILE (FILE.rank<R> in a world of more than one)\n"
		"  --debug-hang-rank R    rank R sleeps forever in its first step\n"
		"  --debug-exit-rank R    rank R exits (status 1) in its first step\n"
		"  --debug-absent-rank R  rank R never joins the rendezvous (or MPI_Init)\n\n"
		"Rank and world come from SLURM_PROCID / SLURM_NTASKS (flags override) and must\n"
		"match the runtime's world (MPI's for the host backend) and the plan's GPU count,\n"
		"or every rank refuses to start. Ranks meet at a TCP rendezvous first (when srun\n"
		"reserved a port or one is given): same plan and steps everywhere, or none starts.\n\n"
		"exit status: 0 ok, 1 data or runtime error, 2 usage error or a world that does not\n"
		"match the plan, 3 a rank timed out waiting for a peer\n",
		names[0] ? names : "(none: built without MPI)");
}

static int parse_steps(const char *s, size_t n, size_t *lo, size_t *hi)
{
	const char *colon = strchr(s, ':');
	struct bp_error err;
	int64_t a = 0, b = (int64_t)n;
	char left[64];
	if (!colon || (size_t)(colon - s) >= sizeof(left))
		return -1;
	memcpy(left, s, (size_t)(colon - s));
	left[colon - s] = 0;
	if (left[0] && bp_parse_int64(left, &a, "steps", &err) < 0)
		return -1;
	if (colon[1] && bp_parse_int64(colon + 1, &b, "steps", &err) < 0)
		return -1;
	if (a < 0 || b > (int64_t)n || a >= b)
		return -1;
	*lo = (size_t)a;
	*hi = (size_t)b;
	return 0;
}

/* An integer from the environment: 0 absent, 1 read, -1 malformed. */
static int env_int(const char *name, int64_t *out)
{
	const char *v = getenv(name);
	struct bp_error err;
	if (!v || !*v)
		return 0;
	return bp_parse_int64(v, out, name, &err) < 0 ? -1 : 1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Rank 0: measured against predicted x time-scale, per step, and the median error; then
 * what the timed steps moved. */
static int print_summary(const struct bp_trace *tr, const struct bp_exec_stats *x, size_t lo,
			 size_t hi)
{
	double *errs = calloc(tr->nsteps ? tr->nsteps : 1, sizeof(double));
	if (!errs) {
		exec_error("cannot print the summary: out of memory");
		return EXIT_DATA;
	}
	printf("balexec: %s backend, %d ranks, steps %zu:%zu, warm-up %d, time scale %g\n",
	       tr->backend, tr->world, lo, hi, tr->warmup, tr->time_scale);
	printf("%6s %14s %14s %9s\n", "step", "measured_ms", "predicted_ms", "error");
	for (size_t i = 0; i < tr->nsteps; i++) {
		const struct bp_trace_step *s = &tr->steps[i];
		double want = s->predicted_us * tr->time_scale;
		double e = want > 0 ? (s->step_us - want) / want : 0.0;
		errs[i] = fabs(e);
		printf("%6lld %14.3f %14.3f %+8.2f%%\n", (long long)s->index, s->step_us / 1e3,
		       want / 1e3, 100.0 * e);
	}
	qsort(errs, tr->nsteps, sizeof(double), cmp_double);
	double med = tr->nsteps % 2 ? errs[tr->nsteps / 2]
				    : (errs[tr->nsteps / 2 - 1] + errs[tr->nsteps / 2]) / 2;
	printf("median |measured - predicted x scale| / (predicted x scale): %.2f%%\n",
	       100.0 * med);
	printf("moved in the timed steps, all ranks (buffers capped at %lld bytes):\n",
	       (long long)tr->max_bytes);
	printf("  %-14s %10s %16s\n", "kind", "calls", "bytes");
	for (int k = 0; k < BP_EXEC_NKINDS; k++)
		if (x->calls[k] > 0)
			printf("  %-14s %10.0f %16.0f\n", bp_exec_kind_name(k), x->calls[k],
			       x->bytes[k]);
	free(errs);
	return cmd_finish(EXIT_OK) == EXIT_OK ? EXIT_OK : EXIT_DATA;
}

static int write_trace(const struct bp_trace *tr, const char *path)
{
	struct bp_error err;
	json_t *j = bp_trace_to_json(tr);
	char *text = j ? bp_json_dump_canonical(j) : NULL;
	int rc = EXIT_OK;
	json_decref(j);
	if (!text) {
		exec_error("cannot write trace '%s': out of memory", path);
		return EXIT_DATA;
	}
	if (cmd_write_file(path, text, strlen(text), &err) < 0) {
		exec_error("cannot write trace '%s': %s", path, err.text);
		rc = EXIT_DATA;
	}
	free(text);
	return rc;
}

/* The world checks every rank makes before starting (issue 4): the launcher's world (flags
 * or Slurm) against MPI's, and MPI's against the plan. Returns 0 or EXIT_USAGE, printed. */
static int check_world(int mpi_rank, int mpi_world, int64_t l_rank, int64_t l_world,
		       const char *l_src, int gpus)
{
	if (l_world > 1 && mpi_world == 1) {
		exec_error("%s says %lld tasks but MPI gave this process a world of one: every "
			   "rank is running alone (under srun pass the --mpi plugin this MPI was "
			   "built for, e.g. --mpi=pmix for Open MPI)", l_src, (long long)l_world);
		return EXIT_USAGE;
	}
	if (l_world > 0 && l_world != mpi_world) {
		exec_error("%s says %lld tasks but the MPI world has %d", l_src,
			   (long long)l_world, mpi_world);
		return EXIT_USAGE;
	}
	if (l_rank >= 0 && l_rank != mpi_rank) {
		exec_error("%s says rank %lld but MPI says rank %d", l_src, (long long)l_rank,
			   mpi_rank);
		return EXIT_USAGE;
	}
	if (mpi_world == 1 && gpus > 1) {
		exec_error("the world is one process but the plan needs %d ranks: start balexec "
			   "with 'srun -n %d --mpi=pmix' or 'mpirun -np %d'", gpus, gpus, gpus);
		return EXIT_USAGE;
	}
	if (mpi_world != gpus) {
		exec_error("the plan needs %d ranks (one per GPU), the world has %d", gpus,
			   mpi_world);
		return EXIT_USAGE;
	}
	return 0;
}

/* A watchdog for the calls that take no timeout of their own (MPI_Init, MPI's group
 * creation; the CUDA backend's have their own deadlines and come first): SIGALRM after the
 * timeout plus a grace prints a prepared message and ends the process with EXIT_TIMEOUT.
 * Only async-signal-safe calls in the handler. */
static char g_wd_msg[512];
static size_t g_wd_len;

static void watchdog_fire(int sig)
{
	(void)sig;
	ssize_t w = write(STDERR_FILENO, g_wd_msg, g_wd_len);
	(void)w;
	_exit(EXIT_TIMEOUT);
}

static void watchdog_arm(double seconds, const char *what)
{
	struct sigaction sa;
	int n = snprintf(g_wd_msg, sizeof(g_wd_msg),
			 "balexec: error: rank %d (%s): timed out after %.0f s in %s (a peer "
			 "that never came, or a launcher that started the ranks apart)\n",
			 g_rank, g_host, seconds, what);
	g_wd_len = n < 0 ? 0 : (size_t)n < sizeof(g_wd_msg) ? (size_t)n : sizeof(g_wd_msg) - 1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = watchdog_fire;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	alarm((unsigned)(seconds + 0.999));
}

static void watchdog_disarm(void)
{
	alarm(0);
	signal(SIGALRM, SIG_DFL);
}

/* Where the rendezvous listens: --rendezvous HOST:PORT, else BALPLAN_RENDEZVOUS, else the
 * first node of the Slurm step (SLURM_STEP_NODELIST, or SLURM_JOB_NODELIST) and the first
 * port srun reserved (SLURM_STEP_RESV_PORTS, from `srun --resv-ports=1`; Slurm may reserve
 * one per step anyway when MpiParams=ports is set). "none" turns it off. 1 found, 0 none,
 * -1 malformed (printed). */
static int rdv_address(const char *flag, char *host, size_t hostn, int *port)
{
	struct bp_error err;
	const char *spec = flag ? flag : getenv("BALPLAN_RENDEZVOUS");
	if (spec && !strcmp(spec, "none"))
		return 0;
	if (spec && *spec) {
		const char *colon = strrchr(spec, ':');
		int64_t v;
		if (!colon || colon == spec || (size_t)(colon - spec) >= hostn ||
		    bp_parse_int64(colon + 1, &v, "port", &err) < 0 || v < 1 || v > 65535) {
			exec_error("bad rendezvous address '%s' (%s): want HOST:PORT", spec,
				   flag ? "--rendezvous" : "BALPLAN_RENDEZVOUS");
			return -1;
		}
		memcpy(host, spec, (size_t)(colon - spec));
		host[colon - spec] = 0;
		*port = (int)v;
		return 1;
	}
	const char *ports = getenv("SLURM_STEP_RESV_PORTS");
	const char *nodes = getenv("SLURM_STEP_NODELIST");
	if (!nodes || !*nodes)
		nodes = getenv("SLURM_JOB_NODELIST");
	if (!ports || !*ports || !nodes || !*nodes)
		return 0;
	if (bp_slurm_first_port(ports, port, &err) < 0 ||
	    bp_slurm_first_host(nodes, host, hostn, &err) < 0) {
		exec_error("cannot find the rendezvous from SLURM_STEP_RESV_PORTS '%s' and node "
			   "list '%s': %s", ports, nodes, err.text);
		return -1;
	}
	return 1;
}

/* main's steps return this to go on, EXEC_HINT for a usage error that points at --help, or
 * an exit status to stop with. */
#define EXEC_GO (-1)
#define EXEC_HINT (-2)

/* The command line as parsed (exec_parse) and checked (exec_check_args). */
struct exec_args {
	const char *backend, *trace_path, *profile_path, *steps, *rdv_flag, *gpu_times;
	const char *plan_path;
	struct bp_engine_opts eo;
	int64_t f_rank, f_world, f_local, absent_rank;
	const struct bp_backend *be;
};

/* What a run reads and starts, released by exec_release. */
struct exec_run {
	struct bp_plan plan;
	struct bp_profile prof;
	struct bp_costs cm;
	struct bp_trace tr;
	void *st;           /* the backend's state */
	char *text, sha[65], uid[4096];
	size_t uid_len;
	int have_cm, started, rt_rank, rt_world;
	int64_t l_rank, l_world, l_local; /* the launcher's view: flags, else Slurm */
	const char *src;                  /* which of them said the world */
};

/* An integer option (--warmup, --max-bytes, --rank, --world, --local-rank, --debug-*). */
static int parse_int_opt(struct exec_args *a, int c, const char *arg)
{
	struct bp_error err;
	int64_t v;
	if (bp_parse_int64(arg, &v, "", &err) < 0 || v < 0 ||
	    v > (c == 'B' ? (1 << 30) : INT32_MAX - 1) || (c == 'B' && v < 64) ||
	    (c == 'W' && v < 1)) {
		exec_error("bad value '%s' for --%s", cmd_cut(arg),
			   c == 'w'   ? "warmup"
			   : c == 'B' ? "max-bytes (64 to 2^30)"
			   : c == 'r' ? "rank"
			   : c == 'W' ? "world"
			   : c == 'L' ? "local-rank"
			   : c == 'H' ? "debug-hang-rank"
			   : c == 'E' ? "debug-exit-rank"
				      : "debug-absent-rank");
		return EXEC_HINT;
	}
	if (c == 'w')
		a->eo.warmup = (int)v;
	else if (c == 'B')
		a->eo.max_bytes = v;
	else if (c == 'r')
		a->f_rank = v;
	else if (c == 'W')
		a->f_world = v;
	else if (c == 'L')
		a->f_local = v;
	else if (c == 'H')
		a->eo.hang_rank = (int)v;
	else if (c == 'E')
		a->eo.exit_rank = (int)v;
	else
		a->absent_rank = v;
	return EXEC_GO;
}

/* One option c with its argument arg (getopt's optarg). */
static int parse_opt(struct exec_args *a, int c, const char *arg)
{
	struct bp_error err;
	double x;
	switch (c) {
	case 'b': a->backend = arg; break;
	case 's': a->steps = arg; break;
	case 't': a->trace_path = arg; break;
	case 'p': a->profile_path = arg; break;
	case 'R': a->rdv_flag = arg; break;
	case 'G': a->gpu_times = arg; break;
	case 'w':
	case 'B':
	case 'r':
	case 'W':
	case 'L':
	case 'H':
	case 'E':
	case 'A':
		return parse_int_opt(a, c, arg);
	case 'x':
	case 'T':
		if (bp_parse_double(arg, &x, "", &err) < 0 || !(x > 0) || x > 1e6) {
			exec_error("bad value '%s' for --%s (a positive number)", cmd_cut(arg),
				   c == 'x' ? "time-scale" : "timeout");
			return EXEC_HINT;
		}
		if (c == 'x')
			a->eo.time_scale = x;
		else
			a->eo.timeout_s = x;
		break;
	case 'h':
		usage(stdout);
		return cmd_finish(EXIT_OK) == EXIT_OK ? EXIT_OK : EXIT_DATA;
	case 'V':
		printf("balexec %s\n", BALPLAN_VERSION);
		return cmd_finish(EXIT_OK) == EXIT_OK ? EXIT_OK : EXIT_DATA;
	default:
		return EXEC_HINT;
	}
	return EXEC_GO;
}

static int exec_parse(int argc, char **argv, struct exec_args *a)
{
	static const struct option opts[] = {
		{"backend", required_argument, NULL, 'b'},
		{"steps", required_argument, NULL, 's'},
		{"warmup", required_argument, NULL, 'w'},
		{"trace", required_argument, NULL, 't'},
		{"time-scale", required_argument, NULL, 'x'},
		{"timeout", required_argument, NULL, 'T'},
		{"max-bytes", required_argument, NULL, 'B'},
		{"profile", required_argument, NULL, 'p'},
		{"rank", required_argument, NULL, 'r'},
		{"world", required_argument, NULL, 'W'},
		{"local-rank", required_argument, NULL, 'L'},
		{"rendezvous", required_argument, NULL, 'R'},
		{"gpu-times", required_argument, NULL, 'G'},
		{"debug-hang-rank", required_argument, NULL, 'H'},
		{"debug-exit-rank", required_argument, NULL, 'E'},
		{"debug-absent-rank", required_argument, NULL, 'A'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	int c;
	memset(a, 0, sizeof(*a));
	a->backend = "host";
	a->eo = (struct bp_engine_opts){1.0, 300.0, -1, 0, 0, 1, -1, -1};
	a->f_rank = a->f_world = a->f_local = a->absent_rank = -1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int r = parse_opt(a, c, optarg);
		if (r != EXEC_GO)
			return r;
	}
	if (optind != argc - 1) {
		exec_error(optind >= argc ? "no plan given" : "more than one plan given");
		return EXEC_HINT;
	}
	a->plan_path = argv[optind];
	return EXEC_GO;
}

/* The output files against the inputs: none may overwrite the plan or the profile. */
static int check_outputs(const struct exec_args *a)
{
	const char *plan = a->plan_path, *prof = a->profile_path, *trace = a->trace_path;
	if (prof && !strcmp(prof, "-") && !strcmp(plan, "-")) {
		exec_error("the plan and --profile cannot both be standard input ('-')");
		return EXEC_HINT;
	}
	if (trace && cmd_same_file(trace, plan)) {
		exec_error("--trace '%s' is the plan being read: refusing to overwrite it",
			   cmd_cut(trace));
		return EXEC_HINT;
	}
	if (trace && prof && cmd_same_file(trace, prof)) {
		exec_error("--trace '%s' is the profile being read: refusing to overwrite it",
			   cmd_cut(trace));
		return EXEC_HINT;
	}
	if (a->gpu_times && (cmd_same_file(a->gpu_times, plan) ||
			     (prof && cmd_same_file(a->gpu_times, prof)) ||
			     (trace && cmd_same_file(a->gpu_times, trace)))) {
		exec_error("--gpu-times '%s' is the plan, the profile or the trace: refusing to "
			   "overwrite it", cmd_cut(a->gpu_times));
		return EXEC_HINT;
	}
	return EXEC_GO;
}

/* The options against each other, and the backend they name, before any input is read. */
static int exec_check_args(struct exec_args *a)
{
	int r = check_outputs(a);
	if (r != EXEC_GO)
		return r;
	if ((a->f_rank >= 0) != (a->f_world >= 0)) {
		exec_error("--rank and --world go together");
		return EXEC_HINT;
	}
	if (a->f_rank >= 0 && a->f_rank >= a->f_world) {
		exec_error("--rank %lld is outside --world %lld", (long long)a->f_rank,
			   (long long)a->f_world);
		return EXEC_HINT;
	}
	a->be = bp_backend_find(a->backend);
	if (!a->be) {
		exec_error("unknown backend '%s' (built in: %s)", cmd_cut(a->backend),
			   bp_backend_names()[0] ? bp_backend_names() : "none");
		return EXEC_HINT;
	}
	if (a->gpu_times && strcmp(a->be->name, "cuda")) {
		exec_error("--gpu-times needs --backend cuda (the %s backend runs no kernels)",
			   a->be->name);
		return EXEC_HINT;
	}
	/* Host: 4 KiB (Open MPI's shared-memory eager limit) keeps 64 emulated ranks on one
	 * machine with a collective per layer: at 64 KiB the copies of a plain <tp 2, cp 2,
	 * pp 2> replay's 48 collectives per op cost 8 ranks on 2 cores 0.4 s of CPU per step and
	 * put its step error at 4-16% (ASan) instead of 2-3.5%. A real backend moves the plan's
	 * real byte counts (up to 1 GiB per buffer). */
	if (a->eo.max_bytes < 0)
		a->eo.max_bytes = a->be->idle_until ? (int64_t)1 << 12 : (int64_t)1 << 30;
	return EXEC_GO;
}

/* The launcher's view: flags, else Slurm. */
static int exec_launcher(const struct exec_args *a, struct exec_run *r)
{
	r->l_rank = a->f_rank;
	r->l_world = a->f_world;
	r->l_local = a->f_local;
	r->src = "--world";
	if (a->f_world < 0) {
		int ra = env_int("SLURM_PROCID", &r->l_rank);
		int rb = env_int("SLURM_NTASKS", &r->l_world);
		int rd = a->f_local < 0 ? env_int("SLURM_LOCALID", &r->l_local) : 1;
		if (ra < 0 || rb < 0 || rd < 0) {
			exec_error("malformed SLURM_PROCID, SLURM_NTASKS or SLURM_LOCALID");
			return EXIT_USAGE;
		}
		if (ra == 0 || rb == 0) {
			r->l_rank = -1;
			r->l_world = -1;
		}
		if (rd == 0)
			r->l_local = -1;
		r->src = "SLURM_NTASKS";
	}
	g_rank = r->l_rank >= 0 ? (int)r->l_rank : -1;
	return EXEC_GO;
}

/* Reads the plan and checks it against the launcher and the options. */
static int exec_read_plan(struct exec_args *a, struct exec_run *r)
{
	struct bp_error err;
	size_t len = 0;
	const struct bp_plan *plan = &r->plan;
	if (cmd_read_file(a->plan_path, &r->text, &len, &err) < 0) {
		exec_error("cannot read plan '%s': %s", a->plan_path, err.text);
		return EXIT_DATA;
	}
	bp_sha256_hex(r->text, len, r->sha);
	if (cmd_parse_plan(a->plan_path, r->text, len, &r->plan, &err) < 0) { /* '-' too */
		exec_error("%s", err.text);
		return EXIT_DATA;
	}
	if (r->l_world > 0 && r->l_world != plan->cluster.gpus) {
		exec_error("the plan needs %d ranks (one per GPU), %s says %lld", plan->cluster.gpus,
			   r->src, (long long)r->l_world);
		return EXIT_USAGE;
	}
	a->eo.step_lo = 0;
	a->eo.step_hi = plan->nsteps;
	if (a->steps && parse_steps(a->steps, plan->nsteps, &a->eo.step_lo, &a->eo.step_hi) < 0) {
		exec_error("bad --steps '%s': want A:B with 0 <= A < B <= %zu (the plan's steps)",
			   cmd_cut(a->steps), plan->nsteps);
		return EXIT_USAGE;
	}
	if (a->eo.hang_rank >= plan->cluster.gpus || a->eo.exit_rank >= plan->cluster.gpus ||
	    a->absent_rank >= plan->cluster.gpus) {
		exec_error("a --debug-*-rank is outside the plan's %d ranks", plan->cluster.gpus);
		return EXIT_USAGE;
	}
	return EXEC_GO;
}

/* Local checks: every rank has the same inputs, so every rank reaches the same answer and
 * exits with it on its own; the launcher reports the non-zero status. */
static int exec_load(struct exec_args *a, struct exec_run *r)
{
	struct bp_error err;
	int rc = exec_read_plan(a, r);
	if (rc != EXEC_GO)
		return rc;
	if (cmd_plan_profile(&r->plan, a->profile_path, 1, &r->prof, &err) < 0) {
		exec_error("cannot get the plan's profile: %s", err.text);
		return EXIT_DATA;
	}
	/* The same validation as balplan check, on every rank before anything starts: an
	 * invalid or edited plan never replays. */
	if (bp_plan_check(&r->plan, &r->prof, &err) < 0) {
		exec_error("plan '%s' is invalid: %s", a->plan_path, err.text);
		return EXIT_DATA;
	}
	/* What the backend cannot replay (an attention kind it has no kernel for) is refused
	 * here, on every rank alike, before anything starts. */
	if (bp_engine_check(&r->plan, a->be, a->eo.step_lo, a->eo.step_hi, &err) < 0) {
		exec_error("cannot replay plan '%s': %s", a->plan_path, err.text);
		return EXIT_DATA;
	}
	r->have_cm = 1;
	if (bp_plan_costs(&r->plan, &r->prof, &r->cm, &err) < 0) {
		exec_error("cannot make the cost model: %s", err.text);
		return EXIT_DATA;
	}
	return EXEC_GO;
}

/* The rendezvous (executor/rendezvous.h): every rank shows up with the same plan and steps
 * before any backend starts, and rank 0 hands out what the backend needs (the NCCL unique
 * id). A rank that never comes ends the others at the timeout. */
static int exec_rendezvous(const struct exec_args *a, struct exec_run *r)
{
	const struct bp_backend *be = a->be;
	struct bp_error err;
	char host[256] = "";
	int port = 0, found = rdv_address(a->rdv_flag, host, sizeof(host), &port);
	if (found < 0)
		return EXIT_USAGE;
	if (!found && be->make_uid && r->plan.cluster.gpus > 1) {
		exec_error("the %s backend needs a rendezvous: run under 'srun --resv-ports=1' or "
			   "pass --rendezvous HOST:PORT (rank 0's node)", be->name);
		return EXIT_USAGE;
	}
	if (found && r->l_rank < 0) {
		exec_error("a rendezvous needs this process's rank: run under srun or pass --rank "
			   "and --world");
		return EXIT_USAGE;
	}
	if (r->l_rank == 0 && be->make_uid &&
	    be->make_uid(r->uid, sizeof(r->uid), &r->uid_len, &err) < 0) {
		exec_error("cannot make the %s backend's id: %s", be->name, err.text);
		return EXIT_DATA;
	}
	if (r->l_rank >= 0 && r->l_rank == a->absent_rank) {
		/* Debug: this rank never joins the rendezvous (ours, or without one MPI's inside
		 * MPI_Init); the others must give up at the timeout. */
		struct timespec ts = {(time_t)a->eo.timeout_s + 5, 0};
		nanosleep(&ts, NULL);
		exec_error("did not join the rendezvous (--debug-absent-rank)");
		return EXIT_DATA;
	}
	if (found && r->l_world > 1) {
		char check[128];
		snprintf(check, sizeof(check), "%.64s steps %zu:%zu", r->sha, a->eo.step_lo,
			 a->eo.step_hi);
		struct bp_rdv_opts ro = {host, port, (int)r->l_rank, (int)r->l_world,
					 a->eo.timeout_s, check, g_host};
		int rc = bp_rendezvous(&ro, r->uid, &r->uid_len, sizeof(r->uid), &err);
		if (rc != 0) {
			exec_error("%s", err.text);
			return rc == BP_EXEC_TIMEOUT ? EXIT_TIMEOUT : EXIT_DATA;
		}
	}
	return EXEC_GO;
}

/* Starts the backend and checks its world against the launcher's and the plan's. */
static int exec_start(const struct exec_args *a, struct exec_run *r)
{
	const struct bp_backend *be = a->be;
	struct bp_error err;
	struct bp_backend_args ba = {(int)r->l_rank, (int)r->l_world, (int)r->l_local,
				     a->eo.timeout_s, r->uid_len ? r->uid : NULL, r->uid_len,
				     a->gpu_times};
	watchdog_arm(a->eo.timeout_s + 5, "starting the backend");
	if (be->init(&r->st, &ba, &r->rt_rank, &r->rt_world, g_host, sizeof(g_host), &err) < 0) {
		exec_error("cannot start the %s backend: %s", be->name, err.text);
		return EXIT_DATA;
	}
	r->started = 1;
	be->set_timeout(r->st, a->eo.timeout_s);
	int rc = check_world(r->rt_rank, r->rt_world, r->l_rank, r->l_world, r->src,
			     r->plan.cluster.gpus);
	if (rc)
		return rc;
	g_rank = r->rt_rank;
	return EXEC_GO;
}

/* The replay: from here on every rank runs the same collective calls, so a failure ends
 * them all (the backend's abort). Rank 0 writes the trace and prints the summary. */
static int exec_replay(const struct exec_args *a, struct exec_run *r)
{
	const struct bp_backend *be = a->be;
	struct bp_error err;
	watchdog_arm(a->eo.timeout_s + 5, "making the communication groups");
	struct bp_engine *eng = bp_engine_new(&r->plan, &r->cm, be, r->st, r->rt_rank,
					      r->rt_world, &a->eo, &err);
	watchdog_disarm();
	if (!eng) {
		exec_error("%s", err.text);
		be->abort(r->st, EXIT_DATA);
	}
	int rc = bp_engine_run(eng, &err);
	if (rc == BP_EXEC_EXIT) {
		/* Debug: a rank that dies mid-replay, without telling anyone. */
		exec_error("%s", err.text);
		fflush(NULL);
		_exit(EXIT_DATA);
	}
	if (rc == 0)
		rc = bp_engine_gather(eng, r->sha, &r->tr, &err);
	if (rc != 0) {
		exec_error("%s", err.text);
		be->abort(r->st, rc == BP_EXEC_TIMEOUT ? EXIT_TIMEOUT : EXIT_DATA);
	}
	if (r->rt_rank == 0) {
		if (a->trace_path && write_trace(&r->tr, a->trace_path) != EXIT_OK)
			be->abort(r->st, EXIT_DATA);
		struct bp_exec_stats xs;
		bp_engine_stats(eng, &xs);
		if (print_summary(&r->tr, &xs, a->eo.step_lo, a->eo.step_hi) != EXIT_OK)
			be->abort(r->st, EXIT_DATA);
	}
	bp_engine_free(eng);
	return EXIT_OK;
}

static void exec_run_init(struct exec_run *r)
{
	memset(r, 0, sizeof(*r));
	bp_plan_init(&r->plan);
	bp_profile_init(&r->prof);
	bp_trace_init(&r->tr);
}

/* Releases what the run holds and finalizes a started backend; the exit status. */
static int exec_release(const struct exec_args *a, struct exec_run *r, int rc)
{
	struct bp_error err;
	watchdog_disarm();
	if (r->have_cm)
		bp_costs_release(&r->cm);
	bp_profile_release(&r->prof);
	bp_plan_release(&r->plan);
	bp_trace_release(&r->tr);
	free(r->text);
	if (r->started && a->be->finalize(r->st, &err) < 0) {
		exec_error("%s", err.text);
		if (rc == EXIT_OK)
			rc = EXIT_DATA;
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct exec_args a;
	struct exec_run r;
	int64_t v;
	/* Until the launcher's view is settled, errors name SLURM_PROCID when there is one. */
	if (env_int("SLURM_PROCID", &v) == 1 && v >= 0 && v < INT32_MAX)
		g_rank = (int)v;
	if (gethostname(g_host, sizeof(g_host)) < 0)
		snprintf(g_host, sizeof(g_host), "?");
	g_host[sizeof(g_host) - 1] = 0;
	int rc = exec_parse(argc, argv, &a);
	if (rc == EXEC_GO)
		rc = exec_check_args(&a);
	if (rc == EXEC_HINT) {
		fprintf(stderr, "run 'balexec --help' for usage\n");
		return EXIT_USAGE;
	}
	if (rc != EXEC_GO)
		return rc;
	exec_run_init(&r);
	rc = exec_launcher(&a, &r);
	if (rc == EXEC_GO)
		rc = exec_load(&a, &r);
	if (rc == EXEC_GO)
		rc = exec_rendezvous(&a, &r);
	if (rc == EXEC_GO)
		rc = exec_start(&a, &r);
	if (rc == EXEC_GO)
		rc = exec_replay(&a, &r);
	return exec_release(&a, &r, rc);
}
