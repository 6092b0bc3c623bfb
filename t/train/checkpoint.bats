#!/usr/bin/env bats
# Checkpoint files across versions of Stork, and the run directory's JSON
# read back after a run.

load helpers

setup() {
	setup_run
}

# t/data/ckpt-v1 holds a checkpoint made by an earlier Stork, before
# manifests named their hash: a 1-layer model's step 2 of a 4-step run, with
# the data shards it trained on.
@test "a checkpoint of the first manifest format (no \"hash\" field) resumes and continues the uninterrupted run bit for bit" {
	cp -r "${abs_top_srcdir:?set by make check}"/t/data/ckpt-v1/. .
	"$STORK" run tiny.yaml --set run.name=full >/dev/null
	[ "$(losses full | wc -l)" -eq 4 ]
	mkdir -p runs/old__job=local__task=0/checkpoints
	cp -r step_00000002 runs/old__job=local__task=0/checkpoints/
	ln -s step_00000002 runs/old__job=local__task=0/checkpoints/latest
	run "$STORK" run tiny.yaml --set run.name=old
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"step_00000002 has a manifest of the first format"*"verified with its older checksum"*"resumed from"*"step_00000002 at step 2"* ]]
	[ "$(losses old | wc -l)" -eq 2 ]
	diff <(losses full | tail -2) <(losses old)
	# A checkpoint written now names its hash, and resumes without the notice.
	grep -q '"hash": "xxh3-64"' runs/old__job=local__task=0/checkpoints/step_00000004/manifest.json
	run "$STORK" run tiny.yaml --set run.name=old --set train.steps=5
	[ "$status" -eq 0 ]
	[[ "$output" == *"resumed from"*"step_00000004 at step 4"* ]]
	[[ "$output" != *"first format"* ]]
}

@test "the first format's checksum still catches a changed byte" {
	cp -r "${abs_top_srcdir:?set by make check}"/t/data/ckpt-v1/. .
	mkdir -p runs/old__job=local__task=0/checkpoints
	cp -r step_00000002 runs/old__job=local__task=0/checkpoints/
	ln -s step_00000002 runs/old__job=local__task=0/checkpoints/latest
	chmod u+w runs/old__job=local__task=0/checkpoints/step_00000002/model.bin
	printf '\x01' | dd of=runs/old__job=local__task=0/checkpoints/step_00000002/model.bin bs=1 seek=5000 conv=notrunc status=none
	run "$STORK" run tiny.yaml --set run.name=old
	echo "$output"
	[[ "$output" == *"step_00000002 is not usable"*"model.bin: checksum"*"the manifest says 5ba6836b41bbc447"* ]]
	[[ "$output" != *"resumed from"* ]]
}

@test "a manifest naming an unknown hash is refused with its name" {
	"$STORK" run tiny.yaml --set run.name=a --set train.steps=4 --set checkpoint.every=2 >/dev/null
	sed -i 's/"xxh3-64"/"sha3-512"/' runs/a__job=local__task=0/checkpoints/step_00000004/manifest.json
	run "$STORK" run tiny.yaml --set run.name=a --set train.steps=6 --set checkpoint.every=2
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"step_00000004 is not usable"*'checksums of an unknown kind ("hash": sha3-512)'*"resuming from the older checkpoint"*"step_00000002"* ]]
}

@test "every JSON file a 2-rank run leaves holds the fields stork(1) documents" {
	"$STORK" run tiny.yaml --set run.name=a --set checkpoint.every=5 --local-ranks 2 >/dev/null
	run check_run_json runs/a__job=local__task=0
	echo "$output"
	[ "$status" -eq 0 ]
	# exit_info.json, node-000 and its attempt's file, slurm_env.json, three
	# provenance files, manifest and state of the 3 checkpoints kept.
	[ "${lines[-1]}" -eq 13 ]
	# A field gone is caught.
	sed -i 's/"rank_base"/"base"/' runs/a__job=local__task=0/config/slurm_env.json
	run check_run_json runs/a__job=local__task=0
	[ "$status" -ne 0 ]
	[[ "$output" == *"slurm_env.json lacks documented fields"* ]]
}

@test "a resume with a new train.batch_size says what changed in one block and keeps it; each launch's configuration is kept" {
	"$STORK" run tiny.yaml --set train.steps=4 >/dev/null
	run "$STORK" run tiny.yaml --set train.steps=8 --set train.batch_size=8
	[ "$status" -eq 0 ]
	[[ "$output" == *"resume: changed since "*"step_00000004 (step 4):"* ]]
	[[ "$output" == *"train.batch_size: 4 -> 8"* ]]
	[[ "$output" == *"train.steps: 4 -> 8"* ]]
	[[ "$output" != *"elastic"* ]]
	dir=runs/tiny__job=local__task=0
	grep -q '"batch_size": 8' $dir/checkpoints/step_00000008/state.json
	grep -q '"grad_accum": 1' $dir/checkpoints/step_00000008/state.json
	grep -q 'batch_size: 4' $dir/config/stork.1.yaml
	grep -q 'batch_size: 8' $dir/config/stork.2.yaml
	cmp $dir/config/stork.2.yaml $dir/config/stork.yaml
	# a key the block has no line for: the configuration's hash says it
	run "$STORK" run tiny.yaml --set train.steps=12 --set train.batch_size=8 --set train.weight_decay=0.05
	[ "$status" -eq 0 ]
	[[ "$output" == *"resume: changed since "*"step_00000008 (step 8):"*"other settings (the configuration's hash differs"* ]]
	# the same configuration again: nothing to say
	run "$STORK" run tiny.yaml --set train.steps=16 --set train.batch_size=8 --set train.weight_decay=0.05
	[[ "$output" == *"train.steps: 12 -> 16"* ]]
	[[ "$output" != *"other settings"* ]]
}

@test "train.steps at or below the resumed checkpoint's step is refused naming both" {
	"$STORK" run tiny.yaml --set train.steps=4 >/dev/null
	run "$STORK" run tiny.yaml --set run.name=again --set train.steps=3 \
		--set run.resume_from=runs/tiny__job=local__task=0
	[ "$status" -eq 3 ]
	[[ "$output" == *"train.steps = 3"*"not above the step of the checkpoint it resumes, 4"* ]]
	run "$STORK" run tiny.yaml --set train.steps=4
	[ "$status" -eq 3 ]
	[[ "$output" == *"set train.steps above 4"* ]]
}
