"""Reads a run's TensorBoard event files with TensorBoard's own reader (EventAccumulator)
and checks them against metrics.jsonl: every metric of every logged step is a scalar at
that step with that value (as float32), each step appears once per tag even after a resume
(the resumed launch's value wins), and the resolved spec is there as text. With
--window-means, also that TensorBoard's comm_bytes at each logged step is its
comm_bytes_window spread over the steps since the previous logged step (a mean per step over
the logging window, docs/observability.md), and not 0 after the first line (for a run whose
every later window holds a parameter exchange).

With --replicas-change (runtime.fault_tolerance), also that the `replicas` scalar takes the
values metrics.jsonl logged and ends at the full count.

Usage: python check_tensorboard.py RUN_DIR [--window-means] [--replicas-change]
"""
import json
import math
import pathlib
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator


def expected_scalars(metrics_path):
    """metrics.jsonl's scalars per tag: {tag: {step: value}}; a later line of a step wins."""
    by_tag = {}
    for line in metrics_path.read_text().splitlines():
        row = json.loads(line)
        step = row["step"]
        for key, value in row.items():
            if key == "step":
                continue
            if isinstance(value, bool):
                by_tag.setdefault(key, {})[step] = 1.0 if value else 0.0
            elif isinstance(value, (int, float)):
                by_tag.setdefault(key, {})[step] = float(value)
            elif isinstance(value, list):
                for i, v in enumerate(value):
                    by_tag.setdefault(f"{key}/{i}", {})[step] = float(v)
    return by_tag


def as_float32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def per_step_mean(total, steps):
    """train/step_window.h's rounding: to the nearest whole byte, half up."""
    return total // steps + (1 if 2 * (total % steps) >= steps else 0)


def window_mean_problems(acc, tags):
    """comm_bytes per step = comm_bytes_window / the window's steps, read from TensorBoard."""
    for tag in ("comm_bytes", "comm_bytes_window"):
        if tag not in tags["scalars"]:
            return [f"--window-means: scalar {tag} missing"]
    per_step = {e.step: e.value for e in acc.Scalars("comm_bytes")}
    window = {e.step: e.value for e in acc.Scalars("comm_bytes_window")}
    problems, previous = [], 0
    for step in sorted(per_step):
        want = per_step_mean(int(window.get(step, -1)), step - previous)
        if per_step[step] != want:
            problems.append(f"comm_bytes step {step}: {per_step[step]}, expected {want} "
                            f"(comm_bytes_window {window.get(step)} over {step - previous} steps)")
        if previous > 0 and per_step[step] <= 0:
            problems.append(f"comm_bytes step {step}: {per_step[step]}, its window exchanged")
        previous = step
    return problems


def main():
    run = pathlib.Path(sys.argv[1])
    acc = event_accumulator.EventAccumulator(
        str(run / "tb"), size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0})
    acc.Reload()
    want = expected_scalars(run / "metrics.jsonl")
    tags = acc.Tags()
    problems = []
    for tag, steps in sorted(want.items()):
        if tag not in tags["scalars"]:
            problems.append(f"scalar {tag} missing (have {sorted(tags['scalars'])})")
            continue
        events = acc.Scalars(tag)
        got_steps = [e.step for e in events]
        if sorted(got_steps) != sorted(steps) or len(set(got_steps)) != len(got_steps):
            problems.append(f"{tag}: steps {got_steps}, expected each of {sorted(steps)} once")
            continue
        for e in events:
            if not math.isclose(e.value, as_float32(steps[e.step]), rel_tol=1e-6, abs_tol=1e-30):
                problems.append(f"{tag} step {e.step}: {e.value}, metrics.jsonl has {steps[e.step]}")
    extra = set(tags["scalars"]) - set(want)
    if extra:
        problems.append(f"scalars not in metrics.jsonl: {sorted(extra)}")
    if "config" not in tags["tensors"]:
        problems.append(f"no 'config' text (tensors: {tags['tensors']})")
    else:
        text = acc.Tensors("config")[-1].tensor_proto.string_val[0].decode()
        if "model:" not in text or "logging:" not in text:
            problems.append(f"config text is not the resolved spec: {text[:200]!r}")
    if "--window-means" in sys.argv[2:]:
        problems += window_mean_problems(acc, tags)
    if "--replicas-change" in sys.argv[2:]:
        # A fault-tolerant run whose replica 0 died: TensorBoard has the replicas of every
        # step, the steps trained with fewer replicas included (checked against
        # metrics.jsonl above), and ends at the full count again.
        live = [e.value for e in sorted(acc.Scalars("replicas"), key=lambda e: e.step)] \
            if "replicas" in tags["scalars"] else []
        logged = sorted(set(want.get("replicas", {}).values()))
        if not live or live[-1] != max(live) or sorted(set(live)) != logged:
            problems.append(f"--replicas-change: replicas over the steps {sorted(set(live))}, "
                            f"metrics.jsonl has {logged}, expected them equal and to end full")
    for p in problems:
        print("FAIL:", p)
    n = sum(len(s) for s in want.values())
    print(f"{'FAILED' if problems else 'ok'}: {len(want)} tags, {n} scalars checked in {run / 'tb'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
