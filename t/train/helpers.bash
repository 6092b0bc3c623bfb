# shellcheck shell=bash
# t/train/helpers.bash - local training runs (no Slurm) for the engine tests.

load ../training

# shellcheck disable=SC2034 # used by the .bats files that load this file
STORK=${abs_top_builddir:?set by make check}/launcher/stork

setup_run() {
	WORK=$abs_top_builddir/t/train/work/${BATS_TEST_FILENAME##*/}.$BATS_TEST_NUMBER
	rm -rf "$WORK"
	mkdir -p "$WORK"
	cd "$WORK" || return 1
	docs_data
	small_config tiny.yaml tiny 2 64 4 32 20
}

# losses RUN_NAME [RANK]: "step value" per line from the rank's metrics.
losses() {
	run_losses runs/"$1"__job=local__task=0 "${2:-000}"
}
