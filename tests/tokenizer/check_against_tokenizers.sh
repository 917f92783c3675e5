#!/usr/bin/env bash
# trainctl's BPE tokenizer against Hugging Face `tokenizers` (PyPI): small vocabularies are
# trained with the library on tinyshakespeare with the GPT-2 and the Llama 3 pre-tokenizer
# settings, then trainctl encodes the whole file (and a sample of many scripts, spaces and
# numbers) with each tokenizer.json and with GPT-2's vocab.json + merges.txt, on one and two
# threads; the ids must equal the library's and decoding must give the text back. Also:
# malformed or unsupported tokenizer files and non-UTF-8 text exit 2 naming the file.
# Usage: check_against_tokenizers.sh TRAINCTL_BINARY
# Exit 77 (skipped) when the corpus (../shared/data/tinyshakespeare.txt) is absent or PyPI
# cannot be reached to install `tokenizers` into $TRAINCTL_TOKVENV (default build/tokvenv).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:-$root/build/trainctl}
corpus=${TRAINCTL_CORPUS:-$root/../shared/data/tinyshakespeare.txt}
sample=$root/tests/data/tokenizer/unicode_sample.txt
venv=${TRAINCTL_TOKVENV:-$root/build/tokvenv}
if [[ ! -f $corpus ]]; then
  echo "skipped: $corpus is absent"
  exit 77
fi
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import tokenizers" 2>/dev/null; then
  python3 -m venv "$venv"
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check tokenizers; then
    echo "skipped: could not install tokenizers from PyPI"
    exit 77
  fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" "$here/train_tokenizers.py" "$corpus" "$work" "$sample"

fail() { echo "FAIL: $*" >&2; exit 1; }
inputs=("$corpus" "$sample")
for style in gpt2 llama3; do
  tokenizers=("$work/$style/tokenizer.json")
  [[ $style == gpt2 ]] && tokenizers+=("$work/$style/vocab.json")
  for tok in "${tokenizers[@]}"; do
    for i in 0 1; do
      for threads in 1 2; do
        "$bin" data encode --tokenizer "$tok" --input "${inputs[$i]}" --out "$work/ids" \
          --threads "$threads" 2>/dev/null
        cmp -s "$work/ids" "$work/$style/$i.ids" ||
          fail "$tok: ids of ${inputs[$i]} ($threads threads) differ from tokenizers'"
      done
      "$bin" data decode --tokenizer "$tok" --input "$work/ids" --out "$work/text" 2>/dev/null
      cmp -s "$work/text" "${inputs[$i]}" || fail "$tok: decoding ${inputs[$i]} does not round-trip"
    done
    echo "ok: $tok"
  done
done

# Bad input: exit 2 and a message naming the file and the problem.
expect_refusal() {  # expect_refusal PATTERN COMMAND...
  local pattern=$1
  shift
  set +e
  "$@" >"$work/out" 2>&1
  local rc=$?
  set -e
  [[ $rc == 2 ]] || fail "exit $rc (not 2) from: $* ($(cat "$work/out"))"
  grep -q -- "$pattern" "$work/out" || fail "no '$pattern' in: $(cat "$work/out")"
}
good=$work/gpt2/tokenizer.json
"$venv/bin/python" - "$good" "$work" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
out = sys.argv[2]
wp = dict(doc, model=dict(doc["model"], type="WordPiece"))
json.dump(wp, open(f"{out}/wordpiece.json", "w"))
nomerges = dict(doc, model={k: v for k, v in doc["model"].items() if k != "merges"})
json.dump(nomerges, open(f"{out}/nomerges.json", "w"))
open(f"{out}/truncated.json", "w").write(json.dumps(doc)[:5000])
open(f"{out}/latin1.txt", "wb").write("caf\u00e9 au lait\n".encode("latin-1"))
PY
expect_refusal "wordpiece.json: model.type is WordPiece" \
  "$bin" data encode --tokenizer "$work/wordpiece.json" --input "$sample" --out "$work/x"
expect_refusal "nomerges.json: model.merges is missing" \
  "$bin" data encode --tokenizer "$work/nomerges.json" --input "$sample" --out "$work/x"
expect_refusal "truncated.json: not valid JSON" \
  "$bin" data encode --tokenizer "$work/truncated.json" --input "$sample" --out "$work/x"
expect_refusal "latin1.txt: not UTF-8 text: invalid byte 0xE9 at offset 3" \
  "$bin" data encode --tokenizer "$good" --input "$work/latin1.txt" --out "$work/x"
expect_refusal "latin1.txt: not UTF-8" \
  "$bin" data prepare --tokenizer "$good" --input "$work/latin1.txt" --out "$work/prep"
: > "$work/empty.txt"
expect_refusal "empty.txt: the input is empty" \
  "$bin" data prepare --tokenizer "$good" --input "$work/empty.txt" --out "$work/prep"
echo "ok: bad input refused"
