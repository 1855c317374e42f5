/* plan.c: plan ownership (plan.h): init, release, parameters, layouts, micro-batches and
 * method-owned records. Prediction lives in predict.c, the invariants in validate.c, the
 * codec in plan_json.c. */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

void bp_plan_init(struct bp_plan *p)
{
	memset(p, 0, sizeof(*p));
}

void bp_mb_release(struct bp_mb *mb)
{
	free(mb->spans);
	free(mb->sparse_k);
	free(mb->fwd);
	free(mb->bwd);
	memset(mb, 0, sizeof(*mb));
}

void bp_step_release(struct bp_step *st)
{
	for (size_t i = 0; i < st->npipes; i++) {
		struct bp_pipe *pi = &st->pipes[i];
		for (size_t j = 0; j < pi->nmbs; j++)
			bp_mb_release(&pi->mbs[j]);
		free(pi->mbs);
		free(pi->busy_us);
		free(pi->peak_mem);
	}
	free(st->pipes);
	free(st->docs);
	free(st->delayed);
	free(st->ca);
	if (st->record && st->record_ops && st->record_ops->release)
		st->record_ops->release(st->record);
	free(st->record);
}

void bp_plan_release(struct bp_plan *p)
{
	for (size_t i = 0; i < p->nsteps; i++)
		bp_step_release(&p->steps[i]);
	free(p->steps);
	free(p->params);
	for (size_t i = 0; i < p->nlayouts; i++)
		bp_layout_release(&p->layouts[i]);
	free(p->layouts);
	free(p->carried);
	bp_plan_init(p);
}

void bp_plan_free(struct bp_plan *p)
{
	if (!p)
		return;
	bp_plan_release(p);
	free(p);
}

int bp_plan_set_param(struct bp_plan *p, const char *key, const char *value,
		      struct bp_error *err)
{
	size_t i = 0;
	while (i < p->nparams && strcmp(p->params[i].key, key) < 0)
		i++;
	if (i == p->nparams || strcmp(p->params[i].key, key)) {
		struct bp_param *np =
			bp_realloc_array(p->params, p->nparams + 1, sizeof(*np), err);
		if (!np)
			return -1;
		p->params = np;
		memmove(&np[i + 1], &np[i], (p->nparams - i) * sizeof(*np));
		p->nparams++;
		memset(&np[i], 0, sizeof(np[i]));
	}
	if (bp_strlcpy_checked(p->params[i].key, key, sizeof(p->params[i].key),
			       "parameter name", err) < 0 ||
	    bp_strlcpy_checked(p->params[i].value, value, sizeof(p->params[i].value),
			       "parameter value", err) < 0)
		return -1;
	return 0;
}

const char *bp_plan_param(const struct bp_plan *p, const char *key)
{
	for (size_t i = 0; i < p->nparams; i++)
		if (!strcmp(p->params[i].key, key))
			return p->params[i].value;
	return NULL;
}

int bp_pipe_add_mb(struct bp_pipe *pipe, const struct bp_span *spans, size_t n,
		   enum bp_shard shard, struct bp_error *err)
{
	struct bp_mb *nm = bp_realloc_array(pipe->mbs, pipe->nmbs + 1, sizeof(*nm), err);
	if (!nm)
		return -1;
	pipe->mbs = nm;
	struct bp_mb *mb = &nm[pipe->nmbs];
	memset(mb, 0, sizeof(*mb));
	mb->spans = bp_calloc(n, sizeof(*spans), err);
	if (!mb->spans)
		return -1;
	memcpy(mb->spans, spans, n * sizeof(*spans));
	mb->nspans = n;
	mb->shard = shard;
	for (size_t i = 0; i < n; i++)
		mb->tokens += spans[i].len;
	pipe->nmbs++;
	return 0;
}

int bp_mb_copy_decisions(struct bp_mb *dst, const struct bp_mb *src, int layers,
			 struct bp_error *err)
{
	memset(dst, 0, sizeof(*dst));
	dst->spans = bp_calloc(src->nspans ? src->nspans : 1, sizeof(*src->spans), err);
	if (!dst->spans)
		return -1;
	if (src->nspans)
		memcpy(dst->spans, src->spans, src->nspans * sizeof(*src->spans));
	dst->nspans = src->nspans;
	dst->shard = src->shard;
	dst->attn = src->attn;
	dst->sparse_block = src->sparse_block;
	if (src->sparse_k) {
		dst->sparse_k = bp_calloc((size_t)layers, sizeof(int), err);
		if (!dst->sparse_k)
			return -1;
		memcpy(dst->sparse_k, src->sparse_k, (size_t)layers * sizeof(int));
	}
	for (size_t i = 0; i < src->nspans; i++)
		dst->tokens += src->spans[i].len;
	return 0;
}

void *bp_step_set_record(struct bp_step *st, const struct bp_record_ops *ops,
			 struct bp_error *err)
{
	if (st->record && st->record_ops && st->record_ops->release)
		st->record_ops->release(st->record);
	free(st->record);
	st->record = NULL;
	st->record_ops = NULL;
	void *r = bp_calloc(1, ops->size, err);
	if (!r)
		return NULL;
	st->record = r;
	st->record_ops = ops;
	return r;
}

