/*
 * launcher/engine/bench_reshard.c - `stork bench reshard CONFIG --tensor T
 * --pipeline P [--data D] [--zero] [--dir DIR]`: the memory a rank needs to
 * resume from a checkpoint of another layout.
 *
 * It writes CONFIG's model (with moments) as the whole-model checkpoint a
 * data-parallel run without ZeRO-1 writes (DP2 among them), then, for every
 * rank of the layout D x T x P, resumes that rank twice, each time in a
 * process of its own so that the kernel's peak resident set (VmHWM, reset
 * through /proc/self/clear_refs) is the resume's alone: once as the
 * daemon resumes (ckpt_read_resharded: byte ranges straight into the rank's
 * arrays) and once by reading the whole model and cutting the rank's part
 * out (ckpt_load_full, what `stork export` reads and what a resume did
 * before). Each figure is set against the rank's own parameters and
 * moments, which it holds anyway; both ways must give the same bits, and
 * the command fails when they do not.
 */
#include "config.h"
#include "launcher/engine/commands.h"

#include "daemon/engine/checkpoint/checkpoint.h"
#include "daemon/engine/parallel/layout.h"
#include "daemon/engine/model/model.h"
#include "daemon/engine/model/optimizer.h"
#include "lib/io/atomic_file.h"
#include "lib/bounded.h"
#include "lib/clock.h"
#include "lib/exit_codes.h"
#include "lib/io/io.h"
#include "lib/log.h"
#include "lib/config/stork_config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A line of /proc/self/status in kB ("VmHWM:", "VmRSS:"), or -1. */
static long status_kb(const char *key)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, strlen(key)))
			kb = strtol(line + strlen(key), NULL, 10);
	fclose(f);
	return kb;
}

/* All n bytes from a pipe, or -1. */
static int pread_pipe(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t k = read(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Start counting the peak resident set afresh (Linux: clear_refs 5). */
static int reset_peak(void)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	int ok = fd >= 0 && write(fd, "5", 1) == 1;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* What one rank of the new layout holds: its shard and its parts of the moments. */
struct new_rank {
	struct ckpt_shard_info info;
	struct gpt2_shard shard;
	size_t nparams, nmoments;
};

static int plan_rank(const struct gpt2_config *g, const struct stork_config *cfg, int world,
		     int tp, int pp, int zero, int rank, struct new_rank *nr, char *err,
		     size_t errlen)
{
	struct par_layout l;

	if (layout_make(&l, g, world, tp, pp, zero, cfg->parallel.stage_split, cfg->train.seq_len,
			rank, err, errlen) < 0)
		return -1;
	layout_shard(&l, &nr->shard);
	ckpt_shard_info_of(g, &l, &nr->info);
	nr->nparams = nr->info.nparams;
	nr->nmoments = 0;
	for (int k = 0; k < nr->info.nseg; k++)
		nr->nmoments += nr->info.seg_hi[k] - nr->info.seg_lo[k];
	return 0;
}

/* The former way: the whole model and moments, then the rank's part cut out. */
static int load_whole_then_cut(const char *dir, const struct new_rank *nr, float *p, float *m,
			       float *v, char *err, size_t errlen)
{
	struct ckpt_full full;
	float *lm = NULL, *lv = NULL;
	size_t at = 0;

	if (ckpt_load_full(dir, &nr->info.config, &full, err, errlen) < 0)
		return -1;
	lm = malloc(nr->nparams * sizeof(float));
	lv = malloc(nr->nparams * sizeof(float));
	if (!lm || !lv) {
		snprintf(err, errlen, "out of memory");
		free(lm);
		free(lv);
		ckpt_full_free(&full);
		return -1;
	}
	gpt2_shard_copy(&full.config, &nr->shard, full.params, p, 1);
	gpt2_shard_copy(&full.config, &nr->shard, full.m, lm, 1);
	gpt2_shard_copy(&full.config, &nr->shard, full.v, lv, 1);
	for (int k = 0; k < nr->info.nseg; k++) {
		size_t lo = nr->info.seg_lo[k], n = nr->info.seg_hi[k] - lo;

		memcpy(m + at, lm + lo, n * sizeof(float));
		memcpy(v + at, lv + lo, n * sizeof(float));
		at += n;
	}
	free(lm);
	free(lv);
	ckpt_full_free(&full);
	return 0;
}

/*
 * In a child: the rank's arrays, loaded one way (whole = 1: read whole, then
 * cut), written to out (when not NULL) for the comparison; prints nothing,
 * exits with the peak in MiB over the baseline in *peak via a pipe.
 */
static int measure(const char *dir, const struct new_rank *nr, int whole, const char *out,
		   double *peak_mib, double *secs)
{
	int fds[2], status;
	double got[2] = { -1, -1 };
	pid_t pid;

	if (pipe(fds) < 0)
		return -1;
	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		char err[1024];
		long base;
		double t0;
		float *p, *m, *v;
		int rc;

		close(fds[0]);
		if (reset_peak() < 0 || (base = status_kb("VmRSS:")) < 0)
			_exit(3);
		t0 = clock_monotonic();
		p = malloc(nr->nparams * sizeof(float));
		m = malloc(nr->nmoments * sizeof(float));
		v = malloc(nr->nmoments * sizeof(float));
		if (!p || !m || !v)
			_exit(4);
		rc = whole ? load_whole_then_cut(dir, nr, p, m, v, err, sizeof err) :
			     ckpt_read_resharded(dir, &nr->info, p, m, v, &(int64_t){ 0 }, err,
						 sizeof err);
		got[1] = clock_monotonic() - t0;
		got[0] = (status_kb("VmHWM:") - base) / 1024.0;
		if (rc < 0) {
			fprintf(stderr, "stork bench reshard: %s\n", err);
			_exit(5);
		}
		if (out) {
			int fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

			if (fd < 0 || write_all(fd, p, nr->nparams * sizeof(float)) < 0 ||
			    write_all(fd, m, nr->nmoments * sizeof(float)) < 0 ||
			    write_all(fd, v, nr->nmoments * sizeof(float)) < 0 || close(fd) < 0)
				_exit(6);
		}
		_exit(write_all(fds[1], got, sizeof got) < 0 ? 7 : 0);
	}
	close(fds[1]);
	if (pread_pipe(fds[0], got, sizeof got) < 0)
		got[0] = -1;
	close(fds[0]);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) || got[0] < 0)
		return -1;
	*peak_mib = got[0];
	*secs = got[1];
	return 0;
}

