/* layout.c: layouts (layout.h): ownership, Megatron's placement, invariants, rank lookup.
 * Called by solve (the request's layout), the plan codec (v1 plans become one Megatron
 * layout), validation, the cost model cache, the engine and report. */
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bp_layout_init(struct bp_layout *l)
{
	memset(l, 0, sizeof(*l));
	snprintf(l->schedule, sizeof(l->schedule), "%s", bp_schedule_default()->name);
	l->vstages = 1;
}

void bp_layout_release(struct bp_layout *l)
{
	for (size_t i = 0; i < l->npipes; i++) {
		free(l->pipes[i].ranks);
		free(l->pipes[i].stage_layers);
	}
	free(l->pipes);
	free(l->servers);
	bp_layout_init(l);
}

int bp_layout_add_pipe(struct bp_layout *l, struct bp_scheme sc, const int *ranks,
		       const int *stage_layers, int layers, int64_t mb_max_tokens,
		       struct bp_error *err)
{
	if (sc.tp < 1 || sc.cp < 1 || sc.pp < 1 || sc.tp > (1 << 20) || sc.cp > (1 << 20) ||
	    sc.pp > (1 << 20) || (int64_t)sc.tp * sc.cp * sc.pp > (1 << 24))
		return bp_errorf(err, "scheme tp %d cp %d pp %d is out of range", sc.tp, sc.cp,
				 sc.pp);
	size_t n = (size_t)sc.tp * sc.cp * sc.pp;
	struct bp_lpipe *np = bp_realloc_array(l->pipes, l->npipes + 1, sizeof(*np), err);
	if (!np)
		return -1;
	l->pipes = np;
	struct bp_lpipe *p = &np[l->npipes];
	memset(p, 0, sizeof(*p));
	p->ranks = bp_calloc(n, sizeof(int), err);
	p->stage_layers = bp_calloc((size_t)sc.pp, sizeof(int), err);
	if (!p->ranks || !p->stage_layers) {
		free(p->ranks);
		free(p->stage_layers);
		return -1;
	}
	l->npipes++;
	p->sc = sc;
	p->mb_max_tokens = mb_max_tokens;
	memcpy(p->ranks, ranks, n * sizeof(int));
	for (int s = 0; s < sc.pp; s++)
		p->stage_layers[s] = stage_layers ? stage_layers[s]
						  : layers / sc.pp + (s < layers % sc.pp);
	return 0;
}

int bp_layout_copy(struct bp_layout *dst, const struct bp_layout *src, struct bp_error *err)
{
	bp_layout_init(dst);
	memcpy(dst->schedule, src->schedule, sizeof(dst->schedule));
	dst->vstages = src->vstages;
	for (size_t i = 0; i < src->npipes; i++) {
		const struct bp_lpipe *p = &src->pipes[i];
		if (bp_layout_add_pipe(dst, p->sc, p->ranks, p->stage_layers, 0, p->mb_max_tokens,
				       err) < 0)
			goto fail;
	}
	if (src->nservers) {
		dst->servers = bp_calloc(src->nservers, sizeof(int), err);
		if (!dst->servers)
			goto fail;
		memcpy(dst->servers, src->servers, src->nservers * sizeof(int));
		dst->nservers = src->nservers;
	}
	return 0;
fail:
	bp_layout_release(dst);
	return -1;
}

