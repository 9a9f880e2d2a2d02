#!/usr/bin/env python3
"""Generate the tokenizer oracle data in tests/data/tokenizer/.

Regenerate (from the repository root) with:

    python3 -m pip install tokenizers
    python3 tools/gen_tokenizer_tests.py [NAME ...]      # all, or only the named files

It builds small tokenizers with the Hugging Face `tokenizers` package (the
oracle), trained on the seed texts in ../shared/seeds (Chinese), the docs,
some English written here and some code, and writes for each one:

  tests/data/tokenizer/<name>.json         the tokenizer.json (< 1 MB)
  tests/data/tokenizer/<name>.expect.json  {"cases": [{text, ids (add_special=False),
                                            ids_special (add_special=True), decoded (absent:
                                            == text), decoded_keep_special (absent: == decoded)}],
                                            "decode_cases": [{ids, skip, keep}]}

tests/test_tokenizer.cpp reads the committed files; CI never runs Python.
The byte-level files are reproducible for a given `tokenizers` version (it is
recorded in the expect files); the SentencePiece-style training breaks ties in
hash order, so those files may change from run to run, always consistently
with their expectations.
"""
import glob
import json
import os
import random
import sys

import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "tokenizer")
SEEDS = os.environ.get("REACH_SEEDS", os.path.join(os.path.dirname(ROOT), "shared", "seeds"))
DOCS = os.path.join(os.path.dirname(ROOT), "shared", "docs")

LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

ENGLISH = """\
The quick brown fox jumps over the lazy dog. It's a sunny day, isn't it? We'll see.
They've said they'd come; I'm sure you're right. Don't worry: it'll be fine, won't it?
Transformers can't extrapolate to longer contexts unless the position encoding is adjusted.
Rotary position embeddings (RoPE) rotate each pair of query and key dimensions by an angle
proportional to the position. NTK-aware scaling changes the base; YaRN ramps between
interpolation and extrapolation per frequency and scales the attention logits.
In 2023, models were trained on 4096 tokens and tested on 16384, 32768 or 131072 tokens.
Prices rose 3.5% to $1,234.56 on 2024-01-26 at 10:45:00 UTC; call +1 (555) 010-9999.
E-mail: someone@example.com, web: https://example.org/path?query=1&x=y#frag
"Quoted text," she said, 'single quotes' and `backticks` -- em-dashes --- and ellipses...
THE END. Shouting WORDS and CamelCaseIdentifiers and snake_case_names and kebab-case.
"""


def read_corpus():
    parts = []
    for f in sorted(glob.glob(os.path.join(SEEDS, "*.txt"))):
        parts.append(open(f, encoding="utf-8").read())
    for f in sorted(glob.glob(os.path.join(DOCS, "*.md"))):
        parts.append(open(f, encoding="utf-8").read())
    parts.append(ENGLISH * 20)
    import json as _j, textwrap as _t
    for mod in (_j, _t):
        src = os.path.join(os.path.dirname(mod.__file__), "decoder.py") if mod is _j else mod.__file__
        parts.append(open(src, encoding="utf-8").read())
    for f in ("base/error.cpp", "base/error.hpp"):
        p = os.path.join(ROOT, f)
        if os.path.exists(p):
            parts.append(open(p, encoding="utf-8").read())
    return parts