/* Whether two files hold the same bytes. */
static int same_bytes(const char *a, const char *b)
{
	static char x[1 << 20], y[1 << 20];
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	int same = fa && fb;

	while (same) {
		size_t na = fread(x, 1, sizeof x, fa), nb = fread(y, 1, sizeof y, fb);

		if (na != nb || memcmp(x, y, na))
			same = 0;
		if (na < sizeof x)
			break;
	}
	if (fa)
		fclose(fa);
	if (fb)
		fclose(fb);
	return same;
}

/* CONFIG's model with moments that differ from the parameters, as a whole-model checkpoint. */
static int write_source(const struct gpt2_config *g, uint64_t seed, const char *root,
			char *err, size_t errlen)
{
	struct gpt2 m = { 0 };
	struct adamw_state opt = { 0 };
	struct ckpt_state st = { .step = 1 };
	int rc = -1;

	if (gpt2_build(&m, g, seed) < 0 || adamw_init(&opt, m.num_params) < 0) {
		snprintf(err, errlen, "cannot build the model: %s", m.err);
		goto out;
	}
	for (size_t i = 0; i < m.num_params; i++) {
		opt.m[i] = 0.5f * m.params[i] + (float)i;
		opt.v[i] = m.params[i] * m.params[i] + 1e-3f * (float)(i % 977);
	}
	opt.step = 1;
	rc = ckpt_save(root, &m, &opt, &st, (struct ckpt_keep){ .newest = 1 }, err, errlen);
out:
	adamw_free(&opt);
	gpt2_free(&m);
	return rc;
}

struct reshard_args {
	const char *config, *dir;
	int tp, pp, dp, zero;
};

static int parse_args(int argc, char **argv, struct reshard_args *a)
{
	static const struct option longopts[] = {
		{ "tensor", required_argument, NULL, 't' }, { "pipeline", required_argument, NULL, 'p' },
		{ "data", required_argument, NULL, 'd' },   { "zero", no_argument, NULL, 'z' },
		{ "dir", required_argument, NULL, 'o' },    { 0 },
	};
	int c;

	*a = (struct reshard_args){ .dir = ".", .tp = 1, .pp = 1, .dp = 1 };
	optind = 1;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		int n = optarg ? atoi(optarg) : 0;

		if (c == 'z')
			a->zero = 1;
		else if (c == 'o')
			a->dir = optarg;
		else if (n >= 1 && n <= 256 && (c == 't' || c == 'p' || c == 'd'))
			*(c == 't' ? &a->tp : c == 'p' ? &a->pp : &a->dp) = n;
		else
			return -1;
	}
	if (optind != argc - 1 || strlen(a->dir) > 2048)
		return -1;
	a->config = argv[optind];
	return 0;
}