int bp_layout_megatron(struct bp_layout *l, struct bp_scheme sc, int dp, int layers,
		       int64_t mb_max_tokens, struct bp_error *err)
{
	if (dp < 1 || sc.tp < 1 || sc.cp < 1 || sc.pp < 1)
		return bp_errorf(err, "parallel degrees must be >= 1 (tp %d cp %d pp %d dp %d)",
				 sc.tp, sc.cp, sc.pp, dp);
	if ((int64_t)sc.tp * sc.cp * sc.pp * dp > (1 << 24))
		return bp_errorf(err, "tp*cp*pp*dp = %lld exceeds %d GPUs",
				 (long long)sc.tp * sc.cp * sc.pp * dp, 1 << 24);
	size_t n = (size_t)sc.tp * sc.cp * sc.pp;
	int *r = bp_calloc(n, sizeof(int), err);
	if (!r)
		return -1;
	int rc = 0;
	for (int d = 0; d < dp && !rc; d++) {
		for (int s = 0; s < sc.pp; s++)
			for (int c = 0; c < sc.cp; c++)
				for (int t = 0; t < sc.tp; t++)
					r[((size_t)s * sc.cp + c) * sc.tp + t] =
						t + sc.tp * (c + sc.cp * (d + dp * s));
		rc = bp_layout_add_pipe(l, sc, r, NULL, layers, mb_max_tokens, err);
	}
	free(r);
	return rc;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

int bp_layout_check(const struct bp_layout *l, int gpus, int gpus_per_node, int layers,
		    struct bp_error *err)
{
	size_t total = 0;
	int *all = NULL, rc = -1;
	const struct bp_schedule *sch = bp_layout_schedule(l);
	if (!sch) {
		char names[128];
		bp_schedule_names(names, sizeof(names));
		return bp_errorf(err, "schedule \"%s\" is not %s", l->schedule, names);
	}
	if (!sch->chunked && l->vstages != 1)
		return bp_errorf(err, "schedule \"%s\" runs one model chunk per rank, not "
				 "virtual_stages %d", l->schedule, l->vstages);
	if (!l->npipes)
		return bp_errorf(err, "has no pipelines");
	for (size_t i = 0; i < l->npipes; i++) {
		const struct bp_lpipe *p = &l->pipes[i];
		int sum = 0;
		for (int s = 0; s < p->sc.pp; s++) {
			if (p->stage_layers[s] < 1)
				return bp_errorf(err, "pipeline %zu stage %d has %d layers", i, s,
						 p->stage_layers[s]);
			sum += p->stage_layers[s];
		}
		if (sum != layers)
			return bp_errorf(err, "pipeline %zu splits %d layers over its stages, the "
					 "model has %d", i, sum, layers);
		if (p->mb_max_tokens < 1)
			return bp_errorf(err, "pipeline %zu has max_microbatch_tokens %lld", i,
					 (long long)p->mb_max_tokens);
		for (int s = 0; s < p->sc.pp; s++)
			for (int c = 0; c < p->sc.cp; c++) {
				int first = bp_lpipe_rank(p, s, c, 0);
				for (int t = 0; t < p->sc.tp; t++) {
					int r = bp_lpipe_rank(p, s, c, t);
					if (r < 0 || r >= gpus)
						return bp_errorf(err, "pipeline %zu rank %d is outside "
								 "the cluster of %d GPUs", i, r,
								 gpus);
					if (r / gpus_per_node != first / gpus_per_node)
						return bp_errorf(err, "pipeline %zu stage %d: TP group "
								 "of ranks %d and %d crosses a node "
								 "boundary (%d GPUs per node)", i, s,
								 first, r, gpus_per_node);
				}
			}
		total += (size_t)p->sc.tp * p->sc.cp * p->sc.pp;
	}
	if (total > (size_t)gpus)
		return bp_errorf(err, "uses %zu ranks but the cluster has %d GPUs", total, gpus);
	all = bp_calloc(total ? total : 1, sizeof(int), err);
	if (!all)
		return -1;
	size_t k = 0;
	for (size_t i = 0; i < l->npipes; i++) {
		const struct bp_lpipe *p = &l->pipes[i];
		size_t n = (size_t)p->sc.tp * p->sc.cp * p->sc.pp;
		memcpy(all + k, p->ranks, n * sizeof(int));
		k += n;
	}
	for (size_t i = 0; i < l->nservers; i++) {
		if (l->servers[i] < 0 || l->servers[i] >= gpus) {
			bp_errorf(err, "attention server rank %d is outside the cluster of %d GPUs",
				  l->servers[i], gpus);
			goto out;
		}
		if (i && l->servers[i] <= l->servers[i - 1]) {
			bp_errorf(err, "attention servers are not distinct ranks in ascending order");
			goto out;
		}
	}
	/* the schedule's rules after the range checks: a server outside the cluster says so */
	if (sch->check_layout && sch->check_layout(l, err) < 0)
		goto out;
	/* Servers may be in place (ranks of pipelines, DistCA Sec. 4.1); pipelines may not
	 * overlap each other. */
	qsort(all, k, sizeof(int), cmp_int);
	for (size_t i = 1; i < k; i++)
		if (all[i] == all[i - 1]) {
			bp_errorf(err, "rank %d is in two pipelines (rank sets overlap)", all[i]);
			goto out;
		}
	rc = 0;
out:
	free(all);
	return rc;
}

struct bp_place bp_layout_place(const struct bp_layout *l, int rank)
{
	struct bp_place pl = {-1, -1, -1, -1, -1};
	for (size_t i = 0; i < l->npipes && pl.pipe < 0; i++) {
		const struct bp_lpipe *p = &l->pipes[i];
		size_t n = (size_t)p->sc.tp * p->sc.cp * p->sc.pp;
		for (size_t k = 0; k < n; k++)
			if (p->ranks[k] == rank) {
				pl.pipe = (int)i;
				pl.tp_i = (int)(k % (size_t)p->sc.tp);
				pl.cp_i = (int)(k / (size_t)p->sc.tp % (size_t)p->sc.cp);
				pl.stage = (int)(k / ((size_t)p->sc.tp * p->sc.cp));
				break;
			}
	}
	for (size_t i = 0; i < l->nservers; i++)
		if (l->servers[i] == rank)
			pl.server = (int)i;
	return pl;
}

void bp_layout_place_all(const struct bp_layout *l, int world, struct bp_place *out)
{
	for (int r = 0; r < world; r++)
		out[r] = (struct bp_place){-1, -1, -1, -1, -1};
	/* the first pipeline holding a rank, as bp_layout_place's search finds it */
	for (size_t i = l->npipes; i-- > 0;) {
		const struct bp_lpipe *p = &l->pipes[i];
		size_t n = (size_t)p->sc.tp * p->sc.cp * p->sc.pp;
		for (size_t k = n; k-- > 0;) {
			int r = p->ranks[k];
			if (r < 0 || r >= world)
				continue;
			out[r].pipe = (int)i;
			out[r].tp_i = (int)(k % (size_t)p->sc.tp);
			out[r].cp_i = (int)(k / (size_t)p->sc.tp % (size_t)p->sc.cp);
			out[r].stage = (int)(k / ((size_t)p->sc.tp * p->sc.cp));
		}
	}
	for (size_t i = 0; i < l->nservers; i++) /* the last server entry, as there */
		if (l->servers[i] >= 0 && l->servers[i] < world)
			out[l->servers[i]].server = (int)i;
}

/* Do the ranks r[0..n) lie on more than one node? */
static int spans_nodes(const int *r, size_t n, size_t stride, int gpn)
{
	for (size_t i = 1; i < n; i++)
		if (r[i * stride] / gpn != r[0] / gpn)
			return 1;
	return 0;
}

int bp_lpipe_tp_inter(const struct bp_lpipe *p, int gpn)
{
	size_t groups = (size_t)p->sc.cp * p->sc.pp;
	for (size_t g = 0; g < groups; g++)
		if (spans_nodes(p->ranks + g * p->sc.tp, (size_t)p->sc.tp, 1, gpn))
			return 1;
	return 0;
}

int bp_lpipe_cp_inter(const struct bp_lpipe *p, int gpn)
{
	size_t n = (size_t)p->sc.tp * p->sc.cp;
	for (int s = 0; s < p->sc.pp; s++)
		if (spans_nodes(p->ranks + (size_t)s * n, n, 1, gpn))
			return 1;
	return 0;
}

int bp_lpipe_pp_inter(const struct bp_lpipe *p, int gpn)
{
	size_t n = (size_t)p->sc.tp * p->sc.cp;
	for (int s = 0; s + 1 < p->sc.pp; s++)
		for (size_t k = 0; k < n; k++)
			if (p->ranks[s * n + k] / gpn != p->ranks[(s + 1) * n + k] / gpn)
				return 1;
	return 0;
}

int bp_layout_sync_inter(const struct bp_layout *l, size_t pipe, int gpn)
{
	const struct bp_lpipe *p = &l->pipes[pipe];
	size_t n = (size_t)p->sc.tp * p->sc.cp;
	/* the pipeline's own CP replicas */
	if (bp_lpipe_cp_inter(p, gpn))
		return 1;
	/* every pipeline of the same tp and pp holds the same parameters whatever its cp
	 * (costmodel.h sync_ranks): the sync group crosses a node when any of their ranks of a
	 * stage lies on another node than this pipeline's */
	for (size_t j = 0; j < l->npipes; j++) {
		const struct bp_lpipe *q = &l->pipes[j];
		size_t m = (size_t)q->sc.tp * q->sc.cp;
		if (j == pipe || q->sc.tp != p->sc.tp || q->sc.pp != p->sc.pp)
			continue;
		for (int s = 0; s < p->sc.pp; s++)
			for (size_t k = 0; k < m; k++)
				if (p->ranks[s * n] / gpn != q->ranks[s * m + k] / gpn)
					return 1;
	}
	return 0;
}

const struct bp_schedule *bp_layout_schedule(const struct bp_layout *l)
{
	return bp_schedule_find(l->schedule);
}

int bp_layout_homogeneous(const struct bp_layout *l)
{
	for (size_t i = 1; i < l->npipes; i++) {
		const struct bp_lpipe *a = &l->pipes[0], *b = &l->pipes[i];
		if (a->sc.tp != b->sc.tp || a->sc.cp != b->sc.cp || a->sc.pp != b->sc.pp ||
		    memcmp(a->stage_layers, b->stage_layers, (size_t)a->sc.pp * sizeof(int)))
			return 0;
	}
	return 1;
}

int bp_layout_ranks(const struct bp_layout *l)
{
	int n = 0;
	for (size_t i = 0; i < l->npipes; i++)
		n += l->pipes[i].sc.tp * l->pipes[i].sc.cp * l->pipes[i].sc.pp;
	for (size_t i = 0; i < l->nservers; i++)
		if (bp_layout_place(l, l->servers[i]).pipe < 0)
			n++;
	return n;
}

/* "2 x <tp 2 cp 1 pp 2>, 1 x <tp 4 cp 1 pp 2>, 1f1b, cap 8192" (runs of equal schemes). */
void bp_layout_describe(const struct bp_layout *l, char *buf, size_t n)
{
	size_t k = 0;
	buf[0] = 0;
	for (size_t i = 0; i < l->npipes && k < n;) {
		size_t j = i;
		while (j < l->npipes && !memcmp(&l->pipes[j].sc, &l->pipes[i].sc,
						sizeof(l->pipes[i].sc)))
			j++;
		k += (size_t)snprintf(buf + k, n - k, "%s%zu x <tp %d cp %d pp %d>", i ? ", " : "",
				      j - i, l->pipes[i].sc.tp, l->pipes[i].sc.cp,
				      l->pipes[i].sc.pp);
		i = j;
	}
	if (k < n && l->vstages > 1)
		k += (size_t)snprintf(buf + k, n - k, ", %s v %d", l->schedule, l->vstages);
	else if (k < n)
		k += (size_t)snprintf(buf + k, n - k, ", %s", l->schedule);
	if (k < n)
		k += (size_t)snprintf(buf + k, n - k, ", cap %lld",
				      l->npipes ? (long long)l->pipes[0].mb_max_tokens : 0LL);
	if (k < n && l->nservers)
		snprintf(buf + k, n - k, ", %zu attention servers", l->nservers);
}