def test_strings(corpus):
    s = [
        "", " ", "  ", "\n", "\t", "a", "Hello", "Hello world", " Hello world", "  leading two",
        "trailing   ", "Hello, world! How are you?", "It's John's car; they're here, we've won, I'd go, you'll see, I'm ok.",
        "IT'S LOUD, THEY'LL SHOUT, I'M HERE, WE'VE 'S 'T 'LL 'RE 'VE 'M 'D",
        "don't can't won't shouldn't y'all o'clock rock'n'roll",
        "1234567890", "12 345 6789 0.5 3.14159 1e10 -42 +7", "2024-01-26 10:45:00", "$1,234.56 and 99.9%",
        "phone: 555-0100, ext. 12345678901234567890",
        "a  b   c    d     e", "tabs\tand\t\tmore\ttabs", "line1\nline2\n\nline4\r\nline5\r\r\n",
        "   \n\n   \t  \n", "x \n y", "end with newline\n", "\n\nstart with newlines",
        "def f(x):\n    return x * 2  # double\n", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
        "#include <vector>\nint main() { std::vector<int> v{1, 2, 3}; return v.size() == 3 ? 0 : 1; }\n",
        "if x!=y and a<=b or c>=d: print(f\"{x!r:>10}\")", "<div class=\"a\">&amp; &lt;tag&gt;</div>",
        "{\"key\": [1, 2.5, null, true], \"nested\": {\"a\": \"b\"}}", "SELECT * FROM t WHERE id = 42;",
        "path/to/file.txt C:\\Windows\\System32 ~/.bashrc", "https://example.org/a/b?c=d&e=f#g",
        "你好,世界!", "中文分词测试:长度外推、位置编码和注意力机制。", "苏剑林 | 2024-01-26 | 79998位读者",
        "Transformer升级之路:16、“复盘”长度外推技术", "日本語のテキストとカタカナ、ひらがな。", "한국어 텍스트 입니다.",
        "مرحبا بالعالم", "السلام عليكم ورحمة الله", "שלום עולם", "Привет, мир! Ёжик в тумане.", "Ελληνικά γράμματα αβγ",
        "हिन्दी पाठ नमस्ते", "ภาษาไทย สวัสดี", "Tiếng Việt có dấu: người, được, những",
        "e\u0301 a\u0300 o\u0308 n\u0303 (combining)", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334\u0362\u0335\u031c\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357\u030e\u0305\u035b\u0341\u0334\u033b\u0348\u034d\u0354\u0339O\u0342\u030c\u030c\u0358\u0328\u0335\u0339\u033b\u031d\u0333",
        "café naïve résumé façade Ångström", "ﬁ ﬂ ligatures, ＦＵＬＬＷＩＤＴＨ １２３, ½ ² ³ Ⅻ",
        "emoji 😀😃😄 👍🏽 🇫🇷🇯🇵 ❤️", "family 👨\u200d👩\u200d👧\u200d👦 and 🏳️\u200d🌈 and 🧑🏿\u200d💻",
        "🤖🤖🤖🤖", "math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ∀x∈ℝ: x²≥0 ∑∫√∞", "𠀀𠀁𪚥 rare CJK ext B",
        "nbsp\u00a0here and\u3000ideographic space and\u2003em space", "zero\u200bwidth\u200cjoiner\u200d\ufeffbom",
        "line\u2028sep\u2029para\u0085nel", "\u00a0\u00a0 leading nbsp", "control \x01\x02\x7f chars",
        "mixed 中English文本 with 数字123和符号!?", "αβγ123xyz你好456", "   你好   世界   ",
        "....,,,,;;;;!!!!????", "---===+++***", "((()))[[[]]]{{{}}}", "'''\"\"\"```", "'s", "'", "' s",
        "a'b'c", "it''s", "Hello\u2019s curly apostrophe",
        "ÀÁÂÃÄÅÆÇÈÉÊË àáâãäåæçèéêë", "\u0000null byte", "ab\u00adsoft hyphen",
    ]
    rng = random.Random(1234)
    # slices of the corpus
    for _ in range(120):
        doc = rng.choice(corpus)
        if len(doc) < 10:
            continue
        n = rng.choice([5, 10, 20, 40, 80, 200, 600])
        i = rng.randrange(0, max(1, len(doc) - n))
        s.append(doc[i:i + n])
    # a few long paragraphs (several KB)
    for doc in corpus[:2]:
        s.append(doc[:2500])
    # random unicode soup
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " \t\n\r  ", ".,;:!?'\"()[]{}<>-_/\\@#$%^&*+=~`|",
        "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严",
        "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘👍👎👏🙏🔥✨🎉💯", "\u200d\ufe0f\U0001F3FB\U0001F3FF", "\u0301\u0300\u0308\u0327\u0338",
        "абвгдежзийклмнопрстуфхцчшщъыьэюя", "ابتثجحخدذرزسشصضطظعغفقكلمنهوي", "αβγδεζηθικλμνξοπρστυφχψω",
        "\u00a0\u3000\u2003\u2028\u0085\u180e\u200b\ufeff", "ǅǈǋǲ", "ꙮ𓀀𓂀𐍈𝕏ℵ∂∇",
    ]
    for _ in range(110):
        n = rng.randrange(1, 40)
        out = []
        for _ in range(n):
            pool = rng.choice(pools)
            out.append(rng.choice(pool) * rng.choice([1, 1, 1, 2, 3]))
        s.append("".join(out))
    return s


