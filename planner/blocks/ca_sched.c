/* ca_sched.c: DistCA's placement, Items, greedy scheduler and communication costs
 * (ca_sched.h; DistCA Sec. 3, 4.1, 4.2, 6.1, App. A, B, E, read against the public code). */
#include "ca_sched.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "heap.h"
#include "plan.h"

static const char *const comm_names[BP_CA_COMM_NMODES] = {"code", "appb", "exact"};

const char *bp_ca_comm_name(enum bp_ca_comm c)
{
	return c < BP_CA_COMM_NMODES ? comm_names[c] : "?";
}

int bp_ca_comm_parse(const char *s, enum bp_ca_comm *out)
{
	for (int i = 0; i < BP_CA_COMM_NMODES; i++)
		if (!strcmp(s, comm_names[i])) {
			*out = (enum bp_ca_comm)i;
			return 0;
		}
	return -1;
}

/* The buffers of struct bp_ca_work: the scheduler's (sched_init, ix_init), which
 * bp_ca_emit_in reuses for its own scratch once the scheduler is done. */
enum {
	W_SD, W_RC, W_HAVE, W_SHARDS, W_DON, W_SRV, W_UNITS, /* struct sched */
	W_IX_HEAP, W_IX_KEY, W_IX_B, W_IX_AT, W_IX_LIVE,     /* struct cand_index */
	W_NBUFS
};
_Static_assert(W_NBUFS <= BP_CA_WORK_BUFS, "struct bp_ca_work holds every buffer");

void bp_ca_work_release(struct bp_ca_work *w)
{
	for (int k = 0; k < BP_CA_WORK_BUFS; k++)
		free(w->buf[k]);
	memset(w, 0, sizeof(*w));
}

/* w's buffer k with room for n elements of size bytes (at least one; its contents are
 * whatever an earlier call left), or NULL. Grown by doubling, never shrunk. */
static void *work_get(struct bp_ca_work *w, int k, size_t n, size_t size,
		      struct bp_error *err)
{
	if (!n)
		n = 1;
	if (n > SIZE_MAX / size) {
		bp_errorf(err, "scratch of %zu x %zu bytes", n, size);
		return NULL;
	}
	if (n * size > w->cap[k]) {
		size_t nb = n * size, dbl = w->cap[k] <= SIZE_MAX / 2 ? 2 * w->cap[k] : 0;
		free(w->buf[k]);
		w->cap[k] = 0;
		w->buf[k] = bp_realloc_array(NULL, nb > dbl ? nb : dbl, 1, err);
		if (!w->buf[k])
			return NULL;
		w->cap[k] = nb > dbl ? nb : dbl;
	}
	return w->buf[k];
}

/* The counting sorts' offsets: at[k + 2] holds bucket k's count, at[0] = at[1] = 0; after,
 * at[k + 1] is bucket k's start (its end once its entries are placed by at[k + 1]++). The
 * running sum stays in a register (summed in place, each entry waits for the store before
 * it). */
static void bucket_starts(size_t *at, size_t nbuckets)
{
	size_t run = at[1];
	for (size_t k = 0; k < nbuckets; k++) {
		run += at[k + 2];
		at[k + 2] = run;
	}
}

void bp_ca_placement_release(struct bp_ca_placement *pl)
{
	free(pl->items);
	free(pl->pieces);
	memset(pl, 0, sizeof(*pl));
}

static int push_item(struct bp_ca_placement *pl, const struct bp_ca_item *it,
		     struct bp_error *err)
{
	if (pl->nitems == pl->cap) {
		size_t nc = pl->cap ? 2 * pl->cap : 64;
		struct bp_ca_item *ni = bp_realloc_array(pl->items, nc, sizeof(*ni), err);
		if (!ni)
			return -1;
		pl->items = ni;
		pl->cap = nc;
	}
	pl->items[pl->nitems++] = *it;
	return 0;
}

/* Sec. 6.1 as the public code does it (batch_to_items_general): a unit crossing
 * ranks takes a front and a mirrored back piece on each, like per-document CP, so each
 * rank's share keeps the head-tail shape whose work App. B's FLOPs model predicts. */
int bp_ca_place(const int64_t *doc, const int64_t *base, const int64_t *len, size_t n,
		int nranks, int64_t budget, struct bp_ca_placement *pl, struct bp_error *err)
{
	memset(pl, 0, sizeof(*pl));
	if (nranks < 1 || budget < 1)
		return bp_errorf(err, "placement over %d ranks of %lld tokens", nranks,
				 (long long)budget);
	size_t cap_pieces = 2 * n + 2 * (size_t)nranks + 2;
	pl->pieces = bp_calloc(cap_pieces, sizeof(*pl->pieces), err);
	if (!pl->pieces)
		return -1;
	int r = 0;
	int64_t left = budget;
	for (size_t i = 0; i < n; i++) {
		int64_t L = len[i], b0 = base ? base[i] : 0;
		if (L < 1)
			return bp_errorf(err, "unit %zu (document %lld) has length %lld", i,
					 (long long)doc[i], (long long)L);
		int64_t hp = 0, ts = L, rem = L;
		while (rem > 0) {
			while (r < nranks && left == 0) {
				r++;
				left = budget;
			}
			if (r == nranks)
				return bp_errorf(err, "the units hold more than %d ranks x %lld "
						 "tokens", nranks, (long long)budget);
			int64_t chunk = rem < left ? rem : left;
			struct bp_ca_item it = {doc[i], b0, L, 0, 0, 0, 0, 0, i, r, r};
			if (chunk == L) {
				it.h1 = it.t0 = L / 2;
				it.t1 = L;
				it.complete = 1;
				pl->pieces[pl->npieces++] = (struct bp_ca_piece){doc[i], b0, L, r};
			} else {
				int64_t qh = chunk / 2, qt = chunk - qh;
				it.h0 = hp;
				it.h1 = hp + qh;
				it.t0 = ts - qt;
				it.t1 = ts;
				if (qh > 0)
					pl->pieces[pl->npieces++] =
						(struct bp_ca_piece){doc[i], b0 + hp, qh, r};
				pl->pieces[pl->npieces++] =
					(struct bp_ca_piece){doc[i], b0 + ts - qt, qt, r};
				hp += qh;
				ts -= qt;
			}
			if (push_item(pl, &it, err) < 0)
				return -1;
			left -= chunk;
			rem -= chunk;
		}
	}
	return 0;
}

/* The KV end an Item's queries need (its context is [0, end)). */
static int64_t item_kv_end(const struct bp_ca_item *it)
{
	return it->t1 > it->t0 ? it->t1 : it->h1;
}

/* Pairs a split of `want` units would move: the whole Item (of `units` pairs,
 * bp_ca_item_units) when want covers it, else the innermost m pairs,
 * m = floor(want / (h1 + t0 + 1)) rounded down to the granularity g (the public code's split:
 * the pairs next to the head-tail gap move). */
static int64_t split_pairs(const struct bp_ca_item *it, int64_t units, double want, int64_t g,
			   int *whole)
{
	*whole = want >= (double)units;
	if (*whole)
		return 0;
	int64_t per = it->h1 + it->t0 + 1;
	/* the scheduler prices every candidate move here: floor is a libm call (the baseline
	 * ISA has no SSE4.1 rounding) and % a division, so for q >= 0 the conversion's
	 * truncation, and for m >= 0 and g a power of two (the paper's 128-token blocks) a
	 * mask, the same values */
	double q = want / (double)per;
	int64_t m = q >= 0 ? (int64_t)q : (int64_t)floor(q);
	if (m > it->h1 - it->h0)
		m = it->h1 - it->h0;
	if (m > it->t1 - it->t0)
		m = it->t1 - it->t0;
	m -= m >= 0 && !(g & (g - 1)) ? m & (g - 1) : m % g;
	return m > 0 ? m : 0;
}

/* Chunks an Item emits (bp_ca_chunks). */
static int item_chunks(const struct bp_ca_item *it)
{
	return it->complete ? 1 : (it->h1 > it->h0) + (it->t1 > it->t0);
}

/* Whether a move of `want` units would move anything (the whole Item or a granule). */
static int whole_or_granule(const struct bp_ca_item *it, double want, int64_t g, int *whole)
{
	return split_pairs(it, bp_ca_item_units(it), want, g, whole) > 0 || *whole;
}

/* Whether moving `want` units keeps the Item's unit within its App. A cap (a whole move
 * adds no chunk); shards NULL: no cap. */
static int split_fits(const struct bp_ca_item *it, double want, int64_t g, const int *shards,
		      const int *cap)
{
	if (!shards)
		return 1;
	int whole;
	int64_t m = split_pairs(it, bp_ca_item_units(it), want, g, &whole);
	if (whole || !m)
		return 1;
	/* the split-off Item's head and tail, the remainder's non-empty halves */
	int after = 2 + (it->h1 - m > it->h0) + (it->t0 + m < it->t1);
	return shards[it->unit] - item_chunks(it) + after <= cap[it->unit];
}

