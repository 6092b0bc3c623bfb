# shellcheck shell=bash
# t/training.bash - helpers shared by the test files that train a model:
# data made from the project's own documentation, a small configuration,
# and the losses a run logged.

# fault_injection: whether this build honours the test suite's fault switches.
fault_injection() {
	grep -q '^#define STORK_FAULT_INJECTION 1' "${abs_top_builddir:?set by make check}/config.h"
}

# docs_data: data/docs_{train,val}.bin in the current directory.
docs_data() {
	mkdir -p data
	cat "${abs_top_srcdir:?set by make check}"/README.md "$abs_top_srcdir"/man/*.[0-9] >text.txt
	"${abs_top_builddir:?set by make check}/launcher/stork" prep --out data --name docs text.txt >/dev/null
}

# small_config FILE NAME LAYERS CHANNELS BATCH SEQ STEPS: a byte-level GPT-2
# with validation every 10th of the run.
small_config() {
	cat >"$1" <<-YAML
	run:
	  name: $2
	  dir: runs
	model:
	  layers: $3
	  heads: 4
	  channels: $4
	  max_seq_len: 64
	  vocab_size: 257
	  seed: 1337
	data:
	  train: ["data/docs_train.bin"]
	  val: ["data/docs_val.bin"]
	train:
	  batch_size: $5
	  seq_len: $6
	  steps: $7
	  lr: 1.0e-3
	  warmup_steps: 2
	  min_lr: 1.0e-4
	  val_every: $(($7 / 2 > 0 ? $7 / 2 : 1))
	  val_batches: 2
	checkpoint:
	  every: 0
	  keep: 3
	YAML
}

# run_losses DIR [RANK]: "step value" of a run directory's train_loss, the
# last value logged for each step (a resumed run may log a step twice only
# if it was interrupted without a checkpoint).
run_losses() {
	grep -h '"metric":"train_loss"' "$1"/logs/rank-"${2:-000}".metrics.jsonl |
		sed 's/.*"step":\([0-9]*\).*"value":\([^,}]*\).*/\1 \2/' |
		awk '{ v[$1] = $2 } END { for (s in v) print s, v[s] }' | sort -n
}

# run_dir NAME JOBID: the run directory of a job's run, under $WORK.
run_dir() { echo "$WORK/runs/$1__job=$2__task=0"; }

# wait_step DIR STEP SECONDS: until rank 0 of the run has logged that step.
wait_step() {
	local deadline=$((SECONDS + $3))
	while ((SECONDS < deadline)); do
		[ "$(run_losses "$1" 2>/dev/null | tail -1 | cut -d' ' -f1)" -ge "$2" ] 2>/dev/null && return 0
		sleep 0.5
	done
	echo "no step $2 in $1 after $3 s" >&2
	return 1
}

# The fields stork(1) documents for each JSON file of a run directory, as
# jq tests (see FILES there).
RUN_JSON_DEFS='
def str(k): (.[k] | type) == "string";
def num(k): (.[k] | type) == "number";
def hex(k): (.[k] | type) == "string" and (.[k] | test("^[0-9a-f]{16}$"));
def failure: . == null or (
	(.rank == null or (.rank | type) == "number") and str("host") and num("pid") and
	(.exit_code == null or (.exit_code | type) == "number") and
	(.signal == null or (.signal | type) == "string") and
	str("time") and num("timestamp") and num("last_step") and str("what") and
	(.secondary | type) == "boolean");
def exit_info: str("reason") and num("exit_code") and has("first_failure") and
	(.first_failure | failure) and
	(.last_checkpoint == null or (.last_checkpoint | str("path") and num("step"))) and
	num("restart_count") and str("job_id") and str("step_id") and str("message");
def bindings: type == "array" and length > 0 and
	all(.[]; num("local_rank") and num("gpu") and str("cpus") and num("numa") and num("threads"));
def slurm_env: (.slurm | type) == "object" and str("rendezvous") and num("rendezvous_seconds") and
	num("world_size") and num("job_end_time") and
	((has("parallel") | not) or (.parallel | num("dp") and num("tp") and num("pp") and num("zero") and
		str("rank_order") and (.stage_layers | type) == "array")) and
	(.nodes | type == "array" and length > 0 and all(.[]; num("node_rank") and str("host") and str("machine") and
		num("pid") and num("rank_base") and num("local_ranks") and (.ranks | bindings) and
		(.ranks | length) == .local_ranks));
def manifest: num("step") and num("shards") and .hash == "xxh3-64" and
	(.files | type == "array" and length > 0 and all(.[]; str("name") and num("size") and hex("checksum")));
def state: num("step") and (.train_data | num("epoch") and num("shard") and num("sample") and hex("rng")) and
	hex("config_hash") and hex("model_hash") and num("restart_count") and
	((has("layout") | not) or (.layout | num("world") and num("dp") and num("tp") and num("pp") and num("zero")));
def metric: num("ts") and str("job_id") and num("rank") and str("host") and num("step") and
	str("metric") and (.value == null or (.value | type) == "number") and str("unit") and
	num("requeue") and num("attempt");
'

