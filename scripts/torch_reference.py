#!/usr/bin/env python3
"""PyTorch reference GPT-2 (MODEL.md's model): an independent implementation to time
the trainer against and to check its steps with.

The same model as the trainer: pre-LN GPT-2 blocks, tanh GELU, tied LM head, and a
position scheme: learned (wpe table), sinusoidal (fixed sin/cos table, times sin_scale, added to
the embedding), rope (q, k rotated on adjacent pairs (2j, 2j+1) after the QKV projection), or
crope (as rope, and the Q/K/V projections are complex-linear: each stores A, B (C/2, C/2)
and uses the real matrix with 2x2 blocks [[a, -b], [b, a]]), nope (no position information),
alibi (head h's scaled scores get -m_h (i - j) before the softmax) or xpos (rope, and pair j
of q at position n scaled by zeta_j^(n/512), of k at m by zeta_j^(-m/512), zeta_j = (2j/R + 0.4) / 1.4);
for the rotary schemes partial rotary (--partial_rotary_factor f: only each head's first
R = 2 floor(f D / 2) channels rotate, at frequencies over R, as GPT-NeoX; R = D at f = 1) and a RoPE
scaling (--rope_scaling: linear, ntk, dynamic, yarn, llama3; yarn's temperature on the rotated
channels' scores).
AdamW is torch.optim.AdamW.

Benchmark (default): random tokens, one timing loop. Prints one JSON line:
  {"pos": ..., "compile": ..., "tokens_per_s": ..., "ms_per_step": ..., "peak_mem_mib": ...}

Reference steps (--data SHARD.bin): trains on the shard's windows in the trainer's
sequential order (batch k = windows kB .. kB+B-1, window w = tokens wT .. wT+T) and prints
one JSON line per step, {"step": s, "loss": ..., "grad_norm": ...}, as the trainer's log
does; with --val_data, then one line per --val_lens length, {"step", "seq_len", "val_loss"}: the
mean loss over the first --val_tokens targets, as back-to-back windows of that length (what the
trainer scores at each eval_seq_lens entry dividing the longest). --save_init FILE writes the initial weights in the trainer's safetensors layout
(F32), for build/train --init_from FILE; the model then starts from those float32 values.

Usage: torch_reference.py --pos crope [--compile] [--n_layer 4 --n_head 4 --n_embd 128 --mlp_hidden 0
       --batch_size 16 --seq_len 1024 --steps 30 --warmup 5] [--no-tf32]
       [--device cpu [--threads N]]
       torch_reference.py --pos rope --data SHARD.bin --save_init FILE.safetensors
       [--dtype float64] [--lr 1e-3 --weight_decay 0.01] [model and batch flags as above]
       [--partial_rotary_factor 1] [--rope_scaling yarn --rope_scaling_factor 0 --rope_train_len 0]
       [--val_data SHARD.bin --val_lens 8,16,32 --val_tokens 64]
"""
import argparse
import json
import math
import os
import re
import struct
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("error: torch is not installed", file=sys.stderr)
    sys.exit(1)


