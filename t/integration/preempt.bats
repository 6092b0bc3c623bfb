#!/usr/bin/env bats
# Preemption on the real cluster: USR1 -> checkpoint -> requeue -> exact
# resume, and exit_info.json (issue "Preemption that loses nothing").

load helpers
load ../training

STORK=${abs_top_builddir:?set by make check}/launcher/stork

setup() {
	setup_workdir
	docs_data
	small_config run.yaml pre 4 128 8 64 150
	sed -i 's/every: 0/every: 50/' run.yaml
}

# A test that failed may leave its job queued or running: end it for good
# (requeue=0 first, so that nothing brings it back).
teardown() {
	cancel_test_job
}

# job_script NAME [SBATCH-LINES...]: a one-launcher, two-rank training job.
job_script() {
	local name=$1
	shift
	{
		echo '#!/bin/bash'
		echo "#SBATCH -N1 -n1 -c2 --open-mode=append -o $name.out -J $name"
		for l in "$@"; do echo "#SBATCH $l"; done
		echo "srun $STORK run run.yaml --local-ranks 2 --set run.name=$name"
	} >"$name.sh"
}

losses() { run_losses "$1"; }

# reference [STEPS]: the uninterrupted run of run.yaml (STEPS: 150) in $REF.
reference() {
	job_script ref
	run sbatch_wait ref.sh
	[ "$status" -eq 0 ]
	REF=$(ls -d "$WORK"/runs/ref__job=*__task=0)
	[ "$(losses "$REF" | wc -l)" -eq "${1:-150}" ]
}

