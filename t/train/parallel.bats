#!/usr/bin/env bats
# Tensor, pipeline and ZeRO-1 layouts on one node (`stork run --local-ranks 4`):
# every layout follows the 1-rank run; checkpoints resume on any layout.
#
# The model: 4 layers, 4 heads, vocabulary 257 padded to 384 (the padding
# crosses the vocabulary slices of tensor-parallel ranks). Every run sees the
# same 8 sequences per step: 1 rank x batch 2 x 4 micro-batches, or D
# replicas x batch 2 x 4/D micro-batches; pipelines get at least P
# micro-batches.

load helpers

setup() {
	setup_run
	small_config tiny.yaml tiny 4 64 2 32 20
}

# run_layout NAME TENSOR PIPELINE ZERO [ARGS...]: 4 ranks with 8 sequences per step.
run_layout() {
	local name=$1 t=$2 p=$3 z=$4
	local d=$((4 / (t * p)))
	shift 4
	"$STORK" run tiny.yaml --local-ranks 4 --set run.name="$name" --set parallel.tensor="$t" \
		--set parallel.pipeline="$p" --set parallel.zero="$z" \
		--set train.grad_accum=$((4 / d)) "$@"
}

# within A B TOL [METRICS]: the train and validation losses (or METRICS) of
# runs A and B agree within TOL relative, step for step, over all 20 steps.
within() {
	local metric
	for metric in ${4:-train_loss val_loss}; do
		paste <(metric_of "$1" "$metric") <(metric_of "$2" "$metric") | awk -v tol="$3" -v m="$metric" -v b="$2" '
			$1 != $3 { print "step mismatch: " $0 > "/dev/stderr"; bad = 1; exit }
			{ n++; d = $2 - $4; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2); if (r > worst) worst = r }
			END { if (bad) exit 1  # (exit in END would otherwise replace this status)
			      printf "%s %s: worst relative difference %.3g over %d steps\n", b, m, worst, n > "/dev/stderr";
			      exit !(n == (m == "train_loss" ? 20 : 2) && worst <= tol) }'
	done
}

# metric_of RUN METRIC: "step value" of rank 0's metric.
metric_of() {
	grep -h "\"metric\":\"$2\"" runs/"$1"__job=local__task=0/logs/rank-000.metrics.jsonl |
		sed 's/.*"step":\([0-9]*\).*"value":\([^,}]*\).*/\1 \2/'
}

# one_rank D: the 1-rank reference for layouts of D replicas, named oneD.
# Validation reads val_batches global batches (D x batch 2 sequences each):
# the reference reads as many sequences, D x val_batches batches of 2.
one_rank() {
	"$STORK" run tiny.yaml --local-ranks 1 --set run.name="one$1" --set train.grad_accum=4 \
		--set train.val_batches=$((2 * $1)) >/dev/null
}

@test "every layout of 4 ranks follows the 1-rank run within 1e-5 relative, with and without ZeRO-1" {
	one_rank 1
	one_rank 2
	one_rank 4
	# name tensor pipeline: DP4, TP2xDP2, TP4, PP2xDP2, PP4, TP2xPP2
	for layout in "dp4 1 1" "tp2dp2 2 1" "tp4 4 1" "pp2dp2 1 2" "pp4 1 4" "tp2pp2 2 2"; do
		read -r name t p <<<"$layout"
		for z in 0 1; do
			run run_layout "${name}z$z" "$t" "$p" "$z"
			[ "$status" -eq 0 ] || { echo "$output"; return 1; }
			[[ "$output" == *"layout: dp $((4 / (t * p))) x tp $t x pp $p"* ]]
			within "one$((4 / (t * p)))" "${name}z$z" 1e-5
		done
	done
}

@test "a layout gives the same bits run after run, and all ranks report the same loss" {
	run_layout a 2 2 1 >/dev/null
	run_layout b 2 2 1 >/dev/null
	[ "$(metric_of a train_loss | wc -l)" -eq 20 ]
	[ "$(metric_of a grad_norm | wc -l)" -eq 20 ]
	diff <(metric_of a train_loss) <(metric_of b train_loss)
	diff <(metric_of a grad_norm) <(metric_of b grad_norm)
	for r in 001 002 003; do
		diff <(losses a) <(losses a $r)
	done
}

