#!/usr/bin/env bats
# stork plan: every layout of a world that fits, with its memory, bubble,
# traffic and estimated speed, fastest first; the best as --set options
# that run; --check beside a measured run. The model is parallel.bats's:
# 4 layers, 4 heads, vocabulary 257 padded to 384, 8 sequences of 32
# tokens per step on 4 ranks.

load helpers

setup() {
	setup_run
	small_config tiny.yaml tiny 4 64 2 32 20
	export XDG_CACHE_HOME=$WORK/cache
}

# rows: the table's layouts as "dp tp pp zero recompute B m", from plan's output in $output.
rows() {
	awk '/^ +#/ { t = 1; next } t && /^ +[0-9]+ / { print $2, $3, $4, $5, $6, $7, $9 }' <<<"$output"
}

# column N: the table's Nth field, one per line.
column() {
	awk -v n="$1" '/^ +#/ { t = 1; next } t && /^ +[0-9]+ / { print $n }' <<<"$output"
}

# mib VALUE UNIT: the value in MiB.
mib() {
	awk -v v="$1" -v u="$2" 'BEGIN { f["B"] = 1 / 1048576; f["KiB"] = 1 / 1024; f["MiB"] = 1; f["GiB"] = 1024; printf "%.6f\n", v * f[u] }'
}

# expected_layouts: the layouts of 4 ranks for tiny.yaml by the rules of
# stork(1): tensor divides the heads (4) and the padded vocabulary (384),
# pipeline at most the layers (4), tensor x pipeline x replicas = 4; the
# global batch of 8 sequences divides into the replicas, each replica's
# share into micro-batches, at least one per stage; ZeRO-1 to 3 only with
# replicas (2 and 3: CPU nodes, as here); every recompute mode.
expected_layouts() {
	local tp pp dp share m z r
	for tp in 1 2 4; do
		for pp in 1 2 4; do
			((4 % (tp * pp) == 0)) || continue
			dp=$((4 / (tp * pp)))
			((8 % dp == 0)) || continue
			share=$((8 / dp))
			for ((m = pp; m <= share; m++)); do
				((share % m == 0)) || continue
				for z in 0 1 2 3; do
					((z == 0 || dp > 1)) || continue
					for r in none gelu block; do
						echo "$dp $tp $pp $z $r $((share / m)) $m"
					done
				done
			done
		done
	done
}

@test "the layouts printed are exactly the valid ones, counted by the rules" {
	run "$STORK" plan tiny.yaml --nodes 1 --gpus-per-node 4 --gpu-memory 100
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	n=$(expected_layouts | wc -l)
	echo "expected $n layouts" >&3
	[ "$n" -eq 111 ]
	[[ "$output" == *"$n valid layouts, $n fit"* ]]
	diff <(expected_layouts | sort) <(rows | sort)
	# on CPU nodes GPUs per node are ranks per node: the same plan
	run "$STORK" plan tiny.yaml --nodes 2 --ranks-per-node 2 --gpu-memory 100
	[ "$status" -eq 0 ]
	diff <(expected_layouts | sort) <(rows | sort)
}

@test "a layout that does not fit --gpu-memory is left out, and none fitting is exit 6" {
	run "$STORK" plan tiny.yaml --nodes 1 --gpus-per-node 4 --gpu-memory 100
	[ "$status" -eq 0 ]
	all=$(rows | wc -l)
	# 2.56 MiB: some layouts need more
	paste <(column 10) <(column 11) | while read -r v u; do mib "$v" "$u"; done |
		awk '$1 > 2.56 { big = 1 } END { exit !big }'
	run "$STORK" plan tiny.yaml --nodes 1 --gpus-per-node 4 --gpu-memory 0.0025
	[ "$status" -eq 0 ]
	fit=$(rows | wc -l)
	echo "$fit of $all layouts fit 2.56 MiB" >&3
	[ "$fit" -gt 0 ]
	[ "$fit" -lt "$all" ]
	[[ "$output" == *"$all valid layouts, $fit fit"* ]]
	paste <(column 10) <(column 11) | while read -r v u; do mib "$v" "$u"; done |
		awk '$1 > 2.56 { print "does not fit: " $1 " MiB"; big = 1 } END { exit big }'
	run "$STORK" plan tiny.yaml --nodes 1 --gpus-per-node 4 --gpu-memory 0.0001
	[ "$status" -eq 6 ]
	[[ "$output" == *"none of the 111 valid layouts of 1 x 4 ranks fits"* ]]
}

