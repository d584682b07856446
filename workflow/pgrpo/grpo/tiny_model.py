"""The embedded default's model: a tiny causal LM and tokenizer built locally, warm-started to be RL-trainable.

The paper (Section 4.1) post-trains 1.5B-7B open-weight models; the embedded default replaces them with a ~1M-
parameter Qwen2-style model so that the whole pipeline (Sections 4.2-4.4) runs on a laptop CPU in minutes:

1. a byte-level BPE tokenizer (``tokenizers``; Qwen2's pre-tokenizer, so digits are single tokens and
   ``AutoTokenizer`` reloads it exactly) trained on the synthetic corpus of :mod:`pgrpo.grpo.data`, wrapped as
   ``PreTrainedTokenizerFast`` with pad/eos/bos;
2. a small ``Qwen2ForCausalLM`` (layers/hidden/heads from config) with tied embeddings, so the LoRA targets of
   Table 2 (q, k, v, o, gate, up, down projections) exist;
3. a short supervised warm start on ``sft.jsonl`` (loss on the completion only, label smoothing 0.3) that leaves
   the model competent but under-confident: greedy decoding solves about 65% of held-out problems, sampling at
   the training temperature 0.8 only about 25-30%, because the smoothed targets spread probability over wrong
   tokens. GRPO's binary reward then has room to climb by concentrating the policy (entropy falls as reward
   rises, the policy-concentration read-out of Section 4.2) -- a low-dimensional change that a few hundred LoRA
   steps can make, unlike new arithmetic skill. The saturation law of Corollary 13 needs ``R_0`` well below
   ``R_inf``; here ``R_0`` ~ 0.3 and greedy accuracy bounds the reachable ``R_inf`` from above only loosely.

:func:`load_model_and_tokenizer` is the generic loader used by training and evaluation (hub id or local path).

"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import Any, Sequence

from pgrpo.errors import InputError
from pgrpo.grpo.data import PROMPT_TEMPLATE, format_prompt
from pgrpo.grpo.rewards import is_correct

PAD, EOS, BOS = "<|pad|>", "<|endoftext|>", "<|bos|>"


#: Defaults of the ``tiny:`` config section (see config/config.yaml); a user's keys override these one level deep.
DEFAULT_TINY: dict[str, Any] = {
    "tokenizer": {"vocab_size": 512},
    "architecture": {
        "hidden_size": 128,
        "intermediate_size": 384,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 256,
    },
    "warmstart": {
        "steps": 600,
        "batch_size": 32,
        "lr": 3.0e-3,
        "weight_decay": 0.01,
        "warmup_steps": 50,
        "label_smoothing": 0.3,
        "eval_every": 200,
        "val_examples": 128,
    },
    "eval": {"examples": 256, "temperature": 0.8, "max_new_tokens": 48, "batch_size": 128},
    "threads": 1,
    "seed": 0,
}


def tiny_settings(cfg: dict | None) -> dict:
    """The ``tiny:`` config merged over :data:`DEFAULT_TINY` (sub-sections merged one level deep), validated."""
    cfg = cfg or {}
    out: dict[str, Any] = {}
    for key, default in DEFAULT_TINY.items():
        if isinstance(default, dict):
            given = cfg.get(key) or {}
            if not isinstance(given, dict):
                raise InputError(f"tiny.{key} must be a mapping, got {given!r}")
            unknown = set(given) - set(default)
            if unknown:
                raise InputError(f"tiny.{key}: unknown key(s) {sorted(unknown)} (known: {sorted(default)})")
            out[key] = {**default, **given}
        else:
            out[key] = cfg.get(key, default)
    unknown = set(cfg) - set(DEFAULT_TINY)
    if unknown:
        raise InputError(f"tiny: unknown key(s) {sorted(unknown)} (known: {sorted(DEFAULT_TINY)})")
    arch = out["architecture"]
    for k, v in arch.items():
        if not isinstance(v, int) or v < 1:
            raise InputError(f"tiny.architecture.{k} must be a positive integer, got {v!r}")
    if arch["hidden_size"] % arch["num_attention_heads"]:
        raise InputError("tiny.architecture.hidden_size must be divisible by num_attention_heads")
    if arch["num_attention_heads"] % arch["num_key_value_heads"]:
        raise InputError("tiny.architecture.num_attention_heads must be divisible by num_key_value_heads")
    ws = out["warmstart"]
    for k in ("steps", "batch_size", "eval_every", "val_examples"):
        if not isinstance(ws[k], int) or ws[k] < 0 or (k != "steps" and ws[k] < 1):
            raise InputError(f"tiny.warmstart.{k} must be a positive integer, got {ws[k]!r}")
    if not (isinstance(ws["label_smoothing"], (int, float)) and 0 <= ws["label_smoothing"] < 1):
        raise InputError(f"tiny.warmstart.label_smoothing must be in [0, 1), got {ws['label_smoothing']!r}")
    if not (isinstance(ws["lr"], (int, float)) and ws["lr"] > 0):
        raise InputError(f"tiny.warmstart.lr must be positive, got {ws['lr']!r}")
    ev = out["eval"]
    if not (isinstance(ev["temperature"], (int, float)) and ev["temperature"] > 0):
        raise InputError(f"tiny.eval.temperature must be positive, got {ev['temperature']!r}")
    for key in ("threads", "seed"):
        if not isinstance(out[key], int) or isinstance(out[key], bool) or out[key] < (1 if key == "threads" else 0):
            raise InputError(f"tiny.{key} must be a {'positive' if key == 'threads' else 'non-negative'} integer, "
                             f"got {out[key]!r}")
    if not isinstance(out["tokenizer"]["vocab_size"], int) or out["tokenizer"]["vocab_size"] < 300:
        raise InputError("tiny.tokenizer.vocab_size must be an integer >= 300 (256 bytes + specials + merges)")
    return out


#: Qwen2's pre-tokenizer split (transformers ``Qwen2Tokenizer``): every digit is a piece of its own.
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def build_tokenizer(texts: Sequence[str], vocab_size: int = 512):
    """A byte-level BPE tokenizer trained on ``texts``, with Qwen2's normalizer, pre-tokenizer and decoder.

    Digits are always single tokens and any text round-trips. The pipeline is exactly the one transformers'
    ``Qwen2Tokenizer`` rebuilds from ``vocab``/``merges`` when ``AutoTokenizer`` loads a saved Qwen2 model, so the
    tokenizer loaded back tokenizes identically. Special tokens: ``<|pad|>`` (id 0), ``<|endoftext|>`` (eos, id 1),
    ``<|bos|>`` (id 2); none is added automatically (as Qwen2): a prompt is encoded as is, a completion ends with eos.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, EOS, BOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, eos_token=EOS, bos_token=BOS, padding_side="left",
        clean_up_tokenization_spaces=False, model_max_length=DEFAULT_TINY["architecture"]["max_position_embeddings"],
    )


