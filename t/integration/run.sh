#!/bin/bash
# t/integration/run.sh - Stork's integration tests on a real Slurm cluster.
#
# Starts the local test cluster once (contrib/testcluster), runs every
# t/integration/*.bats file against it with TAP output, and stops it again,
# checking that nothing it started is left behind. A cluster that was already
# running (a developer's) is used and left running.
#
# Needs root (slurmd and namespaces); otherwise the whole file is skipped with
# the reason, as TAP allows.
set -uo pipefail

srcdir=${abs_top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${abs_top_builddir:-$srcdir}
cluster=$builddir/contrib/testcluster/stork-testcluster
export STORK_TESTCLUSTER_DIR=${STORK_TESTCLUSTER_DIR:-$builddir/t/testcluster}

skip_all() { echo "1..0 # SKIP $*"; exit 0; }
[[ $(id -u) -eq 0 ]] || skip_all "integration tests need root (slurmd, mount namespaces)"
command -v bats >/dev/null || skip_all "bats is not installed (Debian package bats)"
[[ -x "$cluster" ]] || skip_all "$cluster is not built"
# slurmstepd cannot load a plugin built with AddressSanitizer (its runtime
# must come first in the process); sanitizer builds run the other tests.
if ldd "$builddir/plugins/.libs/spank_stork.so" 2>/dev/null | grep -q 'libasan\|libtsan'; then
	skip_all "sanitizer build: Slurm's daemons cannot load the instrumented plugin"
fi

# spank_stork.so reads the test topology (this machine's 2 cores, the 4 fake
# GPUs of gres.conf) instead of probing the machine, which has no GPU.
export STORK_TESTCLUSTER_PLUGIN_ARGS=${STORK_TESTCLUSTER_PLUGIN_ARGS-topology=$srcdir/t/data/topo/testcluster-2core-4gpu.xml}

started=0
if ! "$cluster" status >/dev/null 2>&1; then
	if ! "$cluster" start >"$builddir/t/testcluster.env" 2>"$builddir/t/testcluster.start.log"; then
		echo "Bail out! the test cluster did not start: $(tail -3 "$builddir/t/testcluster.start.log")"
		exit 1
	fi
	started=1
fi
eval "$("$cluster" env)"
export abs_top_srcdir=$srcdir abs_top_builddir=$builddir

files=("$srcdir"/t/integration/*.bats)
# STORK_BATS_FILTER selects files by name; a glob such as "p*" is welcome.
# shellcheck disable=SC2206 # unquoted on purpose: the filter is a glob
[[ -n "${STORK_BATS_FILTER:-}" ]] && files=("$srcdir"/t/integration/$STORK_BATS_FILTER.bats)
# STORK_BATS_TEST selects tests by name (bats -f REGEX).
bats --tap --timing ${STORK_BATS_TEST:+-f "$STORK_BATS_TEST"} "${files[@]}"
rc=$?

if ((started)); then
	ns_files=("$STORK_TESTCLUSTER_DIR"/run/slurmd-*.mntns)
	namespaces=$(cat "${ns_files[@]}" 2>/dev/null)
	pids=$(cat "$STORK_TESTCLUSTER_DIR"/run/*.pid 2>/dev/null)
	"$cluster" stop >/dev/null 2>&1
	left=""
	for pid in $pids; do
		kill -0 "$pid" 2>/dev/null && left="$left $pid"
	done
	for p in /proc/[0-9]*; do
		ns=$(readlink "$p/ns/mnt" 2>/dev/null) || continue
		[[ -n "$namespaces" ]] && grep -qxF "$ns" <<<"$namespaces" && left="$left ${p#/proc/}"
	done
	if [[ -n "$left" ]]; then
		echo "Bail out! stork-testcluster stop left processes behind:$left"
		exit 1
	fi
fi
exit $rc
