#!/bin/bash
# t/fuzz/inputs.sh - every fuzzing harness over its seed corpus and over the
# inputs that once crashed it (t/fuzz/corpus/NAME, t/fuzz/regress/NAME),
# built without libFuzzer as t/fuzz/input_NAME (t/fuzz/local.mk), so that
# `make check` runs them on any machine, clang or not: one TAP line per
# harness. A harness that aborts, crashes or reports a sanitizer error
# (when the tree is configured with one) fails it.
set -uo pipefail

srcdir=${abs_top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir}

names=()
for d in "$srcdir"/t/fuzz/corpus/*/; do
	d=${d%/}
	names+=("${d##*/}")
done
((${#names[@]} > 0)) || { echo "Bail out! no seed corpus under $srcdir/t/fuzz/corpus"; exit 1; }

echo "1..${#names[@]}"
n=0 rc=0
for name in "${names[@]}"; do
	n=$((n + 1))
	inputs=("$srcdir/t/fuzz/corpus/$name")
	[[ -d "$srcdir/t/fuzz/regress/$name" ]] && inputs+=("$srcdir/t/fuzz/regress/$name")
	if out=$("$builddir/t/fuzz/input_$name" "${inputs[@]}" 2>&1); then
		echo "ok $n - $name: ${out##*$'\n'}"
	else
		echo "not ok $n - $name"
		echo "# ${out//$'\n'/$'\n'# }"
		rc=1
	fi
done
exit $rc