def with_specials(strings, specials):
    rng = random.Random(99)
    out = []
    for sp in specials:
        out += [sp, sp + sp, "a" + sp + "b", " " + sp + " ", "Hello " + sp + " world", sp + "\n" + sp + "x",
                "中文" + sp + "中文", sp + " leading text", "text trailing " + sp]
    for _ in range(30):
        parts = [rng.choice(strings[:80]) for _ in range(3)]
        out.append(rng.choice(specials).join(parts))
    # a partial special token must not match
    if specials:
        out.append(specials[0][:-1] + " " + specials[0][1:])
    return out


def byte_level_trainer(vocab_size, specials):
    return trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet())


def build_llama3(corpus):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, byte_level_trainer(3000, []))
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    tok.add_special_tokens(specials)
    tok.add_tokens([tokenizers.AddedToken("<think>", special=False, normalized=False),
                    tokenizers.AddedToken("</think>", special=False, normalized=False)])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|>:1 $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    return tok, specials + ["<think>"]


# o200k's split (GPT-4o; Phi-4-mini's tokenizer.json), which GGUF calls pre "gpt-4o".
GPT4O_RE = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
            r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def build_gpt4o(corpus):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(GPT4O_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, byte_level_trainer(3000, []))
    specials = ["<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>"]
    tok.add_special_tokens(specials)
    return tok, specials


def build_smollm(corpus):
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.train_from_iterator(corpus, byte_level_trainer(2500, specials))
    return tok, specials


def build_gpt2(corpus):
    specials = ["<|endoftext|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.train_from_iterator(corpus, byte_level_trainer(2000, specials))
    return tok, specials


def build_roberta(corpus):
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, byte_level_trainer(2000, specials))
    tok.add_special_tokens([tokenizers.AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")))
    return tok, specials + ["<mask>"]


def build_edge_bpe(corpus):
    """Rarer knobs: every Split behavior, invert, literal patterns, ByteLevel add_prefix_space
    after a Split, added tokens with lstrip / rstrip / single_word / normalized, a suffix-only
    template."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\d+"), behavior="merged_with_next"),
        pre_tokenizers.Split("-", behavior="removed"),
        pre_tokenizers.Split(Regex(r"[a-z]+"), behavior="contiguous", invert=True),
        pre_tokenizers.Split(Regex(r"\s"), behavior="merged_with_previous"),
        pre_tokenizers.Punctuation(),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, byte_level_trainer(1500, ["<|x|>"]))
    tok.add_special_tokens([tokenizers.AddedToken("<|文 x|>", special=True, normalized=False)])
    tok.add_tokens([tokenizers.AddedToken("<rs>", rstrip=True, normalized=False),
                    tokenizers.AddedToken("<ls>", lstrip=True, normalized=False),
                    tokenizers.AddedToken("word", single_word=True, normalized=True),
                    tokenizers.AddedToken("New York", normalized=True),
                    tokenizers.AddedToken("de", normalized=True)])
    tok.post_processor = processors.TemplateProcessing(single="$A <|x|>", special_tokens=[("<|x|>", tok.token_to_id("<|x|>"))])
    return tok, ["<|x|>", "<|文 x|>", "<rs>", "<ls>", "word", "New York"]


def train_sentencepiece_bpe(corpus):
    """Train merges for a Llama-2-like model; returns (vocab list in id order, merges)."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=2200, limit_alphabet=300, show_progress=False))
    model = json.loads(tok.to_str())["model"]
    vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    return [t for t, _ in vocab], model["merges"]


def build_edge_sp(pieces, merges):
    """Metaspace with split=True and prepend_scheme always, normalized added tokens."""
    tok, _ = build_llama2_json(pieces, merges, True)
    doc = json.loads(tok.to_str())
    doc["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    doc["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "ByteFallback"}, {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}]}
    doc["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": False, "strip_right": True},
        {"type": "Replace", "pattern": {"Regex": "[0-9]{4,}"}, "content": "#"}]}
    tok = Tokenizer.from_str(json.dumps(doc, ensure_ascii=False))
    tok.add_special_tokens(["[INST]", "[/INST]"])
    tok.add_tokens([tokenizers.AddedToken("New York", normalized=True), tokenizers.AddedToken("<tab>", rstrip=True, normalized=False)])
    return tok, ["<s>", "</s>", "[INST]", "[/INST]", "New York", "<tab>"]


