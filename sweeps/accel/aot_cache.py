"""What each ahead-of-time compile reported, kept on disk: a repeated dry run compiles nothing.

    key = aot_cache.key(lowered, devices)       # the program, its devices, the compiler
    report = aot_cache.load(key)                 # a dict of `aot.Program`'s fields, or None
    aot_cache.store(key, report)

Compiling a sweep for a TPU slice costs tens of seconds a cell on a small machine, nearly all
of it in libtpu's backend (the v5p config's smallest cell: 24.8 of 26 s), and a user reruns
the dry run after every change to a config. jax's persistent compilation cache cannot serve
these: it keeps executables, and one built for compile-only TPU devices cannot be loaded back
("PjRtCompiler must be constructed with a Client to call DeserializeLoadedExecutable"). So
this keeps only what the dry run reads from a compile: the memory analysis, the FLOPs and
the compile time, or the compiler's refusal.

The key is the lowered program's text (the StableHLO with its shardings and mesh), the
devices it was lowered for (kind, ids, coordinates), the compiler's flags (LIBTPU_INIT_ARGS,
XLA_FLAGS), the versions of jax, jaxlib, libtpu and jax's CUDA plugin and compiler, the
source of `sweeps.accel.hlo_flops` (the FLOP count is ours, not the compiler's) and the GPU specs
(`gpu_targets/*.txtpb`): a changed cell, slice, card, compiler or flag cannot be served a
stale entry. Entries live next to jax's cache,
in `$CHINCHAX_COMPILE_CACHE/aot` (default ~/.cache/chinchax/xla/aot);
CHINCHAX_COMPILE_CACHE=off turns both off.
"""

import functools
import hashlib
import json
import os

import jax

from chinchax import atomic, versions
from chinchax.errors import UserError
from chinchax.sweeps.accel import compile_cache, hlo_flops


def folder() -> str | None:
  path = os.environ.get(compile_cache.ENV) or compile_cache.DEFAULT_DIR
  if path.lower() in compile_cache.OFF:
    return None
  return os.path.join(path, "aot")


@functools.cache
def _versions() -> str:
  out = [jax.__version__]
  for dist in ("jaxlib", "libtpu", "libtpu-nightly", "jax-cuda12-plugin", "jax-cuda12-pjrt",
               "jax-cuda13-plugin", "jax-cuda13-pjrt", "nvidia-cuda-nvcc-cu12",
               "nvidia-cuda-nvcc"):
    if versions.of(dist):
      out.append(f"{dist}={versions.of(dist)}")
  # Our FLOP count, and the GPU specs XLA compiles against: a changed spec is another target.
  here = os.path.dirname(hlo_flops.__file__)
  specs = os.path.join(here, "gpu_targets")
  for path in [hlo_flops.__file__] + sorted(
      os.path.join(specs, f) for f in os.listdir(specs) if f.endswith(".txtpb")):
    with open(path, "rb") as f:
      out.append(hashlib.sha256(f.read()).hexdigest())
  return " ".join(out)


def key(lowered, devices) -> str:
  """A digest of everything the compiled program's report depends on."""
  h = hashlib.sha256(_versions().encode())
  for flags in ("LIBTPU_INIT_ARGS", "XLA_FLAGS"):  # compiler flags change the program
    h.update(f"{flags}={os.environ.get(flags, '')};".encode())
  for d in devices:
    h.update(f"{d.platform} {d.device_kind} {d.id} {getattr(d, 'coords', '')};".encode())
  h.update(lowered.as_text().encode())
  return h.hexdigest()


def load(k: str) -> dict | None:
  """The stored report, or None (no cache, no entry, or an entry that cannot be read)."""
  where = folder()
  if where is None:
    return None
  try:
    text = atomic.read_text(os.path.join(where, k + ".json"))
    return None if text is None else json.loads(text)
  except (OSError, ValueError):  # a damaged entry is a miss; the next compile rewrites it
    return None


def store(k: str, report: dict) -> None:
  where = folder()
  if where is None:
    return
  try:
    atomic.write_json(os.path.join(where, k + ".json"), report)
  except (OSError, UserError):  # e.g. a read-only home: the dry run stands, just not kept
    pass
