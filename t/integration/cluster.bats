#!/usr/bin/env bats
# The local test cluster is a real two-node Slurm: the platform every other
# integration test stands on.

load helpers

: "${abs_top_builddir:?set by make check}"

setup() {
	setup_workdir
}

@test "both nodes are idle and declare 4 GPUs each" {
	nodes_idle
	run sinfo -h -N -o '%N %G'
	[[ "$output" == *"n1 gpu:4"* ]]
	[[ "$output" == *"n2 gpu:4"* ]]
}

@test "sbatch across both nodes: srun --mpi=pmix gives each node a task with its PMIx rank" {
	cat >job.sh <<-SCRIPT
	#!/bin/bash
	#SBATCH -N2 --ntasks-per-node=1 -o job.out
	srun --mpi=pmix $abs_top_builddir/t/integration/pmix_hello
	SCRIPT
	run sbatch_wait job.sh
	[ "$status" -eq 0 ] || { cat job.out; false; }
	cat job.out
	# Each task learned its own rank from PMIx and read its peer's host
	# name back through a fence with data collection.
	grep -qx 'rank 0 of 2 on n1, rank 1 is on n2' job.out
	grep -qx 'rank 1 of 2 on n2, rank 0 is on n1' job.out
}

@test "stork-testcluster env puts the build's stork on PATH: srun stork runs it on both nodes" {
	eval "$("$abs_top_builddir/contrib/testcluster/stork-testcluster" env)"
	[ "$(command -v stork)" = "$abs_top_builddir/launcher/stork" ]
	run srun -N2 -n2 stork --version
	[ "$status" -eq 0 ]
	[ "$(grep -c '^stork ' <<<"$output")" -eq 2 ]
}

@test "each node has a private /tmp" {
	run srun -N2 -n2 bash -c 'hostname > /tmp/whoami; sleep 1; cat /tmp/whoami'
	[ "$status" -eq 0 ]
	[[ "$output" == *n1* && "$output" == *n2* ]]
	[ "$(sort <<<"$output" | uniq | wc -l)" -eq 2 ]
}

@test "USR1 plus scontrol requeue brings the job back with SLURM_RESTART_COUNT=1" {
	cat >job.sh <<-'SCRIPT'
	#!/bin/bash
	#SBATCH -N1 --requeue --open-mode=append -o job.out
	echo "start restart=${SLURM_RESTART_COUNT:-0}"
	if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then
		trap 'echo "got USR1"; scontrol requeue $SLURM_JOB_ID; exit 0' USR1
		echo ready > ready
		sleep 600 & wait
		echo "USR1 never came"
		exit 1
	fi
	echo "finished restart=$SLURM_RESTART_COUNT"
	SCRIPT
	job=$(submit job.sh)
	wait_job_state "$job" RUNNING 60
	for _ in $(seq 50); do [ -e ready ] && break; sleep 0.2; done
	[ -e ready ]
	t0=$SECONDS
	scancel --batch --signal=USR1 "$job"
	wait_job_state "$job" COMPLETED 120
	echo "requeued job finished $((SECONDS - t0)) s after the signal" >&3
	cat job.out
	grep -qx 'start restart=0' job.out
	grep -qx 'got USR1' job.out
	grep -qx 'finished restart=1' job.out
	[ "$(job_field "$job" Restarts)" = 1 ]
}

@test "the cluster's sockets live in a short directory, whatever the build path; one too long is refused" {
	# this cluster: the sockets are not under the build tree
	[[ "$(readlink "$abs_top_builddir/t/testcluster/rundir")" == /var/tmp/stork-tc-* ]]
	grep -q "^AuthInfo=socket=/var/tmp/stork-tc-" "$SLURM_CONF"
	grep -q "^SlurmdSpoolDir=/var/tmp/stork-tc-" "$SLURM_CONF"
	# a socket directory that cannot hold a 108-byte sockaddr_un: start says
	# so and starts nothing
	long=/var/tmp/$(printf 'd%.0s' {1..90})
	run env STORK_TESTCLUSTER_RUNDIR="$long" STORK_TESTCLUSTER_PORT=17890 \
		"$abs_top_builddir/contrib/testcluster/stork-testcluster" start "$WORK/tc"
	[ "$status" -eq 1 ]
	[[ "$output" == *"more than the 107 a UNIX socket allows"*"STORK_TESTCLUSTER_RUNDIR"* ]]
	[ ! -e "$long" ]
}

@test "a socket directory another user made first, or a link, is refused by start, which starts nothing; the running cluster's is ours and 0711 (munged's socket reachable, nothing listed)" {
	local tc=$abs_top_builddir/contrib/testcluster/stork-testcluster rd
	rd=$(readlink "$abs_top_builddir/t/testcluster/rundir")
	[ "$(stat -c '%u %a' "$rd")" = "$(id -u) 711" ]
	[ "$(stat -c '%u %a' "$rd/munge")" = "$(id -u) 711" ]
	[ "$(stat -c '%u %a' "$rd/munge/munge.key")" = "$(id -u) 600" ]
	[ "$(id -u)" -eq 0 ] || skip "needs root, to act as a second user"
	id stork-other >/dev/null 2>&1 || useradd --system --no-create-home stork-other
	rd=/var/tmp/stork-tc-planted-$$
	runuser -u stork-other -- mkdir -m 777 "$rd"
	run env STORK_TESTCLUSTER_RUNDIR="$rd" STORK_TESTCLUSTER_PORT=17870 "$tc" start "$WORK/tc"
	[ "$status" -eq 1 ]
	[[ "$output" == *"$rd belongs to uid $(id -u stork-other), not to this user: refused"* ]]
	[ -z "$(ls -A "$rd")" ]
	rmdir "$rd"
	ln -s /var/tmp "$rd"
	run env STORK_TESTCLUSTER_RUNDIR="$rd" STORK_TESTCLUSTER_PORT=17870 "$tc" start "$WORK/tc"
	[ "$status" -eq 1 ]
	[[ "$output" == *"$rd is not a directory of ours (a link or a file): refused"* ]]
	rm "$rd"
}

@test "stork-testcluster start --nodes 3: three nodes that run a 3-node job step; stop leaves nothing behind" {
	local tc=$abs_top_builddir/contrib/testcluster/stork-testcluster
	run env STORK_TESTCLUSTER_PORT=17850 "$tc" start --nodes 9 "$WORK/tc3"
	[ "$status" -eq 1 ]
	[[ "$output" == *"--nodes 9: a number of nodes from 1 to 8"* ]]
	STORK_TESTCLUSTER_PORT=17850 "$tc" start --nodes 3 "$WORK/tc3" >/dev/null
	conf=$WORK/tc3/etc/slurm.conf
	[ "$(SLURM_CONF=$conf sinfo -h -N -o '%N %t' | sort -u | tr '\n' ' ')" = "n1 idle n2 idle n3 idle " ]
	run env SLURM_CONF="$conf" timeout 60 srun -N3 --ntasks-per-node=1 hostname
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(sort <<<"$output" | tr '\n' ' ')" = "n1 n2 n3 " ]
	# a second start with another count is refused while it runs
	run env STORK_TESTCLUSTER_PORT=17850 "$tc" start --nodes 2 "$WORK/tc3"
	[ "$status" -eq 1 ]
	[[ "$output" == *"already running"*"with 3 nodes, not 2"* ]]
	pids=$(cat "$WORK"/tc3/run/*.pid)
	STORK_TESTCLUSTER_PORT=17850 "$tc" stop "$WORK/tc3" >/dev/null
	for pid in $pids; do
		if kill -0 "$pid" 2>/dev/null; then false; fi
	done
}
