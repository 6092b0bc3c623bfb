#!/usr/bin/env bats
# Data shards given as http(s) URLs (launcher/run/stage.c): staged once per
# node, checked, resumed, refused with the URL and the reason. Served by a
# local HTTP(S) server started here (t/tools/http_server.py), with a test
# CA made here for https.

load helpers

setup() {
	setup_run
}

# serve [ARGS...]: the file server on WORK's data/ (t/training.bash).
serve() { serve_files "$WORK/data" "$WORK/access.log" "$@"; }

teardown() {
	if [[ -n "${SERVER_PID:-}" ]]; then kill "$SERVER_PID" 2>/dev/null || true; fi
}

# url_run NAME [--set ...]: tiny.yaml with both shards from $BASE, staged
# into WORK/stage.
url_run() {
	local name=$1
	shift
	"$STORK" run tiny.yaml --set run.name="$name" --set data.stage_dir="$WORK/stage" \
		--set "data.train=[$BASE/docs_train.bin]" --set "data.val=[$BASE/docs_val.bin]" "$@"
}

gets() { served "$WORK/access.log" "$1"; }

@test "URL shards: each downloaded once, the same losses as the local files; staged shards are used again" {
	"$STORK" run tiny.yaml --set run.name=local >/dev/null
	serve
	run url_run url
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"staged $BASE/docs_train.bin ("*" bytes, 1 try)"* ]]
	diff <(losses local) <(losses url)
	[ "$(gets docs_train.bin)" -eq 1 ]
	[ "$(gets docs_val.bin)" -eq 1 ]
	[ -f "$WORK/stage/127.0.0.1_3a${BASE##*:}_2fdocs_5ftrain.bin" ]
	# a second run (a requeue, another launcher of the node) downloads nothing
	run url_run again
	[ "$status" -eq 0 ]
	[[ "$output" == *"$BASE/docs_train.bin: staged already as $WORK/stage/"* ]]
	[ "$(gets docs_train.bin)" -eq 1 ]
	diff <(losses local) <(losses again)
	# a damaged staged file is not used: it is staged again
	truncate -s 2000 "$WORK/stage/127.0.0.1_3a${BASE##*:}_2fdocs_5ftrain.bin"
	run url_run damaged
	[ "$status" -eq 0 ]
	[[ "$output" == *"is not usable ("*"2000 bytes"*"): staging it again"* ]]
	[ "$(gets docs_train.bin)" -eq 2 ]
	# one token changed since it was staged (the header still holds): staged again
	printf 'zz' | dd of="$WORK/stage/127.0.0.1_3a${BASE##*:}_2fdocs_5ftrain.bin" bs=1 seek=2000 conv=notrunc 2>/dev/null
	run url_run changed
	[ "$status" -eq 0 ]
	[[ "$output" == *"is not usable (its sha256 is not the one recorded when it was staged): staging it again"* ]]
	[ "$(gets docs_train.bin)" -eq 3 ]
	diff <(losses local) <(losses changed)
}

@test "a download cut in the middle goes on from where it stopped (HTTP Range), the first bytes not fetched again" {
	"$STORK" run tiny.yaml --set run.name=local >/dev/null
	serve --drop docs_train.bin:5000
	run url_run cut
	echo "$output"
	[ "$status" -eq 0 ]
	cat "$WORK/access.log"
	grep -qx 'GET /docs_train.bin - 200 5000 dropped' "$WORK/access.log"
	size=$(stat -c %s data/docs_train.bin)
	grep -qx "GET /docs_train.bin bytes=5000- 206 $((size - 5000))" "$WORK/access.log"
	[ "$(gets docs_train.bin)" -eq 2 ]
	[[ "$output" == *"staging $BASE/docs_train.bin: "*"trying again in 1 s (5000 bytes kept)"* ]]
	diff <(losses local) <(losses cut)
}

