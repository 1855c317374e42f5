/* attn_sparse_ref.c: the float64 CPU reference of the block-sparse (MoBA top-k) attention
 * (attn_sparse_ref.h has the semantics). Called by the unit test and the GPU test only;
 * straight from the formulas, no tiling of the softmax, so that it checks the kernel rather
 * than repeats it. Implements MoBA's selection (its gate: mean-pooled keys, top k - 1
 * earlier blocks plus the own block, causal inside it) at the CUDA kernel's tile granularity
 * (attn_sparse.cu), and SparseBalance Sec. II-B Eq. 2 (softmax over the selected keys
 * only). */
#include "attn_sparse_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void bp_sparse_sel_init(struct bp_sparse_sel *sel)
{
	memset(sel, 0, sizeof(*sel));
}

void bp_sparse_sel_release(struct bp_sparse_sel *sel)
{
	if (!sel)
		return;
	free(sel->row_ptr);
	free(sel->blocks);
	free(sel->tile_seg);
	free(sel->tile_row0);
	bp_sparse_sel_init(sel);
}

static int seg_len(const struct bp_sparse_ref_shape *s, int i)
{
	return (int)(s->cu[i + 1] - s->cu[i]);
}

static int seg_k(const struct bp_sparse_ref_shape *s, int i)
{
	return s->k_seg ? s->k_seg[i] : s->k;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

int bp_sparse_ref_check(const struct bp_sparse_ref_shape *s, struct bp_error *err)
{
	if (!s)
		return bp_errorf(err, "sparse attention reference: no shape given");
	if (s->nseg < 0 || s->heads < 1 || s->kv_heads < 1 || s->head_dim < 1)
		return bp_errorf(err, "sparse attention reference: bad sizes (nseg %d, heads %d, "
				 "kv_heads %d, head_dim %d)", s->nseg, s->heads, s->kv_heads,
				 s->head_dim);
	if (s->heads % s->kv_heads != 0)
		return bp_errorf(err, "sparse attention reference: heads (%d) is not a multiple of "
				 "kv_heads (%d)", s->heads, s->kv_heads);
	if (s->block < 1 || s->qtile < 1 || s->block % s->qtile != 0)
		return bp_errorf(err, "sparse attention reference: block %d is not a positive "
				 "multiple of the query tile %d", s->block, s->qtile);
	if (!s->cu || s->cu[0] != 0)
		return bp_errorf(err, "sparse attention reference: cu must start at 0");
	for (int i = 0; i < s->nseg; i++) {
		if (s->cu[i + 1] < s->cu[i])
			return bp_errorf(err, "sparse attention reference: cu decreases at segment "
					 "%d", i);
		if (seg_k(s, i) < 1)
			return bp_errorf(err, "sparse attention reference: budget %d of segment %d "
					 "is below 1", seg_k(s, i), i);
	}
	if (!isfinite(s->scale))
		return bp_errorf(err, "sparse attention reference: scale is not finite");
	return 0;
}

int64_t bp_sparse_ref_tiles(const struct bp_sparse_ref_shape *s)
{
	int64_t n = 0;
	for (int i = 0; i < s->nseg; i++)
		n += ceil_div(seg_len(s, i), s->qtile);
	return n;
}

static int max_blocks(const struct bp_sparse_ref_shape *s)
{
	int64_t m = 0;
	for (int i = 0; i < s->nseg; i++) {
		int64_t n = ceil_div(seg_len(s, i), s->block);
		m = n > m ? n : m;
	}
	return (int)m;
}

/* Mean over the keys of block b of document seg, kv head g: out[head_dim]. */
static void block_mean(const struct bp_sparse_ref_shape *s, const double *k, int seg, int b,
		       int g, double *out)
{
	const int D = s->head_dim, len = seg_len(s, seg);
	const int c0 = b * s->block, c1 = c0 + s->block < len ? c0 + s->block : len;
	memset(out, 0, (size_t)D * sizeof(*out));
	for (int c = c0; c < c1; c++) {
		const double *kc = k + (((int64_t)s->cu[seg] + c) * s->kv_heads + g) * D;
		for (int e = 0; e < D; e++)
			out[e] += kc[e];
	}
	for (int e = 0; e < D; e++)
		out[e] /= (double)(c1 - c0);
}

/* The tile's position: document and first row of global tile t (tiles numbered document
 * after document). */
static int find_tile(const struct bp_sparse_ref_shape *s, int64_t t, int *seg, int *row0)
{
	for (int i = 0; i < s->nseg; i++) {
		int64_t n = ceil_div(seg_len(s, i), s->qtile);
		if (t < n) {
			*seg = i;
			*row0 = (int)(t * s->qtile);
			return 0;
		}
		t -= n;
	}
	return -1;
}

/* Gate scores of tile (seg, row0), head h: s(b) = qbar . kbar_b for the earlier blocks
 * b < own (MoBA's gate; qbar the mean of the tile's rows, the kernel's tile-level gate). */
static void tile_scores(const struct bp_sparse_ref_shape *s, const double *q, const double *k,
			int seg, int row0, int h, double *qbar, double *kbar, double *scores)
{
	const int D = s->head_dim, len = seg_len(s, seg), g = h / (s->heads / s->kv_heads);
	const int r1 = row0 + s->qtile < len ? row0 + s->qtile : len;
	const int own = row0 / s->block;
	memset(qbar, 0, (size_t)D * sizeof(*qbar));
	for (int r = row0; r < r1; r++) {
		const double *qr = q + (((int64_t)s->cu[seg] + r) * s->heads + h) * D;
		for (int e = 0; e < D; e++)
			qbar[e] += qr[e];
	}
	for (int e = 0; e < D; e++)
		qbar[e] /= (double)(r1 - row0);
	for (int b = 0; b < own; b++) {
		block_mean(s, k, seg, b, g, kbar);
		double x = 0;
		for (int e = 0; e < D; e++)
			x += qbar[e] * kbar[e];
		scores[b] = x;
	}
}

int bp_sparse_ref_scores(const struct bp_sparse_ref_shape *s, const double *q, const double *k,
			 int64_t tile, int head, double *scores, int *n, struct bp_error *err)
{
	int seg, row0, rc = -1;
	double *qbar = NULL, *kbar = NULL;
	if (bp_sparse_ref_check(s, err))
		return -1;
	if (head < 0 || head >= s->heads || tile < 0 || find_tile(s, tile, &seg, &row0))
		return bp_errorf(err, "sparse attention reference: no tile %lld, head %d",
				 (long long)tile, head);
	qbar = bp_calloc((size_t)s->head_dim, sizeof(*qbar), err);
	kbar = bp_calloc((size_t)s->head_dim, sizeof(*kbar), err);
	if (!qbar || !kbar)
		goto out;
	tile_scores(s, q, k, seg, row0, head, qbar, kbar, scores);
	*n = row0 / s->block;
	rc = 0;
out:
	free(qbar);
	free(kbar);
	return rc;
}

/* Candidate order of the top-k: higher score first, then the lower block index. */
struct cand {
	double score;
	int32_t block;
};

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return (x->block > y->block) - (x->block < y->block);
}