/* V of moving `want` units of an Item (of `units` pairs: the callers know them) to a server
 * already holding the unit's prefix [0, have) (V_comm of Sec. 4.2 in the mode o->comm:
 * App. B, the code's, or exact). */
static double move_cost(const struct bp_ca_item *it, int64_t units, double want, int64_t g,
			int64_t have, const struct bp_ca_opts *o)
{
	int whole;
	int64_t m = split_pairs(it, units, want, g, &whole);
	switch (o->comm) {
	case BP_CA_COMM_CODE: /* the code's V: pairs counted as Q tokens, the whole unit's KV */
		return want / (double)(it->len + 1) * o->q_bytes +
		       (double)(it->len + 1) * o->kv_bytes;
	case BP_CA_COMM_APPB: {
		double lq = (double)(it->h1 - it->h0), lkv = (double)it->h1;
		double alpha = want / (double)units;
		if (lq <= 0) /* a tail-only Item: the shard formula on the tail */
			return bp_ca_appb_shard(alpha > 1 ? 1 : alpha, (double)(it->t1 - it->t0),
						(double)it->t1, o->q_bytes, o->kv_bytes);
		return bp_ca_appb_headtail(alpha > 1 ? 1 : alpha, lq, lkv,
					   (double)item_kv_end(it), o->q_bytes, o->kv_bytes);
	}
	default: {
		if (!whole && !m) /* no whole granule moves: never the best candidate */
			return INFINITY;
		int64_t q = whole ? (it->h1 - it->h0) + (it->t1 - it->t0) : 2 * m;
		int64_t end = whole ? item_kv_end(it) : it->t0 + m;
		int64_t kv = end > have ? end - have : 0;
		return (double)q * o->q_bytes + (double)kv * o->kv_bytes;
	}
	}
}

/* Moves up to `want` units of item i to server r; returns the units moved. */
static int64_t split_move(struct bp_ca_placement *pl, size_t i, double want, int r, int64_t g,
			  struct bp_error *err)
{
	struct bp_ca_item *it = &pl->items[i];
	int whole;
	int64_t m = split_pairs(it, bp_ca_item_units(it), want, g, &whole);
	if (whole) {
		it->server = r;
		return bp_ca_item_units(it);
	}
	if (!m)
		return 0;
	struct bp_ca_item nw = *it;
	nw.complete = 0;
	nw.h0 = it->h1 - m;
	nw.t1 = it->t0 + m;
	nw.server = r;
	it->complete = 0;
	it->h1 -= m;
	it->t0 += m;
	int64_t moved = bp_ca_item_units(&nw);
	if (push_item(pl, &nw, err) < 0)
		return -1;
	return moved;
}

struct recip {
	double sd;
	int s;
};

static int cmp_recip(const void *a, const void *b)
{
	const struct recip *x = a, *y = b;
	if (x->sd != y->sd)
		return (x->sd > y->sd) - (x->sd < y->sd);
	return (x->s > y->s) - (x->s < y->s);
}

/* A donor Item: its server, unit and pairs, and the (want, prefix held) it was last priced
 * at with that price (the same inputs give the same price). */
struct cand {
	size_t i, unit;
	int server;
	int64_t units;
	double want; /* -1: not priced */
	int64_t have;
	double prio;
};

#define NOPOS SIZE_MAX

/* A heap of donors (base/heap.h's, with positions; a donor not in it has position -1), each
 * at the key it was filed with (the donor's prio or want then): by_want 0 orders by (key,
 * list order), the scheduler's choice; 1 by the largest key first. */
struct cheap {
	struct bp_heap hp;
	double *key; /* [ndon] */
	int by_want;
};

/* The donors indexed (the default V of exact bytes, without App. A's bound), so a move
 * needs no scan of them all (issue 24: the scan was quadratic in the servers). A donor
 * whose want is the need (the need below its pairs and its server's surplus) has a new
 * price at every move, as in the scan: it joins b's list, priced at every pick. At a
 * recipient's first pick (its largest need) the list's donors the need no longer prices
 * are parked (ix_park) at their price without the need until it falls below their want
 * again: a later pick of the recipient prices those at the need (ix_pick_parked), and
 * the first pick of a later recipient whose need is below their want (recipients come in
 * falling deficits) returns them to the list. Every other live donor sits in the heaps prio and want, its price fixed until an
 * input changes: the need falling below its want (the top of `want`), its server's
 * surplus (the donor server of a move), its pairs (the moved Item) or the prefix the
 * recipient holds of its unit (per unit, when a recipient begins, ends or takes a piece).
 * The choice, the lowest (V/dF, list order) of them all, is the scan's. */
struct cand_index {
	struct cheap prio, want;
	size_t *srv_at, *srv_c;   /* [nservers + 2], [ndon]: donors per server */
	size_t *unit_at, *unit_c; /* [nunits + 2], [ndon]: donors per unit */
	size_t *b, *b_pos, nb;    /* [ndon] each: donors the need priced, their places */
	struct cheap pa, pu;      /* b's parked donors (ix_park) */
	size_t *stk;              /* [ndon]: ix_pick_parked's walk */
	int first;                /* the recipient's first pick is next */
	unsigned char *live;      /* [ndon] */
	int fresh;                /* no donor priced yet */
};

/* One scheduler call's state (bp_ca_schedule). */
struct sched {
	struct bp_ca_placement *pl;
	const struct bp_ca_opts *o;
	int nservers;
	int64_t g;           /* granularity in pairs per query token moved */
	double mean, thr;
	double *sd;          /* [nservers]: load minus the mean */
	struct recip *rc;    /* [nservers]: recipients by deficit */
	int nrec;
	size_t nunits;
	int64_t *have;       /* [nunits + 1], exact bytes only: the prefix the recipient holds */
	int *shards, *shard_cap; /* [nunits] each: App. A's chunks now and most allowed (NULL
				  * without a cap: never read then) */
	struct cand *don;    /* donors, list order */
	size_t ndon;
	size_t *srv_items, *srv_at, *held; /* Items per server as placed; units with have set */
	size_t nheld;
	struct cand_index *ix; /* NULL: the scan (pick_scan); else &ixs */
	struct cand_index ixs;
	struct bp_ca_work *w;
	struct bp_ca_result *res;
	struct bp_error *err;
};

static int prio_first(const void *keys, int a, int b)
{
	const double *k = keys;
	return k[a] != k[b] ? k[a] < k[b] : a < b;
}

static int want_first(const void *keys, int a, int b)
{
	const double *k = keys;
	return k[a] > k[b];
}

/* Files donor a at key k: inserts it, or puts it back in order after its key changed (each
 * order a constant at its call, so the sifts inline it); one filed at k already stays (a
 * donor is refiled at every input that may change its price, most often to the same). */
static void cheap_fix(struct cheap *c, size_t a, double k)
{
	int in = c->hp.pos[a] >= 0;
	if (in && c->key[a] == k)
		return;
	/* a donor refiled moves only one way, up where its key now comes first (its index,
	 * prio's tie-break, is the same), else down: bp_heap_fix's moves without the other
	 * sift's tests (heap maintenance is the index's largest cost); keys that do not
	 * compare (NaN, never seen) take bp_heap_fix */
	double old = in ? c->key[a] : 0;
	c->key[a] = k;
	size_t at = in ? (size_t)c->hp.pos[a] : 0;
	if (c->by_want) {
		if (!in)
			bp_heap_push(&c->hp, (int)a, want_first, c->key);
		else if (k > old)
			bp_heap_up(&c->hp, at, want_first, c->key);
		else if (k < old)
			bp_heap_down(&c->hp, at, want_first, c->key);
		else
			bp_heap_fix(&c->hp, (int)a, want_first, c->key);
	} else {
		if (!in)
			bp_heap_push(&c->hp, (int)a, prio_first, c->key);
		else if (k < old)
			bp_heap_up(&c->hp, at, prio_first, c->key);
		else if (k > old)
			bp_heap_down(&c->hp, at, prio_first, c->key);
		else
			bp_heap_fix(&c->hp, (int)a, prio_first, c->key);
	}
}

static void cheap_remove(struct cheap *c, size_t a)
{
	if (c->by_want)
		bp_heap_remove(&c->hp, (int)a, want_first, c->key);
	else
		bp_heap_remove(&c->hp, (int)a, prio_first, c->key);
}

static int cheap_has(const struct cheap *c, size_t a)
{
	return c->hp.pos[a] >= 0;
}

/* The donor at place i (0: the first) and the key it sits at. */
static size_t cheap_at(const struct cheap *c, size_t i)
{
	return (size_t)c->hp.h[i];
}

