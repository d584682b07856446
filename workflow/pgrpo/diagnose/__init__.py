"""The training diagnostics of Sections 5.2-5.5 (Figures 2-5): one module per read-out (:mod:`.hacking`,
:mod:`.mode_collapse`, :mod:`.concentration`, :mod:`.stability`), the records and verdict names they return
(:mod:`.records`), the config section (:mod:`.settings`), log column aliases (:mod:`.columns`) and the report over
all of them (:mod:`.report`). Built on them, the seven failure modes of a run with their onsets (:mod:`.modes`),
the post-training toolkit's GRPO rules for comparison (:mod:`.toolkit`) and the choice between the two
(:mod:`.rulesets`).
"""
