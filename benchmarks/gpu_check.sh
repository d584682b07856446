#!/usr/bin/env bash
# GPU check for whoever has one CUDA GPU (no hub access needed; about 5-10 minutes):
#
#   bash benchmarks/gpu_check.sh [WORK_DIR]        # from the repository root, in the train env (+ vllm, deepspeed)
#
# Builds a small hub-format model locally (a 4-layer Qwen2 with a chat template whose end-of-turn is not its eos)
# and synthetic GSM8K-style data, then checks, one line each (PASS/FAIL name seconds: detail):
#   cuda            a CUDA device is visible and does bf16 matmuls
#   grpo_vllm       two bf16 GRPO steps (TRL + LoRA) with vLLM colocate generation; meta.json records the
#                   objective and a vLLM engine seed of training seed + process index
#   merge_reload    the merged model (merged/) reloads with transformers and generates
#   vllm_evaluate   a benchmark prepared once, then pass@k of the merged model with the vLLM backend, stopping at
#                   the chat template's end-of-turn
#   zero2_step      two GRPO steps under `accelerate launch` with DeepSpeed ZeRO-2 (config/accelerate/)
#   throughput      the cost terms pgrpo plan assumes, measured (one "calibration" line each): the decode step
#                   at the training engine's concurrency (16) and at an evaluation job's (256), the KV-cache read,
#                   the weight sync into vLLM, the merge, an adapter save, a checkpoint; then the terms still
#                   assumed and a plan.throughput.<gpu> entry to paste (with its `measured:` list)
# Exits 0 when every check passes, 1 when one fails, 2 without CUDA. Logs: WORK_DIR/<check>.log.
set -u
cd "$(dirname "$0")/.." || exit 2
export PYTHONPATH="workflow${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export VLLM_CONFIGURE_LOGGING=0 PYTHONUNBUFFERED=1
WORK="${1:-$(mktemp -d -t pgrpo_gpu_check.XXXXXX)}"
mkdir -p "$WORK"
PY="${PYTHON:-python}"
failed=0

check() {  # check NAME COMMAND...: one line, PASS or FAIL, with the log's last line on failure
    local name=$1 start=$SECONDS
    shift
    if "$@" >"$WORK/$name.log" 2>&1; then
        echo "PASS $name $((SECONDS - start)) s: $(tail -n 1 "$WORK/$name.log")"
    else
        echo "FAIL $name $((SECONDS - start)) s: $(tail -n 1 "$WORK/$name.log") (log: $WORK/$name.log)"
        failed=1
    fi
}

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
    echo "FAIL cuda: no CUDA device is visible (torch.cuda.is_available() is False); this check needs one GPU"
    exit 2
fi

check cuda "$PY" -c "
import torch
x = torch.randn(1024, 1024, device='cuda', dtype=torch.bfloat16)
assert torch.isfinite(x @ x).all()
print(torch.cuda.get_device_name(0), 'bf16', torch.cuda.is_bf16_supported())
"

# The model, tokenizer (chat template, <|im_end|> != eos) and data, built here.
cat >"$WORK/build.py" <<'EOF'
import json, sys
from pathlib import Path
from pgrpo.grpo.data import read_jsonl
from pgrpo.grpo.tiny_model import build_model, build_tokenizer
from pgrpo.stages.model import run_make_synthetic

