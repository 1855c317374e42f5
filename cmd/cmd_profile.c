/* cmd_profile.c: `balplan profile`: write a profile. --analytic fills the tables from GPU
 * specifications (profiler/analytic.c); without it the measuring profiler balprof
 * (profiler/gpu/balprof.c, built with CUDA next to balplan) is run in this process's place
 * with the same arguments. Both parse them with bp_prof_parse (profiler/measure.h). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analytic.h"
#include "cmdutil.h"
#include "commands.h"
#include "jsonutil.h"
#include "measure.h"

static void profile_usage(FILE *f)
{
	fprintf(f, "usage: balplan profile --analytic [--gpu NAME] [--model NAME]\n"
		   "                       [--scheme TPxCPxPP]... [--max-len N] [-o FILE]\n"
		   "       balplan profile [--gpu NAME] [--model NAME] [--scheme TPxCPxPP]...\n"
		   "                       [--max-len N] [-o FILE] [--state FILE] [--reps N]\n"
		   "                       [--warmup N] [--quick] [--balprof PATH]\n\n"
		   "Writes a balplan.profile/v2 file. --analytic derives attention, block-sparse\n"
		   "(MoBA) attention, GEMM and collective tables and memory constants from the\n"
		   "GPU preset's specifications\n"
		   "(profiler/README.md says how), and fits T(l,P) = a l^2 + b l + c per scheme.\n"
		   "Without --analytic the tables are measured on this machine's GPU by balprof\n"
		   "(built with CUDA next to balplan), which starts from the analytic profile and\n"
		   "replaces each cell it measures with the median of timed runs: attention,\n"
		   "block-sparse attention and GEMMs on one GPU; NCCL collectives too with one\n"
		   "process per GPU under 'srun --resv-ports=1' (profiler/README.md\n"
		   "\"Measuring\").\n\n"
		   "  --gpu NAME        GPU preset [H100]\n"
		   "  --model NAME      model preset, or a Hugging Face config.json [llama3-8b]\n"
		   "  --scheme TxCxP    parallel scheme to tabulate and fit; repeatable [8x2x4]\n"
		   "  --max-len N       largest length in the grids [131072; --quick 2048];\n"
		   "                    k, M: 128k = 131072\n"
		   "  -o, --out FILE    output file ['-': standard output]\n"
		   "measuring only:\n"
		   "  --state FILE      finished measurements, appended as they finish; a rerun\n"
		   "                    resumes from them [OUT.state, balprof.state for '-']\n"
		   "  --reps N          timed runs per cell, the median kept [10; --quick 3]\n"
		   "  --warmup N        untimed runs before them [2; --quick 1]\n"
		   "  --quick           a coarse grid for tests\n"
		   "  --balprof PATH    the measuring profiler [balprof next to balplan]\n\n"
		   "exit status: 0 ok, 1 data or runtime error, 2 usage error\n");
}

/* Runs balprof in this process's place (execv: its exit status is the command's). Returns
 * only on failure, with EXIT_DATA. */
static int run_balprof(const char *given, int argc, char **argv)
{
	char path[PATH_MAX + 16];
	if (given) {
		snprintf(path, sizeof(path), "%s", given);
	} else {
		char self[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0)
			return cmd_error("cannot find the measuring profiler: /proc/self/exe: %s; "
					 "give --balprof PATH or use --analytic", strerror(errno));
		self[n] = 0;
		char *slash = strrchr(self, '/');
		if (slash)
			slash[1] = 0;
		snprintf(path, sizeof(path), "%sbalprof", slash ? self : "./");
	}
	if (access(path, X_OK) < 0)
		return cmd_error("cannot run the measuring profiler '%s': %s; build it with CUDA "
				 "(cmake -DBALPLAN_WITH_CUDA=ON, target balprof; profiler/README.md "
				 "\"Measuring\") or use --analytic", cmd_cut(path), strerror(errno));
	char **av = calloc((size_t)argc + 1, sizeof(*av));
	if (!av)
		return cmd_error("cannot run the measuring profiler: out of memory");
	av[0] = path;
	for (int i = 1; i < argc; i++)
		av[i] = argv[i];
	fflush(stdout);
	execv(path, av);
	int e = errno;
	free(av);
	return cmd_error("cannot run the measuring profiler '%s': %s", cmd_cut(path),
			 strerror(e));
}

int cmd_profile(int argc, char **argv)
{
	struct bp_prof_opts o;
	struct bp_error err;
	if (bp_prof_parse(argc, argv, &o, &err) < 0)
		return cmd_usage("profile", "%s", err.text);
	if (o.help) {
		profile_usage(stdout);
		return EXIT_OK;
	}
	if (!o.analytic)
		return run_balprof(o.balprof, argc, argv);
	const char *gpu = o.gpu, *model = o.model, *out = o.out;
	const struct bp_scheme *schemes = o.schemes;
	size_t ns = o.nschemes;
	int64_t max_len = o.max_len;
	const struct bp_gpu *g = bp_gpu_preset(gpu);
	struct bp_model rm;
	const struct bp_model *m = &rm;
	if (!g)
		return cmd_usage("profile", "unknown GPU '%s' (see 'balplan presets')", gpu);
	if (cmd_resolve_model(model, &rm, &err) < 0)
		return !strncmp(err.text, "unknown model", 13) ? cmd_usage("profile", "%s", err.text)
							      : cmd_error("%s", err.text);
	struct bp_profile p;
	int rc = EXIT_DATA;
	bp_profile_init(&p);
	if (bp_profile_analytic(&p, g, m, schemes, ns, max_len, &err) < 0) {
		cmd_error("cannot make the analytic profile: %s", err.text);
		goto out;
	}
	json_t *j = bp_profile_to_json(&p);
	char *text = j ? bp_json_dump_canonical(j) : NULL;
	json_decref(j);
	if (!text) {
		cmd_error("cannot encode the profile: out of memory");
		goto out;
	}
	if (cmd_write_file(out, text, strlen(text), &err) < 0)
		cmd_error("cannot write profile '%s': %s", out, err.text);
	else
		rc = EXIT_OK;
	free(text);
out:
	bp_profile_release(&p);
	return rc;
}
