r"""How far one config travels: a call profile of `chinchax sweep` from its config to law.json.

    python bench/call_profile.py [--config=tiny] [--until-law] [--json]

runs the sweep in this process (a fresh temporary workdir) under `sys.setprofile` and
`threading.setprofile`, keeps every call whose caller and callee are both chinchax source
files, and prints:

- files: the chinchax source files the path visits (any function of theirs was called; what
  runs while one of our modules is imported, its body and the decorators and comprehensions
  in it, is not on the path);
- edges: the distinct cross-file call edges (caller file -> callee file), and how many
  distinct caller function -> callee function pairs they hold;
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

The sweep's own dispatch (cli) is included; tests, bench and third-party code are not.
"""

import argparse
import ast
import collections
import contextlib
import inspect
import json
import os
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ("chinchax", "scaling", "models", "sweeps", "launch")


def _ours(path: str) -> str | None:
  path = os.path.realpath(path)
  if not path.startswith(ROOT + os.sep) or not path.endswith(".py"):
    return None
  rel = os.path.relpath(path, ROOT)
  return rel if rel.split(os.sep)[0] in FOLDERS else None


def _dotted(rel: str) -> str:
  parts = rel[:-len(".py")].split(os.sep)
  parts = parts[1:] if parts[0] == "chinchax" else parts
  return ".".join(["chinchax", *[p for p in parts if p != "__init__"]])


def _imports(rel: str) -> set[str]:
  """Every module `rel` imports by name, imports inside functions included."""
  out = set()
  for node in ast.walk(ast.parse(open(os.path.join(ROOT, rel)).read())):
    if isinstance(node, ast.Import):
      out.update(a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      out.add(node.module)
      out.update(f"{node.module}.{a.name}" for a in node.names)
  return out


def profile(config: str, until_law: bool = False) -> dict:
  first: dict[str, int] = {}
  ended = threading.Event()  # law.json written, with until_law: the path is over
  edges: collections.Counter = collections.Counter()
  call_edges: set[tuple[str, str, str, str]] = set()
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
    # not the path's: skipped whole.
    caller_frame, c = None, None
    f = frame.f_back
    while f is not None:
      p = f.f_code.co_filename
      o = cache[p] if p in cache else cache.setdefault(p, _ours(p))
      if o is not None:
        if not f.f_code.co_flags & inspect.CO_NEWLOCALS:
          return
        if caller_frame is None:
          caller_frame, c = f, o
      f = f.f_back
    with lock:
      first.setdefault(callee, len(first))
      if caller_frame is not None and c != callee:
        edges[(c, callee)] += 1
        call_edges.add((c, caller_frame.f_code.co_name, callee, frame.f_code.co_name))
    if (until_law and callee == "chinchax/atomic.py" and frame.f_code.co_name == "write_bytes"
        and str(frame.f_locals.get("path", "")).endswith("law.json")):
      ended.set()

  from chinchax import cli  # pylint: disable=import-outside-toplevel
  with tempfile.TemporaryDirectory() as tmp:
    threading.setprofile(tracer)
    sys.setprofile(tracer)
    try:
      with contextlib.redirect_stdout(sys.stderr):  # the sweep's console; ours is the figures
        rc = cli.run(["sweep", f"--config={config}", f"--workdir={tmp}/w", "--quiet"])
    finally:
      sys.setprofile(None)
      threading.setprofile(None)
    law = os.path.exists(os.path.join(tmp, "w", "law.json"))
  returns = sorted((a, b) for a, b in edges if first[b] < first[a])
  above = sorted((a, b) for a, b in edges
                 if os.path.dirname(b) not in (os.path.dirname(a), "chinchax")
                 and os.path.dirname(a).startswith(os.path.dirname(b) + os.sep))
  upcalls = [(a, b) for a, b in above if _dotted(b) in _imports(a)]
  callbacks = [(a, b) for a, b in above if _dotted(b) not in _imports(a)]
  floor = {f for f in first if os.path.dirname(f) == "chinchax"}
  return {"config": config, "until_law": until_law, "exit": rc, "law_json": law,
          "files": len(first),
          "edges": len(edges), "call_edges": len(call_edges), "returns": len(returns),
          "upcalls": len(upcalls),
          "callbacks": len(callbacks),
          "returns_above_floor": sum(b not in floor for _, b in returns),
          "file_order": sorted(first, key=first.get),
          "return_edges": [f"{a} -> {b}" for a, b in returns],
          "upcall_edges": [f"{a} -> {b}" for a, b in upcalls],
          "callback_edges": [f"{a} -> {b}" for a, b in callbacks]}


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--config", default="tiny")
  p.add_argument("--json", action="store_true", help="print everything as one JSON object")
  p.add_argument("--until-law", action="store_true",
                 help="stop following at law.json's write: the plots, report.md and the "
                      "forecast's score after it are left out")
  args = p.parse_args()
  r = profile(args.config, args.until_law)
  if args.json:
    print(json.dumps(r, indent=1))
    return
  print(f"chinchax sweep --config={r['config']}: exit {r['exit']}, law.json written: {r['law_json']}")
  print(f"files {r['files']}, cross-file edges {r['edges']} ({r['call_edges']} between "
        f"functions), returns {r['returns']} "
        f"({r['returns_above_floor']} not into the package root's own modules), "
        f"upcalls {r['upcalls']}, callbacks {r['callbacks']}")
  for title, rows in (("returns", r["return_edges"]), ("upcalls", r["upcall_edges"]),
                      ("callbacks", r["callback_edges"])):
    print(f"\n{title}:")
    for row in rows:
      print("  " + row)


if __name__ == "__main__":
  main()
