/* test_rendezvous.c: executor/rendezvous.c. Each rank is a fork()ed process on 127.0.0.1 and
 * reports its result through a pipe: a world that meets, clients that start before rank 0,
 * a rank with another check string, a duplicate rank, a stranger on the port, a missing
 * rank (rank 0 times out naming it, the others hear it at once), no rank 0 at all, and the
 * Slurm hostlist and port parsers. About 2.5 s in all. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "rendezvous.h"

#define MAXR 8

struct result {
	int rc;
	size_t len;
	char blob[64];
	char err[256];
	double secs;
};

struct rank_spec {
	int present;      /* 0: this rank never runs */
	int rank, world;  /* as the process claims */
	double delay_s;   /* start late */
	double timeout_s;
	const char *check;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A port nobody listens on now: bind port 0, read it back, close. */
static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		perror("free_port");
		exit(2);
	}
	close(fd);
	return ntohs(sa.sin_port);
}

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
}

static const char BLOB[] = "nccl-unique-id-stand-in";

/* Runs ranks specs[0..n) as processes; res[i] gets what spec i's process returned. */
static void run(const struct rank_spec *specs, int n, int port, struct result *res)
{
	int fds[MAXR][2];
	pid_t pid[MAXR];
	for (int i = 0; i < n; i++) {
		memset(&res[i], 0, sizeof(res[i]));
		res[i].rc = 99;
		pid[i] = -1;
		if (!specs[i].present)
			continue;
		if (pipe(fds[i]) < 0) {
			perror("pipe");
			exit(2);
		}
		pid[i] = fork();
		if (pid[i] < 0) {
			perror("fork");
			exit(2);
		}
		if (pid[i] == 0) {
			struct result r;
			struct bp_error err = {""};
			char self[32];
			memset(&r, 0, sizeof(r));
			snprintf(self, sizeof(self), "host%d", specs[i].rank);
			struct bp_rdv_opts o = {"127.0.0.1", port, specs[i].rank, specs[i].world,
						specs[i].timeout_s, specs[i].check, self};
			sleep_s(specs[i].delay_s);
			double t0 = now_s();
			if (specs[i].rank == 0) {
				memcpy(r.blob, BLOB, sizeof(BLOB));
				r.len = sizeof(BLOB);
			}
			r.rc = bp_rendezvous(&o, r.blob, &r.len, sizeof(r.blob), &err);
			r.secs = now_s() - t0;
			snprintf(r.err, sizeof(r.err), "%s", err.text);
			if (write(fds[i][1], &r, sizeof(r)) != (ssize_t)sizeof(r))
				_exit(2);
			_exit(0);
		}
		close(fds[i][1]);
	}
	for (int i = 0; i < n; i++) {
		if (pid[i] < 0)
			continue;
		int st = 0;
		if (read(fds[i][0], &res[i], sizeof(res[i])) != (ssize_t)sizeof(res[i]))
			res[i].rc = 98;
		close(fds[i][0]);
		waitpid(pid[i], &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

static int has(const char *s, const char *sub)
{
	if (!strstr(s, sub)) {
		fprintf(stderr, "  '%s' lacks '%s'\n", s, sub);
		return 0;
	}
	return 1;
}

static void test_world(void)
{
	struct rank_spec s[4];
	struct result r[4];
	int port = free_port();
	for (int i = 0; i < 4; i++)
		s[i] = (struct rank_spec){1, i, 4, 0, 5.0, "sha:0:3"};
	run(s, 4, port, r);
	for (int i = 0; i < 4; i++) {
		CHECK(r[i].rc == 0);
		CHECK(r[i].len == sizeof(BLOB));
		CHECK(!memcmp(r[i].blob, BLOB, sizeof(BLOB)));
		CHECK(r[i].secs < 2);
	}
}

/* Clients first: they are refused and retry until rank 0 listens. */
static void test_late_server(void)
{
	struct rank_spec s[3];
	struct result r[3];
	int port = free_port();
	s[0] = (struct rank_spec){1, 0, 3, 0.3, 3.0, "x"};
	s[1] = (struct rank_spec){1, 1, 3, 0, 3.0, "x"};
	s[2] = (struct rank_spec){1, 2, 3, 0.1, 3.0, "x"};
	run(s, 3, port, r);
	for (int i = 0; i < 3; i++) {
		CHECK(r[i].rc == 0);
		CHECK(!memcmp(r[i].blob, BLOB, sizeof(BLOB)));
	}
	CHECK(r[1].secs >= 0.25 && r[1].secs < 2.0);
}

static void test_check_mismatch(void)
{
	struct rank_spec s[3];
	struct result r[3];
	int port = free_port();
	s[0] = (struct rank_spec){1, 0, 3, 0, 3.0, "planA:0:3"};
	s[1] = (struct rank_spec){1, 1, 3, 0, 3.0, "planA:0:3"};
	s[2] = (struct rank_spec){1, 2, 3, 0.05, 3.0, "planB:0:3"};
	run(s, 3, port, r);
	CHECK(r[0].rc == -1);
	CHECK(has(r[0].err, "rank 2 (host2) disagrees"));
	CHECK(has(r[0].err, "'planB:0:3' vs 'planA:0:3'"));
	CHECK(r[2].rc == -1);
	CHECK(has(r[2].err, "rank 2 (host2) disagrees"));
	/* Rank 1 had said hello: it hears the reason too, at once. */
	CHECK(r[1].rc == -1);
	CHECK(has(r[1].err, "rank 2"));
	for (int i = 0; i < 3; i++)
		CHECK(r[i].secs < 1.5);
}

/* Issue 27 item 15: a rank with another plan comes first and the others after rank 0 has
 * refused it; every rank still hears the refusal (none "did not answer"), with one code. */
static void test_mismatch_first(void)
{
	struct rank_spec s[5];
	struct result r[5];
	int port = free_port();
	s[0] = (struct rank_spec){1, 0, 5, 0, 6.0, "planA:0:3"};
	s[1] = (struct rank_spec){1, 1, 5, 0.05, 6.0, "planB:0:3"};
	s[2] = (struct rank_spec){1, 2, 5, 0.4, 6.0, "planA:0:3"};
	s[3] = (struct rank_spec){1, 3, 5, 0.6, 6.0, "planA:0:3"};
	s[4] = (struct rank_spec){1, 4, 5, 0.8, 6.0, "planA:0:3"};
	run(s, 5, port, r);
	for (int i = 0; i < 5; i++) {
		CHECK(r[i].rc == -1);
		CHECK(has(r[i].err, "rank 1 (host1) disagrees"));
		CHECK(!has(r[i].err, "did not answer"));
	}
}

static void test_world_mismatch(void)
{
	struct rank_spec s[2];
	struct result r[2];
	int port = free_port();
	s[0] = (struct rank_spec){1, 0, 2, 0, 3.0, "x"};
	s[1] = (struct rank_spec){1, 1, 5, 0, 3.0, "x"};
	run(s, 2, port, r);
	CHECK(r[0].rc == -1);
	CHECK(has(r[0].err, "rank 1 (host1) was started with a world of 5"));
	CHECK(r[1].rc == -1);
	CHECK(has(r[1].err, "world of 5"));
}

static void test_duplicate(void)
{
	struct rank_spec s[3];
	struct result r[3];
	int port = free_port();
	s[0] = (struct rank_spec){1, 0, 3, 0, 3.0, "x"};
	s[1] = (struct rank_spec){1, 1, 3, 0, 3.0, "x"};
	s[2] = (struct rank_spec){1, 1, 3, 0.05, 3.0, "x"};
	run(s, 3, port, r);
	CHECK(r[0].rc == -1);
	CHECK(has(r[0].err, "rank 1 connected twice"));
	CHECK(r[1].rc == -1 && r[2].rc == -1);
	CHECK(has(r[2].err, "connected twice"));
}

/* A rank never comes: rank 0 times out naming it; the others hear that at once, long before
 * their own timeout. */
static void test_missing(void)
{
	struct rank_spec s[4];
	struct result r[4];
	int port = free_port();
	s[0] = (struct rank_spec){1, 0, 4, 0, 0.6, "x"};
	s[1] = (struct rank_spec){1, 1, 4, 0, 4.0, "x"};
	s[2] = (struct rank_spec){1, 2, 4, 0, 4.0, "x"};
	s[3] = (struct rank_spec){0, 3, 4, 0, 4.0, "x"};
	run(s, 4, port, r);
	CHECK(r[0].rc == BP_EXEC_TIMEOUT);
	CHECK(has(r[0].err, "rank 3 of 4 never connected to the rendezvous at 127.0.0.1:"));
	CHECK(r[0].secs >= 0.55 && r[0].secs < 1.5);
	for (int i = 1; i < 3; i++) {
		CHECK(r[i].rc == BP_EXEC_TIMEOUT);
		CHECK(has(r[i].err, "rank 3 of 4 never connected"));
		CHECK(r[i].secs < 1.5);
	}
}

static void test_two_missing(void)
{
	struct rank_spec s[4];
	struct result r[4];
	int port = free_port();
	s[0] = (struct rank_spec){1, 0, 4, 0, 0.3, "x"};
	s[1] = (struct rank_spec){0, 1, 4, 0, 1.0, "x"};
	s[2] = (struct rank_spec){1, 2, 4, 0, 1.0, "x"};
	s[3] = (struct rank_spec){0, 3, 4, 0, 1.0, "x"};
	run(s, 4, port, r);
	CHECK(r[0].rc == BP_EXEC_TIMEOUT);
	CHECK(has(r[0].err, "ranks 1, 3 of 4 never connected"));
}

static void test_no_server(void)
{
	struct rank_spec s[2];
	struct result r[2];
	int port = free_port();
	char want[64];
	s[0] = (struct rank_spec){0, 0, 2, 0, 0.4, "x"};
	s[1] = (struct rank_spec){1, 1, 2, 0, 0.4, "x"};
	run(s, 2, port, r);
	snprintf(want, sizeof(want), "rank 0 at 127.0.0.1:%d did not answer", port);
	CHECK(r[1].rc == BP_EXEC_TIMEOUT);
	CHECK(has(r[1].err, want));
	CHECK(r[1].secs >= 0.35 && r[1].secs < 1.2);
}

/* Something that is not a balexec rank connects and talks: rank 0 names its address. */
static void test_stranger(void)
{
	struct rank_spec s[3];
	struct result r[3];
	int port = free_port();
	s[0] = (struct rank_spec){1, 0, 3, 0, 3.0, "x"};
	s[1] = (struct rank_spec){1, 1, 3, 0, 3.0, "x"};
	s[2] = (struct rank_spec){0, 2, 3, 0, 3.0, "x"};
	pid_t p = fork();
	if (p == 0) {
		sleep_s(0.15);
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sa;
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_port = htons((uint16_t)port);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			const char g[] = "GET / HTTP/1.0\r\n\r\n";
			if (write(fd, g, sizeof(g) - 1) < 0)
				_exit(1);
			sleep_s(0.5); /* stays connected: rank 0 must not wait for more */
		}
		_exit(0);
	}
	run(s, 3, port, r);
	waitpid(p, NULL, 0);
	CHECK(r[0].rc == -1);
	CHECK(has(r[0].err, "127.0.0.1:"));
	CHECK(has(r[0].err, "is not a balexec rank"));
	CHECK(r[0].secs < 1.0);
	CHECK(r[1].rc == -1);
	CHECK(has(r[1].err, "is not a balexec rank"));
}

static void test_world_one(void)
{
	struct bp_error err = {""};
	char blob[8] = "abc";
	size_t len = 3;
	struct bp_rdv_opts o = {"no.such.host.invalid", 1, 0, 1, 1.0, "x", "me"};
	double t0 = now_s();
	CHECK(bp_rendezvous(&o, blob, &len, sizeof(blob), &err) == 0);
	CHECK(len == 3);
	CHECK(now_s() - t0 < 0.1);
	o.port = 0;
	CHECK(bp_rendezvous(&o, blob, &len, sizeof(blob), &err) == -1);
	CHECK(has(err.text, "port 0"));
	o.port = 1;
	o.rank = 1;
	CHECK(bp_rendezvous(&o, blob, &len, sizeof(blob), &err) == -1);
	CHECK(has(err.text, "outside the world"));
}

static void test_hostlist(void)
{
	struct {
		const char *in, *out;
	} ok[] = {
		{"node[01-04,07],gpu3", "node01"},
		{"gpu3", "gpu3"},
		{"gpu3,node[1-2]", "gpu3"},
		{"node[7,3-5]", "node7"},
		{"rack[1-2]-n[3,5]", "rack1-n3"},
		{"[10-12]x", "10x"},
		{"a.b-c_d", "a.b-c_d"},
		{"n[001]", "n001"},
	};
	const char *bad[] = {"", "node[01-04", "node]", "node[]", "node[a-b]", "node[05-03]",
			     "node[[1]]", ",node1", "node1,", "node1,,node2", "node[1-]",
			     "node[1,]", "no de", "node[1]x]"};
	struct bp_error err;
	char out[32];
	for (size_t i = 0; i < BP_ARRAY_LEN(ok); i++) {
		err.text[0] = 0;
		int rc = bp_slurm_first_host(ok[i].in, out, sizeof(out), &err);
		CHECK(rc == 0);
		if (rc == 0 && strcmp(out, ok[i].out)) {
			fprintf(stderr, "  '%s' -> '%s', want '%s'\n", ok[i].in, out, ok[i].out);
			CHECK(0);
		}
		if (rc)
			fprintf(stderr, "  '%s': %s\n", ok[i].in, err.text);
	}
	for (size_t i = 0; i < BP_ARRAY_LEN(bad); i++) {
		err.text[0] = 0;
		int rc = bp_slurm_first_host(bad[i], out, sizeof(out), &err);
		if (rc != -1)
			fprintf(stderr, "  '%s' accepted as '%s'\n", bad[i], out);
		CHECK(rc == -1);
		CHECK(err.text[0] != 0);
	}
	CHECK(bp_slurm_first_host("node[01-04]", out, 7, &err) == 0 && !strcmp(out, "node01"));
	CHECK(bp_slurm_first_host("node[01-04]", out, 6, &err) == -1);
	CHECK(has(err.text, "longer than 5"));
	CHECK(bp_slurm_first_host("node[01-04", out, sizeof(out), &err) == -1);
	CHECK(has(err.text, "malformed Slurm hostlist 'node[01-04': '[' without ']'"));
}

static void test_ports(void)
{
	struct {
		const char *in;
		int port;
	} ok[] = {{"12000-12001", 12000}, {"12005", 12005}, {"12000-12001,12010", 12000},
		  {"1", 1}, {"65535", 65535}, {"9,8", 9}};
	const char *bad[] = {"", "abc", "12000-", "-5", "70000", "12001-12000", "0",
			     "12000,", "12000 ", "1-65536", "12000;12001"};
	struct bp_error err;
	for (size_t i = 0; i < BP_ARRAY_LEN(ok); i++) {
		int p = -1;
		CHECK(bp_slurm_first_port(ok[i].in, &p, &err) == 0);
		CHECK(p == ok[i].port);
	}
	for (size_t i = 0; i < BP_ARRAY_LEN(bad); i++) {
		int p = -1;
		err.text[0] = 0;
		CHECK(bp_slurm_first_port(bad[i], &p, &err) == -1);
		CHECK(err.text[0] != 0);
	}
	CHECK(bp_slurm_first_port("x1", &(int){0}, &err) == -1);
	CHECK(has(err.text, "malformed SLURM_STEP_RESV_PORTS 'x1'"));
}

int main(void)
{
	test_hostlist();
	test_ports();
	test_world_one();
	test_world();
	test_late_server();
	test_check_mismatch();
	test_mismatch_first();
	test_world_mismatch();
	test_duplicate();
	test_missing();
	test_two_missing();
	test_no_server();
	test_stranger();
	return CHECK_DONE();
}
