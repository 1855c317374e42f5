/* costmodel.c: table lookups, CP sharding geometry and micro-batch times (costmodel.h).
 *
 * Called by every method (per-item costs for packing), by the step simulator (sim/predict.c:
 * predicted per-stage times of every micro-batch, p2p, gradient sync, memory), by refit.c and
 * by balexec's engine (executor/engine.c, shares.c). Implements:
 *   - bilinear interpolation on the (q, kv) attention grid (DistCA Sec. 4.2 "Profiler");
 *     outside the grid, the causal work law W(q,kv) = q*kv - q(q-1)/2 scales the value at
 *     the nearest grid point (quadratic in length, the law WLB-LLM Sec. 3 states);
 *   - CP sharding per sequence and per document (WLB-LLM Sec. 5.1), each rank's query
 *     segments measured on the table as (q, kv) = (segment length, its end position);
 *   - the TP/CP group waits for its slowest member (WLB-LLM Sec. 3.1, Fig. 5);
 *   - activation and model-state memory (Hydraulis App. B.1) and the T(l,P) fit (App. B.2).
 * Placement comes from the layout (layout.h): a group "crosses nodes" when its ranks lie on
 * more than one node of gpus_per_node GPUs. A cost model serves one pipeline of a layout;
 * struct bp_costs keeps one per (layout, pipeline) a plan uses. Building one is cheap; the
 * hot path is the per-document and per-micro-batch cost (bp_cost_mb), so whatever depends
 * only on the pipeline (collective tables, LM-head ratio) is resolved at init. */
#include "costmodel.h"

#include "costkinds.h"
#include "attn_geom.h"
#include "heap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const shard_names[BP_SHARD_NMODES] = {"sequence", "document", "adaptive",
							  "ulysses"};

const char *bp_shard_name(enum bp_shard s)
{
	return (unsigned)s < BP_SHARD_NMODES ? shard_names[s] : "?";
}

int bp_shard_parse(const char *s, enum bp_shard *out)
{
	for (int i = 0; i < BP_SHARD_NMODES; i++)
		if (!strcmp(s, shard_names[i])) {
			*out = (enum bp_shard)i;
			return 0;
		}
	return -1;
}

size_t bp_bracket(const double *axis, size_t n, double x)
{
	size_t lo = 0, hi = n - 1;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (axis[mid] <= x)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Linear interpolation of y over a strictly increasing axis, x inside [axis[0], axis[n-1]]. */
static double interp1(const double *axis, const double *y, size_t n, double x)
{
	if (n == 1)
		return y[0];
	size_t i = bp_bracket(axis, n, x);
	double t = (x - axis[i]) / (axis[i + 1] - axis[i]);
	return y[i] + t * (y[i + 1] - y[i]);
}

/* Causal attention work of q queries at the end of a kv prefix (kv >= q). */
static double causal_work(double q, double kv)
{
	return q * kv - q * (q - 1.0) / 2.0;
}

/* Tables with alone cells (measured by balprof) are interpolated in throughput, pairs per
 * microsecond, times the causal work at the point: attention time grows with the square of
 * length, and a straight line between two cells of a 1.5x or 2x grid overprices the middle
 * (about 4% on the diagonal) while throughput varies slowly. Analytic tables keep the time
 * interpolation their closed form was checked with. */
static double corner(const struct bp_attn_table *t, const double *v, size_t i, size_t j)
{
	double x = v[i * t->nkv + j];
	if (!t->fwd_alone)
		return x;
	double q = t->q[i], kv = t->kv[j] < q ? q : t->kv[j];
	return x / causal_work(q, kv);
}

static double grid_value(const struct bp_attn_table *t, const double *v, double q, double kv)
{
	size_t nq = t->nq, nk = t->nkv;
	if (nq == 1 && nk == 1)
		return v[0];
	size_t i = nq > 1 ? bp_bracket(t->q, nq, q) : 0;
	size_t j = nk > 1 ? bp_bracket(t->kv, nk, kv) : 0;
	double tq = nq > 1 ? (q - t->q[i]) / (t->q[i + 1] - t->q[i]) : 0.0;
	double tk = nk > 1 ? (kv - t->kv[j]) / (t->kv[j + 1] - t->kv[j]) : 0.0;
	size_t i1 = nq > 1 ? i + 1 : i, j1 = nk > 1 ? j + 1 : j;
	double v00 = corner(t, v, i, j), v01 = corner(t, v, i, j1);
	double v10 = corner(t, v, i1, j), v11 = corner(t, v, i1, j1);
	double r = (1 - tq) * ((1 - tk) * v00 + tk * v01) + tq * ((1 - tk) * v10 + tk * v11);
	return t->fwd_alone ? r * causal_work(q, kv < q ? q : kv) : r;
}

static double attn_value(const struct bp_attn_table *t, const double *v, double q, double kv)
{
	if (q <= 0)
		return 0.0;
	if (kv < q)
		kv = q;
	double qmin = t->q[0], qmax = t->q[t->nq - 1];
	double kmin = t->kv[0], kmax = t->kv[t->nkv - 1];
	/* Below the grid: the smallest cell (tile padding makes small inputs cost the same). */
	double qc = q < qmin ? qmin : q, kc = kv < kmin ? kmin : kv;
	if (qc <= qmax && kc <= kmax)
		return grid_value(t, v, qc, kc);
	/* Beyond the grid: scale the nearest in-grid point by the causal work law. */
	double qg = qc > qmax ? qmax : qc;
	double kg = kc > kmax ? kmax : kc;
	if (kg < qg)
		kg = qg;
	double base = grid_value(t, v, qg, kg);
	return base * causal_work(qc, kc) / causal_work(qg, kg);
}

/* Bilinear interpolation of a per-tile time matrix (the launch model's), inside the grid. */
static double unit_grid(const struct bp_attn_table *t, const double *v, double q, double kv)
{
	size_t nq = t->nq, nk = t->nkv;
	size_t i = nq > 1 ? bp_bracket(t->q, nq, q) : 0;
	size_t j = nk > 1 ? bp_bracket(t->kv, nk, kv) : 0;
	double tq = nq > 1 ? (q - t->q[i]) / (t->q[i + 1] - t->q[i]) : 0.0;
	double tk = nk > 1 ? (kv - t->kv[j]) / (t->kv[j + 1] - t->kv[j]) : 0.0;
	size_t i1 = nq > 1 ? i + 1 : i, j1 = nk > 1 ? j + 1 : j;
	return (1 - tq) * ((1 - tk) * v[i * nk + j] + tk * v[i * nk + j1]) +
	       tq * ((1 - tk) * v[i1 * nk + j] + tk * v[i1 * nk + j1]);
}

double bp_cost_attn(const struct bp_attn_table *t, double q, double kv, int bwd)
{
	return attn_value(t, bwd ? t->bwd : t->fwd, q, kv);
}

double bp_cost_attn_alone(const struct bp_attn_table *t, double q, double kv, int bwd)
{
	if (!t->fwd_alone || !t->bwd_alone)
		return 0.0;
	return attn_value(t, bwd ? t->bwd_alone : t->fwd_alone, q, kv);
}

/* ---- the launch model (bp_cost_attn_launch, bp_attn_fit_launch) ----
 *
 * A launch's blocks start in launch order (heads outermost, then segments, then tiles) on S
 * places, each on the place that frees first; a block takes u x the tiles it visits, u being
 * its segment's time per tile. A packed cell is what balprof measured: n copies of the
 * segment in one launch (BP_PROF_TARGET_BLOCKS blocks), time / n; so u = cell x n / (the
 * n-copy launch's end in tiles). The alone cells fix S: one copy against n copies. */

#define LAUNCH_TILE 64        /* keys per tile; the backward's query rows per step */
#define LAUNCH_SLOTS_MAX 2048 /* places at most (an H100 runs 132 SMs x 1-16 blocks) */
#define LAUNCH_EXACT 8       /* waves of blocks dealt one by one; beyond, only the last 2 S */

static int64_t n_tiles(int64_t len)
{
	return (len + LAUNCH_TILE - 1) / LAUNCH_TILE;
}

/* Blocks of a segment: the forward's of fwd_rows(geom) query rows, the backward's of 64
 * keys. */
static int64_t n_blocks(const struct bp_attn_table *t, int64_t q, int64_t kv, int bwd)
{
	if (bwd)
		return n_tiles(kv);
	const int64_t rows = bp_attn_fwd_rows(t->geom);
	return (q + rows - 1) / rows;
}

/* Tiles (64 query rows x 64 keys) block b of a segment visits: forward, each of its 64-row
 * parts the key tiles up to that part's last row's causal limit (the kernels' warps skip the
 * tiles none of their rows sees); backward, the query tiles that see key tile b, times the
 * GQA group. */
static int64_t block_work(const struct bp_attn_table *t, int64_t q, int64_t kv, int64_t b,
			  int bwd, int group)
{
	int64_t off = kv - q;
	if (!bwd) {
		const int64_t parts = bp_attn_fwd_rows(t->geom) / LAUNCH_TILE;
		int64_t w = 0;
		for (int64_t p = b * parts; p < (b + 1) * parts && p * LAUNCH_TILE < q; p++) {
			int64_t end = (p + 1) * LAUNCH_TILE < q ? (p + 1) * LAUNCH_TILE : q;
			w += (end - 1 + off) / LAUNCH_TILE + 1;
		}
		return w;
	}
	int64_t r0 = b * LAUNCH_TILE - off;
	if (r0 < 0)
		r0 = 0;
	return r0 >= q ? 0 : (n_tiles(q) - r0 / LAUNCH_TILE) * group;
}

/* Share z of s of a block's w tiles: the kernels' contiguous split of its steps. */
static int64_t share(int64_t w, int z, int s)
{
	return w * (z + 1) / s - w * z / s;
}

static int launch_group(const struct bp_attn_table *t)
{
	int g = t->heads / t->kv_heads;
	return g < 1 ? 1 : g;
}

/* Segment k of the launch's dispatch order (copies x n segments; the forward takes them last
 * first) and block b of it in order (the forward: its last tiles first). */
static size_t launch_seg(size_t k, size_t n, int bwd)
{
	size_t i = k % n;
	return bwd ? i : n - 1 - i;
}

/* The backward's blocks per (key tile, kv head) of a launch of `copies` x the n segments
 * (attn_geom.h; 1 for the forward). */
static int launch_split(const struct bp_attn_table *t, const int64_t (*seg)[2], size_t n,
			int64_t copies, int bwd)
{
	if (!bwd)
		return 1;
	int64_t total_kv = 0, max_q = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t q = seg[i][0], kv = seg[i][1] < q ? q : seg[i][1];
		total_kv += kv;
		if (q > max_q)
			max_q = q;
	}
	return bp_attn_bwd_split(t->geom, total_kv * copies, (int64_t)n * copies, t->kv_heads,
				 (int64_t)launch_group(t) * n_tiles(max_q));
}