static double cheap_key_at(const struct cheap *c, size_t i)
{
	return c->key[c->hp.h[i]];
}

/* The want of a move from cd to a recipient needing `need`: at most the Item's pairs and
 * its server's surplus. */
static double cand_want(const struct sched *S, const struct cand *cd, double need)
{
	double want = need;
	if ((double)cd->units < want)
		want = (double)cd->units;
	if (S->sd[cd->server] < want)
		want = S->sd[cd->server];
	return want;
}

static void cand_price(const struct sched *S, struct cand *cd, double want, int64_t hv)
{
	cd->prio = move_cost(&S->pl->items[cd->i], cd->units, want, S->g, hv, S->o) / want;
	cd->want = want;
	cd->have = hv;
}

/* The cheapest donor by a scan of them all (the code's and App. B's V, and under App. A's
 * bound, whose check depends on the unit's chunks now): the lowest V/dF, the earliest in
 * list order on ties. A donor only loses load and a recipient never ends above the mean (a
 * move takes at most its deficit), so the donors only shrink while recipients are served:
 * the scan drops a donor once its server has no surplus or it has no pairs left. Returns
 * its index in don, ndon when none is left. */
static size_t pick_scan(struct sched *S, double need)
{
	int bounded = S->o->max_shards > 0;
	size_t best = NOPOS, keep = 0;
	for (size_t a = 0; a < S->ndon; a++) {
		if (S->sd[S->don[a].server] <= 0 || S->don[a].units <= 0)
			continue; /* no surplus now, nor later; nothing to move */
		if (keep != a)
			S->don[keep] = S->don[a];
		struct cand *cd = &S->don[keep++];
		double want = cand_want(S, cd, need);
		int64_t hv = S->have ? S->have[cd->unit] : 0;
		if (bounded || cd->want != want || cd->have != hv) {
			if (bounded && !split_fits(&S->pl->items[cd->i], want, S->g, S->shards,
						   S->shard_cap))
				continue;
			cand_price(S, cd, want, hv);
		}
		if (best == NOPOS || cd->prio < S->don[best].prio)
			best = keep - 1;
	}
	S->ndon = keep;
	return best == NOPOS ? S->ndon : best;
}

/* Whether donor cd's want is the need (need below its pairs and its server's surplus). */
static int wants_need(const struct sched *S, const struct cand *cd, double need)
{
	return need < (double)cd->units && need < S->sd[cd->server];
}

static void ix_b_add(struct cand_index *ix, size_t a)
{
	ix->b_pos[a] = ix->nb;
	ix->b[ix->nb++] = a;
}

static void ix_b_remove(struct cand_index *ix, size_t a)
{
	size_t at = ix->b_pos[a];
	ix->b_pos[a] = NOPOS;
	if (at != --ix->nb) {
		ix->b[at] = ix->b[ix->nb];
		ix->b_pos[ix->b[at]] = at;
	}
}

/* b's donors parked (not wanting the need at a recipient's first pick): their price at
 * their want without the need, min(pairs, surplus), ws, which holds while the need is at
 * least ws; keyed in pa by that price and in pu by ws. */
static void ix_park(struct sched *S, size_t a)
{
	struct cand_index *ix = S->ix;
	struct cand *cd = &S->don[a];
	double ws = cand_want(S, cd, INFINITY);
	int64_t hv = S->have[cd->unit];
	if (ix->b_pos[a] != NOPOS)
		ix_b_remove(ix, a);
	if (cd->want != ws || cd->have != hv)
		cand_price(S, cd, ws, hv);
	cheap_fix(&ix->pa, a, cd->prio);
	cheap_fix(&ix->pu, a, ws);
}

static void ix_unpark(struct sched *S, size_t a)
{
	cheap_remove(&S->ix->pa, a);
	cheap_remove(&S->ix->pu, a);
	ix_b_add(S->ix, a);
}

/* Files donor a for the need now: into b when its want is the need, else priced (where
 * an input changed) in both heaps; a member of b stays there. */
static void ix_reprice(struct sched *S, size_t a, double need)
{
	struct cand_index *ix = S->ix;
	struct cand *cd = &S->don[a];
	if (!ix->live[a] || ix->b_pos[a] != NOPOS)
		return;
	if (cheap_has(&ix->pa, a)) {
		ix_park(S, a);
		return;
	}
	if (wants_need(S, cd, need)) {
		cheap_remove(&ix->prio, a);
		cheap_remove(&ix->want, a);
		ix_b_add(ix, a);
		return;
	}
	double want = cand_want(S, cd, need);
	int64_t hv = S->have[cd->unit];
	if (cd->want != want || cd->have != hv || !cheap_has(&ix->prio, a)) {
		if (cd->want != want || cd->have != hv)
			cand_price(S, cd, want, hv);
		cheap_fix(&ix->prio, a, cd->prio);
		cheap_fix(&ix->want, a, cd->want);
	}
}

static void ix_drop(struct sched *S, size_t a)
{
	S->ix->live[a] = 0;
	cheap_remove(&S->ix->prio, a);
	cheap_remove(&S->ix->want, a);
	if (S->ix->b_pos[a] != NOPOS)
		ix_b_remove(S->ix, a);
	cheap_remove(&S->ix->pa, a);
	cheap_remove(&S->ix->pu, a);
}

static void ix_reprice_unit(struct sched *S, size_t u, double need)
{
	for (size_t k = S->ix->unit_at[u]; k < S->ix->unit_at[u + 1]; k++)
		ix_reprice(S, S->ix->unit_c[k], need);
}

/* A recipient begins: its own prefixes are held (have[] set). */
static void ix_begin(struct sched *S, double need)
{
	struct cand_index *ix = S->ix;
	ix->first = 1;
	if (ix->fresh) {
		ix->fresh = 0;
		for (size_t a = 0; a < S->ndon; a++)
			ix_reprice(S, a, need);
		return;
	}
	for (size_t k = 0; k < S->nheld; k++)
		ix_reprice_unit(S, S->held[k], need);
}

/* Whether (p, a) comes before the best so far (*best, ndon when none). */
static int ix_better(const struct sched *S, double p, size_t a, size_t best, double best_p)
{
	return best == S->ndon || p < best_p || (p == best_p && a < best);
}

/* A later pick of a recipient (the need fell below its first): the parked donors whose ws
 * is above the need are priced at the need here (pu's nodes above it), the others keep
 * their price (pa's nodes up to the best so far; a subtree above it cannot win). */
static void ix_pick_parked(struct sched *S, double need, size_t *best, double *best_p,
			   double *dyn_want)
{
	struct cand_index *ix = S->ix;
	size_t *stk = ix->stk, top = 0;
	if (ix->pu.hp.n)
		stk[top++] = 0;
	while (top) {
		size_t i = stk[--top];
		if (cheap_key_at(&ix->pu, i) <= need)
			continue;
		size_t a = cheap_at(&ix->pu, i);
		const struct cand *cd = &S->don[a];
		double want = cand_want(S, cd, need);
		double p = move_cost(&S->pl->items[cd->i], cd->units, want, S->g,
				     S->have[cd->unit], S->o) / want;
		if (ix_better(S, p, a, *best, *best_p)) {
			*best = a;
			*best_p = p;
			*dyn_want = want;
		}
		for (size_t c = 2 * i + 1; c <= 2 * i + 2 && c < ix->pu.hp.n; c++)
			stk[top++] = c;
	}
	if (ix->pa.hp.n)
		stk[top++] = 0;
	while (top) {
		size_t i = stk[--top];
		size_t a = cheap_at(&ix->pa, i);
		double k = cheap_key_at(&ix->pa, i);
		if (*best != S->ndon && k > *best_p)
			continue;
		if (S->don[a].want <= need && ix_better(S, k, a, *best, *best_p)) {
			*best = a;
			*best_p = k;
			*dyn_want = -1;
		}
		for (size_t c = 2 * i + 1; c <= 2 * i + 2 && c < ix->pa.hp.n; c++)
			stk[top++] = c;
	}
}

/* The cheapest donor (its index in don, ndon when none is left): the donors priced above
 * the need are filed again (their want falls to the need at most); b's list is priced
 * for the need (at a recipient's first pick those not wanting it are parked, and parked
 * ones whose ws passed the need come back first); the parked ones as ix_pick_parked
 * says, or at a first pick the top of pa; all compared with the top of `prio`. */