work = Path(sys.argv[1])
run_make_synthetic(str(work / "data"), {"sizes": {"sft": 200, "val": 16, "train": 64, "test": 32, "ood": 16}})
texts = [r["question"] + " " + r["answer"] for r in read_jsonl(work / "data" / "train.jsonl")]
tokenizer = build_tokenizer(texts, vocab_size=512)
tokenizer.add_tokens(["<|im_start|>", "<|im_end|>"], special_tokens=True)
tokenizer.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                           "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
tokenizer.model_max_length = 2048
arch = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "max_position_embeddings": 2048}
model = build_model(tokenizer, arch, seed=0)
model.save_pretrained(work / "model")
tokenizer.save_pretrained(work / "model")
print(f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, vocab {len(tokenizer)}")
EOF
check build "$PY" "$WORK/build.py" "$WORK"

MODEL="{\"name\": \"check\", \"id\": null, \"path\": \"$WORK/model\"}"
DATA="{\"train\": {\"path\": \"$WORK/data/train.jsonl\", \"chat_template\": true},
       \"eval\": {\"path\": \"$WORK/data/test.jsonl\", \"chat_template\": true, \"max_examples\": 8}}"
TRAIN='{"max_steps": 2, "per_device_train_batch_size": 8, "gradient_accumulation_steps": 1,
        "max_completion_length": 64, "max_prompt_length": 128, "eval_steps": 2, "num_generations_eval": 4,
        "checkpoint_steps": 2, "learning_rate": 1e-4, "bf16": true, "beta": 0.005,
        "resources": {"gpus": 1, "threads": 4}'

check grpo_vllm bash -c "
$PY -m pgrpo train --model-json '$MODEL' --data-json '$DATA' \
    --training-json '$TRAIN, \"use_vllm\": true, \"vllm_mode\": \"colocate\", \"vllm_gpu_memory_utilization\": 0.3}' \
    --G 4 --seed 42 --out-dir '$WORK/run_vllm' &&
$PY - '$WORK/run_vllm' <<'EOF'
import json, sys
import pandas as pd
run = sys.argv[1]
meta = json.load(open(f'{run}/meta.json'))
log = pd.read_csv(f'{run}/log.csv')
objective = meta['objective']
assert meta['use_vllm'] and objective['use_vllm'], 'not a vLLM run'
assert 'seed=42 + process index' in objective['generation_seed'], objective['generation_seed']
assert objective['use_bias_correction_kl'] is False and objective['vllm_importance_sampling_mode'] == 'token_truncate'
assert meta['stop_token_ids'] and len(meta['stop_token_ids']) == 2, meta['stop_token_ids']
assert list(log['step'][log['step'] > 0]) == [1, 2], list(log['step'])
print('2 bf16 steps with vLLM colocate; reward', round(float(log['reward'].dropna().mean()), 3),
      '| vllm IS ratio max', log.get('vllm_importance_sampling_ratio_max', pd.Series(dtype=float)).max())
EOF
"

check merge_reload "$PY" - "$WORK/run_vllm/merged" <<'EOF'
import sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
path = sys.argv[1]
tok = AutoTokenizer.from_pretrained(path)
model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).cuda()
eos = model.generation_config.eos_token_id
im_end = tok.convert_tokens_to_ids("<|im_end|>")
assert im_end in (eos if isinstance(eos, list) else [eos]), f"merged generation_config eos {eos} lacks <|im_end|>"
ids = tok.apply_chat_template([{"role": "user", "content": "Ann has 3 pens. How many?"}], add_generation_prompt=True,
                              return_tensors="pt", return_dict=True)["input_ids"].cuda()
out = model.generate(ids, max_new_tokens=8, do_sample=False)
assert out.shape[1] > ids.shape[1]
print("merged model reloads (bf16) and generates; stops at", eos)
EOF

check vllm_evaluate bash -c "
BENCH='{\"path\": \"$WORK/data/ood.jsonl\", \"question_field\": \"question\", \"answer_field\": \"answer\",
        \"answer_format\": \"gsm8k\", \"max_examples\": 16, \"chat_template\": true}'
$PY -m pgrpo prepare-benchmark --benchmark ood --benchmark-json \"\$BENCH\" --seed 0 --out '$WORK/bench/ood.jsonl' &&
$PY -m pgrpo evaluate --model-json '$MODEL' --variant-path '$WORK/run_vllm/merged' --benchmark ood \
    --benchmark-json \"\$BENCH\" --prepared '$WORK/bench/ood.jsonl' --json '$WORK/eval.json' \
    --evaluation-json '{\"backend\": \"vllm\", \"num_samples\": 5, \"max_new_tokens\": 64,
                        \"vllm_gpu_memory_utilization\": 0.5, \"resources\": {\"gpus\": 1}}' &&
