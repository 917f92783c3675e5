#!/usr/bin/python3
"""trainctl vs PyTorch, side by side in one run: GPT training throughput on CPU.

For each shape (L4/H4/C256/T256/B8 and L6/H6/C384/T256/B8) and thread count (1, 2) it
trains the same model on the same batch size with trainctl (one worker) and with PyTorch
(Debian's python3-torch, nanoGPT-style model, AdamW), measures tokens/s (median over the
steps after warm-up), and reports the ratio and the model FLOP utilisation against the
OpenBLAS sgemm ceiling measured in the same run. One JSON line per case, then a table.

PyTorch is given its best configuration on this machine (NOTES.md): one intra-op thread
with OpenBLAS doing the threading, so the two pools do not spin against each other.

Each row names the CPU kernel path trainctl ran (docs/cpu-kernels.md), read from the
worker's log; --isa avx2,avx512 measures several paths side by side in one run
(TRAINCTL_CPU_ISA), e.g. the AVX2 path on a machine that also has AVX-512.

Usage: scripts/bench/bench_train.py [--trainctl build/trainctl] [--steps 12] [--quick]
                                    [--isa generic,avx2,avx512] [--repeats 3]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPES = [dict(L=4, H=4, C=256, T=256, B=8), dict(L=6, H=6, C=384, T=256, B=8)]
VOCAB = 256


def flops_per_token(s):
    C, L, T, V = s["C"], s["L"], s["T"], VOCAB
    n = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    return 6 * n + 12 * L * C * T


def run_trainctl(binary, shape, threads, steps, isa):
    """(tokens/s, the CPU kernel path the worker logged)"""
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "job.yaml")
        with open(spec, "w") as f:
            f.write(f"""name: bench
run_dir: {d}/run
model: {{vocab_size: {VOCAB}, seq_len: {shape['T']}, n_layer: {shape['L']}, n_head: {shape['H']}, d_model: {shape['C']}}}
data: {{type: synthetic}}
training: {{steps: {steps}, micro_batch_size: {shape['B']}, global_batch_size: {shape['B']}, threads: {threads}}}
optimizer: {{lr: 1.0e-3}}
logging: {{every_steps: 1}}
runtime: {{comm_selftest: false}}
""")
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        env.pop("TRAINCTL_CPU_ISA", None)
        if isa:
            env["TRAINCTL_CPU_ISA"] = isa
        subprocess.run([binary, "train", spec], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rows = [json.loads(l) for l in open(os.path.join(d, "run", "metrics.jsonl"))]
        logged = re.search(r"cpu kernels: (\w+)", open(os.path.join(d, "run", "logs", "rank0.log")).read())
    times = [r["step_ms"] for r in rows[2:]]  # skip warm-up steps
    tokens = shape["B"] * shape["T"]
    return tokens / (statistics.median(times) / 1e3), logged.group(1) if logged else "?"


TORCH_CHILD = r"""
import json, math, sys, time, statistics
import torch, torch.nn as nn
from torch.nn import functional as F
s = json.loads(sys.argv[1]); steps = int(sys.argv[2]); V = int(sys.argv[3])
torch.set_num_threads(1)
C, H, L, T, B = s["C"], s["H"], s["L"], s["T"], s["B"]
class Attn(nn.Module):
    def __init__(self):
        super().__init__(); self.c_attn = nn.Linear(C, 3*C); self.c_proj = nn.Linear(C, C)
        self.mask = torch.tril(torch.ones(T, T, dtype=torch.bool))  # not a buffer: DDP's gloo cannot broadcast bool
    def forward(self, x):
        q, k, v = self.c_attn(x).split(C, dim=2); hs = C // H
        q, k, v = [t.view(B, T, H, hs).transpose(1, 2) for t in (q, k, v)]
        a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        a = F.softmax(a.masked_fill(~self.mask, float("-inf")), dim=-1)
        return self.c_proj((a @ v).transpose(1, 2).contiguous().view(B, T, C))
class Block(nn.Module):
    def __init__(self):
        super().__init__(); self.ln_1 = nn.LayerNorm(C); self.attn = Attn(); self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4*C); self.c_proj = nn.Linear(4*C, C)
    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
