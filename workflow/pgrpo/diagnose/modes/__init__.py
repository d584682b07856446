"""The failure modes of a GRPO run, each flagged or not with its episodes (where it began and ended) (beyond the paper's four
read-outs of Sections 5.2-5.5, which they build on): :mod:`.record` (the ``modes`` record of ``verdicts.json``),
:mod:`.signals` (noise, levels, onsets), one module per mode (:mod:`.hacking`, :mod:`.degeneracy`,
:mod:`.concentration`, :mod:`.instability`, :mod:`.no_learning`, :mod:`.regression`, :mod:`.truncation`, :mod:`.oscillation`, :mod:`.length`) and
:mod:`.ours` (our rule set over all of them). The post-training toolkit's rules are :mod:`pgrpo.diagnose.toolkit`.
"""
