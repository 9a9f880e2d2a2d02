#!/usr/bin/python3
"""Train a tiny byte-level Llama at a short length N and export it for reach
(issue "Small models trained short, evaluated long"; docs/EXTRAPOLATION.md §4, §7.2, §7.4).

Needs Debian's PyTorch (apt-get install -y python3-torch; run with /usr/bin/python3, CPU) and
the King James Bible text (apt-get install -y bible-kjv-text bible-kjv).

usage: train_tiny.py --variant rope|keynorm|cosa-logn|hwfa [--out models/VARIANT] [--steps 600]
         [--batch 16] [--seq 128] [--hidden 128] [--intermediate 384] [--layers 4] [--heads 4]
         [--lr 3e-3] [--warmup 60] [--eval-every 50] [--seed 0] [--threads 1] [--time-only K]
       train_tiny.py --write-heldout models/heldout.txt      (only writes the held-out text)
       train_tiny.py --variant V --export-only --out DIR      (re-export check files from DIR)

Data: the KJV text from `bible -f gen1:1-rev22:21` (one verse a line, "Ge1:1 " reference
stripped), verses joined with "\\n" (4.2 MB of ASCII).  The first 90 % of the bytes (cut at a line
end) train, the last 10 % are held out; the held-out part is written to models/heldout.txt by
--write-heldout (deterministic: the same bible-kjv-text package gives the same bytes).
Tokens: byte b -> id b, BOS = 256, EOS = 257 (vocab 258).  Training sequences are 129-token
windows (128 inputs, 128 targets) at uniformly random offsets of the training bytes; one in eight
starts with BOS followed by text from a line start (so BOS at position 0 is seen, as at the start
of an eval sample).  The offsets come from numpy's default_rng(seed) and the init from
torch.manual_seed(seed): every variant sees the same data in the same order from the same init.

Model: Llama architecture, 4 layers, hidden 128, 4 heads (head_dim 32, no GQA), SwiGLU 384,
RMSNorm eps 1e-5, RoPE half-split theta 1e4, UNTIED lm_head, no biases.  Attention variants
(same semantics as tools/refmodel/attention.py, float32 here):
  rope       logit = (R_i q)·(R_m k)/sqrt(d)
  keynorm    KNA: logit = (R_i q)·(R_m k)/|k|  (no 1/sqrt(d))        reach_attention.qk_norm="key"
  cosa-logn  CosA: logit = 4 ln(i+1) · cos(R_i q, R_m k)              reach_attention.qk_norm="cos"
  hwfa       layers 0..L-2: window w (key m visible iff i-m < w) with RoPE; last layer: full
             attention, no RoPE, q × max(1, ln(i+1)/ln N); w = 32: (w-1)(L-1)+1 = 94 ≈ 0.73 N.
Optimiser: AdamW (0.9, 0.95), lr 3e-3, linear warmup then cosine to 0.1·lr, weight decay 0.1 on
matrices, grad-norm clip 1.0.

Speed (2 shared cores, load ~15): 0.7-1.6 s/step at batch 16 with ONE thread; torch with 2
OpenMP threads took ~5 s/step there.  Debian's torch links the reference libblas.so.3; the models
in models/ were trained with OpenBLAS taken from the libopenblas0-pthread .deb unpacked into /tmp
(`apt-get download libopenblas0-pthread; dpkg-deb -x *.deb x`, then LD_LIBRARY_PATH=
x/usr/lib/x86_64-linux-gnu/openblas-pthread OPENBLAS_NUM_THREADS=1) so the system BLAS
alternative stays untouched; without it training is slower, results differ only by float
rounding.  COMMAND.txt records the command without that machine-local library path.

Output directory: config.json (LlamaForCausalLM + max_position_embeddings = N + reach_attention),
model.safetensors (f16), tokenizer.json (byte-level, no merges, BOS/EOS added tokens 256/257),
train_log.csv (step,lr,loss,heldout_loss,elapsed_s), COMMAND.txt, and the check files
check_ids.json (BOS + 199 held-out bytes) and check_logits.npy (float32 [200, 258]: logits of this
PyTorch model run with the f16-rounded exported weights, for tests/python/test_trained_models.py
and reach-vs-PyTorch checks).
"""
import argparse
import csv
import json
import math
import os
import re
import shlex
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from make_tiny_model import tokenizer_json  # noqa: E402
from refmodel.safetensors_io import read_safetensors, write_safetensors  # noqa: E402

BOS, EOS, VOCAB = 256, 257, 258
VARIANTS = ("rope", "keynorm", "cosa-logn", "hwfa")
CHECK_LEN = 200
HELDOUT_CHECK_OFFSET = 0   # check_ids = BOS + heldout[0:199]


