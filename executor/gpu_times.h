/* gpu_times.h: where a replay's GPU time goes, per operation and kernel family
 * (`balexec --gpu-times FILE`, CUDA backend; executor/README.md "GPU times").
 *
 * Every compute primitive the CUDA backend queues is bracketed by two timing events on its
 * stream; completed pairs are read back without ever blocking the host (a full ring drops
 * the pair and counts it), so the replay's own timing is disturbed only by the events. Per
 * operation (step, micro-batch, pass) and family it keeps the calls, the summed time, the
 * largest call and the span from the family's first start to its last end; the family `all` sums the
 * operation's compute. An operation seen again (the warm-up replays step A first) keeps only
 * its last replay. The file is tab-separated text with a header (format below). */
#ifndef BALPLAN_EXECUTOR_GPU_TIMES_H
#define BALPLAN_EXECUTOR_GPU_TIMES_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "bp.h"

enum bp_kt_family {
	BP_KT_QKV,
	BP_KT_O,
	BP_KT_FFN,
	BP_KT_LM_HEAD,
	BP_KT_ATTN,
	BP_KT_SPARSE,
	BP_KT_NFAM
};

struct bp_gpu_times;

/* A recorder writing to path at close (one file per rank: world > 1 appends ".rank<R>").
 * Events are made here, before the replay; cap pairs may be in flight at once. */
int bp_kt_open(struct bp_gpu_times **out, const char *path, int rank, int world, size_t cap,
	       struct bp_error *err);
/* Around one primitive queued on stream: begin before its first kernel, end after its last.
 * A begin with no room in the ring (every pair still running) records nothing and ends
 * nothing. Neither call blocks. */
void bp_kt_begin(struct bp_gpu_times *kt, cudaStream_t stream, enum bp_kt_family fam,
		 int64_t step, int64_t mb, int bwd);
void bp_kt_end(struct bp_gpu_times *kt, cudaStream_t stream);
/* Reads back every completed pair (all of them after the stream has drained). */
void bp_kt_harvest(struct bp_gpu_times *kt);
/* Reads back what is left (the stream must have drained), writes the file, frees kt. */
int bp_kt_close(struct bp_gpu_times *kt, struct bp_error *err);
/* Frees kt without writing (an aborted replay). */
void bp_kt_free(struct bp_gpu_times *kt);

#endif
