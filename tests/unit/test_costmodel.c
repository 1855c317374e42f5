/* test_costmodel.c: table interpolation and extrapolation, CP shard geometry, micro-batch
 * times and the T(l,P) fit, on a small hand-made profile whose values are known. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_geom.h"
#include "check.h"
#include "costmodel.h"
#include "profile.h"

static double qs[3] = {128, 1024, 8192};
static double work(double q, double kv)
{
	if (kv < q)
		kv = q;
	return q * kv - q * (q - 1) / 2;
}

static double fwd_tab[9], bwd_tab[9], toks[3] = {128, 1024, 8192}, lf[3], lb[3];
static double cbytes[2] = {1e3, 1e9}, cus[2] = {10, 10010};

static void make_profile(struct bp_profile *p, struct bp_attn_table *at,
			 struct bp_linear_table *lt, struct bp_coll_table *ct)
{
	bp_profile_init(p);
	strcpy(p->name, "hand");
	strcpy(p->kind, "analytic");
	strcpy(p->hw.gpu, "X");
	p->hw.gpus_per_node = 8;
	p->hw.hbm_bytes = (int64_t)80 << 30;
	p->model = (struct bp_model){"m", 4, 1024, 8, 8, 4096, 32000, 1};
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++) {
			fwd_tab[i * 3 + j] = 0.1 + 1e-6 * work(qs[i], qs[j]);
			bwd_tab[i * 3 + j] = 2.5 * fwd_tab[i * 3 + j];
		}
	for (int i = 0; i < 3; i++) {
		lf[i] = 5 + 0.01 * toks[i];
		lb[i] = 2 * lf[i];
	}
	*at = (struct bp_attn_table){.tp = 1, .nq = 3, .nkv = 3, .q = qs, .kv = qs, .fwd = fwd_tab,
				     .bwd = bwd_tab};
	*lt = (struct bp_linear_table){1, 3, toks, lf, lb, NULL, NULL};
	*ct = (struct bp_coll_table){BP_COLL_SENDRECV, 0, 2, 2, cbytes, cus};
	p->attn = at;
	p->nattn = 1;
	p->linear = lt;
	p->nlinear = 1;
	p->coll = ct;
	p->ncoll = 1;
	p->mem = (struct bp_memory){100.0, 18.0, 0};
}

static void test_interp(const struct bp_attn_table *at, const struct bp_linear_table *lt)
{
	/* exact at grid points (kv >= q) */
	for (int i = 0; i < 3; i++)
		for (int j = i; j < 3; j++) {
			CHECK_NEAR(bp_cost_attn(at, qs[i], qs[j], 0), fwd_tab[i * 3 + j], 1e-9);
			CHECK_NEAR(bp_cost_attn(at, qs[i], qs[j], 1), bwd_tab[i * 3 + j], 1e-9);
		}
	/* monotone between grid points along both axes */
	double prev = 0;
	for (double kv = 1024; kv <= 8192; kv += 64) {
		double v = bp_cost_attn(at, 1024, kv, 0);
		CHECK(v >= prev - 1e-12);
		prev = v;
	}
	prev = 0;
	for (double q = 128; q <= 8192; q += 64) {
		double v = bp_cost_attn(at, q, 8192, 0);
		CHECK(v >= prev - 1e-12);
		prev = v;
	}
	/* bilinear: the centre of a cell is the mean of its corners */
	double mid = bp_cost_attn(at, (128 + 1024) / 2.0, (1024 + 8192) / 2.0, 0);
	CHECK_NEAR(mid, (fwd_tab[1] + fwd_tab[2] + fwd_tab[4] + fwd_tab[5]) / 4, 1e-9);
	/* kv < q is read as kv = q */
	CHECK_NEAR(bp_cost_attn(at, 1024, 128, 0), fwd_tab[4], 1e-9);
	/* below the grid: the smallest cell */
	CHECK_NEAR(bp_cost_attn(at, 10, 10, 0), fwd_tab[0], 1e-9);
	CHECK(bp_cost_attn(at, 0, 100, 0) == 0.0);
	/* beyond the grid: the causal-work law from the corner */
	CHECK_NEAR(bp_cost_attn(at, 16384, 16384, 0),
		   fwd_tab[8] * work(16384, 16384) / work(8192, 8192), 1e-6);
	/* linear table: exact, interpolated, proportional beyond, clamped below */
	CHECK_NEAR(bp_cost_linear(lt, 1024, 0), lf[1], 1e-9);
	CHECK_NEAR(bp_cost_linear(lt, (1024 + 8192) / 2.0, 1), (lb[1] + lb[2]) / 2, 1e-9);
	CHECK_NEAR(bp_cost_linear(lt, 16384, 0), lf[2] * 2, 1e-9);
	CHECK_NEAR(bp_cost_linear(lt, 1, 0), lf[0], 1e-9);
}

