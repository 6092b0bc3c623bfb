#!/usr/bin/python3
"""A reference for the engine's Llama and GPT-2 math, in PyTorch (Debian's
python3-torch), sharing no code with it: the models are written here from
their definitions (transformers' modeling_llama and modeling_gpt2), in
float64, and read and write Hugging Face directories with struct and json.

    llama_ref.py make-model DIR ARCH SEED [DTYPE [FILES]]
        DIR/config.json and DIR/model.safetensors (DTYPE F32 or BF16) of a
        tiny model of ARCH (llama: 2 layers, 4 heads, 2 KV heads, rope
        scaling on, untied; gpt2: 2 layers, 4 heads), random weights; with
        FILES > 1, a sharded set of that many files and its
        model.safetensors.index.json instead, as save_pretrained writes
    llama_ref.py grads DIR DATA B T GRADS LOSS
        the loss and every gradient of the model in DIR on the first batch
        of the llm.c token shard DATA against the engine's (LOSS, and the
        directory GRADS holding its gradients under the weights' names);
        exit status 1 when one differs by more than 1e-5 relative
    llama_ref.py train DIR DATA B T STEPS LR WD METRICS
        STEPS steps of AdamW (constant LR, weight decay WD on matrices, no
        clipping) from DIR; the losses against the engine's train_loss
        lines in METRICS (a rank's metrics.jsonl), within 1e-5 relative
    llama_ref.py loss DIR DATA B T K WANT
        the loss of the model in DIR on batch K against WANT, within 1e-5
"""

import json
import math
import struct
import sys

import torch

torch.set_default_dtype(torch.float64)

SIZES = {
    "llama": dict(vocab_size=300, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=96, max_position_embeddings=64,
                  rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                  rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 32}),
    "gpt2": dict(vocab_size=300, n_embd=64, n_layer=2, n_head=4, n_positions=64),
}

# ------------------------------------------------------------------ files


