/* cmd_workload.h: the workload options `balplan solve` and `balplan propose` share (what is
 * planned, and on what): the dataset, the profile or the analytic one's GPU and model, the
 * GPU count, the context cap, the step size and the over-length rule. One table of long
 * options (CMD_WORKLOAD_OPTIONS), one parse helper (cmd_workload_opt), the checks both make
 * and the lines of --help both print (CMD_WORKLOAD_HELP_*). */
#ifndef BP_CMD_WORKLOAD_H
#define BP_CMD_WORKLOAD_H

#include <getopt.h>
#include <stdint.h>

#include "dataset.h"
#include "presets.h"

/* The options as parsed: the defaults from cmd_workload_defaults, the rest of each command's
 * own. */
struct cmd_workload {
	const char *dataset, *jsonl_field, *profile, *gpu, *model;
	int64_t gpus, max_tokens;
	int64_t tps;            /* --tokens-per-step; -1: not given */
	int64_t dps;            /* --docs-per-step; 0: not given */
	int gpu_set, model_set, tps_given;
	enum bp_overlen overlen;
};

/* What a command takes: its name for the usage errors and its ranges. */
struct cmd_workload_spec {
	const char *cmd;
	int64_t gpus_max;                 /* --gpus in [1, gpus_max] */
	int64_t tokens_min, tokens_max;   /* --max-tokens in [tokens_min, tokens_max] */
	int overlen_error;                /* --over-length takes error too */
};

/* The long options, in a command's own table: the short ones d, p, g and L belong in its
 * getopt string. */
#define CMD_WORKLOAD_OPTIONS                                                           \
	{"dataset", required_argument, NULL, 'd'},                                     \
	{"jsonl-field", required_argument, NULL, 'J'},                                 \
	{"profile", required_argument, NULL, 'p'},                                     \
	{"gpu", required_argument, NULL, 'G'},                                         \
	{"model", required_argument, NULL, 'M'},                                       \
	{"gpus", required_argument, NULL, 'g'},                                        \
	{"max-tokens", required_argument, NULL, 'L'},                                  \
	{"tokens-per-step", required_argument, NULL, 'K'},                             \
	{"docs-per-step", required_argument, NULL, 'D'},                               \
	{"over-length", required_argument, NULL, 'O'}

/* The --help lines both commands print alike. */
#define CMD_WORKLOAD_HELP_GPU                                                          \
	"      --gpu NAME           GPU preset for the analytic profile [H100]\n"
#define CMD_WORKLOAD_HELP_MODEL                                                        \
	"      --model NAME         model preset or a Hugging Face config.json (dense\n"     \
	"                           Llama-style or GPT-2) for the analytic profile\n"       \
	"                           [llama3-8b]\n"
#define CMD_WORKLOAD_HELP_GPUS "  -g, --gpus N             GPUs in all [64]\n"
#define CMD_WORKLOAD_HELP_UNITS                                                        \
	"                           (token counts take k, M, G: 128k = 131072)\n"

/* cmd_workload_opt's answer for an option that is not a workload option. */
#define CMD_WORKLOAD_OTHER (-3)

void cmd_workload_defaults(struct cmd_workload *w);

/* One option c with its argument arg (getopt's optarg): 0 taken, EXIT_USAGE (printed) for a
 * bad value, CMD_WORKLOAD_OTHER when c is not a workload option. */
int cmd_workload_opt(struct cmd_workload *w, const struct cmd_workload_spec *spec, int c,
		     const char *arg);

/* --profile excludes --gpu and --model. 0, or EXIT_USAGE (printed). */
int cmd_workload_check_inputs(const struct cmd_workload *w, const char *cmd);

/* --tokens-per-step excludes --docs-per-step. 0, or EXIT_USAGE (printed). */
int cmd_workload_check_step(const struct cmd_workload *w, const char *cmd);

/* The analytic profile's GPU and model (without --profile): m and, when gpn is not NULL,
 * the GPU preset's GPUs per node. An unknown name is a usage error, a config.json that
 * cannot be read a data error. 0, or the exit status (printed). */
int cmd_workload_hardware(const struct cmd_workload *w, const char *cmd, struct bp_model *m,
			  int *gpn);

#endif
