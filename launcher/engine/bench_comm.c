/*
 * launcher/engine/bench_comm.c - `stork bench comm`: all-reduce bandwidth between
 * the tasks of a Slurm step over UCX (lib/comm/comm.h), like nccl-tests.
 *
 *   srun -N2 -n2 --mpi=pmix stork bench comm -b 1K -e 256M -f 2 [-d cuda]
 *
 * With -d cuda the buffers are in each task's GPU (STORK_GPU, else
 * SLURM_LOCALID, modulo the GPUs it sees) and the all-reduce goes through
 * the device communicator storkd uses (lib/comm/device.c): NCCL when every
 * task has a GPU of its own, else staged through pinned host memory; the
 * header says which.
 *
 * Every task is one rank: the tasks meet through the step's rendezvous
 * (lib/rendezvous/rendezvous.h: PMIx or TCP) to exchange their UCX worker addresses,
 * then for each size from MIN to MAX (multiplied by FACTOR) they run WARMUP
 * untimed and ITERS timed in-place float sums. Rank 0 prints one line per
 * size:
 *
 *   size   bytes actually reduced (count * 4)
 *   count  float elements
 *   time   microseconds per all-reduce, the average over ITERS on the
 *          slowest rank
 *   algbw  size / time (GB/s, 1e9 bytes)
 *   busbw  algbw * 2 (n - 1) / n: the bytes each rank's link carries in a
 *          bandwidth-optimal all-reduce, comparable across rank counts
 *   #wrong elements (over all ranks) of a separate, checked all-reduce whose
 *          result is not the sum lib/comm/comm.h promises
 *
 * The check: rank r's element i is a hash of (r, i) made into a float of
 * either sign between 2^-12 and 2^12, so that float sums of the ranks'
 * elements round differently in different orders (with 3 or more ranks:
 * two operands add the same either way). Every rank computes every rank's
 * input and checks each element of its result against the left fold in
 * rank order, ((x_0 + x_1) + x_2) + ..., bit for bit: the order every CPU
 * backend (UCX here, and the staged path of -d cuda) guarantees. NCCL sums
 * in an order of its own, so on NCCL an element is wrong only when it is
 * farther from the exact sum than n - 1 float roundings of the sum of
 * magnitudes, the bound of any order.
 */
#include "config.h"
#include "launcher/engine/commands.h"

#include "kernels/device.h"
#include "kernels/ops.h"
#include "launcher/engine/plan.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"
#include "lib/env_number.h"
#include "lib/exit_codes.h"
#include "lib/rendezvous/rendezvous.h"
#include "lib/rng.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct bench_opts {
	size_t min, max;
	unsigned long factor;
	int iters, warmup;
	int cuda;  /* -d cuda: device buffers */
};

/* Where the buffer lives: host memory, or the task's GPU (o->cuda). */
struct buffer {
	const struct ops *mem;
	float *x;     /* in mem's memory */
	float *host;  /* a host copy to fill and check (x itself on the host) */
	int any_order; /* reduced by NCCL: in no order the check can know */
};

static int usage(FILE *out)
{
	fprintf(out, "usage: stork bench comm [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] "
		"[-w WARMUP] [-d cpu|cuda]\n"
		"  sizes in bytes with an optional K, M or G suffix (powers of 1024);\n"
		"  defaults: -b 1K -e 64M -f 2 -n 20 -w 5\n");
	return out == stdout ? STORK_EXIT_OK : STORK_EXIT_USAGE;
}

/* "1000", "4K", "16M", "1G" -> bytes; -1 when malformed. */
static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	switch (toupper((unsigned char)*end)) {
	case 'G': v <<= 10; /* fall through */
	case 'M': v <<= 10; /* fall through */
	case 'K': v <<= 10; end++; break;
	case '\0': break;
	default: return -1;
	}
	if (*end && !(toupper((unsigned char)*end) == 'B' && !end[1]))
		return -1;
	*out = (size_t)v;
	return 0;
}