static int int32_cmp(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

int bp_sparse_ref_select(const struct bp_sparse_ref_shape *s, const double *q, const double *k,
			 struct bp_sparse_sel *sel, struct bp_error *err)
{
	int rc = -1;
	double *qbar = NULL, *kbar = NULL, *scores = NULL;
	struct cand *cands = NULL;
	bp_sparse_sel_release(sel);
	if (bp_sparse_ref_check(s, err))
		return -1;
	const int64_t nt = bp_sparse_ref_tiles(s);
	const int nb = max_blocks(s), H = s->heads;
	/* Each list holds at most min(k, own + 1) <= nb blocks. */
	sel->ntiles = nt;
	sel->heads = H;
	sel->row_ptr = bp_calloc((size_t)(nt * H + 1), sizeof(*sel->row_ptr), err);
	sel->blocks = bp_calloc((size_t)(nt * H * (nb > 0 ? nb : 1)), sizeof(*sel->blocks), err);
	sel->tile_seg = bp_calloc((size_t)(nt > 0 ? nt : 1), sizeof(*sel->tile_seg), err);
	sel->tile_row0 = bp_calloc((size_t)(nt > 0 ? nt : 1), sizeof(*sel->tile_row0), err);
	qbar = bp_calloc((size_t)s->head_dim, sizeof(*qbar), err);
	kbar = bp_calloc((size_t)s->head_dim, sizeof(*kbar), err);
	scores = bp_calloc((size_t)(nb > 0 ? nb : 1), sizeof(*scores), err);
	cands = bp_calloc((size_t)(nb > 0 ? nb : 1), sizeof(*cands), err);
	if (!sel->row_ptr || !sel->blocks || !sel->tile_seg || !sel->tile_row0 || !qbar || !kbar ||
	    !scores || !cands)
		goto out;
	int64_t t = 0, at = 0;
	for (int i = 0; i < s->nseg; i++) {
		const int len = seg_len(s, i), kseg = seg_k(s, i);
		for (int row0 = 0; row0 < len; row0 += s->qtile, t++) {
			const int own = row0 / s->block;
			const int keep = kseg - 1 < own ? kseg - 1 : own; /* top k - 1 earlier */
			sel->tile_seg[t] = i;
			sel->tile_row0[t] = row0;
			for (int h = 0; h < H; h++) {
				int32_t *list = sel->blocks + at;
				if (keep < own) {
					tile_scores(s, q, k, i, row0, h, qbar, kbar, scores);
					for (int b = 0; b < own; b++) {
						cands[b].score = scores[b];
						cands[b].block = b;
					}
					qsort(cands, (size_t)own, sizeof(*cands), cand_cmp);
					for (int j = 0; j < keep; j++)
						list[j] = cands[j].block;
					qsort(list, (size_t)keep, sizeof(*list), int32_cmp);
				} else {
					for (int b = 0; b < own; b++) /* every earlier block */
						list[b] = b;
				}
				list[keep] = own; /* the own block, always (MoBA) */
				at += keep + 1;
				sel->row_ptr[t * H + h + 1] = at;
			}
		}
	}
	rc = 0;
out:
	free(qbar);
	free(kbar);
	free(scores);
	free(cands);
	if (rc)
		bp_sparse_sel_release(sel);
	return rc;
}

/* A selection must match the shape it is used with. */
static int check_sel(const struct bp_sparse_ref_shape *s, const struct bp_sparse_sel *sel,
		     struct bp_error *err)
{
	if (bp_sparse_ref_check(s, err))
		return -1;
	if (!sel || !sel->row_ptr || sel->heads != s->heads ||
	    sel->ntiles != bp_sparse_ref_tiles(s))
		return bp_errorf(err, "sparse attention reference: the selection does not match "
				 "the shape");
	return 0;
}

int bp_sparse_ref_mask(const struct bp_sparse_ref_shape *s, const struct bp_sparse_sel *sel,
		       unsigned char **mask, int *stride, struct bp_error *err)
{
	*mask = NULL;
	if (check_sel(s, sel, err))
		return -1;
	const int nb = max_blocks(s) > 0 ? max_blocks(s) : 1;
	const int64_t rows = sel->ntiles * s->heads;
	unsigned char *m = bp_calloc((size_t)(rows > 0 ? rows : 1) * (size_t)nb, 1, err);
	if (!m)
		return -1;
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = sel->row_ptr[r]; j < sel->row_ptr[r + 1]; j++) {
			const int32_t b = sel->blocks[j];
			if (b < 0 || b >= nb) {
				free(m);
				return bp_errorf(err, "sparse attention reference: block %d out of "
						 "range in the selection", (int)b);
			}
			m[r * nb + b] = 1;
		}
	*mask = m;
	*stride = nb;
	return 0;
}

