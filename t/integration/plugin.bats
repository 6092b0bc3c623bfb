#!/usr/bin/env bats
# spank_stork.so on the test cluster: binding, rank environment and option
# handling of real srun/sbatch steps (issue: GPU/NUMA binding and the rank
# environment for every srun task). The cluster's plugstack line must carry
# topology=t/data/topo/testcluster-2core-4gpu.xml (run.sh sets it): this
# machine's 2 cores on one NUMA node and the 4 fake GPUs of gres.conf.

load helpers

setup() {
	setup_workdir
	grep -q 'spank_stork.so.*topology=.*testcluster-2core-4gpu.xml' \
		"$STORK_TESTCLUSTER_DIR/etc/plugstack.conf" || {
		echo "the cluster's plugstack.conf lacks the test topology; restart it with" \
			"STORK_TESTCLUSTER_PLUGIN_ARGS=topology=${abs_top_srcdir:?set by make check}/t/data/topo/testcluster-2core-4gpu.xml" >&2
		return 1
	}
}

# One line per task: host, rank variables and the kernel's view of its affinity.
# shellcheck disable=SC2016 # expanded by each task's shell, not here
REPORT='echo "task $(hostname) rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE lworld=$LOCAL_WORLD_SIZE node=$NODE_RANK group=$GROUP_RANK addr=$MASTER_ADDR port=$MASTER_PORT gpu=$STORK_GPU omp=$OMP_NUM_THREADS cvd=$CUDA_VISIBLE_DEVICES cpus=$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"'

@test "srun -N2 -n4 --stork-bind=auto,verbose: every task's environment and affinity match the plan" {
	run srun -N2 -n4 --gres=gpu:4 --stork-bind=auto,verbose bash -c "$REPORT"
	echo "$output"
	[ "$status" -eq 0 ]
	# Plan: 2 tasks per node; task L uses device L of 0,1,2,3 and, as both
	# GPUs sit on NUMA 0 with 2 cores, core L.
	for r in 0 1 2 3; do
		l=$((r % 2)) n=$((r / 2)) host=n$((r / 2 + 1))
		grep -qx "stork: rank $r (local $l) on $host: gpu $l, cpus $l, numa 0" <<<"$output"
		grep -q "^task $host rank=$r local=$l world=4 lworld=2 node=$n group=$n addr=n1 port=[0-9]* gpu=$l omp=1 cvd=0,1,2,3 cpus=$l\$" <<<"$output"
	done
	# One MASTER_PORT for the whole step, inside the default range.
	ports=$(sed -n 's/.* port=\([0-9]*\) .*/\1/p' <<<"$output" | sort -u)
	[ "$(wc -l <<<"$ports")" -eq 1 ]
	((ports >= 29500 && ports < 30500))
}

@test "the plan replaces Slurm's task binding with the GPU-local one" {
	# Slurm is told to put task 0 on cpu 1 and task 1 on cpu 0; the plan puts
	# each task on the core of its GPU's NUMA node in local order.
	run srun -N1 -n2 --gres=gpu:2 --cpu-bind=map_cpu:1,0 --stork-bind=gpu bash -c "$REPORT"
	echo "$output"
	[ "$status" -eq 0 ]
	grep -q "^task n1 rank=0 .* gpu=0 omp=1 cvd=0,1 cpus=0\$" <<<"$output"
	grep -q "^task n1 rank=1 .* gpu=1 omp=1 cvd=0,1 cpus=1\$" <<<"$output"
}

@test "--stork-bind=none leaves Slurm's binding alone" {
	run srun -N1 -n2 --cpu-bind=map_cpu:1,0 --stork-bind=none bash -c "$REPORT"
	echo "$output"
	[ "$status" -eq 0 ]
	grep -q "^task n1 rank=0 .* cpus=1\$" <<<"$output"
	grep -q "^task n1 rank=1 .* cpus=0\$" <<<"$output"
}

@test "sbatch --stork-bind is accepted and reaches the job's steps" {
	cat >job.sh <<-SCRIPT
	#!/bin/bash
	#SBATCH -N1 -n2 -o job.out
	srun bash -c '$REPORT'
	SCRIPT
	run sbatch_wait --stork-bind=cores,verbose job.sh
	cat job.out
	[ "$status" -eq 0 ]
	grep -qx "stork: rank 0 (local 0) on n1: gpu none, cpus 0, numa 0" job.out
	grep -qx "stork: rank 1 (local 1) on n1: gpu none, cpus 1, numa 0" job.out
}

@test "a bad --stork-bind value fails srun with the message and both nodes stay idle" {
	run srun -N2 -n2 --stork-bind=fastest true
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"--stork-bind: invalid value 'fastest' (valid: auto, gpu, cores, none"* ]]
	run sbatch --stork-bind=fastest --wrap true
	[ "$status" -ne 0 ]
	[[ "$output" == *"invalid value 'fastest'"* ]]
	STORK_BIND=sideways run srun -N1 -n1 true
	[ "$status" -ne 0 ]
	[[ "$output" == *"STORK_BIND: invalid value 'sideways'"* ]]
	sleep 1
	nodes_idle
}

@test "two concurrent steps of one job get different MASTER_PORTs" {
	cat >job.sh <<-'SCRIPT'
	#!/bin/bash
	#SBATCH -N2 -n2 -o job.out
	srun -N2 -n2 --overlap bash -c 'sleep 2; echo "step $SLURM_STEP_ID port $MASTER_PORT"' &
	srun -N2 -n2 --overlap bash -c 'sleep 2; echo "step $SLURM_STEP_ID port $MASTER_PORT"' &
	wait
	SCRIPT
	run sbatch_wait job.sh
	cat job.out
	[ "$status" -eq 0 ]
	[ "$(grep -c '^step ' job.out)" -eq 4 ]
	# Each step agrees on one port; the two steps' ports differ.
	[ "$(sort -u job.out | grep -c '^step ')" -eq 2 ]
	[ "$(awk '/^step /{print $4}' job.out | sort -u | wc -l)" -eq 2 ]
}

@test "a stale RANK exported in the batch script does not reach the tasks" {
	cat >job.sh <<-'SCRIPT'
	#!/bin/bash
	#SBATCH -N1 -n2 -o job.out
	export RANK=99 LOCAL_RANK=42 WORLD_SIZE=1000 MASTER_ADDR=elsewhere MASTER_PORT=1 OMP_NUM_THREADS=64
	srun bash -c 'echo "rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE addr=$MASTER_ADDR port=$MASTER_PORT omp=$OMP_NUM_THREADS"'
	SCRIPT
	run sbatch_wait job.sh
	cat job.out
	[ "$status" -eq 0 ]
	grep -q "^rank=0 local=0 world=2 addr=n1 port=[0-9]* omp=1\$" job.out
	grep -q "^rank=1 local=1 world=2 addr=n1 port=[0-9]* omp=1\$" job.out
	if grep -q "rank=99\|port=1\$\|elsewhere" job.out; then false; fi
}
