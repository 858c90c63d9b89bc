r"""How far one config travels: a call profile of `chinchax sweep` from its config to law.json,
or of `chinchax.fit` on a fixed runs file.

    python bench/call_profile.py [--config=tiny] [--until-law] [--json]
    python bench/call_profile.py --fit-runs [--bootstrap=200] [--json]

The first runs the sweep in this process (a fresh temporary workdir). The second, --fit-runs,
writes a fixed runs CSV into a temporary folder and fits it with the library's fit,
`chinchax.fit(csv, bootstrap=200, out=law.json, plots=plots/)` (the fit `chinchax fit`
runs, figures included; the bootstrap's seed is the default, 0). The CSV is made with numpy
from a closed form and a fixed seed: an IsoFLOP grid of 6 budgets (C = 1e17 .. 1e20, evenly
in log C) x 7 sizes (N at 1/8 .. 8x the law's compute-optimal N of that budget, evenly in log
N; D = C/6N), loss L(N, D) = 1.69 + 406.4/N^0.34 + 410.7/D^0.28 times exp(0.01 z), z
standard normal from numpy's default_rng(0); columns N,D,loss. Its figures are the same on
every run.

Either is run under `sys.setprofile` and `threading.setprofile`, which keeps every call whose
caller and callee are both chinchax source files, and prints:

- files: the chinchax source files the path visits (any function of theirs was called; what
  runs while one of our modules is imported, its body and the decorators and comprehensions
  in it, is not on the path);
- edges: the distinct cross-file call edges (caller file -> callee file), and how many
  distinct caller function -> callee function pairs they hold (functions by name);
- returns: the edges that call back to a file the path had already left, i.e. whose callee
  was first entered before the caller was. A path that reads top to bottom, each file
  handing down to the next, has none; a utility called from everywhere, or a lower layer
  that calls up into a higher one, adds one per caller;
- upcalls: the edges from a file in a folder to a file of a folder above it
  (sweeps/train/x.py -> sweeps/y.py), which layered folders never have. The package root's
  own modules (chinchax/errors.py, atomic.py, killpoints.py) are the floor every folder
  stands on, as in tests/test_layout.py, not a folder above. An upcall whose caller does not
  import the callee's module is a callback the upper file handed down (a progress function,
  a logging filter): listed apart, as `callbacks`.

And the same at the level of folders. A file's folder is its directory relative to the
checkout's root: `scaling/isoflop` for scaling/isoflop/vp.py, `scaling` for scaling/api.py,
`sweeps/train`, `chinchax/cli`, and `chinchax` for the package root's own modules (errors.py,
atomic.py, killpoints.py, __init__.py), which are the floor.

- folder edges: the distinct folder -> folder call edges (caller's folder differs from the
  callee's), each with how many distinct caller function -> callee function pairs it holds
  (functions by qualified name, `Class.method`, `f.<locals>.g`);
- back-and-forth: a call into folder X made from another folder while X is already lower on
  the same thread's call stack, i.e. X called into folder Y which, directly or through
  further folders, calls back into X. At every call the stack is the chain of the callee's
  calling frames (the thread's own; frames of third-party code in between are passed over,
  and a worker thread's stack starts in the thread). The pattern is (X, Y): Y is the folder
  just above X's nearest occurrence on the stack, the one X called into; the re-entering
  pair is the caller function (in whatever folder made the call) -> the function of X it
  called. A call into the floor is never a back-and-forth, and a call within one folder
  re-enters nothing (the folder was re-entered, if at all, by the call that came back into
  it). Counted: the distinct (X, Y) patterns, and the distinct re-entering pairs under them;
- folder callbacks: those re-entries whose caller's module does not import the module of
  the function it calls: X handed that function (or an object whose method it is) down, a
  progress function, a logging filter, a stop flag, and it is called back through the
  reference. Listed and counted apart from the back-and-forth, in the same way.

A module imports another (for upcalls and callbacks alike) if its source names it in any
import statement, inside functions too, a relative import by its absolute name, or names a
package of ours whose __init__.py imports it (a re-export).

The sweep's own dispatch (cli) is included; tests, bench and third-party code are not.
Which files are ours is decided where the imported chinchax lives (the realpath of its
package root and of each of its folders), so a checkout imported through PYTHONPATH, or a
package whose folders are symlinks into a checkout, is profiled as well as this one.
"""

