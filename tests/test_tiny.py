"""The embedded default's tiny model: tokenizer, architecture, warm start, save/load, and the generic loader."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from pgrpo.errors import InputError  # noqa: E402
from pgrpo.grpo.data import format_prompt, read_jsonl  # noqa: E402
from pgrpo.grpo.models import load_model_and_tokenizer
from pgrpo.grpo.rewards import is_correct  # noqa: E402
from pgrpo.grpo.tiny_model import build_tokenizer, completion_target, generate_completions, tiny_settings
from pgrpo.stages.model import (
    run_build_tiny,
    run_make_synthetic,  # noqa: E402
)

SMALL_DATA = {"seed": 3, "sizes": {"sft": 400, "val": 16, "train": 32, "test": 24}}
SMALL_TINY = {
    "architecture": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 128},
    "warmstart": {"steps": 12, "batch_size": 8, "eval_every": 6, "val_examples": 8, "warmup_steps": 2},
    "eval": {"examples": 24, "max_new_tokens": 24, "temperature": 0.8},
}


def qwen2_parameter_count(vocab: int, h: int, inter: int, layers: int, heads: int, kv_heads: int) -> int:
    """Closed-form parameter count of a Qwen2 decoder with tied embeddings (q/k/v have biases, o has none)."""
    head_dim = h // heads
    kv = kv_heads * head_dim
    attention = (h * h + h) + 2 * (h * kv + kv) + h * h
    mlp = 3 * h * inter
    norms = 2 * h
    return vocab * h + layers * (attention + mlp + norms) + h


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    run_make_synthetic(str(root / "data"), SMALL_DATA)
    record = run_build_tiny(str(root / "data"), str(root / "model"), SMALL_TINY, seed=0)
    return root, record


def test_build_writes_loadable_model_and_record(built):
    from transformers import AutoModelForCausalLM

    root, record = built
    model_dir = root / "model"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "warmstart.json"):
        assert (model_dir / name).is_file(), name
    assert not [p for p in root.iterdir() if p.name.startswith(".model")]  # no temporary left behind
    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    a = SMALL_TINY["architecture"]
    expected = qwen2_parameter_count(record["vocab_size"], a["hidden_size"], a["intermediate_size"],
                                     a["num_hidden_layers"], a["num_attention_heads"], a["num_key_value_heads"])
    assert sum(p.numel() for p in model.parameters()) == expected == record["parameters"]
    for proj in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"):  # Table 2 targets
        assert any(n.endswith(proj) for n, _ in model.named_modules()), proj
    saved = json.loads((model_dir / "warmstart.json").read_text())
    assert saved["heldout"]["n"] == 24 and saved["heldout"]["temperature"] == 0.8
    assert 0.0 <= saved["heldout"]["sampled"] <= 1.0 and 0.0 <= saved["heldout"]["greedy"] <= 1.0
    assert saved["warmstart"]["steps"] == 12 and [h["step"] for h in saved["warmstart"]["history"]] == [6, 12]


def test_tokenizer_round_trips_after_reload(built):
    from transformers import AutoTokenizer

    root, _ = built
    rows = read_jsonl(root / "data" / "sft.jsonl")
    fresh = build_tokenizer([format_prompt(r["question"]) + completion_target(r["answer"]) for r in rows], 512)
    loaded = AutoTokenizer.from_pretrained(str(root / "model"))
    texts = [format_prompt(r["question"]) + completion_target(r["answer"]) for r in rows[:50]]
    texts += ["Zoë paid $1,234.50 (≈ €1.1k)\n\tdone.", "  two  spaces ", "#### -17"]
    for text in texts:
        ids = loaded(text)["input_ids"]
        assert ids == fresh(text)["input_ids"]  # reload tokenizes exactly as built
        assert loaded.decode(ids) == text  # lossless
    # digits are single tokens
    pieces = loaded.convert_ids_to_tokens(loaded("12345")["input_ids"])
    assert pieces == ["1", "2", "3", "4", "5"]
    assert loaded.eos_token == "<|endoftext|>" and loaded.pad_token == "<|pad|>" and loaded.bos_token == "<|bos|>"
    assert len({loaded.eos_token_id, loaded.pad_token_id, loaded.bos_token_id}) == 3
    assert loaded("Question: hi")["input_ids"][0] != loaded.bos_token_id  # nothing added automatically


def test_loader_path_overrides_id_and_generates(built):
    root, _ = built
    model, tok = load_model_and_tokenizer({"name": "tiny", "id": "no-such/model", "path": str(root / "model")})
    rows = read_jsonl(root / "data" / "test.jsonl")[:4]
    texts, lengths = generate_completions(model, tok, [format_prompt(r["question"]) for r in rows],
                                          temperature=0.8, max_new_tokens=8)
    assert len(texts) == 4 and all(1 <= n <= 8 for n in lengths)
    assert all(is_correct(t, r["answer"]) in (True, False) for t, r in zip(texts, rows))


def test_loader_errors(tmp_path):
    with pytest.raises(InputError, match=r"models.tiny.path: no such model directory: .*missing"):
        load_model_and_tokenizer({"name": "tiny", "id": None, "path": str(tmp_path / "missing")})
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="models.tiny.path: .*has no config.json"):
        load_model_and_tokenizer({"name": "tiny", "path": str(tmp_path / "empty")})
    with pytest.raises(InputError, match="models.x: set either"):
        load_model_and_tokenizer({"name": "x", "id": None, "path": None})


def test_loader_offline_hub_id_not_cached(tmp_path):
    code = textwrap.dedent(
        """
        from pgrpo.errors import InputError
        from pgrpo.grpo.models import load_model_and_tokenizer
        try:
            load_model_and_tokenizer({"name": "r1", "id": "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "path": None})
        except InputError as e:
            print("INPUTERROR:" + str(e))
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    lines = [line for line in out.stdout.splitlines() if line.startswith("INPUTERROR:")]
    assert len(lines) == 1, out.stdout + out.stderr
    assert "models.r1.id" in lines[0] and "DeepSeek-R1-Distill-Qwen-1.5B" in lines[0] and "models.r1.path" in lines[0]


def test_bad_inputs_fail_before_work_and_write_nothing(tmp_path):
    with pytest.raises(InputError, match="tiny data_dir: no such file"):
        run_build_tiny(str(tmp_path / "nodata"), str(tmp_path / "model"), SMALL_TINY)
    data = tmp_path / "data"
    run_make_synthetic(str(data), SMALL_DATA)
    (data / "test.jsonl").write_text(json.dumps({"q": "x", "answer": "#### 1"}) + "\n")
    with pytest.raises(InputError, match=r"test.jsonl: row 1 has no 'question'"):
        run_build_tiny(str(data), str(tmp_path / "model"), SMALL_TINY)
    assert not (tmp_path / "model").exists()


@pytest.mark.parametrize(
    "cfg, key",
    [
        ({"architecture": {"hidden_size": 30, "num_attention_heads": 4}}, "tiny.architecture.hidden_size"),
        ({"architecture": {"num_key_value_heads": 3}}, "num_attention_heads must be divisible"),
        ({"architecture": {"layers": 2}}, r"tiny.architecture: unknown key\(s\) \['layers'\]"),
        ({"warmstart": {"lr": -1}}, "tiny.warmstart.lr"),
        ({"warmstart": {"label_smoothing": 1.0}}, "tiny.warmstart.label_smoothing"),
        ({"eval": {"temperature": 0}}, "tiny.eval.temperature"),
        ({"tokenizer": {"vocab_size": 100}}, "tiny.tokenizer.vocab_size"),
        ({"bogus": 1}, r"tiny: unknown key\(s\) \['bogus'\]"),
        ({"threads": 0}, "tiny.threads must be a positive integer"),
    ],
)
def test_settings_validation(cfg, key):
    with pytest.raises(InputError, match=key):
        tiny_settings(cfg)


@pytest.mark.slow
def test_default_build_lands_in_rl_trainable_range(tmp_path):
    """The full default build (minutes on one thread) leaves room for GRPO: 15-45% held-out under sampling."""
    run_make_synthetic(str(tmp_path / "data"), {})
    record = run_build_tiny(str(tmp_path / "data"), str(tmp_path / "model"), {}, seed=0)
    assert 0.15 <= record["heldout"]["sampled"] <= 0.45
    assert record["heldout"]["greedy"] >= record["heldout"]["sampled"] - 0.05
