/* sched.cpp: how the CUDA emulator (tests/emu/README.md) runs a kernel. A launch runs its
 * blocks one after another on the calling thread; the threads of a block are fibers
 * (fiber.cpp), each running until it reaches a synchronisation point or returns:
 *   __syncthreads          waits for every thread of the block;
 *   __syncwarp, wmma::mma_sync
 *                          wait for every lane of the warp (the product needs all pieces);
 *   a shuffle              waits only for the lane it reads from: CUDA promises the value,
 *                          not that other lanes' shared-memory writes before the shuffle are
 *                          seen after it (only __syncwarp orders memory), so lanes may run
 *                          past a shuffle while others have not reached it.
 * Between those points a thread runs alone, so the order the scheduler picks threads in is
 * the only interleaving there is; a missing barrier then shows as a read of data not yet
 * written (shared memory starts as NaN bytes in every block) or already overwritten. The
 * order is the block's schedule (EMU_SCHEDULE):
 *   round      ready threads in ascending order, one step each, over and over: threads move
 *              in step, so a reader overtakes the writers of higher index (RAW);
 *   warp       one warp as far as it can go (to a __syncthreads or its end) before the next,
 *              its lanes in step: warps drift apart, so a fast warp overwrites what a slow one
 *              still reads (WAR) or reads what it has not written yet;
 *   first      always the lowest ready thread: every thread as far ahead of the higher ones
 *              as the synchronisation allows (lanes past a shuffle included);
 *   round-rev, warp-rev, last
 *              the same three, descending;
 *   random     a seeded random ready thread each step (EMU_SEED, default 1);
 *   mixed      (the default) block b of the n-th launch uses round, warp, first,
 *              round-rev, warp-rev and last in turn, (b + n) mod 6, so that one run
 *              exercises all of them.
 *
 * Checked here: every __syncthreads reached by all threads of the block at the same site (a
 * barrier in divergent code, or one some threads return before, is undefined in CUDA);
 * every warp collective reached by its lanes at the same site with a whole-warp mask;
 * shuffles reading only lanes that take part; WMMA operands loaded by all lanes from the
 * same place; deadlock (nothing can run, someone still waits); the launch configuration as
 * cudaLaunchKernel checks it (block and grid limits; dynamic shared memory above 48 KiB only
 * after cudaFuncSetAttribute, at most 227 KiB).
 *
 * EMU_DROP=FUNC:syncthreads:N (or :syncwarp:N) makes the Nth __syncthreads (__syncwarp) of
 * function FUNC, in source order as emu_prep numbers them, do nothing: the kernel runs as if
 * that line were deleted, without a rebuild (tests/emu/test-barrier-drop). */
#include "emu_int.h"
#include "mma.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

