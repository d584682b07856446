"""predictable-grpo: the workflow that runs "Predictable GRPO: A Closed-Form Model of Training Dynamics" end to end.

Layers, arrows pointing one way (``cli -> stages -> core / figures / tables``; the core imports nothing above it):

- the pure core, one package per concept, computing and returning named records (no workflow files, no matplotlib):
  ``theory`` (Section 3, Appendix A), ``bandit`` (Section 5.6), ``fit`` (Section 4.4, forecasts),
  ``diagnose`` (Sections 5.2-5.5), ``grpo`` (Sections 4.1-4.3: data, rewards, models, TRL training, evaluation);
- the views: ``figures`` (every matplotlib figure) and ``tables`` (one writer for Markdown, LaTeX and HTML);
- ``stages``: one module per rule group, the only code that reads and writes the workflow's files (atomically);
- ``cli``: ``pgrpo <verb>`` over the stages; ``config`` (schema validation, one-line errors), ``atomic`` (atomic
  writes and JSON reads), ``errors``.
"""

__version__ = "0.1.0"
