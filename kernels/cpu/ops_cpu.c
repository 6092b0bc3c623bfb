/*
 * kernels/cpu/ops_cpu.c - the CPU backend of kernels/ops.h.
 *
 * Each layer is a forward/backward pair of plain loops over plain arrays, as
 * in llm.c's train_gpt2.c; the element-wise formulas come from
 * kernels/math.h so that the CUDA backend computes the same thing.
 *
 * Where the time goes: matrix products (about 6 FLOPs per parameter and
 * token) are CBLAS sgemm calls; attention is written as small per-head
 * sgemm calls too (Q K^T, att V and their transposes), which beats a naive
 * dot-product loop by an order of magnitude because gcc does not vectorise
 * float reductions without -ffast-math. Bias, softmax and LayerNorm stay in
 * C; long float sums use a fixed number of partial sums (SUM_LANES) so that
 * they vectorise and still do not depend on the thread count.
 *
 * Threads: OpenBLAS's thread count is process-wide, and storkd runs one
 * worker thread per rank in one process, so OpenBLAS is kept at one thread
 * and this file splits work itself: a matrix product is cut into column
 * blocks (at least 6, about 512 columns each), each a single-threaded sgemm
 * call; every other kernel cuts its rows, channels or elements into blocks
 * (reductions over rows, such as bias and LayerNorm weight gradients, are
 * cut by channel so each sum keeps the serial order). The blocks depend on
 * the problem's sizes only, and the threads take them in turn until none is
 * left, so a thread slowed down by another process on its core does less
 * of the work instead of holding everyone up. The helper threads are
 * created by the calling (rank) thread and inherit its CPU affinity, so a
 * rank only ever runs on its own cores. Each block is computed by one
 * thread the same way whichever thread it is, so results depend neither on
 * scheduling nor on the thread count: runs are bit-reproducible.
 */
#include "config.h"
#include "kernels/math.h"
#include "kernels/ops.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Threads of the calling thread's kernels; 0 = not decided yet. */
static _Thread_local int cpu_threads;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

#define MAX_THREADS 64

static void blas_single_threaded(void)
{
#ifdef OPENBLAS_VERSION
	openblas_set_num_threads(1);
#endif
}

void ops_cpu_set_threads(int n)
{
	if (n <= 0) {
		cpu_set_t set;

		n = 1;
		if (sched_getaffinity(0, sizeof set, &set) == 0)
			n = CPU_COUNT(&set);
	}
	cpu_threads = n > MAX_THREADS ? MAX_THREADS : n;
}

int ops_cpu_threads(void)
{
	pthread_once(&blas_once, blas_single_threaded);
	if (cpu_threads == 0)
		ops_cpu_set_threads(0);
	return cpu_threads;
}

const char *ops_cpu_blas_coretype_hint(void)
{
#if defined(OPENBLAS_VERSION) && defined(__x86_64__)
	const char *core = openblas_get_corename();

	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512dq") ||
	    !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl"))
		return NULL;
	/* Only when the library fell back to an AVX2 (or older) kernel set. */
	if (core && (!strcasecmp(core, "haswell") || !strcasecmp(core, "zen") ||
		     !strcasecmp(core, "prescott") || !strcasecmp(core, "sandybridge")))
		return "SkylakeX";
#endif
	return NULL;
}

/* ------------------------------------------------------------ threads */

/*
 * A pool of helper threads per calling thread, created on first use and
 * kept: creating threads per call would also give OpenBLAS a new thread
 * each time, and it maps (and the kernel zeroes) fresh buffers for every
 * new thread. The pool ends with its owner thread (a key destructor).
 *
 * A job is count blocks; threads claim blocks from one atomic word that
 * holds the job's generation (high 32 bits) and the next block (low 32
 * bits), so a helper that wakes up late, after its job is over, claims
 * nothing (the generation moved on) and the caller never waits for a
 * helper that had no time to start: only for blocks claimed and running.
 */
struct pool {
	int n; /* threads including the owner */
	pthread_t tid[MAX_THREADS];
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	/* the current job, under mu */
	unsigned gen;  /* bumped for every job */
	int stop;
	void (*fn)(void *arg, int block, int count);
	void *arg;
	int count;     /* blocks of the job */
	int parts;     /* threads on the job: helpers i >= parts sit it out */
	_Atomic uint64_t claim; /* gen << 32 | next block to claim */
	atomic_int finished;    /* blocks of the job done */
	struct helper {
		struct pool *p;
		int i;
	} helpers[MAX_THREADS];
};

/* The fields of a job a thread works on, copied under the pool's mutex. */
struct job {
	unsigned gen;
	void (*fn)(void *arg, int block, int count);
	void *arg;
	int count;
};

static _Thread_local struct pool *my_pool;
static pthread_key_t pool_key;
static pthread_once_t pool_key_once = PTHREAD_ONCE_INIT;

