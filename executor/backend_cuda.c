/* backend_cuda.c: balexec's CUDA backend (engine.h struct bp_backend; executor/README.md
 * "CUDA backend"; DESIGN.md "Executor"; issue 4). Registered in engine.c's table as "cuda".
 *
 * Compute is real: each op runs op->layers synthetic transformer layers of the plan's model
 * on this rank's tokens (its CP shard of the micro-batch, bp_shard_segments): the QKV, O and
 * FFN GEMMs through cuBLAS (bf16 in and out, fp32 accumulation), variable-length causal
 * attention through executor/attn.h, and per layer the collectives the cost model counts
 * (costmodel.c rank_layer_time / bp_cost_microbatch): two TP all-reduces (after the O and FFN
 * down GEMMs forward, after the FFN up and QKV input gradients backward, as Megatron's row-
 * and column-parallel layers need) and one CP all-gather of K and V forward, reduce-scatter
 * of dK and dV backward, each of the size the engine gives (op->colls, capped by
 * --max-bytes). Backward runs the two GEMMs per forward GEMM (dX and dW) and the attention
 * backward. Weights (one layer's, shared by all layers: only the time matters) and
 * activations are allocated on first use, sized for the largest op seen, grown on demand,
 * and filled once with small seeded values; inputs are never overwritten by outputs, so no
 * value grows from layer to layer. The SwiGLU elementwise product and the LM head are not
 * run (the engine does not say which stage is the last).
 *
 * Communication is NCCL on device buffers. Invariants:
 * - Compute, the op's collectives and the blocking collectives run on one CUDA stream (the
 *   main one); every backend call but send returns only after the work it queued is done.
 * - Point to point goes over two more communicators split from the world, each with its
 *   own stream: "up" carries every message to a higher rank (activations), "down" every
 *   message to a lower rank (gradients). A send is queued at once and never waits on the
 *   host; a recv waits for its stream. ncclSend may block the GPU until the peer posts the
 *   matching ncclRecv (nccl.h "Send"), and NCCL runs the operations of one communicator one
 *   after the other even across streams (NCCL issue #574), so on one stream or one
 *   communicator a 1F1B neighbour pair that each sends before receiving deadlocks; NCCL's
 *   own answer, fusing the send and the receive in one ncclGroupStart/End (nccl.h "Group
 *   semantics"), does not survive the engine's header-then-payload messages with a
 *   blocking recv in between. Per direction, every rank's queue holds its sends to the next
 *   rank and its receives from the previous one in program order, which adds no wait the
 *   engine's schedule does not already have (checked by simulating the engine's 1F1B call
 *   order for pp 2..8 and 1..13 micro-batches with sends that complete only while both
 *   sides run). Sends then overlap compute, as Megatron's asynchronous p2p does. NCCL has
 *   no tags: messages between two ranks match in issue order, which the engine keeps.
 *   The cost: kernels of different communicators on different streams may run at once,
 *   which NCCL's guide says needs enough free SMs (p2p kernels use few).
 * - Nothing that can synchronise the device runs while a send may be in flight: device
 *   memory grows with cudaMallocAsync / cudaFreeAsync (stream-ordered), and the bytes a
 *   send carries are staged in pinned memory, so the copy is truly asynchronous.
 * - Contents travel only where the engine reads them: p2p messages up to CARRY_MAX bytes
 *   (the engine's timing headers) and the trace gather. Larger payloads and collectives move
 *   the right number of bytes between device buffers; the host buffers are left alone.
 * - Communicators are non-blocking (ncclConfig_t.blocking = 0): any NCCL call may return
 *   ncclInProgress, after which ncclCommGetAsyncError must be polled until it reports
 *   ncclSuccess before the communicator is used again (NCCL user guide, "Creating a
 *   communication with options": blocking = 0 asks NCCL never to block in any call). So
 *   no call here blocks without a deadline: init, split, every enqueue and every completion
 *   (cudaEventQuery) poll until timeout_s.
 *   A timeout aborts every communicator (ncclCommAbort also ends kernels still waiting for a
 *   peer) and returns BP_EXEC_TIMEOUT naming whom this rank waited for; balexec then calls
 *   abort, which exits, and srun --kill-on-bad-exit ends the others.
 * - Groups: ncclCommSplit is collective over the whole parent (world) communicator, so
 *   group_create must be called by every world rank, the same number of times in the same
 *   order. engine.c's make_group does: the TP, CP and gradient-sync groups partition the
 *   world into groups of equal size, so either every rank makes a group of that kind or
 *   none does; the colour is the group's lowest rank, the key the world rank, so group rank
 *   order is world rank order (the CP index is the position in the CP group). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attn.h"
#include "engine.h"

#define CARRY_MAX 65536            /* p2p messages up to this many bytes carry their bytes */
#define FILL_CHUNK (256 * 1024)    /* bytes of seeded values copied up, then replicated */
#define BLAS_WORKSPACE (32u << 20) /* cuBLAS workspace (its guide: 32 MiB on Hopper) */
#define FILL_SEED 0x62616c706c616eULL

struct dbuf {
	void *p;
	size_t cap;
};

struct cgroup {
	ncclComm_t comm;
	int n, me;      /* size, and this rank's index (= its order among ranks) */
	int *ranks;     /* world ranks, ascending */
	struct cgroup *next;
};

struct slot {          /* one send's device buffer, and its bytes on the host (pinned) */
	struct dbuf b;
	void *h;               /* CARRY_MAX pinned bytes, made on first need */
	cudaEvent_t ev;        /* recorded after the send: done when it has passed */
	int has_ev, busy, peer;
	uint64_t seq;          /* issue order, for naming the oldest send still waiting */
};

enum { UP, DOWN };    /* to a higher rank (activations), to a lower one (gradients) */

struct dir {           /* one direction of point to point: communicator, stream, buffers */
	ncclComm_t comm;
	cudaStream_t stream;
	cudaEvent_t ev;        /* recorded after each recv */
	int has_stream, has_ev;
	struct slot *slots;
	size_t nslots;
	struct dbuf rbuf;      /* what a recv lands in */
	void *h;               /* CARRY_MAX pinned bytes a recv's contents come up through */
};

struct cuda {
	int rank, world, dev;
	double timeout_s;
	ncclComm_t world_comm;
	struct dir dir[2];
	struct cgroup *groups; /* every group made and not freed, to abort them together */
	int aborted;           /* after a timeout: every communicator is gone */
	uint64_t seq;          /* sends so far */
	cublasHandle_t blas;
	cudaStream_t stream;   /* the main stream */
	cudaEvent_t ev[3], ev_done; /* per-layer ring (at most two layers queued), completion */
	int have_stream, have_blas, nev;
	struct dbuf blas_ws;
	/* Weights of one layer and their gradient scratch. */
	struct dbuf w_qkv, w_o, w_up, w_down, dw;
	/* Activations: [T][...] bf16, K and V [Tkv][...], lse [heads][T] fp32. */
	struct dbuf x, qkv, q, o, y, dy, dx, dob, dq, u, lse, k, v, dk, dv;
	struct dbuf ws, cu, coll_in, coll_out, scalar, g_in, g_out;
	/* Host scratch. */
	int64_t (*seg)[2];
	size_t seg_cap;
	int32_t *hcu;
	size_t hcu_cap;
	uint16_t *fill; /* FILL_CHUNK bytes of seeded bf16 values */
};

