/* cmd_simulate.c: `balplan simulate PLAN`: predict a plan on a profile (its own or another)
 * and print step by step, or rank by rank for one step. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cmdutil.h"
#include "jsonutil.h"
#include "predict.h"
#include "validate.h"
#include "commands.h"
#include "solve.h"
#include "strbuf.h"
#include "ticks.h"

/* bp_sb_fill's writers: cmd_plan_layout and bp_layout_describe, whole however long. */
static void fill_plan_layout(const void *p, char *buf, size_t n)
{
	cmd_plan_layout(p, buf, n);
}

static void fill_layout(const void *l, char *buf, size_t n)
{
	bp_layout_describe(l, buf, n);
}

static void simulate_usage(FILE *f)
{
	fprintf(f, "usage: balplan simulate [--profile FILE] [--step N] [--svg FILE] [--chrome FILE]\n"
		   "                        [--format F] [-o FILE] PLAN\n\n"
		   "Re-predicts a plan with the shared cost model and 1F1B simulator: on the profile\n"
		   "it was made with (regenerated when analytic), or on another --profile to see\n"
		   "what the same plan costs elsewhere. Prints a table per step, or with --step the\n"
		   "busy and idle time of every (pipeline, stage) rank and each micro-batch's times\n"
		   "(DistCA's ticks: also the resend mode, the all-to-all bytes per layer, what\n"
		   "the attention servers keep until the backward, and every tick's time with the\n"
		   "step's split: mean work, fill/drain bubble, stages unequal, unevenness within a\n"
		   "stage, attention imbalance, exposed all-to-all).\n"
		   "--svg FILE draws the 1F1B timeline of that step (step 0 by default); with\n"
		   "'-' the SVG alone goes to standard output. -o FILE writes the plan with every\n"
		   "predicted number recomputed on that profile (and the profile's name and\n"
		   "sha256 recorded), e.g. to finish a hand-written plan for check and balexec.\n"
		   "--chrome FILE writes the predicted timeline of every step (steps end to end),\n"
		   "or of the --step, in the Chrome trace event format (Perfetto,\n"
		   "chrome://tracing): a process per pipeline, a thread per stage, a complete\n"
		   "event per micro-batch forward (F mbJ) and backward (B mbJ) on every stage and\n"
		   "one per stage for the gradient sync; '-': that JSON alone on standard output.\n"
		   "--format F prints the per-step table as text, csv (a header row of the column\n"
		   "names below) or json (an object: plan, method, profile, gpus, gpu, layout,\n"
		   "steps: an array of objects, summary) [text]; csv and json are not for --step.\n\n"
		   "table columns (csv/json name): step; docs; mbs (micro-batches, all pipelines);\n"
		   "  tokens; step (step_ms); grad sync (grad_sync_ms); bubble (a fraction in\n"
		   "  csv/json); imb(WLB) (imb_wlb); imb(SB) (imb_sb); gap(Hyd) (gap_hyd); peak mem\n"
		   "  (peak_mem_gib)\n"
		   "summary (json): total_s, step_mean_ms, step_p50_ms, step_p95_ms, step_max_ms,\n"
		   "  tokens_per_s, documents (whole or cut), model_pflop, tflops_per_gpu, mfu (a\n"
		   "  fraction)\n\n"
		   "exit status: 0 ok, 1 data or runtime error, 2 usage error\n");
}

/* One pipeline's predicted ops in time (bp_pipe_schedule): per op, [(j v + c) pp + s], its
 * forward and backward start and duration; the arrays are reused from pipeline to
 * pipeline. */
struct timeline {
	double *fs, *bs, *fd, *bd;
	size_t nops;
};

static void timeline_free(struct timeline *t)
{
	free(t->fs);
	free(t->bs);
	free(t->fd);
	free(t->bd);
	memset(t, 0, sizeof(*t));
}

static int timeline_run(struct timeline *t, const struct bp_plan *p, const struct bp_step *st,
			size_t k, struct bp_costs *cm, struct bp_error *err)
{
	const struct bp_layout *l = bp_plan_layout(p, st);
	size_t v = l->vstages > 1 ? (size_t)l->vstages : 1;
	timeline_free(t);
	t->nops = st->pipes[k].nmbs * (size_t)l->pipes[k].sc.pp * v;
	t->fs = calloc(t->nops + 1, sizeof(double));
	t->bs = calloc(t->nops + 1, sizeof(double));
	t->fd = calloc(t->nops + 1, sizeof(double));
	t->bd = calloc(t->nops + 1, sizeof(double));
	if (!t->fs || !t->bs || !t->fd || !t->bd)
		return bp_errorf(err, "out of memory");
	return bp_pipe_schedule(p, st, k, cm, t->fs, t->bs, t->fd, t->bd, err);
}

