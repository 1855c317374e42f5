/* emu_prep.c: the source step of the CUDA emulator (tests/emu/README.md). Rewrites a .cu file
 * into C++ that the emulator's headers (tests/emu/include) compile, touching only what C++
 * cannot say:
 *
 *   kernel<<<grid, block, shared, stream>>>(args)
 *       -> cuemu::configure(kernel, "kernel", grid, block, shared, stream)(args)
 *   extern __shared__ [__align__(n)] T name[];
 *       -> T *name = (T *)cuemu::dynamic_shared();
 *   __syncthreads(), __syncwarp(..), __shfl_*_sync(..), wmma::mma_sync(..),
 *   wmma::load_matrix_sync(..), wmma::store_matrix_sync(..), wmma::fill_fragment(..),
 *   attn_ptx::mma_16816(..), ldsm_x4(..), ldsm_x4_t(..), cp_async16(..), cp_async_commit(),
 *   cp_async_wait<N>()   (qualified or not: the tile names them through using-declarations)
 *       -> (cuemu::at(__FILE__, __LINE__, "func", n), <the call>)
 *
 * func is the __global__ or __device__ function the call is in; n numbers that function's
 * __syncthreads (and, separately, its __syncwarp and its cp_async_wait) in source order from
 * 1, 0 for the other calls: "func:syncthreads:n" ("func:cpwait:n") is what EMU_DROP names.
 * A static __shared__ variable is refused (the emulator has no per-block storage for it).
 * Comments, string and character literals and preprocessor lines pass through untouched. No
 * line is added or removed and the output starts with a #line directive, so __FILE__,
 * __LINE__ and every compiler and sanitizer message name the original file and line.
 *
 * usage: emu_prep [--sites FILE] INPUT OUTPUT
 * --sites writes one line per barrier, "func:syncthreads:n file:line" (or syncwarp, or
 * cpwait for a cp.async wait), for tests/emu/test-barrier-drop's survey of every barrier.
 * Exit status: 0, 1 (a construct not emulated, or an I/O error), 2 (usage). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct buf {
	char *p;
	size_t n, cap;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (b->n + n + 1 > cap)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			fprintf(stderr, "emu_prep: error: out of memory\n");
			exit(1);
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

static void puts_(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* Inserts s at offset at of b (moving the tail). */
static void insert_at(struct buf *b, size_t at, const char *s)
{
	const size_t n = strlen(s), tail = b->n - at;
	put(b, s, n); /* grows; the bytes are placed below */
	memmove(b->p + at + n, b->p + at, tail);
	memcpy(b->p + at, s, n);
}

/* The calls marked with cuemu::at; barrier: 1 __syncthreads, 2 __syncwarp, 3 cp_async_wait
 * (numbered like the barriers: EMU_DROP can remove one), 0 other. */
static const struct {
	const char *name;
	int barrier;
} marked[] = {
	{"__syncthreads", 1},     {"__syncwarp", 2},        {"__shfl_sync", 0},
	{"__shfl_xor_sync", 0},   {"__shfl_up_sync", 0},    {"__shfl_down_sync", 0},
	{"mma_sync", 0},          {"load_matrix_sync", 0},  {"store_matrix_sync", 0},
	{"fill_fragment", 0},     {"mma_16816", 0},         {"ldsm_x4", 0},
	{"ldsm_x4_t", 0},         {"cp_async16", 0},        {"cp_async_commit", 0},
	{"cp_async_wait", 3},
};
static const char *const barrier_kind[] = {"", "syncthreads", "syncwarp", "cpwait"};

/* Identifiers that are followed by '(' after __global__ or __device__ without being the
 * function's name. */
static const char *const not_names[] = {"__launch_bounds__", "__align__", "alignas",
					"__attribute__", "decltype", "__declspec"};

struct counter {
	char func[128];
	int n[4];
};

struct prep {
	const char *path, *src;
	size_t len, i;
	int line;
	struct buf out, sites;
	char func[128];
	int await_name;
	struct counter *cnt;
	size_t ncnt;
	int depth;
	int wrap[256]; /* paren depths at which a wrapped call closes */
	int nwrap;
	int launch_depth; /* -1: not inside <<< >>> */
};

static void die(const struct prep *p, const char *msg)
{
	fprintf(stderr, "%s:%d: error: %s (emu_prep, tests/emu/README.md)\n", p->path, p->line,
		msg);
	exit(1);
}

