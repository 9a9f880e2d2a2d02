#!/usr/bin/env python3
"""Reference SentencePiece tokenization of a GGUF "llama" vocabulary, for tests/test_tokenizer_gguf.cpp.

Written from the algorithm SentencePiece's BPE mode and llama.cpp's SPM tokenizer follow, with the
vocabulary read by the PyPI gguf package (nothing of reach's):
  1. Tokens of type control, user-defined and unknown are cut out of the text first, longest token
     text first and then left to right (as llama.cpp partitions special tokens with parse_special).
  2. In the rest, spaces become U+2581, and with add_space_prefix one more goes in front of every
     piece of text between special tokens (llama.cpp and the tokenizers package's legacy Metaspace).
  3. Every UTF-8 character is a symbol.  Repeatedly, the adjacent pair whose concatenation is a
     token with the highest score merges (ties: the leftmost pair).
  4. A symbol that is a token is that token; one that is not goes back to the two symbols it was
     merged from, and a single character that is no token becomes its bytes' <0xNN> tokens (the
     unknown token for a byte without one).
Decoding joins the pieces, turns <0xNN> into bytes and U+2581 into spaces, and reads UTF-8 with
U+FFFD for ill-formed bytes.

usage: spm_ref.py MODEL.gguf TEXTS.json
  TEXTS.json: a JSON list of strings.  Prints {"add_bos": BOS id or null, "cases": [{"ids": [...],
  "decoded": text}, ...]} (ids without BOS; decoded from ids without special tokens).
Exit status 3 when the gguf package cannot be imported (the caller skips).
"""
import heapq
import json
import sys

try:
    import gguf
except ImportError:
    print("the gguf package is not installed", file=sys.stderr)
    sys.exit(3)

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPACE = "\u2581"


class Vocab:
    def __init__(self, path):
        r = gguf.GGUFReader(path)
        f = r.fields

        def scalar(key, default=None):
            return f[key].contents() if key in f else default

        if scalar("tokenizer.ggml.model") != "llama":
            raise SystemExit(f"{path}: tokenizer.ggml.model is not 'llama'")
        self.tokens = f["tokenizer.ggml.tokens"].contents()
        self.scores = f["tokenizer.ggml.scores"].contents()
        self.types = f["tokenizer.ggml.token_type"].contents()
        self.ids = {}
        for i, t in enumerate(self.tokens):
            self.ids[t] = i  # a repeated text: the last id, as llama.cpp's map
        self.bos = scalar("tokenizer.ggml.bos_token_id")
        self.unk = scalar("tokenizer.ggml.unknown_token_id")
        self.add_bos = scalar("tokenizer.ggml.add_bos_token", True)
        self.space_prefix = scalar("tokenizer.ggml.add_space_prefix", True)
        self.byte_ids = {}
        for i, t in enumerate(self.tokens):
            if self.types[i] == BYTE:
                self.byte_ids[int(t[3:5], 16)] = i
        special = [i for i, ty in enumerate(self.types) if ty in (CONTROL, USER_DEFINED, UNKNOWN) and self.tokens[i]]
        self.special = sorted(special, key=lambda i: -len(self.tokens[i].encode()))

    def partition(self, text):
        """[(str, None) | (None, id)]: special tokens cut out, longest first, each left to right."""
        frags = [(text, None)]
        chars = set(text)
        for sid in self.special:
            if self.tokens[sid][0] not in chars:  # cheap filter: ~6k special tokens in Gemma 3
                continue
            st = self.tokens[sid]
            out = []
            for s, tid in frags:
                if tid is not None or st not in s:
                    out.append((s, tid))
                    continue
                pos = 0
                while True:
                    k = s.find(st, pos)
                    if k < 0:
                        break
                    if k > pos:
                        out.append((s[pos:k], None))
                    out.append((None, sid))
                    pos = k + len(st)
                if pos < len(s):
                    out.append((s[pos:], None))
            frags = out
        return frags

    def spm(self, text):
        syms = list(text)  # characters
        n = len(syms)
        alive = [True] * n
        nxt = list(range(1, n + 1))
        prv = list(range(-1, n - 1))
        split_of = {}  # merged text -> (left text, right text)
        heap = []

        def push(left, right):
            if left < 0 or right >= n:
                return
            t = syms[left] + syms[right]
            i = self.ids.get(t)
            if i is None:
                return
            heapq.heappush(heap, (-self.scores[i], left, right, t))
            split_of.setdefault(t, (syms[left], syms[right]))

        for i in range(n - 1):
            push(i, i + 1)
        while heap:
            _, left, right, t = heapq.heappop(heap)
            if not alive[left] or not alive[right] or nxt[left] != right or syms[left] + syms[right] != t:
                continue  # stale: a side merged since
            syms[left] = t
            alive[right] = False
            nxt[left] = nxt[right]
            if nxt[right] < n:
                prv[nxt[right]] = left
            push(prv[left], left)
            push(left, nxt[left])

        out = []

        def emit(s):
            i = self.ids.get(s)
            if i is not None:
                out.append(i)
            elif s in split_of:
                a, b = split_of[s]
                emit(a)
                emit(b)
            else:
                out.extend(self.byte_ids.get(b, self.unk) for b in s.encode("utf-8"))

        i = 0
        while i < n:
            emit(syms[i])
            i = nxt[i]
        return out

    def encode(self, text):
        ids = []
        for s, tid in self.partition(text):
            if tid is not None:
                ids.append(tid)
            elif s:  # an empty text is no tokens, not a lone prefix space
                s = s.replace(" ", SPACE)
                if self.space_prefix:
                    s = SPACE + s
                ids.extend(self.spm(s))
        return ids

    def decode(self, ids):
        b = bytearray()
        for i in ids:
            ty = self.types[i]
            if ty in (CONTROL, UNKNOWN):
                continue
            if ty == BYTE:
                b.append(int(self.tokens[i][3:5], 16))
            else:
                b += self.tokens[i].replace(SPACE, " ").encode("utf-8")
        s = b.decode("utf-8", errors="replace")
        if self.space_prefix and s.startswith(" "):
            s = s[1:]
        return s


def main():
    v = Vocab(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as f:
        texts = json.load(f)
    cases = []
    for t in texts:
        ids = v.encode(t)
        cases.append({"ids": ids, "decoded": v.decode(ids)})
    json.dump({"add_bos": v.bos if v.add_bos else None, "cases": cases}, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