/* Model dimensions on one TP rank. */
struct dims {
	int64_t h, hl, kvl, hd, nq, nkv, nqkv, fl, nup;
};

/* ---- errors ---- */

static int cuda_fail(struct bp_error *err, cudaError_t e, const char *call, int line)
{
	return bp_errorf(err, "%s failed (backend_cuda.c:%d): %s", call, line,
			 cudaGetErrorString(e));
}

static int blas_fail(struct bp_error *err, cublasStatus_t s, const char *call, int line)
{
	return bp_errorf(err, "%s failed (backend_cuda.c:%d): %s", call, line,
			 cublasGetStatusString(s));
}

static int nccl_fail(struct bp_error *err, ncclResult_t r, ncclComm_t c, const char *call,
		     int line)
{
	const char *last = ncclGetLastError(c);
	return bp_errorf(err, "%s failed (backend_cuda.c:%d): %s%s%s", call, line,
			 ncclGetErrorString(r), last && last[0] ? ": " : "", last ? last : "");
}

#define CU(call, name)                                                                 \
	do {                                                                           \
		cudaError_t e_ = (call);                                               \
		if (e_ != cudaSuccess)                                                 \
			return cuda_fail(err, e_, name, __LINE__);                     \
	} while (0)

#define BL(call, name)                                                                 \
	do {                                                                           \
		cublasStatus_t s_ = (call);                                            \
		if (s_ != CUBLAS_STATUS_SUCCESS)                                       \
			return blas_fail(err, s_, name, __LINE__);                     \
	} while (0)

