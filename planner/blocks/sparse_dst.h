/* sparse_dst.h: SparseBalance's building blocks (the SparseBalance paper, Sec. IV): Perf.align
 * over a micro-batch (Eq. 9), the anchor of Eq. 3, Dynamic Sparsity Tuning's per-layer budget
 * (Alg. 1, Eq. 5-7 in our `mincov` reading, bp_sb_kfinal), the planner's coverage models
 * (ours, since a planner has no routing logits: none-upper, none-lower, synthetic, measured),
 * the Spar moving average of Sec. IV-C and the Eq. 11 imbalance in both readings. Called by
 * methods/sparsebalance.c and the unit tests.
 * Pure functions of their arguments (the synthetic draws are seeded by (seed, doc, layer)), so
 * a plan depends only on its inputs and seed, never on the order steps are visited. */
#ifndef BP_SPARSE_DST_H
#define BP_SPARSE_DST_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "bp.h"
#include "profile.h"

enum bp_sb_anchor { BP_SB_MIN, BP_SB_MEAN, BP_SB_MAX };

/* Coverage models (ours: Eq. 4's C needs the routing logits, which a planner lacks, so only
 * k_cov is modelled): NONE_UPPER k_cov = min K (p = infinity, the most optimistic bound),
 * NONE_LOWER k_cov = k_base (p = 0, expansion only), SYNTHETIC the seeded power-law model
 * (labelled "synthetic coverage" wherever it shows), MEASURED k_cov drawn from a
 * balplan.coverage/v1 file (formats/coverage_json.c). */
enum bp_sb_cov { BP_SB_COV_NONE_UPPER, BP_SB_COV_NONE_LOWER, BP_SB_COV_SYNTHETIC,
		 BP_SB_COV_MEASURED };

/* Parses "min" | "mean" | "max"; -1 when unknown. */
int bp_sb_anchor_parse(const char *s, enum bp_sb_anchor *out);
const char *bp_sb_anchor_name(enum bp_sb_anchor a);

/* Parses a budget set "1,2,4,...": strictly increasing integers in [1, 1 << 20]. *out
 * (caller frees) gets *n entries. -1 with err naming the bad entry. */
int bp_sb_kset_parse(const char *s, int **out, size_t *n, struct bp_error *err);

/* Perf.predict (Eq. 8) of a micro-batch of n documents of lens tokens at budget k, per layer:
 * the sum of the documents' M[len, k] (costkinds.h bp_cost_sparse_attn; forward, plus
 * backward unless fwd_only) plus other, the micro-batch's per-layer time that does not depend
 * on k (GEMMs and TP collectives). Our reading for a micro-batch of several documents: the
 * paper's M is per length bin x and never says what x is for more than one sequence. */
double bp_sb_predict(const struct bp_sparse_table *t, const int64_t *lens, size_t n,
		     double other, double k, int fwd_only);

/* Perf.align (Eq. 9, Sec. IV-B): the largest k of kset (nk entries, increasing) whose
 * bp_sb_predict is at most target; min K when none is (our choice: the paper leaves it open).
 * Predict is non-decreasing in k, so on a flat row (every document at most k blocks) the
 * largest tying k wins. */
int bp_sb_align(const struct bp_sparse_table *t, const int64_t *lens, size_t n, double other,
		const int *kset, size_t nk, double target, int fwd_only);

/* Eq. 3: T_anchor = phi(T_1..T_n), phi = min, mean or max over the global batch (n >= 1). */
double bp_sb_anchor_time(const double *T, size_t n, enum bp_sb_anchor a);

/* Eq. 5's bound as our k_cov (the `mincov` reading, bp_sb_kfinal): the smallest k of kset
 * with c_base - c[i] <= p, where c[i] = C(kset[i]) and c_base = C(k_base) (Eq. 4's cumulative
 * normalised score). k_base when none qualifies (cannot happen when k_base is in kset). */
int bp_sb_kcov(const int *kset, size_t nk, const double *c, double c_base, int k_base,
	       double p);

/* Alg. 1 with Eq. 6-7 in our `mincov` reading: k_final = max(k_anchor, k_cov). Eq. 6's
 * feasible set is empty exactly when Alg. 1's line 9 fires (our derivation: T^ and C are
 * non-decreasing in k, so every k meeting T^ <= T_anchor is at most k_anchor and breaks the
 * bound whenever k_anchor does), so the literal "max F" cannot be taken; this reading
 * compresses a bottleneck no further than the coverage bound allows and expands a
 * non-bottleneck to its anchor. */
static inline int bp_sb_kfinal(int k_anchor, int k_cov)
{
	return k_anchor > k_cov ? k_anchor : k_cov;
}