int bp_plan_add_layout(struct bp_plan *p, struct bp_layout *l, struct bp_error *err)
{
	struct bp_layout *nl = bp_realloc_array(p->layouts, p->nlayouts + 1, sizeof(*nl), err);
	if (!nl)
		return -1;
	p->layouts = nl;
	nl[p->nlayouts] = *l;
	bp_layout_init(l);
	return (int)p->nlayouts++;
}

int bp_plan_add_megatron(struct bp_plan *p, struct bp_scheme sc, int dp, int64_t cap,
			 struct bp_error *err)
{
	struct bp_layout l;
	bp_layout_init(&l);
	int rc = bp_layout_megatron(&l, sc, dp, p->model.layers, cap, err);
	if (!rc)
		rc = bp_plan_add_layout(p, &l, err);
	bp_layout_release(&l);
	return rc;
}

int64_t bp_plan_mb_cap(const struct bp_plan *p)
{
	int64_t cap = 0;
	for (size_t i = 0; i < p->nlayouts; i++)
		for (size_t k = 0; k < p->layouts[i].npipes; k++)
			if (p->layouts[i].pipes[k].mb_max_tokens > cap)
				cap = p->layouts[i].pipes[k].mb_max_tokens;
	return cap;
}

void bp_plan_set_mb_cap(struct bp_plan *p, int64_t cap)
{
	for (size_t i = 0; i < p->nlayouts; i++)
		for (size_t k = 0; k < p->layouts[i].npipes; k++)
			p->layouts[i].pipes[k].mb_max_tokens = cap;
}

int bp_plan_uniform(const struct bp_plan *p, struct bp_scheme *sc, int *dp)
{
	if (!p->nlayouts)
		return 0;
	const struct bp_layout *l0 = &p->layouts[0];
	for (size_t i = 0; i < p->nlayouts; i++) {
		const struct bp_layout *l = &p->layouts[i];
		if (!l->npipes || !bp_layout_homogeneous(l) || l->npipes != l0->npipes ||
		    memcmp(&l->pipes[0].sc, &l0->pipes[0].sc, sizeof(l0->pipes[0].sc)))
			return 0;
	}
	*sc = l0->pipes[0].sc;
	*dp = (int)l0->npipes;
	return 1;
}

int bp_cluster_check(const struct bp_cluster *c, struct bp_error *err)
{
	if (c->gpus < 1)
		return bp_errorf(err, "the cluster needs at least one GPU (got %d)", c->gpus);
	if (c->gpus_per_node < 1)
		return bp_errorf(err, "gpus per node must be >= 1 (got %d)", c->gpus_per_node);
	if (c->gpus > c->gpus_per_node && c->gpus % c->gpus_per_node)
		return bp_errorf(err, "%d GPUs do not fill nodes of %d", c->gpus,
				 c->gpus_per_node);
	return 0;
}

int bp_sync_known(const char *name)
{
	return !strcmp(name, BP_SYNC_DP_ALLREDUCE) || !strcmp(name, BP_SYNC_HYD_PULLPUSH) ||
	       !strcmp(name, BP_SYNC_HYD_PULLPUSH_SERIAL);
}

static int cmp_doc_id(const void *a, const void *b)
{
	int64_t x = ((const struct bp_doc *)a)->id, y = ((const struct bp_doc *)b)->id;
	return (x > y) - (x < y);
}

int bp_doc_index_build(struct bp_doc_index *m, const struct bp_plan *p, struct bp_error *err)
{
	size_t n = 0;
	m->d = NULL;
	m->n = 0;
	for (size_t i = 0; i < p->nsteps; i++)
		n += p->steps[i].ndocs;
	m->d = bp_calloc(n + p->ncarried + 1, sizeof(*m->d), err);
	if (!m->d)
		return -1;
	int sorted = 1; /* ids ascend in every plan solve writes, carried ones first */
	for (size_t i = 0; i < p->ncarried; i++) {
		m->d[m->n] = p->carried[i].d;
		sorted &= m->n == 0 || m->d[m->n - 1].id < m->d[m->n].id;
		m->n++;
	}
	for (size_t i = 0; i < p->nsteps; i++)
		for (size_t k = 0; k < p->steps[i].ndocs; k++) {
			m->d[m->n] = p->steps[i].docs[k];
			sorted &= m->n == 0 || m->d[m->n - 1].id < m->d[m->n].id;
			m->n++;
		}
	if (!sorted)
		qsort(m->d, m->n, sizeof(*m->d), cmp_doc_id);
	return 0;
}

const struct bp_doc *bp_doc_index_find(const struct bp_doc_index *m, int64_t id)
{
	struct bp_doc key = {.id = id};
	return m->n ? bsearch(&key, m->d, m->n, sizeof(*m->d), cmp_doc_id) : NULL;
}
