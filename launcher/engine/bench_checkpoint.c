/*
 * launcher/engine/bench_checkpoint.c - `stork bench checkpoint CONFIG [--dir DIR]
 * [--repeat N]`: how fast a checkpoint of CONFIG's model commits, against a
 * plain sequential write of the same size on the same disk (what dd
 * if=/dev/zero bs=16M conv=fsync does, written here: no shell), and what
 * a resume pays before training: verifying the checkpoint against its
 * manifest, then loading it.
 *
 * The checkpoint is the real one (daemon/engine/checkpoint/checkpoint.c: model, optimizer,
 * state, manifest with checksums, fsyncs, renames), so the figure is what a
 * preemption costs on this disk. The plain write ends with an fsync, so
 * both numbers include getting the data to stable storage. Verification and loading
 * read what was just written, mostly from the page cache, as a requeued
 * job on the same node would.
 */
#include "config.h"
#include "launcher/engine/commands.h"

#include "launcher/bench/bench_util.h"
#include "lib/clock.h"

#include "daemon/engine/checkpoint/checkpoint.h"
#include "daemon/engine/parallel/layout.h"
#include "daemon/engine/model/model.h"
#include "daemon/engine/model/optimizer.h"
#include "lib/io/atomic_file.h"
#include "lib/bounded.h"
#include "lib/io/io.h"
#include "lib/log.h"
#include "lib/config/stork_config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t dir_bytes(const char *dir)
{
	static const char *const files[] = { "model.bin", "optimizer.bin", "state.json",
					     "manifest.json" };
	char path[4200];
	uint64_t total = 0;
	struct stat st;

	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		if (path_join(path, sizeof path, dir, files[i]) == 0 && stat(path, &st) == 0)
			total += (uint64_t)st.st_size;
	}
	return total;
}

/* dd of `bytes` zeros with conv=fsync; returns MB/s (1e6 bytes) or -1. */
static double dd_rate(const char *dir, uint64_t bytes)
{
	static char block[16u << 20]; /* zeros, as dd if=/dev/zero writes them */
	char path[4200];
	uint64_t count = (bytes + sizeof block - 1) / sizeof block;
	double t0, t;
	int fd, ok = 1;

	snprintf(path, sizeof path, "%s/dd.bin", dir);
	t0 = clock_monotonic();
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	for (uint64_t i = 0; fd >= 0 && ok && i < count; i++)
		ok = write_all(fd, block, sizeof block) == 0;
	ok = ok && fd >= 0 && fsync(fd) == 0;
	if (fd >= 0)
		close(fd);
	t = clock_monotonic() - t0;
	unlink(path);
	return ok ? (double)count * sizeof block / t / 1e6 : -1;
}

/* A notice of the checkpoint reader (a fallback): said, not fatal. */
static void bench_notice(void *arg, const char *msg)
{
	(void)arg;
	stork_warn("%s", msg);
}

