#!/usr/bin/env bats
# Failure handling that needs no Slurm: a corrupted checkpoint, a stalled
# rank, a stop outside Slurm. (Requeue paths run on the test cluster:
# t/integration/preempt.bats.)

load helpers

setup() {
	setup_run
}

@test "a corrupted newest checkpoint: resume falls back to the previous one and the log says so" {
	"$STORK" run tiny.yaml --set train.steps=10 --set checkpoint.every=5 >/dev/null
	dir=runs/tiny__job=local__task=0
	truncate -s 100 $dir/checkpoints/step_00000010/model.bin
	run "$STORK" run tiny.yaml --set train.steps=12 --set checkpoint.every=5
	[ "$status" -eq 0 ]
	[[ "$output" == *"step_00000010 is not usable"*"model.bin has 100 bytes"* ]]
	[[ "$output" == *"resumed from"*"step_00000005 at step 5"* ]]
	grep -q "resuming from the older checkpoint .*step_00000005" $dir/logs/rank-000.log
}

@test "a checkpoint whose checksum does not match is not used" {
	"$STORK" run tiny.yaml --set train.steps=10 --set checkpoint.every=5 >/dev/null
	dir=runs/tiny__job=local__task=0
	# Same size, one byte changed.
	printf '\x01' | dd of=$dir/checkpoints/step_00000010/optimizer.bin bs=1 seek=4096 conv=notrunc 2>/dev/null
	run "$STORK" run tiny.yaml --set train.steps=12 --set checkpoint.every=5
	[ "$status" -eq 0 ]
	[[ "$output" == *"optimizer.bin: checksum"* ]]
	[[ "$output" == *"at step 5"* ]]
}

@test "a stop outside Slurm commits the checkpoint and says nothing was requeued" {
	run env STORK_STOP_AT_STEP=4 "$STORK" run tiny.yaml
	[ "$status" -eq 12 ]
	info=runs/tiny__job=local__task=0/exit_info.json
	grep -q '"reason": "requeue_failed"' $info
	grep -q '"exit_code": 12' $info
	grep -q '"step": 4' $info
	grep -q 'not a Slurm job' $info
}

@test "whether a stop checkpoint fits is rank 0's decision, the same on every rank" {
	fault_injection || skip "built without --enable-fault-injection"
	# Rank 1 alone believes there is no room: rank 0 decides, every rank
	# checkpoints and stops alike.
	run env STORK_STOP_AT_STEP=4 STORK_FAULT_NO_ROOM_RANK=1 "$STORK" run tiny.yaml --local-ranks 2
	[ "$status" -eq 12 ]
	[ "$(readlink runs/tiny__job=local__task=0/checkpoints/latest)" = step_00000004 ]
	grep -q 'stopping after step 4' runs/tiny__job=local__task=0/logs/rank-001.log
	# Rank 0 believes it: no rank writes the checkpoint, every rank says why.
	run env STORK_STOP_AT_STEP=8 STORK_FAULT_NO_ROOM_RANK=0 "$STORK" run tiny.yaml --local-ranks 2
	[ "$status" -eq 13 ]
	[ "$(readlink runs/tiny__job=local__task=0/checkpoints/latest)" = step_00000004 ]
	grep -q 'stopped after step 8 with .* too little for a checkpoint' runs/tiny__job=local__task=0/logs/rank-000.log
	grep -q 'stopped after step 8: rank 0 found too little time' runs/tiny__job=local__task=0/logs/rank-001.log
	grep -q '"reason": "checkpoint_failed"' runs/tiny__job=local__task=0/exit_info.json
}

