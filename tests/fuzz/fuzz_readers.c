/* fuzz_readers.c: libFuzzer harness for every reader, the plan validator and the balplan
 * command line. Built once per target by tools/fuzz with -DFUZZ_TARGET=<n>, so each target's
 * time is its own and the whole input is the target's text:
 *   0 dataset (v1 JSON)   1 profile            2 plan, read and validated   3 trace
 *   4 balexec's Slurm hostlist and port list   5 dataset (plain text)       6 dataset (JSONL)
 *   7 balplan argument vectors: arguments separated by newlines, run in-process through the
 *     subcommand functions of cmd/ (commands.h), which return their status and never exit
 *   8 SparseBalance coverage file (balplan.coverage/v1), read and sampled
 *   9 dataset (Megatron-LM .idx, binary; the same bp_dataset_read, reached by the magic)
 *  10 a Hugging Face config.json read as a model (bp_model_from_hf_config)
 *  11 a Hydraulis strategies file (balplan.strategies/v1, planner/formats/hyd_json.c): read,
 *     written and read again (the same JSON); one that reads is written to s.json and a tiny
 *     `solve -m hydraulis --strategies s.json` runs in-process, and `check` of the plan it
 *     wrote must pass (a plan solve writes that check refuses is a finding)
 *  12 a trace against its plan: read (bp_trace_parse); one that reads is written to t.json
 *     and `report rplan.json t.json --chrome c.json --refit r.json` runs in-process (the
 *     working directory tools/fuzz gives holds rplan.json, the plan of its seed traces)
 * Built without FUZZ_TARGET, the first byte picks the target (the old single harness).
 * A reader must return 0 or -1 with a message, a command 0-3, never crash, leak or read out
 * of bounds (ASan+UBSan). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"
#include "hyd_json.h"
#include "jsonutil.h"
#include "model_json.h"
#include "plan.h"
#include "profile.h"
#include "rendezvous.h"
#include "sparse_dst.h"
#include "trace.h"
#include "validate.h"
#ifdef FUZZ_CLI
#include <getopt.h>

#include "commands.h"
#endif

static int coverage_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_sb_coverage_from_json(out, root, err);
}

static int profile_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_profile_from_json(out, root, err);
}

#ifdef FUZZ_CLI
/* One balplan command line. Arguments with '/' are skipped (every file the command writes
 * stays in the working directory tools/fuzz gives it) and so are the ILP methods and 'all'
 * (their search is bounded by time, not by size): solve starts with "-m plain", which a
 * later -m replaces. solve's and propose's planning limits are lowered at
 * build time (-DLIMIT_TIME_S, -DLIMIT_MEM_GIB, -DPROPOSE_LIMIT_S) so one run stays short. */
static void run_cli(const char *text, size_t len)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{"solve", cmd_solve},     {"simulate", cmd_simulate}, {"check", cmd_check},
		{"report", cmd_report},   {"diff", cmd_diff},         {"dataset", cmd_dataset},
		{"profile", cmd_profile}, {"presets", cmd_presets}, {"propose", cmd_propose},
	};
	static int quiet;
	char *buf = malloc(len + 1), *argv[36];
	int argc = 0;
	if (!buf)
		abort();
	if (!quiet) { /* '-' reads nothing; tools/fuzz runs this with -close_fd_mask=3, so what
		       * the commands print goes nowhere while libFuzzer keeps its own stderr */
		quiet = 1;
		if (!freopen("/dev/null", "r", stdin))
			abort();
	}
	memcpy(buf, text, len);
	buf[len] = 0;
	if (memchr(buf, 0, len) || strchr(buf, '/') || strstr(buf, "ilp") || strstr(buf, "all"))
		goto out;
	for (char *save = NULL, *a = strtok_r(buf, "\n", &save); a && argc < 32;
	     a = strtok_r(NULL, "\n", &save)) {
		argv[argc++] = a;
		if (argc == 1 && !strcmp(a, "solve")) { /* not every method by default */
			static char m[] = "-m", plain[] = "plain";
			argv[argc++] = m;
			argv[argc++] = plain;
		}
	}
	argv[argc] = NULL;
	if (!argc)
		goto out;
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[0], cmds[i].name)) {
			optind = 0;
			opterr = 0;
			int rc = cmds[i].fn(argc, argv);
			fflush(stdout);
			if (rc < 0 || rc > 3)
				abort();
		}
out:
	free(buf);
}

static int strategies_cb(void *out, json_t *root, struct bp_error *err)
{
	return bp_hyd_set_from_json(out, root, err);
}

/* The canonical JSON of a set that read (NULL only when out of memory). */
static char *strategies_text(const struct bp_hyd_set *set)
{
	json_t *j = bp_hyd_set_to_json(set);
	char *t = j ? bp_json_dump_canonical(j) : NULL;
	json_decref(j);
	return t;
}

/* Writes the input to a file of the working directory for a command to read. */
static void put_file(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(text, 1, len, f) != len || fclose(f))
		abort();
}

/* Runs one command in-process (the cli target's rules: getopt reset, status 0-3). */
static int run_cmd(int (*fn)(int, char **), char **argv)
{
	static int quiet;
	int argc = 0;
	if (!quiet) { /* as run_cli: standard input reads nothing */
		quiet = 1;
		if (!freopen("/dev/null", "r", stdin))
			abort();
	}
	while (argv[argc])
		argc++;
	optind = 0;
	opterr = 0;
	int rc = fn(argc, argv);
	fflush(stdout);
	if (rc < 0 || rc > 3)
		abort();
	return rc;
}

