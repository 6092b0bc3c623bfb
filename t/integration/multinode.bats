#!/usr/bin/env bats
# `srun stork run` across the two nodes of the test cluster: rendezvous,
# hierarchical collectives, the run directory (issue "srun stork run").

load helpers
load ../training

STORK=${abs_top_builddir:?set by make check}/launcher/stork

setup() {
	setup_workdir
	docs_data
	small_config run.yaml mn 2 64 4 32 50
	sed -i 's/every: 0/every: 25/' run.yaml
	# no preflight key: every job here runs the preflight as a user's does
	# (auto: jobs of two or more nodes)
}

losses() { run_losses "$1" "${2:-000}"; }

# The 3-node preflight test's own cluster stops whatever the test's outcome.
teardown() {
	[[ ! -d "$WORK/tc3" ]] || STORK_TESTCLUSTER_PORT=17880 \
		"$abs_top_builddir/contrib/testcluster/stork-testcluster" stop "$WORK/tc3" >/dev/null 2>&1 || true
}

# two_node_script NAME MPI [SBATCH-OPTION...]: NAME.sh, a job of 2 nodes x
# 1 launcher x 2 ranks training run.yaml as run NAME (with the overrides in
# RUN_ARGS, if set).
two_node_script() {
	local name=$1 mpi=$2
	shift 2
	{
		echo '#!/bin/bash'
		echo "#SBATCH -N2 --ntasks-per-node=1 -c2 -o $name.out $*"
		echo "srun --mpi=$mpi $STORK run run.yaml --local-ranks 2 run.name=$name ${RUN_ARGS:-}"
	} >"$name.sh"
}

# two_node_job NAME MPI: sbatch such a job and wait for it.
two_node_job() {
	two_node_script "$1" "$2"
	run sbatch_wait "$1.sh"
	cat "$1.out"
	[ "$status" -eq 0 ]
	DIR=$(ls -d "$WORK"/runs/"$1"__job=*__task=0)
}