$PY -c \"
import json
r = json.load(open('$WORK/eval.json'))
assert r['backend'] == 'vllm' and r['chat_template_used'] and r['n_problems'] == 16, r
print('vLLM pass@1', round(r['pass@1'], 3), 'pass@5', round(r['pass@5'], 3), 'stops at', r['stop_token_ids'])
\"
"

check zero2_step bash -c "
$PY -c 'import deepspeed' &&
accelerate launch --config_file config/accelerate/deepspeed_zero2.yaml --num_processes 1 -m pgrpo train \
    --model-json '$MODEL' --data-json '$DATA' --training-json '$TRAIN}' --G 4 --seed 42 \
    --out-dir '$WORK/run_zero2' &&
$PY -c \"
import json
m = json.load(open('$WORK/run_zero2/meta.json'))
assert m['max_steps'] == 2, m['max_steps']
print('2 GRPO steps under DeepSpeed ZeRO-2 (accelerate launch), num_processes', m['num_processes'])
\"
"

check throughput "$PY" - "$WORK/model" "$WORK/calibration" <<'EOF'
# The terms pgrpo plan assumes (pgrpo.grpo.plan_models.COST_TERMS), measured on this GPU; each line says the
# plan.throughput key it calibrates. A term that cannot be measured here says why and stays an assumption.
import json, os, shutil, sys, time, torch
from pathlib import Path
from transformers import AutoModelForCausalLM, AutoTokenizer
path, out = sys.argv[1], Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
n, steps = 16, 256  # n: TRL's colocated engine at Table 2's batch (4 x 1 x 4 sequences at once)
measured, keys = [], {}
tok = AutoTokenizer.from_pretrained(path)
prompt = tok("Ann has 3 pens. She buys 4 more. How many pens?")["input_ids"]
model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).cuda().eval()
cfg = model.config
kv_per_token = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * (cfg.hidden_size // cfg.num_attention_heads) * 2
ids = torch.tensor([prompt] * n, device="cuda")
kw = dict(max_new_tokens=steps, min_new_tokens=steps, do_sample=True, temperature=0.8, top_k=0)
model.generate(ids, **kw)
torch.cuda.synchronize(); t = time.perf_counter(); model.generate(ids, **kw); torch.cuda.synchronize()
hf_ms = (time.perf_counter() - t) / steps * 1000


def timed(fn):
    torch.cuda.synchronize(); t = time.perf_counter(); fn(); torch.cuda.synchronize()
    return time.perf_counter() - t


# adapter save, checkpoint and merge: a LoRA on every projection, saved as the trainer saves it
try:
    from peft import LoraConfig, get_peft_model
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj"]
    lora = get_peft_model(model, LoraConfig(r=16, lora_alpha=64, target_modules=targets))
    lora_params = {k: p for k, p in lora.named_parameters() if "lora_" in k}
    lora_bytes = sum(p.numel() for p in lora_params.values()) * 4
    save_s = timed(lambda: lora.save_pretrained(out / "adapter"))
    moments = {k: torch.zeros_like(p, dtype=torch.float32) for k, p in lora_params.items()}
    ckpt_s = timed(lambda: torch.save({"exp_avg": moments, "exp_avg_sq": moments}, out / "optimizer.pt"))
    merged = lora.merge_and_unload()
    merge_s = timed(lambda: merged.save_pretrained(out / "merged"))
    merged_bytes = sum(f.stat().st_size for f in (out / "merged").glob("*.safetensors"))
    disk_gbps = merged_bytes / merge_s / 1e9
    print(f"calibration adapter_save: {save_s:.2f} s for {lora_bytes / 1e6:.1f} MB -> "
          f"plan.throughput.<gpu>.io_fixed_s <= {save_s:.1f}")
    print(f"calibration checkpoint: {ckpt_s:.2f} s for {2 * lora_bytes / 1e6:.1f} MB of Adam moments")
    print(f"calibration merge: {merge_s:.2f} s for {merged_bytes / 1e6:.1f} MB -> "
          f"plan.throughput.<gpu>.disk_gbps: {disk_gbps:.2f}")
    measured += ["adapter_save", "checkpoint", "merge"]
    keys.update(io_fixed_s=round(save_s, 2), disk_gbps=round(disk_gbps, 2))
except Exception as error:  # a calibration that cannot run stays an assumption
    print(f"calibration adapter_save/checkpoint/merge: not measured ({error!r}); they stay assumptions")
del model
torch.cuda.empty_cache()

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # as TRL's colocate mode: the engine in-process
from vllm import LLM, SamplingParams
llm = LLM(model=path, dtype="bfloat16", gpu_memory_utilization=0.3, max_model_len=2048, seed=0)


def vllm_step_ms(batch, prompt_ids, tokens=steps):
    params = SamplingParams(n=1, temperature=0.8, max_tokens=tokens, min_tokens=tokens, ignore_eos=True)
    llm.generate([{"prompt_token_ids": prompt_ids}] * batch, params, use_tqdm=False)
    t = time.perf_counter()
    llm.generate([{"prompt_token_ids": prompt_ids}] * batch, params, use_tqdm=False)
    return (time.perf_counter() - t) / tokens * 1000


vllm_ms = vllm_step_ms(n, prompt)
full_ms = vllm_step_ms(256, prompt)  # a separate evaluation job's max_num_seqs
print(f"calibration decode_step: at the engine's concurrency {n}: vllm {vllm_ms:.2f} ms, transformers "
      f"{hf_ms:.2f} ms; vllm at 256 sequences {full_ms:.2f} ms -> plan.throughput.<gpu>.decode_overhead_ms: "
      f"{{vllm: {vllm_ms:.1f}, transformers: {hf_ms:.1f}}}")
measured.append("decode_step")
keys["decode_overhead_ms"] = {"vllm": round(vllm_ms, 1), "transformers": round(hf_ms, 1)}
# KV read: the same batch after a long prompt; the extra time per step is the read of the longer KV cache
long_prompt = (prompt * (1 + 1500 // len(prompt)))[:1500]
long_ms = vllm_step_ms(n, long_prompt, tokens=128)
extra_bytes = n * kv_per_token * (len(long_prompt) - len(prompt))
if long_ms > vllm_ms:
    kv_gbps = extra_bytes / ((long_ms - vllm_ms) / 1000) / 1e9
    print(f"calibration kv_read: {long_ms - vllm_ms:.3f} ms more a step for {extra_bytes / 1e6:.1f} MB more KV: "
          f"{kv_gbps:.0f} GB/s effective -> plan.throughput.<gpu>.bandwidth_efficiency = {kv_gbps:.0f} / the "
          "datasheet bandwidth (a 0.01B model: a lower bound on the bandwidth)")
    measured.append("kv_read")
else:
    print("calibration kv_read: not resolved at this model size (the step is overhead-bound); stays an assumption")
# weight sync: TRL's colocate sync_weights loads every tensor into the engine, once per generation batch
try:
    runner = llm.llm_engine.model_executor.driver_worker.model_runner.model
    weights = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).cuda()
    named = list(weights.named_parameters())
    sync_s = timed(lambda: [runner.load_weights([(name, p.data)]) for name, p in named])
    print(f"calibration weight_sync: {sync_s * 1000:.1f} ms for {len(named)} tensors -> "
          f"plan.throughput.<gpu>.sync_per_tensor_ms: {sync_s * 1000 / len(named):.2f}")
    measured.append("weight_sync")
    keys["sync_per_tensor_ms"] = round(sync_s * 1000 / len(named), 2)
except Exception as error:
    print(f"calibration weight_sync: not measured ({error!r}); stays an assumption")
shutil.rmtree(out, ignore_errors=True)
terms = ("decode_step", "kv_read", "weight_sync", "merge", "adapter_save", "checkpoint", "train_mfu", "job_overhead")
assumed = [term for term in terms if term not in measured]
print(f"still assumptions: {', '.join(assumed)} (train_mfu and job_overhead need a full-size run)")
print("plan.throughput.<gpu>: " + json.dumps({**keys, "measured": measured}))
EOF

if [ "$failed" -ne 0 ]; then
    echo "gpu_check: FAILED (logs in $WORK)"
    exit 1
fi
echo "gpu_check: all checks passed (logs in $WORK)"