@test "scancel --signal=USR1 mid-run: requeued, resumed, completed, losses bit-identical; the web hook hears started, preempted, started, completed; TensorBoard's files hold every loss" {
	reference
	job_script pre --requeue
	start_webhook hook.log
	job=$(STORK_NOTIFY_URL=$HOOK_URL submit pre.sh)
	dir=$(run_dir pre "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 20 120
	t0=$SECONDS
	scancel --signal=USR1 "$job"
	wait_job_state "$job" 'PENDING|REQUEUED|RUNNING' 30
	wait_job_state "$job" COMPLETED 300
	echo "signal to completion of the requeued job: $((SECONDS - t0)) s" >&3
	[ "$(job_field "$job" Restarts)" = 1 ]
	grep -q '"reason": "completed"' "$dir/exit_info.json"
	grep -q '"restart_count": 1' "$dir/exit_info.json"
	grep -q '"reason": "preempted_requeued"' "$dir/exit_info.node-000.requeue-0.json"
	grep -q '=== requeue 1 (job '"$job"') ===' "$dir/logs/rank-000.log"
	grep -q '=== requeue 1' "$dir/logs/rank-001.log"
	diff <(losses "$REF") <(losses "$dir")
	# TensorBoard's files: one per attempt for each rank, every loss
	tensorboard_check "$dir" 2 | tee tb.txt
	grep -q '^rank 0: exit: completed (exit 0)' tb.txt
	# accounting (slurmdbd): the job ran twice, REQUEUED then COMPLETED,
	# and the run's sacct.csv holds its row with what it was given
	wait_sacct_states "$job" "REQUEUED COMPLETED" 30
	grep -Eq "^$job\|RUNNING\|[^|]*\|[^|]*\|[^|]*\|[^|]*cpu=2,[^|]*node=1\|" "$dir/metrics/sacct.csv"
	# notifications (STORK_NOTIFY_URL through sbatch's environment)
	kill "$HOOK_PID"
	check_events hook.log started preempted started completed
	[ "$(jq -r 'select(.event == "preempted") | .reason' hook.log)" = preempted_requeued ]
	[ "$(jq -r 'select(.event == "preempted") | .step' hook.log)" = "$(jq -r 'select(.event == "started") | .step' hook.log | tail -1)" ]
	[ "$(jq -r .job hook.log | sort -u)" = "$job" ]
	[ "$(jq -r .requeue hook.log | tr '\n' ' ')" = "0 0 1 1 " ]
	[ "$(jq -r 'select(.event == "completed") | .step' hook.log)" = 150 ]
	# the hook's secret (path and query) is nowhere in the run's files
	run grep -rl 'secret-token' "$dir" pre.out
	[ "$status" -eq 1 ]
	nodes_idle
}

@test "preempted by a job of a higher partition (PreemptMode=REQUEUE: Slurm requeues the job, then sends the same TERM as scancel): preempted_requeued, resumed bit for bit" {
	reference
	job_script prm --requeue
	job=$(submit prm.sh)
	dir=$(run_dir prm "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 20 120
	# a job of partition urgent wants the whole node: Slurm preempts ours,
	# requeues it itself and sends TERM
	urgent=$(submit -p urgent -w "$(job_field "$job" NodeList)" --exclusive -o urgent.out --wrap 'sleep 2')
	wait_job_state "$urgent" COMPLETED 120
	wait_job_state "$job" COMPLETED 300
	[ "$(job_field "$job" Restarts)" = 1 ]
	grep -q '"reason": "preempted_requeued"' "$dir/exit_info.node-000.requeue-0.json"
	grep -q '"reason": "completed"' "$dir/exit_info.json"
	diff <(losses "$REF") <(losses "$dir")
	wait_sacct_states "$job" "PREEMPTED COMPLETED" 30
}

@test "three preemptions in a row, then the same losses as an uninterrupted run" {
	reference
	job_script three --requeue
	job=$(submit three.sh)
	dir=$(run_dir three "$job")
	for n in 1 2 3; do
		wait_job_state "$job" RUNNING 120
		wait_step "$dir" $((n * 25)) 120
		scancel --signal=USR1 "$job"
		# Wait for this attempt's requeue before signalling the next one.
		for _ in $(seq 120); do
			[ "$(job_field "$job" Restarts)" = "$n" ] && break
			sleep 1
		done
		[ "$(job_field "$job" Restarts)" = "$n" ]
	done
	wait_job_state "$job" COMPLETED 300
	grep -q '"restart_count": 3' "$dir/exit_info.json"
	grep -q '"reason": "completed"' "$dir/exit_info.json"
	for n in 0 1 2; do
		grep -q '"reason": "preempted_requeued"' "$dir/exit_info.node-000.requeue-$n.json"
	done
	diff <(losses "$REF") <(losses "$dir")
}

# Slurm sends the timed signal up to a minute before the time asked for:
# with --time=3 and USR1@100, somewhere from 20 s to 80 s after the start.
# The first attempt's steps are made 0.6 s slower (a fault switch of test
# builds), so it is still running at 120 s on any machine and the signal
# always finds it; the requeued attempt runs at full speed and completes
# within the 20 s before its own signal could come.
@test "--signal=USR1@N on a short time limit: timeout_requeued, resumed bit for bit, completed" {
	grep -q '^#define STORK_FAULT_INJECTION 1' "$abs_top_builddir/config.h" ||
		skip "built without --enable-fault-injection"
	sed -i 's/steps: 150/steps: 200/' run.yaml
	reference 200
	job_script lim --requeue --time=3 --signal=USR1@100
	# shellcheck disable=SC2016 # expanded by the job's shell, not here
	sed -i 's|^srun |[ "${SLURM_RESTART_COUNT:-0}" = 0 ] \&\& export STORK_FAULT_STEP_DELAY=0.6\nsrun |' lim.sh
	job=$(submit lim.sh)
	dir=$(run_dir lim "$job")
	wait_job_state "$job" COMPLETED 400
	grep 'stopping after step' "$dir/logs/rank-000.log" >&3
	[ "$(job_field "$job" Restarts)" = 1 ]
	grep -q '"reason": "timeout_requeued"' "$dir/exit_info.node-000.requeue-0.json"
	grep -q '"reason": "completed"' "$dir/exit_info.json"
	grep -q '"restart_count": 1' "$dir/exit_info.json"
	diff <(losses "$REF") <(losses "$dir")
}

@test "the deadline guard: no signal, the common trap template, a short time limit: checkpointed and requeued before the limit, resumed bit for bit" {
	grep -q '^#define STORK_FAULT_INJECTION 1' "$abs_top_builddir/config.h" ||
		skip "built without --enable-fault-injection"
	sed -i 's/steps: 150/steps: 200/' run.yaml
	reference 200
	# the template users copy: a trap in the batch shell, srun without exec,
	# --signal to the batch shell only (bash defers the trap until srun returns)
	# (the first attempt's steps take 0.8 s: 200 of them need more than the
	# two minutes the job gets)
	job_script dl --requeue --time=2 --signal=B:USR1@60
	# shellcheck disable=SC2016 # expanded by the job's shell, not here
	sed -i 's|^srun |trap '"'"'scontrol requeue $SLURM_JOB_ID; exit 0'"'"' USR1 TERM\n[ "${SLURM_RESTART_COUNT:-0}" = 0 ] \&\& export STORK_FAULT_STEP_DELAY=0.8\nsrun |' dl.sh
	cat dl.sh >&3
	job=$(submit dl.sh)
	dir=$(run_dir dl "$job")
	wait_job_state "$job" COMPLETED 400
	grep 'deadline guard' "$dir/logs/rank-000.log" >&3
	# what the allocation costs to its limit: 1 node x 2 cores x 2 minutes
	grep -q 'allocation: 1 node(s) x 2 cores x 0.03 h = 0.07 core-hours if the job runs to its limit' dl.out
	first=$dir/exit_info.node-000.requeue-0.json
	[ "$(jq -r .reason "$first")" = timeout_requeued ]
	# at most one step lost: the stop's checkpoint is the last step trained
	stopped=$(sed -n 's/.*stopping after step \([0-9]*\).*/\1/p' "$dir/logs/rank-000.log" | head -1)
	[ -n "$stopped" ]
	(($(jq -r .last_checkpoint.step "$first") >= stopped - 1))
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	diff <(losses "$REF") <(losses "$dir")
	# the trap's extra requeue finds the run complete: no step is trained twice
	[ "$(grep -c '"metric":"train_loss"' "$dir/logs/rank-000.metrics.jsonl")" -eq 200 ]
	if (($(job_field "$job" Restarts) > 1)); then
		grep -q 'run already complete' dl.out
	fi
}

@test "a --no-requeue job receiving USR1: checkpoint committed, reason requeue_failed" {
	job_script noreq --no-requeue
	job=$(submit noreq.sh)
	dir=$(run_dir noreq "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 10 120
	scancel --signal=USR1 "$job"
	wait_job_state "$job" 'COMPLETED|FAILED' 120
	grep -q 'cannot be requeued' noreq.out
	grep -q '"reason": "requeue_failed"' "$dir/exit_info.json"
	grep -q '"exit_code": 12' "$dir/exit_info.json"
	step=$(sed -n 's/.*"step": \([0-9]*\).*/\1/p' "$dir/exit_info.json" | head -1)
	[ -d "$dir/checkpoints/step_$(printf %08d "$step")" ]
	[ "$(readlink "$dir/checkpoints/latest")" = "step_$(printf %08d "$step")" ]
	[ "$(job_field "$job" Restarts)" = 0 ]
}

@test "kill -9 of storkd: reason rank_failed, naming the host and SIGKILL" {
	job_script kill
	job=$(submit kill.sh)
	dir=$(run_dir kill "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 5 120
	host=$(job_field "$job" NodeList)
	pid=$(pgrep -f "storkd --config $dir/config/stork.yaml" | head -1)
	[ -n "$pid" ]
	kill -9 "$pid"
	wait_job_state "$job" 'COMPLETED|FAILED' 60
	cat "$dir/exit_info.json"
	grep -q '"reason": "rank_failed"' "$dir/exit_info.json"
	grep -q '"signal": "SIGKILL"' "$dir/exit_info.json"
	grep -qE '"last_step": [1-9][0-9]*,' "$dir/exit_info.json"
	grep -q "\"host\": \"$host\"" "$dir/exit_info.json"
	nodes_idle
}

# wait_latest DIR STEP SECONDS: until the run's checkpoints/latest names step_STEP.
wait_latest() {
	local want deadline=$((SECONDS + $3))
	want=$(printf 'step_%08d' "$2")
	while ((SECONDS < deadline)); do
		[ "$(readlink "$1/checkpoints/latest" 2>/dev/null)" = "$want" ] && return 0
		sleep 0.5
	done
	echo "checkpoints/latest of $1 is not $want after $3 s" >&2
	return 1
}

@test "a signal while a checkpoint is being written: the previous checkpoint stays valid, the stop comes at the next step, the requeued run resumes from it" {
	grep -q '^#define STORK_FAULT_INJECTION 1' "$abs_top_builddir/config.h" ||
		skip "built without --enable-fault-injection"
	# checkpoints every 50 steps, each taking 6 s; keep them all
	sed -i 's/keep: 3/keep: 10/' run.yaml
	job_script mid --requeue
	sed -i "s|^srun |STORK_FAULT_CKPT_DELAY=6 srun |" mid.sh
	job=$(submit mid.sh)
	dir=$(run_dir mid "$job")
	wait_job_state "$job" RUNNING 60
	# the previous checkpoint: step 50, committed
	wait_latest "$dir" 50 240
	previous=$(cd "$dir/checkpoints/step_00000050" && md5sum -- *)
	# Signal inside the 6 s of step 100's checkpoint, latest still step 50.
	for _ in $(seq 240); do
		[ -d "$dir/checkpoints/step_00000100.tmp" ] && break
		sleep 0.5
	done
	[ -d "$dir/checkpoints/step_00000100.tmp" ]
	[ "$(readlink "$dir/checkpoints/latest")" = step_00000050 ]
	scancel --signal=USR1 "$job"
	wait_job_state "$job" COMPLETED 400
	cat mid.out
	# The signal was honoured: the checkpoint in progress was completed, the
	# run stopped after the next step with a checkpoint of its own, was
	# requeued and resumed from that one.
	[ "$(job_field "$job" Restarts)" = 1 ]
	grep -q '"reason": "preempted_requeued"' "$dir/exit_info.node-000.requeue-0.json"
	grep -q 'stopping after step 101 on request' "$dir/logs/rank-000.log"
	grep -q 'resumed from .*/checkpoints/step_00000101 at step 101' "$dir/logs/rank-000.log"
	[ -d "$dir/checkpoints/step_00000100" ]
	[ ! -e "$dir/checkpoints/step_00000100.tmp" ]
	# the previous checkpoint is still there, byte for byte
	[ "$(cd "$dir/checkpoints/step_00000050" && md5sum -- *)" = "$previous" ]
	grep -q '"reason": "completed"' "$dir/exit_info.json"
	[ "$(readlink "$dir/checkpoints/latest")" = step_00000150 ]
	[ "$(losses "$dir" | wc -l)" -eq 150 ]
}

@test "--signal=B:USR1 route: the batch shell execs srun, which forwards USR1; requeued and completed" {
	job_script bsh --requeue
	sed -i 's|^srun |exec srun |' bsh.sh
	job=$(submit bsh.sh)
	dir=$(run_dir bsh "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 20 120
	# What --signal=B:USR1@N does at the time limit: signal the batch shell.
	scancel --batch --signal=USR1 "$job"
	wait_job_state "$job" COMPLETED 300
	[ "$(job_field "$job" Restarts)" = 1 ]
	grep -q '"reason": "preempted_requeued"' "$dir/exit_info.node-000.requeue-0.json"
	grep -q '"reason": "completed"' "$dir/exit_info.json"
	[ "$(losses "$dir" | wc -l)" -eq 150 ]
}

# cancel_mid_run NAME SCANCEL-ARGS...: a --requeue training job that would
# run for hours, cancelled mid-run with `scancel SCANCEL-ARGS... JOB`. It
# must end for good: CANCELLED in slurmctld and in accounting, never
# requeued, exit_info.json saying cancelled (exit 16), the checkpoint of the
# step it stopped at committed within Slurm's KillWait (5 s here), and the
# web hook told started, cancelled.
cancel_mid_run() {
	local name=$1 stopped
	shift
	sed -i 's/steps: 150/steps: 1000000/' run.yaml
	job_script "$name" --requeue
	start_webhook hook.log
	job=$(STORK_NOTIFY_URL=$HOOK_URL submit "$name.sh")
	dir=$(run_dir "$name" "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 20 120
	scancel "$@" "$job"
	# a requeued job would go back to PENDING and never be CANCELLED
	wait_job_state "$job" CANCELLED 60
	cat "$name.out"
	[ "$(job_field "$job" Restarts)" = 0 ]
	wait_sacct_states "$job" "CANCELLED by $(id -u)" 30
	[ "$(jq -r .reason "$dir/exit_info.json")" = cancelled ]
	[ "$(jq -r .exit_code "$dir/exit_info.json")" = 16 ]
	[ "$(jq -r .restart_count "$dir/exit_info.json")" = 0 ]
	stopped=$(sed -n 's/.*stopping after step \([0-9]*\) on request.*/\1/p' "$dir/logs/rank-000.log")
	[ -n "$stopped" ]
	[ "$(jq -r .last_checkpoint.step "$dir/exit_info.json")" = "$stopped" ]
	[ "$(readlink "$dir/checkpoints/latest")" = "step_$(printf %08d "$stopped")" ]
	run grep -q "job $job requeued" "$dir/logs/rank-000.log"
	[ "$status" -eq 1 ]
	kill "$HOOK_PID"
	check_events hook.log started cancelled
	[ "$(jq -r 'select(.event == "cancelled") | .reason' hook.log)" = cancelled ]
	wait_nodes_idle 30
}

@test "scancel JOB mid-run: the job ends, CANCELLED and never requeued; checkpoint committed; exit_info says cancelled" {
	cancel_mid_run cnl
}

@test "scancel --signal=KILL JOB mid-run: the job ends, CANCELLED and never requeued; exit_info says cancelled" {
	cancel_mid_run kil --signal=KILL
}

@test "scancel JOB with too little of KillWait left for a checkpoint (a fault switch): cancelled, the previous checkpoint stays the latest, never requeued" {
	fault_injection || skip "built without --enable-fault-injection"
	sed -i 's/steps: 150/steps: 1000000/' run.yaml
	job_script nrm --requeue
	sed -i "s|^srun |STORK_FAULT_NO_ROOM_RANK=0 srun |" nrm.sh
	job=$(submit nrm.sh)
	dir=$(run_dir nrm "$job")
	wait_job_state "$job" RUNNING 60
	wait_latest "$dir" 50 120
	scancel "$job"
	wait_job_state "$job" CANCELLED 60
	[ "$(job_field "$job" Restarts)" = 0 ]
	[ "$(jq -r .reason "$dir/exit_info.json")" = cancelled ]
	jq -r .message "$dir/exit_info.json" | grep 'too little for a checkpoint'
	stopped=$(sed -n 's/.*stopping after step \([0-9]*\) on request.*/\1/p' "$dir/logs/rank-000.log")
	[ -n "$stopped" ]
	[ ! -e "$dir/checkpoints/step_$(printf %08d "$stopped")" ]
	latest=$(readlink "$dir/checkpoints/latest")
	[ "$(jq -r .last_checkpoint.step "$dir/exit_info.json")" = "$((10#${latest#step_}))" ]
	((10#${latest#step_} < stopped))
	wait_nodes_idle 30
}

@test "scancel JOB.0 mid-run: Slurm kills the step at once; the job ends and is never requeued" {
	sed -i 's/steps: 150/steps: 1000000/' run.yaml
	job_script stp --requeue
	job=$(submit stp.sh)
	dir=$(run_dir stp "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 20 120
	scancel "$job.0"
	# the batch script goes on after srun, and ends the job
	wait_job_state "$job" 'COMPLETED|FAILED' 60
	cat stp.out
	grep -q 'STEP [0-9.]* ON n[12] CANCELLED' stp.out
	[ "$(job_field "$job" Restarts)" = 0 ]
	wait_sacct_states "$job" "$(job_field "$job" JobState)" 30
	wait_nodes_idle 30
}
