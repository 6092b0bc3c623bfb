#!/usr/bin/env bats
# restart.in_place on the test cluster: a node's daemon dies, the other
# node goes on in the same allocation without a requeue and without a
# checkpoint, with the global batch kept.

load helpers
load ../training

STORK=${abs_top_builddir:?set by make check}/launcher/stork

setup() {
	setup_workdir
	docs_data
	# no checkpoint before the last step: going on must not need one
	small_config run.yaml ip 2 64 4 32 50
}

teardown() { cancel_test_job; }

losses() { run_losses "$1" "${2:-000}"; }

# losses_within_1e6 FULL DIR [STEPS [RANK]]: all STEPS (50) of DIR's losses
# (rank RANK's, 000) within 1e-6 relative of run FULL's (the same global
# batch, its gradients added in other groups).
losses_within_1e6() {
	paste <(losses "$1") <(losses "$2" "${4:-000}") | awk -v steps="${3:-50}" '
		{ n++; d = $2 - $4; if (d < 0) d = -d; r = d / $2; if (r > w) w = r }
		END { printf "worst relative difference %.3g over %d steps\n", w, n > "/dev/stderr";
		      exit !(n == steps && w <= 1e-6) }'
}

# first_recovery DIR: the time the first loss cost, from its discovery to
# the next completed step (rank 0's metric recovery).
first_recovery() {
	grep '"metric":"recovery"' "$1/logs/rank-000.metrics.jsonl" | head -n1 |
		sed 's/.*"value":\([^,}]*\).*/\1/'
}