@test "a stalled rank: reason hang; exit_info names who waits in which collective and who never entered it; the rank logs hold every rank's stack" {
	fault_injection || skip "built without --enable-fault-injection"
	run env STORK_FAULT_STALL=1:5 "$STORK" run tiny.yaml --local-ranks 2 --set preempt.hang_timeout=3
	[ "$status" -eq 21 ]
	info=runs/tiny__job=local__task=0/exit_info.json
	cat $info
	grep -q '"reason": "hang"' $info
	[[ "$output" == *"no progress for 3 s on vm: rank 0 (at step 6) rank 1 (at step 6)"* ]] ||
		[[ "$output" == *"rank 1 (at step 6)"* ]]
	[[ "$(jq -r .message $info)" == *"rank 0 ("*") waits in all-reduce #"*" of the world group (ranks 0-1, "*" bytes) since step 6 ("*" s); rank 1 never entered it; rank 1 ("*") was last seen at the start of step 6, in no collective" ]]
	# TP2 x DP2: the chain of waits, down to the stalled rank
	run env STORK_FAULT_STALL=3:5 "$STORK" run tiny.yaml --local-ranks 4 --set parallel.tensor=2 \
		--set run.name=tp --set preempt.hang_timeout=3
	[ "$status" -eq 21 ]
	dir=runs/tp__job=local__task=0
	jq -r .message $dir/exit_info.json
	message=$(jq -r .message $dir/exit_info.json)
	[[ "$message" == *"rank 2 ("*") waits in all-reduce #"*" of the tp group (ranks 2-3, "*" bytes) since step 6 ("*" s); rank 3 never entered it"* ]]
	[[ "$message" == *"rank 0 ("*") waits in all-reduce #"*" of the dp group (ranks 0 and 2, "*" bytes) since step 6 ("*" s); rank 2 never entered it"* ]]
	[[ "$message" == *"rank 3 ("*") was last seen at the start of step 6, in no collective" ]]
	jq -e 'length == 4 and (map(select(.op == "all-reduce")) | length) == 3' \
		$dir/logs/where.node-000.requeue-0.restart-0.json
	# each rank's stack, named: the waiting ones in the collective, the stalled one asleep
	for r in 0 1 2 3; do
		grep -q "stack of rank $r when the watchdog found the node stuck" $dir/logs/rank-00$r.log
	done
	grep -q '#[0-9]* .*(comm_allreduce+' $dir/logs/rank-002.log
	grep -q '#[0-9]* .*(tp_encoder_forward+\|#[0-9]* .*(gpt2_stage_forward+' $dir/logs/rank-002.log
	grep -q '#[0-9]* .*(sleep+\|#[0-9]* .*(nanosleep+\|#[0-9]* .*(clock_nanosleep+' $dir/logs/rank-003.log
	# with overlap rank 0 waits for its thread, whose collective waits for rank 1:
	# ZeRO-3's gather of the first layer, the all-reduce of a layer's gradients
	for z in 3:broadcast 0:all-reduce; do
		run env STORK_FAULT_STALL=1:5 "$STORK" run tiny.yaml --local-ranks 2 --set run.name=ov${z%:*} \
			--set parallel.zero=${z%:*} --set parallel.overlap=true --set preempt.hang_timeout=3
		[ "$status" -eq 21 ]
		message=$(jq -r .message runs/ov${z%:*}__job=local__task=0/exit_info.json)
		echo "$message"
		[[ "$message" == *"rank 0 ("*", its communication thread) waits in ${z#*:} #"*" of the world group (ranks 0-1, "*" bytes) since step 6 ("*" s); rank 1 never entered it"* ]]
	done
}

@test "a completed run's exit_info says completed" {
	"$STORK" run tiny.yaml --set train.steps=3 >/dev/null
	info=runs/tiny__job=local__task=0/exit_info.json
	grep -q '"reason": "completed"' $info
	grep -q '"exit_code": 0' $info
	grep -q '"first_failure": null' $info
	[ -s runs/tiny__job=local__task=0/exit_info.node-000.requeue-0.json ]
}