static double seg_work(int64_t (*seg)[2], size_t n)
{
	double w = 0;
	for (size_t i = 0; i < n; i++)
		w += work((double)seg[i][0], (double)seg[i][1]) ;
	return w;
}

/* Per-document sharding (WLB-LLM Sec. 5.1): every rank the same tokens and the same causal
 * work up to one remainder token per document; sequence sharding covers every token once. */
static void test_shard(void)
{
	struct bp_span spans[5] = {{0, 0, 1000}, {1, 0, 37}, {2, 0, 4099}, {3, 0, 8}, {4, 0, 777}};
	int64_t seg[64][2];
	int64_t total = 1000 + 37 + 4099 + 8 + 777;
	for (int cp = 2; cp <= 8; cp *= 2) {
		int64_t tmin = INT64_MAX, tmax = 0, sum = 0;
		double wmin = 1e300, wmax = 0;
		for (int r = 0; r < cp; r++) {
			int64_t tok;
			size_t n = bp_shard_segments(spans, 5, BP_SHARD_DOCUMENT, cp, r, seg, 64, &tok);
			CHECK(n <= 64);
			sum += tok;
			tmin = tok < tmin ? tok : tmin;
			tmax = tok > tmax ? tok : tmax;
			double w = seg_work(seg, n);
			wmin = w < wmin ? w : wmin;
			wmax = w > wmax ? w : wmax;
		}
		CHECK(sum == total);
		CHECK(tmax - tmin <= 1);
		/* one remainder token per document shifts at most its kv (<= 4099) of work */
		CHECK(wmax - wmin <= 5.0 * 4099);
		int64_t ssum = 0;
		for (int r = 0; r < cp; r++) {
			int64_t tok;
			size_t n = bp_shard_segments(spans, 5, BP_SHARD_SEQUENCE, cp, r, seg, 64, &tok);
			CHECK(n <= 64);
			int64_t qsum = 0;
			for (size_t i = 0; i < n; i++)
				qsum += seg[i][0];
			CHECK(qsum == tok);
			ssum += tok;
		}
		CHECK(ssum == total);
	}
	/* a single document in sequence mode: rank 0 gets the first and last chunks */
	struct bp_span one = {7, 0, 800};
	int64_t tok;
	size_t n = bp_shard_segments(&one, 1, BP_SHARD_SEQUENCE, 2, 0, seg, 64, &tok);
	CHECK(n == 2 && tok == 400);
	CHECK(seg[0][0] == 200 && seg[0][1] == 200);
	CHECK(seg[1][0] == 200 && seg[1][1] == 800);
}

static void test_microbatch(const struct bp_profile *p)
{
	struct bp_costmodel cm;
	struct bp_error err;
	struct bp_scheme sc = {1, 1, 2};
	CHECK(bp_costmodel_init(&cm, p, sc, 1, &err) == 0);
	CHECK(cm.stage_layers[0] == 2 && cm.stage_layers[1] == 2);
	struct bp_span sp[2] = {{0, 0, 1024}, {1, 0, 1024}};
	double f[2], b[2];
	CHECK(bp_cost_microbatch(&cm, sp, 2, BP_SHARD_SEQUENCE, f, b, NULL, &err) == 0);
	double layer = 2 * fwd_tab[4] + bp_cost_linear(p->linear, 2048, 0);
	CHECK_NEAR(f[0], 2 * layer, 1e-9);
	CHECK(f[1] > f[0]); /* the last stage carries the LM head */
	CHECK(b[0] > f[0]);
	/* a document costs more than the same tokens split in two documents (quadratic) */
	struct bp_span big = {0, 0, 2048};
	double f2[2], b2[2];
	CHECK(bp_cost_microbatch(&cm, &big, 1, BP_SHARD_SEQUENCE, f2, b2, NULL, &err) == 0);
	CHECK(f2[0] > f[0]);
	/* memory: linear in tokens */
	CHECK(bp_cost_act_bytes(&cm, 0, 1000) == 2 * 1000 * 100);
	CHECK(bp_cost_p2p(&cm, 1000) > 0);
	bp_costmodel_release(&cm);
	/* a TP degree without tables fails */
	sc.tp = 2;
	CHECK(bp_costmodel_init(&cm, p, sc, 1, &err) == -1);
	CHECK(strstr(err.text, "no attention table for tp 2") != NULL);
	bp_costmodel_release(&cm);
}