@test "tensor parallelism really splits the model: each rank holds a quarter of the split tensors" {
	run run_layout tp 4 1 0
	[ "$status" -eq 0 ]
	"$STORK" run tiny.yaml --local-ranks 1 --set run.name=w --set train.steps=1 >/dev/null
	whole=$(grep -h 'model:' runs/w__job=local__task=0/logs/rank-000.log | sed 's/.*model: \([0-9]*\).*/\1/')
	for r in 000 003; do
		part=$(grep -h 'model:' runs/tp__job=local__task=0/logs/rank-$r.log | sed 's/.*model: \([0-9]*\).*/\1/')
		echo "rank $r holds $part of $whole parameters" >&3
		# everything but LayerNorms, wpe and two biases per layer is split in 4
		[ "$part" -lt $((whole / 3)) ]
	done
}

@test "a preempted and resumed TP2xPP2 run (each rank reads back its own shard) gives the uninterrupted run's losses bit for bit, with and without ZeRO-1" {
	for z in 0 1; do
		run_layout "full$z" 2 2 "$z" >/dev/null
		run env STORK_STOP_AT_STEP=7 "$STORK" run tiny.yaml --local-ranks 4 --set run.name="cut$z" \
			--set parallel.tensor=2 --set parallel.pipeline=2 --set parallel.zero="$z" \
			--set train.grad_accum=4
		[ "$status" -eq 12 ]
		ls runs/cut${z}__job=local__task=0/checkpoints/step_00000007/shard-0000{0,1,2,3}.bin
		run run_layout "cut$z" 2 2 "$z"
		[ "$status" -eq 0 ]
		[[ "$output" == *"resumed from"*"step_00000007 at step 7"* ]]
		[ "$(metric_of "full$z" train_loss | wc -l)" -eq 20 ]
		[ "$(metric_of "full$z" grad_norm | wc -l)" -eq 20 ]
		diff <(metric_of "full$z" train_loss) <(metric_of "cut$z" train_loss)
		diff <(metric_of "full$z" grad_norm) <(metric_of "cut$z" grad_norm)
	done
}

@test "a TP2xPP2 checkpoint resumes as DP4 and a DP2 checkpoint as TP2xPP2 with ZeRO-1" {
	one_rank 4
	run env STORK_STOP_AT_STEP=7 "$STORK" run tiny.yaml --local-ranks 4 --set run.name=ab \
		--set parallel.tensor=2 --set parallel.pipeline=2 --set train.grad_accum=4
	[ "$status" -eq 12 ]
	run run_layout ab 1 1 0
	[ "$status" -eq 0 ]
	[[ "$output" == *"layout: dp 4 x tp 1 x pp 1"*"resumed from"*"at step 7"* ]]
	within one4 ab 1e-5 train_loss
	run env STORK_STOP_AT_STEP=7 "$STORK" run tiny.yaml --local-ranks 2 --set run.name=ba --set train.grad_accum=2
	[ "$status" -eq 12 ]
	run run_layout ba 2 2 1
	[ "$status" -eq 0 ]
	[[ "$output" == *"resumed from"*"at step 7"* ]]
	within one4 ba 1e-5 train_loss
}

@test "impossible layouts are configuration errors naming the keys" {
	run "$STORK" run tiny.yaml --local-ranks 3 --set parallel.tensor=2
	[ "$status" -eq 3 ]
	[[ "$output" == *"parallel.tensor (2) x parallel.pipeline (1) = 2 does not divide the 3 ranks"* ]]
	run "$STORK" run tiny.yaml --local-ranks 4 --set parallel.tensor=8
	[ "$status" -eq 3 ]
	[[ "$output" == *"parallel.tensor: 8 does not divide model.heads = 4"* ]]
	run "$STORK" run tiny.yaml --local-ranks 4 --set parallel.pipeline=8
	[ "$status" -eq 3 ]
	[[ "$output" == *"parallel.pipeline: 8 stages for model.layers = 4"* ]]
	run "$STORK" run tiny.yaml --local-ranks 4 --set parallel.pipeline=2 --set train.grad_accum=1
	[ "$status" -eq 3 ]
	[[ "$output" == *"train.grad_accum: 1 micro-batches for parallel.pipeline = 2"*"train.grad_accum >= 2"* ]]
}