static void run_strategies(const char *text, size_t len)
{
	struct bp_hyd_set set, again;
	struct bp_error err;
	bp_hyd_set_init(&set);
	bp_hyd_set_init(&again);
	if (bp_json_parse_text(text, len, strategies_cb, &set, &err) < 0) {
		if (!err.text[0])
			abort();
		bp_hyd_set_release(&set);
		return;
	}
	/* what was read writes and reads back to the same set */
	char *a = strategies_text(&set), *b = NULL;
	if (!a || bp_json_parse_text(a, strlen(a), strategies_cb, &again, &err) < 0 ||
	    !(b = strategies_text(&again)) || strcmp(a, b))
		abort();
	free(a);
	free(b);
	bp_hyd_set_release(&set);
	bp_hyd_set_release(&again);
	put_file("s.json", text, len);
	char *solve[] = {"solve", "-q", "-m", "hydraulis", "--strategies", "s.json", "--gpus", "8",
			 "--tp", "2", "--cp", "1", "--pp", "1", "-L", "4096", "-n", "2", "-d",
			 "tiny-uniform", "-o", "p.json", NULL};
	char *check[] = {"check", "p.json", NULL};
	remove("p.json");
	if (run_cmd(cmd_solve, solve) == 0 && run_cmd(cmd_check, check) != 0)
		abort(); /* solve wrote a plan that check refuses */
}

static void run_trace_report(const char *text, size_t len)
{
	struct bp_trace t;
	struct bp_error err;
	bp_trace_init(&t);
	int r = bp_trace_parse(&t, text, len, &err);
	bp_trace_release(&t);
	if (r < 0) {
		if (!err.text[0])
			abort();
		return;
	}
	put_file("t.json", text, len);
	char *report[] = {"report", "--top", "3", "--chrome", "c.json", "--refit", "r.json",
			  "rplan.json", "t.json", NULL};
	run_cmd(cmd_report, report);
}
#endif

static void run(int target, const char *text, size_t len)
{
	struct bp_error err;
	switch (target) {
	case 0:
	case 5:
	case 6:
	case 9: {
		struct bp_dataset ds;
		bp_dataset_init(&ds);
		if (bp_dataset_parse(&ds, text, len, "fuzz", NULL, &err) < 0 && !err.text[0])
			abort();
		bp_dataset_release(&ds);
		break;
	}
	case 1: {
		struct bp_profile p;
		bp_profile_init(&p);
		if (bp_json_parse_text(text, len, profile_cb, &p, &err) < 0 && !err.text[0])
			abort();
		bp_profile_release(&p);
		break;
	}
	case 2: {
		struct bp_plan p;
		bp_plan_init(&p);
		if (bp_plan_parse(&p, text, len, &err) < 0) { /* either layout (plan.h) */
			if (!err.text[0])
				abort();
		} else if (bp_plan_validate(&p, NULL, &err) < 0 && !err.text[0]) {
			abort();
		}
		bp_plan_release(&p);
		break;
	}
	case 3: {
		struct bp_trace t;
		bp_trace_init(&t);
		if (bp_trace_parse(&t, text, len, &err) < 0 && !err.text[0])
			abort();
		bp_trace_release(&t);
		break;
	}
	case 4: {
		/* The environment strings balexec parses: NUL-terminated copies. */
		char *z = malloc(len + 1), host[256];
		int port = 0;
		if (!z)
			abort();
		memcpy(z, text, len);
		z[len] = 0;
		if (bp_slurm_first_host(z, host, sizeof(host), &err) < 0 && !err.text[0])
			abort();
		if (bp_slurm_first_port(z, &port, &err) == 0 && (port < 1 || port > 65535))
			abort();
		free(z);
		break;
	}
#ifdef FUZZ_CLI
	case 7:
		run_cli(text, len);
		break;
	case 11:
		run_strategies(text, len);
		break;
	case 12:
		run_trace_report(text, len);
		break;
#endif
	case 8: {
		struct bp_sb_coverage c;
		bp_sb_coverage_init(&c);
		if (bp_json_parse_text(text, len, coverage_cb, &c, &err) < 0) {
			if (!err.text[0])
				abort();
		} else {
			/* every read file can be sampled at every bin edge, layer and p */
			for (size_t b = 0; b < c.nbins; b++)
				for (int l = 0; l < c.layers; l++)
					for (size_t ip = 0; ip < c.np; ip++) {
						int k = bp_sb_coverage_kcov(&c, c.bins[b].lo, l, ip, 1,
									    (int64_t)b, &err);
						if (k < 1 || k > c.k_base)
							abort();
					}
		}
		bp_sb_coverage_release(&c);
		break;
	}
	case 10: {
		struct bp_model m;
		if (bp_model_from_hf_config(text, len, "fuzz", &m, &err) < 0) {
			if (!err.text[0])
				abort();
		} else if (m.layers < 1 || m.hidden < 1 || m.heads < 1 || m.kv_heads < 1 ||
			   m.heads % m.kv_heads || m.hidden % m.heads || m.ffn < 1 || m.vocab < 1) {
			abort(); /* accepted a model the cost model cannot hold */
		}
		break;
	}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
#ifdef FUZZ_TARGET
	run(FUZZ_TARGET, (const char *)data, size);
#else
	if (size < 1)
		return 0;
	run(data[0] % 13, (const char *)data + 1, size - 1);
#endif
	return 0;
}