import argparse
import ast
import collections
import contextlib
import functools
import importlib.util
import inspect
import json
import os
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ("chinchax", "scaling", "models", "sweeps", "launch")
FLOOR = "chinchax"  # the package root's own modules: errors, atomic, killpoints


@functools.cache
def _roots() -> tuple[tuple[str, str], ...]:
  """(realpath of a top folder, its name in the checkout), longest first: where the imported
  chinchax has its package root and each folder, and this checkout's own."""
  out = {os.path.realpath(os.path.join(ROOT, name)): name for name in FOLDERS}
  for name in FOLDERS:
    spec = importlib.util.find_spec("chinchax" if name == FLOOR else f"chinchax.{name}")
    if spec is not None and spec.origin:
      out[os.path.realpath(os.path.dirname(spec.origin))] = name
  return tuple(sorted(out.items(), key=lambda kv: -len(kv[0])))


_files: dict[str, str] = {}  # our relative path -> the file on disk


def _ours(path: str) -> str | None:
  path = os.path.realpath(path)
  if not path.endswith(".py"):
    return None
  for root, name in _roots():
    if path.startswith(root + os.sep):
      rel = os.path.join(name, os.path.relpath(path, root))
      _files.setdefault(rel, path)
      return rel
  return None


def _folder(rel: str) -> str:
  return os.path.dirname(rel)


def _dotted(rel: str) -> str:
  parts = rel[:-len(".py")].split(os.sep)
  parts = parts[1:] if parts[0] == "chinchax" else parts
  return ".".join(["chinchax", *[p for p in parts if p != "__init__"]])


@functools.cache
def _imports(rel: str) -> frozenset[str]:
  """Every module `rel` imports by name, imports inside functions included (a relative
  import by its absolute name)."""
  out = set()
  with open(_files.get(rel, os.path.join(ROOT, rel)), encoding="utf-8") as f:
    tree = ast.parse(f.read())
  package = _dotted(rel).split(".")[:None if rel.endswith("__init__.py") else -1]
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      out.update(a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom):
      module = node.module
      if node.level:
        module = ".".join(package[:len(package) - node.level + 1] + ([module] if module else []))
      if module:
        out.add(module)
        out.update(f"{module}.{a.name}" for a in node.names)
  return frozenset(out)


def _imported(caller: str, callee: str) -> bool:
  """Whether the module of file `caller` imports that of file `callee`: by name, or through a
  package of ours it imports whose __init__.py imports it (a re-export)."""
  want, seen = _dotted(callee), set()
  todo = set(_imports(caller))
  while todo:
    name = todo.pop()
    if name == want:
      return True
    seen.add(name)
    path = getattr(sys.modules.get(name), "__file__", None) or ""
    rel = _ours(path) if os.path.basename(path) == "__init__.py" else None
    if rel is not None and _dotted(rel) == name:
      todo |= _imports(rel) - seen
  return False


def _qualname(code) -> str:
  return getattr(code, "co_qualname", code.co_name)