/* Synthetic coverage (our third coverage model; its spread follows Fig. 4), a modelling
 * assumption, not a measurement: a document of nblocks MoBA blocks has m = nblocks - 1 past
 * chunks whose sorted normalised scores are r_j ~ j^-alpha; C(k) = sum_{j <= k-1} r_j (1 when
 * k - 1 >= m). bp_sb_syn_alpha solves alpha >= 0 so that C(k90) = 0.9 (bisection; 0 when the
 * uniform scores already reach 0.9 at k90, or m <= k90 - 1). */
double bp_sb_syn_alpha(int64_t m, int k90);
/* C(k) of the model above for each of the nk budgets in kset, and for k_base into *c_base. */
void bp_sb_syn_cov(int64_t m, double alpha, const int *kset, size_t nk, int k_base, double *c,
		   double *c_base);

/* bp_sb_syn_alpha then bp_sb_syn_cov, the same doubles, at less cost for a caller that solves
 * many (m, k90) keys: struct bp_sb_syn keeps log j and the prefix sums of j^-alpha (and of
 * -log j * j^-alpha) at the alphas every solve tries first (the bracket's 1, 2, 4, ..., 32
 * and the first Newton point 0.75 * hi, 0.5 for hi = 1), grown to the largest m seen, and
 * the coverage is read from the prefix sums of the solve's last pass when that pass was at
 * the returned alpha. Start from a zeroed struct; bp_sb_syn_free releases it. A failed
 * allocation falls back to the two calls above (only costs time). */
#define BP_SB_SYN_NA 13
struct bp_sb_syn {
	double *lj;                 /* [cap] log j at lj[j - 1] */
	double *p[BP_SB_SYN_NA];    /* [cap + 1] prefix sums of j^-alpha, p[a][0] = 0 */
	double *d[BP_SB_SYN_NA];    /* [cap + 1] prefix sums of -log j * j^-alpha */
	double *sp, *sd;            /* [cap + 1] the same for the last untabulated alpha */
	int64_t cap;
};
void bp_sb_syn_free(struct bp_sb_syn *s);
void bp_sb_syn_solve(struct bp_sb_syn *s, int64_t m, int k90, const int *kset, size_t nk,
		     int k_base, double *c, double *c_base);

/* The seeded k90 of (seed, doc, layer): log-uniform in [lo, hi], rounded, then flattened by
 * layer (k90 * (1 + slope * layer / (layers - 1)), Fig. 4's flatter later layer), >= 2. The
 * draw depends only on its arguments, so every packing of the same documents sees the same
 * coverage. */
int bp_sb_syn_k90(uint64_t seed, int64_t doc, int layer, int layers, double lo, double hi,
		  double slope);

/* Spar (Sec. IV-C, Alg. 2): the length bin of a document, bins = the sparse table's x grid
 * (bin i holds lengths in [x_i, x_{i+1}), bin 0 everything below x_1, the last bin everything
 * from x_last on). */
size_t bp_sb_bin(const struct bp_sparse_table *t, int64_t len);

/* Eq. 11 (Sec. V-B3), both readings of its "average ... across ranks": pooled, max T / mean T
 * over all n micro-batches of the step; per-slot, micro-batch slot i averaged over the npipes
 * pipelines first (T[p * per + i], per = n / npipes slots), then max / mean over the slots.
 * 1 when every T is 0 or n = 0. */
double bp_sb_imbalance(const double *T, size_t n);
double bp_sb_imbalance_slot(const double *T, size_t npipes, size_t per);

/* A measured coverage file (balplan.coverage/v1, plans/README.md "Coverage files"): per
 * document-length bin [lo, hi] and layer, nq samples (quantiles, equally likely) of k_cov(p)
 * for each p of the file's list, measured by running the model's MoBA gate over the data. */
struct bp_sb_covbin {
	int64_t lo, hi;
	int *k; /* [layer][ip][iq] = k[(layer * np + ip) * nq + iq]; owned */
};

struct bp_sb_coverage {
	char sha[65];    /* sha256 of the file's bytes (set by the reader's caller) */
	char model[64];
	int block, k_base, layers;
	double *p;       /* [np] strictly increasing in (0, 1]; owned */
	size_t np, nq;
	struct bp_sb_covbin *bins; /* [nbins] by lo, disjoint; owned */
	size_t nbins;
};

void bp_sb_coverage_init(struct bp_sb_coverage *c);
void bp_sb_coverage_release(struct bp_sb_coverage *c);
/* Codec (formats/coverage_json.c): fills an initialised c (release after failure too). */
int bp_sb_coverage_from_json(struct bp_sb_coverage *c, json_t *root, struct bp_error *err);

/* k_cov of document doc (len tokens) in layer at p index ip: the sample of its (bin, layer,
 * p) list drawn by (seed, doc, layer). -1 with err when no bin holds len. */
int bp_sb_coverage_kcov(const struct bp_sb_coverage *c, int64_t len, int layer, size_t ip,
			uint64_t seed, int64_t doc, struct bp_error *err);

#endif