@test "a 404 ends the run naming the URL and the status; credentials are never taken from the URL" {
	serve
	run "$STORK" run tiny.yaml --set run.name=nf --set data.stage_dir="$WORK/stage" \
		--set "data.train=[$BASE/missing_train.bin?X-Signature=abc123]"
	echo "$output"
	[ "$status" -eq 4 ]
	[[ "$output" == *"data shard $BASE/missing_train.bin?<redacted>: HTTP status 404"* ]]
	[[ "$output" != *abc123* ]]
	grep -q "HTTP status 404" runs/nf__job=local__task=0/exit_info.json
	# the resolved configuration keeps the shard, not its signature
	grep -q "train: \[\"$BASE/missing_train.bin?<redacted>\"\]" runs/nf__job=local__task=0/config/stork.yaml
	run grep -rl abc123 runs
	[ "$status" -eq 1 ]
	[ "$(gets missing_train.bin)" -eq 1 ] # a 4xx is not tried again
	run "$STORK" run tiny.yaml --set "data.train=[https://user:hunter2@127.0.0.1/x.bin]"
	[ "$status" -eq 3 ]
	[[ "$output" == *"data.train: https://127.0.0.1/x.bin carries a user and password; credentials do not belong in the configuration: use data.netrc or data.token_env"* ]]
	[[ "$output" != *hunter2* ]]
	run "$STORK" run tiny.yaml --set "data.train=[$BASE/docs_train.bin]" --set data.token_env=STORK_TEST_NO_SUCH_TOKEN
	[ "$status" -eq 3 ]
	[[ "$output" == *"data.token_env: the environment variable STORK_TEST_NO_SUCH_TOKEN is not set"* ]]
}

@test "data.sha256: a shard that does not match is refused naming it; a matching manifest passes" {
	serve
	(cd data && sha256sum docs_train.bin docs_val.bin) >good.sha256
	sed 's/^./0/' good.sha256 | sed -n 1p >bad.sha256
	[ "$(head -c1 good.sha256)" != 0 ] || sed -i '1s/^./1/' bad.sha256
	run url_run bad --set data.sha256="$WORK/bad.sha256"
	echo "$output"
	[ "$status" -eq 4 ]
	[[ "$output" == *"data shard $BASE/docs_train.bin: its sha256 is $(sha256sum <data/docs_train.bin | cut -c1-64), data.sha256 says "* ]]
	[ ! -e "$WORK/stage/127.0.0.1_${BASE##*:}_docs_train.bin" ]
	run url_run good --set data.sha256="$WORK/good.sha256"
	[ "$status" -eq 0 ]
	run url_run nomanifest --set data.sha256="$WORK/none.sha256"
	[ "$status" -eq 3 ]
	[[ "$output" == *"data.sha256: cannot read $WORK/none.sha256: No such file or directory"* ]]
}

# make_certs: a test CA (ca.pem) and a certificate of 127.0.0.1 it signed.
make_certs() {
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 \
		-subj /CN=stork-test-ca 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1\n' >san.ext
	openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 1 \
		-extfile san.ext 2>/dev/null
}

@test "https: a certificate from an unknown CA is refused; with data.ca_file naming the CA it is trusted" {
	make_certs
	serve --tls srv.pem srv.key
	run url_run untrusted
	echo "$output"
	[ "$status" -eq 4 ]
	[[ "$output" == *"data shard $BASE/docs_"*".bin: "*"SSL"*"certificate"* ]] # whichever failed first
	run url_run trusted --set data.ca_file="$WORK/ca.pem"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"staged $BASE/docs_train.bin"* ]]
}