/* The end of a launch of `copies` x the n segments, with u[i] the time per tile of segment
 * i, on S places, blocks dispatched in the grid's order (share, head, segment, block). Up to
 * LAUNCH_EXACT waves every block is dealt; beyond, the blocks before the last 2 S (many,
 * small next to the launch) are taken to leave every place at their average, and only the
 * last 2 S are dealt: O(S log S + segments) a call. */
static double launch_end(const struct bp_attn_table *t, const int64_t (*seg)[2], size_t n,
			 int64_t copies, const double *u, int bwd, int S)
{
	double h[LAUNCH_SLOTS_MAX]; /* the places' finish times, a min-heap (heap.h) */
	const int heads = bwd ? t->kv_heads : t->heads, group = launch_group(t);
	const int split = launch_split(t, seg, n, copies, bwd);
	const size_t nk = (size_t)copies * n;
	double total = 0.0;
	int64_t blocks = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t q = seg[i][0], kv = seg[i][1] < q ? q : seg[i][1];
		if (q <= 0 || !(u[i] > 0))
			continue;
		int64_t nb = n_blocks(t, q, kv, bwd), w = 0;
		for (int64_t b = 0; b < nb; b++)
			w += block_work(t, q, kv, b, bwd, group);
		total += (double)w * u[i] * (double)copies * heads;
		blocks += nb * copies * heads * split;
	}
	for (int i = 0; i < S; i++)
		h[i] = 0.0;
	int64_t skip = blocks > (int64_t)LAUNCH_EXACT * S ? blocks - 2 * (int64_t)S : 0;
	if (skip > 0) { /* the first blocks' time, spread evenly */
		double tail = 0.0;
		int64_t left = 2 * (int64_t)S;
		for (int z = split - 1; z >= 0 && left > 0; z--)
			for (int hd = heads - 1; hd >= 0 && left > 0; hd--)
				for (size_t k = nk; k-- > 0 && left > 0;) {
					size_t i = launch_seg(k, n, bwd);
					int64_t q = seg[i][0], kv = seg[i][1] < q ? q : seg[i][1];
					if (q <= 0 || !(u[i] > 0))
						continue;
					int64_t nb = n_blocks(t, q, kv, bwd);
					for (int64_t b = nb; b-- > 0 && left > 0; left--)
						tail += (double)share(block_work(t, q, kv,
										 bwd ? b : nb - 1 - b,
										 bwd, group),
								      z, split) *
							u[i];
				}
		for (int i = 0; i < S; i++)
			h[i] = (total - tail) / S;
	}
	int64_t seen = 0;
	for (int z = 0; z < split; z++)
		for (int hd = 0; hd < heads; hd++)
			for (size_t k = 0; k < nk; k++) {
				size_t i = launch_seg(k, n, bwd);
				int64_t q = seg[i][0], kv = seg[i][1] < q ? q : seg[i][1];
				if (q <= 0 || !(u[i] > 0))
					continue;
				int64_t nb = n_blocks(t, q, kv, bwd);
				if (seen + nb <= skip) {
					seen += nb;
					continue;
				}
				for (int64_t b = 0; b < nb; b++, seen++) {
					if (seen < skip)
						continue;
					int64_t x = share(block_work(t, q, kv, bwd ? b : nb - 1 - b, bwd,
								     group),
							  z, split);
					if (x > 0)
						bp_heap_grow_least(h, S, (double)x * u[i]);
				}
			}
	double end = 0.0;
	for (int i = 0; i < S; i++)
		if (h[i] > end)
			end = h[i];
	return end;
}

/* Copies of (q, kv) in one of balprof's packed launches. */
static int64_t packed_copies(const struct bp_attn_table *t, int64_t q, int64_t kv, int bwd)
{
	int64_t b = n_blocks(t, q, kv, bwd) * (bwd ? t->kv_heads : t->heads);
	int64_t n = b > 0 ? (BP_PROF_TARGET_BLOCKS + b - 1) / b : 1;
	return n < 1 ? 1 : n;
}