/* Writes one step's 1F1B timeline as SVG: a row per (pipeline, stage), forward (blue) and
 * backward (green) boxes labelled with the micro-batch index, the gradient synchronisation
 * at the end, a time axis in ms. */
static int write_svg(const struct bp_plan *p, const struct bp_step *st, struct bp_costs *cm,
		     const char *path)
{
	struct bp_error err;
	const struct bp_layout *l = bp_plan_layout(p, st);
	int rc = EXIT_DATA;
	size_t rows = 0, row0 = 0;
	struct bp_sb lay = BP_SB_INIT, svg = BP_SB_INIT;
	for (size_t k = 0; k < st->npipes; k++)
		rows += (size_t)l->pipes[k].sc.pp;
	/* The title names this step's layout (a plan of several layouts: which one and its
	 * pipelines), escaped: bp_layout_describe writes "<tp 2 cp 1 pp 2>". */
	struct bp_scheme usc;
	int udp;
	if (bp_plan_uniform(p, &usc, &udp)) {
		bp_sb_fill(&lay, fill_plan_layout, p);
	} else {
		bp_sb_addf(&lay, "layout %d: ", st->layout);
		bp_sb_fill(&lay, fill_layout, l);
	}
	char *t_method = cmd_xml_escape(p->method);
	char *t_lay = lay.oom ? NULL : cmd_xml_escape(lay.buf);
	char *t_model = cmd_xml_escape(p->model.name);
	struct timeline tl = {0};
	const double W = 1000.0, left = 90.0, top = 50.0, rowh = 22.0;
	double total = st->m.step_us > 0 ? st->m.step_us : 1.0, sx = W / total;
	if (!t_method || !t_lay || !t_model)
		goto oom;
#define OUT(...) bp_sb_addf(&svg, __VA_ARGS__) /* out of memory: checked once at the end */
	double height = top + rows * rowh + 50;
	OUT("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
	    "font-family=\"sans-serif\" font-size=\"11\">\n", left + W + 20, height);
	OUT("<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
	OUT("<text x=\"%.0f\" y=\"20\" font-size=\"14\">%s, step %lld: %.2f ms "
	    "(%s, %s)</text>\n", left, t_method, (long long)st->index, st->m.step_us / 1e3,
	    t_lay, t_model);
	OUT("<text x=\"%.0f\" y=\"36\" fill=\"#555\">forward blue, backward green, gradient "
	    "sync grey; bubble %.1f%%, imbalance (WLB-LLM) %.3f</text>\n", left,
	    100.0 * st->m.bubble, st->m.imb_wlb);
	for (size_t k = 0; k < st->npipes; k++) {
		int pp = l->pipes[k].sc.pp, v = l->vstages > 1 ? l->vstages : 1;
		if (timeline_run(&tl, p, st, k, cm, &err) < 0) {
			cmd_error("cannot draw '%s': %s", path, err.text);
			goto out;
		}
		for (int s = 0; s < pp; s++) {
			double y = top + (row0 + (size_t)s) * rowh;
			OUT("<text x=\"4\" y=\"%.1f\">pipe %zu st %d</text>\n", y + 15, k, s);
			for (size_t x = (size_t)s; x < tl.nops; x += (size_t)pp) {
				size_t j = x / ((size_t)pp * (size_t)v);
				double f0 = tl.fs[x], b0 = tl.bs[x];
				OUT("<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
				    "fill=\"#6b9bd1\" stroke=\"white\"/>\n", left + f0 * sx, y + 2,
				    tl.fd[x] * sx, rowh - 4);
				OUT("<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
				    "fill=\"#74b96f\" stroke=\"white\"/>\n", left + b0 * sx, y + 2,
				    tl.bd[x] * sx, rowh - 4);
				if (tl.fd[x] * sx > 14)
					OUT("<text x=\"%.2f\" y=\"%.1f\" fill=\"white\">%zu</text>\n",
					    left + f0 * sx + 3, y + 15, j);
				if (tl.bd[x] * sx > 14)
					OUT("<text x=\"%.2f\" y=\"%.1f\" fill=\"white\">%zu</text>\n",
					    left + b0 * sx + 3, y + 15, j);
			}
			OUT("<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
			    "fill=\"#aaaaaa\"/>\n", left + st->m.pipe_max_us * sx, y + 2,
			    st->m.grad_sync_us * sx, rowh - 4);
		}
		row0 += (size_t)pp;
	}
	double ybase = top + rows * rowh + 8;
	OUT("<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"black\"/>\n",
	    left, ybase, left + W, ybase);
	for (int t = 0; t <= 10; t++) {
		double x = left + W * t / 10.0;
		OUT("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
		    x, ybase, x, ybase + 4);
		OUT("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", x,
		    ybase + 16, total * t / 10.0 / 1e3);
	}
	OUT("<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"middle\">time (ms)</text>\n",
	    left + W / 2, ybase + 32);
	OUT("</svg>\n");
#undef OUT
	if (svg.oom)
		goto oom;
	if (cmd_write_file(path, svg.buf, svg.len, &err) < 0)
		cmd_error("cannot write '%s': %s", path, err.text);
	else
		rc = EXIT_OK;
	goto out;
oom:
	rc = cmd_error("cannot draw '%s': out of memory", path);
out:
	bp_sb_release(&svg);
	timeline_free(&tl);
	free(t_method);
	free(t_lay);
	free(t_model);
	bp_sb_release(&lay);
	return rc;
}

/* The forward (b 0) or backward (b 1) of micro-batch j of pipeline k on stage s, from ts. */
/* One op: micro-batch jc / v's forward or backward on stage s; with v model chunks per rank
 * its chunk jc % v, named "F mbJ.C" and with a "chunk" argument. */
static void chrome_op(json_t *ev, const struct bp_step *st, size_t k, size_t jc, int s, int v,
		      int b, double ts, double dur, int *ok)
{
	size_t j = jc / (size_t)v;
	const struct bp_mb *mb = &st->pipes[k].mbs[j];
	char name[64];
	json_t *a = json_object();
	if (v > 1)
		snprintf(name, sizeof(name), "%c mb%zu.%zu", b ? 'B' : 'F', j, jc % (size_t)v);
	else
		snprintf(name, sizeof(name), "%c mb%zu", b ? 'B' : 'F', j);
	bp_json_set(a, "step", json_integer(st->index), ok);
	bp_json_set(a, "mb", json_integer((json_int_t)j), ok);
	if (v > 1)
		bp_json_set(a, "chunk", json_integer((json_int_t)(jc % (size_t)v)), ok);
	bp_json_set(a, "stage", json_integer(s), ok);
	bp_json_set(a, "tokens", json_integer(mb->tokens), ok);
	bp_json_set(a, "layout", json_integer(st->layout), ok);
	cmd_chrome_complete(ev, name, b ? "bwd" : "fwd", ts, dur, (int)k, s, a, ok);
}

/* --chrome: the predicted timeline in the Chrome trace event format, from the same schedule
 * the SVG draws (bp_pipe_schedule: the layout's schedule row, or DistCA's ticks), made with cmdutil.h's
 * cmd_chrome_* in the shape of the events cmd/cmd_report.c's chrome_json writes for a
 * measured trace (names "F mbJ" / "B mbJ", cats fwd, bwd, grad_sync; a process per
 * pipeline), here a thread per stage: per step and micro-batch a complete event for the
 * forward and the backward on every stage, and per stage the gradient sync after the slowest
 * pipeline; steps laid end to end by their predicted step time. One step when step >= 0. */
static int write_chrome(const struct bp_plan *p, int64_t step, struct bp_costs *cm,
			const char *path)
{
	struct bp_error err;
	int ok = 1, rc = EXIT_DATA;
	json_t *root = json_object(), *ev = json_array(), *other = json_object();
	struct timeline tl = {0};
	int *maxpp = NULL;
	size_t npipes = 0;
	char *text = NULL;
	size_t first = step >= 0 ? (size_t)step : 0;
	size_t last = step >= 0 ? (size_t)step + 1 : p->nsteps;
	/* Processes: the most pipelines any layout has; threads: the most stages of each. */
	for (size_t i = 0; i < p->nlayouts; i++)
		if (p->layouts[i].npipes > npipes)
			npipes = p->layouts[i].npipes;
	maxpp = calloc(npipes + 1, sizeof(int));
	if (!root || !ev || !other || !maxpp)
		goto oom;
	for (size_t i = 0; i < p->nlayouts; i++)
		for (size_t k = 0; k < p->layouts[i].npipes; k++)
			if (p->layouts[i].pipes[k].sc.pp > maxpp[k])
				maxpp[k] = p->layouts[i].pipes[k].sc.pp;
	for (size_t k = 0; k < npipes; k++) {
		char name[48];
		snprintf(name, sizeof(name), "pipeline %zu", k);
		cmd_chrome_meta(ev, (int)k, -1, name, &ok);
		for (int s = 0; s < maxpp[k]; s++) {
			snprintf(name, sizeof(name), "stage %d", s);
			cmd_chrome_meta(ev, (int)k, s, name, &ok);
		}
	}
	double offset = 0.0;
	for (size_t i = first; ok && i < last; i++) {
		const struct bp_step *st = &p->steps[i];
		const struct bp_layout *l = bp_plan_layout(p, st);
		for (size_t k = 0; ok && k < st->npipes; k++) {
			int pp = l->pipes[k].sc.pp, v = l->vstages > 1 ? l->vstages : 1;
			if (timeline_run(&tl, p, st, k, cm, &err) < 0) {
				rc = cmd_error("cannot write Chrome trace '%s': %s", path, err.text);
				goto out;
			}
			for (int s = 0; s < pp; s++) {
				for (size_t x = (size_t)s; x < tl.nops; x += (size_t)pp)
					for (int b = 0; b < 2; b++)
						chrome_op(ev, st, k, x / pp, s, v, b,
							  offset + (b ? tl.bs : tl.fs)[x],
							  (b ? tl.bd : tl.fd)[x], &ok);
				json_t *a = json_object();
				bp_json_set(a, "step", json_integer(st->index), &ok);
				bp_json_set(a, "sync", json_string(st->sync), &ok);
				cmd_chrome_complete(ev, "grad sync", "grad_sync",
						    offset + st->m.pipe_max_us, st->m.grad_sync_us,
						    (int)k, s, a, &ok);
			}
		}
		offset += st->m.step_us;
	}
	bp_json_set(other, "source", json_string("balplan simulate (predicted)"), &ok);
	bp_json_set(other, "method", json_string(p->method), &ok);
	bp_json_set(other, "profile", json_string(p->profile), &ok);
	bp_json_set(root, "displayTimeUnit", json_string("ms"), &ok);
	bp_json_set(root, "otherData", other, &ok);
	other = NULL;
	bp_json_set(root, "traceEvents", ev, &ok);
	ev = NULL;
	text = ok ? bp_json_dump_canonical(root) : NULL;
	if (!text)
		goto oom;
	if (cmd_write_file(path, text, strlen(text), &err) < 0)
		rc = cmd_error("cannot write Chrome trace '%s': %s", path, err.text);
	else
		rc = EXIT_OK;
	goto out;
oom:
	rc = cmd_error("cannot write Chrome trace '%s': out of memory", path);
out:
	free(text);
	timeline_free(&tl);
	free(maxpp);
	json_decref(root);
	json_decref(ev);
	json_decref(other);
	return rc;
}

/* --format csv|json: the per-step table (columns named in simulate_usage) and, in json, the
 * plan's setting and the summary. */
static void print_steps_data(const struct bp_plan *p, const struct bp_profile *prof,
			     const char *path, enum cmd_format fmt)
{
	static const char *const cols[] = {"step", "docs", "mbs", "tokens", "step_ms",
					   "grad_sync_ms", "bubble", "imb_wlb", "imb_sb",
					   "gap_hyd", "peak_mem_gib"};
	struct cmd_table t;
	int first = 1;
	if (fmt == CMD_FORMAT_JSON) {
		struct bp_sb lay = BP_SB_INIT;
		bp_sb_fill(&lay, fill_plan_layout, p);
		printf("{");
		cmd_json_key(stdout, &first, "plan");
		cmd_json_str(stdout, path);
		cmd_json_key(stdout, &first, "method");
		cmd_json_str(stdout, p->method);
		cmd_json_key(stdout, &first, "profile");
		cmd_json_str(stdout, prof->name);
		cmd_json_key(stdout, &first, "gpus");
		printf("%d", p->cluster.gpus);
		cmd_json_key(stdout, &first, "gpu");
		cmd_json_str(stdout, p->cluster.gpu);
		cmd_json_key(stdout, &first, "layout");
		cmd_json_str(stdout, lay.buf); /* out of memory: what fit */
		bp_sb_release(&lay);
		cmd_json_key(stdout, &first, "steps");
	}
	cmd_table_begin(&t, stdout, fmt, cols, BP_ARRAY_LEN(cols));
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *st = &p->steps[i];
		cmd_table_int(&t, (long long)st->index);
		cmd_table_int(&t, (long long)st->ndocs);
		cmd_table_int(&t, (long long)st->m.nmbs);
		cmd_table_int(&t, (long long)st->m.tokens);
		cmd_table_num(&t, st->m.step_us / 1e3);
		cmd_table_num(&t, st->m.grad_sync_us / 1e3);
		cmd_table_num(&t, st->m.bubble);
		cmd_table_num(&t, st->m.imb_wlb);
		cmd_table_num(&t, st->m.imb_sb);
		cmd_table_num(&t, st->m.gap_hyd);
		cmd_table_num(&t, (double)st->m.peak_mem / 1073741824.0);
	}
	cmd_table_end(&t);
	if (fmt == CMD_FORMAT_JSON) {
		const struct bp_summary *s = &p->summary;
		const char *const keys[] = {"total_s", "step_mean_ms", "step_p50_ms", "step_p95_ms",
					    "step_max_ms", "tokens_per_s"};
		const double v[] = {s->total_us / 1e6, s->step_mean_us / 1e3, s->step_p50_us / 1e3,
				    s->step_p95_us / 1e3, s->step_max_us / 1e3, s->tokens_per_s};
		cmd_json_key(stdout, &first, "summary");
		printf("{");
		int f2 = 1;
		for (size_t k = 0; k < BP_ARRAY_LEN(keys); k++) {
			cmd_json_key(stdout, &f2, keys[k]);
			cmd_json_num(stdout, v[k]);
		}
		cmd_json_key(stdout, &f2, "documents");
		cmd_json_str(stdout, bp_plan_documents_trained(p));
		cmd_json_key(stdout, &f2, "model_pflop");
		cmd_json_num(stdout, s->model_tflop / 1e3);
		cmd_json_key(stdout, &f2, "tflops_per_gpu");
		cmd_json_num(stdout, s->model_tflops_per_gpu);
		cmd_json_key(stdout, &f2, "mfu");
		cmd_json_num(stdout, s->mfu);
		printf("}}");
	}
	printf("\n");
}

