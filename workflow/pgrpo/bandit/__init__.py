"""The softmax-bandit reduction of Section 5.6, where Assumption 1 holds exactly.

- :mod:`.exact`: the heavy-ball GRPO map (Eq. 3) in the G -> infinity limit (:func:`simulate`);
- :mod:`.finite_g`: the same map with real groups of G samples (:func:`simulate_finite_g`), and
  :mod:`.finite_g_study` what it measures against Prop. 10's 1/G law;
- :mod:`.fixed_points`: Gibbs fixed points and the linearised stiffness ``K`` at ``p*`` (Lemma 3);
- :mod:`.regimes`: the relaxation-rate read-out (Cor. 13) and the regime labels of Figures 6-7;
- :mod:`.settings`, :mod:`.experiments`, :mod:`.verdict`: the config section, the calibration / sweep / regime-map /
  sensitivity experiments and the verdicts on the paper's claims.

``pgrpo.bandit.<name>`` is the simulator's API (exact, fixed points, regimes).
"""

from pgrpo.bandit.exact import *  # noqa: F401,F403
from pgrpo.bandit.exact import STD_FLOOR, check_choice  # noqa: F401
from pgrpo.bandit.fixed_points import *  # noqa: F401,F403
from pgrpo.bandit.regimes import *  # noqa: F401,F403
from pgrpo.bandit.finite_g import run_finite_g, simulate_finite_g  # noqa: F401,E402
