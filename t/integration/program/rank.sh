#!/bin/bash
# t/integration/program/rank.sh - a program in shell under the contract of
# `stork run -- PROGRAM` (stork(1), RUNNING YOUR OWN PROGRAM), for the tests
# and as an example for programs that are not Python.
#
# It prints where it runs (one line on stdout, one on stderr), then runs a
# loop of steps: each sleeps, beats the heartbeat and appends a train_loss
# metric. On the stop signal ($STORK_PREEMPT_SIGNAL, USR1 by default) it
# finishes the step, saves it in $STORK_CHECKPOINT_DIR/rank-RANK.step and
# exits $STORK_CHECKPOINTED_EXIT (10); a start that finds that file goes on
# after the step it holds, and one that finds none there but one in
# $STORK_RESUME_FROM (run.resume_from) starts after that one's step.
#
# Options (or the variables in brackets):
#   --steps N       steps to run (RANK_SH_STEPS, default 10)
#   --sleep S       seconds each step takes (RANK_SH_SLEEP, default 0.1)
#   --fail-rank R   rank R exits at step 2, on the first start only
#                   (RANK_SH_FAIL_RANK)
#   --exit-code C   the code it exits with (RANK_SH_EXIT_CODE, default 1)
set -u

steps=${RANK_SH_STEPS:-10}
sleep_s=${RANK_SH_SLEEP:-0.1}
fail_rank=${RANK_SH_FAIL_RANK:--1}
exit_code=${RANK_SH_EXIT_CODE:-1}
while (($#)); do
	(($# >= 2)) || { echo "rank.sh: $1 needs a value" >&2; exit 2; }
	case $1 in
	--steps) steps=$2 ;;
	--sleep) sleep_s=$2 ;;
	--fail-rank) fail_rank=$2 ;;
	--exit-code) exit_code=$2 ;;
	*) echo "rank.sh: unknown option '$1' (--steps, --sleep, --fail-rank, --exit-code)" >&2; exit 2 ;;
	esac
	shift 2
done

rank=${RANK:-0}
restart=${STORK_RESTART_COUNT:-${TORCHELASTIC_RESTART_COUNT:-0}}
ckpt_dir=${STORK_CHECKPOINT_DIR:-checkpoints}
state=$ckpt_dir/rank-$rank.step

echo "rank $rank of ${WORLD_SIZE:-1} local ${LOCAL_RANK:-0} node ${NODE_RANK:-0}" \
	"master ${MASTER_ADDR:-}:${MASTER_PORT:-} restart $restart"
echo "rank $rank: pid $$ on ${HOSTNAME:-?}, stderr" >&2

# The handler only sets a flag, which the step boundary acts on, and then
# ignores the signal: it may come twice (from Stork and from Slurm), and
# the commands the save runs (mkdir, mv: started after the first one,
# they inherit the ignoring) must not die of the second.
stop=0
sig=${STORK_PREEMPT_SIGNAL:-USR1}
trap 'stop=1; trap "" "$sig"' "$sig"

# metric STEP NAME VALUE: one compact JSON line, as storkd writes them.
metric() {
	[[ -n "${STORK_METRICS_FILE:-}" ]] || return 0
	printf '{"ts":%s,"job_id":"%s","rank":%d,"host":"%s","step":%d,"metric":"%s","value":%s,"unit":""}\n' \
		"${EPOCHREALTIME/,/.}" "${SLURM_JOB_ID:-local}" "$rank" "${HOSTNAME:-}" "$1" "$2" "$3" \
		>>"$STORK_METRICS_FILE"
}

# its own checkpoint first; else, given run.resume_from, the other run's
resume=${STORK_RESUME_FROM:+$STORK_RESUME_FROM/rank-$rank.step}
start=0
if [[ -f "$state" ]]; then
	start=$(($(<"$state") + 1))
	echo "rank $rank: resuming after step $((start - 1))"
elif [[ -n "$resume" && -f "$resume" ]]; then
	start=$(($(<"$resume") + 1))
	echo "rank $rank: starting after step $((start - 1)) of $STORK_RESUME_FROM (run.resume_from)"
fi
for ((step = start; step < steps; step++)); do
	if ((rank == fail_rank && step == 2 && restart == 0)); then
		echo "rank $rank: failing at step $step with exit code $exit_code" >&2
		exit "$exit_code"
	fi
	# sleep in the background: wait returns as soon as the signal arrives,
	# where a foreground sleep would hold the trap until it ends
	sleep "$sleep_s" &
	wait $! || kill $! 2>/dev/null
	[[ -z "${STORK_HEARTBEAT_FILE:-}" ]] || touch "$STORK_HEARTBEAT_FILE"
	loss=$((10000 / (step + 1)))
	printf -v frac '%03d' $((loss % 1000)) # no subshell: a signal cannot cut it short
	metric "$step" train_loss "$((loss / 1000)).$frac"
	echo "rank $rank step $step"
	if ((stop)); then
		mkdir -p "$ckpt_dir" && echo "$step" >"$state.tmp" && mv -f "$state.tmp" "$state" || exit 1
		echo "rank $rank: saved step $step in $state"
		exit "${STORK_CHECKPOINTED_EXIT:-10}"
	fi
done
echo "rank $rank: done, $steps steps"