# Slurm's timed signal (--signal=USR1@N) may come as the step starts, before
# the launcher or storkd has its handler in place. STORK_FAULT_START_DELAY
# holds each of them for two seconds at that point: a USR1 then must wait, not
# kill; the run stops after its first step with a checkpoint.
@test "a stop signal that comes while stork and storkd are starting is kept, not fatal" {
	fault_injection || skip "built without --enable-fault-injection"
	STORK_FAULT_START_DELAY=2 "$STORK" run tiny.yaml --local-ranks 2 >out.log 2>&1 &
	pid=$!
	# Signal once the launcher runs our code: its first act blocks USR1
	# (bit 0x200 of SigBlk), then it sits in its two-second start delay. A
	# USR1 before that ends any program (its default action), so the test
	# waits for the block, however long the start takes (a sanitizer build,
	# a loaded machine), instead of signalling anyway after a while.
	blocked=0
	for _ in $(seq 1500); do
		[[ "$(readlink /proc/$pid/exe)" == */launcher/stork ]] &&
			(((16#$(sed -n 's/^SigBlk:\t//p' /proc/$pid/status) & 0x200) != 0)) && blocked=1 && break
		sleep 0.02
	done
	[ "$blocked" = 1 ] || { echo "the launcher did not block USR1 within 30 s"; cat out.log; return 1; }
	kill -USR1 $pid
	# storkd sits in its own two-second start delay once it exists; on a
	# loaded machine the launcher may take seconds to get there. storkd is
	# the launcher's child that runs daemon/storkd, found by its executable:
	# its name is "exe" once it has started itself again for OpenBLAS
	# (ops_cpu_blas_reexec execs /proc/self/exe), which it does at once.
	daemon=""
	for _ in $(seq 600); do
		for child in $(pgrep -P $pid); do
			[[ "$(readlink /proc/"$child"/exe)" == */daemon/storkd ]] && daemon=$child
		done
		[ -n "$daemon" ] && break
		sleep 0.05
	done
	[ -n "$daemon" ] || { echo "no storkd under the launcher after 30 s"; cat out.log; return 1; }
	kill -USR1 "$daemon"
	status=0
	wait $pid || status=$?
	cat out.log
	[ "$status" -eq 12 ]
	info=runs/tiny__job=local__task=0/exit_info.json
	grep -q '"reason": "requeue_failed"' $info
	grep -q '"step": 1$' $info
	[ "$(readlink runs/tiny__job=local__task=0/checkpoints/latest)" = step_00000001 ]
}

# signal_run SIGNAL [ARGS...]: `stork run` with ARGS (tiny.yaml, or `--
# PROGRAM`) in the background, SIGNAL sent to the launcher alone once
# rank 0 has logged step 3; the run's output in out.log and on ours, its
# exit status in $status, its run directory in $dir.
signal_run() {
	local sig=$1 pid
	shift
	"$STORK" run "$@" >out.log 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		dir=$(ls -d runs/*__job=local__task=0 2>/dev/null) && break
		sleep 0.1
	done
	wait_step "$dir" 3 60 || { kill -KILL $pid; cat out.log; return 1; }
	kill -"$sig" $pid
	status=0
	wait $pid || status=$?
	cat out.log
}

# stopped_by SIGNAL: the engine's run stopped on SIGNAL: the checkpoint of
# the step it stopped after is the latest, and, outside Slurm, nothing to
# requeue (requeue_failed, 12); rank 0's log names the signal.
stopped_by() {
	local step
	[ "$status" -eq 12 ]
	step=$(sed -n "s/.*stopping after step \([0-9]*\) on request (SIG$1)$/\1/p" "$dir/logs/rank-000.log")
	[ -n "$step" ]
	[ "$step" -ge 3 ]
	[ "$step" -lt 40 ]
	[ "$(readlink "$dir/checkpoints/latest")" = "$(printf 'step_%08d' "$step")" ]
	jq -e --argjson s "$step" '.reason == "requeue_failed" and .exit_code == 12 and
		.last_checkpoint.step == $s and .first_failure == null and
		(.message | startswith("stopped after step \($s), checkpoint committed") and
		contains("not a Slurm job"))' "$dir/exit_info.json"
}

@test "USR1, the default preempt.signal, stops the run with the checkpoint of its step" {
	fault_injection || skip "needs --enable-fault-injection"
	STORK_FAULT_STEP_DELAY=0.1 signal_run USR1 tiny.yaml --set train.steps=40
	stopped_by USR1
}

@test "USR2, the USR signal preempt.signal does not name, stops the run the same way, not killing storkd" {
	fault_injection || skip "needs --enable-fault-injection"
	STORK_FAULT_STEP_DELAY=0.1 signal_run USR2 tiny.yaml --set train.steps=40
	stopped_by USR2
}

@test "with preempt.signal USR2, USR1 stops the run the same way" {
	fault_injection || skip "needs --enable-fault-injection"
	STORK_FAULT_STEP_DELAY=0.1 signal_run USR1 tiny.yaml --set train.steps=40 \
		--set preempt.signal=USR2
	stopped_by USR1
}

@test "a stop is the time limit's only when it is: a USR1 four minutes before the end is a preemption, the job's --signal=USR1@300 as it falls due and Slurm's TERM at the end are the time limit" {
	fault_injection || skip "needs --enable-fault-injection (a pretend job end and --signal)"
	# scancel --signal=USR1 in a job that has 240 s left, without --signal: preempted
	STORK_FAULT_JOB_END=240 STORK_FAULT_STEP_DELAY=0.1 signal_run USR1 tiny.yaml --set train.steps=40
	stopped_by USR1
	# the job's own --signal=USR1@300, 240 s before the end: the time limit
	rm -rf runs
	STORK_FAULT_JOB_END=240 STORK_FAULT_JOB_SIGNAL=USR1@300 STORK_FAULT_STEP_DELAY=0.1 \
		signal_run USR1 tiny.yaml --set train.steps=40
	grep -q "stopping after step [0-9]* on request (SIGUSR1; the job's time limit is near)$" \
		"$dir/logs/rank-000.log"
	# a USR2 then is not that signal: preempted
	rm -rf runs
	STORK_FAULT_JOB_END=240 STORK_FAULT_JOB_SIGNAL=USR1@300 STORK_FAULT_STEP_DELAY=0.1 \
		signal_run USR2 tiny.yaml --set train.steps=40
	stopped_by USR2
	# TERM a minute before the end: Slurm's at the time limit
	rm -rf runs
	STORK_FAULT_JOB_END=60 STORK_FAULT_STEP_DELAY=0.1 signal_run TERM tiny.yaml --set train.steps=40
	grep -q "on request (SIGTERM; the job's time limit is near)$" "$dir/logs/rank-000.log"
	# a program run the same way: the manual USR1 is a preemption
	rm -rf runs
	STORK_FAULT_JOB_END=240 signal_run USR1 -- "$RANK_SH" --steps 40 --sleep 0.1
	[ "$status" -eq 12 ]
	jq -e '.message | startswith("stopped on request (preempted)")' "$dir/exit_info.json"
	rm -rf runs
	STORK_FAULT_JOB_END=240 STORK_FAULT_JOB_SIGNAL=USR1@300 signal_run USR1 -- "$RANK_SH" --steps 40 --sleep 0.1
	jq -e '.message | startswith("stopped on request (time limit near)")' "$dir/exit_info.json"
}

@test "TERM (the time limit, preemption, scancel) stops the run with the checkpoint of its step" {
	fault_injection || skip "needs --enable-fault-injection"
	STORK_FAULT_STEP_DELAY=0.1 signal_run TERM tiny.yaml --set train.steps=40
	stopped_by TERM
}

@test "INT stops the run with the checkpoint of its step" {
	fault_injection || skip "needs --enable-fault-injection"
	STORK_FAULT_STEP_DELAY=0.1 signal_run INT tiny.yaml --set train.steps=40
	stopped_by INT
}

@test "HUP is ignored: the run goes on to its last step, and its output says the hang-up was ignored" {
	fault_injection || skip "needs --enable-fault-injection"
	STORK_FAULT_STEP_DELAY=0.1 signal_run HUP tiny.yaml --set train.steps=40
	[ "$status" -eq 0 ]
	grep -q '^storkd: SIGHUP ignored: a hang-up does not stop a run' out.log
	[ "$(losses tiny | wc -l)" -eq 40 ]
	[ "$(readlink "$dir/checkpoints/latest")" = step_00000040 ]
	jq -e '.reason == "completed" and .exit_code == 0' "$dir/exit_info.json"
	run grep -c 'stopping after step' "$dir/logs/rank-000.log"
	[ "$output" = 0 ]
}

# The shell program of the cluster tests: it saves its step and exits 10 on
# $STORK_PREEMPT_SIGNAL (program.signal, USR1).
RANK_SH=${abs_top_srcdir:?set by make check}/t/integration/program/rank.sh

@test "stork run -- PROGRAM: USR1, USR2, TERM and INT each send program.signal to the ranks, which save their step" {
	for sig in USR1 USR2 TERM INT; do
		rm -rf runs
		signal_run $sig --local-ranks 2 -- "$RANK_SH" --steps 40 --sleep 0.1
		[ "$status" -eq 12 ]
		jq -e '.reason == "requeue_failed" and .exit_code == 12 and
			(.message | startswith("stopped on request (preempted): every rank confirmed its checkpoint (exit 10)"))' \
			"$dir/exit_info.json"
		for r in 0 1; do
			log=$dir/logs/rank-00$r.log
			grep -q "stop requested by SIG$sig: sending SIGUSR1$" "$log"
			step=$(sed -n "s/.*\] rank $r: saved step \([0-9]*\) in .*/\1/p" "$log")
			[ -n "$step" ]
			[ "$step" -ge 3 ]
			[ "$step" -lt 39 ]
			[ "$(cat "$dir/checkpoints/rank-$r.step")" = "$step" ]
		done
	done
}

@test "stork run -- PROGRAM: two invocations with the defaults are two runs named after the program, the second from step 0; the same run.name makes them one; run.resume_from reaches the program as STORK_RESUME_FROM" {
	# the first, stopped: it saves its step
	signal_run USR1 -- "$RANK_SH" --steps 40 --sleep 0.1
	[ "$status" -eq 12 ]
	grep -q "nothing to requeue; to resume, run it again with --set run.name=rank$" out.log
	first=$PWD/runs/rank__job=local__task=0
	[ "$dir" = runs/rank__job=local__task=0 ]
	saved=$(cat "$first/checkpoints/rank-0.step")
	# the same command again: a run of its own, from step 0
	run "$STORK" run -- "$RANK_SH" --steps 2
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"stork: run directory $PWD/runs/rank.2__job=local__task=0"* ]]
	grep -q "rank 0 step 0$" runs/rank.2__job=local__task=0/logs/rank-000.log
	run grep -c resuming runs/rank.2__job=local__task=0/logs/rank-000.log
	[ "$output" = 0 ]
	# python3 -m MODULE is named after the module, python3 -c CODE after python3
	run "$STORK" run -- python3 -m json.tool --help
	[[ "$output" == *"stork: run directory $PWD/runs/json.tool__job=local__task=0"* ]]
	run "$STORK" run -- python3 -c 'pass'
	[[ "$output" == *"stork: run directory $PWD/runs/python3__job=local__task=0"* ]]
	# run.resume_from: the program is told where the other run's checkpoint is
	run "$STORK" run --set run.resume_from=runs/rank__job=local__task=0 -- "$RANK_SH" --steps $((saved + 3))
	echo "$output"
	[ "$status" -eq 0 ]
	grep -q "rank 0: starting after step $saved of $first/checkpoints (run.resume_from)" \
		runs/rank.3__job=local__task=0/logs/rank-000.log
	# a restart inside the allocation is the program's, and says so
	run "$STORK" run --set restart.max_restarts=1 -- "$RANK_SH" --steps 4 --fail-rank 0
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"starting the program again, which resumes from its own checkpoint in STORK_CHECKPOINT_DIR (restart 1 of restart.max_restarts 1)"* ]]
	[[ "$output" != *"restarting storkd"* ]]
	# one name given twice: one run, the second invocation resumes the first
	run "$STORK" run --set run.name=same -- "$RANK_SH" --steps 2
	[ "$status" -eq 0 ]
	echo 0 >runs/same__job=local__task=0/checkpoints/rank-0.step
	run "$STORK" run --set run.name=same -- "$RANK_SH" --steps 3
	[ "$status" -eq 0 ]
	grep -q "rank 0: resuming after step 0" runs/same__job=local__task=0/logs/rank-000.log
}