static size_t ix_pick(struct sched *S, double need)
{
	struct cand_index *ix = S->ix;
	int first = ix->first;
	ix->first = 0;
	while (ix->want.hp.n && cheap_key_at(&ix->want, 0) > need)
		ix_reprice(S, cheap_at(&ix->want, 0), need);
	while (first && ix->pu.hp.n && cheap_key_at(&ix->pu, 0) > need)
		ix_unpark(S, cheap_at(&ix->pu, 0));
	size_t best = ix->prio.hp.n ? cheap_at(&ix->prio, 0) : S->ndon;
	double best_p = best < S->ndon ? S->don[best].prio : 0, dyn_want = -1;
	for (size_t k = 0; k < ix->nb;) {
		size_t a = ix->b[k];
		struct cand *cd = &S->don[a];
		if (first && !wants_need(S, cd, need)) {
			ix_park(S, a); /* b[k] is another donor now */
			continue;
		}
		k++;
		double want = cand_want(S, cd, need);
		int64_t hv = S->have[cd->unit];
		if (cd->want != want || cd->have != hv)
			cand_price(S, cd, want, hv);
		if (ix_better(S, cd->prio, a, best, best_p)) {
			best = a;
			best_p = cd->prio;
		}
	}
	if (first && ix->pa.hp.n &&
	    ix_better(S, cheap_key_at(&ix->pa, 0), cheap_at(&ix->pa, 0), best, best_p))
		best = cheap_at(&ix->pa, 0);
	if (!first)
		ix_pick_parked(S, need, &best, &best_p, &dyn_want);
	if (dyn_want >= 0) { /* a parked donor priced at the need: serve_move reads its want */
		struct cand *cd = &S->don[best];
		cd->want = dyn_want;
		cd->have = S->have[cd->unit];
		cd->prio = best_p;
	}
	return best;
}

/* After donor a gave to a recipient (need now): the Item first (serve_move unpriced it,
 * its heap keys are stale), its server's donors (the surplus fell; all of them go when it
 * is gone) and its unit's donors (the prefix held grew). */
static void ix_after_move(struct sched *S, size_t a, int donor, double need)
{
	struct cand_index *ix = S->ix;
	struct cand *cd = &S->don[a];
	if (cd->units <= 0 || S->sd[cd->server] <= 0)
		ix_drop(S, a);
	else
		ix_reprice(S, a, need);
	for (size_t k = ix->srv_at[donor]; k < ix->srv_at[donor + 1]; k++) {
		size_t c = ix->srv_c[k];
		if (S->sd[donor] <= 0)
			ix_drop(S, c);
		else
			ix_reprice(S, c, need);
	}
	ix_reprice_unit(S, cd->unit, need);
}

/* Builds the index over S->don (all live, none priced) in S->ixs, its arrays in S->w
 * (every entry read is written here first, but for the counts, zeroed). */
static struct cand_index *ix_init(struct sched *S)
{
	size_t n = S->ndon;
	struct cand_index *ix = &S->ixs;
	*ix = (struct cand_index){0};
	/* the four heaps: items and positions (ints), keys; then b, b_pos and stk */
	int *hb = work_get(S->w, W_IX_HEAP, 8 * n + 1, sizeof(int), S->err);
	ix->prio.hp.h = hb;
	ix->prio.key = work_get(S->w, W_IX_KEY, 4 * n + 1, sizeof(double), S->err);
	ix->b = work_get(S->w, W_IX_B, 3 * n + 1, sizeof(size_t), S->err);
	ix->srv_at = work_get(S->w, W_IX_AT, (size_t)S->nservers + S->nunits + 2 * n + 4,
			      sizeof(size_t), S->err);
	ix->live = work_get(S->w, W_IX_LIVE, n + 1, 1, S->err);
	if (!hb || !ix->prio.key || !ix->b || !ix->srv_at || !ix->live)
		return NULL;
	struct cheap *hs[4] = {&ix->prio, &ix->want, &ix->pa, &ix->pu};
	for (int k = 0; k < 4; k++) {
		hs[k]->hp = (struct bp_heap){.h = hb + 2 * (size_t)k * n,
					     .pos = hb + (2 * (size_t)k + 1) * n, .cap = n};
		hs[k]->key = ix->prio.key + (size_t)k * n;
	}
	ix->pu.by_want = 1;
	ix->want.by_want = 1;
	ix->b_pos = ix->b + n;
	ix->stk = ix->b_pos + n;
	ix->srv_c = ix->srv_at + S->nservers + 2;
	ix->unit_at = ix->srv_c + n;
	ix->unit_c = ix->unit_at + S->nunits + 2;
	memset(ix->srv_at, 0, ((size_t)S->nservers + 2) * sizeof(size_t));
	memset(ix->unit_at, 0, (S->nunits + 2) * sizeof(size_t));
	ix->fresh = 1;
	for (size_t a = 0; a < n; a++) {
		ix->live[a] = 1;
		ix->prio.hp.pos[a] = ix->want.hp.pos[a] = -1;
		ix->pa.hp.pos[a] = ix->pu.hp.pos[a] = -1;
		ix->b_pos[a] = NOPOS;
		ix->srv_at[S->don[a].server + 2]++;
		ix->unit_at[S->don[a].unit + 2]++;
	}
	/* counting sorts, list order kept within each server and unit */
	bucket_starts(ix->srv_at, (size_t)S->nservers);
	bucket_starts(ix->unit_at, S->nunits);
	for (size_t a = 0; a < n; a++) {
		ix->srv_c[ix->srv_at[S->don[a].server + 1]++] = a;
		ix->unit_c[ix->unit_at[S->don[a].unit + 1]++] = a;
	}
	return ix;
}

/* have[] from the recipient's Items as placed (nothing leaves a recipient). */
static void hold_prefix(struct sched *S, const struct bp_ca_item *it)
{
	int64_t e = item_kv_end(it);
	if (e > S->have[it->unit]) {
		if (!S->have[it->unit])
			S->held[S->nheld++] = it->unit;
		S->have[it->unit] = e;
	}
}

/* Moves what donor don[a] offers (its want) to recipient r; the pairs moved (0: none) or
 * -1. */
static int64_t serve_move(struct sched *S, size_t a, int r, double *need)
{
	struct bp_ca_placement *pl = S->pl;
	struct cand *cd = &S->don[a];
	size_t best = cd->i;
	int donor = pl->items[best].server;
	size_t before = pl->nitems;
	int c0 = item_chunks(&pl->items[best]);
	int64_t moved = split_move(pl, best, cd->want, r, S->g, S->err);
	if (moved > 0 && pl->nitems > before && S->shards)
		S->shards[pl->items[best].unit] += item_chunks(&pl->items[best]) +
			item_chunks(&pl->items[pl->nitems - 1]) - c0;
	if (moved < 0)
		return -1;
	/* the Item changed (or left for r): price it afresh */
	cd->server = pl->items[best].server;
	cd->units = bp_ca_item_units(&pl->items[best]);
	cd->want = -1;
	if (!moved)
		return 0;
	if (S->have)
		hold_prefix(S, pl->items[best].server == r ? &pl->items[best]
							   : &pl->items[pl->nitems - 1]);
	S->sd[donor] -= (double)moved;
	S->sd[r] += (double)moved;
	*need -= (double)moved;
	S->res->moved_pairs += moved;
	S->res->moves++;
	return moved;
}

/* Recipient r takes the cheapest donor's offer while its deficit is above the tolerance. */
static int serve_recipient(struct sched *S, int r)
{
	double need = -S->sd[r];
	int rc = 0;
	if (S->have)
		for (size_t a = S->srv_at[r]; a < S->srv_at[r + 1]; a++)
			hold_prefix(S, &S->pl->items[S->srv_items[a]]);
	if (S->ix)
		ix_begin(S, need);
	while (need > S->thr) {
		size_t a = S->ix ? ix_pick(S, need) : pick_scan(S, need);
		if (a == S->ndon) /* no donor left */
			break;
		int donor = S->don[a].server;
		int64_t moved = serve_move(S, a, r, &need);
		if (moved < 0) {
			rc = -1;
			break;
		}
		if (S->ix)
			ix_after_move(S, a, donor, need);
		if (!moved) /* the best candidate moves no whole pair: stop this recipient */
			break;
	}
	for (size_t k = 0; k < S->nheld; k++)
		S->have[S->held[k]] = 0;
	for (size_t k = 0; S->ix && k < S->nheld; k++)
		ix_reprice_unit(S, S->held[k], need);
	S->nheld = 0;
	return rc;
}

/* The paper's two-sided rule (Sec. 4.2: stop when every server is within eps * mean), as
 * an option: while the most loaded server is above the band, it gives to the least loaded
 * one at most half their difference (so neither ends above the donor's old load), its
 * cheapest candidate first among those that move at least a whole granule. Each move
 * x < max - min lowers the sum of squared loads by 2x (max - min - x) > 0, so the loop ends;
 * the bound on rounds keeps it linear in the Items. One round: 1 moved, 0 done, -1 error. */
