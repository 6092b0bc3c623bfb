#!/usr/bin/env bats
# Telemetry of an engine run on the test cluster: MFU, data wait and
# memory in the metrics, the step lines and the report, and each node's
# .prom file for Prometheus' node_exporter.

load helpers
load ../training

STORK=${abs_top_builddir:?set by make check}/launcher/stork

setup() {
	setup_workdir
	docs_data
	small_config run.yaml tm 2 64 4 32 60
}

teardown() {
	cancel_test_job
	teardown_memory_cgroup
}

# prom_check FILE...: each file parses with Prometheus' own client and holds
# the job's series (labels job, run, host, rank); every rank of the run is
# in one of them, rank 0 alone has MFU.
prom_check() {
	/usr/bin/python3 - "$job" "$@" <<-'PY'
	import sys
	from prometheus_client.parser import text_string_to_metric_families
	job, paths = sys.argv[1], sys.argv[2:]
	ranks, mfu, hosts = set(), set(), set()
	for path in paths:
	    with open(path) as f:
	        families = {m.name: m for m in text_string_to_metric_families(f.read())}
	    for name in ("stork_step", "stork_train_loss", "stork_step_seconds",
	                 "stork_tokens_per_second", "stork_data_wait_seconds",
	                 "stork_rank_memory_bytes", "stork_daemon_resident_bytes",
	                 "stork_sample_timestamp_seconds"):
	        assert name in families and families[name].type == "gauge", (path, name)
	    for s in families["stork_step"].samples:
	        assert s.labels["job"] == job and s.labels["run"] == "tm", s
	        assert s.value >= 1, s
	        ranks.add(int(s.labels["rank"]))
	        hosts.add(s.labels["host"])
	    for s in families["stork_rank_memory_bytes"].samples:
	        assert s.value > 0, s
	    for s in families["stork_daemon_resident_bytes"].samples:
	        assert s.value > 1 << 20 and s.labels["job"] == job, s
	    mfu |= {int(s.labels["rank"]) for s in families.get("stork_mfu_ratio", ()).samples
	            if 0 < s.value < 1} if "stork_mfu_ratio" in families else set()
	print("ranks", sorted(ranks), "hosts", sorted(hosts), "mfu", sorted(mfu))
	assert ranks == {0, 1, 2, 3} and hosts == {"n1", "n2"} and mfu == {0}
	PY
}

