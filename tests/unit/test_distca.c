/* test_distca.c: DistCA's building blocks (blocks/ca_sched.h) against known answers (the
 * linear placement and K1-K6, what DistCA's public planner gives on the same small inputs)
 * and invariants: every query once with its whole causal prefix, the pair total kept by
 * planning, the non-resend servers' memory, the byte counts, App. A's bound and App. B's
 * closed forms, determinism; the resend and non-resend byte models on a hand-made plan; the
 * method's mode and its memory fallback. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "ca_sched.h"
#include "check.h"
#include "plan_same.h"
#include "jsonutil.h"
#include "method.h"
#include "predict.h"
#include "solve.h"
#include "ticks.h"
#include "validate.h"

/* Llama-3-8B in the code's element counts: Q hidden 4096, K and V 2 x 8 x 128. */
static const struct bp_ca_opts code_opts = {0.0, 1, BP_CA_COMM_CODE, 4096, 2048, 0, 0};

/* lists of document lengths, one list per rank ("world = number of lists"), ids 0, 1, ...
 * in order */
static int place(const int64_t *lens, size_t n, int nranks, int64_t budget,
		 struct bp_ca_placement *pl)
{
	int64_t doc[64];
	for (size_t i = 0; i < n; i++)
		doc[i] = (int64_t)i;
	struct bp_error err;
	int rc = bp_ca_place(doc, NULL, lens, n, nranks, budget, pl, &err);
	if (rc < 0)
		fprintf(stderr, "place: %s\n", err.text);
	return rc;
}

/* "[a,b)->s ..." for document doc's chunks, in query order */
static void listing(const struct bp_ca_placement *pl, int64_t doc, char *buf, size_t n)
{
	struct bp_ca_chunk *ch;
	size_t nc;
	struct bp_error err;
	buf[0] = 0;
	if (bp_ca_chunks(pl, &ch, &nc, &err) < 0)
		return;
	size_t at = 0;
	for (size_t i = 0; i < nc; i++)
		if (ch[i].doc == doc)
			at += (size_t)snprintf(buf + at, n - at, "%s[%lld,%lld)->%d", at ? " " : "",
					       (long long)ch[i].q0, (long long)ch[i].q1,
					       ch[i].server);
	free(ch);
}

static void loads(const struct bp_ca_placement *pl, int ns, double *l)
{
	memset(l, 0, (size_t)ns * sizeof(double));
	for (size_t i = 0; i < pl->nitems; i++)
		l[pl->items[i].server] += (double)bp_ca_item_units(&pl->items[i]);
}

/* Invariants 1 and 2: per document the chunks tile [0, L) once, each with its whole prefix
 * as context, and the pairs add up to L (L + 1) / 2. */
static void check_tiling(const struct bp_ca_placement *pl, const int64_t *lens, size_t n)
{
	struct bp_ca_chunk *ch;
	size_t nc;
	struct bp_error err;
	CHECK(bp_ca_chunks(pl, &ch, &nc, &err) == 0);
	size_t i = 0;
	for (size_t d = 0; d < n; d++) {
		int64_t pos = 0, pairs = 0;
		while (i < nc && ch[i].doc == (int64_t)d) {
			CHECK(ch[i].q0 == pos && ch[i].kv0 == 0);
			pairs += bp_ca_pairs(ch[i].q0, ch[i].q1);
			pos = ch[i].q1;
			i++;
		}
		CHECK(pos == lens[d]);
		CHECK(pairs == lens[d] * (lens[d] + 1) / 2);
	}
	CHECK(i == nc);
	free(ch);
}

struct kcase {
	const char *id;
	int64_t lens[32];
	size_t n;
	int ranks;
	int64_t budget;
	double eps;
	double before[4], after[4];
	const char *doc0;
};

static void run_case(const struct kcase *k)
{
	struct bp_ca_placement pl;
	struct bp_ca_result res;
	struct bp_error err;
	double l[4];
	char buf[512];
	CHECK(place(k->lens, k->n, k->ranks, k->budget, &pl) == 0);
	loads(&pl, k->ranks, l);
	for (int s = 0; s < k->ranks; s++)
		CHECK_NEAR(l[s], k->before[s], 0);
	struct bp_ca_opts o = code_opts;
	o.eps = k->eps;
	int64_t total = 0;
	for (int s = 0; s < k->ranks; s++)
		total += (int64_t)l[s];
	CHECK(bp_ca_schedule(&pl, k->ranks, &o, &res, l, &err) == 0);
	for (int s = 0; s < k->ranks; s++) {
		if (fabs(l[s] - k->after[s]) > 0)
			fprintf(stderr, "%s: server %d load %.0f, expected %.0f\n", k->id, s, l[s],
				k->after[s]);
		CHECK_NEAR(l[s], k->after[s], 0);
		total -= (int64_t)l[s];
	}
	CHECK(total == 0); /* invariant 2: planning keeps the total */
	listing(&pl, 0, buf, sizeof(buf));
	if (strcmp(buf, k->doc0))
		fprintf(stderr, "%s: doc 0 %s, expected %s\n", k->id, buf, k->doc0);
	CHECK(!strcmp(buf, k->doc0));
	check_tiling(&pl, k->lens, k->n);
	bp_ca_placement_release(&pl);
}

static void test_known_answers(void)
{
	static const struct kcase cases[] = {
		{"K1", {16, 4, 4, 4, 4}, 5, 2, 16, 0, {136, 40}, {102, 74},
		 "[0,6)->0 [6,8)->1 [8,10)->1 [10,16)->0"},
		{"K2", {8, 4, 4}, 3, 2, 8, 0, {36, 20}, {36, 20}, "[0,8)->0"},
		{"K3", {8, 8, 4, 4, 4, 4}, 6, 2, 16, 0, {72, 40}, {63, 49},
		 "[0,3)->0 [3,4)->1 [4,5)->1 [5,8)->0"},
		{"K4 eps 0.1", {1024, 896, 128, 896, 128, 896, 128}, 7, 4, 1024, 0.1,
		 {524800, 410112, 410112, 410112}, {524800, 410112, 410112, 410112},
		 "[0,1024)->0"},
		{"K4 eps 0", {1024, 896, 128, 896, 128, 896, 128}, 7, 4, 1024, 0,
		 {524800, 410112, 410112, 410112}, {441775, 437787, 437787, 437787},
		 "[0,431)->0 [431,458)->3 [458,485)->2 [485,512)->1 [512,539)->1 "
		 "[539,566)->2 [566,593)->3 [593,1024)->0"},
		{"K5", {16384, 8192, 8192, 4096, 4096, 4096, 4096, 2048, 2048, 2048, 2048, 2048,
			2048, 2048, 2048}, 15, 4, 16384, 0.1,
		 {134225920, 67117056, 33562624, 16785408},
		 {62934785, 67117056, 58729984, 62909183},
		 "[0,3841)->0 [3841,5377)->2 [5377,8192)->3 [8192,11007)->3 [11007,12543)->2 "
		 "[12543,16384)->0"},
		{"K6", {32, 8, 8, 4, 4, 4, 4}, 7, 4, 16, 0, {264, 264, 72, 40},
		 {165, 198, 138, 139},
		 "[0,5)->0 [5,8)->3 [8,14)->1 [14,16)->2 [16,18)->2 [18,24)->1 [24,27)->3 "
		 "[27,32)->0"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i]);
}