class GPT(nn.Module):
    def __init__(self):
        super().__init__(); self.wte = nn.Embedding(V, C); self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList([Block() for _ in range(L)]); self.ln_f = nn.LayerNorm(C)
    def forward(self, idx, tgt):
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h: x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, V), tgt.view(-1))
m = GPT(); opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
idx = torch.randint(0, V, (B, T)); tgt = torch.randint(0, V, (B, T))
times = []
for i in range(steps):
    t0 = time.perf_counter(); opt.zero_grad(set_to_none=True)
    loss = m(idx, tgt); loss.backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step()
    times.append(time.perf_counter() - t0)
print(json.dumps({"tokens_per_s": B*T / statistics.median(times[2:])}))
"""

SGEMM_CHILD = r"""
import json, time, torch
torch.set_num_threads(1)
a = torch.randn(1024, 1024); b = torch.randn(1024, 1024); c = a @ b
best = 1e9
for _ in range(10):
    t0 = time.perf_counter(); c = a @ b; best = min(best, time.perf_counter() - t0)
print(json.dumps({"gflops": 2 * 1024**3 / best / 1e9}))
"""


def python_child(code, args, blas_threads):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS=str(blas_threads))
    out = subprocess.run(["/usr/bin/python3", "-c", code] + [str(a) for a in args], env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=1, help="runs per case; the median is reported")
    ap.add_argument("--quick", action="store_true", help="first shape only")
    ap.add_argument("--shapes", default="", help="comma-separated shape indices (0: L4/C256, "
                    "1: L6/C384); default: all (or the first with --quick)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--compare", default="", help="another trainctl binary (e.g. an older "
                    "build) measured in the same run, reported with cpu_kernels 'compare'")
    ap.add_argument("--isa", default="", help="comma-separated CPU kernel paths to measure "
                    "(TRAINCTL_CPU_ISA); default: the one trainctl picks")
    args = ap.parse_args()
    ceiling = {t: python_child(SGEMM_CHILD, [], t)["gflops"] for t in (1, 2)}  # both, always
    print(json.dumps({"case": "sgemm_ceiling_1024", "gflops_1t": round(ceiling[1], 1),
                      "gflops_2t": round(ceiling[2], 1)}), flush=True)
    results = []
    shapes = SHAPES[:1] if args.quick else SHAPES
    if args.shapes:
        shapes = [SHAPES[int(i)] for i in args.shapes.split(",")]
    for shape in shapes:
        name = "L{L}/H{H}/C{C}/T{T}/B{B}".format(**shape)
        for threads in (int(t) for t in args.threads.split(",")):
            ref = statistics.median(python_child(TORCH_CHILD, [json.dumps(shape), args.steps, VOCAB],
                                                 threads)["tokens_per_s"]
                                    for _ in range(args.repeats))
            variants = [(args.trainctl, isa) for isa in (args.isa.split(",") if args.isa else [""])]
            if args.compare:
                variants.append((args.compare, None))
            # Rounds interleave the variants, so slow phases of the machine hit them alike.
            runs = {v: [] for v in variants}
            for _ in range(args.repeats):
                for binary, isa in variants:
                    tok_s, path = run_trainctl(binary, shape, threads, args.steps, isa or "")
                    runs[(binary, isa)].append((tok_s, "compare" if isa is None else path))
            for v in variants:
                ours = statistics.median(r[0] for r in runs[v])
                fpt = flops_per_token(shape)
                row = {"case": name, "threads": threads, "cpu_kernels": runs[v][0][1],
                       "trainctl_tok_s": round(ours), "torch_tok_s": round(ref),
                       "ratio": round(ours / ref, 3),
                       "trainctl_mfu": round(ours * fpt / 1e9 / ceiling[threads], 3),
                       "torch_mfu": round(ref * fpt / 1e9 / ceiling[threads], 3)}
                results.append(row)
                print(json.dumps(row), flush=True)
    print()
    print(f"{'model':<22}{'thr':>4}{'kernels':>9}{'trainctl tok/s':>16}{'torch tok/s':>13}{'ratio':>7}{'MFU ours':>10}{'MFU torch':>10}")
    for r in results:
        print(f"{r['case']:<22}{r['threads']:>4}{r['cpu_kernels']:>9}{r['trainctl_tok_s']:>16}{r['torch_tok_s']:>13}"
              f"{r['ratio']:>7.2f}{r['trainctl_mfu']:>10.1%}{r['torch_mfu']:>10.1%}")
    print(f"sgemm ceiling (1024^3): {ceiling[1]:.1f} GFLOP/s 1 thread, {ceiling[2]:.1f} GFLOP/s 2 threads")


if __name__ == "__main__":
    sys.exit(main())
