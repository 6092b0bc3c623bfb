#!/bin/bash
# t/fuzz/fuzz.sh SECONDS NAME... - the runs of `make fuzz` (t/fuzz/local.mk),
# in the build directory, after t/fuzz/fuzz_NAME are built: each harness
# for SECONDS on its seed corpus and kept crashes (t/fuzz/corpus/NAME and
# t/fuzz/regress/NAME of $srcdir), one after the other (`make fuzz` keeps
# to one core; libFuzzer's -fork would take more). New inputs go to
# t/fuzz/work/NAME/corpus and are reused by the next run, crashes to
# t/fuzz/work/NAME/ (crash-*, leak-*, timeout-*, oom-*), libFuzzer's output
# to t/fuzz/work/NAME/log. Prints per harness the executions, their rate,
# the inputs it added and the crashes found; exits 1 when one crashed.
set -uo pipefail

seconds=${1:?usage: fuzz.sh SECONDS NAME...}
shift
srcdir=${srcdir:-.}
work=t/fuzz/work

# The files the harnesses hand to readers, in memory when /dev/shm is there;
# removed whatever happened (a crashed harness cannot remove its own).
tmp=$(mktemp -d /dev/shm/stork-fuzz.XXXXXX 2>/dev/null || mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# A figure of libFuzzer's final statistics (-print_final_stats) in $dir/log.
final_stat() { sed -n "s/^stat::$1: *//p" "$dir/log" | tail -n 1; }

printf '%-14s %12s %8s %6s %8s  %s\n' harness executions exec/s added crashes artifact
failed=0 total=0
for name; do
	dir=$work/$name
	mkdir -p "$dir/corpus" || exit 1
	rm -f "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-* "$dir/log"
	corpora=("$dir/corpus" "$srcdir/t/fuzz/corpus/$name")
	[[ -d "$srcdir/t/fuzz/regress/$name" ]] && corpora+=("$srcdir/t/fuzz/regress/$name")
	TMPDIR=$tmp "t/fuzz/fuzz_$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$dir/" "${corpora[@]}" >"$dir/log" 2>&1
	status=$?
	execs=$(final_stat number_of_executed_units) rate=$(final_stat average_exec_per_sec)
	added=$(final_stat new_units_added)
	artifacts=()
	for f in "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-*; do
		[[ -e "$f" ]] && artifacts+=("$f")
	done
	crashes=${#artifacts[@]}
	note=${artifacts[0]:-}
	if ((status != 0 && crashes == 0)); then
		crashes=1 note="exit $status without an input: see $dir/log"
	fi
	((crashes > 0)) && failed=1
	total=$((total + ${execs:-0}))
	printf '%-14s %12s %8s %6s %8s  %s\n' "$name" "${execs:-?}" "${rate:-?}" "${added:-?}" \
		"$crashes" "$note"
done
echo "$# harnesses, $seconds s each: $total executions"
((failed == 0)) || echo "make fuzz: a harness crashed: reproduce with t/fuzz/fuzz_NAME ARTIFACT" >&2
exit $failed
