/* distca.c: the "distca" method, core attention disaggregation (DistCA Sec. 3, 4, 6.1, App.
 * E). The request's layout (cp 1) runs the distca-ticks schedule with an
 * in-place attention server per TP group (Sec. 4.1: every (pipeline, stage) TP group is
 * both a linear rank and a server). Per step:
 *   1. micro-batches: the drawn documents in order, next-fit into micro-batches of
 *      dp x rank_tokens tokens (rank_tokens: a linear rank's budget, max_tokens by default;
 *      documents up to max_tokens may be longer and spread over ranks; a document never
 *      crosses micro-batches, so its CA-tasks' prefixes run at one tick). The paper does not
 *      say how it cuts micro-batches; balplan's choice, `mb_cut`: next-fit (the default)
 *      leaves a step's last micro-batch, and any one closed early by a document that does
 *      not fit, with what is left (down to a few tokens), and every tick of Fig. 8 is world-
 *      synchronised (Sec. 4.1), so a tick costs its slowest stage's micro-batch; even keeps
 *      next-fit's count m (the fewest contiguous micro-batches, so the fewest ticks) and
 *      re-cuts the same documents into m micro-batches as even in tokens as the caps allow
 *      (cut_even), falling back to next-fit's cut where it cannot. Even in tokens is not
 *      even in time (attention grows with the square of a document's length): over
 *      tools/bench/repro-distca's 4D settings it moves distca's TFLOP/s by -2.7% to +2.1%
 *      (and the count of ticks, m + pp - 1, is the same), so it is not the default;
 *   2. nano-batches (Sec. 4.1, Fig. 7; `pingpong` 1): each micro-batch's documents split at
 *      the document boundary nearest half its tokens into ping and pong, planned apart;
 *   3. linear placement (Sec. 6.1, blocks/ca_sched.c bp_ca_place): each nano-batch over the
 *      dp pipelines with an equal token budget, documents crossing pipelines head-tail;
 *      a micro-batch's spans are its ping pieces, then its pong pieces;
 *   4. per forward tick t and nano-batch, one scheduler call (Sec. 4.2, App. E,
 *      bp_ca_schedule) over all dp x pp servers with the Items of every stage's current
 *      micro-batch (t - r on stage r, Fig. 8; stages in warm-up and drain run dummies that
 *      only serve attention); with pipeline stages (resend mode), `bwd_place` own (the
 *      default) calls it again per backward tick j and nano-batch over the Items that
 *      tick runs (j - (pp - 1) + r on stage r): "For PP, the scheduler is called for each
 *      logical tick" (Sec. 4.2). A backward tick does not hold the micro-batches of any one
 *      forward tick on the same stages (stage r's backward of micro-batch i runs at
 *      backward tick i + pp - 1 - r, its forward at forward tick i + r), so the forward
 *      placement, balanced per forward tick, leaves backward ticks unbalanced: at 8B,
 *      128K, 64 GPUs, pp 4 the most loaded server served 1.65x the mean of a backward tick
 *      (tools/bench/REPRODUCING.md "Why 4D distca trailed WLB-ideal"). `reuse` keeps one
 *      placement per (micro-batch, stage) for both, as plans before it did; at pp 1 a
 *      backward tick runs the micro-batch of its forward tick, and non-resend mode must
 *      run where the forward left Q, K and V, so the backward reuses the forward's
 *      placement there (plan.h struct bp_ca_task, ca_sched.h bp_ca_task_place);
 *   5. App. A: a split never cuts a document into more chunks per call
 *      than `max_shards` (0, the default: no cap, as the paper's scheduler and the code;
 *      -1: App. A's bound for the model and GPU, 31 for Llama-34B on H200-class GPUs at
 *      50 GiB/s, 16 for Llama-3-8B), or than its placement pieces;
 *   6. the buffer (the public code's, not the paper's): one layer's all-to-all in of a
 *      call must fit `ca_buffer_bytes` per rank; `escalate` 1 raises the tolerance along
 *      the code's list until it fits (the code's hidden rule, made explicit), else the
 *      plan is infeasible;
 *   7. the mode (`resend`; the public code's, not the paper's): auto (the code's choice)
 *      runs non-resend at pp 1 (the servers keep the received Q, deduplicated K and V, O and
 *      the LSE per layer until the backward, which then moves dO in and dQ, dK, dV out) and
 *      resend at pp > 1 (mandatory there); a non-resend step whose kept buffers would push a
 *      rank over HBM minus the reserve (with its activations and model state, as the
 *      simulator charges them, sim/predict.c) falls back to resend, the step's record saying
 *      so.
 * The step's record ("distca") keeps the mode, the ping/pong split and every call's loads
 * and bytes. */
#include "method.h"

#include "ca_sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"

/* The public code's escalation list (its utils/test_util.py). */
static const double eps_ladder[] = {0.05, 0.1, 0.15, 0.2, 0.22, 0.25, 0.28, 0.3, 0.35, 0.4,
				    0.45, 0.5, 0.6, 0.7, 0.8, 0.9};

struct dc_opts {
	struct bp_ca_opts ca;
	int bwd_own; /* bwd_place own at pp > 1: one scheduler call per backward tick too */
	double q_bytes_bwd, kv_bytes_bwd; /* a backward call's buffer bytes per token */
	int pingpong, escalate;
	int even; /* mb_cut even: next-fit's micro-batches re-cut evenly (step 1) */
	int resend; /* the mode asked for, auto resolved: 1 resend, 0 non-resend */
	double buffer;
	int64_t rank_tokens; /* a linear rank's token budget per micro-batch */
};

/* One nano-batch of one micro-batch, placed over the dp pipelines. */
struct dc_nano {
	struct bp_ca_placement pl;
};

struct dc_calls {
	struct bp_ca_record *rec;
	size_t cap;
};

static int calls_push(struct dc_calls *c, double tick, double nano, double eps,
		      const struct bp_ca_result *r, double bytes, struct bp_error *err)
{
	struct bp_ca_record *rec = c->rec;
	if (rec->ncalls == c->cap) {
		size_t nc = c->cap ? 2 * c->cap : 16;
		double **a[] = {&rec->tick, &rec->nano, &rec->eps, &rec->mean, &rec->max_before,
				&rec->max_after, &rec->moved, &rec->bytes};
		for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++) {
			double *na = bp_realloc_array(*a[i], nc, sizeof(double), err);
			if (!na)
				return -1;
			*a[i] = na;
		}
		c->cap = nc;
	}
	size_t k = rec->ncalls++;
	rec->tick[k] = tick;
	rec->nano[k] = nano;
	rec->eps[k] = eps;
	rec->mean[k] = r->mean;
	rec->max_before[k] = r->max_before;
	rec->max_after[k] = r->max_after;
	rec->moved[k] = (double)r->moved_pairs;
	rec->bytes[k] = bytes;
	return 0;
}

/* Whether chunk x comes before chunk y in a tick's task order, (server, doc, q0) (the
 * plan's task order is by tick, then that). */
static int chunk_first(const struct bp_ca_chunk *x, const struct bp_ca_chunk *y)
{
	if (x->server != y->server)
		return x->server < y->server;
	if (x->doc != y->doc)
		return x->doc < y->doc;
	return x->q0 < y->q0;
}

/* What every scheduler call of a step shares (schedule_step): the step's nano-batches
 * (2 per micro-batch, m micro-batches per pipeline), the layout (pp stages, dp pipelines,
 * srv[stage * dp + pipeline] the server index of each linear rank, nservers servers) and
 * the options; pl keeps its Items' capacity from call to call, w the scheduler's and
 * emit's scratch (a call allocates nothing once they fit), and ch[n] the last call's chunks
 * of nano-batch n (ping's outlive pong's call: a tick's tasks are merged from both). */
