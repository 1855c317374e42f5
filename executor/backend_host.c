/* backend_host.c: balexec's host backend (executor/README.md "Host backend"; issue 4).
 *
 * Compute is emulated: each compute primitive (GEMM, dense or sparse attention) sleeps until
 * the deadline the engine gives it, its share of the op's predicted time (already scaled by
 * --time-scale). Communication is real: Open MPI (any MPI-3) moves the real byte counts
 * between the real processes, collectives and the variable all-to-all included. Every wait is a non-blocking MPI operation polled with
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

struct host_group {
	MPI_Comm comm;
	int n, me;  /* size, and this rank's index (world ranks ascending) */
	int *ranks; /* world ranks, for messages */
};

/* A stream-ordered call in flight (a collective or an all-to-all), done with point-to-point
 * messages over the group's communicator: each member sends every other member its part
 * directly (MPI_Isend / MPI_Irecv, a linear algorithm), and the reduction, for the
 * all-reduce and the reduce-scatter, is this rank's own OR of what came in. Posting a few
 * point-to-point messages costs less than a non-blocking collective's schedule (Open MPI's
 * libnbc): with a collective per layer (~50 per op) the posting took 1.2 ms per op with
 * libnbc and 0.8 ms with messages under ASan on 8 ranks and 2 cores; the bytes that move
 * are the same. Messages of
 * one group match in posting order (MPI's non-overtaking rule, one tag), which every member
 * keeps, as for any collective. What the call needs until it retires stays in its slot: the
 * requests, the scratch the receives land in (every call its own: MPI forbids two pending
 * receives one buffer), where the result goes (in call order when it retires) and what it
 * waits for. */
enum coll_kind { C_ALLREDUCE, C_ALLGATHER, C_REDUCESCATTER, C_ALLTOALLV };
#define COLL_TAG 7

struct preq {
	MPI_Request *r;   /* [nr]; done ones are MPI_REQUEST_NULL */
	int *peer;        /* [nr]: the member each request talks to: a receive from member m
			   * is m, a send to it -1 - m (a time-out names who never sent) */
	int nr, rcap;
	char *buf;        /* scratch: n blocks of `bytes` (all-to-all: its receive layout) */
	size_t cap;
	enum coll_kind kind;
	size_t bytes;     /* per member (not the all-to-all) */
	void *dst;
	size_t *counts;   /* all-to-all: recv and rdispl per member, kept for retiring */
	size_t ccap;
	const struct host_group *g;
	struct bp_wait w;
};

/* Calls in flight at most before the oldest is waited for. The engine syncs after every op
 * (and every tick), so this only bounds a runaway: an op has about 3 calls per layer, a
 * tick 4, and a wait in the middle of one would stretch the emulated compute after it. */
#define PEND_MAX 1024

