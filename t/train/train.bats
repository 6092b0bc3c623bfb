#!/usr/bin/env bats
# storkd's training engine on CPU, run locally with `stork run` (no Slurm).

load helpers

setup() {
	setup_run
}

@test "two runs of one config give bit-identical losses" {
	"$STORK" run tiny.yaml --set run.name=a >/dev/null
	"$STORK" run tiny.yaml --set run.name=b >/dev/null
	[ "$(losses a | wc -l)" -eq 20 ]
	diff <(losses a) <(losses b)
}

@test "a run stopped after step 7 and resumed gives the uninterrupted run's losses bit for bit" {
	"$STORK" run tiny.yaml --set run.name=full >/dev/null
	run env STORK_STOP_AT_STEP=7 "$STORK" run tiny.yaml --set run.name=cut
	[ "$status" -eq 12 ]
	[[ "$output" == *"checkpoint step_00000007 committed"* ]]
	[ "$(losses cut | wc -l)" -eq 7 ]
	run "$STORK" run tiny.yaml --set run.name=cut
	[ "$status" -eq 0 ]
	[[ "$output" == *"resumed from"*"step_00000007 at step 7"* ]]
	[ "$(losses full | wc -l)" -eq 20 ]
	diff <(losses full) <(losses cut)
}

@test "train.fused false (the separate reference kernels) gives the fused run's losses bit for bit, with 2 micro-batches" {
	"$STORK" run tiny.yaml --set run.name=fused --set train.grad_accum=2 >/dev/null
	"$STORK" run tiny.yaml --set run.name=separate --set train.grad_accum=2 --set train.fused=false >/dev/null
	[ "$(losses fused | wc -l)" -eq 20 ]
	diff <(losses fused) <(losses separate)
	grep -q '"train.fused": false\|fused: false' runs/separate__job=local__task=0/config/stork.yaml
}

@test "train.precision bf16 on the CPU: emulated and said, within 2% of fp32, and its checkpoint resumes in fp32 (the format is fp32)" {
	"$STORK" run tiny.yaml --set run.name=fp32 >/dev/null
	run "$STORK" run tiny.yaml --set run.name=bf16 --set train.precision=bf16
	[ "$status" -eq 0 ]
	[[ "$output" == *"precision: bf16 matrix products emulated on the CPU"* ]]
	grep -q "precision: bf16 matrix products emulated" runs/bf16__job=local__task=0/logs/rank-000.log
	[ "$(losses bf16 | wc -l)" -eq 20 ]
	# not fp32 in disguise, and within 2% of it at every step
	if diff -q <(losses fp32) <(losses bf16) >/dev/null; then
		echo "the bf16 losses are fp32's"
		return 1
	fi
	paste <(losses fp32) <(losses bf16) | awk '
		{ n++; d = $2 - $4; if (d < 0) d = -d; r = d / $2; if (r > worst) worst = r }
		END { printf "bf16 against fp32: worst relative difference %.3g over %d steps\n", worst, n > "/dev/stderr";
		      exit !(n == 20 && worst <= 0.02) }'
	# a bf16 checkpoint continued in fp32 (as on a machine without bf16)
	run env STORK_STOP_AT_STEP=7 "$STORK" run tiny.yaml --set run.name=mixed --set train.precision=bf16
	[ "$status" -eq 12 ]
	run "$STORK" run tiny.yaml --set run.name=mixed --set train.precision=fp32
	[ "$status" -eq 0 ]
	[[ "$output" == *"resumed from"*"step_00000007 at step 7"* ]]
	[ "$(losses mixed | wc -l)" -eq 20 ]
	diff <(losses bf16 | head -7) <(losses mixed | head -7)
}

@test "train.precision tf32 on the CPU: said, and fp32's losses bit for bit; so are those of auto, the default" {
	"$STORK" run tiny.yaml --set run.name=fp32 --set train.precision=fp32 >/dev/null
	run "$STORK" run tiny.yaml --set run.name=tf32 --set train.precision=tf32
	[ "$status" -eq 0 ]
	[[ "$output" == *"precision: tf32 computes in fp32 on the CPU"* ]]
	[ "$(losses tf32 | wc -l)" -eq 20 ]
	diff <(losses fp32) <(losses tf32)
	run "$STORK" run tiny.yaml --set run.name=auto
	[ "$status" -eq 0 ]
	[[ "$output" != *"precision:"* ]]
	[ "$(losses auto | wc -l)" -eq 20 ]
	diff <(losses fp32) <(losses auto)
}

