#!/usr/bin/env bats
# `srun stork run -- PROGRAM` on the real cluster: a PyTorch DDP script
# written for torchrun (gloo, CPU), and a shell program, under Stork's
# launcher: environment, logs, failures, hangs, preemption and requeue.

load helpers
load ../training

STORK=${abs_top_builddir:?set by make check}/launcher/stork
PY=/usr/bin/python3
DDP=${abs_top_srcdir:?}/t/integration/program/ddp_train.py

setup() {
	setup_workdir
	"$PY" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
		skip "Debian's python3-torch (with gloo) is not installed"
}

teardown() {
	cancel_test_job
	teardown_memory_cgroup
}

# program_job NAME SBATCH-LINE PROGRAM-ARGS...: 2 nodes x 1 launcher x 2
# ranks running the DDP script under stork run; its results in out-NAME.
program_job() {
	local name=$1 extra=$2
	shift 2
	{
		echo '#!/bin/bash'
		echo "#SBATCH -N2 --ntasks-per-node=1 -c2 --open-mode=append -o $name.out -J $name $extra"
		echo "srun $STORK run --local-ranks 2 --set run.name=$name ${STORK_ARGS:-} -- $PY $DDP --out out-$name $*"
	} >"$name.sh"
}

# env_of OUT RANK NAME: one variable as the script saw it.
env_of() { jq -r --arg k "$3" '.[$k] // "unset"' "$1/env.rank-$2.json"; }

@test "stork run -- a DDP script: torchrun's environment on every rank, replicas equal, the same losses and variables as plain srun with the plugin" {
	program_job prog "" --steps 6
	run sbatch_wait prog.sh
	[ "$status" -eq 0 ]
	dir=$(ls -d "$WORK"/runs/prog__job=*__task=0)
	# the same script, one srun task per rank, the plugin setting the variables
	printf '#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=2 -c1 -o plain.out\nsrun %s %s --steps 6 --out out-plain\n' \
		"$PY" "$DDP" >plain.sh
	run sbatch_wait plain.sh
	[ "$status" -eq 0 ]
	for r in 0 1 2 3; do
		[ "$(env_of out-prog $r RANK)" = $r ]
		[ "$(env_of out-prog $r LOCAL_RANK)" = $((r % 2)) ]
		[ "$(env_of out-prog $r WORLD_SIZE)" = 4 ]
		[ "$(env_of out-prog $r LOCAL_WORLD_SIZE)" = 2 ]
		[ "$(env_of out-prog $r NODE_RANK)" = $((r / 2)) ]
		[ "$(env_of out-prog $r MASTER_ADDR)" = n1 ]
		[ "$(env_of out-prog $r STORK_RUN_DIR)" = "$dir" ]
		[ "$(env_of out-prog $r STORK_CHECKPOINT_DIR)" = "$dir/checkpoints" ]
		[ "$(env_of out-prog $r TORCHELASTIC_ERROR_FILE)" = "$dir/logs/rank-00$r.error.json" ]
		# every torchrun variable (the port aside: each step has its own)
		# and the binding are what plain srun with the plugin gives
		for v in RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK NODE_RANK ROLE_RANK \
			ROLE_WORLD_SIZE ROLE_NAME MASTER_ADDR OMP_NUM_THREADS TORCHELASTIC_RESTART_COUNT \
			TORCHELASTIC_MAX_RESTARTS host; do
			[ "$(env_of out-prog $r $v)" = "$(env_of out-plain $r $v)" ] ||
				{ echo "rank $r: $v differs" >&2; false; }
		done
		[ "$(jq -c .affinity out-prog/env.rank-$r.json)" = "$(jq -c .affinity out-plain/env.rank-$r.json)" ]
		# each rank's output is in its log, prefixed
		grep -q "^\[$r/$((r % 2)) n$((r / 2 + 1)) .*\] .*exited with 0" "$dir/logs/rank-00$r.log"
	done
	# DDP kept the replicas equal; the two launches trained the same
	[ "$(cat out-prog/params.rank-*.txt | sort -u | wc -l)" -eq 1 ]
	cmp out-prog/losses.txt out-plain/losses.txt
	[ "$(wc -l <out-prog/losses.txt)" -eq 6 ]
	# rank 0's output is on the launcher's
	grep -q '^step 5 loss' prog.out
	run grep -c '^step 5 loss' "$dir/logs/rank-001.log"
	[ "$output" = 0 ]
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	# the script's metrics feed the run's summary like the engine's
	grep -q train_loss "$dir/metrics/summary.csv"
}

