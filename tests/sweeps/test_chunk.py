"""Several train steps in one dispatch (`step.make_train_chunk`, `loop.chunk_end`): the same
parameters as one step at a time, to the bit; dispatches that end at every step the host must
see; a stop acted on within one chunk.

The reference is the one-step program (`step.make_train_step`, the loop before chunks) run
step by step on the same batches and learning rates, on one device and on a sharded mesh of 8
(data 2 x fsdp 4, subprocess). End to end, `chinchax train` with `steps_per_dispatch=1` is the
reference of a run with chunks of 6 whose log, eval and checkpoint steps (5, 7, 9) cut most
chunks short.
"""

import json
import os
import re
import subprocess
import sys
import types

import pytest

from tests.helpers import train_util as tu

SCRIPT = r"""
import json, sys
import jax, numpy as np
from chinchax.models import sharding
from chinchax.models.config import ModelConfig
from chinchax.scaling.runs import conventions
from chinchax.sweeps.train import optimizer, step

mesh_axes, K, sizes = json.loads(sys.argv[1])
compiles = []
jax.monitoring.register_event_duration_secs_listener(
    lambda name, secs, **kw: compiles.append(name)
    if name == "/jax/core/compile/backend_compile_duration" else None)
shape = conventions.Shape(d_model=32, n_layers=2, n_heads=4, d_ff=64, vocab_size=67, seq_len=16,
                          tied=True)
cfg = ModelConfig(shape=shape).validate()
opt = optimizer.OptimizerConfig(peak_lr=1e-2, warmup_steps=3)
tx = optimizer.make(opt)
mesh = sharding.make_mesh(tuple(mesh_axes))
T = sum(sizes)
tokens = np.random.default_rng(0).integers(0, 67, (T, 8, 17)).astype(np.int32)
lr = np.asarray(optimizer.lr_table(opt, T), np.float32)

one = step.make_train_step(cfg, tx, mesh, global_batch_size=8)
ref = step.init_train_state(cfg, tx, mesh, jax.random.key(0))
for t in range(T):
  ref, m_ref = one(ref, {"inputs": tokens[t, :, :-1], "targets": tokens[t, :, 1:]}, lr[t])

before = len(compiles)
chunk = step.make_train_chunk(cfg, tx, mesh, global_batch_size=8, K=K)
got, t, ends = step.init_train_state(cfg, tx, mesh, jax.random.key(0)), 0, []
for n in sizes:
  x = np.zeros((K, 8, 17), np.int32)
  x[:n] = tokens[t:t + n]
  lrs = np.zeros(K, np.float32)
  lrs[:n] = lr[t:t + n]
  got, m = chunk(got, {"inputs": x[:, :, :-1], "targets": x[:, :, 1:]}, lrs, np.int32(n))
  t += n
  ends.append(float(m["loss"]))
same = jax.tree.leaves(jax.tree.map(lambda a, b: bool(np.array_equal(a, b)), ref, got))
print(json.dumps({"leaves": len(same), "equal": sum(same), "step": int(got["step"]),
                  "loss": [float(m_ref["loss"]), ends[-1]],
                  "grad_norm": [float(m_ref["grad_norm"]), float(m["grad_norm"])],
                  "programs": len(compiles) - before}))
"""


def _run(mesh, K, sizes, devices=1):
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": tu.ROOT,
         "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
  p = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps([mesh, K, sizes])], env=env,
                     cwd=tu.ROOT, capture_output=True, text=True, timeout=300)
  assert p.returncode == 0, p.stderr[-3000:]
  return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a subprocess each
@pytest.mark.parametrize("mesh,devices", [((1, 1, 1), 1), ((2, 4, 1), 8)])
def test_chunks_of_any_length_equal_single_steps_to_the_bit(mesh, devices):
  # 13 steps as chunks of 4, 1, 3, 4 and 1 (full, and cut short): one program for all.
  got = _run(list(mesh), 4, [4, 1, 3, 4, 1], devices)
  assert got["step"] == 13
  assert got["equal"] == got["leaves"] > 10  # every parameter and optimizer moment
  assert got["loss"][0] == got["loss"][1]  # the metrics are the chunk's last step's
  assert got["grad_norm"][0] == got["grad_norm"][1]
  assert got["programs"] == 1