@test "train.log_every: rank 0's progress line and the rank logs' step lines every N steps and at the last" {
	run "$STORK" run tiny.yaml --set run.name=every --set train.log_every=6
	[ "$status" -eq 0 ]
	[ "$(grep -o '^step [0-9]*/20 | loss' <<<"$output" | tr '\n' ' ')" = "step 6/20 | loss step 12/20 | loss step 18/20 | loss step 20/20 | loss " ]
	[ "$(grep -o '\] step [0-9]* loss' runs/every__job=local__task=0/logs/rank-000.log | tr '\n' ' ')" = "] step 6 loss ] step 12 loss ] step 18 loss ] step 20 loss " ]
	[ "$(losses every | wc -l)" -eq 20 ]
}

@test "data parallel: 2 ranks x batch B match 1 rank x batch 2B within 1e-5 relative over 10 steps" {
	"$STORK" run tiny.yaml --set run.name=one --set train.batch_size=8 --set train.steps=10 --local-ranks 1 >/dev/null
	"$STORK" run tiny.yaml --set run.name=two --set train.batch_size=4 --set train.steps=10 --local-ranks 2 >/dev/null
	# Both ranks of the 2-rank run log the same (all-reduced) loss.
	diff <(losses two 000) <(losses two 001)
	paste <(losses one) <(losses two) | awk '
		{ n++; d = $2 - $4; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2);
		  if (r > worst) worst = r }
		END { printf "worst relative difference %.3g over %d steps\n", worst, n > "/dev/stderr";
		      exit !(n == 10 && worst <= 1e-5) }'
}

@test "the loss falls on the project's own text" {
	run "$STORK" run tiny.yaml --set run.name=fall --set train.steps=60 --set train.val_every=20
	[ "$status" -eq 0 ]
	first=$(losses fall | head -3 | awk '{ s += $2 } END { print s / NR }')
	last=$(losses fall | tail -3 | awk '{ s += $2 } END { print s / NR }')
	echo "mean loss of the first 3 steps $first, of the last 3 $last" >&3
	awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.0) }'
}

@test "the run directory holds the resolved config, per-rank logs with prefixed lines, metrics and provenance" {
	"$STORK" run tiny.yaml --local-ranks 2 >/dev/null
	dir=runs/tiny__job=local__task=0
	[ -s $dir/config/stork.yaml ]
	grep -q 'padded_vocab_size: 384' $dir/config/stork.yaml
	for r in 000 001; do
		[ -s $dir/logs/rank-$r.log ]
		# every line prefixed (a negated command mid-test would not fail it)
		if grep -vE '^\[[0-9]+/[0-9]+ [^ ]+ [0-9T:.-]+Z\] ' $dir/logs/rank-$r.log; then false; fi
		for m in train_loss val_loss lr grad_norm step_time_ms tokens_per_sec; do
			grep -q "\"metric\":\"$m\"" $dir/logs/rank-$r.metrics.jsonl
		done
	done
	[ -s $dir/provenance/build.json ]
	[ "$(readlink $dir/checkpoints/latest)" = step_00000020 ]
}

@test "checkpoint.keep keeps only the newest checkpoints" {
	"$STORK" run tiny.yaml --set checkpoint.every=5 --set checkpoint.keep=2 >/dev/null
	run ls runs/tiny__job=local__task=0/checkpoints
	[ "$output" = $'latest\nstep_00000015\nstep_00000020' ]
}

