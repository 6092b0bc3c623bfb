#!/usr/bin/python3
"""A second implementation of the safetensors format and of config.json,
standard library only, for t/unit/check_safetensors and t/unit/check_hf to
hold lib/formats/safetensors.c and lib/formats/hf_config.c against.

It shares no code with them: F16 is packed by Python's struct ('e', IEEE
binary16), BF16 is rounded here by comparing the dropped bits with one half
(not by the add-and-shift of the C writer), and the file layout follows
the format's description, not the C code.

    safetensors_ref.py write-st DIR       DIR/ref.safetensors and a sharded
                                          set in DIR/sharded/
    safetensors_ref.py check-st F32 BF16  the C writer's two files of the
                                          same tensors, checked value for
                                          value (exit status 1 on a mismatch)
    safetensors_ref.py write-config DIR   DIR/llama/config.json, DIR/gpt2/config.json
    safetensors_ref.py check-config DIR   DIR/llama-out/config.json and
                                          DIR/gpt2-out/config.json, as written
                                          back by the C writer

The values are those the C tests expect; change both together.
"""

import json
import math
import os
import struct
import sys

# ------------------------------------------------------------------ writing


def f32_bytes(bits):
    return b"".join(struct.pack("<I", b) for b in bits)


def bf16_bytes(values):
    """values exactly representable in bfloat16 (checked), or NaN."""
    out = b""
    for v in values:
        (bits,) = struct.unpack("<I", struct.pack("<f", v))
        if not math.isnan(v) and bits & 0xFFFF:
            raise ValueError("%r is not a bfloat16 value" % v)
        out += struct.pack("<H", bits >> 16)
    return out


def f16_bytes(values):
    return b"".join(struct.pack("<e", v) for v in values)


