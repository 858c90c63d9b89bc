"""`chinchax ARGS...` as one process of a test's multi-host job: train_child.py's pauses
(CHINCHAX_TEST_PAUSE_FROM, CHINCHAX_TEST_PAUSE_S) for any subcommand."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tests.helpers import train_child  # noqa: E402,F401  (installs the pause)
from chinchax import cli  # noqa: E402

if __name__ == "__main__":
  sys.exit(cli.run(sys.argv[1:]))
