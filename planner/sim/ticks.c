/* ticks.c: DistCA's world-synchronous tick schedule (ticks.h; DistCA Sec. 4.1, Fig. 7 and
 * 8; the byte model of DistCA's public code, which the paper does not give). */
#include "ticks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ca_sched.h"
#include "costkinds.h"

struct span_ref {
	int64_t doc, off, len;
	size_t pipe, mb, q; /* q: the span's index in its micro-batch */
};

/* The step's tick-schedule decisions, as its record keeps them (its ops' ca), or NULL. */
static const struct bp_ca_record *step_ca(const struct bp_step *st)
{
	if (!st->record || !st->record_ops || !st->record_ops->ca)
		return NULL;
	return st->record_ops->ca(st->record);
}

/* The record's decisions when the step runs nano-batches (ping-pong), else NULL. */
static const struct bp_ca_record *ca_record(const struct bp_step *st)
{
	const struct bp_ca_record *r = step_ca(st);
	return r && r->ping_spans ? r : NULL;
}

/* The last span of doc starting at or before token at (NULL: none). */
static const struct span_ref *span_at(const struct span_ref *sp, size_t n, int64_t doc,
				      int64_t at)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (sp[mid].doc < doc || (sp[mid].doc == doc && sp[mid].off <= at))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && sp[lo - 1].doc == doc ? &sp[lo - 1] : NULL;
}

/* A step's CA-tasks placed: the span each serves and its stage, per timeline position. */
struct task_info {
	size_t pipe, mb;
	int stage;
	int64_t span_off; /* the span's first token (kv0): with doc, it names the span */
};

struct tick_ctx {
	const struct bp_plan *p;
	const struct bp_step *st;
	const struct bp_layout *l;
	int pp, tp, world;
	size_t m, nticks;
	struct task_info *ti;   /* [nca] */
	size_t *order;          /* [2 * nca]: task indices by timeline position */
	size_t *start;          /* [nticks + 1]: order[start[k] .. start[k+1]) run at k */
	int *srv_place_pipe, *srv_place_stage; /* [nservers]: -1 pipe: a dedicated server */
	int *srv_place_cp;      /* [nservers]: the server's CP index in its pipeline */
	struct span_ref *sp;    /* [nsp]: the step's spans by (doc, offset) */
	size_t nsp;
	struct span_ref *sm;    /* [nsp]: the spans by (doc, micro-batch, offset) */
	int64_t *sm_len;        /* [nsp + 1]: prefix sums of sm's lengths */
	size_t *sm_pipe;        /* [nsp]: sm's indices by (doc, micro-batch, pipeline, offset) */
	int64_t *cover;         /* [nsp + 1]: one call's full coverings of sm (tick_kv_sum) */
	int *nano;              /* [nca]: the task's nano-batch (0 ping, 1 pong) */
	int pingpong;           /* the step's micro-batches run as two nano-batches */
	const double *ping;     /* the record's ping_spans (pipeline-major), or NULL */
	size_t *mb_at;          /* [npipes + 1]: micro-batches before each pipeline */
	size_t *pos;            /* [2 * nca]: each task's forward and backward positions */
	int resend;             /* the step's mode (bp_ticks_resend) */
};

static void ctx_release(struct tick_ctx *c)
{
	free(c->sp);
	free(c->sm);
	free(c->sm_len);
	free(c->sm_pipe);
	free(c->cover);
	free(c->nano);
	free(c->mb_at);
	free(c->pos);
	free(c->ti);
	free(c->order);
	free(c->start);
	free(c->srv_place_pipe);
	free(c->srv_place_stage);
	free(c->srv_place_cp);
}

static int cmp_span_ref(const void *a, const void *b)
{
	const struct span_ref *x = a, *y = b;
	if (x->doc != y->doc)
		return (x->doc > y->doc) - (x->doc < y->doc);
	return (x->off > y->off) - (x->off < y->off);
}

static int cmp_span_mb(const void *a, const void *b)
{
	const struct span_ref *x = a, *y = b;
	if (x->doc != y->doc)
		return (x->doc > y->doc) - (x->doc < y->doc);
	if (x->mb != y->mb)
		return (x->mb > y->mb) - (x->mb < y->mb);
	return (x->off > y->off) - (x->off < y->off);
}

static int cmp_span_pipe(const void *a, const void *b)
{
	const struct span_ref *x = a, *y = b;
	if (x->doc != y->doc || x->mb != y->mb)
		return cmp_span_mb(x, y);
	if (x->pipe != y->pipe)
		return (x->pipe > y->pipe) - (x->pipe < y->pipe);
	return (x->off > y->off) - (x->off < y->off);
}

/* The KV indexes of the spans (tick_flows): by (doc, micro-batch, offset) with prefix
 * lengths, and by pipeline within each (doc, micro-batch). */
