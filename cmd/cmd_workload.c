/* cmd_workload.c: the workload options `balplan solve` and `balplan propose` share
 * (cmd_workload.h). */
#include <stdlib.h>
#include <string.h>

#include "cmd_workload.h"
#include "cmdutil.h"

void cmd_workload_defaults(struct cmd_workload *w)
{
	memset(w, 0, sizeof(*w));
	w->dataset = "synthetic-longtail";
	w->gpu = "H100";
	w->model = "llama3-8b";
	w->gpus = 64;
	w->max_tokens = 131072;
	w->tps = -1;
	w->overlen = BP_OVERLEN_TRUNCATE;
}

static int parse_overlen(struct cmd_workload *w, const struct cmd_workload_spec *spec,
			 const char *arg)
{
	if (!strcmp(arg, "truncate"))
		w->overlen = BP_OVERLEN_TRUNCATE;
	else if (!strcmp(arg, "drop"))
		w->overlen = BP_OVERLEN_DROP;
	else if (spec->overlen_error && !strcmp(arg, "error"))
		w->overlen = BP_OVERLEN_ERROR;
	else
		return cmd_usage(spec->cmd, "--over-length '%s' is not truncate%s drop%s",
				 cmd_cut(arg), spec->overlen_error ? "," : " or",
				 spec->overlen_error ? " or error" : "");
	return 0;
}

int cmd_workload_opt(struct cmd_workload *w, const struct cmd_workload_spec *spec, int c,
		     const char *arg)
{
	const int64_t big = (int64_t)1 << 40;
	const char *cmd = spec->cmd;
	int bad = 0;
	switch (c) {
	case 'd': w->dataset = arg; break;
	case 'J': w->jsonl_field = arg; break;
	case 'p': w->profile = arg; break;
	case 'G': w->gpu = arg; w->gpu_set = 1; break;
	case 'M': w->model = arg; w->model_set = 1; break;
	case 'g': bad = cmd_opt_int(cmd, "--gpus", arg, 1, spec->gpus_max, &w->gpus); break;
	case 'L': bad = cmd_opt_tokens(cmd, "--max-tokens", arg, spec->tokens_min,
				       spec->tokens_max, &w->max_tokens);
		break;
	case 'K': bad = cmd_opt_tokens(cmd, "--tokens-per-step", arg, 1, big, &w->tps);
		w->tps_given = 1;
		break;
	case 'D': bad = cmd_opt_int(cmd, "--docs-per-step", arg, 1, 1 << 24, &w->dps); break;
	case 'O': return parse_overlen(w, spec, arg);
	default: return CMD_WORKLOAD_OTHER;
	}
	return bad ? EXIT_USAGE : 0;
}

int cmd_workload_check_inputs(const struct cmd_workload *w, const char *cmd)
{
	if (w->profile && (w->gpu_set || w->model_set))
		return cmd_usage(cmd, "--profile cannot be combined with --gpu or --model");
	return 0;
}

int cmd_workload_check_step(const struct cmd_workload *w, const char *cmd)
{
	if (w->tps >= 0 && w->dps > 0)
		return cmd_usage(cmd, "--tokens-per-step and --docs-per-step exclude each other");
	return 0;
}

int cmd_workload_hardware(const struct cmd_workload *w, const char *cmd, struct bp_model *m,
			  int *gpn)
{
	struct bp_error err = {""};
	const struct bp_gpu *g = bp_gpu_preset(w->gpu);
	if (!g)
		return cmd_usage(cmd, "unknown GPU '%s' (see 'balplan presets')", cmd_cut(w->gpu));
	if (cmd_resolve_model(w->model, m, &err) < 0)
		return !strncmp(err.text, "unknown model", 13) ? cmd_usage(cmd, "%s", err.text)
							       : cmd_error("%s", err.text);
	if (gpn)
		*gpn = g->gpus_per_node;
	return 0;
}
