#!/usr/bin/env bats
# model.arch llama and Hugging Face directories, run locally (`stork run`,
# no Slurm): the math against an independent PyTorch reference
# (t/tools/llama_ref.py, float64), every layout against the 1-rank run,
# exact resume and resharding, export and its round trip.
#
# The model (llama_ref.py make-model): 2 layers, 64 channels, 4 heads with
# 2 key-value heads, SwiGLU of width 96, rope_theta 10000 with Llama 3.1's
# scaling (factor 8, original context 32: the head's 8 frequencies fall on
# all three sides of the scaling), an untied LM head, vocabulary 300 (padded
# to 384); the data are stork prep's bytes, read in order.

load helpers

REF=${abs_top_srcdir:?set by make check}/t/tools/llama_ref.py
GRADS=${abs_top_builddir:?set by make check}/t/tools/model_grads

setup() {
	if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
		skip "PyTorch (python3-torch) is not installed"
	fi
	setup_run
	mkdir -p hf-llama hf-gpt2
	/usr/bin/python3 "$REF" make-model hf-llama llama 1
	/usr/bin/python3 "$REF" make-model hf-gpt2 gpt2 1
	hf_config hf.yaml hf-llama
}

# hf_config FILE DIR: 20 steps of batch 2 x 16 tokens from DIR, data in
# order, constant learning rate, no clipping (the reference's AdamW).
hf_config() {
	cat >"$1" <<-YAML
	run:
	  name: hf
	  dir: runs
	model:
	  init_from: $2
	data:
	  train: ["data/docs_train.bin"]
	  val: []
	  shuffle: false
	train:
	  batch_size: 2
	  seq_len: 16
	  steps: 20
	  lr: 1.0e-3
	  lr_schedule: constant
	  warmup_steps: 0
	  weight_decay: 0.1
	  grad_clip: 0
	checkpoint:
	  every: 0
	YAML
}

# metrics RUN: rank 0's metrics file.
metrics() { echo "runs/$1__job=local__task=0/logs/rank-000.metrics.jsonl"; }

# loss_at RUN STEP: the train loss the run logged at STEP.
loss_at() { losses "$1" | awk -v s="$2" '$1 == s { print $2 }'; }

# within A B TOL: the train losses of runs A and B agree within TOL relative, all 20 steps.
within() {
	paste <(losses "$1") <(losses "$2") | awk -v tol="$3" -v b="$2" '
		$1 != $3 { bad = 1; exit }
		{ n++; d = $2 - $4; if (d < 0) d = -d; if (d / $2 > w) w = d / $2 }
		END { printf "%s: worst relative difference %.3g over %d steps\n", b, w, n > "/dev/stderr"
		      exit bad || !(n == 20 && w <= tol) }'
}

# layout NAME RANKS TENSOR PIPELINE ZERO ACCUM [ARGS...]: 8 sequences per step.
layout() {
	local name=$1 ranks=$2 t=$3 p=$4 z=$5 a=$6
	shift 6
	"$STORK" run hf.yaml --local-ranks "$ranks" --set run.name="$name" \
		--set parallel.tensor="$t" --set parallel.pipeline="$p" --set parallel.zero="$z" \
		--set train.grad_accum="$a" "$@"
}