@test "stork report of a program run: no nan anywhere, what the program did not log said so, its own newest checkpoint named, no empty metrics files, bytes in readable units; its configuration without the engine's keys" {
	# a program that logs nothing and saves one file
	# shellcheck disable=SC2016 # expanded by the rank's shell
	run "$STORK" run -- sh -c 'echo state >"$STORK_CHECKPOINT_DIR/state.pt"'
	[ "$status" -eq 0 ]
	dir=runs/sh__job=local__task=0
	[ ! -e "$dir/logs/rank-000.metrics.jsonl" ]
	# its resolved configuration holds the keys a program run reads, not the engine's
	grep -q '^program:' "$dir/config/stork.yaml"
	grep -q '^  local_ranks:' "$dir/config/stork.yaml"
	run grep -cE '^(model|data|train|checkpoint):|^  (tensor|pipeline|zero|overlap):' "$dir/config/stork.yaml"
	[ "$output" = 0 ]
	run "$STORK" report --text "$dir"
	echo "$output"
	[[ "$output" != *nan* ]]
	[[ "$output" == *"steps and loss: not reported by the program"* ]]
	[[ "$output" == *"latest checkpoint: state.pt (the program's own, in STORK_CHECKPOINT_DIR)"* ]]
	"$STORK" report "$dir" >/dev/null
	run grep -ciw nan "$dir/report.html"
	[ "$output" = 0 ]
	grep -q "Loss: not reported by the program" "$dir/report.html"
	grep -q "Stragglers: not measured (compute time per rank: not reported by the program)" "$dir/report.html"
	grep -q "The program's own, in STORK_CHECKPOINT_DIR: newest state.pt" "$dir/report.html"
	# the table of runs: "-" for what a run did not log
	run "$STORK" report runs
	echo "$output"
	[[ "$output" != *nan* ]]
	grep -Eq "^sh +local +0 +- +- +- +- +completed" <<<"$output"
	# a program that logs its loss and the bytes it sent: the axis reads 80 MB, not 80000000
	# shellcheck disable=SC2016 # expanded by the rank's shell
	run "$STORK" run --set run.name=bytes -- sh -c 'for s in 1 2 3; do
		printf "{\"step\":%d,\"metric\":\"train_loss\",\"value\":%d}\n{\"step\":%d,\"metric\":\"net_bytes_sent\",\"value\":80000000}\n" \
			$s $((5 - s)) $s >>"$STORK_METRICS_FILE"; done'
	[ "$status" -eq 0 ]
	"$STORK" report runs/bytes__job=local__task=0 >/dev/null
	tr -d '\n' <runs/bytes__job=local__task=0/report.html | grep -o 'id="net-bytes-chart".*' |
		grep -q '>80 MB</text>'
	run grep -c '>80000000</text>' runs/bytes__job=local__task=0/report.html
	[ "$output" = 0 ]
}

