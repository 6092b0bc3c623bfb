#!/usr/bin/env bats
# What `stork --help` and every command's --help say: the forms a user
# types, on standard output with status 0, and the same table as stork(1)
# lists. A mistake a user makes on the first day (a program where the
# configuration goes) is answered with what they meant.

setup() {
	stork=${abs_top_builddir:?set by make check}/launcher/stork
}

@test "stork --help names every command and the forms users need: run -- PROGRAM, prep with a tokenizer, export to safetensors, check --all" {
	run "$stork" --help
	echo "$output"
	[ "$status" -eq 0 ]
	for c in run prep bench report plan check export help version; do
		grep -Eq "^  $c " <<<"$output"
	done
	[[ "$output" == *"stork run [CONFIG] [--set KEY=VALUE]... -- PROGRAM [ARGS]..."* ]]
	[[ "$output" == *"stork run --check CONFIG"* ]]
	[[ "$output" == *"stork prep [--tokenizer FILE]"* ]]
	[[ "$output" == *"tokenizer.json"* ]]
	[[ "$output" == *"stork export [--format llmc|safetensors]"* ]]
	[[ "$output" == *"stork check --all CONFIG"* ]]
	# the same commands as stork(1)'s COMMANDS section
	for c in run prep bench report plan check export; do
		grep -q "^\.B.*stork $c" "${abs_top_srcdir:?}/man/stork.1"
	done
}

@test "every command's --help prints its usage on standard output and exits 0" {
	for c in "run" "prep" "bench" "bench train" "bench checkpoint" "bench reshard" \
		"bench launch" "bench comm" "bench report" "report" "plan" "check" "check --all" "export"; do
		# shellcheck disable=SC2086 # the command's words
		run "$stork" $c --help
		echo "[$c] $status: ${output%%$'\n'*}"
		[ "$status" -eq 0 ]
		want="usage: stork ${c% --all}"
		[[ "$output" == "$want"* ]]
	done
	# check --all's help is check's, not run's
	run "$stork" check --all --help
	[[ "$output" == *"stork check --all CONFIG"* ]]
	[[ "$output" != *"stork run"*"--local-ranks"* ]]
	# a bad option still fails, with the usage on standard error
	run "$stork" bench checkpoint --nonsense
	[ "$status" -eq 2 ]
}

@test "stork check says when there is no GPU driver instead of printing driver 0.0" {
	run "$stork" check
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" != *"driver 0.0"* ]]
	# a build with the CUDA backend, on a machine without a GPU driver
	if ! ls /dev/nvidia0 >/dev/null 2>&1 && [[ "$output" != *"no CUDA backend"* ]]; then
		[[ "$output" == *"cuda: no driver, "* ]]
	fi
}

@test "stork run FILE where FILE is a program, not a configuration: the parse error asks whether stork run -- FILE was meant" {
	cd "$BATS_TEST_TMPDIR"
	printf 'import torch\nprint("hello")\n' >train.py
	run "$stork" run train.py
	echo "$output"
	[ "$status" -eq 3 ]
	[[ "$output" == *"did you mean \`stork run -- train.py\`? a program to run comes after --"* ]]
	# a configuration that is wrong gets no such hint
	printf 'run: [\n' >broken.yaml
	run "$stork" run broken.yaml
	[ "$status" -eq 3 ]
	[[ "$output" != *"did you mean"* ]]
}