struct dc_call {
	const struct dc_nano *nanos;
	size_t m;
	int pp, dp;
	const int *srv;
	int nservers;
	const struct dc_opts *o;
	struct bp_ca_placement pl;
	struct bp_ca_work w;
	double *sr;                /* [2 nservers]: a call's bytes sent, received */
	struct bp_ca_chunk *ch[2]; /* owned, room for ch_cap[n] */
	size_t ch_cap[2], nch[2];
	int bwd; /* the call is a backward tick's (bwd_place own) */
	struct bp_error *err;
};

/* The micro-batch stage r runs at forward tick t, or with c->bwd at backward tick t
 * (ticks.h: t - r, or t - (pp - 1) + r), or -1 for a dummy. */
static int64_t call_mb(const struct dc_call *c, size_t t, int r)
{
	int64_t j = c->bwd ? (int64_t)t - (c->pp - 1) + r : (int64_t)t - r;
	return j >= 0 && j < (int64_t)c->m ? j : -1;
}

/* One scheduler call: the Items of the micro-batches stage r (r < pp) runs at tick t
 * (call_mb) of nano-batch n, moved onto server indices, scheduled at tolerance eps into
 * *res; c->ch[n] gets its chunks in task order (server, doc, q0). Returns the call's buffer
 * bytes (a backward call's at the backward's bytes per token), or -1. */
static double one_call(struct dc_call *c, size_t t, int n, double eps,
		       struct bp_ca_result *res)
{
	const struct dc_nano *nanos = c->nanos;
	const int pp = c->pp, dp = c->dp, nservers = c->nservers;
	const struct dc_opts *o = c->o;
	struct bp_ca_placement *pl = &c->pl;
	struct bp_error *err = c->err;
	size_t units = 0, need = 1;
	for (int r = 0; r < pp; r++)
		if (call_mb(c, t, r) >= 0)
			need += nanos[2 * (size_t)call_mb(c, t, r) + (size_t)n].pl.nitems;
	if (need > pl->cap) { /* pl keeps its Items' capacity from call to call */
		struct bp_ca_item *ni = bp_realloc_array(pl->items, 2 * need, sizeof(*ni), err);
		if (!ni)
			return -1;
		pl->items = ni;
		pl->cap = 2 * need;
	}
	/* Items only: the scheduler and bp_ca_emit need no pieces (an Item keeps its src) */
	pl->nitems = 0;
	for (int r = 0; r < pp; r++) {
		int64_t j = call_mb(c, t, r);
		if (j < 0)
			continue;
		const struct bp_ca_placement *src = &nanos[2 * (size_t)j + (size_t)n].pl;
		size_t maxu = 0;
		for (size_t i = 0; i < src->nitems; i++) {
			struct bp_ca_item it = src->items[i];
			it.src = it.server = c->srv[r * dp + it.src];
			if (it.unit + 1 > maxu)
				maxu = it.unit + 1;
			it.unit += units;
			pl->items[pl->nitems++] = it;
		}
		units += maxu;
	}
	struct bp_ca_opts co = o->ca;
	co.eps = eps;
	if (c->bwd) { /* a backward call prices its moves with the backward's bytes */
		co.q_bytes = o->q_bytes_bwd;
		co.kv_bytes = o->kv_bytes_bwd;
	}
	if (bp_ca_schedule_in(&c->w, pl, nservers, &co, res, NULL, err) < 0)
		return -1;
	return bp_ca_emit_in(&c->w, pl, nservers, c->bwd ? o->q_bytes_bwd : o->ca.q_bytes,
			     c->bwd ? o->kv_bytes_bwd : o->ca.kv_bytes, &c->ch[n], &c->ch_cap[n],
			     &c->nch[n], c->sr, c->sr + nservers, err);
}

/* Steps 4-5 of the header for one step: every forward tick's calls, escalated as asked. */
static int schedule_step(const struct dc_nano *nanos, size_t m, int pp, int dp, const int *srv,
			 int nservers, const struct dc_opts *o, struct bp_step *st,
			 struct dc_calls *calls, struct bp_error *err)
{
	size_t cap = 0;
	int rc = -1;
	struct dc_call c = {.nanos = nanos, .m = m, .pp = pp, .dp = dp, .srv = srv,
			    .nservers = nservers, .o = o, .err = err};
	c.sr = bp_calloc(2 * (size_t)nservers, sizeof(double), err);
	if (!c.sr)
		goto out;
	/* room for about what the calls emit: every stage's call sees each nano-batch's Items
	 * (twice with backward ticks' own calls), most one chunk, split ones two, plus the
	 * split-offs */
	size_t guess = 16;
	for (size_t j = 0; j < 2 * m; j++)
		guess += (o->bwd_own ? 4 : 2) * (size_t)pp * nanos[j].pl.nitems;
	if (guess > cap) {
		struct bp_ca_task *na = bp_realloc_array(st->ca, guess, sizeof(*na), err);
		if (!na)
			goto out;
		st->ca = na;
		cap = guess;
	}
	/* forward ticks 0 .. F - 1, then with bwd_place own the backward ticks, named F + j
	 * (ca_sched.h bp_ca_task_place) */
	const size_t F = m + (size_t)pp - 1;
	for (size_t tt = 0; tt < (o->bwd_own ? 2 * F : F); tt++) {
		const size_t t = tt < F ? tt : tt - F;
		c.bwd = tt >= F;
		const struct bp_ca_chunk *chs[2] = {NULL, NULL};
		size_t nchs[2] = {0, 0}; /* the tick's calls' chunks */
		for (int n = 0; n < 2; n++) {
			int any = 0;
			for (int r = 0; r < pp; r++)
				if (call_mb(&c, t, r) >= 0 &&
				    nanos[2 * (size_t)call_mb(&c, t, r) + (size_t)n].pl.nitems)
					any = 1;
			if (!any)
				continue;
			struct bp_ca_result res;
			double eps = o->ca.eps;
			size_t rung = 0;
			double bytes;
			for (;;) {
				bytes = one_call(&c, t, n, eps, &res);
				if (bytes < 0)
					goto out;
				if (bytes <= o->buffer)
					break;
				while (rung < BP_ARRAY_LEN(eps_ladder) && eps_ladder[rung] <= eps)
					rung++;
				if (!o->escalate || rung == BP_ARRAY_LEN(eps_ladder)) {
					rc = bp_infeasiblef(err, "step %lld %s tick %zu %s: one layer's "
							   "all-to-all moves %.0f bytes through a rank "
							   "at tolerance %g, more than ca_buffer_bytes "
							   "%.0f%s", (long long)st->index,
							   c.bwd ? "backward" : "forward", t,
							   n ? "pong" : "ping", bytes, eps, o->buffer,
							   o->escalate ? " (escalated to the last "
							   "tolerance)" : " (escalate 1 raises the "
							   "tolerance)");
					goto out;
				}
				eps = eps_ladder[rung];
			}
			if (calls_push(calls, (double)tt, n, eps, &res, bytes, err) < 0)
				goto out;
			chs[n] = c.ch[n];
			nchs[n] = c.nch[n];
		}
		if (st->nca + nchs[0] + nchs[1] > cap) {
			size_t nc = 2 * (st->nca + nchs[0] + nchs[1]) + 16;
			struct bp_ca_task *na = bp_realloc_array(st->ca, nc, sizeof(*na), err);
			if (!na)
				goto out;
			st->ca = na;
			cap = nc;
		}
		/* ticks come in order and each call's chunks are sorted: merging the tick's ping
		 * and pong chunks keeps the step's tasks sorted (no two share a key; on a tie
		 * pong's would come first), each task written once */
		for (size_t a = 0, b = 0; a < nchs[0] || b < nchs[1];) {
			const struct bp_ca_chunk *x =
				b == nchs[1] || (a < nchs[0] && chunk_first(&chs[0][a], &chs[1][b]))
					? &chs[0][a++]
					: &chs[1][b++];
			st->ca[st->nca++] = (struct bp_ca_task){(int64_t)tt, x->server, x->doc,
								x->q0, x->q1, x->kv0, x->q1};
		}
	}
	rc = 0;
out:
	free(c.sr);
	free(c.ch[0]);
	free(c.ch[1]);
	bp_ca_work_release(&c.w);
	bp_ca_placement_release(&c.pl);
	return rc;
}