/* One table's value at bytes: bp_cost_coll on a profile holding only that table, at its own
 * group size (no scaling, no interpolation). */
static double table_value(const struct bp_coll_table *c, double bytes)
{
	struct bp_profile one;
	bp_profile_init(&one);
	one.coll = (struct bp_coll_table *)c;
	one.ncoll = 1;
	return bp_cost_coll(&one, c->op, c->ranks, c->inter, bytes);
}

static double ring(int n)
{
	return (double)(n - 1) / n;
}

/* bp_cost_coll as it searched before tables were picked once per cost model: the tables of
 * op and placement bracketing ranks, the network's when no intra-node table exists. */
static double ref_coll(const struct bp_coll_table *t, size_t nt, enum bp_coll_op op, int ranks,
		       int inter, double bytes)
{
	if (ranks <= 1 || bytes <= 0)
		return 0.0;
	const struct bp_coll_table *below = NULL, *above = NULL;
	for (size_t i = 0; i < nt; i++) {
		if (t[i].op != op || t[i].inter != inter)
			continue;
		if (t[i].ranks <= ranks && (!below || t[i].ranks > below->ranks))
			below = &t[i];
		if (t[i].ranks >= ranks && (!above || t[i].ranks < above->ranks))
			above = &t[i];
	}
	if (!below && !above)
		return inter ? 0.0 : ref_coll(t, nt, op, ranks, 1, bytes);
	if (!below || !above || below == above) {
		const struct bp_coll_table *c = below ? below : above;
		double v = table_value(c, bytes);
		if (op != BP_COLL_SENDRECV && c->ranks != ranks)
			v *= ring(ranks) / ring(c->ranks);
		return v;
	}
	double vb = table_value(below, bytes), va = table_value(above, bytes);
	double w = (log2(ranks) - log2(below->ranks)) / (log2(above->ranks) - log2(below->ranks));
	return vb + w * (va - vb);
}

/* Picked tables (struct bp_coll_pick) cost exactly what the search per call did, for every
 * op, group size, placement and message size, and a cost model's collectives are those. */
static void test_coll_pick(const struct bp_profile *base)
{
	static double b3[3] = {1e3, 1e6, 1e9}, u1[3] = {5, 50, 9000}, u2[3] = {7, 80, 15000},
		      u3[3] = {20, 300, 40000}, u4[3] = {9, 60, 11000};
	struct bp_coll_table t[6] = {
		{BP_COLL_ALLREDUCE, 0, 2, 3, b3, u1},     {BP_COLL_ALLREDUCE, 0, 8, 3, b3, u2},
		{BP_COLL_ALLREDUCE, 1, 16, 3, b3, u3},    {BP_COLL_ALLGATHER, 1, 2, 3, b3, u4},
		{BP_COLL_ALLGATHER, 1, 8, 3, b3, u3},     {BP_COLL_SENDRECV, 1, 2, 3, b3, u1},
	};
	struct bp_profile p = *base;
	p.coll = t;
	p.ncoll = 6;
	double bytes[] = {-1, 0, 10, 1e3, 4.2e5, 1e9, 3e9};
	enum bp_coll_op ops[] = {BP_COLL_ALLREDUCE, BP_COLL_ALLGATHER, BP_COLL_REDUCESCATTER,
				 BP_COLL_SENDRECV};
	for (size_t o = 0; o < 4; o++)
		for (int ranks = 1; ranks <= 40; ranks++)
			for (int inter = 0; inter < 2; inter++)
				for (size_t k = 0; k < sizeof(bytes) / sizeof(bytes[0]); k++) {
					double want = ref_coll(t, 6, ops[o], ranks, inter, bytes[k]);
					double got = bp_cost_coll(&p, ops[o], ranks, inter, bytes[k]);
					CHECK(got == want);
				}
	/* a cost model's picks: cp 4 all-gather between the 2- and 8-rank tables, p2p */
	struct bp_costmodel cm;
	struct bp_error err;
	struct bp_scheme sc = {1, 4, 2};
	CHECK(bp_costmodel_init(&cm, &p, sc, 2, &err) == 0);
	CHECK(bp_coll_cost(&cm.cp_allgather, 4.2e5) ==
	      bp_cost_coll(&p, BP_COLL_ALLGATHER, 4, cm.cp_inter, 4.2e5));
	CHECK(bp_cost_p2p(&cm, 1000) ==
	      bp_cost_coll(&p, BP_COLL_SENDRECV, 2, cm.pp_inter, 1000 * cm.token_bytes / 4));
	CHECK(bp_cost_grad_sync(&cm, 0) > 0);
	bp_costmodel_release(&cm);
}

