/* backend_host.c: balexec's host backend (executor/README.md "Host backend"; issue 4).
 *
 * Compute is emulated: an op sleeps until its start plus the plan's predicted time (already
 * scaled by --time-scale). Communication is real: Open MPI (any MPI-3) moves the real byte
 * counts between the real processes. Every wait is a non-blocking MPI operation polled with
 * MPI_Test until the deadline (--timeout), so a hung peer ends in an error naming whom this
 * rank waited for, and the front end then calls MPI_Abort. MPI errors return (the world's
 * error handler is MPI_ERRORS_RETURN, inherited by every group) and are checked everywhere. */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "engine.h"

struct host {
	double timeout_s;
	MPI_Request *sends; /* pending sends, completed by wait_sends */
	size_t nsends, cap;
	int sends_done; /* 1: every one of sends[] has completed (they are MPI_REQUEST_NULL) */
	int ngroups; /* groups made so far: the tag of the next (same on every member) */
};

struct host_group {
	MPI_Comm comm;
	int n;
	int *ranks; /* world ranks, for messages */
};

static int mpi_fail(struct bp_error *err, int rc, const char *what)
{
	char s[MPI_MAX_ERROR_STRING];
	int n = 0;
	if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS)
		snprintf(s, sizeof(s), "MPI error %d", rc);
	return bp_errorf(err, "%s: %s", what, s);
}