/* One query row and what it sees: its n keys (document-local indices, any order) in the
 * document's keys and values of KV head g. */
struct ref_row {
	const double *q;            /* the row's query */
	const double *kbase, *vbase; /* the document's first key and value */
	int g;
	const int32_t *keys;
	int n;
};

/* One query row over its key list: the softmax of scale q.k (Eq. 1/2), o = sum p v,
 * lse = log sum exp. p gets the probabilities. */
static void row_fwd(const struct bp_sparse_ref_shape *s, const struct ref_row *rw, double *p,
		    double *orow, double *lse)
{
	const int D = s->head_dim, KH = s->kv_heads, g = rw->g, n = rw->n;
	const int32_t *keys = rw->keys;
	const double *qr = rw->q;
	double m = -INFINITY, l = 0;
	for (int j = 0; j < n; j++) {
		const double *kc = rw->kbase + ((int64_t)keys[j] * KH + g) * D;
		double x = 0;
		for (int e = 0; e < D; e++)
			x += qr[e] * kc[e];
		p[j] = x * s->scale;
		m = fmax(m, p[j]);
	}
	for (int j = 0; j < n; j++) {
		p[j] = exp(p[j] - m);
		l += p[j];
	}
	*lse = m + log(l);
	memset(orow, 0, (size_t)D * sizeof(*orow));
	for (int j = 0; j < n; j++) {
		const double *vc = rw->vbase + ((int64_t)keys[j] * KH + g) * D;
		const double pj = p[j] / l;
		for (int e = 0; e < D; e++)
			orow[e] += pj * vc[e];
	}
}

