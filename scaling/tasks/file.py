"""tasks.json: the artifact of `chinchax fit-tasks`, as law.json is of `chinchax fit`.

    schema       "chinchax/tasks/v1"
    tasks        {TASK: {step1, step2, bootstrap, warnings}}:
      step1      form (scaling.law.schema.PARAMETRIC), E, A, B, alpha, beta, ci {name: [lo, hi]},
                 runs, last (each run's last evaluations averaged), objective, data {N, D, loss:
                 [lo, hi] of the runs' final values}, warnings
      step2      form (FORM), floor, ceiling, k, L0, floor_fixed (the task's chance, held),
                 ci, evaluations, loss_range (the losses the sigmoid saw: a prediction
                 outside it is extrapolated), rms_residual, warnings
      bootstrap  n, dropped, seed, kind ("runs"), columns (scaling.tasks.steps.COLUMNS), and
                 the draws packed as law.json packs its own (scaling.law.pack), or null
    conventions  loss (its unit), N, D, accuracy
    settings     ci, bootstrap, seed, last, delta
    provenance   chinchax, created, inputs, inputs_sha256
    warnings     every task's warnings, each named by its task

A file that is not this is refused in one line naming the field (`load`). No jax here.
"""

import json
import os
import re
from typing import Any

from chinchax import atomic, json_checks
from chinchax.errors import UserError
from chinchax.json_checks import integer, interval, number, obj, string, strings
from chinchax.scaling.law import pack as law_pack
from chinchax.scaling.law import schema as law_schema
from chinchax.scaling.tasks import steps

SCHEMA = "chinchax/tasks/v1"
FORM = "floor + (ceiling - floor)·sigmoid(-k·(L - L0))"
LOSS_UNITS = {"bpb": "bits per byte of the correct continuation",
              "nats": "nats per token of the correct continuation"}
TOP_KEYS = ("schema", "tasks", "conventions", "settings", "provenance", "warnings")
MADE_BY = "chinchax fit-tasks"


def _step1(s: Any, where: str) -> None:
  obj(s, where, ("form", "E", "A", "B", "alpha", "beta", "ci", "runs", "last", "data",
                 "warnings"))
  if s["form"] != law_schema.PARAMETRIC:
    raise UserError(f"{where}.form: expected {law_schema.PARAMETRIC!r}, "
                    f"got {json_checks.shown(s['form'])}")
  number(s["E"], f"{where}.E", "nonnegative")
  for name in ("A", "B", "alpha", "beta"):
    number(s[name], f"{where}.{name}", "positive")
  integer(s["runs"], f"{where}.runs", 1)
  integer(s["last"], f"{where}.last", 1)
  obj(s["data"], f"{where}.data", ("N", "D", "loss"))
  for name in ("N", "D", "loss"):
    interval(s["data"][name], f"{where}.data.{name}", "positive")
  _ci(s["ci"], f"{where}.ci")
  strings(s["warnings"], f"{where}.warnings")


def _step2(s: Any, where: str) -> None:
  obj(s, where, ("form", "floor", "ceiling", "k", "L0", "floor_fixed", "ci", "evaluations",
                 "loss_range", "warnings"))
  if s["form"] != FORM:
    raise UserError(f"{where}.form: expected {FORM!r}, got {json_checks.shown(s['form'])}")
  for name in ("floor", "ceiling"):
    number(s[name], f"{where}.{name}", "nonnegative")
    if s[name] > 1:
      raise UserError(f"{where}.{name}: {s[name]!r} is an accuracy above 1")
  if s["floor"] > s["ceiling"]:
    raise UserError(f"{where}: floor {s['floor']!r} is above ceiling {s['ceiling']!r}")
  number(s["k"], f"{where}.k", "positive")
  number(s["L0"], f"{where}.L0")
  if not isinstance(s["floor_fixed"], bool):
    raise UserError(f"{where}.floor_fixed: expected true or false, "
                    f"got {json_checks.shown(s['floor_fixed'])}")
  integer(s["evaluations"], f"{where}.evaluations", 1)
  interval(s["loss_range"], f"{where}.loss_range", "positive")
  _ci(s["ci"], f"{where}.ci")
  strings(s["warnings"], f"{where}.warnings")


def _ci(ci: Any, where: str) -> None:
  if ci is None:
    return
  obj(ci, where)
  for name, pair in ci.items():
    interval(pair, f"{where}.{name}")