static int parse_opts(int argc, char **argv, struct bench_opts *o)
{
	int c;
	char *end;

	*o = (struct bench_opts){ .min = 1024, .max = 64u << 20, .factor = 2, .iters = 20,
				  .warmup = 5 };
	optind = 1;
	while ((c = getopt(argc, argv, "b:e:f:n:w:d:")) != -1) {
		switch (c) {
		case 'd':
			if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda")) {
				fprintf(stderr, "stork bench comm: -d '%s': cpu or cuda\n", optarg);
				return -1;
			}
			o->cuda = !strcmp(optarg, "cuda");
			break;
		case 'b':
		case 'e':
			if (parse_size(optarg, c == 'b' ? &o->min : &o->max) < 0) {
				fprintf(stderr, "stork bench comm: -%c '%s' is not a size (bytes, "
					"optionally with K, M or G)\n", c, optarg);
				return -1;
			}
			break;
		case 'f':
			o->factor = strtoul(optarg, &end, 10);
			if (*end || o->factor < 2) {
				fprintf(stderr, "stork bench comm: -f '%s' is not a factor of 2 or "
					"more\n", optarg);
				return -1;
			}
			break;
		case 'n':
		case 'w':
			*(c == 'n' ? &o->iters : &o->warmup) = (int)strtol(optarg, &end, 10);
			if (*end || (c == 'n' ? o->iters < 1 : o->warmup < 0)) {
				fprintf(stderr, "stork bench comm: -%c '%s' is not a %s number\n", c,
					optarg, c == 'n' ? "positive" : "non-negative");
				return -1;
			}
			break;
		default:
			return -1;
		}
	}
	if (optind != argc || o->min < 4 || o->max < o->min) {
		if (optind == argc)
			fprintf(stderr, "stork bench comm: need 4 <= MIN <= MAX (got -b %zu -e %zu)\n",
				o->min, o->max);
		return -1;
	}
	return 0;
}

/* Rank r's element i: +-m 2^e, m in [1, 2) and e in [-12, 12] from a hash of (i, r). */
static float input(size_t i, int rank)
{
	uint64_t h = rng_seed(i, (uint64_t)rank);
	float x = ldexpf(1.0f + (float)(h >> 41) / 8388608.0f, (int)((h >> 8) % 25) - 12);

	return h & 1 ? -x : x;
}

static void fill(float *x, size_t count, int rank)
{
	for (size_t i = 0; i < count; i++)
		x[i] = input(i, rank);
}

/*
 * Elements of x that are not the sum of every rank's input: the float left
 * fold in rank order, bit for bit, or with any_order (NCCL) within
 * gamma_{n-1} sum |x_r| of the exact sum (gamma_{n-1} = (n - 1) u / (1 - (n - 1) u),
 * u = 2^-24).
 */
static int64_t count_wrong(const float *x, size_t count, int n, int any_order)
{
	/* the error bound of a float sum of n terms in any order (Higham's gamma_{n-1}) */
	double gamma = (n - 1) * 0x1p-24 / (1.0 - (n - 1) * 0x1p-24);
	int64_t wrong = 0;

	for (size_t i = 0; i < count; i++) {
		float fold = input(i, 0);
		double exact = fold, mag = fabs(exact);

		for (int r = 1; r < n; r++) {
			float y = input(i, r);

			fold += y;
			exact += y;
			mag += fabs((double)y);
		}
		if (any_order)
			wrong += !(fabs(x[i] - exact) <= gamma * mag);
		else
			wrong += memcmp(&x[i], &fold, sizeof fold) != 0;
	}
	return wrong;
}

/* Fill the buffer with this rank's input (through its host copy). */
static void fill_buffer(struct buffer *b, size_t count, int rank)
{
	fill(b->host, count, rank);
	if (b->x != b->host)
		b->mem->upload(b->x, b->host, count * sizeof(float));
}

/* One table line: time and #wrong agreed over all ranks; the time (us) in *time_us. */
static int bench_size(struct comm *c, struct buffer *b, size_t count, const struct bench_opts *o,
		      double *time_us)
{
	int n = comm_size(c), rank = comm_rank(c), rc;
	float *x = b->x;
	double t, us;
	int64_t wrong;

	fill_buffer(b, count, rank);
	for (int i = 0; i < o->warmup; i++)
		if ((rc = comm_allreduce(c, x, count, COMM_FLOAT32, COMM_SUM)))
			return rc;
	if ((rc = comm_barrier(c)))
		return rc;
	t = clock_monotonic();
	for (int i = 0; i < o->iters; i++)
		if ((rc = comm_allreduce(c, x, count, COMM_FLOAT32, COMM_SUM)))
			return rc;
	us = (clock_monotonic() - t) * 1e6 / o->iters;
	fill_buffer(b, count, rank);
	if ((rc = comm_allreduce(c, x, count, COMM_FLOAT32, COMM_SUM)))
		return rc;
	if (b->x != b->host)
		b->mem->download(b->host, b->x, count * sizeof(float));
	wrong = count_wrong(b->host, count, n, b->any_order);
	if ((rc = comm_allreduce(c, &us, 1, COMM_FLOAT64, COMM_MAX)) ||
	    (rc = comm_allreduce(c, &wrong, 1, COMM_INT64, COMM_SUM)))
		return rc;
	*time_us = us;
	if (rank == 0) {
		double size = (double)count * sizeof(float), algbw = size / us * 1e-3;

		printf("%12zu  %12zu  %8s  %10.2f  %7.2f  %7.2f  %7lld\n", count * sizeof(float),
		       count, "float", us, algbw, algbw * 2.0 * (n - 1) / n, (long long)wrong);
		fflush(stdout);
	}
	return wrong ? 1 : 0;
}

