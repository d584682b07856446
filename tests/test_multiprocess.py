"""Multi-process GRPO for real, on the CPU: ``accelerate launch --num_processes 2 -m pgrpo train`` with the shipped
DeepSpeed configs (config/accelerate/deepspeed_zero{2,3}.yaml), as the ``train`` rule launches it when
``training.resources.gpus > 1``. DeepSpeed's CPU accelerator talks over gloo; its shared-memory all-reduce op is
compiled (ninja, g++) on first use, about a minute once per machine (cached in ~/.cache/torch_extensions).

- ZeRO-2: one log row per optimizer step (2 micro-steps each, 2 processes), ``meta.json`` says 2 processes, the
  merged model reloads with the logits of base + adapter and differs from the base (the run learned);
- ZeRO-3 (parameters partitioned: each rank's checkpoint holds its own model-state shard): the same trajectory as
  ZeRO-2 (the same rewards, gradient norms to float rounding) and the same merged model;
- a ZeRO-2 and a ZeRO-3 run killed (SIGKILL of the launcher and both workers) after a checkpoint resume from it:
  every step exactly once, the rows up to the checkpoint untouched, the rest those of the uninterrupted run
  (optimizer shards, scheduler and both ranks' RNG restored);
- a finished run re-run (as after a kill during the merge) resumes from its final checkpoint and trains nothing.

Marked ``slow`` and ``multiprocess`` (``pytest -m multiprocess``: 7 launches, about 3 minutes on 2 busy cores, plus
about 80 s the first time on a machine for the shared-memory op); skipped where deepspeed is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]

if importlib.util.find_spec("deepspeed") is None:
    pytest.skip("deepspeed is not installed (pip install deepspeed==0.19.8)", allow_module_level=True)
torch = pytest.importorskip("torch")
pd = pytest.importorskip("pandas")
pytest.importorskip("trl")

from pgrpo.grpo.checkpoints import PARTIAL_LOG_NAME, last_complete_checkpoint, read_partial_log  # noqa: E402
from pgrpo.grpo.training_config import launch_command  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
PROCESSES = 2
STEPS = 12
# per_device 4 x 2 processes x 2 accumulation = 16 completions = 4 prompts x G=4 per optimizer step; one token of
# completion over a 15-token vocabulary: a random model answers "a+b=" right about 1 time in 15, so most steps have
# groups with a reward spread (a non-zero gradient), and the run's trajectory is not trivially flat.
TRAINING = {
    "max_steps": STEPS,
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 2,
    "max_completion_length": 1,
    "max_prompt_length": 16,
    "eval_steps": 4,
    "num_generations_eval": 4,
    "checkpoint_steps": 4,
    "learning_rate": 5e-3,
    "lr_scheduler_type": "constant",
    "lora": {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj", "up_proj"]},
}
COMPARED = ["reward", "reward_std", "frac_reward_zero_std", "completion_length", "eval_reward"]


def build_fixture(directory: Path) -> tuple[dict, dict]:
    """A random 2-layer Qwen2 (digits, '+', '=', space), its tokenizer, and "a+b=" problems with one-digit sums."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    specials = ["<pad>", "<eos>"]
    vocab = {t: i for i, t in enumerate(specials + [("\u0120" if c == " " else c) for c in "0123456789+= "])}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(specials)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<eos>", pad_token="<pad>")
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, eos_token_id=1,
                         pad_token_id=0, bos_token_id=None, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = 1
    model.save_pretrained(directory / "model")
    fast.save_pretrained(directory / "model")
    rng = random.Random(0)
    data = {}
    for role, n in (("train", 64), ("eval", 8)):
        rows = []
        for _ in range(n):
            a = rng.randint(0, 9)
            b = rng.randint(0, 9 - a)
            rows.append({"question": f"{a}+{b}=", "answer": f"#### {a + b}"})
        (directory / f"{role}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        data[role] = {"path": str(directory / f"{role}.jsonl"), "prompt_template": "{question}"}
    return {"name": "fixture", "id": None, "path": str(directory / "model")}, data


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_command(accelerate_config: str, model: dict, data: dict, out_dir: Path, seed: int = 5) -> list[str]:
    """The train rule's command for 2 GPUs (``launch_command`` + ``pgrpo train``), on a free rendezvous port."""
    command = launch_command({"accelerate_config": accelerate_config}, PROCESSES)
    accelerate = Path(sys.executable).with_name("accelerate")
    if command[0] == "accelerate" and accelerate.exists():
        command[0] = str(accelerate)  # this interpreter's accelerate, not whatever is first on PATH
    if "--main_process_port" not in command:  # two launches on one machine must not share the default 29500
        command[2:2] = ["--main_process_port", str(free_port())]
    return [*command, "train", "--model-json", json.dumps(model), "--data-json", json.dumps(data),
            "--training-json", json.dumps(TRAINING), "--G", "4", "--seed", str(seed), "--out-dir", str(out_dir)]


def environment() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "workflow"), *sys.path]),
            "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}


