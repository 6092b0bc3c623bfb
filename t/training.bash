# shellcheck shell=bash
# t/training.bash - helpers shared by the test files that train a model:
# data made from the project's own documentation, a small configuration,
# and the losses a run logged.

# docs_data: data/docs_{train,val}.bin in the current directory.
docs_data() {
	mkdir -p data
	cat "${abs_top_srcdir:?set by make check}"/README.md "$abs_top_srcdir"/man/*.[0-9] >text.txt
	"${abs_top_builddir:?set by make check}/launcher/stork" prep --out data --name docs text.txt >/dev/null
}

# small_config FILE NAME LAYERS CHANNELS BATCH SEQ STEPS: a byte-level GPT-2
# with validation every 10th of the run.
small_config() {
	cat >"$1" <<-YAML
	run:
	  name: $2
	  dir: runs
	model:
	  layers: $3
	  heads: 4
	  channels: $4
	  max_seq_len: 64
	  vocab_size: 257
	  seed: 1337
	data:
	  train: ["data/docs_train.bin"]
	  val: ["data/docs_val.bin"]
	train:
	  batch_size: $5
	  seq_len: $6
	  steps: $7
	  lr: 1.0e-3
	  warmup_steps: 2
	  min_lr: 1.0e-4
	  val_every: $(($7 / 2 > 0 ? $7 / 2 : 1))
	  val_batches: 2
	checkpoint:
	  every: 0
	  keep: 3
	YAML
}

# run_losses DIR [RANK]: "step value" of a run directory's train_loss, the
# last value logged for each step (a resumed run may log a step twice only
# if it was interrupted without a checkpoint).
run_losses() {
	grep -h '"metric":"train_loss"' "$1"/logs/rank-"${2:-000}".metrics.jsonl |
		sed 's/.*"step":\([0-9]*\).*"value":\([^,}]*\).*/\1 \2/' |
		awk '{ v[$1] = $2 } END { for (s in v) print s, v[s] }' | sort -n
}

# run_dir NAME JOBID: the run directory of a job's run, under $WORK.
run_dir() { echo "$WORK/runs/$1__job=$2__task=0"; }

# wait_step DIR STEP SECONDS: until rank 0 of the run has logged that step.
wait_step() {
	local deadline=$((SECONDS + $3))
	while ((SECONDS < deadline)); do
		[ "$(run_losses "$1" 2>/dev/null | tail -1 | cut -d' ' -f1)" -ge "$2" ] 2>/dev/null && return 0
		sleep 0.5
	done
	echo "no step $2 in $1 after $3 s" >&2
	return 1
}