/* Claim and run blocks of job j until none is left or the pool moved to another job. */
static void take_blocks(struct pool *p, const struct job *j)
{
	for (;;) {
		uint64_t v = atomic_load(&p->claim);

		do {
			if ((uint32_t)(v >> 32) != j->gen || (uint32_t)v >= (uint32_t)j->count)
				return;
		} while (!atomic_compare_exchange_weak(&p->claim, &v, v + 1));
		j->fn(j->arg, (int)(uint32_t)v, j->count);
		if (atomic_fetch_add(&p->finished, 1) + 1 == j->count) {
			pthread_mutex_lock(&p->mu);
			pthread_cond_signal(&p->done);
			pthread_mutex_unlock(&p->mu);
		}
	}
}

static void *pool_main(void *arg)
{
	struct helper *h = arg;
	struct pool *p = h->p;
	unsigned seen = 0;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		struct job j;
		int on_job;

		while (p->gen == seen && !p->stop)
			pthread_cond_wait(&p->go, &p->mu);
		if (p->stop)
			break;
		seen = p->gen;
		j = (struct job){ p->gen, p->fn, p->arg, p->count };
		on_job = h->i < p->parts;
		pthread_mutex_unlock(&p->mu);
		if (on_job)
			take_blocks(p, &j);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static void pool_destroy(void *arg)
{
	struct pool *p = arg;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	for (int i = 1; i < p->n; i++)
		pthread_join(p->tid[i], NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->go);
	pthread_cond_destroy(&p->done);
	free(p);
}

static void pool_key_create(void)
{
	pthread_key_create(&pool_key, pool_destroy);
}

/* The calling thread's pool of n threads (itself included), or NULL. */
static struct pool *pool_get(int n)
{
	struct pool *p = my_pool;

	if (p && p->n == n)
		return p;
	pthread_once(&pool_key_once, pool_key_create);
	pool_destroy(p);
	my_pool = NULL;
	pthread_setspecific(pool_key, NULL);
	p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->go, NULL);
	pthread_cond_init(&p->done, NULL);
	p->n = 1;
	for (int i = 1; i < n; i++) {
		p->helpers[i] = (struct helper){ p, i };
		if (pthread_create(&p->tid[i], NULL, pool_main, &p->helpers[i]))
			break;
		p->n++;
	}
	my_pool = p;
	pthread_setspecific(pool_key, p);
	return p;
}

/*
 * Run fn(arg, k, count) for every block k in [0, count), on up to `threads`
 * threads: the caller and its pool (threads inherit the creator's
 * affinity) claim blocks in turn; returns when every block is done. A
 * block's writes are visible to the caller: each block's end is an atomic
 * increment of `finished`, which the caller reads.
 */
static void parallel_for(int count, int threads, void (*fn)(void *arg, int block, int count),
			 void *arg)
{
	struct pool *p = threads > 1 && count > 1 ? pool_get(ops_cpu_threads()) : NULL;
	struct job j = { 0, fn, arg, count };

	if (!p || p->n == 1) {
		for (int k = 0; k < count; k++)
			fn(arg, k, count);
		return;
	}
	pthread_mutex_lock(&p->mu);
	j.gen = ++p->gen;
	p->fn = fn;
	p->arg = arg;
	p->count = count;
	p->parts = threads < count ? threads : count;
	atomic_store(&p->finished, 0);
	atomic_store(&p->claim, (uint64_t)j.gen << 32);
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	take_blocks(p, &j);
	pthread_mutex_lock(&p->mu);
	while (atomic_load(&p->finished) < count)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

/* Block k of count of [0, total): [*lo, *hi), cut in multiples of align. */
static void split_range(int total, int align, int k, int count, int *lo, int *hi)
{
	int units = (total + align - 1) / align;
	int b0 = (int)((long)units * k / count), b1 = (int)((long)units * (k + 1) / count);

	*lo = b0 * align < total ? b0 * align : total;
	*hi = b1 * align < total ? b1 * align : total;
}

/* Block k of count of [0, total) in multiples of 16 floats (a cache line). */
static void split_size(size_t total, int k, int count, size_t *lo, size_t *hi)
{
	size_t units = (total + 15) / 16;
	size_t b0 = units * k / count, b1 = units * (k + 1) / count;

	*lo = b0 * 16 < total ? b0 * 16 : total;
	*hi = b1 * 16 < total ? b1 * 16 : total;
}

/* Blocks of `each` out of total (at least 1). */
static int blocks_of(size_t total, size_t each)
{
	size_t n = (total + each - 1) / each;

	return n < 1 ? 1 : n > 1 << 20 ? 1 << 20 : (int)n;
}

/*
 * The loops of the element-wise and row-wise kernels are compiled three
 * times, for AVX-512, AVX2 and the baseline ISA, and the loader picks the
 * best the CPU has (an ifunc). The clones give the same bits: no fused
 * multiply-adds (-ffp-contract=off in kernels/local.mk) and no reordered
 * sums, so a wider vector only does more of the same operations at once.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SIMD_CLONES
#endif

/* Rows per block of row-wise kernels, elements per block of element-wise ones. */
#define ROW_BLOCK 8
#define EW_BLOCK 32768
/*
 * sgemm blocks of a dimension of a matrix product: at least 6 (even
 * C = 768 then balances over 2 or 3 threads), else about 512 columns each
 * (a single-core sgemm of 512 columns runs as fast as one of thousands;
 * 128 loses about 5%).
 */
static int mm_blocks(int dim)
{
	int n = blocks_of(dim, 512);

	return n < 6 ? 6 : n;
}

/* Threads worth using for work of this many FLOPs (waking a thread costs ~20 us). */
static int threads_for(double flops)
{
	int n = ops_cpu_threads();

	if (flops < 1e6)
		return 1;
	return n;
}

/* ------------------------------------------------------------ encoder */

struct rows_args {
	float *out, *mean, *rstd, *dinp, *dweight, *dbias, *dwte, *dwpe;
	const float *inp, *weight, *bias, *dout, *wte, *wpe, *cmean, *crstd;
	const int *tok;
	int B, T, N, C;
	int row_blocks, channel_blocks; /* layernorm_backward's two kinds of block */
};

SIMD_CLONES
static void encoder_forward_part(void *p, int block, int count)
{
	struct rows_args *a = p;
	int lo, hi, C = a->C;

	split_range(a->B * a->T, ROW_BLOCK, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		float *o = a->out + (size_t)r * C;
		const float *te = a->wte + (size_t)a->tok[r] * C;
		const float *pe = a->wpe + (size_t)(r % a->T) * C;

		for (int c = 0; c < C; c++)
			o[c] = te[c] + pe[c];
	}
}

static void encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B,
			    int T, int C)
{
	struct rows_args a = { .out = out, .tok = inp, .wte = wte, .wpe = wpe, .B = B, .T = T,
			       .C = C };

	parallel_for(blocks_of((size_t)B * T, ROW_BLOCK), threads_for(2.0 * B * T * C),
		     encoder_forward_part, &a);
}