# in_place_job NAME [OVERRIDE...]: a job of 2 nodes x 2 ranks (DP4 unless
# the overrides say otherwise) with restart.in_place (and IP_OPTIONS for
# both sbatch and srun, if set), 0.1 s steps so that
# it is mid-run when the test kills; sets job and dir once it has done 15
# steps on both nodes.
in_place_job() {
	local name=$1
	shift
	export STORK_FAULT_STEP_DELAY=0.1
	cat >"$name.sh" <<-SCRIPT
	#!/bin/bash
	#SBATCH -N2 --ntasks-per-node=1 -c2 -o $name.out ${IP_OPTIONS:-}
	srun ${IP_OPTIONS:-} --mpi=pmix $STORK run run.yaml --local-ranks 2 run.name=$name restart.in_place=true $*
	SCRIPT
	job=$(submit "$name.sh")
	dir=$(run_dir "$name" "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 15 60
}

# full_then_in_place NAME STEPS [OVERRIDE...]: the uninterrupted run of
# STEPS steps on one node of 4 ranks (runs/full..., in $full), then job
# NAME of the same run with restart.in_place (in_place_job).
full_then_in_place() {
	local name=$1 steps=$2
	shift 2
	small_config run.yaml ip 2 64 4 32 "$steps"
	"$STORK" run run.yaml --local-ranks 4 run.name=full "$@" >/dev/null
	full=runs/full__job=local__task=0
	in_place_job "$name" "$@"
}

# n2_killed_and_gone_on NAME: kill -9 n2's storkd in job NAME (sets killed,
# the time); the job completes without a restart and without reading a
# checkpoint (none existed before the end), n1 having gone on alone.
n2_killed_and_gone_on() {
	local name=$1
	killed=$(date +%s.%N)
	kill_n2_daemon
	wait_job_state "$job" 'COMPLETED|FAILED' 180
	cat "$name.out"
	[ "$(job_field "$job" JobState)" = COMPLETED ]
	[ "$(job_field "$job" Restarts)" = 0 ]
	! grep -q 'resumed from' "$name.out" || false
	grep -q 'n2 lost after step [1-9][0-9]* (storkd died of SIGKILL): going on without it on 2 ranks, train.grad_accum 1 -> 2 keeps the global batch' "$name.out"
}

# kill_daemon K: kill -9 node K's storkd.
kill_daemon() {
	local pid
	pid=$(jq -r ".nodes[$1].pid" "$dir/config/slurm_env.json")
	[ -n "$pid" ] && [ "$pid" != null ]
	kill -9 "$pid"
}

# kill_n2_daemon: kill -9 node 1's storkd (on n2).
kill_n2_daemon() { kill_daemon 1; }

@test "restart.in_place: kill -9 of n2's storkd mid-run; n1 goes on in the same job without a checkpoint, the losses those of an uninterrupted DP4 run within 1e-6; the loss is in the output, the metrics and exit_info" {
	fault_injection || skip "needs --enable-fault-injection"
	full_then_in_place ip 50
	n2_killed_and_gone_on ip
	info=$dir/exit_info.json
	cat "$info"
	[ "$(jq -r .reason "$info")" = completed ]
	[ "$(jq -r '.nodes_left | length' "$info")" -eq 1 ]
	[ "$(jq -r '.nodes_left[0].host' "$info")" = n2 ]
	[ "$(jq -r '.nodes_left[0].why' "$info")" = "storkd died of SIGKILL" ]
	[ "$(jq -r '.nodes_left[0].after_step >= 15' "$info")" = true ]
	# the membership row and the time the loss cost, from the kill's
	# discovery to the next completed step
	m=$dir/logs/rank-000.metrics.jsonl
	grep '"metric":"membership"' "$m" | grep -q '"lost":"n2"'
	recovery=$(first_recovery "$dir")
	echo "time lost to the failure: $recovery s" >&3
	awk -v s="$recovery" 'BEGIN { exit !(s > 0 && s < 10) }'
	[ "$(losses "$dir" | wc -l)" -eq 50 ]
	losses_within_1e6 "$full" "$dir"
	# the regroup's files are gone with the run
	[ -z "$(find "$dir/logs" -name '.member*' -o -name '.regroup*' -o -name '.gone*')" ]
	# the report: a line, a marker on the loss chart and a list entry
	"$STORK" report --text "$dir" | grep -E 'node lost: n2 after step [1-9][0-9]* \(storkd died of SIGKILL\); 2 ranks went on, the failure cost [0-9.]+ s'
	"$STORK" report "$dir" -o ip.html
	grep -q '<g class="member-marker" data-step="[1-9][0-9]*">' ip.html
	grep -q '<ul class="members">' ip.html
	check_report_html ip.html
	nodes_idle
}

@test "restart.in_place: kill -9 of node 0's storkd (n1); n2 leads the regroup and goes on, its launcher writes exit_info, then n1 rejoins; the losses those of an uninterrupted DP4 run within 1e-6" {
	fault_injection || skip "needs --enable-fault-injection"
	full_then_in_place lead 80
	kill_daemon 0
	wait_job_state "$job" 'COMPLETED|FAILED' 180
	cat lead.out
	[ "$(job_field "$job" JobState)" = COMPLETED ]
	[ "$(job_field "$job" Restarts)" = 0 ]
	! grep -q 'resumed from' lead.out || false
	grep -q 'n1 lost after step [1-9][0-9]* (storkd died of SIGKILL): going on without it on 2 ranks, train.grad_accum 1 -> 2 keeps the global batch' lead.out
	# n2's launcher (1) summarised: exit_info names n1 as the node that left
	info=$dir/exit_info.json
	cat "$info"
	[ "$(jq -r .reason "$info")" = completed ]
	[ "$(jq -r '.nodes_left[0].host' "$info")" = n1 ]
	[ "$(jq -r '.nodes_left[0].node' "$info")" -eq 0 ]
	grep -q '^stork: completed (exit 0)' lead.out
	# the lead brought node 0 back on n1, which came in again
	grep -q 'restart.rejoin: a launcher starts on n1 again, in a job step of its own' lead.out
	grep -q 'n1 is back in the run (restart.rejoin): 4 ranks go on, train.grad_accum 2 -> 1' lead.out
	# rank 2 (n2's first) trained every step, rank 0 of the world from the loss
	# to n1's return; rank-000's file goes on from the return
	[ "$(losses "$dir" 002 | wc -l)" -eq 80 ]
	losses_within_1e6 "$full" "$dir" 80 002
	[ "$(losses "$dir" | tail -n1 | cut -d' ' -f1)" -eq 80 ]
	# the report reads the run from a rank that saw all of it
	"$STORK" report --text "$dir" | grep -E 'node lost: n1 after step [1-9][0-9]*'
	"$STORK" report --text "$dir" | grep -E '^steps: 80;'
	"$STORK" report --text "$dir" | grep -E '4 rank\(s\) on 2 node\(s\), rendezvous'
	[ -f "$dir/metrics/summary.csv" ]
	nodes_idle
}

# params_diff A B: the relative difference of two llm.c model files'
# parameters (stork export): |A - B| / |A| over the whole vector.
params_diff() {
	/usr/bin/python3 - "$1" "$2" <<-'PY'
	import array, math, sys
	def params(path):
	    a = array.array("f")
	    with open(path, "rb") as f:
	        f.seek(256 * 4)
	        a.frombytes(f.read())
	    return a
	a, b = params(sys.argv[1]), params(sys.argv[2])
	assert len(a) == len(b) > 0
	print(math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)) / sum(x * x for x in a)))
	PY
}