@test "a 2-node run: MFU by stork bench train's formula in the step lines and rank 0's metrics, data wait and memory in every rank's metrics and the report; each node's .prom file parses with Prometheus' client with the job's labels, and is gone at the end" {
	mkdir -p prom snap
	export STORK_FAULT_STEP_DELAY=0.1
	cat >tm.sh <<-SCRIPT
	#!/bin/bash
	#SBATCH -N2 --ntasks-per-node=1 -c2 -o tm.out
	srun --mpi=pmix $STORK run run.yaml --local-ranks 2 metrics.sample_s=0.5 metrics.prometheus_dir=$PWD/prom
	SCRIPT
	job=$(submit tm.sh)
	dir=$(run_dir tm "$job")
	wait_job_state "$job" RUNNING 60
	wait_step "$dir" 20 60
	# both nodes' files while the run runs (replaced whole: a copy is one sample)
	for _ in $(seq 50); do
		[ "$(find prom -name 'stork_*.prom' | wc -l)" -eq 2 ] && break
		sleep 0.2
	done
	# readable by node_exporter, which runs as another user
	[ "$(find prom -name "stork_${job}_*.prom" -perm -044 | wc -l)" -eq 2 ]
	cp prom/stork_"$job"_*.prom snap/
	wait_job_state "$job" 'COMPLETED|FAILED' 120
	cat tm.out
	[ "$(job_field "$job" JobState)" = COMPLETED ]
	ls -l snap
	prom_check snap/*.prom
	# removed with the daemons: nothing stale for node_exporter
	[ -z "$(ls prom)" ]
	# MFU: the FLOPs per token of stork bench train, the peak rank 0 logged
	grep -E '^step [0-9]+/60 \| .* tok/s( \| eta [^|]*)? \| MFU [0-9.]+%$' tm.out
	read -r fpt peak < <(sed -n 's/.*MFU: \([0-9.e+]*\) model FLOPs per token against a peak of \([0-9.e+]*\) GFLOP\/s.*/\1 \2/p' "$dir/logs/rank-000.log" | head -n1)
	echo "FLOPs per token $fpt, peak $peak GFLOP/s" >&3
	bench=$("$STORK" bench train run.yaml --steps 1 | sed -n 's/^model FLOPs\/token: \([^ ]*\) .*/\1/p')
	[ "$(printf '%.3g' "$fpt")" = "$bench" ]
	m=$dir/logs/rank-000.metrics.jsonl
	paste <(grep '"metric":"mfu"' "$m" | jq -r '"\(.step) \(.value)"') \
	      <(grep '"metric":"tokens_per_sec"' "$m" | jq -r '"\(.step) \(.value)"') |
		awk -v fpt="$fpt" -v peak="$peak" '
			{ n++; want = fpt * $4 / (peak * 1e9); d = ($2 - want) / want; if (d < 0) d = -d
			  if ($1 != $3 || d > 1e-3) bad++ }
			END { printf "%d steps of MFU, %d off the formula\n", n, bad > "/dev/stderr"; exit !(n == 60 && !bad) }'
	# every rank's data wait each step and its memory; each node's first rank storkd's
	for r in 000 001 002 003; do
		[ "$(grep -c '"metric":"data_wait_ms"' "$dir/logs/rank-$r.metrics.jsonl")" -eq 60 ]
		grep -q '"metric":"rank_bytes"' "$dir/logs/rank-$r.metrics.jsonl"
	done
	for r in 000 002; do grep -q '"metric":"host_rss_bytes"' "$dir/logs/rank-$r.metrics.jsonl"; done
	for r in 001 003; do ! grep -q '"metric":"host_rss_bytes"' "$dir/logs/rank-$r.metrics.jsonl" || false; done
	! grep -q '"metric":"mfu"' "$dir/logs/rank-001.metrics.jsonl" || false
	# the report: the figures in words and as charts
	"$STORK" report --text "$dir" | tee report.txt
	grep -E '^MFU: median [0-9.]+%' report.txt
	grep -E '^data wait per rank \(median ms per step\): 0: [0-9.]+ 1: [0-9.]+ 2: [0-9.]+ 3: [0-9.]+$' report.txt
	grep -E '^host memory \(storkd resident, peak MiB, by each node.s first rank\): 0: [0-9.]+ 2: [0-9.]+$' report.txt
	"$STORK" report "$dir" -o tm.html
	for id in mfu-chart data-wait-chart rss-chart rank-memory-chart; do grep -q "id=\"$id\"" tm.html; done
	check_report_html tm.html
	nodes_idle
}

@test "an engine run whose storkd outgrows its memory cgroup's limit ends out_of_memory (exit 23) naming the host, the node's ranks, the cgroup and its limit; stork report says what to change" {
	memory_cgroup 300M
	# 2 ranks of 56M parameters: about 1.8 GB of model state in one storkd
	small_config big.yaml big 8 768 4 32 20
	# srun's task joins the cgroup first: the launcher and its storkd run in it
	cat >big.sh <<-SCRIPT
	#!/bin/bash
	#SBATCH -N1 --ntasks-per-node=1 -c2 -o big.out
	srun --mpi=pmix sh -c 'echo \$\$ >"\$1/cgroup.procs" && exec "\$2" run big.yaml --local-ranks 2' sh $MEM_CGROUP $STORK
	SCRIPT
	run sbatch_wait big.sh
	cat big.out
	dir=$(ls -d "$WORK"/runs/big__job=*__task=0)
	jq . "$dir/exit_info.json"
	jq -e --arg cg "$MEM_CGROUP" '.reason == "out_of_memory" and .exit_code == 23 and
		.first_failure.rank == null and .first_failure.host == "n1" and
		.first_failure.out_of_memory.cgroup == $cg and
		.first_failure.out_of_memory.limit_bytes == 314572800' "$dir/exit_info.json"
	grep -q "^stork: out_of_memory (exit 23): storkd (pid [0-9]*) on n1, ranks 0-1, was killed by the out-of-memory killer: its memory cgroup $MEM_CGROUP reached its limit of 300.0 MiB" big.out
	"$STORK" report --text "$dir" | grep '^out of memory, to fit: .*train.recompute: block or gelu.*parallel.zero: 1'
}
