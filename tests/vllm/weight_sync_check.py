"""TRL's colocated weight sync on vLLM's CPU backend, measured: ``python weight_sync_check.py MODEL_DIR OUT_JSON``.

Builds one in-process vLLM engine on ``MODEL_DIR`` (as TRL's colocate mode does: its ``external_launcher`` executor
keeps the model in the training process), then

1. compares vLLM's prompt log-probs with the transformers model's (the same weights: they must agree);
2. tries TRL 1.16's own sync, ``model.load_weights([(name, tensor)])``, and records how it fails;
3. perturbs every linear layer and the (tied) embedding of the transformers model, syncs the engine through
   :func:`pgrpo.grpo.trainer.cpu_vllm_weight_sync`, and compares the log-probs again, against the perturbed model
   and against the original one.

Writes the gaps (max |log p_vLLM - log p_transformers| over every prompt token) and the failure to ``OUT_JSON``.
A script rather than a test body: vLLM's engine belongs in a process of its own, under ``__main__``.
"""

import json
import os
import sys
import types

os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in this process, as TRL's colocate mode has it

TEXTS = [
    "Question: Ann has 7 apples. She buys 3 more. How many apples does Ann have?\nAnswer: 7+3=10\n#### 10",
    "Question: Bob has 12 pens. He loses 5. How many pens does Bob have?\nAnswer: 12-5=7\n#### 7",
    "Question: Cy has 4 cups. She finds 9 more. How many cups does Cy have?\nAnswer: 4+9=13\n#### 13",
]


def vllm_logprobs(llm, ids):
    from vllm import SamplingParams

    outputs = llm.generate([{"prompt_token_ids": x} for x in ids], SamplingParams(max_tokens=1, prompt_logprobs=0),
                           use_tqdm=False)
    return [[o.prompt_logprobs[i][x[i]].logprob for i in range(1, len(x))] for x, o in zip(ids, outputs)]


def hf_logprobs(model, ids):
    import torch

    out = []
    with torch.no_grad():
        for x in ids:
            lp = torch.log_softmax(model(torch.tensor([x])).logits[0].float(), -1)
            out.append([lp[i - 1, x[i]].item() for i in range(1, len(x))])
    return out


def gap(a, b) -> float:
    return max(abs(p - q) for u, v in zip(a, b) for p, q in zip(u, v))


def main(model_dir: str, out_json: str) -> None:
    import torch
    from pgrpo.grpo.trainer import cpu_vllm_weight_sync
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from vllm import LLM

    torch.set_num_threads(1)
    llm = LLM(model=model_dir, dtype="float32", max_model_len=128, enforce_eager=True, seed=0,
              kv_cache_memory_bytes=64 << 20)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    ids = [tokenizer(t)["input_ids"] for t in TEXTS]
    base = hf_logprobs(model, ids)
    record = {"base_gap": gap(vllm_logprobs(llm, ids), base)}

    runner = llm.llm_engine.model_executor.driver_worker.model_runner
    name, param = next((n, p) for n, p in model.named_parameters() if n.endswith("q_proj.weight"))
    try:  # what TRL 1.16's colocate sync_weights does for every parameter
        runner.model.load_weights([(name, param.data)])
        record["trl_load_weights"] = "ok"
    except Exception as exc:  # noqa: BLE001 - the failure is the measurement
        record["trl_load_weights"] = f"{type(exc).__name__}: {exc}"

    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("proj.weight") or "embed_tokens" in n:
                p.add_(0.05 * torch.randn(p.shape, generator=generator))
    moved = hf_logprobs(model, ids)
    generation = types.SimpleNamespace(
        mode="colocate", llm=llm, _iter_named_params=lambda: ((n, p.data) for n, p in model.named_parameters()))
    record["patched"] = cpu_vllm_weight_sync(generation)
    generation.sync_weights()
    synced = vllm_logprobs(llm, ids)
    record.update({"perturbation_gap": gap(moved, base), "synced_gap": gap(synced, moved),
                   "synced_vs_original_gap": gap(synced, base), "prompt_tokens": sum(len(x) - 1 for x in ids)})
    with open(out_json, "w") as fh:
        json.dump(record, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