def runs_csv(path: str) -> int:
  """Writes the fixed IsoFLOP grid (the module's docstring) to `path`; returns its rows."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  E, A, B, alpha, beta = 1.69, 406.4, 410.7, 0.34, 0.28
  G = (alpha * A / (beta * B)) ** (1 / (alpha + beta))  # N_opt = G (C/6)^(beta/(alpha+beta))
  rng = np.random.default_rng(0)
  lines = ["N,D,loss"]
  for C in np.logspace(17, 20, 6):
    n_opt = G * (C / 6) ** (beta / (alpha + beta))
    for N in n_opt * np.logspace(-np.log10(8), np.log10(8), 7):
      D = C / (6 * N)
      loss = (E + A / N**alpha + B / D**beta) * np.exp(0.01 * rng.standard_normal())
      lines.append(f"{N:.17g},{D:.17g},{loss:.17g}")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return len(lines) - 1


def profile(config: str | None, until_law: bool = False, bootstrap: int = 200) -> dict:
  """The sweep of `config`, or with config None the fit of the fixed runs CSV."""
  first: dict[str, int] = {}
  ended = threading.Event()  # law.json written, with until_law: the path is over
  edges: collections.Counter = collections.Counter()
  call_edges: set[tuple[str, str, str, str]] = set()
  qual_edges: set[tuple[str, str, str, str]] = set()  # by qualified name
  reentries: set[tuple[str, str, str, str]] = set()  # (X, Y, caller rel:fn, callee rel:fn)
  cache: dict[str, str | None] = {}
  lock = threading.Lock()

  def tracer(frame, event, arg):
    del arg
    # Function calls only: a module's or a class body's execution at import is not a call.
    if event != "call" or not frame.f_code.co_flags & inspect.CO_NEWLOCALS or ended.is_set():
      return
    callee_path = frame.f_code.co_filename
    callee = cache[callee_path] if callee_path in cache else cache.setdefault(callee_path, _ours(callee_path))
    if callee is None:
      return
    # The caller is the nearest function of ours: frames of third-party code between two of
    # ours (jax's tracing calls our step) are skipped. A call made while one of our modules
    # is being imported (a decorator, a comprehension in a module's body) is the import's,
    # not the path's: skipped whole. The folders of our frames, nearest first, are this
    # thread's stack of folders under the call.
    caller_frame, c = None, None
    stack: list[str] = []
    f = frame.f_back
    while f is not None:
      p = f.f_code.co_filename
      o = cache[p] if p in cache else cache.setdefault(p, _ours(p))
      if o is not None:
        if not f.f_code.co_flags & inspect.CO_NEWLOCALS:
          return
        if caller_frame is None:
          caller_frame, c = f, o
        stack.append(_folder(o))
      f = f.f_back
    x = _folder(callee)
    reentry = None
    if caller_frame is not None and x not in (stack[0], FLOOR) and x in stack:
      i = stack.index(x)  # X's nearest occurrence; stack[:i] is the other folders above it
      reentry = (x, stack[i - 1], f"{c}:{_qualname(caller_frame.f_code)}",
                 f"{callee}:{_qualname(frame.f_code)}")
    with lock:
      first.setdefault(callee, len(first))
      if caller_frame is not None and c != callee:
        edges[(c, callee)] += 1
        call_edges.add((c, caller_frame.f_code.co_name, callee, frame.f_code.co_name))
        qual_edges.add((c, _qualname(caller_frame.f_code), callee, _qualname(frame.f_code)))
      if reentry is not None:
        reentries.add(reentry)
    if (until_law and callee == "chinchax/atomic.py" and frame.f_code.co_name == "write_bytes"
        and str(frame.f_locals.get("path", "")).endswith("law.json")):
      ended.set()

  with tempfile.TemporaryDirectory() as tmp:
    if config is None:
      import chinchax  # pylint: disable=import-outside-toplevel
      fit = chinchax.fit  # imported here: the library API's dispatch is not the fit's path
      runs = os.path.join(tmp, "runs.csv")
      rows = runs_csv(runs)
      law_path = os.path.join(tmp, "law.json")
      command = lambda: fit(runs, bootstrap=bootstrap, out=law_path,
                            plots=os.path.join(tmp, "plots"))
    else:
      from chinchax import cli  # pylint: disable=import-outside-toplevel
      law_path = os.path.join(tmp, "w", "law.json")
      command = lambda: cli.run(["sweep", f"--config={config}", f"--workdir={tmp}/w", "--quiet"])
    _roots()  # before the tracer: finding the folders imports chinchax
    threading.setprofile(tracer)
    sys.setprofile(tracer)
    try:
      with contextlib.redirect_stdout(sys.stderr):  # the command's console; ours is the figures
        rc = command()
    finally:
      sys.setprofile(None)
      threading.setprofile(None)
    rc = 0 if config is None else rc
    law = os.path.exists(law_path)
  returns = sorted((a, b) for a, b in edges if first[b] < first[a])
  above = sorted((a, b) for a, b in edges
                 if os.path.dirname(b) not in (os.path.dirname(a), "chinchax")
                 and os.path.dirname(a).startswith(os.path.dirname(b) + os.sep))
  upcalls = [(a, b) for a, b in above if _imported(a, b)]
  callbacks = [(a, b) for a, b in above if not _imported(a, b)]
  floor = {f for f in first if os.path.dirname(f) == "chinchax"}

  folder_pairs: dict[tuple[str, str], int] = collections.Counter(
      (_folder(a), _folder(b)) for a, _, b, _ in qual_edges if _folder(a) != _folder(b))
  folder_edges = sorted(folder_pairs)

  def handed_down(caller: str, callee: str) -> bool:
    return not _imported(caller.split(":")[0], callee.split(":")[0])

  back: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
  handed: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
  for x, y, caller, callee in sorted(reentries):
    (handed if handed_down(caller, callee) else back)[(x, y)].append(f"{caller} -> {callee}")

  def listing(d):
    return [{"pattern": f"{x} -> {y} -> {x}", "pairs": d[(x, y)]} for x, y in sorted(d)]

  import chinchax  # pylint: disable=import-outside-toplevel
  out = {"mode": "sweep" if config is not None else "fit",
         "package": os.path.dirname(os.path.abspath(chinchax.__file__))}
  if config is None:
    out.update(runs=f"{rows} runs of the fixed IsoFLOP grid", bootstrap=bootstrap)
  else:
    out.update(config=config, until_law=until_law)
  out.update({
      "exit": rc, "law_json": law,
      "files": len(first),
      "edges": len(edges), "call_edges": len(call_edges), "returns": len(returns),
      "upcalls": len(upcalls),
      "callbacks": len(callbacks),
      "returns_above_floor": sum(b not in floor for _, b in returns),
      "folders": len({_folder(f) for f in first}),
      "folder_edges": len(folder_edges),
      "folder_call_edges": sum(folder_pairs.values()),
      "back_and_forth": len(back),
      "back_and_forth_pairs": sum(len(v) for v in back.values()),
      "folder_callbacks": len(handed),
      "folder_callback_pairs": sum(len(v) for v in handed.values()),
      "file_order": sorted(first, key=first.get),
      "return_edges": [f"{a} -> {b}" for a, b in returns],
      "upcall_edges": [f"{a} -> {b}" for a, b in upcalls],
      "callback_edges": [f"{a} -> {b}" for a, b in callbacks],
      "folder_edge_list": {f"{a} -> {b}": folder_pairs[(a, b)] for a, b in folder_edges},
      "back_and_forth_list": listing(back),
      "folder_callback_list": listing(handed)})
  return out


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--config", default="tiny")
  p.add_argument("--fit-runs", action="store_true",
                 help="profile chinchax.fit on the fixed runs CSV (the docstring) instead of "
                      "a sweep of --config")
  p.add_argument("--bootstrap", type=int, default=200, help="the fit's resamples (--fit-runs)")
  p.add_argument("--json", action="store_true", help="print everything as one JSON object")
  p.add_argument("--until-law", action="store_true",
                 help="stop following at law.json's write: the plots, report.md and the "
                      "forecast's score after it are left out")
  args = p.parse_args()
  r = profile(None if args.fit_runs else args.config, args.until_law, args.bootstrap)
  if args.json:
    print(json.dumps(r, indent=1))
    return
  if r["mode"] == "fit":
    print(f"chinchax.fit({r['runs']}, bootstrap={r['bootstrap']}, plots on): "
          f"law.json written: {r['law_json']}")
  else:
    print(f"chinchax sweep --config={r['config']}: exit {r['exit']}, "
          f"law.json written: {r['law_json']}")
  print(f"files {r['files']}, cross-file edges {r['edges']} ({r['call_edges']} between "
        f"functions), returns {r['returns']} "
        f"({r['returns_above_floor']} not into the package root's own modules), "
        f"upcalls {r['upcalls']}, callbacks {r['callbacks']}")
  print(f"folders {r['folders']}, folder edges {r['folder_edges']} "
        f"({r['folder_call_edges']} between functions), back-and-forth {r['back_and_forth']} "
        f"({r['back_and_forth_pairs']} re-entering pairs), folder callbacks "
        f"{r['folder_callbacks']} ({r['folder_callback_pairs']} pairs)")
  for title, rows in (("returns", r["return_edges"]), ("upcalls", r["upcall_edges"]),
                      ("callbacks", r["callback_edges"])):
    print(f"\n{title}:")
    for row in rows:
      print("  " + row)
  print("\nfolder edges (function pairs):")
  for edge, n in r["folder_edge_list"].items():
    print(f"  {edge}  {n}")
  for title, rows in (("back-and-forth", r["back_and_forth_list"]),
                      ("folder callbacks", r["folder_callback_list"])):
    print(f"\n{title}:")
    for row in rows:
      print("  " + row["pattern"])
      for pair in row["pairs"]:
        print("    " + pair)


if __name__ == "__main__":
  main()