/* K4 at eps 0.1: the tolerance is one-sided (max/mean 1.196 > 1 + eps). */
static void test_one_sided(void)
{
	const int64_t lens[] = {1024, 896, 128, 896, 128, 896, 128};
	struct bp_ca_placement pl;
	struct bp_ca_result res;
	struct bp_error err;
	struct bp_ca_opts o = code_opts;
	o.eps = 0.1;
	CHECK(place(lens, 7, 4, 1024, &pl) == 0);
	CHECK(bp_ca_schedule(&pl, 4, &o, &res, NULL, &err) == 0);
	CHECK_NEAR(res.max_after / res.mean, 1.196, 0.001);
	CHECK(res.moves == 0);
	bp_ca_placement_release(&pl);
}

/* The linear placement (Sec. 6.1, as the public code's batch_to_items_general): its known
 * answer, and every rank holding exactly its budget of tokens. */
static void test_placement(void)
{
	const int64_t lens[] = {256, 1024, 256, 128, 384};
	struct bp_ca_placement pl;
	CHECK(place(lens, 5, 4, 512, &pl) == 0);
	const int64_t want[][3] = {{256, 128, 128}, {256, 256, 0}, {128, 128, 256}, {128, 384, 0}};
	size_t at[4] = {0, 0, 0, 0};
	int64_t tok[4] = {0, 0, 0, 0};
	for (size_t i = 0; i < pl.npieces; i++) {
		int r = pl.pieces[i].rank;
		CHECK(at[r] < 3 && pl.pieces[i].len == want[r][at[r]]);
		at[r]++;
		tok[r] += pl.pieces[i].len;
	}
	for (int r = 0; r < 4; r++)
		CHECK(tok[r] == 512);
	/* the 1024-document: rank 0 [0,128)+[896,1024), 1 [128,384)+[640,896),
	 * 2 [384,512)+[512,640) */
	const int64_t d1[][3] = {{0, 128, 0}, {896, 128, 0}, {128, 256, 1}, {640, 256, 1},
				 {384, 128, 2}, {512, 128, 2}};
	size_t k = 0;
	for (size_t i = 0; i < pl.npieces; i++)
		if (pl.pieces[i].doc == 1) {
			CHECK(k < 6 && pl.pieces[i].offset == d1[k][0] &&
			      pl.pieces[i].len == d1[k][1] && pl.pieces[i].rank == d1[k][2]);
			k++;
		}
	CHECK(k == 6);
	check_tiling(&pl, lens, 5);
	bp_ca_placement_release(&pl);
	/* too many tokens */
	struct bp_error err;
	int64_t doc[] = {0}, big[] = {2049};
	CHECK(bp_ca_place(doc, NULL, big, 1, 4, 512, &pl, &err) < 0);
	CHECK(strstr(err.text, "more than") != NULL);
	bp_ca_placement_release(&pl);
}

/* Invariant 7 by hand: L = 8 split [0,4)->A, [4,8)->B, both linear on A: A->B gets 4 Q
 * tokens and 8 KV tokens, once each; a second B-task of the document shares the KV. */
static void test_bytes(void)
{
	struct bp_ca_placement pl;
	memset(&pl, 0, sizeof(pl));
	struct bp_ca_piece pc[] = {{0, 0, 8, 0}};
	pl.pieces = pc;
	pl.npieces = 1;
	struct bp_ca_chunk ch[] = {{0, 0, 4, 0, 0, 0}, {0, 4, 8, 0, 1, 0}};
	double send[2], recv[2];
	struct bp_error err;
	double q = 1024, kv = 512;
	double mx = bp_ca_bytes(&pl, ch, 2, 2, q, kv, send, recv, &err);
	CHECK_NEAR(send[0], 4 * q + 8 * kv, 0);
	CHECK_NEAR(recv[1], 4 * q + 8 * kv, 0);
	CHECK_NEAR(send[1], 0, 0);
	CHECK_NEAR(mx, 4 * q + 8 * kv, 0);
	struct bp_ca_chunk ch2[] = {{0, 0, 2, 0, 0, 0}, {0, 2, 4, 0, 1, 0}, {0, 4, 8, 0, 1, 0}};
	bp_ca_bytes(&pl, ch2, 3, 2, q, kv, send, recv, &err);
	CHECK_NEAR(recv[1], 6 * q + 8 * kv, 0);
}

/* Invariant 8: App. A's 31.65 for Llama-34B (K and V 8 KiB per token, 50 GiB/s), and App.
 * B's closed form against a brute-force minimum over a fine grid of n_q (integer n_q are too
 * coarse next to the boundary) with the corrected root. */