/*
 * Split by channel: a token may occur several times, so rows of dwte are
 * shared; channels are not, and each keeps the serial order over (b, t).
 */
SIMD_CLONES
static void encoder_backward_part(void *p, int block, int count)
{
	struct rows_args *a = p;
	int lo, hi, C = a->C;

	split_range(C, 16, block, count, &lo, &hi);
	for (int r = 0; r < a->B * a->T; r++) {
		const float *d = a->dout + (size_t)r * C;
		float *te = a->dwte + (size_t)a->tok[r] * C;
		float *pe = a->dwpe + (size_t)(r % a->T) * C;

		for (int c = lo; c < hi; c++) {
			te[c] += d[c];
			pe[c] += d[c];
		}
	}
}

static void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
			     int T, int C)
{
	struct rows_args a = { .dwte = dwte, .dwpe = dwpe, .dout = dout, .tok = inp, .B = B,
			       .T = T, .C = C };

	parallel_for(blocks_of(C, 64), threads_for(4.0 * B * T * C), encoder_backward_part, &a);
}

/* ------------------------------------------------------------ layernorm */

#define LN_EPS 1e-5f
/* Partial sums of a long float sum: vectorises, same bits for any thread count. */
#define SUM_LANES 16

/* Sum of x[0..n) in SUM_LANES interleaved partial sums, added up in a fixed order. */
static inline float sum_lanes(const float *x, int n)
{
	float acc[SUM_LANES] = { 0 }, s = 0.0f;
	int i = 0;

	for (; i + SUM_LANES <= n; i += SUM_LANES)
		for (int j = 0; j < SUM_LANES; j++)
			acc[j] += x[i + j];
	for (; i < n; i++)
		acc[i % SUM_LANES] += x[i];
	for (int j = 0; j < SUM_LANES; j++)
		s += acc[j];
	return s;
}

/* Sum of (x[c] - m)^2 over the row, as sum_lanes. */
static inline float sum_sq_dev(const float *x, float m, int n)
{
	float acc[SUM_LANES] = { 0 }, s = 0.0f;
	int i = 0;

	for (; i + SUM_LANES <= n; i += SUM_LANES)
		for (int j = 0; j < SUM_LANES; j++)
			acc[j] += (x[i + j] - m) * (x[i + j] - m);
	for (; i < n; i++)
		acc[i % SUM_LANES] += (x[i] - m) * (x[i] - m);
	for (int j = 0; j < SUM_LANES; j++)
		s += acc[j];
	return s;
}

