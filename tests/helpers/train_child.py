"""`chinchax train ARGS...` as a child process of a test, optionally slowed down mid-run.

With CHINCHAX_TEST_PAUSE_FROM=k and CHINCHAX_TEST_PAUSE_S=s in the environment, every step
from step k on waits s seconds before it loads its batch (a dispatch of several, s for each), so that a test has time to signal
the run between its first checkpoint and its end. The pause changes no value the run computes.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from chinchax import cli  # noqa: E402
from chinchax.sweeps import data  # noqa: E402

PAUSE_FROM = int(os.environ.get("CHINCHAX_TEST_PAUSE_FROM", "0"))
PAUSE_S = float(os.environ.get("CHINCHAX_TEST_PAUSE_S", "0"))

if PAUSE_FROM > 0 and PAUSE_S > 0:
  _global_batch = data.global_batch

  def _paused(ds, step, sharding):
    if step >= PAUSE_FROM:
      time.sleep(PAUSE_S)
    return _global_batch(ds, step, sharding)

  _global_chunk = data.global_chunk

  def _paused_chunk(batch_fn, ds, steps, *args):
    time.sleep(PAUSE_S * sum(step >= PAUSE_FROM for step in steps))
    return _global_chunk(batch_fn, ds, steps, *args)

  data.global_batch, data.global_chunk = _paused, _paused_chunk

if __name__ == "__main__":
  sys.exit(cli.run(["train", *sys.argv[1:]]))
