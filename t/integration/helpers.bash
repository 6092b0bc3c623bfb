# shellcheck shell=bash
# t/integration/helpers.bash - shared by the .bats files: a work directory
# every node can see (never /tmp: each node has its own), and job helpers.

setup_workdir() {
	WORK=${abs_top_builddir:?set by make check}/t/integration/work/${BATS_TEST_FILENAME##*/}.$BATS_TEST_NUMBER
	rm -rf "$WORK"
	mkdir -p "$WORK"
	cd "$WORK" || return 1
}

# job_field JOBID FIELD: one field of `scontrol show job` (e.g. JobState).
job_field() {
	scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}

# wait_job_state JOBID REGEX SECONDS: wait until the job's state matches;
# give up at once when it reaches a final state that does not.
wait_job_state() {
	local job=$1 want=$2 secs=$3 state=""
	local deadline=$((SECONDS + secs))
	local final='COMPLETED|FAILED|TIMEOUT|CANCELLED|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE'
	while ((SECONDS < deadline)); do
		state=$(job_field "$job" JobState)
		[[ "$state" =~ ^($want)$ ]] && return 0
		[[ "$state" =~ ^($final)$ ]] && break
		sleep 1
	done
	echo "job $job is '$state', expected '$want' (waited up to ${secs}s)" >&2
	scontrol show job "$job" >&2
	return 1
}

# sbatch_wait [SBATCH-ARGS...] SCRIPT: sbatch --wait with a deadline
# ($STORK_TEST_JOB_SECONDS, default 600): returns 0 once the job completed
# with exit code 0, 1 as soon as it ended otherwise, was held (a launch
# failure requeues a job held: it would wait forever) or ran out of time,
# printing the job's state.
sbatch_wait() {
	local job state reason deadline=$((SECONDS + ${STORK_TEST_JOB_SECONDS:-600}))
	local final='COMPLETED|FAILED|TIMEOUT|CANCELLED|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE'
	job=$(sbatch --parsable "$@" | cut -d';' -f1) || return 1
	echo "Submitted batch job $job"
	while ((SECONDS < deadline)); do
		state=$(job_field "$job" JobState)
		reason=$(job_field "$job" Reason)
		if [[ "$state" =~ ^($final)$ ]]; then
			[[ "$state" == COMPLETED && "$(job_field "$job" ExitCode)" == 0:0 ]] && return 0
			break
		fi
		[[ "$reason" =~ [Hh]eld|launch_failed ]] && break
		sleep 1
	done
	echo "job $job: state '$state', reason '$reason' (waited up to ${STORK_TEST_JOB_SECONDS:-600}s)" >&2
	scontrol show job "$job" >&2
	[[ "$state" =~ ^($final)$ ]] || scancel "$job" 2>/dev/null
	return 1
}

# cancel_test_job: a test's teardown: the job in $job, if a failed test left
# one, cancelled for good (not requeued).
cancel_test_job() {
	[[ -n "${job:-}" ]] || return 0
	scontrol update jobid="$job" requeue=0 2>/dev/null || true
	scancel "$job" 2>/dev/null || true
}

# submit ARGS...: sbatch --parsable, prints the job id.
submit() {
	sbatch --parsable "$@" | cut -d';' -f1
}

# wait_nodes_idle SECONDS: until nodes_idle, or fail naming the nodes' states.
wait_nodes_idle() {
	local deadline=$((SECONDS + $1))
	while ((SECONDS < deadline)); do
		nodes_idle 2>/dev/null && return 0
		sleep 1
	done
	nodes_idle
}

# nodes_idle: both nodes idle (no job left anything behind, none drained).
nodes_idle() {
	local out
	out=$(sinfo -h -N -o '%N %t' | sort -u)
	[[ "$out" == $'n1 idle\nn2 idle' ]] || { echo "nodes: $out" >&2; return 1; }
}

# wait_sacct_states JOB "STATE..." SECONDS: until slurmdbd's records of the
# job (each run of it: sacct -D) have these states in order; it receives
# them from slurmctld a moment after the job ends.
wait_sacct_states() {
	local job=$1 want=$2 got=""
	local deadline=$((SECONDS + $3))
	while ((SECONDS < deadline)); do
		got=$(sacct -j "$job" -D -X -n -P --format=State | tr '\n' ' ')
		[[ "${got% }" == "$want" ]] && return 0
		sleep 1
	done
	echo "job $job: sacct states '${got% }', expected '$want'" >&2
	return 1
}

# memory_cgroup LIMIT: a memory cgroup of the test's own with that limit
# (cgroup v1 or v2), its directory in $MEM_CGROUP, removed by
# teardown_memory_cgroup; skips where the test may not make one (not root,
# no memory controller).
memory_cgroup() {
	local limit_file=memory.max swap_file=memory.swap.max
	if [ -d /sys/fs/cgroup/memory ]; then
		MEM_CGROUP=/sys/fs/cgroup/memory/stork-test-oom-$$
		limit_file=memory.limit_in_bytes swap_file=memory.swappiness
	else
		MEM_CGROUP=/sys/fs/cgroup/stork-test-oom-$$
	fi
	if ! mkdir "$MEM_CGROUP" 2>/dev/null || ! echo "$1" >"$MEM_CGROUP/$limit_file"; then
		skip "cannot make a memory cgroup with a limit ($MEM_CGROUP/$limit_file)"
	fi
	# no swap: the limit is reached, not paged around
	echo 0 >"$MEM_CGROUP/$swap_file" 2>/dev/null || true
}

teardown_memory_cgroup() {
	[ -z "${MEM_CGROUP:-}" ] || rmdir "$MEM_CGROUP" 2>/dev/null || true
}

# tensorboard_check RUN_DIR FILES_PER_RANK: the run's TensorBoard files read
# as TensorBoard reads them, every train_loss of the metrics at its step
# (t/integration/tensorboard/check.py).
tensorboard_check() {
	/usr/bin/python3 "${abs_top_srcdir:?}/t/integration/tensorboard/check.py" "$@"
}