SIMD_CLONES
static void layernorm_forward_part(void *p, int block, int count)
{
	struct rows_args *a = p;
	int lo, hi, C = a->C;

	split_range(a->N, ROW_BLOCK, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		const float *x = a->inp + (size_t)r * C;
		float *o = a->out + (size_t)r * C;
		float m = sum_lanes(x, C) / C;
		float s = math_ln_rstd(sum_sq_dev(x, m, C) / C, LN_EPS);

		for (int c = 0; c < C; c++)
			o[c] = math_ln_apply(x[c], m, s, a->weight[c], a->bias[c]);
		a->mean[r] = m;
		a->rstd[r] = s;
	}
}

static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
			      const float *weight, const float *bias, int N, int C)
{
	struct rows_args a = { .out = out, .mean = mean, .rstd = rstd, .inp = inp,
			       .weight = weight, .bias = bias, .N = N, .C = C };

	parallel_for(blocks_of(N, ROW_BLOCK), threads_for(8.0 * N * C), layernorm_forward_part, &a);
}

/*
 * Two independent passes over the rows: dinp by row (each row needs its own
 * two sums), then dweight and dbias by channel (each a sum over all rows, in
 * row order). Neither reads what the other writes, so no barrier between.
 */
/* dinp of rows [lo, hi). */
SIMD_CLONES
static void ln_backward_rows(struct rows_args *a, int lo, int hi)
{
	float dn[SUM_LANES], dnx[SUM_LANES];
	int C = a->C;

	for (int r = lo; r < hi; r++) {
		const float *d = a->dout + (size_t)r * C, *x = a->inp + (size_t)r * C;
		float *dx = a->dinp + (size_t)r * C;
		float m = a->cmean[r], s = a->crstd[r], dnorm_mean = 0.0f, dnorm_x_mean = 0.0f;
		int c = 0;

		for (int j = 0; j < SUM_LANES; j++)
			dn[j] = dnx[j] = 0.0f;
		for (; c + SUM_LANES <= C; c += SUM_LANES) {
			for (int j = 0; j < SUM_LANES; j++) {
				float wd = a->weight[c + j] * d[c + j];

				dn[j] += wd;
				dnx[j] += wd * ((x[c + j] - m) * s);
			}
		}
		for (; c < C; c++) {
			float wd = a->weight[c] * d[c];

			dn[c % SUM_LANES] += wd;
			dnx[c % SUM_LANES] += wd * ((x[c] - m) * s);
		}
		for (int j = 0; j < SUM_LANES; j++) {
			dnorm_mean += dn[j];
			dnorm_x_mean += dnx[j];
		}
		dnorm_mean /= C;
		dnorm_x_mean /= C;
		for (c = 0; c < C; c++)
			dx[c] += math_ln_dx(d[c], a->weight[c], (x[c] - m) * s, s, dnorm_mean,
					    dnorm_x_mean);
	}
}

/* dweight and dbias of channels [lo, hi): sums over all rows in row order. */
SIMD_CLONES
static void ln_backward_channels(struct rows_args *a, int lo, int hi)
{
	int C = a->C;

	for (int r = 0; r < a->N; r++) {
		const float *d = a->dout + (size_t)r * C, *x = a->inp + (size_t)r * C;
		float m = a->cmean[r], s = a->crstd[r];

		for (int c = lo; c < hi; c++) {
			a->dbias[c] += d[c];
			a->dweight[c] += (x[c] - m) * s * d[c];
		}
	}
}

static void layernorm_backward_part(void *p, int block, int count)
{
	struct rows_args *a = p;
	int lo, hi;

	(void)count;
	if (block < a->row_blocks) {
		split_range(a->N, ROW_BLOCK, block, a->row_blocks, &lo, &hi);
		ln_backward_rows(a, lo, hi);
	} else {
		split_range(a->C, 16, block - a->row_blocks, a->channel_blocks, &lo, &hi);
		ln_backward_channels(a, lo, hi);
	}
}

static void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			       const float *inp, const float *weight, const float *mean,
			       const float *rstd, int N, int C)
{
	struct rows_args a = { .dinp = dinp, .dweight = dweight, .dbias = dbias, .dout = dout,
			       .inp = inp, .weight = weight, .cmean = mean, .crstd = rstd, .N = N,
			       .C = C, .row_blocks = blocks_of(N, ROW_BLOCK),
			       .channel_blocks = blocks_of(C, 64) };

	parallel_for(a.row_blocks + a.channel_blocks, threads_for(12.0 * N * C),
		     layernorm_backward_part, &a);
}

/* ------------------------------------------------------------ matmul */

struct mm_args {
	float *out, *dinp, *dweight, *dbias;
	const float *inp, *weight, *bias, *dout;
	int N, C, OC;
	int dinp_blocks, dweight_blocks; /* matmul_backward's two kinds of block */
};

/*
 * out[:, o0:o1] = inp @ weight[o0:o1]^T (+ bias[o0:o1]): the bias is
 * written first and sgemm adds to it (beta = 1), which costs no more than
 * the zeroing sgemm does for beta = 0.
 */
