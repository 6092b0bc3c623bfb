#!/usr/bin/env bats
# What `stork run` checks at the start of a job, before any run directory:
# the --signal of the job's batch script against preempt.signal and against
# the time limit slurmctld reports.

load helpers
load ../training

STORK=${abs_top_builddir:?set by make check}/launcher/stork

setup() {
	setup_workdir
	docs_data
	small_config run.yaml sig 2 64 4 32 20
}

# job NAME SBATCH-LINE: a one-launcher training job with one extra #SBATCH line.
job() {
	cat >"$1.sh" <<-SCRIPT
	#!/bin/bash
	#SBATCH -N1 -n1 -c2 -o $1.out -J $1
	#SBATCH $2
	srun $STORK run run.yaml --set run.name=$1
	SCRIPT
}

@test "a --signal lead as long as the time limit is refused at start, naming both, with no run directory" {
	job long '--time=1 --signal=USR1@90'
	run sbatch_wait long.sh
	[ "$status" -ne 0 ]
	cat long.out
	grep -q 'asks for SIGUSR1 90 s before its end (--signal=USR1@90), but its time limit is 60 s' long.out
	[ ! -e runs ]
}

@test "a --signal other than preempt.signal is refused at start; the same one trains" {
	job other '--signal=USR2@30'
	run sbatch_wait other.sh
	[ "$status" -ne 0 ]
	cat other.out
	grep -q 'asks Slurm for SIGUSR2 before its end (--signal), but preempt.signal is USR1' other.out
	[ ! -e runs ]
	job same '--signal=USR1@30'
	run sbatch_wait same.sh
	[ "$status" -eq 0 ]
	ls runs/same__job=*__task=0/exit_info.json
}