@test "llama and gpt2 from a Hugging Face directory: the first step's loss and every gradient equal PyTorch's within 1e-5, and 20 AdamW steps' losses too" {
	for arch in llama gpt2; do
		loss=$("$GRADS" "hf-$arch" data/docs_train.bin 2 16 "grads-$arch")
		run /usr/bin/python3 "$REF" grads "hf-$arch" data/docs_train.bin 2 16 "grads-$arch" "$loss"
		echo "$output" | tail -1 >&3
		[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	done
	# a gradient the reference does not have is an error: the check can fail
	cp -r grads-llama grads-bad
	/usr/bin/python3 "$REF" make-model grads-bad llama 2
	run /usr/bin/python3 "$REF" grads hf-llama data/docs_train.bin 2 16 grads-bad "$loss"
	[ "$status" -ne 0 ]
	"$STORK" run hf.yaml >/dev/null
	run /usr/bin/python3 "$REF" train hf-llama data/docs_train.bin 2 16 20 1e-3 0.1 "$(metrics hf)"
	echo "$output" | tail -1 >&3
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
}

@test "weights in BF16, and a sharded set of 3 files with its index, load exactly and give PyTorch's gradients of the same values" {
	mkdir hf-bf16 hf-sharded
	/usr/bin/python3 "$REF" make-model hf-bf16 llama 3 BF16
	grep -q '"dtype": *"BF16"' <(head -c 2000 hf-bf16/model.safetensors | tr -d '\0')
	loss=$("$GRADS" hf-bf16 data/docs_train.bin 2 16 grads-bf16)
	run /usr/bin/python3 "$REF" grads hf-bf16 data/docs_train.bin 2 16 grads-bf16 "$loss"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	/usr/bin/python3 "$REF" make-model hf-sharded llama 1 F32 3
	ls hf-sharded/model-0000{1,2,3}-of-00003.safetensors hf-sharded/model.safetensors.index.json
	[ ! -e hf-sharded/model.safetensors ]
	# the same weights as hf-llama's one file: the same loss, bit for bit
	[ "$("$GRADS" hf-sharded data/docs_train.bin 2 16 grads-sharded)" = \
		"$("$GRADS" hf-llama data/docs_train.bin 2 16 grads-one)" ]
	cmp grads-sharded/model.safetensors grads-one/model.safetensors
}

@test "llama DP2, TP2, PP2 and TP2xPP2, with ZeRO-1, each follow the 1-rank run within 1e-5 over 20 steps" {
	layout one 1 1 1 0 4 >/dev/null
	for l in "dp2 2 1 1 2" "tp2 2 2 1 4" "pp2 2 1 2 4" "tp2pp2 4 2 2 4"; do
		read -r name ranks t p a <<<"$l"
		run layout "$name" "$ranks" "$t" "$p" 1 "$a"
		[ "$status" -eq 0 ] || { echo "$output"; return 1; }
		[[ "$output" == *"layout: dp $((ranks / (t * p))) x tp $t x pp $p (ZeRO-1)"* ]]
		within one "$name" 1e-5
	done
}

@test "llama TP2xPP2 preempted and resumed gives the uninterrupted run bit for bit; a DP2 checkpoint resumes as TP2xPP2" {
	layout full 4 2 2 1 4 >/dev/null
	run env STORK_STOP_AT_STEP=7 "$STORK" run hf.yaml --local-ranks 4 --set run.name=cut \
		--set parallel.tensor=2 --set parallel.pipeline=2 --set parallel.zero=1 \
		--set train.grad_accum=4
	[ "$status" -eq 12 ]
	run layout cut 4 2 2 1 4
	[ "$status" -eq 0 ]
	[[ "$output" == *"resumed from"*"step_00000007 at step 7"* ]]
	diff <(losses full) <(losses cut)
	# resharded: DP2 stopped at step 7, resumed as TP2xPP2
	run env STORK_STOP_AT_STEP=7 "$STORK" run hf.yaml --local-ranks 2 --set run.name=re \
		--set train.grad_accum=2
	[ "$status" -eq 12 ]
	run layout re 4 2 2 1 4
	[ "$status" -eq 0 ]
	[[ "$output" == *"layout: dp 1 x tp 2 x pp 2"*"resumed from"*"at step 7"* ]]
	within full re 1e-5
}

@test "round trip: Hugging Face in, 10 steps, stork export --format safetensors, and PyTorch's loss of the export is the engine's next loss (llama and gpt2)" {
	hf_config g.yaml hf-gpt2
	for arch in llama gpt2; do
		cfg=hf.yaml
		[ $arch = gpt2 ] && cfg=g.yaml
		"$STORK" run $cfg --set run.name=$arch --set train.steps=11 --set checkpoint.every=10 \
			--local-ranks 2 --set parallel.tensor=2 --set train.grad_accum=1 >/dev/null
		run "$STORK" export --format safetensors \
			runs/${arch}__job=local__task=0/checkpoints/step_00000010 out-$arch
		[ "$status" -eq 0 ]
		grep -q "\"model_type\": \"$arch\"" out-$arch/config.json
		# the model after 10 updates on batch 10 is what step 11 computed
		run /usr/bin/python3 "$REF" loss out-$arch data/docs_train.bin 2 16 10 "$(loss_at $arch 11)"
		echo "$output" >&3
		[ "$status" -eq 0 ]
	done
	# bf16: half the bytes, the same names
	"$STORK" export --format safetensors --dtype bf16 runs/llama__job=local__task=0 out-bf16 >/dev/null
	grep -q '"torch_dtype": "bfloat16"' out-bf16/config.json
	[ "$(stat -c %s out-bf16/model.safetensors)" -lt "$(stat -c %s out-llama/model.safetensors)" ]
	# the export is a Hugging Face directory model.init_from reads: the same loss again
	hf_config back.yaml out-llama
	"$STORK" run back.yaml --set run.name=back --set train.steps=1 >/dev/null
	run /usr/bin/python3 "$REF" loss out-llama data/docs_train.bin 2 16 0 "$(loss_at back 1)"
	[ "$status" -eq 0 ]
	run "$STORK" export --format onnx runs/llama__job=local__task=0 x
	[ "$status" -eq 2 ]
	[[ "$output" == *"--format onnx: use llmc or safetensors"* ]]
}

@test "a llama built from its settings trains, and its Stork model file exports and loads back" {
	small_config ll.yaml ll 4 64 2 32 20
	sed -i 's/^model:/model:\n  arch: llama\n  kv_heads: 2\n  tie_embeddings: true/' ll.yaml
	run "$STORK" run ll.yaml --set train.steps=4
	[ "$status" -eq 0 ]
	"$STORK" export runs/ll__job=local__task=0 ll.bin >/dev/null
	# the file's shape agrees with ll.yaml's settings: taken
	"$STORK" run ll.yaml --set run.name=back --set model.init_from="$PWD/ll.bin" \
		--set train.steps=1 >/dev/null
	grep -q "weights from $PWD/ll.bin" runs/back__job=local__task=0/logs/rank-000.log
	# a setting that disagrees with the file would be ignored: refused, naming both
	run "$STORK" run ll.yaml --set run.name=back2 --set model.init_from="$PWD/ll.bin" \
		--set model.kv_heads=4
	[ "$status" -eq 3 ]
	[[ "$output" == *"model.kv_heads is 4, but model.init_from $PWD/ll.bin has 2"* ]]
}

@test "what cannot be loaded or honoured is refused, naming the file, the tensor and both shapes" {
	# a tensor of another shape
	mkdir bad && cp hf-llama/model.safetensors bad/ && sed 's/"intermediate_size": 96/"intermediate_size": 128/' hf-llama/config.json >bad/config.json
	hf_config b.yaml bad
	run "$STORK" run b.yaml --set run.name=bad
	[ "$status" -ne 0 ]
	[[ "$output" == *"model.layers.0.mlp.gate_proj.weight in $PWD/bad/model.safetensors is [96, 64], $PWD/bad/config.json says [128, 64]"* ]] ||
		[[ "$output" == *"model.layers.0.mlp.gate_proj.weight in bad/model.safetensors is [96, 64], bad/config.json says [128, 64]"* ]]
	# an unknown model_type
	sed -i 's/"model_type": "llama"/"model_type": "mistral"/' bad/config.json
	run "$STORK" run b.yaml --set run.name=bad2
	[ "$status" -ne 0 ]
	[[ "$output" == *"config.json"*"mistral"* ]]
	# tensor parallelism must split whole key-value groups
	run "$STORK" run ll.yaml 2>/dev/null || true
	small_config ll.yaml ll 4 64 2 32 4
	sed -i 's/^model:/model:\n  arch: llama\n  kv_heads: 1/' ll.yaml
	run "$STORK" run ll.yaml --local-ranks 2 --set parallel.tensor=2
	[ "$status" -eq 3 ]
	[[ "$output" == *"parallel.tensor: 2 does not divide model.kv_heads = 1"*"whole groups (4 query heads per key-value head)"* ]]
	# a Llama setting under gpt2, a shape key beside init_from: refused, not ignored
	run "$STORK" run tiny.yaml --set model.kv_heads=2
	[ "$status" -eq 3 ]
	[[ "$output" == *"model.kv_heads is a setting of model.arch: llama; model.arch is gpt2"* ]]
	run "$STORK" run hf.yaml --set model.layers=3
	[ "$status" -eq 3 ]
	[[ "$output" == *"model.layers is 3, but model.init_from hf-llama has 2"* ]]
}

@test "llama with train.recompute gelu and block, parallel.overlap and bf16: recompute and overlap keep the losses bit for bit, bf16 tracks fp32" {
	layout base 4 2 2 1 4 >/dev/null
	for mode in gelu block; do
		layout "re$mode" 4 2 2 1 4 --set train.recompute="$mode" >/dev/null
		diff <(losses base) <(losses "re$mode")
	done
	layout dp 2 1 1 0 2 >/dev/null
	run layout ov 2 1 1 0 2 --set parallel.overlap=true
	[ "$status" -eq 0 ]
	diff <(losses dp) <(losses ov)
	layout bf 1 1 1 0 4 --set train.precision=bf16 >/dev/null
	layout one 1 1 1 0 4 >/dev/null
	paste <(losses one) <(losses bf) | awk '{ d = $2 - $4; if (d < 0) d = -d; if (d / $2 > w) w = d / $2 }
		END { printf "bf16 against fp32: worst relative difference %.3g\n", w > "/dev/stderr"; exit !(NR == 20 && w > 0 && w < 0.02) }'
}
