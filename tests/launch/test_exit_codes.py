"""The exit-status table (chinchax/exit_codes.py): DESIGN quotes it, the JobSet's no-restart
list and the VM restart loop follow it."""

import os
import re
import subprocess

import pytest

from chinchax import exit_codes
from chinchax.launch import jobset, steps
from chinchax.sweeps.chips import hardware

from tests.helpers import train_util as tu


def design_rows() -> dict[int, tuple[str, str]]:
  """{status: (name, restarted)} from the table in docs/DESIGN.md, read as text."""
  with open(os.path.join(tu.ROOT, "docs", "DESIGN.md")) as f:
    text = f.read()
  rows = re.findall(r"^\| (\d+) \| ([^|]+) \| ([^|]+) \|", text, re.M)
  return {int(s): (name.strip(), restarted.strip()) for s, name, restarted in rows}


def test_design_quotes_the_table_and_the_jobset_fails_on_its_no_restart_rows_only():
  rows = design_rows()
  assert rows == {c.status: (c.name, r) for c, r in zip(exit_codes.TABLE, [
      "-", "no", "no", "yes, also on a VM", "yes, also on a VM", "yes, also on a VM",
      "yes, also on a VM", "yes, also on a VM", "by the JobSet", "by the JobSet",
      "by the JobSet"])}
  no_restart = sorted(s for s, (_, r) in rows.items() if r == "no")
  assert no_restart == [1, 2]
  for job in (jobset.Job("s", ("sweep",), gpu="nvidia-h100-80gb", nodes=2),
              jobset.Job("s", ("sweep",), tpu=hardware.parse_target("v5p:2x2x4"))):
    spec = jobset.manifest(job)["spec"]["replicatedJobs"][0]["template"]["spec"]
    (rule,) = spec["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob"
    assert sorted(rule["onExitCodes"]["values"]) == no_restart
  # The statuses a lost, stuck or missing host gives, and a preemption's, are restarted.
  for status in (75, 76, 77, 78, 134, 143, 137):
    assert exit_codes.restart(status), status
  assert not exit_codes.restart(0)


@pytest.mark.slow
@pytest.mark.parametrize("statuses, runs, final", [
    ((75, 77, 0), 3, 0),        # two host problems, then done
    ((75, 75, 75, 75, 75), 4, 75),  # RESTARTS (3) reruns, then the job is left failed
    ((2, 0), 1, 2),             # a user mistake is not rerun
    ((143, 0), 1, 143),         # nor someone's SIGTERM on the VM
])
def test_the_vm_restart_loop_reruns_host_problems_only(tmp_path, monkeypatch, statuses, runs,
                                                        final):
  monkeypatch.setattr(steps, "RESTART_PAUSE_S", 0)
  count = tmp_path / "count"
  # The n-th run exits with statuses[n]: a stand-in for the sweep.
  script = (f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) > {count}; "
            f"set -- {' '.join(map(str, statuses))}; shift $n; exit $1")
  command = steps.remote_start(str(tmp_path), ["bash", "-c", script])
  subprocess.run(["bash", "-c", command], check=True, timeout=30)
  follow = subprocess.run(["bash", "-c", steps.remote_follow(str(tmp_path))], timeout=30,
                          capture_output=True, text=True)
  assert follow.returncode == final, follow.stdout
  assert int(count.read_text()) == runs
  assert (tmp_path / steps.EXIT).read_text().strip() == str(final)
