# Sourced by the tests of this folder: makes $venv a virtual environment with transformers
# 4.36.2 over Debian's python3-torch (PyPI), or exits 77 (skipped) when PyPI cannot be
# reached. Needs $root (the repository); TRAINCTL_HFVENV names the folder (default
# build/hfvenv), shared by every test here.
venv=${TRAINCTL_HFVENV:-$root/build/hfvenv}
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import torch, transformers, tokenizers, safetensors" 2>/dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  # --no-deps: transformers would otherwise pull a new torch; Debian's 1.13 is what it uses.
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
      'transformers==4.36.2' 'tokenizers>=0.14,<0.19' 'huggingface-hub>=0.19.3,<0.21' \
      'safetensors>=0.4' regex tqdm packaging filelock fsspec; then
    echo "skipped: could not install transformers from PyPI"
    exit 77
  fi
fi
