"""``pgrpo doctor``: can this node run a config's GPU jobs? Pure checks on facts passed in (no torch, no GPU).

Each check takes plain numbers and returns a :class:`Check` (PASS, FAIL or SKIP, with the numbers it compared);
:mod:`pgrpo.stages.doctor` probes the machine (torch, ``nvidia-smi``, the disk, the Hugging Face cache) and feeds
them. The memory model: a model's weights are ``params x 2`` bytes in bf16; vLLM's share of a GPU
(``vllm_gpu_memory_utilization``) must hold the weights plus a KV cache for the sequences it runs at once; in
``colocate`` mode the trainer's own copy of the weights lives in the rest of the GPU.

Also the arithmetic of retries (Snakemake's ``attempt``): memory grows with the attempt, an evaluation's runtime
too (it cannot resume), and the shell guard that stops a retry of a job whose first attempt exited 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Minimum Linux driver of each CUDA major version, with CUDA minor-version compatibility (a wheel built for any
#: 12.x runs on a 12.0 driver). Source: NVIDIA, CUDA Toolkit Release Notes, Table 2 "CUDA Toolkit and Minimum
#: Required Driver Version for CUDA Minor Version Compatibility" (12.x: >= 525.60.13; 13.x: >= 580.65.06;
#: 11.x: >= 450.80.02).
CUDA_MIN_DRIVER: dict[int, tuple[int, ...]] = {11: (450, 80, 2), 12: (525, 60, 13), 13: (580, 65, 6)}

BF16_BYTES = 2
#: vLLM's share of a GPU never exceeds this with ``vllm_gpu_memory_utilization: auto`` (vLLM's own default is 0.9)
AUTO_SHARE_CAP = 0.9
#: vLLM's own workspace beside weights and KV cache (activations, CUDA graphs): an assumption, not measured here
VLLM_OVERHEAD_BYTES = 2e9
#: bytes a checkpointed LoRA parameter costs: the adapter (fp32) and Adam's two moments (fp32)
CHECKPOINT_BYTES_PER_LORA_PARAM = 12
#: LoRA parameters as a fraction of the model's when its architecture is unknown
LORA_FALLBACK_FRACTION = 0.01
GB = 1e9


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report; ``problem`` says what failed (the exit-2 message)."""

    name: str
    status: str  # PASS | FAIL | SKIP
    detail: str
    problem: str = ""

    def line(self) -> str:
        return f"{self.status:4}  {self.name}: {self.detail}"


def _ok(name, detail):
    return Check(name, "PASS", detail)


def _skip(name, detail):
    return Check(name, "SKIP", detail)


def _fail(name, detail, problem):
    return Check(name, "FAIL", detail, problem)


def first_failure(checks: list[Check]) -> Check | None:
    return next((c for c in checks if c.status == "FAIL"), None)


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """``"570.133.20"`` -> (570, 133, 20); None for nothing parseable."""
    parts = []
    for piece in str(text or "").strip().split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts) or None


def _v(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)


def check_gpu_visible(wanted: dict[str, int], cuda_available: bool, device_count: int) -> Check:
    """``wanted``: section -> GPUs it asks for (``training.resources.gpus`` ...)."""
    asking = {k: v for k, v in wanted.items() if v and v > 0}
    if not asking:
        return _skip("gpu", "no section asks for a GPU (" + ", ".join(f"{k}.resources.gpus = 0" for k in wanted) + ")")
    section, n = max(asking.items(), key=lambda kv: kv[1])
    if not cuda_available:
        return _fail("gpu", "no CUDA GPU visible", f"no CUDA GPU visible (torch.cuda.is_available() is False) but "
                     f"{section}.resources.gpus = {n}")
    if device_count < n:
        return _fail("gpu", f"{device_count} GPU(s) visible", f"{device_count} CUDA GPU(s) visible but "
                     f"{section}.resources.gpus = {n}")
    return _ok("gpu", f"{device_count} GPU(s) visible, {section}.resources.gpus = {n}")