/* The backward of one row over its key list: P from the forward's lse, dP = dO . v,
 * dS = P (dP - rowsum(dO o O)); dQ_r = scale sum dS k, dK_c += scale dS q, dV_c += P dO. */
static void row_bwd(const struct bp_sparse_ref_shape *s, const struct ref_row *rw,
		    const double *orow, double lse, const double *dor, double *dqr,
		    double *dkbase, double *dvbase)
{
	const int D = s->head_dim, KH = s->kv_heads, g = rw->g, n = rw->n;
	const int32_t *keys = rw->keys;
	const double *qr = rw->q;
	double dsum = 0;
	for (int e = 0; e < D; e++)
		dsum += dor[e] * orow[e];
	for (int j = 0; j < n; j++) {
		const int64_t at = ((int64_t)keys[j] * KH + g) * D;
		const double *kc = rw->kbase + at, *vc = rw->vbase + at;
		double x = 0, dp = 0;
		for (int e = 0; e < D; e++) {
			x += qr[e] * kc[e];
			dp += dor[e] * vc[e];
		}
		const double p = exp(x * s->scale - lse);
		const double ds = p * (dp - dsum);
		double *dkc = dkbase + at, *dvc = dvbase + at;
		for (int e = 0; e < D; e++) {
			dqr[e] += s->scale * ds * kc[e];
			dkc[e] += s->scale * ds * qr[e];
			dvc[e] += p * dor[e];
		}
	}
}

/* Where the key list of a row comes from: a selection's CSR list or an explicit bitmap. */
struct keysrc {
	const struct bp_sparse_sel *sel; /* sparse path */
	const unsigned char *mask;       /* masked path (NULL with sel NULL: dense) */
	int stride;
};

/* The keys row r (document-local) of tile t (global), head h sees, document-local. */
static int row_keys(const struct bp_sparse_ref_shape *s, const struct keysrc *src, int seg,
		    int64_t t, int h, int r, int32_t *keys)
{
	const int len = seg_len(s, seg);
	int n = 0;
	if (src->sel) {
		/* Sparse path: walk the list, each block's keys, trimmed at the row (causal). */
		const int64_t row = t * s->heads + h;
		for (int64_t j = src->sel->row_ptr[row]; j < src->sel->row_ptr[row + 1]; j++) {
			const int b = src->sel->blocks[j];
			const int c1 = (b + 1) * s->block < len ? (b + 1) * s->block : len;
			for (int c = b * s->block; c < c1 && c <= r; c++)
				keys[n++] = c;
		}
		return n;
	}
	/* Masked path: every causal key, kept when the bitmap has its block. */
	for (int c = 0; c <= r; c++)
		if (!src->mask || src->mask[(t * s->heads + h) * src->stride + c / s->block])
			keys[n++] = c;
	return n;
}

/* The tensors of a run: the inputs, and the forward's outputs (o, lse) or the backward's
 * inputs (oin, lsein, dout) and gradients (dq, dk, dv). */
struct ref_io {
	int bwd;
	const double *q, *k, *v;
	double *o, *lse;
	const double *oin, *lsein, *dout;
	double *dq, *dk, *dv;
};

/* Both directions of both paths: for every document, tile, head and row, the row's key list
 * and then row_fwd or row_bwd. */
