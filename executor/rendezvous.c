/* rendezvous.c: balexec's TCP rendezvous (rendezvous.h; executor/README.md "Rendezvous";
 * issue 4). Called by cmd/balexec.c before any backend starts.
 *
 * Wire format (network byte order): every message starts with a fixed header of HDR_LEN
 * bytes, magic "BPRV", version, type, rank, world, the check string (CHECK_LEN bytes,
 * NUL-padded), the sender's host name (SELF_LEN bytes) and the length of what follows. A
 * rank > 0 sends one HELLO (nothing follows); rank 0 answers each with OK + the blob, or
 * ERROR / TIMEOUT + its error text. Invariants: every socket is non-blocking and every read,
 * write and connect waits in poll() for at most the time left of the one deadline; nothing
 * raises SIGPIPE (MSG_NOSIGNAL); rank 0 answers every rank that said hello, whatever the
 * outcome, before it closes. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rendezvous.h"

#define MAGIC 0x42505256u /* "BPRV" */
#define VERSION 1
#define CHECK_LEN (BP_RDV_MAX_CHECK + 1)
#define SELF_LEN (BP_RDV_MAX_SELF + 1)
#define HDR_LEN (4 + 2 + 2 + 4 + 4 + CHECK_LEN + SELF_LEN + 4)
#define MAX_TEXT 1024 /* an error reply's text, bytes */
#define ERROR_GRACE_S 1.0 /* how long rank 0 tries to deliver its error replies */
/* After refusing a rank, how long rank 0 keeps waiting for the ranks not yet come, so that
 * every rank hears the refusal instead of timing out on "rank 0 did not answer" (issue 27
 * item 15: 3-6 of 8 ranks given different plans blamed rank 0). srun starts the ranks
 * together: they come within this. */
#define REFUSAL_WAIT_S 10.0

enum { T_HELLO = 1, T_OK = 2, T_ERROR = 3, T_TIMEOUT = 4 };

struct hdr {
	uint32_t magic;
	uint16_t version, type;
	uint32_t rank, world;
	char check[CHECK_LEN];
	char self[SELF_LEN];
	uint32_t len;
};

/* Results of the I/O helpers besides 0. */
enum { IO_ERR = -1, IO_TIMEOUT = -2, IO_EOF = -3 };

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void put32(unsigned char *b, uint32_t v)
{
	v = htonl(v);
	memcpy(b, &v, 4);
}

static void put16(unsigned char *b, uint16_t v)
{
	v = htons(v);
	memcpy(b, &v, 2);
}

static uint32_t get32(const unsigned char *b)
{
	uint32_t v;
	memcpy(&v, b, 4);
	return ntohl(v);
}

static uint16_t get16(const unsigned char *b)
{
	uint16_t v;
	memcpy(&v, b, 2);
	return ntohs(v);
}

static void hdr_pack(const struct hdr *h, unsigned char *b)
{
	memset(b, 0, HDR_LEN);
	put32(b, h->magic);
	put16(b + 4, h->version);
	put16(b + 6, h->type);
	put32(b + 8, h->rank);
	put32(b + 12, h->world);
	memcpy(b + 16, h->check, CHECK_LEN);
	memcpy(b + 16 + CHECK_LEN, h->self, SELF_LEN);
	put32(b + 16 + CHECK_LEN + SELF_LEN, h->len);
}

/* The strings are cut at their last byte, so a peer cannot make them unterminated. */
static void hdr_unpack(const unsigned char *b, struct hdr *h)
{
	h->magic = get32(b);
	h->version = get16(b + 4);
	h->type = get16(b + 6);
	h->rank = get32(b + 8);
	h->world = get32(b + 12);
	memcpy(h->check, b + 16, CHECK_LEN);
	h->check[CHECK_LEN - 1] = 0;
	memcpy(h->self, b + 16 + CHECK_LEN, SELF_LEN);
	h->self[SELF_LEN - 1] = 0;
	h->len = get32(b + 16 + CHECK_LEN + SELF_LEN);
}