/* The step's pipelines from the placements (step 3 of the header): per (pipeline k,
 * micro-batch j) a micro-batch of the ping placement's pieces on linear rank k, then the
 * pong's, each in placement order; ping[k * m + j] gets the ping pieces' count. The
 * pieces are indexed by rank first (a counting sort, placement order kept), so the step
 * takes time linear in them (issue 24: a scan of every piece per pipeline was quadratic). */
static int pipe_spans(const struct dc_nano *nanos, size_t m, int dp, enum bp_shard shard,
		      struct bp_step *st, size_t *ping, struct bp_error *err)
{
	size_t npc = 0;
	for (size_t x = 0; x < 2 * m; x++)
		npc += nanos[x].pl.npieces;
	struct bp_span *spans = bp_calloc(npc + 1, sizeof(*spans), err);
	size_t *at = bp_calloc(2 * m * ((size_t)dp + 2) + 1, sizeof(size_t), err);
	size_t *ord = bp_calloc(npc + 1, sizeof(size_t), err);
	int rc = -1;
	if (!spans || !at || !ord)
		goto out;
	/* at[x * (dp + 2) + k] .. [k + 1]: placement x's pieces on rank k, in ord */
	for (size_t x = 0, base = 0; x < 2 * m; x++) {
		const struct bp_ca_placement *pl = &nanos[x].pl;
		size_t *ax = at + x * ((size_t)dp + 2);
		ax[0] = base;
		for (size_t q = 0; q < pl->npieces; q++)
			ax[pl->pieces[q].rank + 2]++;
		ax[1] = base;
		for (int k = 0; k < dp; k++)
			ax[k + 2] += ax[k + 1];
		for (size_t q = 0; q < pl->npieces; q++)
			ord[ax[pl->pieces[q].rank + 1]++] = q;
		base += pl->npieces;
	}
	for (int k = 0; k < dp; k++)
		for (size_t j = 0; j < m; j++) {
			size_t ns = 0;
			for (int n = 0; n < 2; n++) {
				size_t x = 2 * j + (size_t)n;
				const struct bp_ca_placement *pl = &nanos[x].pl;
				const size_t *ax = at + x * ((size_t)dp + 2);
				for (size_t r = ax[k]; r < ax[k + 1]; r++) {
					const struct bp_ca_piece *pc = &pl->pieces[ord[r]];
					spans[ns++] = (struct bp_span){pc->doc, pc->offset, pc->len};
				}
				if (!n)
					ping[(size_t)k * m + j] = ns;
			}
			if (!ns) {
				if (j + 1 == m) /* the last micro-batch may leave pipelines out */
					continue;
				bp_errorf(err, "micro-batch %zu of step %lld leaves pipeline %d without "
					  "tokens", j, (long long)st->index, k);
				goto out;
			}
			struct bp_pipe *pi = &st->pipes[k];
			if (bp_pipe_add_mb(pi, spans, ns, shard, err) < 0)
				goto out;
			pi->mbs[pi->nmbs - 1].attn = BP_ATTN_DISAGG;
		}
	rc = 0;
out:
	free(spans);
	free(at);
	free(ord);
	return rc;
}

/* The ping/pong cut of micro-batch [i, e) (step 2 of the header): the document boundary
 * nearest half its tokens (e without ping-pong or with one document). Each nano-batch gives
 * a pipeline up to ceil(its tokens / dp), so the two together may pass cap by one (issue
 * 24: 131,073 tokens over a 131,072 cap at 1,024 GPUs): returns 0 then (the micro-batch
 * must end a document earlier), 1 where it fits or holds one document. */
static int mb_split(const int64_t *len, size_t i, size_t e, int dp, int64_t cap, int pingpong,
		    size_t *cut)
{
	int64_t tok = 0, ping_tok, acc = 0, best = -1;
	for (size_t k = i; k < e; k++)
		tok += len[k];
	*cut = e;
	ping_tok = tok;
	if (pingpong && e - i >= 2)
		for (size_t k = i + 1; k < e; k++) {
			acc += len[k - 1];
			int64_t dist = 2 * acc > tok ? 2 * acc - tok : tok - 2 * acc;
			if (best < 0 || dist < best) {
				best = dist;
				*cut = k;
				ping_tok = acc;
			}
		}
	int64_t per = (ping_tok + dp - 1) / dp + (tok - ping_tok + dp - 1) / dp;
	return per <= cap || e - i < 2;
}

/* The micro-batch starting at document i: from [i, e) (e > i, at most dp x cap tokens),
 * a document fewer while its nano-batches pass cap (mb_split). */
static size_t mb_shrink(const int64_t *len, size_t i, size_t e, int dp, int64_t cap,
			int pingpong)
{
	size_t cut;
	while (!mb_split(len, i, e, dp, cap, pingpong, &cut))
		e--;
	return e;
}

/* Next-fit (step 1 of the header): bnd[j] .. bnd[j + 1] the documents of micro-batch j;
 * returns the count, 0 where a document alone passes dp x cap. */
static size_t cut_next_fit(const int64_t *len, size_t n, int dp, int64_t cap, int pingpong,
			   size_t *bnd)
{
	size_t m = 0, i = 0;
	bnd[0] = 0;
	while (i < n) {
		size_t e = i;
		int64_t tok = 0;
		while (e < n && tok + len[e] <= (int64_t)dp * cap)
			tok += len[e++];
		if (e == i)
			return 0;
		i = bnd[++m] = mb_shrink(len, i, e, dp, cap, pingpong);
	}
	return m;
}

/* The even cut (step 1 of the header, mb_cut even): the same documents in order, re-cut
 * into next-fit's m micro-batches. Micro-batch j (r = m - j left, R tokens left) takes
 * documents up to the target R / r, plus the next one where that lands nearer the target;
 * at least up to rev[r - 1], the earliest document whose suffix next-fit packs backwards
 * into r - 1 micro-batches of dp x cap tokens; never past dp x cap or the nano-batch cap.
 * Returns 0 where the result is not m micro-batches (the caller keeps next-fit's cut). */
static int cut_even(const int64_t *len, size_t n, int dp, int64_t cap, int pingpong,
		    size_t m, size_t *bnd, size_t *rev)
{
	const int64_t lim = (int64_t)dp * cap;
	int64_t left = 0;
	for (size_t k = 0; k < n; k++)
		left += len[k];
	/* rev[q]: where a backward next-fit's q-th micro-batch (from the end) starts */
	rev[0] = n;
	for (size_t q = 1, e = n; q <= m; q++) {
		int64_t tok = 0;
		while (e > 0 && tok + len[e - 1] <= lim)
			tok += len[--e];
		rev[q] = e;
	}
	bnd[0] = 0;
	for (size_t j = 0, i = 0; j < m; j++) {
		size_t r = m - j, e = i;
		int64_t target = (left + (int64_t)r - 1) / (int64_t)r, tok = 0;
		if (i >= n)
			return 0;
		while (e < n && tok + len[e] <= target)
			tok += len[e++];
		if (e < n && tok + len[e] <= lim && (e == i || tok + len[e] - target < target - tok))
			tok += len[e++];
		while (e < rev[r - 1] && tok + len[e] <= lim)
			tok += len[e++];
		if (e == i || e < rev[r - 1])
			return 0;
		e = mb_shrink(len, i, e, dp, cap, pingpong);
		for (size_t k = i; k < e; k++)
			left -= len[k];
		i = bnd[j + 1] = e;
		if (j + 1 == m && i != n)
			return 0;
	}
	return 1;
}

