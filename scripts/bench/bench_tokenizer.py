#!/usr/bin/env python3
"""Tokenizer speed: trainctl's BPE encoder against Hugging Face `tokenizers`, same run.

Trains the GPT-2-style and Llama-3-style vocabularies of tests/tokenizer/train_tokenizers.py
(2000 tokens) on tinyshakespeare, builds a corpus of --copies copies of it, and encodes the
whole corpus with each tokenizer.json on 1 and 2 threads:
  - trainctl: `trainctl data encode` (whole text, cut at line starts for threads);
  - tokenizers: Tokenizer.encode(text) on 1 thread, encode_batch over the same line-start
    chunks with RAYON_NUM_THREADS=N for N > 1 (a fresh process per case).
Encoding time only (no file reading or writing). Reports MB/s by wall clock and per CPU
second (the machine may be shared: CPU time is the steadier figure), medians of --repeat
runs, one JSON line per case, then a table with trainctl / tokenizers ratios; also checks
both give the same ids.

Run it with a Python that has `tokenizers` (the test's venv, build/tokvenv):
  build/tokvenv/bin/python scripts/bench/bench_tokenizer.py [--trainctl build/trainctl]
      [--corpus ../shared/data/tinyshakespeare.txt] [--copies 8] [--repeat 3]
"""
import argparse
import array
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "tokenizer"))

CHILD = r"""
import array, json, os, sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
text = open(sys.argv[2], encoding="utf-8", newline="").read()
threads = int(sys.argv[3])
chunks = [text[a:b] for a, b in json.load(open(sys.argv[4]))]
w0, c0 = time.perf_counter(), time.process_time()
if threads == 1:
    ids = tok.encode(text, add_special_tokens=False).ids
else:
    ids = [i for e in tok.encode_batch(chunks, add_special_tokens=False) for i in e.ids]
w1, c1 = time.perf_counter(), time.process_time()
array.array("I", ids).tofile(open(sys.argv[5], "wb"))
print(json.dumps({"wall_s": w1 - w0, "cpu_s": c1 - c0}))
"""


def line_start_chunks(text, n):
    """[a, b) character ranges cut at a letter after a single newline (as trainctl cuts)."""
    size = len(text) // n + 1
    bounds, pos = [0], size
    while pos < len(text):
        m = re.compile(r"(?<=[^\s]\n)[A-Za-z]").search(text, pos)
        if not m:
            break
        bounds.append(m.start())
        pos = m.start() + size
    bounds.append(len(text))
    return [[bounds[i], bounds[i + 1]] for i in range(len(bounds) - 1)]


def run_trainctl(binary, tok, corpus, threads, out):
    r = subprocess.run([binary, "data", "encode", "--tokenizer", tok, "--input", corpus,
                        "--out", out, "--threads", str(threads)],
                       capture_output=True, text=True, check=True)
    m = re.search(r"in ([0-9.]+) s on .*\(([0-9.]+) CPU s", r.stderr)
    return {"wall_s": float(m.group(1)), "cpu_s": float(m.group(2))}


def run_tokenizers(tok, corpus, threads, chunks_file, out):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="true")
    r = subprocess.run([sys.executable, "-c", CHILD, tok, corpus, str(threads), chunks_file, out],
                       capture_output=True, text=True, check=True, env=env)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    ap.add_argument("--corpus", default=os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"))
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()
    import train_tokenizers  # noqa: E402  (needs `tokenizers`)
    from tokenizers import pre_tokenizers, trainers

    work = tempfile.mkdtemp(prefix="bench_tokenizer_")
    text = open(args.corpus, encoding="utf-8", newline="").read() * args.copies
    corpus = os.path.join(work, "corpus.txt")
    open(corpus, "w", encoding="utf-8", newline="").write(text)
    mb = len(text.encode("utf-8")) / 1e6
    rows = []
    for style in ("gpt2", "llama3"):
        tok = train_tokenizers.build(style)
        tok.train([args.corpus], trainers.BpeTrainer(
            vocab_size=2000, min_frequency=2, special_tokens=["<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
        tok_file = os.path.join(work, f"{style}.json")
        tok.save(tok_file)
        for threads in [int(t) for t in args.threads.split(",")]:
            chunks_file = os.path.join(work, "chunks.json")
            json.dump(line_start_chunks(text, max(threads * 4, 1)), open(chunks_file, "w"))
            ours, theirs = [], []
            for _ in range(args.repeat):
                ours.append(run_trainctl(args.trainctl, tok_file, corpus, threads,
                                         os.path.join(work, "a.ids")))
                theirs.append(run_tokenizers(tok_file, corpus, threads, chunks_file,
                                             os.path.join(work, "b.ids")))
            same = open(os.path.join(work, "a.ids"), "rb").read() == open(os.path.join(work, "b.ids"), "rb").read()
            for name, runs in (("trainctl", ours), ("tokenizers", theirs)):
                wall = statistics.median(r["wall_s"] for r in runs)
                cpu = statistics.median(r["cpu_s"] for r in runs)
                row = {"bench": "tokenizer", "impl": name, "pattern": style, "threads": threads,
                       "mb": round(mb, 3), "wall_s": round(wall, 4), "cpu_s": round(cpu, 4),
                       "mb_per_s": round(mb / wall, 2), "mb_per_cpu_s": round(mb / cpu, 2),
                       "same_ids": same}
                rows.append(row)
                print(json.dumps(row), flush=True)
    print(f"\n{'pattern':8} {'threads':>7} {'trainctl MB/s':>14} {'tokenizers MB/s':>16} {'ratio':>6}"
          f" {'trainctl MB/cpu-s':>18} {'tokenizers MB/cpu-s':>20} {'ratio':>6}")
    for i in range(0, len(rows), 2):
        a, b = rows[i], rows[i + 1]
        print(f"{a['pattern']:8} {a['threads']:>7} {a['mb_per_s']:>14} {b['mb_per_s']:>16} "
              f"{a['mb_per_s'] / b['mb_per_s']:>6.1f} {a['mb_per_cpu_s']:>18} {b['mb_per_cpu_s']:>20} "
              f"{a['mb_per_cpu_s'] / b['mb_per_cpu_s']:>6.1f}")


if __name__ == "__main__":
    main()
