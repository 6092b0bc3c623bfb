#!/usr/bin/env bats
# `stork bench comm` on the test cluster: one task per node, the tasks meet
# over PMIx and all-reduce over UCX; every element of every row must be the
# float sum in rank order (lib/comm/comm.h), whose bits depend on the order
# with 3 ranks or more.

load helpers

stork=${abs_top_builddir:?set by make check}/launcher/stork

setup() {
	setup_workdir
}

# assert_table N SIZES...: the header, then exactly one row per size in order,
# each "size count float time algbw busbw 0" with count = size / 4 and
# busbw = algbw * 2 (N - 1) / N.
assert_table() {
	local n=$1
	shift
	local sizes=("$@") rows
	echo "$output"
	grep -q "^# stork bench comm: all-reduce (float sum, in place) over $n ranks" <<<"$output"
	grep -Eq '^# +size +count +type +time +algbw +busbw +#wrong$' <<<"$output"
	grep -q '^# #wrong: elements that are not the float sum in rank order' <<<"$output"
	# (srun may say it waited for resources: its lines are not the table's)
	rows=$(grep -v -e '^#' -e '^srun: ' <<<"$output")
	[ "$(wc -l <<<"$rows")" -eq "${#sizes[@]}" ]
	awk -v n="$n" -v want="${sizes[*]}" '
		BEGIN { split(want, s, " ") }
		NF != 7 || $1 != s[NR] || $2 != $1 / 4 || $3 != "float" || $7 != 0 { bad = 1; print "bad row " NR ": " $0 }
		$4 <= 0 { bad = 1; print "bad time: " $0 }
		{ bus = $5 * 2 * (n - 1) / n; if (bus - $6 > 0.015 || $6 - bus > 0.015) { bad = 1; print "bad busbw: " $0 } }
		END { exit bad }' <<<"$rows"
	# the figures, for the record
	echo "# ${rows//$'\n'/$'\n'# }" >&3
}

@test "srun -N2 -n2 --mpi=pmix stork bench comm -b 1K -e 16M -f 4: power-of-two sizes, all exact" {
	run srun -N2 -n2 --mpi=pmix "$stork" bench comm -b 1K -e 16M -f 4 -n 5 -w 1
	[ "$status" -eq 0 ]
	assert_table 2 1024 4096 16384 65536 262144 1048576 4194304 16777216
}

@test "odd sizes (-b 1000 -e 1000000 -f 7) are reduced exactly" {
	run srun -N2 -n2 --mpi=pmix "$stork" bench comm -b 1000 -e 1000000 -f 7 -n 5 -w 1
	[ "$status" -eq 0 ]
	assert_table 2 1000 7000 49000 343000
}

@test "three tasks on two nodes over the TCP rendezvous, odd sizes: every element the sum in rank order" {
	run srun -N2 -n3 --mpi=none "$stork" bench comm -b 1004 -e 300000 -f 9 -n 3 -w 1
	[ "$status" -eq 0 ]
	assert_table 3 1004 9036 81324
}

@test "rank 0 alone prints the table" {
	run srun -N2 -n2 --mpi=pmix "$stork" bench comm -b 4K -e 4K -n 2 -w 0
	[ "$status" -eq 0 ]
	[ "$(grep -c '^# stork bench comm' <<<"$output")" -eq 1 ]
	[ "$(grep -vc '^#' <<<"$output")" -eq 1 ]
}

@test "a bad size is a usage error that names the option" {
	run srun -N1 -n1 "$stork" bench comm -b 12Q
	[ "$status" -eq 2 ]
	grep -q "stork bench comm: -b '12Q' is not a size" <<<"$output"
}

@test "tasks on one host talk over TCP as storkd's do, so the figure kept for stork plan is a run's" {
	local lo=/sys/class/net/lo/statistics/tx_bytes before after
	[ -r "$lo" ] || skip "no loopback byte counter"
	# the test cluster's nodes share this host: shared memory would move
	# the bytes without the loopback device
	before=$(cat "$lo")
	run srun -N2 -n2 --mpi=pmix "$stork" bench comm -b 16M -e 16M -n 2 -w 0
	after=$(cat "$lo")
	[ "$status" -eq 0 ]
	echo "loopback bytes: $((after - before))"
	# each task sends 8 MiB twice per all-reduce; the check and two timed ones
	[ $((after - before)) -ge $((3 * 16777216)) ]
}