static int run(const struct bp_sparse_ref_shape *s, const struct keysrc *src,
	       const struct ref_io *io, struct bp_error *err)
{
	const int bwd = io->bwd;
	const double *q = io->q, *k = io->k, *v = io->v;
	double *dq = io->dq, *dk = io->dk, *dv = io->dv;
	int rc = -1;
	const int D = s->head_dim, H = s->heads, KH = s->kv_heads, group = H / KH;
	const int64_t total = s->nseg ? s->cu[s->nseg] : 0;
	int maxlen = 0;
	for (int i = 0; i < s->nseg; i++)
		maxlen = seg_len(s, i) > maxlen ? seg_len(s, i) : maxlen;
	int32_t *keys = bp_calloc((size_t)(maxlen > 0 ? maxlen : 1), sizeof(*keys), err);
	double *p = bp_calloc((size_t)(maxlen > 0 ? maxlen : 1), sizeof(*p), err);
	if (!keys || !p)
		goto out;
	if (bwd) {
		memset(dq, 0, (size_t)total * H * D * sizeof(*dq));
		memset(dk, 0, (size_t)total * KH * D * sizeof(*dk));
		memset(dv, 0, (size_t)total * KH * D * sizeof(*dv));
	}
	int64_t t = 0;
	for (int i = 0; i < s->nseg; i++) {
		const int len = seg_len(s, i);
		const int64_t base = s->cu[i];
		const double *kb = k + base * KH * D, *vb = v + base * KH * D;
		for (int row0 = 0; row0 < len; row0 += s->qtile, t++) {
			const int r1 = row0 + s->qtile < len ? row0 + s->qtile : len;
			for (int h = 0; h < H; h++) {
				const int g = h / group;
				for (int r = row0; r < r1; r++) {
					const int64_t qa = ((base + r) * H + h) * D;
					const int64_t la = (int64_t)h * total + base + r;
					const int n = row_keys(s, src, i, t, h, r, keys);
					if (n == 0) {
						rc = bp_errorf(err, "sparse attention reference: "
							       "row %d of segment %d, head %d sees "
							       "no key (no own block)", r, i, h);
						goto out;
					}
					const struct ref_row rw = {q + qa, kb, vb, g, keys, n};
					if (!bwd)
						row_fwd(s, &rw, p, io->o + qa, io->lse + la);
					else
						row_bwd(s, &rw, io->oin + qa, io->lsein[la],
							io->dout + qa, dq + qa,
							dk + base * KH * D, dv + base * KH * D);
				}
			}
		}
	}
	rc = 0;
out:
	free(keys);
	free(p);
	return rc;
}

int bp_sparse_ref_fwd(const struct bp_sparse_ref_shape *s, const struct bp_sparse_sel *sel,
		      const double *q, const double *k, const double *v, double *o, double *lse,
		      struct bp_error *err)
{
	if (check_sel(s, sel, err))
		return -1;
	struct keysrc src = {sel, NULL, 0};
	const struct ref_io io = {.q = q, .k = k, .v = v, .o = o, .lse = lse};
	return run(s, &src, &io, err);
}

int bp_sparse_ref_bwd(const struct bp_sparse_ref_shape *s, const struct bp_sparse_sel *sel,
		      const double *q, const double *k, const double *v, const double *o,
		      const double *lse, const double *dout, double *dq, double *dk, double *dv,
		      struct bp_error *err)
{
	if (check_sel(s, sel, err))
		return -1;
	struct keysrc src = {sel, NULL, 0};
	const struct ref_io io = {.bwd = 1, .q = q, .k = k, .v = v, .oin = o, .lsein = lse,
				  .dout = dout, .dq = dq, .dk = dk, .dv = dv};
	return run(s, &src, &io, err);
}

int bp_masked_ref_fwd(const struct bp_sparse_ref_shape *s, const unsigned char *mask,
		      int stride, const double *q, const double *k, const double *v, double *o,
		      double *lse, struct bp_error *err)
{
	if (bp_sparse_ref_check(s, err))
		return -1;
	if (mask && stride < max_blocks(s))
		return bp_errorf(err, "sparse attention reference: mask stride %d below the "
				 "block count %d", stride, max_blocks(s));
	struct keysrc src = {NULL, mask, stride};
	const struct ref_io io = {.q = q, .k = k, .v = v, .o = o, .lse = lse};
	return run(s, &src, &io, err);
}

int bp_masked_ref_bwd(const struct bp_sparse_ref_shape *s, const unsigned char *mask,
		      int stride, const double *q, const double *k, const double *v,
		      const double *o, const double *lse, const double *dout, double *dq,
		      double *dk, double *dv, struct bp_error *err)
{
	if (bp_sparse_ref_check(s, err))
		return -1;
	if (mask && stride < max_blocks(s))
		return bp_errorf(err, "sparse attention reference: mask stride %d below the "
				 "block count %d", stride, max_blocks(s));
	struct keysrc src = {NULL, mask, stride};
	const struct ref_io io = {.bwd = 1, .q = q, .k = k, .v = v, .oin = o, .lsein = lse,
				  .dout = dout, .dq = dq, .dk = dk, .dv = dv};
	return run(s, &src, &io, err);
}