def write_safetensors(path, tensors, metadata=None):
    """tensors: (name, dtype, shape, bytes), written in the order given,
    the header in that order too and not padded: the reader must not
    depend on the C writer's habits."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


# F32: the C test expects, in order: 1, -2.5, FLT_MAX, the smallest
# subnormal, -0, inf, -inf, NaN, 0.1f, FLT_MIN.
F32_BITS = [0x3F800000, 0xC0200000, 0x7F7FFFFF, 0x00000001, 0x80000000,
            0x7F800000, 0xFF800000, 0x7FC00000, 0x3DCCCCCD, 0x00800000]
INF, NAN = float("inf"), float("nan")
BF16_VALUES = [1.0, -1.5, 0.0078125, 2.0 ** 127 * (1 + 127 / 128), 2.0 ** -133,
               INF, -INF, NAN, -0.0]
F16_VALUES = [1.0, -2.0, 65504.0, 2.0 ** -24, 1023 * 2.0 ** -24, 2.0 ** -14,
              INF, -INF, NAN, -0.0, 1 / 3, 0.1, -3 * 2.0 ** -24]


def write_st(d):
    grid = [r * 16 + c for r in range(5) for c in range(6)]
    grid16 = [-(r * 3 + c) / 4 for r in range(4) for c in range(3)]
    write_safetensors(os.path.join(d, "ref.safetensors"), [
        ("grid", "BF16", [5, 6], bf16_bytes(grid)),
        ("f16", "F16", [len(F16_VALUES)], f16_bytes(F16_VALUES)),
        ("f32", "F32", [2, 5], f32_bytes(F32_BITS)),
        ("bf16", "BF16", [3, 3], bf16_bytes(BF16_VALUES)),
        ("grid16", "F16", [4, 3], f16_bytes(grid16)),
    ], {"format": "pt", "writer": "safetensors_ref.py"})
    shard = os.path.join(d, "sharded")
    os.makedirs(shard, exist_ok=True)
    one, two = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    write_safetensors(os.path.join(shard, one), [
        ("b", "BF16", [3], bf16_bytes([0.5, -0.25, 8.0])),
        ("a", "F32", [2, 2], b"".join(struct.pack("<f", v) for v in (1, 2, 3, 4))),
    ], {"format": "pt"})
    write_safetensors(os.path.join(shard, two), [
        ("c", "F16", [2], f16_bytes([2.0 ** -24, -65504.0])),
    ])
    with open(os.path.join(shard, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 30},
                   "weight_map": {"a": one, "b": one, "c": two}}, f, indent=2)


# ------------------------------------------------------------------ checking

# What the C test writes: "values" holds these fp32 bit patterns (ties,
# near-ties, overflow to infinity, subnormals, NaN), "matrix" [3, 4] holds
# i / 4 - 1, "scalar" [] holds 42.5, "empty" is [0, 3].
C_BITS = [0x3F800000, 0x3F808000, 0x3F818000, 0x3F808001, 0x3F80FFFF,
          0xBF817FFF, 0x7F7FFFFF, 0x7F7F7FFF, 0x00008000, 0x00018000,
          0x80000000, 0xFF800000, 0x7FC00001, 0x00000001, 0x0000C000]


def bf16_round(bits):
    """fp32 bits to bfloat16 bits, to nearest, ties to even."""
    if (bits & 0x7FFFFFFF) > 0x7F800000:
        return None  # NaN: any NaN will do
    kept, dropped = bits >> 16, bits & 0xFFFF
    if dropped > 0x8000 or (dropped == 0x8000 and kept & 1):
        kept += 1
    return kept


def read_safetensors(path, problems):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    text = raw[8:8 + n].decode()
    if (8 + n) % 8:
        problems.append("%s: data starts at byte %d, not a multiple of 8" % (path, 8 + n))
    body = text.rstrip(" ")
    if not body.endswith("}"):
        problems.append("%s: the header is padded with something other than spaces" % path)
    pairs = json.loads(text, object_pairs_hook=lambda p: p)
    keys = [k for k, _ in pairs]
    if keys != sorted(keys):
        problems.append("%s: header keys not sorted: %s" % (path, keys))
    header = dict(pairs)
    meta = dict(header.pop("__metadata__", []))
    if meta.get("format") != "pt":
        problems.append("%s: __metadata__ has no \"format\": \"pt\"" % path)
    data = raw[8 + n:]
    at = 0
    for name in sorted(header):
        e = dict(header[name])
        begin, end = e["data_offsets"]
        if begin != at:
            problems.append("%s: %s starts at %d, not %d" % (path, name, begin, at))
        at = end
    if at != len(data):
        problems.append("%s: the tensors end at %d, the data at %d" % (path, at, len(data)))
    return {name: (dict(e)["dtype"], dict(e)["shape"],
                   data[dict(e)["data_offsets"][0]:dict(e)["data_offsets"][1]])
            for name, e in header.items()}


def words(raw, size):
    fmt = "<%d%s" % (len(raw) // size, "I" if size == 4 else "H")
    return list(struct.unpack(fmt, raw))


def check_st(f32_path, bf16_path):
    problems = []
    f32 = read_safetensors(f32_path, problems)
    bf16 = read_safetensors(bf16_path, problems)
    matrix = [struct.unpack("<I", struct.pack("<f", i / 4 - 1))[0] for i in range(12)]
    want = {"values": ([len(C_BITS)], C_BITS), "matrix": ([3, 4], matrix),
            "scalar": ([], [struct.unpack("<I", struct.pack("<f", 42.5))[0]]),
            "empty": ([0, 3], [])}
    for name, (shape, bits) in want.items():
        for path, tensors, dtype in ((f32_path, f32, "F32"), (bf16_path, bf16, "BF16")):
            if name not in tensors:
                problems.append("%s: no tensor %s" % (path, name))
                continue
            got_dtype, got_shape, raw = tensors[name]
            if (got_dtype, got_shape) != (dtype, shape):
                problems.append("%s: %s is %s %s, not %s %s" % (
                    path, name, got_dtype, got_shape, dtype, shape))
                continue
            got = words(raw, 4 if dtype == "F32" else 2)
            for i, b in enumerate(bits):
                w = b if dtype == "F32" else bf16_round(b)
                if w is None:
                    ok = (got[i] & 0x7F80) == 0x7F80 and got[i] & 0x7F
                else:
                    ok = got[i] == w
                if not ok:
                    problems.append("%s: %s[%d] of fp32 %08x is %04x, not %s" % (
                        path, name, i, b, got[i], "a NaN" if w is None else "%04x" % w))
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


# ------------------------------------------------------------------ config.json

LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
    "hidden_size": 96, "initializer_range": 0.02, "intermediate_size": 256,
    "max_position_embeddings": 131072, "mlp_bias": False,
    "num_attention_heads": 6, "num_hidden_layers": 3, "num_key_value_heads": 2,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0", "use_cache": True, "vocab_size": 128256,
}
GPT2 = {
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256,
    "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
    "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
    "resid_pdrop": 0.1, "vocab_size": 50257,
}
# What from_pretrained needs back to build the same model.
LLAMA_KEYS = ["architectures", "model_type", "hidden_act", "hidden_size",
              "intermediate_size", "max_position_embeddings", "num_attention_heads",
              "num_hidden_layers", "num_key_value_heads", "rms_norm_eps", "rope_scaling",
              "rope_theta", "tie_word_embeddings", "torch_dtype", "vocab_size",
              "attention_bias", "mlp_bias"]
GPT2_KEYS = ["architectures", "model_type", "activation_function", "layer_norm_epsilon",
             "n_embd", "n_head", "n_layer", "n_positions", "vocab_size"]


def write_config(d):
    for name, cfg in (("llama", LLAMA), ("gpt2", GPT2)):
        os.makedirs(os.path.join(d, name), exist_ok=True)
        with open(os.path.join(d, name, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)


def check_config(d):
    problems = []
    gpt2 = dict(GPT2, tie_word_embeddings=True, torch_dtype="float32", n_inner=None)
    llama = dict(LLAMA, head_dim=LLAMA["hidden_size"] // LLAMA["num_attention_heads"])
    for name, cfg, keys in (("llama", llama, LLAMA_KEYS + ["head_dim"]),
                            ("gpt2", gpt2, GPT2_KEYS + ["tie_word_embeddings", "torch_dtype",
                                                        "n_inner"])):
        path = os.path.join(d, name + "-out", "config.json")
        with open(path) as f:
            text = f.read()
        pairs = json.loads(text, object_pairs_hook=lambda p: p)
        if [k for k, _ in pairs] != sorted(k for k, _ in pairs):
            problems.append("%s: keys not sorted" % path)
        out = json.loads(text)
        for k in keys:
            if k not in out or out[k] != cfg[k] or type(out[k]) is not type(cfg[k]):
                problems.append("%s: %s is %r, not %r" % (path, k, out.get(k, "(missing)"),
                                                          cfg[k]))
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "write-st":
        write_st(argv[2])
    elif len(argv) == 4 and argv[1] == "check-st":
        return check_st(argv[2], argv[3])
    elif len(argv) == 3 and argv[1] == "write-config":
        write_config(argv[2])
    elif len(argv) == 3 and argv[1] == "check-config":
        return check_config(argv[2])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