/* Time per tile of (q, kv) from a packed time: the cell x n over the n-copy launch's end in
 * tiles (u = 1). */
static double unit_time(const struct bp_attn_table *t, int64_t q, int64_t kv, double packed,
			int bwd, int S)
{
	const int64_t one[1][2] = {{q, kv}};
	const double u1 = 1.0;
	int64_t n = packed_copies(t, q, kv, bwd);
	double end = launch_end(t, one, 1, n, &u1, bwd, S);
	return end > 0 ? packed * (double)n / end : 0.0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* One copy against n copies, in tiles: the model's alone / packed. */
static double alone_ratio(const struct bp_attn_table *t, int64_t len, int bwd, int S)
{
	const int64_t one[1][2] = {{len, len}};
	const double u1 = 1.0;
	int64_t n = packed_copies(t, len, len, bwd);
	double a = launch_end(t, one, 1, 1, &u1, bwd, S);
	double p = launch_end(t, one, 1, n, &u1, bwd, S);
	return p > 0 ? a * (double)n / p : 1.0;
}

void bp_attn_fit_launch(struct bp_attn_table *t, int heads, int kv_heads)
{
	t->heads = heads > 0 ? heads : 1;
	t->kv_heads = kv_heads > 0 ? kv_heads : 1;
	t->slots[0] = t->slots[1] = 0.0;
	free(t->unit[0]);
	free(t->unit[1]);
	t->unit[0] = t->unit[1] = NULL;
	if (!t->fwd_alone || !t->bwd_alone)
		return;
	for (int bwd = 0; bwd < 2; bwd++) {
		const double *v = bwd ? t->bwd : t->fwd, *va = bwd ? t->bwd_alone : t->fwd_alone;
		double found[64];
		size_t nf = 0;
		for (size_t i = 0; i < t->nq && nf < BP_ARRAY_LEN(found); i++)
			for (size_t j = 0; j < t->nkv; j++) {
				double p = v[i * t->nkv + j], a = va[i * t->nkv + j];
				int64_t len = (int64_t)t->q[i];
				if (t->kv[j] != t->q[i] || !(p > 0) || !(a >= 1.05 * p) || len < 1 ||
				    packed_copies(t, len, len, bwd) < 2)
					continue;
				/* The ratio grows with S: the fewest places that reach it. */
				int lo = 1, hi = LAUNCH_SLOTS_MAX;
				if (alone_ratio(t, len, bwd, hi) < a / p)
					continue;
				while (lo < hi) {
					int mid = lo + (hi - lo) / 2;
					if (alone_ratio(t, len, bwd, mid) >= a / p)
						hi = mid;
					else
						lo = mid + 1;
				}
				found[nf++] = lo;
			}
		if (!nf)
			continue;
		qsort(found, nf, sizeof(found[0]), cmp_double);
		double S = nf % 2 ? found[nf / 2] : floor((found[nf / 2 - 1] + found[nf / 2]) / 2);
		double *u = malloc(t->nq * t->nkv * sizeof(*u));
		if (!u)
			continue; /* out of memory: no launch model for this pass */
		for (size_t i = 0; i < t->nq; i++) {
			double same = 0.0; /* cells with kv < q hold the kv = q value */
			int have = 0;
			for (size_t j = 0; j < t->nkv; j++) {
				int64_t q = (int64_t)t->q[i], kv = (int64_t)t->kv[j];
				if (kv < q && have) {
					u[i * t->nkv + j] = same;
					continue;
				}
				u[i * t->nkv + j] = unit_time(t, q, kv < q ? q : kv,
							      v[i * t->nkv + j], bwd, (int)S);
				if (kv <= q) {
					same = u[i * t->nkv + j];
					have = 1;
				}
			}
		}
		t->unit[bwd] = u;
		t->slots[bwd] = S;
	}
}

/* bp_cost_attn_launch, or with model 0 the packed-or-alone rule whatever the table. */
static double launch_cost(const struct bp_attn_table *t, const int64_t (*seg)[2], size_t n,
			  int bwd, int model)
{
	int S = model ? (int)t->slots[bwd ? 1 : 0] : 0;
	const double *um = t->unit[bwd ? 1 : 0];
	if (S >= 1 && um && n > 0) {
		double stack[64], *u = n <= 64 ? stack : malloc(n * sizeof(double));
		if (u) {
			for (size_t i = 0; i < n; i++) { /* the time per tile, in the grid */
				double q = (double)seg[i][0], kv = (double)seg[i][1];
				double qc = q < t->q[0] ? t->q[0] : q > t->q[t->nq - 1] ? t->q[t->nq - 1] : q;
				double kc = kv < qc ? qc : kv;
				kc = kc < t->kv[0] ? t->kv[0] : kc > t->kv[t->nkv - 1] ? t->kv[t->nkv - 1] : kc;
				u[i] = q > 0 ? unit_grid(t, um, qc, kc) : 0.0;
			}
			double end = launch_end(t, seg, n, 1, u, bwd, S);
			if (u != stack)
				free(u);
			return end;
		}
		/* out of memory: the rule without the model below */
	}
	double sum = 0.0, alone = 0.0;
	for (size_t i = 0; i < n; i++) {
		sum += bp_cost_attn(t, (double)seg[i][0], (double)seg[i][1], bwd);
		double a = bp_cost_attn_alone(t, (double)seg[i][0], (double)seg[i][1], bwd);
		if (a > alone)
			alone = a;
	}
	return sum > alone ? sum : alone;
}

double bp_cost_attn_launch(const struct bp_attn_table *t, const int64_t (*seg)[2], size_t n,
			   int bwd)
{
	return launch_cost(t, seg, n, bwd, 1);
}

static double curve_value(const double *x, const double *y, size_t n, double at)
{
	if (at <= x[0])
		return y[0];
	if (at >= x[n - 1])
		return y[n - 1] * at / x[n - 1]; /* linear law beyond the table */
	return interp1(x, y, n, at);
}

double bp_cost_linear(const struct bp_linear_table *t, double tokens, int bwd)
{
	if (tokens <= 0)
		return 0.0;
	return curve_value(t->tokens, bwd ? t->bwd : t->fwd, t->n, tokens);
}

double bp_cost_lm_head(const struct bp_costmodel *cm, double tokens, int bwd)
{
	const struct bp_linear_table *t = cm->linear;
	if (tokens <= 0)
		return 0.0;
	if (t->lm_fwd && t->lm_bwd)
		return curve_value(t->tokens, bwd ? t->lm_bwd : t->lm_fwd, t->n, tokens);
	return cm->lm_ratio * bp_cost_linear(t, tokens, bwd);
}

static double ring_factor(int n)
{
	return (double)(n - 1) / n;
}

/* The search bp_cost_coll makes: the tables of op and placement whose group sizes bracket
 * ranks; none within a node falls back to the network's. */
void bp_coll_pick(struct bp_coll_pick *k, const struct bp_profile *p, enum bp_coll_op op,
		  int ranks, int inter)
{
	memset(k, 0, sizeof(*k));
	k->scale = 1.0;
	if (ranks <= 1)
		return;
	const struct bp_coll_table *below = NULL, *above = NULL;
	for (size_t i = 0; i < p->ncoll; i++) {
		const struct bp_coll_table *c = &p->coll[i];
		if (c->op != op || c->inter != inter)
			continue;
		if (c->ranks <= ranks && (!below || c->ranks > below->ranks))
			below = c;
		if (c->ranks >= ranks && (!above || c->ranks < above->ranks))
			above = c;
	}
	if (!below && !above && inter == 0) { /* no intra-node table: use the network's */
		bp_coll_pick(k, p, op, ranks, 1);
		return;
	}
	if (!below && !above)
		return;
	if (!below || !above || below == above) {
		k->lo = below ? below : above;
		if (op != BP_COLL_SENDRECV && k->lo->ranks != ranks)
			k->scale = ring_factor(ranks) / ring_factor(k->lo->ranks);
		return;
	}
	/* Between two group sizes: interpolate in log2(ranks). */
	k->lo = below;
	k->hi = above;
	k->t = (log2(ranks) - log2(below->ranks)) / (log2(above->ranks) - log2(below->ranks));
}

double bp_coll_cost(const struct bp_coll_pick *k, double bytes)
{
	if (!k->lo || bytes <= 0)
		return 0.0;
	double vb = curve_value(k->lo->bytes, k->lo->us, k->lo->n, bytes);
	if (!k->hi)
		return vb * k->scale; /* x * 1.0 is x exactly */
	double va = curve_value(k->hi->bytes, k->hi->us, k->hi->n, bytes);
	return vb + k->t * (va - vb);
}

double bp_cost_coll(const struct bp_profile *p, enum bp_coll_op op, int ranks, int inter,
		    double bytes)
{
	struct bp_coll_pick k;
	bp_coll_pick(&k, p, op, ranks, inter);
	return bp_coll_cost(&k, bytes);
}

/* LM head GEMM cost as a multiple of one layer's GEMMs (same tokens). */
static double lm_head_ratio(const struct bp_model *m)
{
	int64_t lp = bp_model_layer_params(m);
	return lp > 0 ? (double)m->hidden * m->vocab / (double)lp : 0.0;
}

int bp_costmodel_init_pipe(struct bp_costmodel *cm, const struct bp_profile *p,
			   const struct bp_layout *l, size_t k, struct bp_error *err)
{
	memset(cm, 0, sizeof(*cm));
	const struct bp_lpipe *pi = &l->pipes[k];
	struct bp_scheme sc = pi->sc;
	cm->prof = p;
	cm->sc = sc;
	for (size_t j = 0; j < l->npipes; j++) {
		int same = l->pipes[j].sc.tp == sc.tp && l->pipes[j].sc.pp == sc.pp;
		cm->dp += same && l->pipes[j].sc.cp == sc.cp;
		cm->sync_ranks += same ? l->pipes[j].sc.cp : 0;
	}
	const struct bp_model *m = &p->model;
	if (sc.tp < 1 || sc.cp < 1 || sc.pp < 1)
		return bp_errorf(err, "parallel degrees must be >= 1");
	if (sc.pp > m->layers)
		return bp_errorf(err, "pp %d exceeds the %d layers of model '%s'", sc.pp, m->layers,
				 m->name);
	if (m->heads % sc.tp)
		return bp_errorf(err, "tp %d does not divide the %d heads of model '%s'", sc.tp,
				 m->heads, m->name);
	cm->attn = bp_profile_attn(p, sc.tp);
	cm->linear = bp_profile_linear(p, sc.tp);
	if (!cm->attn || !cm->linear)
		return bp_errorf(err, "profile '%s' has no %s table for tp %d", p->name,
				 cm->attn ? "linear" : "attention", sc.tp);
	cm->stage_layers = bp_calloc((size_t)sc.pp, sizeof(int), err);
	if (!cm->stage_layers)
		return -1;
	memcpy(cm->stage_layers, pi->stage_layers, (size_t)sc.pp * sizeof(int));
	cm->mb_cap = pi->mb_max_tokens;
	int gpn = p->hw.gpus_per_node;
	cm->tp_inter = bp_lpipe_tp_inter(pi, gpn);
	cm->cp_inter = bp_lpipe_cp_inter(pi, gpn);
	cm->pp_inter = bp_lpipe_pp_inter(pi, gpn);
	cm->dp_inter = bp_layout_sync_inter(l, k, gpn);
	cm->token_bytes = 2.0 * m->hidden;
	cm->kv_token_bytes = 2.0 * 2.0 * m->kv_heads * (m->hidden / m->heads);
	cm->lm_ratio = lm_head_ratio(m);
	bp_coll_pick(&cm->tp_allreduce, p, BP_COLL_ALLREDUCE, sc.tp, cm->tp_inter);
	bp_coll_pick(&cm->cp_allgather, p, BP_COLL_ALLGATHER, sc.cp, cm->cp_inter);
	bp_coll_pick(&cm->cp_reducescatter, p, BP_COLL_REDUCESCATTER, sc.cp, cm->cp_inter);
	bp_coll_pick(&cm->pp_sendrecv, p, BP_COLL_SENDRECV, 2, cm->pp_inter);
	int sync_inter = cm->sync_ranks > sc.cp ? cm->dp_inter : cm->cp_inter;
	bp_coll_pick(&cm->sync_reducescatter, p, BP_COLL_REDUCESCATTER, cm->sync_ranks,
		     sync_inter);
	bp_coll_pick(&cm->sync_allgather, p, BP_COLL_ALLGATHER, cm->sync_ranks, sync_inter);
	return 0;
}

int bp_costmodel_init(struct bp_costmodel *cm, const struct bp_profile *p,
		      struct bp_scheme sc, int dp, struct bp_error *err)
{
	struct bp_layout l;
	memset(cm, 0, sizeof(*cm));
	if (sc.tp < 1 || sc.cp < 1 || sc.pp < 1 || dp < 1)
		return bp_errorf(err, "parallel degrees must be >= 1");
	if (sc.pp > p->model.layers)
		return bp_errorf(err, "pp %d exceeds the %d layers of model '%s'", sc.pp,
				 p->model.layers, p->model.name);
	bp_layout_init(&l);
	/* One pipeline in Megatron's place stands for all dp (they are alike); the sync
	 * group's node crossing comes from dp's span as Megatron lays it out. */
	int rc = bp_layout_megatron(&l, sc, dp, p->model.layers, 1, err);
	if (!rc)
		rc = bp_costmodel_init_pipe(cm, p, &l, 0, err);
	bp_layout_release(&l);
	return rc;
}

void bp_costs_init(struct bp_costs *c, const struct bp_profile *p)
{
	memset(c, 0, sizeof(*c));
	c->prof = p;
}

void bp_costs_release(struct bp_costs *c)
{
	for (size_t i = 0; i < c->n; i++) {
		bp_costmodel_release(&c->e[i]->cm);
		free(c->e[i]);
	}
	free(c->e);
	free(c->slot);
	bp_costs_init(c, c->prof);
}

/* The slot of (l, k) in a table of nslot slots: a multiplicative hash of the layout's address
 * and the pipeline. Lookups only: which slot holds an entry never reaches a plan. */
static size_t costs_hash(const struct bp_layout *l, size_t k, size_t nslot)
{
	uint64_t x = (uint64_t)(uintptr_t)l * 0x9e3779b97f4a7c15ULL ^
		     ((uint64_t)k + 1) * 0xc2b2ae3d27d4eb4fULL;
	x ^= x >> 31;
	return (size_t)(x & (nslot - 1));
}

static void costs_put(size_t *slot, size_t nslot, const struct bp_costs_entry *x, size_t i)
{
	size_t j = costs_hash(x->layout, x->pipe, nslot);
	while (slot[j])
		j = (j + 1) & (nslot - 1);
	slot[j] = i + 1;
}

/* Room for one more entry: the array doubles, the index is rebuilt at twice the entries. */
static int costs_reserve(struct bp_costs *c, struct bp_error *err)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 16;
		struct bp_costs_entry **ne = bp_realloc_array(c->e, cap, sizeof(*ne), err);
		if (!ne)
			return -1;
		c->e = ne;
		c->cap = cap;
	}
	if (2 * (c->n + 1) > c->nslot) {
		size_t nslot = c->nslot ? 2 * c->nslot : 32;
		size_t *slot = bp_calloc(nslot, sizeof(*slot), err);
		if (!slot)
			return -1;
		for (size_t i = 0; i < c->n; i++)
			costs_put(slot, nslot, c->e[i], i);
		free(c->slot);
		c->slot = slot;
		c->nslot = nslot;
	}
	return 0;
}