static double now_us_(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static double cuda_now_us(void *st)
{
	(void)st;
	return now_us_();
}

static void sleep_us(double us)
{
	struct timespec ts = {0, (long)(us * 1e3)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Poll interval: 2 us growing with the wait up to 50 us (as the host backend). */
static void poll_pause(double t0)
{
	double iv = 2 + (now_us_() - t0) / 20;
	sleep_us(iv > 50 ? 50 : iv);
}

/* Ends every communicator, ending kernels that still wait for a peer. Idempotent. */
static void abort_all(struct cuda *st)
{
	for (struct cgroup *g = st->groups; g; g = g->next)
		if (g->comm) {
			ncclCommAbort(g->comm);
			g->comm = NULL;
		}
	for (int d = 0; d < 2; d++)
		if (st->dir[d].comm) {
			ncclCommAbort(st->dir[d].comm);
			st->dir[d].comm = NULL;
		}
	if (st->world_comm) {
		ncclCommAbort(st->world_comm);
		st->world_comm = NULL;
	}
	st->aborted = 1;
}

static int check_alive(const struct cuda *st, struct bp_error *err)
{
	if (st->aborted)
		return bp_errorf(err, "the NCCL communicators were aborted after an earlier "
				 "timeout");
	return 0;
}

/* "rank 3", "ranks 0 1 2" (at most 16 shown) into buf. */
static void describe_ranks(char *buf, size_t n, const int *r, size_t k)
{
	size_t o = (size_t)snprintf(buf, n, k == 1 ? "rank" : "ranks");
	for (size_t i = 0; i < k && o < n; i++) {
		if (i == 16) {
			snprintf(buf + o, n - o, " ...");
			break;
		}
		o += (size_t)snprintf(buf + o, n - o, " %d", r[i]);
	}
}

/* Whom a blocking wait waits for: w->peer, else the group, else the whole world. */
static void describe_wait(const struct cuda *st, const struct bp_wait *w,
			  const struct cgroup *g, char *buf, size_t n)
{
	if (w->peer >= 0)
		snprintf(buf, n, "rank %d", w->peer);
	else if (g)
		describe_ranks(buf, n, g->ranks, (size_t)g->n);
	else if (st->world > 1)
		snprintf(buf, n, "the other ranks");
	else
		snprintf(buf, n, "the GPU");
}

static int timeout_error(struct cuda *st, const char *whom, const struct bp_wait *w,
			 struct bp_error *err)
{
	abort_all(st);
	bp_errorf(err, "timed out after %g s waiting for %s (%s, step %lld, micro-batch %lld)",
		  st->timeout_s, whom, w->what, (long long)w->step, (long long)w->mb);
	return BP_EXEC_TIMEOUT;
}

/* A communicator's asynchronous state: 0 ready, 1 still in progress, -1 failed (err). */
static int comm_state(ncclComm_t c, const char *what, struct bp_error *err)
{
	ncclResult_t a = ncclSuccess;
	ncclResult_t r = ncclCommGetAsyncError(c, &a);
	if (r != ncclSuccess)
		return nccl_fail(err, r, c, "ncclCommGetAsyncError", __LINE__);
	if (a == ncclInProgress)
		return 1;
	if (a != ncclSuccess) {
		const char *last = ncclGetLastError(c);
		return bp_errorf(err, "%s: NCCL reports %s%s%s", what, ncclGetErrorString(a),
				 last && last[0] ? ": " : "", last ? last : "");
	}
	return 0;
}

/* The result of an NCCL call on a non-blocking communicator: on ncclInProgress, polls
 * until the communicator is ready again (or the deadline). 0, -1 or BP_EXEC_TIMEOUT. */
static int nccl_settle(struct cuda *st, ncclResult_t r, ncclComm_t c, const char *call,
		       int line, double deadline, const char *whom, const struct bp_wait *w,
		       struct bp_error *err)
{
	double t0 = now_us_();
	if (r == ncclSuccess)
		return 0;
	if (r != ncclInProgress)
		return nccl_fail(err, r, c, call, line);
	for (;;) {
		int s = comm_state(c, call, err);
		if (s <= 0)
			return s;
		if (now_us_() > deadline)
			return timeout_error(st, whom, w, err);
		poll_pause(t0);
	}
}

#define NC(call, name, comm, deadline, whom, w)                                        \
	do {                                                                           \
		int rc_ = nccl_settle(st, (call), (comm), name, __LINE__, (deadline),  \
				      (whom), (w), err);                               \
		if (rc_ != 0)                                                          \
			return rc_;                                                    \
	} while (0)

/* Waits until the stream passed ev, watching the communicators for errors. */
static int wait_event(struct cuda *st, cudaEvent_t ev, double deadline, ncclComm_t const *comms,
		      size_t ncomms, const char *whom, const struct bp_wait *w,
		      struct bp_error *err)
{
	double t0 = now_us_();
	for (;;) {
		cudaError_t e = cudaEventQuery(ev);
		if (e == cudaSuccess)
			return 0;
		if (e != cudaErrorNotReady)
			return bp_errorf(err, "the GPU failed during %s (backend_cuda.c:%d): %s",
					 w->what, __LINE__, cudaGetErrorString(e));
		for (size_t i = 0; i < ncomms; i++)
			if (comms[i] && comm_state(comms[i], w->what, err) < 0)
				return -1;
		if (now_us_() > deadline)
			return timeout_error(st, whom, w, err);
		poll_pause(t0);
	}
}

/* Waits until the main stream has done everything queued so far. */
static int drain(struct cuda *st, double deadline, ncclComm_t const *comms, size_t ncomms,
		 const char *whom, const struct bp_wait *w, struct bp_error *err)
{
	CU(cudaEventRecord(st->ev_done, st->stream), "cudaEventRecord");
	return wait_event(st, st->ev_done, deadline, comms, ncomms, whom, w, err);
}

/* ---- device memory ---- */

/* Seeded values in [-1/16, 1/16] as bf16 (round to nearest even of the fp32 bits). */
static void make_fill(uint16_t *v, size_t n)
{
	uint64_t x = FILL_SEED;
	for (size_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		float f = ((float)(x >> 40) / 16777216.0f - 0.5f) * 0.125f;
		uint32_t b;
		memcpy(&b, &f, 4);
		b += 0x7fffu + ((b >> 16) & 1u);
		v[i] = (uint16_t)(b >> 16);
	}
}

/* Fills n bytes at p on the stream: the seeded chunk, then doubling device copies. */
static int fill_dev(struct cuda *st, void *p, size_t n, struct bp_error *err)
{
	size_t first = n < FILL_CHUNK ? n : FILL_CHUNK;
	char *d = p;
	CU(cudaMemcpyAsync(d, st->fill, first, cudaMemcpyHostToDevice, st->stream),
	   "cudaMemcpyAsync");
	for (size_t done = first; done < n;) {
		size_t k = done < n - done ? done : n - done;
		CU(cudaMemcpyAsync(d + done, d, k, cudaMemcpyDeviceToDevice, st->stream),
		   "cudaMemcpyAsync");
		done += k;
	}
	return 0;
}

enum { FILL_NONE, FILL_BF16, FILL_LSE };

/* Makes b hold at least bytes, growing in stream order on stream (cudaFreeAsync and
 * cudaMallocAsync never synchronise the device, so a send waiting for its receiver cannot
 * hold this up). New memory gets 1/8 headroom when it fits, and is filled on the stream. */
static int ensure(struct cuda *st, struct dbuf *b, size_t bytes, int fill, const char *name,
		  cudaStream_t stream, struct bp_error *err)
{
	if (bytes <= b->cap)
		return 0;
	if (b->p) {
		CU(cudaFreeAsync(b->p, stream), "cudaFreeAsync");
		b->p = NULL;
		b->cap = 0;
	}
	size_t want = bytes + bytes / 8;
	want = (want + 255) & ~(size_t)255;
	cudaError_t e = cudaMallocAsync(&b->p, want, stream);
	if (e == cudaErrorMemoryAllocation) {
		(void)cudaGetLastError(); /* clear it and try without the headroom */
		want = (bytes + 255) & ~(size_t)255;
		e = cudaMallocAsync(&b->p, want, stream);
	}
	if (e != cudaSuccess) {
		b->p = NULL;
		return bp_errorf(err, "cudaMallocAsync of %zu bytes for %s failed "
				 "(backend_cuda.c:%d): %s", want, name, __LINE__,
				 cudaGetErrorString(e));
	}
	b->cap = want;
	if (fill == FILL_BF16)
		return fill_dev(st, b->p, want, err);
	if (fill == FILL_LSE) /* 0x40404040 is 3.004f: a plausible log-sum-exp */
		CU(cudaMemsetAsync(b->p, 0x40, want, stream), "cudaMemsetAsync");
	return 0;
}

static void dfree(struct dbuf *b)
{
	if (b->p)
		cudaFree(b->p);
	b->p = NULL;
	b->cap = 0;
}

/* ---- point to point ---- */

static struct dir *dir_to(struct cuda *st, int peer)
{
	return &st->dir[peer > st->rank ? UP : DOWN];
}

static int check_peer(const struct cuda *st, int peer, const char *what, struct bp_error *err)
{
	if (peer < 0 || peer >= st->world || peer == st->rank)
		return bp_errorf(err, "%s rank %d on rank %d in a world of %d", what, peer,
				 st->rank, st->world);
	return 0;
}

/* A slot whose last send has passed (or a new one). */
static int free_slot(struct dir *d, struct slot **out, struct bp_error *err)
{
	for (size_t i = 0; i < d->nslots; i++) {
		struct slot *s = &d->slots[i];
		if (s->busy) {
			cudaError_t e = cudaEventQuery(s->ev);
			if (e == cudaErrorNotReady)
				continue;
			if (e != cudaSuccess)
				return bp_errorf(err, "the GPU failed during a pp send to rank %d "
						 "(backend_cuda.c:%d): %s", s->peer, __LINE__,
						 cudaGetErrorString(e));
			s->busy = 0;
		}
		*out = s;
		return 0;
	}
	struct slot *ns = bp_realloc_array(d->slots, d->nslots + 1, sizeof(*ns), err);
	if (!ns)
		return -1;
	d->slots = ns;
	struct slot *s = &d->slots[d->nslots];
	memset(s, 0, sizeof(*s));
	CU(cudaEventCreateWithFlags(&s->ev, cudaEventDisableTiming), "cudaEventCreateWithFlags");
	s->has_ev = 1;
	d->nslots++;
	*out = s;
	return 0;
}

/* Queued on the direction's stream at once; the host never waits here (but for NCCL's
 * first connection to this peer, which a non-blocking communicator makes in the
 * background while the peer reaches its first receive: bounded by the timeout). */
static int cuda_send(void *stp, const void *buf, size_t bytes, int peer, int tag,
		     struct bp_error *err)
{
	struct cuda *st = stp;
	double deadline = now_us_() + st->timeout_s * 1e6;
	struct bp_wait w = {"pp send", peer, -1, -1};
	struct slot *s = NULL;
	char whom[32];
	(void)tag; /* NCCL matches by order between two ranks; the engine keeps the order */
	if (check_alive(st, err) < 0 || check_peer(st, peer, "send to", err) < 0)
		return -1;
	struct dir *d = dir_to(st, peer);
	if (free_slot(d, &s, err) < 0)
		return -1;
	if (ensure(st, &s->b, bytes ? bytes : 1, FILL_NONE, "a send buffer", d->stream, err) < 0)
		return -1;
	if (bytes > 0 && bytes <= CARRY_MAX) {
		if (!s->h)
			CU(cudaMallocHost(&s->h, CARRY_MAX), "cudaMallocHost");
		memcpy(s->h, buf, bytes);
		CU(cudaMemcpyAsync(s->b.p, s->h, bytes, cudaMemcpyHostToDevice, d->stream),
		   "cudaMemcpyAsync");
	}
	snprintf(whom, sizeof(whom), "rank %d", peer);
	NC(ncclSend(s->b.p, bytes, ncclInt8, peer, d->comm, d->stream), "ncclSend", d->comm,
	   deadline, whom, &w);
	CU(cudaEventRecord(s->ev, d->stream), "cudaEventRecord");
	s->busy = 1;
	s->peer = peer;
	s->seq = ++st->seq;
	return 0;
}

/* Waits on the direction's stream: its earlier sends too (NCCL would run them first
 * anyway: same communicator). */
static int cuda_recv(void *stp, void *buf, size_t bytes, int peer, int tag,
		     const struct bp_wait *w, struct bp_error *err)
{
	struct cuda *st = stp;
	double deadline = now_us_() + st->timeout_s * 1e6;
	char whom[160];
	int rc;
	(void)tag;
	if (check_alive(st, err) < 0 || check_peer(st, peer, "receive from", err) < 0)
		return -1;
	struct dir *d = &st->dir[peer < st->rank ? UP : DOWN];
	if (ensure(st, &d->rbuf, bytes ? bytes : 1, FILL_NONE, "the receive buffer", d->stream,
		   err) < 0)
		return -1;
	describe_wait(st, w, NULL, whom, sizeof(whom));
	NC(ncclRecv(d->rbuf.p, bytes, ncclInt8, peer, d->comm, d->stream), "ncclRecv", d->comm,
	   deadline, whom, w);
	int carry = bytes > 0 && bytes <= CARRY_MAX;
	if (carry) {
		if (!d->h)
			CU(cudaMallocHost(&d->h, CARRY_MAX), "cudaMallocHost");
		CU(cudaMemcpyAsync(d->h, d->rbuf.p, bytes, cudaMemcpyDeviceToHost, d->stream),
		   "cudaMemcpyAsync");
	}
	CU(cudaEventRecord(d->ev, d->stream), "cudaEventRecord");
	if ((rc = wait_event(st, d->ev, deadline, &d->comm, 1, whom, w, err)) != 0)
		return rc;
	if (carry)
		memcpy(buf, d->h, bytes);
	return 0;
}

/* Every send of both directions, oldest first, so a timeout names the one that waits. */
static int cuda_wait_sends(void *stp, const struct bp_wait *w, struct bp_error *err)
{
	struct cuda *st = stp;
	double deadline = now_us_() + st->timeout_s * 1e6;
	if (check_alive(st, err) < 0)
		return -1;
	for (;;) {
		struct slot *old = NULL;
		struct dir *od = NULL;
		for (int k = 0; k < 2; k++)
			for (size_t i = 0; i < st->dir[k].nslots; i++) {
				struct slot *s = &st->dir[k].slots[i];
				if (s->busy && (!old || s->seq < old->seq)) {
					old = s;
					od = &st->dir[k];
				}
			}
		if (!old)
			return 0;
		char whom[32];
		struct bp_wait ww = *w;
		ww.peer = old->peer;
		snprintf(whom, sizeof(whom), "rank %d", old->peer);
		int rc = wait_event(st, old->ev, deadline, &od->comm, 1, whom, &ww, err);
		if (rc != 0)
			return rc;
		old->busy = 0;
	}
}

/* ---- collectives ---- */

static ncclComm_t comm_of(const struct cuda *st, const void *g)
{
	return g ? ((const struct cgroup *)g)->comm : st->world_comm;
}

static int size_of(const struct cuda *st, const void *g)
{
	return g ? ((const struct cgroup *)g)->n : st->world;
}

/* Enqueues one collective of bytes per rank on the device buffers coll_in / coll_out
 * (already large enough: coll_bytes). Reductions sum bf16 as gradients and partial sums
 * are; an all-gather moves bytes. */
static int enqueue_coll(struct cuda *st, enum bp_coll_kind kind, const void *g, size_t bytes,
			double deadline, const char *whom, const struct bp_wait *w,
			struct bp_error *err)
{
	ncclComm_t c = comm_of(st, g);
	size_t cnt = (bytes + 1) / 2;
	switch (kind) {
	case BP_EXEC_ALLREDUCE:
		NC(ncclAllReduce(st->coll_out.p, st->coll_out.p, cnt, ncclBfloat16, ncclSum, c,
				 st->stream),
		   "ncclAllReduce", c, deadline, whom, w);
		break;
	case BP_EXEC_ALLGATHER:
		NC(ncclAllGather(st->coll_in.p, st->coll_out.p, bytes, ncclInt8, c, st->stream),
		   "ncclAllGather", c, deadline, whom, w);
		break;
	default:
		NC(ncclReduceScatter(st->coll_in.p, st->coll_out.p, cnt, ncclBfloat16, ncclSum, c,
				     st->stream),
		   "ncclReduceScatter", c, deadline, whom, w);
		break;
	}
	return 0;
}

static size_t coll_bytes(size_t bytes, int n)
{
	return (size_t)n * ((bytes + 1) / 2 * 2);
}

static int ensure_coll(struct cuda *st, size_t need, struct bp_error *err)
{
	if (ensure(st, &st->coll_in, need, FILL_BF16, "collective buffers", st->stream, err) < 0 ||
	    ensure(st, &st->coll_out, need, FILL_BF16, "collective buffers", st->stream, err) < 0)
		return -1;
	return 0;
}

/* A blocking collective from the engine (gradient synchronisation, barrier). */
static int blocking_coll(struct cuda *st, enum bp_coll_kind kind, void *g, size_t bytes,
			 const struct bp_wait *w, struct bp_error *err)
{
	double deadline = now_us_() + st->timeout_s * 1e6;
	char whom[160];
	int rc;
	if (check_alive(st, err) < 0)
		return -1;
	if (ensure_coll(st, coll_bytes(bytes, size_of(st, g)), err) < 0)
		return -1;
	describe_wait(st, w, g, whom, sizeof(whom));
	if ((rc = enqueue_coll(st, kind, g, bytes, deadline, whom, w, err)) != 0)
		return rc;
	ncclComm_t comms[2] = {comm_of(st, g), st->world_comm};
	return drain(st, deadline, comms, 2, whom, w, err);
}

static int cuda_allreduce(void *st, void *g, void *buf, size_t bytes, const struct bp_wait *w,
			  struct bp_error *err)
{
	(void)buf; /* the engine never reads what a reduction gives */
	return blocking_coll(st, BP_EXEC_ALLREDUCE, g, bytes, w, err);
}

static int cuda_allgather(void *st, void *g, const void *in, void *out, size_t bytes,
			  const struct bp_wait *w, struct bp_error *err)
{
	(void)in;
	(void)out;
	return blocking_coll(st, BP_EXEC_ALLGATHER, g, bytes, w, err);
}

static int cuda_reducescatter(void *st, void *g, const void *in, void *out, size_t bytes,
			      const struct bp_wait *w, struct bp_error *err)
{
	(void)in;
	(void)out;
	return blocking_coll(st, BP_EXEC_REDUCESCATTER, g, bytes, w, err);
}

/* A barrier is a one-element all-reduce: it completes when every member has arrived. */
static int cuda_barrier(void *stp, void *g, const struct bp_wait *w, struct bp_error *err)
{
	struct cuda *st = stp;
	double deadline = now_us_() + st->timeout_s * 1e6;
	char whom[160];
	ncclComm_t c;
	if (check_alive(st, err) < 0)
		return -1;
	if (ensure(st, &st->scalar, sizeof(float), FILL_NONE, "the barrier", st->stream, err) < 0)
		return -1;
	c = comm_of(st, g);
	describe_wait(st, w, g, whom, sizeof(whom));
	NC(ncclAllReduce(st->scalar.p, st->scalar.p, 1, ncclFloat32, ncclSum, c, st->stream),
	   "ncclAllReduce", c, deadline, whom, w);
	ncclComm_t comms[2] = {c, st->world_comm};
	return drain(st, deadline, comms, 2, whom, w, err);
}

/* Done as an all-gather over the world (every rank gets world * bytes; only rank 0 copies
 * them out): one collective, no ordering of sends to think about. Contents travel. */
static int cuda_gather(void *stp, const void *in, void *out, size_t bytes,
		       const struct bp_wait *w, struct bp_error *err)
{
	struct cuda *st = stp;
	double deadline = now_us_() + st->timeout_s * 1e6;
	char whom[160];
	int rc;
	if (check_alive(st, err) < 0)
		return -1;
	size_t b = bytes ? bytes : 1;
	if (ensure(st, &st->g_in, b, FILL_NONE, "the gather", st->stream, err) < 0 ||
	    ensure(st, &st->g_out, b * (size_t)st->world, FILL_NONE, "the gather", st->stream,
		   err) < 0)
		return -1;
	/* On the stream: a synchronous copy from pageable memory may return before its DMA
	 * ends, and the legacy stream does not order it before our non-blocking one. */
	if (bytes)
		CU(cudaMemcpyAsync(st->g_in.p, in, bytes, cudaMemcpyHostToDevice, st->stream),
		   "cudaMemcpyAsync");
	describe_wait(st, w, NULL, whom, sizeof(whom));
	NC(ncclAllGather(st->g_in.p, st->g_out.p, b, ncclInt8, st->world_comm, st->stream),
	   "ncclAllGather", st->world_comm, deadline, whom, w);
	if ((rc = drain(st, deadline, &st->world_comm, 1, whom, w, err)) != 0)
		return rc;
	if (st->rank == 0 && out && bytes) {
		/* Rank r's bytes are at r * b; b == bytes here. */
		CU(cudaMemcpy(out, st->g_out.p, bytes * (size_t)st->world, cudaMemcpyDeviceToHost),
		   "cudaMemcpy");
	}
	return 0;
}

/* ---- compute ---- */

static void model_dims(const struct bp_model *m, int tp, struct dims *d)
{
	int64_t hd = m->heads > 0 ? m->hidden / m->heads : 128;
	/* attn.h supports head_dim 64 and 128: other models run the nearer one. */
	d->hd = hd <= 96 ? 64 : 128;
	d->h = m->hidden;
	d->hl = m->heads / tp > 0 ? m->heads / tp : 1;
	d->kvl = m->kv_heads / tp > 0 ? m->kv_heads / tp : 1; /* fewer KV heads than TP: copies */
	if (d->hl % d->kvl != 0)
		d->kvl = 1;
	d->nq = d->hl * d->hd;
	d->nkv = d->kvl * d->hd;
	d->nqkv = d->nq + 2 * d->nkv;
	d->fl = (m->ffn + tp - 1) / tp;
	d->nup = (m->gated ? 2 : 1) * d->fl;
}

/* Row-major C[M x N] = op(A)[M x K] op(B)[K x N] in bf16 with fp32 accumulation; ta: A is
 * stored K x M, tb: B is stored N x K. cuBLAS is column-major, where a row-major matrix
 * reads as its transpose: so it computes C^T = op(B)^T op(A)^T, operands swapped. */
static int gemm(struct cuda *st, int ta, int tb, int64_t m, int64_t n, int64_t k,
		const void *a, const void *b, void *c, struct bp_error *err)
{
	const float one = 1.0f, zero = 0.0f;
	if (m == 0 || n == 0 || k == 0)
		return 0;
	if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
		return bp_errorf(err, "a GEMM of %lld x %lld x %lld is too large for cuBLAS",
				 (long long)m, (long long)n, (long long)k);
	BL(cublasGemmEx(st->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
			(int)n, (int)m, (int)k, &one, b, CUDA_R_16BF, (int)(tb ? k : n), a,
			CUDA_R_16BF, (int)(ta ? m : k), &zero, c, CUDA_R_16BF, (int)n,
			CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
	   "cublasGemmEx");
	return 0;
}

/* This rank's attention segments of the micro-batch: q lengths and causal kv prefixes. */
static int shard(struct cuda *st, const struct bp_op *op, int cp, int cpi, size_t *nseg,
		 int64_t *tokens, struct bp_error *err)
{
	const struct bp_mb *mb = op->mbp;
	for (;;) {
		size_t k = bp_shard_segments(mb->spans, mb->nspans, mb->shard, cp, cpi, st->seg,
					     st->seg_cap, tokens);
		if (k <= st->seg_cap) {
			*nseg = k;
			return 0;
		}
		int64_t(*s)[2] = bp_realloc_array(st->seg, k, sizeof(*s), err);
		if (!s)
			return -1;
		st->seg = s;
		st->seg_cap = k;
	}
}

/* One layer, forward or backward, on the stream. */
static int layer(struct cuda *st, const struct bp_op *op, const struct dims *d, int64_t t,
		 const struct bp_attn_shape *as, const int32_t *cu_q, const int32_t *cu_kv,
		 double deadline, const char *whom, struct bp_error *err)
{
	const struct bp_op_coll *tp = &op->colls[0], *cp = &op->colls[1];
	const struct bp_wait *w = &op->wait;
	int rc;
#define COLL(c)                                                                        \
	do {                                                                           \
		if ((c)->group &&                                                      \
		    (rc = enqueue_coll(st, (c)->kind, (c)->group, (c)->bytes, deadline, whom, \
				       w, err)) != 0)                                  \
			return rc;                                                     \
	} while (0)
#define GEMM(ta, tb, m, n, k, a, b, c)                                                 \
	do {                                                                           \
		if (gemm(st, ta, tb, m, n, k, (a).p, (b).p, (c).p, err) < 0)           \
			return -1;                                                     \
	} while (0)
	if (!op->bwd) {
		GEMM(0, 0, t, d->nqkv, d->h, st->x, st->w_qkv, st->qkv);
		COLL(cp); /* K and V of the other CP ranks */
		if (as->nseg > 0 &&
		    bp_attn_fwd(as, cu_q, cu_kv, st->q.p, st->k.p, st->v.p, st->o.p, st->lse.p,
				st->stream, err) < 0)
			return bp_error_prefix(err, "attention forward");
		GEMM(0, 0, t, d->h, d->nq, st->o, st->w_o, st->y);
		COLL(tp);
		GEMM(0, 0, t, d->nup, d->h, st->x, st->w_up, st->u);
		GEMM(0, 0, t, d->h, d->fl, st->u, st->w_down, st->y);
		COLL(tp);
		return 0;
	}
	/* FFN down, then up (column-parallel: its input gradient is all-reduced). */
	GEMM(0, 1, t, d->fl, d->h, st->dy, st->w_down, st->u);
	GEMM(1, 0, d->fl, d->h, t, st->u, st->dy, st->dw);
	GEMM(0, 1, t, d->h, d->nup, st->u, st->w_up, st->dx);
	GEMM(1, 0, d->h, d->nup, t, st->x, st->u, st->dw);
	COLL(tp);
	/* O, attention, then QKV (column-parallel). */
	GEMM(0, 1, t, d->nq, d->h, st->dy, st->w_o, st->dob);
	GEMM(1, 0, d->nq, d->h, t, st->o, st->dy, st->dw);
	if (as->nseg > 0 &&
	    bp_attn_bwd(as, cu_q, cu_kv, st->q.p, st->k.p, st->v.p, st->o.p, st->dob.p,
			st->lse.p, st->dq.p, st->dk.p, st->dv.p, st->ws.p, st->stream, err) < 0)
		return bp_error_prefix(err, "attention backward");
	COLL(cp); /* dK and dV back to the CP ranks they came from */
	GEMM(0, 1, t, d->h, d->nqkv, st->qkv, st->w_qkv, st->dx);
	GEMM(1, 0, d->h, d->nqkv, t, st->x, st->qkv, st->dw);
	COLL(tp);
	return 0;
#undef COLL
#undef GEMM
}

/* Sizes every buffer for this op (the stream is idle: growing may cudaFree). */
static int prepare(struct cuda *st, const struct bp_op *op, const struct dims *d, int64_t t,
		   int64_t tkv, const struct bp_attn_shape *as, struct bp_error *err)
{
	size_t b2 = 2, tt = (size_t)t, tk = (size_t)tkv;
	size_t h = (size_t)d->h, nq = (size_t)d->nq, nkv = (size_t)d->nkv;
	size_t nqkv = (size_t)d->nqkv, nup = (size_t)d->nup, fl = (size_t)d->fl;
	size_t wmax = h * nqkv;
	if (nq * h > wmax)
		wmax = nq * h;
	if (h * nup > wmax)
		wmax = h * nup;
	if (fl * h > wmax)
		wmax = fl * h;
	struct {
		struct dbuf *b;
		size_t bytes;
		int fill;
	} need[] = {
		{&st->w_qkv, h * nqkv * b2, FILL_BF16}, {&st->w_o, nq * h * b2, FILL_BF16},
		{&st->w_up, h * nup * b2, FILL_BF16},   {&st->w_down, fl * h * b2, FILL_BF16},
		{&st->dw, wmax * b2, FILL_NONE},        {&st->x, tt * h * b2, FILL_BF16},
		{&st->qkv, tt * nqkv * b2, FILL_BF16},  {&st->q, tt * nq * b2, FILL_BF16},
		{&st->o, tt * nq * b2, FILL_BF16},      {&st->y, tt * h * b2, FILL_NONE},
		{&st->dy, tt * h * b2, FILL_BF16},      {&st->dx, tt * h * b2, FILL_NONE},
		{&st->dob, tt * nq * b2, FILL_BF16},    {&st->dq, tt * nq * b2, FILL_NONE},
		{&st->u, tt * nup * b2, FILL_BF16},     {&st->lse, tt * (size_t)d->hl * 4, FILL_LSE},
		{&st->k, tk * nkv * b2, FILL_BF16},     {&st->v, tk * nkv * b2, FILL_BF16},
		{&st->dk, tk * nkv * b2, FILL_NONE},    {&st->dv, tk * nkv * b2, FILL_NONE},
		{&st->cu, 2 * ((size_t)as->nseg + 1) * sizeof(int32_t), FILL_NONE},
	};
	for (size_t i = 0; i < BP_ARRAY_LEN(need); i++)
		if (ensure(st, need[i].b, need[i].bytes, need[i].fill, "activations and weights",
			   st->stream, err) < 0)
			return -1;
	if (op->bwd && as->nseg > 0 &&
	    ensure(st, &st->ws, bp_attn_bwd_workspace(as), FILL_NONE, "the attention workspace",
		   st->stream, err) < 0)
		return -1;
	size_t cb = 0;
	for (size_t i = 0; i < BP_ARRAY_LEN(op->colls); i++) {
		const struct bp_op_coll *c = &op->colls[i];
		size_t b = c->group ? coll_bytes(c->bytes, size_of(st, c->group)) : 0;
		if (b > cb)
			cb = b;
	}
	return cb ? ensure_coll(st, cb, err) : 0;
}

static int cuda_compute(void *stp, const struct bp_op *op, struct bp_error *err)
{
	struct cuda *st = stp;
	double deadline = now_us_() + st->timeout_s * 1e6;
	const struct cgroup *gtp = op->colls[0].group, *gcp = op->colls[1].group;
	int tp = gtp ? gtp->n : 1, cp = gcp ? gcp->n : 1, cpi = gcp ? gcp->me : 0;
	struct dims d;
	struct bp_attn_shape as;
	size_t nseg = 0;
	int64_t t = 0, tkv = 0;
	char whom[320];
	int rc;
	if (check_alive(st, err) < 0)
		return -1;
	model_dims(op->model, tp, &d);
	if (shard(st, op, cp, cpi, &nseg, &t, err) < 0)
		return -1;
	memset(&as, 0, sizeof(as));
	for (size_t i = 0; i < nseg; i++) {
		tkv += st->seg[i][1];
		if (st->seg[i][0] > as.max_q)
			as.max_q = (int)st->seg[i][0];
		if (st->seg[i][1] > as.max_kv)
			as.max_kv = (int)st->seg[i][1];
	}
	if (t > INT32_MAX || tkv > INT32_MAX || nseg > INT32_MAX / 2)
		return bp_errorf(err, "micro-batch %lld of step %lld is too large for the "
				 "attention kernels (%lld query and %lld key tokens on this rank)",
				 (long long)op->mb, (long long)op->step, (long long)t,
				 (long long)tkv);
	as.nseg = (int)nseg;
	as.heads = (int)d.hl;
	as.kv_heads = (int)d.kvl;
	as.head_dim = (int)d.hd;
	as.total_q = t;
	as.total_kv = tkv;
	as.scale = 1.0f / sqrtf((float)d.hd);
	if (prepare(st, op, &d, t, tkv, &as, err) < 0)
		return -1;
	/* The segment offsets (a pageable copy may wait for the main stream: it is idle). */
	if (st->hcu_cap < 2 * (nseg + 1)) {
		int32_t *h = bp_realloc_array(st->hcu, 2 * (nseg + 1), sizeof(int32_t), err);
		if (!h)
			return -1;
		st->hcu = h;
		st->hcu_cap = 2 * (nseg + 1);
	}
	int32_t *cq = st->hcu, *ck = st->hcu + nseg + 1;
	cq[0] = ck[0] = 0;
	for (size_t i = 0; i < nseg; i++) {
		cq[i + 1] = cq[i] + (int32_t)st->seg[i][0];
		ck[i + 1] = ck[i] + (int32_t)st->seg[i][1];
	}
	CU(cudaMemcpyAsync(st->cu.p, st->hcu, 2 * (nseg + 1) * sizeof(int32_t),
			   cudaMemcpyHostToDevice, st->stream),
	   "cudaMemcpyAsync");
	const int32_t *dcq = st->cu.p, *dck = (const int32_t *)st->cu.p + nseg + 1;
	/* Whom the op may wait for: the members of its groups. */
	size_t o = 0;
	whom[0] = 0;
	for (size_t i = 0; i < BP_ARRAY_LEN(op->colls); i++) {
		const struct cgroup *g = op->colls[i].group;
		char r[160];
		if (!g)
			continue;
		describe_ranks(r, sizeof(r), g->ranks, (size_t)g->n);
		o += (size_t)snprintf(whom + o, sizeof(whom) - o, "%s%s (%s)", o ? " or " : "", r,
				      op->colls[i].what);
		if (o >= sizeof(whom))
			o = sizeof(whom) - 1;
	}
	if (!o)
		snprintf(whom, sizeof(whom), "the GPU");
	ncclComm_t comms[3] = {gtp ? gtp->comm : NULL, gcp ? gcp->comm : NULL, st->world_comm};
	/* At most two layers queued ahead: the host notices a hang within a layer or two and
	 * never blocks in a full launch queue. */
	for (int l = 0; l < op->layers; l++) {
		if (l >= 2 && (rc = wait_event(st, st->ev[(l - 2) % 3], deadline, comms, 3, whom,
					       &op->wait, err)) != 0)
			return rc;
		if ((rc = layer(st, op, &d, t, &as, dcq, dck, deadline, whom, err)) != 0)
			return rc;
		CU(cudaEventRecord(st->ev[l % 3], st->stream), "cudaEventRecord");
	}
	return drain(st, deadline, comms, 3, whom, &op->wait, err);
}

/* ---- groups ---- */

/* ncclCommSplit of the world: collective over every world rank (nccl.h: ranks with the same
 * colour end up in the same communicator, ordered by key; here the key is the world rank).
 * Non-blocking, it returns at once and the new communicator's state says when it is ready
 * (or the deadline passes, when some rank never made the same split). */
static int split(struct cuda *st, int color, ncclComm_t *out, double deadline,
		 const char *what, struct bp_error *err)
{
	struct bp_wait w = {what, -1, -1, -1};
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	*out = NULL;
	ncclResult_t r = ncclCommSplit(st->world_comm, color, st->rank, out, &cfg);
	if (r != ncclSuccess && r != ncclInProgress)
		return nccl_fail(err, r, st->world_comm, "ncclCommSplit", __LINE__);
	if (!*out)
		return bp_errorf(err, "ncclCommSplit gave rank %d no communicator", st->rank);
	int rc = nccl_settle(st, ncclInProgress, *out, "ncclCommSplit", __LINE__, deadline,
			     "the other ranks", &w, err);
	if (rc == BP_EXEC_TIMEOUT)
		bp_errorf(err, "timed out after %g s making %s: ncclCommSplit is collective over "
			  "the world, so every rank must make its groups in the same order",
			  st->timeout_s, what);
	else if (rc < 0 && *out) {
		ncclCommAbort(*out);
		*out = NULL;
	}
	return rc;
}

static void unlink_group(struct cuda *st, struct cgroup *g)
{
	for (struct cgroup **p = &st->groups; *p; p = &(*p)->next)
		if (*p == g) {
			*p = g->next;
			return;
		}
}

static int cuda_group_create(void *stp, const int *ranks, int n, void **out,
			     struct bp_error *err)
{
	struct cuda *st = stp;
	double deadline = now_us_() + st->timeout_s * 1e6;
	int me = -1, cnt = 0, urank = -1, rc;
	*out = NULL;
	if (check_alive(st, err) < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		if (ranks[i] < 0 || ranks[i] >= st->world || (i > 0 && ranks[i] <= ranks[i - 1]))
			return bp_errorf(err, "group ranks are not ascending world ranks");
		if (ranks[i] == st->rank)
			me = i;
	}
	if (me < 0)
		return bp_errorf(err, "rank %d is not in the group it was asked to make", st->rank);
	struct cgroup *g = bp_calloc(1, sizeof(*g), err);
	if (!g)
		return -1;
	g->ranks = bp_calloc((size_t)n, sizeof(int), err);
	if (!g->ranks) {
		free(g);
		return -1;
	}
	memcpy(g->ranks, ranks, (size_t)n * sizeof(int));
	g->n = n;
	g->me = me;
	g->next = st->groups;
	st->groups = g; /* linked first: a timeout below aborts it with the rest */
	/* Colour: the group's lowest rank. Every rank of the world splits at once, each
	 * into its own group. */
	if ((rc = split(st, ranks[0], &g->comm, deadline, "the communication groups", err)) != 0)
		return rc;
	if (ncclCommCount(g->comm, &cnt) != ncclSuccess ||
	    ncclCommUserRank(g->comm, &urank) != ncclSuccess || cnt != n || urank != me)
		return bp_errorf(err, "ncclCommSplit made a group of %d ranks with this rank at %d, "
				 "expected %d at %d: the ranks disagree on the groups", cnt, urank,
				 n, me);
	*out = g;
	return 0;
}

/* Finalize (flush, then quiescent) before destroy; abort when that does not end in time. */
static void close_comm(ncclComm_t c, double timeout_s)
{
	double deadline = now_us_() + timeout_s * 1e6, t0 = now_us_();
	ncclResult_t r = ncclCommFinalize(c);
	ncclResult_t a = r;
	while (r == ncclSuccess || r == ncclInProgress) {
		if (ncclCommGetAsyncError(c, &a) != ncclSuccess || a != ncclInProgress)
			break;
		if (now_us_() > deadline)
			break;
		poll_pause(t0);
	}
	if ((r == ncclSuccess || r == ncclInProgress) && a == ncclSuccess)
		ncclCommDestroy(c);
	else
		ncclCommAbort(c);
}

static void cuda_group_free(void *stp, void *gp)
{
	struct cuda *st = stp;
	struct cgroup *g = gp;
	if (!g)
		return;
	unlink_group(st, g);
	if (g->comm)
		close_comm(g->comm, st->timeout_s);
	free(g->ranks);
	free(g);
}

/* ---- lifetime ---- */

static int cuda_make_uid(void *blob, size_t cap, size_t *len, struct bp_error *err)
{
	ncclUniqueId id;
	if (cap < sizeof(id))
		return bp_errorf(err, "no room for an NCCL unique id (%zu bytes, %zu given)",
				 sizeof(id), cap);
	ncclResult_t r = ncclGetUniqueId(&id);
	if (r != ncclSuccess)
		return nccl_fail(err, r, NULL, "ncclGetUniqueId", __LINE__);
	memcpy(blob, &id, sizeof(id));
	*len = sizeof(id);
	return 0;
}

static void release(struct cuda *st)
{
	struct dbuf *all[] = {&st->blas_ws, &st->w_qkv, &st->w_o, &st->w_up, &st->w_down,
			      &st->dw, &st->x, &st->qkv, &st->q, &st->o, &st->y, &st->dy,
			      &st->dx, &st->dob, &st->dq, &st->u, &st->lse, &st->k, &st->v,
			      &st->dk, &st->dv, &st->ws, &st->cu, &st->coll_in, &st->coll_out,
			      &st->scalar, &st->g_in, &st->g_out};
	for (size_t i = 0; i < BP_ARRAY_LEN(all); i++)
		dfree(all[i]);
	for (int k = 0; k < 2; k++) {
		struct dir *d = &st->dir[k];
		for (size_t i = 0; i < d->nslots; i++) {
			dfree(&d->slots[i].b);
			if (d->slots[i].h)
				cudaFreeHost(d->slots[i].h);
			if (d->slots[i].has_ev)
				cudaEventDestroy(d->slots[i].ev);
		}
		dfree(&d->rbuf);
		if (d->h)
			cudaFreeHost(d->h);
		if (d->has_ev)
			cudaEventDestroy(d->ev);
		if (d->has_stream)
			cudaStreamDestroy(d->stream);
		free(d->slots);
	}
	if (st->have_blas)
		cublasDestroy(st->blas);
	for (int i = 0; i < st->nev; i++)
		cudaEventDestroy(i < 3 ? st->ev[i] : st->ev_done);
	if (st->have_stream)
		cudaStreamDestroy(st->stream);
	free(st->seg);
	free(st->hcu);
	free(st->fill);
	free(st);
}

static int start_device(struct cuda *st, const struct bp_backend_args *a, struct bp_error *err)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess)
		return bp_errorf(err, "no CUDA device: %s", cudaGetErrorString(e));
	if (n < 1)
		return bp_errorf(err, "no CUDA device: cudaGetDeviceCount found none");
	st->dev = a->local_rank >= 0 ? a->local_rank % n : 0;
	CU(cudaSetDevice(st->dev), "cudaSetDevice");
	/* Non-blocking: the legacy default stream (synchronous copies) never waits for it. */
	CU(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking),
	   "cudaStreamCreateWithFlags");
	st->have_stream = 1;
	for (int k = 0; k < 2; k++) {
		struct dir *d = &st->dir[k];
		CU(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking),
		   "cudaStreamCreateWithFlags");
		d->has_stream = 1;
		CU(cudaEventCreateWithFlags(&d->ev, cudaEventDisableTiming),
		   "cudaEventCreateWithFlags");
		d->has_ev = 1;
	}
	for (; st->nev < 4; st->nev++)
		CU(cudaEventCreateWithFlags(st->nev < 3 ? &st->ev[st->nev] : &st->ev_done,
					    cudaEventDisableTiming),
		   "cudaEventCreateWithFlags");
	BL(cublasCreate(&st->blas), "cublasCreate");
	st->have_blas = 1;
	BL(cublasSetStream(st->blas, st->stream), "cublasSetStream");
	/* A workspace of its own: cuBLAS then never allocates (or frees) behind our back. */
	CU(cudaMalloc(&st->blas_ws.p, BLAS_WORKSPACE), "cudaMalloc");
	st->blas_ws.cap = BLAS_WORKSPACE;
	BL(cublasSetWorkspace(st->blas, st->blas_ws.p, BLAS_WORKSPACE), "cublasSetWorkspace");
	st->fill = bp_calloc(FILL_CHUNK / 2, sizeof(uint16_t), err);
	if (!st->fill)
		return -1;
	make_fill(st->fill, FILL_CHUNK / 2);
	return 0;
}