static double host_now_us(void *st)
{
	(void)st;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void sleep_us(double us)
{
	struct timespec ts = {(time_t)(us / 1e6), (long)((us - (double)(time_t)(us / 1e6) * 1e6) *
							  1e3)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Sleeps until t_us. Open MPI moves a message above its eager limit (4 KiB over shared
 * memory) by a handshake that needs the sender inside an MPI call, so while this rank has
 * sends in flight it polls them every SEND_POLL_US: otherwise the next stage would wait for
 * an activation until this rank's emulated op ends. */
#define SEND_POLL_US 100.0
static int host_idle_until(void *st, double t_us, struct bp_error *err)
{
	struct host *h = st;
	for (;;) {
		double left = t_us - host_now_us(st);
		if (left <= 0)
			return 0;
		if (h->nsends > 0 && !h->sends_done) {
			int done = 0, rc = MPI_Testall((int)h->nsends, h->sends, &done,
						       MPI_STATUSES_IGNORE);
			if (rc != MPI_SUCCESS)
				return mpi_fail(err, rc, "MPI_Testall of the pp sends");
			h->sends_done = done;
			if (!done && left > SEND_POLL_US)
				left = SEND_POLL_US;
		}
		sleep_us(left);
	}
}

struct host_group;
static int start_coll(const struct bp_op_coll *c, MPI_Request *r, struct bp_error *err);
static int wait_all(struct host *h, MPI_Request *reqs, int n, const struct bp_wait *w,
		    const struct host_group *g, struct bp_error *err);

/* The op's collectives start at once and are progressed while the op "computes", so their
 * real time hides in the predicted time (which includes them) unless it is longer. */
static int host_compute(void *st, const struct bp_op *op, struct bp_error *err)
{
	struct host *h = st;
	MPI_Request reqs[2];
	const struct host_group *g = NULL;
	int n = 0, rc;
	double end = op->start_us + op->predicted_us;
	double deadline = host_now_us(h) + h->timeout_s * 1e6;
	struct bp_wait w = op->wait;
	for (size_t i = 0; i < BP_ARRAY_LEN(op->colls); i++) {
		if (!op->colls[i].group)
			continue;
		if (start_coll(&op->colls[i], &reqs[n], err) < 0)
			return -1;
		g = op->colls[i].group;
		w.what = op->colls[i].what;
		n++;
	}
	while (n > 0) {
		int done = 0;
		if ((rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE)) != MPI_SUCCESS)
			return mpi_fail(err, rc, w.what);
		if (done)
			break;
		double now = host_now_us(h);
		if (now >= end) /* past the op's time: the collectives are now what it waits for */
			return wait_all(h, reqs, n, &w, g, err);
		if (now > deadline)
			return wait_all(h, reqs, n, &w, g, err);
		/* Open MPI progresses a non-blocking collective only inside MPI calls, so poll;
		 * but eight ranks polling every few us on two cores steal each other's time. An
		 * eighth of what is left of the op (20 us to 1 ms) finishes a few-round
		 * collective well before the op ends and costs little CPU. */
		double iv = (end - now) / 8, cap = h->nsends && !h->sends_done ? SEND_POLL_US : 1000;
		sleep_us(iv < 20 ? (end - now < 20 ? end - now : 20) : iv > cap ? cap : iv);
	}
	return host_idle_until(st, end, err);
}

/* "rank 3" or "the tp all-reduce group (ranks 0 1)". */
static void who(const struct bp_wait *w, const struct host_group *g, char *buf, size_t n)
{
	if (w->peer >= 0) {
		snprintf(buf, n, "rank %d", w->peer);
		return;
	}
	if (!g) {
		snprintf(buf, n, "the other ranks");
		return;
	}
	size_t k = (size_t)snprintf(buf, n, "ranks");
	for (int i = 0; i < g->n && k < n; i++) {
		if (i == 16) {
			snprintf(buf + k, n - k, " ...");
			break;
		}
		k += (size_t)snprintf(buf + k, n - k, " %d", g->ranks[i]);
	}
}

/* Polls reqs until all complete or the timeout passes. The poll interval grows with the wait
 * (2 us up to 50 us): short waits stay precise, long ones leave the CPU to other ranks. */
static int wait_all(struct host *h, MPI_Request *reqs, int n, const struct bp_wait *w,
		    const struct host_group *g, struct bp_error *err)
{
	double t0 = host_now_us(h), deadline = t0 + h->timeout_s * 1e6;
	for (;;) {
		int done = 0, rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
		if (rc != MPI_SUCCESS)
			return mpi_fail(err, rc, w->what);
		if (done)
			return 0;
		double now = host_now_us(h);
		if (now > deadline) {
			char peer[160];
			who(w, g, peer, sizeof(peer));
			bp_errorf(err, "timed out after %g s waiting for %s (%s, step %lld, "
				  "micro-batch %lld)", h->timeout_s, peer, w->what,
				  (long long)w->step, (long long)w->mb);
			return BP_EXEC_TIMEOUT;
		}
		double iv = 2 + (now - t0) / 20;
		sleep_us(iv > 50 ? 50 : iv);
	}
}

static int host_init(void **stp, const struct bp_backend_args *a, int *rank, int *world,
		     char *host, size_t hostn, struct bp_error *err)
{
	/* MPI says who is who; balexec compares that with the launcher's view. One case must be
	 * caught before MPI_Init: srun without a PMI plugin (--mpi=none, no MpiDefault) gives
	 * the tasks no process-manager interface, and Open MPI then aborts inside MPI_Init with
	 * a page of text (an MPI built otherwise runs each task alone, which balexec catches
	 * after). pmix sets PMIX_RANK, pmi2 PMI_RANK/PMI_FD, mpirun OMPI_COMM_WORLD_SIZE. */
	if (a->world > 1 && getenv("SLURM_STEP_ID") && !getenv("PMIX_RANK") &&
	    !getenv("PMI_RANK") && !getenv("PMI_FD") && !getenv("OMPI_COMM_WORLD_SIZE"))
		return bp_errorf(err, "srun started %d tasks without an MPI plugin (no PMIx or PMI "
				 "in the environment): MPI would run every task alone; pass "
				 "--mpi=pmix (Open MPI) or the plugin your MPI was built for",
				 a->world);
	struct host *h = NULL;
	char name[MPI_MAX_PROCESSOR_NAME];
	int rc, len = 0, inited = 0;
	*stp = NULL;
#ifdef __linux__
	/* Sleeps end on time, not up to 50 us late (the default timer slack). */
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
	if ((rc = MPI_Initialized(&inited)) != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Initialized");
	if (!inited && (rc = MPI_Init(NULL, NULL)) != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Init");
	if ((rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)) != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Comm_set_errhandler");
	if ((rc = MPI_Comm_rank(MPI_COMM_WORLD, rank)) != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Comm_rank");
	if ((rc = MPI_Comm_size(MPI_COMM_WORLD, world)) != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Comm_size");
	if ((rc = MPI_Get_processor_name(name, &len)) != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Get_processor_name");
	snprintf(host, hostn, "%s", name);
	h = bp_calloc(1, sizeof(*h), err);
	if (!h)
		return -1;
	h->timeout_s = a->timeout_s > 0 ? a->timeout_s : 600;
	*stp = h;
	return 0;
}

static int host_finalize(void *st, struct bp_error *err)
{
	struct host *h = st;
	int rc;
	if (h) {
		free(h->sends);
		free(h);
	}
	if ((rc = MPI_Finalize()) != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Finalize");
	return 0;
}

static void host_abort(void *st, int code)
{
	(void)st;
	fflush(stdout);
	fflush(stderr);
	MPI_Abort(MPI_COMM_WORLD, code);
	exit(code);
}

static void host_set_timeout(void *st, double seconds)
{
	((struct host *)st)->timeout_s = seconds;
}

static int host_group_create(void *st, const int *ranks, int n, void **out,
			     struct bp_error *err)
{
	struct host *h = st;
	struct host_group *g = NULL;
	MPI_Group world = MPI_GROUP_NULL, sub = MPI_GROUP_NULL;
	int rc, ret = -1;
	*out = NULL;
	g = bp_calloc(1, sizeof(*g), err);
	if (!g)
		return -1;
	g->comm = MPI_COMM_NULL;
	g->ranks = bp_calloc((size_t)n, sizeof(int), err);
	if (!g->ranks)
		goto out;
	memcpy(g->ranks, ranks, (size_t)n * sizeof(int));
	g->n = n;
	if ((rc = MPI_Comm_group(MPI_COMM_WORLD, &world)) != MPI_SUCCESS) {
		mpi_fail(err, rc, "MPI_Comm_group");
		goto out;
	}
	if ((rc = MPI_Group_incl(world, n, ranks, &sub)) != MPI_SUCCESS) {
		mpi_fail(err, rc, "MPI_Group_incl");
		goto out;
	}
	/* Collective over the members only. Every rank makes its groups in the same order, so
	 * the count is the same on all members and tells overlapping creations apart. */
	if ((rc = MPI_Comm_create_group(MPI_COMM_WORLD, sub, h->ngroups++, &g->comm)) !=
	    MPI_SUCCESS) {
		mpi_fail(err, rc, "MPI_Comm_create_group");
		goto out;
	}
	*out = g;
	g = NULL;
	ret = 0;
out:
	if (sub != MPI_GROUP_NULL)
		MPI_Group_free(&sub);
	if (world != MPI_GROUP_NULL)
		MPI_Group_free(&world);
	if (g) {
		free(g->ranks);
		free(g);
	}
	return ret;
}

static void host_group_free(void *st, void *gp)
{
	(void)st;
	struct host_group *g = gp;
	if (!g)
		return;
	if (g->comm != MPI_COMM_NULL)
		MPI_Comm_free(&g->comm);
	free(g->ranks);
	free(g);
}

static int check_count(size_t bytes, struct bp_error *err)
{
	if (bytes > INT_MAX)
		return bp_errorf(err, "a message of %zu bytes is too large for MPI", bytes);
	return 0;
}

static int host_send(void *st, const void *buf, size_t bytes, int peer, int tag,
		     struct bp_error *err)
{
	struct host *h = st;
	int rc;
	if (check_count(bytes, err) < 0)
		return -1;
	if (h->nsends == h->cap) {
		size_t nc = h->cap ? h->cap * 2 : 64;
		MPI_Request *r = bp_realloc_array(h->sends, nc, sizeof(*r), err);
		if (!r)
			return -1;
		h->sends = r;
		h->cap = nc;
	}
	rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD,
		       &h->sends[h->nsends]);
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Isend");
	h->nsends++;
	h->sends_done = 0;
	return 0;
}

static int host_wait_sends(void *st, const struct bp_wait *w, struct bp_error *err)
{
	struct host *h = st;
	int rc = wait_all(h, h->sends, (int)h->nsends, w, NULL, err);
	if (rc == 0)
		h->nsends = 0;
	return rc;
}

static int host_recv(void *st, void *buf, size_t bytes, int peer, int tag,
		     const struct bp_wait *w, struct bp_error *err)
{
	MPI_Request r;
	int rc;
	if (check_count(bytes, err) < 0)
		return -1;
	rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r);
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Irecv");
	return wait_all(st, &r, 1, w, NULL, err);
}

static MPI_Comm comm_of(void *g)
{
	return g ? ((struct host_group *)g)->comm : MPI_COMM_WORLD;
}

/* Gradients and partial sums are summed; bytes carry no numbers here, so MPI_BOR on
 * MPI_BYTE (a reduction MPI defines for bytes) moves the same amount of data. */
static int start_coll(const struct bp_op_coll *c, MPI_Request *r, struct bp_error *err)
{
	MPI_Comm comm = comm_of(c->group);
	int rc, n = (int)c->bytes;
	if (check_count(c->bytes, err) < 0)
		return -1;
	switch (c->kind) {
	case BP_EXEC_ALLREDUCE:
		rc = MPI_Iallreduce(MPI_IN_PLACE, c->out, n, MPI_BYTE, MPI_BOR, comm, r);
		break;
	case BP_EXEC_ALLGATHER:
		rc = MPI_Iallgather(c->in, n, MPI_BYTE, c->out, n, MPI_BYTE, comm, r);
		break;
	default:
		rc = MPI_Ireduce_scatter_block(c->in, c->out, n, MPI_BYTE, MPI_BOR, comm, r);
		break;
	}
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, rc, c->what);
	return 0;
}

/* A blocking collective: what start_coll starts for an op, then waited for. */
static int blocking_coll(void *st, enum bp_coll_kind kind, void *g, const void *in, void *out,
			 size_t bytes, const struct bp_wait *w, struct bp_error *err)
{
	struct bp_op_coll c = {kind, g, in, out, bytes, w->what};
	MPI_Request r;
	if (start_coll(&c, &r, err) < 0)
		return -1;
	return wait_all(st, &r, 1, w, g, err);
}

static int host_allreduce(void *st, void *g, void *buf, size_t bytes, const struct bp_wait *w,
			  struct bp_error *err)
{
	return blocking_coll(st, BP_EXEC_ALLREDUCE, g, buf, buf, bytes, w, err);
}

static int host_allgather(void *st, void *g, const void *in, void *out, size_t bytes,
			  const struct bp_wait *w, struct bp_error *err)
{
	return blocking_coll(st, BP_EXEC_ALLGATHER, g, in, out, bytes, w, err);
}

static int host_reducescatter(void *st, void *g, const void *in, void *out, size_t bytes,
			      const struct bp_wait *w, struct bp_error *err)
{
	return blocking_coll(st, BP_EXEC_REDUCESCATTER, g, in, out, bytes, w, err);
}

static int host_barrier(void *st, void *g, const struct bp_wait *w, struct bp_error *err)
{
	MPI_Request r;
	int rc = MPI_Ibarrier(comm_of(g), &r);
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Ibarrier");
	return wait_all(st, &r, 1, w, g, err);
}

static int host_gather(void *st, const void *in, void *out, size_t bytes,
		       const struct bp_wait *w, struct bp_error *err)
{
	MPI_Request r;
	int rc;
	if (check_count(bytes, err) < 0)
		return -1;
	rc = MPI_Igather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD,
			 &r);
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Igather");
	return wait_all(st, &r, 1, w, NULL, err);
}

const struct bp_backend bp_backend_host = {
	.name = "host",
	.summary = "CPU processes under MPI: compute emulated (sleeps), communication real",
	.init = host_init,
	.finalize = host_finalize,
	.abort = host_abort,
	.set_timeout = host_set_timeout,
	.now_us = host_now_us,
	.idle_until = host_idle_until,
	.compute = host_compute,
	.group_create = host_group_create,
	.group_free = host_group_free,
	.send = host_send,
	.wait_sends = host_wait_sends,
	.recv = host_recv,
	.allreduce = host_allreduce,
	.allgather = host_allgather,
	.reducescatter = host_reducescatter,
	.barrier = host_barrier,
	.gather = host_gather,
};