static int two_sided_round(struct sched *S)
{
	struct bp_ca_placement *pl = S->pl;
	double *sd = S->sd;
	int d = 0, r = 0;
	for (int s = 1; s < S->nservers; s++) {
		if (sd[s] > sd[d])
			d = s;
		if (sd[s] < sd[r])
			r = s;
	}
	if (sd[d] <= S->thr || sd[r] >= 0)
		return 0;
	double want = (sd[d] - sd[r]) / 2; /* both end at most at the donor's old load */
	if (S->have) {
		memset(S->have, 0, (S->nunits + 1) * sizeof(int64_t));
		for (size_t i = 0; i < pl->nitems; i++)
			if (pl->items[i].server == r) {
				int64_t e = item_kv_end(&pl->items[i]);
				if (e > S->have[pl->items[i].unit])
					S->have[pl->items[i].unit] = e;
			}
	}
	size_t best = pl->nitems;
	double best_prio = 0, best_want = 0;
	for (size_t i = 0; i < pl->nitems; i++) {
		const struct bp_ca_item *it = &pl->items[i];
		int64_t units = bp_ca_item_units(it);
		if (it->server != d || units <= 0)
			continue;
		double w = (double)units < want ? (double)units : want;
		int whole;
		if (!whole_or_granule(it, w, S->g, &whole) || /* moves nothing: skip it */
		    !split_fits(it, w, S->g, S->shards, S->shard_cap))
			continue;
		double prio = move_cost(it, units, w, S->g, S->have ? S->have[it->unit] : 0, S->o) /
			      w;
		if (best == pl->nitems || prio < best_prio) {
			best = i;
			best_prio = prio;
			best_want = w;
		}
	}
	if (best == pl->nitems)
		return 0;
	size_t before = pl->nitems;
	int c0 = item_chunks(&pl->items[best]);
	int64_t moved = split_move(pl, best, best_want, r, S->g, S->err);
	if (moved <= 0)
		return moved < 0 ? -1 : 0;
	if (pl->nitems > before && S->shards)
		S->shards[pl->items[best].unit] += item_chunks(&pl->items[best]) +
			item_chunks(&pl->items[pl->nitems - 1]) - c0;
	sd[d] -= (double)moved;
	sd[r] += (double)moved;
	S->res->moved_pairs += moved;
	S->res->moves++;
	return 1;
}

/* The call's state, its arrays in w (what is summed into zeroed, the rest written before it
 * is read), in two passes over the Items: the loads (sd, mean, max_before) and Items per
 * server first, then (the surpluses known) App. A's chunks, the donors (Items on surplus
 * servers with pairs, list order; split-off Items land on recipients and never join) and
 * each server's Items as placed; then the caps, the recipients and the index. */
static int sched_init(struct sched *S, struct bp_ca_work *w, struct bp_ca_placement *pl,
		      int nservers, const struct bp_ca_opts *o, struct bp_ca_result *res,
		      struct bp_error *err)
{
	*S = (struct sched){.pl = pl, .o = o, .nservers = nservers, .res = res, .err = err,
			    .w = w};
	S->g = o->block / 2 > 1 ? o->block / 2 : 1;
	S->sd = work_get(w, W_SD, (size_t)nservers, sizeof(double), err);
	S->rc = work_get(w, W_RC, (size_t)nservers, sizeof(*S->rc), err);
	S->don = work_get(w, W_DON, pl->nitems + 1, sizeof(*S->don), err);
	S->srv_items = work_get(w, W_SRV, 2 * pl->nitems + 2 * (size_t)nservers + 3,
				sizeof(size_t), err);
	int64_t *iu = work_get(w, W_UNITS, pl->nitems, sizeof(int64_t), err); /* Items' pairs */
	if (!S->sd || !S->rc || !S->don || !S->srv_items || !iu)
		return -1;
	S->srv_at = S->srv_items + pl->nitems + 1;
	S->held = S->srv_at + nservers + 2;
	memset(S->sd, 0, (size_t)nservers * sizeof(double));
	memset(S->srv_at, 0, ((size_t)nservers + 2) * sizeof(size_t));
	/* a server's Items come in runs (a rank's placement): its load and count stay in
	 * registers along a run, the load summed in the same order as in place */
	double total = 0, run_sd = 0;
	size_t run_n = 0;
	int run_s = -1;
	for (size_t i = 0; i < pl->nitems; i++) {
		const struct bp_ca_item *it = &pl->items[i];
		if (it->server < 0 || it->server >= nservers)
			return bp_errorf(err, "item %zu is on server %d of %d", i, it->server,
					 nservers);
		if (it->server != run_s) {
			if (run_s >= 0) {
				S->sd[run_s] = run_sd;
				S->srv_at[run_s + 2] += run_n;
			}
			run_s = it->server;
			run_sd = S->sd[run_s];
			run_n = 0;
		}
		iu[i] = bp_ca_item_units(it);
		double u = (double)iu[i];
		run_sd += u;
		run_n++;
		total += u;
		if (it->unit + 1 > S->nunits)
			S->nunits = it->unit + 1;
	}
	if (run_s >= 0) {
		S->sd[run_s] = run_sd;
		S->srv_at[run_s + 2] += run_n;
	}
	if (o->comm == BP_CA_COMM_EXACT)
		S->have = work_get(w, W_HAVE, S->nunits + 1, sizeof(int64_t), err);
	if (o->max_shards > 0) {
		S->shards = work_get(w, W_SHARDS, 2 * S->nunits + 2, sizeof(int), err);
		if (!S->shards)
			return -1;
		S->shard_cap = S->shards + S->nunits + 1;
		memset(S->shards, 0, (S->nunits + 1) * sizeof(int));
	}
	if (o->comm == BP_CA_COMM_EXACT && !S->have)
		return -1;
	if (S->have)
		memset(S->have, 0, (S->nunits + 1) * sizeof(int64_t));
	S->mean = total / nservers;
	res->mean = S->mean;
	for (int s = 0; s < nservers; s++) {
		if (S->sd[s] > res->max_before)
			res->max_before = S->sd[s];
		S->sd[s] -= S->mean;
	}
	S->thr = S->mean * o->eps;
	bucket_starts(S->srv_at, (size_t)nservers);
	run_s = 0; /* the next place of run_s's Items, in a register along a run */
	size_t run_p = S->srv_at[1];
	for (size_t i = 0; i < pl->nitems; i++) {
		const struct bp_ca_item *it = &pl->items[i];
		int64_t units = iu[i];
		if (S->shards)
			S->shards[it->unit] += item_chunks(it);
		if (S->sd[it->server] > 0 && units > 0)
			S->don[S->ndon++] = (struct cand){i, it->unit, it->server, units, -1, 0, 0};
		if (it->server != run_s) {
			S->srv_at[run_s + 1] = run_p;
			run_s = it->server;
			run_p = S->srv_at[run_s + 1];
		}
		S->srv_items[run_p++] = i;
	}
	S->srv_at[run_s + 1] = run_p;
	for (size_t u = 0; S->shards && u < S->nunits; u++)
		S->shard_cap[u] = S->shards[u] > o->max_shards ? S->shards[u] : o->max_shards;
	/* recipients by (deficit, server): an insertion sort, there being few */
	S->nrec = 0;
	for (int s = 0; s < nservers; s++) {
		if (!(S->sd[s] < 0))
			continue;
		struct recip x = {S->sd[s], s};
		int k = S->nrec++;
		for (; k > 0 && cmp_recip(&S->rc[k - 1], &x) > 0; k--)
			S->rc[k] = S->rc[k - 1];
		S->rc[k] = x;
	}
	/* the index for the default V (exact bytes) without App. A's bound */
	if (o->comm == BP_CA_COMM_EXACT && o->max_shards <= 0 && S->ndon &&
	    S->ndon < INT32_MAX) { /* base/heap.h holds int items */
		S->ix = ix_init(S);
		if (!S->ix)
			return -1;
	}
	return 0;
}

int bp_ca_schedule(struct bp_ca_placement *pl, int nservers, const struct bp_ca_opts *o,
		   struct bp_ca_result *res, double *load_out, struct bp_error *err)
{
	struct bp_ca_work w = {0};
	int rc = bp_ca_schedule_in(&w, pl, nservers, o, res, load_out, err);
	bp_ca_work_release(&w);
	return rc;
}