def write_safetensors(path, tensors, dtype):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        values = tensors[name].flatten().tolist()
        if dtype == "F32":
            raw = struct.pack("<%df" % len(values), *values)
        else:  # BF16: the upper half of the float32, rounded to nearest even
            words = []
            for v in values:
                (u,) = struct.unpack("<I", struct.pack("<f", v))
                u += 0x7FFF + ((u >> 16) & 1)
                words.append((u >> 16) & 0xFFFF)
            raw = struct.pack("<%dH" % len(words), *words)
        header[name] = {"dtype": dtype, "shape": list(tensors[name].shape),
                        "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        raw = data[a:b]
        if h["dtype"] == "F32":
            values = struct.unpack("<%df" % ((b - a) // 4), raw)
        elif h["dtype"] == "BF16":
            values = [struct.unpack("<f", struct.pack("<I", w << 16))[0]
                      for w in struct.unpack("<%dH" % ((b - a) // 2), raw)]
        else:
            sys.exit("%s: %s: dtype %s" % (path, name, h["dtype"]))
        out[name] = torch.tensor(values).reshape(h["shape"])
    return out


def load(d):
    with open(d + "/config.json") as f:
        cfg = json.load(f)
    try:
        with open(d + "/model.safetensors.index.json") as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    except FileNotFoundError:
        files = ["model.safetensors"]
    w = {}
    for name in files:
        w.update(read_safetensors(d + "/" + name))
    return cfg, w


def tokens(path):
    with open(path, "rb") as f:
        head = struct.unpack("<256i", f.read(1024))
        n = head[2]
        return list(struct.unpack("<%dH" % n, f.read(2 * n)))


def batch(toks, B, T, k):
    """Batch k of the unshuffled stream: samples j = tokens [jT, jT + T + 1)."""
    rows = [toks[j * T:j * T + T + 1] for j in range(k * B, k * B + B)]
    x = torch.tensor([r[:T] for r in rows])
    y = torch.tensor([r[1:] for r in rows])
    return x, y

# ------------------------------------------------------------------ models


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def inv_freq(cfg, HS):
    f = [1.0 / cfg["rope_theta"] ** (2.0 * i / HS) for i in range(HS // 2)]
    s = cfg.get("rope_scaling")
    if not s:
        return f
    old, lo, hi = s["original_max_position_embeddings"], s["low_freq_factor"], s["high_freq_factor"]
    out = []
    for v in f:
        wavelen = 2 * math.pi / v
        if wavelen < old / hi:
            out.append(v)
        elif wavelen > old / lo:
            out.append(v / s["factor"])
        else:
            smooth = (old / wavelen - lo) / (hi - lo)
            out.append((1 - smooth) * v / s["factor"] + smooth * v)
    return out


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def causal_attention(q, k, v):
    T, HS = q.shape[-2], q.shape[-1]
    att = (q @ k.transpose(-1, -2)) / math.sqrt(HS)
    att = att.masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf"))
    return torch.softmax(att, dim=-1) @ v


def llama_loss(cfg, w, x, y):
    C, NH = cfg["hidden_size"], cfg["num_attention_heads"]
    KV, HS, eps = cfg["num_key_value_heads"], C // NH, cfg["rms_norm_eps"]
    B, T = x.shape
    ang = torch.arange(T).double()[:, None] * torch.tensor(inv_freq(cfg, HS))[None, :]
    cos, sin = torch.cat((ang, ang), -1).cos(), torch.cat((ang, ang), -1).sin()
    p = "model."
    h = w[p + "embed_tokens.weight"][x]
    for l in range(cfg["num_hidden_layers"]):
        L = "%slayers.%d." % (p, l)
        n = rms_norm(h, w[L + "input_layernorm.weight"], eps)
        q = (n @ w[L + "self_attn.q_proj.weight"].T).view(B, T, NH, HS).transpose(1, 2)
        k = (n @ w[L + "self_attn.k_proj.weight"].T).view(B, T, KV, HS).transpose(1, 2)
        v = (n @ w[L + "self_attn.v_proj.weight"].T).view(B, T, KV, HS).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(NH // KV, dim=1), v.repeat_interleave(NH // KV, dim=1)
        a = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, C)
        h = h + a @ w[L + "self_attn.o_proj.weight"].T
        n = rms_norm(h, w[L + "post_attention_layernorm.weight"], eps)
        g = torch.nn.functional.silu(n @ w[L + "mlp.gate_proj.weight"].T)
        h = h + (g * (n @ w[L + "mlp.up_proj.weight"].T)) @ w[L + "mlp.down_proj.weight"].T
    h = rms_norm(h, w[p + "norm.weight"], eps)
    head = w["lm_head.weight"] if "lm_head.weight" in w else w[p + "embed_tokens.weight"]
    return torch.nn.functional.cross_entropy((h @ head.T).reshape(B * T, -1), y.reshape(-1))


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gpt2_loss(cfg, w, x, y):
    C, NH = cfg["n_embd"], cfg["n_head"]
    HS, B, T = C // NH, x.shape[0], x.shape[1]
    p = "transformer."
    ln = lambda z, n: torch.nn.functional.layer_norm(z, (C,), w[n + ".weight"], w[n + ".bias"], 1e-5)
    conv = lambda z, n: z @ w[n + ".weight"] + w[n + ".bias"]  # Conv1D: [in, out]
    h = w[p + "wte.weight"][x] + w[p + "wpe.weight"][:T]
    for l in range(cfg["n_layer"]):
        L = "%sh.%d." % (p, l)
        q, k, v = conv(ln(h, L + "ln_1"), L + "attn.c_attn").split(C, dim=-1)
        q, k, v = (z.view(B, T, NH, HS).transpose(1, 2) for z in (q, k, v))
        h = h + conv(causal_attention(q, k, v).transpose(1, 2).reshape(B, T, C), L + "attn.c_proj")
        h = h + conv(gelu_tanh(conv(ln(h, L + "ln_2"), L + "mlp.c_fc")), L + "mlp.c_proj")
    h = ln(h, p + "ln_f")
    return torch.nn.functional.cross_entropy((h @ w[p + "wte.weight"].T).reshape(B * T, -1),
                                             y.reshape(-1))


def loss_of(cfg, w, x, y):
    return (llama_loss if cfg["model_type"] == "llama" else gpt2_loss)(cfg, w, x, y)

# ------------------------------------------------------------------ commands


def make_model(d, arch, seed, dtype="F32", files="1"):
    g = torch.Generator().manual_seed(int(seed))
    cfg = dict(SIZES[arch], model_type=arch)
    r = lambda *s: (torch.randn(*s, generator=g) * 0.08).float().double()
    one = lambda n: (1 + torch.randn(n, generator=g) * 0.1).float().double()
    w = {}
    if arch == "llama":
        C, V, I = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
        KVD = cfg["num_key_value_heads"] * C // cfg["num_attention_heads"]
        w["model.embed_tokens.weight"] = r(V, C)
        w["lm_head.weight"] = r(V, C)
        w["model.norm.weight"] = one(C)
        for l in range(cfg["num_hidden_layers"]):
            L = "model.layers.%d." % l
            for n, s in (("self_attn.q_proj", (C, C)), ("self_attn.k_proj", (KVD, C)),
                         ("self_attn.v_proj", (KVD, C)), ("self_attn.o_proj", (C, C)),
                         ("mlp.gate_proj", (I, C)), ("mlp.up_proj", (I, C)),
                         ("mlp.down_proj", (C, I))):
                w[L + n + ".weight"] = r(*s)
            w[L + "input_layernorm.weight"] = one(C)
            w[L + "post_attention_layernorm.weight"] = one(C)
        cfg["architectures"] = ["LlamaForCausalLM"]
    else:
        C, V, Tm = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
        w["transformer.wte.weight"] = r(V, C)
        w["transformer.wpe.weight"] = r(Tm, C)
        w["transformer.ln_f.weight"], w["transformer.ln_f.bias"] = one(C), r(C)
        for l in range(cfg["n_layer"]):
            L = "transformer.h.%d." % l
            for n, s in (("attn.c_attn", (C, 3 * C)), ("attn.c_proj", (C, C)),
                         ("mlp.c_fc", (C, 4 * C)), ("mlp.c_proj", (4 * C, C))):
                w[L + n + ".weight"], w[L + n + ".bias"] = r(*s), r(s[1])
            for n in ("ln_1", "ln_2"):
                w[L + n + ".weight"], w[L + n + ".bias"] = one(C), r(C)
        cfg["architectures"] = ["GPT2LMHeadModel"]
    with open(d + "/config.json", "w") as f:
        json.dump(cfg, f, indent=2)
    n = int(files)
    if n == 1:
        write_safetensors(d + "/model.safetensors", w, dtype)
        return
    names, weight_map = sorted(w), {}
    for k in range(n):
        part = "model-%05d-of-%05d.safetensors" % (k + 1, n)
        mine = names[k::n]
        write_safetensors(d + "/" + part, {x: w[x] for x in mine}, dtype)
        weight_map.update({x: part for x in mine})
    with open(d + "/model.safetensors.index.json", "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)


def rel(a, b):
    return float((a - b).norm() / b.norm()) if float(b.norm()) else float((a - b).norm())


def grads(d, data, B, T, gdir, want):
    cfg, w = load(d)
    for t in w.values():
        t.requires_grad_(True)
    x, y = batch(tokens(data), int(B), int(T), 0)
    loss = loss_of(cfg, w, x, y)
    loss.backward()
    got = read_safetensors(gdir + "/model.safetensors")
    worst, bad = abs(float(loss) - float(want)) / float(loss), []
    print("loss: reference %.9g, engine %s, relative difference %.3g" % (float(loss), want, worst))
    for name in sorted(w):
        if name not in got:
            bad.append(name + ": no engine gradient")
            continue
        r = rel(got[name], w[name].grad)
        worst = max(worst, r)
        print("  %-48s |g| %.4g  relative difference %.3g" % (name, float(w[name].grad.norm()), r))
        if r > 1e-5:
            bad.append("%s: %.3g" % (name, r))
    extra = set(got) - set(w)
    bad += ["%s: engine gradient of no weight" % n for n in sorted(extra)]
    if abs(float(loss) - float(want)) / float(loss) > 1e-5:
        bad.append("loss")
    print("worst relative difference %.3g over the loss and %d gradients" % (worst, len(w)))
    if bad:
        sys.exit("beyond 1e-5: " + ", ".join(bad))


def engine_losses(path):
    out = {}
    with open(path) as f:
        for line in f:
            m = json.loads(line)
            if m.get("metric") == "train_loss":
                out[int(m["step"])] = float(m["value"])
    return out


def train(d, data, B, T, steps, lr, wd, metrics):
    cfg, w = load(d)
    B, T, steps, lr, wd = int(B), int(T), int(steps), float(lr), float(wd)
    b1, b2, eps = 0.9, 0.95, 1e-8
    m = {n: torch.zeros_like(t) for n, t in w.items()}
    v = {n: torch.zeros_like(t) for n, t in w.items()}
    toks, eng, worst = tokens(data), engine_losses(metrics), 0.0
    for s in range(1, steps + 1):
        for t in w.values():
            t.requires_grad_(True)
            t.grad = None
        x, y = batch(toks, B, T, s - 1)
        loss = loss_of(cfg, w, x, y)
        loss.backward()
        r = abs(eng[s] - float(loss)) / float(loss)
        worst = max(worst, r)
        print("step %2d: reference %.9g, engine %.9g, relative difference %.3g" %
              (s, float(loss), eng[s], r))
        with torch.no_grad():
            for n, t in w.items():
                g = t.grad
                m[n] = b1 * m[n] + (1 - b1) * g
                v[n] = b2 * v[n] + (1 - b2) * g * g
                mh, vh = m[n] / (1 - b1 ** s), v[n] / (1 - b2 ** s)
                decay = wd if t.dim() == 2 else 0.0
                w[n] = (t - lr * (mh / (vh.sqrt() + eps) + decay * t)).detach()
    print("worst relative difference %.3g over %d steps" % (worst, steps))
    if worst > 1e-5:
        sys.exit("beyond 1e-5")


def loss_at(d, data, B, T, k, want):
    cfg, w = load(d)
    x, y = batch(tokens(data), int(B), int(T), int(k))
    with torch.no_grad():
        got = float(loss_of(cfg, w, x, y))
    r = abs(got - float(want)) / got
    print("loss of %s on batch %s: reference %.9g, engine %s, relative difference %.3g" %
          (d, k, got, want, r))
    if r > 1e-5:
        sys.exit("beyond 1e-5")


def main(argv):
    cmds = {"make-model": make_model, "grads": grads, "train": train, "loss": loss_at}
    if len(argv) < 2 or argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[argv[1]](*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
