"""``python -m pgrpo`` is ``pgrpo``."""

import sys

from pgrpo.cli import main

sys.exit(main())
