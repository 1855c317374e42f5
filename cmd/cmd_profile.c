/* cmd_profile.c: `balplan profile`: write a profile. --analytic fills the tables from GPU
 * specifications (profiler/analytic.c); measuring on GPUs comes with the CUDA profiler. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "cmdutil.h"
#include "commands.h"
#include "jsonutil.h"

static void profile_usage(FILE *f)
{
	fprintf(f, "usage: balplan profile --analytic [--gpu NAME] [--model NAME]\n"
		   "                       [--scheme TPxCPxPP]... [--max-len N] [-o FILE]\n\n"
		   "Writes a balplan.profile/v2 file. --analytic derives attention, block-sparse\n"
		   "(MoBA) attention, GEMM and collective tables and memory constants from the\n"
		   "GPU preset's specifications\n"
		   "(profiler/README.md says how), and fits T(l,P) = a l^2 + b l + c per scheme.\n\n"
		   "  --gpu NAME        GPU preset [H100]\n"
		   "  --model NAME      model preset [llama3-8b]\n"
		   "  --scheme TxCxP    parallel scheme to tabulate and fit; repeatable [8x2x4]\n"
		   "  --max-len N       largest length in the grids [131072]\n"
		   "  -o, --out FILE    output file ['-': standard output]\n\n"
		   "exit status: 0 ok, 1 data or runtime error, 2 usage error\n");
}

int cmd_profile(int argc, char **argv)
{
	static const struct option opts[] = {
		{"analytic", no_argument, NULL, 'a'},
		{"gpu", required_argument, NULL, 'G'},
		{"model", required_argument, NULL, 'M'},
		{"scheme", required_argument, NULL, 'S'},
		{"max-len", required_argument, NULL, 'L'},
		{"out", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *gpu = "H100", *model = "llama3-8b", *out = "-";
	struct bp_scheme schemes[32];
	size_t ns = 0;
	int64_t max_len = 131072;
	int analytic = 0, c;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'a': analytic = 1; break;
		case 'G': gpu = optarg; break;
		case 'M': model = optarg; break;
		case 'S': {
			int t, cc, p, n = 0;
			if (ns == 32)
				return cmd_usage("profile", "at most 32 --scheme options");
			if (sscanf(optarg, "%dx%dx%d%n", &t, &cc, &p, &n) != 3 ||
			    optarg[n] || t < 1 || cc < 1 || p < 1)
				return cmd_usage("profile", "--scheme '%s' is not TPxCPxPP with "
						 "positive degrees", optarg);
			schemes[ns++] = (struct bp_scheme){t, cc, p};
			break;
		}
		case 'L':
			if (cmd_opt_int("profile", "--max-len", optarg, 256, (int64_t)1 << 24,
					&max_len) < 0)
				return EXIT_USAGE;
			break;
		case 'o': out = optarg; break;
		case 'h': profile_usage(stdout); return EXIT_OK;
		default:
			return cmd_usage("profile", "unknown or incomplete option '%s'",
					 cmd_cut(argv[optind - 1]));
		}
	}
	if (optind < argc)
		return cmd_usage("profile", "unexpected argument '%s'",
					 cmd_cut(argv[optind]));
	if (!analytic)
		return cmd_error("measuring a profile needs the CUDA profiler, which this build "
				 "does not have; use --analytic");
	if (!ns)
		schemes[ns++] = (struct bp_scheme){8, 2, 4};
	const struct bp_gpu *g = bp_gpu_preset(gpu);
	const struct bp_model *m = bp_model_preset(model);
	if (!g)
		return cmd_usage("profile", "unknown GPU '%s' (see 'balplan presets')", gpu);
	if (!m)
		return cmd_usage("profile", "unknown model '%s' (see 'balplan presets')", model);
	struct bp_profile p;
	struct bp_error err;
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