static void mm_forward_part(void *p, int block, int count)
{
	struct mm_args *a = p;
	int lo, hi;

	split_range(a->OC, 16, block, count, &lo, &hi);
	if (hi <= lo)
		return;
	if (a->bias)
		for (int r = 0; r < a->N; r++)
			memcpy(a->out + (size_t)r * a->OC + lo, a->bias + lo,
			       (size_t)(hi - lo) * sizeof(float));
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a->N, hi - lo, a->C, 1.0f, a->inp,
		    a->C, a->weight + (size_t)lo * a->C, a->C, a->bias ? 1.0f : 0.0f, a->out + lo,
		    a->OC);
}

static void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
			   int N, int C, int OC)
{
	struct mm_args a = { .out = out, .inp = inp, .weight = weight, .bias = bias, .N = N,
			     .C = C, .OC = OC };

	parallel_for(mm_blocks(OC), threads_for(2.0 * N * C * OC), mm_forward_part,
		     &a);
}

/*
 * Blocks [0, dinp_blocks) are column blocks [c0, c1) of dinp, the others
 * row blocks [o0, o1) of dweight and dbias:
 *   dinp[:, c0:c1]    += dout @ weight[:, c0:c1]
 *   dweight[o0:o1, :] += dout[:, o0:o1]^T @ inp
 *   dbias[o0:o1]      += sum over rows of dout[:, o0:o1] (in row order)
 */
static void mm_backward_part(void *p, int block, int count)
{
	struct mm_args *a = p;
	int lo, hi;

	(void)count;
	if (block < a->dinp_blocks) {
		split_range(a->C, 16, block, a->dinp_blocks, &lo, &hi);
		if (hi > lo)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, a->N, hi - lo, a->OC,
				    1.0f, a->dout, a->OC, a->weight + lo, a->C, 1.0f, a->dinp + lo,
				    a->C);
		return;
	}
	split_range(a->OC, 16, block - a->dinp_blocks, a->dweight_blocks, &lo, &hi);
	if (hi <= lo)
		return;
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hi - lo, a->C, a->N, 1.0f,
		    a->dout + lo, a->OC, a->inp, a->C, 1.0f, a->dweight + (size_t)lo * a->C, a->C);
	if (a->dbias)
		for (int r = 0; r < a->N; r++)
			for (int o = lo; o < hi; o++)
				a->dbias[o] += a->dout[(size_t)r * a->OC + o];
}

static void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			    const float *inp, const float *weight, int N, int C, int OC)
{
	struct mm_args a = { .dinp = dinp, .dweight = dweight, .dbias = dbias, .inp = inp,
			     .weight = weight, .dout = dout, .N = N, .C = C, .OC = OC,
			     .dinp_blocks = dinp ? mm_blocks(C) : 0,
			     .dweight_blocks = mm_blocks(OC) };

	parallel_for(a.dinp_blocks + a.dweight_blocks, threads_for(4.0 * N * C * OC),
		     mm_backward_part, &a);
}

/* ------------------------------------------------------------ attention */

struct att_args {
	float *out, *att, *dqkv;
	const float *qkv, *dout, *catt;
	int B, T, NH, HS;
};

/*
 * One (batch, head) pair: scores = Q K^T / sqrt(HS) with a causal mask, a
 * softmax per row, then out = att V. Q, K, V are strided views into qkv.
 */
static void att_forward_head(struct att_args *a, int b, int h)
{
	int T = a->T, HS = a->HS, C = a->NH * HS, C3 = 3 * C;
	const float *q = a->qkv + (size_t)b * T * C3 + (size_t)h * HS;
	const float *k = q + C, *v = q + 2 * C;
	float *att = a->att + ((size_t)b * a->NH + h) * T * T;
	float *out = a->out + (size_t)b * T * C + (size_t)h * HS;
	float scale = 1.0f / sqrtf((float)HS);

	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HS, scale, q, C3, k, C3, 0.0f,
		    att, T);
	for (int t = 0; t < T; t++) {
		float *row = att + (size_t)t * T, max = -FLT_MAX, sum = 0.0f;

		for (int t2 = 0; t2 <= t; t2++)
			max = row[t2] > max ? row[t2] : max;
		for (int t2 = 0; t2 <= t; t2++) {
			row[t2] = math_softmax_exp(row[t2], max);
			sum += row[t2];
		}
		for (int t2 = 0; t2 <= t; t2++)
			row[t2] /= sum;
		for (int t2 = t + 1; t2 < T; t2++)
			row[t2] = 0.0f;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HS, T, 1.0f, att, T, v, C3, 0.0f,
		    out, C);
}

static void att_forward_part(void *p, int block, int count)
{
	struct att_args *a = p;
	int lo, hi;

	split_range(a->B * a->NH, 1, block, count, &lo, &hi);
	for (int bh = lo; bh < hi; bh++)
		att_forward_head(a, bh / a->NH, bh % a->NH);
}