static void test_appendices(void)
{
	double flops = 2.0 * 8192 * (2.0 * 8192 + 2048 + 3.0 * 22016);
	CHECK_NEAR(flops, 1384120320.0, 0);
	double t = flops / (0.5 * 990e12);
	double s = bp_ca_max_shards(t, 50.0 * 1073741824.0, 16384, 8192);
	CHECK_NEAR(s, 31.65, 0.01);
	CHECK(floor(s) == 31);
	CHECK(bp_ca_max_shards(t, 50.0 * 1073741824.0, 16384, 4096) > 60);
	unsigned x = 12345;
	for (int trial = 0; trial < 200; trial++) {
		x = x * 1103515245u + 12345u;
		double lq = 200 + (x >> 8) % 3000;
		x = x * 1103515245u + 12345u;
		double lkv = lq + (x >> 8) % 5000;
		x = x * 1103515245u + 12345u;
		double alpha = 0.02 + 0.97 * ((x >> 8) % 1000) / 1000.0;
		x = x * 1103515245u + 12345u;
		double beta = 0.125 + 4.0 * ((x >> 8) % 1000) / 1000.0;
		double sq = 1024, skv = beta * sq, X = lq * (2 * lkv - lq);
		double best = INFINITY;
		for (double nq = lq / 100000; nq <= lq; nq += lq / 100000) {
			double nkv = (alpha * X / nq + nq) / 2;
			if (nkv < nq + lkv - lq - 1e-9 || nkv > lkv + 1e-9)
				continue;
			double v = nq * sq + nkv * skv;
			if (v < best)
				best = v;
		}
		double v = bp_ca_appb_shard(alpha, lq, lkv, sq, skv);
		CHECK(v <= best * (1 + 1e-9));
		if (!(v >= best * (1 - 1e-3)))
			fprintf(stderr, "appb lq %g lkv %g a %g b %g: %g vs %g\n", lq, lkv, alpha, beta, v, best);
		CHECK(v >= best * (1 - 1e-3));
	}
	/* the boundary root: with alpha = 1 the whole Item (n_q = L_q) */
	double d = 1000 - 3000, X = 1000.0 * (2 * 3000 - 1000);
	CHECK_NEAR(d + sqrt(d * d + X), 1000, 1e-9);
	CHECK_NEAR(bp_ca_appb_shard(1, 1000, 3000, 1024, 512), 1000 * 1024 + 3000 * 512, 1e-6);
}

/* Two placements hold the same Items, field by field (a memcmp would compare padding). */
static int items_equal(const struct bp_ca_placement *a, const struct bp_ca_placement *b)
{
	if (a->nitems != b->nitems)
		return 0;
	for (size_t i = 0; i < a->nitems; i++) {
		const struct bp_ca_item *x = &a->items[i], *y = &b->items[i];
		if (x->doc != y->doc || x->base != y->base || x->len != y->len || x->h0 != y->h0 ||
		    x->h1 != y->h1 || x->t0 != y->t0 || x->t1 != y->t1 ||
		    x->complete != y->complete || x->unit != y->unit || x->src != y->src ||
		    x->server != y->server)
			return 0;
	}
	return 1;
}

/* Invariant 10 and the other comm modes: same inputs, same chunks; every mode and block
 * keeps the tiling and the total. */
static void test_modes(void)
{
	int64_t lens[24];
	unsigned x = 7;
	for (int i = 0; i < 24; i++) {
		x = x * 1103515245u + 12345u;
		lens[i] = 64 + (x >> 8) % 4000;
	}
	int64_t total = 0;
	for (int i = 0; i < 24; i++)
		total += lens[i];
	for (int c = 0; c < BP_CA_COMM_NMODES; c++)
		for (int block = 1; block <= 128; block *= 128) {
			struct bp_ca_placement a, b;
			struct bp_ca_result ra, rb;
			struct bp_error err;
			struct bp_ca_opts o = {0.05, block, (enum bp_ca_comm)c, 2048, 1024, 0, 0};
			int64_t budget = (total + 7) / 8;
			CHECK(place(lens, 24, 8, budget, &a) == 0);
			CHECK(place(lens, 24, 8, budget, &b) == 0);
			size_t placed = a.nitems;
			CHECK(bp_ca_schedule(&a, 8, &o, &ra, NULL, &err) == 0);
			CHECK(bp_ca_schedule(&b, 8, &o, &rb, NULL, &err) == 0);
			CHECK(items_equal(&a, &b));
			CHECK(ra.max_after <= ra.max_before);
			check_tiling(&a, lens, 24);
			if (block == 128) /* split-offs are whole 64-pair multiples */
				for (size_t i = placed; i < a.nitems; i++)
					CHECK((a.items[i].h1 - a.items[i].h0) % 64 == 0 &&
					      (a.items[i].t1 - a.items[i].t0) % 64 == 0);
			CHECK(a.nitems > placed || c != BP_CA_COMM_CODE);
			/* the paper's two-sided band: no higher a maximum, and within
			 * eps * mean + one granule of the largest unit where granules allow */
			struct bp_ca_placement t;
			struct bp_ca_result rt;
			struct bp_ca_opts o2 = o;
			o2.two_sided = 1;
			CHECK(place(lens, 24, 8, budget, &t) == 0);
			CHECK(bp_ca_schedule(&t, 8, &o2, &rt, NULL, &err) == 0);
			CHECK(rt.max_after <= ra.max_after);
			int64_t lmax = 0;
			for (int i = 0; i < 24; i++)
				lmax = lens[i] > lmax ? lens[i] : lmax;
			double gran = (double)(lmax + 1) * (block / 2 > 1 ? block / 2 : 1);
			CHECK(rt.max_after <= rt.mean * (1 + o.eps) + gran);
			check_tiling(&t, lens, 24);
			bp_ca_placement_release(&t);
			/* App. A's cap: no document ends in more chunks than the bound or
			 * its placement pieces */
			struct bp_ca_opts o3 = o;
			o3.max_shards = 3;
			CHECK(place(lens, 24, 8, budget, &t) == 0);
			int placed_chunks[24] = {0}, final_chunks[24] = {0};
			struct bp_ca_chunk *ch;
			size_t nc;
			CHECK(bp_ca_chunks(&t, &ch, &nc, &err) == 0);
			for (size_t i = 0; i < nc; i++)
				placed_chunks[ch[i].doc]++;
			free(ch);
			CHECK(bp_ca_schedule(&t, 8, &o3, &rt, NULL, &err) == 0);
			CHECK(bp_ca_chunks(&t, &ch, &nc, &err) == 0);
			for (size_t i = 0; i < nc; i++)
				final_chunks[ch[i].doc]++;
			free(ch);
			for (int i = 0; i < 24; i++)
				CHECK(final_chunks[i] <= (placed_chunks[i] > 3 ? placed_chunks[i] : 3));
			check_tiling(&t, lens, 24);
			bp_ca_placement_release(&t);
			bp_ca_placement_release(&a);
			bp_ca_placement_release(&b);
		}
}

/* bp_ca_emit (the method's one-pass chunks and bytes) against bp_ca_chunks + bp_ca_bytes on
 * scheduled placements: random lengths, units cut from documents (bases), every comm mode,
 * one- and two-sided: the same chunks (re-sorted by (doc, q0)), the same per-rank bytes
 * and buffer, and the chunks in (server, doc, q0) order. */
