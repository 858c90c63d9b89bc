"""The bad-input catalogue: every user mistake ends in one line on stderr, `chinchax CMD:
error: ...`, exit status 2, and nothing written.

Each row is (command, files to create, argv, a regex the one line must match). The commands run
in-process through the dispatcher (`cli.run`); `sweep` and `train` are stopped before they open
any data, so a row the code wrongly accepts fails fast instead of training.
"""

import contextlib
import io
import json
import os
import re

import numpy as np
import pytest

from chinchax.scaling.law import presets
from chinchax import cli
from tests.helpers import synthetic_law as syn
from tests.helpers import task_truths


class Accepted(BaseException):
  """Raised where a sweep or a run would open its data: the input was not refused."""


def _csv(rows: list[str], header: str = "N,D,loss") -> str:
  return "\n".join([header, *rows]) + "\n"


def _good_rows() -> list[str]:
  runs = syn.isoflop(budgets=(1e18, 1e19), sizes=5)
  return [f"{n:.6g},{d:.6g},{l:.6g}" for n, d, l in zip(runs["N"], runs["D"], runs["loss"])]


GOOD_CSV = _csv(_good_rows())
GOOD_LAW = json.dumps(presets.preset_dict("hoffmann2022"))
NESTED = "E + (A/N^alpha + B/D^beta)^gamma"
RECORD = {"schema": "chinchax/run/v1", "name": "a", "status": "done", "N_total": 1e6,
          "N_non_embedding": 9e5, "D": 2e7, "eval_loss": 3.0, "flops_chinchilla": 1.3e14}


def _edited(doc: dict, edits: dict) -> str:
  """`doc` as JSON with each edit applied: a key `a__b` sets doc["a"]["b"]."""
  for dotted, value in edits.items():
    *path, last = dotted.split("__")
    node = doc
    for key in path:
      node = node[key]
    node[last] = value
  return json.dumps(doc)


def _law(**edits) -> str:
  return _edited(presets.preset_dict("hoffmann2022"), edits)


def _nested(depth: int) -> str:
  return "[" * depth + "]" * depth


def _task_csv(edit=None, extra: tuple[str, ...] = (), drop: str = "") -> str:
  """A ladder's task evaluations as CSV (tests/helpers/task_truths.py), one row edited."""
  cols = task_truths.ladder(0)
  keys = [k for k in cols if k != drop]
  rows = [[str(cols[k][i]) for k in keys] for i in range(len(cols["run"]))]
  if edit:
    rows[3][keys.index(edit[0])] = edit[1]
  return "\n".join([",".join(keys), *map(",".join, rows), *extra]) + "\n"


def _tasks_json(**edits) -> str:
  from chinchax.scaling.tasks import fit as tasks_fit  # pylint: disable=g-import-not-at-top
  return _edited(tasks_fit.fit_tasks(task_truths.ladder(0), bootstrap=0).doc, edits)


SWEEP = "from chinchax.sweeps.configs import smoke\n"
TRAIN = "from chinchax.sweeps.configs import train\n"