static void attention_forward(float *out, float *att, const float *qkv, int B, int T, int NH,
			      int HS)
{
	struct att_args a = { .out = out, .att = att, .qkv = qkv, .B = B, .T = T, .NH = NH,
			      .HS = HS };

	parallel_for(B * NH, threads_for(4.0 * B * NH * T * T * HS), att_forward_part, &a);
}

/*
 * Backward of one (batch, head) pair, with datt a (T, T) scratch:
 *   datt = dout V^T,  dV += att^T dout,
 *   dpre = att * (datt - rowsum(att * datt)) / sqrt(HS)   (softmax backward),
 *   dQ += dpre K,  dK += dpre^T Q.
 */
static void att_backward_head(struct att_args *a, int b, int h, float *datt)
{
	int T = a->T, HS = a->HS, C = a->NH * HS, C3 = 3 * C;
	size_t qoff = (size_t)b * T * C3 + (size_t)h * HS;
	const float *q = a->qkv + qoff, *k = q + C, *v = q + 2 * C;
	float *dq = a->dqkv + qoff, *dk = dq + C, *dv = dq + 2 * C;
	const float *att = a->catt + ((size_t)b * a->NH + h) * T * T;
	const float *dout = a->dout + (size_t)b * T * C + (size_t)h * HS;
	float scale = 1.0f / sqrtf((float)HS);

	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HS, 1.0f, dout, C, v, C3, 0.0f,
		    datt, T);
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HS, T, 1.0f, att, T, dout, C, 1.0f,
		    dv, C3);
	for (int t = 0; t < T; t++) {
		const float *arow = att + (size_t)t * T;
		float *drow = datt + (size_t)t * T, dot = 0.0f;

		for (int t2 = 0; t2 <= t; t2++)
			dot += arow[t2] * drow[t2];
		for (int t2 = 0; t2 <= t; t2++)
			drow[t2] = arow[t2] * (drow[t2] - dot) * scale;
		for (int t2 = t + 1; t2 < T; t2++)
			drow[t2] = 0.0f;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HS, T, 1.0f, datt, T, k, C3, 1.0f,
		    dq, C3);
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HS, T, 1.0f, datt, T, q, C3, 1.0f,
		    dk, C3);
}

static void att_backward_part(void *p, int block, int count)
{
	struct att_args *a = p;
	float *datt = malloc(sizeof(float) * (size_t)a->T * a->T);
	int lo, hi;

	if (!datt)
		abort(); /* T*T floats: out of memory here means the machine is unusable */
	split_range(a->B * a->NH, 1, block, count, &lo, &hi);
	for (int bh = lo; bh < hi; bh++)
		att_backward_head(a, bh / a->NH, bh % a->NH, datt);
	free(datt);
}

static void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
			       int B, int T, int NH, int HS)
{
	struct att_args a = { .dqkv = dqkv, .dout = dout, .qkv = qkv, .catt = att, .B = B, .T = T,
			      .NH = NH, .HS = HS };

	parallel_for(B * NH, threads_for(8.0 * B * NH * T * T * HS), att_backward_part, &a);
}

/* ------------------------------------------------------------ element-wise */

/*
 * Element-wise kernels: blocks of about EW_BLOCK elements (split_size); an
 * element's value does not depend on the blocks.
 */
struct ew_args {
	float *out, *out2;
	const float *a, *b;
	size_t n;
	float s;
};

SIMD_CLONES
static void gelu_forward_part(void *p, int block, int count)
{
	struct ew_args *e = p;
	float *restrict out = e->out;
	const float *restrict inp = e->a;
	size_t lo, hi;

	split_size(e->n, block, count, &lo, &hi);
	for (size_t k = lo; k < hi; k++)
		out[k] = math_gelu_forward(inp[k]);
}

static void gelu_forward(float *out, const float *inp, size_t n)
{
	struct ew_args e = { .out = out, .a = inp, .n = n };

	parallel_for(blocks_of(n, EW_BLOCK), threads_for(30.0 * n), gelu_forward_part, &e);
}

SIMD_CLONES
static void gelu_backward_part(void *p, int block, int count)
{
	struct ew_args *e = p;
	float *restrict dinp = e->out;
	const float *restrict inp = e->a, *restrict dout = e->b;
	size_t lo, hi;

	split_size(e->n, block, count, &lo, &hi);
	for (size_t k = lo; k < hi; k++)
		dinp[k] += math_gelu_backward(inp[k], dout[k]);
}

static void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
	struct ew_args e = { .out = dinp, .a = inp, .b = dout, .n = n };

	parallel_for(blocks_of(n, EW_BLOCK), threads_for(40.0 * n), gelu_backward_part, &e);
}

