/* bench_distca.c: DistCA's planning time per step (Sec. 4.2 "scheduler"; App. E: 50-300 ms
 * of scheduling time from 64 to 256 GPUs): the distca method (methods/distca.c: linear
 * placement, one greedy scheduler call per tick and nano-batch, chunks and bytes, the step's
 * record) on one global batch at a time, as `solve -m distca` runs it before prediction.
 * TP 8 (a server is a TP group), cp 1, PP as given; tokens per step = BS x MaxDocLen (the
 * paper's batch sizes, Table 4/5); tolerance escalation on (the code's rule where the 2 GiB
 * buffer overflows); medians over ITERS steps after one warm-up, one thread.
 * usage: bench_distca GPUS MAXDOCLEN BS [ITERS [DATASET [MODEL [PP [TOLERANCE [BWD_PLACE]]]]]]
 *        (defaults 20 pretrain-upsampled-long llama3-8b 1 0.1 own; BWD_PLACE reuse: the
 *        backward ticks run the forward's placement, half the calls at pp > 1) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ca_sched.h"
#include "method.h"
#include "bench_util.h"

static int fail(const struct bp_error *err)
{
	fprintf(stderr, "bench_distca: %s\n", err->text);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: bench_distca GPUS MAXDOCLEN BS [ITERS [DATASET [MODEL [PP "
			"[TOLERANCE]]]]]\n");
		return 2;
	}
	int gpus = atoi(argv[1]);
	int64_t L = atoll(argv[2]), bs = atoll(argv[3]);
	int iters = argc > 4 ? atoi(argv[4]) : 20;
	const char *dsname = argc > 5 ? argv[5] : "pretrain-upsampled-long";
	const char *mname = argc > 6 ? argv[6] : "llama3-8b";
	int pp = argc > 7 ? atoi(argv[7]) : 1;
	const char *eps = argc > 8 ? argv[8] : "0.1";
	const char *bwd = argc > 9 ? argv[9] : "own";
	const int tp = 8;
	struct bp_error err;
	struct bp_dataset ds;
	const struct bp_model *m = bp_model_preset(mname);
	if (!m || gpus < tp || gpus % (tp * pp) || L < 1 || bs < 1 || iters < 1) {
		fprintf(stderr, "bench_distca: bad arguments (GPUS a multiple of 8 x PP, a known "
			"model)\n");
		return 2;
	}
	int dp = gpus / (tp * pp);
	bp_dataset_init(&ds);
	if (bp_dataset_preset(&ds, dsname, &err) < 0)
		return fail(&err);
	struct bp_batches b = {0};
	struct bp_sampler_opts so = {.steps = iters + 1, .tokens_per_step = bs * L,
				     .docs_per_step = 0, .max_len = L,
				     .overlen = BP_OVERLEN_TRUNCATE, .seed = 1};
	if (bp_sample(&ds, &so, &b, &err) < 0)
		return fail(&err);
	double *ms = calloc((size_t)iters, sizeof(double));
	size_t calls = 0, docs = 0;
	double moved = 0;
	for (int i = 0; i <= iters; i++) {
		struct bp_plan p;
		struct bp_layout lay;
		bp_plan_init(&p);
		bp_layout_init(&lay);
		p.model = *m;
		p.cluster = (struct bp_cluster){"H200", gpus, 8};
		p.max_tokens = L;
		struct bp_scheme sc = {tp, 1, pp};
		if (bp_plan_set_param(&p, "tolerance", eps, &err) < 0 ||
		    bp_plan_set_param(&p, "escalate", "1", &err) < 0 ||
		    bp_plan_set_param(&p, "bwd_place", bwd, &err) < 0 ||
		    bp_layout_megatron(&lay, sc, dp, m->layers, L, &err) < 0 ||
		    bp_plan_add_layout(&p, &lay, &err) < 0)
			return fail(&err);
		struct bp_batches one = {.b = &b.b[i], .n = 1};
		struct bp_method_ctx ctx = {.shard = BP_SHARD_SEQUENCE};
		double t0 = now_ms();
		int rc = bp_method_distca(&ctx, &one, &p, &err);
		double t1 = now_ms();
		if (rc < 0)
			return fail(&err);
		if (i > 0) {
			ms[i - 1] = t1 - t0;
			const struct bp_ca_record *r = p.steps[0].record;
			calls += r->ncalls;
			docs += b.b[i].ndocs;
			for (size_t k = 0; k < r->ncalls; k++)
				moved += r->moved[k];
		}
		bp_plan_release(&p);
	}
	qsort(ms, (size_t)iters, sizeof(double), cmp_double);
	printf("distca %s %s: %d GPUs (%d servers, pp %d), MaxDocLen %lld, BS %lld: %.1f docs "
	       "and %.1f scheduler calls per step, median %.3f ms per step (min %.3f, max %.3f), "
	       "%.0f pairs moved per step\n", mname, dsname, gpus, dp * pp, pp, (long long)L,
	       (long long)bs, (double)docs / iters, (double)calls / iters, ms[iters / 2], ms[0],
	       ms[iters - 1], moved / iters);
	free(ms);
	bp_batches_release(&b);
	bp_dataset_release(&ds);
	return 0;
}