/* Resume every rank both ways; print a line each. 0, or an exit code. */
static int measure_ranks(const struct reshard_args *a, const struct gpt2_config *g,
			 const struct stork_config *cfg, const char *ckpt, const char *root)
{
	int world = a->dp * a->tp * a->pp;
	double worst = 0, worst_whole = 0;
	char err[1024], fa[2300], fb[2300];

	printf("rank stage tp dp  own(MiB)  pieces: peak(MiB) x own   s   whole model: peak(MiB) x own   s\n");
	for (int r = 0; r < world; r++) {
		struct new_rank nr;
		double own, peak_a, peak_b, ta, tb;

		if (plan_rank(g, cfg, world, a->tp, a->pp, a->zero, r, &nr, err, sizeof err) < 0) {
			stork_error("%s", err);
			return STORK_EXIT_CONFIG;
		}
		snprintf(fa, sizeof fa, "%s/rank-%d.pieces", root, r);
		snprintf(fb, sizeof fb, "%s/rank-%d.whole", root, r);
		if (measure(ckpt, &nr, 0, fa, &peak_a, &ta) < 0 ||
		    measure(ckpt, &nr, 1, fb, &peak_b, &tb) < 0) {
			stork_error("rank %d: a resume failed (see above)", r);
			return STORK_EXIT_INTERNAL;
		}
		if (!same_bytes(fa, fb)) {
			stork_error("rank %d: the two ways read different values", r);
			return STORK_EXIT_INTERNAL;
		}
		unlink(fa);
		unlink(fb);
		own = (nr.nparams + 2.0 * nr.nmoments) * sizeof(float) / 1048576.0;
		printf("%4d %5d %2d %2d %9.1f  %17.1f %4.2f %5.2f  %22.1f %4.2f %5.2f\n", r,
		       nr.info.stage, nr.info.tp_rank, nr.info.dp_rank, own, peak_a, peak_a / own, ta,
		       peak_b, peak_b / own, tb);
		worst = peak_a / own > worst ? peak_a / own : worst;
		worst_whole = peak_b / own > worst_whole ? peak_b / own : worst_whole;
	}
	printf("largest peak over the rank's own parameters and moments: %.2fx by pieces "
	       "(the resume), %.2fx reading the whole model; both ways the same bits\n", worst,
	       worst_whole);
	return STORK_EXIT_OK;
}

int cmd_bench_reshard(int argc, char **argv)
{
	struct reshard_args a;
	struct stork_config cfg;
	struct gpt2_config g;
	char err[1024], root[2200], ckpt[2300];
	int code;

	if (parse_args(argc, argv, &a) < 0) {
		fprintf(stderr, "usage: stork bench reshard CONFIG --tensor T --pipeline P [--data D] "
				"[--zero] [--dir DIR]\n");
		return STORK_EXIT_USAGE;
	}
	if (config_load(&cfg, a.config, err, sizeof err) < 0 ||
	    config_validate(&cfg, err, sizeof err) < 0 ||
	    layout_model_shape(&cfg, &g, err, sizeof err) < 0) {
		stork_error("%s", err);
		config_free(&cfg);
		return STORK_EXIT_CONFIG;
	}
	snprintf(root, sizeof root, "%s/stork-bench-reshard.%d", a.dir, (int)getpid());
	if (mkdir(root, 0700) < 0) {
		stork_error("cannot create %s: %s", root, strerror(errno));
		config_free(&cfg);
		return STORK_EXIT_INTERNAL;
	}
	snprintf(ckpt, sizeof ckpt, "%s/step_00000001", root);
	if (write_source(&g, cfg.model.seed, root, err, sizeof err) < 0) {
		stork_error("%s", err);
		code = STORK_EXIT_INTERNAL;
	} else {
		printf("a whole-model checkpoint (as data parallelism without ZeRO-1 writes it) of "
		       "%s resumed as dp %d x tp %d x pp %d%s%.0d; peaks are each resume's own (VmHWM)\n",
		       a.config, a.dp, a.tp, a.pp, a.zero ? ", ZeRO-" : "", a.zero);
		code = measure_ranks(&a, &g, &cfg, ckpt, root);
	}
	if (remove_tree(root) < 0 && code == STORK_EXIT_OK)
		code = STORK_EXIT_INTERNAL;
	config_free(&cfg);
	return code;
}