const struct bp_costmodel *bp_costs_pipe(struct bp_costs *c, const struct bp_layout *l,
					 size_t k, struct bp_error *err)
{
	/* a step asks for each of its pipelines; flexsp makes a layout a step, with up to
	 * thousands of pipelines: a hash lookup, not a scan over the cache */
	if (c->nslot)
		for (size_t j = costs_hash(l, k, c->nslot); c->slot[j]; j = (j + 1) & (c->nslot - 1)) {
			struct bp_costs_entry *x = c->e[c->slot[j] - 1];
			if (x->layout == l && x->pipe == k)
				return &x->cm;
		}
	if (costs_reserve(c, err) < 0)
		return NULL;
	struct bp_costs_entry *x = bp_calloc(1, sizeof(*x), err);
	if (!x)
		return NULL;
	x->layout = l;
	x->pipe = k;
	if (bp_costmodel_init_pipe(&x->cm, c->prof, l, k, err) < 0) {
		bp_costmodel_release(&x->cm);
		free(x);
		return NULL;
	}
	c->e[c->n] = x;
	costs_put(c->slot, c->nslot, x, c->n);
	c->n++;
	return &x->cm;
}

void bp_costmodel_release(struct bp_costmodel *cm)
{
	free(cm->stage_layers);
	cm->stage_layers = NULL;
}

