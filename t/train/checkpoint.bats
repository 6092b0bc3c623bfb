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

@test "a resume with a new train.batch_size says what changed in one block and keeps it, any other key named with both values; each launch's configuration is kept" {
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
	# any other key: named with both values, from the launch that wrote the checkpoint
	run "$STORK" run tiny.yaml --set train.steps=12 --set train.batch_size=8 --set train.weight_decay=0.05
	[ "$status" -eq 0 ]
	echo "$output"
	[[ "$output" == *"resume: changed since "*"step_00000008 (step 8):"*"train.weight_decay: 0.1 -> 0.05"* ]]
	[[ "$output" != *"other settings"* ]]
	# without the launches' files, the configuration's hash still says it
	rm $dir/config/stork.[0-9]*.yaml
	run "$STORK" run tiny.yaml --set train.steps=14 --set train.batch_size=8 --set train.weight_decay=0.01
	[[ "$output" == *"resume: changed since "*"step_00000012 (step 12):"*"other settings (the configuration's hash differs"* ]]
	# the same configuration again: nothing to say
	run "$STORK" run tiny.yaml --set train.steps=16 --set train.batch_size=8 --set train.weight_decay=0.01
	[[ "$output" == *"train.steps: 14 -> 16"* ]]
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

# same_checkpoints A B: runs A and B committed the same steps, and each
# checkpoint's model, optimizer and shard files are byte for byte the same.
same_checkpoints() {
	local a=runs/$1__job=local__task=0/checkpoints b=runs/$2__job=local__task=0/checkpoints f n=0
	diff <(cd "$a" && ls -d step_*) <(cd "$b" && ls -d step_*)
	for f in "$a"/step_*/*.bin; do
		cmp "$f" "$b/${f#"$a"/}"
		n=$((n + 1))
	done
	echo "$n files the same"
	[ "$n" -gt 0 ]
}

@test "checkpoint.async: the checkpoints are byte for byte the synchronous run's, at the same steps, and so are the losses (DP2 whole model, TP2xPP2 ZeRO-1 shards)" {
	for mode in false true; do
		"$STORK" run tiny.yaml --local-ranks 2 --set run.name=dp$mode --set checkpoint.every=5 \
			--set checkpoint.keep=0 --set checkpoint.async=$mode >/dev/null
		"$STORK" run tiny.yaml --local-ranks 4 --set run.name=tpp$mode --set checkpoint.every=5 \
			--set checkpoint.keep=0 --set checkpoint.async=$mode --set parallel.tensor=2 \
			--set parallel.pipeline=2 --set parallel.zero=1 --set train.grad_accum=2 >/dev/null
	done
	same_checkpoints dpfalse dptrue
	same_checkpoints tppfalse tpptrue
	steps=(runs/tpptrue__job=local__task=0/checkpoints/step_*)
	[ "${#steps[@]}" -eq 4 ]
	diff <(losses dpfalse) <(losses dptrue)
	diff <(losses tppfalse) <(losses tpptrue)
	# written in the background, committed a step or more later; the stall is a metric
	grep -q 'checkpoint step_00000005 committed: written in the background in [0-9]* ms, training stalled [0-9.]* ms' \
		runs/tpptrue__job=local__task=0/logs/rank-003.log
	# the last step's is synchronous: the run does not end before it is committed
	grep -q 'checkpoint step_00000020 committed in [0-9]* ms' runs/tpptrue__job=local__task=0/logs/rank-003.log
	[ "$(grep -c '"metric":"checkpoint_stall_ms"' runs/dptrue__job=local__task=0/logs/rank-000.metrics.jsonl)" -eq 4 ]
	"$STORK" report runs/dptrue__job=local__task=0 -o report.html
	grep -q '<span class="checkpoint-stall">training stalled a median [0-9.]* ms per checkpoint</span>' report.html
}

# The first copy into fresh pages faults every page in, and the rank waits
# for that copy: made at the first checkpoint, the buffer stalled it longer
# than a synchronous checkpoint.
@test "checkpoint.async: the host copy is made at the rank's start, before step 1, and only on a rank with a background write ahead" {
	"$STORK" run tiny.yaml --local-ranks 2 --set run.name=pre --set checkpoint.every=5 \
		--set checkpoint.async=true >/dev/null
	log=runs/pre__job=local__task=0/logs/rank-000.log
	copy=$(grep -n 'checkpoint.async: a host copy of [0-9.]* MiB made at start$' "$log" | cut -d: -f1)
	first=$(grep -n '\] step 1 loss' "$log" | cut -d: -f1)
	[ -n "$copy" ]
	[ -n "$first" ]
	[ "$copy" -lt "$first" ]
	# data parallelism: rank 0 alone writes
	run grep -c 'host copy' runs/pre__job=local__task=0/logs/rank-001.log
	[ "$output" = 0 ]
	# no periodic checkpoint before the last step's (which is synchronous), or none at all
	for every in 20 0; do
		"$STORK" run tiny.yaml --set run.name=none$every --set checkpoint.every=$every \
			--set checkpoint.async=true >/dev/null
		run grep -c 'host copy' runs/none${every}__job=local__task=0/logs/rank-000.log
		[ "$output" = 0 ]
	done
}

@test "checkpoint.async: a stop while a write is in flight commits both in order; a write that fails in the background is skipped and training goes on" {
	fault_injection || skip "built without --enable-fault-injection"
	# every write takes 2 s: step 5's is still running at the stop after step 7
	run env STORK_FAULT_CKPT_DELAY=2 STORK_STOP_AT_STEP=7 "$STORK" run tiny.yaml --local-ranks 4 \
		--set run.name=stop --set checkpoint.every=5 --set checkpoint.async=true \
		--set checkpoint.keep=0 --set parallel.tensor=2 --set parallel.pipeline=2 --set train.grad_accum=2
	echo "$output"
	[ "$status" -eq 12 ]
	log=runs/stop__job=local__task=0/logs/rank-000.log
	grep -q 'checkpoint step_00000005: waiting for its background write' "$log"
	[ "$(grep -o 'checkpoint step_0000000[57] committed' "$log" | tr '\n' ' ')" = \
		"checkpoint step_00000005 committed checkpoint step_00000007 committed " ]
	[ "$(readlink runs/stop__job=local__task=0/checkpoints/latest)" = step_00000007 ]
	[ "$(jq .last_checkpoint.step runs/stop__job=local__task=0/exit_info.json)" -eq 7 ]
	# step 10's write fails (a full disk) on rank 0, in the background
	run env STORK_FAULT_CKPT_FAIL=10 "$STORK" run tiny.yaml --local-ranks 4 --set run.name=fail \
		--set checkpoint.every=5 --set checkpoint.async=true --set checkpoint.keep=0 \
		--set parallel.tensor=2 --set parallel.pipeline=2 --set train.grad_accum=2
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"checkpoint step_00000010 failed (1 of 3 in a row)"* ]]
	ls runs/fail__job=local__task=0/checkpoints
	[ ! -e runs/fail__job=local__task=0/checkpoints/step_00000010 ]
	[ ! -e runs/fail__job=local__task=0/checkpoints/step_00000010.tmp ]
	[ -s runs/fail__job=local__task=0/checkpoints/step_00000015/manifest.json ]
	[ "$(losses fail | wc -l)" -eq 20 ]
}

@test "checkpoint.async: kill -9 during a background write leaves latest on the previous checkpoint, and the resume continues the uninterrupted run bit for bit" {
	fault_injection || skip "built without --enable-fault-injection"
	"$STORK" run tiny.yaml --local-ranks 2 --set run.name=whole --set train.steps=40 >/dev/null
	# writes take 3 s, steps 50 ms: step 5's write is committed at step 10,
	# whose own write is then in flight until about step 70
	STORK_FAULT_CKPT_DELAY=3 STORK_FAULT_STEP_DELAY=0.05 "$STORK" run tiny.yaml --local-ranks 2 \
		--set run.name=cut --set train.steps=40 --set checkpoint.every=5 \
		--set checkpoint.async=true >cut.out 2>&1 &
	pid=$!
	dir=runs/cut__job=local__task=0
	for _ in $(seq 200); do [ -d "$dir" ] && break; sleep 0.1; done
	wait_step "$dir" 13 60 || { kill -KILL $pid; cat cut.out; false; }
	pkill -9 -f "storkd --config $PWD/$dir"
	wait $pid || true
	cat cut.out
	grep -q 'checkpoint step_00000005 committed' "$dir/logs/rank-000.log"
	if grep -q 'checkpoint step_00000010 committed' "$dir/logs/rank-000.log"; then false; fi
	[ "$(readlink "$dir/checkpoints/latest")" = step_00000005 ]
	[ ! -e "$dir/checkpoints/step_00000010" ]
	run "$STORK" run tiny.yaml --local-ranks 2 --set run.name=cut --set train.steps=40 \
		--set checkpoint.every=5 --set checkpoint.async=true
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"step_00000005 at step 5"* ]]
	# each step's last loss (the resumed attempt's, where both trained it)
	diff <(losses whole) <(losses cut | awk '{ last[$1] = $2 } END { for (s in last) print s, last[s] }' | sort -n)
}

# cut_local NAME ARGS...: a 40-step run with a node-local tier, checkpoints
# every 5 steps and every 4th of them in the run directory, killed (-9)
# between two checkpoints after step 26: the run directory's latest is
# step 20, the tier's newer.
cut_local() {
	local name=$1 dir=runs/$1__job=local__task=0 pid
	shift
	STORK_FAULT_STEP_DELAY=0.05 "$STORK" run tiny.yaml --set run.name="$name" --set train.steps=40 \
		--set checkpoint.every=5 --set checkpoint.local_dir="$PWD/local" \
		--set checkpoint.persist_every=4 "$@" >"$name.out" 2>&1 &
	pid=$!
	for _ in $(seq 200); do [ -d "$dir" ] && break; sleep 0.1; done
	wait_step "$dir" 26 60 || { kill -KILL $pid; cat "$name.out"; return 1; }
	pkill -9 -f "storkd --config $PWD/$dir"
	wait $pid || true
	[ "$(readlink "$dir/checkpoints/latest")" = step_00000020 ]
}

@test "checkpoint.local_dir: every checkpoint on the node's own tier, every persist_every-th in the run directory; a resume prefers the newer local one and continues bit for bit; another layout, or a tier gone, resumes from the run directory" {
	fault_injection || skip "built without --enable-fault-injection"
	for layout in "--local-ranks 2" "--local-ranks 2 --set parallel.tensor=2"; do
		rm -rf runs local
		# shellcheck disable=SC2086
		"$STORK" run tiny.yaml $layout --set run.name=whole --set train.steps=40 >/dev/null
		# shellcheck disable=SC2086
		cut_local cut $layout
		tier=$(ls -d local/stork-checkpoints.local.*)
		[ "$(stat -c %a "$tier")" = 700 ]
		newest=$(readlink "$tier/latest")
		[[ "$newest" > step_00000020 ]]
		# shellcheck disable=SC2086
		run "$STORK" run tiny.yaml $layout --set run.name=cut --set train.steps=40 \
			--set checkpoint.every=5 --set checkpoint.local_dir="$PWD/local" \
			--set checkpoint.persist_every=4
		echo "$output"
		[ "$status" -eq 0 ]
		[[ "$output" == *"checkpoint.local_dir: resuming from the node-local tier's step ${newest#step_000000}, newer than the run directory's step 20"* ]]
		diff <(losses whole) <(losses cut | awk '{ last[$1] = $2 } END { for (s in last) print s, last[s] }' | sort -n)
	done
	# the same cut, then resumed on another layout: the run directory's step 20
	rm -rf runs local
	cut_local moved --local-ranks 2 --set parallel.tensor=2
	run "$STORK" run tiny.yaml --local-ranks 2 --set run.name=moved --set train.steps=40 \
		--set checkpoint.local_dir="$PWD/local"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"checkpoint.local_dir: the run directory's checkpoint is the one to resume from (the node-local tiers hold none complete on every node)"* ]]
	[[ "$output" == *"resumed from $PWD/runs/moved__job=local__task=0/checkpoints/step_00000020 at step 20"* ]]
	grep -q 'is of another layout or of other ranks on this node: not used' runs/moved__job=local__task=0/logs/rank-000.log
	# and with the node's tier gone (a node lost)
	rm -rf runs local
	cut_local gone --local-ranks 2
	rm -rf local
	run "$STORK" run tiny.yaml --local-ranks 2 --set run.name=gone --set train.steps=40 \
		--set checkpoint.local_dir="$PWD/local"
	[ "$status" -eq 0 ]
	[[ "$output" == *"resumed from $PWD/runs/gone__job=local__task=0/checkpoints/step_00000020 at step 20"* ]]
}

@test "checkpoint.local_dir must be auto or an absolute path; another user's directory in /tmp-like space is refused" {
	run "$STORK" run tiny.yaml --set checkpoint.local_dir=relative/dir
	[ "$status" -eq 3 ]
	[[ "$output" == *"checkpoint.local_dir: 'relative/dir' is neither auto nor an absolute path"* ]]
	[ "$(id -u)" -eq 0 ] || skip "needs root, to act as a second user"
	id stork-other >/dev/null 2>&1 || useradd --system --no-create-home stork-other
	mkdir -m 1777 "$WORK/shared"
	runuser -u stork-other -- mkdir -m 777 "$WORK/shared/ckpt"
	run "$STORK" run tiny.yaml --set run.name=theirs --set checkpoint.local_dir="$WORK/shared/ckpt"
	echo "$output"
	[ "$status" -eq 3 ]
	[[ "$output" == *"node-local checkpoint directory $WORK/shared/ckpt/stork-checkpoints."*": $WORK/shared/ckpt, in a directory anyone may write, is another user's: refused; choose another checkpoint.local_dir"* ]]
	run grep -s -l train_loss runs/theirs__job=local__task=0/logs/rank-000.metrics.jsonl
	[ -z "$output" ]
}

# poke_ints FILE OFFSET VALUE...: little-endian int32s written at OFFSET, as
# anyone who edits a file can.
poke_ints() {
	python3 - "$@" <<-'PY'
	import struct, sys
	path, off, values = sys.argv[1], int(sys.argv[2]), [int(v) for v in sys.argv[3:]]
	with open(path, "r+b") as f:
	    f.seek(off)
	    f.write(struct.pack("<%di" % len(values), *values))
	PY
}

# The model's llm.c header in model.bin (int 5: heads, 6: channels) and in
# a shard's header (struct shard_header: the model's ints from byte 56).
MODEL_HEADS=20
SHARD_HEADS=$((56 + 20))

@test "a crafted checkpoint whose manifest agrees with it (the shape at the wrap point, the sums made again): stork export and a resume refuse it naming the file and the field" {
	resum=${abs_top_builddir:?}/t/tools/ckpt_resum
	# a whole checkpoint (model.bin) and a sharded one (TP2: shard-0000N.bin)
	"$STORK" run tiny.yaml --set run.name=whole --set train.steps=4 --set checkpoint.every=2 >/dev/null
	"$STORK" run tiny.yaml --local-ranks 2 --set parallel.tensor=2 --set run.name=shard \
		--set train.steps=4 --set checkpoint.every=2 >/dev/null
	for run in whole shard; do
		dir=$PWD/runs/${run}__job=local__task=0/checkpoints/step_00000004
		file=$dir/model.bin off=$MODEL_HEADS
		[ "$run" = whole ] || file=$dir/shard-00000.bin off=$SHARD_HEADS
		# one head of 2^30 channels: 3*C*C floats wrap a 64-bit size
		poke_ints "$file" "$off" 1 $((1 << 30))
		"$resum" "$dir"
		run "$STORK" export "$dir" m.bin
		echo "$output"
		[ "$status" -eq 5 ]
		[[ "$output" == *"$file: bad header: model channels is 1073741824: more than the 65536 any model may have"* ]]
		[ ! -e m.bin ]
		layout=()
		[ "$run" = whole ] || layout=(--local-ranks 2 --set parallel.tensor=2)
		run "$STORK" run tiny.yaml "${layout[@]}" --set run.name=$run --set train.steps=6
		echo "$output"
		[ "$status" -eq 5 ]
		[[ "$output" == *"config_error (exit 5): $file: bad header: model channels is 1073741824: more than the 65536 any model may have"* ]]
	done
}

@test "a crafted llm.c model file and a crafted config.json for model.init_from: refused naming the file and the field, before any size is computed from them" {
	"$STORK" run tiny.yaml --set run.name=a --set train.steps=2 >/dev/null
	"$STORK" export runs/a__job=local__task=0 m.bin
	"$STORK" export --format safetensors runs/a__job=local__task=0 hf
	# the configuration without the shape, which comes from the file
	sed '/^model:/,/^data:/{/^model:/!{/^data:/!d}}' tiny.yaml >init.yaml
	# a vocabulary near 2^31: the padded vocabulary times the channels wraps
	poke_ints m.bin 12 $((0x7fffff00))
	poke_ints m.bin 28 $((0x7fffff80))
	run "$STORK" run init.yaml --set run.name=m --set model.init_from="$PWD/m.bin"
	echo "$output"
	[ "$status" -eq 4 ]
	[[ "$output" == *"$PWD/m.bin: bad header: model vocab_size is 2147483392: more than the 2097152 any model may have"* ]]
	mkdir bad
	cp hf/model.safetensors bad/
	for edit in ".vocab_size = 2147483647:vocab_size is 2147483647: more than the 2097152" \
		".n_layer = 2147483647:n_layer is 2147483647: more than the 1024" \
		".n_positions = 1073741824:n_positions is 1073741824: more than the 1048576"; do
		jq "${edit%%:*}" hf/config.json >bad/config.json
		run "$STORK" run init.yaml --set run.name=h --set model.init_from="$PWD/bad"
		echo "$output"
		[ "$status" -eq 4 ]
		[[ "$output" == *"$PWD/bad/config.json: ${edit#*:} any model may have"* ]]
	done
}

# checkpoints RUN_NAME: the names in a local run's checkpoints/, sorted, on one line.
checkpoints() {
	find runs/"$1"__job=local__task=0/checkpoints -mindepth 1 -maxdepth 1 -printf '%f\n' |
		sort | tr '\n' ' ' | sed 's/ $//'
}

@test "checkpoint.keep_every keeps its milestones beside the newest keep; checkpoint.every_minutes checkpoints by wall time; checkpoint.every: auto prints Young's interval and its inputs; conflicting keys are refused" {
	fault_injection || skip "needs a build with --enable-fault-injection (STORK_FAULT_STEP_DELAY)"
	run "$STORK" run tiny.yaml --set run.name=ke --set train.steps=12 --set checkpoint.every=2 \
		--set checkpoint.keep=1 --set checkpoint.keep_every=5
	[ "$status" -eq 0 ]
	[[ "$output" == *"checkpoint.keep_every: a milestone every 5 steps, kept beside the newest 1"* ]]
	[ "$(checkpoints ke)" = "latest step_00000005 step_00000010 step_00000012" ]

	# 0.6 s of wall time between checkpoints, steps of at least 0.2 s
	STORK_FAULT_STEP_DELAY=0.2 run "$STORK" run tiny.yaml --set run.name=em --set train.steps=20 \
		--set checkpoint.every_minutes=0.01 --set checkpoint.keep=0
	[ "$status" -eq 0 ]
	[[ "$output" == *"checkpoint.every_minutes: a checkpoint every 0.01 min of wall time"* ]]
	periodic=$(checkpoints em | wc -w)
	periodic=$((periodic - 2)) # latest and the last step's
	echo "periodic checkpoints by wall time: $periodic" >&3
	[ "$periodic" -ge 3 ]

	STORK_FAULT_STEP_DELAY=0.2 run "$STORK" run tiny.yaml --set run.name=au --set train.steps=20 \
		--set checkpoint.every=auto --set checkpoint.mtbf_hours=0.001 --set checkpoint.keep=0
	[ "$status" -eq 0 ]
	echo "$output" | grep -Eq "^checkpoint.every auto: a checkpoint every [0-9.]+ s of wall time \(Young's interval sqrt\(2 x commit time x MTBF\): commit time [0-9.]+ s, estimated for 0\.[0-9]M parameters until one is timed; checkpoint.mtbf_hours 0.001\)$"
	[ "$(checkpoints au | wc -w)" -ge 5 ] # 3 periodic, the last step's and latest
	grep -q '^  every: auto  #' runs/au__job=local__task=0/config/stork.yaml

	run "$STORK" run tiny.yaml --set checkpoint.every=auto --set checkpoint.every_minutes=5
	[ "$status" -eq 3 ]
	[[ "$output" == *"checkpoint.every_minutes: 5, and checkpoint.every is auto"*"set one of them"* ]]
	run "$STORK" run tiny.yaml --set checkpoint.mtbf_hours=12
	[ "$status" -eq 3 ]
	[[ "$output" == *"checkpoint.mtbf_hours is read only with checkpoint.every: auto (it is 0"* ]]
}