static int span_index(struct tick_ctx *c, struct bp_error *err)
{
	size_t n = c->nsp;
	c->sm = bp_calloc(n + 1, sizeof(*c->sm), err);
	c->sm_len = bp_calloc(n + 1, sizeof(int64_t), err);
	c->sm_pipe = bp_calloc(n + 1, sizeof(size_t), err);
	c->cover = bp_calloc(n + 1, sizeof(int64_t), err);
	if (!c->sm || !c->sm_len || !c->sm_pipe || !c->cover)
		return -1;
	memcpy(c->sm, c->sp, n * sizeof(*c->sm));
	qsort(c->sm, n, sizeof(*c->sm), cmp_span_mb);
	/* by pipeline: a copy whose q names the span's place in sm */
	struct span_ref *tmp = bp_calloc(n + 1, sizeof(*tmp), err);
	if (!tmp)
		return -1;
	for (size_t j = 0; j < n; j++) {
		c->sm_len[j + 1] = c->sm_len[j] + c->sm[j].len;
		tmp[j] = c->sm[j];
		tmp[j].q = j;
	}
	qsort(tmp, n, sizeof(*tmp), cmp_span_pipe);
	for (size_t j = 0; j < n; j++)
		c->sm_pipe[j] = tmp[j].q;
	free(tmp);
	return 0;
}

/* The step's shape and each CA-task's (pipeline, micro-batch, stage) and timeline positions
 * (ca_sched.h bp_ca_task_place: a forward task at tick mb + stage and, without backward
 * ticks' own tasks, its backward mirrored). The plan is validated
 * (validate.c check_ca), so every task lies in one span of a disaggregated micro-batch. */
static int ctx_init(struct tick_ctx *c, const struct bp_plan *p, const struct bp_step *st,
		    struct bp_error *err)
{
	memset(c, 0, sizeof(*c));
	c->p = p;
	c->st = st;
	c->l = bp_plan_layout(p, st);
	c->world = p->cluster.gpus;
	if (!c->l->npipes)
		return bp_errorf(err, "a distca-ticks layout without pipelines");
	c->pp = c->l->pipes[0].sc.pp;
	c->tp = c->l->pipes[0].sc.tp;
	for (size_t k = 0; k < st->npipes; k++)
		if (st->pipes[k].nmbs > c->m)
			c->m = st->pipes[k].nmbs;
	c->nticks = bp_ticks_count(c->pp, c->m);
	size_t nsp = 0;
	for (size_t k = 0; k < st->npipes; k++)
		for (size_t j = 0; j < st->pipes[k].nmbs; j++)
			nsp += st->pipes[k].mbs[j].nspans;
	struct span_ref *sp = c->sp = bp_calloc(nsp + 1, sizeof(*sp), err);
	c->nano = bp_calloc(st->nca + 1, sizeof(int), err);
	c->ti = bp_calloc(st->nca + 1, sizeof(*c->ti), err);
	c->order = bp_calloc(2 * st->nca + 1, sizeof(size_t), err);
	c->start = bp_calloc(c->nticks + 2, sizeof(size_t), err);
	c->srv_place_pipe = bp_calloc(c->l->nservers + 1, sizeof(int), err);
	c->srv_place_stage = bp_calloc(c->l->nservers + 1, sizeof(int), err);
	c->srv_place_cp = bp_calloc(c->l->nservers + 1, sizeof(int), err);
	size_t *pos = c->pos = bp_calloc(2 * st->nca + 1, sizeof(size_t), err);
	size_t *mb_at = NULL;
	c->resend = bp_ticks_resend(st);
	if (!c->resend && c->pp > 1)
		return bp_errorf(err, "non-resend mode needs pp 1, not pp %d (DistCA's code: "
				 "with PP the backward resends)", c->pp);
	int rc = -1;
	if (!sp || !c->nano || !c->ti || !c->order || !c->start || !c->srv_place_pipe ||
	    !c->srv_place_stage || !c->srv_place_cp || !pos)
		goto out;
	struct bp_place *places = bp_calloc((size_t)c->world + 1, sizeof(*places), err);
	if (!places)
		goto out;
	/* every server's place, from one pass over the layout (issue 24: a search per server
	 * and per CA-task was 75-85% of distca's planning time) */
	bp_layout_place_all(c->l, c->world, places);
	for (size_t s = 0; s < c->l->nservers; s++) {
		int r = c->l->servers[s];
		struct bp_place pl = r >= 0 && r < c->world ? places[r]
							     : bp_layout_place(c->l, r);
		c->srv_place_pipe[s] = pl.pipe;
		c->srv_place_stage[s] = pl.stage;
		c->srv_place_cp[s] = pl.cp_i;
	}
	free(places);
	nsp = 0;
	for (size_t k = 0; k < st->npipes; k++)
		for (size_t j = 0; j < st->pipes[k].nmbs; j++) {
			const struct bp_mb *mb = &st->pipes[k].mbs[j];
			for (size_t q = 0; q < mb->nspans; q++)
				sp[nsp++] = (struct span_ref){mb->spans[q].doc, mb->spans[q].offset,
							      mb->spans[q].len, k, j, q};
		}
	qsort(sp, nsp, sizeof(*sp), cmp_span_ref);
	c->nsp = nsp;
	if (span_index(c, err) < 0)
		goto out;
	const struct bp_ca_record *nanos = ca_record(st);
	c->pingpong = nanos != NULL;
	mb_at = bp_calloc(st->npipes + 1, sizeof(size_t), err);
	if (!mb_at)
		goto out;
	c->mb_at = mb_at;
	for (size_t k = 0; k + 1 <= st->npipes; k++)
		mb_at[k + 1] = mb_at[k] + st->pipes[k].nmbs;
	if (nanos && nanos->nmbs != mb_at[st->npipes]) {
		bp_errorf(err, "the distca record's ping_spans name %zu micro-batches, the step has "
			  "%zu", nanos->nmbs, mb_at[st->npipes]);
		goto out;
	}
	c->ping = nanos ? nanos->ping_spans : NULL;
	const int own = bp_ca_own_bwd(st->nca ? st->ca[st->nca - 1].tick : -1, c->pp, c->m);
	if (own && !c->resend) {
		bp_errorf(err, "non-resend mode keeps the forward's placement for the backward, but "
			  "the step has backward ticks' own CA-tasks");
		goto out;
	}
	for (size_t t = 0; t < st->nca; t++) {
		const struct bp_ca_task *ca = &st->ca[t];
		/* the span holding the queries (its pipeline owns them); KV [kv0, q1) may come
		 * from other spans of the document (validate.c check_ca) */
		const struct span_ref *s = span_at(sp, nsp, ca->doc, ca->q0);
		if (s && nanos)
			c->nano[t] = (double)s->q >= nanos->ping_spans[mb_at[s->pipe] + s->mb];
		int stage;
		if (!s || bp_ca_task_place(c->pp, c->m, ca->tick, s->mb, own, &stage, &pos[2 * t],
					   &pos[2 * t + 1]) < 0) {
			bp_errorf(err, "ca_tasks[%zu] names no span running at its tick (validate the "
				  "plan first)", t);
			goto out;
		}
		c->ti[t] = (struct task_info){s->pipe, s->mb, stage, ca->kv0};
		for (int d = 0; d < 2; d++)
			if (pos[2 * t + d] != SIZE_MAX)
				c->start[pos[2 * t + d] + 1]++;
	}
	/* counting sort by position, stable: each position keeps the tasks' plan order */
	for (size_t k = 0; k < c->nticks; k++)
		c->start[k + 1] += c->start[k];
	{
		size_t *fill = bp_calloc(c->nticks + 1, sizeof(size_t), err);
		if (!fill)
			goto out;
		for (size_t k = 0; k < 2 * st->nca; k++) {
			size_t q = pos[k];
			if (q != SIZE_MAX) /* not run in that phase (bp_ca_task_place) */
				c->order[c->start[q] + fill[q]++] = k / 2;
		}
		free(fill);
	}
	rc = 0;
out:
	return rc;
}