static void test_emit(void)
{
	unsigned x = 11;
	for (int round = 0; round < 60; round++) {
		int64_t doc[40], base[40], len[40], total = 0;
		size_t n = 8 + (size_t)(round % 30);
		for (size_t i = 0; i < n; i++) {
			x = x * 1103515245u + 12345u;
			len[i] = 1 + (x >> 8) % (round % 3 ? 3000 : 40);
			/* every third unit a later piece of the document before it */
			doc[i] = i && i % 3 == 0 ? doc[i - 1] : (int64_t)(1000 - 7 * i);
			base[i] = i && i % 3 == 0 ? base[i - 1] + len[i - 1] : 0;
			total += len[i];
		}
		int nranks = 2 + round % 7;
		struct bp_ca_placement pl;
		struct bp_error err;
		CHECK(bp_ca_place(doc, base, len, n, nranks, (total + nranks - 1) / nranks, &pl,
				  &err) == 0);
		struct bp_ca_opts o = {0.02 + 0.01 * (round % 5), round % 2 ? 128 : 1,
				       (enum bp_ca_comm)(round % BP_CA_COMM_NMODES), 1040, 512,
				       round % 4 == 3, 0};
		struct bp_ca_result res;
		CHECK(bp_ca_schedule(&pl, nranks, &o, &res, NULL, &err) == 0);
		struct bp_ca_chunk *a, *b;
		size_t na, nb;
		double sa[16], ra[16], sb[16], rb[16];
		CHECK(bp_ca_chunks(&pl, &a, &na, &err) == 0);
		double ba = bp_ca_bytes(&pl, a, na, nranks, 1040, 512, sa, ra, &err);
		double bb = bp_ca_emit(&pl, nranks, 1040, 512, &b, &nb, sb, rb, &err);
		CHECK(ba >= 0 && ba == bb && na == nb);
		CHECK(!memcmp(sa, sb, (size_t)nranks * sizeof(double)) &&
		      !memcmp(ra, rb, (size_t)nranks * sizeof(double)));
		for (size_t i = 1; i < nb; i++)
			CHECK(b[i - 1].server < b[i].server ||
			      (b[i - 1].server == b[i].server &&
			       (b[i - 1].doc < b[i].doc ||
				(b[i - 1].doc == b[i].doc && b[i - 1].q0 < b[i].q0))));
		/* the same set: b re-sorted by (doc, q0) is a (ties: same doc and q0 never) */
		for (size_t i = 1; i < nb; i++)
			for (size_t j = i; j > 0 && (b[j - 1].doc > b[j].doc ||
						     (b[j - 1].doc == b[j].doc &&
						      b[j - 1].q0 > b[j].q0)); j--) {
				struct bp_ca_chunk t = b[j];
				b[j] = b[j - 1];
				b[j - 1] = t;
			}
		CHECK(na == nb && !memcmp(a, b, na * sizeof(*a)));
		free(a);
		free(b);
		bp_ca_placement_release(&pl);
	}
}

/* The scheduler's index of donors (the default V of exact bytes without App. A's bound,
 * blocks/ca_sched.c cand_index) makes the scan's choices: the same Items, moves and loads
 * as the scan, which runs under an App. A bound too high to bind (max_shards 2^20), on
 * random placements of up to 48 ranks with pieces of long documents across ranks. */
static void test_index_vs_scan(void)
{
	unsigned x = 5;
	for (int round = 0; round < 80; round++) {
		int64_t doc[200], base[200], len[200], total = 0;
		size_t n = 20 + (size_t)(x % 180);
		for (size_t i = 0; i < n; i++) {
			x = x * 1103515245u + 12345u;
			len[i] = 1 + (x >> 8) % (i % 5 ? 2000 : 30000);
			doc[i] = i && i % 4 == 0 ? doc[i - 1] : (int64_t)i;
			base[i] = i && i % 4 == 0 ? base[i - 1] + len[i - 1] : 0;
			total += len[i];
		}
		int nranks = 2 + (int)((x >> 4) % 47);
		struct bp_ca_placement a, b;
		struct bp_error err;
		CHECK(bp_ca_place(doc, base, len, n, nranks, (total + nranks - 1) / nranks, &a,
				  &err) == 0);
		CHECK(bp_ca_place(doc, base, len, n, nranks, (total + nranks - 1) / nranks, &b,
				  &err) == 0);
		struct bp_ca_opts o = {0.005 + 0.01 * (round % 4), round % 3 ? 128 : 1,
				       BP_CA_COMM_EXACT, 1040, 512, round % 5 == 4, 0};
		struct bp_ca_opts scan = o;
		scan.max_shards = 1 << 20;
		struct bp_ca_result ra, rb;
		double la[64], lb[64];
		CHECK(bp_ca_schedule(&a, nranks, &o, &ra, la, &err) == 0);
		CHECK(bp_ca_schedule(&b, nranks, &scan, &rb, lb, &err) == 0);
		int same = a.nitems == b.nitems;
		for (size_t i = 0; same && i < a.nitems; i++) {
			const struct bp_ca_item *p = &a.items[i], *q = &b.items[i];
			same = p->doc == q->doc && p->base == q->base && p->len == q->len &&
			       p->h0 == q->h0 && p->h1 == q->h1 && p->t0 == q->t0 &&
			       p->t1 == q->t1 && p->complete == q->complete &&
			       p->unit == q->unit && p->src == q->src && p->server == q->server;
		}
		CHECK(same);
		CHECK(ra.moves == rb.moves && ra.moved_pairs == rb.moved_pairs &&
		      ra.max_after == rb.max_after);
		CHECK(!memcmp(la, lb, (size_t)nranks * sizeof(double)));
		bp_ca_placement_release(&a);
		bp_ca_placement_release(&b);
	}
}

/* Invariant 9: pp = 4, M = 6. Every stage has M + pp - 1 forward and backward slots, M real;
 * forward tick t's micro-batches are backward tick t's with the stages reversed; F at
 * (t, r) pairs with B at tick t + pp - 1 - 2r; the tick count is 1F1B's 2 (M + pp - 1). */