static void test_fit(const struct bp_profile *p)
{
	struct bp_fit fit;
	struct bp_error err;
	struct bp_scheme sc = {1, 1, 1};
	struct bp_costmodel cm;
	CHECK(bp_fit_scheme(p, sc, 8192, &fit, &err) == 0);
	CHECK(bp_costmodel_init(&cm, p, sc, 1, &err) == 0);
	for (int64_t l = 256; l <= 8192; l *= 2) {
		double t = 0.0, pred = fit.a * l * l + fit.b * l + fit.c;
		CHECK(bp_cost_doc(&cm, l, &t, &err) == 0);
		CHECK(fabs(pred - t) <= 0.15 * t);
	}
	CHECK(fit.a > 0);
	bp_costmodel_release(&cm);
}

/* The measured profiles' optional tables: a launch costs at least its longest segment alone
 * (bp_cost_attn_launch), and the LM head comes from its own curve when there is one. */
static void test_alone_and_lm(const struct bp_profile *base)
{
	struct bp_profile p = *base;
	struct bp_attn_table at = base->attn[0];
	struct bp_linear_table lt = base->linear[0];
	double fa[9], ba[9], lmf[3], lmb[3];
	for (int i = 0; i < 9; i++) { /* alone: 4x the packed cell */
		fa[i] = 4.0 * at.fwd[i];
		ba[i] = 4.0 * at.bwd[i];
	}
	for (int i = 0; i < 3; i++) {
		lmf[i] = 100.0 + i;
		lmb[i] = 200.0 + i;
	}
	int64_t seg[3][2] = {{1024, 1024}, {128, 128}, {128, 128}};
	double packed = 0.0;
	for (int i = 0; i < 3; i++)
		packed += bp_cost_attn(&at, (double)seg[i][0], (double)seg[i][1], 0);
	/* without alone tables: the sum */
	CHECK_NEAR(bp_cost_attn_launch(&at, (const int64_t(*)[2])seg, 3, 0), packed, 1e-12);
	CHECK(bp_cost_attn_alone(&at, 1024, 1024, 0) == 0.0);
	at.fwd_alone = fa;
	at.bwd_alone = ba;
	/* the 1024 segment alone (4x its packed cell) exceeds the sum of the three packed */
	CHECK_NEAR(bp_cost_attn_alone(&at, 1024, 1024, 1), 4.0 * bwd_tab[4], 1e-12);
	CHECK(4.0 * fwd_tab[4] > packed);
	CHECK_NEAR(bp_cost_attn_launch(&at, (const int64_t(*)[2])seg, 3, 0), 4.0 * fwd_tab[4], 1e-12);
	/* many packed segments: the sum wins again */
	int64_t many[64][2];
	for (int i = 0; i < 64; i++)
		many[i][0] = many[i][1] = 1024;
	CHECK_NEAR(bp_cost_attn_launch(&at, (const int64_t(*)[2])many, 64, 1), 64 * bwd_tab[4], 1e-9);

	p.attn = &at;
	p.linear = &lt;
	struct bp_costmodel cm;
	struct bp_error err;
	struct bp_scheme sc = {1, 1, 1};
	CHECK(bp_costmodel_init(&cm, &p, sc, 1, &err) == 0);
	double ratio = bp_cost_lm_head(&cm, 1024, 0) / bp_cost_linear(&lt, 1024, 0);
	CHECK(ratio > 0 && fabs(ratio - cm.lm_ratio) < 1e-9); /* no curve: lm_ratio x a layer */
	lt.lm_fwd = lmf;
	lt.lm_bwd = lmb;
	CHECK_NEAR(bp_cost_lm_head(&cm, 1024, 0), 101.0, 1e-12);
	CHECK_NEAR(bp_cost_lm_head(&cm, 8192, 1), 202.0, 1e-12);
	CHECK_NEAR(bp_cost_lm_head(&cm, 16384, 1), 404.0, 1e-12); /* linear past the table */
	CHECK(bp_cost_lm_head(&cm, 0, 1) == 0.0);
	bp_costmodel_release(&cm);
}

