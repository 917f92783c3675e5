"""Trains small byte-level BPE vocabularies with Hugging Face `tokenizers` and writes the
library's encodings, for tests/tokenizer/check_against_tokenizers.sh.

Usage: train_tokenizers.py CORPUS OUT_DIR [EXTRA_TEXT...]
Writes OUT_DIR/<style>/tokenizer.json for style gpt2 and llama3 (the Llama 3 split pattern
in a Split pre-tokenizer followed by ByteLevel(use_regex=False), as Llama 3's own file),
OUT_DIR/gpt2/vocab.json + merges.txt (GPT-2's original format), and for every text file
given (the corpus first) OUT_DIR/<style>/<i>.ids: its ids as little-endian uint32.
"""
import array
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def build(style: str) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    if style == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    tok.decoder = decoders.ByteLevel()
    return tok


def main() -> None:
    corpus, out = sys.argv[1], sys.argv[2]
    texts = [corpus] + sys.argv[3:]
    for style in ("gpt2", "llama3"):
        tok = build(style)
        trainer = trainers.BpeTrainer(
            vocab_size=2000, min_frequency=2, special_tokens=["<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        tok.train([corpus], trainer)
        d = os.path.join(out, style)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"))
        if style == "gpt2":
            tok.model.save(d)  # vocab.json + merges.txt
        for i, path in enumerate(texts):
            with open(path, encoding="utf-8", newline="") as f:
                text = f.read()
            ids = tok.encode(text, add_special_tokens=False).ids
            with open(os.path.join(d, f"{i}.ids"), "wb") as f:
                array.array("I", ids).tofile(f)
            assert tok.decode(ids, skip_special_tokens=False) == text, (style, path)


if __name__ == "__main__":
    main()
