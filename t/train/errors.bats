#!/usr/bin/env bats
# Bad input: a clear message naming the file (and line:column for YAML), a
# distinct exit code (stork(1)), and nothing overwritten.

load helpers

setup() {
	setup_run
}

# shard FILE MAGIC VERSION COUNT TOKENS: an llm.c token shard with a chosen header.
shard() {
	perl -e 'my ($path, $magic, $version, $count, $tokens) = @ARGV;
		open(my $f, ">:raw", $path) or die "$path: $!";
		print $f pack("l<256", $magic, $version, $count, (0) x 253);
		print $f pack("S<*", (65) x $tokens);' "$@"
}

@test "malformed YAML: exit 3, file:line:column, no run directory" {
	printf 'train:\n  steps: [1, 2\n' >bad.yaml
	run "$STORK" run bad.yaml
	[ "$status" -eq 3 ]
	[[ "$output" == *"bad.yaml:"[0-9]*:[0-9]*:* ]]
	[ ! -e runs ]
}

@test "an unknown key: exit 3, named with its position" {
	printf 'train:\n  stepz: 10\n' >bad.yaml
	run "$STORK" run bad.yaml
	[ "$status" -eq 3 ]
	[[ "$output" == *"bad.yaml:2:3:"*"stepz"* ]]
}

@test "a zero or negative size: exit 3, naming the key" {
	run "$STORK" run tiny.yaml --set train.batch_size=0
	[ "$status" -eq 3 ]
	[[ "$output" == *"train.batch_size"* ]]
	sed -i 's/layers: 2/layers: -1/' tiny.yaml
	run "$STORK" run tiny.yaml
	[ "$status" -eq 3 ]
	[[ "$output" == *"tiny.yaml:5:11:"*"model.layers"* ]]
}

@test "a missing config file: exit 3, naming the path" {
	run "$STORK" run nowhere.yaml
	[ "$status" -eq 3 ]
	[[ "$output" == *"nowhere.yaml"* ]]
}

@test "a shard with the wrong magic: exit 4, naming the file, before any run directory" {
	shard data/bad.bin 12345 1 1000 1000
	run "$STORK" run tiny.yaml --set 'data.train=data/bad.bin'
	[ "$status" -eq 4 ]
	[[ "$output" == *"data/bad.bin"*"magic"* ]]
	[ ! -e runs ]
}

@test "a data glob that matches nothing: exit 4 naming the key and the glob, before any run directory" {
	run "$STORK" run tiny.yaml --set 'data.train=data/nothing_*.bin'
	[ "$status" -eq 4 ]
	[[ "$output" == *"data.train: 'data/nothing_*.bin' matches no file"* ]]
	[ ! -e runs ]
	# validation shards are checked too, when validation runs
	run "$STORK" run tiny.yaml --set 'data.val=data/nothing_*.bin'
	[ "$status" -eq 4 ]
	[[ "$output" == *"data.val: 'data/nothing_*.bin' matches no file"* ]]
}

@test "stork run --check: the start's checks and nothing else; each mistake named, nothing left behind" {
	run "$STORK" run --check tiny.yaml
	[ "$status" -eq 0 ]
	[[ "$output" == *"configuration and data check out: 1 local shard(s) of data.train"* ]]
	[ ! -e runs ]
	run "$STORK" run --check tiny.yaml --set train.stepz=3
	[ "$status" -eq 3 ]
	[[ "$output" == *"stepz"* ]]
	run "$STORK" run --check tiny.yaml --set 'data.train=data/none.bin'
	[ "$status" -eq 4 ]
	[[ "$output" == *"'data/none.bin' matches no file"* ]]
	sed -i '/vocab_size: 257/d' tiny.yaml
	run "$STORK" run --check tiny.yaml
	[ "$status" -eq 3 ]
	[[ "$output" == *"model.vocab_size: 257"* ]]
	[ ! -e runs ]
}

