"""sweeps/chips/hardware.py: TPU targets, peak FLOP/s for MFU, and the hardware in every run record."""

import dataclasses
import json
import os

import jax
import numpy as np
import pytest

from chinchax.launch import tpu_slice
from chinchax.errors import UserError
from chinchax.sweeps.chips import hardware
from chinchax.sweeps import report
from tests.helpers import train_util


@pytest.mark.parametrize("text,family,topology,chips,hosts,accel", [
    ("v5p:2x2x4", "v5p", (2, 2, 4), 16, 4, "v5p-32"),
    ("v5p-32", "v5p", (2, 2, 4), 16, 4, "v5p-32"),
    ("v5p-8", "v5p", (2, 2, 1), 4, 1, "v5p-8"),
    ("v5e:4x4", "v5e", (4, 4), 16, 4, "v5litepod-16"),
    ("v5litepod-8", "v5e", (2, 4), 8, 1, "v5litepod-8"),
    ("v6e:2x2", "v6e", (2, 2), 4, 1, "v6e-4"),
    ("v6e-256", "v6e", (16, 16), 256, 64, "v6e-256"),
    ("v4-16", "v4", (2, 2, 2), 8, 2, "v4-16"),
])
def test_targets_name_one_slice(text, family, topology, chips, hosts, accel):
  t = hardware.parse_target(text)
  assert (t.chip.family, t.topology, t.chips, t.hosts_per_slice, t.accelerator_type) == (
      family, topology, chips, hosts, accel)
  assert t.chips_per_host * t.hosts_per_slice == chips
  # launch/tpu_slice.py counts hosts from the gcloud type on its own: both must agree.
  assert tpu_slice.accelerator(accel).hosts == hosts


def test_default_topologies_are_gclouds():
  # The slice shapes gcloud and GKE give each size (Cloud TPU docs; MaxText's table).
  v5p = {8: "2x2x1", 16: "2x2x2", 32: "2x2x4", 64: "2x4x4", 128: "4x4x4", 256: "4x4x8",
         512: "4x8x8", 1024: "8x8x8"}
  v5e = {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16",
         256: "16x16"}
  for cores, topo in v5p.items():
    assert hardware.parse_target(f"v5p-{cores}").topology_name == topo
  for chips, topo in v5e.items():
    assert hardware.parse_target(f"v5litepod-{chips}").topology_name == topo


def test_slices_multiply_chips_not_hosts_per_slice():
  t = hardware.parse_target("v5e:4x4,slices=2")
  assert (t.slices, t.chips, t.hosts_per_slice, t.name) == (2, 32, 4, "v5e:4x4,slices=2")
  name, kw = t.libtpu_args()
  assert name == "v5e:4x4" and kw["num_slices"] == 2


@pytest.mark.parametrize("text,says", [
    ("v5p:2x2", "3 dimensions"), ("v5e:2x2x2", "2 dimensions"), ("tpu-32", "unknown TPU"),
    ("v7:2x2", "unknown TPU family"), ("v5p-12", "no standard topology"),
    ("v5p-9", "TensorCores"), ("v5p:2x2x4,slices=0", "at least 1"), ("h100", "not a TPU"),
])
def test_bad_targets_are_one_line(text, says):
  with pytest.raises(UserError, match=says) as e:
    hardware.parse_target(text)
  assert "\n" not in str(e.value)


@dataclasses.dataclass
class FakeDevice:
  device_kind: str
  platform: str = "tpu"


@pytest.mark.parametrize("kind,peak", [
    ("TPU v5", 459e12),          # what a v5p reports: no "p"
    ("TPU v5 lite", 197e12), ("TPU v6 lite", 918e12), ("TPU v4", 275e12),
    ("NVIDIA H100 80GB HBM3", 989e12), ("NVIDIA A100-SXM4-80GB", 312e12), ("cpu", None),
])
def test_peak_flops_by_device_kind(kind, peak):
  assert hardware.peak_flops(FakeDevice(kind)) == peak


def test_record_on_cpu_says_why_there_is_no_mfu():
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1, 1),
                           ("data", "fsdp", "tensor"))
  r = hardware.record(mesh)
  assert r["backend"] == "cpu" and r["device_count"] == 1
  assert r["mesh"] == {"data": 1, "fsdp": 1, "tensor": 1}
  assert r["peak_flops_per_device"] is None and "cpu" in r["peak_flops_reason"]
  json.dumps(r)  # JSON-ready


def test_report_shows_the_hardware_column():
  base = {"name": "C1e15-N1e6", "budget": 1e15, "N_total": 10**6, "D": 2e7, "steps": 10,
          "status": "done", "eval_loss": 3.0, "wall_s": 5.0, "shape": {"d_model": 64,
                                                                         "n_layers": 2}}
  tpu = {**base, "tokens_per_s": 1.5e6, "mfu": 0.412, "hardware": {
      "backend": "tpu", "device_kind": "TPU v5", "device_count": 16,
      "mesh": {"data": 1, "fsdp": 16, "tensor": 1}, "peak_flops_per_device": 459e12,
      "peak_flops_reason": None}}
  cpu = {**base, "name": "old", "tokens_per_s": 2e3, "mfu": None}  # an older record
  lines = report.runs_section([tpu, cpu])
  row = next(l for l in lines if l.startswith("| C1e15"))
  assert "16 x TPU v5 (tpu), mesh 1x16x1" in row and "| 1.5e6 |" in row and "41.2%" in row
  assert next(l for l in lines if l.startswith("| old")).endswith("| – | 2000 | – |")
  # Seconds in tenths below 10 s (a WSD branch's cooldown), whole above.
  walls = [next(l for l in report.runs_section([{**base, "wall_s": w}])
                if l.startswith("| C1e15")).split(" | ")[8] for w in (0.44, 5.0, 9.96, 123.4)]
  assert walls == ["0.4", "5.0", "10.0", "123"]


@pytest.mark.slow
def test_every_result_json_stores_its_hardware(tmp_path):
  wd = tmp_path / "run"
  env = train_util.child_env(str(tmp_path / "cache"), devices=2)
  done = train_util.run(train_util.tiny_args(wd, tmp_path / "tfds", "--config.mesh.data=2"),
                        env, timeout=300)
  assert done.returncode == 0, done.stderr[-2000:]
  r = train_util.result(wd)
  hw = r["hardware"]
  assert hw["backend"] == "cpu" and hw["device_count"] == 2 == r["devices"]
  assert hw["mesh"] == {"data": 2, "fsdp": 1, "tensor": 1}
  assert hw["peak_flops_per_device"] is None and hw["peak_flops_reason"]
  assert r["tokens_per_s"] > 0 and r["mfu"] is None
  assert os.path.exists(wd / "result.json")