static int start_nccl(struct cuda *st, const struct bp_backend_args *a, struct bp_error *err)
{
	double deadline = now_us_() + st->timeout_s * 1e6;
	struct bp_wait w = {"NCCL initialisation", -1, -1, -1};
	ncclUniqueId id;
	if (a->uid) {
		if (a->uid_len != sizeof(id))
			return bp_errorf(err, "the rendezvous gave %zu bytes, an NCCL unique id has "
					 "%zu", a->uid_len, sizeof(id));
		memcpy(&id, a->uid, sizeof(id));
	} else if (st->world == 1) {
		ncclResult_t r = ncclGetUniqueId(&id);
		if (r != ncclSuccess)
			return nccl_fail(err, r, NULL, "ncclGetUniqueId", __LINE__);
	} else {
		return bp_errorf(err, "no NCCL unique id: the rendezvous must run before the CUDA "
				 "backend starts a world of %d", st->world);
	}
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	/* Non-blocking init returns at once (ncclInProgress) and connects in the background;
	 * polling ncclCommGetAsyncError bounds it by the timeout, which a blocking
	 * ncclCommInitRank waiting for a rank that never comes would not. */
	ncclResult_t r = ncclCommInitRankConfig(&st->world_comm, st->world, id, st->rank, &cfg);
	if (r != ncclSuccess && r != ncclInProgress) {
		nccl_fail(err, r, st->world_comm, "ncclCommInitRankConfig", __LINE__);
		if (st->world_comm)
			ncclCommAbort(st->world_comm);
		st->world_comm = NULL;
		return -1;
	}
	int rc = nccl_settle(st, ncclInProgress, st->world_comm, "ncclCommInitRankConfig",
			     __LINE__, deadline, "the other ranks", &w, err);
	if (rc == BP_EXEC_TIMEOUT)
		bp_errorf(err, "timed out after %g s in ncclCommInitRankConfig (rank %d of %d): a "
			  "rank did not join or cannot reach the others", st->timeout_s, st->rank,
			  st->world);
	else if (rc < 0) {
		ncclCommAbort(st->world_comm);
		st->world_comm = NULL;
	}
	if (rc != 0 || st->world == 1)
		return rc;
	/* The two point-to-point communicators: copies of the world (one colour). */
	for (int k = 0; k < 2 && rc == 0; k++)
		rc = split(st, 0, &st->dir[k].comm, deadline, "the point-to-point communicators",
			   err);
	return rc;
}