static void hdr_fill(struct hdr *h, const struct bp_rdv_opts *o, int type, uint32_t len)
{
	memset(h, 0, sizeof(*h));
	h->magic = MAGIC;
	h->version = VERSION;
	h->type = (uint16_t)type;
	h->rank = (uint32_t)o->rank;
	h->world = (uint32_t)o->world;
	snprintf(h->check, sizeof(h->check), "%s", o->check ? o->check : "");
	snprintf(h->self, sizeof(h->self), "%s", o->self ? o->self : "?");
	h->len = len;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return 0;
}

/* Waits until fd is ready for ev or the deadline passes: 1 ready, 0 timeout, -1 error. */
static int wait_fd(int fd, short ev, double deadline)
{
	for (;;) {
		double left = deadline - now_s();
		if (left <= 0)
			return 0;
		struct pollfd p = {fd, ev, 0};
		int ms = left > 1e6 ? 1000000000 : (int)(left * 1e3) + 1;
		int r = poll(&p, 1, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r > 0)
			return 1; /* POLLERR / POLLHUP show up in the next read or write */
	}
}

static int write_all(int fd, const void *buf, size_t n, double deadline)
{
	const unsigned char *p = buf;
	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int r = wait_fd(fd, POLLOUT, deadline);
			if (r == 0)
				return IO_TIMEOUT;
			if (r < 0)
				return IO_ERR;
			continue;
		}
		return IO_ERR;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t n, double deadline)
{
	unsigned char *p = buf;
	while (n > 0) {
		ssize_t k = recv(fd, p, n, 0);
		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k == 0)
			return IO_EOF;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			int r = wait_fd(fd, POLLIN, deadline);
			if (r == 0)
				return IO_TIMEOUT;
			if (r < 0)
				return IO_ERR;
			continue;
		}
		return IO_ERR;
	}
	return 0;
}

/* "'abc'" or, for a long string, its first 40 characters and "...". */
static void quote_short(char *out, size_t n, const char *s)
{
	if (strlen(s) > 40)
		snprintf(out, n, "'%.40s...'", s);
	else
		snprintf(out, n, "'%s'", s);
}

/* ---- rank 0 ---- */

struct conn {
	int fd;
	char addr[64];              /* the peer's ip:port */
	unsigned char buf[HDR_LEN]; /* its hello as far as it came */
	size_t got;
	int hello;                  /* a full, valid hello arrived */
	int refused;                /* its hello (or its bytes) were refused: not polled again */
	int rank;
	char self[SELF_LEN];
};

struct server {
	const struct bp_rdv_opts *o;
	int lfd;
	struct conn *c;
	size_t n, cap;
	int *seen; /* [world]: conn index of each rank's hello, -1 none */
	int nhello, nrefused; /* valid hellos; refused complete hellos */
	double deadline;
};

static int add_conn(struct server *s, int fd, const struct sockaddr_in *sa,
		    struct bp_error *err)
{
	if (s->n == s->cap) {
		size_t nc = s->cap ? 2 * s->cap : 16;
		struct conn *c = bp_realloc_array(s->c, nc, sizeof(*c), err);
		if (!c)
			return -1;
		s->c = c;
		s->cap = nc;
	}
	struct conn *c = &s->c[s->n++];
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->rank = -1;
	char ip[INET_ADDRSTRLEN] = "?";
	inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof(ip));
	snprintf(c->addr, sizeof(c->addr), "%s:%u", ip, (unsigned)ntohs(sa->sin_port));
	return 0;
}

static int accept_all(struct server *s, struct bp_error *err)
{
	for (;;) {
		struct sockaddr_in sa;
		socklen_t sl = sizeof(sa);
		memset(&sa, 0, sizeof(sa));
		int fd = accept(s->lfd, (struct sockaddr *)&sa, &sl);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
				continue;
			return bp_errorf(err, "rendezvous at %s:%d: accept: %s", s->o->host,
					 s->o->port, strerror(errno));
		}
		if (set_nonblock(fd) < 0) {
			int e = errno;
			close(fd);
			return bp_errorf(err, "rendezvous: fcntl: %s", strerror(e));
		}
		if (add_conn(s, fd, &sa, err) < 0) {
			close(fd);
			return -1;
		}
	}
}