@test "restart.rejoin: kill -9 of n2's storkd; n1 goes on, then a launcher node 0 starts on n2 again (a job step of its own) comes back in with a live replica's state, DP4 again within 30 s of the kill; losses those of an uninterrupted run within 1e-6, final parameters as close to its as a run that only grouped its gradients otherwise" {
	fault_injection || skip "needs --enable-fault-injection"
	full_then_in_place back 80
	n2_killed_and_gone_on back
	grep -q 'restart.rejoin: a launcher starts on n2 again, in a job step of its own' back.out
	grep -q 'n2 is back in the run (restart.rejoin): 4 ranks go on, train.grad_accum 2 -> 1' back.out
	grep -q 'restart.rejoin: n2 is back; 4 ranks go on from step [1-9][0-9]*' back.out
	# the new step of the job ran the launcher
	sacct -j "$job" -n -P -o JobID,NodeList | grep -q "^$job\.1|n2$"
	# a live replica sent the state: the rejoined rank 2 logs it, no checkpoint existed
	grep -q 'this spare is rank 2 now' "$dir/logs/rank-002.log"
	grep -q "step [0-9]* was applied on some replicas only\|replica [0-9]*'s state taken" "$dir/logs/rank-002.log"
	# left, then joined: the join's row in the metrics, DP4 again within 30 s of the kill
	m=$dir/logs/rank-000.metrics.jsonl
	grep '"metric":"membership"' "$m"
	joined=$(grep '"metric":"membership"' "$m" | jq -r 'select(.event == "joined") | "\(.ts) \(.came) \(.dp) \(.grad_accum)"')
	echo "joined: $joined, killed at $killed" >&3
	read -r ts came dp accum <<<"$joined"
	[ "$came" = n2 ] && [ "$dp" -eq 4 ] && [ "$accum" -eq 1 ]
	awk -v j="$ts" -v k="$killed" 'BEGIN { printf "DP4 again %.1f s after the kill\n", j - k > "/dev/stderr"; exit !(j - k > 0 && j - k < 30) }'
	# the rejoined ranks trained: rank 2's losses go on to the end
	[ "$(losses "$dir" 002 | tail -n1 | cut -d' ' -f1)" -eq 80 ]
	[ "$(losses "$dir" | wc -l)" -eq 80 ]
	losses_within_1e6 "$full" "$dir" 80
	# the final parameters: as close to the uninterrupted run's as those of
	# a run that never failed but added its gradients in the same other
	# groups (2 replicas x train.grad_accum 2: float sums in another order,
	# which Adam carries into parameters near 0); the rejoin adds nothing
	"$STORK" run run.yaml --local-ranks 2 run.name=dp2 train.grad_accum=2 >/dev/null
	for r in full dp2; do
		"$STORK" export --format llmc "runs/${r}__job=local__task=0/checkpoints/latest" "$r.bin"
	done
	"$STORK" export --format llmc "$dir/checkpoints/latest" back.bin
	regrouped=$(params_diff full.bin dp2.bin)
	rejoined=$(params_diff full.bin back.bin)
	echo "parameters: rejoined run $rejoined, regrouped run $regrouped (relative to the uninterrupted run)" >&3
	awk -v a="$rejoined" -v b="$regrouped" 'BEGIN { exit !(a <= 1e-5 && a <= 1.5 * b) }'
	# the report marks the return
	"$STORK" report --text "$dir" | grep -E 'node back: n2 at step [1-9][0-9]*; 4 ranks went on'
	[ -z "$(find "$dir/logs" -name '.ready*')" ]
	nodes_idle
}

@test "restart.in_place with parallel.zero: 1: kill -9 of n2's storkd; n1 goes on with n2's parts of the optimizer state from the copies it keeps, n2 rejoins and gets its parts back; the losses those of an uninterrupted ZeRO-1 run within 1e-6" {
	fault_injection || skip "needs --enable-fault-injection"
	full_then_in_place z 80 parallel.zero=1
	n2_killed_and_gone_on z
	# each rank on n1 kept the part of a rank on n2 (half the group away)
	grep -q "keeps a copy of data-parallel rank 2's part of the ZeRO-1 optimizer state" "$dir/logs/rank-000.log"
	grep -q "keeps a copy of data-parallel rank 3's part of the ZeRO-1 optimizer state" "$dir/logs/rank-001.log"
	grep -q 'n2 is back in the run (restart.rejoin): 4 ranks go on, train.grad_accum 2 -> 1' z.out
	m=$dir/logs/rank-000.metrics.jsonl
	[ "$(grep '"metric":"membership"' "$m" | jq -r 'select(.event == "joined") | .dp')" = 4 ]
	[ "$(losses "$dir" 002 | tail -n1 | cut -d' ' -f1)" -eq 80 ]
	[ "$(losses "$dir" | wc -l)" -eq 80 ]
	losses_within_1e6 "$full" "$dir" 80
	# the last checkpoint, written by the four new parts, reads as any
	# ZeRO-1 checkpoint; its parameters near the uninterrupted run's
	"$STORK" export --format llmc "$dir/checkpoints/latest" z.bin
	"$STORK" export --format llmc "$full/checkpoints/latest" full.bin
	diff=$(params_diff full.bin z.bin)
	echo "parameters: $diff relative to the uninterrupted run" >&3
	awk -v a="$diff" 'BEGIN { exit !(a <= 1e-5) }'
	nodes_idle
}

