#!/usr/bin/env bats
# The rendezvous of a step's launchers (lib/rendezvous) on the test cluster:
# over PMIx under srun --mpi=pmix, over TCP on the first node otherwise, and
# a launcher that never arrives is named within the timeout.
#
# rdv_probe (t/integration/rdv_probe.c) is one launcher: it contributes its
# index and host and prints the table it learned, one line per launcher:
#   launcher I of N on HOST via METHOD in MS ms: 0=H0 1=H1 ...

load helpers

probe=${abs_top_builddir:?set by make check}/t/integration/rdv_probe
attack=$abs_top_builddir/t/integration/rdv_attack

setup() {
	setup_workdir
}

# assert_tables N METHOD HOSTS...: exactly N lines, one per launcher, each
# by the launcher on HOSTS[I] via METHOD and listing every launcher's host.
assert_tables() {
	local n=$1 method=$2
	shift 2
	local hosts=("$@") want="" i
	for ((i = 0; i < n; i++)); do want="$want $i=${hosts[i]}"; done
	echo "$output"
	[ "$(grep -c '^launcher ' <<<"$output")" -eq "$n" ]
	for ((i = 0; i < n; i++)); do
		grep -Eq "^launcher $i of $n on ${hosts[i]} via $method in [0-9.]+ ms:$want\$" <<<"$output"
	done
	# The time each launcher spent, for the record.
	sed -n 's/^launcher \([0-9]*\) .* in \([0-9.]*\) ms:.*/launcher \1: \2 ms/p' <<<"$output" |
		tr '\n' ' ' | sed "s/^/# $method, $n launchers: /" >&3
	echo >&3
}

@test "srun -N2 -n2 --mpi=pmix: each launcher learns the other's host over PMIx" {
	run srun -N2 -n2 --mpi=pmix "$probe"
	[ "$status" -eq 0 ]
	assert_tables 2 pmix n1 n2
}

@test "srun -N2 -n2 without PMIx: the TCP rendezvous on the first node gives the same table" {
	run srun -N2 -n2 --mpi=none "$probe"
	[ "$status" -eq 0 ]
	assert_tables 2 tcp n1 n2
}

@test "srun -N2 -n4 --mpi=pmix: four launchers, two per node, over PMIx" {
	run srun -N2 -n4 --mpi=pmix "$probe" -b 4096
	[ "$status" -eq 0 ]
	assert_tables 4 pmix n1 n1 n2 n2
}

@test "srun -N2 -n4 without PMIx: four launchers over TCP, 1 MiB blobs" {
	run srun -N2 -n4 --mpi=none "$probe" -b 1048576
	[ "$status" -eq 0 ]
	assert_tables 4 tcp n1 n1 n2 n2
}

@test "srun -N2 -n4 -m cyclic without PMIx: launchers dealt round-robin" {
	run srun -N2 -n4 -m cyclic --mpi=none "$probe"
	[ "$status" -eq 0 ]
	assert_tables 4 tcp n1 n2 n1 n2
}

# The failure line of launcher I: "rdv_probe: launcher I on HOST failed after S s: MESSAGE".
failed_after() {
	sed -n "s/^rdv_probe: launcher $1 on [^ ]* failed after \([0-9.]*\) s: .*/\1/p" <<<"$output"
}

@test "TCP: a launcher that never arrives is named, with its node, within the timeout" {
	run srun -N2 -n2 --mpi=none "$probe" -t 3 -a 1 -s 8
	echo "$output"
	[ "$status" -eq 22 ]
	grep -q "^rdv_probe: launcher 0 on n1 failed after .* s: rendezvous: 1 of 2 launchers did not arrive within 3 s: launcher 1 (n2)\$" <<<"$output"
	secs=$(failed_after 0)
	echo "# launcher 0 gave up after $secs s (timeout 3 s)" >&3
	awk -v s="$secs" 'BEGIN { exit !(s >= 2.9 && s < 4) }'
}

@test "TCP: when launcher 0 never arrives the others name its address" {
	run srun -N2 -n2 --mpi=none "$probe" -t 2 -a 0 -s 4
	echo "$output"
	[ "$status" -eq 22 ]
	grep -Eq "^rdv_probe: launcher 1 on n2 failed after .* s: rendezvous: launcher 1: launcher 0 on n1:[0-9]+ never answered within 2 s" <<<"$output"
}

@test "PMIx: a launcher that never arrives is named, with its node, within the timeout" {
	run srun -N2 -n4 --mpi=pmix "$probe" -t 3 -a 3 -s 8
	echo "$output"
	[ "$status" -eq 22 ]
	for i in 0 1 2; do
		grep -q "^rdv_probe: launcher $i on n[12] failed after .* s: rendezvous: 1 of 4 launchers did not arrive within 3 s (PMIx fence: .*): launcher 3 (n2)\$" <<<"$output"
		secs=$(failed_after $i)
		echo "# launcher $i gave up after $secs s (timeout 3 s)" >&3
		awk -v s="$secs" 'BEGIN { exit !(s >= 2.9 && s < 4.5) }'
	done
}

