"""jax's persistent compilation cache for chinchax's processes: compile a shape once per machine.

Within a process the jitted init, train and eval steps are memoised (`sweeps.train.step`), so the
cells of a sweep that share a shape and batch compile once. This cache carries the compiled
executables over to the next process: a rerun, a second seed, the fit after a sweep, a test.
Its key is the optimised program with the compiler's version and flags, so a stale entry
cannot be served. Turn it off with CHINCHAX_COMPILE_CACHE=off (or point it elsewhere with
CHINCHAX_COMPILE_CACHE=DIR).

One program, one entry, whichever CPU devices run it. jax keys an entry by the devices the
program was compiled for as well (it leaves them out on GPUs only), and the packed executor's
cells land on CPU device 0 or 1 by which core is free first: in a second smoke sweep 7 of the 9
sizes drew the other device and compiled their train chunk, init and eval step again (31.5 s of
the cells' compile time against 9.3 s with hits). On a CPU the compiled code does not depend on
which devices run it: an entry is loaded with the caller's own device assignment
(`backend.deserialize_executable`), so `_one_key_for_any_cpu_devices` keys CPU programs by their
devices' count and arrangement only, as jax does for GPUs
(tests/sweeps/test_compile_cache.py: a program compiled for device 1, and a 2-device program
for devices 0 and 1, are read back by a fresh process for device 0, and devices 2 and 3).
"""

import copy
import os
import sys

import jax
import numpy as np

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
    _one_key_for_any_cpu_devices()
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
  _one_key_for_any_cpu_devices()
  return path


def _one_key_for_any_cpu_devices() -> bool:
  """Keys CPU programs without their device ids (module docstring); False where this jax
  has no `cache_key.get` to wrap (its entries then stay per device, as before)."""
  try:
    from jax._src import cache_key  # pylint: disable=g-import-not-at-top
    from jax._src.lib import xla_client  # pylint: disable=g-import-not-at-top
  except ImportError:
    return False
  get = getattr(cache_key, "get", None)
  if get is None:
    return False
  if getattr(get, "any_cpu_devices", False):
    return True

  def key(module, devices, compile_options, backend, *args, **kwargs):
    try:
      compile_options = _without_device_ids(compile_options, backend)
    except Exception:  # pylint: disable=broad-except
      pass  # another jax's options: its own key, per device, rather than a failed compile
    return get(module, devices, compile_options, backend, *args, **kwargs)

  def _without_device_ids(compile_options, backend):
    assignment = compile_options.device_assignment
    if backend.platform != "cpu" or assignment is None:
      return compile_options
    compile_options = copy.deepcopy(compile_options)  # the compiler gets the caller's own
    shape = (assignment.replica_count(), assignment.computation_count())
    compile_options.device_assignment = xla_client.DeviceAssignment.create(
        np.arange(shape[0] * shape[1]).reshape(shape))
    return compile_options

  key.any_cpu_devices = True
  cache_key.get = key
  return True