@test "run.resume_from starts a new run from another run's sharded checkpoint, on another layout" {
	one_rank 4
	run env STORK_STOP_AT_STEP=7 "$STORK" run tiny.yaml --local-ranks 4 --set run.name=src \
		--set parallel.tensor=2 --set parallel.pipeline=2 --set train.grad_accum=4
	[ "$status" -eq 12 ]
	run run_layout dst 1 1 1 --set run.resume_from="$PWD/runs/src__job=local__task=0"
	[ "$status" -eq 0 ]
	[[ "$output" == *"resumed from"*"src__job=local__task=0/checkpoints/step_00000007 at step 7"* ]]
	[ "$(metric_of dst train_loss | head -1 | cut -d' ' -f1)" -eq 8 ]
	paste <(metric_of one4 train_loss | tail -13) <(metric_of dst train_loss) | awk '
		$1 != $3 { bad = 1; exit } { d = $2 - $4; if (d < 0) d = -d; if (d / $2 > w) w = d / $2 }
		END { exit bad || !(NR == 13 && w <= 1e-5) }'
	# a path that is not there: refused before the run directory, saying so
	run "$STORK" run tiny.yaml --set run.name=none --set run.resume_from="$PWD/nowhere"
	[ "$status" -eq 3 ]
	[[ "$output" == *"run.resume_from: $PWD/nowhere"*"No such file or directory"* ]]
	# a directory without a checkpoint
	mkdir empty
	run "$STORK" run tiny.yaml --set run.name=none --set run.resume_from="$PWD/empty"
	[ "$status" -eq 5 ]
	[[ "$output" == *"run.resume_from: $PWD/empty holds no usable checkpoint"* ]]
}

@test "stork export writes a sharded checkpoint's model as one llm.c file" {
	run_layout full 2 2 0 --set train.val_every=1 >/dev/null
	run "$STORK" export runs/full__job=local__task=0/checkpoints/step_00000020 m.bin
	[ "$status" -eq 0 ]
	# the exported model is the one the run validated after its last update:
	# one more step of validation on 1 rank, before any update, sees it
	STORK_STOP_AT_STEP=19 run_layout cut 2 2 0 --set train.val_every=1 >/dev/null || true
	"$STORK" export runs/cut__job=local__task=0 m19.bin
	"$STORK" run tiny.yaml --set run.name=check --set model.init_from="$PWD/m19.bin" \
		--set train.val_every=1 --set train.steps=1 >/dev/null
	want=$(metric_of full val_loss | awk '$1 == 20 { print $2 }')
	got=$(metric_of check val_loss | awk '$1 == 1 { print $2 }')
	echo "validation loss before step 20: $want (TP2xPP2), $got (1 rank from the export)" >&3
	awk -v a="$want" -v b="$got" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d / a <= 1e-5) }'
	# a whole-model checkpoint exports to its own model file, bit for bit
	"$STORK" run tiny.yaml --set run.name=plain --set train.steps=2 >/dev/null
	"$STORK" export runs/plain__job=local__task=0 p.bin
	cmp p.bin runs/plain__job=local__task=0/checkpoints/step_00000002/model.bin
	run "$STORK" export nowhere x.bin
	[ "$status" -eq 5 ]
	[ ! -e x.bin ]
}

