"""predictable-grpo: the workflow that runs "Predictable GRPO: A Closed-Form Model of Training Dynamics" end to end.

One module per concept of the paper:

- ``theory``       closed forms of Section 3 (Eq. 6-17) as numbers; regime of a configuration
- ``symbolic``     the same closed forms derived with sympy (Appendix A)
- ``bandit``       the exact softmax-bandit reduction (Section 5.6, Figures 6-7)
- ``data``         datasets by hub id or local path; shipped synthetic GSM8K-style data
- ``rewards``      answer extraction and equivalence (GSM8K ``####``, boxed LaTeX via math-verify)
- ``tiny``         the embedded default model and tokenizer, built locally and warm-started
- ``train``        TRL GRPOTrainer + peft LoRA, the per-step log of Section 4.2
- ``aggregate``    seeds -> mean and s.d. (Section 4.2)
- ``fitting``      three-phase law (Prop. 14) and its rivals; forecasts (Section 4.4, Figure 1)
- ``cli``          ``pgrpo <verb>``: each stage usable outside Snakemake
"""

__version__ = "0.1.0"