static int cuda_init(void **stp, const struct bp_backend_args *a, int *rank, int *world,
		     char *host, size_t hostn, struct bp_error *err)
{
	struct cuda *st;
	int rc;
	*stp = NULL;
	if (a->world > 1 && (a->rank < 0 || a->rank >= a->world))
		return bp_errorf(err, "the CUDA backend needs this process's rank (SLURM_PROCID or "
				 "--rank) in a world of %d", a->world);
	if (a->world <= 1 && a->rank > 0)
		return bp_errorf(err, "rank %d is outside a world of one", a->rank);
	st = bp_calloc(1, sizeof(*st), err);
	if (!st)
		return -1;
	st->world = a->world > 0 ? a->world : 1;
	st->rank = a->rank > 0 ? a->rank : 0;
	st->timeout_s = a->timeout_s > 0 ? a->timeout_s : 300;
	if ((rc = start_device(st, a, err)) != 0 || (rc = start_nccl(st, a, err)) != 0) {
		release(st);
		return rc;
	}
	if (gethostname(host, hostn) < 0 && hostn > 0)
		snprintf(host, hostn, "?");
	if (hostn > 0)
		host[hostn - 1] = 0;
	*rank = st->rank;
	*world = st->world;
	*stp = st;
	return 0;
}

static int cuda_finalize(void *stp, struct bp_error *err)
{
	struct cuda *st = stp;
	int rc = 0;
	if (!st)
		return 0;
	if (!st->aborted) {
		struct bp_wait w = {"sends left at the end", -1, -1, -1};
		rc = cuda_wait_sends(st, &w, err);
	}
	while (st->groups) /* the engine frees its groups first; any left go now */
		cuda_group_free(st, st->groups);
	for (int k = 0; k < 2; k++)
		if (st->dir[k].comm) {
			close_comm(st->dir[k].comm, st->timeout_s);
			st->dir[k].comm = NULL;
		}
	if (st->world_comm)
		close_comm(st->world_comm, st->timeout_s);
	st->world_comm = NULL;
	release(st);
	return rc < 0 ? -1 : rc;
}

static void cuda_abort(void *stp, int code)
{
	if (stp)
		abort_all(stp);
	fflush(stdout);
	fflush(stderr);
	exit(code);
}

static void cuda_set_timeout(void *stp, double seconds)
{
	((struct cuda *)stp)->timeout_s = seconds;
}

const struct bp_backend bp_backend_cuda = {
	.name = "cuda",
	.summary = "one GPU per rank: cuBLAS GEMMs, own attention kernels, NCCL",
	.make_uid = cuda_make_uid,
	.init = cuda_init,
	.finalize = cuda_finalize,
	.abort = cuda_abort,
	.set_timeout = cuda_set_timeout,
	.now_us = cuda_now_us,
	.idle_until = NULL,
	.compute = cuda_compute,
	.group_create = cuda_group_create,
	.group_free = cuda_group_free,
	.send = cuda_send,
	.wait_sends = cuda_wait_sends,
	.recv = cuda_recv,
	.allreduce = cuda_allreduce,
	.allgather = cuda_allgather,
	.reducescatter = cuda_reducescatter,
	.barrier = cuda_barrier,
	.gather = cuda_gather,
};