@test "stork bench train --ranks prints each rank's memory: ZeRO-1 divides the optimizer by D, a stage holds its layers" {
	cat >g124.yaml <<-YAML
	model: { layers: 12, heads: 12, channels: 768, max_seq_len: 1024, vocab_size: 50257 }
	data: { train: ["data/docs_train.bin"] }
	train: { batch_size: 8, seq_len: 64, grad_accum: 4 }
	YAML
	# columns: rank stage tp dp layers params grads optimizer activations total (MiB)
	dp=$("$STORK" bench train g124.yaml --steps 0 --ranks 4 | awk '$1 == 0 { print $8 }')
	z=$("$STORK" bench train g124.yaml --steps 0 --ranks 4 --set parallel.zero=1 | awk '$1 == 3 { print $8 }')
	echo "optimizer per rank: $dp MiB with DP4, $z MiB with ZeRO-1" >&3
	awk -v a="$dp" -v b="$z" 'BEGIN { r = b / (a / 4); exit !(r > 0.99 && r < 1.01) }'
	run "$STORK" bench train g124.yaml --steps 0 --ranks 4 --set parallel.pipeline=2 --set parallel.tensor=2
	[ "$status" -eq 0 ]
	echo "$output" >&3
	whole=$("$STORK" bench train g124.yaml --steps 0 --ranks 1 | awk '$1 == 0 { print $6 }')
	first=$(echo "$output" | awk '$1 == 0 { print $5, $6 }')
	last=$(echo "$output" | awk '$1 == 3 { print $5, $6 }')
	[ "${first% *}" = "0-5" ]
	[ "${last% *}" = "6-11" ]
	# half the layers, half of every split tensor: a quarter of the blocks, plus half the
	# tied embedding at both ends (GPT-2 124M: 155-158 of 475 MiB), balanced within 3%
	awk -v w="$whole" -v a="${first#* }" -v b="${last#* }" 'BEGIN {
		exit !(a < w * 0.35 && b < w * 0.35 && a / b < 1.03 && b / a < 1.03) }'
}

@test "stork bench train --steps 0: the memory table of one replica, and KEY=VALUE overrides as stork run takes them" {
	cat >g124.yaml <<-YAML
	model: { layers: 12, heads: 12, channels: 768, max_seq_len: 1024, vocab_size: 50257 }
	data: { train: ["data/docs_train.bin"] }
	train: { batch_size: 8, seq_len: 64, grad_accum: 2 }
	YAML
	run "$STORK" bench train g124.yaml --steps 0 parallel.tensor=2 parallel.pipeline=2
	[ "$status" -eq 0 ]
	[[ "$output" == *"dp 1 x tp 2 x pp 2 over 4 ranks"* ]]
	[ "$(echo "$output" | awk '$1 ~ /^[0-9]+$/' | wc -l)" -eq 4 ]
	run "$STORK" bench train g124.yaml --steps 0
	[ "$status" -eq 0 ]
	[[ "$output" == *"dp 1 x tp 1 x pp 1 over 1 ranks"* ]]
	run "$STORK" bench train g124.yaml --steps 0 parallel.tensr=2
	[ "$status" -eq 3 ]
	[[ "$output" == *"tensr"* ]]
	run "$STORK" bench train g124.yaml stray
	[ "$status" -eq 2 ]
	[[ "$output" == *"'stray'"* ]]
	run "$STORK" bench train --help
	[ "$status" -eq 0 ]
	[[ "$output" == "usage: stork bench train CONFIG"* ]]
}

