"""sweeps/accel/aot_cache.py: a repeated ahead-of-time compile is read back, never served stale."""

import dataclasses
import json
import os
import types

import jax
import pytest

from chinchax.models.config import ModelConfig
from chinchax.scaling.runs.conventions import Shape
from chinchax.sweeps.accel import aot, aot_cache
from chinchax.sweeps.train import optimizer


def _setup(batch_size=8):
  s = Shape(d_model=32, n_layers=1, n_heads=2, d_ff=64, vocab_size=128, seq_len=16)
  return aot.Setup(ModelConfig(s), optimizer.OptimizerConfig(), 10, (-1, 1, 1), "fsdp",
                   batch_size)


def _report(p: aot.Program) -> dict:
  return {k: v for k, v in dataclasses.asdict(p).items() if k != "cached"}


@pytest.fixture
def cache(tmp_path, monkeypatch):
  monkeypatch.setenv("CHINCHAX_COMPILE_CACHE", str(tmp_path))
  return tmp_path / "aot"


def test_a_repeated_compile_is_read_back_with_the_same_report(cache):
  devices = jax.devices()[:1]
  first = aot.compile_setup(_setup(), devices)
  assert not any(p.cached for p in first)
  assert len(os.listdir(cache)) == 2  # the train step and the eval step
  again = aot.compile_setup(_setup(), devices)
  assert all(p.cached for p in again)
  assert [_report(p) for p in again] == [_report(p) for p in first]
  # Another batch is another program: compiled, and kept beside the first.
  other = aot.compile_setup(_setup(batch_size=4), devices)
  assert not any(p.cached for p in other)
  assert other[0].argument_bytes < first[0].argument_bytes
  assert len(os.listdir(cache)) == 4


def test_a_damaged_entry_is_compiled_again_and_rewritten(cache):
  devices = jax.devices()[:1]
  first, _ = aot.compile_setup(_setup(), devices, with_eval=False)
  (entry,) = os.listdir(cache)
  for damage in ("{not json", json.dumps({"argument_bytes": 1, "from_a_later_version": 2})):
    (cache / entry).write_text(damage)
    again, _ = aot.compile_setup(_setup(), devices, with_eval=False)
    assert not again.cached and _report(again) == {**_report(first),
                                                   "compile_s": again.compile_s}
    assert json.loads((cache / entry).read_text())["argument_bytes"] == first.argument_bytes


def test_off_keeps_nothing(tmp_path, monkeypatch):
  monkeypatch.setenv("CHINCHAX_COMPILE_CACHE", "off")
  assert aot_cache.folder() is None
  for _ in range(2):
    train, _ = aot.compile_setup(_setup(), jax.devices()[:1], with_eval=False)
    assert not train.cached
  assert aot_cache.load("0" * 64) is None


def test_a_cache_that_cannot_be_written_is_passed_over(tmp_path, monkeypatch):
  in_the_way = tmp_path / "a_file"
  in_the_way.write_text("not a folder")
  monkeypatch.setenv("CHINCHAX_COMPILE_CACHE", str(in_the_way))
  for _ in range(2):
    train, _ = aot.compile_setup(_setup(), jax.devices()[:1], with_eval=False)
    assert not train.cached and train.argument_bytes > 0
  assert in_the_way.read_text() == "not a folder"


def test_the_key_names_the_program_its_devices_and_the_compiler_flags(monkeypatch):
  monkeypatch.delenv("LIBTPU_INIT_ARGS", raising=False)
  program = types.SimpleNamespace(as_text=lambda: "module @jit_train_step {}")
  chip = lambda i, coords: types.SimpleNamespace(platform="tpu", device_kind="TPU v5",
                                                 id=i, coords=coords)
  a = [chip(0, (0, 0, 0)), chip(1, (1, 0, 0))]
  base = aot_cache.key(program, a)
  assert base == aot_cache.key(program, list(a)) and len(base) == 64
  assert base != aot_cache.key(program, a[::-1])  # the mesh's device order is the program's
  assert base != aot_cache.key(program, [chip(0, (0, 0, 0)), chip(1, (0, 1, 0))])
  lite = [types.SimpleNamespace(**{**vars(x), "device_kind": "TPU v5 lite"}) for x in a]
  assert base != aot_cache.key(program, lite)
  other = types.SimpleNamespace(as_text=lambda: "module @jit_train_step {} ")
  assert base != aot_cache.key(other, a)
  monkeypatch.setenv("LIBTPU_INIT_ARGS", "--xla_tpu_enable_latency_hiding_scheduler=false")
  assert base != aot_cache.key(program, a)
