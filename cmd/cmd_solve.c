/* cmd_solve.c: `balplan solve`: draw global batches from a dataset, solve them with one or
 * more methods on one profile, print a comparison and write the plans. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cmdutil.h"
#include "commands.h"
#include "jsonutil.h"
#include "method.h"
#include "solve.h"

static void solve_usage(FILE *f)
{
	fprintf(f,
		"usage: balplan solve [options]\n\n"
		"Draws --steps global batches from a dataset, plans them with each method and\n"
		"predicts them on a profile with the shared cost model and 1F1B simulator.\n\n"
		"inputs:\n"
		"  -d, --dataset NAME|FILE  dataset preset or file (v1 JSON, text, JSONL)\n"
		"                           [synthetic-longtail]\n"
		"      --jsonl-field KEY    token-count field of JSONL input [auto]\n"
		"  -p, --profile FILE       profile; without it an analytic one is made from\n"
		"                           --gpu and --model\n"
		"      --gpu NAME           GPU preset for the analytic profile [H100]\n"
		"      --model NAME         model preset for the analytic profile [llama3-8b]\n"
		"cluster:\n"
		"  -g, --gpus N             GPUs in all [64]\n"
		"      --tp N, --cp N, --pp N  tensor, context, pipeline degrees [8, 2, 4];\n"
		"                           dp = gpus / (tp cp pp)\n"
		"sampling:\n"
		"  -L, --max-tokens N       context cap: tokens per micro-batch [131072]\n"
		"      --tokens-per-step N  token budget per global batch [pp*dp*max-tokens]\n"
		"      --docs-per-step N    fixed documents per global batch instead\n"
		"  -n, --steps N            global batches [20]\n"
		"  -s, --seed N             seed of every random choice [1]\n"
		"      --over-length MODE   truncate|drop|error for documents over the cap\n"
		"                           [truncate]\n"
		"planning:\n"
		"  -m, --method LIST        method, comma-separated methods, or 'all' [all]\n"
		"      --shard MODE         CP sharding: sequence|document|adaptive [sequence]\n"
		"      --param KEY=VALUE    a method parameter (repeatable); each method takes\n"
		"                           the ones it knows ('balplan presets' lists them)\n"
		"output:\n"
		"  -o, --out FILE           write the plan (one method only; '-': standard\n"
		"                           output, and no table)\n"
		"      --out-dir DIR        write DIR/<method>.json for every method\n"
		"      --timing             add planning time per step to the table\n"
		"  -q, --quiet              print no table\n\n"
		"exit status: 0 ok, 1 data or runtime error, 2 usage error, 3 infeasible\n");
}

struct result {
	const char *method;
	struct bp_summary s;
	double plan_ms_per_step;
};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int write_plan(const struct bp_plan *plan, const char *path)
{
	struct bp_error err;
	json_t *j = bp_plan_to_json(plan);
	char *text = j ? bp_json_dump_canonical(j) : NULL;
	json_decref(j);
	if (!text)
		return cmd_error("cannot encode plan '%s': out of memory", path);
	int rc = cmd_write_file(path, text, strlen(text), &err);
	free(text);
	if (rc < 0)
		return cmd_error("cannot write plan '%s': %s", path, err.text);
	return EXIT_OK;
}

static void print_table(const struct result *r, size_t n, int timing)
{
	/* Speedup is throughput over plain's: methods that delay documents train the same
	 * tokens over a different number of steps, so step times alone would mislead. */
	double base = 0.0;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(r[i].method, "plain"))
			base = r[i].s.tokens_per_s;
	printf("%-10s %11s %11s %8s %8s %9s %9s %9s %7s %9s", "method", "step mean", "step p95",
	       "ktok/s", "speedup", "imb(WLB)", "imb(SB)", "gap(Hyd)", "bubble", "peak mem");
	if (timing)
		printf(" %12s", "plan/step");
	printf("\n");
	for (size_t i = 0; i < n; i++) {
		const struct bp_summary *s = &r[i].s;
		char sp[16] = "-";
		if (base > 0)
			snprintf(sp, sizeof(sp), "%.3fx", s->tokens_per_s / base);
		printf("%-10s %8.2f ms %8.2f ms %8.1f %8s %9.3f %9.3f %9.3f %6.1f%% %5.1f GiB",
		       r[i].method, s->step_mean_us / 1e3, s->step_p95_us / 1e3,
		       s->tokens_per_s / 1e3, sp, s->imb_wlb_mean,
		       s->imb_sb_mean, s->gap_hyd_mean, 100.0 * s->bubble_mean,
		       s->peak_mem / 1073741824.0);
		if (timing)
			printf(" %9.3f ms", r[i].plan_ms_per_step);
		printf("\n");
	}
}