@test "a log or metrics file on a full disk: said once on stderr naming the file, the run goes on" {
	mkdir -p runs/tiny__job=local__task=0/logs
	# a link planted in its place is never followed: the rank fails naming it (and the run ends)
	ln -s /dev/full runs/tiny__job=local__task=0/logs/rank-000.metrics.jsonl
	run timeout 60 "$STORK" run tiny.yaml
	echo "$output"
	[ "$status" -ne 0 ] && [ "$status" -ne 124 ]
	[[ "$output" == *"rank-000.metrics.jsonl: a symbolic link: refused"* ]]
	rm runs/tiny__job=local__task=0/logs/rank-000.metrics.jsonl
	# the full disk itself: a device that answers every write with ENOSPC, as /dev/full
	[ "$(id -u)" -eq 0 ] || skip "needs root, to make the device node of a full disk"
	mknod runs/tiny__job=local__task=0/logs/rank-000.metrics.jsonl c 1 7
	run timeout 120 "$STORK" run tiny.yaml
	[ "$status" -eq 0 ]
	[ "$(grep -c 'rank-000.metrics.jsonl: No space left on device; its lines are being lost' <<<"$output")" -eq 1 ]
	[ "$(readlink runs/tiny__job=local__task=0/checkpoints/latest)" = step_00000020 ]
}

@test "stork run | head: the run outlives the closed pipe, trains every step, exit_info says completed" {
	run bash -c '"$1" run tiny.yaml | head -n 1; echo "rc ${PIPESTATUS[0]}"' _ "$STORK"
	[[ "$output" == *"rc 0"* ]]
	grep -q '"reason": "completed"' runs/tiny__job=local__task=0/exit_info.json
	[ "$(readlink runs/tiny__job=local__task=0/checkpoints/latest)" = step_00000020 ]
	[ "$(run_losses runs/tiny__job=local__task=0 | wc -l)" -eq 20 ]
}

@test "data.prefetch: the run trains the same bits with and without the read-ahead thread" {
	"$STORK" run tiny.yaml --set run.name=on --local-ranks 2 >/dev/null
	"$STORK" run tiny.yaml --set run.name=off --set data.prefetch=false --local-ranks 2 >/dev/null
	[ "$(losses on | wc -l)" -eq 20 ]
	diff <(losses on) <(losses off)
}

@test "provenance: git.txt names the commit of the submit directory's repository and whether it changed; image.txt the container" {
	git init -q . && git -c user.name=t -c user.email=t@t add tiny.yaml &&
		git -c user.name=t -c user.email=t@t commit -qm config
	commit=$(git rev-parse HEAD)
	"$STORK" run tiny.yaml --set run.name=clean --set train.steps=2 >/dev/null
	grep -qx "commit: $commit" runs/clean__job=local__task=0/provenance/git.txt
	grep -qx 'dirty: no' runs/clean__job=local__task=0/provenance/git.txt
	grep -q '^stork: ' runs/clean__job=local__task=0/provenance/git.txt
	grep -qx none runs/clean__job=local__task=0/provenance/image.txt
	echo "# changed" >>tiny.yaml
	APPTAINER_CONTAINER=/images/train.sif "$STORK" run tiny.yaml --set run.name=dirty --set train.steps=2 >/dev/null
	grep -qx 'dirty: yes (tracked files changed since the commit)' runs/dirty__job=local__task=0/provenance/git.txt
	grep -qx 'apptainer: /images/train.sif' runs/dirty__job=local__task=0/provenance/image.txt
	rm -rf .git
	# (the work directory lies inside Stork's own checkout: git must not look above it)
	GIT_CEILING_DIRECTORIES=$(dirname "$PWD") "$STORK" run tiny.yaml --set run.name=bare --set train.steps=2 >/dev/null
	grep -qx 'commit: none (not a git repository)' runs/bare__job=local__task=0/provenance/git.txt
}

