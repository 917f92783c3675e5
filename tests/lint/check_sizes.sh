#!/usr/bin/env bash
# Keeps lib/ and apps/ in small pieces (issue 34): fails on a function over 100 lines or a
# file over 600 lines, naming each. Function lengths come from lizard (PyPI), installed
# once into a venv (TRAINCTL_LINTVENV, default build/lintvenv); skipped (77) only when
# PyPI cannot be reached. File lengths are counted here.
#   tests/lint/check_sizes.sh SOURCE_DIR
set -euo pipefail
root=${1:?usage: check_sizes.sh SOURCE_DIR}
readonly max_function=100 max_file=600
venv=${TRAINCTL_LINTVENV:-$root/build/lintvenv}
if [[ ! -x $venv/bin/lizard ]]; then
  python3 -m venv "$venv" >/dev/null
  if ! "$venv/bin/pip" install -q "lizard==1.17.10" >/dev/null 2>&1; then
    echo "check_sizes: lizard could not be installed from PyPI: skipped"
    exit 77
  fi
fi
cd "$root"
mapfile -t files < <(git ls-files 'lib/*' 'apps/*' 2>/dev/null | grep -E '\.(cpp|h|cu|cuh)$' ||
  find lib apps -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \))
failed=0
for f in "${files[@]}"; do
  [[ -f $f ]] || continue
  n=$(wc -l <"$f")
  if ((n > max_file)); then
    echo "$f: $n lines (at most $max_file: split it by responsibility)"
    failed=1
  fi
done
# Only the length limit: -C and -a set out of reach so complexity does not count here.
long=$("$venv/bin/lizard" -L "$max_function" -C 100000 -a 100000 -w "${files[@]}" || true)
if [[ -n $long ]]; then
  echo "$long" | sed -E 's/^(.*): warning: (.*) has .* ([0-9]+) length.*/\1: \2 is \3 lines (at most '"$max_function"')/'
  failed=1
fi
if ((failed)); then
  echo "check_sizes: FAILED (docs/ARCHITECTURE.md: small files, one job each)"
  exit 1
fi
echo "check_sizes: ${#files[@]} files, none over $max_file lines, no function over $max_function lines"