@test "restart.in_place, tensor 2 x data 2 (a replica per node): kill -9 of n2's storkd; n1's replica goes on (train.grad_accum 1 -> 2) with the uninterrupted run's losses within 1e-6" {
	fault_injection || skip "needs --enable-fault-injection"
	full_then_in_place tp 50 parallel.tensor=2
	kill_n2_daemon
	wait_job_state "$job" 'COMPLETED|FAILED' 120
	cat tp.out
	[ "$(job_field "$job" JobState)" = COMPLETED ]
	grep -q 'layout: dp 2 x tp 2 x pp 1' tp.out
	grep -q 'n2 lost after step [1-9][0-9]* (storkd died of SIGKILL): going on without it on 2 ranks, train.grad_accum 1 -> 2' tp.out
	grep -q 'layout: dp 1 x tp 2 x pp 1' tp.out
	# restart.rejoin: n2's replica comes back, with its tensor-parallel group
	grep -q 'n2 is back in the run (restart.rejoin): 4 ranks go on, train.grad_accum 2 -> 1' tp.out
	[ "$(grep -c 'layout: dp 2 x tp 2 x pp 1' tp.out)" -eq 2 ]
	[ "$(losses "$dir" | wc -l)" -eq 50 ]
	losses_within_1e6 "$full" "$dir"
	nodes_idle
}