static void test_ticks_identities(void)
{
	const int pp = 4;
	const size_t m = 6, n = bp_ticks_count(pp, m);
	CHECK(n == 2 * (m + pp - 1));
	int fslots[4] = {0}, bslots[4] = {0}, freal[4] = {0}, breal[4] = {0};
	int64_t fmb[16][4], bmb[16][4];
	for (size_t k = 0; k < n; k++)
		for (int r = 0; r < pp; r++) {
			int bwd;
			size_t t;
			int64_t j = bp_tick_op(pp, m, k, r, &bwd, &t);
			CHECK(t < 16);
			if (bwd) {
				bslots[r]++;
				breal[r] += j >= 0;
				bmb[t][r] = j;
			} else {
				fslots[r]++;
				freal[r] += j >= 0;
				fmb[t][r] = j;
			}
		}
	for (int r = 0; r < pp; r++)
		CHECK(fslots[r] == (int)m + pp - 1 && bslots[r] == (int)m + pp - 1 &&
		      freal[r] == (int)m && breal[r] == (int)m);
	for (size_t t = 0; t < m + pp - 1; t++)
		for (int r = 0; r < pp; r++) {
			CHECK(fmb[t][r] == bmb[t][pp - 1 - r]);
			/* the backward of F(t, r)'s micro-batch runs at backward tick
			 * t + pp - 1 - 2r */
			if (fmb[t][r] >= 0) {
				size_t j = t + (size_t)(pp - 1) - 2 * (size_t)r;
				CHECK(bmb[j][r] == fmb[t][r]);
			}
		}
}

/* The distca method through bp_solve: plans validate (every query token once with its whole
 * causal prefix, across pipelines), repeat byte for byte, conserve pairs per step (each
 * micro-batch's tasks once per stage), record ping/pong only with ping-pong, and never raise
 * the largest server load over the placement's. */
static void test_method(void)
{
	struct bp_scheme sc = {4, 1, 2};
	struct bp_profile prof;
	struct bp_error err;
	bp_profile_init(&prof);
	CHECK(bp_profile_analytic(&prof, bp_gpu_preset("H100"), bp_model_preset("llama3-8b"), &sc,
				  1, 16384, &err) == 0);
	struct bp_dataset ds;
	bp_dataset_init(&ds);
	CHECK(bp_dataset_preset(&ds, "synthetic-longtail", &err) == 0);
	for (int pingpong = 0; pingpong < 2; pingpong++) {
		struct bp_param par[] = {{"pingpong", "0"}, {"tolerance", "0.05"}};
		if (pingpong)
			snprintf(par[0].value, sizeof(par[0].value), "1");
		struct bp_solve_opts o = {
			.method = "distca",
			.cluster = {.gpus = 16, .tp = 4, .cp = 1, .pp = 2, .dp = 2},
			.steps = 3, .max_tokens = 16384, .tokens_per_step = 4 * 16384,
			.overlen = BP_OVERLEN_TRUNCATE, .seed = 5, .shard = BP_SHARD_SEQUENCE,
			.dataset_name = "synthetic-longtail",
			.dataset_sha = "0000000000000000000000000000000000000000000000000000000000000000",
			.profile_sha = "1111111111111111111111111111111111111111111111111111111111111111",
			.params = par, .nparams = 2,
		};
		struct bp_plan a, b;
		bp_plan_init(&a);
		bp_plan_init(&b);
		CHECK(bp_solve(&ds, &prof, &o, &a, &err) == 0);
		CHECK(bp_solve(&ds, &prof, &o, &b, &err) == 0);
		CHECK(bp_plan_validate(&a, NULL, &err) == 0);
		CHECK(plans_same(&a, &b));
		for (size_t i = 0; i < a.nsteps; i++) {
			const struct bp_step *st = &a.steps[i];
			int64_t want = 0, got = 0;
			for (size_t d = 0; d < st->ndocs; d++)
				want += 2 * bp_ca_pairs(0, st->docs[d].len);
			for (size_t t = 0; t < st->nca; t++)
				got += bp_ca_pairs(st->ca[t].q0 - st->ca[t].kv0,
						   st->ca[t].q1 - st->ca[t].kv0);
			/* pp 2: the backward ticks have their own placements (bwd_place own,
			 * ca_sched.h bp_ca_task_place), the same pairs once more */
			size_t m = 0;
			for (size_t k = 0; k < st->npipes; k++)
				m = st->pipes[k].nmbs > m ? st->pipes[k].nmbs : m;
			CHECK(st->nca && bp_ca_own_bwd(st->ca[st->nca - 1].tick, 2, m));
			CHECK(got == 2 * want);
			const struct bp_ca_record *r = st->record;
			CHECK(r != NULL && r->ncalls > 0);
			CHECK((r->ping_spans != NULL) == pingpong);
			for (size_t c = 0; r && c < r->ncalls; c++)
				CHECK(r->max_after[c] <= r->max_before[c] && r->eps[c] == 0.05);
		}
		bp_plan_release(&a);
		bp_plan_release(&b);
	}
	bp_dataset_release(&ds);
	bp_profile_release(&prof);
}

/* A hand-made pp-1 plan on 16 H100s, Llama-3-8B at tp 8, two pipelines (ranks 0-7 and
 * 8-15), servers 0 and 8 (their TP groups), one micro-batch: document 0 (8 tokens) on
 * pipeline 0, document 1 (8 tokens) on pipeline 1; CA-tasks at tick 0: doc 0's queries
 * [0, 4) stay on server 0, its queries [4, 8) with the prefix [0, 8) go to server 1, doc 1
 * stays on server 1. Record: the distca kind with the given mode and its one scheduler call
 * (tick 0, ping) as sim/check_ca_record.c derives it: pairs 10 + 26 on pipeline 0's server
 * and 36 on pipeline 1's before (mean 36, largest 36), 10 and 26 + 36 after (largest 62), 26
 * moved, and the all-to-all in of test_modes_by_hand below, 8192 bytes out of rank 0 and
 * into rank 8. */