/* out may be a or b (the model adds a projection into the stream in place). */
SIMD_CLONES
static void residual_forward_part(void *p, int block, int count)
{
	struct ew_args *e = p;
	size_t lo, hi;

	split_size(e->n, block, count, &lo, &hi);
	for (size_t k = lo; k < hi; k++)
		e->out[k] = e->a[k] + e->b[k];
}

static void residual_forward(float *out, const float *a, const float *b, size_t n)
{
	struct ew_args e = { .out = out, .a = a, .b = b, .n = n };

	parallel_for(blocks_of(n, EW_BLOCK), threads_for(8.0 * n), residual_forward_part, &e);
}

SIMD_CLONES
static void residual_backward_part(void *p, int block, int count)
{
	struct ew_args *e = p;
	float *restrict da = e->out, *restrict db = e->out2;
	const float *restrict dout = e->a;
	size_t lo, hi;

	split_size(e->n, block, count, &lo, &hi);
	for (size_t k = lo; k < hi; k++) {
		da[k] += dout[k];
		db[k] += dout[k];
	}
}

static void residual_backward(float *da, float *db, const float *dout, size_t n)
{
	struct ew_args e = { .out = da, .out2 = db, .a = dout, .n = n };

	parallel_for(blocks_of(n, EW_BLOCK), threads_for(12.0 * n), residual_backward_part, &e);
}

static void zero_part(void *p, int block, int count)
{
	struct ew_args *e = p;
	size_t lo, hi;

	split_size(e->n, block, count, &lo, &hi);
	memset(e->out + lo, 0, (hi - lo) * sizeof(float));
}

static void zero(float *p, size_t n)
{
	struct ew_args e = { .out = p, .n = n };

	parallel_for(blocks_of(n, EW_BLOCK), threads_for(4.0 * n), zero_part, &e);
}

SIMD_CLONES
static void scale_part(void *p, int block, int count)
{
	struct ew_args *e = p;
	float *restrict x = e->out;
	size_t lo, hi;

	split_size(e->n, block, count, &lo, &hi);
	for (size_t k = lo; k < hi; k++)
		x[k] *= e->s;
}

static void scale(float *p, size_t n, float s)
{
	struct ew_args e = { .out = p, .n = n, .s = s };

	parallel_for(blocks_of(n, EW_BLOCK), threads_for(8.0 * n), scale_part, &e);
}

/*
 * Sum of squares: fixed chunks of SUMSQ_CHUNK elements, each summed in
 * double over SUM_LANES partial sums, the chunk sums then added in chunk
 * order by the caller: one block per chunk, so the result is the same for
 * any thread count.
 */
#define SUMSQ_CHUNK 65536

struct sumsq_args {
	const float *x;
	size_t n;
	double *chunk;
};

SIMD_CLONES
static double sumsq_chunk(const float *restrict x, size_t n)
{
	double acc[SUM_LANES] = { 0 }, s = 0.0;
	size_t i = 0;

	for (; i + SUM_LANES <= n; i += SUM_LANES)
		for (int j = 0; j < SUM_LANES; j++)
			acc[j] += (double)x[i + j] * x[i + j];
	for (; i < n; i++)
		acc[i % SUM_LANES] += (double)x[i] * x[i];
	for (int j = 0; j < SUM_LANES; j++)
		s += acc[j];
	return s;
}

/* One block per chunk. */
static void sumsq_part(void *p, int block, int count)
{
	struct sumsq_args *a = p;
	size_t lo = (size_t)block * SUMSQ_CHUNK;
	size_t hi = lo + SUMSQ_CHUNK < a->n ? lo + SUMSQ_CHUNK : a->n;

	(void)count;
	a->chunk[block] = sumsq_chunk(a->x + lo, hi - lo);
}

static double sumsq(const float *x, size_t n)
{
	size_t chunks = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
	double small[64], *chunk = chunks <= 64 ? small : malloc(chunks * sizeof(double)), s = 0.0;
	struct sumsq_args a = { x, n, chunk };

	if (!chunk) { /* no memory for the partial sums: one thread, same order */
		for (size_t c = 0; c < chunks; c++)
			s += sumsq_chunk(x + c * SUMSQ_CHUNK,
					 c + 1 < chunks ? SUMSQ_CHUNK : n - c * SUMSQ_CHUNK);
		return s;
	}
	parallel_for((int)chunks, threads_for(2.0 * n), sumsq_part, &a);
	for (size_t c = 0; c < chunks; c++)
		s += chunk[c];
	if (chunk != small)
		free(chunk);
	return s;
}

/* ------------------------------------------------------------ softmax + cross-entropy */

struct xent_args {
	float *losses, *logits;
	const int *targets;
	float dloss;
	int N, V, Vp;
};