@test "a truncated shard: exit 4, naming the file" {
	shard data/short.bin 20240520 1 1000 500
	run "$STORK" run tiny.yaml --set 'data.train=data/short.bin'
	[ "$status" -eq 4 ]
	[[ "$output" == *"data/short.bin"*"truncated"* ]]
	[ ! -e runs ]
}

@test "a shard smaller than B*T+1 tokens: exit 4; exactly B*T+1 trains" {
	# B=4, T=32: 129 tokens are needed.
	shard data/small.bin 20240520 1 128 128
	run "$STORK" run tiny.yaml --set 'data.train=data/small.bin'
	[ "$status" -eq 4 ]
	[[ "$output" == *"data_error (exit 4)"*"data/small.bin"* ]]
	# found on the node, after the run directory: exit_info.json says so
	grep -q '"reason": "data_error"' runs/tiny__job=local__task=0/exit_info.json
	shard data/enough.bin 20240520 1 129 129
	run "$STORK" run tiny.yaml --set 'data.train=data/enough.bin' --set train.steps=3 --set run.name=enough
	[ "$status" -eq 0 ]
}

@test "stork prep's shards with model.vocab_size left at GPT-2's: exit 3 naming the key, no run directory; set, it trains" {
	sed -i '/vocab_size: 257/d' tiny.yaml
	run "$STORK" run tiny.yaml
	[ "$status" -eq 3 ]
	[[ "$output" == *"data/docs_train.bin"*"257"*"model.vocab_size: 257"* ]]
	[ ! -e runs ]
	run "$STORK" run tiny.yaml --set model.vocab_size=257 --set train.steps=2
	[ "$status" -eq 0 ]
	# GPT-2's vocabulary asked for by name: honoured
	run "$STORK" run tiny.yaml --set model.vocab_size=50257 --set train.steps=1 --set run.name=gpt2vocab
	[ "$status" -eq 0 ]
	# a model smaller than the shards' vocabulary cannot hold their tokens
	run "$STORK" run tiny.yaml --set model.vocab_size=200 --set run.name=small
	[ "$status" -eq 3 ]
	[[ "$output" == *"more than model.vocab_size = 200"* ]]
}

@test "run.resume_from that does not exist: exit 3 naming the path and why, no run directory" {
	run "$STORK" run tiny.yaml --set run.resume_from=runs/gone/checkpoints
	[ "$status" -eq 3 ]
	[[ "$output" == *"run.resume_from: runs/gone/checkpoints"*"No such file or directory"* ]]
	[ ! -e runs ]
}

