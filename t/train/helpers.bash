# t/train/helpers.bash - local training runs (no Slurm) for the engine tests.

STORK=$abs_top_builddir/launcher/stork

setup_run() {
	WORK=$abs_top_builddir/t/train/work/${BATS_TEST_FILENAME##*/}.$BATS_TEST_NUMBER
	rm -rf "$WORK"
	mkdir -p "$WORK/data"
	cd "$WORK" || return 1
	# Training text the project ships: its own documentation.
	cat "$abs_top_srcdir"/README.md "$abs_top_srcdir"/man/*.[0-9] >text.txt
	"$STORK" prep --out data --name docs text.txt >/dev/null
	cat >tiny.yaml <<-'YAML'
	run:
	  name: tiny
	  dir: runs
	model:
	  layers: 2
	  heads: 4
	  channels: 64
	  max_seq_len: 64
	  vocab_size: 257
	  seed: 1337
	data:
	  train: ["data/docs_train.bin"]
	  val: ["data/docs_val.bin"]
	train:
	  batch_size: 4
	  seq_len: 32
	  steps: 20
	  lr: 1.0e-3
	  warmup_steps: 2
	  min_lr: 1.0e-4
	  val_every: 10
	  val_batches: 2
	checkpoint:
	  every: 0
	  keep: 2
	YAML
}

# losses RUN_NAME [RANK]: "step value" per line from the rank's metrics.
losses() {
	grep '"metric":"train_loss"' runs/"$1"__job=local__task=0/logs/rank-"${2:-000}".metrics.jsonl |
		sed 's/.*"step":\([0-9]*\).*"value":\([^,}]*\).*/\1 \2/'
}