def _bootstrap(b: Any, where: str) -> None:
  if b is None:
    return
  obj(b, where, ("n", "columns", "samples"))
  integer(b["n"], f"{where}.n", 0)
  if b["columns"] != list(steps.COLUMNS):
    raise UserError(f"{where}.columns: expected {list(steps.COLUMNS)}, "
                    f"got {json_checks.shown(b['columns'])}")
  rows = b["samples"]
  if not isinstance(rows, list) or len(rows) != b["n"]:
    got = f"{len(rows)} rows" if isinstance(rows, list) else json_checks.shown(rows)
    raise UserError(f"{where}.samples: expected {b['n']} rows, got {got}")
  for i, row in enumerate(rows):
    if not (isinstance(row, list) and len(row) == len(steps.COLUMNS)
            and all(json_checks.is_number(x) for x in row)):
      raise UserError(f"{where}.samples[{i}]: expected {len(steps.COLUMNS)} finite numbers "
                      f"[{', '.join(steps.COLUMNS)}], got {json_checks.shown(row)}")


def validate(doc: Any) -> dict:
  """`doc` (draws unpacked) if it is a tasks.json; a UserError naming the field otherwise."""
  obj(doc, "tasks.json")
  missing = [k for k in TOP_KEYS if k not in doc]
  if missing:
    raise UserError(f"missing top-level key{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(missing)}; expected a tasks.json written by `{MADE_BY}`")
  if doc["schema"] != SCHEMA:
    raise UserError(f"schema: expected {SCHEMA!r}, got {json_checks.shown(doc['schema'])}; "
                    f"a tasks.json is written by `{MADE_BY}`")
  tasks = obj(doc["tasks"], "tasks")
  if not tasks:
    raise UserError("tasks: no task in it")
  for name, entry in tasks.items():
    where = f"tasks.{name}"
    obj(entry, where, ("step1", "step2", "bootstrap", "warnings"))
    _step1(entry["step1"], f"{where}.step1")
    _step2(entry["step2"], f"{where}.step2")
    _bootstrap(entry["bootstrap"], f"{where}.bootstrap")
    strings(entry["warnings"], f"{where}.warnings")
  conv = obj(doc["conventions"], "conventions", ("loss",))
  if conv["loss"] not in LOSS_UNITS.values():
    raise UserError(f"conventions.loss: expected one of {sorted(LOSS_UNITS.values())}, "
                    f"got {json_checks.shown(conv['loss'])}")
  settings = obj(doc["settings"], "settings", ("ci",))
  number(settings["ci"], "settings.ci", "unit")
  prov = obj(doc["provenance"], "provenance", ("chinchax", "created", "inputs"))
  string(prov["chinchax"], "provenance.chinchax")
  strings(prov["inputs"], "provenance.inputs")
  strings(doc["warnings"], "warnings")
  return doc


def pack(doc: dict) -> dict:
  """A copy with each task's draws as one packed string (scaling.law.pack's encoding)."""
  out = {**doc, "tasks": {}}
  for name, entry in doc["tasks"].items():
    boot = entry["bootstrap"]
    if boot is not None:
      boot = {**{k: v for k, v in boot.items() if k != "samples"},
              **law_pack.pack({"bootstrap": {"samples": boot["samples"]}})["bootstrap"]}
    out["tasks"][name] = {**entry, "bootstrap": boot}
  return out


def unpack(doc: Any) -> Any:
  """A copy with each task's packed draws as rows; anything else as it is."""
  if not (isinstance(doc, dict) and isinstance(doc.get("tasks"), dict)):
    return doc
  out = {**doc, "tasks": {}}
  for name, entry in doc["tasks"].items():
    boot = entry.get("bootstrap") if isinstance(entry, dict) else None
    if isinstance(boot, dict) and law_pack.KEY in boot:
      try:
        rows = law_pack.unpack({"bootstrap": {law_pack.KEY: boot[law_pack.KEY]}})
      except UserError:
        raise UserError(f"tasks.{name}.bootstrap.{law_pack.KEY}: cannot unpack the draws; "
                        f"expected a tasks.json written by `{MADE_BY}`") from None
      boot = {**{k: v for k, v in boot.items() if k not in (law_pack.KEY, "samples_encoding")},
              "samples": rows["bootstrap"]["samples"]}
      entry = {**entry, "bootstrap": boot}
    out["tasks"][name] = entry
  return out


def figure_name(task: str) -> str:
  """The stem of a task's figure (scaling/tasks/plots.py), which report.md links to."""
  return "task_" + re.sub(r"[^A-Za-z0-9_.-]+", "_", task)


def save(path: str | os.PathLike, doc: dict) -> None:
  """Validate, then write atomically: a refused document never reaches the disk."""
  atomic.write_text(os.fspath(path), json.dumps(pack(validate(doc)), indent=1,
                                                allow_nan=False) + "\n")


def load(path: str | os.PathLike) -> dict:
  """The validated dict of a tasks.json, draws as rows; one UserError line otherwise."""
  return json_checks.load(path, "tasks", MADE_BY, lambda doc: validate(unpack(doc)))