# ----------------------------------------------------------------------------------- data
def kjv_text():
    """The KJV as bytes: one verse a line, references stripped."""
    out = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], check=True, capture_output=True,
                         env=dict(os.environ, COLUMNS="0")).stdout.decode("ascii")
    ref = re.compile(r"^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ ")
    lines = []
    for ln in out.split("\n"):
        if not ln.strip():
            continue
        m = ref.match(ln)
        if not m:
            raise SystemExit("unexpected line from `bible -f`: %r" % ln[:80])
        lines.append(ln[m.end():].strip())
    if len(lines) != 31102:
        raise SystemExit("expected 31102 verses from `bible`, got %d" % len(lines))
    return ("\n".join(lines) + "\n").encode("ascii")


def split_text(data):
    cut = data.rfind(b"\n", 0, int(len(data) * 0.9)) + 1
    return data[:cut], data[cut:]


def heldout_check_ids(held):
    return [BOS] + list(held[HELDOUT_CHECK_OFFSET:HELDOUT_CHECK_OFFSET + CHECK_LEN - 1])


# ---------------------------------------------------------------------------------- model
def variant_attention(variant, n_layers, seq):
    """The config.json "reach_attention" object of a variant (None for plain RoPE)."""
    if variant == "rope":
        return None
    if variant == "keynorm":
        return {"qk_norm": "key"}
    if variant == "cosa-logn":
        return {"qk_norm": "cos"}
    if variant == "hwfa":
        w = hwfa_window(n_layers, seq)
        layers = {str(i): {"window": w, "rope": True, "logn": False} for i in range(n_layers - 1)}
        layers[str(n_layers - 1)] = {"window": 0, "rope": False, "logn": True}
        return {"logn_train_len": seq, "layers": layers}
    raise ValueError(variant)