@test "a memory that only ZeRO-2 or 3 layouts fit: the plan says so and offers only them" {
	# one head (no tensor parallelism) and a vocabulary of 8192: the
	# embedding is most of the model, which a pipeline stage holds whole
	small_config wide.yaml wide 4 64 2 32 20
	sed -i 's/heads: 4/heads: 1/; s/vocab_size: 257/vocab_size: 8192/' wide.yaml
	run "$STORK" plan wide.yaml --nodes 1 --gpus-per-node 4 --gpu-memory 100
	[ "$status" -eq 0 ]
	[[ "$output" != *"only with parallel.zero 2 or 3"* ]]
	# the least memory of a layout at zero 0 or 1, and at zero 2 or 3, in MiB
	paste <(column 5) <(column 10) <(column 11) | while read -r z v u; do echo "$z $(mib "$v" "$u")"; done >mem.txt
	low=$(awk '$1 <= 1 && (!n++ || $2 < m) { m = $2 } END { print m }' mem.txt)
	sharded=$(awk '$1 >= 2 && (!n++ || $2 < m) { m = $2 } END { print m }' mem.txt)
	echo "least memory: $low MiB at zero 0 or 1, $sharded MiB at zero 2 or 3" >&3
	awk -v a="$sharded" -v b="$low" 'BEGIN { exit !(a < b) }'
	# between the two, in GiB
	limit=$(awk -v a="$sharded" -v b="$low" 'BEGIN { printf "%.9f", (a + b) / 2 / 1024 }')
	run "$STORK" plan wide.yaml --nodes 1 --gpus-per-node 4 --gpu-memory "$limit"
	[ "$status" -eq 0 ]
	[[ "$output" == *"only with parallel.zero 2 or 3 does the model fit this memory"* ]]
	[ "$(column 5 | wc -l)" -gt 0 ]
	column 5 | awk '$1 < 2 { print "zero " $1 " offered"; bad = 1 } END { exit bad }'
	[[ "$output" == *"best: "*"--set parallel.zero="[23]* ]]
}

@test "the layouts are sorted by estimated tokens/s" {
	run "$STORK" plan tiny.yaml --nodes 1 --gpus-per-node 4 --gpu-memory 100
	[ "$status" -eq 0 ]
	column 18 | awk 'NR > 1 && $1 > last { print "not sorted at line " NR; bad = 1 } { last = $1 } END { exit bad }'
	[ "$(column 18 | sort -g | uniq | wc -l)" -gt 5 ]
}

@test "the best line's --set options run" {
	run "$STORK" plan tiny.yaml --nodes 1 --gpus-per-node 4 --top 3
	[ "$status" -eq 0 ]
	[ "$(rows | wc -l)" -eq 3 ]
	read -r dp tp pp _ <<<"$(rows | head -1)"
	best=$(grep '^best: ' <<<"$output" | sed 's/^best: //')
	[[ "$best" == "--set parallel.tensor=$tp --set parallel.pipeline=$pp "*" --set train.grad_accum="* ]]
	read -r -a args <<<"$best"
	run "$STORK" run tiny.yaml --local-ranks 4 "${args[@]}" --set train.steps=2 --set run.name=best
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	[[ "$output" == *"layout: dp $dp x tp $tp x pp $pp"* ]]
}

@test "the memory per rank is bench train's" {
	run "$STORK" plan tiny.yaml --nodes 1 --gpus-per-node 4 --gpu-memory 100
	[ "$status" -eq 0 ]
	for layout in "1 1 0 2 1" "2 1 1 2 2" "1 2 0 2 2" "2 2 0 2 4"; do
		read -r t p z b m <<<"$layout"
		read -r v u <<<"$(paste <(rows) <(column 10) <(column 11) |
			awk -v t="$t" -v p="$p" -v z="$z" -v b="$b" -v m="$m" \
				'$2 == t && $3 == p && $4 == z && $5 == "none" && $6 == b && $7 == m { print $8, $9 }')"
		plan=$(mib "$v" "$u")
		bench=$("$STORK" bench train tiny.yaml --steps 0 --ranks 4 --set parallel.tensor="$t" \
			--set parallel.pipeline="$p" --set parallel.zero="$z" --set train.batch_size="$b" \
			--set train.grad_accum="$m" | awk '$1 ~ /^[0-9]+$/ && $10 > max { max = $10 } END { print max }')
		echo "tp $t pp $p zero $z: plan $plan MiB, bench train $bench MiB" >&3
		awk -v a="$plan" -v b="$bench" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.1 * b) }'
	done
}

