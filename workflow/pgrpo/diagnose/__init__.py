"""The training diagnostics of Section 5, in two rooms: :mod:`.readouts`, the paper's four read-outs of Figures 2-5
(reward hacking, mode collapse, policy concentration, stability) and their report over a grid of runs; and
:mod:`.modes`, the failure modes of any run built on them, each with its onset. Beside them: the records and verdict
names they return (:mod:`.records`), the config section (:mod:`.settings`), log column aliases (:mod:`.columns`),
small shared numerics (:mod:`.numerics`), the post-training toolkit's GRPO rules for comparison (:mod:`.toolkit`),
the choice between the two rule sets (:mod:`.rulesets`) and the diagnose benchmark's planted logs and scoring
(:mod:`.planted`, :mod:`.benchmark`).
"""