@test "stork run -- PROGRAM with no handler for the stop signal: the output says the rank died of it and why, not only that it did not confirm a checkpoint" {
	cat >nohandler.sh <<-'EOF'
	#!/bin/sh
	# logs steps; the stop signal's default action ends it
	s=0
	while [ $s -lt 400 ]; do
		s=$((s + 1))
		printf '{"step":%d,"metric":"train_loss","value":1}\n' $s >>"$STORK_METRICS_FILE"
		sleep 0.1
	done
	EOF
	chmod +x nohandler.sh
	signal_run USR1 -- ./nohandler.sh
	[ "$status" -eq 12 ]
	grep -q "rank(s) 0 (died of SIGUSR1: the program has no handler for program.signal) on .* did not confirm a checkpoint" out.log
}

@test "stork run -- PROGRAM: HUP is ignored, the ranks get nothing and run to their end" {
	signal_run HUP --local-ranks 2 -- "$RANK_SH" --steps 40 --sleep 0.1
	[ "$status" -eq 0 ]
	grep -q '^storkd: SIGHUP ignored: a hang-up does not stop a run' out.log
	jq -e '.reason == "completed"' "$dir/exit_info.json"
	for r in 0 1; do
		grep -q "\] rank $r: done, 40 steps$" "$dir/logs/rank-00$r.log"
		run grep -c 'sending SIG' "$dir/logs/rank-00$r.log"
		[ "$output" = 0 ]
	done
}

@test "stork run -- PROGRAM that ignores the signal: ended when program.checkpoint_grace runs out, its checkpoint unconfirmed" {
	# each rank beats (so the run is watched) and then ignores USR1
	cat >deaf.sh <<'DEAF'
#!/bin/sh
trap '' USR1
i=0
while [ $i -lt 600 ]; do
	printf '{"step":%d,"metric":"train_loss","value":1}\n' $i >>"$STORK_METRICS_FILE"
	i=$((i + 1))
	sleep 0.1
done
DEAF
	chmod +x deaf.sh
	SECONDS=0
	signal_run USR1 --local-ranks 2 --set program.checkpoint_grace=2 --set program.kill_grace=1 -- ./deaf.sh
	echo "signal to the end: $SECONDS s"
	[ "$SECONDS" -lt 30 ]
	[ "$status" -eq 12 ]
	jq -e '.reason == "requeue_failed" and (.message | contains("a rank did not confirm its checkpoint (exit 10) before it ended, so the checkpoint is unconfirmed"))' \
		"$dir/exit_info.json"
	grep -q 'rank(s) 0 ([a-z].*), 1 ([a-z].*) on .* did not confirm a checkpoint' out.log
	for r in 0 1; do
		grep -q 'died of SIGTERM' "$dir/logs/rank-00$r.log"
	done
}

