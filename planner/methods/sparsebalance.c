/* sparsebalance.c: the "sparsebalance" and "sb-lbb" methods, SparseBalance (the SparseBalance
 * paper, Sec. IV) over MoBA block-sparse attention. Called through the method table.
 *
 * Per global batch, in plan order (our offline replay of what the paper does online, per
 * layer, during training):
 *   1. Batching (sb_batching): "sab", Sparsity-Aware Batching (Sec. IV-C, Alg. 2): each
 *      sample's weight W = Perf.predict(L, k~) at the Spar budget k~ of its length bin, then
 *      a balanced partition of W over the DP ranks and, inside each, over its micro-batches
 *      (LPT, our choice for the paper's bin_packing); "lbb", the same with W = L (Sec. V-B3's
 *      LBB); "default", Megatron's: contiguous DP shares, mbs samples per micro-batch in load
 *      order; or the name of another packing-only method, whose packing DST then runs over.
 *   2. Dynamic Sparsity Tuning (Sec. IV-A, Alg. 1) unless sb_dst=0 (then k = k_base, MoBA's
 *      fixed budget): T_j = predicted per-layer time at k_base of every micro-batch of the
 *      step (all DP pipelines), T_anchor = phi(T) (Eq. 3), k_anchor = align(x_j, T_anchor)
 *      (Eq. 9), per layer k_final = max(k_anchor, k_cov(p)) (Eq. 5-7 in our mincov reading,
 *      sparse_dst.h bp_sb_kfinal), with k_cov from the coverage model (sb_coverage):
 *      none-upper, none-lower, synthetic.
 *   3. Spar (Alg. 2 line 2): per length bin an exponential moving average (sb_ema) of the
 *      layer-mean k_final of the micro-batches holding a document of that bin, in plan order,
 *      refreshed every step; step s's SAB uses the state after step s - 1.
 * The plan gets per micro-batch the per-layer budgets (clamped to the blocks of its longest
 * span: more blocks than exist select them all) and per step a record "sparsebalance" with
 * T_anchor, every micro-batch's k_anchor, the Spar state used and the accuracy proxies. */
#include "method.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costkinds.h"
#include "jsonutil.h"
#include "pack.h"
#include "sparse_dst.h"

/* ---- the per-step record ---- */

struct sb_rec {
	double anchor_us;   /* T_anchor of Eq. 3, per layer */
	int k_base, dst;
	int *k_anchor;      /* [nmb] in plan order (pipelines, then micro-batches); owned */
	size_t nmb;
	double *ema_k;      /* [nbins] the Spar state this step's batching used; owned */
	size_t nbins;
	int64_t compressed, expanded, pairs; /* (micro-batch, layer) pairs vs k_base */
	double cov_drop_mean; /* mean C(k_base) - C(k_final) over compressed pairs */
};

static void rec_release(void *r)
{
	struct sb_rec *h = r;
	free(h->k_anchor);
	free(h->ema_k);
	h->k_anchor = NULL;
	h->ema_k = NULL;
}