struct host {
	double timeout_s;
	MPI_Request *sends; /* pending sends, completed by wait_sends */
	size_t nsends, cap;
	int sends_done; /* 1: every one of sends[] has completed (they are MPI_REQUEST_NULL) */
	int ngroups; /* groups made so far: the tag of the next (same on every member) */
	int rank;    /* in the world */
	struct preq *pq;   /* a ring in call order, pq[pqh] the oldest; grown as needed */
	int pqh, npq, pqcap;
	struct host_group world; /* the world's group for collectives given none (a dup) */
	double owed;       /* emulated compute not slept yet: the latest deadline given */
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

/* Retires the oldest call in flight (complete): its result goes where the caller said, if
 * anywhere (the engine wants none: then no reduction is computed, which at -O0 with ASan
 * was a tenth of a rank's time). */
static void retire(struct host *h)
{
	struct preq *q = &h->pq[h->pqh];
	const struct host_group *g = q->g;
	size_t b = q->bytes;
	unsigned char *d = q->dst;
	if (d) {
		switch (q->kind) {
		case C_ALLREDUCE:
		case C_REDUCESCATTER: /* every member's block, this rank's own among them */
			memcpy(d, q->buf, b);
			for (int i = 1; i < g->n; i++)
				for (size_t k = 0; k < b; k++)
					d[k] |= (unsigned char)q->buf[(size_t)i * b + k];
			break;
		case C_ALLGATHER:
			memcpy(d, q->buf, (size_t)g->n * b);
			break;
		default: /* only the receive slots: the caller's buffer may hold more */
			for (int i = 0; i < g->n; i++)
				if (q->counts[i])
					memcpy(d + q->counts[g->n + i], q->buf + q->counts[g->n + i],
					       q->counts[i]);
			break;
		}
	}
	h->pqh = (h->pqh + 1) % h->pqcap;
	h->npq--;
}

/* Progresses the calls in flight and retires the oldest ones that are done. One test of the
 * oldest progresses them all (Open MPI's progress engine runs every pending operation in
 * any MPI call). */
static int progress(struct host *h, struct bp_error *err)
{
	while (h->npq > 0) {
		struct preq *q = &h->pq[h->pqh];
		int done = 0, rc;
		if ((rc = MPI_Testall(q->nr, q->r, &done, MPI_STATUSES_IGNORE)) != MPI_SUCCESS)
			return mpi_fail(err, rc, q->w.what);
		if (!done)
			return 0;
		retire(h);
	}
	return 0;
}

/* Sleeps until t_us. Open MPI progresses a non-blocking operation only inside MPI calls,
 * and moves a message above its eager limit (4 KiB over shared memory) by a handshake that
 * needs the sender inside one, so while this rank has sends in flight it polls them every
 * SEND_POLL_US (otherwise the next stage would wait for an activation until the emulated op
 * ends), and while it has collectives in flight every COLL_POLL_US (they need only be done
 * by the op's end, where sync waits for them; eight ranks on two cores polling every few us
 * would steal each other's time). */
#define SEND_POLL_US 100.0
#define COLL_POLL_US 250.0
static int host_idle_until(void *st, double t_us, struct bp_error *err)
{
	struct host *h = st;
	if (h->owed > t_us)
		t_us = h->owed;
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
		if (h->npq > 0) {
			if (progress(h, err) < 0)
				return -1;
			if (h->npq > 0 && left > COLL_POLL_US)
				left = COLL_POLL_US;
		}
		sleep_us(left);
	}
}

struct host_group;
static int wait_all(struct host *h, MPI_Request *reqs, int n, const int *peers,
		    const struct bp_wait *w, const struct host_group *g, struct bp_error *err);

/* Compute is emulated: a compute primitive's time is owed until its deadline (the engine's:
 * its share of the op's predicted time, shares.h), and slept, polling what is in flight,
 * when the rank next has to wait or be on time: idle_until, sync, a receive, a barrier, the
 * gather, the send completion. The collectives between the primitives of an op are posted
 * at once meanwhile, as they were when an op was one sleep: they have the rest of the op to
 * complete in, and one sleep per op instead of one per primitive (seven a layer) spares 8
 * ranks on 2 cores the wake-ups (measured: a plain <tp 2 cp 2 pp 2> replay went from 3-16%
 * per-step error under ASan with a sleep per primitive to that of a sleep per op). */
static void owe(struct host *h, double until_us)
{
	if (until_us > h->owed)
		h->owed = until_us;
}

static int host_gemm(void *st, const struct bp_gemm *g, struct bp_error *err)
{
	(void)err;
	owe(st, g->until_us);
	return 0;
}

static int host_attn(void *st, const struct bp_attn *a, struct bp_error *err)
{
	(void)err;
	owe(st, a->until_us);
	return 0;
}

/* Sleeps what is owed, then waits for every call in flight, oldest first, so a timeout
 * names the group that holds the others up. */
static int host_sync(void *st, const struct bp_wait *w, struct bp_error *err)
{
	struct host *h = st;
	(void)w;
	if (host_idle_until(st, 0, err) < 0)
		return -1;
	while (h->npq > 0) {
		struct preq *q = &h->pq[h->pqh];
		int rc = wait_all(h, q->r, q->nr, q->peer, &q->w, q->g, err);
		if (rc != 0)
			return rc;
		retire(h);
	}
	return 0;
}

/* The next slot of the ring for a call over g with scratch of need bytes and room for nreq
 * requests and ncounts counts (the ring grows to PEND_MAX; the oldest call is waited for
 * when that many are in flight). The caller posts the messages into q->r (q->nr of them)
 * and then counts the call in (h->npq++). */
