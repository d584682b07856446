"""Theory (Section 3): the closed forms of Theorem 7 and its consequences as numbers (:mod:`.closed_forms`), and
their sympy derivations (Appendix A: :mod:`.symbolic_algebra`, :mod:`.symbolic_claims`).

``pgrpo.theory.<name>`` is the numeric API of :mod:`.closed_forms`.
"""

from pgrpo.theory.closed_forms import *  # noqa: F401,F403
from pgrpo.theory.closed_forms import (  # noqa: F401
    is_real,
    unit_from_rest,
    validate_steps,
)