/* Chunk boundaries of a length into 2*cp pieces, remainders spread to the earliest chunks. */
static int64_t seq_boundary(int64_t total, int k, int parts)
{
	return (int64_t)((__int128)total * k / parts);
}

static size_t push_seg(int64_t (*seg)[2], size_t cap, size_t n, int64_t q, int64_t kv)
{
	if (q <= 0)
		return n;
	if (n < cap) {
		seg[n][0] = q;
		seg[n][1] = kv;
	}
	return n + 1;
}

/* Adds the parts of chunk [a, b) of the packed sequence that fall in each span. */
static size_t seq_chunk(const struct bp_span *spans, size_t n, int64_t a, int64_t b,
			int64_t (*seg)[2], size_t cap, size_t k)
{
	int64_t pos = 0;
	for (size_t i = 0; i < n && pos < b; i++) {
		int64_t s0 = pos, s1 = pos + spans[i].len;
		pos = s1;
		int64_t x = a > s0 ? a : s0, y = b < s1 ? b : s1;
		if (x < y)
			k = push_seg(seg, cap, k, y - x, y - s0);
	}
	return k;
}

/* Per-document sharding (WLB-LLM Sec. 5.1) of a span of len tokens: chunk cidx of its 2cp
 * chunks of len/(2cp) tokens, owned by rank *owner (chunks c and 2cp-1-c go to rank c); its
 * len mod 2cp remainder tokens go one each to ranks in round-robin order from rr (carried
 * across spans), added to the receiving rank's second chunk while e < cp and to its first
 * after that, so ranks' totals differ by at most one token. */
static int64_t doc_chunk(int64_t len, int64_t rr, int cp, int cidx, int *owner)
{
	int parts = 2 * cp;
	int64_t base = len / parts, rem = len % parts;
	*owner = cidx < cp ? cidx : parts - 1 - cidx;
	int second = cidx >= cp;
	int64_t e = ((*owner - rr) % cp + cp) % cp; /* first e that maps to owner */
	int64_t ex = second ? (e < rem && e < cp) : (e + cp < rem);
	return base + ex;
}

size_t bp_shard_segments(const struct bp_span *spans, size_t n, enum bp_shard mode, int cp,
			 int rank, int64_t (*seg)[2], size_t cap, int64_t *tokens)
{
	size_t k = 0;
	int parts = 2 * cp;
	int64_t tok = 0;
	if (mode == BP_SHARD_ULYSSES) /* its token-wise layers see DOCUMENT's split */
		mode = BP_SHARD_DOCUMENT;
	if (cp == 1) {
		for (size_t i = 0; i < n; i++) {
			k = push_seg(seg, cap, k, spans[i].len, spans[i].len);
			tok += spans[i].len;
		}
		*tokens = tok;
		return k;
	}
	if (mode != BP_SHARD_DOCUMENT) { /* SEQUENCE (ADAPTIVE is resolved before this) */
		int64_t total = 0;
		for (size_t i = 0; i < n; i++)
			total += spans[i].len;
		int c[2] = {rank, parts - 1 - rank};
		for (int h = 0; h < 2; h++) {
			int64_t a = seq_boundary(total, c[h], parts);
			int64_t b = seq_boundary(total, c[h] + 1, parts);
			k = seq_chunk(spans, n, a, b, seg, cap, k);
			tok += b - a;
		}
		*tokens = tok;
		return k;
	}
	/* Per-document (WLB-LLM Sec. 5.1): doc_chunk's 2cp chunks of every span. */
	int64_t rr = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t len = spans[i].len, pos = 0;
		for (int cidx = 0; cidx < parts; cidx++) {
			int owner;
			int64_t sz = doc_chunk(len, rr, cp, cidx, &owner);
			if (owner == rank) {
				k = push_seg(seg, cap, k, sz, pos + sz);
				tok += sz;
			}
			pos += sz;
		}
		rr = (rr + len % parts) % cp;
	}
	*tokens = tok;
	return k;
}

/* Appends [a, b) to ranges, merging it into the last one when they touch. */
static size_t push_range(int64_t (*r)[2], size_t cap, size_t n, int64_t a, int64_t b)
{
	if (b <= a)
		return n;
	if (n > 0 && n <= cap && r[n - 1][1] == a) {
		r[n - 1][1] = b;
		return n;
	}
	if (n < cap) {
		r[n][0] = a;
		r[n][1] = b;
	}
	return n + 1;
}

size_t bp_shard_ranges(const struct bp_span *spans, size_t n, enum bp_shard mode, int cp,
		       int rank, int64_t (*r)[2], size_t cap, int64_t *tokens)
{
	size_t k = 0;
	int parts = 2 * cp;
	int64_t tok = 0, total = 0;
	if (mode == BP_SHARD_ULYSSES)
		mode = BP_SHARD_DOCUMENT;
	for (size_t i = 0; i < n; i++)
		total += spans[i].len;
	if (cp == 1) {
		*tokens = total;
		return push_range(r, cap, 0, 0, total);
	}
	if (mode != BP_SHARD_DOCUMENT) {
		int c[2] = {rank, parts - 1 - rank};
		for (int h = 0; h < 2; h++) {
			int64_t a = seq_boundary(total, c[h], parts);
			int64_t b = seq_boundary(total, c[h] + 1, parts);
			k = push_range(r, cap, k, a, b);
			tok += b - a;
		}
		*tokens = tok;
		return k;
	}
	int64_t rr = 0, pos = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t len = spans[i].len;
		for (int cidx = 0; cidx < parts; cidx++) {
			int owner;
			int64_t sz = doc_chunk(len, rr, cp, cidx, &owner);
			if (owner == rank) {
				k = push_range(r, cap, k, pos, pos + sz);
				tok += sz;
			}
			pos += sz;
		}
		rr = (rr + len % parts) % cp;
	}
	*tokens = tok;
	return k;
}

