"""The paper's four training read-outs of Sections 5.2-5.5 (Figures 2-5), one module each: :mod:`.hacking`
(Figure 2, Eq. 17), :mod:`.mode_collapse` (Figure 3, Lemma 6), :mod:`.concentration` (Figure 4) and
:mod:`.stability` (Figure 5); :mod:`.report` runs all four on one run or a grid of runs. The failure modes built on
them are :mod:`pgrpo.diagnose.modes`.
"""