/* Sec. 4.2 / App. E, restated from the public code's Planner.plan_items. */
int bp_ca_schedule_in(struct bp_ca_work *w, struct bp_ca_placement *pl, int nservers,
		      const struct bp_ca_opts *o, struct bp_ca_result *res, double *load_out,
		      struct bp_error *err)
{
	memset(res, 0, sizeof(*res));
	if (nservers < 1)
		return bp_errorf(err, "%d attention servers", nservers);
	if (!(o->eps >= 0 && o->eps < 1))
		return bp_errorf(err, "tolerance %g is outside [0, 1)", o->eps);
	if (o->block < 1)
		return bp_errorf(err, "granularity %d tokens", o->block);
	struct sched S;
	if (sched_init(&S, w, pl, nservers, o, res, err) < 0)
		return -1;
	for (int k = 0; k < S.nrec; k++)
		if (serve_recipient(&S, S.rc[k].s) < 0)
			return -1;
	for (size_t round = 0; o->two_sided && round < 4 * pl->nitems + 8 * (size_t)nservers;
	     round++) {
		int moved = two_sided_round(&S);
		if (moved < 0)
			return -1;
		if (!moved)
			break;
	}
	for (int s = 0; s < nservers; s++)
		if (S.sd[s] + S.mean > res->max_after)
			res->max_after = S.sd[s] + S.mean;
	if (load_out) {
		memset(load_out, 0, (size_t)nservers * sizeof(double));
		for (size_t i = 0; i < pl->nitems; i++)
			load_out[pl->items[i].server] += (double)bp_ca_item_units(&pl->items[i]);
	}
	return 0;
}

static int cmp_chunk(const void *a, const void *b)
{
	const struct bp_ca_chunk *x = a, *y = b;
	if (x->doc != y->doc)
		return (x->doc > y->doc) - (x->doc < y->doc);
	return (x->q0 > y->q0) - (x->q0 < y->q0);
}

int bp_ca_chunks(const struct bp_ca_placement *pl, struct bp_ca_chunk **out, size_t *n,
		 struct bp_error *err)
{
	*out = bp_calloc(2 * pl->nitems + 1, sizeof(**out), err);
	*n = 0;
	if (!*out)
		return -1;
	for (size_t i = 0; i < pl->nitems; i++) {
		const struct bp_ca_item *it = &pl->items[i];
		struct bp_ca_chunk c = {it->doc, 0, 0, it->base, it->server, it->src};
		if (it->complete) {
			c.q0 = it->base;
			c.q1 = it->base + it->len;
			(*out)[(*n)++] = c;
			continue;
		}
		if (it->h1 > it->h0) {
			c.q0 = it->base + it->h0;
			c.q1 = it->base + it->h1;
			(*out)[(*n)++] = c;
		}
		if (it->t1 > it->t0) {
			c.q0 = it->base + it->t0;
			c.q1 = it->base + it->t1;
			(*out)[(*n)++] = c;
		}
	}
	qsort(*out, *n, sizeof(**out), cmp_chunk);
	return 0;
}

static int cmp_piece(const void *a, const void *b)
{
	const struct bp_ca_piece *x = a, *y = b;
	if (x->doc != y->doc)
		return (x->doc > y->doc) - (x->doc < y->doc);
	return (x->offset > y->offset) - (x->offset < y->offset);
}

struct need {
	int64_t doc, base, end;
	int server;
};

static int cmp_need(const void *a, const void *b)
{
	const struct need *x = a, *y = b;
	if (x->doc != y->doc)
		return (x->doc > y->doc) - (x->doc < y->doc);
	if (x->base != y->base)
		return (x->base > y->base) - (x->base < y->base);
	return (x->server > y->server) - (x->server < y->server);
}

/* The bytes as the public code moves them: Q once per chunk, KV once per (piece, server)
 * for the part of the piece inside the longest prefix the server needs. */
double bp_ca_bytes(const struct bp_ca_placement *pl, const struct bp_ca_chunk *ch, size_t n,
		   int nranks, double q_bytes, double kv_bytes, double *send, double *recv,
		   struct bp_error *err)
{
	struct bp_ca_piece *pc = bp_calloc(pl->npieces + 1, sizeof(*pc), err);
	struct need *nd = bp_calloc(n + 1, sizeof(*nd), err);
	double ret = -1;
	if (!pc || !nd)
		goto out;
	memset(send, 0, (size_t)nranks * sizeof(double));
	memset(recv, 0, (size_t)nranks * sizeof(double));
	for (size_t i = 0; i < n; i++) {
		if (ch[i].server < 0 || ch[i].server >= nranks || ch[i].src < 0 ||
		    ch[i].src >= nranks) {
			bp_errorf(err, "chunk %zu names server %d from rank %d of %d", i,
				  ch[i].server, ch[i].src, nranks);
			goto out;
		}
		if (ch[i].src != ch[i].server) {
			double b = (double)(ch[i].q1 - ch[i].q0) * q_bytes;
			send[ch[i].src] += b;
			recv[ch[i].server] += b;
		}
		nd[i] = (struct need){ch[i].doc, ch[i].kv0, ch[i].q1, ch[i].server};
	}
	memcpy(pc, pl->pieces, pl->npieces * sizeof(*pc));
	qsort(pc, pl->npieces, sizeof(*pc), cmp_piece);
	qsort(nd, n, sizeof(*nd), cmp_need);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		int64_t end = nd[i].end;
		while (j < n && !cmp_need(&nd[i], &nd[j])) {
			if (nd[j].end > end)
				end = nd[j].end;
			j++;
		}
		/* the pieces of the unit that lie inside [base, end) */
		size_t lo = 0, hi = pl->npieces;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (pc[mid].doc < nd[i].doc ||
			    (pc[mid].doc == nd[i].doc && pc[mid].offset < nd[i].base))
				lo = mid + 1;
			else
				hi = mid;
		}
		for (size_t k = lo; k < pl->npieces && pc[k].doc == nd[i].doc &&
				    pc[k].offset < end; k++) {
			if (pc[k].rank == nd[i].server)
				continue;
			int64_t e = pc[k].offset + pc[k].len < end ? pc[k].offset + pc[k].len : end;
			double b = (double)(e - pc[k].offset) * kv_bytes;
			send[pc[k].rank] += b;
			recv[nd[i].server] += b;
		}
		i = j;
	}
	ret = 0;
	for (int r = 0; r < nranks; r++)
		if (send[r] + recv[r] > ret)
			ret = send[r] + recv[r];
out:
	free(pc);
	free(nd);
	return ret;
}

/* Tokens of an Item's query ranges inside [0, end) (unit-relative). */
static int64_t item_tokens_before(const struct bp_ca_item *it, int64_t end)
{
	if (it->complete)
		return end < it->len ? end : it->len;
	int64_t n = 0;
	if (it->h1 > it->h0 && end > it->h0)
		n += (end < it->h1 ? end : it->h1) - it->h0;
	if (it->t1 > it->t0 && end > it->t0)
		n += (end < it->t1 ? end : it->t1) - it->t0;
	return n;
}

struct unit_need {
	int server;
	int64_t end;
};

/* Whether unit a's document comes before unit b's (then the lower unit first). */
static int unit_before(const int64_t *udoc, size_t a, size_t b)
{
	return udoc[a] != udoc[b] ? udoc[a] < udoc[b] : a < b;
}

/* Sorts units ord[0..n) by (document, unit): a bottom-up merge of the ascending runs it
 * has (a distca call's units are one run per stage, each stage's micro-batch holding its
 * documents in draw order), so a few linear passes; tmp has room for n. Returns the array
 * holding the result (ord or tmp). */
static size_t *sort_units(size_t *ord, size_t *tmp, size_t n, const int64_t *udoc)
{
	for (;;) {
		size_t runs = 0;
		for (size_t i = 0; i < n; runs++) {
			size_t m = i + 1; /* runs [i, m) and [m, e) */
			while (m < n && !unit_before(udoc, ord[m], ord[m - 1]))
				m++;
			size_t e = m < n ? m + 1 : m;
			while (e < n && !unit_before(udoc, ord[e], ord[e - 1]))
				e++;
			size_t x = i, y = m, k = i;
			while (x < m && y < e)
				tmp[k++] = unit_before(udoc, ord[y], ord[x]) ? ord[y++] : ord[x++];
			while (x < m)
				tmp[k++] = ord[x++];
			while (y < e)
				tmp[k++] = ord[y++];
			i = e;
		}
		size_t *t = ord;
		ord = tmp;
		tmp = t;
		if (runs <= 1)
			return ord;
	}
}

/* Whether chunk a (made a-th: Item, then head before tail) comes before chunk b in a
 * server's order, (doc, q0), ties in the order made. */
static int chunk_before(const struct bp_ca_chunk *a, size_t ga, const struct bp_ca_chunk *b,
			size_t gb)
{
	if (a->doc != b->doc)
		return a->doc < b->doc;
	if (a->q0 != b->q0)
		return a->q0 < b->q0;
	return ga < gb;
}

/* bp_ca_emit_in's counting sort of chunks by server: at[s + 1] the next place of server
 * s's chunks, but for the server s of the last placed, whose next place p stays in a
 * register (a server's chunks come in runs); unsorted[s] set where one came before the
 * chunk ahead of it (start[s]: s's first place). */