static int pend_slot(struct host *h, size_t need, int nreq, size_t ncounts,
		     const struct host_group *g, const struct bp_wait *w, struct preq **out,
		     struct bp_error *err)
{
	int rc;
	if (h->npq == h->pqcap && h->pqcap < PEND_MAX) { /* grow, unwrapping the ring */
		int nc = h->pqcap ? 2 * h->pqcap : 64;
		struct preq *np = bp_calloc((size_t)nc, sizeof(*np), err);
		if (!np)
			return -1;
		for (int k = 0; k < h->pqcap; k++)
			np[k] = h->pq[(h->pqh + k) % h->pqcap];
		free(h->pq);
		h->pq = np;
		h->pqh = 0;
		h->pqcap = nc;
	}
	while (h->npq == h->pqcap) {
		struct preq *o = &h->pq[h->pqh];
		if ((rc = wait_all(h, o->r, o->nr, o->peer, &o->w, o->g, err)) != 0)
			return rc;
		retire(h);
	}
	struct preq *q = &h->pq[(h->pqh + h->npq) % h->pqcap];
	if (need < 1)
		need = 1;
	if (q->cap < need) {
		char *b = realloc(q->buf, need);
		if (!b)
			return bp_errorf(err, "out of memory (%zu bytes of collective scratch)", need);
		q->buf = b;
		q->cap = need;
	}
	if (q->rcap < nreq) {
		MPI_Request *r = bp_realloc_array(q->r, (size_t)nreq, sizeof(*r), err);
		if (!r)
			return -1;
		q->r = r;
		int *pe = bp_realloc_array(q->peer, (size_t)nreq, sizeof(*pe), err);
		if (!pe)
			return -1;
		q->peer = pe;
		q->rcap = nreq;
	}
	if (q->ccap < ncounts) {
		size_t *c = bp_realloc_array(q->counts, ncounts, sizeof(size_t), err);
		if (!c)
			return -1;
		q->counts = c;
		q->ccap = ncounts;
	}
	q->nr = 0;
	q->g = g;
	q->w = *w;
	q->dst = NULL;
	*out = q;
	return 0;
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

/* The members of g whose messages of reqs have not arrived (receives still pending; when
 * only sends are, the members not taking them), as "rank 5" or "ranks 5 6": the stopped
 * ones, not the whole group (issue 27 item 21). Completes what has completed. 0 when none
 * is named (buf untouched). */
static int who_pending(MPI_Request *reqs, int n, const int *peers, const struct host_group *g,
		       char *buf, size_t len)
{
	int *late = calloc((size_t)g->n + 1, sizeof(int)), nl = 0;
	if (!late)
		return 0;
	for (int pass = 0; pass < 2 && !nl; pass++) /* receives first, then sends */
		for (int i = 0; i < n; i++) {
			int f = 1, m = pass ? -1 - peers[i] : peers[i];
			if (m < 0 || m >= g->n || reqs[i] == MPI_REQUEST_NULL)
				continue;
			MPI_Test(&reqs[i], &f, MPI_STATUS_IGNORE);
			if (!f && !late[m]) {
				late[m] = 1;
				nl++;
			}
		}
	if (nl) {
		size_t k = (size_t)snprintf(buf, len, nl == 1 ? "rank" : "ranks");
		for (int m = 0, shown = 0; m < g->n && k < len; m++) {
			if (!late[m])
				continue;
			if (shown++ == 16) {
				snprintf(buf + k, len - k, " ...");
				break;
			}
			k += (size_t)snprintf(buf + k, len - k, " %d", g->ranks[m]);
		}
	}
	free(late);
	return nl;
}

/* Polls reqs until all complete or the timeout passes. The poll interval grows with the wait
 * (2 us up to 50 us): short waits stay precise, long ones leave the CPU to other ranks. */
static int wait_all(struct host *h, MPI_Request *reqs, int n, const int *peers,
		    const struct bp_wait *w, const struct host_group *g, struct bp_error *err)
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
			if (!(w->peer < 0 && g && peers && who_pending(reqs, n, peers, g, peer,
								       sizeof(peer))))
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
	h->rank = *rank;
	*stp = h;
	/* The world as a group, for collectives given none: its own communicator, so its
	 * messages never meet the PP sends on MPI_COMM_WORLD. */
	h->world.comm = MPI_COMM_NULL;
	h->world.n = *world;
	h->world.me = *rank;
	h->world.ranks = bp_calloc((size_t)*world, sizeof(int), err);
	if (!h->world.ranks)
		return -1;
	for (int r = 0; r < *world; r++)
		h->world.ranks[r] = r;
	if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &h->world.comm)) != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Comm_dup");
	return 0;
}