/* The launch model (bp_attn_fit_launch, bp_cost_attn_launch), on a table of one rate whose
 * two shortest documents run 3x slower alone: the fit finds places and per-tile times; a
 * launch of the n copies balprof packs a cell with costs n x the cell (the model reads the
 * cells as what was measured); a long launch stays near the packed sum; adding a segment
 * never lowers a launch by more than list scheduling's anomalies (3%); without alone cells
 * nothing is fitted and a launch is the packed-or-alone rule. A table with alone cells is
 * interpolated in throughput: exact for one rate, where time interpolation overprices the
 * middle. */
/* attn_geom.h: the kernels' blocks. */
static void test_attn_geom(void)
{
	CHECK(bp_attn_fwd_rows(BP_ATTN_GEOM_WMMA) == 64 && bp_attn_fwd_rows(BP_ATTN_GEOM_MMA) == 128);
	/* 8K tokens, 1 kv head (TP 8 of 8 kv heads): 129 blocks -> 8 each (the cap) */
	CHECK(bp_attn_bwd_split(BP_ATTN_GEOM_MMA, 8192, 1, 1, 4 * 128) == 8);
	/* 32K tokens in 2 segments, 2 kv heads: 1028 blocks already */
	CHECK(bp_attn_bwd_split(BP_ATTN_GEOM_MMA, 32768, 2, 2, 4 * 512) == 1);
	/* 4K tokens in 2 segments, 2 kv heads: 132 blocks -> ceil(1024 / 132) = 8; 3 steps at
	 * most -> 3 */
	CHECK(bp_attn_bwd_split(BP_ATTN_GEOM_MMA, 4096, 2, 2, 64) == 8);
	CHECK(bp_attn_bwd_split(BP_ATTN_GEOM_MMA, 4096, 2, 2, 3) == 3);
	/* 512 blocks -> 2; nothing to split, or the old kernels: 1 */
	CHECK(bp_attn_bwd_split(BP_ATTN_GEOM_MMA, 64 * 63, 1, 8, 100) == 2);
	CHECK(bp_attn_bwd_split(BP_ATTN_GEOM_MMA, 4096, 2, 2, 1) == 1);
	CHECK(bp_attn_bwd_split(BP_ATTN_GEOM_WMMA, 4096, 2, 2, 64) == 1);
	CHECK(bp_attn_bwd_split(BP_ATTN_GEOM_MMA, 0, 0, 2, 64) == 1);
}