/* One layer on one CP rank, in parts: attention over its segments (dense, or none when it
 * runs on attention servers), GEMMs, TP collectives. */
static void rank_layer(const struct bp_costmodel *cm, int64_t (*seg)[2], size_t nseg,
		       int64_t tokens, int bwd, int attn_here, double part[3])
{
	double attn = attn_here ? launch_cost(cm->attn, (const int64_t(*)[2])seg, nseg, bwd,
					      attn_here == 1) : 0.0;
	double lin = bp_cost_linear(cm->linear, (double)tokens, bwd);
	double tpc = 0.0;
	if (cm->sc.tp > 1) /* two all-reduces of the layer's activations (Megatron TP) */
		tpc = 2.0 * bp_coll_cost(&cm->tp_allreduce, (double)tokens * cm->token_bytes);
	part[0] = attn;
	part[1] = lin;
	part[2] = tpc;
}

static const char *const attn_kind_names[BP_ATTN_NKINDS] = {"dense", "sparse",
							    "disaggregated"};

const char *bp_attn_kind_name(enum bp_attn_kind k)
{
	return (unsigned)k < BP_ATTN_NKINDS ? attn_kind_names[k] : "?";
}

int bp_attn_kind_parse(const char *s, enum bp_attn_kind *out)
{
	for (int i = 0; i < BP_ATTN_NKINDS; i++)
		if (!strcmp(s, attn_kind_names[i])) {
			*out = (enum bp_attn_kind)i;
			return 0;
		}
	return -1;
}

/* Sparse attention (SparseBalance Sec. IV-B, Eq. 8-10: the latency table M[x, k]): each
 * span is one causal document of x tokens whose layer l attends k[l] blocks per query tile;
 * layers differ in k, so a stage sums its layers one by one. cp is 1 (validate.c): the table
 * is measured on whole documents. */
static int bp_cost_mb_sparse(const struct bp_costmodel *cm, const struct bp_mb_desc *d,
			     double *fwd, double *bwd, struct bp_mb_part *pf,
			     struct bp_mb_part *pb, struct bp_error *err)
{
	const struct bp_sparse_table *t = bp_profile_sparse(cm->prof, cm->sc.tp, d->sparse_block);
	if (!t)
		return bp_errorf(err, "profile '%s' has no sparse_attention table for tp %d block "
				 "%d", cm->prof->name, cm->sc.tp, d->sparse_block);
	if (cm->sc.cp != 1 || !d->sparse_k)
		return bp_errorf(err, "sparse attention needs cp 1 and a budget per layer");
	int64_t tokens = 0;
	for (size_t i = 0; i < d->n; i++)
		tokens += d->spans[i].len;
	int layer = 0, full = cm->prof->recompute == BP_RECOMPUTE_FULL;
	for (int s = 0; s < cm->sc.pp; s++) {
		double a[2] = {0, 0}, part[2][3];
		struct bp_mb_part qf = {0, 0, 0, 0, 0};
		int last = s == cm->sc.pp - 1;
		for (int l = 0; l < cm->stage_layers[s]; l++, layer++)
			for (int b = 0; b < 2; b++)
				for (size_t i = 0; i < d->n; i++)
					a[b] += bp_cost_sparse_attn(t, (double)d->spans[i].len,
								    (double)d->sparse_k[layer], b);
		for (int b = 0; b < 2; b++) {
			rank_layer(cm, NULL, 0, tokens, b, 0, part[b]);
			double L = cm->stage_layers[s];
			double lm = last ? bp_cost_lm_head(cm, (double)tokens, b) : 0.0;
			double v = a[b] + L * (part[b][1] + part[b][2]) + lm;
			struct bp_mb_part q = {a[b], L * part[b][1], L * part[b][2], 0.0, lm};
			if (!b)
				qf = q;
			else if (full) { /* the layers' forward again, before their backward */
				q.attn += qf.attn;
				q.linear += qf.linear;
				q.tp_coll += qf.tp_coll;
				v += qf.attn + qf.linear + qf.tp_coll;
			}
			if (b) {
				bwd[s] = v;
				if (pb)
					pb[s] = q;
			} else {
				fwd[s] = v;
				if (pf)
					pf[s] = q;
			}
		}
	}
	return 0;
}

/* bp_cost_mb; model 0 prices dense attention by the packed-or-alone rule, not the launch
 * model (a document's own weight, bp_cost_doc). */
static int cost_mb(const struct bp_costmodel *cm, const struct bp_mb_desc *d, double *fwd,
		   double *bwd, struct bp_mb_part *pf, struct bp_mb_part *pb, int model,
		   struct bp_error *err)
{
	int cp = cm->sc.cp, pp = cm->sc.pp;
	size_t n = d->n, cap = 2 * n + 4;
	if (d->attn == BP_ATTN_SPARSE)
		return bp_cost_mb_sparse(cm, d, fwd, bwd, pf, pb, err);
	/* 1: dense here, launch model; 2: dense here, the rule; 0: on attention servers */
	int attn_here = d->attn == BP_ATTN_DENSE ? (model ? 1 : 2) : 0;
	int full = cm->prof->recompute == BP_RECOMPUTE_FULL;
	if (full && d->attn == BP_ATTN_DISAGG)
		return bp_errorf(err, "recompute full is not modeled for disaggregated attention "
				 "(its CA-tasks run on attention servers)");
	/* Short lists (every per-document cost the packers and the packing bound ask for) use
	 * the stack: a calloc and free per call showed in the profile. */
	int64_t small[16][2];
	int64_t(*seg)[2] = small;
	if (cap > 16 && !(seg = bp_calloc(cap, sizeof(*seg), err)))
		return -1;
	double worst_f = 0.0, worst_b = 0.0, worst_lm_f = 0.0, worst_lm_b = 0.0;
	double wf[3] = {0, 0, 0}, wb[3] = {0, 0, 0};
	int64_t max_tokens = 0;
	/* Ulysses: every rank attends over the whole documents with cp-th of the heads */
	int ulysses = d->shard == BP_SHARD_ULYSSES && cp > 1 && attn_here;
	double ua[2] = {0.0, 0.0};
	for (size_t i = 0; ulysses && i < n; i++)
		for (int bw = 0; bw < 2; bw++)
			ua[bw] += bp_cost_attn(cm->attn, (double)d->spans[i].len,
					       (double)d->spans[i].len, bw) / cp;
	for (int r = 0; r < cp; r++) {
		int64_t tokens = 0;
		size_t k = bp_shard_segments(d->spans, n, d->shard, cp, r, seg, cap, &tokens);
		if (k > cap) { /* cannot happen with 2n+4, kept as a guard */
			if (seg != small)
				free(seg);
			return bp_errorf(err, "internal: %zu shard segments exceed %zu", k, cap);
		}
		double a[3], b[3];
		rank_layer(cm, seg, k, tokens, 0, attn_here, a);
		rank_layer(cm, seg, k, tokens, 1, attn_here, b);
		if (ulysses) {
			a[0] = ua[0];
			b[0] = ua[1];
		}
		double f = a[0] + a[1] + a[2], bw = b[0] + b[1] + b[2];
		/* the TP/CP group waits for its slowest member (WLB-LLM Sec. 3.1) */
		if (f > worst_f) {
			worst_f = f;
			memcpy(wf, a, sizeof(wf));
		}
		if (bw > worst_b) {
			worst_b = bw;
			memcpy(wb, b, sizeof(wb));
		}
		double lf = bp_cost_lm_head(cm, (double)tokens, 0);
		double lb = bp_cost_lm_head(cm, (double)tokens, 1);
		if (lf > worst_lm_f)
			worst_lm_f = lf;
		if (lb > worst_lm_b)
			worst_lm_b = lb;
		if (tokens > max_tokens)
			max_tokens = tokens;
	}
	if (seg != small)
		free(seg);
	/* CP: all-gather K and V per layer forward, reduce-scatter their gradients backward. */
	double cpf = 0.0, cpb = 0.0;
	if (ulysses) {
		/* four all-to-alls (Q, K, V in; O out) of the rank's tokens' hidden states per
		 * layer, and four of their gradients backward */
		double bytes = (double)max_tokens * cm->token_bytes / cm->sc.tp;
		cpf = cpb = 4.0 * bp_cost_coll(cm->prof, BP_COLL_ALLTOALL, cp, cm->cp_inter, bytes);
	} else if (cp > 1 && attn_here) {
		double bytes = (double)max_tokens * cp * cm->kv_token_bytes / cm->sc.tp;
		cpf = bp_coll_cost(&cm->cp_allgather, bytes);
		cpb = bp_coll_cost(&cm->cp_reducescatter, bytes);
	}
	for (int s = 0; s < pp; s++) {
		int L = cm->stage_layers[s];
		int last = s == pp - 1;
		/* Full recompute: each layer's forward (its collectives included, not the LM
		 * head) runs again before its backward (Korthikanti et al. Sec. 5). */
		double r = full ? 1.0 : 0.0;
		fwd[s] = L * (worst_f + cpf);
		bwd[s] = L * (worst_b + cpb) + r * L * (worst_f + cpf);
		if (last) {
			fwd[s] += worst_lm_f;
			bwd[s] += worst_lm_b;
		}
		if (pf)
			pf[s] = (struct bp_mb_part){L * wf[0], L * wf[1], L * wf[2], L * cpf,
						    last ? worst_lm_f : 0.0};
		if (pb)
			pb[s] = (struct bp_mb_part){L * (wb[0] + r * wf[0]), L * (wb[1] + r * wf[1]),
						    L * (wb[2] + r * wf[2]), L * cpb + r * L * cpf,
						    last ? worst_lm_b : 0.0};
	}
	return 0;
}

