#!/usr/bin/env bash
# `trainctl report` in a real browser (Debian's headless chromium): a 2-stage pipeline run,
# its report with --png; the page loads without a console message (a page with a
# console.error proves the check sees them), its DOM holds the charts, and the PNG is not
# blank (png_variety.py). Usage: tests/observe/check_report_browser.sh TRAINCTL_BINARY
# Exit 77 (skipped) without chromium (scripts/install_deps.sh installs it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?usage: check_report_browser.sh TRAINCTL_BINARY}
browser=$(command -v chromium || command -v chromium-browser || true)
[[ -n $browser ]] || { echo "skipped: no chromium (apt-get install chromium)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/job.yaml" <<'YAML'
name: report-check
model: {vocab_size: 64, seq_len: 16, n_layer: 2, n_head: 2, d_model: 32}
data: {type: synthetic}
parallel: {pp: 2}
training: {steps: 12, micro_batch_size: 2, global_batch_size: 8, eval_every: 4, eval_batches: 1}
logging: {every_steps: 2}
runtime: {comm_selftest: false}
YAML
"$bin" train "$work/job.yaml" >/dev/null 2>&1
run=$work/runs/report-check
"$bin" report "$run" --out "$work/report.html" --png "$work/report.png"

# Console messages of a page: chromium logs them as ":CONSOLE" lines with --enable-logging.
console_lines() {
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$work/profile" --enable-logging=stderr --v=0 --dump-dom "file://$1" \
    >"$work/dom.html" 2>"$work/browser.log" || { cat "$work/browser.log"; exit 1; }
  grep ':CONSOLE' "$work/browser.log" || true
}
printf '<!DOCTYPE html><html><body><script>console.error("check-sees-this")</script></body></html>' \
  >"$work/control.html"
console_lines "$work/control.html" | grep -q check-sees-this ||
  { echo "FAILED: the console check does not see a console.error"; exit 1; }
messages=$(console_lines "$work/report.html")
[[ -z $messages ]] || { echo "FAILED: console messages on the report page:"; echo "$messages"; exit 1; }
n_svg=$(grep -o '<svg' "$work/dom.html" | wc -l)
((n_svg >= 6)) || { echo "FAILED: the loaded page has $n_svg charts"; exit 1; }
grep -q 'trainctl report: report-check' "$work/dom.html" || { echo "FAILED: no title in the DOM"; exit 1; }
python3 "$here/png_variety.py" "$work/report.png"
echo "ok: the report loads in chromium without console messages ($n_svg charts), PNG not blank"