/* -o: the plan with its predictions recomputed on prof, which it now names. */
static int write_repredicted(struct bp_plan *plan, const struct bp_profile *prof,
			     const char *profile_path, const char *path, const char *outp)
{
	struct bp_error err;
	struct bp_profile again;
	char sha[65];
	if (!strcmp(outp, path))
		return cmd_usage("simulate", "-o '%s' would overwrite the plan it reads", outp);
	if (profile_path) {
		bp_profile_init(&again);
		int r = cmd_load_profile(profile_path, &again, sha, &err);
		bp_profile_release(&again);
		if (r < 0)
			return cmd_error("%s", err.text);
	} else {
		json_t *pj = bp_profile_to_json(prof);
		char *pt = pj ? bp_json_dump_canonical(pj) : NULL;
		json_decref(pj);
		if (!pt)
			return cmd_error("cannot encode the profile: out of memory");
		bp_sha256_hex(pt, strlen(pt), sha);
		free(pt);
	}
	snprintf(plan->profile, sizeof(plan->profile), "%s", prof->name);
	memcpy(plan->profile_sha, sha, sizeof(plan->profile_sha));
	json_t *j = bp_plan_to_json(plan);
	char *text = j ? bp_json_dump_lines(j) : NULL;
	json_decref(j);
	if (!text)
		return cmd_error("cannot encode plan '%s': out of memory", outp);
	int rc = cmd_write_file(outp, text, strlen(text), &err);
	free(text);
	if (rc < 0)
		return cmd_error("cannot write plan '%s': %s", outp, err.text);
	return EXIT_OK;
}

