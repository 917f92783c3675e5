"""Reads a trainctl run back from an MLflow tracking server with MLflow's Python client.

Usage: check_mlflow.py TRACKING_URI RUN_DIR
The run trained 6 steps, then was resumed to 9 (logging step 1, every 2 steps and the last,
evaluating every 3). Checks: one MLflow run named after the job in experiment
trainctl-check, FINISHED; its params are the resolved spec of the first launch; every value
of metrics.jsonl (loss, val_loss, lr, tokens_per_s, ...) is a metric at its step, once;
the resume is tagged; report.html, config.resolved.yaml and metrics.jsonl are artifacts.
"""
import json
import os
import sys
import tempfile

import mlflow
from mlflow.tracking import MlflowClient


def main(uri, run_dir):
    mlflow.set_tracking_uri(uri)  # the artifact proxy resolves against it
    client = MlflowClient(tracking_uri=uri)
    failures = []
    exp = client.get_experiment_by_name("trainctl-check")
    runs = client.search_runs([exp.experiment_id])
    if len(runs) != 1:
        sys.exit(f"FAILED: {len(runs)} MLflow runs, expected one (the resume continues it)")
    run = runs[0]
    info = run.info
    if info.run_name != "mlflow-check" or info.status != "FINISHED":
        failures.append(f"run {info.run_name} is {info.status}; expected mlflow-check, FINISHED")
    recorded = json.load(open(os.path.join(run_dir, "mlflow.json")))
    if recorded["run_id"] != info.run_id:
        failures.append("run_dir/mlflow.json names another run")
    params = run.data.params
    for key, want in (("model.n_layer", "2"), ("parallel.dp", "2"), ("training.steps", "6"),
                      ("name", "mlflow-check"), ("logging.mlflow.experiment", "trainctl-check")):
        if params.get(key) != want:
            failures.append(f"param {key} is {params.get(key)!r}, expected {want!r}")
    if run.data.tags.get("trainctl.resumed_at_step") != "7":
        failures.append(f"tag trainctl.resumed_at_step: {run.data.tags.get('trainctl.resumed_at_step')}")

    lines = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    want = {}
    for line in lines:
        for key, value in line.items():
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                want.setdefault(key, []).append((line["step"], float(value)))
    for key in ("loss", "val_loss", "lr", "tokens_per_s"):
        if key not in want:
            failures.append(f"metrics.jsonl has no {key}: the check is broken")
    for key, points in want.items():
        got = sorted((m.step, m.value) for m in client.get_metric_history(info.run_id, key))
        if [s for s, _ in got] != [s for s, _ in points]:
            failures.append(f"{key}: steps {[s for s, _ in got]}, metrics.jsonl {[s for s, _ in points]}")
            continue
        for (step, g), (_, w) in zip(got, points):
            if abs(g - w) > 1e-6 * max(1.0, abs(w)):
                failures.append(f"{key} at step {step}: {g} != {w}")
    if [l["step"] for l in lines if "loss" in l] != [1, 2, 4, 6, 8, 9]:
        failures.append(f"logged steps {[l['step'] for l in lines]}")

    names = sorted(a.path for a in client.list_artifacts(info.run_id))
    for name in ("config.resolved.yaml", "metrics.jsonl", "report.html"):
        if name not in names:
            failures.append(f"artifact {name} missing (have {names})")
    if "report.html" in names:
        with tempfile.TemporaryDirectory() as d:
            page = open(client.download_artifacts(info.run_id, "report.html", d)).read()
            if "<svg" not in page:
                failures.append("the uploaded report.html has no chart")
    if failures:
        sys.exit("FAILED:\n  " + "\n  ".join(failures))
    print(f"ok: MLflow run {info.run_id}: {len(params)} params, {len(want)} metrics, {names}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
