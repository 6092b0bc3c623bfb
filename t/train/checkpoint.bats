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
	cp -r "$abs_top_srcdir"/t/data/ckpt-v1/. .
	"$STORK" run tiny.yaml --set run.name=full >/dev/null
	[ "$(losses full | wc -l)" -eq 4 ]
	mkdir -p runs/old__job=local__task=0/checkpoints
	cp -r step_00000002 runs/old__job=local__task=0/checkpoints/
	ln -s step_00000002 runs/old__job=local__task=0/checkpoints/latest
	run "$STORK" run tiny.yaml --set run.name=old
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"resumed from"*"step_00000002 at step 2"* ]]
	[ "$(losses old | wc -l)" -eq 2 ]
	diff <(losses full | tail -2) <(losses old)
}
