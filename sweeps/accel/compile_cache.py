"""jax's persistent compilation cache for chinchax's processes: compile a shape once per machine.

Within a process the jitted init, train and eval steps are memoised (`sweeps.train.step`), so the
cells of a sweep that share a shape and batch compile once. This cache carries the compiled
executables over to the next process: a rerun, a second seed, the fit after a sweep, a test.
Its key is the optimised program with the compiler's version and flags, so a stale entry
cannot be served. Turn it off with CHINCHAX_COMPILE_CACHE=off (or point it elsewhere with
CHINCHAX_COMPILE_CACHE=DIR).
"""

import os
import sys

import jax

from chinchax import atomic
from chinchax.errors import UserError

ENV = "CHINCHAX_COMPILE_CACHE"
DEFAULT_DIR = os.path.join(os.path.expanduser("~"), ".cache", "chinchax", "xla")
OFF = ("off", "0", "none", "false")


def enable(path: str | None = None) -> str | None:
  """Points jax at the cache folder (created on first write); returns it, or None when off.

  A folder the user named (`path`, CHINCHAX_COMPILE_CACHE) that cannot be written is a
  UserError before any work; the default one (a read-only home) is passed over with a note.
  """
  named = path or os.environ.get(ENV)
  path = named or DEFAULT_DIR
  if path.lower() in OFF:
    return None
  if jax.config.jax_compilation_cache_dir:  # already set by the user or an earlier call
    return jax.config.jax_compilation_cache_dir
  try:
    atomic.check_writable(path, ENV if named else "the compile cache", folder=True)
  except UserError as e:
    if named:
      raise UserError(f"{e} (or {ENV}=off)") from None
    print(f"note: {e}; compiling without a cache", file=sys.stderr)
    return None
  jax.config.update("jax_compilation_cache_dir", path)
  # Every program, however quick to compile: a sweep's small cells compile in ~1-5 s each,
  # under jax's default threshold of 1 s on a fast machine but the bulk of a cell on CPU.
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  return path
