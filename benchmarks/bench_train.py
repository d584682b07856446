r"""Seconds per GRPO optimizer step (pgrpo.train) on the embedded tiny model, one torch thread.

    python benchmarks/bench_train.py --steps 20 --G 4 16 \
        [--model-dir results/model/tiny] [--data-dir results/data/synthetic]

Without --model-dir it builds an untrained tiny Qwen2 (build_tokenizer/build_model, default architecture),
which always generates max_completion_length tokens: an upper bound on the time per step. Without --data-dir it
writes synthetic problems to a temporary directory. Prints one line per G: s/step (training only, evals excluded).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from pgrpo.grpo.data import read_jsonl  # noqa: E402
from pgrpo.grpo.tiny_model import DEFAULT_TINY, build_model, build_tokenizer  # noqa: E402
from pgrpo.stages.model import run_make_synthetic  # noqa: E402
from pgrpo.stages.train import run_train  # noqa: E402

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--G", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--model-dir")
    parser.add_argument("--data-dir")
    parser.add_argument("--training-json", default="{}", help="overrides of the training section")
    options = parser.parse_args()

    import pandas as pd



    work = Path(tempfile.mkdtemp(prefix="bench_train."))
    data_dir = Path(options.data_dir) if options.data_dir else work / "data"
    if not options.data_dir:
        run_make_synthetic(str(data_dir), {"sizes": {"sft": 200, "val": 50, "train": 400, "test": 64}})
    model_dir = options.model_dir
    if not model_dir:
        texts = [r["question"] + " " + r["answer"] for r in read_jsonl(data_dir / "train.jsonl")]
        tokenizer = build_tokenizer(texts)
        model = build_model(tokenizer, DEFAULT_TINY["architecture"])
        model_dir = str(work / "model")
        model.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
    training = {
        "max_steps": options.steps,
        "per_device_train_batch_size": 16,
        "gradient_accumulation_steps": 2,
        "max_completion_length": 48,
        "learning_rate": 5e-4,
        "eval_steps": 0,
        "checkpoint_steps": max(2, options.steps),
        "merge_adapters": False,
        **json.loads(options.training_json),
    }
    specs = {"train": {"path": str(data_dir / "train.jsonl")}, "eval": {"path": str(data_dir / "test.jsonl")}}
    for G in options.G:
        out = work / f"G{G}"
        start = time.perf_counter()
        run_train(
            model={"name": "tiny", "path": model_dir}, data=specs, training=training, G=G, seed=0, out_dir=str(out)
        )
        wall = time.perf_counter() - start
        log = pd.read_csv(out / "log.csv")
        print(
            f"G={G}: {log['step_time'].mean():.3f} s/step (TRL step_time), {wall / len(log):.3f} s/step wall "
            f"incl. setup, {len(log)} steps, completion length {log['completion_length'].mean():.1f}"
        )


if __name__ == "__main__":
    main()