@test "metrics/summary.csv: per metric and minute, count, p50, p95 and mean equal a rollup of the ranks' JSONL computed here" {
	"$STORK" run tiny.yaml --local-ranks 2 >/dev/null
	dir=runs/tiny__job=local__task=0
	[ -s "$dir/metrics/summary.csv" ]
	[ "$(head -1 "$dir/metrics/summary.csv")" = "metric,minute,count,p50,p95,mean" ]
	# nearest-rank percentiles over every rank's numeric values of each minute
	jq -r 'select(.value | type == "number") | [.metric, ((.ts / 60 | floor) * 60 | todate | .[0:16] + "Z"), .value] | @tsv' \
		"$dir"/logs/rank-*.metrics.jsonl | sort -t"$(printf '\t')" -k1,1 -k2,2 -k3,3g |
		awk -F'\t' '
		function flush() { if (n) { p50 = v[int(n * 0.50 + 0.999999999)]; p95 = v[int(n * 0.95 + 0.999999999)]
			printf "%s,%s,%d,%.17g,%.17g,%.17g\n", key1, key2, n, p50, p95, sum / n } }
		$1 != key1 || $2 != key2 { flush(); key1 = $1; key2 = $2; n = 0; sum = 0 }
		{ v[++n] = $3; sum += $3 }
		END { flush() }' >expected.csv
	[ "$(wc -l <expected.csv)" -ge 6 ] # train and val loss, lr, grad norm, step time, tokens/s
	# the same rows, values equal within 1e-12 relative
	paste -d, <(tail -n +2 "$dir/metrics/summary.csv") expected.csv | awk -F, '
		{ n++; if ($1 != $7 || $2 != $8 || $3 != $9) { print "row " n ": " $0; bad = 1 }
		  for (i = 4; i <= 6; i++) { d = $i - $(i + 6); if (d < 0) d = -d; m = $i < 0 ? -$i : $i
		    if (d > 1e-12 * m) { print "row " n " column " i ": " $0; bad = 1 } } }
		END { exit bad || n == 0 }'
	[ "$(($(wc -l <"$dir/metrics/summary.csv") - 1))" -eq "$(wc -l <expected.csv)" ]
}

@test "rank 0's progress line and metrics give the time to the last step and to the job's end" {
	fault_injection || skip "needs --enable-fault-injection"
	run env STORK_FAULT_JOB_END=3600 "$STORK" run tiny.yaml --set train.steps=6
	[ "$status" -eq 0 ]
	[[ "$output" == *"step 2/6 | loss "*" tok/s | eta "*"s, job ends in "*"m"* ]]
	[ "$(grep -c '"metric":"eta_s"' runs/tiny__job=local__task=0/logs/rank-000.metrics.jsonl)" -eq 5 ]
	left=$(jq -r 'select(.metric == "job_left_s") | .value' runs/tiny__job=local__task=0/logs/rank-000.metrics.jsonl | tail -1)
	awk -v l="$left" 'BEGIN { exit !(l > 3500 && l <= 3600) }'
	# the last step: nothing left
	[ "$(jq -r 'select(.metric == "eta_s") | .value' runs/tiny__job=local__task=0/logs/rank-000.metrics.jsonl | tail -1)" = 0 ]
	# the whole run's cost at the pace of its first steps
	[[ "$output" == *"projected: 6 steps x "*" ms x "*" cores = "*" core-hours for the whole run"* ]]
	[ "$(grep -c '"metric":"projected_device_hours"' runs/tiny__job=local__task=0/logs/rank-000.metrics.jsonl)" -eq 1 ]
}