struct place_run {
	struct bp_ca_chunk *ch;
	size_t *gen, *at, *start, *unsorted;
	int s;
	size_t p;
};

static inline void place_chunk(struct place_run *pr, struct bp_ca_chunk c, size_t g)
{
	if (c.server != pr->s) {
		pr->at[pr->s + 1] = pr->p;
		pr->s = c.server;
		pr->p = pr->at[pr->s + 1];
	}
	size_t p = pr->p++;
	pr->ch[p] = c;
	pr->gen[p] = g;
	if (p > pr->start[pr->s] && chunk_before(&c, g, &pr->ch[p - 1], pr->gen[p - 1]))
		pr->unsorted[pr->s] = 1;
}

double bp_ca_emit(const struct bp_ca_placement *pl, int nservers, double q_bytes,
		  double kv_bytes, struct bp_ca_chunk **out, size_t *n, double *send,
		  double *recv, struct bp_error *err)
{
	struct bp_ca_work w = {0};
	size_t cap = 0;
	*out = NULL;
	double ret = bp_ca_emit_in(&w, pl, nservers, q_bytes, kv_bytes, out, &cap, n, send,
				   recv, err);
	bp_ca_work_release(&w);
	if (ret < 0) {
		free(*out);
		*out = NULL;
	}
	return ret;
}

/* bp_ca_chunks and bp_ca_bytes in one pass for the method (methods/distca.c), without
 * their sorts: chunks come out ordered by (server, doc, q0), the order of a tick's task
 * list, with no comparison sort of the chunks (a server's were sorted on their own, 10% of
 * the method's time at 256 GPUs): the units sorted by document (sort_units, a merge of
 * the runs they come in), each unit's Items in list order, placed by a counting sort over
 * servers, give each server its chunks by document; an insertion sort then orders each
 * document's few chunks on a server by q0 (ties, never seen, as the stable sort of the
 * chunks in the order made would keep them), on the servers where a chunk placed came
 * before the one ahead of it (one comparison per chunk, place_chunk). The bytes
 * follow bp_ca_bytes's model from the Items alone, since a unit's Items partition its tokens
 * among the linear ranks exactly as its placement pieces do (a split keeps the Item's src):
 * per unit, each server needing it gets from every other rank that rank's tokens inside the
 * longest prefix the server needs. Byte counts are whole multiples of q_bytes and kv_bytes,
 * so the sums are exact in any order and equal bp_ca_bytes's (tests/unit/test_distca.c
 * checks both). Scratch from the scheduler's buffers of w. */
double bp_ca_emit_in(struct bp_ca_work *w, const struct bp_ca_placement *pl, int nservers,
		     double q_bytes, double kv_bytes, struct bp_ca_chunk **out, size_t *cap,
		     size_t *n, double *send, double *recv, struct bp_error *err)
{
	const size_t ni = pl->nitems;
	size_t nunits = 0;
	*n = 0;
	for (size_t i = 0; i < ni; i++) {
		const struct bp_ca_item *it = &pl->items[i];
		if (it->server < 0 || it->server >= nservers || it->src < 0 ||
		    it->src >= nservers)
			return bp_errorf(err, "item %zu names server %d from rank %d of %d", i,
					 it->server, it->src, nservers);
		if (it->unit + 1 > nunits)
			nunits = it->unit + 1;
	}
	size_t ns2 = (size_t)nservers + 2;
	size_t *at = work_get(w, W_IX_AT, ns2 + nunits + 2 + ni + 2 * nunits + 2 * ns2,
			      sizeof(size_t), err);
	int64_t *udoc = work_get(w, W_HAVE, nunits, sizeof(int64_t), err);
	struct unit_need *un = work_get(w, W_DON, ni, sizeof(*un), err);
	size_t *gen = work_get(w, W_IX_B, 2 * ni, sizeof(size_t), err);
	if (!at || !udoc || !un || !gen)
		return -1;
	if (2 * ni + 1 > *cap) { /* room for two chunks an Item */
		size_t nc = 2 * ni + 1 > 2 * *cap ? 2 * ni + 1 : 2 * *cap;
		struct bp_ca_chunk *na = bp_realloc_array(*out, nc, sizeof(*na), err);
		if (!na)
			return -1;
		*out = na;
		*cap = nc;
	}
	struct bp_ca_chunk *ch = *out;
	size_t *srv_at = at, *u_at = at + ns2, *u_items = u_at + nunits + 2;
	size_t *ord = u_items + ni, *ord_tmp = ord + nunits;
	struct place_run pr = {ch, gen, srv_at, ord_tmp + nunits, ord_tmp + nunits + ns2, 0, 0};
	memset(at, 0, (ns2 + nunits + 2) * sizeof(size_t));
	memset(pr.unsorted, 0, (size_t)nservers * sizeof(size_t));
	memset(send, 0, (size_t)nservers * sizeof(double));
	memset(recv, 0, (size_t)nservers * sizeof(double));
	/* Q bytes, chunks per server (a server's Items come in runs: counted in a register
	 * along one), Items per unit */
	size_t nc = 0, run_nc = 0;
	int run_s = 0;
	for (size_t i = 0; i < ni; i++) {
		const struct bp_ca_item *it = &pl->items[i];
		int64_t r[2][2] = {{it->h0, it->h1}, {it->t0, it->t1}};
		if (it->complete) {
			r[0][0] = 0;
			r[0][1] = it->len;
			r[1][0] = r[1][1] = 0;
		}
		if (it->server != run_s) {
			srv_at[run_s + 2] += nc - run_nc;
			run_s = it->server;
			run_nc = nc;
		}
		for (int h = 0; h < 2; h++) {
			if (r[h][1] <= r[h][0])
				continue;
			nc++;
			if (it->src != it->server) {
				double b = (double)(r[h][1] - r[h][0]) * q_bytes;
				send[it->src] += b;
				recv[it->server] += b;
			}
		}
		u_at[it->unit + 2]++;
		udoc[it->unit] = it->doc;
	}
	srv_at[run_s + 2] += nc - run_nc;
	bucket_starts(srv_at, (size_t)nservers);
	size_t nord = 0;
	for (size_t u = 0; u < nunits; u++)
		if (u_at[u + 2])
			ord[nord++] = u;
	bucket_starts(u_at, nunits);
	for (size_t i = 0; i < ni; i++) /* Items grouped by unit, list order kept */
		u_items[u_at[pl->items[i].unit + 1]++] = i;
	/* per unit by document: its chunks, placed by server (then unit by document, then Item
	 * in list order), and its KV: the longest prefix each server needs, from every other
	 * rank its tokens inside */
	ord = sort_units(ord, ord_tmp, nord, udoc);
	memcpy(pr.start, srv_at + 1, (size_t)nservers * sizeof(size_t));
	pr.p = srv_at[1];
	for (size_t k = 0; k < nord; k++) {
		const size_t a0 = u_at[ord[k]], a1 = u_at[ord[k] + 1];
		if (a1 - a0 == 1 && pl->items[u_items[a0]].complete) {
			/* a unit in one Item (most): one chunk, and KV only where it moved, all of
			 * its rank's tokens (the general case below, in short) */
			const size_t i = u_items[a0];
			const struct bp_ca_item *it = &pl->items[i];
			if (it->len <= 0)
				continue;
			struct bp_ca_chunk c = {it->doc, it->base, it->base + it->len, it->base,
						it->server, it->src};
			place_chunk(&pr, c, 2 * i);
			int64_t t = it->src != it->server ? item_tokens_before(it, item_kv_end(it))
							  : 0;
			if (t > 0) {
				double b = (double)t * kv_bytes;
				send[it->src] += b;
				recv[it->server] += b;
			}
			continue;
		}
		size_t nn = 0;
		for (size_t a = a0; a < a1; a++) {
			const size_t i = u_items[a];
			const struct bp_ca_item *it = &pl->items[i];
			struct bp_ca_chunk c = {it->doc, 0, 0, it->base, it->server, it->src};
			int64_t r[2][2] = {{it->h0, it->h1}, {it->t0, it->t1}};
			if (it->complete) {
				r[0][0] = 0;
				r[0][1] = it->len;
				r[1][0] = r[1][1] = 0;
			}
			int any = 0;
			for (int h = 0; h < 2; h++) {
				if (r[h][1] <= r[h][0])
					continue;
				c.q0 = it->base + r[h][0];
				c.q1 = it->base + r[h][1];
				place_chunk(&pr, c, 2 * i + (size_t)h);
				any = 1;
			}
			if (!any)
				continue;
			int64_t e = item_kv_end(it);
			size_t q = 0;
			while (q < nn && un[q].server != it->server)
				q++;
			if (q == nn)
				un[nn++] = (struct unit_need){it->server, e};
			else if (e > un[q].end)
				un[q].end = e;
		}
		for (size_t q = 0; q < nn; q++)
			for (size_t a = a0; a < a1; a++) {
				const struct bp_ca_item *it = &pl->items[u_items[a]];
				if (it->src == un[q].server)
					continue;
				int64_t t = item_tokens_before(it, un[q].end);
				if (t > 0) {
					double b = (double)t * kv_bytes;
					send[it->src] += b;
					recv[un[q].server] += b;
				}
			}
	}
	srv_at[pr.s + 1] = pr.p;
	/* each server's chunks by (doc, q0): out of order only within a document, and only
	 * where place_chunk saw it */
	for (int s = 0; s < nservers; s++)
		for (size_t x = srv_at[s] + 1; pr.unsorted[s] && x < srv_at[s + 1]; x++) {
			if (!chunk_before(&ch[x], gen[x], &ch[x - 1], gen[x - 1]))
				continue;
			struct bp_ca_chunk c = ch[x];
			size_t g = gen[x], y = x;
			for (; y > srv_at[s] && chunk_before(&c, g, &ch[y - 1], gen[y - 1]); y--) {
				ch[y] = ch[y - 1];
				gen[y] = gen[y - 1];
			}
			ch[y] = c;
			gen[y] = g;
		}
	*n = nc;
	double ret = 0;
	for (int s = 0; s < nservers; s++)
		if (send[s] + recv[s] > ret)
			ret = send[s] + recv[s];
	return ret;
}

