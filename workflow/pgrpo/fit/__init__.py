"""Curve fits of Section 4.4 (Figure 1) and forecasts: the laws of Section 3.5 (:mod:`.laws`), least squares
(:mod:`.least_squares`), model selection (:mod:`.selection`), the link back to Theorem 7 (:mod:`.theory_link`),
forecasts from a run's first steps (:mod:`.forecast`, built on the forecaster of :mod:`.forecaster` with the run's
own deviation of :mod:`.deviation` and the intervals and scores of :mod:`.intervals`), the baselines a user would
pick instead (:mod:`.baselines`), the forecast benchmark's protocol (:mod:`.benchmark`), and the ``fitting:`` config
section (:mod:`.settings`).
"""