@test "train.recompute gelu and block: a TP2xPP2 run's losses and gradient norms bit for bit, in less activation memory" {
	run_layout none 2 2 0 >/dev/null
	[ "$(metric_of none train_loss | wc -l)" -eq 20 ]
	for r in gelu block; do
		run run_layout "$r" 2 2 0 --set train.recompute="$r"
		[ "$status" -eq 0 ] || { echo "$output"; return 1; }
		diff <(metric_of none train_loss) <(metric_of "$r" train_loss)
		diff <(metric_of none grad_norm) <(metric_of "$r" grad_norm)
	done
	# the activations column (MiB) of rank 0, as storkd allocates them
	local -A act
	for r in none gelu block; do
		act[$r]=$("$STORK" bench train tiny.yaml --steps 0 --ranks 1 --set train.recompute=$r |
			awk '$1 == 0 { print $9 }')
	done
	echo "activations: none ${act[none]}, gelu ${act[gelu]}, block ${act[block]} MiB" >&3
	# three numbers (awk compares an empty value or a word as a string), each
	# smaller than the last
	for r in none gelu block; do
		[[ "${act[$r]}" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "no activation figure for $r: '${act[$r]}'"; return 1; }
	done
	awk -v n="${act[none]}" -v g="${act[gelu]}" -v b="${act[block]}" 'BEGIN { exit !(b < g && g < n) }'
	# the timed benchmark says the same and what it saves
	run "$STORK" bench train tiny.yaml --steps 1 --set train.recompute=block
	[ "$status" -eq 0 ]
	line=$(echo "$output" | grep '^activations:')
	echo "$line" >&3
	[[ "$line" == "activations: ${act[block]} MiB with recompute block (none: ${act[none]} MiB, "* ]]
}

@test "parallel.overlap: DP4, TP2xDP2 and PP2xDP2, with and without ZeRO-1, give the losses and gradient norms of the collective after the backward pass, bit for bit, and report the time hidden" {
	for layout in "dp4 1 1 0" "tp2dp2 2 1 0" "pp2dp2 1 2 0" "dp4z 1 1 1" "tp2dp2z 2 1 1" "pp2dp2z 1 2 1"; do
		read -r name t p z <<<"$layout"
		run_layout "$name" "$t" "$p" "$z" >/dev/null
		run run_layout "${name}o" "$t" "$p" "$z" --set parallel.overlap=true
		[ "$status" -eq 0 ] || { echo "$output"; return 1; }
		[ "$(metric_of "$name" train_loss | wc -l)" -eq 20 ]
		diff <(metric_of "$name" train_loss) <(metric_of "${name}o" train_loss)
		diff <(metric_of "$name" grad_norm) <(metric_of "${name}o" grad_norm)
		grep -q "parallel.overlap: each layer's gradients are all-reduced during the backward pass" \
			runs/"${name}o"__job=local__task=0/logs/rank-000.log
		# every step reports the all-reduce's time and the part the rank waited for
		[ "$(metric_of "${name}o" grad_sync_ms | wc -l)" -eq 20 ]
		paste <(metric_of "${name}o" grad_sync_ms) <(metric_of "${name}o" grad_sync_wait_ms) |
			awk '{ busy += $2; wait += $4; n++ }
			     END { printf "overlap: all-reduce %.2f ms/step, waited %.2f ms/step\n", busy / n, wait / n > "/dev/stderr"
			           exit !(n == 20 && busy > 0) }'
		# without overlap the rank waits for all of it, at each of the 20 steps
		paste <(metric_of "$name" grad_sync_ms) <(metric_of "$name" grad_sync_wait_ms) |
			awk '$1 != $3 || $2 != $4 { bad = 1 } END { exit bad || NR != 20 }'
	done
}

@test "stork bench train --overlap 2 prints both all-reduce modes and what overlap changed" {
	run "$STORK" bench train tiny.yaml --overlap 2 --steps 3
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	echo "$output" >&3
	[[ "$output" == *"overlap: 2 ranks (threads of this process) on the CPU, model L=4 C=64"* ]]
	# two rows of four figures: step, fwd+bwd, waited, in all-reduce (ms)
	echo "$output" | awk '/^after the backward +[0-9]|^overlapped +[0-9]/ { n++; for (i = NF - 3; i <= NF; i++) if ($i !~ /^[0-9.]+$/) bad = 1 }
		END { exit !(n == 2 && !bad) }'
	[[ "$output" == *"overlapped against after: step "*" ms ("*"%), all-reduce time hidden "*" ms per step"* ]]
	run "$STORK" bench train tiny.yaml --overlap 1
	[ "$status" -eq 2 ]
	[[ "$output" == *"--overlap: '1' is not a number of ranks >= 2"* ]]
}

@test "elastic: a DP2 run resumed on one rank doubles train.grad_accum, keeps the global batch and follows the DP2 run" {
	"$STORK" run tiny.yaml --local-ranks 2 --set run.name=two >/dev/null
	run env STORK_STOP_AT_STEP=10 "$STORK" run tiny.yaml --local-ranks 2 --set run.name=el
	[ "$status" -eq 12 ]
	grep -q '"global_batch": 4' runs/el__job=local__task=0/checkpoints/step_00000010/state.json
	run "$STORK" run tiny.yaml --local-ranks 1 --set run.name=el
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"elastic: 1 data-parallel replica(s) now: train.grad_accum 1 -> 2 keeps the checkpoint's global batch of 4 sequences"* ]]
	within two el 1e-5 train_loss
	grep -q '"global_batch": 4' runs/el__job=local__task=0/checkpoints/step_00000020/state.json
	# back on two ranks the configured grad_accum makes the batch again
	run "$STORK" run tiny.yaml --local-ranks 2 --set run.name=el --set train.steps=22
	[ "$status" -eq 0 ]
	[[ "$output" != *"elastic:"* ]]
	# three replicas of 2 cannot make 4 sequences: said, and the batch changes
	run "$STORK" run tiny.yaml --local-ranks 3 --set run.name=el --set train.steps=24
	[ "$status" -eq 0 ]
	[[ "$output" == *"elastic: 3 data-parallel replicas of train.batch_size 2 cannot make the checkpoint's global batch of 4 sequences; it becomes 6"* ]]
}