int bp_cost_mb(const struct bp_costmodel *cm, const struct bp_mb_desc *d, double *fwd,
	       double *bwd, struct bp_mb_part *pf, struct bp_mb_part *pb, struct bp_error *err)
{
	return cost_mb(cm, d, fwd, bwd, pf, pb, 1, err);
}

int bp_cost_microbatch(const struct bp_costmodel *cm, const struct bp_span *spans, size_t n,
		       enum bp_shard mode, double *fwd, double *bwd, double *cp_attn,
		       struct bp_error *err)
{
	struct bp_mb_desc d = {spans, n, mode, BP_ATTN_DENSE, 0, NULL};
	if (cp_attn) {
		size_t cap = 2 * n + 4;
		int64_t(*seg)[2] = bp_calloc(cap, sizeof(*seg), err);
		if (!seg)
			return -1;
		for (int r = 0; r < cm->sc.cp; r++) {
			int64_t tokens = 0;
			size_t k = bp_shard_segments(spans, n, mode, cm->sc.cp, r, seg, cap, &tokens);
			double a[3];
			rank_layer(cm, seg, k < cap ? k : cap, tokens, 0, 1, a);
			cp_attn[r] = a[0];
		}
		free(seg);
	}
	return bp_cost_mb(cm, &d, fwd, bwd, NULL, NULL, err);
}

int bp_shard_resolve(const struct bp_costmodel *cm, const struct bp_span *spans, size_t n,
		     enum bp_shard mode, enum bp_shard *out, struct bp_error *err)
{
	if (mode != BP_SHARD_ADAPTIVE) {
		*out = mode;
		return 0;
	}
	*out = BP_SHARD_SEQUENCE;
	if (cm->sc.cp == 1)
		return 0;
	int pp = cm->sc.pp, rc = -1;
	double *t = bp_calloc(4 * (size_t)pp, sizeof(double), err);
	if (!t)
		return -1;
	double cost[2] = {0, 0};
	for (int m = 0; m < 2; m++) {
		if (bp_cost_microbatch(cm, spans, n, (enum bp_shard)m, t, t + pp, NULL, err) < 0)
			goto out;
		for (int s = 0; s < 2 * pp; s++)
			cost[m] += t[s];
	}
	if (cost[BP_SHARD_DOCUMENT] < cost[BP_SHARD_SEQUENCE])
		*out = BP_SHARD_DOCUMENT;
	rc = 0;
out:
	free(t);
	return rc;
}

int bp_cost_doc(const struct bp_costmodel *cm, int64_t len, double *cost, struct bp_error *err)
{
	struct bp_span sp = {0, 0, len};
	int pp = cm->sc.pp, rc = -1;
	double f[64], b[64];
	double *fw = f, *bw = b;
	*cost = 0.0;
	if (pp > 64) {
		fw = bp_calloc((size_t)pp, sizeof(double), err);
		bw = bp_calloc((size_t)pp, sizeof(double), err);
		if (!fw || !bw)
			goto out;
	}
	/* A document's weight for the packers: the packed-or-alone rule (a launch model call
	 * per document and packing step cost solve 9x with a measured profile). */
	struct bp_mb_desc d = {.spans = &sp, .n = 1, .shard = BP_SHARD_DOCUMENT,
			       .attn = BP_ATTN_DENSE};
	if (cost_mb(cm, &d, fw, bw, NULL, NULL, 0, err) < 0)
		goto out;
	for (int s = 0; s < pp; s++)
		if (fw[s] + bw[s] > *cost)
			*cost = fw[s] + bw[s];
	rc = 0;
out:
	if (fw != f) {
		free(fw);
		free(bw);
	}
	return rc;
}

double bp_cost_p2p(const struct bp_costmodel *cm, int64_t tokens)
{
	if (cm->sc.pp < 2)
		return 0.0;
	double bytes = (double)tokens * cm->token_bytes / (cm->sc.tp * cm->sc.cp);
	return bp_coll_cost(&cm->pp_sendrecv, bytes);
}

/* Parameters held by a rank of stage s (before TP division). */
double bp_cost_stage_params(const struct bp_costmodel *cm, int stage)
{
	const struct bp_model *m = &cm->prof->model;
	double p = (double)cm->stage_layers[stage] * (double)bp_model_layer_params(m);
	if (stage == 0)
		p += (double)m->hidden * m->vocab; /* embedding */
	if (stage == cm->sc.pp - 1)
		p += (double)m->hidden * m->vocab; /* LM head */
	return p;
}

double bp_cost_grad_sync(const struct bp_costmodel *cm, int stage)
{
	int n = cm->sync_ranks;
	if (n < 2)
		return 0.0;
	double bytes = 2.0 * bp_cost_stage_params(cm, stage) / cm->sc.tp;
	return bp_coll_cost(&cm->sync_reducescatter, bytes) +
	       bp_coll_cost(&cm->sync_allgather, bytes);
}