# check_run_json DIR: every JSON file of the run directory DIR parses and
# holds the documented fields (a file no one documented fails too), and
# every metrics line does; prints the number of JSON files checked.
check_run_json() {
	local dir=$1 f prog n=0 bad=0
	while IFS= read -r f; do
		case ${f#"$dir"/} in
		exit_info.json) prog='exit_info and num("nodes") and (.restarts | type == "array" and all(.[]; num("attempt") and str("reason") and num("exit_code") and (.first_failure | failure) and str("message")))' ;;
		exit_info.node-*.json) prog='exit_info and num("node_rank") and str("host") and num("attempt")' ;;
		config/slurm_env.json) prog=slurm_env ;;
		provenance/build.json) prog='str("stork_version") and str("git_describe") and str("compiler") and str("built") and (.libraries | str("slurm") and num("hwloc_api") and str("yaml"))' ;;
		provenance/host.json) prog='str("host") and str("kernel") and str("machine") and num("online_cpus")' ;;
		provenance/libraries.json) prog='str("pmix") and str("ucx") and str("blas") and (.cuda == null or (.cuda | type) == "string") and num("cuda_devices")' ;;
		checkpoints/step_*/manifest.json) prog=manifest ;;
		checkpoints/step_*/state.json) prog=state ;;
		*)
			echo "check_run_json: $f is not documented in stork(1)" >&2
			bad=1
			continue
			;;
		esac
		if ! jq -e "$RUN_JSON_DEFS $prog" "$f" >/dev/null; then
			echo "check_run_json: $f lacks documented fields ($prog)" >&2
			bad=1
		fi
		n=$((n + 1))
	done < <(find "$dir" -name '*.json' -not -path '*/checkpoints/*.tmp/*')
	for f in "$dir"/logs/*.metrics.jsonl; do
		if ! jq -e -s "$RUN_JSON_DEFS length > 0 and all(.[]; metric)" "$f" >/dev/null; then
			echo "check_run_json: a line of $f lacks documented fields" >&2
			bad=1
		fi
	done
	echo "$n"
	return $bad
}

# check_report_html FILE: stork report's page is well-formed (xmllint as
# XML; as HTML its only complaints are the HTML5 and SVG element names
# libxml2's HTML 4 parser does not know), and headless Chromium renders it
# to a PNG that is not blank (hundreds of colours: text and charts).
check_report_html() {
	local html=$1 png=${1%.html}.png profile colours
	xmllint --noout "$html" || return 1
	xmllint --html --noout "$html" 2>&1 |
		grep 'error' | grep -v 'Tag \(section\|svg\|rect\|line\|text\|polyline\|g\|title\) invalid' &&
		return 1
	profile=$(mktemp -d)
	timeout 120 chromium --headless --no-sandbox --disable-gpu --user-data-dir="$profile" \
		--window-size=1000,3000 --screenshot="$png" "file://$(realpath "$html")" >/dev/null 2>&1
	rm -rf "$profile"
	colours=$(python3 "$abs_top_srcdir/t/tools/png_colours.py" "$png") || return 1
	echo "$png: $colours"
	[ "${colours%% *}" -gt 100 ]
}

# start_local_server WHAT PORTFILE SCRIPT ARGS...: t/tools/SCRIPT in the
# background (ended after 15 minutes at the latest), its pid in
# LOCAL_SERVER_PID; waits up to 10 s for the port it writes to PORTFILE
# and sets LOCAL_SERVER_PORT, or fails naming WHAT.
start_local_server() {
	local what=$1 portfile=$2 script=$3 i
	shift 3
	timeout 900 python3 -B "${abs_top_srcdir:?}/t/tools/$script" "$@" &
	LOCAL_SERVER_PID=$!
	for ((i = 0; i < 100; i++)); do
		[[ -s "$portfile" ]] && break
		sleep 0.1
	done
	[[ -s "$portfile" ]] || { echo "the $what did not start" >&2; return 1; }
	LOCAL_SERVER_PORT=$(cat "$portfile")
	rm -f "$portfile"
}

# start_webhook LOG [--sleep S] [--status N]: a web hook receiver on a free
# port of 127.0.0.1 that appends each POST body to LOG as one line; sets
# HOOK_URL. It ends by itself after 15 minutes at the latest.
start_webhook() {
	local log=$1 portfile
	shift
	portfile=$(mktemp -u)
	start_local_server "web hook receiver" "$portfile" webhook.py "$portfile" "$log" "$@" || return 1
	# shellcheck disable=SC2034 # HOOK_PID and HOOK_URL are for the tests
	HOOK_PID=$LOCAL_SERVER_PID
	# shellcheck disable=SC2034
	HOOK_URL="http://127.0.0.1:$LOCAL_SERVER_PORT/hooks/T000/B000/secret-token?x=1"
}

# check_events LOG EVENT...: LOG holds exactly these events, in this order,
# each a JSON document with every field of a notification.
check_events() {
	local log=$1
	shift
	cat "$log"
	[ "$(jq -r .event "$log" | tr '\n' ' ')" = "$* " ] || return 1
	jq -e 'has("event") and has("run") and has("job") and has("requeue") and has("step") and
		has("reason") and has("message") and has("host") and has("run_dir") and has("time") and
		(.text | type == "string" and startswith("stork: run "))' "$log" >/dev/null
}

# serve_files ROOT ACCESS_LOG [--tls CERT KEY] [--drop NAME:N]: an HTTP(S)
# file server on ROOT (t/tools/http_server.py) on a free port of
# 127.0.0.1; sets BASE to its URL and SERVER_PID. It ends by itself after
# 15 minutes at the latest.
serve_files() {
	local root=$1 log=$2 portfile scheme=http
	shift 2
	portfile=$(mktemp -u)
	[[ " $* " == *" --tls "* ]] && scheme=https
	start_local_server "file server" "$portfile" http_server.py "$root" "$portfile" "$log" "$@" || return 1
	# shellcheck disable=SC2034 # for the tests
	SERVER_PID=$LOCAL_SERVER_PID
	# shellcheck disable=SC2034
	BASE="$scheme://127.0.0.1:$LOCAL_SERVER_PORT"
}

# served ACCESS_LOG NAME: how many GET answers the server gave for NAME.
served() { grep -c "^GET /$2 " "$1" || true; }