def rope_tables(T, D, base):
    j = torch.arange(D // 2, dtype=torch.float64)
    theta = base ** (-2.0 * j / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * theta[None, :]  # (T, D/2)
    return torch.cos(ang), torch.sin(ang)


def xpos_scale(T, R):
    """(T, R/2): xPos's zeta_j^(m/512) at position m, zeta_j = (2j/R + 0.4) / 1.4 (no position shift)."""
    zeta = (2.0 * torch.arange(R // 2, dtype=torch.float64) / R + 0.4) / 1.4
    return zeta[None, :] ** (torch.arange(T, dtype=torch.float64)[:, None] / 512.0)


SCALINGS = ["none", "linear", "ntk", "dynamic", "yarn", "llama3"]


def rope_scale(scaling, factor, train_len, T):
    """The scaling's s for a sequence of T tokens: the factor, or (0, and always for dynamic)
    max(1, T / train_len)."""
    if scaling == "none":
        return 1.0
    return factor if factor > 0 and scaling != "dynamic" else max(1.0, T / train_len)


def scaled_rope_tables(T, R, base, scaling, s, train_len):
    """cos, sin (T, R/2) of the R rotated channels under a RoPE scaling (MODEL.md, RoPE scaling),
    without yarn's temperature, which GPT.forward applies to the scores."""
    j = torch.arange(R // 2, dtype=torch.float64)
    if scaling in ("ntk", "dynamic"):
        base = base * s ** (R / (R - 2))
    theta = base ** (-2.0 * j / R)
    wavelength = 2 * math.pi / theta
    if scaling == "yarn":
        ramp = ((train_len / wavelength - 1) / (32 - 1)).clamp(0, 1)
        theta = theta * ((1 - ramp) / s + ramp)
    if scaling == "llama3":  # as HF's _compute_llama3_parameters, low_freq_factor 1, high_freq_factor 4
        smooth = (train_len / wavelength - 1) / (4 - 1)
        mid = (wavelength >= train_len / 4) & (wavelength <= train_len)
        theta = torch.where(wavelength > train_len, theta / s, theta)
        theta = torch.where(mid, (1 - smooth) * theta / s + smooth * theta, theta)
    m = torch.arange(T, dtype=torch.float64)
    if scaling == "linear":
        m = m / s
    ang = m[:, None] * theta[None, :]
    return torch.cos(ang), torch.sin(ang)


def default_sin_scale():
    """The trainer's default sin_scale: kSinScale in src/pos.h, its one home."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src", "pos.h")
    with open(path, encoding="utf-8") as f:
        return float(re.search(r"kSinScale\s*=\s*([0-9.eE+-]+);", f.read()).group(1))


def sinusoidal_table(T, C, scale):
    """(T, C): pe[t, 2i] = scale sin(t / 10000^(2i/C)), pe[t, 2i+1] = scale cos(...)."""
    i = torch.arange(C // 2, dtype=torch.float64)
    ang = torch.arange(T, dtype=torch.float64)[:, None] / 10000.0 ** (2.0 * i / C)[None, :]
    pe = torch.zeros(T, C, dtype=torch.float64)
    pe[:, 0:2 * (C // 2):2], pe[:, 1:2 * (C // 2):2] = torch.sin(ang), torch.cos(ang)
    return scale * pe


def apply_rope(x, cos, sin):
    """x (B, H, T, D); pairs (2j, 2j+1) rotated by the angle of position t."""
    x0, x1 = x[..., 0::2], x[..., 1::2]  # (B, H, T, D/2)
    y0 = x0 * cos - x1 * sin
    y1 = x0 * sin + x1 * cos
    return torch.stack((y0, y1), dim=-1).flatten(-2)


def alibi_slopes(H):
    """ALiBi's m_h, h = 1..H: 2^(-8h/H) for H a power of two; otherwise those of the largest
    power of two n below H, then every other slope of 2n heads."""
    n = 2 ** int(math.log2(H))
    return torch.tensor([2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]
                        + [2.0 ** (-4.0 * (2 * k - 1) / n) for k in range(1, H - n + 1)], dtype=torch.float64)


def alibi_bias(slopes, T):
    """(H, T, T): -m_h (i - j) for key j <= i, -inf above the diagonal (the causal mask)."""
    i = torch.arange(T, dtype=slopes.dtype, device=slopes.device)
    dist = (i[:, None] - i[None, :]).masked_fill(torch.ones(T, T, dtype=torch.bool, device=slopes.device).triu(1),
                                                 float("inf"))
    return -slopes[:, None, None] * dist


def causal_attention(q, k, v, bias=None):
    """(B, H, T, D) -> (B, H, T, D); bias (H, T, T), when given, is added to the scaled scores
    and holds the causal mask. torch < 2.0 (e.g. Debian's 1.13, used for the CPU benchmark)
    has no scaled_dot_product_attention, so spell it out there."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=bias is None)
    T = q.size(-2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))  # (B, H, T, T)
    if bias is None:
        bias = torch.zeros(T, T, dtype=q.dtype, device=q.device).masked_fill(
            torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return (att + bias).softmax(dim=-1) @ v


class ComplexQKV(nn.Module):
    """Q, K, V projections as complex-linear maps: W~ = A + iB per projection."""

    def __init__(self, C):
        super().__init__()
        h = C // 2
        self.C = C
        self.A = nn.Parameter(torch.randn(3, h, h) * 0.02)
        self.B = nn.Parameter(torch.randn(3, h, h) * 0.02)
        self.bias = nn.Parameter(torch.zeros(3 * C))

    def weight(self):
        A, B = self.A, self.B  # (3, h, h)
        top = torch.stack((A, -B), dim=-1).flatten(-2)  # row 2i: a, -b interleaved  (3, h, C)
        bot = torch.stack((B, A), dim=-1).flatten(-2)   # row 2i+1: b, a               (3, h, C)
        return torch.stack((top, bot), dim=2).reshape(3 * self.C, self.C)

    def forward(self, x):
        return F.linear(x, self.weight(), self.bias)


class Block(nn.Module):
    def __init__(self, C, H, L, pos, hidden):
        super().__init__()
        self.H, self.pos = H, pos
        self.ln1 = nn.LayerNorm(C)
        self.qkv = ComplexQKV(C) if pos == "crope" else nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, hidden)  # the MLP's hidden width F (4C by default)
        self.fc2 = nn.Linear(hidden, C)
        for lin in (self.proj, self.fc2):
            nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * L))
        for lin in (self.fc,) + ((self.qkv,) if pos != "crope" else ()):
            nn.init.normal_(lin.weight, std=0.02)
        for lin in (self.proj, self.fc, self.fc2) + ((self.qkv,) if pos != "crope" else ()):
            nn.init.zeros_(lin.bias)

    def forward(self, x, cos, sin, bias, scale, score_scale=1.0):
        B, T, C = x.shape
        H, D = self.H, C // self.H
        qkv = self.qkv(self.ln1(x))
        q, k, v = qkv.split(C, dim=-1)
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        if cos is not None:  # the first R = 2 cos.size(-1) channels rotate, the rest pass
            R = 2 * cos.size(-1)
            (q, qp), (k, kp) = q.split((R, D - R), dim=-1), k.split((R, D - R), dim=-1)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            if scale is not None:  # xpos: both elements of pair j share its factor
                s = scale.repeat_interleave(2, dim=-1)  # (T, R)
                q, k = q * s, k / s
            if score_scale != 1.0:  # yarn's temperature: the rotated channels' q.k multiplied by it
                q = q * score_scale
            q, k = torch.cat((q, qp), dim=-1), torch.cat((k, kp), dim=-1)
        y = causal_attention(q, k, v, bias)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        x = x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, V, maxT, C, L, H, pos, rope_base=10000.0, mlp_hidden=0, sin_scale=1.0,
                 rope_scaling="none", rope_scaling_factor=0.0, rope_train_len=1, partial_rotary_factor=1.0):
        super().__init__()
        self.pos = pos
        self.R, self.rope_base = 2 * math.floor(partial_rotary_factor * (C // H) / 2), rope_base
        self.scaling = (rope_scaling, rope_scaling_factor, rope_train_len)
        self.wte = nn.Embedding(V, C)
        nn.init.normal_(self.wte.weight, std=0.02)
        if pos == "learned":
            self.wpe = nn.Embedding(maxT, C)
            nn.init.normal_(self.wpe.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(C, H, L, pos, mlp_hidden or 4 * C) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        cos, sin = rope_tables(maxT, self.R, rope_base)
        # float64 tables: model.to(dtype) rounds them once, as the trainer does
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.register_buffer("pe", sinusoidal_table(maxT, C, sin_scale), persistent=False)
        self.register_buffer("slopes", alibi_slopes(H), persistent=False)
        self.register_buffer("xpos", xpos_scale(maxT, self.R), persistent=False)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx)
        if self.pos == "learned":
            x = x + self.wpe(torch.arange(T, device=idx.device))
        if self.pos == "sinusoidal":
            x = x + self.pe[:T]
        rotary = self.pos in ("rope", "crope", "xpos")
        cos, sin = (self.rope_cos[:T], self.rope_sin[:T]) if rotary else (None, None)
        scaling, factor, train_len = self.scaling
        score_scale = 1.0
        if rotary and (scaling != "none" or T > len(self.rope_cos)):  # this length's s, rounded once
            s = rope_scale(scaling, factor, train_len, T)
            cos, sin = (t.to(x.dtype) for t in scaled_rope_tables(T, self.R, self.rope_base, scaling, s, train_len))
            if scaling == "yarn":
                score_scale = (0.1 * math.log(s) + 1) ** 2
        bias = alibi_bias(self.slopes, T) if self.pos == "alibi" else None
        scale = None
        if self.pos == "xpos":  # past maxT (a longer validation): the factors of T positions
            scale = self.xpos[:T] if T <= len(self.xpos) else xpos_scale(T, self.R).to(self.xpos)
        for blk in self.blocks:
            x = blk(x, cos, sin, bias, scale, score_scale)
        logits = F.linear(self.lnf(x), self.wte.weight)  # tied head
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def trainer_tensors(model):
    """The model's parameters under the trainer's names and shapes (per-layer tensors
    stacked over layers, in the trainer's layout order; MODEL.md)."""
    blocks = model.blocks

    def stack(get):
        return torch.stack([get(b) for b in blocks])

    t = {"wte": model.wte.weight}
    if model.pos == "learned":
        t["wpe"] = model.wpe.weight
    t["ln1.weight"], t["ln1.bias"] = stack(lambda b: b.ln1.weight), stack(lambda b: b.ln1.bias)
    if model.pos == "crope":
        t["attn.qkv.A"], t["attn.qkv.B"] = stack(lambda b: b.qkv.A), stack(lambda b: b.qkv.B)
    else:
        t["attn.qkv.weight"] = stack(lambda b: b.qkv.weight)
    t["attn.qkv.bias"] = stack(lambda b: b.qkv.bias)
    t["attn.proj.weight"], t["attn.proj.bias"] = stack(lambda b: b.proj.weight), stack(lambda b: b.proj.bias)
    t["ln2.weight"], t["ln2.bias"] = stack(lambda b: b.ln2.weight), stack(lambda b: b.ln2.bias)
    t["mlp.fc.weight"], t["mlp.fc.bias"] = stack(lambda b: b.fc.weight), stack(lambda b: b.fc.bias)
    t["mlp.proj.weight"], t["mlp.proj.bias"] = stack(lambda b: b.fc2.weight), stack(lambda b: b.fc2.bias)
    t["lnf.weight"], t["lnf.bias"] = model.lnf.weight, model.lnf.bias
    return t


def save_safetensors(path, tensors):
    """F32 safetensors (8-byte little-endian header length, JSON header, raw data)."""
    header, blobs, offset = {}, [], 0
    for name, x in tensors.items():
        data = x.detach().cpu().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(x.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_shard(path):
    """Tokens of an llm.c shard (1024-byte header: magic 20240520, version 1, count N; N uint16)."""
    with open(path, "rb") as f:
        raw = f.read()
    magic, version, n = struct.unpack("<3i", raw[:12])
    if magic != 20240520 or version != 1 or len(raw) != 1024 + 2 * n:
        print(f"error: {path} is not a token shard", file=sys.stderr)
        sys.exit(1)
    return torch.frombuffer(bytearray(raw[1024:]), dtype=torch.int16).to(torch.int64) & 0xFFFF


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pos", default="rope", choices=["learned", "sinusoidal", "rope", "crope", "nope", "alibi", "xpos"])
    ap.add_argument("--n_layer", type=int, default=4)
    ap.add_argument("--n_head", type=int, default=4)
    ap.add_argument("--n_embd", type=int, default=128)
    ap.add_argument("--vocab_size", type=int, default=50257)
    ap.add_argument("--max_seq_len", type=int, default=1024)
    ap.add_argument("--mlp_hidden", type=int, default=0, help="the MLP's hidden width (0 = 4 x n_embd)")
    ap.add_argument("--sin_scale", type=float, default=default_sin_scale(), help="sinusoidal: the fixed table's factor")
    ap.add_argument("--partial_rotary_factor", type=float, default=1.0,
                    help="rotary schemes: the share f of each head's channels that rotate")
    ap.add_argument("--rope_scaling", default="none", choices=SCALINGS, help="rotary schemes: the tables' scaling")
    ap.add_argument("--rope_scaling_factor", type=float, default=0.0, help="its s (0 = from the length)")
    ap.add_argument("--rope_train_len", type=int, default=0, help="the length s refers to (0 = seq_len)")
    ap.add_argument("--val_data", help="with --data: after the steps, the validation loss on this shard")
    ap.add_argument("--val_lens", default="", help="at these lengths, e.g. 8,16,32")
    ap.add_argument("--val_tokens", type=int, default=0,
                    help="over the first this many target tokens, as windows of each length from the start")
    ap.add_argument("--batch_size", type=int, default=16)
    ap.add_argument("--seq_len", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=30, help="timed steps (with --data: steps to run)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first (compilation happens here)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--no-tf32", action="store_true", help="plain fp32 matmuls (default: TF32 allowed)")
    ap.add_argument("--device", default="cuda", help="cuda | cpu")
    ap.add_argument("--threads", type=int, default=0,
                    help="CPU only: torch intra-op threads (0 = one per available core)")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight_decay", type=float, default=0.01)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--data", help="reference steps on this shard's windows, in order (CPU)")
    ap.add_argument("--save_init", help="write the initial weights here (trainer layout, F32 safetensors)")
    a = ap.parse_args()

    if a.data:
        a.device = "cpu"
    if a.device == "cuda" and not torch.cuda.is_available():
        print("error: torch has no CUDA device", file=sys.stderr)
        sys.exit(1)
    if a.device == "cpu":
        # some torch builds default to 1 thread; match the trainer, which uses every core
        torch.set_num_threads(a.threads if a.threads > 0 else len(os.sched_getaffinity(0)))
    torch.backends.cuda.matmul.allow_tf32 = not a.no_tf32
    torch.backends.cudnn.allow_tf32 = not a.no_tf32
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    model = GPT(a.vocab_size, a.max_seq_len, a.n_embd, a.n_layer, a.n_head, a.pos, mlp_hidden=a.mlp_hidden,
                sin_scale=a.sin_scale, rope_scaling=a.rope_scaling, rope_scaling_factor=a.rope_scaling_factor,
                rope_train_len=a.rope_train_len or a.seq_len, partial_rotary_factor=a.partial_rotary_factor)
    if a.save_init:
        save_safetensors(a.save_init, trainer_tensors(model))
    with torch.no_grad():  # start from exactly the float32 values a saved init holds
        for p in model.parameters():
            p.copy_(p.float())
    model = model.to(device=dev, dtype=getattr(torch, a.dtype))
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=a.weight_decay)
    step_fn_model = torch.compile(model) if a.compile else model

    def step(idx, tgt, norm=None):
        """One AdamW step; appends the gradient's global norm to the list `norm` if given."""
        loss = step_fn_model(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if norm is not None:
            norm.append(math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in model.parameters())))
        opt.step()
        return loss

    if a.data:
        tokens = read_shard(a.data)
        B, T = a.batch_size, a.seq_len
        if (len(tokens) - 1) // T < a.steps * B:
            print(f"error: {a.data} has fewer than {a.steps * B} windows of {T + 1} tokens", file=sys.stderr)
            sys.exit(1)
        for s in range(a.steps):
            w = torch.stack([tokens[(s * B + i) * T:(s * B + i) * T + T + 1] for i in range(B)])  # (B, T+1)
            norm = []
            loss = step(w[:, :-1].contiguous(), w[:, 1:].contiguous(), norm)
            print(json.dumps({"step": s + 1, "loss": float(loss), "grad_norm": norm[0]}), flush=True)
        if a.val_data:  # windows of each length, back to back from the split's start
            val = read_shard(a.val_data)
            with torch.no_grad():
                for Tv in (int(x) for x in a.val_lens.split(",")):
                    w = torch.stack([val[o:o + Tv + 1] for o in range(0, a.val_tokens, Tv)])  # (n, Tv+1)
                    loss = model(w[:, :-1].contiguous(), w[:, 1:].contiguous())
                    print(json.dumps({"step": a.steps, "seq_len": Tv, "val_loss": float(loss)}), flush=True)
        return

    def random_step():
        idx = torch.randint(0, a.vocab_size, (a.batch_size, a.seq_len), device=dev)
        tgt = torch.randint(0, a.vocab_size, (a.batch_size, a.seq_len), device=dev)
        return step(idx, tgt)

    for _ in range(a.warmup):
        random_step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = random_step()
        loss.item()  # synchronises, as the trainer's per-step loss copy does
        times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2]
    n_params = sum(p.numel() for p in model.parameters())
    out = {
        "pos": a.pos,
        "compile": bool(a.compile),
        "params": n_params,
        "batch_size": a.batch_size,
        "seq_len": a.seq_len,
        "ms_per_step": med * 1000,
        "tokens_per_s": a.batch_size * a.seq_len / med,
        "peak_mem_mib": torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda" else None,
        "loss": float(loss.item()),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
