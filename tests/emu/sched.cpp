/* sched.cpp: how the CUDA emulator (tests/emu/README.md) runs a kernel. A launch runs its
 * blocks one after another on the calling thread; the threads of a block are fibers
 * (fiber.cpp), each running until it reaches a synchronisation point or returns:
 *   __syncthreads          waits for every thread of the block;
 *   __syncwarp, wmma::mma_sync, attn_ptx::mma_16816, ldsm_x4, ldsm_x4_t
 *                          wait for every lane of the warp (the product needs all pieces,
 *                          a lane's ldmatrix registers hold other lanes' rows);
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
 * cp.async (attn_ptx::cp_async16, cp_async_commit, cp_async_wait) is per thread and no
 * synchronisation point: the source is read at issue; the 16 bytes land in shared memory at
 * issue ("early") or only at the wait that covers their group ("late"), per block as
 * EMU_CPASYNC says (early, late, or mixed: the default, both in turn). Late shows a wait or a
 * barrier after it missing (the data reads as the 0xff fill); early shows a prefetch into a
 * buffer other warps still read (a barrier before it missing).
 *
 * EMU_DROP=FUNC:syncthreads:N (or :syncwarp:N, :cpwait:N) makes the Nth __syncthreads
 * (__syncwarp, cp_async_wait) of function FUNC, in source order as emu_prep numbers them, do
 * nothing: the kernel runs as if that line were deleted, without a rebuild
 * (tests/emu/test-barrier-drop); a dropped wait's copies land at a later wait or when the
 * thread returns. */
#include "emu_int.h"
#include "emu_ptx.h"
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
enum coll_kind { COLL_SYNCWARP, COLL_SHUFFLE, COLL_MMA, COLL_MMA8, COLL_LDSM, COLL_LDSM_T };
const char *const coll_name[] = {"__syncwarp",          "a shuffle",        "wmma::mma_sync",
				 "attn_ptx::mma_16816", "attn_ptx::ldsm_x4", "attn_ptx::ldsm_x4_t"};

enum cp_mode { CP_MIXED, CP_EARLY, CP_LATE };
const char *const cp_mode_name[] = {"mixed", "early", "late"};

enum policy { P_ROUND, P_WARP, P_FIRST, P_ROUND_REV, P_WARP_REV, P_LAST, P_RANDOM, P_MIXED };
const char *const policy_name[] = {"round",    "warp", "first",  "round-rev",
				   "warp-rev", "last", "random", "mixed"};

/* Warp collectives a lane keeps its inputs for: lanes of a warp may be this many apart
 * (through shuffles only; __syncwarp, the products and the ldmatrix loads line them up), and
 * one that would get further waits for the slowest (AT_ROOM). */
const unsigned KEEP = 8;

/* A cp.async that has not landed: its 16 bytes, read at issue, and its group (the number
 * of commits its thread had made before it). */
struct cp_copy {
	unsigned char *dst;
	unsigned group;
	unsigned char data[16];
};

struct cthread {
	fiber fib;
	int state = DONE;
	unsigned tid = 0;     /* linear index in the block */
	uint3 idx{0, 0, 0};
	unsigned wseq = 0;    /* warp collectives this thread has completed */
	unsigned wide_n = 0;  /* of which whole-warp ones (the products alternate tile sets) */
	site where;           /* where it waits */
	unsigned cp_groups = 0;      /* cp.async groups committed */
	std::vector<cp_copy> cp;     /* issued, not landed, in issue order (late mode only) */
};

/* What one lane brings to a warp collective. */
struct arrival {
	unsigned seq = ~0u; /* the lane's wseq at arrival: tells a fresh entry from an old one */
	int kind = 0;
	site where;
	unsigned mask = 0;
	int mode = 0, arg = 0, width = 0;
	unsigned char val[16]; /* a shuffle's value; the ldmatrix row the lane read on arrival */
	frag_origin ao{}, bo{}, co{};
};

/* The tiles of one mma_sync: row-major 16 x 16, filled by the lanes' pieces. */
struct tiles {
	float a[256], b[256], c[256], d[256];
};

/* The same for mma_16816: A 16 x 16, B 16 x 8 (k, n), C and D 16 x 8, all row-major. */
struct tiles8 {
	float a[256], b[128], c[128], d[128];
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
	tiles8 wide8[2]; /* mma_16816's, the same way */
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
	size_t shared_bytes = 0;
	bool cp_late = false;            /* cp.async lands at the wait (else at issue) */
	void (*body)(void *) = nullptr;
	void *arg = nullptr;
};

