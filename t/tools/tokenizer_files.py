#!/usr/bin/python3
"""The same tokenizers in the other formats `stork prep --tokenizer` reads,
for t/train/tokenizer.bats (standard library only):

    tokenizer_files.py hf-gpt2 ENCODER.json VOCAB.bpe OUT.json
        GPT-2's encoder.json and vocab.bpe as a Hugging Face tokenizer.json
        (ByteLevel pre-tokenizer, BPE model, <|endoftext|> added)
    tokenizer_files.py tiktoken VOCAB.json OUT.tiktoken
        a tiktoken rank file (base64 of each token's bytes, its id) of an
        encoder.json, or of a tokenizer.json's model.vocab; special tokens
        (<|...|>) left out, as tiktoken keeps them apart
    tokenizer_files.py unigram OUT.json
        a small SentencePiece-style Unigram tokenizer.json (to be refused)

Byte-level names are turned into bytes with GPT-2's bytes_to_unicode,
written here from its definition.
"""

import base64
import json
import sys


def bytes_to_unicode():
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[chr(b)] = b
        else:
            table[chr(256 + n)] = b
            n += 1
    return table


def hf_gpt2(encoder, vocab_bpe, out):
    enc = json.load(open(encoder, encoding="utf-8"))
    merges = [l for l in open(vocab_bpe, encoding="utf-8").read().split("\n")
              if l and not l.startswith("#version")]
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": enc["<|endoftext|>"], "content": "<|endoftext|>",
                          "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": True, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None, "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False,
                  "byte_fallback": False, "vocab": enc, "merges": merges},
    }
    json.dump(tok, open(out, "w", encoding="utf-8"), ensure_ascii=False)


def tiktoken(vocab_json, out):
    v = json.load(open(vocab_json, encoding="utf-8"))
    if "model" in v and isinstance(v["model"], dict):
        v = v["model"]["vocab"]
    table = bytes_to_unicode()
    with open(out, "w") as f:
        for name, i in sorted(v.items(), key=lambda kv: kv[1]):
            if name.startswith("<|") and name.endswith("|>"):
                continue
            raw = bytes(table[c] for c in name)
            f.write("%s %d\n" % (base64.b64encode(raw).decode(), i))


def unigram(out):
    json.dump({"version": "1.0", "normalizer": None, "pre_tokenizer": {"type": "Metaspace"},
               "model": {"type": "Unigram", "vocab": [["<unk>", 0.0], ["a", -1.0]]}},
              open(out, "w"))


def main(argv):
    cmds = {"hf-gpt2": hf_gpt2, "tiktoken": tiktoken, "unigram": unigram}
    if len(argv) < 2 or argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[argv[1]](*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