@test "--check puts the estimate beside a run's measured step time and their ratio" {
	"$STORK" run tiny.yaml --local-ranks 4 --set run.name=dp4 --set train.steps=6 >/dev/null
	dir=runs/dp4__job=local__task=0
	run "$STORK" plan --check "$dir"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	echo "$output" >&3
	# every rank's steps 2..6 (the first allocates)
	median=$(jq -r 'select(.metric == "step_time_ms" and .step > 1) | .value' "$dir"/logs/rank-*.metrics.jsonl |
		sort -g | awk '{ v[NR] = $1 } END { printf "%.2f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
	[[ "$output" == *"measured: $median ms per step (median step_time_ms of 20 steps over 4 ranks, each attempt's first left out)"* ]]
	[ "$(rows)" = "4 1 1 0 none 2 1" ]
	est=$(column 17)
	ratio=$(sed -n 's/^estimate \/ measured: //p' <<<"$output")
	awk -v e="$est" -v m="$median" -v r="$ratio" 'BEGIN { d = e / m - r; if (d < 0) d = -d; exit !(d < 0.006) }'
}

@test "figures are measured once and kept in the user's cache; bench train's figure is used" {
	run "$STORK" plan tiny.yaml --nodes 1 --gpus-per-node 2 --cores-per-node 2
	[ "$status" -eq 0 ]
	[[ "$output" == *"probing it as 2 rank(s) of 1 thread(s) on 2 core(s)"* ]]
	[[ "$output" == *"compute: "*"stork plan's probe (4 of 4 layers, vocabulary 384, B=2)"* ]]
	[ "$(stat -c %a "$XDG_CACHE_HOME/stork/$(hostname)")" = 700 ]
	run "$STORK" plan tiny.yaml --nodes 1 --gpus-per-node 2 --cores-per-node 2
	[ "$status" -eq 0 ]
	[[ "$output" != *"probing"* ]]
	[[ "$output" == *"between nodes: 20.0 us + 10.00 GB/s: default, not measured"* ]]
	run "$STORK" bench train tiny.yaml --steps 2
	[ "$status" -eq 0 ]
	[[ "$output" == *"kept for stork plan: $XDG_CACHE_HOME/stork/"* ]]
	run "$STORK" plan tiny.yaml --nodes 1 --gpus-per-node 2 --cores-per-node 2
	[[ "$output" == *"compute: "*"stork bench train of this model on $(hostname)"* ]]
	# ranks sharing cores: bench train (one process) does not say what they get; the probe does
	run "$STORK" plan tiny.yaml --nodes 1 --gpus-per-node 4 --cores-per-node 2
	[[ "$output" == *"compute: "*"stork plan's probe"*"4 ranks of 1 thread(s) on 2 core(s)"* ]]
}

@test "bad arguments are usage errors, a bad configuration names file:line:column" {
	run "$STORK" plan
	[ "$status" -eq 2 ]
	[[ "$output" == *"usage: stork plan CONFIG --nodes N --gpus-per-node G"* ]]
	run "$STORK" plan tiny.yaml --nodes 0 --gpus-per-node 4
	[ "$status" -eq 2 ]
	[[ "$output" == *"--nodes: '0' is not a positive number"* ]]
	run "$STORK" plan tiny.yaml --nodes 2
	[ "$status" -eq 2 ]
	run "$STORK" plan tiny.yaml --nodes 1 --gpus-per-node 4 --gpu-memory lots
	[ "$status" -eq 2 ]
	printf 'train:\n  batch_size: 2\n  bogus: 1\n' >bad.yaml
	run "$STORK" plan bad.yaml --nodes 1 --gpus-per-node 4
	[ "$status" -eq 3 ]
	[[ "$output" == *"bad.yaml:3:3"* ]]
	run "$STORK" plan tiny.yaml --nodes 1 --gpus-per-node 3 --set parallel.tensor=2
	[ "$status" -eq 3 ]
	[[ "$output" == *"parallel.tensor (2) x parallel.pipeline (1)"*"does not divide the 3 ranks"* ]]
	mkdir -p empty
	run "$STORK" plan --check empty
	[ "$status" -eq 7 ]
	[[ "$output" == *"empty"*"not a run directory"* ]]
}
