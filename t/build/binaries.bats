#!/usr/bin/env bats
# What each built program loads and exports. spank_stork.so runs inside srun,
# sbatch, salloc and slurmstepd: it brings binding and topology (hwloc) and
# nothing else of Stork's dependencies. `stork` brings the configuration,
# the run directory and libslurm; the commands that need the training engine
# (stork bench train|checkpoint|comm, stork check, stork export) run in
# stork-engine, which stork executes with the same arguments (stork(1)).

setup() {
	plugin=${abs_top_builddir:?}/plugins/.libs/spank_stork.so
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
	[ -z "$bad" ] || { echo "${1##*/} loads: ${bad//$'\n'/ }"; return 1; }
}

@test "spank_stork.so loads no libyaml, jansson, UCX, PMIx, BLAS, CUDA or libslurm" {
	# libslurm's symbols come from the Slurm process that loads the plugin.
	none_of "$plugin" '^lib(yaml|jansson|ucp|ucs|uct|ucm|pmix|openblas|blas|cblas|gfortran|cudart|cublas|nccl|xxhash|slurm)[.-]'
}

@test "spank_stork.so loads hwloc, for the topology" {
	needed "$plugin" | grep -q '^libhwloc\.'
}

# loaded_defines FILE: the dynamic symbols that the libraries FILE loads
# define, one a line, sorted (LC_ALL=C), without their versions.
loaded_defines() {
	local lib

	ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
		while read -r lib; do
			nm -D --defined-only "$lib" | awk 'NF == 3 { sub(/@.*/, "", $3); print $3 }'
		done | LC_ALL=C sort -u
}

@test "spank_stork.so leaves only Slurm's functions to the process that loads it" {
	local undef

	# A plugin links with symbols left undefined: one of lib/ that it does
	# not link would fail only when Slurm loads it. What the libraries it
	# loads define is found (hwloc's; in a sanitizer build, libasan's and
	# libubsan's, which stand in for some of libc's too).
	undef=$(nm -D --undefined-only "$plugin" | awk '$1 == "U" && $2 !~ /@/ { print $2 }' |
		LC_ALL=C sort -u | LC_ALL=C comm -23 - <(loaded_defines "$plugin") |
		grep -vE '^(slurm_|spank_)' || true)
	[ -z "$undef" ] || { echo "undefined: ${undef//$'\n'/ }"; false; }
}

@test "storkd-program, the daemon of stork run -- PROGRAM, loads no BLAS, CUDA or NCCL" {
	# the user's program brings its own; the daemon starts in a few ms
	none_of "$abs_top_builddir/daemon/storkd-program" '^lib(openblas|blas|cblas|gfortran|cudart|cublas|cublasLt|nccl|cuda)[.-]'
	needed "$abs_top_builddir/daemon/storkd-program" | grep -q '^libucp\.'
}

@test "stork loads no UCX, PMIx, BLAS or CUDA" {
	# stork run needs no PMIx either: the rendezvous runs in storkd.
	none_of "$stork" '^lib(ucp|ucs|uct|ucm|pmix|openblas|blas|cblas|gfortran|cudart|cublas|nccl)[.-]'
}

@test "spank_stork.so exports only slurm_spank_* and the plugin_* symbols Slurm looks up" {
	local syms extra

	syms=$(nm -D --defined-only "$plugin" | awk 'NF == 3 && $2 != "A" { sub(/@.*/, "", $3); print $3 }')
	extra=$(grep -vE '^(slurm_spank_[a-z_]+|plugin_name|plugin_type|plugin_version|spank_plugin)$' \
		<<<"$syms" || true)
	[ -z "$extra" ] || { echo "also exported: ${extra//$'\n'/ }"; false; }
	for s in plugin_name plugin_type plugin_version slurm_spank_init slurm_spank_task_init; do
		grep -qx "$s" <<<"$syms" || { echo "$s is not exported"; false; }
	done
}

@test "stork check answers through stork-engine" {
	run "$stork" check
	[ "$status" -eq 0 ]
	[[ "$output" == *"cpu: "* ]]
}

@test "stork export --help and a bad stork bench train are answered as before" {
	run "$stork" export --help
	[ "$status" -eq 0 ]
	[[ "$output" == "usage: stork export [--format llmc|safetensors] [--dtype fp32|bf16] CHECKPOINT OUT"* ]]
	run "$stork" bench train
	[ "$status" -eq 2 ]
	[[ "$output" == *"usage: stork bench train CONFIG"* ]]
}

@test "without stork-engine, stork check names the missing file and what it runs" {
	STORK_ENGINE=/nonexistent/stork-engine run "$stork" check
	[ "$status" -eq 1 ]
	[[ "$output" == *"cannot run /nonexistent/stork-engine, which runs 'stork check'"* ]]
}

@test "stork bench without a benchmark lists every one, stork-engine not needed" {
	STORK_ENGINE=/nonexistent/stork-engine run "$stork" bench
	[ "$status" -eq 2 ]
	for b in "train CONFIG" "checkpoint CONFIG" "reshard CONFIG" "launch CONFIG" comm report; do
		[[ "$output" == *"stork bench $b"* ]]
	done
}
