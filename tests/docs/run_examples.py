#!/usr/bin/env python3
"""Runs every example that trainctl's --help texts and docs/commands.md show (issue 37).

Usage: run_examples.py TRAINCTL_BINARY SOURCE_DIR

The examples are collected, not listed here: the "Example:" block of every subcommand's
--help (the subcommands come from the top-level --help) and every `build/trainctl` line of
the bash blocks of docs/commands.md. Each runs, as written, with the shell in a sandbox that
holds what the examples name: job.yaml (a tiny GPT, 200 steps, a checkpoint every 100),
configs/ (a copy of the repository's, each job's steps cut to at most 20 and its warm-up to
5 so the suite stays short; the commands are unchanged), tokenizer.json, corpus/, a.txt and the runs the examples
read (runs/job and the quickstart's configs/runs/quickstart, models/gpt2 (runs/job exported
for Hugging Face, for the import examples); configs/runs/quickstart; runs/gpt-tiny-3d, runs/a,
runs/b and runs/quickstart name those two), and tests/ (the repository's, for the scripts
the examples name). HOME is the sandbox. Every example must exit 0.
Two kinds are not run, and are reported: Slurm's `srun` lines (tests/slurm runs trainctl
under a real Slurm) and zsh's `${fpath[1]}` line (no zsh here).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = [("srun ", "Slurm: tests/slurm runs trainctl under srun"),
        ("${fpath[1]}", "zsh only")]

JOB = """name: job
seed: 3
model: {type: gpt, vocab_size: 256, seq_len: 16, n_layer: 4, n_head: 4, d_model: 32}
data: {type: synthetic}
training: {steps: 200, micro_batch_size: 2, global_batch_size: 8, eval_every: 100,
           eval_batches: 2}
