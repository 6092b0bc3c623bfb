/*
 * daemon/program/program_env.h - the environment of a rank process in a run of the
 * user's own program (`stork run -- PROGRAM`): torchrun's variables, so a
 * program written for torchrun runs unchanged, and Stork's own contract
 * (stork(1), RUNNING YOUR OWN PROGRAM).
 */
#ifndef STORK_DAEMON_PROGRAM_ENV_H
#define STORK_DAEMON_PROGRAM_ENV_H

#include <stddef.h>

/* The checkpoint-confirmed exit code a rank returns after saving. */
#define PROGRAM_CHECKPOINTED_EXIT 10

/* What a rank's environment is made of. */
struct program_rank_place {
	int rank, local, local_ranks, world_size, node_rank;
	int omp_threads;            /* cores bound to the rank */
	int gpu;                    /* STORK_GPU, -1 without */
	const char *master_addr;    /* launcher 0's host */
	unsigned master_port;
	int attempt, max_restarts;  /* restarts inside the allocation, and how many may come */
	int requeues;               /* SLURM_RESTART_COUNT */
	const char *run_id;         /* the job id, or "local" */
	const char *run_dir;
	const char *signal_name;    /* program.signal, "USR1" */
	const char *resume_from;    /* run.resume_from, absolute; "" = none */
	int pmix_outside_slurm;     /* a PMIx server serves the ranks, and no Slurm step */
	const char *mpi_shm_dir;    /* Open MPI's shared-memory files go there; NULL: its own */
};

/*
 * A NULL-terminated "NAME=VALUE" array: base (environ) without the
 * variables set here, without PMIx's (the ranks are not PMIx clients of
 * this step) and without those storkd set for itself (OpenBLAS's tuning:
 * lib/env_number.h's env_set_own), then the rank's own. The user's
 * PYTHONFAULTHANDLER and PYTHONUNBUFFERED win over the defaults given
 * here. Free with program_env_free. NULL when out of memory.
 */
char **program_env_make(char *const *base, const struct program_rank_place *p);

void program_env_free(char **env);

/* The rank's files under run_dir: "log", "metrics.jsonl", "heartbeat",
 * "error.json" (TORCHELASTIC_ERROR_FILE). */
void program_rank_file(char *buf, size_t len, const char *run_dir, int rank, const char *what);

#endif