@test "stork report (HTML and --text): reason, first failure, layout, losses, every rank, and a slow rank named as a straggler; RUNS_DIR: one line per run" {
	fault_injection || skip "needs --enable-fault-injection"
	STORK_FAULT_SLOW_RANK=1:0.02 "$STORK" run tiny.yaml --local-ranks 3 --set run.name=slow >/dev/null
	run "$STORK" report --text runs/slow__job=local__task=0
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"reason: completed (exit 0): completed 20 steps"* ]]
	[[ "$output" == *"first failure: none"* ]]
	[[ "$output" == *"layout: dp 3 x tp 1 x pp 1, 3 rank(s) on 1 node(s)"* ]]
	[[ "$output" == *"steps: 20; final train loss "* ]]
	[[ "$output" == *"straggler: rank 1, median compute"* ]]
	[ "$(grep -c '^straggler:' <<<"$output")" -eq 1 ]
	[[ "$output" == *"latest checkpoint: step_00000020"* ]]
	# a run without a slow rank names none (the metrics of an even run,
	# written by stork bench report: a live run on a shared machine may
	# well have a slow rank)
	"$STORK" bench report --steps 200 --ranks 4 --repeat 1 --dir "$WORK/even" >/dev/null
	run "$STORK" report --text "$WORK/even"
	[ "$status" -eq 0 ]
	[[ "$output" == *"compute time per rank (median ms): 0: "*" 3: "* ]]
	[[ "$output" == *"stragglers: none"* ]]
	[[ "$output" != *"straggler: rank"* ]]
	"$STORK" run tiny.yaml --local-ranks 2 --set run.name=even --set train.steps=4 >/dev/null
	# a failed run: the reason and the first failure in words
	run env STORK_FAULT_NAN_STEP=3 STORK_FAULT_NAN_RANK=1 "$STORK" run tiny.yaml --local-ranks 2 --set run.name=nan
	[ "$status" -eq 14 ]
	run "$STORK" report --text runs/nan__job=local__task=0
	[[ "$output" == *"reason: diverged (exit 14): step 3: the gradient norm is not finite"* ]]
	[[ "$output" == *"first failure: rank "?" on "*"exit 14 after step 2 at "* ]]
	# several runs, one line each
	run "$STORK" report runs
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 4 ]
	[[ "${lines[1]}" == even*local*4*completed ]]
	[[ "${lines[2]}" == nan*local*diverged ]]
	[[ "${lines[3]}" == slow*local*20*completed ]]
	# the HTML page: the straggler named and drawn, every rank in the
	# step-time chart, one loss point per step, a page Chromium renders
	run "$STORK" report runs/slow__job=local__task=0
	[ "$status" -eq 0 ]
	html=runs/slow__job=local__task=0/report.html
	[ "$output" = "report: $html" ]
	grep -q '<span class="straggler">Straggler: rank 1, median compute' $html
	[ "$(grep -c 'class="straggler"' $html)" -eq 1 ]
	[ "$(grep -o '<polyline class="step-time[^"]*" data-rank="[0-9]*"' $html | sort -u | wc -l)" -eq 3 ]
	grep -q '<polyline class="step-time straggler" data-rank="1"' $html
	[ "$(grep -o '<polyline class="train-loss"[^>]*points="[^"]*"' $html | sed 's/.*points="//' | wc -w)" -eq 20 ]
	grep -q '<b>completed</b> (exit 0): completed 20 steps' $html
	check_report_html $html
	# a failed run's reason and first failure, to a file of one's choice
	run "$STORK" report runs/nan__job=local__task=0 -o nan.html
	[ "$status" -eq 0 ]
	grep -q '<b>diverged</b> (exit 14): step 3: the gradient norm is not finite' nan.html
	grep -q 'First failure: rank [01] on .*, exit 14 after step 2 at ' nan.html
	[ ! -e runs/nan__job=local__task=0/report.html ]
	# a place that cannot be written: the error names it, nothing is left
	run "$STORK" report runs/nan__job=local__task=0 -o /nonexistent/r.html
	[ "$status" -eq 2 ]
	[[ "$output" == *"cannot write /nonexistent/r.html: No such file or directory (choose another file with -o)"* ]]
}

@test "stork report --text: what a run directory's files say reaches the terminal with its control characters escaped" {
	"$STORK" run tiny.yaml --set run.name=esc >/dev/null
	dir=runs/esc__job=local__task=0
	# a colleague's run directory: a clipboard write (OSC 52), hidden text, a C1 CSI
	jq '.message = "done\u001b]52;c;aGk=\u0007 \u001b[8mhidden\u001b[0m \u009b2J"' \
		"$dir/exit_info.json" >exit_info.json
	mv exit_info.json "$dir/exit_info.json"
	run "$STORK" report --text "$dir"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *'reason: completed (exit 0): done\x1b]52;c;aGk=\x07 \x1b[8mhidden\x1b[0m \u009b2J'* ]]
	run grep -c $'\x1b\\|\x07\\|\xc2\x9b' <<<"$output"
	[ "$output" = 0 ]
}

