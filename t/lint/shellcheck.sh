#!/bin/bash
# t/lint/shellcheck.sh - ShellCheck over every shell script, bash helper and
# bats file of the git checkout, one TAP line per file: any finding fails
# `make check` (and so CI). The files are those git tracks whose name ends
# in .sh, .bash, .bats or .sbatch, or whose first line runs sh, bash or
# bats; a helper without a #! line says `# shellcheck shell=bash`. Settings
# shared by every file (the false positives of bats' syntax) are in
# .shellcheckrc at the top of the tree.
#
# Skipped, with the reason, without shellcheck (Debian package shellcheck)
# or outside a git checkout (a release tarball): CI, which requires every
# test but the GPU ones to run (contrib/run-tests), has both.
set -uo pipefail

srcdir=${abs_top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}

skip_all() { echo "1..0 # SKIP $*"; exit 0; }
command -v shellcheck >/dev/null || skip_all "shellcheck is not installed (Debian package shellcheck)"
[[ -e "$srcdir/.git" ]] || skip_all "$srcdir is not a git checkout (git ls-files lists the files)"
cd "$srcdir" || exit 1

files=()
while IFS= read -r -d '' f; do
	[[ -f "$f" ]] || continue
	case "$f" in
	*.sh | *.bash | *.bats | *.sbatch) files+=("$f") ;;
	*)
		first=$(head -n 1 -- "$f" 2>/dev/null | tr -d '\0')
		[[ "$first" =~ ^#!.*[/\ ](sh|bash|bats)([[:space:]]|$) ]] && files+=("$f")
		;;
	esac
done < <(git ls-files -z)
((${#files[@]} > 0)) || { echo "Bail out! git ls-files found no shell file in $srcdir"; exit 1; }

echo "1..${#files[@]}"
n=0 rc=0
for f in "${files[@]}"; do
	n=$((n + 1))
	if out=$(shellcheck --format=gcc -- "$f" 2>&1); then
		echo "ok $n - $f"
	else
		echo "not ok $n - $f"
		echo "# ${out//$'\n'/$'\n'# }"
		rc=1
	fi
done
exit $rc
