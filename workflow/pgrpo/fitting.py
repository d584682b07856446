"""Old path of the curve fits, kept for callers: the code lives in :mod:`pgrpo.fit` (Section 4.4, Figure 1)."""

from pgrpo.fit.forecast import Forecast, RunForecast, forecast_band, forecast_curve, forecast_run  # noqa: F401
from pgrpo.fit.laws import ALL_LAWS, EXPONENTIAL, LAWS, OVERDAMPED, THREE_PHASE, UNDERDAMPED, Law, get_law  # noqa: F401
from pgrpo.fit.least_squares import FitResult, fit_all_laws, fit_law, fit_three_phase  # noqa: F401
from pgrpo.fit.selection import ModelComparison, compare_laws  # noqa: F401
from pgrpo.fit.theory_link import TheoryLink, link_to_theory  # noqa: F401