# A step's task inherits descriptors it was never meant to have (seen:
# slurmstepd's listening socket in stork and storkd alike); here a file on
# 7, and bats's own descriptors.
@test "stork run -- PROGRAM: a rank starts with descriptors 0, 1 and 2 only, and storkd-program holds nothing the launcher inherited" {
	echo inherited >inherited.txt
	# the rank's shell lists its own descriptors, then its parent's; `exec >`
	# because `ls >file` would have the shell keep its stdout on a spare one.
	# A descriptor the daemon closes while ls reads its list (it follows the
	# metrics files and samples the ranks meanwhile) makes ls fail on that
	# entry alone: the rest is listed, and checked below.
	# shellcheck disable=SC2016 # expanded by the rank's shell
	run "$STORK" run --local-ranks 2 -- sh -c \
		'exec >fds.$RANK; ls /proc/$$/fd; exec >daemon-fds.$RANK; ls -l /proc/$PPID/fd; true' 7<inherited.txt
	echo "$output"
	[ "$status" -eq 0 ]
	for r in 0 1; do
		cat daemon-fds.$r
		[ "$(sort -n fds.$r | tr '\n' ' ')" = "0 1 2 " ]
		# the daemon's list was read: it holds both ranks' logs
		grep -q '/logs/rank-000\.log$' daemon-fds.$r
		grep -q '/logs/rank-001\.log$' daemon-fds.$r
		run grep -c inherited.txt daemon-fds.$r
		[ "$output" = 0 ]
	done
}

@test "stork run -- PROGRAM: a metric whose name is 64 KiB long: the run ends normally and metrics/summary.csv holds its row whole, and the next" {
	# shellcheck disable=SC2016 # expanded by the rank's shell
	run "$STORK" run --set run.name=longname -- sh -c '
		name=$(head -c 65536 /dev/zero | tr "\0" m)
		printf "{\"metric\":\"%s\",\"value\":1.5,\"ts\":%s}\n" "$name" "$(date +%s)" >>"$STORK_METRICS_FILE"
		printf "{\"metric\":\"z_after\",\"value\":2.5,\"ts\":%s}\n" "$(date +%s)" >>"$STORK_METRICS_FILE"'
	echo "$output" | cut -c1-300
	[ "$status" -eq 0 ]
	csv=runs/longname__job=local__task=0/metrics/summary.csv
	jq -e '.reason == "completed"' runs/longname__job=local__task=0/exit_info.json
	# the long name's row whole (the name, then its minute, count and values)
	[ "$(awk -F, '$1 ~ /^m+$/ && length($1) == 65536 && $3 == 1 && $4 == 1.5 && $6 == 1.5' "$csv" |
		wc -l)" -eq 1 ]
	grep -q '^z_after,[0-9TZ:-]*,1,2.5,2.5,2.5$' "$csv"
}

@test "a periodic checkpoint that fails (disk full) is skipped: training goes on, bit for bit" {
	fault_injection || skip "needs --enable-fault-injection"
	"$STORK" run tiny.yaml --set train.steps=20 --set checkpoint.every=5 --set run.name=ref >/dev/null
	run env STORK_FAULT_CKPT_FAIL=10 "$STORK" run tiny.yaml --set train.steps=20 \
		--set checkpoint.every=5 --set checkpoint.keep=0
	[ "$status" -eq 0 ]
	[[ "$output" == *"checkpoint step_00000010 failed (1 of 3 in a row)"*"No space left on device"* ]]
	dir=runs/tiny__job=local__task=0
	# one test per line: a failed test before && would not fail the bats test
	[ -d $dir/checkpoints/step_00000005 ]
	[ -d $dir/checkpoints/step_00000015 ]
	[ ! -e $dir/checkpoints/step_00000010 ]
	[ ! -e $dir/checkpoints/step_00000010.tmp ]
	grep -q "warning: checkpoint step_00000010 failed" $dir/logs/rank-000.log
	grep -q '"reason": "completed"' $dir/exit_info.json
	[ "$(losses ref | wc -l)" -eq 20 ]
	[ "$(losses tiny)" == "$(losses ref)" ]
}

@test "checkpoint.max_failures in a row end the run with checkpoint_failed (13), the latest kept" {
	fault_injection || skip "needs --enable-fault-injection"
	run env STORK_FAULT_CKPT_FAIL=10,15 "$STORK" run tiny.yaml --local-ranks 2 --set train.steps=20 \
		--set checkpoint.every=5 --set checkpoint.max_failures=2 --set parallel.zero=1
	[ "$status" -eq 13 ]
	dir=runs/tiny__job=local__task=0
	grep -q '"reason": "checkpoint_failed"' $dir/exit_info.json
	grep -q '"exit_code": 13' $dir/exit_info.json
	grep -q '"what": "checkpoint step_00000015 failed (checkpoint.max_failures in a row)' $dir/exit_info.json
	[ "$(readlink $dir/checkpoints/latest)" == step_00000005 ]
	[ ! -e $dir/checkpoints/step_00000015.tmp ]
}