static int is_ident(int c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* Copies src[i..j) to the output, counting lines. */
static void copy_to(struct prep *p, size_t j)
{
	for (size_t k = p->i; k < j; k++)
		if (p->src[k] == '\n')
			p->line++;
	put(&p->out, p->src + p->i, j - p->i);
	p->i = j;
}

/* Index of the next character that is not white space (comments count as code here: none
 * sit between a call's name and its parenthesis in the sources this serves). */
static size_t skip_ws(const struct prep *p, size_t j)
{
	while (j < p->len && isspace((unsigned char)p->src[j]))
		j++;
	return j;
}

/* The end of a comment, literal or preprocessor line starting at i, or i if none starts. */
static size_t skip_passive(const struct prep *p, size_t i)
{
	const char *s = p->src;
	if (s[i] == '/' && i + 1 < p->len && s[i + 1] == '/') {
		while (i < p->len && s[i] != '\n')
			i++;
		return i;
	}
	if (s[i] == '/' && i + 1 < p->len && s[i + 1] == '*') {
		const char *e = strstr(s + i + 2, "*/");
		return e ? (size_t)(e - s) + 2 : p->len;
	}
	if (s[i] == '"' || s[i] == '\'') {
		const char q = s[i++];
		while (i < p->len && s[i] != q && s[i] != '\n')
			i += s[i] == '\\' ? 2 : 1;
		return i < p->len ? i + 1 : p->len;
	}
	if (s[i] == '#') {
		size_t k = i;
		while (k > 0 && (s[k - 1] == ' ' || s[k - 1] == '\t'))
			k--;
		if (k > 0 && s[k - 1] != '\n')
			return i;
		while (i < p->len && s[i] != '\n')
			i += s[i] == '\\' && i + 1 < p->len ? 2 : 1;
		return i;
	}
	return i;
}

static int *counter_for(struct prep *p)
{
	for (size_t k = 0; k < p->ncnt; k++)
		if (!strcmp(p->cnt[k].func, p->func))
			return p->cnt[k].n;
	struct counter *c = realloc(p->cnt, (p->ncnt + 1) * sizeof *c);
	if (!c)
		die(p, "out of memory");
	p->cnt = c;
	memset(&c[p->ncnt], 0, sizeof *c);
	snprintf(c[p->ncnt].func, sizeof c[p->ncnt].func, "%s", p->func);
	return c[p->ncnt++].n;
}

/* Start, in the output, of the callee expression ending there: a name with its qualifiers
 * (wmma::mma_sync) and template arguments (attn_fwd_kernel<D>). */
static size_t callee_start(const struct prep *p)
{
	const char *o = p->out.p;
	size_t k = p->out.n;
	while (k > 0 && isspace((unsigned char)o[k - 1]))
		k--;
	if (k > 0 && o[k - 1] == '>') {
		int d = 0;
		do {
			k--;
			if (o[k] == '>')
				d++;
			else if (o[k] == '<')
				d--;
		} while (k > 0 && d > 0);
	}
	for (;;) {
		while (k > 0 && is_ident(o[k - 1]))
			k--;
		if (k >= 2 && o[k - 1] == ':' && o[k - 2] == ':')
			k -= 2;
		else
			break;
	}
	return k;
}

/* extern __shared__ [__align__(n) | alignas(n)] T name[]; at p->i ("extern"). */
static void dynamic_shared(struct prep *p, size_t after_shared)
{
	const char *s = p->src;
	const char *semi = memchr(s + after_shared, ';', p->len - after_shared);
	if (!semi)
		die(p, "extern __shared__ without a ';'");
	const size_t end = (size_t)(semi - s);
	size_t k = skip_ws(p, after_shared);
	if (!strncmp(s + k, "__align__", 9) || !strncmp(s + k, "alignas", 7)) {
		const char *par = memchr(s + k, '(', end - k);
		const char *close = par ? memchr(par, ')', (size_t)(s + end - par)) : NULL;
		if (!close)
			die(p, "extern __shared__ with an alignment this step cannot read");
		k = skip_ws(p, (size_t)(close - s) + 1);
	}
	const char *br = NULL;
	for (size_t j = k; j < end; j++)
		if (s[j] == '[')
			br = s + j;
	if (!br || *(s + skip_ws(p, (size_t)(br - s) + 1)) != ']')
		die(p, "extern __shared__ that is not an unsized array");
	size_t ne = (size_t)(br - s);
	while (ne > k && isspace((unsigned char)s[ne - 1]))
		ne--;
	size_t nb = ne;
	while (nb > k && is_ident(s[nb - 1]))
		nb--;
	size_t te = nb;
	while (te > k && isspace((unsigned char)s[te - 1]))
		te--;
	if (nb == ne || te == k)
		die(p, "extern __shared__ declaration this step cannot read");
	struct buf t = {0};
	put(&t, s + k, te - k);
	put(&t, " *", 2);
	put(&t, s + nb, ne - nb);
	puts_(&t, " = (");
	put(&t, s + k, te - k);
	puts_(&t, " *)cuemu::dynamic_shared();");
	for (size_t j = p->i; j <= end; j++)
		if (s[j] == '\n') {
			put(&t, "\n", 1);
			p->line++;
		}
	put(&p->out, t.p, t.n);
	free(t.p);
	p->i = end + 1;
}

/* An identifier at p->i..j. */
static void identifier(struct prep *p, size_t j)
{
	const char *s = p->src;
	const size_t n = j - p->i;
	char id[128];
	snprintf(id, sizeof id, "%.*s", (int)(n < sizeof id ? n : sizeof id - 1), s + p->i);
	const size_t nx = skip_ws(p, j);
	const int call = nx < p->len && s[nx] == '(';

	if (!strcmp(id, "extern")) {
		if (!strncmp(s + nx, "__shared__", 10) && !is_ident(s[nx + 10])) {
			dynamic_shared(p, nx + 10);
			return;
		}
	} else if (!strcmp(id, "__shared__")) {
		die(p, "a static __shared__ variable is not emulated (dynamic shared memory is)");
	} else if (!strcmp(id, "__global__") || !strcmp(id, "__device__")) {
		p->await_name = 1;
	} else if (p->await_name && call) {
		int skip = 0;
		for (size_t k = 0; k < sizeof not_names / sizeof not_names[0]; k++)
			skip |= !strcmp(id, not_names[k]);
		if (!skip) {
			snprintf(p->func, sizeof p->func, "%s", id);
			p->await_name = 0;
			copy_to(p, j); /* a function's own name is no call to mark */
			return;
		}
	}
	if (p->i > 0 && (s[p->i - 1] == '.' || s[p->i - 1] == '>'))
		goto plain; /* a member (x.mma_sync, x->...), not the function */
	for (size_t k = 0; k < sizeof marked / sizeof marked[0]; k++) {
		if (strcmp(id, marked[k].name) != 0)
			continue;
		/* cp_async_wait<N>(): the template arguments lie between the name and '('. */
		size_t targs = j;
		if (nx < p->len && s[nx] == '<') {
			int d = 0, par = 0;
			for (targs = nx; targs < p->len; targs++) {
				const char c = s[targs];
				par += c == '(' ? 1 : c == ')' ? -1 : 0;
				if (par == 0 && (c == '<' || c == '>'))
					d += c == '<' ? 1 : -1;
				if (d == 0 || c == ';' || c == '{')
					break;
			}
			if (targs >= p->len || s[targs] != '>')
				goto plain;
			targs++;
		}
		const size_t open = skip_ws(p, targs);
		if (open >= p->len || s[open] != '(')
			goto plain; /* a using-declaration, a pointer to it, ... */
		int nth = 0;
		const char *func = p->func[0] ? p->func : "(none)";
		if (marked[k].barrier) {
			nth = ++counter_for(p)[marked[k].barrier];
			char line[512];
			snprintf(line, sizeof line, "%s:%s:%d %s:%d\n", func,
				 barrier_kind[marked[k].barrier], nth, p->path, p->line);
			puts_(&p->sites, line);
		}
		char pre[256];
		snprintf(pre, sizeof pre, "(cuemu::at(__FILE__, __LINE__, \"%s\", %d), ", func,
			 nth);
		copy_to(p, j);
		/* The qualifier (wmma::) goes inside the parenthesis with the name. */
		const size_t at = callee_start(p);
		insert_at(&p->out, at, pre);
		copy_to(p, targs);
		if (p->nwrap == (int)(sizeof p->wrap / sizeof p->wrap[0]))
			die(p, "calls nested too deeply");
		p->wrap[p->nwrap++] = p->depth;
		return;
	}
plain:
	copy_to(p, j);
}

static void run(struct prep *p)
{
	const char *s = p->src;
	while (p->i < p->len) {
		const size_t e = skip_passive(p, p->i);
		if (e != p->i) {
			copy_to(p, e);
			continue;
		}
		const char c = s[p->i];
		if (isalpha((unsigned char)c) || c == '_') {
			size_t j = p->i;
			while (j < p->len && is_ident(s[j]))
				j++;
			identifier(p, j);
		} else if (isdigit((unsigned char)c)) {
			size_t j = p->i;
			while (j < p->len && (is_ident(s[j]) || s[j] == '.'))
				j++;
			copy_to(p, j);
		} else if (c == '<' && !strncmp(s + p->i, "<<<", 3)) {
			if (p->launch_depth >= 0)
				die(p, "a launch inside a launch configuration");
			const size_t at = callee_start(p);
			size_t end = p->out.n;
			while (end > at && isspace((unsigned char)p->out.p[end - 1]))
				end--;
			if (end == at)
				die(p, "<<< without a kernel before it");
			struct buf pre = {0}, mid = {0};
			puts_(&pre, "cuemu::configure(");
			puts_(&mid, ", \"");
			for (size_t k = at; k < end; k++)
				put(&mid, p->out.p[k] == '"' ? "'" : p->out.p + k, 1);
			puts_(&mid, "\", ");
			p->out.n = end; /* drops blanks between the name and <<< */
			p->out.p[end] = '\0';
			insert_at(&p->out, at, pre.p);
			put(&p->out, mid.p, mid.n);
			free(pre.p);
			free(mid.p);
			p->i += 3;
			p->launch_depth = p->depth;
		} else if (c == '>' && p->launch_depth == p->depth &&
			   !strncmp(s + p->i, ">>>", 3)) {
			puts_(&p->out, ")");
			p->i += 3;
			p->launch_depth = -1;
		} else {
			if (c == '(') {
				p->depth++;
			} else if (c == ')') {
				p->depth--;
				if (p->depth < 0)
					die(p, "unbalanced ')'");
			} else if (c == ';' || c == '{') {
				p->await_name = 0;
			}
			copy_to(p, p->i + 1);
			if (c == ')' && p->nwrap > 0 && p->wrap[p->nwrap - 1] == p->depth) {
				puts_(&p->out, ")");
				p->nwrap--;
			}
		}
	}
	if (p->nwrap || p->launch_depth >= 0)
		die(p, "the file ends inside a marked call or a launch");
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	struct buf b = {0};
	char chunk[65536];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		put(&b, chunk, n);
	const int bad = ferror(f);
	fclose(f);
	if (bad) {
		free(b.p);
		return NULL;
	}
	if (!b.p)
		put(&b, "", 0);
	*len = b.n;
	return b.p;
}

static int write_file(const char *path, const struct buf *b)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	const int ok = fwrite(b->p, 1, b->n, f) == b->n;
	return fclose(f) == 0 && ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *sites = NULL;
	int a = 1;
	if (a + 1 < argc && !strcmp(argv[a], "--sites")) {
		sites = argv[a + 1];
		a += 2;
	}
	if (argc - a != 2) {
		fprintf(stderr, "usage: emu_prep [--sites FILE] INPUT OUTPUT\n");
		return 2;
	}
	struct prep p;
	memset(&p, 0, sizeof p);
	p.path = argv[a];
	p.line = 1;
	p.launch_depth = -1;
	p.src = slurp(p.path, &p.len);
	if (!p.src) {
		fprintf(stderr, "emu_prep: error: cannot read '%s': %s\n", p.path, strerror(errno));
		return 1;
	}
	puts_(&p.out, "#line 1 \"");
	puts_(&p.out, p.path);
	puts_(&p.out, "\"\n");
	puts_(&p.sites, "");
	run(&p);
	int rc = 0;
	if (write_file(argv[a + 1], &p.out) != 0) {
		fprintf(stderr, "emu_prep: error: cannot write '%s': %s\n", argv[a + 1],
			strerror(errno));
		rc = 1;
	}
	if (sites && write_file(sites, &p.sites) != 0) {
		fprintf(stderr, "emu_prep: error: cannot write '%s': %s\n", sites, strerror(errno));
		rc = 1;
	}
	free((char *)p.src);
	free(p.out.p);
	free(p.sites.p);
	free(p.cnt);
	return rc;
}