static int host_finalize(void *st, struct bp_error *err)
{
	struct host *h = st;
	int rc;
	if (h) {
		free(h->sends);
		for (int i = 0; i < h->pqcap; i++) {
			free(h->pq[i].buf);
			free(h->pq[i].r);
			free(h->pq[i].peer);
			free(h->pq[i].counts);
		}
		free(h->pq);
		if (h->world.comm != MPI_COMM_NULL)
			MPI_Comm_free(&h->world.comm);
		free(h->world.ranks);
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
	g->me = -1;
	for (int i = 0; i < n; i++)
		if (ranks[i] == h->rank)
			g->me = i;
	if (g->me < 0) {
		bp_errorf(err, "rank %d is not in the group it was asked to make", h->rank);
		goto out;
	}
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
	if (host_idle_until(st, 0, err) < 0)
		return -1;
	int rc = wait_all(h, h->sends, (int)h->nsends, NULL, w, NULL, err);
	if (rc == 0)
		h->nsends = 0;
	return rc;
}

static int host_recv(void *st, void *buf, size_t bytes, int peer, int tag,
		     const struct bp_wait *w, struct bp_error *err)
{
	MPI_Request r;
	int rc;
	if (check_count(bytes, err) < 0 || host_idle_until(st, 0, err) < 0)
		return -1;
	rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r);
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Irecv");
	return wait_all(st, &r, 1, NULL, w, NULL, err);
}

static MPI_Comm comm_of(void *g)
{
	return g ? ((struct host_group *)g)->comm : MPI_COMM_WORLD;
}

/* Posts one message of the call in flight q (bytes 0: none). */
static int post(struct preq *q, int send, void *buf, size_t bytes, int peer,
		struct bp_error *err)
{
	int rc;
	if (!bytes)
		return 0;
	if (check_count(bytes, err) < 0)
		return -1;
	MPI_Comm c = q->g->comm;
	rc = send ? MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, COLL_TAG, c, &q->r[q->nr])
		  : MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, COLL_TAG, c, &q->r[q->nr]);
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, rc, send ? "MPI_Isend" : "MPI_Irecv");
	q->peer[q->nr] = send ? -1 - peer : peer;
	q->nr++;
	return 0;
}

/* An all-reduce, all-gather or reduce-scatter of bytes per member, left in flight
 * (stream-ordered, engine.h): idle periods progress it, sync completes it. The scratch holds
 * one block per member, this rank's own copied in at once, the others received; the
 * all-reduce's own block is the caller's data (in place), the reduce-scatter sends member i
 * block i of in and keeps its own. Reductions are bitwise OR (the bytes carry no numbers
 * here; the same amount of data moves as a sum's would). */
static int queue_coll(void *st, enum coll_kind kind, void *gp, const void *in, void *out,
		      size_t bytes, const struct bp_wait *w, struct bp_error *err)
{
	struct host *h = st;
	const struct host_group *g = gp ? gp : &h->world;
	struct preq *q;
	int rc, n = g->n;
	if (check_count(bytes * (size_t)n, err) < 0)
		return -1;
	if ((rc = pend_slot(h, bytes * (size_t)n, 2 * (n - 1), 0, g, w, &q, err)) != 0)
		return rc;
	q->kind = kind;
	q->bytes = bytes;
	q->dst = out;
	char *own = q->buf + (size_t)g->me * bytes;
	const char *src = kind == C_ALLREDUCE ? out : kind == C_ALLGATHER ? in
						: (const char *)in + (size_t)g->me * bytes;
	if (bytes && src)
		memcpy(kind == C_ALLGATHER ? own : q->buf, src, bytes);
	else if (bytes) /* an all-reduce nobody reads: it contributes zeros */
		memset(q->buf, 0, bytes);
	/* the reductions OR every block into the first: keep own there, receive the rest
	 * into the others in member order */
	for (int i = 0, slot = 1; i < n; i++) {
		if (i == g->me)
			continue;
		char *rb = kind == C_ALLGATHER ? q->buf + (size_t)i * bytes
					       : q->buf + (size_t)slot++ * bytes;
		char *sb = kind == C_ALLGATHER ? own
			   : kind == C_ALLREDUCE ? q->buf
						 : (char *)in + (size_t)i * bytes;
		if (post(q, 0, rb, bytes, i, err) < 0 || post(q, 1, sb, bytes, i, err) < 0)
			return -1;
	}
	h->npq++;
	return 0;
}