/* Where a ticks step's time goes (issue 25 item 1). Every tick is world-synchronous
 * (ticks.h), so its time is its slowest ranks' token-wise work and served attention plus the
 * all-to-all ping-pong leaves exposed; over the ranks' mean work, a tick loses
 *   stage: the most loaded stage's mean token-wise work over the mean of all ranks (in a
 *          fill or drain tick, where some stages run dummies, the pipeline bubble; in a full
 *          tick, stages whose token-wise work differs, e.g. the LM head on the last stage),
 *   within: the slowest rank's token-wise work over its stage's mean (ping and pong cut
 *          unevenly, pipelines holding unequal tokens),
 *   attention: the most loaded server's attention over the mean (the scheduler's tolerance),
 *   exposed: the all-to-all the slots do not hide.
 * Per tick and summed over the step, ms. */
static int print_tick_table(const struct bp_ticks *tk, struct bp_error *err)
{
	const int world = tk->world, pp = tk->pp;
	double *st_lin = bp_calloc((size_t)pp, sizeof(double), err);
	int *st_n = bp_calloc((size_t)pp, sizeof(int), err);
	if (!st_lin || !st_n) {
		free(st_lin);
		free(st_n);
		return -1;
	}
	for (int r = 0; r < world; r++)
		st_n[tk->stage[r]]++;
	/* sums: work, bubble (stage part of fill/drain ticks), stage (of full ticks), within,
	 * attention, exposed, ticks */
	double sum[7] = {0, 0, 0, 0, 0, 0, 0}, ca_bwd = 0;
	printf("\ntick phase stages  tick (ms)  lin slow  lin mean  slowest  ca slow   ca mean  "
	       "exposed\n");
	for (size_t k = 0; k < tk->nticks; k++) {
		int bwd, real = 0;
		size_t phase;
		for (int s = 0; s < pp; s++) {
			int64_t j = bp_tick_op(pp, tk->m, k, s, &bwd, &phase);
			if (j >= 0 && (size_t)j < tk->m)
				real++;
		}
		memset(st_lin, 0, (size_t)pp * sizeof(double));
		double lin = 0, ca = 0, stage_max = 0;
		for (int r = 0; r < world; r++) {
			lin += tk->compute[k * (size_t)world + (size_t)r];
			ca += tk->attn[k * (size_t)world + (size_t)r];
			st_lin[tk->stage[r]] += tk->compute[k * (size_t)world + (size_t)r];
		}
		lin /= world;
		ca /= world;
		for (int s = 0; s < pp; s++)
			if (st_n[s] && st_lin[s] / st_n[s] > stage_max)
				stage_max = st_lin[s] / st_n[s];
		sum[0] += lin + ca;
		sum[real < pp ? 1 : 2] += stage_max - lin;
		sum[3] += tk->slow_lin[k] - stage_max;
		sum[4] += tk->slow_ca[k] - ca;
		if (bwd)
			ca_bwd += tk->slow_ca[k] - ca;
		sum[5] += tk->exposed_us[k];
		sum[6] += tk->tick_us[k];
		printf("%-4zu %-5s %d/%-4d %10.3f %9.3f %9.3f %7d %8.3f %9.3f %8.3f\n", k,
		       bwd ? "bwd" : "fwd", real, pp, tk->tick_us[k] / 1e3, tk->slow_lin[k] / 1e3,
		       lin / 1e3, tk->slow_stage[k], tk->slow_ca[k] / 1e3, ca / 1e3,
		       tk->exposed_us[k] / 1e3);
	}
	const double T = sum[6] > 0 ? sum[6] : 1;
	printf("ticks' time %.3f ms = mean rank's work %.3f (%.1f%%) + fill/drain bubble %.3f "
	       "(%.1f%%) + stages unequal in full ticks %.3f (%.1f%%) + within a stage %.3f "
	       "(%.1f%%) + attention imbalance %.3f (%.1f%%; backward ticks %.3f) + all-to-all "
	       "exposed %.3f (%.1f%%)\n",
	       sum[6] / 1e3, sum[0] / 1e3, 100 * sum[0] / T, sum[1] / 1e3, 100 * sum[1] / T,
	       sum[2] / 1e3, 100 * sum[2] / T, sum[3] / 1e3, 100 * sum[3] / T, sum[4] / 1e3,
	       100 * sum[4] / T, ca_bwd / 1e3, sum[5] / 1e3, 100 * sum[5] / T);
	free(st_lin);
	free(st_n);
	return 0;
}