def build_model(tokenizer, arch: dict, seed: int = 0):
    """A freshly initialised ``Qwen2ForCausalLM`` sized by ``arch`` (tied input/output embeddings)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=arch["hidden_size"],
        intermediate_size=arch["intermediate_size"],
        num_hidden_layers=arch["num_hidden_layers"],
        num_attention_heads=arch["num_attention_heads"],
        num_key_value_heads=arch["num_key_value_heads"],
        max_position_embeddings=arch["max_position_embeddings"],
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
        use_cache=True,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())


def completion_target(answer: str) -> str:
    """The text the model is taught to write after the prompt: a space, then the gold worked solution."""
    return " " + answer.strip()


def encode_example(tokenizer, question: str, answer: str, template: str) -> tuple[list[int], list[int]]:
    """Token ids of (prompt, completion + eos), the prompt encoded exactly as GRPOTrainer encodes a string prompt."""
    prompt_ids = tokenizer(format_prompt(question, template))["input_ids"]
    completion_ids = tokenizer(completion_target(answer), add_special_tokens=False)["input_ids"]
    return prompt_ids, completion_ids + [tokenizer.eos_token_id]


def _batch(examples: Sequence[tuple[list[int], list[int]]], pad_id: int):
    """Right-padded input ids, attention mask and labels (-100 on prompt and padding)."""
    import torch

    width = max(len(p) + len(c) for p, c in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    for i, (p, c) in enumerate(examples):
        seq = p + c
        ids[i, : len(seq)] = torch.tensor(seq)
        mask[i, : len(seq)] = 1
        labels[i, len(p) : len(seq)] = torch.tensor(c)
    return ids, mask, labels


@dataclass
class Accuracy:
    """Held-out accuracy of a model: fraction correct under sampling (at ``temperature``) and greedy decoding."""

    sampled: float
    greedy: float
    n: int
    temperature: float
    mean_completion_tokens: float
    seconds: float


def generate_completions(model, tokenizer, prompts: Sequence[str], *, temperature: float | None,
                         max_new_tokens: int, batch_size: int = 128, seed: int = 0) -> tuple[list[str], list[int]]:
    """Decode completions for plain-text prompts (left-padded batches); ``temperature=None`` means greedy.

    Sampling uses the full distribution (top_k 0, top_p 1), as GRPOTrainer does by default.
    """
    import torch

    torch.manual_seed(seed)
    was_training = model.training
    model.eval()
    texts, lengths = [], []
    old_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        for start in range(0, len(prompts), batch_size):
            chunk = list(prompts[start : start + batch_size])
            enc = tokenizer(chunk, return_tensors="pt", padding=True)
            kwargs: dict[str, Any] = dict(max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                                          eos_token_id=tokenizer.eos_token_id)
            if temperature is None:
                kwargs.update(do_sample=False)
            else:
                kwargs.update(do_sample=True, temperature=float(temperature), top_k=0, top_p=1.0)
            with torch.no_grad():
                out = model.generate(**enc, **kwargs)
            new = out[:, enc["input_ids"].shape[1] :]
            for row in new.tolist():
                if tokenizer.eos_token_id in row:
                    row = row[: row.index(tokenizer.eos_token_id) + 1]
                lengths.append(len(row))
            texts.extend(tokenizer.batch_decode(new, skip_special_tokens=True))
    finally:
        tokenizer.padding_side = old_side
        model.train(was_training)
    return texts, lengths


def measure_accuracy(model, tokenizer, rows: Sequence[dict], *, temperature: float, max_new_tokens: int,
                     template: str = PROMPT_TEMPLATE, batch_size: int = 128, seed: int = 0,
                     greedy: bool = True) -> Accuracy:
    """Accuracy on ``rows`` ({"question", "answer"}) under sampling at ``temperature`` and (if asked) greedy."""
    t0 = time.perf_counter()
    prompts = [format_prompt(r["question"], template) for r in rows]
    golds = [r["answer"] for r in rows]
    sampled, lengths = generate_completions(model, tokenizer, prompts, temperature=temperature,
                                            max_new_tokens=max_new_tokens, batch_size=batch_size, seed=seed)
    acc_s = sum(is_correct(c, g) for c, g in zip(sampled, golds)) / len(rows)
    acc_g = float("nan")
    if greedy:
        greedy_out, _ = generate_completions(model, tokenizer, prompts, temperature=None,
                                             max_new_tokens=max_new_tokens, batch_size=batch_size)
        acc_g = sum(is_correct(c, g) for c, g in zip(greedy_out, golds)) / len(rows)
    return Accuracy(sampled=acc_s, greedy=acc_g, n=len(rows), temperature=float(temperature),
                    mean_completion_tokens=sum(lengths) / max(1, len(lengths)), seconds=time.perf_counter() - t0)


def warm_start(model, tokenizer, sft_rows: Sequence[dict], val_rows: Sequence[dict], settings: dict,
               seed: int = 0, template: str = PROMPT_TEMPLATE) -> dict:
    """Supervised pass on ``sft_rows`` (AdamW, linear warmup then cosine decay, loss on completion tokens only).

    Every ``eval_every`` steps (and at the end) the sampled accuracy on ``val_rows`` is recorded. Returns the
    history and timings.
    """
    import torch
    from tqdm.auto import tqdm

    ws, ev = settings["warmstart"], settings["eval"]
    rng = random.Random(seed)
    torch.manual_seed(seed)
    examples = [encode_example(tokenizer, r["question"], r["answer"], template) for r in sft_rows]
    opt = torch.optim.AdamW(model.parameters(), lr=ws["lr"], weight_decay=ws["weight_decay"], betas=(0.9, 0.98))
    total, warm = ws["steps"], max(1, ws["warmup_steps"])

    def lr_factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warm) / max(1, total - warm))))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    model.train()
    order: list[int] = []
    history: list[dict] = []
    t0 = time.perf_counter()
    for step in tqdm(range(total), desc="warm start", leave=False, mininterval=5):
        if len(order) < ws["batch_size"]:
            fresh = list(range(len(examples)))
            rng.shuffle(fresh)
            order.extend(fresh)
        idx, order = order[: ws["batch_size"]], order[ws["batch_size"] :]
        ids, mask, labels = _batch([examples[i] for i in idx], tokenizer.pad_token_id)
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100,
            label_smoothing=ws["label_smoothing"],
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        done = step + 1
        if val_rows and (done % ws["eval_every"] == 0 or done == total):
            acc = measure_accuracy(model, tokenizer, val_rows, temperature=ev["temperature"],
                                   max_new_tokens=ev["max_new_tokens"], template=template,
                                   batch_size=ev["batch_size"], seed=seed + done, greedy=False)
            history.append({"step": done, "loss": float(loss.item()), "val_sampled": acc.sampled,
                            "seconds": time.perf_counter() - t0})
    model.eval()
    return {"steps": total, "seconds": time.perf_counter() - t0, "history": history}