def run(command: list[str], log: Path, timeout: float = 420) -> None:
    with open(log, "w") as handle:
        result = subprocess.run(command, cwd=REPO_ROOT, env=environment(), stdout=handle, stderr=subprocess.STDOUT,
                                timeout=timeout, check=False)
    assert result.returncode == 0, f"{' '.join(command[:8])} ... failed:\n" + log.read_text()[-4000:]


def kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL the launcher and every worker at once, as a node failure or SLURM's job kill does (torch's elastic
    agent starts each worker in a session of its own, so killing the launcher's process group would not reach them)."""
    import psutil

    try:
        launcher = psutil.Process(process.pid)
        victims = [*launcher.children(recursive=True), launcher]
    except psutil.NoSuchProcess:
        victims = []
    for victim in victims:
        try:
            victim.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(victims, timeout=60)
    process.wait()


def logits(model_dir) -> "torch.Tensor":
    from transformers import AutoModelForCausalLM

    model = model_dir if not isinstance(model_dir, (str, Path)) else AutoModelForCausalLM.from_pretrained(model_dir)
    with torch.no_grad():
        return model(torch.tensor([[5, 12, 6, 13, 7, 14, 8]])).logits


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    return build_fixture(tmp_path_factory.mktemp("mp_fixture"))


@pytest.fixture(scope="module")
def zero2_run(fixture, tmp_path_factory):
    out = tmp_path_factory.mktemp("zero2") / "run"
    run(train_command("config/accelerate/deepspeed_zero2.yaml", *fixture, out), out.parent / "launch.log")
    return out


@pytest.fixture(scope="module")
def zero3_run(fixture, tmp_path_factory):
    out = tmp_path_factory.mktemp("zero3") / "run"
    run(train_command("config/accelerate/deepspeed_zero3.yaml", *fixture, out), out.parent / "launch.log")
    return out


def test_zero2_two_processes_one_row_per_optimizer_step(zero2_run, fixture):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    log = pd.read_csv(zero2_run / "log.csv")
    assert list(log["step"]) == list(range(1, STEPS + 1))  # 2 micro-steps x 2 processes -> one row
    assert log["reward"].notna().all() and log["grad_norm"].gt(0).any()
    assert list(log.dropna(subset=["eval_reward"])["step"]) == [4, 8, 12]
    meta = json.loads((zero2_run / "meta.json").read_text())
    assert meta["num_processes"] == PROCESSES and meta["device"] == "cpu" and meta["resumed_from_step"] == 0
    merged = logits(zero2_run / "merged")
    base = AutoModelForCausalLM.from_pretrained(fixture[0]["path"])
    adapter = PeftModel.from_pretrained(base, str(zero2_run / "checkpoints" / "adapter-final"))
    assert torch.allclose(merged, logits(adapter), atol=1e-5)
    assert (merged - logits(fixture[0]["path"])).abs().max() > 1e-3  # the run moved the weights