static void hand_plan(struct bp_plan *p, int resend)
{
	struct bp_error err;
	bp_plan_init(p);
	p->model = *bp_model_preset("llama3-8b");
	snprintf(p->cluster.gpu, sizeof(p->cluster.gpu), "H100");
	p->cluster.gpus = 16;
	p->cluster.gpus_per_node = 8;
	p->max_tokens = 16;
	p->nsteps_drawn = 1;
	p->docs_per_step = 2;
	struct bp_scheme sc = {8, 1, 1};
	CHECK(bp_plan_add_megatron(p, sc, 2, 16, &err) == 0);
	struct bp_layout *l = &p->layouts[0];
	snprintf(l->schedule, sizeof(l->schedule), "%s", BP_SCHEDULE_TICKS);
	l->servers = calloc(2, sizeof(int));
	l->servers[0] = 0;
	l->servers[1] = 8;
	l->nservers = 2;
	p->steps = calloc(1, sizeof(*p->steps));
	p->nsteps = 1;
	struct bp_step *st = &p->steps[0];
	snprintf(st->sync, sizeof(st->sync), "%s", "dp-allreduce");
	st->docs = calloc(2, sizeof(*st->docs));
	st->docs[0] = (struct bp_doc){.id = 0, .len = 8};
	st->docs[1] = (struct bp_doc){.id = 1, .len = 8};
	st->ndocs = 2;
	st->pipes = calloc(2, sizeof(*st->pipes));
	st->npipes = 2;
	for (int k = 0; k < 2; k++) {
		struct bp_span sp = {k, 0, 8};
		CHECK(bp_pipe_add_mb(&st->pipes[k], &sp, 1, BP_SHARD_SEQUENCE, &err) == 0);
		st->pipes[k].mbs[0].attn = BP_ATTN_DISAGG;
	}
	st->ca = calloc(3, sizeof(*st->ca));
	st->ca[0] = (struct bp_ca_task){0, 0, 0, 0, 4, 0, 4};
	st->ca[1] = (struct bp_ca_task){0, 1, 0, 4, 8, 0, 8};
	st->ca[2] = (struct bp_ca_task){0, 1, 1, 0, 8, 0, 8};
	st->nca = 3;
	struct bp_ca_record *r = bp_step_set_record(st, &bp_record_distca, &err);
	CHECK(r != NULL);
	r->resend = resend;
	const double call[] = {0, 0, 0.1, 36, 36, 62, 26, 8192};
	double **a[] = {&r->tick, &r->nano, &r->eps, &r->mean, &r->max_before, &r->max_after,
			&r->moved, &r->bytes};
	for (size_t i = 0; i < BP_ARRAY_LEN(a); i++) {
		*a[i] = calloc(1, sizeof(double));
		**a[i] = call[i];
	}
	r->ncalls = 1;
}

/* sim/check_ca_record.c on hand_plan: its record passes; each figure edited past the
 * tolerance (1e-9 relative and one pair or byte), or a call without tasks, or tasks without
 * a call, is refused naming the field; an edit within the JSON rounding (1e-3) passes. */
static void test_record_figures(void)
{
	struct bp_error err;
	struct bp_plan p;
	hand_plan(&p, 1);
	struct bp_ca_record *r = p.steps[0].record;
	CHECK(bp_plan_validate(&p, NULL, &err) == 0);
	double *f[] = {r->mean, r->max_before, r->max_after, r->moved, r->bytes};
	const char *names[] = {"mean_pairs", "max_before_pairs", "max_after_pairs", "moved_pairs",
			       "a2a_bytes_max"};
	for (size_t i = 0; i < BP_ARRAY_LEN(f); i++) {
		double keep = *f[i];
		*f[i] = keep + 0.0005;
		CHECK(bp_plan_validate(&p, NULL, &err) == 0);
		*f[i] = keep * 2;
		CHECK(bp_plan_validate(&p, NULL, &err) < 0);
		CHECK(strstr(err.text, names[i]) != NULL);
		*f[i] = keep - 2;
		CHECK(bp_plan_validate(&p, NULL, &err) < 0);
		*f[i] = keep;
	}
	r->nano[0] = 1; /* the tasks are ping's: pong's call has none, ping's no call */
	CHECK(bp_plan_validate(&p, NULL, &err) < 0);
	CHECK(strstr(err.text, "no scheduler call") != NULL);
	r->nano[0] = 0;
	r->ncalls = 0;
	CHECK(bp_plan_validate(&p, NULL, &err) < 0);
	r->ncalls = 1;
	CHECK(bp_plan_validate(&p, NULL, &err) == 0);
	bp_plan_release(&p);
}

/* The byte models by hand on hand_plan: per TP slice i, only doc 0's queries [4, 8) leave their
 * rank (i -> 8 + i). Forward in: 4 Q x 1024 + 8 KV x 512 = 8192 in both modes; forward out: 4 x
 * 1040 = 4160 (resend, O and LSE) or 4 x 1024 = 4096 (non-resend, O); backward in: 4 x 3088 + 8
 * x 512 = 16448 (resend: Q, O, dO, LSE, K, V) or 4 x 1024 = 4096 (non-resend: dO); backward
 * out: 4 dQ x 1024 + 8 dKV x 512 = 8192 in both. Memory (non-resend servers), per layer and
 * slice: server 1 keeps 4 x 2064 + 8 x 512 (doc 0) and 8 x 2064 + 8 x 512 (doc 1) = 32960
 * bytes, x 32 layers = 1054720; server 0 4 x 2064 + 4 x 512 = 10304, x 32 = 329728; resend
 * keeps nothing, so the peaks differ by exactly that. */
static void test_modes_by_hand(void)
{
	struct bp_error err;
	struct bp_scheme sc = {8, 1, 1};
	struct bp_profile prof;
	bp_profile_init(&prof);
	CHECK(bp_profile_analytic(&prof, bp_gpu_preset("H100"), bp_model_preset("llama3-8b"), &sc,
				  1, 16384, &err) == 0);
	const double want[2][2][2] = {{{8192, 4096}, {4096, 8192}}, {{8192, 4160}, {16448, 8192}}};
	int64_t peak[2][2];
	double *mat = calloc(16 * 16, sizeof(double));
	for (int resend = 0; resend < 2; resend++) {
		struct bp_plan p;
		struct bp_costs costs;
		hand_plan(&p, resend);
		bp_costs_init(&costs, &prof);
		CHECK(bp_plan_predict(&p, &costs, NULL, &err) == 0);
		CHECK(bp_plan_validate(&p, &costs, &err) == 0);
		for (size_t pos = 0; pos < 2; pos++) /* forward, then backward */
			for (int dir = 0; dir < 2; dir++) {
				CHECK(bp_ticks_bytes(&p, &p.steps[0], pos, dir, mat, &err) == 0);
				double total = 0;
				for (int a = 0; a < 256; a++)
					total += mat[a];
				for (int i = 0; i < 8; i++) {
					int src = dir ? 8 + i : i, dst = dir ? i : 8 + i;
					CHECK_NEAR(mat[src * 16 + dst], want[resend][pos][dir], 0);
				}
				CHECK_NEAR(total, 8 * want[resend][pos][dir], 0);
			}
		for (int k = 0; k < 2; k++)
			peak[resend][k] = p.steps[0].pipes[k].peak_mem[0];
		if (!resend) { /* one micro-batch: every rank's peak is at the forward tick */
			struct bp_ticks tk;
			CHECK(bp_ticks_eval(&p, &p.steps[0], &costs, &tk, &err) == 0);
			for (size_t pos = 0; pos < 2; pos++)
				for (int i = 0; i < 8; i++) {
					CHECK_NEAR(tk.kept[pos * 16 + (size_t)i], 329728, 0);
					CHECK_NEAR(tk.kept[pos * 16 + 8 + (size_t)i], 1054720, 0);
				}
			bp_ticks_release(&tk);
		}
		bp_costs_release(&costs);
		bp_plan_release(&p);
	}
	CHECK(peak[0][0] - peak[1][0] == 329728);
	CHECK(peak[0][1] - peak[1][1] == 1054720);
	/* non-resend at pp > 1 is refused by validation: tests/cli/bad-plan-distca-resend */
	free(mat);
	bp_profile_release(&prof);
}

