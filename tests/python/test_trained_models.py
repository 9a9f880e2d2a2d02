#!/usr/bin/python3
"""The trained tiny models (tools/train_tiny.py -> models/<variant>/) against the float64 NumPy
reference (tools/refmodel): the logits PyTorch computed at export time (check_logits.npy, f16
weights cast to f32) must equal refmodel.forward on the same ids (check_ids.json: BOS + 199
held-out bytes, so positions run past N = 128) within 2e-2 * max|logit|.  This pins the training
-side attention (KeyNorm, CosA, HWFA windows / NoPE / logn) to the reference semantics of the
config.json keys.  Also checks the exported files (config keys, byte-level tokenizer.json) and that
each non-trivial variant's check actually depends on its reach_attention keys.
Plain asserts, numpy only: /usr/bin/python3 tests/python/test_trained_models.py [MODELS_DIR]"""
import copy
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from refmodel.model import forward, layer_schemes, load_config, load_weights  # noqa: E402

VARIANTS = ("rope", "keynorm", "cosa-logn", "hwfa")
BOS, EOS, VOCAB, N = 256, 257, 258, 128
RTOL_MAX = 2e-2


def bytes_to_unicode():
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def check_files(d, variant):
    cfg = load_config(d)
    assert cfg["architectures"] == ["LlamaForCausalLM"], cfg["architectures"]
    assert cfg["vocab_size"] == VOCAB and cfg["max_position_embeddings"] == N, d
    assert (cfg["bos_token_id"], cfg["eos_token_id"]) == (BOS, EOS), d
    assert cfg["num_hidden_layers"] == 4 and cfg["num_attention_heads"] == 4, d
    assert 128 <= cfg["hidden_size"] <= 192, d
    ra = cfg.get("reach_attention") or {}
    if variant == "rope":
        assert not ra, ra
    elif variant == "keynorm":
        assert ra == {"qk_norm": "key"}, ra
    elif variant == "cosa-logn":
        assert ra == {"qk_norm": "cos"}, ra   # lambda = 4 ln(i+1): no cos_n
    else:
        L = cfg["num_hidden_layers"]
        assert ra["logn_train_len"] == N, ra
        w = ra["layers"]["0"]["window"]
        assert (w - 1) * (L - 1) + 1 <= 0.75 * N and w * (L - 1) + 1 > 0.75 * N, w
        for i in range(L - 1):
            assert ra["layers"][str(i)] == {"window": w, "rope": True, "logn": False}, ra
        assert ra["layers"][str(L - 1)] == {"window": 0, "rope": False, "logn": True}, ra
    with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    b2u = bytes_to_unicode()
    assert tok["model"]["vocab"] == {b2u[b]: b for b in range(256)}, "byte vocab out of order"
    assert tok["model"]["merges"] == [], "merges present"
    assert [(t["id"], t["special"]) for t in tok["added_tokens"]] == [(BOS, True), (EOS, True)]
    assert tok["pre_tokenizer"]["type"] == "ByteLevel" and tok["decoder"]["type"] == "ByteLevel"
    with open(os.path.join(d, "train_log.csv")) as f:
        head = f.readline().strip().split(",")
    assert head[:4] == ["step", "lr", "loss", "heldout_loss"], head
    assert os.path.getsize(os.path.join(d, "COMMAND.txt")) > 0
    return cfg


def check_logits(d, variant, cfg, heldout):
    with open(os.path.join(d, "check_ids.json")) as f:
        ids = json.load(f)
    want = np.load(os.path.join(d, "check_logits.npy"))
    assert want.dtype == np.float32 and want.shape == (len(ids), VOCAB), want.shape
    assert ids[0] == BOS and len(ids) > N and all(0 <= t < 256 for t in ids[1:])
    if heldout is not None:
        assert bytes(ids[1:]) == heldout[:len(ids) - 1], "check_ids are not the held-out start"
    W = load_weights(d)
    got = forward(cfg, W, ids, layer_schemes(cfg, len(ids)))
    scale = float(np.abs(want).max())
    err = float(np.abs(got - want).max())
    assert err <= RTOL_MAX * scale, "%s: max|ref - torch| = %.4g > %.3g" % (variant, err, RTOL_MAX * scale)
    # the same model under plain RoPE attention must NOT match (the check sees the variant keys)
    if variant != "rope":
        plain = copy.deepcopy(cfg)
        plain.pop("reach_attention")
        other = forward(plain, W, ids, layer_schemes(plain, len(ids)))
        sep = float(np.abs(other - want).max())
        assert sep > 5 * max(err, 1e-3), "%s: plain-RoPE logits also match (%.3g)" % (variant, sep)
    else:
        sep = float("nan")
    acc = float(np.mean(np.argmax(got[:-1], axis=1) == np.asarray(ids[1:])))
    print("%-10s max|logit| %7.3f  max err %.2e (%.1e rel)  plain-RoPE err %7.3f  top-1 %.3f"
          % (variant, scale, err, err / scale, sep, acc))
    return err / scale


def main():
    models = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models")
    hp = os.path.join(models, "heldout.txt")
    heldout = open(hp, "rb").read() if os.path.exists(hp) else None
    done = []
    for v in VARIANTS:
        d = os.path.join(models, v)
        assert os.path.isdir(d), "%s missing: run tools/train_tiny.py --variant %s" % (d, v)
        cfg = check_files(d, v)
        check_logits(d, v, cfg, heldout)
        done.append(v)
    print("test_trained_models: %d models OK (%s)" % (len(done), ", ".join(done)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
