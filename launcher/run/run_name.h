/*
 * launcher/run/run_name.h - the name of a program run given none.
 *
 * A run's identity is its directory, RUNS/NAME__job=JOB__task=TASK
 * (lib/run/rundir.h): two invocations are the same run, and the second
 * resumes from the first's checkpoints, exactly when their run.name, job
 * and array task are the same. An engine run's name is its
 * configuration's run.name. A `stork run -- PROGRAM` given no run.name is
 * named after its program (python3 train.py: "train"), and never shares a
 * run by accident: outside Slurm each invocation takes the first name
 * free (train, train.2, train.3, ...); in a job, step N > 0 is
 * NAME.stepN (a requeued job counts its steps from 0 again, so each step
 * finds its own run).
 */
#ifndef STORK_LAUNCHER_RUN_NAME_H
#define STORK_LAUNCHER_RUN_NAME_H

#include <stddef.h>

/*
 * The program run's name for command argv (argc words) under runs root
 * runs_root, into out. 0, or -1 when it does not fit.
 */
int program_run_name(char *const *argv, size_t argc, const char *runs_root, char *out,
		     size_t len);

#endif