@test "stork report after 6 stops: numbered markers with their steps listed, round ticks, a rank legend, the pipeline's wait; --text lists the stops" {
	fault_injection || skip "needs --enable-fault-injection"
	args=(--local-ranks 2 --set run.name=six --set parallel.pipeline=2 --set train.grad_accum=2)
	for k in 1 2 3 4 5 6; do
		run env STORK_STOP_AT_STEP=$((3 * k)) SLURM_RESTART_COUNT=$((k - 1)) "$STORK" run tiny.yaml "${args[@]}"
		[ "$status" -eq 12 ]
	done
	SLURM_RESTART_COUNT=6 "$STORK" run tiny.yaml "${args[@]}" >/dev/null
	run "$STORK" report --text runs/six__job=local__task=0
	[ "$status" -eq 0 ]
	[ "$(grep -c '^stop [0-9]: step ' <<<"$output")" -eq 6 ]
	[[ "$output" == *"stop 1: step 3, "* && "$output" == *"stop 6: step 18, "* ]]
	"$STORK" report runs/six__job=local__task=0 -o six.html >/dev/null
	# six markers numbered 1-6, each inside the plot, and their steps listed under it
	[ "$(grep -o '<g class="restart-marker" data-step="[0-9]*" data-n="[1-6]"' six.html | wc -l)" -eq 6 ]
	[ "$(grep -o '<li data-step="[0-9]*">step [0-9]*: <b>' six.html | wc -l)" -eq 6 ]
	# every tick is a round number (5.5, 0.015, 20000, 50 MB: at most 3
	# significant digits, a byte chart's unit aside), never 5.698 or 4.857
	grep -o 'class="tick [xy]-tick"[^>]*>[^<]*<' six.html | sed 's/.*>\(.*\)</\1/' >ticks
	[ "$(wc -l <ticks)" -gt 20 ]
	awk '{ s = $0; sub(/ [kKMGT]?i?B$/, "", s); sub(/^-/, "", s); gsub(/\./, "", s); sub(/^0+/, "", s); sub(/0+$/, "", s)
		if (length(s) > 3) { print "not round: " $0; bad = 1 } } END { exit bad }' ticks
	# which colour is which rank, under each per-rank chart
	[ "$(grep -c '<p class="legend rank-legend">' six.html)" -ge 3 ]
	grep -q '<span data-rank="1" style="color:[^"]*">&#9632; rank 1' six.html
	# the pipeline's wait: a chart and a column
	grep -q 'id="pipeline-wait-chart"' six.html
	[ "$(grep -c '<td class="pipeline-wait">' six.html)" -eq 2 ]
	check_report_html six.html
}

@test "notifications: a receiver that is down, asleep or answers 404 costs the run a log line, never the run; the URL's secret is never shown" {
	# down: nothing listens on port 1
	run "$STORK" run tiny.yaml --set run.name=down --set train.steps=4 \
		--set notify.url=http://127.0.0.1:1/hooks/secret-token
	echo "$output"
	outputs=$output
	[ "$status" -eq 0 ]
	[[ "$output" == *"notify: the 'started' event was not delivered to http://127.0.0.1:1/<redacted>: Could"*"connect to server"* ]]
	[[ "$output" == *"completed 4 steps"* ]]
	# asleep 30 s before each answer: each try gives up after notify.timeout
	# (1 s), and the launcher waits at most that long for the last event
	start_webhook asleep.log --sleep 30
	t0=$SECONDS
	run "$STORK" run tiny.yaml --set run.name=asleep --set train.steps=4 --set notify.url="$HOOK_URL" \
		--set notify.timeout=1
	echo "$output"
	outputs+=$output
	[ "$status" -eq 0 ]
	[[ "$output" == *"completed 4 steps"* ]]
	[[ "$output" == *"notify: "*"not delivered to http://127.0.0.1:"*"/<redacted>"* ]]
	echo "run with a sleeping receiver: $((SECONDS - t0)) s"
	((SECONDS - t0 < 25))
	kill "$HOOK_PID"
	# 404: the hook is wrong; one try per event, no retries
	start_webhook gone.log --status 404
	run "$STORK" run tiny.yaml --set run.name=gone --set train.steps=4 --set notify.url="$HOOK_URL" \
		--set 'notify.events=[started, completed, failed]'
	outputs+=$output
	kill "$HOOK_PID"
	[ "$status" -eq 0 ]
	check_events gone.log started completed
	[[ "$output" == *"notify: the 'started' event was not delivered to http://127.0.0.1:"*"/<redacted>: HTTP status 404"* ]]
	# the secret part of the URLs is nowhere: the three runs' output, logs,
	# resolved configurations
	[ -d runs/down__job=local__task=0 ]
	[ -d runs/asleep__job=local__task=0 ]
	[[ "$outputs" != *secret-token* ]]
	run grep -rl 'secret-token' runs
	[ "$status" -eq 1 ]
	grep -q 'url: "http://127.0.0.1:[0-9]*/<redacted>"' runs/gone__job=local__task=0/config/stork.yaml
	# an unknown event is a configuration error naming the key
	run "$STORK" run tiny.yaml --set 'notify.events=[started, finished]'
	[ "$status" -eq 3 ]
	[[ "$output" == *"notify.events: unknown name 'finished': expected a list of started, preempted, restarted, failed, completed"* ]]
}