@test "an attempt that finds its run complete says it was requeued from outside and exits 0" {
	"$STORK" run tiny.yaml --set train.steps=4 >/dev/null
	run env SLURM_RESTART_COUNT=1 "$STORK" run tiny.yaml --set train.steps=4
	[ "$status" -eq 0 ]
	[[ "$output" == *"run already complete at step 4: this attempt was requeued from outside Stork"* ]]
	grep -q "requeued from outside Stork" runs/tiny__job=local__task=0/logs/rank-000.log
}

@test "the deadline guard stops, checkpoints and asks for a requeue before the job's end, without a signal" {
	fault_injection || skip "needs --enable-fault-injection"
	# a pretend time limit 8 s away, steps of at least 0.3 s, far more steps than fit
	start=$(date +%s)
	run env STORK_FAULT_JOB_END=8 STORK_FAULT_STEP_DELAY=0.3 "$STORK" run tiny.yaml \
		--set train.steps=1000 --set preempt.deadline_lead=2 --set checkpoint.every=0
	end=$(date +%s)
	echo "$output"
	[ "$status" -eq 12 ]   # outside Slurm there is no job to requeue
	[[ "$output" == *"deadline guard: "*" s left before the job's end: checkpointing and requeueing now"* ]]
	dir=runs/tiny__job=local__task=0
	step=$(readlink $dir/checkpoints/latest | sed 's/step_0*//')
	[ "$step" -gt 3 ]
	[ "$step" -lt 1000 ]
	# committed before the pretend end
	((end - start <= 9))
	grep -q "deadline guard: .* stopping now" $dir/logs/rank-000.log
}

@test "with preempt.deadline_guard false the run goes on to the pretend end" {
	fault_injection || skip "needs --enable-fault-injection"
	run env STORK_FAULT_JOB_END=3 STORK_FAULT_STEP_DELAY=0.2 "$STORK" run tiny.yaml \
		--set train.steps=25 --set preempt.deadline_guard=false --set checkpoint.every=0
	[ "$status" -eq 0 ]
	[[ "$output" != *"deadline guard"* ]]
}

@test "a NaN loss: reason diverged (14) naming the step and the rank, nothing non-finite checkpointed" {
	fault_injection || skip "needs --enable-fault-injection"
	run env STORK_FAULT_NAN_STEP=5 STORK_FAULT_NAN_RANK=1 "$STORK" run tiny.yaml --local-ranks 2 \
		--set train.steps=10 --set checkpoint.every=2
	[ "$status" -eq 14 ]
	info=runs/tiny__job=local__task=0/exit_info.json
	grep -q '"reason": "diverged"' $info
	grep -q "step 5: the gradient norm is not finite (nan), seen in rank 1's loss first" $info
	[ "$(readlink runs/tiny__job=local__task=0/checkpoints/latest)" == step_00000004 ]
}

@test "train.on_nonfinite skip: the step's update is dropped and training goes on" {
	fault_injection || skip "needs --enable-fault-injection"
	run env STORK_FAULT_NAN_STEP=5 "$STORK" run tiny.yaml --set train.steps=10 \
		--set train.on_nonfinite=skip
	[ "$status" -eq 0 ]
	[[ "$output" == *"step 5: the gradient norm is not finite"*"the update is dropped"* ]]
	# every later step trains on finite numbers
	[ "$(losses tiny | awk '$1 > 5 && $2 ~ /^[0-9.]+$/' | wc -l)" -eq 5 ]
}

@test "train.on_nonfinite rollback: back to the latest checkpoint, the diverged step's batch skipped, the run completes" {
	fault_injection || skip "needs --enable-fault-injection"
	"$STORK" run tiny.yaml --local-ranks 2 --set run.name=full --set checkpoint.every=5 >/dev/null
	run env STORK_FAULT_NAN_STEP=7 STORK_FAULT_NAN_RANK=1 "$STORK" run tiny.yaml --local-ranks 2 \
		--set run.name=rb --set checkpoint.every=5 --set train.on_nonfinite=rollback
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"step 7: the gradient norm is not finite"*"rolled back to step 5 after step 7 diverged (rollback 1 of 3)"* ]]
	grep -q "step 7: skipping the batch that diverged" runs/rb__job=local__task=0/logs/rank-001.log
	[ "$(losses rb | wc -l)" -eq 20 ]
	# steps 1-6 as uninterrupted; step 7 trains on the next batch instead
	diff <(losses full | head -6) <(losses rb | head -6)
	[ "$(losses full | sed -n 7p)" != "$(losses rb | sed -n 7p)" ]
	[ "$(losses rb | awk '$2 ~ /^[0-9.]+$/' | wc -l)" -eq 20 ]
	grep -q '"reason": "completed"' runs/rb__job=local__task=0/exit_info.json
}