def variant_files(cuda_major: int) -> str:
    """The env files of a CUDA major version (``software.cuda``)."""
    return "envs/*-cu12.yaml" if cuda_major == 12 else "envs/*.yaml (the CUDA 13 envs, not *-cu12)"


def check_driver(driver: str | None, torch_cuda: str | None, cuda_variant: str | int | None = None) -> Check:
    """The NVIDIA driver against the CUDA the GPU envs are built for (:data:`CUDA_MIN_DRIVER`): ``cuda_variant`` is
    ``software.cuda`` (the envs/*-cu12.yaml variants with "12"); without it, the CUDA of the torch wheel here. A torch
    wheel of another CUDA than the variant (an env not built from the variant's file) is checked too."""
    wheel = parse_version(torch_cuda) if torch_cuda else None
    target = int(cuda_variant) if cuda_variant not in (None, "") else (wheel[0] if wheel else None)
    if target is None:
        return _skip("driver", "torch is a CPU build (torch.version.cuda is None)")
    built = f"CUDA {torch_cuda}" if torch_cuda else f"CUDA {target}.x"
    have = parse_version(driver)
    if have is None:
        return _skip("driver", f"envs built for {built}; no NVIDIA driver found (nvidia-smi)")
    need = CUDA_MIN_DRIVER.get(target)
    if need is None:
        return _skip("driver", f"driver {driver}; no minimum known for CUDA {target}.x")
    if have < need:
        older = [major for major, minimum in sorted(CUDA_MIN_DRIVER.items()) if have >= minimum]
        advice = (f'set software.cuda: "12" ({variant_files(12)}) or update the driver'
                  if older and older[-1] == 12 else "update the driver")
        what = f"the envs (software.cuda = \"{cuda_variant}\")" if cuda_variant not in (None, "") else "torch"
        return _fail("driver", f"driver {driver} < {_v(need)} needed by {built}",
                     f"NVIDIA driver {driver} is older than {_v(need)}, the minimum for CUDA {target}.x, and {what} "
                     f"{'are' if cuda_variant not in (None, '') else 'was'} built for {built}: torch will see no GPU "
                     f"({advice})")
    if wheel and wheel[0] != target and have < CUDA_MIN_DRIVER.get(wheel[0], (0,)):
        return _fail("driver", f"torch built for CUDA {torch_cuda}, software.cuda = \"{target}\"",
                     f"this env's torch was built for CUDA {torch_cuda}, which needs driver "
                     f"{_v(CUDA_MIN_DRIVER[wheel[0]])} (this node has {driver}), but software.cuda = \"{target}\": "
                     f"the env was not built from {variant_files(target)} (remove its .snakemake/conda env and run again)")
    return _ok("driver", f"driver {driver} >= {_v(need)} ({built})")


def check_bf16(wanted: bool, supported: bool | None) -> Check:
    if not wanted:
        return _skip("bf16", "the config does not ask for bf16")
    if supported is None:
        return _skip("bf16", "no GPU to ask")
    if not supported:
        return _fail("bf16", "not supported", "this GPU has no bf16 support (torch.cuda.is_bf16_supported() is "
                     "False) but training.bf16 = true")
    return _ok("bf16", "supported")


def weight_bytes(params_b: float, bytes_per_param: int = BF16_BYTES) -> float:
    return params_b * 1e9 * bytes_per_param


def kv_bytes_per_token(model_config: dict | None, bytes_per_value: int = BF16_BYTES) -> int | None:
    """K and V of every layer for one token, from a Hugging Face ``config.json`` (GQA's kv heads where set)."""
    c = model_config or {}
    layers, heads, hidden = c.get("num_hidden_layers"), c.get("num_attention_heads"), c.get("hidden_size")
    if not (layers and heads and hidden):
        return None
    kv_heads = c.get("num_key_value_heads") or heads
    head_dim = c.get("head_dim") or hidden // heads
    return 2 * layers * kv_heads * head_dim * bytes_per_value