/* Meet the step's other tasks and connect to them over UCX. */
static int connect_ranks(struct comm_ucx **u, struct comm **c, const char **method)
{
	struct rdv_params p;
	struct rdv_result r;
	const void *addr, **addrs;
	size_t len;
	char err[4096];
	int rc;

	if (rdv_params_from_env(&p, RDV_AUTO, 0, err, sizeof err) < 0) {
		fprintf(stderr, "stork bench comm: %s\n", err);
		return STORK_EXIT_RENDEZVOUS;
	}
	/*
	 * The transport storkd uses (daemon/node/node.c): tasks on one host talk
	 * over the endpoints with peer-failure handling (TCP), not shared
	 * memory, so the figure kept for stork plan is the one a run gets,
	 * also on a test cluster whose nodes share a host.
	 */
	if (!getenv("STORK_UCX_PEER_ONLY"))
		env_set_own("STORK_UCX_PEER_ONLY", "1");
	if ((rc = comm_ucx_open(u, &addr, &len))) {
		fprintf(stderr, "stork bench comm: task %d: cannot open UCX: %s\n", p.index,
			comm_strerror(rc));
		return STORK_EXIT_INTERNAL;
	}
	if (rdv_exchange(&p, addr, len, &r, err, sizeof err) < 0) {
		fprintf(stderr, "stork bench comm: task %d: %s\n", p.index, err);
		return STORK_EXIT_RENDEZVOUS;
	}
	*method = r.method;
	if (!(addrs = calloc((size_t)r.n, sizeof *addrs)))
		return STORK_EXIT_INTERNAL;
	for (int k = 0; k < r.n; k++)
		addrs[k] = r.peers[k].blob;
	rc = comm_ucx_world(*u, p.index, p.count, addrs, c);
	free(addrs);
	rdv_result_free(&r);
	if (rc) {
		fprintf(stderr, "stork bench comm: task %d: cannot connect to the other %d tasks "
			"over UCX: %s\n", p.index, p.count - 1, comm_strerror(rc));
		return STORK_EXIT_INTERNAL;
	}
	return 0;
}

/*
 * -d cuda: this task's GPU and the device communicator over c (collective).
 * Returns 0 or an exit code with the reason printed.
 */
static int use_gpu(struct comm **c, struct comm **dev, const char *host, struct buffer *b)
{
	const char *env = getenv("STORK_GPU") ? getenv("STORK_GPU") : getenv("SLURM_LOCALID");
	int n = kernels_cuda_device_count(), gpu = env ? atoi(env) : 0, rc;
	char desc[160], id[256], err[512];
	struct comm_device_memory mem;

	if (kernels_cuda_use_device(n ? gpu % n : 0, desc, sizeof desc, err, sizeof err) < 0) {
		fprintf(stderr, "stork bench comm: -d cuda: task %d on %s has no usable GPU: %s\n",
			comm_rank(*c), host, err);
		comm_abort(*c, err);
		return STORK_EXIT_CONFIG;
	}
#ifdef HAVE_CUDA
	b->mem = &ops_cuda;
#endif
	snprintf(id, sizeof id, "%.64s/%.159s", host, desc); /* a host name has at most 64 bytes */
	mem = (struct comm_device_memory){
		.is_device = kernels_cuda_is_device_ptr, .to_host = b->mem->download,
		.to_device = b->mem->upload, .host_alloc = b->mem->host_alloc,
		.host_free = b->mem->host_free, .device_id = id,
	};
	if ((rc = comm_device_wrap(*c, &mem, COMM_DEVICE_AUTO, dev, err, sizeof err))) {
		fprintf(stderr, "stork bench comm: task %d: %s\n", comm_rank(*c), err);
		return STORK_EXIT_INTERNAL;
	}
	*c = *dev;
	b->any_order = !strncmp(comm_device_describe(*dev), "nccl", 4);
	return 0;
}

/*
 * Rank 0 keeps the figure for stork plan: the latency (the smallest size's
 * time) and bus bandwidth (the largest size's) between hosts, or between
 * the GPUs of one host; collective (the hosts are counted). 0 or a COMM_E*.
 */