double bp_cost_grad_bucket_params(const struct bp_costmodel *cm, int stage)
{
	double per_rank = bp_cost_stage_params(cm, stage) / cm->sc.tp;
	if (stage > 0)
		return per_rank;
	return fmax(40e6, 1e6 * cm->sync_ranks);
}

double bp_cost_lnk(const struct bp_profile *p, int world, int gpus_per_node, double bytes)
{
	if (world < 2 || bytes <= 0)
		return 0.0;
	int inter = gpus_per_node > 0 && world > gpus_per_node;
	enum bp_coll_op op = bp_profile_has_coll(p, BP_COLL_ALLTOALL, inter) ||
				     bp_profile_has_coll(p, BP_COLL_ALLTOALL, 1)
			     ? BP_COLL_ALLTOALL
			     : BP_COLL_SENDRECV;
	int ranks = op == BP_COLL_ALLTOALL ? world : 2;
	return bp_cost_coll(p, op, ranks, inter, bytes);
}

double bp_cost_adam_shard(const struct bp_profile *p, double params)
{
	if (params <= 0 || p->hw.hbm_gbps <= 0)
		return 0.0;
	return params * 28.0 / (p->hw.hbm_gbps * 1e3); /* GB/s = 1e3 bytes per us */
}

/* Bytes per token and layer a micro-batch in flight keeps: every activation the backward
 * reads (profile memory.act_bytes_per_token_layer), or with full recompute only the layer's
 * input, 2h bytes in bf16 (Korthikanti et al. Sec. 5, Table 2 "full"), both sharded over TP
 * (sequence parallelism). */
static double kept_per_token_layer(const struct bp_costmodel *cm)
{
	if (cm->prof->recompute == BP_RECOMPUTE_FULL)
		return 2.0 * cm->prof->model.hidden;
	return cm->prof->mem.act_bytes_per_token_layer;
}

int64_t bp_cost_act_bytes(const struct bp_costmodel *cm, int stage, int64_t tokens_on_rank)
{
	/* saturated: a product past int64 is memory no GPU has, and stays comparable */
	return bp_i64_from_real_sat((double)tokens_on_rank * cm->stage_layers[stage] *
				    kept_per_token_layer(cm) / cm->sc.tp);
}

/* With full recompute, one layer's activations exist again while that layer's backward
 * runs: its whole set for the pipeline's largest micro-batch on one CP rank, once per stage
 * whatever the micro-batches in flight. 0 otherwise. */
static double recompute_working_set(const struct bp_costmodel *cm)
{
	if (cm->prof->recompute != BP_RECOMPUTE_FULL || cm->mb_cap <= 0)
		return 0.0;
	double per_rank = ceil((double)cm->mb_cap / cm->sc.cp);
	return per_rank * cm->prof->mem.act_bytes_per_token_layer / cm->sc.tp;
}

int64_t bp_cost_state_bytes(const struct bp_costmodel *cm, int stage)
{
	/* Hydraulis App. B.1 (b) with the distributed optimizer: weights and gradients (6 of
	 * the 18 bytes per parameter) stay per TP shard, the optimizer's 12 are sharded over
	 * the replicas (sync_ranks: dp*cp in a homogeneous layout). alpha = 12/18 = 2/3.
	 * Without it (prof->optimizer_replicated) every replica holds all 18. */
	double per = bp_cost_stage_params(cm, stage) / cm->sc.tp;
	double spb = cm->prof->mem.state_bytes_per_param;
	double alpha = 2.0 / 3.0, shards = cm->prof->optimizer_replicated ? 1.0 : cm->sync_ranks;
	return bp_i64_from_real_sat(per * spb * ((1.0 - alpha) + alpha / shards) +
				    recompute_working_set(cm));
}

int64_t bp_cost_state_bytes_full(const struct bp_costmodel *cm, int stage, int gpus)
{
	double spb = cm->prof->mem.state_bytes_per_param, total = 0.0, alpha = 2.0 / 3.0;
	for (int s = 0; s < cm->sc.pp; s++)
		total += bp_cost_stage_params(cm, s);
	return bp_i64_from_real_sat(bp_cost_stage_params(cm, stage) / cm->sc.tp * spb *
					    (1.0 - alpha) +
				    total * spb * alpha / (gpus < 1 ? 1 : gpus) +
				    recompute_working_set(cm));
}

int64_t bp_cost_mem_cap(const struct bp_costmodel *cm)
{
	return cm->prof->hw.hbm_bytes - cm->prof->mem.reserved_bytes;
}

/* Solves the 3x3 system A x = y by Gaussian elimination with partial pivoting. */
static int solve3(double A[3][3], double y[3], double x[3])
{
	for (int c = 0; c < 3; c++) {
		int piv = c;
		for (int r = c + 1; r < 3; r++)
			if (fabs(A[r][c]) > fabs(A[piv][c]))
				piv = r;
		if (fabs(A[piv][c]) < 1e-300)
			return -1;
		if (piv != c) {
			for (int k = 0; k < 3; k++) {
				double t = A[c][k];
				A[c][k] = A[piv][k];
				A[piv][k] = t;
			}
			double t = y[c];
			y[c] = y[piv];
			y[piv] = t;
		}
		for (int r = c + 1; r < 3; r++) {
			double f = A[r][c] / A[c][c];
			for (int k = c; k < 3; k++)
				A[r][k] -= f * A[c][k];
			y[r] -= f * y[c];
		}
	}
	for (int r = 2; r >= 0; r--) {
		double s = y[r];
		for (int k = r + 1; k < 3; k++)
			s -= A[r][k] * x[k];
		x[r] = s / A[r][r];
	}
	return 0;
}

int bp_fit_scheme(const struct bp_profile *p, struct bp_scheme sc, int64_t max_len,
		  struct bp_fit *out, struct bp_error *err)
{
	struct bp_costmodel cm;
	int rc = -1;
	if (max_len < 256) {
		bp_errorf(err, "fit length %lld is below 256 tokens", (long long)max_len);
		goto out;
	}
	if (bp_costmodel_init(&cm, p, sc, 1, err) < 0)
		goto out;
	/* Weighted least squares on x = l / max_len with weights 1/T^2, so the fit holds in
	 * relative terms at short lengths as well as long ones. */
	double A[3][3] = {{0}}, y[3] = {0}, x[3];
	int npts = 0;
	for (double l = 128; l <= (double)max_len * 1.0001; l *= 1.4142135623730951) {
		double t;
		struct bp_error skip;
		if (bp_cost_doc(&cm, (int64_t)llround(l), &t, &skip) < 0 || t <= 0)
			continue; /* a length the tables do not reach adds no point */
		double u = llround(l) / (double)max_len, w = 1.0 / (t * t);
		double phi[3] = {u * u, u, 1.0};
		for (int i = 0; i < 3; i++) {
			for (int j = 0; j < 3; j++)
				A[i][j] += w * phi[i] * phi[j];
			y[i] += w * phi[i] * t;
		}
		npts++;
	}
	if (npts < 3 || solve3(A, y, x) < 0) {
		bp_errorf(err, "cannot fit T(l) for tp %d cp %d pp %d", sc.tp, sc.cp, sc.pp);
		goto release;
	}
	out->tp = sc.tp;
	out->cp = sc.cp;
	out->pp = sc.pp;
	out->a = x[0] / ((double)max_len * max_len);
	out->b = x[1] / (double)max_len;
	out->c = x[2];
	rc = 0;
release:
	bp_costmodel_release(&cm);
out:
	return rc;
}