# Another Unix user of the nodes (created here), who knows the job and step
# ids (squeue) and the port (the same formula as everyone's), and reaches
# munged as every user does (SOCK: slurm.conf's AuthInfo socket).
attacker() {
	id stork-attacker >/dev/null 2>&1 ||
		useradd --system --no-create-home --shell /usr/sbin/nologin stork-attacker
	SOCK=$(sed -n 's/^AuthInfo=.*socket=\([^,]*\).*/\1/p' "$SLURM_CONF" | head -1)
}

# probe_job NAME LATE: a 2-launcher TCP rendezvous job, launcher LATE
# (INDEX:SECONDS) joining late; sets JOB, STEP and PORT (launcher 0's) once
# the job says them.
probe_job() {
	local name=$1 late=$2 where
	printf '#!/bin/bash\n#SBATCH -N2 -n2 -o %s.out -e %s.err\nsrun -m block %s -m tcp -t 30 -d %s -v\n' \
		"$name" "$name" "$probe" "$late" >"$name.sh"
	JOB=$(sbatch --parsable "$name.sh")
	for _ in $(seq 100); do grep -q 'launcher 0 at' "$name.out" 2>/dev/null && break; sleep 0.2; done
	where=$(sed -n 's/^rdv_probe: job [0-9]* step \([0-9]*\): launcher 0 at [^:]*:\([0-9]*\)$/\1 \2/p' "$name.out")
	read -r STEP PORT <<<"$where"
}

@test "TCP: another user's well-formed hello for launcher 1 is refused and named, and gets nothing signed back; the job meets its real launcher 1" {
	[ "$(id -u)" -eq 0 ] || skip "needs root, to act as a second user"
	attacker
	probe_job atk 1:4
	sleep 0.5
	run runuser -u stork-attacker -- env MUNGE_SOCKET="$SOCK" "$attack" 127.0.0.1 "$PORT" "$JOB" "$STEP" 2 1
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == "closed without a reply" ]]
	# a stranger's hello for another job: no signed error either
	run runuser -u stork-attacker -- env MUNGE_SOCKET="$SOCK" "$attack" 127.0.0.1 "$PORT" "$((JOB + 1))" "$STEP" 2 1
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == "closed without a reply" ]]
	wait_job_state "$JOB" COMPLETED 60
	grep -q "^launcher 1 of 2 on n2 via tcp in .*: 0=n1 1=n2$" atk.out
	grep -q "rendezvous: refused a connection from 127.0.0.1:[0-9]* claiming launcher 1: launcher 1's hello is not the job's: its munge credential is of uid $(id -u stork-attacker)" atk.err
	grep -q "rendezvous: refused a connection from 127.0.0.1:[0-9]* claiming launcher 1: this port serves the rendezvous of job $JOB step $STEP, not of job $((JOB + 1)) step $STEP" atk.err
}

@test "TCP: another user floods launcher 0's port with 500 connections: the launchers meet in their usual time, and launcher 0's log counts the connections instead of naming each" {
	[ "$(id -u)" -eq 0 ] || skip "needs root, to act as a second user"
	attacker
	# launcher 1 joins 2 s late, when the flood is on
	probe_job flood 1:2
	runuser -u stork-attacker -- "$attack" --flood 127.0.0.1 "$PORT" 500 5 >attack.out 2>&1 &
	local flooder=$!
	wait_job_state "$JOB" COMPLETED 60
	wait "$flooder"
	cat attack.out flood.out flood.err
	[[ "$(cat attack.out)" =~ ^held\ 500\ at\ once ]]
	line=$(grep "^launcher 1 of 2 on n2 via tcp in " flood.out)
	ms=${line#* in }
	ms=${ms%% ms:*}
	echo "# launcher 1 met launcher 0 in $ms ms under the flood" >&3
	# kept out, it would retry until its timeout (30 s)
	awk -v ms="$ms" 'BEGIN { exit !(ms < 5000) }'
	grep -q "rendezvous: too many connections: closed the one from 127.0.0.1:[0-9]*, which had not identified itself" flood.err
	[ "$(grep -c 'rendezvous:' flood.err)" -le 4 ]
}

@test "TCP: another user holding launcher 0's port answers launcher 1 with a forged table: refused, named; the job meets its real launcher 0" {
	[ "$(id -u)" -eq 0 ] || skip "needs root, to act as a second user"
	attacker
	# launcher 0 comes 5 s late: the other user takes its port first
	probe_job fake 0:5
	run runuser -u stork-attacker -- env MUNGE_SOCKET="$SOCK" "$attack" --reply "$PORT" "$JOB" "$STEP" 2 3
	echo "$output"
	[[ "$output" =~ ^answered\ [1-9][0-9]*\ hello ]]
	wait_job_state "$JOB" COMPLETED 60
	grep -q "^launcher 1 of 2 on n2 via tcp in .*: 0=n1 1=n2$" fake.out
	grep -q "rendezvous: launcher 1: refused a reply from n1:$PORT that is not launcher 0's: its munge credential is of uid $(id -u stork-attacker), not of the job's user" fake.err
}