/* The most minus the fewest tokens of a cut's m micro-batches. */
static int64_t cut_spread(const int64_t *len, const size_t *bnd, size_t m)
{
	int64_t lo = INT64_MAX, hi = 0;
	for (size_t j = 0; j < m; j++) {
		int64_t t = 0;
		for (size_t k = bnd[j]; k < bnd[j + 1]; k++)
			t += len[k];
		lo = t < lo ? t : lo;
		hi = t > hi ? t : hi;
	}
	return hi - lo;
}

/* Step 1 of the header: the step's micro-batch boundaries (bnd[0 .. m], m + 1 entries of
 * n + 1 allocated), next-fit's cut, re-cut evenly where even (mb_cut even) and the re-cut
 * keeps next-fit's count and spreads the tokens no wider (plan/method.h). */
int bp_distca_cut(const int64_t *len, size_t n, int dp, int64_t cap, int pingpong, int even,
		  size_t *bnd, size_t *m, struct bp_error *err)
{
	*m = cut_next_fit(len, n, dp, cap, pingpong, bnd);
	if (n && !*m)
		return bp_errorf(err, "a document exceeds a micro-batch of %lld tokens",
				 (long long)dp * cap);
	if (!even || *m < 2)
		return 0;
	size_t *eb = bp_calloc(2 * (*m + 1), sizeof(size_t), err);
	if (!eb)
		return -1;
	if (cut_even(len, n, dp, cap, pingpong, *m, eb, eb + *m + 1) &&
	    cut_spread(len, eb, *m) <= cut_spread(len, bnd, *m))
		memcpy(bnd, eb, (*m + 1) * sizeof(size_t));
	free(eb);
	return 0;
}

/* Steps 1-3 of the header: micro-batches, nano-batches, linear placement; spans into the
 * step's pipelines. nanos gets 2 entries per micro-batch (pong empty without ping-pong). */
static int place_step(const struct bp_batch *b, int dp, int64_t cap, const struct dc_opts *o,
		      enum bp_shard shard, struct bp_step *st, struct bp_ca_record *rec,
		      struct dc_nano **nanos_out, size_t *m_out, struct bp_error *err)
{
	size_t m = 0, nb = 0;
	struct dc_nano *nanos = NULL;
	int64_t *doc = bp_calloc(b->ndocs + 1, sizeof(int64_t), err);
	int64_t *len = bp_calloc(b->ndocs + 1, sizeof(int64_t), err);
	size_t *bnd = bp_calloc(b->ndocs + 2, sizeof(size_t), err);
	size_t *ping = NULL;
	int rc = -1;
	if (!doc || !len || !bnd)
		goto out;
	for (size_t d = 0; d < b->ndocs; d++) {
		doc[d] = b->docs[d].id;
		len[d] = b->docs[d].len;
	}
	for (size_t d = 0; d < b->ndocs; d++)
		if (len[d] > (int64_t)dp * cap) {
			bp_errorf(err, "document %lld of %lld tokens exceeds a micro-batch",
				  (long long)doc[d], (long long)len[d]);
			goto out;
		}
	if (bp_distca_cut(len, b->ndocs, dp, cap, o->pingpong, o->even, bnd, &nb, err) < 0)
		goto out;
	for (size_t j = 0; j < nb; j++) {
		size_t i = bnd[j], e = bnd[j + 1], cut;
		mb_split(len, i, e, dp, cap, o->pingpong, &cut);
		struct dc_nano *nn = bp_realloc_array(nanos, 2 * (m + 1), sizeof(*nn), err);
		if (!nn)
			goto out;
		nanos = nn;
		memset(&nanos[2 * m], 0, 2 * sizeof(*nanos));
		m++;
		size_t lo[2] = {i, cut}, hi[2] = {cut, e};
		for (int n = 0; n < 2; n++) {
			int64_t nt = 0;
			for (size_t k = lo[n]; k < hi[n]; k++)
				nt += len[k];
			if (!nt)
				continue;
			int64_t budget = (nt + dp - 1) / dp;
			if (bp_ca_place(doc + lo[n], NULL, len + lo[n], hi[n] - lo[n], dp, budget,
					&nanos[2 * (m - 1) + (size_t)n].pl, err) < 0)
				goto out;
		}
	}
	ping = bp_calloc((size_t)dp * m + 1, sizeof(size_t), err);
	if (!ping || pipe_spans(nanos, m, dp, shard, st, ping, err) < 0)
		goto out;
	if (o->pingpong) {
		size_t nmbs = 0;
		for (int k = 0; k < dp; k++)
			nmbs += st->pipes[k].nmbs;
		rec->ping_spans = bp_calloc(nmbs + 1, sizeof(double), err);
		if (!rec->ping_spans)
			goto out;
		rec->nmbs = nmbs;
		size_t at = 0;
		for (int k = 0; k < dp; k++)
			for (size_t j = 0; j < st->pipes[k].nmbs; j++)
				rec->ping_spans[at++] = (double)ping[(size_t)k * m + j];
	}
	*nanos_out = nanos;
	*m_out = m;
	nanos = NULL;
	rc = 0;
out:
	if (nanos) {
		for (size_t j = 0; j < 2 * m; j++)
			bp_ca_placement_release(&nanos[j].pl);
		free(nanos);
	}
	free(doc);
	free(len);
	free(bnd);
	free(ping);
	return rc;
}

/* App. A's bound for this model and GPU (K and V both in h_kv and B in GiB/s give the
 * paper's 31 for Llama-34B; K alone would give about 60): t = the token-wise FLOPs of a
 * token in one layer, 2h (2h + h_kv + f_m i) (Table 3; f_m 3 gated, 2 not), at 50% of the
 * GPU's peak; B its network bandwidth; h_q = 2h bytes, h_kv = K and V, 4 h_kv bytes. The
 * same for every TP degree (TP divides both sides). 0 without a profile. */
static int app_a_shards(const struct bp_model *md, const struct bp_method_ctx *ctx)
{
	if (!ctx->cm || !ctx->cm->prof)
		return 0;
	double peak = ctx->cm->prof->hw.bf16_tflops * 1e12, bw = ctx->cm->prof->hw.net_gbps * 1e9;
	double h = md->hidden, hkv = (double)md->kv_heads * (md->hidden / md->heads);
	double flops = 2 * h * (2 * h + hkv + (md->gated ? 3.0 : 2.0) * md->ffn);
	if (!(peak > 0) || !(bw > 0))
		return 0;
	double s = bp_ca_max_shards(flops / (0.5 * peak), bw, 2 * h, 4 * hkv);
	return s >= 1 ? (int)floor(s) : 1;
}

/* Step 7 of the header, one step of pp 1: whether the CA-tasks' kept bytes (per server,
 * forward tick j = micro-batch j) with micro-batch j's activations and the model state fit
 * every rank's cap, computed as sim/predict.c's simulate_ticks charges them (same sums in
 * the same order). Sets *fits. */