/* The world rank of TP slice i of server s. */
static int server_rank(const struct tick_ctx *c, int s, int i)
{
	int pipe = c->srv_place_pipe[s];
	if (pipe < 0)
		return c->l->servers[s];
	return bp_lpipe_rank(&c->l->pipes[pipe], c->srv_place_stage[s], c->srv_place_cp[s], i);
}

static size_t pad16(size_t b)
{
	return (b + 15) / 16 * 16;
}

struct bp_ca_bytes bp_ca_bytes_per_token(const struct bp_model *md, int tp, int bwd, int dir,
					 int resend)
{
	const size_t e = 2, hd = (size_t)(md->hidden / md->heads);
	const size_t hq = (size_t)md->heads / (size_t)tp, hkv = (size_t)md->kv_heads / (size_t)tp;
	const size_t q = e * hq * hd, kv = 2 * e * hkv * hd, lse = 4 * hq;
	struct bp_ca_bytes b = {0, 0, 0, 0};
	if (!bwd && dir == 0) {        /* Q, then K and V once per (span, server) */
		b.q_in = (double)pad16(q);
		b.kv_in = (double)kv;
	} else if (!bwd) {             /* O, with its log-sum-exp only in resend mode */
		b.q_out = resend ? (double)pad16(q + lse) : (double)q;
	} else if (dir == 0 && resend) { /* Q, O, dO, LSE; K and V again */
		b.q_in = (double)pad16(3 * q + lse);
		b.kv_in = (double)kv;
	} else if (dir == 0) {         /* non-resend: dO alone, the server kept the rest */
		b.q_in = (double)q;
	} else {                       /* dQ; dK and dV summed on the server */
		b.q_out = (double)q;
		b.kv_out = (double)kv;
	}
	return b;
}

int bp_ticks_resend(const struct bp_step *st)
{
	const struct bp_ca_record *r = step_ca(st);
	return r ? r->resend != 0 : 1;
}

typedef void (*flow_fn)(void *arg, int src, int dst, double bytes);

/* Where one all-to-all's transfers go: emit(arg, src, dst, bytes) each, or, with send set,
 * only the per-rank sums (a long KV prefix then goes through c->cover, tick_kv_sum). */
struct flow_out {
	int dir;
	flow_fn emit;
	void *arg;
	double *send, *recv; /* the sums, or NULL */
	double kvb;          /* bytes per KV token */
	size_t cmin, cmax;   /* c->cover's entries this call touched (cmin > cmax: none) */
};