# as_task LOCALID CMD...: CMD as task LOCALID of a step that runs 2 tasks on
# this one host, as srun --ntasks-per-node=2 would start it.
as_task() {
	local id=$1
	shift
	env SLURM_JOB_ID=$JOBID SLURM_STEP_ID=0 SLURM_NNODES=1 SLURM_STEP_NUM_NODES=1 \
		SLURM_NTASKS=2 SLURM_STEP_NUM_TASKS=2 SLURM_STEP_TASKS_PER_NODE=2 \
		SLURM_NODEID=0 SLURM_LOCALID="$id" SLURM_PROCID="$id" "$@"
}

@test "two tasks of a step on one host run as one launcher with both ranks: the run of --local-ranks 2; each alone names the other; another user's socket is refused" {
	JOBID=$((900000 + $$ % 90000))
	"$STORK" run tiny.yaml --local-ranks 2 --set run.name=lr2 >/dev/null
	as_task 1 "$STORK" run tiny.yaml --set run.name=ht >follower.out 2>&1 &
	follower=$!
	run as_task 0 "$STORK" run tiny.yaml --set run.name=ht
	echo "$output"
	[ "$status" -eq 0 ]
	wait "$follower"
	cat follower.out
	[[ "$output" == *"the 2 tasks on this host run as one launcher: 2 rank(s)"* ]]
	dir=$(ls -d runs/ht__*)
	[ "$(jq '[.nodes[].local_ranks]' -c "$dir/config/slurm_env.json")" = "[2]" ]
	[ "$(jq .nodes "$dir/exit_info.json")" -eq 1 ]
	diff <(run_losses runs/lr2__job=local__task=0) <(run_losses "$dir")
	# the follower ends with the leader's code, and says nothing of its own
	[ ! -s follower.out ]

	# alone: the follower finds no leader, the leader no follower; no run directory
	run as_task 1 "$STORK" run tiny.yaml --set run.name=alone --set run.rendezvous_timeout=1
	[ "$status" -eq 22 ]
	[[ "$output" == *"task 1 of this host (node 0) found no first task to join within 1 s (run.rendezvous_timeout)"* ]]
	run as_task 0 "$STORK" run tiny.yaml --set run.name=alone --set run.rendezvous_timeout=1
	[ "$status" -eq 22 ]
	[[ "$output" == *"task(s) 1 of this host (node 0) did not join its first task within 1 s"* ]]
	[ -z "$(ls -d runs/alone* 2>/dev/null)" ]

	# another user holds the socket's name first
	[ "$(id -u)" -eq 0 ] || skip "needs root, to act as a second user"
	id stork-other >/dev/null 2>&1 || useradd --system --no-create-home stork-other
	name="stork-host-tasks.0.$JOBID.0.0"
	runuser -u stork-other -- /usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1]); s.listen(4)
print("ready", flush=True)
time.sleep(30)' "$name" >squat.out &
	squatter=$!
	for _ in $(seq 100); do grep -q ready squat.out && break; sleep 0.1; done
	run as_task 0 "$STORK" run tiny.yaml --set run.name=taken --set run.rendezvous_timeout=1
	[ "$status" -eq 22 ]
	[[ "$output" == *"cannot meet on the local socket @$name: Address already in use (another process holds the name)"* ]]
	run as_task 1 "$STORK" run tiny.yaml --set run.name=taken --set run.rendezvous_timeout=1
	[ "$status" -eq 22 ]
	[[ "$output" == *"the local socket @$name belongs to another user"* ]]
	kill "$squatter"
}