/* DistCA's ticks (planner/sim/ticks.h: its byte model and the non-resend servers' memory):
 * the step's mode, the bytes its all-to-alls move per layer (every rank's sends over the
 * step's ticks, in and out, and the busiest rank's send + receive in one tick) and the most a
 * server keeps (non-resend). */
static int print_ticks_detail(const struct bp_plan *p, const struct bp_step *st,
			      struct bp_costs *cm, struct bp_error *err)
{
	struct bp_ticks tk;
	if (bp_ticks_eval(p, st, cm, &tk, err) < 0) {
		bp_ticks_release(&tk);
		return -1;
	}
	double sent = 0, busiest = 0, kept = 0;
	for (size_t k = 0; k < tk.nticks; k++)
		for (int r = 0; r < tk.world; r++) {
			size_t i = k * (size_t)tk.world + (size_t)r;
			sent += tk.send[i];
			if (tk.send[i] + tk.recv[i] > busiest)
				busiest = tk.send[i] + tk.recv[i];
			if (tk.kept[i] > kept)
				kept = tk.kept[i];
		}
	printf("ticks %zu, %s: all-to-all per layer %.3f MB sent over the step, busiest rank "
	       "%.3f MB in a tick; servers keep up to %.3f GiB\n", tk.nticks,
	       tk.resend ? "resend" : "non-resend", sent / 1e6, busiest / 1e6,
	       kept / 1073741824.0);
	int rc = print_tick_table(&tk, err);
	bp_ticks_release(&tk);
	return rc;
}

