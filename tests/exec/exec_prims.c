/* exec_prims.c: the host backend's communication primitives checked with contents, one
 * process per rank under srun (tests/slurm/test-exec-primitives). The engine sends zeros
 * and never reads a result (only sizes matter to a replay), so a backend that moved the
 * wrong bytes to the wrong place would pass every replay; this program moves seeded bytes
 * and checks every received one.
 *
 * Groups: the world, and one of two groups of unequal size by rank parity (a rank makes
 * the group it is in, as the engine does). Per group and round: a variable all-to-all whose
 * counts differ per (sender, receiver) pair, zero for some, with holes between the
 * receive slots; an all-gather; a reduce-scatter and an all-reduce with MPI_BOR (each rank
 * contributes one bit). Several rounds are issued before one sync, so calls are in flight
 * together (the stream-ordered contract of engine.h: results are in place at sync), and
 * more than the host's 32 slots so the oldest is retired to make room.
 *
 * usage: exec_prims [ROUNDS] (rank and world from SLURM_PROCID / SLURM_NTASKS); prints
 * "rank R: N checks" and exits 0, or names the first wrong byte and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define MAXR 64
#define SLOT 512 /* receive slot per peer: counts stay below, the rest is a hole */

static unsigned char pattern(int src, int dst, int round, size_t off)
{
	return (unsigned char)(src * 131 + dst * 31 + round * 7 + (int)off * 3 + 1);
}

/* Bytes src sends dst in round: 0 for some pairs, up to SLOT - 1. */
static size_t count(int src, int dst, int round)
{
	unsigned v = (unsigned)(src * 7 + dst * 13 + round * 5) % 11u;
	return v == 3 ? 0 : (size_t)v * 41 + (size_t)(src + dst) % 5;
}

static int fails;

static void expect(int ok, const char *what, int rank, int peer, int round)
{
	if (!ok && fails++ < 5)
		fprintf(stderr, "rank %d: wrong %s (peer or byte %d, round %d)\n", rank, what, peer,
			round);
}

