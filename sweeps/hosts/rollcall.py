"""Before jax joins the job: a roll call at the coordinator's address, so that a mistake in how
the processes were started is one line in seconds, naming what is wrong.

jax's own join waits (initialization_timeout, 300 s by default) and then aborts with a stack
trace that names nothing ("RegisterTask ... another task died"); it does not see processes
told different counts in one order at all, and a coordinator port in use segfaults process 0.
So process 0 first listens on the coordinator's port itself (in use: one line, before jax
starts) and every other process says who it is and how many it was told (JAX_PROCESS_ID,
JAX_NUM_PROCESSES). Process 0 answers `go` once every ID from 1 to P-1 has answered, and
then jax starts its coordination service on the same port. A duplicate ID or a disagreeing
count ends every process that called in with one line (chinchax/exit_codes.py's USER);
processes missing when `timeout_s` passes are named (JOIN, which the launchers restart).

One line of text each way over TCP: `chinchax join ID COUNT`, then `go` or
`error STATUS MESSAGE`.
"""

import os
import socket
import time

from chinchax import exit_codes

HELLO = "chinchax join"
RETRY_S = 0.25


class Refused(Exception):
  """The job cannot start: one line, and `status` the exit status (chinchax/exit_codes.py)."""

  def __init__(self, message: str, status: int):
    super().__init__(message)
    self.status = status


def call(address: str, process: int, processes: int, timeout_s: float, say=print) -> None:
  """Returns once every process of the job has called in at `address` (host:port); raises
  Refused otherwise."""
  host, port = address.rsplit(":", 1)
  host = host.strip("[]")
  if process == 0:
    _host(address, int(port), processes, timeout_s, say)
  else:
    _answer(address, host, int(port), process, processes, timeout_s, say)


def _listen(port: int) -> socket.socket:
  # Where jax's service binds ([::]:port, IPv4 too): refused here exactly when it would be.
  if socket.has_dualstack_ipv6():
    return socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
  return socket.create_server(("", port))


def _host(address: str, port: int, P: int, timeout_s: float, say) -> None:
  try:
    server = _listen(port)
  except OSError as e:
    raise Refused(
        f"the coordinator's port {port} ({address}) is in use ({os.strerror(e.errno)}): by "
        "another program, or by another process started as process 0 (each process needs its "
        "own JAX_PROCESS_ID); free the port or give every process another "
        "JAX_COORDINATOR_ADDRESS",
        exit_codes.USER) from None
  say(f"process 0 of {P}: waiting at {address} for process{'es' if P > 2 else ''} "
      f"{_ids(range(1, P))}")
  joined: dict[int, socket.socket] = {}
  callers: list[socket.socket] = []  # every process that called in: told how it ends
  deadline = time.monotonic() + timeout_s
  try:
    while len(joined) < P - 1:
      left = deadline - time.monotonic()
      if left <= 0:
        missing = sorted(set(range(1, P)) - set(joined))
        raise Refused(
            f"process 0 of {P}: process{'es' if len(missing) > 1 else ''} {_ids(missing)} "
            f"did not join at {address} within {timeout_s:g} s (CHINCHAX_JOIN_TIMEOUT_S): "
            "not started, or started with another JAX_COORDINATOR_ADDRESS; start every "
            "process of the job", exit_codes.JOIN)
      server.settimeout(min(left, 1.0))
      try:
        conn, _ = server.accept()
      except (socket.timeout, TimeoutError):
        continue
      said = _read_line(conn, min(5.0, max(left, 0.1))).split()
      if said[:2] != HELLO.split() or len(said) != 4 or not all(x.isdigit() for x in said[2:]):
        conn.close()  # not one of ours (a port scanner, a health check)
        continue
      callers.append(conn)
      q, count = int(said[2]), int(said[3])
      if count != P:
        raise Refused(
            f"the processes of this job disagree on their count: process 0 was told "
            f"JAX_NUM_PROCESSES={P}, process {q} {count}; start every process with the same "
            "JAX_NUM_PROCESSES", exit_codes.USER)
      if q in joined:
        raise Refused(
            f"two processes were started as process {q} (JAX_PROCESS_ID={q}); each process "
            f"needs its own, 0 to {P - 1}", exit_codes.USER)
      if not 0 < q < P:
        raise Refused(
            f"a process was started as process {q} of {P} (JAX_PROCESS_ID={q}); IDs run from "
            f"0 to {P - 1}, each process its own", exit_codes.USER)
      joined[q] = conn
    for conn in callers:
      _send(conn, "go")
  except Refused as e:
    for conn in callers:
      _send(conn, f"error {e.status} {e}")
    raise
  finally:
    for conn in callers:
      conn.close()
    server.close()


def _answer(address: str, host: str, port: int, q: int, P: int, timeout_s: float,
            say) -> None:
  say(f"process {q} of {P}: waiting for process 0 at {address}")
  deadline = time.monotonic() + timeout_s
  while True:
    left = deadline - time.monotonic()
    if left <= 0:
      raise Refused(
          f"process {q} of {P}: no process 0 of this job answered at {address} within "
          f"{timeout_s:g} s (CHINCHAX_JOIN_TIMEOUT_S): start process 0 (JAX_PROCESS_ID=0) "
          "with this JAX_COORDINATOR_ADDRESS, on a port nothing else uses", exit_codes.JOIN)
    try:
      conn = socket.create_connection((host, port), timeout=min(left, 5.0))
    except OSError:
      time.sleep(RETRY_S)  # process 0 not listening yet
      continue
    try:
      _send(conn, f"{HELLO} {q} {P}")
      said = _read_line(conn, max(deadline - time.monotonic(), 0.1))
    finally:
      conn.close()
    if said == "go":
      return
    if said.startswith("error "):
      _, status, message = said.split(" ", 2)
      raise Refused(message, int(status))
    if said or time.monotonic() < deadline:
      raise Refused(
          f"process {q} of {P}: what answers at {address} is not this job's process 0 (the "
          "port in use by another program?), or process 0 ended; start process 0 again, or "
          "give every process another JAX_COORDINATOR_ADDRESS", exit_codes.USER)


def _send(conn: socket.socket, line: str) -> None:
  try:
    conn.sendall((line + "\n").encode())
  except OSError:
    pass  # that process is gone: it will not be told


def _read_line(conn: socket.socket, timeout_s: float) -> str:
  conn.settimeout(timeout_s)
  data = b""
  try:
    while not data.endswith(b"\n") and len(data) < 4096:
      chunk = conn.recv(4096)
      if not chunk:
        break
      data += chunk
  except (OSError, socket.timeout):
    pass
  return data.decode(errors="replace").strip()


def _ids(ids) -> str:
  ids = list(ids)
  return ", ".join(map(str, ids)) if len(ids) <= 8 else f"{ids[0]}..{ids[-1]}"