static void print_step_detail(const struct bp_plan *p, const struct bp_step *st)
{
	const struct bp_layout *l = bp_plan_layout(p, st);
	printf("step %lld: %.3f ms (slowest pipeline %.3f ms + gradient sync %.3f ms)\n",
	       (long long)st->index, st->m.step_us / 1e3, st->m.pipe_max_us / 1e3,
	       st->m.grad_sync_us / 1e3);
	if (st->m.pull_us >= 0) /* Hydraulis Sec. 5.2, Table 1's O-P and O */
		printf("sync %s: pull %.3f ms, push %.3f ms, exposed %.3f ms, optimizer %.3f ms; "
		       "LNK %.3f GiB on the busiest GPU, slices %.0f (pull) %.0f (push)\n",
		       st->sync, st->m.pull_us / 1e3, st->m.push_us / 1e3,
		       st->m.op_exposed_us / 1e3, st->m.optimizer_us / 1e3,
		       st->m.lnk_bytes / 1073741824.0, st->m.lnk_slices_pull,
		       st->m.lnk_slices_push);
	printf("%-8s %-6s %12s %12s %7s %10s\n", "pipeline", "stage", "busy", "idle", "busy%",
	       "peak mem");
	for (size_t k = 0; k < st->npipes; k++)
		for (int s = 0; s < l->pipes[k].sc.pp; s++) {
			const struct bp_pipe *pi = &st->pipes[k];
			double busy = pi->busy_us[s], idle = st->m.step_us - busy;
			printf("%-8zu %-6d %9.3f ms %9.3f ms %6.1f%% %6.2f GiB\n", k, s, busy / 1e3,
			       idle / 1e3, st->m.step_us > 0 ? 100.0 * busy / st->m.step_us : 0.0,
			       pi->peak_mem[s] / 1073741824.0);
		}
	printf("\n%-8s %-5s %8s %6s %-9s %12s %12s\n", "pipeline", "mb", "tokens", "spans",
	       "shard", "fwd (all)", "bwd (all)");
	for (size_t k = 0; k < st->npipes; k++)
		for (size_t j = 0; j < st->pipes[k].nmbs; j++) {
			const struct bp_mb *mb = &st->pipes[k].mbs[j];
			double f = 0, b = 0;
			for (int s = 0; s < l->pipes[k].sc.pp; s++) {
				f += mb->fwd[s];
				b += mb->bwd[s];
			}
			printf("%-8zu %-5zu %8lld %6zu %-9s %9.3f ms %9.3f ms\n", k, j,
			       (long long)mb->tokens, mb->nspans, bp_shard_name(mb->shard), f / 1e3,
			       b / 1e3);
		}
}

