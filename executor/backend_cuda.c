/* backend_cuda.c: balexec's CUDA backend (engine.h struct bp_backend; executor/README.md
 * "CUDA backend"; issues 4 and 9). Registered in
 * engine.c's table as "cuda".
 *
 * Compute is real: the engine's layer loop calls the primitives per layer on this rank's
 * tokens. gemm runs the layer's GEMMs of one kind through cuBLAS (bf16 in and out, fp32
 * accumulation): QKV, O, FFN (up, gated 2 x ffn / tp wide, and down) or the LM head (vocab /
 * tp wide, in chunks of LM_CHUNK rows); backward the two GEMMs of each (dX and dW).
 * attn_dense runs executor/attn.h's varlen causal attention over the segments it is given
 * (a CP shard's, or the CA-tasks a DistCA server runs); attn_sparse runs
 * executor/attn_sparse.h's block-sparse (MoBA top-k) kernels at the layer's budget. Weights (one
 * layer's, shared by all layers: only the time matters) and activations are allocated on
 * first use, sized for the largest call seen, grown on demand in stream order, and filled
 * once with small seeded values; inputs are never overwritten by outputs, so no value grows
 * from layer to layer. The SwiGLU elementwise product, norms and the loss are not run.
 *
 * The stream: compute primitives and the collectives (all-reduce, all-gather,
 * reduce-scatter, the all-to-all-v as grouped ncclSend/ncclRecv) are queued on the main
 * stream and return (engine.h: stream-ordered); sync waits for them. At most QUEUE_MAX stay
 * queued ahead of the host, so a hang is noticed within a layer or two; the groups queued
 * collectives wait on are remembered to name them in a timeout.
 *
 * Communication is NCCL on device buffers. Invariants:
 * - Compute, collectives, the barrier and the gather run on one CUDA stream (the main
 *   one), in call order; barrier, gather and recv return only after their work is done.
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
 *   order. engine.c's make_group does: per layout every rank makes one group of each kind
 *   (TP, CP, gradient sync; all-to-all on a ticks layout), a group of itself where the kind
 *   leaves it out, so groups of unequal size are split together; the colour is the group's
 *   lowest rank (a rank alone is its own colour, which no other group has), the key the
 *   world rank, so group rank order is world rank order. */
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
#include "attn_sparse.h"
#include "devbuf.h"
#include "engine.h"
#include "gpu_times.h"

#define CARRY_MAX 65536            /* p2p messages up to this many bytes carry their bytes */
#define BLAS_WORKSPACE (32u << 20) /* cuBLAS workspace (its guide: 32 MiB on Hopper) */
#define FILL_SEED 0x62616c706c616eULL
#define QUEUE_MAX 16               /* primitives queued ahead of the host at most */
#define PEND_MAX 8                 /* groups named when the stream stalls */
#define LM_CHUNK 2048              /* LM head rows per GEMM */
#define KT_PAIRS 4096              /* --gpu-times: timed primitives in flight at most */

struct cgroup {
	ncclComm_t comm;
	int n, me;      /* size, and this rank's index (= its order among ranks) */
	int *ranks;     /* world ranks, ascending */
	struct cgroup *next;
};

struct slot {          /* one send's device buffer, and its bytes on the host (pinned) */
	struct bp_dbuf b;
	void *h;               /* CARRY_MAX pinned bytes, made on first need */
	cudaEvent_t ev;        /* recorded after the send: done when it has passed */
	int has_ev, busy, peer;
	uint64_t seq;          /* issue order, for naming the oldest send still waiting */
};

struct pend {          /* a group a queued collective waits on, and what for */
	const struct cgroup *g; /* NULL: the world */
	const char *what;
};

enum { UP, DOWN };    /* to a higher rank (activations), to a lower one (gradients) */

struct dir {           /* one direction of point to point: communicator, stream, buffers */
	ncclComm_t comm;
	cudaStream_t stream;
	cudaEvent_t ev;        /* recorded after each recv */
	int has_stream, has_ev;
	struct slot *slots;
	size_t nslots;
	struct bp_dbuf rbuf;      /* what a recv lands in */
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
	cudaEvent_t qev[QUEUE_MAX]; /* after each queued primitive, round robin */
	cudaEvent_t ev_done, cu_ev; /* completion (drain); the last segment upload */
	int have_stream, have_blas, nev; /* nev: events made, qev first, then ev_done, cu_ev */
	uint64_t nprim;        /* primitives queued so far */
	struct pend pend[PEND_MAX]; /* groups waited on since the last sync */
	int npend;
	struct bp_dbuf blas_ws;
	/* Weights of one layer and their gradient scratch; the LM head's. */
	struct bp_dbuf w_qkv, w_o, w_up, w_down, dw, w_lm, dw_lm;
	/* Activations: [T][...] bf16, K and V [Tkv][...], lse [heads][T] fp32, logits of
	 * LM_CHUNK rows. */
	struct bp_dbuf x, qkv, q, o, y, dy, dx, dob, dq, u, lse, k, v, dk, dv, lm;
	struct bp_dbuf ws, cu, coll_in, coll_out, scalar, g_in, g_out, a2a_in, a2a_out;
	/* The segment offsets: pinned staging (never freed mid-run: outgrown ones wait in
	 * old_pinned), and the segments last uploaded. */
	int32_t *hcu;
	size_t hcu_cap;
	void **old_pinned;
	size_t nold;
	int64_t (*cu_last)[2];
	size_t cu_n, cu_last_cap;
	int has_cu;
	uint16_t *fill; /* BP_DEV_FILL_CHUNK bytes of seeded bf16 values */
	struct bp_gpu_times *kt; /* --gpu-times, or NULL */
};