@test "parallel.stage_split: compute gives the last stage, which carries the head, fewer layers; a list sets them; a list that does not fit is refused naming the key" {
	# a 4-layer model whose head (2 C V per token) costs more than a block
	sed -i 's/vocab_size: 257/vocab_size: 4096/' tiny.yaml
	run "$STORK" run tiny.yaml --local-ranks 2 --set run.name=pr --set parallel.pipeline=2 \
		--set train.grad_accum=2 --set train.steps=2
	[ "$status" -eq 0 ]
	[[ "$output" == *"rank 0 = dp 0, tp 0, stage 0 (layers 0-1)"* ]]
	run "$STORK" run tiny.yaml --local-ranks 2 --set run.name=co --set parallel.pipeline=2 \
		--set train.grad_accum=2 --set train.steps=2 --set parallel.stage_split=compute
	[ "$status" -eq 0 ]
	[[ "$output" == *"rank 0 = dp 0, tp 0, stage 0 (layers 0-2)"* ]]
	grep -q 'stage 1 (layers 3-3)' runs/co__job=local__task=0/logs/rank-001.log
	run "$STORK" run tiny.yaml --local-ranks 2 --set run.name=li --set parallel.pipeline=2 \
		--set train.grad_accum=2 --set train.steps=2 --set parallel.stage_split=1,3
	[ "$status" -eq 0 ]
	[[ "$output" == *"rank 0 = dp 0, tp 0, stage 0 (layers 0-0)"* ]]
	# the same model trained: the losses do not depend on where the stages are cut
	diff <(losses pr) <(losses co)
	diff <(losses pr) <(losses li)
	run "$STORK" run tiny.yaml --local-ranks 2 --set run.name=bad --set parallel.pipeline=2 \
		--set train.grad_accum=2 --set parallel.stage_split=2,3
	[ "$status" -eq 3 ]
	[[ "$output" == *"parallel.stage_split: '2,3' does not add up to model.layers; give params, compute or 2 layer counts, one per stage, that add up to model.layers (4)"* ]]
	run "$STORK" run tiny.yaml --set parallel.stage_split=heavy
	[ "$status" -eq 3 ]
	[[ "$output" == *"parallel.stage_split: 'heavy' is neither params, compute nor a list of 1 layer counts"* ]]
}

@test "parallel.zero 2 and 3, with and without parallel.overlap, give ZeRO-1's losses and gradient norms bit for bit: DP4, TP2xDP2 and PP2xDP2, GPT-2 and a GQA Llama with recomputation" {
	for arch in gpt2 llama; do
		for layout in "1 1" "2 1" "1 2"; do
			read -r t p <<<"$layout"
			set -- --set model.arch=$arch
			[ $arch = gpt2 ] || set -- "$@" --set model.kv_heads=2 --set train.recompute=block
			for z in 1 2 3; do
				run_layout "$arch$t$p-z$z" "$t" "$p" "$z" "$@" >/dev/null
			done
			for z in 2 3; do
				# overlap: a thread gathers the next layer and sums the last one's gradients
				run_layout "$arch$t$p-z${z}o" "$t" "$p" "$z" "$@" --set parallel.overlap=true >/dev/null
				grep -q 'parallel.overlap: a thread .*sums each layer' \
					runs/"$arch$t$p-z${z}o"__job=local__task=0/logs/rank-000.log
				# the step's collectives (the layers' too) and the part the rank waited for:
				# all of it without overlap, at each of the 20 steps
				paste <(metric_of "$arch$t$p-z$z" grad_sync_ms) <(metric_of "$arch$t$p-z$z" grad_sync_wait_ms) |
					awk '$1 != $3 || $2 != $4 || $2 <= 0 { bad = 1 } END { exit bad || NR != 20 }'
				paste <(metric_of "$arch$t$p-z${z}o" grad_sync_ms) <(metric_of "$arch$t$p-z${z}o" grad_sync_wait_ms) |
					awk -v run="$arch$t$p-z${z}o" '{ busy += $2; wait += $4; n++ }
					     END { printf "%s: collectives %.2f ms/step, waited %.2f ms/step\n", run, busy / n, wait / n > "/dev/stderr"
						   exit !(n == 20 && busy > 0) }'
				for m in train_loss grad_norm val_loss; do
					[ "$(metric_of "$arch$t$p-z1" $m | wc -l)" -ge 2 ]
					for run in "z$z" "z${z}o"; do
						diff <(metric_of "$arch$t$p-z1" $m) <(metric_of "$arch$t$p-$run" $m) ||
							{ echo "$arch tp $t pp $p: $run's $m differs" >&2; false; }
					done
				done
			done
		done
	done
}