# (id, command, files {name: text}, argv after the command ({d}: the test's folder), regex)
CASES = [
    # ---------------------------------------------------------------- config files
    ("config-missing", "sweep", {}, ["--config={d}/nope.py", "--workdir={d}/wd"],
     r"nope\.py"),
    ("config-syntax-error", "sweep", {"c.py": "def get_config(:\n"},
     ["--config={d}/c.py", "--workdir={d}/wd"], r"c\.py.*(syntax|invalid)"),
    ("config-no-get-config", "sweep", {"c.py": "x = 1\n"},
     ["--config={d}/c.py", "--workdir={d}/wd"], r"c\.py.*get_config"),
    ("config-returns-dict", "sweep", {"c.py": "def get_config():\n  return {'a': 1}\n"},
     ["--config={d}/c.py", "--workdir={d}/wd"], r"c\.py.*ConfigDict"),
    ("config-returns-none", "sweep", {"c.py": "def get_config():\n  return None\n"},
     ["--config={d}/c.py", "--workdir={d}/wd"], r"c\.py.*ConfigDict"),
    ("config-raises", "sweep", {"c.py": "def get_config():\n  raise RuntimeError('boom')\n"},
     ["--config={d}/c.py", "--workdir={d}/wd"], r"c\.py.*boom"),
    ("config-imports-missing-module", "sweep", {"c.py": "import no_such_module_xyz\n"},
     ["--config={d}/c.py", "--workdir={d}/wd"], r"no_such_module_xyz"),
    ("config-misspelled-key-in-file", "sweep",
     {"c.py": SWEEP + "def get_config():\n  c = smoke.get_config()\n  c.budget = (1e11,)\n"
              "  return c\n"},
     ["--config={d}/c.py", "--workdir={d}/wd"], r"budget"),
    ("config-misspelled-train-key-in-file", "train",
     {"c.py": TRAIN + "def get_config():\n  c = train.get_config('tiny')\n  c.tokns = 5\n"
              "  return c\n"},
     ["--config={d}/c.py", "--workdir={d}/wd"], r"tokns"),
    ("override-misspelled-key", "sweep", {}, ["--config.budgetz=1e11", "--workdir={d}/wd"],
     r"--config\.budgetz.*no key"),
    ("override-misspelled-nested-key", "train", {},
     ["--config.optimizer.peak_lrr=1e-3", "--workdir={d}/wd"], r"peak_lrr"),
    ("train-override-with-a-sweeps-prefix", "train", {},
     ["--config=train", "--config.train.tokens=0", "--workdir={d}/wd"],
     r"^--config\.train\.tokens: the config has no key 'train'; a run's config has its keys "
     r"at the top \(a sweep's hold them under train\.\): --config\.tokens$"),
    ("law-bare-coefficients-to-forecast", "forecast",
     {"law.json": '{"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}'},
     ["--law={d}/law.json", "--flops=1e21"],
     r"a bare law's coefficients \(E, A, B, alpha, beta\), not a law\.json: make one with "
     r"`chinchax law --E="),
    ("sweep-of-a-run-config", "sweep", {}, ["--config=train", "--dry-run"],
     r"^this is one run's config \(sweeps/configs/train\.py's keys\), not a sweep's: train "
     r"it with `chinchax train"),
    ("sweep-override-of-a-per-cell-lr", "sweep", {},
     ["--config=tiny", "--config.train.optimizer.peak_lr=-1", "--workdir={d}/wd"],
     r"^--config\.train\.optimizer\.peak_lr: each cell of a sweep sets "
     r"train\.optimizer\.peak_lr itself, so this would be ignored; use recipe\.lr_rule"),
    ("sweep-override-of-a-per-cell-shape", "sweep", {},
     ["--config=tiny", "--config.train.model.n_heads=3", "--dry-run"],
     r"sets train\.model\.n_heads itself, so this would be ignored; use sizes and the shape"),
    ("override-unknown-attention-kernel", "train", {},
     ["--config.model.attention=flash", "--workdir={d}/wd"],
     r"attention='flash' is not one of auto, xla, cudnn"),
    ("override-wrong-type-int", "train", {}, ["--config.batch_size=abc", "--workdir={d}/wd"],
     r"batch_size.*abc"),
    ("override-wrong-type-float", "train", {}, ["--config.tokens=lots", "--workdir={d}/wd"],
     r"tokens.*lots"),
    ("override-float-for-int", "train", {}, ["--config.batch_size=3.5", "--workdir={d}/wd"],
     r"batch_size.*3\.5"),
    ("override-wrong-type-bool", "train", {}, ["--config.model.tied=maybe", "--workdir={d}/wd"],
     r"tied.*maybe"),
    ("override-no-value", "train", {}, ["--config.tokens", "--workdir={d}/wd"], r"tokens"),
    ("override-empty-key", "train", {}, ["--config.=3", "--workdir={d}/wd"], r"config"),
    ("override-into-leaf", "train", {}, ["--config.tokens.x=3", "--workdir={d}/wd"],
     r"tokens"),
    ("override-budgets-not-numbers", "sweep", {}, ["--config.budgets=(a,b)",
                                                   "--workdir={d}/wd"], r"budgets"),
    ("budget-zero", "sweep", {}, ["--config.budgets=(0.0,)", "--workdir={d}/wd"],
     r"budgets.*positive"),
    ("budget-negative", "sweep", {}, ["--config.budgets=(-1e11,)", "--workdir={d}/wd"],
     r"budgets.*positive"),
    ("budget-nan", "sweep", {}, ["--config.budgets=(nan,)", "--workdir={d}/wd"],
     r"budgets.*positive"),
    ("budget-inf", "sweep", {}, ["--config.budgets=(inf,)", "--workdir={d}/wd"],
     r"budgets.*positive"),
    ("budgets-empty", "sweep", {}, ["--config.budgets=()", "--workdir={d}/wd"],
     r"budgets is empty"),
    ("sizes-one-list-for-two-budgets", "sweep", {}, ["--config.sizes=((1e4,2e4),)",
                                                     "--workdir={d}/wd"], r"sizes has 1 lists"),
    ("n-per-budget-zero", "sweep", {"c.py": SWEEP + "def get_config():\n"
                                    "  c = smoke.get_config()\n  c.sizes = ()\n"
                                    "  c.n_per_budget = 0\n  return c\n"},
     ["--config={d}/c.py", "--workdir={d}/wd"], r"n_per_budget"),
    ("all-cells-refused", "sweep", {}, ["--config.min_steps=100000000", "--workdir={d}/wd"],
     r"no runnable cells"),
    ("unknown-executor", "sweep", {}, ["--config.executor=cloud", "--workdir={d}/wd"],
     r"executor"),
    # ---------------------------------------------------------------- workdirs
    ("workdir-is-a-file", "sweep", {"wd": "x"}, ["--workdir={d}/wd"], r"wd.*not a folder"),
    ("workdir-under-a-file", "sweep", {"f": "x"}, ["--workdir={d}/f/wd"],
     r"f/wd.*not a folder"),
    ("train-workdir-is-a-file", "train", {"wd": "x"}, ["--workdir={d}/wd"],
     r"wd.*not a folder"),
    ("train-workdir-missing", "train", {}, [], r"--workdir is required"),
    # ---------------------------------------------------------------- training settings
    ("tokens-zero", "train", {}, ["--config.tokens=0", "--workdir={d}/wd"],
     r"config\.tokens must be positive"),
    ("tokens-negative", "train", {}, ["--config.tokens=-5", "--workdir={d}/wd"],
     r"config\.tokens must be positive"),
    ("tokens-nan", "train", {}, ["--config.tokens=nan", "--workdir={d}/wd"],
     r"config\.tokens must be positive"),
    ("batch-zero", "train", {}, ["--config.batch_size=0", "--workdir={d}/wd"],
     r"config\.batch_size must be positive"),
    ("steps-per-dispatch-zero", "train", {},
     ["--config.steps_per_dispatch=0", "--workdir={d}/wd"],
     r"config\.steps_per_dispatch must be positive"),
    ("lr-zero", "train", {}, ["--config.optimizer.peak_lr=0", "--workdir={d}/wd"],
     r"peak_lr"),
    ("lr-negative", "train", {}, ["--config.optimizer.peak_lr=-1e-3", "--workdir={d}/wd"],
     r"peak_lr"),
    ("lr-nan", "train", {}, ["--config.optimizer.peak_lr=nan", "--workdir={d}/wd"],
     r"peak_lr"),
    ("heads-do-not-divide", "train", {}, ["--config.model.n_heads=3", "--workdir={d}/wd"],
     r"n_heads=3.*d_model=128"),
    ("heads-zero", "train", {}, ["--config.model.n_heads=0", "--workdir={d}/wd"],
     r"n_heads"),
    ("layers-zero", "train", {}, ["--config.model.n_layers=0", "--workdir={d}/wd"],
     r"n_layers"),
    ("d-model-negative", "train", {}, ["--config.model.d_model=-8", "--workdir={d}/wd"],
     r"d_model"),
    ("seq-len-zero", "train", {}, ["--config.seq_len=0", "--workdir={d}/wd"], r"seq_len"),
    ("grad-accum-not-dividing", "train", {}, ["--config.grad_accum=5", "--workdir={d}/wd"],
     r"grad_accum"),
    ("heads-do-not-divide-dry-run", "train", {}, ["--config.model.n_heads=3", "--dry-run"],
     r"n_heads=3.*d_model=128"),
    ("tokens-zero-dry-run", "train", {}, ["--config.tokens=0", "--dry-run"],
     r"config\.tokens must be positive"),
    ("sweep-cell-eval-every", "sweep", {}, ["--config.train.eval_every=0",
                                            "--workdir={d}/wd"], r"cell .*eval_every"),
    ("sweep-cell-b2", "sweep", {}, ["--config.train.optimizer.b2=1.5", "--workdir={d}/wd"],
     r"cell .*optimizer\.b2"),
    # ---------------------------------------------------------------- runs files
    ("runs-missing", "fit", {}, ["{d}/nope.csv", "--out={d}/law.json"], r"nope\.csv.*no such"),
    ("runs-empty-csv", "fit", {"r.csv": ""}, ["{d}/r.csv", "--out={d}/law.json"],
     r"r\.csv: empty"),
    ("runs-header-only", "fit", {"r.csv": "N,D,loss\n"}, ["{d}/r.csv", "--out={d}/law.json"],
     r"r\.csv.*no rows"),
    ("runs-missing-column", "fit", {"r.csv": _csv(["1e6,3.0"], "N,loss")},
     ["{d}/r.csv", "--out={d}/law.json"], r"needs a column 'D'"),
    ("runs-missing-loss", "fit", {"r.csv": _csv(["1e6,2e7"], "N,D")},
     ["{d}/r.csv", "--out={d}/law.json"], r"missing column 'loss'"),
    ("runs-non-numeric", "fit", {"r.csv": _csv(["1e6,abc,3.0"])},
     ["{d}/r.csv", "--out={d}/law.json"], r"r\.csv:2: D is not a number: 'abc'"),
    ("runs-nan", "fit", {"r.csv": _csv(["1e6,nan,3.0"])},
     ["{d}/r.csv", "--out={d}/law.json"], r"r\.csv:2: D must be a positive finite"),
    ("runs-inf", "fit", {"r.csv": _csv(["inf,2e7,3.0"])},
     ["{d}/r.csv", "--out={d}/law.json"], r"r\.csv:2: N must be a positive finite"),
    ("runs-zero", "fit", {"r.csv": _csv(["0,2e7,3.0"])},
     ["{d}/r.csv", "--out={d}/law.json"], r"r\.csv:2: N must be a positive finite"),
    ("runs-negative-loss", "fit", {"r.csv": _csv(["1e6,2e7,-3.0"])},
     ["{d}/r.csv", "--out={d}/law.json"], r"r\.csv:2: loss must be a positive finite"),
    ("runs-short-row", "fit", {"r.csv": GOOD_CSV + "1e6,2e7\n"},
     ["{d}/r.csv", "--out={d}/law.json"], r"r\.csv:12: 2 values for the 3 columns N, D, loss \(a short row\)"),
    ("runs-long-row", "fit", {"r.csv": GOOD_CSV + "1e6,2e7,3.0,4\n"},
     ["{d}/r.csv", "--out={d}/law.json"], r"r\.csv:12: 4 values for the 3 columns N, D, loss \(a long row\)"),
    ("runs-semicolon-delimiter", "fit", {"r.csv": GOOD_CSV.replace(",", ";")},
     ["{d}/r.csv", "--out={d}/law.json"], r"r\.csv: the header is semicolon-separated"),
    ("runs-tab-delimiter", "fit", {"r.csv": GOOD_CSV.replace(",", "\t")},
     ["{d}/r.csv", "--out={d}/law.json"], r"r\.csv: the header is tab-separated"),
    ("runs-binary", "fit", {"r.csv": "\x00\xff\xfe garbage"},
     ["{d}/r.csv", "--out={d}/law.json"], r"r\.csv"),
    ("runs-duplicate-header", "fit", {"r.csv": _csv(["1e6,2e7,3.0,4.0"], "N,D,loss,loss")},
     ["{d}/r.csv", "--out={d}/law.json"], r"r\.csv: column 'loss' appears more than once"),
    ("runs-unknown-suffix", "fit", {"r.txt": GOOD_CSV}, ["{d}/r.txt", "--out={d}/law.json"],
     r"r\.txt: cannot read this as runs"),
    ("runs-out-equals-input", "fit", {"r.csv": GOOD_CSV}, ["{d}/r.csv", "--out={d}/r.csv"],
     r"out .*r\.csv.*overwrite the input"),
    ("runs-out-is-folder", "fit", {"r.csv": GOOD_CSV, "o/keep": ""},
     ["{d}/r.csv", "--out={d}/o"], r"out .*/o is a folder"),
    ("runs-out-under-file", "fit", {"r.csv": GOOD_CSV, "f": "x"},
     ["{d}/r.csv", "--out={d}/f/law.json"], r"out .*f/law\.json: .*/f is a file"),
    ("runs-plots-is-file", "fit", {"r.csv": GOOD_CSV, "p": "x"},
     ["{d}/r.csv", "--out={d}/law.json", "--plots={d}/p"], r"plots .*/p: not a folder"),
    ("jsonl-empty", "fit", {"runs.jsonl": ""}, ["{d}/runs.jsonl", "--out={d}/law.json"],
     r"runs\.jsonl: no runs"),
    ("jsonl-not-json", "fit", {"runs.jsonl": "{oops\n"}, ["{d}/runs.jsonl", "--out={d}/law.json"],
     r"runs\.jsonl:1: not valid JSON"),
    ("jsonl-not-object", "fit", {"runs.jsonl": "[1, 2]\n"},
     ["{d}/runs.jsonl", "--out={d}/law.json"], r"runs\.jsonl:1: expected a JSON object"),
    ("jsonl-nan-loss", "fit", {"runs.jsonl": json.dumps({**RECORD, "eval_loss": float("nan")})},
     ["{d}/runs.jsonl", "--out={d}/law.json"], r"runs\.jsonl:1.*eval_loss"),
    ("jsonl-string-N", "fit", {"runs.jsonl": json.dumps({**RECORD, "N_total": "big"})},
     ["{d}/runs.jsonl", "--out={d}/law.json"], r"runs\.jsonl:1.*N_total is not a number"),
    ("jsonl-list-N", "fit", {"runs.jsonl": json.dumps({**RECORD, "N_total": [1]})},
     ["{d}/runs.jsonl", "--out={d}/law.json"], r"runs\.jsonl:1.*N_total is not a number"),
    ("jsonl-huge-int", "fit", {"runs.jsonl": json.dumps(RECORD).replace("20000000.0", "9" * 400)},
     ["{d}/runs.jsonl", "--out={d}/law.json"], r"runs\.jsonl:1.*D"),
    ("jsonl-deep-nesting", "fit", {"runs.jsonl": _nested(100000) + "\n"},
     ["{d}/runs.jsonl", "--out={d}/law.json"], r"runs\.jsonl:1.*(nest|deep)"),
    ("jsonl-bad-curve-name", "fit", {"runs.jsonl": json.dumps({**RECORD, "curve": 5})},
     ["{d}/runs.jsonl", "--out={d}/law.json"], r"runs\.jsonl:1.*curve"),
    ("workdir-without-runs", "fit", {"wd/x": ""}, ["{d}/wd", "--out={d}/law.json"],
     r"wd/runs\.jsonl: not found"),
    # ---------------------------------------------------------------- law files
    ("law-missing", "plan", {}, ["--law={d}/nope.json", "--flops=1e21"], r"nope\.json"),
    ("law-truncated", "plan", {"law.json": GOOD_LAW[:len(GOOD_LAW) // 2]},
     ["--law={d}/law.json", "--flops=1e21"], r"law\.json is not valid JSON"),
    ("law-empty", "plan", {"law.json": ""}, ["--law={d}/law.json", "--flops=1e21"],
     r"law\.json is not valid JSON"),
    ("law-is-a-csv", "plan", {"law.json": GOOD_CSV}, ["--law={d}/law.json", "--flops=1e21"],
     r"law\.json is not valid JSON"),
    ("law-csv-file", "plan", {"r.csv": GOOD_CSV}, ["--law={d}/r.csv", "--flops=1e21"],
     r"r\.csv.*(not valid JSON|CSV)"),
    ("law-a-list", "plan", {"law.json": "[1, 2, 3]"}, ["--law={d}/law.json", "--flops=1e21"],
     r"law\.json: expected a law\.json object"),
    ("law-wrong-schema", "plan", {"law.json": _law(schema="chinchax/law/v9")},
     ["--law={d}/law.json", "--flops=1e21"], r"law\.json: schema"),
    ("law-missing-key", "plan", {"law.json": json.dumps(
        {k: v for k, v in json.loads(GOOD_LAW).items() if k != "optimal"})},
     ["--law={d}/law.json", "--flops=1e21"], r"missing top-level key optimal"),
    ("law-negative-alpha", "plan", {"law.json": _law(law__alpha=-0.3)},
     ["--law={d}/law.json", "--flops=1e21"], r"law\.alpha"),
    ("law-string-E", "plan", {"law.json": _law(law__E="1.69")},
     ["--law={d}/law.json", "--flops=1e21"], r"law\.E"),
    ("law-absurd-exponent", "plan", {"law.json": _law(law__alpha=1e300, law__beta=1e300)},
     ["--law={d}/law.json", "--flops=1e21"], r"law\.json"),
    ("law-nan-literal", "plan", {"law.json": GOOD_LAW.replace('"E": 1.69', '"E": NaN')},
     ["--law={d}/law.json", "--flops=1e21"], r"law\.E"),
    ("law-huge-int", "plan", {"law.json": GOOD_LAW.replace('"A": 406.4', '"A": ' + "9" * 5000)},
     ["--law={d}/law.json", "--flops=1e21"], r"law\.json"),
    ("law-deep-nesting", "plan", {"law.json": _nested(100000)},
     ["--law={d}/law.json", "--flops=1e21"], r"law\.json.*(nest|deep)"),
    ("law-binary", "plan", {"law.json": "\x00\x01\x02"}, ["--law={d}/law.json", "--flops=1e21"],
     r"law\.json"),
    ("law-is-folder", "plan", {"lawdir/x": ""}, ["--law={d}/lawdir", "--flops=1e21"],
     r"lawdir.*(folder|directory)"),
    ("law-gamma-above-one", "plan", {"law.json": _law(law__form=NESTED, law__gamma=1.5)},
     ["--law={d}/law.json", "--flops=1e21"], r"law\.gamma: expected a value in \(0, 1\]"),
    ("law-nested-without-gamma", "plan", {"law.json": _law(law__form=NESTED)},
     ["--law={d}/law.json", "--flops=1e21"], r"law.*gamma"),
    ("base-law-truncated", "fit", {"r.csv": GOOD_CSV, "law.json": GOOD_LAW[:50]},
     ["{d}/r.csv", "--out={d}/out.json", "--base-law={d}/law.json"], r"law\.json"),
    ("base-law-nested", "fit", {"r.csv": GOOD_CSV,
                                "law.json": _law(law__form=NESTED, law__gamma=0.5)},
     ["{d}/r.csv", "--out={d}/out.json", "--base-law={d}/law.json"],
     r"the base law must be of the form E \+ A/N\^alpha \+ B/D\^beta"),
    # ---------------------------------------------------------------- plan arguments
    ("plan-non-numeric", "plan", {}, ["--preset=hoffmann2022", "--flops=lots"],
     r"--flops.*not a number"),
    ("plan-infinite", "plan", {}, ["--preset=hoffmann2022", "--flops=inf"],
     r"--flops.*positive finite"),
    ("plan-nan", "plan", {}, ["--preset=hoffmann2022", "--params=nan"],
     r"--params.*positive finite"),
    ("plan-zero", "plan", {}, ["--preset=hoffmann2022", "--tokens=0"],
     r"--tokens.*positive finite"),
    ("plan-negative", "plan", {}, ["--preset=hoffmann2022", "--flops=-1e21"],
     r"--flops.*positive finite"),
    ("plan-overflow", "plan", {}, ["--preset=hoffmann2022", "--flops=1e400"],
     r"--flops.*positive finite"),
    ("plan-empty-number", "plan", {}, ["--preset=hoffmann2022", "--flops="],
     r"--flops.*not a number"),
    ("plan-bad-ci", "plan", {}, ["--preset=hoffmann2022", "--flops=1e21", "--ci=1.5"],
     r"--ci"),
    ("plan-unknown-preset", "plan", {}, ["--preset=kaplan", "--flops=1e21"], r"kaplan"),
    ("plan-no-law", "plan", {}, ["--flops=1e21"], r"no law"),
    ("plan-law-and-preset", "plan", {}, ["--law=x.json", "--preset=hoffmann2022"],
     r"either --law or --preset"),
    ("plan-unknown-flag", "plan", {}, ["--preset=hoffmann2022", "--flop=1e21"],
     r"unrecognized arguments: --flop"),
    ("fit-unknown-flag", "fit", {"r.csv": GOOD_CSV}, ["{d}/r.csv", "--bootsrap=3"],
     r"unrecognized arguments: --bootsrap"),
    ("fit-bad-approach", "fit", {"r.csv": GOOD_CSV}, ["{d}/r.csv", "--approach=4",
                                                      "--out={d}/law.json"], r"approach"),
    ("fit-negative-delta", "fit", {"r.csv": GOOD_CSV}, ["{d}/r.csv", "--delta=-1"],
     r"--delta"),
    ("fit-nan-delta", "fit", {"r.csv": GOOD_CSV}, ["{d}/r.csv", "--delta=nan"], r"--delta"),
    ("tasks-missing-column", "fit-tasks", {"t.csv": _task_csv(drop="accuracy")},
     ["{d}/t.csv", "--out={d}/tasks.json"], r"missing column accuracy"),
    ("tasks-accuracy-percent", "fit-tasks", {"t.csv": _task_csv(("accuracy", "70"))},
     ["{d}/t.csv", "--out={d}/tasks.json"], r"t\.csv:5: accuracy '70' is outside \[0, 1\].*0\.7"),
    ("tasks-accuracy-negative", "fit-tasks", {"t.csv": _task_csv(("accuracy", "-0.1"))},
     ["{d}/t.csv", "--out={d}/tasks.json"], r"accuracy '-0\.1' is outside \[0, 1\]"),
    ("tasks-one-run", "fit-tasks",
     {"t.csv": _task_csv(extra=("solo,1e8,2e9,lonely,1.2,0.3,0.25",))},
     ["{d}/t.csv", "--out={d}/tasks.json"], r"task 'lonely' has 1 run \(solo\).*at least 5"),
    ("tasks-run-two-sizes", "fit-tasks", {"t.csv": _task_csv(("N", "1e9"))},
     ["{d}/t.csv", "--out={d}/tasks.json"], r"has N=1e\+09 here and N=1\.5e\+08.*one N"),
    ("tasks-bad-loss", "fit-tasks", {"t.csv": _task_csv(("loss", "-1"))},
     ["{d}/t.csv", "--out={d}/tasks.json"], r"t\.csv:5: loss must be a positive"),
    ("tasks-empty-task", "fit-tasks", {"t.csv": _task_csv(("task", ""))},
     ["{d}/t.csv", "--out={d}/tasks.json"], r"task is empty"),
    ("tasks-bad-last", "fit-tasks", {"t.csv": _task_csv()}, ["{d}/t.csv", "--last=0"],
     r"--last"),
    ("tasks-bad-chance", "fit-tasks", {"t.csv": _task_csv()}, ["{d}/t.csv", "--chance=1"],
     r"--chance"),
    ("tasks-unknown-unit", "fit-tasks", {"t.csv": _task_csv()},
     ["{d}/t.csv", "--loss-unit=bits"], r"--loss-unit"),
    ("tasks-missing-file", "fit-tasks", {}, ["{d}/nope.csv", "--out={d}/tasks.json"],
     r"nope\.csv: not found; fit-tasks reads a CSV of task evaluations"),
    ("tasks-a-folder", "fit-tasks", {"wd/x.txt": ""}, ["{d}/wd", "--out={d}/tasks.json"],
     r"a folder without runs\.jsonl; fit-tasks reads a CSV"),
    ("tasks-one-token-count", "fit-tasks",
     {"t.csv": "run,N,D,task,loss,accuracy\n" + "".join(
         f"r{i},{1e6 * 2**i:g},1e9,x,{1.5 - 0.1 * i:g},0.4\n" for i in range(5))},
     ["{d}/t.csv", "--out={d}/tasks.json"], r"task 'x'.*do not vary N and D apart"),
    ("tasks-workdir-without-tasks", "fit-tasks",
     {"wd/runs.jsonl": json.dumps({"schema": "chinchax/run/v1", "name": "r", "status": "done"})
      + "\n"}, ["{d}/wd", "--out={d}/tasks.json"], r"no finished run scored a task.*train\.tasks"),
    ("train-task-no-answer", "train", {"t.jsonl": '{"context": "a", "choices": ["b", "c"]}\n'},
     ["--config.tasks=('{d}/t.jsonl',)", "--workdir={d}/wd"], r"t\.jsonl:1: no answer"),
    ("train-task-answer-out-of-range", "train",
     {"t.jsonl": '{"context": "a", "choices": ["b", "c"], "answer": 2}\n'},
     ["--config.tasks=('{d}/t.jsonl',)", "--workdir={d}/wd"],
     r"t\.jsonl:1: answer 2 is outside the 2 choices"),
    ("train-task-empty-choices", "train",
     {"t.jsonl": '{"context": "a", "choices": [], "answer": 0}\n'},
     ["--config.tasks=('{d}/t.jsonl',)", "--workdir={d}/wd"], r"t\.jsonl:1: choices is empty"),
    ("train-task-unknown", "train", {}, ["--config.tasks=('mmlu',)", "--workdir={d}/wd"],
     r"task 'mmlu' is neither a built-in \(stdlib_next_line\)"),
    ("sweep-cell-task-not-json", "sweep", {"t.jsonl": "{context: a}\n"},
     ["--config.train.tasks=('{d}/t.jsonl',)", "--workdir={d}/wd"],
     r"cell .*t\.jsonl:1: not valid JSON"),
    ("plan-tasks-flops-without-law", "plan", {"t.json": _tasks_json()},
     ["--tasks={d}/t.json", "--flops=1e21"], r"--params=N and --tokens=D.*--law"),
    ("plan-tasks-missing", "plan", {}, ["--tasks={d}/t.json", "--params=1e9", "--tokens=2e10"],
     r"cannot read tasks file .*t\.json.*chinchax fit-tasks"),
    ("plan-tasks-ceiling-above-1", "plan",
     {"t.json": _tasks_json(tasks__synth__step2__ceiling=1.5)},
     ["--tasks={d}/t.json", "--params=1e9", "--tokens=2e10"],
     r"tasks\.synth\.step2\.ceiling: 1\.5 is an accuracy above 1"),
    ("plan-tasks-wrong-schema", "plan", {"t.json": _tasks_json(schema="chinchax/law/v3")},
     ["--tasks={d}/t.json", "--params=1e9", "--tokens=2e10"], r"schema: expected"),
    ("sweep-unknown-flag", "sweep", {}, ["--workdri={d}/wd"], r"workdri"),
    ("train-unknown-flag", "train", {}, ["--stpes=3", "--workdir={d}/wd"], r"stpes"),
]


def _tree(root) -> dict[str, bytes]:
  out = {}
  for folder, _, names in os.walk(root):
    for name in names:
      path = os.path.join(folder, name)
      with open(path, "rb") as f:
        out[os.path.relpath(path, root)] = f.read()
    if not names and folder != str(root):
      out[os.path.relpath(folder, root) + "/"] = b""
  return out


def _stop_before_data(monkeypatch):
  def accepted(*args, **kwargs):
    raise Accepted("the input was accepted")
  from chinchax.sweeps import sweep as sweep_lib  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps.train import setup as setup_lib  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(sweep_lib, "preflight", accepted)
  monkeypatch.setattr(setup_lib.inputs_lib, "open_data", accepted)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    rc = cli.run(argv)
  return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("cmd,files,argv,expect", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_2(cmd, files, argv, expect, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  _stop_before_data(monkeypatch)
  for name, text in files.items():
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
  before = _tree(tmp_path)
  rc, out, err = run_cli([cmd, *(a.format(d=tmp_path) for a in argv)])
  lines = err.splitlines()
  assert rc == 2, f"exit {rc}; stderr: {err[-2000:]}"
  assert len(lines) == 1, f"{len(lines)} lines on stderr:\n{err[-3000:]}"
  prefix = f"chinchax {cmd}: error: "
  assert lines[0].startswith(prefix), lines[0]
  assert re.search(expect, lines[0][len(prefix):]), lines[0]
  assert len(lines[0]) < 400, f"{len(lines[0])} characters"
  assert out == ""
  assert _tree(tmp_path) == before, "the refused command wrote files"


def test_unknown_command_is_one_line_and_exit_2():
  rc, out, err = run_cli(["fti", "x.csv"])
  assert rc == 2 and out == "" and len(err.splitlines()) == 1
  assert "unknown command 'fti'" in err


def test_the_catalogue_covers_every_area():
  ids = [c[0] for c in CASES]
  assert len(ids) == len(set(ids))
  for prefix in ("config", "override", "budget", "workdir", "tokens", "batch", "lr", "heads",
                 "runs", "jsonl", "law", "plan"):
    assert any(i.startswith(prefix) for i in ids), prefix
  assert np.all([c[1] in ("sweep", "train", "fit", "plan", "fit-tasks", "forecast") for c in CASES])


@pytest.mark.parametrize("cmd", ["sweep", "train"])
@pytest.mark.parametrize("where", ["existing", "new"])
def test_unwritable_workdir_is_one_line(cmd, where, tmp_path, monkeypatch):
  """Tests run as root, who may write anywhere: the kernel's refusal is simulated."""
  from chinchax.sweeps import lock  # pylint: disable=g-import-not-at-top
  _stop_before_data(monkeypatch)
  wd = tmp_path / "wd"
  if where == "existing":
    wd.mkdir()

    def refuse(path, what):
      raise PermissionError(13, "Permission denied", path)
    monkeypatch.setattr(lock, "_FlockLock", refuse)
  else:
    real = os.makedirs

    def refuse(path, *args, **kwargs):
      if os.fspath(path).startswith(os.fspath(wd)):
        raise PermissionError(13, "Permission denied", path)
      return real(path, *args, **kwargs)
    monkeypatch.setattr(os, "makedirs", refuse)
  rc, _, err = run_cli([cmd, f"--workdir={wd}"])
  assert rc == 2 and len(err.splitlines()) == 1, err
  assert re.match(rf"chinchax {cmd}: error: {wd}: cannot (write in|create) it "
                  r"\(Permission denied\)", err)


def test_a_config_without_get_config_after_a_good_one(tmp_path, monkeypatch):
  """ml_collections loads every config file into one module name: the second file must not
  find the first one's get_config (in-process, as a notebook or a test parses twice)."""
  _stop_before_data(monkeypatch)
  (tmp_path / "c.py").write_text("x = 1\n")
  assert run_cli(["sweep", "--dry-run"])[0] == 0  # loads the default smoke config
  rc, _, err = run_cli(["sweep", f"--config={tmp_path}/c.py", f"--workdir={tmp_path}/wd"])
  assert rc == 2 and "defines no get_config()" in err, err


# A sample run as real processes: stderr there also holds what logging writes, which the
# in-process table cannot see.
SUBPROCESS_SAMPLE = ("config-missing", "config-returns-none", "config-raises",
                     "override-misspelled-key", "workdir-is-a-file", "heads-do-not-divide",
                     "runs-short-row", "runs-out-equals-input", "jsonl-deep-nesting",
                     "law-truncated", "plan-infinite")


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if c[0] in SUBPROCESS_SAMPLE],
                         ids=lambda c: c[0])
def test_bad_input_from_the_command_line(case, tmp_path):
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  _, cmd, files, argv, expect = case
  for name, text in files.items():
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
  before = _tree(tmp_path)
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  p = subprocess.run([sys.executable, "-m", "chinchax.cli", cmd,
                      *(a.format(d=tmp_path) for a in argv)], cwd=root, capture_output=True,
                     text=True, timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
  assert p.returncode == 2 and p.stdout == "", p.stderr[-2000:]
  lines = p.stderr.splitlines()
  assert len(lines) == 1 and lines[0].startswith(f"chinchax {cmd}: error: "), p.stderr[-2000:]
  assert re.search(expect, lines[0])
  assert _tree(tmp_path) == before
