#!/usr/bin/env bash
# `cmake --install` into a fresh prefix, then the installed binary on its own (issue 37,
# item 9): --version, a validate, the man page and the bash completion (complete -p, and
# the completion function asked for a prefix as bash would ask it).
# Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
prefix=$(mktemp -d "${TMPDIR:-/tmp}/trainctl-install.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" > "$prefix.log" 2>&1 || { cat "$prefix.log"; fail "cmake --install"; }
rm -f "$prefix.log"

bin=$prefix/bin/trainctl
[[ -x $bin ]] || fail "no $bin"
"$bin" --version | grep -q '^trainctl ' || fail "--version"

# A spec next to nothing of the source tree: it must validate with the installed binary.
mkdir -p "$prefix/work"
cp "$src/configs/quickstart.yaml" "$prefix/work/job.yaml"
(cd "$prefix/work" && "$bin" validate job.yaml --set data.type=synthetic > validate.out) \
  || { cat "$prefix/work/validate.out"; fail "validate"; }
grep -q "ok: job.yaml is valid" "$prefix/work/validate.out" || fail "validate output"

[[ -f $prefix/share/doc/trainctl/job-spec.md ]] || fail "docs not installed"
man1=$prefix/share/man/man1/trainctl.1
head -1 "$man1" | grep -q '^\.TH TRAINCTL 1' || fail "man page header"
grep -q '^\.SS "trainctl train"' "$man1" || fail "man page has no train section"
if command -v man > /dev/null 2>&1; then
  MANWIDTH=80 man -l "$man1" 2> /dev/null | grep -q 'resume' || fail "man -l does not render"
fi
[[ -s $prefix/share/zsh/site-functions/_trainctl ]] || fail "zsh completion"

bash_completion=$prefix/share/bash-completion/completions/trainctl
bash -c '
  set -e
  source "$1"
  complete -p trainctl | grep -q -- "-F _trainctl" || { echo "complete -p: $(complete -p trainctl)"; exit 1; }
  ask() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _trainctl; echo "${COMPREPLY[*]}"; }
  [[ $(ask trainctl va) == "validate" ]] || { echo "commands: $(ask trainctl va)"; exit 1; }
  [[ " $(ask trainctl train --re) " == *" --resume "* ]] || { echo "options: $(ask trainctl train --re)"; exit 1; }
  [[ " $(ask trainctl validate --sh) " == *" --show-resolved "* ]] || exit 1
  [[ $(ask trainctl ckpt ver) == "verify" ]] || { echo "nested: $(ask trainctl ckpt ver)"; exit 1; }
  [[ $(ask trainctl train job.yaml --set optimizer.l) == "optimizer.lr=" ]] || { echo "set: $(ask trainctl train job.yaml --set optimizer.l)"; exit 1; }
  [[ -z $(ask trainctl wor) ]] || { echo "hidden command offered"; exit 1; }
' _ "$bash_completion" || fail "bash completion"
# zsh, where installed: the same function through bashcompinit (bash's word numbering).
# zsh's compgen does not filter by the prefix (compadd does, afterwards), so the answers
# are the candidates of the right command level.
if command -v zsh > /dev/null 2>&1; then
  zsh -f -c '
    autoload -U compinit && compinit -u -D
    source "$1"
    ask() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _trainctl; print -r -- " ${COMPREPLY[*]} "; }
    [[ $(ask trainctl va) == *" validate "* ]] || { print "zsh commands: $(ask trainctl va)"; exit 1; }
    [[ $(ask trainctl ckpt ver) == " info verify export " ]] || { print "zsh nested: $(ask trainctl ckpt ver)"; exit 1; }
    [[ $(ask trainctl train --re) == *" --resume "* ]] || { print "zsh options: $(ask trainctl train --re)"; exit 1; }
  ' _ "$prefix/share/zsh/site-functions/_trainctl" || fail "zsh completion"
fi
echo "ok: installed into $prefix and ran"