def build_llama2_json(pieces, merges, metaspace):
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for p in pieces:
        if p not in vocab:
            vocab[p] = len(vocab)
    added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])]
    if metaspace:
        normalizer = None
        pre_tokenizer = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
        decoder = {"type": "Sequence", "decoders": [
            {"type": "ByteFallback"}, {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}]}
        merge_list = merges  # [a, b] pairs
    else:
        normalizer = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
        pre_tokenizer = None
        decoder = {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
        merge_list = [" ".join(m) for m in merges]  # old "a b" string format
    post = {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": post, "decoder": decoder,
           "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                     "vocab": vocab, "merges": merge_list}}
    text = json.dumps(doc, ensure_ascii=False)
    return Tokenizer.from_str(text), text


def to_string_merges(text):
    """Rewrite [a, b] merges as "a b" strings (the older format) when no token has a space."""
    doc = json.loads(text)
    m = doc["model"]["merges"]
    if m and isinstance(m[0], list) and not any(" " in a or " " in b for a, b in m):
        doc["model"]["merges"] = [a + " " + b for a, b in m]
    return json.dumps(doc, ensure_ascii=False)


def expectations(tok, strings, specials, rng):
    cases = []
    for s in strings:
        ids = tok.encode(s, add_special_tokens=False).ids
        ids_sp = tok.encode(s, add_special_tokens=True).ids
        case = {"text": s, "ids": ids, "ids_special": ids_sp}
        dec = tok.decode(ids_sp, skip_special_tokens=True)
        keep = tok.decode(ids_sp, skip_special_tokens=False)
        if dec != s:  # omitted when equal, to keep the files small
            case["decoded"] = dec
        if keep != dec:
            case["decoded_keep_special"] = keep
        cases.append(case)
    # decode-only cases: random id runs (partial UTF-8, specials anywhere)
    n = tok.get_vocab_size(with_added_tokens=True)
    special_ids = [tok.token_to_id(t) for t in specials]
    dcases = []
    for _ in range(60):
        ids = [rng.randrange(n) for _ in range(rng.randrange(1, 12))]
        if special_ids and rng.random() < 0.5:
            ids.insert(rng.randrange(len(ids) + 1), rng.choice(special_ids))
        dcases.append({"ids": ids, "skip": tok.decode(ids, skip_special_tokens=True),
                       "keep": tok.decode(ids, skip_special_tokens=False)})
    return {"tokenizers_version": tokenizers.__version__, "cases": cases, "decode_cases": dcases}


def main():
    os.makedirs(OUT, exist_ok=True)
    corpus = read_corpus()
    base = test_strings(corpus)
    pieces, merges = train_sentencepiece_bpe(corpus)
    builds = {
        "llama3_bpe": lambda: build_llama3(corpus),
        "gpt4o_bpe": lambda: build_gpt4o(corpus),
        "smollm_bpe": lambda: build_smollm(corpus),
        "gpt2_bpe": lambda: build_gpt2(corpus),
        "roberta_bpe": lambda: build_roberta(corpus),
        "llama2_sp": lambda: (build_llama2_json(pieces, merges, False)[0], ["<s>", "</s>"]),
        "mistral_sp": lambda: (build_llama2_json(pieces, merges, True)[0], ["<s>", "</s>"]),
        "edge_bpe": lambda: build_edge_bpe(corpus),
        "edge_sp": lambda: build_edge_sp(pieces, merges),
    }
    # Names on the command line regenerate only those files (the SentencePiece ones change from run to run).
    only = set(sys.argv[1:])
    for name, build in builds.items():
        if only and name not in only:
            continue
        tok, specials = build()
        text = tok.to_str(pretty=False)
        if name == "gpt2_bpe":
            text = to_string_merges(text)
        tok = Tokenizer.from_str(text)  # the oracle runs on exactly what we write
        with open(os.path.join(OUT, name + ".json"), "w", encoding="utf-8") as f:
            f.write(text)
        strings = base + with_specials(base, specials)
        exp = expectations(tok, strings, specials, random.Random(name))
        with open(os.path.join(OUT, name + ".expect.json"), "w", encoding="utf-8") as f:
            json.dump(exp, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print(f"{name}: vocab {tok.get_vocab_size()} json {len(text.encode()) // 1024} KB, {len(exp['cases'])} cases")
    print("regenerate with: python3 -m pip install tokenizers && python3 tools/gen_tokenizer_tests.py", file=sys.stderr)


if __name__ == "__main__":
    main()