static int keep_figure(struct comm *c, const struct bench_opts *o, const char *host,
		       double first_us, double busbw)
{
	uint64_t h = 0;
	int64_t lo, hi;
	int rc;

	for (const char *p = host; *p; p++)
		h = h * 31 + (unsigned char)*p;
	lo = hi = (int64_t)(h & INT64_MAX);
	if ((rc = comm_allreduce(c, &lo, 1, COMM_INT64, COMM_MIN)) ||
	    (rc = comm_allreduce(c, &hi, 1, COMM_INT64, COMM_MAX)))
		return rc;
	if (comm_rank(c) == 0 && comm_size(c) > 1)
		plan_keep_comm_figure(lo != hi ? 2 : 1, o->cuda, comm_size(c), first_us * 1e-6, busbw,
				      stdout);
	return 0;
}

int cmd_bench_comm(int argc, char **argv)
{
	struct bench_opts o;
	struct comm_ucx *u = NULL;
	struct comm *c = NULL, *host_c = NULL, *dev = NULL;
	struct buffer b = { .mem = &ops_cpu };
	const char *method = "";
	size_t bytes;
	double us = 0, first_us = 0, busbw = 0;
	int code, wrong = 0, rc = 0;
	char host[256] = "";

	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
		return usage(stdout);
	if (parse_opts(argc, argv, &o) < 0)
		return usage(stderr);
	if ((code = connect_ranks(&u, &c, &method)))
		goto out;
	host_c = c;
	gethostname(host, sizeof host);
	if (o.cuda && (code = use_gpu(&c, &dev, host, &b)))
		goto out;
	bytes = o.max / sizeof(float) * sizeof(float);
	b.host = b.mem->host_alloc(bytes);
	b.x = o.cuda ? b.mem->alloc(bytes) : b.host;
	if (!b.host || !b.x) {
		fprintf(stderr, "stork bench comm: cannot allocate %zu bytes%s\n", o.max,
			o.cuda ? " on the GPU" : "");
		comm_abort(c, "out of memory");
		code = STORK_EXIT_INTERNAL;
		goto out;
	}
	if (comm_rank(c) == 0) {
		printf("# stork bench comm: all-reduce (float sum, in place) over %d ranks, "
		       "UCX, rendezvous %s; rank 0 on %s\n", comm_size(c), method, host);
		if (o.cuda)
			printf("# GPU buffers: %s\n", comm_device_describe(c));
		printf("# %d warm-up and %d timed iterations per size; time: the slowest rank's "
		       "average\n", o.warmup, o.iters);
		printf("# #wrong: elements %s\n#\n", b.any_order ?
		       "farther from the exact sum than n - 1 float roundings (NCCL sums in its own order)" :
		       "that are not the float sum in rank order ((x0 + x1) + x2) + ..., bit for bit");
		printf("#%11s  %12s  %8s  %10s  %7s  %7s  %7s\n", "size", "count", "type", "time",
		       "algbw", "busbw", "#wrong");
		printf("#%11s  %12s  %8s  %10s  %7s  %7s  %7s\n", "(B)", "(elements)", "", "(us)",
		       "(GB/s)", "(GB/s)", "");
		fflush(stdout);
	}
	for (size_t size = o.min; size <= o.max && rc >= 0; ) {
		size_t count = size / sizeof(float);

		rc = bench_size(c, &b, count, &o, &us);
		wrong |= rc > 0;
		first_us = first_us > 0 ? first_us : us;
		busbw = (double)count * sizeof(float) / (us * 1e-6) * 2.0 * (comm_size(c) - 1) /
			comm_size(c);
		if (size > o.max / o.factor)
			break;
		size *= o.factor;
	}
	if (rc >= 0 && !wrong) /* rc is 0 then */
		rc = keep_figure(c, &o, host, first_us, busbw);
	if (rc < 0) {
		fprintf(stderr, "stork bench comm: rank %d: all-reduce failed: %s%s%s\n",
			comm_rank(c), comm_strerror(rc), *comm_abort_reason(c) ? ": " : "",
			comm_abort_reason(c));
		code = STORK_EXIT_INTERNAL;
	} else {
		code = wrong ? STORK_EXIT_INTERNAL : STORK_EXIT_OK;
	}
out:
	if (b.x && b.x != b.host)
		b.mem->free(b.x);
	if (b.host)
		b.mem->host_free(b.host);
	if (dev)
		comm_free(dev);
	comm_free(host_c);
	comm_ucx_close(u);
	rdv_finalize();
	return code;
}