def _setup(total, K, log_every, eval_every, every_steps, must_see=(), fixed=True):
  hook = types.SimpleNamespace(must_see=lambda: tuple(must_see))
  return types.SimpleNamespace(
      total_steps=total, model=types.SimpleNamespace(K=K),
      batches=types.SimpleNamespace(fixed_shape=fixed), hooks=(hook,),
      c=types.SimpleNamespace(log_every=log_every, eval_every=eval_every),
      ckpt=types.SimpleNamespace(every_steps=every_steps))


def _ends(s):
  from chinchax.sweeps.train import loop
  out, step = [], 0
  while step < s.total_steps:
    step = loop.chunk_end(s, step)
    out.append(step)
  return out


def test_dispatches_end_at_every_step_the_host_must_see():
  # K = 6; logs at 5, 10, 15, 20; evals at 7, 14; saves at 9, 18; a branch point at 12; 20 steps.
  s = _setup(total=20, K=6, log_every=5, eval_every=7, every_steps=9, must_see=(12,))
  assert _ends(s) == [5, 7, 9, 10, 12, 14, 15, 18, 20]
  # Nothing to see for a while: full chunks, the last one cut at the end.
  assert _ends(_setup(total=40, K=16, log_every=100, eval_every=100, every_steps=100)) == [
      16, 32, 40]
  # Batches that change shape (sequence-length warmup): one step per dispatch.
  assert _ends(_setup(total=4, K=16, log_every=100, eval_every=100, every_steps=100,
                      fixed=False)) == [1, 2, 3, 4]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
  root = tmp_path_factory.mktemp("chunk")
  return {"data": str(root / "tfds"), "env": tu.child_env(str(root / "xla_cache")), "root": root}


CADENCE = ("--config.log_every=5", "--config.eval_every=7", "--config.checkpoint.every_steps=9",
           "--config.checkpoint.every_minutes=0", f"--config.tokens={8 * 32 * 23}")


@pytest.mark.slow
def test_train_with_chunks_logs_and_ends_as_one_step_at_a_time(dirs):
  runs = {}
  for K in (1, 6):
    workdir = str(dirs["root"] / f"K{K}")
    p = tu.run(tu.tiny_args(workdir, dirs["data"], *CADENCE,
                            f"--config.steps_per_dispatch={K}"), dirs["env"])
    assert p.returncode == 0, p.stderr
    runs[K] = workdir
  one, chunked = tu.losses(runs[1]), tu.losses(runs[6])
  assert [s for s, _ in one["train_loss"]] == [5, 10, 15, 20, 23]
  assert [s for s, _ in one["eval_loss"]] == [7, 14, 21, 23]
  assert chunked == one  # every logged loss, to the bit
  for key in ("train_loss", "eval_loss", "steps"):
    assert tu.result(runs[6])[key] == tu.result(runs[1])[key]
  saved = lambda w: sorted(int(d) for d in os.listdir(os.path.join(w, "checkpoints"))
                           if d.isdigit())
  assert saved(runs[6]) == saved(runs[1]) == [18, 23]  # keep=2


@pytest.mark.slow
def test_sigterm_stops_at_the_end_of_its_chunk(dirs):
  # Chunks of 6 and nothing to log, eval or save before the end: SIGTERM during the 8th step's
  # dispatch (the second chunk, steps 7-12) stops the run at step 12, within one chunk.
  workdir = str(dirs["root"] / "term")
  env = {**dirs["env"], "CHINCHAX_KILL_AT": "step:8", "CHINCHAX_KILL_SIGNAL": "TERM"}
  p = tu.run(tu.tiny_args(workdir, dirs["data"], "--config.steps_per_dispatch=6",
                          "--config.log_every=100", "--config.eval_every=100",
                          "--config.checkpoint.every_steps=100",
                          "--config.checkpoint.every_minutes=0"), env)
  assert p.returncode == 143, p.stderr
  m = re.search(r"stopped by SIGTERM at step (\d+); checkpoint saved", p.stdout)
  assert m and int(m.group(1)) == 12, p.stdout  # 4 steps past the signal, under one chunk