@test "stork run -- a DDP script, preempted with scancel --signal=USR1: saves, requeued once, resumes, losses equal an uninterrupted run's bit for bit, and in TensorBoard's files" {
	program_job ref "" --steps 24
	run sbatch_wait ref.sh
	[ "$status" -eq 0 ]
	program_job pre --requeue --steps 24 --step-sleep 0.4
	job=$(submit pre.sh)
	dir=$(run_dir pre "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 5 120
	scancel --signal=USR1 "$job"
	wait_job_state "$job" 'PENDING|REQUEUED|RUNNING' 30
	wait_job_state "$job" COMPLETED 300
	[ "$(job_field "$job" Restarts)" -eq 1 ]
	jq -e '.reason == "preempted_requeued"' "$dir"/exit_info.node-000.requeue-0.json
	grep -q 'every rank confirmed its checkpoint' "$dir"/exit_info.node-000.requeue-0.json
	[ -f "$dir/checkpoints/state.pt" ]
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	[ "$(env_of out-pre 0 STORK_RESTART_COUNT)" = 1 ]
	# a step trained twice (before the stop and after) wrote the same loss
	sort -u out-pre/losses.txt | sort -n | cmp - <(sort -n out-ref/losses.txt)
	[ "$(wc -l <out-ref/losses.txt)" -eq 24 ]
	cmp out-pre/params.rank-0.txt out-ref/params.rank-0.txt
	# the program's metric lines in TensorBoard's files, one per attempt
	tensorboard_check "$dir" 2
}

@test "stork run -- a rank raising at step 3: exit_info names it, its host, the exception and its last frame; the job is over within 15 s; restart.max_restarts=1 completes" {
	program_job fail "" --steps 8 --step-sleep 0.3 --fail-rank 3 --fail-step 3
	run sbatch_wait fail.sh
	[ "$status" -eq 1 ]
	dir=$(ls -d "$WORK"/runs/fail__job=*__task=0)
	info=$dir/exit_info.json
	jq -e '.reason == "rank_failed" and .exit_code == 20' "$info"
	jq -e '.first_failure.rank == 3 and .first_failure.host == "n2" and .first_failure.exit_code == 1' "$info"
	jq -e '.first_failure.error == "RuntimeError: injected failure on rank 3 at step 3"' "$info"
	jq -r .first_failure.traceback_last_frame "$info" | grep -q '^File ".*ddp_train.py", line [0-9]*, in '
	# from the failure to the last launcher's record: the others did not hang
	failed=$(jq .first_failure.timestamp "$info")
	ended=$(stat -c %Y "$info")
	echo "failure to the end of the run: $((ended - ${failed%.*})) s" >&3
	[ $((ended - ${failed%.*})) -le 15 ]
	grep -q 'rank_failed (exit 20): rank 3 on n2 exited with 1: RuntimeError' fail.out
	# one error line, the first failure's; n1 says what the program did on n2,
	# and its ranks' complaints of a lost peer come after the cause, marked
	root=$(grep -n 'error: rank 3 on n2 exited with 1: RuntimeError: injected' fail.out | cut -d: -f1)
	[ "$(grep -c '^storkd: error:' fail.out)" -eq 1 ]
	grep -q "ranks on n1 were ended after the first failure: rank 3 on n2 exited with 1: RuntimeError: injected" fail.out
	! grep -q 'Endpoint timeout' fail.out || false
	lost=$(grep -n 'Connection closed by peer' fail.out | head -1 | cut -d: -f1)
	[ -z "$lost" ] || [ "$lost" -gt "$root" ]
	! grep 'storkd:.*Connection closed by peer' fail.out | grep -qv secondary || false
	# the notice that ended n1's ranks is gone with the run
	[ -z "$(ls -A "$dir"/logs/.end.* 2>/dev/null)" ]

	STORK_ARGS="--set restart.max_restarts=1" program_job again "" --steps 8 --fail-rank 3 --fail-step 3
	run sbatch_wait again.sh
	[ "$status" -eq 0 ]
	dir=$(ls -d "$WORK"/runs/again__job=*__task=0)
	jq -e '.reason == "completed" and (.restarts | length) == 1 and .restarts[0].reason == "rank_failed"' \
		"$dir/exit_info.json"
	[ "$(env_of out-again 3 TORCHELASTIC_RESTART_COUNT)" = 1 ]
	[ "$(wc -l <out-again/losses.txt)" -ge 8 ]
}

@test "stork run -- a rank that stops its heartbeat: reason hang, the silent rank named, every rank's Python stack in its log" {
	STORK_ARGS="--set preempt.hang_timeout=4" program_job hang "" --steps 50 --step-sleep 0.2 \
		--hang-rank 2 --hang-step 4
	run sbatch_wait hang.sh
	[ "$status" -eq 1 ]
	dir=$(ls -d "$WORK"/runs/hang__job=*__task=0)
	jq -e '.reason == "hang" and .exit_code == 21' "$dir/exit_info.json"
	jq -r .message "$dir/exit_info.json" | grep -q 'rank 2 '
	# one node says it found the hang, without blaming a rank; the verdict
	# is the only line that does, and the notice is not left behind
	[ "$(grep -c 'storkd: warning: hang: ' hang.out)" -eq 1 ]
	! grep '^storkd' hang.out | grep -q 'rank [0-9]* stopped first\|cannot tell\|cannot announce' || false
	grep -q '^stork: hang (exit 21): .*rank 2 ' hang.out
	[ -z "$(ls -A "$dir"/logs/.end.* 2>/dev/null)" ]
	grep -q 'in stuck_here' "$dir/logs/rank-002.log"
	for r in 0 1 2 3; do
		grep -q 'most recent call first' "$dir/logs/rank-00$r.log" ||
			{ echo "no stack in rank $r's log" >&2; false; }
	done
}

@test "stork run -- kill -9 of one rank's process: the other ranks on both nodes are gone within 15 s" {
	program_job kill9 "" --steps 400 --step-sleep 0.2
	job=$(submit kill9.sh)
	dir=$(run_dir kill9 "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 3 120
	pid=$(jq -r .pid out-kill9/env.rank-3.json)
	# rank 3 runs on n2, in that node's namespace: its pid is the host's too
	kill -9 "$pid"
	t0=$SECONDS
	wait_job_state "$job" 'FAILED|COMPLETED' 30
	echo "kill -9 to the job's end: $((SECONDS - t0)) s" >&3
	[ $((SECONDS - t0)) -le 15 ]
	for r in 0 1 2; do
		if kill -0 "$(jq -r .pid out-kill9/env.rank-$r.json)" 2>/dev/null; then
			echo "rank $r still runs" >&2
			false
		fi
	done
	jq -e '.first_failure.rank == 3 and .first_failure.signal == "SIGKILL"' "$dir/exit_info.json"
	# a kill that was not for memory stays a plain failure
	jq -e '.reason == "rank_failed" and .exit_code == 20 and
		(.first_failure | has("out_of_memory") | not)' "$dir/exit_info.json"
	job=""
}

@test "stork run -- a rank that allocates past its memory cgroup's limit: the run ends out_of_memory (exit 23) naming the rank, its host, the cgroup, its limit and what the rank held; stork report says what to change" {
	memory_cgroup 100M
	# rank 1 moves into the cgroup, stays a moment (its daemon sees it
	# there), then allocates until the kernel kills it
	cat >oom.py <<-'PY'
	import os, time
	if os.environ["RANK"] == "1":
	    with open(os.environ["OOM_CGROUP"] + "/cgroup.procs", "w") as f:
	        f.write(str(os.getpid()))
	    time.sleep(2)
	    held = []
	    while True:
	        held.append(b"x" * (8 << 20))
	time.sleep(120)
	PY
	cat >oom.sh <<-SCRIPT
	#!/bin/bash
	#SBATCH -N1 --ntasks-per-node=1 -c2 -o oom.out -J oom
	export OOM_CGROUP=$MEM_CGROUP
	echo "node: \$SLURMD_NODENAME"
	srun $STORK run --local-ranks 2 --set run.name=oom --set metrics.sample_s=0.5 -- $PY $PWD/oom.py
	SCRIPT
	run sbatch_wait oom.sh
	cat oom.out
	# the node the job was given (n1 may still be busy with the last test's job)
	local node
	node=$(sed -n 's/^node: //p' oom.out)
	[ -n "$node" ]
	dir=$(ls -d "$WORK"/runs/oom__job=*__task=0)
	jq . "$dir/exit_info.json"
	jq -e --arg cg "$MEM_CGROUP" --arg node "$node" '.reason == "out_of_memory" and .exit_code == 23 and
		.first_failure.rank == 1 and .first_failure.host == $node and
		.first_failure.signal == "SIGKILL" and
		.first_failure.out_of_memory.cgroup == $cg and
		.first_failure.out_of_memory.limit_bytes == 104857600 and
		.first_failure.out_of_memory.held_bytes > 1000000' "$dir/exit_info.json"
	grep -q "^stork: out_of_memory (exit 23): rank 1 on $node was killed by the out-of-memory killer: its memory cgroup $MEM_CGROUP reached its limit of 100.0 MiB (it held [0-9.]* MiB at the last sample)" oom.out
	# the daemon sampled the ranks' memory and CPU into their metrics
	jq -e -s 'map(select(.metric == "host_rss_bytes" and .value > 1000000)) | length > 0' \
		"$dir/logs/rank-000.metrics.jsonl"
	jq -e -s 'map(select(.metric == "cpu_pct")) | length > 0' "$dir/logs/rank-001.metrics.jsonl"
	"$STORK" report --text "$dir" | tee report.txt
	grep -q '^out of memory, to fit: ' report.txt
	"$STORK" report "$dir"
	grep -q 'class="oom"' "$dir/report.html"
	grep -q 'id="cpu-chart"' "$dir/report.html"
}

@test "stork run -- PROGRAM refuses a missing or non-executable program and the engine's keys, before anything starts" {
	run "$STORK" run -- no-such-program-anywhere --x
	[ "$status" -eq 3 ]
	[[ "$output" == *"stork run -- no-such-program-anywhere: no such program in PATH="* ]]
	touch notexec.sh
	run "$STORK" run -- ./notexec.sh
	[ "$status" -eq 3 ]
	[[ "$output" == *"./notexec.sh is not an executable file"* ]]
	printf 'train:\n  steps: 5\nrun:\n  name: x\n' >eng.yaml
	run "$STORK" run eng.yaml --set model.layers=2 -- /bin/true
	[ "$status" -eq 3 ]
	[[ "$output" == *"model.layers (override 'model.layers=2'), train.steps (eng.yaml:2:10)"* ]]
	[ ! -e runs ]
	run "$STORK" run --check -- /bin/true
	[ "$status" -eq 0 ]
	run "$STORK" run --set run.name=ok -- /bin/sh -c 'exit 3'
	[ "$status" -eq 20 ]
	jq -e '.first_failure.exit_code == 3' runs/ok__job=local__task=0/exit_info.json
}

# shell_job NAME SBATCH-LINE RANK.SH-ARGS...: the shell program, 2 nodes x 2 ranks.
shell_job() {
	local name=$1 extra=$2
	shift 2
	printf '#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1 -c2 --open-mode=append -o %s.out -J %s %s\nsrun %s run --local-ranks 2 --set run.name=%s -- %s %s\n' \
		"$name" "$name" "$extra" "$STORK" "$name" "$abs_top_srcdir/t/integration/program/rank.sh" "$*" >"$name.sh"
}

@test "stork run -- a shell program: its environment and logs, its exit code as the failure, USR1 saves, requeued, resumed to the end" {
	shell_job code "" --steps 6 --fail-rank 1 --exit-code 7
	run sbatch_wait code.sh
	[ "$status" -eq 1 ]
	dir=$(ls -d "$WORK"/runs/code__job=*__task=0)
	jq -e '.reason == "rank_failed" and .first_failure.rank == 1 and .first_failure.exit_code == 7 and .first_failure.host == "n1"' \
		"$dir/exit_info.json"
	grep -q '^\[1/1 n1 .*\] rank 1: failing at step 2 with exit code 7$' "$dir/logs/rank-001.log"

	shell_job sh --requeue --steps 40 --sleep 0.25
	job=$(submit sh.sh)
	dir=$(run_dir sh "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 4 60
	scancel --signal=USR1 "$job"
	wait_job_state "$job" COMPLETED 300
	[ "$(job_field "$job" Restarts)" -eq 1 ]
	jq -e '.reason == "preempted_requeued"' "$dir"/exit_info.node-001.requeue-0.json
	for r in 0 1 2 3; do
		log=$dir/logs/rank-00$r.log
		grep -q "\] rank $r of 4 local $((r % 2)) node $((r / 2)) master n1:[0-9]* restart 0$" "$log"
		grep -q "\] rank $r of 4 local $((r % 2)) node $((r / 2)) master n1:[0-9]* restart 1$" "$log"
		grep -q "\] rank $r: pid [0-9]* on .*, stderr$" "$log"
		grep -q "\] rank $r: saved step [0-9]* in $dir/checkpoints/rank-$r.step$" "$log"
		grep -q "\] rank $r: resuming after step" "$log"
		grep -q "\] rank $r: done, 40 steps$" "$log"
	done
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	job=""
}

@test "stork run -- PROGRAM: two srun steps of one job, no run.name: two runs named after the program, the second starts at step 0; run.name given to both makes them one run" {
	local rank_sh=$abs_top_srcdir/t/integration/program/rank.sh
	# between the steps a checkpoint appears in the first run: a second step
	# that shared its directory would resume after step 5
	cat >twostep.sh <<-EOF
	#!/bin/bash
	#SBATCH -N1 -n1 -c2 -o twostep.out
	srun $STORK run --local-ranks 2 -- $rank_sh --steps 3 || exit 1
	for r in 0 1; do echo 5 >"$WORK/runs/rank__job=\${SLURM_JOB_ID}__task=0/checkpoints/rank-\$r.step"; done
	srun $STORK run --local-ranks 2 -- $rank_sh --steps 8
	EOF
	run sbatch_wait twostep.sh
	[ "$status" -eq 0 ]
	first=$(ls -d "$WORK"/runs/rank__job=*__task=0)
	second=$(ls -d "$WORK"/runs/rank.step1__job=*__task=0)
	[ "$(jq -r .reason "$first/exit_info.json")" = completed ]
	[ "$(jq -r .reason "$second/exit_info.json")" = completed ]
	grep -q '\] rank 0 step 0$' "$second/logs/rank-000.log"
	! grep -q 'resuming' "$second/logs/rank-000.log" || false
	grep -q '\] rank 1: done, 8 steps$' "$second/logs/rank-001.log"

	# asked to share (the same run.name), the second step resumes the first's checkpoint
	cat >shared.sh <<-EOF
	#!/bin/bash
	#SBATCH -N1 -n1 -c2 -o shared.out
	srun $STORK run --local-ranks 2 --set run.name=both -- $rank_sh --steps 3 || exit 1
	for r in 0 1; do echo 5 >"$WORK/runs/both__job=\${SLURM_JOB_ID}__task=0/checkpoints/rank-\$r.step"; done
	srun $STORK run --local-ranks 2 --set run.name=both -- $rank_sh --steps 8
	EOF
	run sbatch_wait shared.sh
	[ "$status" -eq 0 ]
	both=$(ls -d "$WORK"/runs/both__job=*__task=0)
	grep -q '\] rank 0: resuming after step 5$' "$both/logs/rank-000.log"
	[ -z "$(ls -d "$WORK"/runs/both.step1__job=* 2>/dev/null)" ]
}

@test "stork bench launch --program prints srun's and stork run's times to every rank's first line" {
	printf '#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=2 -c1 -o bench.out\n%s bench launch --program --repeat 1\n' \
		"$STORK" >bench.sh
	run sbatch_wait bench.sh
	[ "$status" -eq 0 ]
	grep -E '^median over 1 runs, 2 node\(s\) x 2 rank\(s\): srun with the plugin [0-9.]+ s; stork run -- PROGRAM [0-9.]+ s; stork adds -?[0-9.]+ s$' bench.out
	[ -z "$(find . -maxdepth 2 -name 'bench-launch-*')" ]
}

@test "stork run -- PROGRAM: the deadline guard asks the program to save before the job's end, requeues it (timeout_requeued), and the next attempt finishes" {
	fault_injection || skip "needs a build with --enable-fault-injection (STORK_FAULT_JOB_END)"
	STORK_ARGS="--set program.checkpoint_grace=5 --set preempt.deadline_lead=5"
	shell_job guard --requeue --steps 160 --sleep 0.25
	sed -i "s|^srun |export STORK_FAULT_JOB_END=40\nsrun |; s|run.name=guard|run.name=guard $STORK_ARGS|" guard.sh
	job=$(submit guard.sh)
	dir=$(run_dir guard "$job")
	wait_job_state "$job" COMPLETED 240
	[ "$(job_field "$job" Restarts)" -eq 1 ]
	jq -e '.reason == "timeout_requeued"' "$dir"/exit_info.node-000.requeue-0.json
	grep -q 'deadline guard: the job.s end is near: SIGUSR1' guard.out
	grep -q '\] rank 3: resuming after step' "$dir/logs/rank-003.log"
	grep -q '\] rank 3: done, 160 steps$' "$dir/logs/rank-003.log"
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	job=""
}
