"""Chat templates (issue: the paper's chat models were fed raw prompts): prompts rendered through a tokenizer's own
template, generation stopping at the template's end-of-turn token, on tokenizers and models built here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from pgrpo.errors import InputError  # noqa: E402
from pgrpo.grpo.chat import add_stop_tokens, end_of_turn_ids, stop_token_ids, use_chat_template  # noqa: E402
from pgrpo.grpo.data import load_problems, prompt_text  # noqa: E402
from pgrpo.grpo.generation import (  # noqa: E402
    generate_transformers,
    prompt_settings,
    request_seed,
    resolve_evaluation,
    tokenize_prompts,
    vllm_sampling_params,
)

QWEN_LIKE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
             "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# Nemotron-Mini's shape: a turn is closed by the marker that opens the next one, not by the eos token
NEMOTRON_LIKE = ("{% for m in messages %}<extra_id_1>{{ 'User' if m['role'] == 'user' else 'Assistant' }}\n"
                 "{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}<extra_id_1>Assistant\n{% endif %}")
# DeepSeek-chat's shape: the assistant's message ends with the eos token itself
DEEPSEEK_LIKE = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}User: {{ m['content'] }}\n\n"
                 "{% else %}Assistant: {{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}"
                 "{% if add_generation_prompt %}Assistant:{% endif %}")


def chat_tokenizer(directory: Path, template: str, extra: tuple[str, ...]) -> "object":
    """A byte-level BPE tokenizer (pgrpo.grpo.tiny_model) with added special tokens and a chat template, saved and
    loaded back with AutoTokenizer (as a hub model's tokenizer would be)."""
    from pgrpo.grpo.tiny_model import build_tokenizer
    from transformers import AutoTokenizer

    corpus = [f"Ann has {i} pens. How many pens? Please reason step by step #### {i}" for i in range(60)]
    tokenizer = build_tokenizer(corpus, vocab_size=300)
    tokenizer.add_tokens(list(extra), special_tokens=True)
    tokenizer.chat_template = template
    tokenizer.save_pretrained(directory)
    return AutoTokenizer.from_pretrained(directory)


@pytest.fixture(scope="module")
def qwen_tok(tmp_path_factory):
    return chat_tokenizer(tmp_path_factory.mktemp("qwen_tok"), QWEN_LIKE, ("<|im_start|>", "<|im_end|>"))


def test_end_of_turn_is_read_off_the_template(tmp_path, qwen_tok):
    im_end = qwen_tok.convert_tokens_to_ids("<|im_end|>")
    assert im_end != qwen_tok.eos_token_id
    assert end_of_turn_ids(qwen_tok) == [im_end]
    nemotron = chat_tokenizer(tmp_path / "nemotron", NEMOTRON_LIKE, ("<extra_id_0>", "<extra_id_1>"))
    assert end_of_turn_ids(nemotron) == [nemotron.convert_tokens_to_ids("<extra_id_1>")]
    deepseek = chat_tokenizer(tmp_path / "deepseek", DEEPSEEK_LIKE, ())
    assert end_of_turn_ids(deepseek) == [deepseek.eos_token_id]
    # stop ids: the model's eos, the tokenizer's eos, the end-of-turn; no repeats; nothing extra without chat
    assert stop_token_ids(qwen_tok, None, chat=True) == [qwen_tok.eos_token_id, im_end]
    assert stop_token_ids(qwen_tok, [7, qwen_tok.eos_token_id], chat=True) == [7, qwen_tok.eos_token_id, im_end]
    assert stop_token_ids(qwen_tok, None, chat=False) == [qwen_tok.eos_token_id]
    assert stop_token_ids(deepseek, None, chat=True) == [deepseek.eos_token_id]


def test_chat_setting_errors_name_the_key(tmp_path):
    from pgrpo.grpo.tiny_model import build_tokenizer

    plain = build_tokenizer(["a b c 1 2 3"] * 5, vocab_size=300)
    with pytest.raises(InputError, match=r"benchmarks\.math-500\.chat_template is true"):
        use_chat_template(True, plain, "benchmarks.math-500")
    assert use_chat_template("auto", plain, "evaluation") is False
    with pytest.raises(InputError, match="evaluation.chat_template must be"):
        use_chat_template("yes", plain, "evaluation")


def test_paper_prompts_go_through_the_models_chat_template(repo_root, tmp_path, qwen_tok):
    """data.train of config/paper.yaml, on a local copy of GSM8K-style rows: each prompt is a conversation that
    the tokenizer's template renders as <|im_start|>user ... <|im_end|> then the assistant's opening."""
    paper = yaml.safe_load((repo_root / "config" / "paper.yaml").read_text())
    rows = [{"question": "Ann has 3 pens. She buys 4 more. How many pens?", "answer": "3+4=7\n#### 7"}]
    local = tmp_path / "gsm8k.jsonl"
    local.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for role in ("train", "eval"):
        spec = dict(paper["data"][role], id=None, path=str(local), max_examples=None)
        ds = load_problems(spec, role, tokenizer=qwen_tok)
        conversation = ds[0]["prompt"]
        content = ("Ann has 3 pens. She buys 4 more. How many pens?\nPlease reason step by step, and put your final "
                   "answer within \\boxed{}.")
        assert conversation == [{"role": "user", "content": content}]
        assert prompt_text(conversation, qwen_tok) == f"<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n"
    # evaluation: the same template and instruction, as token ids without a second BOS
    settings = resolve_evaluation(paper["evaluation"])
    template, chat, where = prompt_settings({"name": "math-500"}, settings)
    assert (chat, where) == (True, "evaluation") and template == paper["data"]["train"]["prompt_template"]
    ids = tokenize_prompts([rows[0]["question"]], qwen_tok, template, chat, where)
    expected = qwen_tok(f"<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
    assert ids == [list(expected["input_ids"])]
    # a benchmark's own setting wins over the evaluation section's
    assert prompt_settings({"name": "x", "chat_template": False, "prompt_template": "Q: {question}"}, settings) == (
        "Q: {question}", False, "benchmarks.x")


def test_paper_grid_has_no_chat_model_without_its_template(repo_root):
    from pgrpo.config import chat_template_warnings, load_config

    paper = load_config(repo_root / "config" / "paper.yaml")
    assert chat_template_warnings(paper) == []
    paper["evaluation"]["chat_template"] = False
    paper["data"]["train"]["chat_template"] = False
    warnings = chat_template_warnings(paper)
    assert any("data.train.chat_template" in w and "deepseek-llm-7b-chat" in w for w in warnings)
    assert any("evaluation.chat_template" in w for w in warnings)


def constant_chat_model(directory: Path, tokenizer, favoured: str, logit: float = 9.0) -> Path:
    """A random-init Qwen2 whose next-token logits ignore the input: ``logit`` for ``favoured``, 0 elsewhere (every
    layer's output projections zero, all embeddings one, so the LM head's row sums are the logits)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                         tie_word_embeddings=False, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.embed_tokens.weight.fill_(1.0)
        model.lm_head.weight.zero_()
        model.lm_head.weight[tokenizer.convert_tokens_to_ids(favoured)] = logit / config.hidden_size
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def test_generation_stops_at_the_end_of_turn(tmp_path, qwen_tok):
    """A model that always writes <|im_end|>: with the template's stop ids every completion is that one token; with
    the eos alone it runs on to max_new_tokens (the raw-prompt failure of the issue)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(constant_chat_model(tmp_path / "m", qwen_tok, "<|im_end|>"))
    ids = tokenize_prompts(["Ann has 3 pens. How many pens?"] * 3, qwen_tok, None, True)
    common = dict(num_samples=4, temperature=0.8, top_p=1.0, max_new_tokens=12, batch_size=6, seed=0)
    stops = stop_token_ids(qwen_tok, model.generation_config.eos_token_id, chat=True)
    stopped = generate_transformers(model, qwen_tok, ids, stop_ids=stops, **common)
    assert all(n == 1 for row in stopped.tokens for n in row)
    assert not any(t for row in stopped.truncated for t in row)
    ran_on = generate_transformers(model, qwen_tok, ids, **common)
    assert sum(n for row in ran_on.tokens for n in row) / 12 > 12 - 0.5
    # add_stop_tokens writes them into the generation config (what TRL stops at and a merged model saves)
    assert add_stop_tokens(model, qwen_tok, chat=True) == stops
    assert model.generation_config.eos_token_id == stops


def test_evaluate_reads_the_prepared_file_and_stops_at_the_end_of_turn(tmp_path, qwen_tok):
    from pgrpo.stages.evaluate import run_evaluate
    from pgrpo.stages.prepare import run_prepare_benchmark

    model_dir = constant_chat_model(tmp_path / "model", qwen_tok, "<|im_end|>")
    source = tmp_path / "bench.jsonl"
    source.write_text("".join(json.dumps({"question": f"Ann has {i} pens. How many pens?", "answer": f"#### {i}"})
                              + "\n" for i in range(1, 7)))
    spec = {"path": str(source), "question_field": "question", "answer_field": "answer", "answer_format": "gsm8k",
            "chat_template": True}
    prepared = tmp_path / "prepared" / "bench.jsonl"
    run_prepare_benchmark("bench", spec, str(prepared), seed=0)
    source.unlink()  # the evaluation job reads the prepared file, never the source
    settings = {"num_samples": 2, "pass_at": [1], "max_new_tokens": 8, "batch_size": 4, "backend": "transformers"}
    record = run_evaluate({"name": "m", "id": None, "path": str(model_dir)}, None, "bench", spec, settings,
                          str(tmp_path / "out.json"), prepared=str(prepared))
    assert record["n_problems"] == 6 and record["chat_template_used"] is True
    assert qwen_tok.convert_tokens_to_ids("<|im_end|>") in record["stop_token_ids"]
    assert record["mean_completion_tokens"] == 1.0 and record["truncated_fraction"] == 0.0


def test_vllm_requests_each_get_their_own_seed_and_the_stop_ids():
    """The vLLM path's SamplingParams (vLLM itself is not installed here: a recording stand-in takes its place)."""

    class Recorded:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    params = vllm_sampling_params(Recorded, 3, num_samples=5, temperature=0.8, top_p=1.0, max_new_tokens=786,
                                  seed=11, stop_ids=[2, 9], indices=[4, 17, 230])
    assert [p.kwargs["seed"] for p in params] == [(11 * 1_000_003 + 5 * i) % (2**31 - 1) for i in (4, 17, 230)]
    assert len({p.kwargs["seed"] for p in params}) == 3
    assert all(p.kwargs["stop_token_ids"] == [2, 9] and p.kwargs["n"] == 5 for p in params)
    assert request_seed(11, 4, 5) == params[0].kwargs["seed"]
    # vLLM seeds sample j of a request with seed + j: rows num_samples apart share no sample seed
    samples = [request_seed(11, i, 5) + j for i in range(100) for j in range(5)]
    assert len(set(samples)) == len(samples)