checkpoint: {every_steps: 100, async: false}
logging: {every_steps: 10}
runtime: {comm_timeout_s: 120}
"""


def bytes_to_unicode():  # GPT-2's byte-level alphabet
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_tokenizer(path):
    alphabet = bytes_to_unicode()
    vocab = {alphabet[b]: b for b in range(256)}
    vocab["th"] = 256
    doc = {"added_tokens": [{"id": 257, "content": "<|endoftext|>", "special": True}],
           "pre_tokenizer": {"type": "ByteLevel"},
           "model": {"type": "BPE", "vocab": vocab, "merges": ["t h"]}}
    with open(path, "w") as f:
        json.dump(doc, f)


def subcommands(help_text):
    if "Subcommands:" not in help_text:
        return []
    section = help_text.split("Subcommands:", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^  ([a-z]+)\b", section, re.M)


def help_examples(bin_path):
    def help_of(path):
        return subprocess.run([bin_path, *path, "--help"], capture_output=True, text=True).stdout

    paths = []
    for c in subcommands(help_of([])):
        paths.append([c])
        paths += [[c, s] for s in subcommands(help_of([c]))]
    if len(paths) < 15:
        sys.exit(f"only {len(paths)} subcommands found in --help: the collection is broken")
    found = []
    for p in paths:
        text = help_of(p)
        if "Example:" not in text:
            continue
        block = text.split("Example:", 1)[1].split("\n\n", 1)[0]
        for line in block.splitlines():
            line = line.strip()
            if line:
                found.append(("trainctl " + " ".join(p) + " --help", line))
    return found


def doc_examples(source_dir):
    found, in_bash, pending = [], False, ""
    with open(os.path.join(source_dir, "docs/commands.md")) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("```"):
                in_bash = line.strip() == "```bash" and not in_bash
                continue
            if not in_bash:
                continue
            if pending:
                pending += " " + line.strip()
            elif line.startswith("build/trainctl"):
                pending = line
            if pending and not pending.rstrip().endswith("\\"):
                found.append(("docs/commands.md", pending))
                pending = ""
            elif pending:
                pending = pending.rstrip()[:-1]
    return found


def without_comment(cmd):
    # A trailing "# ..." comment (never inside quotes in these examples).
    return re.sub(r"\s+#\s.*$", "", cmd).strip()


def sandbox(bin_path, source_dir, work):
    # The shipped specs only: a run directory left under configs/ by a local run is not one.
    shutil.copytree(os.path.join(source_dir, "configs"), os.path.join(work, "configs"),
                    ignore=shutil.ignore_patterns("runs", "*.safetensors", "events.out.*"))
    for root, _, files in os.walk(os.path.join(work, "configs")):
        for name in files:
            p = os.path.join(root, name)
            text = open(p).read()
            for key, cap in (("steps", 20), ("warmup_steps", 5)):
                text = re.sub(r"(\b%s: )(\d+)" % key,
                              lambda m, c=cap: m.group(1) + str(min(int(m.group(2)), c)), text)
            open(p, "w").write(text)
    open(os.path.join(work, "job.yaml"), "w").write(JOB)
    write_tokenizer(os.path.join(work, "tokenizer.json"))
    os.makedirs(os.path.join(work, "corpus"))
    text = "the theme of the thing is this, then that.\n" * 400
    open(os.path.join(work, "corpus/a.txt"), "w").write(text)
    open(os.path.join(work, "corpus/b.txt"), "w").write(text.upper())
    open(os.path.join(work, "a.txt"), "w").write(text[:2000])
    os.makedirs(os.path.join(work, ".local/share/bash-completion/completions"))
    os.symlink(os.path.join(source_dir, "tests"), os.path.join(work, "tests"))  # scripts named
    for job in ("job.yaml", "configs/quickstart.yaml"):
        r = subprocess.run([bin_path, "train", job], cwd=work, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"set-up: trainctl train {job} failed ({r.returncode}):\n{r.stderr}")
    # A Hugging Face folder for the import examples: the tiny job's model, exported.
    r = subprocess.run([bin_path, "ckpt", "export", "runs/job", "--format", "hf", "--out",
                        "models/gpt2"], cwd=work, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"set-up: trainctl ckpt export --format hf failed ({r.returncode}):\n{r.stderr}")
    os.makedirs(os.path.join(work, "runs"), exist_ok=True)
    for name, target in (("gpt-tiny-3d", "job"), ("a", "job"),
                         ("b", "../configs/runs/quickstart"),
                         ("quickstart", "../configs/runs/quickstart")):
        os.symlink(target, os.path.join(work, "runs", name))


def main(bin_path, source_dir):
    bin_path, source_dir = os.path.abspath(bin_path), os.path.abspath(source_dir)
    examples = help_examples(bin_path) + doc_examples(source_dir)
    if len(examples) < 30:
        sys.exit(f"only {len(examples)} examples found: the collection is broken")
    work = tempfile.mkdtemp(prefix="trainctl-examples-")
    shims = os.path.join(work, ".bin")
    os.makedirs(shims)
    os.symlink(bin_path, os.path.join(shims, "trainctl"))
    os.makedirs(os.path.join(work, "build"))
    os.symlink(bin_path, os.path.join(work, "build/trainctl"))
    env = dict(os.environ, HOME=work, PATH=shims + ":" + os.environ["PATH"])
    failures, ran = [], 0
    try:
        sandbox(bin_path, source_dir, work)
        for where, example in examples:
            cmd = without_comment(example)
            reason = next((why for key, why in SKIP if key in cmd), None)
            if reason:
                print(f"skipped ({reason}): {cmd}")
                continue
            r = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, capture_output=True,
                               timeout=600)
            ran += 1
            status = "ok" if r.returncode == 0 else f"exit {r.returncode}"
            print(f"{status:8} {cmd}   [{where}]")
            if r.returncode != 0:
                err = r.stderr.decode("utf-8", "replace")[-2000:]
                failures.append(f"{cmd}   [{where}]\n{err}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{ran} examples run, {len(failures)} failed")
    if failures:
        sys.exit("\n\n".join(failures))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