/* The method's mode (header step 7 of methods/distca.c): auto runs non-resend at pp 1 and
 * resend at pp 2; resend=0 with pp 2 is a request error; a pp-1 step whose kept buffers
 * would pass the cap (Llama-3-8B at 120K tokens per rank on 80 GiB H100s: the activations
 * alone fill 74.8 of 76 GiB) falls back to resend, and its peak stays under the cap. */
static void test_method_modes(void)
{
	struct bp_dataset ds;
	struct bp_error err;
	bp_dataset_init(&ds);
	CHECK(bp_dataset_preset(&ds, "synthetic-longtail", &err) == 0);
	const struct {
		int tp, pp;
		int64_t L;
		const char *resend;
		int rc, want;
	} cases[] = {
		{4, 1, 16384, "auto", 0, 0}, {4, 2, 16384, "auto", 0, 1}, {4, 1, 16384, "1", 0, 1},
		{4, 2, 16384, "0", -1, 0}, {8, 1, 122880, "auto", 0, 1},
	};
	for (size_t c = 0; c < BP_ARRAY_LEN(cases); c++) {
		struct bp_scheme sc = {cases[c].tp, 1, cases[c].pp};
		struct bp_profile prof;
		bp_profile_init(&prof);
		CHECK(bp_profile_analytic(&prof, bp_gpu_preset("H100"),
					  bp_model_preset("llama3-8b"), &sc, 1, cases[c].L,
					  &err) == 0);
		struct bp_param par[] = {{"resend", ""}};
		snprintf(par[0].value, sizeof(par[0].value), "%s", cases[c].resend);
		struct bp_solve_opts o = {
			.method = "distca",
			.cluster = {.gpus = 16, .tp = cases[c].tp, .cp = 1, .pp = cases[c].pp,
				    .dp = 16 / (cases[c].tp * cases[c].pp)},
			.steps = 2, .max_tokens = cases[c].L, .tokens_per_step = 2 * cases[c].L,
			.overlen = BP_OVERLEN_TRUNCATE, .seed = 1, .shard = BP_SHARD_SEQUENCE,
			.dataset_name = "synthetic-longtail",
			.dataset_sha = "0000000000000000000000000000000000000000000000000000000000000000",
			.profile_sha = "1111111111111111111111111111111111111111111111111111111111111111",
			.params = par, .nparams = 1,
		};
		struct bp_plan a;
		bp_plan_init(&a);
		int rc = bp_solve(&ds, &prof, &o, &a, &err);
		CHECK(rc == cases[c].rc);
		for (size_t i = 0; rc == 0 && i < a.nsteps; i++) {
			const struct bp_ca_record *r = a.steps[i].record;
			CHECK(r != NULL && r->resend == cases[c].want);
		}
		if (rc == 0 && cases[c].L > 16384) {
			char buf[256];
			bp_distca_warn(&a, buf, sizeof(buf));
			CHECK(strstr(buf, "fell back to resend") != NULL);
			struct bp_costs costs;
			bp_costs_init(&costs, &prof);
			const struct bp_costmodel *cm = bp_costs_pipe(&costs, &a.layouts[0], 0, &err);
			CHECK(cm && a.summary.peak_mem <= bp_cost_mem_cap(cm));
			bp_costs_release(&costs);
		}
		bp_plan_release(&a);
		bp_profile_release(&prof);
	}
	bp_dataset_release(&ds);
}

/* The tick simulator's per-rank byte sums (bp_ticks_eval: long KV prefixes summed through
 * span coverings, sim/ticks.c tick_kv_sum) equal the row and column sums of the per-flow
 * matrices (bp_ticks_bytes), exactly (whole multiples of the per-token bytes), on plans
 * whose documents the placement cuts into up to 32 spans (16 pipelines, tokens that leave
 * a short last micro-batch). */