def test_zero3_matches_zero2(zero2_run, zero3_run):
    two, three = (pd.read_csv(run / "log.csv") for run in (zero2_run, zero3_run))
    assert list(three["step"]) == list(range(1, STEPS + 1))
    pd.testing.assert_frame_equal(two[COMPARED], three[COMPARED])
    assert three["grad_norm"].to_numpy() == pytest.approx(two["grad_norm"].to_numpy(), rel=1e-4, abs=1e-7)
    assert json.loads((zero3_run / "meta.json").read_text())["num_processes"] == PROCESSES
    last = Path("checkpoints") / f"checkpoint-{STEPS}" / f"global_step{STEPS}"
    shards = {run: sorted(p.name for p in (run / last).iterdir()) for run in (zero2_run, zero3_run)}
    assert shards[zero2_run] == ["mp_rank_00_model_states.pt"] + [f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt"
                                                                   for r in range(PROCESSES)]
    assert [s for s in shards[zero3_run] if "model_states" in s] == [
        f"zero_pp_rank_{r}_mp_rank_00_model_states.pt" for r in range(PROCESSES)]
    assert torch.allclose(logits(zero2_run / "merged"), logits(zero3_run / "merged"), atol=1e-5)


@pytest.mark.parametrize("stage", ["zero2", "zero3"])
def test_killed_run_resumes_every_step_once(stage, fixture, request, tmp_path):
    uninterrupted_run = request.getfixturevalue(f"{stage}_run")
    out = tmp_path / "run"
    command = train_command(f"config/accelerate/deepspeed_{stage}.yaml", *fixture, out)
    with open(tmp_path / "killed.log", "w") as handle:
        process = subprocess.Popen(command, cwd=REPO_ROOT, env=environment(), stdout=handle,
                                   stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline and process.poll() is None:
            found = last_complete_checkpoint(out / "checkpoints")
            if found and found[1] >= 4:
                break
            time.sleep(0.05)
        assert process.poll() is None, "the run ended before it could be killed:\n" + (
            (tmp_path / "killed.log").read_text()[-3000:])
    finally:
        kill_tree(process)
    assert not (out / "log.csv").exists() and not (out / "meta.json").exists()
    before = {r["step"]: r for r in read_partial_log(out / "checkpoints" / PARTIAL_LOG_NAME) if r["kind"] == "train"}
    _, resumed_at = last_complete_checkpoint(out / "checkpoints")
    assert resumed_at >= 4 and max(before) < STEPS

    run(command, tmp_path / "resumed.log")
    log = pd.read_csv(out / "log.csv")
    assert list(log["step"]) == list(range(1, STEPS + 1))
    for _, row in log[log["step"] <= resumed_at].iterrows():  # the first run's rows, untouched
        assert row["grad_norm"] == pytest.approx(before[row["step"]]["grad_norm"])
    assert json.loads((out / "meta.json").read_text())["resumed_from_step"] == resumed_at
    # the resumed steps are those of the uninterrupted run: optimizer shards, scheduler, both ranks' RNG restored
    uninterrupted = pd.read_csv(uninterrupted_run / "log.csv")
    pd.testing.assert_frame_equal(log[COMPARED], uninterrupted[COMPARED])
    assert log["grad_norm"].to_numpy() == pytest.approx(uninterrupted["grad_norm"].to_numpy(), rel=1e-4, abs=1e-7)


def test_rerun_of_a_finished_run_trains_no_step_past_max_steps(fixture, zero2_run, tmp_path):
    """A run killed after its final checkpoint (during the merge) is re-run: it resumes from that checkpoint and
    trains nothing (transformers 5 alone would take step max_steps + 1 before checking), the merged model is the
    same."""
    out = tmp_path / "run"
    shutil.copytree(zero2_run, out)
    for name in ("log.csv", "meta.json", "merged"):
        target = out / name
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    shutil.rmtree(out / "checkpoints" / "adapter-final")
    run(train_command("config/accelerate/deepspeed_zero2.yaml", *fixture, out), tmp_path / "rerun.log")
    log = pd.read_csv(out / "log.csv")
    assert list(log["step"]) == list(range(1, STEPS + 1))
    assert json.loads((out / "meta.json").read_text())["resumed_from_step"] == STEPS
    assert torch.allclose(logits(out / "merged"), logits(zero2_run / "merged"), atol=1e-6)