namespace cuemu {

uint3 cur_thread, cur_block;
dim3 cur_block_dim, cur_grid_dim;
unsigned cur_lane;

namespace {

struct site {
	const char *file = nullptr;
	int line = 0;
	const char *func = nullptr;
	int nth = 0;
};

bool same_site(const site &a, const site &b)
{
	if (a.line != b.line || a.nth != b.nth)
		return false;
	return a.file == b.file || (a.file && b.file && strcmp(a.file, b.file) == 0);
}

/* "attn.cu:187", or "an unmarked site" (code not run through emu_prep). */
const char *site_text(const site &s, char *buf, size_t n)
{
	if (!s.file) {
		snprintf(buf, n, "an unmarked site");
		return buf;
	}
	const char *slash = strrchr(s.file, '/');
	snprintf(buf, n, "%s:%d", slash ? slash + 1 : s.file, s.line);
	return buf;
}

enum thread_state { READY, AT_BARRIER, AT_WARP, AT_ROOM, DONE };
enum coll_kind { COLL_SYNCWARP, COLL_SHUFFLE, COLL_MMA };
const char *const coll_name[] = {"__syncwarp", "a shuffle", "wmma::mma_sync"};

enum policy { P_ROUND, P_WARP, P_FIRST, P_ROUND_REV, P_WARP_REV, P_LAST, P_RANDOM, P_MIXED };
const char *const policy_name[] = {"round",    "warp", "first",  "round-rev",
				   "warp-rev", "last", "random", "mixed"};

/* Warp collectives a lane keeps its inputs for: lanes of a warp may be this many apart
 * (through shuffles only; __syncwarp and mma_sync line them up), and one that would get
 * further waits for the slowest (AT_ROOM). */
const unsigned KEEP = 8;

struct cthread {
	fiber fib;
	int state = DONE;
	unsigned tid = 0;     /* linear index in the block */
	uint3 idx{0, 0, 0};
	unsigned wseq = 0;    /* warp collectives this thread has completed */
	unsigned wide_n = 0;  /* of which __syncwarp and mma_sync (they alternate tile sets) */
	site where;           /* where it waits */
};

/* What one lane brings to a warp collective. */
struct arrival {
	unsigned seq = ~0u; /* the lane's wseq at arrival: tells a fresh entry from an old one */
	int kind = 0;
	site where;
	unsigned mask = 0;
	int mode = 0, arg = 0, width = 0;
	unsigned char val[8];
	frag_origin ao{}, bo{}, co{};
};

/* The tiles of one mma_sync: row-major 16 x 16, filled by the lanes' pieces. */
struct tiles {
	float a[256], b[256], c[256], d[256];
};

struct cwarp {
	int lanes = 0, live = 0;
	arrival hist[32][KEEP];          /* per lane, collective seq at [seq % KEEP] */
	int count[KEEP];                 /* lanes that arrived at collective count_seq[i] */
	unsigned count_seq[KEEP];
	uint32_t waiters[32];            /* lanes whose shuffle waits for lane i's value */
	unsigned slowest = 0;            /* a lower bound of the live lanes' wseq */
	int waiting_room = 0;
	/* Two, used alternately: a lane released from one mma can reach the next and hand in
	 * its pieces while slower lanes still read the first's results; it cannot get a third
	 * ahead, because the second waits for all of them. */
	tiles wide[2];
};

/* The running block. */
struct block {
	int n = 0, nwarps = 0, live = 0, at_barrier = 0;
	uint64_t ready[16];              /* bit t: thread t is READY (what pick() looks at) */
	site barrier_site;
	policy pol = P_ROUND;
	int cursor = 0, warp_cursor = 0, lane_cursor[32];
	cthread *t = nullptr;
	cwarp *w = nullptr;
	unsigned char *shared = nullptr;
	void (*body)(void *) = nullptr;
	void *arg = nullptr;
};

cthread threads[1024];
std::vector<cwarp> warps(32);
block blk;
cthread *cur;
const char *cur_kernel;
bool in_kernel;
site marked; /* from at(), for the next synchronisation or WMMA call */
unsigned long long launches;
uint64_t rng_state;

struct drop_spec {
	bool parsed = false, active = false;
	char func[128];
	int syncwarp = 0, nth = 0;
	const char *text = nullptr;
	unsigned long long hits = 0;
	site where;
} drop;

void set_state(cthread &t, int st)
{
	uint64_t &word = blk.ready[t.tid / 64];
	const uint64_t bit = 1ull << (t.tid % 64);
	word = st == READY ? word | bit : word & ~bit;
	t.state = st;
}

policy sched_policy()
{
	static int p = -1;
	if (p < 0) {
		const char *e = getenv("EMU_SCHEDULE");
		p = P_MIXED;
		if (e && *e) {
			p = -1;
			for (int i = 0; i <= P_MIXED; i++)
				if (!strcmp(e, policy_name[i]))
					p = i;
			if (p < 0) {
				fprintf(stderr, "emu: error: EMU_SCHEDULE '%s' is not one of "
					"round, warp, first, round-rev, warp-rev, last, random, "
					"mixed\n", e);
				exit(2);
			}
		}
		const char *sd = getenv("EMU_SEED");
		rng_state = sd && *sd ? strtoull(sd, nullptr, 10) : 1;
		rng_state = rng_state * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
	}
	return (policy)p;
}

uint64_t next_random()
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

void report_drop()
{
	char b[256];
	if (drop.hits)
		fprintf(stderr, "emu: EMU_DROP=%s: that barrier (%s) was skipped %llu times\n",
			drop.text, site_text(drop.where, b, sizeof b), drop.hits);
	else
		fprintf(stderr, "emu: EMU_DROP=%s: no such barrier was reached\n", drop.text);
}

void parse_drop()
{
	drop.parsed = true;
	const char *e = getenv("EMU_DROP");
	if (!e || !*e)
		return;
	const char *c1 = strchr(e, ':');
	const char *c2 = c1 ? strchr(c1 + 1, ':') : nullptr;
	char *end = nullptr;
	const long nth = c2 ? strtol(c2 + 1, &end, 10) : 0;
	const size_t flen = c1 ? (size_t)(c1 - e) : 0;
	const size_t klen = c2 ? (size_t)(c2 - c1 - 1) : 0;
	const bool st = klen == 11 && !strncmp(c1 + 1, "syncthreads", 11);
	const bool sw = klen == 8 && !strncmp(c1 + 1, "syncwarp", 8);
	if (!c2 || flen == 0 || flen >= sizeof drop.func || (!st && !sw) || !end || *end ||
	    nth < 1 || nth > 100000) {
		fprintf(stderr, "emu: error: EMU_DROP '%s' is not FUNC:syncthreads:N or "
			"FUNC:syncwarp:N\n", e);
		exit(2);
	}
	memcpy(drop.func, e, flen);
	drop.func[flen] = '\0';
	drop.syncwarp = sw;
	drop.nth = (int)nth;
	drop.text = e;
	drop.active = true;
	atexit(report_drop);
}

/* Whether the site just marked is the barrier EMU_DROP names. */
bool dropped(const site &s, bool syncwarp)
{
	if (!drop.parsed)
		parse_drop();
	if (!drop.active || s.nth != drop.nth || syncwarp != (drop.syncwarp != 0) || !s.func ||
	    strcmp(s.func, drop.func) != 0)
		return false;
	drop.hits++;
	drop.where = s;
	return true;
}

site take_marked()
{
	site s = marked;
	marked = site();
	return s;
}

/* The lowest ready thread in [lo, hi), or -1. */
int ready_at_or_after(int lo, int hi)
{
	for (int t = lo; t < hi;) {
		const uint64_t word = blk.ready[t / 64] >> (t % 64);
		if (word) {
			const int f = t + __builtin_ctzll(word);
			return f < hi ? f : -1;
		}
		t = (t / 64 + 1) * 64;
	}
	return -1;
}

/* The highest ready thread in [lo, hi], or -1. */
int ready_at_or_before(int hi, int lo)
{
	for (int t = hi; t >= lo;) {
		const uint64_t word = blk.ready[t / 64] << (63 - t % 64);
		if (word) {
			const int f = t - __builtin_clzll(word);
			return f >= lo ? f : -1;
		}
		t = (t / 64) * 64 - 1;
	}
	return -1;
}

/* The next thread to run under the block's policy; -1 when none is ready. */
int pick()
{
	block &b = blk;
	int t = -1;
	switch (b.pol) {
	case P_ROUND:
		t = ready_at_or_after(b.cursor < b.n ? b.cursor : 0, b.n);
		if (t < 0)
			t = ready_at_or_after(0, b.n);
		if (t >= 0)
			b.cursor = t + 1;
		return t;
	case P_ROUND_REV:
		t = ready_at_or_before(b.cursor >= 0 ? b.cursor : b.n - 1, 0);
		if (t < 0)
			t = ready_at_or_before(b.n - 1, 0);
		if (t >= 0)
			b.cursor = t - 1;
		return t;
	case P_WARP:
	case P_WARP_REV: {
		const bool fwd = b.pol == P_WARP;
		for (int i = 0; i < b.nwarps; i++) {
			const int w = fwd ? (b.warp_cursor + i) % b.nwarps
					  : (b.warp_cursor - i + b.nwarps) % b.nwarps;
			const int lo = w * 32, hi = lo + b.w[w].lanes - 1;
			const int at = lo + b.lane_cursor[w];
			if (fwd) {
				t = ready_at_or_after(at <= hi ? at : lo, hi + 1);
				if (t < 0)
					t = ready_at_or_after(lo, hi + 1);
			} else {
				t = ready_at_or_before(at >= lo ? at : hi, lo);
				if (t < 0)
					t = ready_at_or_before(hi, lo);
			}
			if (t >= 0) {
				b.warp_cursor = w;
				b.lane_cursor[w] = t - lo + (fwd ? 1 : -1);
				return t;
			}
		}
		return -1;
	}
	case P_FIRST:
		return ready_at_or_after(0, b.n);
	case P_LAST:
		return ready_at_or_before(b.n - 1, 0);
	default: {
		int ready = 0;
		for (int k = 0; k < 16; k++)
			ready += __builtin_popcountll(b.ready[k]);
		if (!ready)
			return -1;
		int k = (int)(next_random() % (uint64_t)ready);
		for (t = ready_at_or_after(0, b.n); k-- > 0;)
			t = ready_at_or_after(t + 1, b.n);
		return t;
	}
	}
}

void deadlock()
{
	int at_bar = 0, at_warp = 0, done = 0;
	const cthread *wb = nullptr, *ww = nullptr;
	for (int t = 0; t < blk.n; t++) {
		const cthread &x = blk.t[t];
		if (x.state == AT_BARRIER)
			at_bar++, wb = wb ? wb : &x;
		else if (x.state == AT_WARP || x.state == AT_ROOM)
			at_warp++, ww = ww ? ww : &x;
		else if (x.state == DONE)
			done++;
	}
	char b1[256], b2[256];
	fault("deadlock: %d threads wait at __syncthreads (first: thread %u at %s), %d at warp "
	      "collectives (first: thread %u at %s), %d returned",
	      at_bar, wb ? wb->tid : 0, wb ? site_text(wb->where, b1, sizeof b1) : "-", at_warp,
	      ww ? ww->tid : 0, ww ? site_text(ww->where, b2, sizeof b2) : "-", done);
}

void release_barrier()
{
	block &b = blk;
	if (b.live < b.n) {
		char s[256];
		fault("__syncthreads at %s reached by %d of %d threads, the other %d returned "
		      "before it (a barrier in divergent code)",
		      site_text(b.barrier_site, s, sizeof s), b.at_barrier, b.n, b.n - b.live);
	}
	for (int t = 0; t < b.n; t++)
		if (b.t[t].state == AT_BARRIER)
			set_state(b.t[t], READY);
	b.at_barrier = 0;
}

bool same_origin(const frag_origin &x, const frag_origin &y)
{
	return x.how == y.how && x.src == y.src && x.ldm == y.ldm && x.col_major == y.col_major;
}

/* The lane a shuffle arrival reads from. */
int shuffle_source(const arrival &x, int lane)
{
	switch (x.mode) {
	case SHFL_IDX:
		return x.arg & 31;
	case SHFL_UP:
		return lane - x.arg >= 0 ? lane - x.arg : lane;
	case SHFL_DOWN:
		return lane + x.arg < 32 ? lane + x.arg : lane;
	default:
		return lane ^ x.arg;
	}
}

/* The emulator's own tiles need no sanitizer checks (kernel memory keeps them): they would
 * make these loops, most of an emulated run, several times slower. GCC inlines nothing
 * checked into them, hence the table instead of frag_place and the bit shift instead of
 * __bfloat162float. */
#define EMU_UNCHECKED __attribute__((no_sanitize("address", "undefined")))

/* place[lane][slot]: r * 16 + c of the element frag_place gives. */
struct placement {
	int at[32][8];
	placement()
	{
		for (unsigned l = 0; l < 32; l++)
			for (int k = 0; k < 8; k++) {
				int r, c;
				frag_place(l, k, &r, &c);
				at[l][k] = r * 16 + c;
			}
	}
};
const placement place;

/* d = a b + c, each element summed over k in ascending order in fp32. */
EMU_UNCHECKED void tile_product(tiles &m)
{
	for (int i = 0; i < 16; i++) {
		float acc[16];
		for (int j = 0; j < 16; j++)
			acc[j] = m.c[i * 16 + j];
		for (int k = 0; k < 16; k++) {
			const float x = m.a[i * 16 + k];
			for (int j = 0; j < 16; j++)
				acc[j] += x * m.b[k * 16 + j];
		}
		for (int j = 0; j < 16; j++)
			m.d[i * 16 + j] = acc[j];
	}
}

/* A lane's 8 elements of each operand into the tiles, and its 8 results back. */
EMU_UNCHECKED void tile_put(tiles &m, unsigned lane, const __nv_bfloat16 a[8],
			    const __nv_bfloat16 b[8], const float c[8])
{
	for (int k = 0; k < 8; k++) {
		const int at = place.at[lane][k];
		const uint32_t ua = (uint32_t)a[k].bits << 16, ub = (uint32_t)b[k].bits << 16;
		memcpy(&m.a[at], &ua, 4);
		memcpy(&m.b[at], &ub, 4);
		m.c[at] = c[k];
	}
}

EMU_UNCHECKED void tile_get(const tiles &m, unsigned lane, float d[8])
{
	for (int k = 0; k < 8; k++)
		d[k] = m.d[place.at[lane][k]];
}

/* Every live lane of warp wi reached the __syncwarp or mma_sync with sequence number seq:
 * checks that they agree, computes the product, lets them go. */
void complete_wide(int wi, unsigned seq)
{
	cwarp &w = blk.w[wi];
	const arrival *first = nullptr;
	int first_lane = 0;
	char b1[256], b2[256];
	for (int l = 0; l < w.lanes; l++) {
		if (blk.t[wi * 32 + l].state == DONE)
			continue;
		const arrival &x = w.hist[l][seq % KEEP];
		if (!first) {
			first = &x;
			first_lane = l;
			continue;
		}
		if (x.kind != first->kind || !same_site(x.where, first->where))
			fault("warp %d diverged: lane %d at %s (%s), another lane at %s (%s)",
			      wi, l, coll_name[x.kind], site_text(x.where, b1, sizeof b1),
			      coll_name[first->kind], site_text(first->where, b2, sizeof b2));
		if (x.mask != first->mask)
			fault("warp %d: lanes disagree on the mask of %s at %s", wi,
			      coll_name[x.kind], site_text(x.where, b1, sizeof b1));
		if (x.kind == COLL_MMA &&
		    (!same_origin(x.ao, first->ao) || !same_origin(x.bo, first->bo) ||
		     x.co.how != first->co.how))
			fault("warp %d: wmma::mma_sync at %s with operands loaded from different "
			      "addresses by different lanes", wi,
			      site_text(x.where, b1, sizeof b1));
	}
	const unsigned full = w.lanes == 32 ? 0xffffffffu : (1u << w.lanes) - 1;
	if (first->mask != full)
		fault("warp %d: %s at %s with mask 0x%08x: only whole-warp masks are emulated", wi,
		      coll_name[first->kind], site_text(first->where, b1, sizeof b1), first->mask);
	if (first->kind == COLL_MMA) {
		if (w.live < w.lanes)
			fault("warp %d: wmma::mma_sync at %s after %d lanes returned", wi,
			      site_text(first->where, b1, sizeof b1), w.lanes - w.live);
		if (first->ao.how == FRAG_UNSET || first->bo.how == FRAG_UNSET ||
		    first->co.how == FRAG_UNSET)
			fault("warp %d: wmma::mma_sync at %s on a fragment never loaded, filled or "
			      "computed", wi, site_text(first->where, b1, sizeof b1));
		/* Any lane's tile set: all of them arrived with the same wide_n. */
		tile_product(w.wide[blk.t[wi * 32 + first_lane].wide_n & 1]);
	}
	for (int l = 0; l < w.lanes; l++) {
		cthread &t = blk.t[wi * 32 + l];
		if (t.state == AT_WARP && t.wseq == seq)
			set_state(t, READY);
	}
}

/* Whether a lane of warp wi may hand in collective seq: every live lane has completed
 * seq - KEEP, whose entry it would overwrite. */
bool has_room(int wi, unsigned seq)
{
	cwarp &w = blk.w[wi];
	if (seq < w.slowest + KEEP)
		return true;
	unsigned lo = ~0u;
	for (int l = 0; l < w.lanes; l++) {
		const cthread &t = blk.t[wi * 32 + l];
		if (t.state != DONE && t.wseq < lo)
			lo = t.wseq;
	}
	w.slowest = lo;
	return seq < lo + KEEP;
}

/* Lane l of warp wi waits at a shuffle (its entry for its wseq in hist): lets it go if its
 * source has handed in the same shuffle, else registers it with the source. */
void try_shuffle(int wi, int l)
{
	cwarp &w = blk.w[wi];
	cthread &t = blk.t[wi * 32 + l];
	const unsigned seq = t.wseq;
	const arrival &x = w.hist[l][seq % KEEP];
	char b1[256], b2[256];
	const int src = shuffle_source(x, l);
	if (src < 0 || src >= w.lanes)
		fault("a shuffle at %s reads lane %d of a %d-lane warp",
		      site_text(x.where, b1, sizeof b1), src, w.lanes);
	const arrival &y = w.hist[src][seq % KEEP];
	if (src != l && y.seq != seq) {
		if (blk.t[wi * 32 + src].state == DONE)
			fault("a shuffle at %s reads lane %d, which returned",
			      site_text(x.where, b1, sizeof b1), src);
		w.waiters[src] |= 1u << l;
		return;
	}
	if (y.kind != COLL_SHUFFLE || !same_site(x.where, y.where) || y.mask != x.mask)
		fault("warp %d diverged: lane %d at a shuffle at %s reads lane %d, which is at %s "
		      "(%s)", wi, l, site_text(x.where, b1, sizeof b1), src, coll_name[y.kind],
		      site_text(y.where, b2, sizeof b2));
	set_state(t, READY);
}

/* Lanes of warp wi waiting for room (or, after a lane returned, at a collective the
 * returned lane no longer holds up) are let go where they can. */
void recheck_warp(int wi)
{
	cwarp &w = blk.w[wi];
	for (int l = 0; l < w.lanes; l++) {
		cthread &t = blk.t[wi * 32 + l];
		if (t.state == AT_ROOM && has_room(wi, t.wseq)) {
			set_state(t, READY);
			w.waiting_room--;
		} else if (t.state == AT_WARP) {
			const unsigned seq = t.wseq;
			if (w.hist[l][seq % KEEP].kind == COLL_SHUFFLE)
				try_shuffle(wi, l);
			else if (w.count_seq[seq % KEEP] == seq && w.count[seq % KEEP] == w.live)
				complete_wide(wi, seq);
		}
	}
}

/* The calling lane hands in x and waits until its collective can complete: for a shuffle,
 * until its source lane has handed in the same one; otherwise until the whole warp has. */
void warp_collective(arrival &x)
{
	cthread &me = *cur;
	const int wi = (int)(me.tid / 32), l = (int)(me.tid % 32);
	cwarp &w = blk.w[wi];
	const unsigned seq = me.wseq;
	me.where = x.where;
	if (!has_room(wi, seq)) {
		set_state(me, AT_ROOM);
		w.waiting_room++;
		fiber_yield(&me.fib);
	}
	x.seq = seq;
	w.hist[l][seq % KEEP] = x;
	if (w.count_seq[seq % KEEP] != seq) {
		w.count_seq[seq % KEEP] = seq;
		w.count[seq % KEEP] = 0;
	}
	w.count[seq % KEEP]++;
	set_state(me, AT_WARP);
	/* Shuffles waiting for this lane's value. */
	for (uint32_t m = w.waiters[l]; m; m &= m - 1) {
		const int o = __builtin_ctz(m);
		cthread &t = blk.t[wi * 32 + o];
		if (t.state == AT_WARP && t.wseq == seq) {
			w.waiters[l] &= ~(1u << o);
			try_shuffle(wi, o);
		}
	}
	if (x.kind == COLL_SHUFFLE)
		try_shuffle(wi, l);
	else if (w.count[seq % KEEP] == w.live)
		complete_wide(wi, seq);
	fiber_yield(&me.fib);
}

/* After the lane has read its collective's results. */
void warp_done(bool wide)
{
	cthread &me = *cur;
	me.wseq++;
	me.wide_n += wide;
	if (blk.w[me.tid / 32].waiting_room)
		recheck_warp((int)(me.tid / 32));
}

void thread_entry()
{
	fiber_begin();
	blk.body(blk.arg);
	cthread &me = *cur;
	set_state(me, DONE);
	blk.live--;
	const int wi = (int)(me.tid / 32);
	blk.w[wi].live--;
	/* The others may have been waiting only for this one, or for its value. */
	recheck_warp(wi);
	if (blk.at_barrier > 0 && blk.at_barrier == blk.live)
		release_barrier();
	fiber_finish(&me.fib);
}

void run_block(const dim3 &bd, unsigned linear)
{
	block &b = blk;
	b.n = (int)(bd.x * bd.y * bd.z);
	b.nwarps = (b.n + 31) / 32;
	b.live = b.n;
	b.at_barrier = 0;
	b.pol = sched_policy();
	if (b.pol == P_MIXED)
		b.pol = (policy)((linear + launches) % 6);
	const bool rev = b.pol == P_ROUND_REV || b.pol == P_WARP_REV;
	b.cursor = rev ? b.n - 1 : 0;
	b.warp_cursor = rev ? b.nwarps - 1 : 0;
	for (int wi = 0; wi < b.nwarps; wi++) {
		cwarp &w = b.w[wi];
		w.lanes = b.n - wi * 32 < 32 ? b.n - wi * 32 : 32;
		w.live = w.lanes;
		w.waiting_room = 0;
		w.slowest = 0;
		memset(w.waiters, 0, sizeof w.waiters);
		for (unsigned k = 0; k < KEEP; k++) {
			w.count_seq[k] = ~0u;
			w.count[k] = 0;
			for (int l = 0; l < 32; l++)
				w.hist[l][k].seq = ~0u;
		}
		b.lane_cursor[wi] = rev ? w.lanes - 1 : 0;
	}
	memset(b.ready, 0, sizeof b.ready);
	for (int i = 0; i < b.n; i++) {
		cthread &t = b.t[i];
		t.tid = (unsigned)i;
		set_state(t, READY);
		t.idx = uint3{(unsigned)i % bd.x, (unsigned)i / bd.x % bd.y,
			      (unsigned)i / (bd.x * bd.y)};
		t.wseq = 0;
		t.wide_n = 0;
		t.where = site();
		fiber_start(&t.fib, thread_entry);
	}
	while (b.live > 0) {
		const int i = pick();
		if (i < 0)
			deadlock();
		cur = &b.t[i];
		cur_thread = cur->idx;
		cur_lane = cur->tid & 31;
		fiber_resume(&cur->fib);
	}
	cur = nullptr;
}

} /* namespace */

void at(const char *file, int line, const char *func, int nth)
{
	marked.file = file;
	marked.line = line;
	marked.func = func;
	marked.nth = nth;
}

void block_barrier()
{
	const site s = take_marked();
	if (!in_kernel)
		fault("__syncthreads outside a kernel");
	if (dropped(s, false))
		return;
	cthread &me = *cur;
	block &b = blk;
	if (b.at_barrier == 0) {
		b.barrier_site = s;
	} else if (!same_site(s, b.barrier_site)) {
		char b1[256], b2[256];
		fault("threads of one block at different __syncthreads: %s and %s (a barrier in "
		      "divergent code)", site_text(s, b1, sizeof b1),
		      site_text(b.barrier_site, b2, sizeof b2));
	}
	me.where = s;
	set_state(me, AT_BARRIER);
	if (++b.at_barrier == b.live)
		release_barrier();
	fiber_yield(&me.fib);
}

void warp_barrier(unsigned mask)
{
	const site s = take_marked();
	if (!in_kernel)
		fault("__syncwarp outside a kernel");
	if (dropped(s, true))
		return;
	arrival x;
	x.kind = COLL_SYNCWARP;
	x.where = s;
	x.mask = mask;
	warp_collective(x);
	warp_done(true);
}

void shuffle(unsigned mask, const void *in, void *out, size_t bytes, shuffle_mode mode, int arg,
	     int width)
{
	const site s = take_marked();
	char b[256];
	if (!in_kernel)
		fault("a shuffle outside a kernel");
	if (width != 32)
		fault("a shuffle of width %d at %s: only width 32 is emulated", width,
		      site_text(s, b, sizeof b));
	if (mode == SHFL_XOR && (arg < 0 || arg > 31))
		fault("__shfl_xor_sync at %s with lane mask %d", site_text(s, b, sizeof b), arg);
	cthread &me = *cur;
	const int wi = (int)(me.tid / 32), lane = (int)(me.tid % 32);
	const unsigned full = blk.w[wi].lanes == 32 ? 0xffffffffu : (1u << blk.w[wi].lanes) - 1;
	if (mask != full)
		fault("a shuffle at %s with mask 0x%08x: only whole-warp masks are emulated",
		      site_text(s, b, sizeof b), mask);
	arrival x;
	x.kind = COLL_SHUFFLE;
	x.where = s;
	x.mask = mask;
	x.mode = (int)mode;
	x.arg = arg;
	x.width = width;
	memcpy(x.val, in, bytes);
	warp_collective(x);
	/* The source's entry stays until every lane, this one included, is past it. */
	const int src = shuffle_source(x, lane);
	memcpy(out, blk.w[wi].hist[src][me.wseq % KEEP].val, bytes);
	warp_done(false);
}

void warp_mma(float d[8], const __nv_bfloat16 a[8], const __nv_bfloat16 b[8], const float c[8],
	      const frag_origin &ao, const frag_origin &bo, const frag_origin &co)
{
	const site s = take_marked();
	if (!in_kernel)
		fault("wmma::mma_sync outside a kernel");
	cthread &me = *cur;
	const unsigned lane = me.tid & 31;
	tiles &m = blk.w[me.tid / 32].wide[me.wide_n & 1];
	tile_put(m, lane, a, b, c);
	arrival x;
	x.kind = COLL_MMA;
	x.where = s;
	const int lanes = blk.w[me.tid / 32].lanes;
	x.mask = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
	x.ao = ao;
	x.bo = bo;
	x.co = co;
	warp_collective(x);
	tile_get(m, lane, d);
	warp_done(true);
}

void wmma_check(const void *p, unsigned ldm, unsigned elem_bytes, const char *what)
{
	site s = take_marked();
	char b[256];
	if ((uintptr_t)p % 32 != 0)
		fault("wmma::%s at %s: pointer %p is not 32-byte aligned", what,
		      site_text(s, b, sizeof b), p);
	if ((ldm * elem_bytes) % 16 != 0)
		fault("wmma::%s at %s: ldm %u is not a multiple of 16 bytes", what,
		      site_text(s, b, sizeof b), ldm);
}

unsigned char *dynamic_shared()
{
	if (!in_kernel)
		fault("dynamic shared memory outside a kernel");
	return blk.shared;
}

void fault(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fflush(stdout);
	fprintf(stderr, "emu: error: ");
	if (in_kernel && cur)
		fprintf(stderr, "%s, block (%u,%u,%u), thread (%u,%u,%u): ", cur_kernel,
			cur_block.x, cur_block.y, cur_block.z, cur->idx.x, cur->idx.y, cur->idx.z);
	else if (in_kernel)
		fprintf(stderr, "%s, block (%u,%u,%u): ", cur_kernel, cur_block.x, cur_block.y,
			cur_block.z);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	fflush(stderr);
	abort();
}

void run_launch(const launch_config &cfg, void (*body)(void *), void *arg)
{
	if (in_kernel)
		fault("a kernel launched from device code (not emulated)");
	const dim3 g = cfg.grid, bd = cfg.block;
	const unsigned long long nt = (unsigned long long)bd.x * bd.y * bd.z;
	const char *why = nullptr;
	if (bd.x == 0 || bd.y == 0 || bd.z == 0 || bd.x > 1024 || bd.y > 1024 || bd.z > 64 ||
	    nt > 1024)
		why = "block size";
	else if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 2147483647u || g.y > 65535 ||
		 g.z > 65535)
		why = "grid size";
	if (why) {
		fprintf(stderr, "emu: launch of %s refused: %s: grid (%u,%u,%u), block "
			"(%u,%u,%u)\n", cfg.name, why, g.x, g.y, g.z, bd.x, bd.y, bd.z);
		set_error(cudaErrorInvalidConfiguration);
		return;
	}
	const size_t limit = shared_limit(cfg.kernel) > 48 * 1024 ? shared_limit(cfg.kernel)
								 : 48 * 1024;
	if (cfg.shared > limit) {
		fprintf(stderr, "emu: launch of %s refused: %zu bytes of dynamic shared memory, "
			"above the kernel's limit %zu (cudaFuncSetAttribute)\n", cfg.name,
			cfg.shared, limit);
		set_error(cudaErrorInvalidValue);
		return;
	}
	if (!stream_valid(cfg.stream)) {
		fprintf(stderr, "emu: launch of %s refused: stream %p is not a live stream\n",
			cfg.name, (void *)cfg.stream);
		set_error(cudaErrorInvalidResourceHandle);
		return;
	}
	/* Exactly the launch's bytes, so that AddressSanitizer sees an access past them. */
	void *sm = nullptr;
	if (posix_memalign(&sm, 1024, cfg.shared) != 0) {
		fprintf(stderr, "emu: error: no memory for %zu bytes of shared memory\n",
			cfg.shared);
		abort();
	}
	blk.shared = (unsigned char *)sm;
	blk.t = threads;
	blk.w = warps.data();
	blk.body = body;
	blk.arg = arg;
	cur_kernel = cfg.name;
	cur_grid_dim = g;
	cur_block_dim = bd;
	in_kernel = true;
	unsigned linear = 0;
	for (unsigned z = 0; z < g.z; z++)
		for (unsigned y = 0; y < g.y; y++)
			for (unsigned x = 0; x < g.x; x++, linear++) {
				cur_block = uint3{x, y, z};
				/* Stale shared memory reads as NaN in bf16 and fp32. */
				memset(blk.shared, 0xff, cfg.shared);
				run_block(bd, linear);
			}
	in_kernel = false;
	launches++;
	free(sm);
	blk.shared = nullptr;
}

} /* namespace cuemu */