@test "credentials come from data.netrc or the variable data.token_env names; without them a 401 names the URL" {
	serve --auth reader:s3cret-pass
	run url_run anon
	echo "$output"
	outputs=$output
	[ "$status" -eq 4 ]
	[[ "$output" == *"data shard $BASE/docs_"*".bin: HTTP status 401"* ]] # whichever answer came first
	printf 'machine 127.0.0.1 login reader password s3cret-pass\n' >netrc
	run url_run netrc --set data.netrc="$WORK/netrc"
	echo "$output"
	outputs+=$output
	[ "$status" -eq 0 ]
	kill "$SERVER_PID"
	# what was staged with the password keeps none of it
	run grep -rl 's3cret-pass' "$WORK/stage"
	[ "$status" -eq 1 ]
	# a bearer token never crosses plain http
	serve --bearer tok-123456
	rm -rf "$WORK/stage"
	before=$(gets docs_train.bin)
	run env STORK_TEST_DATA_TOKEN=tok-123456 "$STORK" run tiny.yaml --set run.name=plain \
		--set data.stage_dir="$WORK/stage" --set "data.train=[$BASE/docs_train.bin]" \
		--set "data.val=[$BASE/docs_val.bin]" --set data.token_env=STORK_TEST_DATA_TOKEN
	outputs+=$output
	[ "$status" -eq 3 ]
	[[ "$output" == *"data.token_env: $BASE/docs_train.bin would send the bearer token in clear over http; serve the data over https"* ]]
	[ "$(gets docs_train.bin)" -eq "$before" ]
	kill "$SERVER_PID"
	make_certs
	serve --bearer tok-123456 --tls srv.pem srv.key
	run env STORK_TEST_DATA_TOKEN=tok-123456 "$STORK" run tiny.yaml --set run.name=token \
		--set data.stage_dir="$WORK/stage" --set "data.train=[$BASE/docs_train.bin]" \
		--set "data.val=[$BASE/docs_val.bin]" --set data.token_env=STORK_TEST_DATA_TOKEN \
		--set data.ca_file="$WORK/ca.pem"
	echo "$output"
	outputs+=$output
	[ "$status" -eq 0 ]
	# the secrets are in no output of the four runs, and in no file of
	# theirs or of what they staged
	[ -d runs/anon__job=local__task=0 ]
	[ -d runs/netrc__job=local__task=0 ]
	[ -d runs/token__job=local__task=0 ]
	[[ "$outputs" != *s3cret-pass* && "$outputs" != *tok-123456* ]]
	run grep -rlE 's3cret-pass|tok-123456' runs "$WORK/stage"
	[ "$status" -eq 1 ]
}

@test "staged names never collide: h/sub/x.bin and h/sub_x.bin are two files" {
	mkdir -p data/sub
	cp data/docs_train.bin data/sub/docs_train.bin
	cp data/docs_train.bin data/sub_docs_train.bin
	serve
	run "$STORK" run tiny.yaml --set run.name=two --set data.stage_dir="$WORK/stage" \
		--set "data.train=[$BASE/sub/docs_train.bin, $BASE/sub_docs_train.bin]" --set "data.val=[]"
	[ "$status" -eq 0 ]
	[ "$(gets sub/docs_train.bin)" -eq 1 ]
	[ "$(gets sub_docs_train.bin)" -eq 1 ]
	[ -f "$WORK/stage/127.0.0.1_3a${BASE##*:}_2fsub_2fdocs_5ftrain.bin" ]
	[ -f "$WORK/stage/127.0.0.1_3a${BASE##*:}_2fsub_5fdocs_5ftrain.bin" ]
}

@test "a symbolic link planted at a partly downloaded shard's path is refused naming it; nothing outside is written" {
	serve
	mkdir -m 700 "$WORK/stage"
	part="$WORK/stage/127.0.0.1_3a${BASE##*:}_2fdocs_5ftrain.bin.part"
	ln -s "$WORK/outside.bin" "$part"
	run url_run planted
	[ "$status" -eq 4 ]
	[[ "$output" == *"cannot stage $BASE/docs_train.bin into $part: "* ]]
	[ ! -e "$WORK/outside.bin" ]
}

@test "a stage directory another user made first in /tmp-like space, or one open to others, is refused naming it" {
	[ "$(id -u)" -eq 0 ] || skip "needs root, to act as a second user"
	id stork-other >/dev/null 2>&1 || useradd --system --no-create-home stork-other
	serve
	# a sticky world-writable directory, as /tmp is; the other user got there first
	mkdir -m 1777 "$WORK/shared"
	runuser -u stork-other -- mkdir -m 777 "$WORK/shared/stork-me"
	run url_run theirs --set data.stage_dir="$WORK/shared/stork-me/job"
	[ "$status" -eq 4 ]
	[[ "$output" == *"$WORK/shared/stork-me, in a directory anyone may write, is another user's: refused"* ]]
	[ ! -e "$WORK/shared/stork-me/job" ]
	# our own, but open to others
	mkdir -m 755 "$WORK/open"
	run url_run open --set data.stage_dir="$WORK/open"
	[ "$status" -eq 4 ]
	[[ "$output" == *"stage directory $WORK/open: open to group or others: refused"* ]]
	# nothing was downloaded into either
	[ ! -e "$WORK/access.log" ] || [ "$(gets docs_train.bin)" -eq 0 ]
}

