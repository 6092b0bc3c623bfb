/*
 * kernels/cpu/threads.c - how the CPU kernels use a rank's cores: the
 * calling thread's pool of helpers, parallel_for over blocks that depend
 * on the sizes only, and OpenBLAS kept single-threaded.
 */
#include "config.h"
#include "kernels/cpu/cpu.h"
#include "lib/env_number.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <strings.h>
#include <unistd.h>
#include <cblas.h>

/* Threads of the calling thread's kernels; 0 = not decided yet. */
static _Thread_local int cpu_threads;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;


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

void ops_cpu_blas_reexec(char **argv)
{
	const char *hint = ops_cpu_blas_coretype_hint();
	int changed = 0;

	if (hint && !getenv("OPENBLAS_CORETYPE")) {
		env_set_own("OPENBLAS_CORETYPE", hint);
		changed = 1;
	}
	if (!getenv("OPENBLAS_NUM_THREADS")) {
		env_set_own("OPENBLAS_NUM_THREADS", "1");
		changed = 1;
	}
	if (changed) {
		/* by the file's own path: executed as /proc/self/exe, the process
		 * would be called "exe" in ps, top and pgrep */
		char path[4096];
		ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);

		if (n > 0 && (size_t)n < sizeof path - 1) {
			path[n] = '\0';
			execv(path, argv);
		}
		execv("/proc/self/exe", argv);
	}
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
void parallel_for(int count, int threads, void (*fn)(void *arg, int block, int count),
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

void ops_cpu_parallel_for(int count, void (*fn)(void *arg, int block, int count), void *arg)
{
	parallel_for(count, ops_cpu_threads(), fn, arg);
}

/* Block k of count of [0, total): [*lo, *hi), cut in multiples of align. */
void split_range(int total, int align, int k, int count, int *lo, int *hi)
{
	int units = (total + align - 1) / align;
	int b0 = (int)((long)units * k / count), b1 = (int)((long)units * (k + 1) / count);

	*lo = b0 * align < total ? b0 * align : total;
	*hi = b1 * align < total ? b1 * align : total;
}

/* Block k of count of [0, total) in multiples of 16 floats (a cache line). */
void split_size(size_t total, int k, int count, size_t *lo, size_t *hi)
{
	size_t units = (total + 15) / 16;
	size_t b0 = units * k / count, b1 = units * (k + 1) / count;

	*lo = b0 * 16 < total ? b0 * 16 : total;
	*hi = b1 * 16 < total ? b1 * 16 : total;
}

/* Blocks of `each` out of total (at least 1). */
int blocks_of(size_t total, size_t each)
{
	size_t n = (total + each - 1) / each;

	return n < 1 ? 1 : n > 1 << 20 ? 1 << 20 : (int)n;
}

/* Threads worth using for work of this many FLOPs (waking a thread costs ~20 us). */
int threads_for(double flops)
{
	int n = ops_cpu_threads();

	if (flops < 1e6)
		return 1;
	return n;
}
