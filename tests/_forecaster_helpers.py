"""What the forecaster's tests share (tests/test_forecaster_*.py): a 400-step grid with its first quarter as the
early window, and the three-phase law's curve."""

from __future__ import annotations

import numpy as np

from pgrpo.fit.laws import LAWS, THREE_PHASE

T = np.arange(1, 401, dtype=float)
EARLY = T <= 100


def three_phase(t, r0=0.1, rinf=0.7, omega=0.02):
    return LAWS[THREE_PHASE].curve(t, {"R0": r0, "R_inf": rinf, "omega_n": omega})