/* Checks a complete hello from conn i; -1 with err when it is refused. */
static int take_hello(struct server *s, size_t i, struct bp_error *err)
{
	const struct bp_rdv_opts *o = s->o;
	struct conn *c = &s->c[i];
	struct hdr h;
	hdr_unpack(c->buf, &h);
	snprintf(c->self, sizeof(c->self), "%s", h.self);
	if (h.type != T_HELLO || h.len != 0)
		return bp_errorf(err, "%s sent a rendezvous message of type %u where a hello "
				 "belongs", c->addr, (unsigned)h.type);
	if (h.world != (uint32_t)o->world)
		return bp_errorf(err, "rank %u (%s) was started with a world of %u ranks, rank 0 "
				 "(%s) with %d", h.rank, h.self, h.world, o->self ? o->self : "?",
				 o->world);
	if (h.rank == 0 || h.rank >= (uint32_t)o->world)
		return bp_errorf(err, "%s (%s) says it is rank %u: %s", c->addr, h.self, h.rank,
				 h.rank == 0 ? "rank 0 is the rendezvous itself (two ranks 0?)"
					     : "outside the world");
	c->rank = (int)h.rank;
	if (s->seen[h.rank] >= 0) {
		const struct conn *d = &s->c[s->seen[h.rank]];
		return bp_errorf(err, "rank %u connected twice to the rendezvous: from %s (%s) "
				 "and from %s (%s)", h.rank, d->addr, d->self, c->addr, h.self);
	}
	const char *mine = o->check ? o->check : "";
	if (strcmp(h.check, mine) != 0) {
		char a[64], b[64];
		quote_short(a, sizeof(a), h.check);
		quote_short(b, sizeof(b), mine);
		return bp_errorf(err, "rank %u (%s) disagrees with rank 0 (%s) on the plan or "
				 "steps: %s vs %s", h.rank, h.self, o->self ? o->self : "?", a, b);
	}
	c->hello = 1;
	s->seen[h.rank] = (int)i;
	s->nhello++;
	return 0;
}