def kv_per_token_estimate(params: float, bytes_per_value: int = BF16_BYTES) -> float:
    """KV bytes per token of a model known only by its size, an upper bound: no GQA, ``params = 12 h^2 L`` with
    ``h = 128 L`` (DeepSeek-LLM-7B: 6.91e9 -> 0.55 MB; its config.json gives 0.49 MB)."""
    layers = (params / (12 * 128**2)) ** (1 / 3)
    return 2 * layers * (128 * layers) * bytes_per_value


def kv_budget_bytes(weights: float, per_token: float | None, sequences: int, context: int) -> float:
    """KV cache for ``sequences`` sequences of ``context`` tokens (per token from config.json, else
    :func:`kv_per_token_estimate`)."""
    if per_token is None:
        per_token = kv_per_token_estimate(weights / BF16_BYTES)
    return float(per_token) * sequences * context


def auto_vllm_share(weights: float, kv_budget: float, gpu_memory: float, cap: float = AUTO_SHARE_CAP) -> float:
    """``vllm_gpu_memory_utilization: auto``: (weights + KV budget + :data:`VLLM_OVERHEAD_BYTES`) / GPU memory,
    rounded up to 0.01, at most ``cap``."""
    return min(cap, math.ceil(100 * (weights + kv_budget + VLLM_OVERHEAD_BYTES) / gpu_memory) / 100)


def check_memory(label: str, *, weights: float, gpu_memory: float | None, share: float | None, kv_budget: float,
                 colocate_trainer: bool, share_key: str) -> Check:
    """vLLM's share must hold the weights and the KV budget; a colocated trainer's copy of the weights must fit in
    the rest of the GPU. Without vLLM (``share`` None) the weights and KV must fit the GPU."""
    name = f"memory ({label})"
    if gpu_memory is None:
        return _skip(name, f"no GPU to measure; weights {weights / GB:.1f} GB")
    if share is None:
        need = weights + kv_budget
        if need > gpu_memory:
            return _fail(name, f"{need / GB:.1f} GB > {gpu_memory / GB:.1f} GB",
                         f"{label}: weights {weights / GB:.1f} GB + KV {kv_budget / GB:.1f} GB do not fit the GPU's "
                         f"{gpu_memory / GB:.1f} GB")
        return _ok(name, f"weights {weights / GB:.1f} GB + KV {kv_budget / GB:.1f} GB <= {gpu_memory / GB:.1f} GB")
    vllm = share * gpu_memory
    if vllm < weights + kv_budget:
        return _fail(name, f"vLLM share {share} x {gpu_memory / GB:.1f} GB = {vllm / GB:.1f} GB < weights "
                     f"{weights / GB:.1f} GB + KV {kv_budget / GB:.1f} GB",
                     f"{label}: {share_key} = {share} gives vLLM {vllm / GB:.1f} GB of the GPU's "
                     f"{gpu_memory / GB:.1f} GB, less than the weights ({weights / GB:.1f} GB) + KV cache "
                     f"({kv_budget / GB:.1f} GB); set {share_key}: auto or a larger share")
    rest = gpu_memory - vllm
    if colocate_trainer and rest < weights:
        return _fail(name, f"trainer's {rest / GB:.1f} GB < weights {weights / GB:.1f} GB",
                     f"{label}: {share_key} = {share} leaves the trainer {rest / GB:.1f} GB, less than its copy of "
                     f"the weights ({weights / GB:.1f} GB): a larger GPU or a smaller share")
    return _ok(name, f"{share_key} = {share}: vLLM {vllm / GB:.1f} GB >= weights {weights / GB:.1f} GB + KV "
               f"{kv_budget / GB:.1f} GB"
               + (f"; trainer {rest / GB:.1f} GB" if colocate_trainer else ""))


def check_cache(offline: bool, items: list[tuple[str, bool]]) -> Check:
    """``items``: (what, present in the cache or on disk)."""
    if not items:
        return _skip("cache", "nothing to fetch (local paths only)")
    missing = [what for what, present in items if not present]
    if not offline:
        return _skip("cache", f"HF_HUB_OFFLINE is not 1: {len(items)} item(s) may be fetched"
                     + (f" ({len(missing)} not cached)" if missing else ""))
    if missing:
        return _fail("cache", f"{len(missing)} of {len(items)} missing", f"HF_HUB_OFFLINE=1 and not in the cache: "
                     f"{', '.join(missing)} (fetch them on a node with network, into the same HF_HOME)")
    return _ok("cache", f"all {len(items)} model(s)/dataset(s) cached")