static json_t *rec_to_json(const void *r)
{
	const struct sb_rec *h = r;
	json_t *o = json_object(), *ka = json_array();
	int ok = o && ka;
	for (size_t i = 0; i < h->nmb; i++)
		bp_json_append(ka, json_integer(h->k_anchor[i]), &ok);
	bp_json_set(o, "anchor_us", bp_json_real(h->anchor_us), &ok);
	bp_json_set(o, "k_base", json_integer(h->k_base), &ok);
	bp_json_set(o, "dst", json_integer(h->dst), &ok);
	bp_json_set(o, "k_anchor", ka, &ok);
	bp_json_set(o, "ema_k", bp_json_real_array(h->ema_k, h->nbins), &ok);
	bp_json_set(o, "compressed", json_integer(h->compressed), &ok);
	bp_json_set(o, "expanded", json_integer(h->expanded), &ok);
	bp_json_set(o, "pairs", json_integer(h->pairs), &ok);
	bp_json_set(o, "coverage_drop_mean", bp_json_real(h->cov_drop_mean), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int rec_from_json(void *r, json_t *o, const char *where, struct bp_error *err)
{
	static const char *const keys[] = {"kind", "anchor_us", "k_base", "dst", "k_anchor",
					   "ema_k", "compressed", "expanded", "pairs",
					   "coverage_drop_mean", NULL};
	struct sb_rec *h = r;
	if (bp_json_check_keys(o, keys, where, err) < 0 ||
	    bp_json_get_real(o, "anchor_us", 1, 0, 1e300, &h->anchor_us, where, err) < 0 ||
	    bp_json_get_int32(o, "k_base", 1, 1, 1 << 20, &h->k_base, where, err) < 0 ||
	    bp_json_get_int32(o, "dst", 1, 0, 1, &h->dst, where, err) < 0 ||
	    bp_json_get_int(o, "compressed", 1, 0, INT64_MAX, &h->compressed, where, err) < 0 ||
	    bp_json_get_int(o, "expanded", 1, 0, INT64_MAX, &h->expanded, where, err) < 0 ||
	    bp_json_get_int(o, "pairs", 1, 0, INT64_MAX, &h->pairs, where, err) < 0 ||
	    bp_json_get_real(o, "coverage_drop_mean", 1, 0, 1, &h->cov_drop_mean, where, err) < 0 ||
	    bp_json_get_real_array(o, "ema_k", 0, &h->ema_k, &h->nbins, where, err) < 0)
		return -1;
	json_t *ka = bp_json_get_array(o, "k_anchor", where, err);
	if (!ka)
		return -1;
	h->nmb = json_array_size(ka);
	h->k_anchor = bp_calloc(h->nmb + 1, sizeof(*h->k_anchor), err);
	if (!h->k_anchor)
		return -1;
	for (size_t i = 0; i < h->nmb; i++) {
		json_t *v = json_array_get(ka, i);
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > (1 << 20))
			return bp_errorf(err, "%s.k_anchor[%zu] is not an integer in [1, 1048576]",
					 where, i);
		h->k_anchor[i] = (int)json_integer_value(v);
	}
	if (h->compressed + h->expanded > h->pairs)
		return bp_errorf(err, "%s: compressed + expanded exceed pairs", where);
	return 0;
}

static int longest_blocks(const struct bp_mb *mb)
{
	int64_t longest = 0;
	for (size_t i = 0; i < mb->nspans; i++)
		if (mb->spans[i].len > longest)
			longest = mb->spans[i].len;
	return (int)((longest + mb->sparse_block - 1) / mb->sparse_block);
}

/* k_final against k_anchor (sparse_dst.h bp_sb_kfinal's rule): with DST, a micro-batch whose
 * anchor is at or above k_base runs k_anchor, one below it runs between k_anchor and k_base;
 * without DST k_base; all clamped to the blocks of the longest span. The hook sees the step
 * only, not the model's layer count, so it checks layer 0 (every model has one); the method
 * writes every layer by the same rule. */
static int rec_validate(const void *r, const struct bp_step *st, struct bp_error *err)
{
	const struct sb_rec *h = r;
	size_t j = 0;
	for (size_t q = 0; q < st->npipes; q++)
		for (size_t i = 0; i < st->pipes[q].nmbs; i++, j++) {
			const struct bp_mb *mb = &st->pipes[q].mbs[i];
			if (j >= h->nmb)
				continue;
			if (mb->attn != BP_ATTN_SPARSE || !mb->sparse_k)
				return bp_errorf(err, "sparsebalance record: pipeline %zu micro-batch "
						 "%zu is not sparse", q, i);
			int nb = longest_blocks(mb), ka = h->k_anchor[j];
			int lo = ka, hi = ka;
			if (!h->dst)
				lo = hi = h->k_base;
			else if (ka < h->k_base)
				hi = h->k_base;
			lo = lo < nb ? lo : nb;
			hi = hi < nb ? hi : nb;
			if (mb->sparse_k[0] < lo || mb->sparse_k[0] > hi)
				return bp_errorf(err, "sparsebalance record: pipeline %zu micro-batch "
						 "%zu layer 0: budget %d is outside [%d, %d] (k_anchor "
						 "%d, k_base %d)", q, i, mb->sparse_k[0], lo, hi, ka,
						 h->k_base);
		}
	if (j != h->nmb)
		return bp_errorf(err, "sparsebalance record has %zu k_anchor entries for %zu "
				 "micro-batches", h->nmb, j);
	return 0;
}

static void rec_diff(const void *a, const void *b, char *buf, size_t n)
{
	const struct sb_rec *x = a, *y = b;
	buf[0] = 0;
	if (x->anchor_us != y->anchor_us)
		snprintf(buf, n, "T_anchor %.3f -> %.3f us", x->anchor_us, y->anchor_us);
	else if (x->compressed != y->compressed || x->expanded != y->expanded)
		snprintf(buf, n, "compressed/expanded layers %lld/%lld -> %lld/%lld",
			 (long long)x->compressed, (long long)x->expanded,
			 (long long)y->compressed, (long long)y->expanded);
}

const struct bp_record_ops bp_record_sparsebalance = {
	.name = "sparsebalance",
	.size = sizeof(struct sb_rec),
	.to_json = rec_to_json,
	.from_json = rec_from_json,
	.validate = rec_validate,
	.diff = rec_diff,
	.release = rec_release,
};

/* ---- configuration ---- */

enum batching { BATCH_SAB, BATCH_LBB, BATCH_DEFAULT, BATCH_OTHER };

/* Synthetic coverage of one (past chunks m, k90): C at every budget of K and at k_base. */
struct cov_entry {
	int64_t m;
	int k90;
	double *c; /* [nk + 1]: C(K[i]) (1 for K[i] > k_base), then C(k_base); owned */
};

/* The synthetic coverage cache: open addressing over (m, k90), m = -1 empty. Its values also
 * depend on the budget set and k_base, which a run keeps, so a run's windows share one
 * (struct sb_state): an alpha solve (bp_sb_syn_solve) happens once per key per run, not
 * once per window. */
struct cov_cache {
	struct cov_entry *tab; /* owned, ncap slots */
	size_t ncap, nused;
	struct bp_sb_syn syn; /* the solves' tables, shared by every key (sparse_dst.h) */
};

static void cov_cache_release(struct cov_cache *cc)
{
	for (size_t i = 0; cc->tab && i < cc->ncap; i++)
		free(cc->tab[i].c);
	free(cc->tab);
	bp_sb_syn_free(&cc->syn);
	memset(cc, 0, sizeof(*cc));
}

struct sb {
	const struct bp_costmodel *cm;
	const struct bp_sparse_table *t;
	int block, k_base, layers, dst, mbs, exact, fwd_only;
	int *kset; /* owned */
	size_t nk;
	enum bp_sb_anchor anchor;
	double p, k90_lo, k90_hi, slope, ema_w;
	enum bp_sb_cov cov;
	enum batching batching;
	const struct bp_method *other;
	uint64_t seed;
	int64_t cap;
	const struct bp_sb_coverage *mcov; /* MEASURED: borrowed from ctx->input */
	size_t mcov_ip;                    /* MEASURED: index of sb_p in its p list */
	double *ema; /* [t->nx] Spar state, updated after every step's DST; owned */
	double *pub; /* [t->nx] the state SAB reads, refreshed from ema every `refresh` steps */
	int refresh, kk;
	struct cov_cache own, *cc; /* the coverage cache: cc (the run's) or own */
};

static void sb_release(struct sb *c)
{
	free(c->kset);
	free(c->ema);
	free(c->pub);
	cov_cache_release(&c->own);
}

static int param_str(struct bp_plan *p, const char *key, const char *def, const char **out,
		     struct bp_error *err)
{
	const char *v = bp_plan_param(p, key);
	if (!v) {
		if (bp_plan_set_param(p, key, def, err) < 0)
			return -1;
		v = bp_plan_param(p, key);
	}
	*out = v;
	return 0;
}

/* sb_coverage=measured:FILE: the front end read FILE into ctx->input (struct bp_sb_coverage);
 * it must be for this block, k_base, layer count and p. The plan records the file's sha256
 * (its first 16 hex digits), never its path. */
static int sb_measured(struct sb *c, const struct bp_method_ctx *ctx, struct bp_plan *out,
		       const char *s, struct bp_error *err)
{
	const struct bp_sb_coverage *cv = ctx->input;
	if (!cv || !cv->nbins)
		return bp_errorf(err, "sb_coverage '%s': no coverage file was read", s);
	if (strcmp(cv->model, out->model.name))
		return bp_errorf(err, "coverage file is for model '%s', the plan's model is '%s' "
				 "(a gate's coverage is the model's own)", cv->model,
				 out->model.name);
	if (cv->block != c->block || cv->k_base != c->k_base)
		return bp_errorf(err, "coverage file is for block %d k_base %d, the plan uses "
				 "block %d k_base %d", cv->block, cv->k_base, c->block, c->k_base);
	if (cv->layers != c->layers)
		return bp_errorf(err, "coverage file has %d layers, the model %d", cv->layers,
				 c->layers);
	size_t ip = cv->np;
	for (size_t i = 0; i < cv->np; i++)
		if (fabs(cv->p[i] - c->p) < 1e-9)
			ip = i;
	if (ip == cv->np)
		return bp_errorf(err, "coverage file has no samples for sb_p %g", c->p);
	c->cov = BP_SB_COV_MEASURED;
	c->mcov = cv;
	c->mcov_ip = ip;
	char v[32];
	snprintf(v, sizeof(v), "measured:%.16s", cv->sha);
	return bp_plan_set_param(out, "sb_coverage", v, err);
}

int bp_sb_check_request(struct bp_scheme sc, const struct bp_model *m, enum bp_shard shard,
			struct bp_error *err)
{
	(void)m;
	(void)shard;
	if (sc.cp != 1)
		return bp_errorf(err, "sparse attention needs cp 1 (the sparse table is measured "
				 "on whole documents), not cp %d", sc.cp);
	return 0;
}

/* sparsebalance's (and sb-lbb's) typed parameters (their rows' param_specs); the text
 * ones (sb_k_set, sb_anchor, sb_coverage, sb_k90, sb_cardinality, sb_time, sb_batching,
 * sb_packer) keep param_str and their own messages. */
static const struct bp_param_spec sb_specs[] = {
	BP_PARAM_SPEC_INT("sb_block", 256, 1, 1 << 20, "sparse attention block in tokens"),
	BP_PARAM_SPEC_INT("sb_k_base", 32, 1, 1 << 20,
			  "MoBA's fixed top-k in blocks, own block counted; in sb_k_set"),
	BP_PARAM_SPEC_REAL("sb_p", 0.1, 0, 1,
			   "Eq. 5's bound: most coverage a layer may lose below k_base's"),
	BP_PARAM_SPEC_REAL("sb_ema", 0.9, 0, 1,
			   "Spar's moving-average weight on the old state (Sec. IV-C)"),
	BP_PARAM_SPEC_REAL("sb_cov_layer_slope", 0, 0, 4,
			   "synthetic coverage: k90's relative rise from first to last layer"),
	BP_PARAM_SPEC_INT("sb_dst", 1, 0, 1,
			  "1: Dynamic Sparsity Tuning (Alg. 1); 0: every layer runs sb_k_base"),
	BP_PARAM_SPEC_INT("sb_mbs", 1, 1, 1 << 20, "samples per micro-batch"),
	BP_PARAM_SPEC_INT("sb_refresh", 1, 1, 1 << 20,
			  "steps between SAB's reads of the Spar state (Sec. IV-C)"),
	{0},
};

static int sb_config(struct sb *c, const struct bp_method_ctx *ctx, struct bp_plan *out,
		     const char *batching_def, struct bp_error *err)
{
	int64_t v;
	const char *s;
	c->cm = ctx->cm;
	c->layers = out->model.layers;
	c->seed = out->seed;
	c->cap = out->nlayouts ? bp_plan_mb_cap(out) : out->max_tokens;
	if (bp_sb_check_request(ctx->cm->sc, &out->model, ctx->shard, err) < 0)
		return -1;
	if (bp_param_int(out, sb_specs, "sb_block", &v, err) < 0)
		return -1;
	c->block = (int)v;
	c->t = bp_profile_sparse(ctx->cm->prof, ctx->cm->sc.tp, c->block);
	if (!c->t)
		return bp_errorf(err, "profile '%s' has no sparse_attention table for tp %d "
				 "block %d", ctx->cm->prof->name, ctx->cm->sc.tp, c->block);
	for (size_t i = 0; i < c->t->nx; i++)
		if (fmod(c->t->x[i], (double)c->block) != 0.0 && i + 1 < c->t->nx)
			return bp_errorf(err, "sb_block %d does not divide the sparse table's grid "
					 "length %.0f", c->block, c->t->x[i]);
	int64_t nblocks = (c->cap + c->block - 1) / c->block;
	if (bp_param_int(out, sb_specs, "sb_k_base", &v, err) < 0)
		return -1;
	c->k_base = (int)v;
	if (c->k_base > nblocks)
		return bp_errorf(err, "sb_k_base %d is above the %lld blocks of a %lld-token "
				 "micro-batch", c->k_base, (long long)nblocks, (long long)c->cap);
	if (param_str(out, "sb_k_set", "1,2,4,8,12,16,20,24,28,32,40,48,56,64", &s, err) < 0 ||
	    bp_sb_kset_parse(s, &c->kset, &c->nk, err) < 0)
		return -1;
	int has_base = 0;
	for (size_t i = 0; i < c->nk; i++)
		has_base |= c->kset[i] == c->k_base;
	if (!has_base)
		return bp_errorf(err, "sb_k_set '%s' does not hold sb_k_base %d", s, c->k_base);
	if (param_str(out, "sb_anchor", "mean", &s, err) < 0)
		return -1;
	if (bp_sb_anchor_parse(s, &c->anchor) < 0)
		return bp_errorf(err, "sb_anchor '%s' is not min, mean or max", s);
	if (bp_param_real(out, sb_specs, "sb_p", &c->p, err) < 0 ||
	    bp_param_real(out, sb_specs, "sb_ema", &c->ema_w, err) < 0 ||
	    bp_param_real(out, sb_specs, "sb_cov_layer_slope", &c->slope, err) < 0)
		return -1;
	if (param_str(out, "sb_coverage", "synthetic", &s, err) < 0)
		return -1;
	if (!strcmp(s, "none-upper"))
		c->cov = BP_SB_COV_NONE_UPPER;
	else if (!strcmp(s, "none-lower"))
		c->cov = BP_SB_COV_NONE_LOWER;
	else if (!strcmp(s, "synthetic"))
		c->cov = BP_SB_COV_SYNTHETIC;
	else if (!strncmp(s, "measured:", 9)) {
		if (sb_measured(c, ctx, out, s, err) < 0)
			return -1;
	} else
		return bp_errorf(err, "sb_coverage '%s' is not none-upper, none-lower, synthetic "
				 "or measured:FILE", s);
	if (param_str(out, "sb_k90", "10,50", &s, err) < 0)
		return -1;
	char lohi[64], *comma;
	snprintf(lohi, sizeof(lohi), "%s", s); /* the two numbers, each bp_parse_double's */
	comma = strchr(lohi, ',');
	if (comma)
		*comma = 0;
	if (!comma || bp_parse_double(lohi, &c->k90_lo, "sb_k90", NULL) < 0 ||
	    bp_parse_double(comma + 1, &c->k90_hi, "sb_k90", NULL) < 0 || !(c->k90_lo >= 2) ||
	    !(c->k90_hi >= c->k90_lo && c->k90_hi <= 512))
		return bp_errorf(err, "sb_k90 '%s' is not LO,HI with 2 <= LO <= HI <= 512", s);
	if (bp_param_int(out, sb_specs, "sb_dst", &v, err) < 0)
		return -1;
	c->dst = (int)v;
	if (bp_param_int(out, sb_specs, "sb_mbs", &v, err) < 0)
		return -1;
	c->mbs = (int)v;
	if (param_str(out, "sb_cardinality", "free", &s, err) < 0)
		return -1;
	if (strcmp(s, "free") && strcmp(s, "exact"))
		return bp_errorf(err, "sb_cardinality '%s' is not free or exact", s);
	c->exact = !strcmp(s, "exact");
	if (param_str(out, "sb_time", "fwdbwd", &s, err) < 0)
		return -1;
	if (strcmp(s, "fwdbwd") && strcmp(s, "fwd"))
		return bp_errorf(err, "sb_time '%s' is not fwdbwd or fwd", s);
	c->fwd_only = !strcmp(s, "fwd");
	if (param_str(out, "sb_batching", batching_def, &s, err) < 0)
		return -1;
	if (!strcmp(s, "sab"))
		c->batching = BATCH_SAB;
	else if (!strcmp(s, "lbb"))
		c->batching = BATCH_LBB;
	else if (!strcmp(s, "default"))
		c->batching = BATCH_DEFAULT;
	else {
		c->other = bp_method_find(s);
		if (!c->other || c->other->record || !bp_method_in_all(c->other) ||
		    c->other->solve == bp_method_sparsebalance || c->other->solve == bp_method_sb_lbb)
			return bp_errorf(err, "sb_batching '%s' is not sab, lbb, default or a "
					 "packing-only method", s);
		c->batching = BATCH_OTHER;
	}
	if (bp_param_int(out, sb_specs, "sb_refresh", &v, err) < 0)
		return -1;
	c->refresh = (int)v;
	if (param_str(out, "sb_packer", "lpt", &s, err) < 0)
		return -1;
	if (strcmp(s, "lpt") && strcmp(s, "kk"))
		return bp_errorf(err, "sb_packer '%s' is not lpt or kk", s);
	c->kk = !strcmp(s, "kk");
	if (c->kk && c->exact)
		return bp_errorf(err, "sb_packer kk balances without a count limit: it takes "
				 "sb_cardinality free, not exact");
	c->ema = bp_calloc(c->t->nx, sizeof(*c->ema), err);
	c->pub = bp_calloc(c->t->nx, sizeof(*c->pub), err);
	if (!c->ema || !c->pub)
		return -1;
	for (size_t i = 0; i < c->t->nx; i++)
		c->ema[i] = c->pub[i] = c->k_base;
	return 0;
}

/* ---- costs ---- */

/* Per-layer time of tokens tokens that does not depend on k: the GEMMs and TP all-reduces
 * of one layer (costmodel.c's rank_layer), forward plus backward unless fwd_only. */
static double other_time(const struct sb *c, int64_t tokens)
{
	const struct bp_costmodel *cm = c->cm;
	double s = 0.0;
	for (int b = 0; b < (c->fwd_only ? 1 : 2); b++) {
		s += bp_cost_linear(cm->linear, (double)tokens, b);
		if (cm->sc.tp > 1)
			s += 2.0 * bp_coll_cost(&cm->tp_allreduce, (double)tokens * cm->token_bytes);
	}
	return s;
}

/* ---- coverage ---- */

static uint64_t cov_hash(int64_t m, int k90)
{
	uint64_t h = (uint64_t)m * 0x9E3779B97F4A7C15ull ^ (uint64_t)k90 * 0xC2B2AE3D27D4EB4Full;
	return h ^ (h >> 29);
}

/* C at K and k_base for (m, k90), computed once per run (the alpha solve is the cost). */
static const double *cov_lookup(struct sb *c, int64_t m, int k90, struct bp_error *err)
{
	struct cov_cache *cc = c->cc ? c->cc : &c->own;
	if (2 * (cc->nused + 1) > cc->ncap) {
		size_t nc = cc->ncap ? 2 * cc->ncap : 1024;
		struct cov_entry *nt = bp_calloc(nc, sizeof(*nt), err);
		if (!nt)
			return NULL;
		for (size_t i = 0; i < nc; i++)
			nt[i].m = -1;
		for (size_t i = 0; i < cc->ncap; i++)
			if (cc->tab[i].m >= 0) {
				size_t h = cov_hash(cc->tab[i].m, cc->tab[i].k90) & (nc - 1);
				while (nt[h].m >= 0)
					h = (h + 1) & (nc - 1);
				nt[h] = cc->tab[i];
			}
		free(cc->tab);
		cc->tab = nt;
		cc->ncap = nc;
	}
	size_t h = cov_hash(m, k90) & (cc->ncap - 1);
	while (cc->tab[h].m >= 0) {
		if (cc->tab[h].m == m && cc->tab[h].k90 == k90)
			return cc->tab[h].c;
		h = (h + 1) & (cc->ncap - 1);
	}
	double *v = bp_calloc(c->nk + 1, sizeof(*v), err);
	if (!v)
		return NULL;
	/* Only budgets up to k_base are read (mb_kcov runs for k_anchor < k_base, and k_cov and
	 * k_final = max(k_anchor, k_cov) are at most k_base); K ascends (bp_sb_kset_parse), so
	 * those are its first nlo. The rest hold 1, never read. */
	size_t nlo = 0;
	while (nlo < c->nk && c->kset[nlo] <= c->k_base)
		nlo++;
	for (size_t i = nlo; i < c->nk; i++)
		v[i] = 1.0;
	bp_sb_syn_solve(&cc->syn, m, k90, c->kset, nlo, c->k_base, v, &v[c->nk]);
	cc->tab[h] = (struct cov_entry){m, k90, v};
	cc->nused++;
	return v;
}

/* k_cov of a micro-batch in a layer (sparse_dst.h's coverage models): none-upper min K,
 * none-lower k_base, synthetic from the token-weighted mean of its documents' C (our choice
 * when mbs > 1). *drop gets C(k_base) - C(k_final) for k_final = max(ka, k_cov) (0 for the
 * none modes). */
static int mb_kcov(struct sb *c, const struct bp_mb *mb, int layer, int ka, double *drop,
		   struct bp_error *err)
{
	*drop = 0.0;
	if (c->cov == BP_SB_COV_NONE_UPPER)
		return c->kset[0];
	if (c->cov == BP_SB_COV_NONE_LOWER)
		return c->k_base;
	if (c->cov == BP_SB_COV_MEASURED) {
		/* Each document's sampled k_cov, rounded up into K; the micro-batch takes the
		 * largest, so every document's bound holds. */
		int kc = c->kset[0];
		for (size_t i = 0; i < mb->nspans; i++) {
			int k = bp_sb_coverage_kcov(c->mcov, mb->spans[i].len, layer, c->mcov_ip,
						    c->seed, mb->spans[i].doc, err);
			if (k < 0)
				return -1;
			size_t a = 0;
			while (a + 1 < c->nk && c->kset[a] < k)
				a++;
			if (c->kset[a] > kc)
				kc = c->kset[a];
		}
		return kc;
	}
	double cm[64], *cw = cm;
	if (c->nk + 1 > 64 && !(cw = bp_calloc(c->nk + 1, sizeof(*cw), err)))
		return -1;
	memset(cw, 0, (c->nk + 1) * sizeof(*cw));
	double tok = 0.0;
	for (size_t i = 0; i < mb->nspans; i++) {
		int64_t len = mb->spans[i].len, m = (len + c->block - 1) / c->block - 1;
		int k90 = bp_sb_syn_k90(c->seed, mb->spans[i].doc, layer, c->layers, c->k90_lo,
					c->k90_hi, c->slope);
		const double *v = cov_lookup(c, m, k90, err);
		if (!v) {
			if (cw != cm)
				free(cw);
			return -1;
		}
		for (size_t k = 0; k <= c->nk; k++)
			cw[k] += (double)len * v[k];
		tok += (double)len;
	}
	for (size_t k = 0; k <= c->nk; k++)
		cw[k] /= tok;
	int kc = bp_sb_kcov(c->kset, c->nk, cw, cw[c->nk], c->k_base, c->p);
	int kf = bp_sb_kfinal(ka, kc);
	for (size_t k = 0; k < c->nk; k++)
		if (c->kset[k] == kf)
			*drop = cw[c->nk] - cw[k];
	if (*drop < 0)
		*drop = 0;
	if (cw != cm)
		free(cw);
	return kc;
}

/* ---- batching (Alg. 2) ---- */

/* The weights and lengths of the items idx[] (n of them), in that order: *sw, *sl (owned). */
static int gather(const double *w, const int64_t *len, const size_t *idx, size_t n,
		  double **sw, int64_t **sl, struct bp_error *err)
{
	*sw = bp_calloc(n + 1, sizeof(**sw), err);
	*sl = bp_calloc(n + 1, sizeof(**sl), err);
	if (!*sw || !*sl)
		return -1;
	for (size_t i = 0; i < n; i++) {
		(*sw)[i] = w[idx[i]];
		(*sl)[i] = len[idx[i]];
	}
	return 0;
}

/* LPT of the n items idx[] (weights w, lengths len) into at least nb bins of at most cap
 * tokens and, when per > 0, at most per items (sb_cardinality=exact): largest weight first
 * (bp_order_by_cost), each into the least-loaded bin that takes it (ties: lowest), a new bin
 * when none does (Alg. 2's bin_packing, which the paper leaves to any balanced partition
 * solver; LPT is our choice; pack.h bp_pack_lpt_ex). bin_of[i] gets item i's bin (i in
 * 0..n-1), order the placement order; returns the bins used or -1. load gets each bin's
 * weight (room for nb + n bins). */
static long lpt(const double *w, const int64_t *len, const size_t *idx, size_t n, size_t nb,
		int64_t cap, int per, int *bin_of, size_t *order, double *load,
		struct bp_error *err)
{
	struct bp_lpt_opts o = {.nbins = nb, .maxbins = nb + n, .cap = cap,
				.per = per > 0 ? (size_t)per : 0};
	double *sw = NULL;
	int64_t *sl = NULL;
	size_t used = 0;
	long rc = -1;
	if (gather(w, len, idx, n, &sw, &sl, err) == 0 &&
	    bp_pack_lpt_ex(&o, sw, sl, n, order, bin_of, load, NULL, &used, err) == 0)
		rc = (long)used;
	free(sw);
	free(sl);
	return rc;
}

/* sb_packer=kk: the same contract by Karmarkar-Karp (pack.h bp_pack_kk) on weights in ns
 * (integers), one more bin whenever the cap cannot be met; order is the weight order, the
 * documents' order inside a bin. */
static long kk_bins(const double *w, const int64_t *len, const size_t *idx, size_t n,
		    size_t nb, int64_t cap, int *bin_of, size_t *order, double *load,
		    struct bp_error *err)
{
	double *sw = NULL;
	int64_t *sl = NULL, *iw = bp_calloc(n + 1, sizeof(*iw), err);
	int64_t *ld = bp_calloc(n + nb + 1, sizeof(*ld), err);
	int64_t *fl = bp_calloc(n + nb + 1, sizeof(*fl), err);
	long used = -1;
	if (gather(w, len, idx, n, &sw, &sl, err) < 0 || !iw || !ld || !fl)
		goto out;
	for (size_t i = 0; i < n; i++)
		iw[i] = llround(sw[i] * 1e3);
	bp_order_by_cost(sw, sl, n, order);
	size_t k = nb;
	for (;;) {
		int r = bp_pack_kk(iw, sl, n, k, cap, bin_of, ld, fl, err);
		if (r < 0)
			goto out;
		if (r == 0 || k >= n + nb)
			break;
		k++;
	}
	for (size_t b = 0; b < k; b++)
		load[b] = 0.0;
	for (size_t i = 0; i < n; i++)
		load[bin_of[i]] += sw[i];
	used = (long)k;
out:
	free(sw);
	free(iw);
	free(sl);
	free(ld);
	free(fl);
	return used;
}

/* Emits pipeline q's bins (nbins, items of bin_of over idx[]) as micro-batches in decreasing
 * weight (ties: bin index), each bin's documents in placement order. */
static int emit_pipe(const struct bp_batch *b, const size_t *idx, size_t n, const int *bin_of,
		     const size_t *order, const double *load, size_t nbins, struct bp_pipe *pipe,
		     enum bp_shard shard, struct bp_error *err)
{
	size_t *bo = bp_calloc(nbins + 1, sizeof(*bo), err);
	struct bp_span *sp = bp_calloc(n + 1, sizeof(*sp), err);
	int rc = -1;
	if (!bo || !sp)
		goto out;
	for (size_t i = 0; i < nbins; i++)
		bo[i] = i;
	for (size_t i = 1; i < nbins; i++) /* insertion sort: few bins, stable */
		for (size_t j = i; j > 0 && load[bo[j]] > load[bo[j - 1]]; j--) {
			size_t t = bo[j];
			bo[j] = bo[j - 1];
			bo[j - 1] = t;
		}
	for (size_t k = 0; k < nbins; k++) {
		size_t ns = 0;
		for (size_t r = 0; r < n; r++) {
			size_t i = order[r];
			if ((size_t)bin_of[i] == bo[k]) {
				const struct bp_doc *d = &b->docs[idx[i]];
				sp[ns++] = (struct bp_span){d->id, 0, d->len};
			}
		}
		if (ns && bp_pipe_add_mb(pipe, sp, ns, shard, err) < 0)
			goto out;
	}
	rc = 0;
out:
	free(bo);
	free(sp);
	return rc;
}

/* SAB (W from Spar) or LBB (W = L): DP ranks first, then each rank's micro-batches. */
static int pack_balanced(const struct sb *c, const struct bp_method_ctx *ctx,
			 const struct bp_batch *b, struct bp_step *st, struct bp_error *err)
{
	size_t n = b->ndocs, dp = st->npipes;
	double *w = bp_calloc(n + 1, sizeof(*w), err), *load = bp_calloc(2 * n + dp + 1,
								       sizeof(*load), err);
	int64_t *len = bp_calloc(n + 1, sizeof(*len), err);
	size_t *idx = bp_calloc(n + 1, sizeof(*idx), err), *sub = bp_calloc(n + 1, sizeof(*sub),
									  err);
	size_t *order = bp_calloc(n + 1, sizeof(*order), err);
	int *rank = bp_calloc(n + 1, sizeof(*rank), err), *bin = bp_calloc(n + 1, sizeof(*bin),
									 err);
	int rc = -1;
	if (!w || !load || !len || !idx || !sub || !order || !rank || !bin)
		goto out;
	if (!n) {
		rc = 0;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		len[i] = b->docs[i].len;
		idx[i] = i;
		if (len[i] > c->cap) {
			bp_errorf(err, "document %lld of %lld tokens is longer than the "
				  "micro-batch cap %lld", (long long)b->docs[i].id,
				  (long long)len[i], (long long)c->cap);
			rc = BP_INFEASIBLE;
			goto out;
		}
		if (c->batching == BATCH_LBB)
			w[i] = (double)len[i];
		else /* Alg. 2 lines 1-3: k~ = Spar.predict(L), W = Perf.predict(L, k~) */
			w[i] = bp_sb_predict(c->t, &len[i], 1, other_time(c, len[i]),
					     c->pub[bp_sb_bin(c->t, len[i])], c->fwd_only);
	}
	size_t per_rank = (n + dp - 1) / dp;
	if ((c->kk ? kk_bins(w, len, idx, n, dp, INT64_MAX, rank, order, load, err)
		   : lpt(w, len, idx, n, dp, INT64_MAX, c->exact ? (int)per_rank : 0, rank, order,
			 load, err)) < 0)
		goto out;
	size_t m = (n + dp * (size_t)c->mbs - 1) / (dp * (size_t)c->mbs);
	for (size_t q = 0; q < dp; q++) {
		size_t ns = 0;
		for (size_t i = 0; i < n; i++)
			if ((size_t)rank[i] == q)
				sub[ns++] = i;
		if (!ns)
			continue;
		long nb = c->kk ? kk_bins(w, len, sub, ns, m, c->cap, bin, order, load, err)
				: lpt(w, len, sub, ns, m, c->cap, c->exact ? c->mbs : 0, bin, order,
				      load, err);
		if (nb < 0 || emit_pipe(b, sub, ns, bin, order, load, (size_t)nb, &st->pipes[q],
					ctx->shard, err) < 0)
			goto out;
	}
	rc = 0;
out:
	free(w);
	free(load);
	free(len);
	free(idx);
	free(sub);
	free(order);
	free(rank);
	free(bin);
	return rc;
}

/* Megatron's default batching: contiguous shares of ceil(n / dp) samples per DP rank, mbs
 * samples per micro-batch in load order (fewer when the next would pass the cap). */
static int pack_default(const struct sb *c, const struct bp_method_ctx *ctx,
			const struct bp_batch *b, struct bp_step *st, struct bp_error *err)
{
	size_t n = b->ndocs, dp = st->npipes, per = (n + dp - 1) / dp;
	struct bp_span sp[64], *s = sp;
	size_t scap = (size_t)c->mbs < 64 ? 64 : (size_t)c->mbs;
	if (scap > 64 && !(s = bp_calloc(scap, sizeof(*s), err)))
		return -1;
	int rc = -1;
	for (size_t q = 0; q < dp; q++) {
		size_t ns = 0;
		int64_t fill = 0;
		for (size_t i = q * per; i < n && i < (q + 1) * per; i++) {
			if (b->docs[i].len > c->cap) {
				bp_errorf(err, "document %lld of %lld tokens is longer than the "
					  "micro-batch cap %lld", (long long)b->docs[i].id,
					  (long long)b->docs[i].len, (long long)c->cap);
				rc = BP_INFEASIBLE;
				goto out;
			}
			if (ns && (ns == (size_t)c->mbs || fill + b->docs[i].len > c->cap)) {
				if (bp_pipe_add_mb(&st->pipes[q], s, ns, ctx->shard, err) < 0)
					goto out;
				ns = 0;
				fill = 0;
			}
			s[ns++] = (struct bp_span){b->docs[i].id, 0, b->docs[i].len};
			fill += b->docs[i].len;
		}
		if (ns && bp_pipe_add_mb(&st->pipes[q], s, ns, ctx->shard, err) < 0)
			goto out;
	}
	rc = 0;
out:
	if (s != sp)
		free(s);
	return rc;
}

/* ---- DST over a packed step (Alg. 1 for every micro-batch and layer) ---- */

static int dst_step(struct sb *c, struct bp_step *st, struct sb_rec *rec,
		    struct bp_error *err)
{
	size_t nmb = 0, maxs = 1;
	for (size_t q = 0; q < st->npipes; q++) {
		nmb += st->pipes[q].nmbs;
		for (size_t i = 0; i < st->pipes[q].nmbs; i++)
			if (st->pipes[q].mbs[i].nspans > maxs)
				maxs = st->pipes[q].mbs[i].nspans;
	}
	double *T = bp_calloc(nmb + 1, sizeof(*T), err), *oth = bp_calloc(nmb + 1, sizeof(*oth),
									   err);
	int64_t *lens = bp_calloc(maxs, sizeof(*lens), err);
	rec->k_anchor = bp_calloc(nmb + 1, sizeof(*rec->k_anchor), err);
	int rc = -1;
	if (!T || !oth || !lens || !rec->k_anchor)
		goto out;
	rec->nmb = nmb;
	rec->k_base = c->k_base;
	rec->dst = c->dst;
	/* Alg. 1 line 1: T_j = predict(x_j, k_base) for every micro-batch of the global batch */
	size_t j = 0;
	for (size_t q = 0; q < st->npipes; q++)
		for (size_t i = 0; i < st->pipes[q].nmbs; i++, j++) {
			const struct bp_mb *mb = &st->pipes[q].mbs[i];
			int64_t tok = 0;
			for (size_t k = 0; k < mb->nspans; k++) {
				lens[k] = mb->spans[k].len;
				tok += lens[k];
			}
			oth[j] = other_time(c, tok);
			T[j] = bp_sb_predict(c->t, lens, mb->nspans, oth[j], c->k_base, c->fwd_only);
		}
	/* line 2, Eq. 3 */
	rec->anchor_us = nmb ? bp_sb_anchor_time(T, nmb, c->anchor) : 0.0;
	double drop_sum = 0.0;
	j = 0;
	for (size_t q = 0; q < st->npipes; q++)
		for (size_t i = 0; i < st->pipes[q].nmbs; i++, j++) {
			struct bp_mb *mb = &st->pipes[q].mbs[i];
			for (size_t k = 0; k < mb->nspans; k++)
				lens[k] = mb->spans[k].len;
			/* line 3, Eq. 9 */
			int ka = c->dst ? bp_sb_align(c->t, lens, mb->nspans, oth[j], c->kset, c->nk,
						      rec->anchor_us, c->fwd_only)
					: c->k_base;
			rec->k_anchor[j] = ka;
			free(mb->sparse_k);
			mb->sparse_k = bp_calloc((size_t)c->layers, sizeof(int), err);
			if (!mb->sparse_k)
				goto out;
			mb->attn = BP_ATTN_SPARSE;
			mb->sparse_block = c->block;
			int nb = longest_blocks(mb);
			int eb = c->k_base < nb ? c->k_base : nb;
			double ksum = 0.0;
			for (int l = 0; l < c->layers; l++) {
				int kf = ka;
				double drop = 0.0;
				if (c->dst && ka < c->k_base) { /* lines 4-9: the bottleneck case */
					int kc = mb_kcov(c, mb, l, ka, &drop, err);
					if (kc < 0)
						goto out;
					kf = bp_sb_kfinal(ka, kc);
				}
				int ke = kf < nb ? kf : nb; /* the budget MoBA can use */
				mb->sparse_k[l] = ke;
				rec->pairs++;
				if (ke < eb) {
					rec->compressed++;
					drop_sum += drop;
				} else if (ke > eb) {
					rec->expanded++;
				}
				ksum += kf;
			}
			/* Spar (Alg. 2 line 2): the layer-mean k_final of each document's bin */
			double kmean = ksum / c->layers;
			for (size_t k = 0; k < mb->nspans; k++) {
				size_t bi = bp_sb_bin(c->t, mb->spans[k].len);
				c->ema[bi] = c->ema_w * c->ema[bi] + (1.0 - c->ema_w) * kmean;
			}
		}
	rec->cov_drop_mean = rec->compressed ? drop_sum / (double)rec->compressed : 0.0;
	rc = 0;
out:
	free(T);
	free(oth);
	free(lens);
	return rc;
}

/* sb_refresh (Sec. IV-C "periodically calibrate"): after step s, SAB's view of the Spar
 * state is refreshed when s + 1 is a multiple of the period. */
static void sb_publish(struct sb *c, size_t s)
{
	if ((s + 1) % (size_t)c->refresh == 0)
		memcpy(c->pub, c->ema, c->t->nx * sizeof(*c->pub));
}

/* What a run keeps between its windows (method.h): the Spar state and the packing method's
 * own run when it carries one (wlb). */
struct sb_state {
	double *ema, *pub;
	size_t nx;
	struct bp_method_run inner;
	struct cov_cache cache; /* for the budget set kset and k_base */
	int *kset, k_base;
	size_t nk;
};

static void sb_state_free(void *p)
{
	struct sb_state *st = p;
	if (!st)
		return;
	if (st->inner.state && st->inner.release)
		st->inner.release(st->inner.state);
	free(st->ema);
	free(st->pub);
	cov_cache_release(&st->cache);
	free(st->kset);
	free(st);
}

/* Points c's coverage cache at the run's, emptied first when the budgets it was filled for
 * differ from c's. */
static int sb_keep_cache(struct sb_state *keep, struct sb *c, struct bp_error *err)
{
	if (!keep->kset || keep->nk != c->nk || keep->k_base != c->k_base ||
	    memcmp(keep->kset, c->kset, c->nk * sizeof(int))) {
		cov_cache_release(&keep->cache);
		free(keep->kset);
		keep->kset = bp_calloc(c->nk + 1, sizeof(int), err);
		if (!keep->kset)
			return -1;
		memcpy(keep->kset, c->kset, c->nk * sizeof(int));
		keep->nk = c->nk;
		keep->k_base = c->k_base;
	}
	c->cc = &keep->cache;
	return 0;
}

static int sb_run(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		  struct bp_plan *out, const char *batching_def, struct bp_error *err)
{
	struct sb c;
	struct sb_state *keep = NULL;
	memset(&c, 0, sizeof(c));
	int rc = -1;
	if (sb_config(&c, ctx, out, batching_def, err) < 0)
		goto out;
	if (ctx->run) {
		if (!(keep = bp_method_state(ctx, sizeof(*keep), sb_state_free, err)))
			goto out;
		if (keep->ema && keep->nx == c.t->nx) { /* the state the last window left */
			memcpy(c.ema, keep->ema, c.t->nx * sizeof(*c.ema));
			memcpy(c.pub, keep->pub, c.t->nx * sizeof(*c.pub));
		}
		if (sb_keep_cache(keep, &c, err) < 0)
			goto out;
	}
	if (c.batching == BATCH_OTHER) {
		struct bp_method_ctx octx = *ctx;
		if (keep) { /* the packing method's run: the same steps, its own state */
			keep->inner.step0 = ctx->run->step0;
			keep->inner.last = ctx->run->last;
			octx.run = &keep->inner;
		}
		rc = c.other->solve(&octx, in, out, err);
		if (rc)
			goto out;
		rc = -1;
		/* a method without state numbers its steps from 0 */
		if (keep && !c.other->carries)
			bp_method_place_steps(ctx, out);
	} else {
		if (bp_method_alloc_steps(out, in, in->n, err) < 0)
			goto out;
		bp_method_place_steps(ctx, out);
	}
	for (size_t s = 0; s < out->nsteps; s++) {
		struct bp_step *st = &out->steps[s];
		struct sb_rec *rec = bp_step_set_record(st, &bp_record_sparsebalance, err);
		if (!rec)
			goto out;
		rec->ema_k = bp_calloc(c.t->nx, sizeof(double), err);
		if (!rec->ema_k)
			goto out;
		memcpy(rec->ema_k, c.pub, c.t->nx * sizeof(double));
		rec->nbins = c.t->nx;
		if (c.batching != BATCH_OTHER && s < in->n) {
			int r = c.batching == BATCH_DEFAULT ? pack_default(&c, ctx, &in->b[s], st, err)
							    : pack_balanced(&c, ctx, &in->b[s], st, err);
			if (r) {
				rc = r;
				goto out;
			}
		}
		if (dst_step(&c, st, rec, err) < 0)
			goto out;
		sb_publish(&c, (size_t)st->index);
	}
	if (keep) {
		if (!keep->ema) {
			keep->ema = bp_calloc(c.t->nx, sizeof(double), err);
			keep->pub = bp_calloc(c.t->nx, sizeof(double), err);
			if (!keep->ema || !keep->pub)
				goto out;
			keep->nx = c.t->nx;
		}
		memcpy(keep->ema, c.ema, c.t->nx * sizeof(*c.ema));
		memcpy(keep->pub, c.pub, c.t->nx * sizeof(*c.pub));
	}
	rc = 0;
out:
	sb_release(&c);
	return rc;
}

int bp_method_sparsebalance(const struct bp_method_ctx *ctx, const struct bp_batches *in,
			    struct bp_plan *out, struct bp_error *err)
{
	return sb_run(ctx, in, out, "sab", err);
}

int bp_method_sb_lbb(const struct bp_method_ctx *ctx, const struct bp_batches *in,
		     struct bp_plan *out, struct bp_error *err)
{
	return sb_run(ctx, in, out, "lbb", err);
}

int bp_sb_recheck(const struct bp_plan *p, const struct bp_costmodel *cm, struct bp_error *err)
{
	struct sb c;
	struct bp_plan tmp;
	struct sb_rec rec;
	struct bp_step sc;
	int rc = -1, measured = 0;
	memset(&c, 0, sizeof(c));
	memset(&rec, 0, sizeof(rec));
	memset(&sc, 0, sizeof(sc));
	bp_plan_init(&tmp);
	for (size_t i = 0; i < p->nparams; i++) {
		const char *v = p->params[i].value;
		if (!strcmp(p->params[i].key, "sb_coverage") && !strncmp(v, "measured:", 9)) {
			measured = 1; /* the file is not at hand: k_cov cannot be re-derived */
			v = "none-lower";
		}
		if (bp_plan_set_param(&tmp, p->params[i].key, v, err) < 0)
			goto out;
	}
	tmp.model = p->model;
	tmp.seed = p->seed;
	tmp.max_tokens = bp_plan_mb_cap(p);
	struct bp_method_ctx ctx = {.cm = cm, .shard = BP_SHARD_SEQUENCE};
	if (sb_config(&c, &ctx, &tmp, "sab", err) < 0)
		goto out;
	/* A window of a run (plan.h) starts from the Spar state its first step records: the
	 * moving average itself where SAB's view was just refreshed from it. */
	if (p->first_step > 0 && p->nsteps) {
		const struct sb_rec *r0 = p->steps[0].record;
		if (c.refresh > 1 && p->first_step % c.refresh) {
			bp_errorf(err, "a window from step %lld of a plan with sb_refresh %lld is "
				  "checked from a refresh step (a multiple of %lld): its moving "
				  "average is not recorded between them", (long long)p->first_step,
				  (long long)c.refresh, (long long)c.refresh);
			goto out;
		}
		if (r0 && p->steps[0].record_ops == &bp_record_sparsebalance &&
		    r0->nbins == c.t->nx) {
			memcpy(c.ema, r0->ema_k, c.t->nx * sizeof(*c.ema));
			memcpy(c.pub, r0->ema_k, c.t->nx * sizeof(*c.pub));
		}
	}
	for (size_t s = 0; s < p->nsteps; s++) {
		const struct bp_step *st = &p->steps[s];
		const struct sb_rec *want = st->record;
		if (!want || st->record_ops != &bp_record_sparsebalance) {
			bp_errorf(err, "step %zu has no sparsebalance record", s);
			goto out;
		}
		/* the Spar state this step's batching used (Alg. 2 line 2), to the codec's 1e-3;
		 * with measured coverage it follows budgets not re-derived here */
		if (want->nbins != c.t->nx) {
			bp_errorf(err, "step %zu: ema_k has %zu bins, the sparse table %zu", s,
				  want->nbins, c.t->nx);
			goto out;
		}
		for (size_t i = 0; !measured && i < c.t->nx; i++)
			if (fabs(want->ema_k[i] - c.pub[i]) > 1.5e-3) {
				bp_errorf(err, "step %zu: ema_k[%zu] is %.3f, the moving average of the "
					  "earlier steps' budgets gives %.3f", s, i, want->ema_k[i],
					  c.pub[i]);
				goto out;
			}
		sc.npipes = st->npipes;
		if (!(sc.pipes = bp_calloc(st->npipes + 1, sizeof(*sc.pipes), err)))
			goto out;
		for (size_t q = 0; q < st->npipes; q++) {
			const struct bp_pipe *src = &st->pipes[q];
			if (!(sc.pipes[q].mbs = bp_calloc(src->nmbs + 1, sizeof(struct bp_mb), err)))
				goto out;
			sc.pipes[q].nmbs = src->nmbs;
			for (size_t i = 0; i < src->nmbs; i++)
				if (bp_mb_copy_decisions(&sc.pipes[q].mbs[i], &src->mbs[i], c.layers,
							 err) < 0)
					goto out;
		}
		if (dst_step(&c, &sc, &rec, err) < 0)
			goto out;
		if (fabs(rec.anchor_us - want->anchor_us) > 1.5e-3) {
			bp_errorf(err, "step %zu: anchor_us is %.3f, Eq. 3 over the step's micro-batches "
				  "gives %.3f", s, want->anchor_us, rec.anchor_us);
			goto out;
		}
		size_t j = 0;
		for (size_t q = 0; q < st->npipes; q++)
			for (size_t i = 0; i < st->pipes[q].nmbs; i++, j++) {
				const struct bp_mb *x = &st->pipes[q].mbs[i], *y = &sc.pipes[q].mbs[i];
				if (j >= want->nmb || want->k_anchor[j] != rec.k_anchor[j]) {
					bp_errorf(err, "step %zu pipeline %zu micro-batch %zu: k_anchor %d, "
						  "Eq. 9 gives %d", s, q, i,
						  j < want->nmb ? want->k_anchor[j] : -1, rec.k_anchor[j]);
					goto out;
				}
				int bottleneck = c.dst && rec.k_anchor[j] < c.k_base;
				for (int l = 0; l < c.layers; l++)
					if ((!measured || !bottleneck) && x->sparse_k[l] != y->sparse_k[l]) {
						bp_errorf(err, "step %zu pipeline %zu micro-batch %zu layer "
							  "%d: budget %d, Alg. 1 with coverage '%s' gives %d",
							  s, q, i, l, x->sparse_k[l],
							  bp_plan_param(p, "sb_coverage"), y->sparse_k[l]);
						goto out;
					}
			}
		sb_publish(&c, (size_t)st->index);
		rec_release(&rec);
		memset(&rec, 0, sizeof(rec));
		bp_step_release(&sc);
		memset(&sc, 0, sizeof(sc));
	}
	rc = 0;
out:
	rec_release(&rec);
	bp_step_release(&sc);
	tmp.layouts = NULL;
	bp_plan_release(&tmp);
	sb_release(&c);
	return rc;
}

/* The front end's note on the finished plan: which coverage the budgets assumed (synthetic is
 * labelled as such), and Eq. 11 in both readings (sparse_dst.h bp_sb_imbalance) over the
 * steps. */
void bp_sb_warn(const struct bp_plan *p, char *buf, size_t n)
{
	const char *cov = bp_plan_param(p, "sb_coverage");
	double pooled = 0.0, slot = 0.0;
	size_t steps = 0;
	buf[0] = 0;
	for (size_t s = 0; s < p->nsteps; s++) {
		const struct bp_step *st = &p->steps[s];
		size_t nmb = 0, per = st->npipes ? st->pipes[0].nmbs : 0, even = 1;
		for (size_t q = 0; q < st->npipes; q++) {
			nmb += st->pipes[q].nmbs;
			even &= st->pipes[q].nmbs == per;
		}
		double *T = nmb ? calloc(nmb, sizeof(*T)) : NULL;
		if (!T)
			continue;
		size_t j = 0;
		for (size_t q = 0; q < st->npipes; q++)
			for (size_t i = 0; i < st->pipes[q].nmbs; i++, j++) {
				const struct bp_mb *mb = &st->pipes[q].mbs[i];
				size_t pp = bp_plan_layout(p, st)->pipes[q].sc.pp;
				for (size_t k = 0; mb->fwd && k < pp; k++)
					T[j] += mb->fwd[k] + mb->bwd[k];
			}
		pooled += bp_sb_imbalance(T, nmb);
		slot += even ? bp_sb_imbalance_slot(T, st->npipes, per) : bp_sb_imbalance(T, nmb);
		steps++;
		free(T);
	}
	if (!steps)
		return;
	const char *label = !cov ? "?" : !strcmp(cov, "synthetic")
		? "synthetic coverage (a seeded model, not measured routing logits)"
		: !strncmp(cov, "measured:", 9) ? "measured coverage (the file's sha256 prefix in brackets)"
		: !strcmp(cov, "none-upper") ? "no coverage bound (none-upper: k_final = k_anchor)"
		: "coverage at k_base (none-lower: no compression)";
	int k = snprintf(buf, n, "budgets assume %s [%s]; Eq. 11 imbalance (fwd+bwd per "
			 "micro-batch), mean over steps: pooled over all micro-batches %.3f, per "
			 "slot averaged over DP ranks %.3f", label, cov ? cov : "?",
			 pooled / (double)steps, slot / (double)steps);
	/* Accuracy proxies (ours: the paper measures accuracy by training, Sec. V-C, which a
	 * planner cannot do): token-weighted mean budget, (micro-batch, layer) pairs compressed /
	 * expanded against k_base, and the mean coverage drop over compressed pairs, which only
	 * the synthetic model can give. */
	double ktok = 0.0, tok = 0.0, drop = 0.0;
	int64_t pairs = 0, comp = 0, exp_ = 0;
	for (size_t s = 0; s < p->nsteps; s++) {
		const struct bp_step *st = &p->steps[s];
		const struct sb_rec *r = st->record_ops == &bp_record_sparsebalance ? st->record
										   : NULL;
		if (r) {
			pairs += r->pairs;
			comp += r->compressed;
			exp_ += r->expanded;
			drop += r->cov_drop_mean * (double)r->compressed;
		}
		for (size_t q = 0; q < st->npipes; q++)
			for (size_t i = 0; i < st->pipes[q].nmbs; i++) {
				const struct bp_mb *mb = &st->pipes[q].mbs[i];
				if (!mb->sparse_k)
					continue;
				double km = 0.0;
				for (int l = 0; l < p->model.layers; l++)
					km += mb->sparse_k[l];
				km /= p->model.layers;
				for (size_t x = 0; x < mb->nspans; x++) {
					ktok += km * (double)mb->spans[x].len;
					tok += (double)mb->spans[x].len;
				}
			}
	}
	if (k > 0 && (size_t)k < n && pairs && tok > 0) {
		char d[96] = "";
		if (cov && !strcmp(cov, "synthetic"))
			snprintf(d, sizeof(d), ", mean coverage drop %.3f there (synthetic coverage)",
				 comp ? drop / (double)comp : 0.0);
		snprintf(buf + k, n - (size_t)k, "\naccuracy proxies: token-weighted mean budget %.1f "
			 "blocks; %.1f%% of (micro-batch, layer) pairs compressed below k_base%s, "
			 "%.1f%% expanded", ktok / tok, 100.0 * (double)comp / (double)pairs, d,
			 100.0 * (double)exp_ / (double)pairs);
	}
}

static const char *const sb_params[] = {"sb_block", "sb_k_base", "sb_k_set", "sb_anchor",
					"sb_p", "sb_coverage", "sb_k90", "sb_cov_layer_slope",
					"sb_ema", "sb_batching", "sb_dst", "sb_mbs",
					"sb_cardinality", "sb_time", "sb_refresh", "sb_packer",
					NULL};

/* Its price (cmd/cmd_solve_limits.c), in instructions per step: layers (3,500 D + 200 pp B)
 * + 4 D^2 over B = tokens / sb_block + D blocks (the per-layer tuning and the batching,
 * quadratic in D: 393 M a step at 4,096 one-token documents, 2.3 G at 16,384), and the
 * packing of a method named by sb_batching (its price's pack). Its own work grows with the
 * square of the documents per step. */
#define I_SB_DOC_LAYER 3.5e3
#define I_SB_BLOCK_STAGE_LAYER 200.0
#define I_SB_DOC_PAIR 4.0

static void sb_price(const struct bp_price_req *r, struct bp_price *p)
{
	double d = r->docs, pp = (double)r->pp;
	double layers = r->layers > 0 ? (double)r->layers : 128.0;
	double blocks = r->tokens / fmax(1.0, bp_price_param(r, "sb_block", 256)) + d;
	p->grows = BP_GROWS_DOCS_SQUARED;
	p->own = layers * (I_SB_DOC_LAYER * d + I_SB_BLOCK_STAGE_LAYER * pp * blocks) +
		 I_SB_DOC_PAIR * d * d;
	const char *b = bp_price_param_text(r, "sb_batching");
	const struct bp_method *in = b ? bp_method_find(b) : NULL;
	if (in && in->price && in->price != sb_price) {
		struct bp_price q;
		memset(&q, 0, sizeof(q));
		in->price(r, &q);
		p->own += q.pack;
	}
}

/* check's re-derivation (its row's recheck): every budget, on layout 0's pipeline 0. */
static int sb_recheck_row(const struct bp_plan *p, struct bp_costs *costs,
			  struct bp_error *err)
{
	if (!p->nlayouts)
		return 0;
	const struct bp_costmodel *cm = bp_costs_pipe(costs, &p->layouts[0], 0, err);
	return cm ? bp_sb_recheck(p, cm, err) : -1;
}

/* The method's row of the table (plan/method.h struct bp_method). */
BP_METHOD_ROW(sparsebalance) = {
	.name = "sparsebalance",
	.solve = bp_method_sparsebalance,
	.summary = "MoBA sparse attention: sparsity-aware batching and per-layer dynamic "
		   "sparsity tuning",
	.paper = "SparseBalance Sec. IV, Eq. 3-10, Alg. 1-2",
	.params = sb_params,
	.param_specs = sb_specs,
	.record = &bp_record_sparsebalance,
	.warn = bp_sb_warn,
	.check_request = bp_sb_check_request,
	.carries = 1,
	.rank = 110,
	.input = BP_INPUT_COVERAGE,
	.price = sb_price,
	.packer_param = "sb_batching",
	.recheck = sb_recheck_row,
};

/* The method's row of the table (plan/method.h struct bp_method). */
BP_METHOD_ROW(sb_lbb) = {
	.name = "sb-lbb",
	.solve = bp_method_sb_lbb,
	.summary = "MoBA sparse attention: length-balanced batching with dynamic sparsity tuning",
	.paper = "SparseBalance Sec. V-B3 (LBB) with Sec. IV-A, Alg. 1",
	.params = sb_params,
	.param_specs = sb_specs,
	.record = &bp_record_sparsebalance,
	.warn = bp_sb_warn,
	.check_request = bp_sb_check_request,
	.carries = 1,
	.rank = 120,
	.input = BP_INPUT_COVERAGE,
	.price = sb_price,
	.packer_param = "sb_batching",
	.recheck = sb_recheck_row,
};
