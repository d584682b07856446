"""The vLLM tests run only where vLLM is installed: in .venv-vllm (tests/vllm/setup_vllm_env.sh), as
``.venv-vllm/bin/python -m pytest -m vllm tests/vllm``. Elsewhere (the main .venv) nothing here is collected."""

import importlib.util

_spec = importlib.util.find_spec("vllm")
if _spec is None or _spec.origin is None:  # a namespace package (this folder, when tests/ is on sys.path) is not vLLM
    collect_ignore_glob = ["test_*.py"]


def pytest_configure(config):
    config.addinivalue_line("markers", "vllm: runs vLLM for real (its CPU build), only in .venv-vllm; -m vllm")