def hwfa_window(n_layers, seq, alpha=0.75):
    """Largest w with (w-1)(L-1)+1 <= alpha·N (seed 003: alpha <= 3/4)."""
    return int((alpha * seq - 1) // (n_layers - 1)) + 1


def build_model(torch, a):
    nn = torch.nn
    F = torch.nn.functional
    d = a.hidden // a.heads
    L = a.layers
    ra = variant_attention(a.variant, L, a.seq) or {}
    qk_norm = ra.get("qk_norm")
    logn_L = int(ra.get("logn_train_len") or 0)
    lay = ra.get("layers") or {}
    per_layer = []
    for i in range(L):
        lo = lay.get(str(i), {})
        per_layer.append(dict(window=int(lo.get("window", ra.get("window", 0)) or 0),
                              rope=lo.get("rope", True) is not False,
                              logn=logn_L if lo.get("logn", True) else 0))
    inv_freq = 1.0 / (a.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d))

    class RMSNorm(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight

    def rot_tables(n):
        ang = np.arange(n, dtype=np.float64)[:, None] * inv_freq[None, :]
        ang = np.concatenate([ang, ang], axis=1)
        return (torch.tensor(np.cos(ang), dtype=torch.float32),
                torch.tensor(np.sin(ang), dtype=torch.float32))

    def rotate(x, cos, sin):   # x [B, H, n, d], half-split (HF rotate_half)
        h = x.shape[-1] // 2
        rh = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
        return x * cos + rh * sin

    class Attention(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.cfg = cfg
            self.q_proj = nn.Linear(a.hidden, a.heads * d, bias=False)
            self.k_proj = nn.Linear(a.hidden, a.heads * d, bias=False)
            self.v_proj = nn.Linear(a.hidden, a.heads * d, bias=False)
            self.o_proj = nn.Linear(a.heads * d, a.hidden, bias=False)

        def forward(self, x, cos, sin, pos):
            B, n, _ = x.shape
            q = self.q_proj(x).view(B, n, a.heads, d).transpose(1, 2)
            k = self.k_proj(x).view(B, n, a.heads, d).transpose(1, 2)
            v = self.v_proj(x).view(B, n, a.heads, d).transpose(1, 2)
            posf = pos.to(torch.float32)
            # refmodel order: normalise (un-rotated), logn, CosA lambda, then rotate
            if qk_norm in ("query", "cos"):
                q = F.normalize(q, dim=-1, eps=1e-30)
            if qk_norm in ("key", "cos"):
                k = F.normalize(k, dim=-1, eps=1e-30)
            if self.cfg["logn"]:
                q = q * torch.clamp(torch.log(posf + 1) / math.log(self.cfg["logn"]), min=1.0)[:, None]
            if qk_norm == "cos":
                q = q * (4.0 * torch.log(posf + 1))[:, None]
            scale = 1.0 if qk_norm else 1.0 / math.sqrt(d)
            if self.cfg["rope"]:
                q = rotate(q, cos, sin)
                k = rotate(k, cos, sin)
            s = (q @ k.transpose(-1, -2)) * scale
            r = pos[:, None] - pos[None, :]
            vis = r >= 0
            if self.cfg["window"]:
                vis = vis & (r < self.cfg["window"])
            s = s.masked_fill(~vis, float("-inf"))
            o = torch.softmax(s, dim=-1) @ v
            return self.o_proj(o.transpose(1, 2).reshape(B, n, a.heads * d))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = nn.Linear(a.hidden, a.intermediate, bias=False)
            self.up_proj = nn.Linear(a.hidden, a.intermediate, bias=False)
            self.down_proj = nn.Linear(a.intermediate, a.hidden, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.input_layernorm = RMSNorm(a.hidden)
            self.self_attn = Attention(cfg)
            self.post_attention_layernorm = RMSNorm(a.hidden)
            self.mlp = MLP()

        def forward(self, x, cos, sin, pos):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin, pos)
            return x + self.mlp(self.post_attention_layernorm(x))

    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(VOCAB, a.hidden)
            self.layers = nn.ModuleList([Layer(c) for c in per_layer])
            self.norm = RMSNorm(a.hidden)

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Inner()
            self.lm_head = nn.Linear(a.hidden, VOCAB, bias=False)
            self._tables = {}

        def forward(self, ids):
            n = ids.shape[1]
            if n not in self._tables:
                self._tables[n] = rot_tables(n)
            cos, sin = self._tables[n]
            pos = torch.arange(n)
            x = self.model.embed_tokens(ids)
            for layer in self.model.layers:
                x = layer(x, cos, sin, pos)
            return self.lm_head(self.model.norm(x))

    model = Llama()
    std = 0.02
    for name, p in model.named_parameters():
        if p.dim() == 2:
            s = std / math.sqrt(2 * L) if name.endswith(("o_proj.weight", "down_proj.weight")) else std
            torch.nn.init.normal_(p, 0.0, s)
    return model


# ---------------------------------------------------------------------------------- train
def batch_plan(train, a):
    """Deterministic (offset, has_bos) for every sequence of every step."""
    rng = np.random.default_rng(a.seed)
    n = a.steps * a.batch
    offs = rng.integers(0, len(train) - a.seq - 1, size=n)
    bos = rng.random(n) < 0.125
    line_starts = np.flatnonzero(np.frombuffer(train, dtype=np.uint8) == 10) + 1
    line_starts = line_starts[line_starts < len(train) - a.seq - 1]
    ls = line_starts[rng.integers(0, len(line_starts), size=n)]
    return np.where(bos, ls, offs), bos


def make_batch(buf, offs, bos, seq):
    out = np.empty((len(offs), seq + 1), dtype=np.int64)
    for j, (o, b) in enumerate(zip(offs, bos)):
        if b:
            out[j, 0] = BOS
            out[j, 1:] = buf[o:o + seq]
        else:
            out[j] = buf[o:o + seq + 1]
    return out


def heldout_loss(torch, model, held_buf, seq, n_seq=64, batch=16):
    F = torch.nn.functional
    starts = np.linspace(0, len(held_buf) - seq - 2, n_seq).astype(np.int64)
    tot, cnt = 0.0, 0
    model.eval()
    with torch.no_grad():
        for j in range(0, n_seq, batch):
            x = torch.tensor(make_batch(held_buf, starts[j:j + batch], np.zeros(batch, bool), seq))
            lg = model(x[:, :-1])
            tot += F.cross_entropy(lg.reshape(-1, VOCAB), x[:, 1:].reshape(-1), reduction="sum").item()
            cnt += x[:, 1:].numel()
    model.train()
    return tot / cnt


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    t = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def export(torch, model, a, held, out):
    os.makedirs(out, exist_ok=True)
    w = {k: v.detach().cpu().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    write_safetensors(os.path.join(out, "model.safetensors"), w, "f16")
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "hidden_size": a.hidden, "intermediate_size": a.intermediate,
           "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
           "num_key_value_heads": a.heads, "head_dim": a.hidden // a.heads, "hidden_act": "silu",
           "rms_norm_eps": 1e-5, "rope_theta": a.rope_theta, "max_position_embeddings": a.seq,
           "vocab_size": VOCAB, "tie_word_embeddings": False, "bos_token_id": BOS,
           "eos_token_id": EOS, "attention_bias": False, "rope_scaling": None,
           "torch_dtype": "float16"}
    ra = variant_attention(a.variant, a.layers, a.seq)
    if ra is not None:
        cfg["reach_attention"] = ra
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    tok, bos, eos = tokenizer_json(VOCAB, 0)
    assert (bos, eos) == (BOS, EOS) and not tok["model"]["merges"] and len(tok["model"]["vocab"]) == 256
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
    write_check(torch, a, held, out)


def write_check(torch, a, held, out):
    """Logits of this PyTorch model with the exported (f16-rounded) weights, float32."""
    m = build_model(torch, a)
    sd = {k: torch.tensor(v) for k, v in read_safetensors(os.path.join(out, "model.safetensors")).items()}
    m.load_state_dict(sd)
    m.eval()
    ids = heldout_check_ids(held)
    with torch.no_grad():
        lg = m(torch.tensor([ids]))[0].numpy().astype(np.float32)
    np.save(os.path.join(out, "check_logits.npy"), lg)
    with open(os.path.join(out, "check_ids.json"), "w") as f:
        json.dump(ids, f)
        f.write("\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variant", choices=VARIANTS)
    p.add_argument("--out")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--intermediate", type=int, default=384)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=60)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (1: with 2 OpenMP threads on a loaded 2-core machine a step "
                        "took 5 s instead of 0.75 s - the barrier spins while a thread is descheduled)")
    p.add_argument("--time-only", type=int, metavar="K", help="run K steps, print s/step, write nothing")
    p.add_argument("--write-heldout", metavar="PATH", help="write the held-out text and exit")
    p.add_argument("--export-only", action="store_true",
                   help="rewrite check_ids.json / check_logits.npy from OUT's model.safetensors")
    a = p.parse_args(argv)

    data = kjv_text()
    train, held = split_text(data)
    if a.write_heldout:
        with open(a.write_heldout, "wb") as f:
            f.write(held)
        print("wrote %s: %d bytes (train %d bytes)" % (a.write_heldout, len(held), len(train)))
        return 0
    if not a.variant:
        p.error("--variant is required")
    out = a.out or os.path.join(ROOT, "models", a.variant)

    import torch
    torch.set_num_threads(a.threads)
    if a.export_only:
        write_check(torch, a, held, out)
        print("rewrote check files in", out)
        return 0
    torch.manual_seed(a.seed)
    model = build_model(torch, a)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    train_buf = np.frombuffer(train, dtype=np.uint8)
    held_buf = np.frombuffer(held, dtype=np.uint8)
    steps = a.time_only or a.steps
    offs, bos = batch_plan(train, argparse.Namespace(**dict(vars(a), steps=a.steps)))
    print("variant %s: %d params, %d steps x %d x %d, train %d B, heldout %d B" % (
        a.variant, n_params, steps, a.batch, a.seq, len(train), len(held)), flush=True)
    F = torch.nn.functional
    rows = []
    t0 = time.time()
    if not a.time_only:
        os.makedirs(out, exist_ok=True)
        # A command anyone can rerun from the repository root: the thread counts
        # matter for speed only, and a machine-local library path not at all.
        with open(os.path.join(out, "COMMAND.txt"), "w") as f:
            f.write("OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tools/train_tiny.py "
                    + " ".join(shlex.quote(x) for x in (argv if argv is not None else sys.argv[1:])) + "\n")
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        sl = slice(step * a.batch, (step + 1) * a.batch)
        x = torch.tensor(make_batch(train_buf, offs[sl], bos[sl], a.seq))
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        last = step + 1 == steps
        if a.time_only:
            if step == 1:
                t1 = time.time()
            continue
        if (step + 1) % a.eval_every == 0 or last or step == 0:
            hl = heldout_loss(torch, model, held_buf, a.seq)
            rows.append((step + 1, lr_at(step, a), loss.item(), hl, time.time() - t0))
            print("step %5d lr %.2e loss %.4f heldout %.4f  %.0fs" % rows[-1], flush=True)
        elif (step + 1) % 10 == 0:
            rows.append((step + 1, lr_at(step, a), loss.item(), "", time.time() - t0))
    if a.time_only:
        dt = (time.time() - t1) / max(1, steps - 2)
        print("%.3f s/step -> %d steps in 8 min" % (dt, int(480 / dt)))
        return 0
    with open(os.path.join(out, "train_log.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["step", "lr", "loss", "heldout_loss", "elapsed_s"])
        for r in rows:
            wr.writerow([r[0], "%.6g" % r[1], "%.5f" % r[2], r[3] if r[3] == "" else "%.5f" % r[3],
                         "%.1f" % r[4]])
    export(torch, model, a, held, out)
    print("exported %s in %.0fs total" % (out, time.time() - t0), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