static int kept_fits(const struct bp_method_ctx *ctx, const struct bp_plan *out,
		     const struct bp_step *st, int dp, const int *srv, int nservers, int *fits,
		     struct bp_error *err)
{
	const struct bp_costmodel *cm = ctx->cm;
	size_t m = 0;
	*fits = 1;
	for (int k = 0; k < dp; k++)
		if (st->pipes[k].nmbs > m)
			m = st->pipes[k].nmbs;
	double qk, kvk, L = out->layouts[0].pipes[0].stage_layers[0];
	double *per = bp_calloc(st->nca + 1, sizeof(double), err);
	double *kept = bp_calloc(m * (size_t)nservers + 1, sizeof(double), err);
	int rc = -1;
	if (!per || !kept)
		goto out;
	bp_ca_kept_token_bytes(&out->model, out->layouts[0].pipes[0].sc.tp, &qk, &kvk);
	bp_ca_kept_bytes(st->ca, st->nca, qk, kvk, per);
	for (size_t t = 0; t < st->nca; t++)
		kept[(size_t)st->ca[t].tick * (size_t)nservers + (size_t)st->ca[t].server] +=
			L * per[t];
	int64_t cap = bp_cost_mem_cap(cm), state = bp_cost_state_bytes(cm, 0);
	for (int k = 0; k < dp && *fits; k++)
		for (size_t j = 0; j < m; j++) {
			const struct bp_pipe *pi = &st->pipes[k];
			int64_t act = j < pi->nmbs ? bp_cost_act_bytes(cm, 0, pi->mbs[j].tokens)
						   : 0;
			double held = kept[j * (size_t)nservers + (size_t)srv[k]];
			int64_t keep = bp_i64_from_real_sat(ceil(held));
			int64_t need = bp_i64_mul_add_sat(1, act,
							  bp_i64_mul_add_sat(1, state, keep));
			if (need > cap) {
				*fits = 0;
				break;
			}
		}
	rc = 0;
out:
	free(per);
	free(kept);
	return rc;
}

/* Fig. 8's ticks keep a stage's micro-batch from its forward tick to its backward tick:
 * up to 2 (pp - s) - 1 of them on stage s in the steady state, against the pp - s of 1F1B
 * that solve's memory check before the method assumes. Charged as sim/predict.c's
 * simulate_ticks does for the linear ranks (activations in flight plus the model state; the
 * non-resend servers' kept buffers are kept_fits's); a step over the cap makes the plan
 * infeasible with the way out named, rather than invalid. */
static int ticks_memory(const struct bp_method_ctx *ctx, const struct bp_step *st, int pp,
			int64_t rank_tokens, struct bp_error *err)
{
	const struct bp_costmodel *cm = ctx->cm;
	size_t m = 0;
	for (size_t k = 0; k < st->npipes; k++)
		if (st->pipes[k].nmbs > m)
			m = st->pipes[k].nmbs;
	/* per stage: bytes held, their peak, micro-batches held, and how many at the peak */
	int64_t *held = bp_calloc(4 * (size_t)pp, sizeof(int64_t), err);
	if (!held)
		return -1;
	int64_t *peak = held + pp, *count = peak + pp, *most = count + pp;
	int64_t cap = bp_cost_mem_cap(cm);
	int rc = 0;
	for (size_t k = 0; k < st->npipes && !rc; k++) {
		const struct bp_pipe *pi = &st->pipes[k];
		memset(held, 0, 4 * (size_t)pp * sizeof(int64_t));
		for (size_t t = 0; t < bp_ticks_count(pp, m); t++)
			for (int s = 0; s < pp; s++) {
				int bwd;
				size_t phase;
				int64_t j = bp_tick_op(pp, m, t, s, &bwd, &phase);
				if (j < 0 || (size_t)j >= pi->nmbs)
					continue;
				int64_t act = bp_cost_act_bytes(cm, s, pi->mbs[j].tokens);
				held[s] = bp_i64_mul_add_sat(bwd ? -1 : 1, act, held[s]);
				count[s] += bwd ? -1 : 1;
				if (held[s] > peak[s]) {
					peak[s] = held[s];
					most[s] = count[s];
				}
			}
		for (int s = 0; s < pp; s++) {
			int64_t need = bp_i64_mul_add_sat(1, peak[s], bp_cost_state_bytes(cm, s));
			if (need > cap) {
				rc = bp_infeasiblef(err, "step %lld: stage %d of pipeline %zu holds %lld "
						    "micro-batches in flight in DistCA's tick schedule "
						    "(Fig. 8: up to 2 (pp - stage) - 1) and needs %.1f "
						    "GiB, more than the %.1f GiB usable; lower --param "
						    "rank_tokens (now %lld) or raise pp",
						    (long long)st->index, s, k, (long long)most[s],
						    need / 1073741824.0, cap / 1073741824.0,
						    (long long)rank_tokens);
				break;
			}
		}
	}
	free(held);
	return rc;
}

/* distca's typed parameters (its row's param_specs): rank_tokens, whose default and bound
 * are the plan's max_tokens, keeps its own reader; tolerance's open interval is checked after
 * the reader. ca_comm's choices are in ca_sched.h's order of enum bp_ca_comm after the
 * default (exact first). */
static const char *const dc_bwd_places[] = {"own", "reuse", NULL};
static const char *const dc_cuts[] = {"next-fit", "even", NULL};
static const char *const dc_comms[] = {"exact", "appb", "code", NULL};
static const char *const dc_resends[] = {"auto", "0", "1", NULL};

static const struct bp_param_spec dc_specs[] = {
	BP_PARAM_SPEC_REAL("tolerance", 0.1, -INFINITY, INFINITY,
			   "epsilon in (0, 1), a fraction of the mean server load"),
	BP_PARAM_SPEC_INT("ca_block", 128, 1, 1 << 20,
			  "shard granularity in tokens (128 the paper, 1 the code)"),
	BP_PARAM_SPEC_INT("pingpong", 1, 0, 1, "1: nano-batches (Sec. 4.1)"),
	BP_PARAM_SPEC_INT("escalate", 0, 0, 1,
			  "1: raise the tolerance when a call overflows the buffer"),
	BP_PARAM_SPEC_INT("ca_buffer_bytes", (int64_t)2 << 30, 1, (int64_t)1 << 50,
			  "bytes per rank a call must fit"),
	BP_PARAM_SPEC_INT("two_sided", 0, 0, 1, "1: also the paper's two-sided band"),
	BP_PARAM_SPEC_INT("max_shards", 0, -1, 1 << 20,
			  "cap on shards (0: none, -1: App. A's bound)"),
	BP_PARAM_SPEC_CHOICE("mb_cut", dc_cuts,
			     "micro-batches: next-fit in draw order, or its count re-cut evenly"),
	BP_PARAM_SPEC_CHOICE("ca_comm", dc_comms,
			     "a move's bytes: the split's exact, App. B's closed form, the code's"),
	BP_PARAM_SPEC_CHOICE("resend", dc_resends,
			     "backward resends Q, K, V (1), servers keep them (0; pp 1), auto"),
	BP_PARAM_SPEC_CHOICE("bwd_place", dc_bwd_places,
			     "backward ticks: scheduled on their own, or the forward's placement"),
	{0},
};

