"""``python -m pgrpo`` is ``pgrpo``.

A training job (``train``, and ``doctor``, the first step of a GPU job) takes the time-limit signal from its first
line, before anything heavy is imported: a signal during start-up exits resumably at once
(:mod:`pgrpo.grpo.time_limit`) instead of being ignored while the model loads.
"""

import sys

if len(sys.argv) > 1 and sys.argv[1] in ("train", "doctor"):
    from pgrpo.grpo.time_limit import install_checkpoint_signal

    install_checkpoint_signal()

from pgrpo.cli import main  # noqa: E402

sys.exit(main())