int cmd_bench_checkpoint(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "repeat", required_argument, NULL, 'n' },
		{ 0 },
	};
	const char *dir = ".";
	struct stork_config cfg;
	struct gpt2_config g;
	struct gpt2 m = { 0 };
	struct adamw_state opt = { 0 };
	char err[1024], root[2200];
	int repeat = 3, c, code = STORK_EXIT_CONFIG;
	double times[64], dd[64], commit[64], verify[64], load[64];
	uint64_t bytes = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 'd')
			dir = optarg;
		else if (c == 'n' && atoi(optarg) > 0 && atoi(optarg) <= 64)
			repeat = atoi(optarg);
		else
			goto usage;
	}
	if (optind != argc - 1)
		goto usage;
	if (config_load(&cfg, argv[optind], err, sizeof err) < 0 ||
	    config_validate(&cfg, err, sizeof err) < 0) {
		stork_error("%s", err);
		config_free(&cfg);
		return STORK_EXIT_CONFIG;
	}
	if (layout_model_shape(&cfg, &g, err, sizeof err) < 0) {
		stork_error("%s", err);
		config_free(&cfg);
		return STORK_EXIT_CONFIG;
	}
	if (gpt2_build(&m, &g, cfg.model.seed) < 0 || adamw_init(&opt, m.num_params) < 0) {
		stork_error("cannot build the model: %s", m.err);
		code = STORK_EXIT_INTERNAL;
		goto out;
	}
	/* root, and the commands below built from it, must not be cut short:
	 * `rm -rf` of a shorter path is another directory. */
	if (strlen(dir) > 2048) {
		stork_error("--dir %s: a path of at most 2048 characters, please", dir);
		code = STORK_EXIT_USAGE;
		goto out;
	}
	snprintf(root, sizeof root, "%s/stork-bench-checkpoints.%d", dir, (int)getpid());
	if (mkdir_p(root, 0755) < 0) {
		stork_error("cannot create %s: %s", root, strerror(errno));
		code = STORK_EXIT_INTERNAL;
		goto out;
	}
	printf("model: %zu parameters; checkpoints in %s\n", m.num_params, root);
	for (int i = 0; i < repeat; i++) {
		struct ckpt_state st = { .step = i + 1 };
		struct ckpt_full full;
		char path[4400], found[4400];
		double t0 = clock_monotonic(), t;

		if (ckpt_save(root, &m, &opt, &st, (struct ckpt_keep){ .newest = 1 }, err, sizeof err) < 0) {
			stork_error("%s", err);
			code = STORK_EXIT_CHECKPOINT_FAILED;
			goto out;
		}
		t = clock_monotonic() - t0;
		snprintf(path, sizeof path, "%s/step_%08d", root, i + 1);
		bytes = dir_bytes(path);
		commit[i] = t;
		times[i] = bytes / t / 1e6;
		t0 = clock_monotonic();
		if (!ckpt_find_any(path, found, sizeof found, bench_notice, NULL)) {
			stork_error("the checkpoint just written does not verify: %s", path);
			code = STORK_EXIT_INTERNAL;
			goto out;
		}
		verify[i] = clock_monotonic() - t0;
		t0 = clock_monotonic();
		if (ckpt_load_full(found, &m.config, &full, err, sizeof err) < 0) {
			stork_error("%s", err);
			code = STORK_EXIT_INTERNAL;
			goto out;
		}
		load[i] = clock_monotonic() - t0;
		ckpt_full_free(&full);
		dd[i] = dd_rate(root, bytes);
		printf("round %d: checkpoint %.1f MB committed in %.3f s = %.0f MB/s; dd %.0f MB/s; "
		       "resume: verify %.3f s, load %.3f s\n", i + 1, bytes / 1e6, t, times[i], dd[i],
		       verify[i], load[i]);
	}
	printf("median of %d rounds: checkpoint %.0f MB/s, commit %.3f s (model, optimizer, state, "
	       "checksums, fsyncs, renames); dd bs=16M conv=fsync of the same size %.0f MB/s; "
	       "checkpoint/dd = %.0f%%; resume: verify %.3f s (%.0f MB/s), load %.3f s\n", repeat,
	       bench_median(times, repeat), bench_median(commit, repeat), bench_median(dd, repeat),
	       100.0 * bench_median(times, repeat) / bench_median(dd, repeat),
	       bench_median(verify, repeat), bytes / bench_median(verify, repeat) / 1e6,
	       bench_median(load, repeat));
	code = remove_tree(root) == 0 ? STORK_EXIT_OK : STORK_EXIT_INTERNAL;
out:
	adamw_free(&opt);
	gpt2_free(&m);
	config_free(&cfg);
	return code;
usage:
	fprintf(stderr, "usage: stork bench checkpoint CONFIG [--dir DIR] [--repeat N]\n");
	return STORK_EXIT_USAGE;
}