static int read_opts(struct bp_plan *out, int tp, int app_a, struct dc_opts *o,
		     struct bp_error *err)
{
	int64_t block, pingpong, escalate, buffer, rank_tokens, two_sided, max_shards;
	double eps;
	memset(o, 0, sizeof(*o));
	if (bp_param_real(out, dc_specs, "tolerance", &eps, err) < 0)
		return -1;
	if (!(eps > 0 && eps < 1))
		return bp_errorf(err, "parameter tolerance is %g, outside (0, 1) (DistCA's epsilon, "
				 "a fraction of the mean server load)", eps);
	if (bp_param_int(out, dc_specs, "ca_block", &block, err) < 0 ||
	    bp_param_int(out, dc_specs, "pingpong", &pingpong, err) < 0 ||
	    bp_param_int(out, dc_specs, "escalate", &escalate, err) < 0 ||
	    bp_param_int(out, dc_specs, "ca_buffer_bytes", &buffer, err) < 0 ||
	    bp_method_param_int(out, "rank_tokens", out->max_tokens, 1, out->max_tokens,
				&rank_tokens, err) < 0 ||
	    bp_param_int(out, dc_specs, "two_sided", &two_sided, err) < 0 ||
	    bp_param_int(out, dc_specs, "max_shards", &max_shards, err) < 0)
		return -1;
	/* -1: App. A's bound for the model and GPU. Off by default: App. A is the paper's
	 * argument that a few shards suffice, not a rule its scheduler or the public code
	 * applies, and the simulator prices traffic that does not hide anyway; as a hard cap it
	 * costs distca up to a third of its throughput in balplan's model
	 * (tools/bench/REPRODUCING.md "Reproducing DistCA", column "App. A"). */
	if (max_shards < 0) {
		if (app_a < 1)
			return bp_errorf(err, "parameter max_shards -1 (App. A's bound) needs a "
					 "profile with the GPU's peak and network bandwidth");
		max_shards = app_a;
	}
	o->rank_tokens = rank_tokens;
	int cut, comm, resend;
	if (bp_param_choice(out, dc_specs, "mb_cut", &cut, err) < 0 ||
	    bp_param_choice(out, dc_specs, "ca_comm", &comm, err) < 0 ||
	    bp_param_choice(out, dc_specs, "resend", &resend, err) < 0)
		return -1;
	o->even = cut == 1;
	o->ca.two_sided = (int)two_sided;
	o->ca.max_shards = (int)max_shards;
	if (bp_ca_comm_parse(dc_comms[comm], &o->ca.comm) < 0)
		return bp_errorf(err, "parameter ca_comm '%s' has no comm model", dc_comms[comm]);
	/* the public code's default without PP is non-resend; with PP it must resend */
	int pp = out->layouts[0].pipes[0].sc.pp;
	o->resend = resend == 0 ? pp > 1 : resend == 2;
	if (!o->resend && pp > 1)
		return bp_errorf(err, "parameter resend 0 needs pp 1, not pp %d (with pipeline "
				 "stages the backward must resend Q, K and V, as DistCA's code does)",
				 pp);
	int bwd_place;
	if (bp_param_choice(out, dc_specs, "bwd_place", &bwd_place, err) < 0)
		return -1;
	/* at pp 1 a backward tick runs the micro-batch of its forward tick, whose placement it
	 * keeps (non-resend must: the servers hold its Q, K and V) */
	o->bwd_own = bwd_place == 0 && pp > 1 && o->resend;
	o->ca.eps = eps;
	o->ca.block = (int)block;
	o->pingpong = (int)pingpong;
	o->escalate = (int)escalate;
	o->buffer = (double)buffer;
	bp_ca_token_bytes(&out->model, tp, &o->ca.q_bytes, &o->ca.kv_bytes);
	bp_ca_token_bytes_bwd(&out->model, tp, &o->q_bytes_bwd, &o->kv_bytes_bwd);
	return 0;
}

/* Whether a step has CA-tasks or disaggregated micro-batches (sim/check_ca.c checks them). */
static int runs_ca(const struct bp_step *st)
{
	for (size_t k = 0; k < st->npipes; k++)
		for (size_t j = 0; j < st->pipes[k].nmbs; j++)
			if (st->pipes[k].mbs[j].attn == BP_ATTN_DISAGG)
				return 1;
	return st->nca > 0;
}

/* check's half of the parameters (method.h check_params): read_opts on the scratch copy,
 * then every step's record against them: each call's tolerance is the parameter's, or with
 * escalate 1 a rung of the ladder above it; its bytes fit ca_buffer_bytes; max_shards is the
 * parameter's (App. A's bound, >= 1, for -1); its loads are finite, non-negative and no
 * server's maximum is below the mean. */
int bp_distca_check_params(const struct bp_plan *p, struct bp_plan *scratch,
			   struct bp_error *err)
{
	struct dc_opts o;
	int64_t ms;
	if (!scratch->nlayouts || !scratch->layouts[0].npipes)
		return 0; /* the plan's validation names a missing layout */
	if (read_opts(scratch, scratch->layouts[0].pipes[0].sc.tp, 1, &o, err) < 0)
		return -1;
	if (bp_parse_int64(bp_plan_param(scratch, "max_shards"), &ms, "max_shards", err) < 0)
		return -1;
	const char *resend = bp_plan_param(p, "resend");
	/* bwd_place as the plan names it (plans before it have none and reuse) */
	const char *bwd = bp_plan_param(p, "bwd_place");
	for (size_t s = 0; s < p->nsteps; s++) {
		const struct bp_step *st = &p->steps[s];
		if (bwd && st->nca && st->layout >= 0 && (size_t)st->layout < p->nlayouts) {
			const struct bp_layout *l = bp_plan_layout(p, st);
			int pp = l->npipes ? l->pipes[0].sc.pp : 1;
			size_t m = 0;
			for (size_t k = 0; k < st->npipes; k++)
				if (st->pipes[k].nmbs > m)
					m = st->pipes[k].nmbs;
			int own = bp_ca_own_bwd(st->ca[st->nca - 1].tick, pp, m);
			const struct bp_ca_record *sr = st->record_ops == &bp_record_distca
							       ? st->record : NULL;
			int want = !strcmp(bwd, "own") && pp > 1 && (!sr || sr->resend);
			if (own != want)
				return bp_errorf(err, "step %zu %s backward ticks' own CA-tasks, but the "
						 "plan's parameter bwd_place is %s at pp %d", s,
						 own ? "has" : "lacks", bwd, pp);
		}
		const struct bp_ca_record *r = p->steps[s].record;
		if (!r || p->steps[s].record_ops != &bp_record_distca)
			continue;
		/* a plan whose parameter resend is 1 resends at every step with CA-tasks */
		if (!r->resend && resend && !strcmp(resend, "1") && runs_ca(&p->steps[s]))
			return bp_errorf(err, "step %zu runs non-resend mode but the plan's "
					 "parameter resend is 1", s);
		if (ms >= 0 ? r->max_shards != ms : r->max_shards < 1)
			return bp_errorf(err, "step %zu record: max_shards %d, the plan's "
					 "parameter max_shards is %lld", s, r->max_shards,
					 (long long)ms);
		for (size_t i = 0; i < r->ncalls; i++) {
			double e = r->eps[i];
			/* the record keeps 1e-3 (bp_json_real) */
			const double tol = 5e-4 + 1e-12;
			int rung = fabs(e - o.ca.eps) <= tol;
			for (size_t k = 0; o.escalate && !rung && k < BP_ARRAY_LEN(eps_ladder); k++)
				rung = eps_ladder[k] > o.ca.eps && fabs(e - eps_ladder[k]) <= tol;
			if (!rung)
				return bp_errorf(err, "step %zu record: call %zu has tolerance "
						 "%g, the plan's parameter tolerance is %g "
						 "(escalate %d)", s, i, e, o.ca.eps, o.escalate);
			if (!(r->bytes[i] >= 0 && r->bytes[i] <= o.buffer + 0.5))
				return bp_errorf(err, "step %zu record: call %zu moves %.0f "
						 "bytes, more than ca_buffer_bytes %.0f", s, i,
						 r->bytes[i], o.buffer);
			double mean = r->mean[i], slack = 1e-9 * fabs(mean) + 1e-6;
			if (!isfinite(mean) || mean < 0 || !(r->moved[i] >= 0) ||
			    !isfinite(r->moved[i]) || !(r->max_before[i] + slack >= mean) ||
			    !(r->max_after[i] + slack >= mean) || !isfinite(r->max_before[i]) ||
			    !isfinite(r->max_after[i]))
				return bp_errorf(err, "step %zu record: call %zu has loads mean "
						 "%g, max %g before and %g after, %g pairs moved "
						 "(a maximum below the mean, or negative)", s, i,
						 mean, r->max_before[i], r->max_after[i],
						 r->moved[i]);
		}
	}
	return 0;
}