/* Reads what conn i has sent; -1 with err for a stranger or a peer that left. */
static int read_conn(struct server *s, size_t i, struct bp_error *err)
{
	struct conn *c = &s->c[i];
	while (c->got < HDR_LEN) {
		ssize_t k = recv(c->fd, c->buf + c->got, HDR_LEN - c->got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (k <= 0)
			return bp_errorf(err, "%s connected to the rendezvous at %s:%d and %s before "
					 "its hello", c->addr, s->o->host, s->o->port,
					 k == 0 ? "closed the connection" : strerror(errno));
		c->got += (size_t)k;
		/* Refuse a stranger as soon as its first bytes show it. */
		if ((c->got >= 4 && get32(c->buf) != MAGIC) ||
		    (c->got >= 6 && get16(c->buf + 4) != VERSION))
			return bp_errorf(err, "%s connected to the rendezvous at %s:%d but is not a "
					 "balexec rank of this version (it sent %s)", c->addr,
					 s->o->host, s->o->port,
					 get32(c->buf) != MAGIC ? "something else" : "another version");
	}
	return take_hello(s, i, err);
}

/* Sends every conn whose hello arrived (complete or refused) the error text, briefly. */
static void send_errors(struct server *s, int type, const char *text)
{
	unsigned char b[HDR_LEN];
	struct hdr h;
	size_t tl = strlen(text);
	double deadline = now_s() + ERROR_GRACE_S;
	hdr_fill(&h, s->o, type, (uint32_t)tl);
	hdr_pack(&h, b);
	for (size_t i = 0; i < s->n; i++) {
		struct conn *c = &s->c[i];
		if (c->got < HDR_LEN || c->fd < 0)
			continue;
		if (write_all(c->fd, b, sizeof(b), deadline) == 0)
			write_all(c->fd, text, tl, deadline);
	}
}

static void missing_ranks(const struct server *s, struct bp_error *err)
{
	char list[160];
	size_t k = 0;
	int shown = 0, miss = 0;
	list[0] = 0;
	for (int r = 1; r < s->o->world; r++) {
		if (s->seen[r] >= 0)
			continue;
		miss++;
		if (shown < 16 && k < sizeof(list)) {
			k += (size_t)snprintf(list + k, sizeof(list) - k, "%s%d", shown ? ", " : "",
					      r);
			shown++;
		}
	}
	if (miss > shown)
		snprintf(list + (k < sizeof(list) ? k : sizeof(list) - 1),
			 sizeof(list) - (k < sizeof(list) ? k : sizeof(list) - 1), " and %d more",
			 miss - shown);
	bp_errorf(err, "%s %s of %d never connected to the rendezvous at %s:%d within %g s",
		  miss > 1 ? "ranks" : "rank", list, s->o->world, s->o->host, s->o->port,
		  s->o->timeout_s);
}

static int serve(struct server *s, const void *blob, size_t len, struct bp_error *err)
{
	const struct bp_rdv_opts *o = s->o;
	struct pollfd *p = NULL;
	size_t pcap = 0;
	int rc = -1, refused = 0; /* err holds the first refusal */
	double until = s->deadline;
	while (s->nhello + s->nrefused < o->world - 1) {
		double left = until - now_s();
		if (left <= 0) {
			if (refused) /* the ranks that came hear the refusal; the rest time out */
				goto out;
			missing_ranks(s, err);
			rc = BP_EXEC_TIMEOUT;
			goto out;
		}
		if (pcap < s->n + 1) {
			struct pollfd *np = bp_realloc_array(p, s->n + 16, sizeof(*np), err);
			if (!np)
				goto out;
			p = np;
			pcap = s->n + 16;
		}
		size_t np_ = 0;
		p[np_++] = (struct pollfd){s->lfd, POLLIN, 0};
		for (size_t i = 0; i < s->n; i++)
			if (!s->c[i].hello && !s->c[i].refused)
				p[np_++] = (struct pollfd){s->c[i].fd, POLLIN, 0};
		int r = poll(p, (nfds_t)np_, left > 1e6 ? 1000000000 : (int)(left * 1e3) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			if (!refused)
				bp_errorf(err, "rendezvous: poll: %s", strerror(errno));
			goto out;
		}
		/* Conns first (their indices match p[1..]), then new ones. A rank whose hello
		 * is refused (another plan or world, a rank twice) is kept for the error reply;
		 * rank 0 goes on gathering the others for a while, then tells all of them the
		 * first refusal. A stranger fails the rendezvous at once. */
		size_t j = 1;
		for (size_t i = 0; i < s->n && j < np_; i++) {
			if (s->c[i].hello || s->c[i].refused)
				continue;
			short re = p[j++].revents;
			struct bp_error e2 = {""};
			if (!re || read_conn(s, i, refused ? &e2 : err) == 0)
				continue;
			s->c[i].refused = 1;
			if (s->c[i].got < HDR_LEN) { /* not a rank's hello: a stranger, a peer
						      * that left: the port is wrong, fail now */
				if (!refused)
					goto out;
				continue;
			}
			s->nrefused++;
			if (!refused) {
				refused = 1;
				double t = now_s() + REFUSAL_WAIT_S;
				until = t < s->deadline ? t : s->deadline;
			}
		}
		if (p[0].revents & POLLIN) {
			struct bp_error e2 = {""};
			if (accept_all(s, refused ? &e2 : err) < 0 && !refused)
				goto out;
		}
	}
	if (refused)
		goto out;
	/* Everyone is here: the blob to each, in rank order. */
	unsigned char b[HDR_LEN];
	struct hdr h;
	hdr_fill(&h, o, T_OK, (uint32_t)len);
	hdr_pack(&h, b);
	for (int r = 1; r < o->world; r++) {
		struct conn *c = &s->c[s->seen[r]];
		int w = write_all(c->fd, b, sizeof(b), s->deadline);
		if (w == 0 && len > 0)
			w = write_all(c->fd, blob, len, s->deadline);
		if (w != 0) {
			/* Ranks before r have the blob and go on; they will notice later. */
			bp_errorf(err, "cannot send the rendezvous answer to rank %d (%s at %s): %s",
				  r, c->self, c->addr,
				  w == IO_TIMEOUT ? "timed out" : strerror(errno));
			rc = w == IO_TIMEOUT ? BP_EXEC_TIMEOUT : -1;
			goto out;
		}
	}
	rc = 0;
out:
	free(p);
	if (rc != 0)
		send_errors(s, rc == BP_EXEC_TIMEOUT ? T_TIMEOUT : T_ERROR, err->text);
	return rc;
}

static int rank0(const struct bp_rdv_opts *o, const void *blob, size_t len, double deadline,
		 struct bp_error *err)
{
	struct server s;
	int rc = -1, one = 1;
	memset(&s, 0, sizeof(s));
	s.o = o;
	s.deadline = deadline;
	s.lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (s.lfd < 0)
		return bp_errorf(err, "rendezvous: socket: %s", strerror(errno));
	s.seen = bp_calloc((size_t)o->world, sizeof(int), err);
	if (!s.seen)
		goto out;
	for (int r = 0; r < o->world; r++)
		s.seen[r] = -1;
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	sa.sin_port = htons((uint16_t)o->port);
	/* SO_REUSEADDR: a previous run's connections in TIME_WAIT must not block the port. */
	if (setsockopt(s.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(s.lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(s.lfd, SOMAXCONN) < 0 || set_nonblock(s.lfd) < 0) {
		bp_errorf(err, "cannot listen on port %d for the rendezvous: %s", o->port,
			  strerror(errno));
		goto out;
	}
	rc = serve(&s, blob, len, err);
out:
	for (size_t i = 0; i < s.n; i++)
		close(s.c[i].fd);
	free(s.c);
	free(s.seen);
	close(s.lfd);
	return rc;
}

/* ---- ranks > 0 ---- */

static int retryable(int e)
{
	return e == ECONNREFUSED || e == ECONNRESET || e == ETIMEDOUT || e == EHOSTUNREACH ||
	       e == ENETUNREACH || e == EAGAIN || e == ECONNABORTED;
}

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Connects to rank 0, retrying while it is not up yet. Returns the fd, or -1 / timeout with
 * err (*rc gets which). */
static int dial(const struct bp_rdv_opts *o, double deadline, int *rc, struct bp_error *err)
{
	struct addrinfo hints, *ai = NULL;
	char port[16];
	double backoff = 0.01;
	int last = 0;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(port, sizeof(port), "%d", o->port);
	int g = getaddrinfo(o->host, port, &hints, &ai);
	if (g != 0) {
		*rc = -1;
		bp_errorf(err, "cannot resolve the rendezvous host '%s': %s", o->host,
			  g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
		return -1;
	}
	for (;;) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || set_nonblock(fd) < 0) {
			*rc = -1;
			bp_errorf(err, "rendezvous: socket: %s", strerror(errno));
			if (fd >= 0)
				close(fd);
			break;
		}
		int e = 0;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			e = errno;
			if (e == EINPROGRESS || e == EINTR) {
				int r = wait_fd(fd, POLLOUT, deadline);
				socklen_t sl = sizeof(e);
				if (r == 0)
					e = ETIMEDOUT;
				else if (r < 0)
					e = errno;
				else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) < 0)
					e = errno;
			}
		}
		if (e == 0) {
			int one = 1; /* the hello is one small write: send it now */
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			freeaddrinfo(ai);
			return fd;
		}
		close(fd);
		last = e;
		if (!retryable(e)) {
			*rc = -1;
			bp_errorf(err, "cannot connect to rank 0 at %s:%d: %s", o->host, o->port,
				  strerror(e));
			break;
		}
		double left = deadline - now_s();
		if (left <= 0) {
			*rc = BP_EXEC_TIMEOUT;
			bp_errorf(err, "rank 0 at %s:%d did not answer within %g s (%s)", o->host,
				  o->port, o->timeout_s, strerror(last));
			break;
		}
		/* Rank 0 may not be listening yet: back off 10 ms, doubling up to 0.5 s. */
		sleep_s(backoff < left ? backoff : left);
		backoff = backoff * 2 > 0.5 ? 0.5 : backoff * 2;
	}
	freeaddrinfo(ai);
	return -1;
}