int cmd_simulate(int argc, char **argv)
{
	static const struct option opts[] = {
		{"profile", required_argument, NULL, 'p'},
		{"step", required_argument, NULL, 's'},
		{"svg", required_argument, NULL, 'g'},
		{"output", required_argument, NULL, 'o'},
		{"chrome", required_argument, NULL, 'c'},
		{"format", required_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *profile = NULL, *svg = NULL, *outp = NULL, *chrome = NULL;
	enum cmd_format fmt = CMD_FORMAT_TEXT;
	int64_t step = -1;
	int c;
	while ((c = getopt_long(argc, argv, "p:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': profile = optarg; break;
		case 's':
			if (cmd_opt_int("simulate", "--step", optarg, 0, INT64_MAX, &step) < 0)
				return EXIT_USAGE;
			break;
		case 'g': svg = optarg; break;
		case 'o': outp = optarg; break;
		case 'c': chrome = optarg; break;
		case 'f':
			if (cmd_opt_format("simulate", optarg, &fmt) < 0)
				return EXIT_USAGE;
			break;
		case 'h': simulate_usage(stdout); return EXIT_OK;
		default:
			return cmd_usage("simulate", "unknown or incomplete option '%s'",
					 cmd_cut(argv[optind - 1]));
		}
	}
	if (argc - optind != 1)
		return cmd_usage("simulate", "expected one plan file");
	const char *path = argv[optind];
	if (profile && !strcmp(profile, "-") && !strcmp(path, "-"))
		return cmd_usage("simulate", "the plan and --profile cannot both be standard input "
				 "('-')");
	if (svg && (cmd_refuse_overwrite("simulate", "--svg", svg, "plan", path) ||
		    cmd_refuse_overwrite("simulate", "--svg", svg, "profile", profile)))
		return EXIT_USAGE;
	if (chrome && (cmd_refuse_overwrite("simulate", "--chrome", chrome, "plan", path) ||
		       cmd_refuse_overwrite("simulate", "--chrome", chrome, "profile", profile)))
		return EXIT_USAGE;
	if (svg && chrome && !strcmp(svg, "-") && !strcmp(chrome, "-"))
		return cmd_usage("simulate", "--svg and --chrome cannot both write to standard "
				 "output ('-')");
	if (svg && chrome && cmd_same_file(svg, chrome))
		return cmd_usage("simulate", "--svg and --chrome name the same file '%s'",
				 cmd_cut(svg));
	if (fmt != CMD_FORMAT_TEXT && step >= 0)
		return cmd_usage("simulate", "--format %s prints the per-step table; --step's "
				 "per-rank view is text only", fmt == CMD_FORMAT_CSV ? "csv" : "json");
	if (fmt != CMD_FORMAT_TEXT && ((svg && !strcmp(svg, "-")) ||
				       (chrome && !strcmp(chrome, "-"))))
		return cmd_usage("simulate", "--format %s and --%s '-' cannot both write to "
				 "standard output", fmt == CMD_FORMAT_CSV ? "csv" : "json",
				 svg && !strcmp(svg, "-") ? "svg" : "chrome");
	if (outp && (cmd_refuse_overwrite("simulate", "-o", outp, "plan", path) ||
		     cmd_refuse_overwrite("simulate", "-o", outp, "profile", profile)))
		return EXIT_USAGE;
	struct bp_plan plan;
	struct bp_profile prof;
	struct bp_costs cm;
	struct bp_error err;
	int rc = EXIT_DATA;
	bp_plan_init(&plan);
	bp_profile_init(&prof);
	bp_costs_init(&cm, &prof);
	if (cmd_load_plan(path, &plan, &err) < 0) {
		cmd_error("%s", err.text);
		goto out;
	}
	/* a window of a run (plan.h): its steps by the run's numbers */
	if (step >= 0 && (step < plan.first_step ||
			  step - plan.first_step >= (int64_t)plan.nsteps)) {
		rc = cmd_usage("simulate", "--step %lld is outside the plan's steps %lld to %lld",
			       (long long)step, (long long)plan.first_step,
			       (long long)(plan.first_step + (int64_t)plan.nsteps - 1));
		goto out;
	}
	if (step >= 0)
		step -= plan.first_step;
	if (cmd_plan_profile(&plan, profile, 0, &prof, &err) < 0 ||
	    bp_plan_costs(&plan, &prof, &cm, &err) < 0 ||
	    bp_plan_validate(&plan, NULL, &err) < 0 || bp_plan_repredict(&plan, &cm, &err) < 0) {
		cmd_error("cannot simulate plan '%s': %s", path, err.text);
		goto out;
	}
	if (outp) {
		rc = write_repredicted(&plan, &prof, profile, path, outp);
		goto out;
	}
	if (svg && !plan.nsteps) {
		rc = cmd_error("plan '%s' has no steps to draw", path);
		goto out;
	}
	if (svg && !strcmp(svg, "-")) { /* the picture alone on standard output */
		rc = write_svg(&plan, &plan.steps[step >= 0 ? step : 0], &cm, svg);
		if (rc == EXIT_OK && chrome)
			rc = write_chrome(&plan, step, &cm, chrome);
		goto out;
	}
	if (chrome && !strcmp(chrome, "-")) { /* the trace alone on standard output */
		rc = write_chrome(&plan, step, &cm, chrome);
		if (rc == EXIT_OK && svg)
			rc = write_svg(&plan, &plan.steps[step >= 0 ? step : 0], &cm, svg);
		goto out;
	}
	if (fmt == CMD_FORMAT_TEXT) { /* csv and json are the table alone */
		struct bp_sb lay = BP_SB_INIT;
		bp_sb_fill(&lay, fill_plan_layout, &plan);
		printf("plan %s: method %s on profile %s, %d x %s (%s)\n", path, plan.method,
		       prof.name, plan.cluster.gpus, plan.cluster.gpu, lay.buf);
		bp_sb_release(&lay);
	}
	if (svg) {
		rc = write_svg(&plan, &plan.steps[step >= 0 ? step : 0], &cm, svg);
		if (rc != EXIT_OK)
			goto out;
	}
	if (chrome) {
		rc = write_chrome(&plan, step, &cm, chrome);
		if (rc != EXIT_OK)
			goto out;
	}
	if (fmt != CMD_FORMAT_TEXT) {
		print_steps_data(&plan, &prof, path, fmt);
		rc = EXIT_OK;
		goto out;
	}
	if (step >= 0) {
		print_step_detail(&plan, &plan.steps[step]);
		if (bp_layout_schedule(bp_plan_layout(&plan, &plan.steps[step]))->world_ticks &&
		    print_ticks_detail(&plan, &plan.steps[step], &cm, &err) < 0) {
			rc = cmd_error("cannot simulate plan '%s': %s", path, err.text);
			goto out;
		}
		rc = EXIT_OK;
		goto out;
	}
	printf("%5s %6s %5s %9s %11s %10s %7s %8s %8s %8s %9s\n", "step", "docs", "mbs",
	       "tokens", "step", "grad sync", "bubble", "imb(WLB)", "imb(SB)", "gap(Hyd)",
	       "peak mem");
	for (size_t i = 0; i < plan.nsteps; i++) {
		const struct bp_step *st = &plan.steps[i];
		printf("%5lld %6zu %5lld %9lld %8.2f ms %7.2f ms %6.1f%% %8.3f %8.3f %8.3f %5.1f GiB\n",
		       (long long)st->index, st->ndocs, (long long)st->m.nmbs, (long long)st->m.tokens,
		       st->m.step_us / 1e3, st->m.grad_sync_us / 1e3, 100.0 * st->m.bubble,
		       st->m.imb_wlb, st->m.imb_sb, st->m.gap_hyd, st->m.peak_mem / 1073741824.0);
	}
	const struct bp_summary *s = &plan.summary;
	printf("total %.3f s, mean step %.2f ms (p50 %.2f, p95 %.2f, max %.2f), %.0f tokens/s\n",
	       s->total_us / 1e6, s->step_mean_us / 1e3, s->step_p50_us / 1e3,
	       s->step_p95_us / 1e3, s->step_max_us / 1e3, s->tokens_per_s);
	printf("work: documents %s, %.3f model PFLOP, %.1f model TFLOP/s per GPU, MFU %.1f%%\n",
	       bp_plan_documents_trained(&plan), s->model_tflop / 1e3, s->model_tflops_per_gpu,
	       100.0 * s->mfu);
	rc = EXIT_OK;
out:
	bp_costs_release(&cm);
	bp_plan_release(&plan);
	bp_profile_release(&prof);
	return rc;
}