# hostile_run NAME WHAT [--set ...]: tiny.yaml whose training shard is the
# server's hostile answer WHAT; its status and output in bats' run. At most
# 50 MB staged (a later --set may say otherwise), so that a staging that
# does not stop cannot fill this machine's disk.
hostile_run() {
	local name=$1 what=$2
	shift 2
	run timeout -s KILL 120 "$STORK" run tiny.yaml --set run.name="$name" --set data.stage_dir="$WORK/stage" \
		--set "data.train=[$BASE/hostile/$what]" --set "data.val=[]" --set data.max_stage_bytes=50000000 "$@"
	echo "$output"
}

@test "staging bounded: an endless body, one that is no shard's, a huge promise, a trickle, a redirect loop and a terabyte are each refused within the limits, leaving no bytes" {
	serve
	# past the size its header promises (10 tokens: 1044 bytes)
	hostile_run endless endless
	[ "$status" -eq 4 ]
	[[ "$output" == *"data shard $BASE/hostile/endless: refused: more than the 1044 bytes its header promises"* ]]
	# bytes that are no token shard's header
	hostile_run junk endless-junk
	[ "$status" -eq 4 ]
	[[ "$output" == *"data shard $BASE/hostile/endless-junk: refused: its first bytes are not an llm.c token shard's header"* ]]
	# a header that promises 4 GB: data.max_stage_bytes holds
	hostile_run huge endless-huge --set data.max_stage_bytes=1000000
	[ "$status" -eq 4 ]
	[[ "$output" == *"data shard $BASE/hostile/endless-huge: refused: more than the 1000000 bytes of data.max_stage_bytes"* ]]
	# an answer that says it is larger than data.max_stage_bytes: refused before its body
	hostile_run big big
	[ "$status" -eq 4 ]
	[[ "$output" == *"data shard $BASE/hostile/big: refused: its answer is larger than data.max_stage_bytes"* ]]
	# a redirect loop: at most 8 redirects
	hostile_run loop loop
	[ "$status" -eq 4 ]
	[[ "$output" == *"data shard $BASE/hostile/loop: Number of redirects hit maximum amount"* ]]
	[ "$(gets hostile/loop)" -le 9 ]
	# a trickle (one byte a second): a stalled transfer, tried 6 times, then
	# refused (the stall window shortened to 1 s in this test build)
	if fault_injection; then
		SECONDS=0
		STORK_FAULT_STAGE_LOW_SPEED_S=1 hostile_run trickle trickle
		[ "$status" -eq 4 ]
		[[ "$output" == *"data shard $BASE/hostile/trickle: Timeout was reached"* ]]
		[ "$(gets hostile/trickle)" -eq 6 ]
		[ "$SECONDS" -lt 90 ]
	fi
	# none of their bytes stay in the stage directory
	run find "$WORK/stage" -type f -name '*hostile*'
	[ -z "$output" ]
}

@test "staging is bounded by the job's end: it stops 60 s and preempt.deadline_lead before it, naming the end, and keeps what it staged for the next attempt" {
	fault_injection || skip "needs --enable-fault-injection (a pretend job end)"
	serve
	# a job that ends in 66 s: staging may run for 66 - 60 - 2 = 4 s; a
	# trickle (one byte a second) would take far longer
	SECONDS=0
	STORK_FAULT_JOB_END=66 hostile_run late trickle --set preempt.deadline_lead=2
	[ "$status" -eq 4 ]
	[[ "$output" == *"staging stopped: the job ends at "*", and training needs the last 60 s and preempt.deadline_lead (2 s); "*" byte(s) staged so far are kept in $WORK/stage for the next attempt to go on from"* ]]
	[ "$SECONDS" -lt 20 ]
	# the partial shard is kept, to be resumed (HTTP Range) by the next attempt
	part=$(find "$WORK/stage" -name '*trickle*.part')
	[ -s "$part" ]
}
