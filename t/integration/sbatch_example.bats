#!/usr/bin/env bats
# etc/stork.sbatch, the script users start from: each of its two GPU blocks,
# taken out of its comment as the script says (##SBATCH becomes #SBATCH),
# is a job Slurm accepts. Only the counts change, to fit this cluster: its
# GPUs per node and its cores (Slurm counts both); the memory stays as
# written, since the cluster does not count it. sbatch --test-only has
# slurmctld check the job and run nothing.

load helpers

: "${abs_top_srcdir:?set by make check}"

setup() {
	setup_workdir
	gpus=$(sinfo -h -N -o '%G' | sed -n 's/^gpu:\([0-9]*\).*/\1/p' | head -1)
	cpus=$(sinfo -h -N -o '%c' | head -1)
	[[ "$gpus" =~ ^[1-9][0-9]*$ && "$cpus" =~ ^[1-9][0-9]*$ ]] ||
		{ echo "sinfo: GPUs per node '$gpus', CPUs per node '$cpus'"; return 1; }
}

# gpu_block a|b [OPTION=COUNT...]: etc/stork.sbatch with that block's
# ##SBATCH lines made options, as a user does, and the block's OPTIONs given
# these values; the other block stays a comment.
gpu_block() {
	local block=$1

	shift
	awk -v label="# ($block)" -v counts="$*" '
		BEGIN {
			n = split(counts, given, " ")
			for (i = 1; i <= n; i++) { name = given[i]; sub(/=.*/, "", name); to[name] = given[i] }
		}
		index($0, label) == 1 { inside = 1; print; next }
		inside && /^##SBATCH/ {
			name = $2
			sub(/=.*/, "", name)
			if (name in to) print "#SBATCH " to[name]; else { sub(/^#/, ""); print }
			next
		}
		{ inside = 0; print }' "$abs_top_srcdir/etc/stork.sbatch"
}

# test_only SCRIPT: sbatch --test-only accepts it.
test_only() {
	echo "--- $1:"
	grep '^#SBATCH' "$1"
	run timeout 60 sbatch --test-only "$1"
	echo "$output"
	[ "$status" -eq 0 ] && [[ "$output" == *"to start at"* ]]
}

@test "etc/stork.sbatch's GPU block (a), one launcher per node: --gres=gpu:N, --cpus-per-task, --mem-per-gpu are accepted" {
	gpu_block a "--gres=gpu:$gpus" "--cpus-per-task=$cpus" >job.sbatch
	grep -qx "#SBATCH --gres=gpu:$gpus" job.sbatch
	grep -qx "#SBATCH --cpus-per-task=$cpus" job.sbatch
	grep -qx '#SBATCH --mem-per-gpu=[0-9]*[KMGT]' job.sbatch
	[ "$(grep -c '^#SBATCH --gpus-per-task' job.sbatch)" -eq 0 ]
	test_only job.sbatch
}

@test "etc/stork.sbatch's GPU block (b), one launcher per GPU: --ntasks-per-node=N --gpus-per-task=1, --cpus-per-task, --mem-per-gpu are accepted" {
	local per_task=$((cpus >= 4 ? cpus / 2 : 1))

	# two tasks a node, each with its GPU and its share of the cores
	gpu_block b --ntasks-per-node=2 "--cpus-per-task=$per_task" >job.sbatch
	grep -qx '#SBATCH --ntasks-per-node=2' job.sbatch
	grep -qx '#SBATCH --gpus-per-task=1' job.sbatch
	grep -qx "#SBATCH --cpus-per-task=$per_task" job.sbatch
	grep -qx '#SBATCH --mem-per-gpu=[0-9]*[KMGT]' job.sbatch
	[ "$(grep -c '^#SBATCH --gres' job.sbatch)" -eq 0 ]
	test_only job.sbatch
}