def lora_params(model_config: dict | None, r: int, targets: list[str], params_b: float) -> float:
    """LoRA parameters: r x (in + out) per targeted projection per layer; else :data:`LORA_FALLBACK_FRACTION`."""
    c = model_config or {}
    h, layers, heads = c.get("hidden_size"), c.get("num_hidden_layers"), c.get("num_attention_heads")
    if not (h and layers and heads):
        return LORA_FALLBACK_FRACTION * params_b * 1e9
    kv = (c.get("num_key_value_heads") or heads) * (c.get("head_dim") or h // heads)
    inter = c.get("intermediate_size") or 4 * h
    shapes = {"q_proj": (h, h), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (h, h), "gate_proj": (h, inter),
              "up_proj": (h, inter), "down_proj": (inter, h)}
    return float(layers * sum(r * sum(shapes[t]) for t in targets if t in shapes))


def run_disk_bytes(params_b: float, lora: float, checkpoints_keep: int | None, merged: bool) -> float:
    """One training run on disk: the kept checkpoints (adapter + optimizer) and the merged bf16 model."""
    keep = checkpoints_keep or 10  # keep-all: priced as 10
    return keep * lora * CHECKPOINT_BYTES_PER_LORA_PARAM + (weight_bytes(params_b) if merged else 0.0)


def check_disk(where: str, free: float, needed: float) -> Check:
    if free < needed:
        return _fail("disk", f"{free / GB:.1f} GB free < {needed / GB:.1f} GB", f"{where} has {free / GB:.1f} GB "
                     f"free, less than the {needed / GB:.1f} GB the checkpoints and merged models need")
    return _ok("disk", f"{free / GB:.1f} GB free >= {needed / GB:.1f} GB needed under {where}")


# ---------------------------------------------------------------------------------------------------- retries


def attempt_mem_mb(base: int, attempt: int, factor: float = 1.5, cap: int | None = None) -> int:
    """Memory of attempt ``attempt`` (1, 2, ...): ``base x factor^(attempt - 1)``, at most ``cap``."""
    value = int(math.ceil(base * factor ** (max(1, attempt) - 1)))
    return min(value, int(cap)) if cap else value


def attempt_runtime(base: int, attempt: int, factor: float = 1.5, cap: int | None = None) -> int:
    """Minutes of attempt ``attempt`` of a job that cannot resume (an evaluation): grows as memory does."""
    return attempt_mem_mb(base, attempt, factor, cap)


def input_error_guard(marker: str, logs: list[str], what: str) -> str:
    """A shell prefix (bash, ``set -e``): stop at once, exit 2, when ``marker`` exists (an earlier attempt of this
    job exited 2: a bad input or a failed doctor, which a retry cannot fix); otherwise run, and on exit 2 write the
    marker with the newest log's last lines. The workflow removes every marker when a fresh run starts."""
    m, newest = f'"{marker}"', " ".join(f'"{p}"' for p in logs)  # plain paths: no quotes inside the trap's quotes
    newest_log = f"$(ls -t {newest} 2>/dev/null | head -n 1)"
    record = f"mkdir -p \"$(dirname {m})\"; {{ echo \"exit 2\"; tail -n 3 \"{newest_log}\" 2>/dev/null || true; }}"
    record += f" > {m}"
    stop = (f"echo \"{what}: not retried: an earlier attempt exited 2 (a bad input or a failed pgrpo doctor; fix it "
            f"and run snakemake again): {marker}:\" >&2; cat {m} >&2; exit 2")
    return f"if [ -e {m} ]; then {stop}; fi; trap 'rc=$?; if [ $rc -eq 2 ]; then {record}; fi; exit $rc' EXIT; "
