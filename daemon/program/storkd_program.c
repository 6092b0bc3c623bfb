/*
 * daemon/program/storkd_program.c - storkd-program, the per-node daemon of `stork
 * run -- PROGRAM`: the node's ranks are the user's program's processes
 * (daemon/program/program.c), not the engine's threads.
 *
 * A daemon of its own rather than a mode of storkd: it links no training
 * engine (no CUDA, cuBLAS, NCCL or BLAS, whose loading alone takes storkd
 * a few tenths of a second), so the ranks of a program start about as
 * soon as srun's own tasks would; the program brings its own libraries.
 * The node's start (options, signals, environment, bindings, rendezvous)
 * is storkd's: daemon/node/node.c.
 */
#include "config.h"
#include "daemon/node/node.h"
#include "daemon/program/program.h"

#include "lib/env_number.h"
#include "lib/exit_codes.h"
#include "lib/fault.h"
#include "lib/log.h"
#include "lib/stop_signals.h"
#include "lib/config/stork_config.h"
#include "lib/formats/stork_json.h"
#include "lib/bind/topology.h"
#include "lib/version.h"

#include <errno.h>
#include <pmix.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

static void print_version(void)
{
	printf("storkd-program %s (git %s, %s)\n", stork_version(), stork_git_describe(),
	       stork_compiler());
}

/*
 * --local-ranks auto: the step's GPUs, as Slurm lists them for its tasks
 * (CUDA_VISIBLE_DEVICES, else SLURM_STEP_GPUS); 0 without. The program's
 * own CUDA counts the same devices; this daemon loads none.
 */
static int step_gpus(void)
{
	const char *names[] = { "CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS" };

	for (int k = 0; k < 2; k++) {
		const char *s = getenv(names[k]);
		int n = 0;

		if (!s || !*s || !strcmp(s, "NoDevFiles"))
			continue;
		for (n = 1; *s; s++)
			n += *s == ',';
		return n;
	}
	return 0;
}

/* provenance/libraries.json: what this daemon runs on. */
static void write_library_versions(const char *run_dir)
{
	char path[4200], err[512];
	json_t *v = json_pack("{s:o, s:o}", "pmix", sj_text(PMIx_Get_version()),
			      "ucx", sj_text(ucp_get_version_string()));

	snprintf(path, sizeof path, "%s/provenance/libraries.json", run_dir);
	if (!v || sj_write_file(path, v, err, sizeof err) < 0)
		stork_warn("cannot write %s: %s", path, v ? err : "out of memory");
	json_decref(v);
}

/* The node's result for the launcher (daemon/program/program.h), on the result pipe. */
static void report(int fd, json_t *result)
{
	char *text = result ? sj_compact(result) : NULL;

	if (fd >= 0 && text && dprintf(fd, "%s", text) < 0)
		stork_error("cannot report the node's result to stork: %s", strerror(errno));
	free(text);
}

static int run(const struct node_options *o, const struct stork_config *cfg)
{
	struct train_node node = {
		.cfg = cfg, .run_dir = o->run_dir, .local_ranks = o->local_ranks,
		.world_size = o->local_ranks, .attempt = o->attempt,
		.stop_requested = &node_stop_requested, .stop_signal_ms = &node_stop_signal_ms,
		.stall_rank = -1, .stall_step = -1,
	};
	struct run_layout layout = { 0 };
	struct comm_ucx *ucx = NULL;
	struct comm_hier *hier = NULL;
	json_t *result = NULL;
	char err[1024];
	int code;

	if (node_read_environment(&node, o->job_end, err, sizeof err) < 0) {
		stork_error("%s", err);
		return STORK_EXIT_CONFIG;
	}
	node.topo = topo_load(getenv("STORK_TOPOLOGY"), err, sizeof err);
	if (!node.topo) {
		stork_error("%s", err);
		return STORK_EXIT_INTERNAL;
	}
	code = node_join(o, cfg, &node, &layout, &ucx, &hier, NULL, 1, err, sizeof err);
	if (code) {
		stork_error("%s", err);
		result = json_pack("{s:i, s:i, s:o}", "exit_code", code, "last_step", -1, "message",
				   sj_text(err));
	} else {
		struct program_run p = {
			.cfg = cfg, .node = &node, .layout = &layout, .hier = hier,
			.daemons = layout.nnodes > 1 ? node.rank_comm(node.rank_comm_arg, 0) : NULL,
		};

		if (layout.node_index == 0)
			write_library_versions(o->run_dir);
		code = program_run(&p, &result);
	}
	report(o->result_fd, result);
	json_decref(result);
	node_free(&node, &layout, ucx, hier);
	return code;
}

int main(int argc, char **argv)
{
	static const struct node_program prog = {
		.name = "storkd-program", .version = print_version, .gpus = step_gpus,
	};
	struct node_options o;
	struct stork_config cfg;
	int code;

	if ((code = node_start(argc, argv, &prog, 1, &o, &cfg)))
		return code;
	code = run(&o, &cfg);
	config_free(&cfg);
	return code;
}