@test "2 nodes x 2 ranks (PMIx) match a 1-node 4-rank run within 1e-6 relative; the run directory is complete" {
	two_node_job pm pmix
	"$STORK" run run.yaml --local-ranks 4 run.name=flat >/dev/null
	flat=runs/flat__job=local__task=0
	[ "$(losses "$DIR" | wc -l)" -eq 50 ]
	paste <(losses "$flat") <(losses "$DIR") | awk '
		{ n++; d = $2 - $4; if (d < 0) d = -d; r = d / $2; if (r > w) w = r; if (d == 0) same++ }
		END { printf "worst relative difference %.3g over %d steps, %d bitwise equal\n", w, n, same > "/dev/stderr";
		      exit !(n == 50 && w <= 1e-6) }'
	grep -q '"rendezvous": "pmix"' "$DIR/config/slurm_env.json"
	grep -q '"world_size": 4' "$DIR/config/slurm_env.json"
	grep -q '"host": "n1"' "$DIR/config/slurm_env.json"
	grep -q '"host": "n2"' "$DIR/config/slurm_env.json"
	[ -s "$DIR/config/stork.yaml" ]
	[ -s "$DIR/provenance/build.json" ]
	for r in 000 001 002 003; do
		[ -s "$DIR/logs/rank-$r.log" ]
		# every line prefixed (a negated command mid-test would not fail it)
		if grep -vE '^\[[0-9]+/[0-9]+ n[12] [0-9T:.-]+Z\] ' "$DIR/logs/rank-$r.log"; then false; fi
		grep -q '"metric":"train_loss"' "$DIR/logs/rank-$r.metrics.jsonl"
	done
	grep -q '^\[2/0 n2 ' "$DIR/logs/rank-002.log"
	grep -q '"reason": "completed"' "$DIR/exit_info.json"
	[ -s "$DIR/exit_info.node-001.json" ]
	[ "$(readlink "$DIR/checkpoints/latest")" = step_00000050 ]
	[ "$(head -1 "$DIR/metrics/summary.csv")" = "metric,minute,count,p50,p95,mean" ]
	# the job's row from slurmdbd, with what it was given (2 nodes x 2 cores)
	job=${DIR##*__job=}
	job=${job%%__*}
	cat "$DIR/metrics/sacct.csv"
	[ "$(head -1 "$DIR/metrics/sacct.csv")" = "JobID|State|Elapsed|MaxRSS|ReqMem|AllocTRES|ExitCode" ]
	grep -Eq "^$job\|RUNNING\|[^|]*\|[^|]*\|[^|]*\|[^|]*cpu=4,[^|]*node=2\|" "$DIR/metrics/sacct.csv"
	# Every JSON file both nodes left, with the fields stork(1) documents:
	# exit_info.json and each node's two, slurm_env.json, three provenance
	# files, manifest and state of steps 25 and 50.
	run check_run_json "$DIR"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" -eq 13 ]
	nodes_idle
}

@test "a NaN at step 7 on node 2: diverged naming the step and the rank, latest the last finite checkpoint; with rollback the run completes" {
	fault_injection || skip "needs --enable-fault-injection"
	sed -i 's/every: 25/every: 5/' run.yaml
	export STORK_FAULT_NAN_STEP=7 STORK_FAULT_NAN_RANK=3
	two_node_script nan pmix
	run sbatch_wait nan.sh
	cat nan.out
	[ "$status" -ne 0 ]
	dir=$(ls -d "$WORK"/runs/nan__job=*__task=0)
	cat "$dir/exit_info.json"
	grep -q '"reason": "diverged"' "$dir/exit_info.json"
	grep -q '"exit_code": 14' "$dir/exit_info.json"
	grep -q "step 7: the gradient norm is not finite (nan), seen in rank 3's loss first" "$dir/exit_info.json"
	[ "$(readlink "$dir/checkpoints/latest")" = step_00000005 ]
	RUN_ARGS=train.on_nonfinite=rollback two_node_job nanrb pmix
	grep -q '"reason": "completed"' "$DIR/exit_info.json"
	grep -q 'rolled back to step 5 after step 7 diverged' nanrb.out
	[ "$(losses "$DIR" | wc -l)" -eq 50 ]
	nodes_idle
}

@test "the TCP rendezvous (no PMIx) trains the same run bit for bit" {
	two_node_job pm pmix
	pmix_dir=$DIR
	two_node_job tcp none
	grep -q '"rendezvous": "tcp"' "$DIR/config/slurm_env.json"
	[ "$(losses "$pmix_dir" | wc -l)" -eq 50 ]
	[ "$(losses "$DIR" | wc -l)" -eq 50 ]
	diff <(losses "$pmix_dir") <(losses "$DIR")
}

# overlap_matches NAME [OVERRIDE...]: a two-node job NAME with the overrides
# and job NAMEo with parallel.overlap too give ranks 0 and 3 the same losses,
# 50 steps, bit for bit; DIR is the overlapped run's.
overlap_matches() {
	local name=$1 after
	shift
	RUN_ARGS="$*" two_node_job "$name" pmix
	after=$DIR
	RUN_ARGS="$* parallel.overlap=true" two_node_job "${name}o" pmix
	[ "$(losses "$after" | wc -l)" -eq 50 ]
	diff <(losses "$after") <(losses "$DIR")
	diff <(losses "$after" 003) <(losses "$DIR" 003)
	grep -q '"reason": "completed"' "$DIR/exit_info.json"
}

@test "parallel.overlap on 2 nodes x 2 ranks, DP4 and PP2xDP2: each layer all-reduced during the backward pass (UCX between the nodes, beside the stages' transfers) gives the same losses bit for bit" {
	overlap_matches dp
	grep -q "parallel.overlap: each layer's gradients are all-reduced" "$DIR/logs/rank-003.log"
	[ "$(grep -c '"metric":"grad_sync_wait_ms"' "$DIR/logs/rank-002.metrics.jsonl")" -eq 50 ]
	overlap_matches pp parallel.pipeline=2 train.grad_accum=2
	nodes_idle
}

@test "a launcher that never starts on the second node: rendezvous_timeout naming it" {
	cat >late.sh <<-SCRIPT
	#!/bin/bash
	#SBATCH -N2 --ntasks-per-node=1 -c2 -o late.out
	srun --mpi=none bash -c 'if [ \$SLURM_PROCID = 1 ]; then sleep 20; else exec $STORK run run.yaml run.name=late run.rendezvous_timeout=4; fi'
	SCRIPT
	t0=$SECONDS
	run sbatch_wait late.sh
	cat late.out
	dir=$(ls -d "$WORK"/runs/late__job=*__task=0)
	grep -q '"reason": "rendezvous_timeout"' "$dir/exit_info.json"
	grep -q '"exit_code": 22' "$dir/exit_info.json"
	grep -q 'launcher 1 (n2)' "$dir/exit_info.json"
	grep -q 'rendezvous' late.out
}

# kill_node1_daemon JOB DIR: once job JOB (run directory DIR) has done 10
# steps, kill -9 the storkd of node 1 (n2); the job must end within 20 s with
# reason rank_failed and SIGKILL in its exit_info.json.
kill_node1_daemon() {
	local job=$1 dir=$2 pid t0
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 10 60
	pid=$(awk '/"node_rank": 1,/ { on = 1 } on && /"pid":/ { gsub(/[^0-9]/, ""); print; exit }' \
		"$dir/config/slurm_env.json")
	[ -n "$pid" ]
	t0=$SECONDS
	kill -9 "$pid"
	wait_job_state "$job" 'COMPLETED|FAILED' 60
	echo "the job ended $((SECONDS - t0)) s after the kill" >&3
	((SECONDS - t0 <= 20))
	cat "$dir/exit_info.json"
	grep -q '"reason": "rank_failed"' "$dir/exit_info.json"
	grep -q '"signal": "SIGKILL"' "$dir/exit_info.json"
}

@test "kill -9 of one node's storkd: rank_failed naming that host and SIGKILL; the other node stops within seconds" {
	sed -i 's/steps: 50/steps: 100000/' run.yaml
	two_node_script kill pmix
	job=$(submit kill.sh)
	dir=$(run_dir kill "$job")
	kill_node1_daemon "$job" "$dir"
	grep -qE '"last_step": [1-9][0-9]*,' "$dir/exit_info.json"
	grep -q '"host": "n2"' "$dir/exit_info.json"
	nodes_idle
}

@test "restart.max_restarts: kill -9 of node 2's storkd mid-run restarts the daemons in the same job from the latest checkpoint; the run completes with the uninterrupted run's losses" {
	fault_injection || skip "needs --enable-fault-injection"
	sed -i 's/every: 25/every: 10/' run.yaml
	two_node_job full pmix
	full=$DIR
	export STORK_FAULT_STEP_DELAY=0.1
	RUN_ARGS=restart.max_restarts=2 two_node_script rs pmix
	job=$(submit rs.sh)
	dir=$(run_dir rs "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 15 60
	pid=$(jq -r '.nodes[1].pid' "$dir/config/slurm_env.json")
	[ -n "$pid" ]
	kill -9 "$pid"
	wait_job_state "$job" 'COMPLETED|FAILED' 120
	cat rs.out
	[ "$(job_field "$job" JobState)" = COMPLETED ]
	[ "$(job_field "$job" Restarts)" = 0 ] # the same allocation, no requeue
	grep -q 'resumed from .*step_000000[1-9]0 at step [1-9]0' rs.out
	grep -q '(rendezvous: tcp' rs.out
	info=$dir/exit_info.json
	cat "$info"
	[ "$(jq -r .reason "$info")" = completed ]
	[ "$(jq -r '.restarts | length' "$info")" -eq 1 ]
	[ "$(jq -r '.restarts[0].reason' "$info")" = rank_failed ]
	[ "$(jq -r '.restarts[0].first_failure.host' "$info")" = n2 ]
	[ "$(jq -r '.restarts[0].first_failure.signal' "$info")" = SIGKILL ]
	[ "$(losses "$dir" | wc -l)" -eq 50 ]
	diff <(losses "$full") <(losses "$dir")
	run check_run_json "$dir"
	echo "$output"
	[ "$status" -eq 0 ]
	nodes_idle
}

# lost_job NAME: a --nodes=1-2 --requeue job of restart.max_restarts=1 on
# both nodes, at step 15 (0.25 s steps: the 35 left outlast killing a node
# on a loaded machine); sets job and dir.
lost_job() {
	sed -i 's/every: 25/every: 10/' run.yaml
	export STORK_FAULT_STEP_DELAY=0.25
	cat >"$1.sh" <<-SCRIPT
	#!/bin/bash
	#SBATCH -N1-2 -c2 --exclusive --requeue -o $1.out --open-mode=append
	srun --ntasks-per-node=1 --mpi=pmix $STORK run run.yaml --local-ranks 2 run.name=$1 restart.max_restarts=1 run.rendezvous_timeout=10 ${LOST_ARGS:-}
	SCRIPT
	job=$(submit "$1.sh")
	dir=$(run_dir "$1" "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 15 60
	[ "$(jq '.nodes | length' "$dir/config/slurm_env.json")" -eq 2 ]
}

# back_on_n1 NAME: the job came back once, on n1 alone, kept its global
# batch and completed every step.
back_on_n1() {
	cat "$1.out"
	[ "$(job_field "$job" Restarts)" = 1 ]
	[ "$(job_field "$job" NodeList)" = n1 ]
	grep -q "elastic: 2 data-parallel replica(s) now: train.grad_accum 1 -> 2 keeps the checkpoint's global batch of 16 sequences" "$1.out"
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	[ "$(jq -r .restart_count "$dir/exit_info.json")" -eq 1 ]
	[ "$(losses "$dir" | wc -l)" -eq 50 ]
}

@test "a launcher lost for good: the restart's rendezvous misses it, the job is requeued without its node and completes on the other node (--nodes=1-2), keeping the global batch" {
	fault_injection || skip "needs --enable-fault-injection"
	# with a node-local tier: n1's is of the 2-node layout, so the job resumes from the run directory
	LOST_ARGS="checkpoint.local_dir=$WORK/local" lost_job lost
	# node 2's launcher and daemon die; the node stays up, the launcher never comes back
	pid=$(jq -r '.nodes[1].pid' "$dir/config/slurm_env.json")
	launcher=$(ps -o ppid= -p "$pid" | tr -d ' ')
	[ -n "$launcher" ]
	kill -9 "$launcher" "$pid"
	wait_job_state "$job" COMPLETED 300
	back_on_n1 lost
	[ "$(job_field "$job" ExcNodeList)" = n2 ]
	rec=$dir/exit_info.node-000.requeue-0.restart-1.json
	[ "$(jq -r .reason "$rec")" = node_lost_requeued ]
	[[ "$(jq -r .message "$rec")" == *"node(s) n2 did not come back to the rendezvous of restart 1"* ]]
	grep -q "checkpoint.local_dir: the run directory's checkpoint is the one to resume from (the node-local tiers hold none complete on every node)" lost.out
	grep -q "resumed from $dir/checkpoints/step_000000[1-4]0 at step" lost.out
	nodes_idle
}

@test "checkpoint.local_dir on 2 nodes: a storkd killed after a checkpoint only the nodes hold, the restart in the allocation resumes from the node-local tiers and completes" {
	fault_injection || skip "needs --enable-fault-injection"
	sed -i 's/every: 25/every: 5/' run.yaml
	export STORK_FAULT_STEP_DELAY=0.1
	RUN_ARGS="restart.max_restarts=1 checkpoint.local_dir=$WORK/local checkpoint.persist_every=4" \
		two_node_script tier pmix
	job=$(submit tier.sh)
	dir=$(run_dir tier "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 27 120
	# two tiers, one per host, each with its node's two shards
	tiers=("$WORK"/local/stork-checkpoints."$job".*.n[12])
	[ "${#tiers[@]}" -eq 2 ] && [ -d "${tiers[0]}" ] && [ -d "${tiers[1]}" ]
	ls "$WORK"/local/stork-checkpoints."$job".*.n2/step_00000025/shard-0000[23].bin
	kill -9 "$(jq -r '.nodes[1].pid' "$dir/config/slurm_env.json")"
	wait_job_state "$job" COMPLETED 300
	cat tier.out
	grep -q "checkpoint.local_dir: resuming from the node-local tier's step [23][05], newer than the run directory's step 20" tier.out
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	[ "$(losses "$dir" | sort -un | wc -l)" -eq 50 ]
}

@test "a node killed with everything on it: the --nodes=1-2 job comes back on the other node and completes, keeping the global batch" {
	fault_injection || skip "needs --enable-fault-injection"
	lost_job dead
	# slurmd, slurmstepd, launcher, daemon: Slurm's NODE_FAIL requeue or
	# Stork's (whichever sees it first) brings the job back without n2
	"$abs_top_builddir/contrib/testcluster/stork-testcluster" kill-node n2
	wait_job_state "$job" COMPLETED 300
	"$abs_top_builddir/contrib/testcluster/stork-testcluster" start-node n2
	back_on_n1 dead
	wait_nodes_idle 120
}

# net_bytes RUN_DIR: the bytes every rank sent to other nodes, summed over the run.
net_bytes() {
	cat "$1"/logs/rank-*.metrics.jsonl | jq -s '[.[] | select(.metric == "net_bytes_sent") | .value] | add'
}

@test "srun --ntasks-per-node=2: a host's two tasks run as one launcher, 2 nodes, the bits and the bytes of --local-ranks 2 (TP2 x PP2)" {
	cat >ht.sh <<-SCRIPT
	#!/bin/bash
	#SBATCH -N2 --ntasks-per-node=2 -c1 -o ht.out
	srun --mpi=pmix $STORK run run.yaml run.name=ht parallel.tensor=2 parallel.pipeline=2 train.grad_accum=2
	SCRIPT
	run sbatch_wait ht.sh
	cat ht.out
	[ "$status" -eq 0 ]
	dir=$(ls -d "$WORK"/runs/ht__job=*__task=0)
	RUN_ARGS="parallel.tensor=2 parallel.pipeline=2 train.grad_accum=2" two_node_job lr pmix
	# one node per host everywhere: the layout, exit_info, the report
	grep -q 'the 2 tasks on this host run as one launcher: 2 rank(s)' ht.out
	[ "$(jq '.nodes | length' "$dir/config/slurm_env.json")" -eq 2 ]
	[ "$(jq '[.nodes[].local_ranks] == [2, 2]' "$dir/config/slurm_env.json")" = true ]
	[ "$(jq -r '[.nodes[].host] | join(" ")' "$dir/config/slurm_env.json")" = "n1 n2" ]
	[ "$(jq .nodes "$dir/exit_info.json")" -eq 2 ]
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	[ -s "$dir/exit_info.node-001.json" ]
	[ ! -e "$dir/exit_info.node-002.json" ] && [ ! -e "$dir/exit_info.node-003.json" ]
	"$STORK" report --text "$dir" | grep -q '4 rank(s) on 2 node(s)'
	grep -q '^\[1/1 n1 ' "$dir/logs/rank-001.log"
	grep -q '^\[3/1 n2 ' "$dir/logs/rank-003.log"
	# the same run as one launcher per node with --local-ranks 2: the same
	# losses bit for bit, and no more bytes between the nodes
	[ "$(losses "$dir" | wc -l)" -eq 50 ]
	diff <(losses "$DIR") <(losses "$dir")
	echo "bytes to other nodes: $(net_bytes "$dir") (tasks merged), $(net_bytes "$DIR") (--local-ranks 2)"
	[ "$(net_bytes "$dir")" -gt 0 ]
	[ "$(net_bytes "$dir")" -le "$(net_bytes "$DIR")" ]
	nodes_idle
}

@test "parallel.merge_tasks: false: one launcher per task, one rank each, node-major, same run" {
	cat >pt.sh <<-SCRIPT
	#!/bin/bash
	#SBATCH -N2 --ntasks-per-node=2 -c1 -o pt.out
	srun --mpi=pmix $STORK run run.yaml run.name=pt parallel.merge_tasks=false
	SCRIPT
	run sbatch_wait pt.sh
	cat pt.out
	[ "$status" -eq 0 ]
	dir=$(ls -d "$WORK"/runs/pt__job=*__task=0)
	grep -q '"world_size": 4' "$dir/config/slurm_env.json"
	[ "$(grep -c '"local_ranks": 1' "$dir/config/slurm_env.json")" -eq 4 ]
	grep -q '^\[1/0 n1 ' "$dir/logs/rank-001.log"
	grep -q '^\[3/0 n2 ' "$dir/logs/rank-003.log"
	[ "$(losses "$dir" | wc -l)" -eq 50 ]
	grep -q '"reason": "completed"' "$dir/exit_info.json"
}

@test "a 2-node run preempted with USR1: both nodes checkpoint and stop, the requeued job completes; its report shows both attempts" {
	sed -i 's/steps: 50/steps: 300/' run.yaml
	two_node_script pre2 pmix --requeue --open-mode=append
	job=$(submit pre2.sh)
	dir=$(run_dir pre2 "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 30 120
	scancel --signal=USR1 "$job"
	wait_job_state "$job" COMPLETED 300
	cat pre2.out
	[ "$(job_field "$job" Restarts)" = 1 ]
	for n in 000 001; do
		grep -q '"reason": "preempted_requeued"' "$dir/exit_info.node-$n.requeue-0.json"
		grep -q '"reason": "completed"' "$dir/exit_info.node-$n.requeue-1.json"
	done
	grep -q '"reason": "completed"' "$dir/exit_info.json"
	grep -q '"restart_count": 1' "$dir/exit_info.json"
	grep -q '=== requeue 1' "$dir/logs/rank-003.log"
	[ "$(losses "$dir" | wc -l)" -eq 300 ]
	# the report: one loss point per step of each attempt (counted from the
	# metrics, the train_loss lines of each requeue), a marker at the step
	# where the first one stopped (its checkpoint), every rank's step times
	run "$STORK" report "$dir" -o pre2.html
	[ "$status" -eq 0 ]
	total=0
	for q in 0 1; do
		want=$(jq -s "[.[] | select(.metric == \"train_loss\" and .requeue == $q)] | length" "$dir/logs/rank-000.metrics.jsonl")
		got=$(grep -o "<polyline class=\"train-loss\" data-requeue=\"$q\"[^>]*points=\"[^\"]*\"" pre2.html | sed 's/.*points="//' | wc -w)
		echo "requeue $q: $got points, $want steps"
		[ "$want" -gt 0 ]
		[ "$got" -eq "$want" ]
		total=$((total + got))
	done
	[ "$total" -eq 300 ]
	stopped=$(jq -s '[.[] | select(.metric == "train_loss" and .requeue == 0) | .step] | max' "$dir/logs/rank-000.metrics.jsonl")
	[ "$(jq .last_checkpoint.step "$dir/exit_info.node-000.requeue-0.json")" -eq "$stopped" ]
	[ "$(grep -c '<g class="restart-marker"' pre2.html)" -eq 1 ]
	grep -q "<g class=\"restart-marker\" data-step=\"$stopped\" data-n=\"1\">" pre2.html
	grep -q "<li data-step=\"$stopped\">step $stopped: <b>preempted_requeued</b>" pre2.html
	[ "$(grep -o '<polyline class="step-time[^"]*" data-rank="[0-9]*"' pre2.html | sort -u | wc -l)" -eq 4 ]
	# what the job was given and used, from slurmdbd (metrics/sacct.csv)
	grep -q '<p class="resources-summary">Requested: [^<]*cpu=4,[^<]*node=2, memory ' pre2.html
	# the job has ended: the page shows sacct's final row, not the RUNNING of the snapshot
	wait_sacct_states "$job" "REQUEUED COMPLETED" 30
	"$STORK" report "$dir" -o pre2.html
	grep -q '<p class="sacct-when">As sacct reports the ended job now' pre2.html
	grep -Eq "<tr><td>$job</td><td>COMPLETED</td>" pre2.html
	check_report_html pre2.html
	run "$STORK" report --text "$dir"
	[[ "$output" == *"reason: completed (exit 0)"* ]]
	[[ "$output" == *"first failure: none"* ]]
	[[ "$output" == *"requeues: 1;"* ]]
	# each requeue with its reason, in the text and on the page
	[[ "$output" == *$'requeues: 1; restarts inside the allocation: 0\n  requeue 0: preempted_requeued: '* ]]
	grep -q '<ul class="requeues">' pre2.html
	grep -q '<li>requeue 0: preempted_requeued: ' pre2.html
}

@test "a 2-node run cancelled with scancel: both nodes stop at the same step with its checkpoint, reason cancelled, never requeued" {
	sed -i 's/steps: 50/steps: 1000000/' run.yaml
	two_node_script cnl2 pmix --requeue
	job=$(submit cnl2.sh)
	dir=$(run_dir cnl2 "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 30 120
	scancel "$job"
	wait_job_state "$job" CANCELLED 60 || { scontrol update jobid="$job" requeue=0; scancel "$job"; false; }
	cat cnl2.out
	[ "$(job_field "$job" Restarts)" = 0 ]
	for n in 000 001; do
		[ "$(jq -r .reason "$dir/exit_info.node-$n.requeue-0.json")" = cancelled ]
	done
	[ "$(jq -r .reason "$dir/exit_info.json")" = cancelled ]
	[ "$(jq -r .nodes "$dir/exit_info.json")" = 2 ]
	stopped=$(jq -r .last_checkpoint.step "$dir/exit_info.json")
	[ "$(readlink "$dir/checkpoints/latest")" = "step_$(printf %08d "$stopped")" ]
	for r in 000 001 002 003; do
		grep -q "stopping after step $stopped on request: the job was cancelled" "$dir/logs/rank-$r.log"
	done
	wait_nodes_idle 30
}

@test "URL shards on 2 nodes: each node downloads each shard once, and the run trains the losses of the local files" {
	two_node_job files pmix
	ref=$DIR
	serve_files "$WORK/data" "$WORK/access.log"
	RUN_ARGS="data.train=$BASE/docs_train.bin data.val=$BASE/docs_val.bin" two_node_job urls pmix
	kill "$SERVER_PID"
	cat "$WORK/access.log"
	# one download per node: the nodes' /tmp (the stage directory) are their own
	[ "$(served "$WORK/access.log" docs_train.bin)" -eq 2 ]
	[ "$(served "$WORK/access.log" docs_val.bin)" -eq 2 ]
	grep -q "staged $BASE/docs_train.bin" urls.out
	[ "$(losses "$ref" | wc -l)" -eq 50 ]
	diff <(losses "$ref") <(losses "$DIR")
}

@test "run.max_gpu_hours below the allocation's cost: exit 3 naming both numbers, no run directory; at or above it the run trains" {
	# 2 nodes x 2 cores x 10 minutes = 0.67 core-hours
	RUN_ARGS="run.max_gpu_hours=0.5" two_node_script budget pmix --time=10
	run sbatch_wait budget.sh
	cat budget.out
	[ "$status" -ne 0 ]
	grep -q 'run.max_gpu_hours is 0.5 but job [0-9]*.s allocation costs 0.67 core-hours if it runs to its limit (2 node(s) x 2 cores x 0.17 h)' budget.out
	[ "$(grep -c 'run.max_gpu_hours is 0.5' budget.out)" -eq 2 ] # each node's launcher refuses
	grep -q 'Exited with exit code 3' budget.out
	[ ! -e runs ] || [ -z "$(ls -A runs)" ]
	RUN_ARGS="run.max_gpu_hours=0.7 train.steps=2" two_node_script budget2 pmix --time=10
	run sbatch_wait budget2.sh
	cat budget2.out
	[ "$status" -eq 0 ]
	grep -q '"reason": "completed"' runs/budget2__job=*__task=0/exit_info.json
}

@test "one query for the job's end time: launcher 0's answer reaches every node through the rendezvous; a manual USR1 four minutes before the end is a preemption on both" {
	sed -i 's/steps: 50/steps: 1000/' run.yaml
	two_node_script end pmix --time=4 --requeue --open-mode=append
	job=$(submit end.sh)
	dir=$(run_dir end "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 10 120
	end=$(date -d "$(job_field "$job" EndTime)" +%s)
	grep -q "\"job_end_time\": $end," "$dir/config/slurm_env.json"
	# A person's USR1 four minutes before the end of a job without --signal
	# is a preemption, not the time limit: both nodes say so, though only
	# node 0 asked slurmctld about the job.
	scancel --signal=USR1 "$job"
	for _ in $(seq 60); do
		[ -s "$dir/exit_info.node-001.requeue-0.json" ] && break
		sleep 1
	done
	scancel "$job"
	for n in 000 001; do
		grep -q '"reason": "preempted_requeued"' "$dir/exit_info.node-$n.requeue-0.json"
	done
}

# layout_job NAME NODES LAUNCHERS_PER_NODE RANKS_PER_LAUNCHER TENSOR PIPELINE ZERO ACCUM [KEY=VALUE]:
# sbatch a 20-step run of run.yaml with that layout and wait for it.
layout_job() {
	local name=$1 nodes=$2 tasks=$3 ranks=$4
	cat >"$name.sh" <<-SCRIPT
	#!/bin/bash
	#SBATCH -N$nodes --ntasks-per-node=$tasks -c$((2 / tasks)) -o $name.out
	srun --mpi=pmix $STORK run run.yaml --local-ranks $ranks run.name=$name train.steps=20 \
		parallel.tensor=$5 parallel.pipeline=$6 parallel.zero=$7 train.grad_accum=$8 ${9:-}
	SCRIPT
	run sbatch_wait "$name.sh"
	cat "$name.out"
	[ "$status" -eq 0 ]
	DIR=$(ls -d "$WORK"/runs/"$name"__job=*__task=0)
}

# within_1e5 A B [METRICS]: train and validation losses (or METRICS) of two
# 20-step run directories agree within 1e-5 relative, step for step, over
# all 20 training steps and the one validation (before step 1; val_every is
# 25).
within_1e5() {
	local m
	for m in ${3:-train_loss val_loss}; do
		paste <(grep -h "\"metric\":\"$m\"" "$1"/logs/rank-000.metrics.jsonl | sed 's/.*"step":\([0-9]*\).*"value":\([^,}]*\).*/\1 \2/') \
			<(grep -h "\"metric\":\"$m\"" "$2"/logs/rank-000.metrics.jsonl | sed 's/.*"step":\([0-9]*\).*"value":\([^,}]*\).*/\1 \2/') |
			awk -v m="$m" '$1 != $3 { print "step mismatch: " $0 > "/dev/stderr"; bad = 1; exit }
				{ n++; d = $2 - $4; if (d < 0) d = -d; r = d / $2; if (r > w) w = r }
				END { if (bad) exit 1  # (exit in END would otherwise replace this status)
				      printf "%s: worst relative difference %.3g over %d steps\n", m, w, n > "/dev/stderr";
				      exit !(n == (m == "train_loss" ? 20 : 1) && w <= 1e-5) }' || return 1
	done
}

@test "TP2xPP2xDP2 on 2 nodes x 4 ranks (pipeline across the nodes) follows the 1-rank run, with and without ZeRO-1" {
	# 8 sequences of 4 per replica per step: the 1-rank run takes 4 micro-batches
	"$STORK" run run.yaml --local-ranks 1 run.name=one train.steps=20 train.grad_accum=4 \
		train.val_batches=4 >/dev/null
	for z in 0 1; do
		layout_job "tpp$z" 2 1 4 2 2 "$z" 2
		grep -q 'layout: dp 2 x tp 2 x pp 2' "tpp$z.out"
		grep -q '"pp": 2' "$DIR/config/slurm_env.json"
		grep -q '^\[4/0 n2 .*layout: dp 2 x tp 2 x pp 2.*stage 1' "$DIR/logs/rank-004.log"
		within_1e5 runs/one__job=local__task=0 "$DIR"
		ls "$DIR"/checkpoints/step_00000020/shard-0000{0..7}.bin >/dev/null
	done
}

@test "data-parallel groups across daemons: 2 nodes x 2 launchers x 2 ranks as TP2xDP2xPP2 with ZeRO-1 follow the 1-rank run" {
	"$STORK" run run.yaml --local-ranks 1 run.name=one train.steps=20 train.grad_accum=4 \
		train.val_batches=4 >/dev/null
	# merge_tasks=false: the launchers of one host stay apart, so the groups span daemons
	layout_job span 2 2 2 2 2 1 2 parallel.merge_tasks=false
	grep -q '"world_size": 8' "$DIR/config/slurm_env.json"
	within_1e5 runs/one__job=local__task=0 "$DIR"
	grep -q '^\[3/1 n1 .*layout: dp 2 x tp 2 x pp 2 (ZeRO-1); rank 3 = dp 1, tp 1, stage 0' "$DIR/logs/rank-003.log"
}

@test "a Llama (grouped-query attention, rope, SwiGLU, untied) as TP2xPP2 with ZeRO-1 on 2 nodes x 2 ranks follows the 1-rank run" {
	llama="model.arch=llama model.kv_heads=2"
	# shellcheck disable=SC2086 # two overrides
	"$STORK" run run.yaml --local-ranks 1 run.name=onel train.steps=20 train.grad_accum=4 \
		$llama >/dev/null
	layout_job llama 2 1 2 2 2 1 4 "$llama"
	grep -q 'layout: dp 1 x tp 2 x pp 2 (ZeRO-1)' llama.out
	grep -q '^\[2/0 n2 .*stage 1' "$DIR/logs/rank-002.log"
	grep -q '"arch": *"llama"\|arch: llama' "$DIR/config/stork.yaml"
	within_1e5 runs/onel__job=local__task=0 "$DIR"
}

@test "kill -9 of one pipeline stage's storkd: rank_failed naming it, no rank left waiting" {
	cat >pk.sh <<-SCRIPT
	#!/bin/bash
	#SBATCH -N2 --ntasks-per-node=1 -c2 -o pk.out
	# Both test nodes are one machine, where UCX moves data over shared memory
	# and aborts the surviving process when its peer dies mid-transfer (see
	# lib/comm/ucx.c); nodes of a real cluster are other hosts.
	export STORK_UCX_PEER_ONLY=1
	srun --mpi=pmix $STORK run run.yaml --local-ranks 2 run.name=pk train.steps=100000 \
		parallel.pipeline=2 train.grad_accum=4
	SCRIPT
	job=$(submit pk.sh)
	dir=$(run_dir pk "$job")
	# the second stage lives on node 1 (n2)
	kill_node1_daemon "$job" "$dir"
	grep -q '"host": "n2"' "$dir/exit_info.json"
	nodes_idle
}

# reshard_job NAME FIRST SECOND: a job of 2 nodes whose first attempt runs the
# srun line FIRST and whose requeued attempt runs SECOND (another layout and
# node count), preempted with USR1 after step 5; waits for the requeued
# attempt to complete.
reshard_job() {
	cat >"$1.sh" <<-SCRIPT
	#!/bin/bash
	#SBATCH -N2 --ntasks-per-node=1 -c2 -o $1.out --requeue --open-mode=append
	if [ "\${SLURM_RESTART_COUNT:-0}" = 0 ]; then
		export STORK_FAULT_STEP_DELAY=0.3
		srun --mpi=pmix $2 $STORK run run.yaml run.name=$1 train.steps=20 checkpoint.every=0 $4
	else
		srun --mpi=pmix $3 $STORK run run.yaml run.name=$1 train.steps=20 checkpoint.every=0 $5
	fi
	SCRIPT
	job=$(submit "$1.sh")
	DIR=$(run_dir "$1" "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$DIR" 5 120
	scancel --signal=USR1 "$job"
	wait_job_state "$job" COMPLETED 300
	cat "$1.out"
	[ "$(job_field "$job" Restarts)" = 1 ]
	grep -q "\"reason\": \"completed\"" "$DIR/exit_info.json"
}

# one_rank_reference: the 20-step 1-rank run (runs/one) the reshards follow.
one_rank_reference() {
	"$STORK" run run.yaml --local-ranks 1 run.name=one train.steps=20 train.grad_accum=4 \
		train.val_batches=4 >/dev/null
}

@test "reshard through a requeue (TP2xPP2 on 2 nodes as DP4 on 1 node, DP2 on 1 node as TP2xPP2 on 2 nodes)" {
	# STORK_FAULT_STEP_DELAY keeps the first attempt going until the USR1
	fault_injection || skip "needs --enable-fault-injection"
	one_rank_reference
	reshard_job down "-N2 --ntasks-per-node=1" "-N1 -n1" \
		"--local-ranks 2 parallel.tensor=2 parallel.pipeline=2 train.grad_accum=4" \
		"--local-ranks 4 train.grad_accum=1"
	grep -q 'layout: dp 1 x tp 2 x pp 2' down.out
	grep -q 'layout: dp 4 x tp 1 x pp 1' down.out
	grep -qE 'resumed from .*step_0000000[5-9]|resumed from .*step_000000[1-9][0-9]' down.out
	# validation reads D x val_batches batches: compare the training losses
	within_1e5 runs/one__job=local__task=0 "$DIR" train_loss
	reshard_job up "-N1 -n1" "-N2 --ntasks-per-node=1" \
		"--local-ranks 2 train.grad_accum=2" \
		"--local-ranks 2 parallel.tensor=2 parallel.pipeline=2 train.grad_accum=4"
	grep -q 'layout: dp 2 x tp 1 x pp 1' up.out
	grep -q 'layout: dp 1 x tp 2 x pp 2' up.out
	within_1e5 runs/one__job=local__task=0 "$DIR" train_loss
}

@test "reshard through run.resume_from: DP2 on 1 node stopped at step 10 continues as TP2xPP2 on 2 nodes" {
	one_rank_reference
	run env STORK_STOP_AT_STEP=10 "$STORK" run run.yaml --local-ranks 2 run.name=half \
		train.steps=20 train.grad_accum=2
	[ "$status" -eq 12 ]
	layout_job from 2 1 2 2 2 0 4 run.resume_from="$WORK/runs/half__job=local__task=0"
	grep -q 'resumed from .*half__job=local__task=0/checkpoints/step_00000010 at step 10' from.out
	paste <(losses runs/one__job=local__task=0 | tail -10) <(losses "$DIR") | awk '
		$1 != $3 { bad = 1; exit } { n++; d = $2 - $4; if (d < 0) d = -d; if (d / $2 > w) w = d / $2 }
		END { if (bad) exit 1
		      printf "resume_from: worst relative difference %.3g over %d steps\n", w, n > "/dev/stderr";
		      exit !(n == 10 && w <= 1e-5) }'
}

@test "a --no-requeue job of 2 nodes receiving USR1: every node's record says requeue_failed, none says requeued" {
	RUN_ARGS="train.steps=400" two_node_script noreq none --no-requeue
	job=$(sbatch --parsable noreq.sh)
	dir=$WORK/runs/noreq__job=${job}__task=0
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 5 120
	scancel --signal=USR1 "$job"
	wait_job_state "$job" 'COMPLETED|FAILED' 120
	for n in 000 001; do
		jq -e '.reason == "requeue_failed" and .exit_code == 12' "$dir/exit_info.node-$n.json"
		if grep -q 'job requeued' "$dir/exit_info.node-$n.json"; then false; fi
	done
	jq -e '.reason == "requeue_failed"' "$dir/exit_info.json"
	[ "$(job_field "$job" Restarts)" = 0 ]
}

@test "a hang across 2 nodes (TP2 x PP2, a rank of each node stalled): exit_info names who waits in what, on which node, and who never entered it; every rank's stack is in its log" {
	fault_injection || skip "needs --enable-fault-injection"
	export STORK_FAULT_STALL=1:5
	RUN_ARGS="parallel.tensor=2 parallel.pipeline=2 train.grad_accum=2 preempt.hang_timeout=5" \
		two_node_script stuck pmix
	run sbatch_wait stuck.sh
	cat stuck.out
	[ "$status" -ne 0 ]
	dir=$(ls -d "$WORK"/runs/stuck__job=*__task=0)
	message=$(jq -r .message "$dir/exit_info.json")
	echo "$message"
	[ "$(jq -r .reason "$dir/exit_info.json")" = hang ]
	ls "$dir"/logs/where.node-00[01].requeue-0.restart-0.json
	# local rank 1 of each node (ranks 1 and 3) stalls at the start of step 6: its
	# tp partner on n1 (rank 0) waits for it in the forward pass; on n2, stage 1's
	# rank 2 waits for stage 0's activations from rank 0 (n1), which never come
	[[ "$message" == *"rank 0 (n1) waits in all-reduce #"*" of the tp group (ranks 0-1, "*" bytes) since step 6 ("*" s); rank 1 never entered it"* ]]
	[[ "$message" == *"rank 2 (n2) waits in recv #"*" of the pp group (ranks 0 and 2, "*" bytes) from rank 0 since step 6"* ]]
	[[ "$message" == *"rank 1 (n1) was last seen at the start of step 6, in no collective"* ]]
	[[ "$message" == *"rank 3 (n2) was last seen at the start of step 6, in no collective"* ]]
	for r in 0 1 2 3; do
		grep -q "stack of rank $r when the watchdog found the node stuck" "$dir/logs/rank-00$r.log"
	done
	nodes_idle
}

# preflight_job NAME SBATCH-OPTIONS [LOCAL-RANKS]: a job of one launcher a
# node, LOCAL-RANKS (2) ranks each, with the preflight as by default (auto:
# 2 or more nodes, preflight.tolerance 0.8); sets job and dir once it ran.
# --exclusive and no task count: Slurm gives a node range every node it can.
preflight_job() {
	cat >"$1.sh" <<-SCRIPT
	#!/bin/bash
	#SBATCH $2 -c2 --exclusive -o $1.out --open-mode=append
	srun --ntasks-per-node=1 --mpi=pmix $STORK run run.yaml --local-ranks ${3:-2} run.name=$1
	SCRIPT
	job=$(submit "$1.sh")
	wait_job_state "$job" 'COMPLETED|FAILED' 300 || true
	cat "$1.out"
	dir=$(run_dir "$1" "$job")
}

@test "preflight on 2 nodes: every rank's figures in metrics/preflight.csv, every node kept, the nodes of one machine measured one after the other, in under 5 s" {
	preflight_job pf0 -N2
	[ "$(job_field "$job" JobState)" = COMPLETED ]
	csv=$dir/metrics/preflight.csv
	cat "$csv"
	[ "$(head -1 "$csv")" = "rank,node,host,matmul_gflops,memory_gbs,dp_allreduce_gbs,tp_allreduce_gbs,world_allreduce_gbs,verdict" ]
	[ "$(grep -c ',"ok"$' "$csv")" -eq 4 ]
	awk -F, 'NR > 1 && !($4 > 0 && $5 > 0 && $6 > 0 && $8 > 0) { bad = 1 } END { exit bad || NR != 5 }' "$csv"
	secs=$(sed -n 's/^preflight: 2 node(s) in \([0-9.]*\) s: .*/\1/p' pf0.out)
	echo "preflight took $secs s" >&3
	awk -v s="$secs" 'BEGIN { exit !(s > 0 && s < 5) }'
	# n1 and n2 are one machine (one boot id): they take turns
	grep -q '^preflight: 2 node(s) in .*, nodes sharing a machine one after the other)' pf0.out
	grep -q 'preflight: this rank: matrix product' "$dir/logs/rank-003.log"
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	nodes_idle
}

@test "preflight on 2 nodes: a node whose matrix product is 10x slower is named in a warning, and the fixed-count job trains on both and completes" {
	fault_injection || skip "needs --enable-fault-injection"
	export STORK_FAULT_PREFLIGHT_SLOW_HOST=n2
	preflight_job pfslow "-N2 --requeue"
	[ "$(job_field "$job" JobState)" = COMPLETED ]
	[ "$(job_field "$job" Restarts)" = 0 ]
	grep -q "storkd: warning: preflight: node n2 is the slower (matrix product [0-9.]* GFLOP/s, [0-9]*% of the other nodes' median [0-9.]* (preflight.tolerance 0.80); kept: two nodes have no majority to say which one is slow)" pfslow.out
	csv=$dir/metrics/preflight.csv
	cat "$csv"
	[ "$(grep -c ',1,n2,.*kept: two nodes have no majority' "$csv")" -eq 2 ]
	grep -q '(best of 3 tries' pfslow.out
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	[ "$(losses "$dir" | wc -l)" -eq 50 ]
	grep -q '"host": "n2"' "$dir/config/slurm_env.json"
	nodes_idle
}

@test "preflight on 3 nodes: a node 10x slower is left out by the other two; a --nodes=2-3 job is requeued without it and completes on the two; a fixed -N3 job is warned and trains on all three, never left pending" {
	fault_injection || skip "needs --enable-fault-injection"
	local tc=$abs_top_builddir/contrib/testcluster/stork-testcluster
	STORK_TESTCLUSTER_PORT=17880 "$tc" start --nodes 3 "$WORK/tc3" >/dev/null
	export SLURM_CONF=$WORK/tc3/etc/slurm.conf STORK_FAULT_PREFLIGHT_SLOW_HOST=n3
	preflight_job pf3 "-N2-3 --requeue" 1
	[ "$(job_field "$job" JobState)" = COMPLETED ]
	[ "$(job_field "$job" Restarts)" = 1 ]
	[ "$(job_field "$job" ExcNodeList)" = n3 ]
	[ "$(job_field "$job" NodeList)" = "n[1-2]" ]
	rec=$dir/exit_info.node-000.requeue-0.json
	[ "$(jq -r .reason "$rec")" = node_lost_requeued ]
	[[ "$(jq -r .message "$rec")" == *"preflight: node(s) n3 left out (n3: matrix product "*"% of the other nodes' median "*"): job $job requeued without them (ExcNodeList=n3)"* ]]
	# the requeued job, on two nodes, is measured again: both kept
	[ "$(grep -c ',"ok"$' "$dir/metrics/preflight.csv")" -eq 2 ]
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	[ "$(losses "$dir" | sort -un | wc -l)" -eq 50 ]
	run "$STORK" report --text "$dir"
	echo "$output"
	[[ "$output" == *"preflight: requeue 0: node(s) n3 left out"* ]]
	[[ "$output" == *"  requeue 0: node_lost_requeued: preflight: node(s) n3 left out"* ]]
	"$STORK" report "$dir" -o pf3.html
	grep -q '<li>requeue 0: node_lost_requeued: preflight: node(s) n3 left out' pf3.html
	# a fixed count: leaving n3 out would leave the job waiting for a third node
	preflight_job pf3fixed "-N3 --requeue" 1
	[ "$(job_field "$job" JobState)" = COMPLETED ]
	[ "$(job_field "$job" Restarts)" = 0 ]
	grep -q "storkd: preflight: warning: node(s) n3 fall short (n3: matrix product .*), kept: job $job asks for 3 node(s) and could not be sure to start again on the 2 that remain; submit with a node range (#SBATCH --nodes=2-3)" pf3fixed.out
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	[ "$(losses "$dir" | wc -l)" -eq 50 ]
	run "$STORK" report --text "$dir"
	[[ "$output" == *"preflight: n3: matrix product "* ]]
}