@test "parallel.zero 3: a preempted DP4 run resumes bit for bit; its checkpoint resumes as ZeRO-1 DP2 and as TP2xPP2 within 1e-6" {
	run_layout full3 1 1 3 >/dev/null
	run env STORK_STOP_AT_STEP=7 "$STORK" run tiny.yaml --local-ranks 4 --set run.name=cut3 \
		--set parallel.zero=3 --set train.grad_accum=1
	[ "$status" -eq 12 ]
	cp -r runs/cut3__job=local__task=0 runs/dp2__job=local__task=0
	cp -r runs/cut3__job=local__task=0 runs/tp2pp2__job=local__task=0
	run run_layout cut3 1 1 3
	[ "$status" -eq 0 ]
	[[ "$output" == *"resumed from"*"step_00000007 at step 7"* ]]
	diff <(metric_of full3 train_loss) <(metric_of cut3 train_loss)
	diff <(metric_of full3 grad_norm) <(metric_of cut3 grad_norm)
	run "$STORK" run tiny.yaml --local-ranks 2 --set run.name=dp2 --set parallel.zero=1 \
		--set train.grad_accum=2
	[ "$status" -eq 0 ]
	[[ "$output" == *"layout: dp 2 x tp 1 x pp 1 (ZeRO-1)"*"resumed from"*"at step 7"* ]]
	within full3 dp2 1e-6 train_loss
	run run_layout tp2pp2 2 2 0
	[ "$status" -eq 0 ]
	[[ "$output" == *"resumed from"*"at step 7"* ]]
	within full3 tp2pp2 1e-6 train_loss
}

@test "parallel.zero 2 and 3 give memory back: storkd's resident memory falls by what stork bench train says each level saves (3 with parallel.overlap too), within 10%" {
	# 8 layers of 512 channels (25M parameters) on 4 ranks, one micro-batch each
	small_config mem.yaml mem 8 512 2 32 12
	sed -i 's/heads: 4/heads: 8/' mem.yaml
	# 4: zero 3 with parallel.overlap (a second layer of parameters and gradients in flight)
	for z in 1 2 3 4; do
		set -- --set parallel.zero=$((z < 4 ? z : 3)) --set parallel.overlap=false
		[ "$z" -lt 4 ] || set -- --set parallel.zero=3 --set parallel.overlap=true
		"$STORK" run mem.yaml --local-ranks 4 --set run.name="mem$z" "$@" \
			--set metrics.sample_s=0.5 --set checkpoint.every=0 >/dev/null
		# the steady state: the last sample, after every buffer of a step is made
		measured[z]=$(metric_of "mem$z" host_rss_bytes | tail -1 | awk '{ printf "%d", $2 / 1048576 }')
		estimated[z]=$("$STORK" bench train mem.yaml --ranks 4 --steps 0 "$@" |
			awk '$1 ~ /^[0-9]+$/ && NF == 10 { sum += $10 } END { printf "%d", sum }')
		echo "$*: storkd holds ${measured[z]} MiB; stork bench train: ${estimated[z]} MiB in 4 ranks" >&3
	done
	for z in 2 3 4; do
		saved=$((measured[1] - measured[z])) said=$((estimated[1] - estimated[z]))
		echo "run $z saves $saved MiB; stork bench train says $said MiB" >&3
		[ "$saved" -gt 0 ] && [ $((10 * (saved - said))) -le "$said" ] && [ $((10 * (said - saved))) -le "$said" ]
	done
	[ "${measured[3]}" -lt "${measured[2]}" ]
	[ "${estimated[4]}" -gt "${estimated[3]}" ]
}