@test "restart.in_place, one daemon per task (2 nodes x 2 tasks x 1 rank): kill -9 of one rank's daemon; the 3 others go on (train.grad_accum 3 -> 4) with the uninterrupted run's losses within 1e-6" {
	fault_injection || skip "needs --enable-fault-injection"
	sed -i 's/seq_len: 32/seq_len: 32\n  grad_accum: 3/' run.yaml
	"$STORK" run run.yaml --local-ranks 4 run.name=full >/dev/null
	full=runs/full__job=local__task=0
	export STORK_FAULT_STEP_DELAY=0.1
	cat >task.sh <<-SCRIPT
	#!/bin/bash
	#SBATCH -N2 --ntasks-per-node=2 -c1 -o task.out
	srun --mpi=pmix $STORK run run.yaml --local-ranks 1 run.name=task restart.in_place=true parallel.merge_tasks=false
	SCRIPT
	job=$(submit task.sh)
	dir=$(run_dir task "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 15 60
	[ "$(jq -r '.nodes[3].host' "$dir/config/slurm_env.json")" = n2 ]
	kill -9 "$(jq -r '.nodes[3].pid' "$dir/config/slurm_env.json")"
	wait_job_state "$job" 'COMPLETED|FAILED' 120
	cat task.out
	[ "$(job_field "$job" JobState)" = COMPLETED ]
	grep -q 'n2 lost after step [1-9][0-9]* (storkd died of SIGKILL): going on without it on 3 ranks, train.grad_accum 3 -> 4' task.out
	[ "$(jq -r '.nodes_left[0].node' "$dir/exit_info.json")" -eq 3 ]
	[ "$(losses "$dir" | wc -l)" -eq 50 ]
	losses_within_1e6 "$full" "$dir"
	nodes_idle
}

@test "restart.spares: 4 launchers of 1 rank, the last a spare; kill -9 of launcher 2's daemon; the spare takes its place with the state of a live replica, and the losses are bit for bit those of an uninterrupted 3-rank run" {
	fault_injection || skip "needs --enable-fault-injection"
	"$STORK" run run.yaml --local-ranks 3 run.name=full >/dev/null
	full=runs/full__job=local__task=0
	export STORK_FAULT_STEP_DELAY=0.1
	cat >spare.sh <<-SCRIPT
	#!/bin/bash
	#SBATCH -N2 --ntasks-per-node=2 -c1 -o spare.out
	srun --mpi=pmix $STORK run run.yaml --local-ranks 1 run.name=spare restart.in_place=true restart.spares=1 parallel.merge_tasks=false
	SCRIPT
	job=$(submit spare.sh)
	dir=$(run_dir spare "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 15 60
	grep -q 'launcher 3 of 4 on n2: a spare of 1 rank(s)' spare.out
	kill -9 "$(jq -r '.nodes[2].pid' "$dir/config/slurm_env.json")"
	wait_job_state "$job" 'COMPLETED|FAILED' 120
	cat spare.out
	[ "$(job_field "$job" JobState)" = COMPLETED ]
	grep -q 'n2 lost after step [1-9][0-9]* (storkd died of SIGKILL): n2, a spare, takes its place; 3 ranks go on' spare.out
	info=$dir/exit_info.json
	cat "$info"
	[ "$(jq -r .reason "$info")" = completed ]
	[ "$(jq -r '.nodes_left[0].node' "$info")" -eq 2 ]
	# back to the full layout within 30 s of the kill's discovery
	m=$(grep '"metric":"membership"' "$dir/logs/rank-000.metrics.jsonl")
	echo "$m"
	echo "$m" | grep -q '"ranks":3'
	v=${m#*\"value\":}
	awk -v s="${v%%,*}" 'BEGIN { exit !(s < 30) }'
	# the spare's rank 2 goes on in rank-002's files, where the lost one's ended
	grep -q 'this spare is rank 2 now' "$dir/logs/rank-003.log"
	[ "$(losses "$dir" 002 | wc -l)" -eq 50 ]
	diff <(losses "$full") <(losses "$dir")
	nodes_idle
}

@test "restart.spares: a spare never needed ends with the run, which completes" {
	cat >idle.sh <<-SCRIPT
	#!/bin/bash
	#SBATCH -N2 --ntasks-per-node=2 -c1 -o idle.out
	srun --mpi=pmix $STORK run run.yaml --local-ranks 1 run.name=idle restart.in_place=true restart.spares=1 parallel.merge_tasks=false
	SCRIPT
	run sbatch_wait idle.sh
	cat idle.out
	[ "$status" -eq 0 ]
	dir=$(ls -d "$WORK"/runs/idle__job=*__task=0)
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	[ "$(jq -r .message "$dir/exit_info.node-003.json")" = "a spare, not needed: the run ended without needing this spare" ]
	[ "$(losses "$dir" | wc -l)" -eq 50 ]
}

# Slurm ends a lost node's task as killed: srun exits 137 and the job is
# FAILED in Slurm's books, while the run itself completed (exit_info.json).
@test "restart.in_place: scontrol update nodename=n2 state=down mid-run (sbatch and srun --no-kill); n1 goes on without waiting out restart.in_place_wait and the run completes" {
	fault_injection || skip "needs --enable-fault-injection"
	IP_OPTIONS=--no-kill in_place_job down
	scontrol update nodename=n2 state=down reason=in_place_test
	wait_job_state "$job" 'COMPLETED|FAILED' 120
	scontrol update nodename=n2 state=resume || true
	cat down.out
	echo "job state $(job_field "$job" JobState), exit code $(job_field "$job" ExitCode)" >&3
	grep -q 'n2 lost after step [1-9][0-9]* (storkd died with its node: Slurm took n2 away)' down.out
	recovery=$(first_recovery "$dir")
	echo "time lost to the failure: $recovery s" >&3
	awk -v s="$recovery" 'BEGIN { exit !(s > 0 && s < 10) }'
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	[ "$(losses "$dir" | wc -l)" -eq 50 ]
}

@test "restart.in_place with one replica (tensor 2 x pipeline 2): nothing can go on; the run ends rank_failed naming n2, as without it" {
	fault_injection || skip "needs --enable-fault-injection"
	sed -i 's/seq_len: 32/seq_len: 32\n  grad_accum: 2/' run.yaml
	in_place_job one parallel.tensor=2 parallel.pipeline=2
	kill_n2_daemon
	wait_job_state "$job" 'COMPLETED|FAILED' 120
	cat one.out
	[ "$(job_field "$job" JobState)" = FAILED ]
	grep -q 'cannot go on without the lost node(s)' one.out
	info=$dir/exit_info.json
	cat "$info"
	[ "$(jq -r .reason "$info")" = rank_failed ]
	[ "$(jq -r .first_failure.host "$info")" = n2 ]
	[ "$(jq -r .first_failure.signal "$info")" = SIGKILL ]
	nodes_idle
}