static void test_launch_model(int geom)
{
	static double g[5] = {512, 1024, 2048, 4096, 8192};
	double f[25], b[25], fa[25], ba[25];
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 5; j++) {
			f[i * 5 + j] = 1e-4 * work(g[i], g[j]);
			b[i * 5 + j] = 2.5 * f[i * 5 + j];
			fa[i * 5 + j] = f[i * 5 + j] * (i == j && i < 2 ? 3.0 : 1.0);
			ba[i * 5 + j] = b[i * 5 + j] * (i == j && i < 2 ? 3.0 : 1.0);
		}
	struct bp_attn_table t = {.tp = 1, .nq = 5, .nkv = 5, .q = g, .kv = g, .fwd = f,
				  .bwd = b, .fwd_alone = fa, .bwd_alone = ba, .geom = geom};
	CHECK_NEAR(bp_cost_attn(&t, 3000, 3000, 0), 1e-4 * work(3000, 3000), 1e-9);
	CHECK_NEAR(bp_cost_attn(&t, 1500, 6000, 1), 2.5e-4 * work(1500, 6000), 1e-9);
	struct bp_attn_table plain_t = t;
	plain_t.fwd_alone = plain_t.bwd_alone = NULL;
	CHECK(bp_cost_attn(&plain_t, 3000, 3000, 0) > 1.02 * 1e-4 * work(3000, 3000));

	bp_attn_fit_launch(&t, 8, 2);
	CHECK(t.heads == 8 && t.kv_heads == 2);
	for (int bw = 0; bw < 2; bw++) {
		CHECK(t.slots[bw] >= 1 && t.slots[bw] <= 2048 && t.unit[bw] != NULL);
		/* n copies of a cell's document, n as balprof packs them: n x the cell */
		for (int i = 0; i < 5; i++) {
			const int64_t rows = bw ? 64 : bp_attn_fwd_rows(geom);
			int64_t len = (int64_t)g[i], blocks = (len / rows) * (bw ? 2 : 8);
			int64_t n = (BP_PROF_TARGET_BLOCKS + blocks - 1) / blocks;
			int64_t(*seg)[2] = calloc((size_t)n, sizeof(*seg));
			CHECK(seg != NULL);
			for (int64_t k = 0; seg && k < n; k++)
				seg[k][0] = seg[k][1] = len;
			if (seg && n > 1)
				CHECK_NEAR(bp_cost_attn_launch(&t, (const int64_t(*)[2])seg, (size_t)n, bw) /
						   (n * (bw ? b : f)[i * 5 + i]), 1.0, 1e-9);
			free(seg);
		}
	}
	/* a long launch: near the packed sum, or below it by the last wave's tail that a cell
	 * (16 copies here) carries and 64 copies amortise: the more places the fit found, the
	 * longer that tail (the mma geometry's split makes the alone launch wide, so its fit
	 * finds 393 places for the backward, where the cells hold 2048 blocks: 14% below) */
	int64_t many[64][2];
	for (int i = 0; i < 64; i++)
		many[i][0] = many[i][1] = 4096;
	for (int bw = 0; bw < 2; bw++) {
		double sum = 64 * bp_cost_attn(&t, 4096, 4096, bw);
		double c = bp_cost_attn_launch(&t, (const int64_t(*)[2])many, 64, bw);
		CHECK(c > 0.8 * sum && c < 1.1 * sum);
	}
	/* a segment more never costs much less */
	uint64_t x = 7;
	for (int trial = 0; trial < 200; trial++) {
		int64_t seg[9][2];
		int n = 1 + trial % 8;
		double prev[2] = {0, 0};
		for (int k = 0; k <= n; k++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			int64_t len = 64 + (int64_t)((x >> 33) % 6000);
			seg[k][0] = len;
			seg[k][1] = len + (int64_t)((x >> 20) % 3) * 256; /* CP-like prefixes too */
			for (int bw = 0; bw < 2; bw++) {
				double c = bp_cost_attn_launch(&t, (const int64_t(*)[2])seg, k + 1, bw);
				CHECK(c > 0 && c >= 0.97 * prev[bw]);
				prev[bw] = c;
			}
		}
	}
	/* no alone cell slower than packed: no model, the rule (the fit frees the old one) */
	for (int i = 0; i < 25; i++) {
		fa[i] = f[i];
		ba[i] = b[i];
	}
	/* The mma kernels split a short backward's key tiles (attn_geom.h): one 8K document
	 * alone, key tile 0 walking 128 query tiles x 4 heads, ends sooner split 4 ways than
	 * the same places and tile times give it unsplit. */
	if (geom == BP_ATTN_GEOM_MMA) {
		CHECK(bp_attn_bwd_split(geom, 8192, 1, 2, 4 * 128) == 4);
		const int64_t one[1][2] = {{8192, 8192}};
		struct bp_attn_table w = t;
		w.geom = BP_ATTN_GEOM_WMMA;
		double split = bp_cost_attn_launch(&t, one, 1, 1);
		double whole = bp_cost_attn_launch(&w, one, 1, 1);
		CHECK(split > 0 && split < 0.5 * whole);
	}
	bp_attn_fit_launch(&t, 8, 2);
	CHECK(t.slots[0] == 0 && t.slots[1] == 0 && !t.unit[0] && !t.unit[1]);
	int64_t two[2][2] = {{1024, 1024}, {512, 512}};
	CHECK_NEAR(bp_cost_attn_launch(&t, (const int64_t(*)[2])two, 2, 0),
		   bp_cost_attn(&t, 1024, 1024, 0) + bp_cost_attn(&t, 512, 512, 0), 1e-12);
}

int main(void)
{
	struct bp_profile p;
	struct bp_attn_table at;
	struct bp_linear_table lt;
	struct bp_coll_table ct;
	make_profile(&p, &at, &lt, &ct);
	test_interp(&at, &lt);
	test_shard();
	test_microbatch(&p);
	test_coll_pick(&p);
	test_fit(&p);
	test_alone_and_lm(&p);
	test_attn_geom();
	test_launch_model(BP_ATTN_GEOM_WMMA);
	test_launch_model(BP_ATTN_GEOM_MMA);
	return CHECK_DONE();
}