/* App. B: Comm(n_q) = size_q (n_q (1 + beta/2) + alpha beta X / (2 n_q))
 * is convex; the constraints n_kv >= n_q + L_kv - L_q and n_kv <= L_kv bound n_q to
 * [L_kv - sqrt(L_kv^2 - alpha X), (L_q - L_kv) + sqrt((L_q - L_kv)^2 + alpha X)] (the
 * paper prints the upper root without L_q - L_kv in front, a typo), so the optimum is the
 * unconstrained root clamped there. */
double bp_ca_appb_shard(double alpha, double lq, double lkv, double size_q, double size_kv)
{
	if (alpha <= 0 || lq <= 0)
		return 0;
	double beta = size_kv / size_q, X = lq * (2 * lkv - lq), d = lq - lkv;
	double nq = sqrt(alpha * beta * X / (beta + 2));
	double disc = lkv * lkv - alpha * X;
	double lo = lkv - sqrt(disc > 0 ? disc : 0);
	double hi = d + sqrt(d * d + alpha * X);
	if (nq < lo)
		nq = lo;
	if (nq > hi)
		nq = hi;
	double nkv = (alpha * X / nq + nq) / 2;
	return nq * size_q + nkv * size_kv;
}

double bp_ca_appb_headtail(double alpha, double lq, double lkv, double ldoc, double size_q,
			   double size_kv)
{
	if (alpha <= 0 || lq <= 0)
		return 0;
	double beta = size_kv / size_q, X = lq * (2 * lkv - lq);
	double disc = lkv * lkv - alpha * (2 * lkv - lq) * lq;
	double nq = lkv - sqrt(disc > 0 ? disc : 0);
	if (nq <= 0)
		return ldoc * size_kv;
	return ldoc * size_kv + 0.5 * size_q * (nq * (2 + beta) - alpha * beta * X / nq);
}

/* App. A: Q traffic l h_q, KV (s + 1) l h_kv / 2 under t l seconds of token-wise compute. */
double bp_ca_max_shards(double t_per_token, double bw, double h_q, double h_kv)
{
	return 2 * (t_per_token * bw - h_q) / h_kv - 1;
}

void bp_ca_token_bytes(const struct bp_model *md, int tp, double *q_bytes, double *kv_bytes)
{
	const int64_t e = 2, hd = md->hidden / md->heads;
	int64_t q = e * (md->heads / tp) * hd;
	*q_bytes = (double)((q + 15) / 16 * 16);
	*kv_bytes = (double)(2 * e * (md->kv_heads / tp) * hd);
}

void bp_ca_token_bytes_bwd(const struct bp_model *md, int tp, double *q_bytes,
			   double *kv_bytes)
{
	const int64_t e = 2, hd = md->hidden / md->heads, hq = md->heads / tp;
	*q_bytes = (double)((3 * e * hq * hd + 4 * hq + 15) / 16 * 16);
	*kv_bytes = (double)(2 * e * (md->kv_heads / tp) * hd);
}

void bp_ca_kept_token_bytes(const struct bp_model *md, int tp, double *q_bytes,
			    double *kv_bytes)
{
	const int64_t e = 2, hd = md->hidden / md->heads, hq = md->heads / tp;
	int64_t q = e * hq * hd;
	*q_bytes = (double)((q + 15) / 16 * 16 + q + 4 * hq);
	*kv_bytes = (double)(2 * e * (md->kv_heads / tp) * hd);
}

void bp_ca_kept_bytes(const struct bp_ca_task *ca, size_t n, double q_bytes, double kv_bytes,
		      double *kept)
{
	for (size_t a = 0; a < n;) {
		int64_t kv_end = ca[a].kv0;
		size_t b = a;
		while (b < n && ca[b].tick == ca[a].tick && ca[b].server == ca[a].server &&
		       ca[b].doc == ca[a].doc && ca[b].kv0 == ca[a].kv0) {
			kept[b] = (double)(ca[b].q1 - ca[b].q0) * q_bytes;
			if (ca[b].kv1 > kv_end)
				kv_end = ca[b].kv1;
			b++;
		}
		kept[a] += (double)(kv_end - ca[a].kv0) * kv_bytes;
		a = b;
	}
}

void bp_ca_record_release(struct bp_ca_record *r)
{
	double **a[] = {&r->ping_spans, &r->tick, &r->nano, &r->eps, &r->mean, &r->max_before,
			&r->max_after, &r->moved, &r->bytes};
	for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++) {
		free(*a[i]);
		*a[i] = NULL;
	}
	r->nmbs = r->ncalls = 0;
}

size_t bp_ticks_count(int pp, size_t m)
{
	return m ? 2 * (m + (size_t)pp - 1) : 0;
}

/* Fig. 8's order: F_0 .. F_{pp-2}, then (F_{pp-1+i}, B_i) for i < m, then B_m ..
 * B_{m+pp-2}. */
void bp_tick_phase(int pp, size_t m, size_t tick, int *bwd, size_t *phase_tick)
{
	size_t warm = (size_t)pp - 1;
	if (tick < warm) {
		*bwd = 0;
		*phase_tick = tick;
	} else if (tick < warm + 2 * m) {
		size_t i = (tick - warm) / 2;
		*bwd = (int)((tick - warm) % 2);
		*phase_tick = *bwd ? i : warm + i;
	} else {
		*bwd = 1;
		*phase_tick = m + (tick - warm - 2 * m);
	}
}

int64_t bp_tick_op(int pp, size_t m, size_t tick, int s, int *bwd, size_t *phase_tick)
{
	bp_tick_phase(pp, m, tick, bwd, phase_tick);
	/* forward tick t: micro-batch t - s; backward tick j: j - (pp - 1) + s */
	int64_t mb = *bwd ? (int64_t)*phase_tick - (pp - 1) + s : (int64_t)*phase_tick - s;
	return mb >= 0 && mb < (int64_t)m ? mb : -1;
}

size_t bp_tick_bwd_position(int pp, size_t m, size_t mb, int s)
{
	size_t j = mb + (size_t)(pp - 1 - s), warm = (size_t)pp - 1;
	return j < m ? warm + 2 * j + 1 : warm + 2 * m + (j - m);
}

int bp_ca_task_place(int pp, size_t m, int64_t tick, size_t mb, int own_bwd, int *stage,
		     size_t *pf, size_t *pb)
{
	const int64_t F = (int64_t)m + pp - 1, warm = pp - 1;
	*pf = *pb = SIZE_MAX;
	if (tick < 0 || tick >= 2 * F || mb >= m)
		return -1;
	int64_t s;
	if (tick < F) {
		s = tick - (int64_t)mb;
		if (s < 0 || s >= pp)
			return -1;
		*pf = (size_t)(tick < warm ? tick : warm + 2 * (tick - warm));
		if (!own_bwd)
			*pb = bp_tick_bwd_position(pp, m, mb, (int)s);
	} else {
		if (!own_bwd)
			return -1;
		int64_t j = tick - F;
		s = (int64_t)mb - j + pp - 1;
		if (s < 0 || s >= pp)
			return -1;
		const int64_t mm = (int64_t)m;
		*pb = (size_t)(j < mm ? warm + 2 * j + 1 : warm + 2 * mm + (j - mm));
	}
	*stage = (int)s;
	return 0;
}