int bp_distca_check_request(struct bp_scheme sc, const struct bp_model *m,
			    enum bp_shard shard, struct bp_error *err)
{
	(void)shard;
	if (sc.cp != 1)
		return bp_errorf(err, "distca needs cp 1 (CA-tasks replace context parallelism), "
				 "not cp %d", sc.cp);
	if (m->layers % sc.pp)
		return bp_errorf(err, "distca needs equal layers per stage: %d layers on pp %d",
				 m->layers, sc.pp);
	return 0;
}

/* What every step shares (bp_method_each_step's arg): the options and the servers. */
struct dc_run {
	const struct dc_opts *o;
	const int *srv; /* (stage, pipeline)'s server: r * dp + k */
	int nservers, pp, dp;
};

/* One step: its placement, one scheduler call per tick and nano-batch, its record and its
 * memory checks. */
static int distca_step(const struct bp_method_ctx *ctx, const struct bp_batch *b,
		       struct bp_step *st, const struct bp_plan *out, void *arg,
		       struct bp_error *err)
{
	const struct dc_run *dr = arg;
	const struct dc_opts *o = dr->o;
	struct bp_ca_record *rec = bp_step_set_record(st, &bp_record_distca, err);
	struct dc_nano *nanos = NULL;
	size_t m = 0;
	if (!rec)
		return -1;
	rec->max_shards = o->ca.max_shards;
	struct dc_calls calls = {rec, 0};
	int r = place_step(b, dr->dp, o->rank_tokens, o, ctx->shard, st, rec, &nanos, &m, err);
	if (r == 0)
		r = schedule_step(nanos, m, dr->pp, dr->dp, dr->srv, dr->nservers, o, st, &calls,
				  err);
	rec->resend = o->resend;
	if (r == 0 && ctx->cm)
		r = ticks_memory(ctx, st, dr->pp, o->rank_tokens, err);
	if (r == 0 && !o->resend && ctx->cm) {
		int fits;
		r = kept_fits(ctx, out, st, dr->dp, dr->srv, dr->nservers, &fits, err);
		rec->resend = !fits;
	}
	for (size_t j = 0; j < 2 * m; j++)
		bp_ca_placement_release(&nanos[j].pl);
	free(nanos);
	return r;
}

int bp_method_distca(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		     struct bp_plan *out, struct bp_error *err)
{
	struct bp_layout *l = &out->layouts[0];
	const int dp = (int)l->npipes;
	const int pp = l->pipes[0].sc.pp, tp = l->pipes[0].sc.tp;
	struct dc_opts o;
	int *srv = NULL;
	int rc = -1;
	if (bp_distca_check_request(l->pipes[0].sc, &out->model, ctx->shard, err) < 0)
		return -1;
	if (read_opts(out, tp, app_a_shards(&out->model, ctx), &o, err) < 0)
		return -1;
	/* in-place servers: the first rank of every (pipeline, stage) TP group, ascending */
	int nservers = dp * pp;
	int *ranks = bp_calloc((size_t)nservers, sizeof(int), err);
	srv = bp_calloc((size_t)nservers, sizeof(int), err);
	if (!ranks || !srv) {
		free(ranks);
		goto out;
	}
	for (int r = 0; r < pp; r++)
		for (int k = 0; k < dp; k++)
			ranks[r * dp + k] = bp_lpipe_rank(&l->pipes[k], r, 0, 0);
	free(l->servers);
	l->servers = bp_calloc((size_t)nservers, sizeof(int), err);
	if (!l->servers) {
		free(ranks);
		goto out;
	}
	memcpy(l->servers, ranks, (size_t)nservers * sizeof(int));
	l->nservers = (size_t)nservers;
	for (int a = 1; a < nservers; a++) /* insertion sort: layouts are small */
		for (int b2 = a; b2 > 0 && l->servers[b2 - 1] > l->servers[b2]; b2--) {
			int x = l->servers[b2];
			l->servers[b2] = l->servers[b2 - 1];
			l->servers[b2 - 1] = x;
		}
	for (int i = 0; i < nservers; i++)
		for (int s = 0; s < nservers; s++)
			if (l->servers[s] == ranks[i])
				srv[i] = s;
	free(ranks);
	snprintf(l->schedule, sizeof(l->schedule), "%s", BP_SCHEDULE_TICKS);
	struct dc_run dr = {&o, srv, nservers, pp, dp};
	rc = bp_method_each_step(ctx, in, out, distca_step, &dr, err);
out:
	free(srv);
	return rc;
}

/* ---- the per-step record ---- */

static const char *const rec_keys[] = {"max_shards", "ping_spans", "tick", "nano", "tolerance", "mean_pairs",
				       "max_before_pairs", "max_after_pairs", "moved_pairs",
				       "a2a_bytes_max", "resend", NULL};

static double **rec_arrays(struct bp_ca_record *r, size_t i)
{
	double **a[] = {&r->tick, &r->nano, &r->eps, &r->mean, &r->max_before, &r->max_after,
			&r->moved, &r->bytes};
	return a[i];
}

