"""GRPO on language models (Sections 4.1-4.3): data and the shipped synthetic set, rewards, the embedded tiny model,
model loading by hub id or path, TRL training with its per-step log and checkpoints, benchmarks, generation
backends and pass@k.
"""