int cmd_solve(int argc, char **argv)
{
	static const struct option opts[] = {
		{"dataset", required_argument, NULL, 'd'},
		{"jsonl-field", required_argument, NULL, 'J'},
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
		{"method", required_argument, NULL, 'm'},
		{"shard", required_argument, NULL, 'S'},
		{"out", required_argument, NULL, 'o'},
		{"out-dir", required_argument, NULL, 'R'},
		{"timing", no_argument, NULL, 't'},
		{"param", required_argument, NULL, 'Q'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *dataset = "synthetic-longtail", *jsonl_field = NULL, *profile = NULL;
	const char *gpu = "H100", *model = "llama3-8b", *methods = "all", *out = NULL;
	const char *out_dir = NULL;
	struct bp_param params[32];
	size_t nparams = 0;
	int64_t gpus = 64, tp = 8, cp = 2, pp = 4, max_tokens = 131072, tps = -1, dps = 0;
	int64_t steps = 20, seed = 1;
	int timing = 0, quiet = 0, gpu_set = 0, model_set = 0;
	enum bp_overlen overlen = BP_OVERLEN_TRUNCATE;
	enum bp_shard shard = BP_SHARD_SEQUENCE;
	const int64_t big = (int64_t)1 << 40;
	int c;
	while ((c = getopt_long(argc, argv, "+d:p:g:L:n:s:m:o:qh", opts, NULL)) != -1) {
		int bad = 0;
		switch (c) {
		case 'd': dataset = optarg; break;
		case 'J': jsonl_field = optarg; break;
		case 'p': profile = optarg; break;
		case 'G': gpu = optarg; gpu_set = 1; break;
		case 'M': model = optarg; model_set = 1; break;
		case 'g': bad = cmd_opt_int("solve", "--gpus", optarg, 1, 1 << 20, &gpus); break;
		case 'T': bad = cmd_opt_int("solve", "--tp", optarg, 1, 1 << 20, &tp); break;
		case 'C': bad = cmd_opt_int("solve", "--cp", optarg, 1, 1 << 20, &cp); break;
		case 'P': bad = cmd_opt_int("solve", "--pp", optarg, 1, 1 << 20, &pp); break;
		case 'L': bad = cmd_opt_int("solve", "--max-tokens", optarg, 1, big, &max_tokens);
			break;
		case 'K': bad = cmd_opt_int("solve", "--tokens-per-step", optarg, 1, big, &tps);
			break;
		case 'D': bad = cmd_opt_int("solve", "--docs-per-step", optarg, 1, 1 << 24, &dps);
			break;
		case 'n': bad = cmd_opt_int("solve", "--steps", optarg, 1, 1000000, &steps); break;
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
						 "error", optarg);
			break;
		case 'm': methods = optarg; break;
		case 'S':
			if (bp_shard_parse(optarg, &shard) < 0)
				return cmd_usage("solve", "--shard '%s' is not sequence or document",
						 optarg);
			break;
		case 'Q': {
			const char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg || !eq[1])
				return cmd_usage("solve", "--param '%s' is not KEY=VALUE", optarg);
			if (nparams == 32)
				return cmd_usage("solve", "at most 32 --param options");
			size_t kl = (size_t)(eq - optarg);
			if (kl >= sizeof(params[0].key) || strlen(eq + 1) >= sizeof(params[0].value))
				return cmd_usage("solve", "--param '%s' is too long", optarg);
			memset(&params[nparams], 0, sizeof(params[0]));
			memcpy(params[nparams].key, optarg, kl);
			strcpy(params[nparams].value, eq + 1);
			nparams++;
			break;
		}
		case 'o': out = optarg; break;
		case 'R': out_dir = optarg; break;
		case 't': timing = 1; break;
		case 'q': quiet = 1; break;
		case 'h': solve_usage(stdout); return EXIT_OK;
		default:
			return cmd_usage("solve", "unknown or incomplete option '%s'",
					 argv[optind - 1]);
		}
		if (bad)
			return EXIT_USAGE;
	}
	if (optind < argc)
		return cmd_usage("solve", "unexpected argument '%s'", argv[optind]);
	if (profile && (gpu_set || model_set))
		return cmd_usage("solve", "--profile cannot be combined with --gpu or --model");
	if (tps >= 0 && dps > 0)
		return cmd_usage("solve", "--tokens-per-step and --docs-per-step exclude each other");
	if (out && out_dir)
		return cmd_usage("solve", "--out and --out-dir exclude each other");
	if (out && !strcmp(out, "-"))
		quiet = 1; /* the plan is standard output: no table mixed into it */
	if (gpus % (tp * cp * pp))
		return cmd_usage("solve", "%lld GPUs are not divisible by tp*cp*pp = %lld",
				 (long long)gpus, (long long)(tp * cp * pp));
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
			list[nm++] = bp_method_at(i);
	} else {
		char buf[512];
		snprintf(buf, sizeof(buf), "%s", methods);
		for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			const struct bp_method *m = bp_method_find(tok);
			if (!m)
				return cmd_usage("solve", "unknown method '%s' (see 'balplan presets')",
						 tok);
			if (nm < 64)
				list[nm++] = m;
		}
		if (!nm)
			return cmd_usage("solve", "--method names no method");
	}
	if (out && nm != 1)
		return cmd_usage("solve", "--out takes one method; use --out-dir for %zu", nm);
	for (size_t i = 0; i < nparams; i++) {
		int used = 0;
		for (size_t k = 0; k < nm; k++)
			for (size_t q = 0; list[k]->params && list[k]->params[q]; q++)
				used |= !strcmp(list[k]->params[q], params[i].key);
		if (!used)
			return cmd_usage("solve", "no method chosen takes parameter '%s'",
					 params[i].key);
	}

	struct bp_error err;
	struct bp_dataset ds;
	struct bp_profile prof;
	char ds_sha[65], prof_sha[65];
	int rc = EXIT_DATA;
	struct result res[64];
	bp_dataset_init(&ds);
	bp_profile_init(&prof);
	struct bp_scheme sc = {(int)tp, (int)cp, (int)pp};
	if (cmd_load_dataset(dataset, jsonl_field, &ds, ds_sha, &err) < 0) {
		rc = cmd_error("%s", err.text);
		goto out;
	}
	if (profile ? cmd_load_profile(profile, &prof, prof_sha, &err)
		    : cmd_analytic_profile(gpu, model, sc, max_tokens, &prof, prof_sha, &err)) {
		rc = cmd_error("%s", err.text);
		goto out;
	}
	if (out_dir && mkdir(out_dir, 0777) && errno != EEXIST) {
		rc = cmd_error("cannot create directory '%s': %s", out_dir, strerror(errno));
		goto out;
	}
	if (!quiet)
		printf("dataset %s, %d x %s (tp %lld cp %lld pp %lld dp %lld), model %s, "
		       "max %lld tokens, %lld steps of %lld %s, seed %lld\n", ds.name,
		       (int)gpus, prof.hw.gpu, (long long)tp, (long long)cp, (long long)pp,
		       (long long)dp, prof.model.name, (long long)max_tokens, (long long)steps,
		       (long long)(dps ? dps : tps), dps ? "documents" : "tokens", (long long)seed);
	for (size_t i = 0; i < nm; i++) {
		struct bp_plan plan;
		struct bp_solve_opts o = {
			.method = list[i]->name,
			.cluster = {.gpus = (int)gpus, .tp = (int)tp, .cp = (int)cp, .pp = (int)pp,
				    .dp = (int)dp},
			.steps = steps, .tokens_per_step = tps, .docs_per_step = dps,
			.max_tokens = max_tokens, .overlen = overlen, .seed = (uint64_t)seed,
			.shard = shard, .dataset_name = ds.name, .dataset_sha = ds_sha,
			.profile_sha = prof_sha,
		};
		struct bp_param mine[32];
		size_t nmine = 0;
		for (size_t k = 0; k < nparams; k++)
			for (size_t q = 0; list[i]->params && list[i]->params[q]; q++)
				if (!strcmp(list[i]->params[q], params[k].key))
					mine[nmine++] = params[k];
		o.params = mine;
		o.nparams = nmine;
		double t0 = now_ms();
		int r = bp_solve(&ds, &prof, &o, &plan, &err);
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
		/* ILP methods: say when steps were not proven optimal (the plan records each). */
		int64_t nonopt = 0, ilp_steps = 0, too_large = 0;
		double gap_max = 0.0;
		for (size_t s = 0; s < plan.nsteps; s++) {
			const struct bp_solver *sv = &plan.steps[s].solver;
			if (!sv->present)
				continue;
			ilp_steps++;
			too_large += !strcmp(sv->status, "too-large");
			if (strcmp(sv->status, "optimal")) {
				nonopt++;
				if (sv->gap > gap_max)
					gap_max = sv->gap;
			}
		}
		if (too_large)
			cmd_warn("method '%s': %lld of %lld steps have more documents x "
				 "micro-batches than ilp_max_vars and keep the greedy packing "
				 "unsearched", list[i]->name, (long long)too_large,
				 (long long)ilp_steps);
		nonopt -= too_large;
		if (nonopt)
			cmd_warn("method '%s': %lld of %lld steps not proven optimal (ilp_node_limit "
				 "or ilp_work_limit reached, largest gap %.2f%%); each keeps its best "
				 "packing, never worse than the greedy", list[i]->name,
				 (long long)nonopt, (long long)ilp_steps, 100.0 * gap_max);
		res[i].method = list[i]->name;
		res[i].s = plan.summary;
		res[i].plan_ms_per_step = (t1 - t0) / (double)steps;
		int wr = EXIT_OK;
		if (out) {
			wr = write_plan(&plan, out);
		} else if (out_dir) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/%s.json", out_dir, list[i]->name);
			wr = write_plan(&plan, path);
		}
		bp_plan_release(&plan);
		if (wr != EXIT_OK) {
			rc = wr;
			goto out;
		}
	}
	if (!quiet)
		print_table(res, nm, timing);
	rc = EXIT_OK;
out:
	bp_dataset_release(&ds);
	bp_profile_release(&prof);
	return rc;
}
