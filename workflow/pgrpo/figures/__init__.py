"""Every matplotlib figure of the workflow, one module per figure family: :mod:`.fits` (Figure 1, forecasts),
:mod:`.diagnostics` (Figures 2-5), :mod:`.bandit` (Figures 6-7), :mod:`.evaluation` (the pass@k curves of
Table 1), with the house style in :mod:`.style`.

Importing this package selects the non-interactive Agg backend: figures are only ever written to files.
"""

import matplotlib

matplotlib.use("Agg")