@test "a checkpoint of another shape is refused naming both shapes, and kept" {
	"$STORK" run tiny.yaml --set train.steps=3 >/dev/null
	ckpt=runs/tiny__job=local__task=0/checkpoints/step_00000003
	before=$(md5sum $ckpt/*)
	run "$STORK" run tiny.yaml --set train.steps=6 --set model.channels=128
	[ "$status" -eq 5 ]
	[[ "$output" == *"$ckpt/model.bin"*"channels 64"*"channels 128"* ]]
	[ "$(md5sum $ckpt/*)" = "$before" ]
}

# This test machine has no GPU (on a GPU machine both tests are skipped;
# t/gpu covers GPU runs there).
no_gpu_here() {
	if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
		skip "a GPU is visible here"
	fi
}

@test "run.device cuda without a GPU: exit 3 naming the host and the cause" {
	no_gpu_here
	run "$STORK" run tiny.yaml --set run.device=cuda --set run.name=cuda
	[ "$status" -eq 3 ]
	if [ ! -e /proc/driver/nvidia/version ]; then
		# no driver: refused by the launcher, before any run directory
		[[ "$output" == *"run.device: cuda"*"$(hostname) has no NVIDIA driver"* ]]
		[ ! -e runs ]
	else
		# a driver but no usable GPU: storkd's rank says why
		[[ "$output" == *"run.device: cuda: rank 0 on $(hostname)"*"no CUDA device"* ]]
		grep -q '"reason": "config_error"' runs/cuda__job=local__task=0*/exit_info.json
	fi
	[[ "$output" != *"insufficient"* ]]
}

@test "run.device auto without a GPU trains on the CPU and says why" {
	no_gpu_here
	run "$STORK" run tiny.yaml --set run.device=auto --set train.steps=2 --set run.name=auto
	[ "$status" -eq 0 ]
	[[ "$output" == *"device: cpu (run.device: auto, and "*" CUDA "*")"* ]]
	grep -q "device: cpu (run.device: auto" runs/auto__job=local__task=0*/logs/rank-000.log
}

@test "a job given GPUs that trains on the CPU says so loudly, with why no GPU was usable" {
	no_gpu_here
	run env SLURM_JOB_GPUS=0,1 "$STORK" run tiny.yaml --set train.steps=2
	[ "$status" -eq 0 ]
	[[ "$output" == *"WARNING: $(hostname) was given GPUs (SLURM_JOB_GPUS=0,1) but trains on its CPUs: "*"billed for GPUs it does not use"* ]]
	grep -q 'WARNING: given GPUs (0,1) but training on the CPU' runs/tiny__job=local__task=0/logs/rank-000.log
	# without GPUs given, no such word
	run "$STORK" run tiny.yaml --set train.steps=4
	[[ "$output" != *"was given GPUs"* ]]
}

@test "a malformed number in the environment: exit 3 naming the variable and its value" {
	run env SLURM_RESTART_COUNT=1x "$STORK" run tiny.yaml
	[ "$status" -eq 3 ]
	[[ "$output" == *"SLURM_RESTART_COUNT=1x: not an integer from 0 to"* ]]
	run env STORK_STOP_AT_STEP=seven "$STORK" run tiny.yaml
	[ "$status" -eq 3 ]
	[[ "$output" == *"STORK_STOP_AT_STEP=seven: not an integer"* ]]
	[ ! -e runs/tiny__job=local__task=0/checkpoints/latest ]
}

@test "run directories: another user's in a shared runs directory is refused naming its owner, nothing in it read; a link for logs/ or checkpoints/ is refused; checkpoints and config are this user's alone, or readable by the group with run.shared" {
	[ "$(id -u)" -eq 0 ] || skip "needs root, to act as a second user"
	id stork-attacker >/dev/null 2>&1 ||
		useradd --system --no-create-home --shell /usr/sbin/nologin stork-attacker
	# a project's runs directory anyone in the group (here: anyone) may write
	mkdir -m 777 runs
	runuser -u stork-attacker -- test -w runs || skip "another user cannot reach $PWD"
	# the other user plants the next run's directory, with a config of theirs
	runuser -u stork-attacker -- mkdir -m 777 runs/next__job=local__task=0
	runuser -u stork-attacker -- mkdir -m 777 runs/next__job=local__task=0/config
	# shellcheck disable=SC2016 # expanded by the other user's shell
	runuser -u stork-attacker -- sh -c 'printf "program:\n  command: [touch, %s/owned]\n" "$PWD" \
		>runs/next__job=local__task=0/config/stork.yaml'
	run "$STORK" run tiny.yaml --set run.name=next
	echo "$output"
	[ "$status" -eq 3 ]
	[[ "$output" == *"the run directory $PWD/runs/next__job=local__task=0 belongs to stork-attacker (uid $(id -u stork-attacker)), not to this user: refused"* ]]
	[ ! -e owned ]
	run find runs/next__job=local__task=0 -user root
	[ -z "$output" ]
	# our own run directory, group-writable: refused as well
	mkdir -m 775 runs/open__job=local__task=0
	run "$STORK" run tiny.yaml --set run.name=open
	[ "$status" -eq 3 ]
	[[ "$output" == *"the run directory $PWD/runs/open__job=local__task=0 may be written by its group (mode 0775): refused"* ]]
	# a link in place of logs/ or checkpoints/
	for sub in logs checkpoints; do
		mkdir -p "elsewhere-$sub" "runs/link-$sub""__job=local__task=0"
		ln -s "$PWD/elsewhere-$sub" "runs/link-$sub""__job=local__task=0/$sub"
		run "$STORK" run tiny.yaml --set run.name="link-$sub"
		[ "$status" -eq 3 ]
		[[ "$output" == *"runs/link-$sub""__job=local__task=0/$sub: not a directory (a link?): refused"* ]]
		[ -z "$(ls -A "elsewhere-$sub")" ]
	done
	# a fresh run: its checkpoints and configuration are closed to another user
	run "$STORK" run tiny.yaml --set run.name=fresh --set checkpoint.every=5 --set train.steps=5
	[ "$status" -eq 0 ]
	dir=runs/fresh__job=local__task=0
	[ "$(stat -c %a "$dir/checkpoints")" = 700 ]
	[ "$(stat -c %a "$dir/config")" = 700 ]
	[ "$(stat -c %a "$dir/config/stork.yaml")" = 600 ]
	run runuser -u stork-attacker -- cat "$dir/checkpoints/step_00000005/model.bin"
	[ "$status" -ne 0 ]
	run runuser -u stork-attacker -- ls "$dir/checkpoints"
	[ "$status" -ne 0 ]
	# run.shared: the run directory's group may read them, never write them;
	# others still may not read them
	run "$STORK" run tiny.yaml --set run.name=team --set run.shared=true --set checkpoint.every=5 \
		--set train.steps=5
	[ "$status" -eq 0 ]
	dir=runs/team__job=local__task=0
	[ "$(stat -c %a "$dir/checkpoints")" = 750 ]
	[ "$(stat -c %a "$dir/checkpoints/step_00000005")" = 750 ]
	[ "$(stat -c %a "$dir/checkpoints/step_00000005/model.bin")" = 640 ]
	[ "$(stat -c %a "$dir/config")" = 750 ]
	[ "$(stat -c %a "$dir/config/stork.yaml")" = 640 ]
	group=$(stat -c %G "$dir")
	runuser -u stork-attacker -g "$group" -- cmp -s "$dir/checkpoints/step_00000005/model.bin" \
		"$dir/checkpoints/step_00000005/model.bin"
	run runuser -u stork-attacker -g "$group" -- touch "$dir/checkpoints/planted"
	[ "$status" -ne 0 ]
	run runuser -u stork-attacker -- cat "$dir/checkpoints/step_00000005/model.bin"
	[ "$status" -ne 0 ]
	# the next launch without it closes them again
	run "$STORK" run tiny.yaml --set run.name=team --set checkpoint.every=5 --set train.steps=6
	[ "$status" -eq 0 ]
	[ "$(stat -c %a "$dir/checkpoints")" = 700 ]
	[ "$(stat -c %a "$dir/config/stork.yaml")" = 600 ]
}

@test "parameters the rank's memory cannot hold (ulimit -v): out_of_memory (exit 23) saying what and how much; stork report says what to change" {
	# 4 layers of 2048 channels: 202M parameters, 771 MiB, in 1.5 GB of address space
	small_config big.yaml big 4 2048 4 32 20
	run bash -c "ulimit -v 1500000 && exec \"\$1\" run big.yaml --local-ranks 1" sh "$STORK"
	echo "$output"
	[ "$status" -eq 23 ]
	[[ "$output" == *"stork: out_of_memory (exit 23): out of cpu memory for 202354688 parameters: 771 MiB asked"* ]]
	jq -e '.reason == "out_of_memory" and .exit_code == 23' runs/big__job=local__task=0/exit_info.json
	"$STORK" report --text runs/big__job=local__task=0 | grep '^out of memory, to fit: .*train.recompute: block or gelu'
}