int main(int argc, char **argv)
{
	const struct bp_backend *be = bp_backend_find("host");
	struct bp_error err;
	int rounds = argc > 1 ? atoi(argv[1]) : 12;
	const char *pr = getenv("SLURM_PROCID"), *pw = getenv("SLURM_NTASKS");
	if (!be || !pr || !pw || rounds < 1 || rounds > 100) {
		fprintf(stderr, "usage: exec_prims [ROUNDS 1..100] under srun (needs the host "
				"backend)\n");
		return 2;
	}
	struct bp_backend_args a = {atoi(pr), atoi(pw), -1, 30.0, NULL, 0, NULL};
	void *st = NULL;
	int rank = -1, world = -1;
	char host[64];
	if (be->init(&st, &a, &rank, &world, host, sizeof(host), &err) < 0) {
		fprintf(stderr, "init: %s\n", err.text);
		return 1;
	}
	if (world > MAXR || world < 2) {
		fprintf(stderr, "world %d outside 2..%d\n", world, MAXR);
		be->abort(st, 1);
	}
	int all[MAXR], par[MAXR], npar = 0;
	for (int r = 0; r < world; r++) {
		all[r] = r;
		if (r % 2 == rank % 2)
			par[npar++] = r;
	}
	void *g[2] = {NULL, NULL};
	int *members[2] = {all, par}, n[2] = {world, npar};
	if (be->group_create(st, all, world, &g[0], &err) < 0 ||
	    be->group_create(st, par, npar, &g[1], &err) < 0) {
		fprintf(stderr, "rank %d: groups: %s\n", rank, err.text);
		be->abort(st, 1);
	}
	/* per round and group: all-to-all in/out, all-gather in/out, reduce-scatter in/out,
	 * all-reduce buffer, counts */
	size_t nb = (size_t)rounds * 2;
	unsigned char(*in)[MAXR * SLOT] = calloc(nb, sizeof(*in));
	unsigned char(*out)[MAXR * SLOT] = calloc(nb, sizeof(*out));
	unsigned char(*gin)[16] = calloc(nb, sizeof(*gin));
	unsigned char(*gout)[MAXR * 16] = calloc(nb, sizeof(*gout));
	unsigned char(*rsin)[MAXR * 8] = calloc(nb, sizeof(*rsin));
	unsigned char(*rsout)[8] = calloc(nb, sizeof(*rsout));
	unsigned char(*ar)[8] = calloc(nb, sizeof(*ar));
	size_t(*cnt)[4][MAXR] = calloc(nb, sizeof(*cnt));
	if (!in || !out || !gin || !gout || !rsin || !rsout || !ar || !cnt) {
		fprintf(stderr, "out of memory\n");
		be->abort(st, 1);
	}
	struct bp_wait w = {"test", -1, -1, -1};
	for (int round = 0; round < rounds; round++)
		for (int k = 0; k < 2; k++) {
			size_t b = (size_t)round * 2 + (size_t)k, so = 0;
			int me = 0;
			for (int i = 0; i < n[k]; i++)
				if (members[k][i] == rank)
					me = i;
			for (int i = 0; i < n[k]; i++) {
				int peer = members[k][i];
				size_t c = count(rank, peer, round + k), r = count(peer, rank, round + k);
				cnt[b][0][i] = c;
				cnt[b][1][i] = so;
				cnt[b][2][i] = r;
				cnt[b][3][i] = (size_t)i * SLOT; /* holes between the slots */
				for (size_t o = 0; o < c; o++)
					in[b][so + o] = pattern(rank, peer, round + k, o);
				so += c;
			}
			memset(out[b], 0xee, sizeof(out[b]));
			struct bp_a2a x = {g[k], in[b], out[b], cnt[b][0], cnt[b][1], cnt[b][2],
					   cnt[b][3], &w};
			for (size_t o = 0; o < 16; o++)
				gin[b][o] = pattern(rank, -1, round + k, o);
			for (int i = 0; i < n[k]; i++)
				for (size_t o = 0; o < 8; o++) /* for member i: bit me of byte o */
					rsin[b][(size_t)i * 8 + o] =
						(unsigned char)(((o + (size_t)i) % 3 != 0) << (me % 8));
			memset(ar[b], 0, 8);
			ar[b][me / 8 % 8] = (unsigned char)(1u << (me % 8));
			if (be->alltoallv(st, &x, &err) != 0 ||
			    be->allgather(st, g[k], gin[b], gout[b], 16, &w, &err) != 0 ||
			    be->reducescatter(st, g[k], rsin[b], rsout[b], 8, &w, &err) != 0 ||
			    be->allreduce(st, g[k], ar[b], 8, &w, &err) != 0) {
				fprintf(stderr, "rank %d: %s\n", rank, err.text);
				be->abort(st, 1);
			}
			(void)me;
		}
	if (be->sync(st, &w, &err) != 0) {
		fprintf(stderr, "rank %d: sync: %s\n", rank, err.text);
		be->abort(st, 1);
	}
	long checks = 0;
	for (int round = 0; round < rounds; round++)
		for (int k = 0; k < 2; k++) {
			size_t b = (size_t)round * 2 + (size_t)k;
			int me = 0;
			for (int i = 0; i < n[k]; i++)
				if (members[k][i] == rank)
					me = i;
			for (int i = 0; i < n[k]; i++) {
				int peer = members[k][i];
				size_t r = count(peer, rank, round + k);
				expect(cnt[b][2][i] == r, "count", rank, peer, round);
				for (size_t o = 0; o < SLOT; o++, checks++) {
					unsigned char v = out[b][(size_t)i * SLOT + o];
					if (o < r)
						expect(v == pattern(peer, rank, round + k, o),
						       "all-to-all byte", rank, peer, round);
					else
						expect(v == 0xee, "all-to-all hole", rank, peer, round);
				}
				for (size_t o = 0; o < 16; o++, checks++)
					expect(gout[b][(size_t)i * 16 + o] ==
						       pattern(peer, -1, round + k, o),
					       "all-gather byte", rank, peer, round);
			}
			for (size_t o = 0; o < 8; o++, checks++) {
				unsigned want = 0;
				for (int i = 0; i < n[k]; i++)
					if ((o + (size_t)me) % 3 != 0)
						want |= 1u << (i % 8);
				expect(rsout[b][o] == want, "reduce-scatter byte", rank, (int)o, round);
			}
			for (size_t o = 0; o < 8; o++, checks++) {
				unsigned want = 0;
				for (int i = 0; i < n[k]; i++)
					if ((size_t)(i / 8 % 8) == o)
						want |= 1u << (i % 8);
				expect(ar[b][o] == want, "all-reduce byte", rank, (int)o, round);
			}
		}
	for (int k = 0; k < 2; k++)
		be->group_free(st, g[k]);
	free(in);
	free(out);
	free(gin);
	free(gout);
	free(rsin);
	free(rsout);
	free(ar);
	free(cnt);
	if (fails)
		be->abort(st, 1);
	printf("rank %d: %ld checks\n", rank, checks);
	fflush(stdout);
	if (be->finalize(st, &err) < 0) {
		fprintf(stderr, "rank %d: %s\n", rank, err.text);
		return 1;
	}
	return 0;
}
