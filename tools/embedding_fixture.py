#!/usr/bin/env python3
"""A tiny Qwen3-Embedding-shaped model as sentence-transformers saves one, with float64 reference embeddings.

The model is a Qwen3Model (the decoder without its head) holding the first --layers layers of the qwen3 family
fixture (tests/data/families/qwen3/hf: hidden 64, 4 heads, 2 KV heads, head_dim 24, per-head q/k RMSNorm, the
same float16 weights and SentencePiece tokenizer), wrapped as sentence-transformers does for Qwen3-Embedding:
Transformer -> Pooling (last token) -> Normalize.  It writes tests/data/embedding/:

  config.json, model.safetensors (float16, tensor names without "model."), tokenizer files,
  modules.json, 1_Pooling/config.json, 2_Normalize/, sentence_bert_config.json   (SentenceTransformer.save)
  reference.json   for a few inputs: the token ids, and from a float64 forward over the stored float16 weights
                   (transformers' float32 requests promoted: tools/fixture_reference.py) the final-normed hidden
                   state of every token, and the embeddings by last-token (the model's own), mean and CLS
                   pooling, each L2-normalized; plus sentence-transformers' own float32 encode() of the texts,
                   checked here against the float64 last-token embeddings (cosine >= 0.99999).

Regenerate (from the repository root, in a virtual environment with torch, transformers and
sentence-transformers):

  python3 tools/embedding_fixture.py [--layers 2] [--out tests/data/embedding]
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixture_reference import float64_everywhere  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests/data/families/qwen3/hf"
TEXTS = ["hello world", "The guard stops the thief at the gate.", "a", "Qwen3 embeddings pool the last token"]


def f17(x: float) -> float:
    return float(f"{x:.17g}")


def base_model(layers: int, tmp: Path):
    """The qwen3 fixture's first `layers` layers as a Qwen3Model, saved (float16) with the tokenizer in tmp."""
    import torch
    import transformers as T
    from safetensors.torch import load_file

    cfg = T.AutoConfig.from_pretrained(str(SOURCE))
    cfg.num_hidden_layers = layers
    cfg.layer_types = cfg.layer_types[:layers]
    cfg.architectures = ["Qwen3Model"]
    cfg.tie_word_embeddings = True
    model = T.Qwen3Model(cfg)
    state = load_file(str(SOURCE / "model.safetensors"))
    mine = {}
    for k, v in state.items():
        if not k.startswith("model."):
            continue   # lm_head (tied: the embeddings)
        k = k[len("model."):]
        if k.startswith("layers.") and int(k.split(".")[1]) >= layers:
            continue
        mine[k] = v
    missing, unexpected = model.load_state_dict(mine, strict=False)
    assert not unexpected and all("rotary" in m for m in missing), (missing, unexpected)
    model = model.to(torch.float16)
    model.config.dtype = torch.float16
    model.save_pretrained(str(tmp), safe_serialization=True)
    tok = T.AutoTokenizer.from_pretrained(str(SOURCE))
    # An embedding model embeds the text as it is (sentence-transformers would wrap it in the chat template),
    # and batches pad on the left with the end token, as Qwen3-Embedding's tokenizer does.
    tok.chat_template = None
    tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    tok.save_pretrained(str(tmp))
    return tok


def float64_hidden(folder: Path, ids: list[int]):
    import torch
    import transformers as T
    cfg = T.AutoConfig.from_pretrained(str(folder))
    cfg._attn_implementation = "eager"
    with float64_everywhere():
        model = T.Qwen3Model.from_pretrained(str(folder), config=cfg, dtype=torch.float64)
        model.eval()
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False)
    h = out.last_hidden_state[0]
    assert h.dtype == torch.float64
    return h


def unit(v):
    import torch
    return v / torch.clamp(torch.linalg.vector_norm(v), min=1e-12)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--out", type=Path, default=ROOT / "tests/data/embedding")
    a = p.parse_args(argv)

    import torch
    import transformers as T
    import sentence_transformers as ST
    from sentence_transformers import SentenceTransformer, models

    with tempfile.TemporaryDirectory() as tmp:
        tok = base_model(a.layers, Path(tmp))
        word = models.Transformer(tmp)
        pool = models.Pooling(word.get_word_embedding_dimension(), pooling_mode="lasttoken")
        st = SentenceTransformer(modules=[word, pool, models.Normalize()], device="cpu")
        if a.out.exists():
            shutil.rmtree(a.out)
        st.save(str(a.out))
    # The float64 forward reads the saved folder: exactly the stored float16 weights.
    encoded = st.encode(TEXTS, convert_to_tensor=True, batch_size=1).to(torch.float64)
    inputs = []
    for i, text in enumerate(TEXTS):
        ids = tok(text)["input_ids"]
        h = float64_hidden(a.out, ids)
        last, mean, cls = unit(h[-1]), unit(h.mean(dim=0)), unit(h[0])
        cos = float(torch.dot(last, unit(encoded[i])))
        assert cos >= 0.99999, (text, cos)
        inputs.append({"text": text, "ids": ids,
                       "hidden": [[f17(x) for x in row] for row in h.tolist()],
                       "embedding": [f17(x) for x in last.tolist()],
                       "mean_normalized": [f17(x) for x in mean.tolist()],
                       "cls_normalized": [f17(x) for x in cls.tolist()],
                       "sentence_transformers_cosine": f17(cos)})
    ref = {"generator": "tools/embedding_fixture.py",
           "notes": [f"transformers {T.__version__}, sentence-transformers {ST.__version__}, torch {torch.__version__}; "
                     f"the first {a.layers} layers of tests/data/families/qwen3/hf as a Qwen3Model; eager attention, "
                     "float64 throughout over the stored float16 weights. embedding: last-token pooling, "
                     "L2-normalized (the model's modules); mean_normalized and cls_normalized: the same hidden "
                     "states pooled by mean and by the first token, L2-normalized."],
           "dims": int(st.get_sentence_embedding_dimension()),
           "inputs": inputs}
    (a.out / "reference.json").write_text(json.dumps(ref, indent=1) + "\n")
    (a.out / "README.md").unlink(missing_ok=True)   # sentence-transformers' model card: nothing reach reads
    for p in sorted(a.out.rglob("*")):
        if p.is_file():
            print(f"{p.relative_to(ROOT)}  {p.stat().st_size} bytes")


if __name__ == "__main__":
    main()