static void test_tick_sums(void)
{
	struct bp_dataset ds;
	struct bp_error err;
	bp_dataset_init(&ds);
	CHECK(bp_dataset_preset(&ds, "synthetic-longtail", &err) == 0);
	const struct {
		int pp;
		int64_t tokens;
	} cases[] = {{1, 70000}, {2, 65536}, {2, 131072}};
	double *mat = calloc(16 * 16, sizeof(double));
	for (size_t c = 0; c < BP_ARRAY_LEN(cases); c++) {
		struct bp_scheme sc = {1, 1, cases[c].pp};
		struct bp_profile prof;
		bp_profile_init(&prof);
		CHECK(bp_profile_analytic(&prof, bp_gpu_preset("H100"),
					  bp_model_preset("llama3-8b"), &sc, 1, 4096, &err) == 0);
		struct bp_solve_opts o = {
			.method = "distca",
			.cluster = {.gpus = 16, .tp = 1, .cp = 1, .pp = cases[c].pp,
				    .dp = 16 / cases[c].pp},
			.steps = 2, .max_tokens = 4096, .tokens_per_step = cases[c].tokens,
			.overlen = BP_OVERLEN_TRUNCATE, .seed = 1, .shard = BP_SHARD_SEQUENCE,
			.dataset_name = "synthetic-longtail",
			.dataset_sha = "0000000000000000000000000000000000000000000000000000000000000000",
			.profile_sha = "1111111111111111111111111111111111111111111111111111111111111111",
		};
		struct bp_plan a;
		bp_plan_init(&a);
		CHECK(bp_solve(&ds, &prof, &o, &a, &err) == 0);
		struct bp_costs costs;
		bp_costs_init(&costs, &prof);
		for (size_t i = 0; i < a.nsteps; i++) {
			struct bp_ticks tk;
			CHECK(bp_ticks_eval(&a, &a.steps[i], &costs, &tk, &err) == 0);
			for (size_t k = 0; k < tk.nticks; k++) {
				double send[16] = {0}, recv[16] = {0};
				for (int dir = 0; dir < 2; dir++) {
					CHECK(bp_ticks_bytes(&a, &a.steps[i], k, dir, mat, &err) ==
					      0);
					for (int x = 0; x < 16; x++)
						for (int y = 0; y < 16; y++) {
							send[x] += mat[x * 16 + y];
							recv[y] += mat[x * 16 + y];
						}
				}
				for (int r = 0; r < 16; r++) {
					CHECK_NEAR(tk.send[k * 16 + (size_t)r], send[r], 0);
					CHECK_NEAR(tk.recv[k * 16 + (size_t)r], recv[r], 0);
				}
				/* the decomposition simulate --step prints: the tick is its
				 * slowest ranks' parts plus what is exposed, and no rank's
				 * token-wise work passes the slowest */
				CHECK_NEAR(tk.tick_us[k], tk.slow_lin[k] + tk.slow_ca[k] +
					   tk.exposed_us[k], 1e-9 * tk.tick_us[k]);
				CHECK(tk.slow_stage[k] >= 0 && tk.slow_stage[k] < cases[c].pp);
				int per_stage[2] = {0, 0};
				for (int r = 0; r < 16; r++) {
					CHECK(tk.compute[k * 16 + (size_t)r] <=
					      tk.slow_lin[k] * (1 + 1e-12));
					CHECK(tk.stage[r] >= 0 && tk.stage[r] < cases[c].pp);
					if (tk.stage[r] >= 0 && tk.stage[r] < 2)
						per_stage[tk.stage[r]]++;
				}
				CHECK(per_stage[0] == 16 / cases[c].pp);
			}
			bp_ticks_release(&tk);
		}
		bp_costs_release(&costs);
		bp_plan_release(&a);
		bp_profile_release(&prof);
	}
	free(mat);
	bp_dataset_release(&ds);
}

/* Micro-batch j of a cut: its tokens, and whether it keeps the caps of distca.c's step 1
 * and 2 (dp x cap tokens; its ping and pong nano-batches, cut at the boundary nearest
 * half, ceil(tokens / dp) each, together at most cap, or one document). */
static int64_t cut_mb(const int64_t *len, const size_t *bnd, size_t j, int dp, int64_t cap,
		      int pingpong, int *ok)
{
	int64_t tok = 0, acc = 0, best = -1, ping = 0;
	size_t i = bnd[j], e = bnd[j + 1];
	for (size_t k = i; k < e; k++)
		tok += len[k];
	ping = tok;
	if (pingpong && e - i >= 2)
		for (size_t k = i + 1; k < e; k++) {
			acc += len[k - 1];
			int64_t d = 2 * acc > tok ? 2 * acc - tok : tok - 2 * acc;
			if (best < 0 || d < best) {
				best = d;
				ping = acc;
			}
		}
	*ok = e > i && tok <= (int64_t)dp * cap &&
	      ((ping + dp - 1) / dp + (tok - ping + dp - 1) / dp <= cap || e - i < 2);
	return tok;
}

/* The even cut (mb_cut even) against next-fit on random document sequences: documents in
 * order, every one in exactly one micro-batch, the caps kept, next-fit's count, a spread
 * (most minus fewest tokens) no wider; and on most sequences narrower, the tails gone. */
static void test_cut(void)
{
	uint64_t x = 12345;
	int narrower = 0, multi = 0;
	for (int trial = 0; trial < 2000; trial++) {
		int64_t len[200];
		size_t nf[201], ev[201], mn = 0, me = 0;
		int dp = 1 + trial % 4, pingpong = trial % 2;
		int64_t cap = 64 + (int64_t)(trial % 7) * 50;
		size_t n = 1 + (size_t)(trial % 200);
		for (size_t k = 0; k < n; k++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			/* mostly short documents, a few up to a whole micro-batch */
			int64_t top = (x >> 60) == 0 ? (int64_t)dp * cap : cap;
			len[k] = 1 + (int64_t)((x >> 33) % (uint64_t)top);
		}
		struct bp_error err;
		CHECK(bp_distca_cut(len, n, dp, cap, pingpong, 0, nf, &mn, &err) == 0);
		CHECK(bp_distca_cut(len, n, dp, cap, pingpong, 1, ev, &me, &err) == 0);
		CHECK(me == mn && mn >= 1);
		CHECK(nf[0] == 0 && ev[0] == 0 && nf[mn] == n && ev[me] == n);
		int64_t lo[2] = {INT64_MAX, INT64_MAX}, hi[2] = {0, 0};
		for (int c = 0; c < 2; c++)
			for (size_t j = 0; j < mn; j++) {
				int ok;
				int64_t t = cut_mb(len, c ? ev : nf, j, dp, cap, pingpong, &ok);
				CHECK(ok);
				lo[c] = t < lo[c] ? t : lo[c];
				hi[c] = t > hi[c] ? t : hi[c];
			}
		CHECK(hi[1] - lo[1] <= hi[0] - lo[0]);
		multi += mn >= 2;
		narrower += hi[1] - lo[1] < hi[0] - lo[0];
	}
	/* the re-cut is not a no-op: it narrows most multi-micro-batch sequences */
	CHECK(2 * narrower > multi);
	/* a document over dp x cap is an error either way */
	int64_t big[3] = {10, 500, 10};
	size_t b[4], m;
	struct bp_error err;
	CHECK(bp_distca_cut(big, 3, 2, 100, 1, 1, b, &m, &err) < 0);
	/* a known answer at cap 120: next-fit [60 60] [60 60] [10], even [60] [60 60] [60 10] */
	int64_t five[5] = {60, 60, 60, 60, 10};
	CHECK(bp_distca_cut(five, 5, 1, 120, 0, 0, b, &m, &err) == 0 && m == 3 && b[1] == 2 &&
	      b[2] == 4);
	CHECK(bp_distca_cut(five, 5, 1, 120, 0, 1, b, &m, &err) == 0 && m == 3 && b[1] == 1 &&
	      b[2] == 3);
}

int main(void)
{
	test_cut();
	test_index_vs_scan();
	test_tick_sums();
	test_modes_by_hand();
	test_record_figures();
	test_method_modes();
	test_ticks_identities();
	test_method();
	test_known_answers();
	test_one_sided();
	test_placement();
	test_bytes();
	test_appendices();
	test_modes();
	test_emit();
	return CHECK_DONE();
}