cthread threads[1024];
std::vector<cwarp> warps(32);
block blk;
cthread *cur;
const char *cur_kernel;
bool in_kernel;
site marked; /* from at(), for the next synchronisation, WMMA or attn_ptx call */
unsigned long long launches;
uint64_t rng_state;

/* What EMU_DROP names besides the function and the number. */
enum drop_kind { DROP_SYNCTHREADS, DROP_SYNCWARP, DROP_CPWAIT };

struct drop_spec {
	bool parsed = false, active = false;
	char func[128];
	int kind = 0, nth = 0;
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

cp_mode cp_async_mode()
{
	static int m = -1;
	if (m < 0) {
		const char *e = getenv("EMU_CPASYNC");
		m = CP_MIXED;
		if (e && *e) {
			m = -1;
			for (int i = 0; i <= CP_LATE; i++)
				if (!strcmp(e, cp_mode_name[i]))
					m = i;
			if (m < 0) {
				fprintf(stderr, "emu: error: EMU_CPASYNC '%s' is not one of late, "
					"early, mixed\n", e);
				exit(2);
			}
		}
	}
	return (cp_mode)m;
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
	const bool cw = klen == 6 && !strncmp(c1 + 1, "cpwait", 6);
	if (!c2 || flen == 0 || flen >= sizeof drop.func || (!st && !sw && !cw) || !end ||
	    *end || nth < 1 || nth > 100000) {
		fprintf(stderr, "emu: error: EMU_DROP '%s' is not FUNC:syncthreads:N, "
			"FUNC:syncwarp:N or FUNC:cpwait:N\n", e);
		exit(2);
	}
	memcpy(drop.func, e, flen);
	drop.func[flen] = '\0';
	drop.kind = st ? DROP_SYNCTHREADS : sw ? DROP_SYNCWARP : DROP_CPWAIT;
	drop.nth = (int)nth;
	drop.text = e;
	drop.active = true;
	atexit(report_drop);
}

/* Whether the site just marked is the barrier (or cp.async wait) EMU_DROP names. */
bool dropped(const site &s, drop_kind kind)
{
	if (!drop.parsed)
		parse_drop();
	if (!drop.active || s.nth != drop.nth || kind != drop.kind || !s.func ||
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

/* mma_16816's d = a b + c (16 x 16 by 16 x 8), summed as tile_product sums. */
EMU_UNCHECKED void tile_product8(tiles8 &m)
{
	for (int i = 0; i < 16; i++) {
		float acc[8];
		for (int j = 0; j < 8; j++)
			acc[j] = m.c[i * 8 + j];
		for (int k = 0; k < 16; k++) {
			const float x = m.a[i * 16 + k];
			for (int j = 0; j < 8; j++)
				acc[j] += x * m.b[k * 8 + j];
		}
		for (int j = 0; j < 8; j++)
			m.d[i * 8 + j] = acc[j];
	}
}

/* The bf16 in the low (high) half of a register as the float it is exactly. */
EMU_UNCHECKED inline float lo_bf16(uint32_t r)
{
	const uint32_t u = r << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}
EMU_UNCHECKED inline float hi_bf16(uint32_t r)
{
	const uint32_t u = r & 0xffff0000u;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* A lane's registers into the tiles, by the layout of mma.m16n8k16 (attn_ptx.cuh): with
 * g = lane / 4 and t = lane % 4, a[0] = A(g, 2t..2t+1), a[1] = A(g+8, ..), a[2] = A(g, 2t+8..),
 * a[3] = A(g+8, 2t+8..); b[0] = B(2t..2t+1, g), b[1] = B(2t+8..2t+9, g); c[0..1] = C(g, 2t..),
 * c[2..3] = C(g+8, 2t..); the lower column (row of B) in the low half. */
EMU_UNCHECKED void tile8_put(tiles8 &m, unsigned lane, const uint32_t a[4], const uint32_t b[2],
			     const float c[4])
{
	const int g = (int)(lane >> 2), t2 = 2 * (int)(lane & 3);
	for (int h = 0; h < 2; h++) { /* row g, then g + 8 */
		const int row = (g + 8 * h) * 16;
		m.a[row + t2] = lo_bf16(a[h]);
		m.a[row + t2 + 1] = hi_bf16(a[h]);
		m.a[row + t2 + 8] = lo_bf16(a[h + 2]);
		m.a[row + t2 + 9] = hi_bf16(a[h + 2]);
		m.b[(t2 + 8 * h) * 8 + g] = lo_bf16(b[h]);
		m.b[(t2 + 8 * h + 1) * 8 + g] = hi_bf16(b[h]);
		m.c[(g + 8 * h) * 8 + t2] = c[2 * h];
		m.c[(g + 8 * h) * 8 + t2 + 1] = c[2 * h + 1];
	}
}

EMU_UNCHECKED void tile8_get(const tiles8 &m, unsigned lane, float d[4])
{
	const int g = (int)(lane >> 2), t2 = 2 * (int)(lane & 3);
	d[0] = m.d[g * 8 + t2];
	d[1] = m.d[g * 8 + t2 + 1];
	d[2] = m.d[(g + 8) * 8 + t2];
	d[3] = m.d[(g + 8) * 8 + t2 + 1];
}

/* Every live lane of warp wi reached the __syncwarp, product or ldmatrix load with sequence
 * number seq: checks that they agree, computes the product, lets them go. */
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
	} else if (first->kind >= COLL_MMA8) {
		/* The PTX requires every thread of the warp (.aligned); each lane's registers
		 * hold pieces of the others' operands or rows. */
		if (w.lanes < 32)
			fault("warp %d: %s at %s in a warp of %d threads: it needs all 32 lanes",
			      wi, coll_name[first->kind],
			      site_text(first->where, b1, sizeof b1), w.lanes);
		if (w.live < w.lanes)
			fault("warp %d: %s at %s after %d lanes returned", wi,
			      coll_name[first->kind], site_text(first->where, b1, sizeof b1),
			      w.lanes - w.live);
		if (first->kind == COLL_MMA8)
			tile_product8(w.wide8[blk.t[wi * 32 + first_lane].wide_n & 1]);
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

/* Lands the calling thread's pending copies of groups below `below`, in issue order. */
void cp_land(cthread &me, unsigned below)
{
	size_t keep = 0;
	for (size_t i = 0; i < me.cp.size(); i++) {
		const cp_copy &c = me.cp[i];
		if (c.group < below)
			memcpy(c.dst, c.data, 16);
		else
			me.cp[keep++] = c;
	}
	me.cp.resize(keep);
}

void thread_entry()
{
	fiber_begin();
	blk.body(blk.arg);
	cthread &me = *cur;
	/* Copies still in flight land after all, the uncommitted ones too. */
	cp_land(me, ~0u);
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
	const unsigned long long x = linear + launches;
	if (b.pol == P_MIXED)
		b.pol = (policy)(x % 6);
	/* Mixed: early and late in turn, shifted by one every six blocks, so that each of the
	 * mixed schedule's six orders meets both. */
	const cp_mode cm = cp_async_mode();
	b.cp_late = cm == CP_LATE || (cm == CP_MIXED && ((x + x / 6) & 1));
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
		t.cp_groups = 0;
		t.cp.clear();
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
	if (dropped(s, DROP_SYNCTHREADS))
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
	if (dropped(s, DROP_SYNCWARP))
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

namespace {

/* Faults unless p is 16-byte aligned and its 16 bytes lie inside the running block's dynamic
 * shared memory (what ldmatrix and a cp.async destination need); what and operand name it. */
void shared16(const void *p, const char *what, const char *operand, const site &s)
{
	char b[256];
	const uintptr_t a = (uintptr_t)p, base = (uintptr_t)blk.shared;
	if (a % 16 != 0)
		fault("%s at %s: %s %p is not 16-byte aligned", what, site_text(s, b, sizeof b),
		      operand, p);
	if (a < base || blk.shared_bytes < 16 || a - base > blk.shared_bytes - 16)
		fault("%s at %s: %s %p: its 16 bytes are not inside the block's %zu bytes of "
		      "dynamic shared memory", what, site_text(s, b, sizeof b), operand, p,
		      blk.shared_bytes);
}

unsigned whole_warp_mask(int wi)
{
	const int lanes = blk.w[wi].lanes;
	return lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
}

} /* namespace */

void ptx_mma16816(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4])
{
	const site s = take_marked();
	if (!in_kernel)
		fault("attn_ptx::mma_16816 outside a kernel");
	cthread &me = *cur;
	const unsigned lane = me.tid & 31;
	const int wi = (int)(me.tid / 32);
	/* c is read here and d written after the product: d may be c. */
	tiles8 &m = blk.w[wi].wide8[me.wide_n & 1];
	tile8_put(m, lane, a, b, c);
	arrival x;
	x.kind = COLL_MMA8;
	x.where = s;
	x.mask = whole_warp_mask(wi);
	warp_collective(x);
	tile8_get(m, lane, d);
	warp_done(true);
}

/* Every lane reads its own row now, when it arrives, not when the warp completes: a row
 * another lane writes after this lane got here reads stale, as it may on the GPU without a
 * __syncwarp between. Matrix i's row j is the row of lane 8i + j. */
void ptx_ldsm(uint32_t r[4], const void *p, bool trans)
{
	const site s = take_marked();
	const char *what = trans ? "attn_ptx::ldsm_x4_t" : "attn_ptx::ldsm_x4";
	if (!in_kernel)
		fault("%s outside a kernel", what);
	shared16(p, what, "address", s);
	cthread &me = *cur;
	const int wi = (int)(me.tid / 32);
	arrival x;
	x.kind = trans ? COLL_LDSM_T : COLL_LDSM;
	x.where = s;
	x.mask = whole_warp_mask(wi);
	memcpy(x.val, p, 16);
	warp_collective(x);
	/* The rows stay in the history until every lane, this one included, is past them. */
	const arrival(&h)[32][KEEP] = blk.w[wi].hist;
	const unsigned k = me.wseq % KEEP, g = (me.tid & 31) >> 2, t = me.tid & 3;
	for (unsigned i = 0; i < 4; i++) {
		if (!trans) { /* (M_i(g, 2t), M_i(g, 2t + 1)) */
			memcpy(&r[i], h[8 * i + g][k].val + 4 * t, 4);
		} else { /* (M_i(2t, g), M_i(2t + 1, g)) */
			uint16_t lo, hi;
			memcpy(&lo, h[8 * i + 2 * t][k].val + 2 * g, 2);
			memcpy(&hi, h[8 * i + 2 * t + 1][k].val + 2 * g, 2);
			r[i] = (uint32_t)lo | (uint32_t)hi << 16;
		}
	}
	warp_done(true);
}

/* The source is read at issue (so that AddressSanitizer names the issuing line for one out
 * of range; these kernels never write global memory that a copy reads), and lands at once
 * in early mode, else at the wait covering its group (or when the thread returns). */
void ptx_cp_async(void *dst, const void *src, int n)
{
	const site s = take_marked();
	char b[256];
	if (!in_kernel)
		fault("attn_ptx::cp_async16 outside a kernel");
	if (n != 0 && n != 16)
		fault("attn_ptx::cp_async16 at %s: source size %d: only 16 and 0 (all zero fill) "
		      "are emulated", site_text(s, b, sizeof b), n);
	shared16(dst, "attn_ptx::cp_async16", "destination", s);
	if (n == 16 && (uintptr_t)src % 16 != 0)
		fault("attn_ptx::cp_async16 at %s: source %p is not 16-byte aligned",
		      site_text(s, b, sizeof b), src);
	cthread &me = *cur;
	cp_copy c;
	c.dst = static_cast<unsigned char *>(dst);
	c.group = me.cp_groups;
	if (n == 16)
		memcpy(c.data, src, 16);
	else
		memset(c.data, 0, 16);
	if (blk.cp_late)
		me.cp.push_back(c);
	else
		memcpy(dst, c.data, 16);
}

void ptx_cp_commit()
{
	take_marked();
	if (!in_kernel)
		fault("attn_ptx::cp_async_commit outside a kernel");
	cur->cp_groups++; /* closes the open group, empty or not */
}

/* wait_group n: every committed group but the newest n has landed. The open group (copies
 * not yet committed) is not waited for, as in PTX. */
void ptx_cp_wait(int n)
{
	const site s = take_marked();
	if (!in_kernel)
		fault("attn_ptx::cp_async_wait outside a kernel");
	if (dropped(s, DROP_CPWAIT))
		return;
	cthread &me = *cur;
	if (!me.cp.empty() && me.cp_groups > (unsigned)n)
		cp_land(me, me.cp_groups - (unsigned)n);
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
	/* The environment is read here, on the launching thread's stack: exit() for a bad value
	 * from a fiber would free that fiber's stack under itself. */
	sched_policy();
	cp_async_mode();
	if (!drop.parsed)
		parse_drop();
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
	blk.shared_bytes = cfg.shared;
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
	blk.shared_bytes = 0;
}

} /* namespace cuemu */