static json_t *rec_to_json(const void *p)
{
	struct bp_ca_record *r = (struct bp_ca_record *)p;
	json_t *o = json_object();
	int ok = o != NULL;
	if (r->ping_spans)
		bp_json_set(o, "ping_spans", bp_json_real_array(r->ping_spans, r->nmbs), &ok);
	for (size_t i = 0; i < 8; i++)
		bp_json_set(o, rec_keys[i + 2], bp_json_real_array(*rec_arrays(r, i), r->ncalls),
			    &ok);
	bp_json_set(o, "max_shards", json_integer(r->max_shards), &ok);
	bp_json_set(o, "resend", json_integer(r->resend), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int rec_from_json(void *p, json_t *o, const char *where, struct bp_error *err)
{
	struct bp_ca_record *r = p;
	if (bp_json_check_keys(o, rec_keys, where, err) < 0 ||
	    bp_json_get_int32(o, "max_shards", 1, 0, 1 << 20, &r->max_shards, where, err) < 0)
		return -1;
	/* plans written before non-resend mode resent */
	r->resend = 1;
	if (json_object_get(o, "resend") &&
	    bp_json_get_int32(o, "resend", 1, 0, 1, &r->resend, where, err) < 0)
		return -1;
	size_t n;
	if (json_object_get(o, "ping_spans")) {
		if (bp_json_get_real_array(o, "ping_spans", 0, &r->ping_spans, &r->nmbs, where,
					   err) < 0)
			return -1;
	}
	for (size_t i = 0; i < 8; i++) {
		if (bp_json_get_real_array(o, rec_keys[i + 2], 0, rec_arrays(r, i), &n, where,
					   err) < 0)
			return -1;
		if (i && n != r->ncalls)
			return bp_errorf(err, "%s.%s has %zu entries, tick %zu", where,
					 rec_keys[i + 2], n, r->ncalls);
		r->ncalls = n;
	}
	return 0;
}

struct doc_tick {
	int64_t doc, tick, n;
};

static int cmp_doc_tick(const void *a, const void *b)
{
	const struct doc_tick *x = a, *y = b;
	if (x->doc != y->doc)
		return (x->doc > y->doc) - (x->doc < y->doc);
	return (x->tick > y->tick) - (x->tick < y->tick);
}

/* App. A: per document and tick, no more CA-tasks than
 * max_shards, or than the document has spans (the placement's pieces are shards already). */
static int check_shards(const struct bp_ca_record *r, const struct bp_step *st,
			struct bp_error *err)
{
	size_t nsp = 0;
	for (size_t k = 0; k < st->npipes; k++)
		for (size_t j = 0; j < st->pipes[k].nmbs; j++)
			nsp += st->pipes[k].mbs[j].nspans;
	struct doc_tick *t = bp_calloc(st->nca + 1, sizeof(*t), err);
	struct doc_tick *sp = bp_calloc(nsp + 1, sizeof(*sp), err);
	int rc = -1;
	if (!t || !sp)
		goto out;
	for (size_t i = 0; i < st->nca; i++)
		t[i] = (struct doc_tick){st->ca[i].doc, st->ca[i].tick, 1};
	nsp = 0;
	for (size_t k = 0; k < st->npipes; k++)
		for (size_t j = 0; j < st->pipes[k].nmbs; j++)
			for (size_t q = 0; q < st->pipes[k].mbs[j].nspans; q++)
				sp[nsp++] = (struct doc_tick){st->pipes[k].mbs[j].spans[q].doc, 0, 1};
	qsort(t, st->nca, sizeof(*t), cmp_doc_tick);
	qsort(sp, nsp, sizeof(*sp), cmp_doc_tick);
	for (size_t i = 0, s = 0; i < st->nca;) {
		size_t j = i;
		while (j < st->nca && t[j].doc == t[i].doc && t[j].tick == t[i].tick)
			j++;
		while (s < nsp && sp[s].doc < t[i].doc)
			s++;
		int64_t spans = 0;
		for (size_t q = s; q < nsp && sp[q].doc == t[i].doc; q++)
			spans++;
		int64_t cap = spans > r->max_shards ? spans : r->max_shards;
		if ((int64_t)(j - i) > cap) {
			bp_errorf(err, "document %lld has %zu CA-tasks at tick %lld, more than App. A's "
				  "max_shards %d (and its %lld spans)", (long long)t[i].doc, j - i,
				  (long long)t[i].tick, r->max_shards, (long long)spans);
			goto out;
		}
		i = j;
	}
	rc = 0;
out:
	free(t);
	free(sp);
	return rc;
}

/* The record's ping/pong split must name every micro-batch and a span count inside it; its
 * calls name forward ticks of the step in order. */
static int rec_validate(const void *p, const struct bp_step *st, struct bp_error *err)
{
	const struct bp_ca_record *r = p;
	if (r->ping_spans) {
		size_t at = 0;
		for (size_t k = 0; k < st->npipes; k++)
			for (size_t j = 0; j < st->pipes[k].nmbs; j++, at++) {
				if (at >= r->nmbs)
					return bp_errorf(err, "ping_spans has %zu entries for more "
							 "micro-batches", r->nmbs);
				double v = r->ping_spans[at];
				if (v != floor(v) || v < 0 || v > (double)st->pipes[k].mbs[j].nspans)
					return bp_errorf(err, "ping_spans[%zu] is %g, not a span count "
							 "of pipeline %zu micro-batch %zu", at, v, k, j);
			}
		if (at != r->nmbs)
			return bp_errorf(err, "ping_spans has %zu entries for %zu micro-batches",
					 r->nmbs, at);
	}
	if (r->max_shards > 0 && check_shards(r, st, err) < 0)
		return -1;
	for (size_t i = 0; i < r->ncalls; i++) {
		if (r->tick[i] != floor(r->tick[i]) || r->tick[i] < 0 ||
		    (i && r->tick[i] < r->tick[i - 1]))
			return bp_errorf(err, "call %zu has tick %g (calls go by tick: forward, then "
					 "backward ticks' own)", i, r->tick[i]);
		if (r->nano[i] != 0 && r->nano[i] != 1)
			return bp_errorf(err, "call %zu has nano-batch %g, not 0 or 1", i, r->nano[i]);
		if (!(r->eps[i] > 0 && r->eps[i] < 1))
			return bp_errorf(err, "call %zu has tolerance %g, outside (0, 1)", i,
					 r->eps[i]);
	}
	return 0;
}

static void rec_diff(const void *a, const void *b, char *buf, size_t n)
{
	const struct bp_ca_record *x = a, *y = b;
	double mx = 0, my = 0, bx = 0, by = 0;
	for (size_t i = 0; i < x->ncalls; i++) {
		mx += x->moved[i];
		bx += x->bytes[i];
	}
	for (size_t i = 0; i < y->ncalls; i++) {
		my += y->moved[i];
		by += y->bytes[i];
	}
	buf[0] = 0;
	if (x->resend != y->resend) {
		snprintf(buf, n, "distca %s -> %s", x->resend ? "resend" : "non-resend",
			 y->resend ? "resend" : "non-resend");
		return;
	}
	if (mx != my || bx != by || x->ncalls != y->ncalls)
		snprintf(buf, n, "distca %zu calls, %.0f pairs moved, %.0f buffer bytes -> %zu "
			 "calls, %.0f pairs moved, %.0f buffer bytes", x->ncalls, mx, bx, y->ncalls,
			 my, by);
}

static void rec_release(void *p)
{
	bp_ca_record_release(p);
}

/* The record is the step's tick-schedule decisions (plan.h bp_record_ops.ca). */
static const struct bp_ca_record *rec_ca(const void *p)
{
	return p;
}

const struct bp_record_ops bp_record_distca = {
	.name = "distca",
	.size = sizeof(struct bp_ca_record),
	.to_json = rec_to_json,
	.from_json = rec_from_json,
	.validate = rec_validate,
	.diff = rec_diff,
	.release = rec_release,
	.ca = rec_ca,
};

/* The front end's warning: non-resend steps that fell back to resend (header step 7). */
void bp_distca_warn(const struct bp_plan *p, char *buf, size_t n)
{
	const char *asked = bp_plan_param(p, "resend");
	size_t back = 0;
	buf[0] = 0;
	if (!asked || !strcmp(asked, "1") || (!strcmp(asked, "auto") && p->layouts[0].npipes &&
					      p->layouts[0].pipes[0].sc.pp > 1))
		return;
	for (size_t i = 0; i < p->nsteps; i++) {
		const struct bp_step *st = &p->steps[i];
		if (st->record && st->record_ops == &bp_record_distca &&
		    ((const struct bp_ca_record *)st->record)->resend)
			back++;
	}
	if (back)
		snprintf(buf, n, "%zu of %zu steps fell back to resend: the servers' kept Q, K, V, "
			 "O and LSE would pass the memory cap", back, p->nsteps);
}

/* Its price (cmd/cmd_solve_limits.c), in instructions: per step D pp (40,000 + 10,000
 * log2 S) over S = dp pp servers (its scheduler per tick and nano-batch); once 3 S^2 (servers
 * matched to ranks). Its own work grows with the GPUs. */
#define I_CA_DOC_STAGE 40e3
#define I_CA_DOC_STAGE_LOG 10e3
#define I_CA_SERVER_PAIR 3.0

static void distca_price(const struct bp_price_req *r, struct bp_price *p)
{
	double pp = (double)r->pp, servers = (double)r->dp * pp;
	p->grows = BP_GROWS_GPUS;
	p->own = r->docs * pp * (I_CA_DOC_STAGE + I_CA_DOC_STAGE_LOG * log2(servers + 1.0));
	p->once += I_CA_SERVER_PAIR * servers * servers;
}

static const char *const distca_params[] = {"tolerance", "ca_block", "ca_comm", "pingpong",
					    "escalate", "ca_buffer_bytes", "rank_tokens",
					    "two_sided", "max_shards", "resend", "mb_cut", "bwd_place",
					    NULL};

/* The method's row of the table (plan/method.h struct bp_method). */
BP_METHOD_ROW(distca) = {
	.name = "distca",
	.solve = bp_method_distca,
	.summary = "core attention disaggregated onto in-place servers, greedy comm-aware "
		   "CA-task moves",
	.paper = "DistCA Sec. 3-4, 6.1, App. A, B, E",
	.params = distca_params,
	.param_specs = dc_specs,
	.record = &bp_record_distca,
	.warn = bp_distca_warn,
	.check_params = bp_distca_check_params,
	.check_request = bp_distca_check_request,
	.rank = 130,
	.price = distca_price,
	.mem_tokens_param = "rank_tokens",
};