/* Model dimensions on one TP rank. */
struct dims {
	int64_t h, hl, kvl, hd, nq, nkv, nqkv, fl, nup, vl;
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

/* Makes b hold at least bytes, growing in stream order on stream (cudaFreeAsync and
 * cudaMallocAsync never synchronise the device, so a send waiting for its receiver cannot
 * hold this up). New memory gets 1/8 headroom when it fits, and is filled on the stream. */
static int ensure(struct cuda *st, struct bp_dbuf *b, size_t bytes, int fill, const char *name,
		  cudaStream_t stream, struct bp_error *err)
{
	const struct bp_dev d = {stream, st->fill, 1};
	return bp_dbuf_ensure(&d, b, bytes, fill, name, err);
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
	if (ensure(st, &s->b, bytes ? bytes : 1, BP_FILL_NONE, "a send buffer", d->stream, err) < 0)
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
	if (ensure(st, &d->rbuf, bytes ? bytes : 1, BP_FILL_NONE, "the receive buffer", d->stream,
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

/* ---- the stream: throttle and what it waits for ---- */

/* Remembers a group a queued collective waits on, to name it when the stream stalls. */
static void note_pending(struct cuda *st, const struct cgroup *g, const char *what)
{
	for (int i = 0; i < st->npend; i++)
		if (st->pend[i].g == g && !strcmp(st->pend[i].what, what))
			return;
	if (st->npend < PEND_MAX)
		st->pend[st->npend++] = (struct pend){g, what};
}

static size_t pending_comms(const struct cuda *st, ncclComm_t *comms)
{
	size_t n = 0;
	for (int i = 0; i < st->npend; i++)
		comms[n++] = st->pend[i].g ? st->pend[i].g->comm : st->world_comm;
	comms[n++] = st->world_comm;
	return n;
}

/* "ranks 4 5 (tp all-reduce) or ranks 4 6 (cp all-gather of K and V)", or "the GPU". */
static void describe_pending(const struct cuda *st, char *buf, size_t n)
{
	size_t o = 0;
	buf[0] = 0;
	for (int i = 0; i < st->npend && o < n; i++) {
		char r[160];
		const struct cgroup *g = st->pend[i].g;
		if (g)
			describe_ranks(r, sizeof(r), g->ranks, (size_t)g->n);
		else
			snprintf(r, sizeof(r), "the other ranks");
		o += (size_t)snprintf(buf + o, n - o, "%s%s (%s)", o ? " or " : "", r,
				      st->pend[i].what);
	}
	if (!buf[0])
		snprintf(buf, n, "the GPU");
}

/* Before queueing primitive number st->nprim: at most QUEUE_MAX stay queued ahead of the
 * host, so a hang shows within a layer or two and a full launch queue never blocks the
 * host without a deadline. */
static int throttle(struct cuda *st, const struct bp_wait *w, struct bp_error *err)
{
	if (st->nprim < QUEUE_MAX)
		return 0;
	char whom[320];
	ncclComm_t comms[PEND_MAX + 1];
	size_t nc = pending_comms(st, comms);
	describe_pending(st, whom, sizeof(whom));
	return wait_event(st, st->qev[st->nprim % QUEUE_MAX], now_us_() + st->timeout_s * 1e6,
			  comms, nc, whom, w, err);
}

/* After queueing a primitive: its completion event. */
static int queued(struct cuda *st, struct bp_error *err)
{
	bp_kt_end(st->kt, st->stream);
	CU(cudaEventRecord(st->qev[st->nprim % QUEUE_MAX], st->stream), "cudaEventRecord");
	st->nprim++;
	bp_kt_harvest(st->kt);
	return 0;
}

static int cuda_sync(void *stp, const struct bp_wait *w, struct bp_error *err)
{
	struct cuda *st = stp;
	char whom[320];
	ncclComm_t comms[PEND_MAX + 1];
	int rc;
	if (check_alive(st, err) < 0)
		return -1;
	size_t nc = pending_comms(st, comms);
	describe_pending(st, whom, sizeof(whom));
	if ((rc = drain(st, now_us_() + st->timeout_s * 1e6, comms, nc, whom, w, err)) != 0)
		return rc;
	st->npend = 0;
	bp_kt_harvest(st->kt);
	return 0;
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

enum coll_kind { C_ALLREDUCE, C_ALLGATHER, C_REDUCESCATTER };

/* Enqueues one collective of bytes per rank on the device buffers coll_in / coll_out
 * (already large enough: coll_bytes). Reductions sum bf16 as gradients and partial sums
 * are; an all-gather moves bytes. */
static int enqueue_coll(struct cuda *st, enum coll_kind kind, const void *g, size_t bytes,
			double deadline, const char *whom, const struct bp_wait *w,
			struct bp_error *err)
{
	ncclComm_t c = comm_of(st, g);
	size_t cnt = (bytes + 1) / 2;
	switch (kind) {
	case C_ALLREDUCE:
		NC(ncclAllReduce(st->coll_out.p, st->coll_out.p, cnt, ncclBfloat16, ncclSum, c,
				 st->stream),
		   "ncclAllReduce", c, deadline, whom, w);
		break;
	case C_ALLGATHER:
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
	const char *what = "collective buffers";
	if (ensure(st, &st->coll_in, need, BP_FILL_BF16, what, st->stream, err) < 0 ||
	    ensure(st, &st->coll_out, need, BP_FILL_BF16, what, st->stream, err) < 0)
		return -1;
	return 0;
}

/* A collective queued on the main stream (stream-ordered: cuda_sync waits for it). */
static int queue_coll(struct cuda *st, enum coll_kind kind, void *g, size_t bytes,
		      const struct bp_wait *w, struct bp_error *err)
{
	double deadline = now_us_() + st->timeout_s * 1e6;
	char whom[160];
	int rc;
	if (check_alive(st, err) < 0)
		return -1;
	if ((rc = throttle(st, w, err)) != 0)
		return rc;
	if (ensure_coll(st, coll_bytes(bytes, size_of(st, g)), err) < 0)
		return -1;
	describe_wait(st, w, g, whom, sizeof(whom));
	note_pending(st, g, w->what);
	if ((rc = enqueue_coll(st, kind, g, bytes, deadline, whom, w, err)) != 0)
		return rc;
	return queued(st, err);
}

static int cuda_allreduce(void *st, void *g, void *buf, size_t bytes, const struct bp_wait *w,
			  struct bp_error *err)
{
	(void)buf; /* the engine never reads what a reduction gives */
	return queue_coll(st, C_ALLREDUCE, g, bytes, w, err);
}

static int cuda_allgather(void *st, void *g, const void *in, void *out, size_t bytes,
			  const struct bp_wait *w, struct bp_error *err)
{
	(void)in;
	(void)out;
	return queue_coll(st, C_ALLGATHER, g, bytes, w, err);
}

static int cuda_reducescatter(void *st, void *g, const void *in, void *out, size_t bytes,
			      const struct bp_wait *w, struct bp_error *err)
{
	(void)in;
	(void)out;
	return queue_coll(st, C_REDUCESCATTER, g, bytes, w, err);
}

/* The variable all-to-all as one NCCL group of sends and receives over the group's
 * communicator (NCCL's documented all-to-allv: ncclGroupStart, a ncclSend and a ncclRecv per
 * peer, ncclGroupEnd); self traffic a device copy. Between device buffers a2a_in/a2a_out:
 * the bytes move, the host's contents do not. */
static int cuda_alltoallv(void *stp, const struct bp_a2a *a, struct bp_error *err)
{
	struct cuda *st = stp;
	double deadline = now_us_() + st->timeout_s * 1e6;
	const struct cgroup *g = a->group;
	char whom[160];
	int rc;
	if (check_alive(st, err) < 0)
		return -1;
	if (!g)
		return bp_errorf(err, "an all-to-all needs a group");
	size_t sn = 0, rn = 0;
	for (int i = 0; i < g->n; i++) {
		if (a->sdispl[i] + a->send[i] > sn)
			sn = a->sdispl[i] + a->send[i];
		if (a->rdispl[i] + a->recv[i] > rn)
			rn = a->rdispl[i] + a->recv[i];
	}
	if (a->send[g->me] != a->recv[g->me])
		return bp_errorf(err, "an all-to-all sends itself %zu bytes and receives %zu",
				 a->send[g->me], a->recv[g->me]);
	if ((rc = throttle(st, a->wait, err)) != 0)
		return rc;
	if (ensure(st, &st->a2a_in, sn ? sn : 1, BP_FILL_NONE, "the all-to-all buffers", st->stream,
		   err) < 0 ||
	    ensure(st, &st->a2a_out, rn ? rn : 1, BP_FILL_NONE, "the all-to-all buffers", st->stream,
		   err) < 0)
		return -1;
	describe_wait(st, a->wait, g, whom, sizeof(whom));
	note_pending(st, g, a->wait->what);
	char *in = st->a2a_in.p, *out = st->a2a_out.p;
	if (a->send[g->me])
		CU(cudaMemcpyAsync(out + a->rdispl[g->me], in + a->sdispl[g->me], a->send[g->me],
				   cudaMemcpyDeviceToDevice, st->stream),
		   "cudaMemcpyAsync");
	NC(ncclGroupStart(), "ncclGroupStart", g->comm, deadline, whom, a->wait);
	for (int i = 0; i < g->n; i++) {
		if (i == g->me)
			continue;
		if (a->send[i])
			NC(ncclSend(in + a->sdispl[i], a->send[i], ncclInt8, i, g->comm, st->stream),
			   "ncclSend", g->comm, deadline, whom, a->wait);
		if (a->recv[i])
			NC(ncclRecv(out + a->rdispl[i], a->recv[i], ncclInt8, i, g->comm, st->stream),
			   "ncclRecv", g->comm, deadline, whom, a->wait);
	}
	NC(ncclGroupEnd(), "ncclGroupEnd", g->comm, deadline, whom, a->wait);
	return queued(st, err);
}

/* A barrier is a one-element all-reduce: it completes when every member has arrived. It
 * drains the stream, so everything queued before it has finished too. */
static int cuda_barrier(void *stp, void *g, const struct bp_wait *w, struct bp_error *err)
{
	struct cuda *st = stp;
	double deadline = now_us_() + st->timeout_s * 1e6;
	char whom[160];
	ncclComm_t c;
	int rc;
	if (check_alive(st, err) < 0)
		return -1;
	if (ensure(st, &st->scalar, sizeof(float), BP_FILL_NONE, "the barrier", st->stream, err) < 0)
		return -1;
	c = comm_of(st, g);
	describe_wait(st, w, g, whom, sizeof(whom));
	NC(ncclAllReduce(st->scalar.p, st->scalar.p, 1, ncclFloat32, ncclSum, c, st->stream),
	   "ncclAllReduce", c, deadline, whom, w);
	ncclComm_t comms[2] = {c, st->world_comm};
	if ((rc = drain(st, deadline, comms, 2, whom, w, err)) != 0)
		return rc;
	st->npend = 0;
	return 0;
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
	if (ensure(st, &st->g_in, b, BP_FILL_NONE, "the gather", st->stream, err) < 0 ||
	    ensure(st, &st->g_out, b * (size_t)st->world, BP_FILL_NONE, "the gather", st->stream,
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
	if (tp < 1)
		tp = 1;
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
	d->vl = (m->vocab + tp - 1) / tp;
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

/* Sizes the weights and activations a GEMM of t rows reads and writes (ensure only grows,
 * in stream order: safe with work still queued). */
static int prep_gemm(struct cuda *st, const struct dims *d, int64_t t, int lm,
		     struct bp_error *err)
{
	size_t b2 = 2, tt = (size_t)t, h = (size_t)d->h, nq = (size_t)d->nq;
	size_t nqkv = (size_t)d->nqkv, nup = (size_t)d->nup, fl = (size_t)d->fl;
	size_t vl = (size_t)d->vl, rows = tt < LM_CHUNK ? tt : LM_CHUNK;
	size_t wmax = h * nqkv;
	if (nq * h > wmax)
		wmax = nq * h;
	if (h * nup > wmax)
		wmax = h * nup;
	if (fl * h > wmax)
		wmax = fl * h;
	struct {
		struct bp_dbuf *b;
		size_t bytes;
		int fill;
	} need[] = {
		{&st->w_qkv, h * nqkv * b2, BP_FILL_BF16}, {&st->w_o, nq * h * b2, BP_FILL_BF16},
		{&st->w_up, h * nup * b2, BP_FILL_BF16},   {&st->w_down, fl * h * b2, BP_FILL_BF16},
		{&st->dw, wmax * b2, BP_FILL_NONE},        {&st->x, tt * h * b2, BP_FILL_BF16},
		{&st->qkv, tt * nqkv * b2, BP_FILL_BF16},  {&st->o, tt * nq * b2, BP_FILL_BF16},
		{&st->y, tt * h * b2, BP_FILL_NONE},       {&st->dy, tt * h * b2, BP_FILL_BF16},
		{&st->dx, tt * h * b2, BP_FILL_NONE},      {&st->dob, tt * nq * b2, BP_FILL_BF16},
		{&st->u, tt * nup * b2, BP_FILL_BF16},
	};
	for (size_t i = 0; i < BP_ARRAY_LEN(need); i++)
		if (ensure(st, need[i].b, need[i].bytes, need[i].fill, "activations and weights",
			   st->stream, err) < 0)
			return -1;
	if (lm && (ensure(st, &st->w_lm, h * vl * b2, BP_FILL_BF16, "the LM head", st->stream,
			  err) < 0 ||
		   ensure(st, &st->dw_lm, h * vl * b2, BP_FILL_NONE, "the LM head", st->stream,
			  err) < 0 ||
		   ensure(st, &st->lm, rows * vl * b2, BP_FILL_BF16, "the LM head", st->stream,
			  err) < 0))
		return -1;
	return 0;
}

#define GEMM(ta, tb, m, n, k, a, b, c)                                                 \
	do {                                                                           \
		if (gemm(st, ta, tb, m, n, k, a, b, c, err) < 0)                       \
			return -1;                                                     \
	} while (0)

/* The LM head over t rows in chunks of LM_CHUNK (the logits of a long micro-batch would not
 * fit at once; the time is the same). */
static int lm_head(struct cuda *st, const struct dims *d, int64_t t, int bwd,
		   struct bp_error *err)
{
	for (int64_t r0 = 0; r0 < t; r0 += LM_CHUNK) {
		int64_t c = t - r0 < LM_CHUNK ? t - r0 : LM_CHUNK;
		char *x = (char *)st->x.p + (size_t)r0 * (size_t)d->h * 2;
		char *dx = (char *)st->dx.p + (size_t)r0 * (size_t)d->h * 2;
		if (!bwd) {
			GEMM(0, 0, c, d->vl, d->h, x, st->w_lm.p, st->lm.p);
		} else {
			GEMM(0, 1, c, d->h, d->vl, st->lm.p, st->w_lm.p, dx);
			GEMM(1, 0, d->h, d->vl, c, x, st->lm.p, st->dw_lm.p);
		}
	}
	return 0;
}

static int cuda_gemm(void *stp, const struct bp_gemm *g, struct bp_error *err)
{
	struct cuda *st = stp;
	struct dims d;
	int rc;
	if (check_alive(st, err) < 0)
		return -1;
	if (g->tokens <= 0)
		return 0;
	model_dims(g->model, g->tp, &d);
	int64_t t = g->tokens;
	if ((rc = throttle(st, g->wait, err)) != 0)
		return rc;
	if (prep_gemm(st, &d, t, g->kind == BP_GEMM_LM_HEAD, err) < 0)
		return -1;
	void *x = st->x.p, *qkv = st->qkv.p, *o = st->o.p, *y = st->y.p, *dy = st->dy.p;
	void *dx = st->dx.p, *dob = st->dob.p, *u = st->u.p, *dw = st->dw.p;
	static const enum bp_kt_family fam[] = {[BP_GEMM_QKV] = BP_KT_QKV, [BP_GEMM_O] = BP_KT_O,
						[BP_GEMM_FFN] = BP_KT_FFN,
						[BP_GEMM_LM_HEAD] = BP_KT_LM_HEAD};
	bp_kt_begin(st->kt, st->stream, fam[g->kind], g->wait->step, g->wait->mb, g->bwd);
	switch (g->kind) {
	case BP_GEMM_QKV:
		if (!g->bwd) {
			GEMM(0, 0, t, d.nqkv, d.h, x, st->w_qkv.p, qkv);
		} else { /* column-parallel: its input gradient is all-reduced after */
			GEMM(0, 1, t, d.h, d.nqkv, qkv, st->w_qkv.p, dx);
			GEMM(1, 0, d.h, d.nqkv, t, x, qkv, dw);
		}
		break;
	case BP_GEMM_O:
		if (!g->bwd) {
			GEMM(0, 0, t, d.h, d.nq, o, st->w_o.p, y);
		} else {
			GEMM(0, 1, t, d.nq, d.h, dy, st->w_o.p, dob);
			GEMM(1, 0, d.nq, d.h, t, o, dy, dw);
		}
		break;
	case BP_GEMM_FFN:
		if (!g->bwd) {
			GEMM(0, 0, t, d.nup, d.h, x, st->w_up.p, u);
			GEMM(0, 0, t, d.h, d.fl, u, st->w_down.p, y);
		} else { /* down, then up */
			GEMM(0, 1, t, d.fl, d.h, dy, st->w_down.p, u);
			GEMM(1, 0, d.fl, d.h, t, u, dy, dw);
			GEMM(0, 1, t, d.h, d.nup, u, st->w_up.p, dx);
			GEMM(1, 0, d.h, d.nup, t, x, u, dw);
		}
		break;
	default:
		if (lm_head(st, &d, t, g->bwd, err) < 0)
			return -1;
		break;
	}
	return queued(st, err);
}
#undef GEMM

/* The segment offsets on the device: uploaded through pinned memory (a pageable copy would
 * wait for the whole stream), and only when they change (every layer of an op, and every
 * layer of a tick, has the same). Pinned memory is never freed during the run (cudaFreeHost
 * may synchronise the device while a send waits for its peer): outgrown buffers are kept in
 * a list and freed at the end. */
static int upload_cu(struct cuda *st, const int64_t (*seg)[2], size_t nseg,
		     const struct bp_wait *w, struct bp_error *err)
{
	if (st->has_cu && nseg == st->cu_n &&
	    (!nseg || !memcmp(seg, st->cu_last, nseg * sizeof(*seg))))
		return 0;
	size_t need = 2 * (nseg + 1);
	int rc;
	if (st->has_cu) { /* the staging buffer is rewritten: its last copy must be done */
		char whom[320];
		ncclComm_t comms[PEND_MAX + 1];
		size_t nc = pending_comms(st, comms);
		describe_pending(st, whom, sizeof(whom));
		if ((rc = wait_event(st, st->cu_ev, now_us_() + st->timeout_s * 1e6, comms, nc,
				     whom, w, err)) != 0)
			return rc;
	}
	if (need > st->hcu_cap) {
		void *p = NULL;
		if (st->hcu) {
			void **old = bp_realloc_array(st->old_pinned, st->nold + 1, sizeof(void *),
						      err);
			if (!old)
				return -1;
			st->old_pinned = old;
			st->old_pinned[st->nold++] = st->hcu;
			st->hcu = NULL;
			st->hcu_cap = 0;
		}
		CU(cudaMallocHost(&p, need * sizeof(int32_t)), "cudaMallocHost");
		st->hcu = p;
		st->hcu_cap = need;
	}
	if (nseg > st->cu_last_cap) {
		int64_t(*l)[2] = bp_realloc_array(st->cu_last, nseg, sizeof(*l), err);
		if (!l)
			return -1;
		st->cu_last = l;
		st->cu_last_cap = nseg;
	}
	if (ensure(st, &st->cu, need * sizeof(int32_t), BP_FILL_NONE, "the segment offsets",
		   st->stream, err) < 0)
		return -1;
	int32_t *cq = st->hcu, *ck = st->hcu + nseg + 1;
	cq[0] = ck[0] = 0;
	for (size_t i = 0; i < nseg; i++) {
		cq[i + 1] = cq[i] + (int32_t)seg[i][0];
		ck[i + 1] = ck[i] + (int32_t)seg[i][1];
	}
	CU(cudaMemcpyAsync(st->cu.p, st->hcu, need * sizeof(int32_t), cudaMemcpyHostToDevice,
			   st->stream),
	   "cudaMemcpyAsync");
	CU(cudaEventRecord(st->cu_ev, st->stream), "cudaEventRecord");
	if (nseg)
		memcpy(st->cu_last, seg, nseg * sizeof(*seg));
	st->cu_n = nseg;
	st->has_cu = 1;
	return 0;
}

/* The attention buffers for tq query and tkv key rows (ensure only grows, in stream order). */
static int attn_buffers(struct cuda *st, const struct dims *d, int64_t tq, int64_t tkv,
			struct bp_error *err)
{
	size_t b2 = 2, q = (size_t)tq, k = (size_t)tkv, nq = (size_t)d->nq, nkv = (size_t)d->nkv;
	struct {
		struct bp_dbuf *b;
		size_t bytes;
		int fill;
	} need[] = {
		{&st->q, q * nq * b2, BP_FILL_BF16},      {&st->o, q * nq * b2, BP_FILL_BF16},
		{&st->dob, q * nq * b2, BP_FILL_BF16},    {&st->dq, q * nq * b2, BP_FILL_NONE},
		{&st->lse, q * (size_t)d->hl * 4, BP_FILL_LSE}, {&st->k, k * nkv * b2, BP_FILL_BF16},
		{&st->v, k * nkv * b2, BP_FILL_BF16},     {&st->dk, k * nkv * b2, BP_FILL_NONE},
		{&st->dv, k * nkv * b2, BP_FILL_NONE},
	};
	for (size_t i = 0; i < BP_ARRAY_LEN(need); i++)
		if (ensure(st, need[i].b, need[i].bytes, need[i].fill, "attention buffers",
			   st->stream, err) < 0)
			return -1;
	return 0;
}

/* Dense varlen causal attention (attn.h) over the segments: one call per layer, forward or
 * backward (FlashAttention-2 Algorithms 1 and 2). A CP shard's segments (kv >= q, K and V
 * all-gathered before) or the CA-tasks a server runs (DistCA: q = the task's queries, kv
 * their causal prefix). */
static int cuda_attn_dense(void *stp, const struct bp_attn *a, struct bp_error *err)
{
	struct cuda *st = stp;
	struct dims d;
	struct bp_attn_shape as;
	int64_t tq = 0, tkv = 0;
	int rc;
	if (check_alive(st, err) < 0)
		return -1;
	if (!a->nseg)
		return 0;
	model_dims(a->model, a->tp, &d);
	memset(&as, 0, sizeof(as));
	for (size_t i = 0; i < a->nseg; i++) {
		tq += a->seg[i][0];
		tkv += a->seg[i][1];
		if (a->seg[i][0] > as.max_q)
			as.max_q = (int)a->seg[i][0];
		if (a->seg[i][1] > as.max_kv)
			as.max_kv = (int)a->seg[i][1];
	}
	if (tq > INT32_MAX || tkv > INT32_MAX || a->nseg > INT32_MAX / 2)
		return bp_errorf(err, "attention of %lld query and %lld key tokens (step %lld, "
				 "micro-batch %lld) is too large for the kernels", (long long)tq,
				 (long long)tkv, (long long)a->wait->step, (long long)a->wait->mb);
	as.nseg = (int)a->nseg;
	as.heads = (int)d.hl;
	as.kv_heads = (int)d.kvl;
	as.head_dim = (int)d.hd;
	as.total_q = tq;
	as.total_kv = tkv;
	as.scale = 1.0f / sqrtf((float)d.hd);
	if ((rc = throttle(st, a->wait, err)) != 0)
		return rc;
	if (attn_buffers(st, &d, tq, tkv, err) < 0)
		return -1;
	if (a->bwd && ensure(st, &st->ws, bp_attn_bwd_workspace(&as), BP_FILL_NONE,
			     "the attention workspace", st->stream, err) < 0)
		return -1;
	if ((rc = upload_cu(st, a->seg, a->nseg, a->wait, err)) != 0)
		return rc;
	const int32_t *dcq = st->cu.p, *dck = (const int32_t *)st->cu.p + a->nseg + 1;
	bp_kt_begin(st->kt, st->stream, BP_KT_ATTN, a->wait->step, a->wait->mb, a->bwd);
	if (!a->bwd) {
		if (bp_attn_fwd(&as, dcq, dck, st->q.p, st->k.p, st->v.p, st->o.p, st->lse.p,
				st->stream, err) < 0)
			return bp_error_prefix(err, "attention forward");
	} else if (bp_attn_bwd(&as, dcq, dck, st->q.p, st->k.p, st->v.p, st->o.p, st->dob.p,
			       st->lse.p, st->dq.p, st->dk.p, st->dv.p, st->ws.p, st->stream,
			       err) < 0) {
		return bp_error_prefix(err, "attention backward");
	}
	return queued(st, err);
}

/* Block-sparse (MoBA top-k) attention (attn_sparse.h; SparseBalance Sec. II-B Eq. 2;
 * executor/README.md "Block-sparse attention kernels"): every document of the micro-batch with
 * the layer's budget k (the plan's sparse_k[layer]; one k per (micro-batch, layer), so every
 * segment gets it), block B = the plan's sparse_block. Forward: selection, then Alg. 1 over the
 * selected blocks. Backward: the selection again, then Alg. 2 over them: the lists of this
 * layer's forward were overwritten by the forwards of the micro-batches in between (a training
 * framework keeps them per layer, nt x heads x k int32), so the measured backward carries one
 * more selection (its cost is the gate, about 2 / B of the dense Q K^T, plus a sort per tile).
 * Selection runs on the synthetic activations: only the number of selected blocks matters for
 * the time. Segments must be whole documents (q == kv: sparse plans have cp 1) and B a multiple
 * of 64 (the kernel's key tile): anything else is refused with the reason. */
static int cuda_attn_sparse(void *stp, const struct bp_attn *a, struct bp_error *err)
{
	struct cuda *st = stp;
	struct dims d;
	struct bp_sparse_shape ss;
	int64_t total = 0;
	int rc;
	if (check_alive(st, err) < 0)
		return -1;
	if (!a->nseg)
		return 0;
	if (a->block < 64 || a->block % 64 != 0 || a->k < 1)
		return bp_errorf(err, "sparse attention (block %d, k %d; step %lld, micro-batch %lld) "
				 "is not supported by the cuda backend: the block-sparse kernel needs "
				 "a block that is a positive multiple of 64 tokens and k >= 1",
				 a->block, a->k, (long long)a->wait->step, (long long)a->wait->mb);
	model_dims(a->model, a->tp, &d);
	memset(&ss, 0, sizeof(ss));
	for (size_t i = 0; i < a->nseg; i++) {
		if (a->seg[i][0] != a->seg[i][1])
			return bp_errorf(err, "sparse attention over a segment of %lld queries and "
					 "%lld keys (step %lld, micro-batch %lld) is not supported by "
					 "the cuda backend: the block-sparse kernel runs whole documents "
					 "(cp 1)", (long long)a->seg[i][0], (long long)a->seg[i][1],
					 (long long)a->wait->step, (long long)a->wait->mb);
		total += a->seg[i][0];
		if (a->seg[i][0] > ss.max_len)
			ss.max_len = (int)a->seg[i][0];
	}
	if (total > INT32_MAX || a->nseg > INT32_MAX / 2)
		return bp_errorf(err, "sparse attention of %lld tokens (step %lld, micro-batch "
				 "%lld) is too large for the kernels", (long long)total,
				 (long long)a->wait->step, (long long)a->wait->mb);
	ss.nseg = (int)a->nseg;
	ss.heads = (int)d.hl;
	ss.kv_heads = (int)d.kvl;
	ss.head_dim = (int)d.hd;
	ss.total = total;
	ss.block = a->block;
	ss.k = a->k;
	ss.max_k = a->k;
	ss.scale = 1.0f / sqrtf((float)d.hd);
	if (bp_sparse_check(&ss, err) < 0)
		return bp_error_prefix(err, "step %lld micro-batch %lld", (long long)a->wait->step,
				       (long long)a->wait->mb);
	const size_t wsb = bp_sparse_workspace(&ss);
	if ((rc = throttle(st, a->wait, err)) != 0)
		return rc;
	if (attn_buffers(st, &d, total, total, err) < 0 ||
	    ensure(st, &st->ws, wsb, BP_FILL_NONE, "the sparse attention workspace", st->stream,
		   err) < 0)
		return -1;
	if ((rc = upload_cu(st, a->seg, a->nseg, a->wait, err)) != 0)
		return rc;
	const int32_t *dcu = st->cu.p; /* the query offsets; q == kv */
	bp_kt_begin(st->kt, st->stream, BP_KT_SPARSE, a->wait->step, a->wait->mb, a->bwd);
	if (!a->bwd) {
		if (bp_sparse_fwd(&ss, dcu, NULL, st->q.p, st->k.p, st->v.p, st->o.p, st->lse.p,
				  st->ws.p, st->stream, err) < 0)
			return bp_error_prefix(err, "sparse attention forward");
	} else if (bp_sparse_select(&ss, dcu, NULL, st->q.p, st->k.p, st->ws.p, st->stream,
				    err) < 0 ||
		   bp_sparse_bwd(&ss, dcu, st->q.p, st->k.p, st->v.p, st->o.p, st->dob.p,
				 st->lse.p, st->dq.p, st->dk.p, st->dv.p, st->ws.p, st->stream,
				 err) < 0) {
		return bp_error_prefix(err, "sparse attention backward");
	}
	return queued(st, err);
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
	/* A non-blocking split leaves *out NULL until the child communicator is fully made:
	 * newer NCCL (2.2x init.cc, "newcomm should be NCCL_COMM_NULL until comm split fully
	 * complete") runs it as an asynchronous job that stores the handle at its end; older
	 * NCCL sets *out at once. So wait for the handle, watching the parent for errors. */
	int rc = 0;
	double t0 = now_us_();
	while (!*(ncclComm_t volatile *)out) {
		int s = comm_state(st->world_comm, "ncclCommSplit", err);
		if (s < 0)
			return s;
		if (now_us_() > deadline) {
			rc = timeout_error(st, "the other ranks", &w, err);
			break;
		}
		poll_pause(t0);
	}
	if (rc == 0)
		rc = nccl_settle(st, ncclInProgress, *out, "ncclCommSplit", __LINE__, deadline,
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

/* Every kernel a replay may run is loaded when CUDA starts, not at its first launch: under
 * CUDA's default lazy loading, the first GEMM of each new shape that makes cuBLAS pick a
 * kernel not yet used loads that kernel inside a timed step (the host stalls, the stream
 * drains), which a training job's steady state and balprof's warmed cells never pay. On the
 * H100 (2026-11-27, --gpu-times) the GEMMs of the steps after the warm-up ran 1.3-6x their
 * profiled time, only at token counts not seen before, while the warmed step's were within
 * -8% to +2% (executor/README.md "GPU checks"). A CUDA_MODULE_LOADING already set is kept. Called
 * first by make_uid and init, before anything touches CUDA or NCCL. */
static void cuda_env(void)
{
	setenv("CUDA_MODULE_LOADING", "EAGER", 0);
}

static int cuda_make_uid(void *blob, size_t cap, size_t *len, struct bp_error *err)
{
	ncclUniqueId id;
	cuda_env();
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
	struct bp_dbuf *all[] = {&st->blas_ws, &st->w_qkv, &st->w_o, &st->w_up, &st->w_down,
			      &st->dw, &st->w_lm, &st->dw_lm, &st->x, &st->qkv, &st->q, &st->o,
			      &st->y, &st->dy, &st->dx, &st->dob, &st->dq, &st->u, &st->lse,
			      &st->k, &st->v, &st->dk, &st->dv, &st->lm, &st->ws, &st->cu,
			      &st->coll_in, &st->coll_out, &st->scalar, &st->g_in, &st->g_out,
			      &st->a2a_in, &st->a2a_out};
	for (size_t i = 0; i < BP_ARRAY_LEN(all); i++)
		bp_dbuf_free(all[i]);
	for (int k = 0; k < 2; k++) {
		struct dir *d = &st->dir[k];
		for (size_t i = 0; i < d->nslots; i++) {
			bp_dbuf_free(&d->slots[i].b);
			if (d->slots[i].h)
				cudaFreeHost(d->slots[i].h);
			if (d->slots[i].has_ev)
				cudaEventDestroy(d->slots[i].ev);
		}
		bp_dbuf_free(&d->rbuf);
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
		cudaEventDestroy(i < QUEUE_MAX ? st->qev[i]
					       : i == QUEUE_MAX ? st->ev_done : st->cu_ev);
	if (st->have_stream)
		cudaStreamDestroy(st->stream);
	if (st->hcu)
		cudaFreeHost(st->hcu);
	for (size_t i = 0; i < st->nold; i++)
		cudaFreeHost(st->old_pinned[i]);
	free(st->old_pinned);
	free(st->cu_last);
	free(st->fill);
	bp_kt_free(st->kt);
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
	/* The main and the two p2p streams allocate from the device's one default pool. With
	 * its reuse policies on, a cudaMallocAsync on a p2p stream may take memory freed on the
	 * main stream and make the p2p stream wait for the main stream's work: in 1F1B that work
	 * may wait for this very receive, a hang across GPUs. Reuse across streams only where
	 * the streams are already ordered (cudaMemPoolReuseFollowEventDependencies stays on). */
	cudaMemPool_t pool;
	CU(cudaDeviceGetDefaultMemPool(&pool, st->dev), "cudaDeviceGetDefaultMemPool");
	int off = 0;
	CU(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &off),
	   "cudaMemPoolSetAttribute");
	CU(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &off),
	   "cudaMemPoolSetAttribute");
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
	for (; st->nev < QUEUE_MAX + 2; st->nev++)
		CU(cudaEventCreateWithFlags(st->nev < QUEUE_MAX    ? &st->qev[st->nev]
					    : st->nev == QUEUE_MAX ? &st->ev_done
								   : &st->cu_ev,
					    cudaEventDisableTiming),
		   "cudaEventCreateWithFlags");
	BL(cublasCreate(&st->blas), "cublasCreate");
	st->have_blas = 1;
	BL(cublasSetStream(st->blas, st->stream), "cublasSetStream");
	/* A workspace of its own: cuBLAS then never allocates (or frees) behind our back. */
	CU(cudaMalloc(&st->blas_ws.p, BLAS_WORKSPACE), "cudaMalloc");
	st->blas_ws.cap = BLAS_WORKSPACE;
	BL(cublasSetWorkspace(st->blas, st->blas_ws.p, BLAS_WORKSPACE), "cublasSetWorkspace");
	st->fill = bp_calloc(BP_DEV_FILL_CHUNK / 2, sizeof(uint16_t), err);
	if (!st->fill)
		return -1;
	bp_dev_make_fill(st->fill, BP_DEV_FILL_CHUNK / 2, FILL_SEED);
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
	cuda_env();
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
	if ((rc = start_device(st, a, err)) != 0 || (rc = start_nccl(st, a, err)) != 0 ||
	    (a->gpu_times && (rc = bp_kt_open(&st->kt, a->gpu_times, st->rank, st->world, KT_PAIRS,
					      err)) != 0)) {
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
		if (st->kt) { /* every timed kernel has run once the stream has */
			struct bp_error kerr;
			cudaError_t e = cudaStreamSynchronize(st->stream);
			int kc;
			if (e == cudaSuccess) {
				kc = bp_kt_close(st->kt, &kerr);
			} else {
				bp_kt_free(st->kt);
				kc = cuda_fail(&kerr, e, "cudaStreamSynchronize", __LINE__);
			}
			st->kt = NULL;
			if (rc == 0 && kc < 0) {
				if (err)
					*err = kerr;
				rc = -1;
			}
		}
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
	.unsupported = NULL, /* dense, sparse (attn_sparse.cu) and disaggregated all run */
	.gemm = cuda_gemm,
	.attn_dense = cuda_attn_dense,
	.attn_sparse = cuda_attn_sparse,
	.sync = cuda_sync,
	.group_create = cuda_group_create,
	.group_free = cuda_group_free,
	.send = cuda_send,
	.wait_sends = cuda_wait_sends,
	.recv = cuda_recv,
	.allreduce = cuda_allreduce,
	.allgather = cuda_allgather,
	.reducescatter = cuda_reducescatter,
	.alltoallv = cuda_alltoallv,
	.barrier = cuda_barrier,
	.gather = cuda_gather,
};