static int io_fail(const struct bp_rdv_opts *o, int io, const char *doing, struct bp_error *err)
{
	if (io == IO_TIMEOUT) {
		bp_errorf(err, "rank 0 at %s:%d did not answer within %g s (connected; %s)",
			  o->host, o->port, o->timeout_s, doing);
		return BP_EXEC_TIMEOUT;
	}
	return bp_errorf(err, "rank 0 at %s:%d %s (%s)", o->host, o->port,
			 io == IO_EOF ? "closed the connection without an answer"
				      : "broke the connection",
			 io == IO_EOF ? doing : strerror(errno));
}

static int rank_n(const struct bp_rdv_opts *o, void *blob, size_t *len, size_t cap,
		  double deadline, struct bp_error *err)
{
	unsigned char b[HDR_LEN];
	struct hdr h;
	int rc = -1, io;
	int fd = dial(o, deadline, &rc, err);
	if (fd < 0)
		return rc;
	/* Rank 0 is listening, so it started before now and gives up (telling everyone why) at
	 * the latest timeout_s from now: wait that long plus a grace for its answer, so a rank
	 * that started earlier than rank 0 hears rank 0's reason instead of timing out alone. */
	double reply = now_s() + o->timeout_s + ERROR_GRACE_S;
	if (reply > deadline)
		deadline = reply;
	hdr_fill(&h, o, T_HELLO, 0);
	hdr_pack(&h, b);
	if ((io = write_all(fd, b, sizeof(b), deadline)) != 0) {
		rc = io_fail(o, io, "sending the hello", err);
		goto out;
	}
	if ((io = read_all(fd, b, sizeof(b), deadline)) != 0) {
		rc = io_fail(o, io, "waiting for the other ranks", err);
		goto out;
	}
	hdr_unpack(b, &h);
	if (h.magic != MAGIC || h.version != VERSION) {
		rc = bp_errorf(err, "%s:%d answered the rendezvous with something else: is another "
			       "program or balexec version on that port?", o->host, o->port);
		goto out;
	}
	if (h.type == T_ERROR || h.type == T_TIMEOUT) {
		char text[MAX_TEXT + 1];
		size_t n = h.len > MAX_TEXT ? MAX_TEXT : h.len;
		if ((io = read_all(fd, text, n, deadline)) != 0) {
			rc = io_fail(o, io, "reading its error", err);
			goto out;
		}
		text[n] = 0;
		bp_errorf(err, "%s", text);
		rc = h.type == T_TIMEOUT ? BP_EXEC_TIMEOUT : -1;
		goto out;
	}
	if (h.type != T_OK) {
		rc = bp_errorf(err, "rank 0 at %s:%d sent a rendezvous message of type %u",
			       o->host, o->port, (unsigned)h.type);
		goto out;
	}
	if (h.len > cap || h.len > BP_RDV_MAX_BLOB) {
		rc = bp_errorf(err, "the rendezvous blob of %u bytes exceeds the %zu expected",
			       h.len, cap < BP_RDV_MAX_BLOB ? cap : (size_t)BP_RDV_MAX_BLOB);
		goto out;
	}
	if (h.len > 0 && (io = read_all(fd, blob, h.len, deadline)) != 0) {
		rc = io_fail(o, io, "reading the blob", err);
		goto out;
	}
	*len = h.len;
	rc = 0;
out:
	close(fd);
	return rc;
}

