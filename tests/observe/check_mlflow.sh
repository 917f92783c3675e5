#!/usr/bin/env bash
# logging.mlflow against a real MLflow tracking server (PyPI's mlflow 2.9.2, started here on
# 127.0.0.1 with a SQLite store (SQLAlchemy < 2.1: 2.9.2 imports a pool class 2.1 removed) and artifact serving), read back with MLflow's own Python
# client (check_mlflow.py): params, every logged metric at its step, the run's status, a
# resume that continues the same MLflow run, and the report/config/metrics artifacts. Then
# the server is stopped and a run still trains to the end with a warning.
# Usage: tests/observe/check_mlflow.sh TRAINCTL_BINARY
# The venv is kept at $TRAINCTL_MLFLOWVENV (the build directory's mlflowvenv/), made once;
# exit 77 (skipped) only when PyPI cannot be reached.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?usage: check_mlflow.sh TRAINCTL_BINARY}
venv=${TRAINCTL_MLFLOWVENV:-$(dirname "$bin")/mlflowvenv}
if ! "$venv/bin/python" -c "import mlflow" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check 'mlflow==2.9.2' 'sqlalchemy<2.1'; then
    if ! python3 -c "import urllib.request; urllib.request.urlopen('https://pypi.org/simple/mlflow/', timeout=10)" 2>/dev/null; then
      echo "skipped: PyPI is unreachable, cannot install mlflow"
      rm -rf "$venv"
      exit 77
    fi
    echo "FAILED: pip install mlflow failed although PyPI is reachable"
    exit 1
  fi
fi
work=$(mktemp -d)
server=
# The server runs in a session of its own (setsid), so its gunicorn workers go with it.
stop_server() {
  if [[ -n $server ]]; then
    kill -- "-$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=
  fi
}
cleanup() {
  local rc=$?
  stop_server
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
uri=http://127.0.0.1:$port
mkdir -p "$work/mlflow-check-$$"
setsid "$venv/bin/mlflow" server --host 127.0.0.1 --port "$port" --workers 1 \
  --backend-store-uri "sqlite:///$work/mlflow-check-$$/store.db" \
  --artifacts-destination "$work/mlflow-check-$$/artifacts" >"$work/server.log" 2>&1 &
server=$!
up() { python3 -c "import urllib.request as u; u.urlopen('$uri/health', timeout=5)" 2>/dev/null; }
for _ in $(seq 120); do
  up && break
  kill -0 "$server" 2>/dev/null || { cat "$work/server.log"; echo "FAILED: mlflow server died"; exit 1; }
  sleep 1
done
up || { cat "$work/server.log"; echo "FAILED: no server"; exit 1; }

cat > "$work/job.yaml" <<YAML
name: mlflow-check
model: {vocab_size: 64, seq_len: 16, n_layer: 2, n_head: 2, d_model: 32}
data: {type: synthetic}
parallel: {dp: 2}
training: {steps: 6, micro_batch_size: 2, global_batch_size: 4, eval_every: 3, eval_batches: 1}
checkpoint: {every_steps: 3}
logging: {every_steps: 2, mlflow: {tracking_uri: "$uri", experiment: trainctl-check}}
runtime: {comm_selftest: false}
YAML
"$bin" train "$work/job.yaml" > "$work/train1.log" 2>&1 || { cat "$work/train1.log"; exit 1; }
# Resumed from step 6 with more steps: the same MLflow run goes on.
"$bin" train "$work/job.yaml" --set training.steps=9 > "$work/train2.log" 2>&1 ||
  { cat "$work/train2.log"; exit 1; }
run=$work/runs/mlflow-check
"$venv/bin/python" "$here/check_mlflow.py" "$uri" "$run" || { cat "$work/train1.log" "$work/server.log"; exit 1; }

# A dead server: training is not held up or failed by it; the warning says so.
stop_server
"$bin" train "$work/job.yaml" --set name=mlflow-dead > "$work/dead.log" 2>&1 ||
  { cat "$work/dead.log"; echo "FAILED: a dead MLflow server failed the run"; exit 1; }
grep -q "warning: MLflow" "$work/dead.log" "$work/runs/mlflow-dead/logs/rank0.log" ||
  { cat "$work/dead.log"; echo "FAILED: no warning about the dead MLflow server"; exit 1; }
[[ $(wc -l < "$work/runs/mlflow-dead/metrics.jsonl") -ge 3 ]] || { echo "FAILED: metrics lost"; exit 1; }
echo "ok: MLflow run, resume, artifacts and a dead server"
