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
 * later -m replaces. solve's planning limits are lowered at
 * build time (-DLIMIT_TIME_S, -DLIMIT_MEM_GIB) so one run stays short. */
static void run_cli(const char *text, size_t len)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{"solve", cmd_solve},     {"simulate", cmd_simulate}, {"check", cmd_check},
		{"report", cmd_report},   {"diff", cmd_diff},         {"dataset", cmd_dataset},
		{"profile", cmd_profile}, {"presets", cmd_presets},
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
	run(data[0] % 11, (const char *)data + 1, size - 1);
#endif
	return 0;
}
