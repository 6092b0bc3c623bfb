/*
 * lib/run/rundir.h - the run directory: one per run, stable across requeues.
 *
 *   <runs_root>/<name>__job=<JOBID>__task=<ARRAY_TASK_ID or 0>/
 *     config/ logs/ checkpoints/ provenance/ exit_info.json
 *
 * The runs root is relative to the submit directory (SLURM_SUBMIT_DIR under
 * Slurm, the current directory otherwise). Outside Slurm the job id is
 * "local", so a second local run of the same name resumes the first.
 */
#ifndef STORK_RUNDIR_H
#define STORK_RUNDIR_H

#include <stdbool.h>
#include <stddef.h>

/* The run directory's path for this process's environment. Returns 0, or -1
 * if it does not fit in len. */
int rundir_path(char *buf, size_t len, const char *runs_root, const char *name);

/*
 * Create the run directory and its subdirectories; existing ones are kept
 * (a requeue's, a restart's) when they are this user's and nobody else may
 * write in them. None is made or followed through a link. config/ and
 * checkpoints/ are mode 0700, or 0750 when shared (run.shared: the
 * group may read them). Returns 0; -2 when an existing one is
 * refused (another user's, writable by others, a link), or -1 when one
 * cannot be made; err names the path and why.
 */
int rundir_create(const char *run_dir, bool shared, char *err, size_t errlen);

/* Write provenance/git.txt (the run's code: commit and dirty state of the
 * submit directory's repository), provenance/image.txt (the container), and
 * provenance/build.json and provenance/host.json: Stork's version, git
 * describe, compiler, library versions, host, kernel. Returns 0 or -1. */
int rundir_write_provenance(const char *run_dir, char *err, size_t errlen);

/*
 * Remove the files of RUN_DIR/logs whose names begin with one of the n
 * prefixes (the notices and regroup files of an attempt, at its end).
 */
void rundir_remove_logs_prefixed(const char *run_dir, const char *const *prefixes, size_t n);

#endif
