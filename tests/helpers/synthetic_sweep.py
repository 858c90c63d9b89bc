"""`chinchax` as a process whose runs are the known law of sweep_helper (no training): the
sweep's command line, workdir, records, fit and report are the real ones.

    python tests/helpers/synthetic_sweep.py sweep --config=... [--workdir=...]
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from chinchax import cli  # noqa: E402  pylint: disable=wrong-import-position
from chinchax.sweeps.train import loop  # noqa: E402  pylint: disable=wrong-import-position
from tests.helpers import sweep_helper  # noqa: E402  pylint: disable=wrong-import-position

if __name__ == "__main__":
  loop.train = sweep_helper.synthetic_train
  sys.exit(cli.run(sys.argv[1:]))