@test "stork check --all CONFIG: the preflight of every rank and no training; preflight.enabled true probes before a one-node run too" {
	run "$STORK" check --all tiny.yaml --local-ranks 2 --set run.name=pfonly
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"preflight: 1 node(s) in "*" s: matrix product "*" GFLOP/s, memory "*"metrics/preflight.csv"* ]]
	[[ "$output" == *"stork: completed (exit 0): preflight only: 1 node(s), none left out (metrics/preflight.csv)"* ]]
	dir=runs/pfonly__job=local__task=0
	[ "$(grep -c ',0,.*,"ok"$' "$dir/metrics/preflight.csv")" -eq 2 ]
	run grep -hs train_loss "$dir"/logs/rank-00[01].metrics.jsonl
	[ -z "$output" ]
	# a training run does without it on one node (auto), and with it when asked
	run "$STORK" run tiny.yaml --set run.name=plain
	[ "$status" -eq 0 ]
	[[ "$output" != *"preflight:"* ]]
	[ ! -e runs/plain__job=local__task=0/metrics/preflight.csv ]
	run "$STORK" run tiny.yaml --set run.name=asked --set preflight.enabled=true
	[ "$status" -eq 0 ]
	[[ "$output" == *"preflight: 1 node(s) in "* ]]
	[ "$(losses asked | wc -l)" -eq 20 ]
}

@test "stork report draws a GPU rank's NVML figures (utilisation and memory per rank) when the metrics hold them" {
	"$STORK" run tiny.yaml --local-ranks 2 --set run.name=gpu --set train.steps=6 >/dev/null
	dir=runs/gpu__job=local__task=0
	# a CPU run has none to draw
	"$STORK" report "$dir" >/dev/null
	! grep -q 'gpu-util-chart' "$dir/report.html" || false
	# the lines a GPU rank's sample writes (train_telemetry.c), every 2 steps
	for r in 0 1; do
		for s in 2 4 6; do
			printf '{"ts":1,"job_id":"local","rank":%d,"host":"h","step":%d,"metric":"gpu_util_pct","value":%d,"unit":"%%","requeue":0,"attempt":0}\n' $r $s $((80 + s + r))
			printf '{"ts":1,"job_id":"local","rank":%d,"host":"h","step":%d,"metric":"gpu_mem_used_bytes","value":%d,"unit":"bytes","requeue":0,"attempt":0}\n' $r $s $(((40 + s) << 20))
		done >>"$dir/logs/rank-00$r.metrics.jsonl"
	done
	"$STORK" report "$dir" >/dev/null
	html=$dir/report.html
	for id in gpu-util-chart gpu-mem-chart; do grep -q "id=\"$id\"" "$html"; done
	[ "$(grep -o '<polyline class="gpu-util[^"]*" data-rank="[0-9]*"' "$html" | sort -u | wc -l)" -eq 2 ]
	[ "$(grep -o '<polyline class="gpu-mem[^"]*" data-rank="0"[^>]*points="[^"]*"' "$html" | sed 's/.*points="//' | wc -w)" -eq 3 ]
}