static int host_allreduce(void *st, void *g, void *buf, size_t bytes, const struct bp_wait *w,
			  struct bp_error *err)
{
	return queue_coll(st, C_ALLREDUCE, g, NULL, buf, bytes, w, err);
}

static int host_allgather(void *st, void *g, const void *in, void *out, size_t bytes,
			  const struct bp_wait *w, struct bp_error *err)
{
	return queue_coll(st, C_ALLGATHER, g, in, out, bytes, w, err);
}

static int host_reducescatter(void *st, void *g, const void *in, void *out, size_t bytes,
			      const struct bp_wait *w, struct bp_error *err)
{
	return queue_coll(st, C_REDUCESCATTER, g, in, out, bytes, w, err);
}

/* The variable all-to-all as point-to-point messages in flight: a receive per member with
 * bytes for this rank into the scratch at its displacement (copied to out when it retires),
 * a send per member of the caller's bytes (in stays the caller's until sync), this rank's
 * own part copied. */
static int host_alltoallv(void *st, const struct bp_a2a *a, struct bp_error *err)
{
	struct host *h = st;
	const struct host_group *g = a->group;
	struct preq *q;
	int rc;
	if (!g)
		return bp_errorf(err, "an all-to-all needs a group");
	int n = g->n;
	size_t need = 0;
	for (int i = 0; i < n; i++)
		if (a->rdispl[i] + a->recv[i] > need)
			need = a->rdispl[i] + a->recv[i];
	if (a->send[g->me] != a->recv[g->me])
		return bp_errorf(err, "an all-to-all sends itself %zu bytes and receives %zu",
				 a->send[g->me], a->recv[g->me]);
	if ((rc = pend_slot(h, need, 2 * n, 2 * (size_t)n, g, a->wait, &q, err)) != 0)
		return rc;
	q->kind = C_ALLTOALLV;
	q->dst = a->out;
	for (int i = 0; i < n; i++) {
		q->counts[i] = a->recv[i];
		q->counts[n + i] = a->rdispl[i];
	}
	if (a->recv[g->me])
		memcpy(q->buf + a->rdispl[g->me], (const char *)a->in + a->sdispl[g->me],
		       a->recv[g->me]);
	for (int i = 0; i < n; i++) {
		if (i == g->me)
			continue;
		if (post(q, 0, q->buf + a->rdispl[i], a->recv[i], i, err) < 0 ||
		    post(q, 1, (char *)a->in + a->sdispl[i], a->send[i], i, err) < 0)
			return -1;
	}
	h->npq++;
	return 0;
}

static int host_barrier(void *st, void *g, const struct bp_wait *w, struct bp_error *err)
{
	MPI_Request r;
	if (host_idle_until(st, 0, err) < 0)
		return -1;
	int rc = MPI_Ibarrier(comm_of(g), &r);
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Ibarrier");
	return wait_all(st, &r, 1, NULL, w, g, err);
}

static int host_gather(void *st, const void *in, void *out, size_t bytes,
		       const struct bp_wait *w, struct bp_error *err)
{
	MPI_Request r;
	int rc;
	if (check_count(bytes, err) < 0 || host_idle_until(st, 0, err) < 0)
		return -1;
	rc = MPI_Igather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD,
			 &r);
	if (rc != MPI_SUCCESS)
		return mpi_fail(err, rc, "MPI_Igather");
	return wait_all(st, &r, 1, NULL, w, NULL, err);
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
	.gemm = host_gemm,
	.attn_dense = host_attn,
	.attn_sparse = host_attn,
	.sync = host_sync,
	.group_create = host_group_create,
	.group_free = host_group_free,
	.send = host_send,
	.wait_sends = host_wait_sends,
	.recv = host_recv,
	.allreduce = host_allreduce,
	.allgather = host_allgather,
	.reducescatter = host_reducescatter,
	.alltoallv = host_alltoallv,
	.barrier = host_barrier,
	.gather = host_gather,
};