int bp_rendezvous(const struct bp_rdv_opts *o, void *blob, size_t *len, size_t cap,
		  struct bp_error *err)
{
	double t0 = now_s();
	if (!o->host || !o->host[0])
		return bp_errorf(err, "rendezvous: no host for rank 0");
	if (o->port < 1 || o->port > 65535)
		return bp_errorf(err, "rendezvous: port %d is outside 1..65535", o->port);
	if (o->world < 1 || o->rank < 0 || o->rank >= o->world)
		return bp_errorf(err, "rendezvous: rank %d is outside the world of %d", o->rank,
				 o->world);
	if (!(o->timeout_s > 0) || o->timeout_s > 1e7)
		return bp_errorf(err, "rendezvous: bad timeout %g s", o->timeout_s);
	if (o->check && strlen(o->check) > BP_RDV_MAX_CHECK)
		return bp_errorf(err, "rendezvous: the check string has %zu characters, more than "
				 "%d", strlen(o->check), BP_RDV_MAX_CHECK);
	if (o->rank == 0 && (*len > BP_RDV_MAX_BLOB || (*len > 0 && !blob)))
		return bp_errorf(err, "rendezvous: a blob of %zu bytes, more than %d", *len,
				 BP_RDV_MAX_BLOB);
	if (o->world == 1)
		return 0;
	double deadline = t0 + o->timeout_s;
	if (o->rank == 0)
		return rank0(o, blob, *len, deadline, err);
	return rank_n(o, blob, len, cap, deadline, err);
}

