"""Joining a multi-host job from the environment, in one place (sweeps/hosts/distributed.py)."""

from chinchax.sweeps.hosts import distributed


def test_multi_host_initialization_follows_the_environment():
  calls = []
  init = lambda **kw: calls.append(kw)
  assert distributed.join({}, init) is None
  assert distributed.join({"TPU_WORKER_HOSTNAMES": "h0"}, init) is None
  assert calls == []
  assert distributed.join(
      {"JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "2"}, init) == "JAX_NUM_PROCESSES"
  hb = 3 * distributed.HEARTBEAT_S  # jax's own, behind chinchax's one-line watch
  waits = {"heartbeat_timeout_seconds": hb, "initialization_timeout": 150}  # after our 120 s
  assert calls[-1] == {"num_processes": 4, "process_id": 2, **waits}
  assert distributed.join({"TPU_WORKER_HOSTNAMES": "h0,h1"}, init) == "TPU"
  assert distributed.join({"MEGASCALE_COORDINATOR_ADDRESS": "h0:8080"}, init)
  assert calls[1:] == [waits] * 2
  distributed.join({"JAX_NUM_PROCESSES": "2", "CHINCHAX_HEARTBEAT_S": "5"}, init)
  assert calls[-1]["heartbeat_timeout_seconds"] == 15