@test "train.max_rollbacks: the divergence after the last allowed rollback ends the run as diverged" {
	fault_injection || skip "needs --enable-fault-injection"
	run env STORK_FAULT_NAN_STEP=7,12 "$STORK" run tiny.yaml --set checkpoint.every=5 \
		--set train.on_nonfinite=rollback --set train.max_rollbacks=1
	[ "$status" -eq 14 ]
	[[ "$output" == *"rolled back to step 5 after step 7 diverged (rollback 1 of 1)"* ]]
	grep -q "step 12: the gradient norm is not finite (nan), seen in rank 0's loss first (after train.max_rollbacks 1 rollbacks)" \
		runs/tiny__job=local__task=0/exit_info.json
	[ "$(readlink runs/tiny__job=local__task=0/checkpoints/latest)" == step_00000010 ]
}

@test "restart.max_restarts: storkd killed mid-run is started again from the latest checkpoint; the losses are the uninterrupted run's" {
	fault_injection || skip "needs --enable-fault-injection"
	sed -i 's/every: 0/every: 5/' tiny.yaml
	"$STORK" run tiny.yaml --local-ranks 2 --set run.name=full >/dev/null
	STORK_FAULT_STEP_DELAY=0.2 "$STORK" run tiny.yaml --local-ranks 2 --set run.name=rs \
		--set restart.max_restarts=2 >out.txt 2>&1 &
	launcher=$!
	wait_step runs/rs__job=local__task=0 12 60
	# storkd is stopped before its latest checkpoint is read, so that no
	# checkpoint can commit between the reading and the kill: the latest is
	# step 10's, or 15's on a machine so busy that step 15 came first
	pkill -STOP -f "storkd --config $PWD/runs/rs__job"
	latest=$(readlink runs/rs__job=local__task=0/checkpoints/latest)
	pkill -9 -f "storkd --config $PWD/runs/rs__job"
	wait "$launcher"
	cat out.txt
	grep -q 'storkd (pid [0-9]*) on .* died of SIGKILL; restarting' out.txt
	[[ "$latest" == step_00000010 || "$latest" == step_00000015 ]]
	grep -q "resumed from .*${latest#step_} at step ${latest#step_000000}" out.txt
	grep -q 'stork: completed (exit 0)' out.txt
	info=runs/rs__job=local__task=0/exit_info.json
	[ "$(jq -r '.reason' $info)" = completed ]
	[ "$(jq -r '.restarts | length' $info)" -eq 1 ]
	[ "$(jq -r '.restarts[0].reason' $info)" = rank_failed ]
	[ "$(jq -r '.restarts[0].first_failure.signal' $info)" = SIGKILL ]
	[ -s runs/rs__job=local__task=0/exit_info.node-000.requeue-0.restart-1.json ]
	grep -q "=== restart 1 in the allocation ===" runs/rs__job=local__task=0/logs/rank-000.log
	[ "$(losses rs | wc -l)" -eq 20 ]
	diff <(losses full) <(losses rs)
	# without restarts the same kill ends the run
	STORK_FAULT_STEP_DELAY=0.2 "$STORK" run tiny.yaml --local-ranks 2 --set run.name=nr >out.txt 2>&1 &
	launcher=$!
	wait_step runs/nr__job=local__task=0 3 60
	pkill -9 -f "storkd --config $PWD/runs/nr__job"
	rc=0
	wait "$launcher" || rc=$?
	[ "$rc" -eq 20 ]
	[ "$(jq -r '.restarts | length' runs/nr__job=local__task=0/exit_info.json)" -eq 0 ]
}

@test "storkd holds nothing the launcher inherited: its result pipe on 3 and its own descriptors" {
	fault_injection || skip "built without --enable-fault-injection"
	echo inherited >inherited.txt
	STORK_FAULT_STEP_DELAY=0.2 "$STORK" run tiny.yaml --set run.name=fds --set train.steps=30 \
		>out.txt 2>&1 7<inherited.txt &
	launcher=$!
	wait_step runs/fds__job=local__task=0 2 60
	pid=$(pgrep -f "storkd --config $PWD/runs/fds__job" | head -1)
	# looked at while it runs, checked once the run is stopped
	launcher_fds=$(ls -l /proc/$launcher/fd) || true
	daemon_fds=$(ls -l /proc/"$pid"/fd) || true
	result=$(readlink /proc/"$pid"/fd/3) || true
	kill -TERM "$launcher"
	wait "$launcher" || true
	echo "$daemon_fds"
	[ -n "$pid" ]
	[[ "$launcher_fds" == *inherited.txt* ]] # the launcher keeps it, storkd does not
	[[ "$daemon_fds" != *inherited.txt* ]]
	[[ "$result" == pipe:* ]]
}

@test "storkd runs under its own name: ps, top and pgrep show storkd, not exe (after OpenBLAS's re-execution)" {
	fault_injection || skip "built without --enable-fault-injection"
	STORK_FAULT_STEP_DELAY=0.2 "$STORK" run tiny.yaml --set run.name=name --set train.steps=30 \
		>out.txt 2>&1 &
	launcher=$!
	wait_step runs/name__job=local__task=0 2 60
	pid=$(pgrep -f "storkd --config $PWD/runs/name__job" | head -1)
	[ -n "$pid" ]
	[ "$(cat /proc/"$pid"/comm)" = storkd ]
	pgrep -x storkd | grep -qx "$pid"
	kill -TERM "$launcher"
	wait "$launcher" || true
}
