"""The family fixtures' tokenizers (tools/family_fixtures.py): a tiny SentencePiece or byte-level BPE trained on a
seeded corpus, with the family's turn markers as special tokens, and its chat template file."""
from __future__ import annotations

import contextlib
import random
import shutil
from pathlib import Path

from fixture_families import CHAT_TOKENS, HAS_BOS, TEMPLATES


WORDS = ("the a of and to in is was for on that with as by it at from this be are or an have not which one had but "
         "were all they been has their more when there can who will would her so what no if out up said about into "
         "than them some could other time these two may then do first any my now such like our over man me even most "
         "made after also did many before must through years where much your way well down should because each just "
         "those people how too little state good very make world still own see men work long get here between both "
         "life being under never day same another know while last might us great old year off come since against go "
         "came right used take three hello thank you").split()


def corpus(seed: int) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(3000):
        s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14)))
        lines.append(s.capitalize() + rng.choice([".", "?", "!", ","]))
    lines += ["Hello, how are you today? I am fine, thank you. 0123456789 () [] {} <> @#$%^&*"] * 20
    return lines


def sentencepiece_tokenizer(family: str, vocab: int, seed: int, hf: Path):
    """A tiny SentencePiece BPE (byte fallback, like Llama 2 / Gemma) with the family's chat tokens as user-defined
    pieces, saved as tokenizer.model, and the transformers tokenizer converted from it (tokenizer.json)."""
    import sentencepiece as spm
    from transformers import GemmaTokenizer, LlamaTokenizer

    work = hf / "_sp"
    work.mkdir(parents=True, exist_ok=True)
    (work / "corpus.txt").write_text("\n".join(corpus(seed)))
    gemma = family == "gemma2"
    # Gemma's layout: <pad> 0, <eos> 1, <bos> 2, <unk> 3; the others: <unk> 0, <s> 1, </s> 2.
    ids = dict(pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>") \
        if gemma else dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    spm.SentencePieceTrainer.train(
        input=str(work / "corpus.txt"), model_prefix=str(work / "sp"), vocab_size=vocab, model_type="bpe",
        byte_fallback=True,
        # GemmaTokenizer adds <mask> (Gemma's id 4) when the model lacks it
        user_defined_symbols=(["<mask>"] if gemma else []) + CHAT_TOKENS[family], character_coverage=1.0,
        split_digits=True, normalization_rule_name="identity",
        add_dummy_prefix=True, num_threads=1, minloglevel=2, **ids)
    shutil.copy(work / "sp.model", hf / "tokenizer.model")
    shutil.rmtree(work)
    cls = GemmaTokenizer if gemma else LlamaTokenizer
    tok = cls.from_pretrained(str(hf), add_bos_token=family in HAS_BOS, add_eos_token=False)
    tok.add_special_tokens({"additional_special_tokens": CHAT_TOKENS[family]})
    assert len(tok) == vocab, (family, len(tok), vocab)
    return tok


def bytelevel_bpe_tokenizer(family: str, vocab: int, seed: int, hf: Path):
    """A tiny GPT-2 style byte-level BPE (OLMo 2's converter takes only a BPE tokenizer.json)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = CHAT_TOKENS[family]
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    t.decoder = decoders.ByteLevel()
    t.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t.train_from_iterator(corpus(seed), trainer)
    assert t.get_vocab_size() == vocab, (family, t.get_vocab_size(), vocab)
    tok = PreTrainedTokenizerFast(tokenizer_object=t, eos_token="<|endoftext|>", pad_token="<|pad|>",
                                  bos_token="<|endoftext|>", additional_special_tokens=specials[2:])
    tok.init_kwargs["tokenizer_class"] = "GPT2Tokenizer"
    return tok


FIXED_TODAY = __import__("datetime").datetime(2026, 1, 15)


@contextlib.contextmanager
def fixed_today():
    """strftime_now (SmolLM3's template writes today's date) answers FIXED_TODAY, so reruns give the same ids."""
    import datetime as dt
    import transformers.utils.chat_template_utils as ctu

    class Fixed(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return FIXED_TODAY

    orig = ctu.datetime
    ctu.datetime = Fixed
    try:
        yield
    finally:
        ctu.datetime = orig


def chat_template(family: str, templates: Path) -> tuple[str | None, str | None]:
    for name in TEMPLATES[family]:
        p = templates / name
        if p.is_file():
            return p.read_text(), name
    return None, None
