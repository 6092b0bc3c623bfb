#!/usr/bin/env bats
# ZeRO-2 and 3 (parallel.zero) on the test cluster: 2 nodes x 2 ranks give
# ZeRO-1's losses bit for bit (ZeRO-3's thread too, across the nodes), and a model that does not fit a memory
# limit at ZeRO-1 trains under it at ZeRO-3.

load helpers
load ../training

STORK=${abs_top_builddir:?set by make check}/launcher/stork

setup() {
	setup_workdir
	docs_data
}

teardown() {
	cancel_test_job
	teardown_memory_cgroup
}

@test "2 nodes x 2 ranks, DP4, GPT-2 and a GQA Llama: parallel.zero 2 and 3, and 3 with parallel.overlap, give ZeRO-1's losses and gradient norms bit for bit" {
	small_config run.yaml z 4 64 2 32 20
	for arch in gpt2 llama; do
		set -- --set model.arch=$arch
		[ $arch = gpt2 ] || set -- "$@" --set model.kv_heads=1
		for run in z1 z2 z3 z3o; do
			z=${run#z} overlap=false
			[ "$z" = 3o ] && z=3 overlap=true
			cat >$arch$run.sh <<-SCRIPT
			#!/bin/bash
			#SBATCH -N2 --ntasks-per-node=1 -c2 -o $arch$run.out
			srun --mpi=pmix $STORK run run.yaml --local-ranks 2 --set run.name=$arch$run --set parallel.zero=$z --set parallel.overlap=$overlap $*
			SCRIPT
			run sbatch_wait $arch$run.sh
			cat $arch$run.out
			[ "$status" -eq 0 ]
		done
		grep -q 'parallel.overlap: a thread gathers the next layer' \
			"$(ls -d "$WORK"/runs/${arch}z3o__job=*__task=0)/logs/rank-002.log"
		for run in z2 z3 z3o; do
			for m in train_loss grad_norm; do
				a=$(ls -d "$WORK"/runs/${arch}z1__job=*__task=0) b=$(ls -d "$WORK"/runs/$arch${run}__job=*__task=0)
				[ "$(grep -c "\"metric\":\"$m\"" "$a/logs/rank-000.metrics.jsonl")" -eq 20 ]
				diff <(grep -h "\"metric\":\"$m\"" "$a/logs/rank-000.metrics.jsonl" | sed 's/.*"step"://') \
					<(grep -h "\"metric\":\"$m\"" "$b/logs/rank-000.metrics.jsonl" | sed 's/.*"step"://') ||
					{ echo "$arch $run: $m differs from zero 1's" >&2; false; }
			done
		done
	done
}

@test "a model whose ZeRO-1 run outgrows a 2.1 GB memory cgroup ends out_of_memory there, and trains under it at ZeRO-3" {
	memory_cgroup 2100M
	# 16 layers of 512 channels (50M parameters, 201 MB) on 4 ranks of one storkd:
	# ZeRO-1 holds about 2.4 GB, ZeRO-3 about 1.7 GB at its checkpoint
	small_config big.yaml big 16 512 2 32 4
	for z in 1 3; do
		cat >big$z.sh <<-SCRIPT
		#!/bin/bash
		#SBATCH -N1 --ntasks-per-node=1 -c2 -o big$z.out
		srun --mpi=pmix sh -c 'echo \$\$ >"\$1/cgroup.procs" && exec "\$2" run big.yaml --local-ranks 4 --set run.name=big$z --set parallel.zero=$z' sh $MEM_CGROUP $STORK
		SCRIPT
		run sbatch_wait big$z.sh
		cat big$z.out
	done
	jq -e '.reason == "out_of_memory"' "$(ls -d "$WORK"/runs/big1__job=*__task=0)/exit_info.json"
	jq -e '.reason == "completed"' "$(ls -d "$WORK"/runs/big3__job=*__task=0)/exit_info.json"
	grep -q 'layout: dp 4 x tp 1 x pp 1 (ZeRO-3)' big3.out
}