/* ---- Slurm strings ---- */

/* Digits at s: how many (0: none); *v their value, saturated. */
static size_t digits(const char *s, unsigned long long *v)
{
	size_t k = 0;
	*v = 0;
	while (s[k] >= '0' && s[k] <= '9') {
		if (*v < 1000000000000ULL)
			*v = *v * 10 + (unsigned long long)(s[k] - '0');
		k++;
	}
	return k;
}

static int host_bad(const char *list, struct bp_error *err, const char *why)
{
	return bp_errorf(err, "malformed Slurm hostlist '%s': %s", list, why);
}

int bp_slurm_first_host(const char *list, char *out, size_t n, struct bp_error *err)
{
	size_t k = 0;          /* bytes of out written */
	int item = 0;          /* index of the current comma-separated host expression */
	size_t item_len = 0;   /* characters (or brackets) in it */
	if (!list || !list[0])
		return bp_errorf(err, "empty Slurm hostlist");
	if (n == 0)
		return bp_errorf(err, "no room for the first host of '%s'", list);
	for (const char *p = list;; p++) {
		if (*p == 0 || *p == ',') {
			if (item_len == 0)
				return host_bad(list, err, "an empty host name");
			if (*p == 0)
				break;
			item++;
			item_len = 0;
			continue;
		}
		if (*p == ']')
			return host_bad(list, err, "']' without '['");
		if (*p == '[') {
			/* A range list: a[-b] (,a[-b])*, digits only, a <= b. */
			const char *q = p + 1;
			int first = 1;
			for (;;) {
				unsigned long long lo, hi;
				size_t dl = digits(q, &lo);
				if (dl == 0)
					return host_bad(list, err, *q == '[' ? "nested '['"
								  : *q == 0  ? "'[' without ']'"
									     : "a range that is not a "
									       "number");
				if (first && item == 0) {
					if (k + dl >= n)
						return bp_errorf(err, "the first host of '%s' is "
								 "longer than %zu characters",
								 list, n - 1);
					memcpy(out + k, q, dl);
					k += dl;
				}
				first = 0;
				q += dl;
				if (*q == '-') {
					size_t dh = digits(q + 1, &hi);
					if (dh == 0)
						return host_bad(list, err, "a range without its end");
					if (hi < lo)
						return host_bad(list, err, "a descending range");
					q += 1 + dh;
				}
				if (*q == ',') {
					q++;
					continue;
				}
				if (*q == ']')
					break;
				return host_bad(list, err, *q == 0 ? "'[' without ']'"
							   : *q == '[' ? "nested '['"
								       : "a range that is not a number");
			}
			p = q; /* at ']' */
			item_len++;
			continue;
		}
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return host_bad(list, err, "a space or control character");
		if (item == 0) {
			if (k + 1 >= n)
				return bp_errorf(err, "the first host of '%s' is longer than %zu "
						 "characters", list, n - 1);
			out[k++] = *p;
		}
		item_len++;
	}
	out[k] = 0;
	return 0;
}

int bp_slurm_first_port(const char *ports, int *port, struct bp_error *err)
{
	const char *p = ports;
	int first = -1;
	if (!p || !p[0])
		return bp_errorf(err, "empty SLURM_STEP_RESV_PORTS");
	for (;;) {
		unsigned long long lo, hi;
		size_t dl = digits(p, &lo);
		if (dl == 0 || lo < 1 || lo > 65535)
			goto bad;
		p += dl;
		hi = lo;
		if (*p == '-') {
			size_t dh = digits(p + 1, &hi);
			if (dh == 0 || hi < lo || hi > 65535)
				goto bad;
			p += 1 + dh;
		}
		if (first < 0)
			first = (int)lo;
		if (*p == 0)
			break;
		if (*p != ',')
			goto bad;
		p++;
	}
	*port = first;
	return 0;
bad:
	return bp_errorf(err, "malformed SLURM_STEP_RESV_PORTS '%s': expected ports (1..65535) "
			 "and ranges like 12000-12001, comma-separated", ports);
}