/* One transfer between a span's owner and a server rank (in: owner to server; out: back). */
static void flow_pair(struct flow_out *f, int owner, int server, double bytes)
{
	int src = f->dir ? server : owner, dst = f->dir ? owner : server;
	if (f->send) {
		f->send[src] += bytes;
		f->recv[dst] += bytes;
	} else {
		f->emit(f->arg, src, dst, bytes);
	}
}

/* The first span of sm at or after (doc, mb, off). */
static size_t sm_lower(const struct tick_ctx *c, int64_t doc, size_t mb, int64_t off)
{
	size_t lo = 0, hi = c->nsp;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct span_ref *x = &c->sm[mid];
		int less = x->doc != doc ? x->doc < doc : x->mb != mb ? x->mb < mb : x->off < off;
		if (less)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The first of sm_pipe at or after (doc, mb, pipe, off). */
static size_t sm_pipe_lower(const struct tick_ctx *c, int64_t doc, size_t mb, size_t pipe,
			    int64_t off)
{
	size_t lo = 0, hi = c->nsp;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct span_ref *x = &c->sm[c->sm_pipe[mid]];
		int less = x->doc != doc ? x->doc < doc : x->mb != mb ? x->mb < mb
			   : x->pipe != pipe ? x->pipe < pipe : x->off < off;
		if (less)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The stage micro-batch mb runs at timeline position k (a forward tick t: t - mb; a
 * backward tick j: mb - j + pp - 1). */
static int stage_at(const struct tick_ctx *c, size_t k, size_t mb)
{
	int bwd;
	size_t phase;
	bp_tick_phase(c->pp, c->m, k, &bwd, &phase);
	return bwd ? (int)((int64_t)mb - (int64_t)phase + c->pp - 1) : (int)(phase - mb);
}

/* A long KV prefix, sums only: spans sm[lo, hi) of one (document, micro-batch) from kv0 to
 * kv_end, all but the last wholly inside it. The server's TP ranks get their bytes at
 * once (prefix lengths less the spans the server itself owns); the owners' side of the
 * whole spans is counted in c->cover and paid when the call ends (tick_cover_sums), the
 * last span's part directly. Byte counts are whole multiples of kvb, so the sums are
 * exact in any order and equal the span-by-span loop's. */
static void tick_kv_sum(const struct tick_ctx *c, struct flow_out *f, int srv, int stage,
			size_t lo, size_t hi, int64_t kv_end)
{
	size_t full = c->sm[hi - 1].off + c->sm[hi - 1].len > kv_end ? hi - 1 : hi;
	int64_t len = c->sm_len[full] - c->sm_len[lo], part = 0;
	c->cover[lo]++;
	c->cover[full]--;
	int pipe = c->srv_place_pipe[srv];
	int self = pipe >= 0 && c->srv_place_stage[srv] == stage && c->srv_place_cp[srv] == 0;
	if (full < hi)
		part = kv_end - c->sm[full].off;
	/* the server's own spans: ranks are distinct (bp_layout_check), so a span's owner is
	 * the server's rank exactly when its pipeline and stage are the server's */
	const struct span_ref *s0 = &c->sm[lo];
	for (size_t x = self ? sm_pipe_lower(c, s0->doc, s0->mb, (size_t)pipe, s0->off) : c->nsp;
	     x < c->nsp; x++) {
		size_t j = c->sm_pipe[x];
		const struct span_ref *sr = &c->sm[j];
		if (sr->doc != s0->doc || sr->mb != s0->mb || sr->pipe != (size_t)pipe ||
		    sr->off >= kv_end)
			break;
		if (j == full) {
			part = 0;
			continue;
		}
		c->cover[j]--;
		c->cover[j + 1]++;
		len -= sr->len;
	}
	if (lo < f->cmin)
		f->cmin = lo;
	if (full > f->cmax) /* full > lo: at least 4 whole spans */
		f->cmax = full;
	double total = (double)len * f->kvb + (double)part * f->kvb;
	const struct bp_lpipe *lp = &c->l->pipes[c->sm[full < hi ? full : lo].pipe];
	for (int i = 0; i < c->tp; i++) {
		int server = server_rank(c, srv, i);
		if (total > 0)
			(f->dir ? f->send : f->recv)[server] += total;
		if (part > 0)
			(f->dir ? f->recv : f->send)[bp_lpipe_rank(lp, stage, 0, i)] +=
				(double)part * f->kvb;
	}
}

/* The owners' side of the whole spans tick_kv_sum counted this call; clears c->cover. */
static void tick_cover_sums(const struct tick_ctx *c, size_t k, struct flow_out *f)
{
	int64_t run = 0;
	for (size_t j = f->cmin; j <= f->cmax && f->cmin <= f->cmax; j++) {
		run += c->cover[j];
		c->cover[j] = 0;
		if (!run || j >= c->nsp)
			continue;
		const struct span_ref *sr = &c->sm[j];
		double bytes = (double)run * (double)sr->len * f->kvb;
		const struct bp_lpipe *lp = &c->l->pipes[sr->pipe];
		int stage = stage_at(c, k, sr->mb);
		for (int i = 0; i < c->tp; i++)
			(f->dir ? f->recv : f->send)[bp_lpipe_rank(lp, stage, 0, i)] += bytes;
	}
}

/* The KV of one run of tasks (server srv, document doc's unit from kv0, micro-batch mb at
 * stage, the longest prefix kv_end): each span of the prefix from the rank that owns it. */
static void run_kv(const struct tick_ctx *c, struct flow_out *f, size_t k, int srv,
		   int64_t doc, size_t mb, int stage, int64_t kv0, int64_t kv_end)
{
	if (!(f->kvb > 0))
		return;
	size_t lo = sm_lower(c, doc, mb, kv0), hi = sm_lower(c, doc, mb, kv_end);
	if (f->send && hi - lo > 4 && stage_at(c, k, mb) == stage) {
		tick_kv_sum(c, f, srv, stage, lo, hi, kv_end);
		return;
	}
	for (size_t j = lo; j < hi; j++) {
		const struct span_ref *sr = &c->sm[j];
		int64_t e = sr->off + sr->len < kv_end ? sr->off + sr->len : kv_end;
		double bytes = (double)(e - sr->off) * f->kvb;
		const struct bp_lpipe *lp = &c->l->pipes[sr->pipe];
		for (int i = 0; i < c->tp; i++) {
			int owner = bp_lpipe_rank(lp, stage, 0, i);
			int server = server_rank(c, srv, i);
			if (owner != server && bytes > 0)
				flow_pair(f, owner, server, bytes);
		}
	}
}

/* Every per-layer transfer of one all-to-all (dir 0 in, 1 out) at timeline position k, of
 * nano-batch nano (-1: both): for each TP slice, each task's query bytes from the rank owning
 * its span, and the KV of each (server, document unit) once (the longest prefix [kv0, kv_end)
 * its tasks need, deduplicated per server as DistCA's code does), each span of that prefix
 * from the rank that owns it (a document placed head-tail over several pipelines, Sec. 6.1,
 * sends KV from each).
 * Self traffic is skipped. */
static void tick_flows(const struct tick_ctx *c, size_t k, int nano, struct flow_out *f)
{
	int bwd;
	size_t phase;
	bp_tick_phase(c->pp, c->m, k, &bwd, &phase);
	struct bp_ca_bytes tb = bp_ca_bytes_per_token(&c->p->model, c->tp, bwd, f->dir,
						      c->resend);
	const struct bp_step *st = c->st;
	f->kvb = f->dir ? tb.kv_out : tb.kv_in;
	f->cmin = SIZE_MAX;
	f->cmax = 0;
	for (size_t a = c->start[k]; a < c->start[k + 1];) {
		size_t t = c->order[a];
		if (nano >= 0 && c->nano[t] != nano) {
			a++;
			continue;
		}
		const struct bp_ca_task *ca = &st->ca[t];
		const struct task_info *ti = &c->ti[t];
		/* the run of tasks with the same server and document unit */
		int64_t kv_end = ca->kv0;
		size_t b = a;
		while (b < c->start[k + 1]) {
			size_t u = c->order[b];
			const struct bp_ca_task *cu = &st->ca[u];
			if (cu->server != ca->server || cu->doc != ca->doc || cu->kv0 != ca->kv0 ||
			    c->ti[u].mb != ti->mb || c->ti[u].stage != ti->stage)
				break;
			b++;
			if (nano >= 0 && c->nano[u] != nano)
				continue;
			if (cu->kv1 > kv_end)
				kv_end = cu->kv1;
			const struct bp_lpipe *lq = &c->l->pipes[c->ti[u].pipe];
			double qb = (double)(cu->q1 - cu->q0) * (f->dir ? tb.q_out : tb.q_in);
			for (int i = 0; i < c->tp && qb > 0; i++) {
				int owner = bp_lpipe_rank(lq, ti->stage, 0, i);
				int server = server_rank(c, ca->server, i);
				if (owner != server)
					flow_pair(f, owner, server, qb);
			}
		}
		run_kv(c, f, k, (int)ca->server, ca->doc, ti->mb, ti->stage, ca->kv0, kv_end);
		a = b;
	}
	if (f->send)
		tick_cover_sums(c, k, f);
}

struct matrix_arg {
	double *m;
	int world;
};

static void matrix_flow(void *arg, int src, int dst, double bytes)
{
	struct matrix_arg *x = arg;
	x->m[(size_t)src * x->world + dst] += bytes;
}

void bp_ticks_release(struct bp_ticks *t)
{
	free(t->tick_us);
	free(t->compute);
	free(t->attn);
	free(t->a2a_us);
	free(t->exposed_us);
	free(t->slow_lin);
	free(t->slow_ca);
	free(t->slow_stage);
	free(t->stage);
	free(t->send);
	free(t->recv);
	free(t->kept);
	memset(t, 0, sizeof(*t));
}

/* The all-to-all time of one direction from its per-rank byte totals: the slowest rank of a
 * TP slice decides (bp_cost_alltoallv), and every slice moves the same pattern. */
static double a2a_time(const struct bp_profile *prof, int slice_ranks, int inter,
		       const double *send, const double *recv, int world, double *tmp_s,
		       double *tmp_r, struct bp_error *err)
{
	double ms = 0.0, mr = 0.0;
	for (int r = 0; r < world; r++) {
		if (send[r] > ms)
			ms = send[r];
		if (recv[r] > mr)
			mr = recv[r];
	}
	memset(tmp_s, 0, (size_t)slice_ranks * sizeof(double));
	memset(tmp_r, 0, (size_t)slice_ranks * sizeof(double));
	tmp_s[0] = ms;
	tmp_r[0] = mr;
	return bp_cost_alltoallv(prof, slice_ranks, inter, tmp_s, tmp_r, err);
}

/* Non-resend mode (the server holds what it received until the backward, as DistCA's code
 * does at pp 1): each CA-task's kept bytes (bp_ca_kept_bytes, all
 * L layers) on every TP slice of its server, from its forward position to its backward
 * position, both included (the backward reads them). */
static int kept_memory(const struct tick_ctx *c, double L, double *kept, struct bp_error *err)
{
	const struct bp_step *st = c->st;
	double qk, kvk, *per = bp_calloc(st->nca + 1, sizeof(double), err);
	if (!per)
		return -1;
	bp_ca_kept_token_bytes(&c->p->model, c->tp, &qk, &kvk);
	bp_ca_kept_bytes(st->ca, st->nca, qk, kvk, per);
	for (size_t t = 0; t < st->nca; t++)
		for (size_t k = c->pos[2 * t]; k <= c->pos[2 * t + 1]; k++)
			for (int i = 0; i < c->tp; i++) {
				int r = server_rank(c, st->ca[t].server, i);
				kept[k * (size_t)c->world + (size_t)r] += L * per[t];
			}
	free(per);
	return 0;
}

/* bp_ticks_eval's per-call state: the cost model, the all-to-all scratch and, per tick,
 * the nano-batches' loads. */
struct eval_ws {
	const struct bp_costmodel *cm;
	int slice, inter; /* ranks per TP slice; whether the cluster spans nodes */
	double L;         /* layers per stage */
	double *send1, *recv1; /* [world]: one all-to-all's per-rank bytes */
	double *tmp_s, *tmp_r; /* [slice]: a2a_time's scratch */
	double *nano_w;   /* [4 * world]: token-wise work of ping, pong; attention of ping,
			   * pong */
};

static void eval_ws_release(struct eval_ws *w)
{
	free(w->nano_w);
	free(w->send1);
	free(w->recv1);
	free(w->tmp_s);
	free(w->tmp_r);
}

/* out's shape and arrays, and the scratch. */
static int eval_alloc(const struct tick_ctx *c, struct bp_costs *costs, struct bp_ticks *out,
		      struct eval_ws *w, struct bp_error *err)
{
	const int world = c->world;
	memset(w, 0, sizeof(*w));
	w->cm = bp_costs_pipe(costs, c->l, 0, err);
	w->slice = bp_layout_ranks(c->l) / c->tp;
	if (w->slice < 1)
		w->slice = 1;
	w->inter = c->p->cluster.gpus > c->p->cluster.gpus_per_node;
	out->pp = c->pp;
	out->world = world;
	out->m = c->m;
	out->nticks = c->nticks;
	out->layers = c->l->pipes[0].stage_layers[0];
	out->resend = c->resend;
	w->L = out->layers;
	size_t cells = c->nticks * (size_t)world + 1;
	out->tick_us = bp_calloc(c->nticks + 1, sizeof(double), err);
	out->a2a_us = bp_calloc(c->nticks + 1, sizeof(double), err);
	out->exposed_us = bp_calloc(c->nticks + 1, sizeof(double), err);
	out->slow_lin = bp_calloc(c->nticks + 1, sizeof(double), err);
	out->slow_ca = bp_calloc(c->nticks + 1, sizeof(double), err);
	out->slow_stage = bp_calloc(c->nticks + 1, sizeof(int), err);
	out->stage = bp_calloc((size_t)world, sizeof(int), err);
	out->compute = bp_calloc(cells, sizeof(double), err);
	out->attn = bp_calloc(cells, sizeof(double), err);
	out->send = bp_calloc(cells, sizeof(double), err);
	out->recv = bp_calloc(cells, sizeof(double), err);
	out->kept = bp_calloc(cells, sizeof(double), err);
	w->nano_w = bp_calloc(4 * (size_t)world, sizeof(double), err);
	w->send1 = bp_calloc((size_t)world, sizeof(double), err);
	w->recv1 = bp_calloc((size_t)world, sizeof(double), err);
	w->tmp_s = bp_calloc((size_t)w->slice, sizeof(double), err);
	w->tmp_r = bp_calloc((size_t)w->slice, sizeof(double), err);
	if (!w->cm || !out->tick_us || !out->a2a_us || !out->exposed_us || !out->slow_lin ||
	    !out->slow_ca || !out->slow_stage || !out->stage || !out->compute ||
	    !out->attn || !out->send || !out->recv || !out->kept || !w->nano_w || !w->send1 ||
	    !w->recv1 || !w->tmp_s || !w->tmp_r)
		return -1;
	for (size_t q = 0; q < c->l->npipes; q++)
		for (int s = 0; s < c->pp; s++)
			for (int i = 0; i < c->tp; i++) {
				int r = bp_lpipe_rank(&c->l->pipes[q], s, 0, i);
				if (r >= 0 && r < world)
					out->stage[r] = s;
			}
	return 0;
}

/* The ping nano-batch's share of micro-batch j of pipeline q's token-wise work: its tokens
 * (1 without ping-pong). */
static double ping_share(const struct tick_ctx *c, size_t q, size_t j, const struct bp_mb *mb)
{
	if (!c->pingpong)
		return 1.0;
	int64_t tok = 0, tp0 = 0;
	size_t np = (size_t)c->ping[c->mb_at[q] + j];
	for (size_t v = 0; v < mb->nspans; v++) {
		tok += mb->spans[v].len;
		if (v < np)
			tp0 += mb->spans[v].len;
	}
	return tok ? (double)tp0 / (double)tok : 1.0;
}

/* Tick k's token-wise work: every stage of every pipeline on its current micro-batch
 * (pipelines with fewer micro-batches run dummies in the timeline of the longest), per
 * rank and per nano-batch. */
static int tick_compute(const struct tick_ctx *c, size_t k, struct bp_ticks *out,
			struct eval_ws *w, struct bp_error *err)
{
	const int world = c->world;
	double *comp = &out->compute[k * world];
	for (size_t q = 0; q < c->st->npipes; q++) {
		const struct bp_pipe *pi = &c->st->pipes[q];
		const struct bp_lpipe *lp = &c->l->pipes[q];
		for (int s = 0; s < c->pp; s++) {
			int bwd;
			size_t phase;
			int64_t j = bp_tick_op(c->pp, c->m, k, s, &bwd, &phase);
			if (j < 0 || (size_t)j >= pi->nmbs)
				continue;
			const struct bp_mb *mb = &pi->mbs[j];
			if (!mb->fwd || !mb->bwd)
				return bp_errorf(err, "pipeline %zu micro-batch %lld has no "
						 "predicted times", q, (long long)j);
			double wk = bwd ? mb->bwd[s] : mb->fwd[s];
			double ping = ping_share(c, q, (size_t)j, mb);
			for (int i = 0; i < c->tp; i++) {
				int r = bp_lpipe_rank(lp, s, 0, i);
				comp[r] += wk;
				w->nano_w[r] += wk * ping;
				w->nano_w[world + r] += wk * (1.0 - ping);
			}
		}
	}
	return 0;
}

/* Tick k's attention served: each task on its server's TP group, all of a stage's
 * layers, per rank and per nano-batch. */
static void tick_attention(const struct tick_ctx *c, size_t k, struct bp_ticks *out,
			   struct eval_ws *w)
{
	const int world = c->world;
	double *att = &out->attn[k * world];
	int bwd;
	size_t phase;
	bp_tick_phase(c->pp, c->m, k, &bwd, &phase);
	for (size_t a = c->start[k]; a < c->start[k + 1]; a++) {
		const struct bp_ca_task *ca = &c->st->ca[c->order[a]];
		double t = w->L * bp_cost_ca_task(w->cm->attn, (double)(ca->q1 - ca->q0),
						  (double)(ca->kv1 - ca->kv0), bwd);
		int n = c->nano[c->order[a]];
		for (int i = 0; i < c->tp; i++) {
			int r = server_rank(c, ca->server, i);
			att[r] += t;
			w->nano_w[(size_t)(2 + n) * world + r] += t;
		}
	}
}

/* Tick k's per-layer all-to-alls, a2a[nano][dir] (nano 0 holds both without ping-pong),
 * with their bytes added to out's; out->a2a_us[k] gets all of them over the layers. */
static int tick_a2a(const struct tick_ctx *c, size_t k, struct bp_ticks *out,
		    struct eval_ws *w, double a2a[2][2], struct bp_error *err)
{
	const int world = c->world;
	double a2a_all = 0.0;
	for (int n = 0; n < (c->pingpong ? 2 : 1); n++)
		for (int dir = 0; dir < 2; dir++) {
			memset(w->send1, 0, (size_t)world * sizeof(double));
			memset(w->recv1, 0, (size_t)world * sizeof(double));
			struct flow_out fo = {.dir = dir, .send = w->send1, .recv = w->recv1};
			tick_flows(c, k, c->pingpong ? n : -1, &fo);
			double t = a2a_time(w->cm->prof, w->slice, w->inter, w->send1, w->recv1,
					    world, w->tmp_s, w->tmp_r, err);
			if (t < 0)
				return -1;
			a2a[n][dir] = t;
			a2a_all += t;
			for (int r = 0; r < world; r++) {
				out->send[k * world + r] += w->send1[r];
				out->recv[k * world + r] += w->recv1[r];
			}
		}
	out->a2a_us[k] = w->L * a2a_all;
	return 0;
}

/* Tick k's time from its loads and all-to-alls. */
static int tick_time(const struct tick_ctx *c, size_t k, struct bp_ticks *out,
		     const struct eval_ws *w, double a2a[2][2], struct bp_error *err)
{
	const int world = c->world;
	const double L = w->L;
	if (c->pingpong) {
		/* per nano-batch (ping 0, pong 1): the slowest rank's token-wise work and
		 * served attention, all layers */
		double lin_n[2] = {0, 0}, ca_n[2] = {0, 0};
		for (int r = 0; r < world; r++)
			for (int n = 0; n < 2; n++) {
				if (w->nano_w[(size_t)n * world + r] > lin_n[n])
					lin_n[n] = w->nano_w[(size_t)n * world + r];
				if (w->nano_w[(size_t)(2 + n) * world + r] > ca_n[n])
					ca_n[n] = w->nano_w[(size_t)(2 + n) * world + r];
			}
		out->slow_lin[k] = lin_n[0] + lin_n[1];
		out->slow_ca[k] = ca_n[0] + ca_n[1];
		/* Fig. 7's slots per layer, world-synchronous (DistCA Sec. 4.1 "Ping-Pong"):
		 * 0 lin_P | out_Q(l-1), 1 lin_Q | in_P, 2 CA_P | in_Q, 3 CA_Q | out_P;
		 * layer 0 has no out_Q(-1), the last layer's out_Q runs after it */
		double lp = lin_n[0] / L, lq = lin_n[1] / L, cp = ca_n[0] / L, cq = ca_n[1] / L;
		double s0 = fmax(lp, a2a[1][1]), rest = fmax(lq, a2a[0][0]) +
			    fmax(cp, a2a[1][0]) + fmax(cq, a2a[0][1]);
		out->tick_us[k] = (L - 1) * (s0 + rest) + lp + rest + a2a[1][1];
		out->exposed_us[k] = out->tick_us[k] - (lin_n[0] + lin_n[1] + ca_n[0] + ca_n[1]);
	} else {
		/* single stream, world-synchronous per layer (DistCA Sec. 6.3's "Single
		 * Stream" ablation) */
		const double *comp = &out->compute[k * world], *att = &out->attn[k * world];
		double worst = 0.0;
		for (int r = 0; r < world; r++)
			if (comp[r] + att[r] > worst) {
				worst = comp[r] + att[r];
				out->slow_lin[k] = comp[r];
				out->slow_ca[k] = att[r];
			}
		out->tick_us[k] = worst + out->a2a_us[k];
		out->exposed_us[k] = out->a2a_us[k];
	}
	const double *comp = &out->compute[k * world];
	double most = -1.0;
	for (int r = 0; r < world; r++)
		if (comp[r] > most) {
			most = comp[r];
			out->slow_stage[k] = out->stage[r];
		}
	if (!isfinite(out->tick_us[k]))
		return bp_errorf(err, "tick %zu has no finite time", k);
	return 0;
}

int bp_ticks_eval(const struct bp_plan *p, const struct bp_step *st, struct bp_costs *costs,
		  struct bp_ticks *out, struct bp_error *err)
{
	struct tick_ctx c;
	struct eval_ws w;
	memset(out, 0, sizeof(*out));
	memset(&w, 0, sizeof(w));
	int rc = -1;
	if (ctx_init(&c, p, st, err) < 0 || eval_alloc(&c, costs, out, &w, err) < 0)
		goto out;
	if (!c.resend && kept_memory(&c, w.L, out->kept, err) < 0)
		goto out;
	for (size_t k = 0; k < c.nticks; k++) {
		double a2a[2][2] = {{0, 0}, {0, 0}};
		memset(w.nano_w, 0, 4 * (size_t)c.world * sizeof(double));
		if (tick_compute(&c, k, out, &w, err) < 0)
			goto out;
		tick_attention(&c, k, out, &w);
		if (tick_a2a(&c, k, out, &w, a2a, err) < 0 ||
		    tick_time(&c, k, out, &w, a2a, err) < 0)
			goto out;
	}
	rc = 0;
out:
	eval_ws_release(&w);
	ctx_release(&c);
	return rc;
}

int bp_ticks_bytes(const struct bp_plan *p, const struct bp_step *st, size_t tick, int dir,
		   double *bytes, struct bp_error *err)
{
	struct tick_ctx c;
	if (ctx_init(&c, p, st, err) < 0) {
		ctx_release(&c);
		return -1;
	}
	int rc = -1;
	if (tick >= c.nticks) {
		bp_errorf(err, "tick %zu of %zu", tick, c.nticks);
		goto out;
	}
	memset(bytes, 0, (size_t)c.world * (size_t)c.world * sizeof(double));
	struct matrix_arg x = {bytes, c.world};
	struct flow_out fo = {.dir = dir != 0, .emit = matrix_flow, .arg = &x};
	tick_flows(&c, tick, -1, &fo);
	rc = 0;
out:
	ctx_release(&c);
	return rc;
}
