#!/usr/bin/env bats
# What each built program loads. `stork` brings the configuration, the run
# directory and libslurm; the commands that need the training engine (stork
# bench train|checkpoint|comm, stork check, stork export) run in
# stork-engine, which stork executes with the same arguments (stork(1)).

setup() {
	stork=$abs_top_builddir/launcher/stork
}

# needed FILE: the shared libraries FILE loads, directly or not, one a line.
needed() {
	ldd "$1" | awk '$1 ~ /^lib/ { print $1 }'
}

# none_of FILE REGEX: fails naming the libraries of FILE that match REGEX.
none_of() {
	local libs bad

	libs=$(needed "$1") || return 1
	[ -n "$libs" ] || { echo "ldd $1 lists nothing"; return 1; }
	bad=$(grep -E "$2" <<<"$libs" || true)
	[ -z "$bad" ] || { echo "${1##*/} loads:" $bad; return 1; }
}

@test "stork loads no UCX, PMIx, BLAS or CUDA" {
	# stork run needs no PMIx either: the rendezvous runs in storkd.
	none_of "$stork" '^lib(ucp|ucs|uct|ucm|pmix|openblas|blas|cblas|gfortran|cudart|cublas|nccl)[.-]'
}

@test "stork check answers through stork-engine" {
	run "$stork" check
	[ "$status" -eq 0 ]
	[[ "$output" == *"cpu: "* ]]
}

@test "stork export --help and a bad stork bench train are answered as before" {
	run "$stork" export --help
	[ "$status" -eq 0 ]
	[[ "$output" == "usage: stork export CHECKPOINT MODEL.bin"* ]]
	run "$stork" bench train
	[ "$status" -eq 2 ]
	[[ "$output" == *"usage: stork bench train CONFIG"* ]]
}

@test "without stork-engine, stork check names the missing file and what it runs" {
	STORK_ENGINE=/nonexistent/stork-engine run "$stork" check
	[ "$status" -eq 1 ]
	[[ "$output" == *"cannot run /nonexistent/stork-engine, which runs 'stork check'"* ]]
}

@test "stork bench without a benchmark lists all four, stork-engine not needed" {
	STORK_ENGINE=/nonexistent/stork-engine run "$stork" bench
	[ "$status" -eq 2 ]
	[[ "$output" == *"stork bench launch CONFIG"* ]]
	[[ "$output" == *"stork bench comm"* ]]
}