SIMD_CLONES
static void xent_forward_part(void *p, int block, int count)
{
	struct xent_args *a = p;
	int lo, hi, V = a->V, Vp = a->Vp; /* locals: the loops below store floats */

	split_range(a->N, 1, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		float *row = a->logits + (size_t)r * Vp, max = -FLT_MAX, sum;

		for (int v = 0; v < V; v++)
			max = row[v] > max ? row[v] : max;
		for (int v = 0; v < V; v++)
			row[v] = math_softmax_exp(row[v], max);
		sum = sum_lanes(row, V);
		for (int v = 0; v < V; v++)
			row[v] /= sum;
		for (int v = V; v < Vp; v++)
			row[v] = 0.0f;
		if (a->targets)
			a->losses[r] = -logf(row[a->targets[r]]);
	}
}

static void softmax_xent_forward(float *losses, float *logits, const int *targets, int N, int V,
				 int Vp)
{
	struct xent_args a = { .losses = losses, .logits = logits, .targets = targets, .N = N,
			       .V = V, .Vp = Vp };

	parallel_for(N, threads_for(20.0 * N * V), xent_forward_part, &a);
}

SIMD_CLONES
static void xent_backward_part(void *p, int block, int count)
{
	struct xent_args *a = p;
	int lo, hi;

	int V = a->V, Vp = a->Vp;
	float dloss = a->dloss;

	split_range(a->N, 1, block, count, &lo, &hi);
	for (int r = lo; r < hi; r++) {
		float *row = a->logits + (size_t)r * Vp;
		int target = a->targets[r];

		for (int v = 0; v < V; v++)
			row[v] = math_xent_dlogit(row[v], v == target, dloss);
		for (int v = V; v < Vp; v++)
			row[v] = 0.0f;
	}
}

static void softmax_xent_backward(float *probs, const int *targets, float dloss, int N, int V,
				  int Vp)
{
	struct xent_args a = { .logits = probs, .targets = targets, .dloss = dloss, .N = N, .V = V,
			       .Vp = Vp };

	parallel_for(N, threads_for(4.0 * N * V), xent_backward_part, &a);
}

/* ------------------------------------------------------------ AdamW */

struct adamw_args {
	float *params, *m, *v;
	const float *grads;
	size_t n;
	float lr, beta1, beta2, eps, wd, bc1, bc2;
};

SIMD_CLONES
static void adamw_part(void *p, int block, int count)
{
	struct adamw_args *a = p;
	size_t lo, hi;
	float *restrict params = a->params, *restrict m = a->m, *restrict v = a->v;
	const float *restrict grads = a->grads;

	split_size(a->n, block, count, &lo, &hi);
	for (size_t k = lo; k < hi; k++)
		params[k] = math_adamw(params[k], grads[k], &m[k], &v[k], a->lr, a->beta1,
				       a->beta2, a->eps, a->wd, a->bc1, a->bc2);
}

static void adamw(float *params, const float *grads, float *m, float *v, size_t n, float lr,
		  float beta1, float beta2, float eps, float weight_decay, float bc1, float bc2)
{
	struct adamw_args a = { params, m, v, grads, n, lr, beta1, beta2, eps, weight_decay, bc1,
				bc2 };

	parallel_for(blocks_of(n, EW_BLOCK), threads_for(10.0 * n), adamw_part, &a);
}

/* ---------------------------------------------------------------- memory */

/*
 * Host memory aligned to a cache line: 64-byte aligned rows let the
 * element-wise loops use aligned AVX-512 loads.
 */
static void *host_alloc(size_t bytes)
{
	void *p;

	if (posix_memalign(&p, 64, bytes ? bytes : 1))
		return NULL;
	return p;
}

static void host_free(void *p)
{
	free(p);
}

/* Every copy of the CPU backend is a plain memcpy: its memory is the host's. */
static void host_copy(void *dst, const void *src, size_t bytes)
{
	if (bytes)
		memcpy(dst, src, bytes);
}

static void host_sync(void)
{
}

static void host_mem_info(size_t *free_bytes, size_t *total_bytes)
{
	*free_bytes = 0;
	*total_bytes = 0;
}

const struct ops ops_cpu = {
	.name = "cpu",
	.encoder_forward = encoder_forward,
	.encoder_backward = encoder_backward,
	.layernorm_forward = layernorm_forward,
	.layernorm_backward = layernorm_backward,
	.matmul_forward = matmul_forward,
	.matmul_backward = matmul_backward,
	.attention_forward = attention_forward,
	.attention_backward = attention_backward,
	.gelu_forward = gelu_forward,
	.gelu_backward = gelu_backward,
	.residual_forward = residual_forward,
	.residual_backward = residual_backward,
	.softmax_xent_forward = softmax_xent_forward,
	.softmax_xent_backward = softmax_xent_backward,
	.adamw = adamw,
	.zero = zero,
	.scale = scale,
	.sumsq = sumsq,
	.alloc = host_alloc,
	.free = host_free,
	.upload = host_copy,
	.download = host_copy,
	.copy = host_copy,
	.host_alloc = host_alloc,
	.host_free = host_free,
	.sync = host_sync,
	.mem_info = host_mem_info,
};
