"""The shape of the house: no import cycle among chinchax's modules (imports inside functions
included), the grid decided without jax, and `import chinchax` (and `chinchax plan`) cheap.

The import graph is read from the source with `ast`, so these checks import nothing."""

import ast
import functools
import pathlib
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The import name of each folder (pyproject.toml's package-dir).
FOLDERS = {"chinchax": "chinchax", "chinchax.scaling": "scaling", "chinchax.models": "models",
           "chinchax.sweeps": "sweeps", "chinchax.launch": "launch"}
HEAVY = ("jax", "jaxlib", "flax", "optax", "orbax", "grain")  # grain imports jax


@functools.lru_cache(maxsize=None)
def project_modules() -> dict[str, pathlib.Path]:
  out = {}
  for package, folder in FOLDERS.items():
    for path in sorted((ROOT / folder).rglob("*.py")):
      parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
      if parts[-1] == "__init__":
        parts = parts[:-1]
      out[".".join([package, *parts])] = path
  return out


def imports_of(name: str, path: pathlib.Path, modules) -> list[tuple[str, bool]]:
  """(imported name, run when the module is imported) for every import in `path`; the
  others are inside functions."""
  package = name if path.name == "__init__.py" else name.rpartition(".")[0]
  found = []

  def visit(node, at_import: bool):
    if isinstance(node, ast.Import):
      found.extend((a.name, at_import) for a in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        kept = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join(kept + ([node.module] if node.module else []))
      found.extend((f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base, at_import)
                   for a in node.names)
    inside = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    for child in ast.iter_child_nodes(node):
      visit(child, at_import and not inside)

  visit(ast.parse(path.read_text()), True)
  return found


def _resolve(imported: str, modules) -> str | None:
  """The project module an import names (the longest dotted prefix that is one), or None."""
  parts = imported.split(".")
  for k in range(len(parts), 0, -1):
    if ".".join(parts[:k]) in modules:
      return ".".join(parts[:k])
  return None


@functools.lru_cache(maxsize=None)
def graph(module_level_only: bool = False) -> dict[str, set[str]]:
  modules = project_modules()
  edges = {}
  for name, path in modules.items():
    targets = {_resolve(i, modules) for i, top in imports_of(name, path, modules)
               if top or not module_level_only}
    edges[name] = {t for t in targets if t and t != name}
  return edges


def outside_imports(name: str, module_level_only: bool = True) -> set[str]:
  modules = project_modules()
  return {i.split(".")[0] for i, top in imports_of(name, modules[name], modules)
          if (top or not module_level_only) and _resolve(i, modules) is None}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
  state, stack = {}, []

  def visit(n):
    state[n] = "open"
    stack.append(n)
    for m in sorted(edges.get(n, ())):
      if state.get(m) == "open":
        return stack[stack.index(m):] + [m]
      if m not in state:
        cycle = visit(m)
        if cycle:
          return cycle
    stack.pop()
    state[n] = "done"
    return None

  for n in sorted(edges):
    if n not in state:
      cycle = visit(n)
      if cycle:
        return cycle
  return None


def reachable(edges, start: str) -> set[str]:
  seen, todo = set(), [start]
  while todo:
    n = todo.pop()
    if n not in seen:
      seen.add(n)
      todo += edges.get(n, ())
  return seen


def test_the_graph_sees_imports_inside_functions():
  edges = graph()
  assert "chinchax.sweeps.train.loop" in edges["chinchax.sweeps.wsd"]
  # sweeps/grid.py imports the law inside its function (scipy is loaded only when needed).
  assert "chinchax.scaling.law.artifact" in edges["chinchax.sweeps.grid"]
  assert "chinchax.scaling.law.artifact" not in graph(module_level_only=True)["chinchax.sweeps.grid"]
  assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
  assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
  assert find_cycle(graph()) is None


@pytest.mark.parametrize("package, may_not_import", [
    ("chinchax.scaling", ("chinchax.models", "chinchax.sweeps", "chinchax.launch")),
    ("chinchax.sweeps.train", ("chinchax.sweeps.wsd", "chinchax.sweeps.sweep",
                             "chinchax.sweeps.executors", "chinchax.sweeps.spec")),
])
def test_layers_import_downwards(package, may_not_import):
  edges = graph()
  for name in (n for n in edges if n == package or n.startswith(package + ".")):
    bad = {t for t in reachable(edges, name) for p in may_not_import
           if t == p or t.startswith(p + ".")}
    assert not bad, f"{name} reaches {sorted(bad)}"


@pytest.mark.parametrize("start", ["chinchax.sweeps.grid", "chinchax", "chinchax.cli",
                                   "chinchax.cli.plan", "chinchax.cli.sweep",
                                   "chinchax.cli.train", "chinchax.cli.next",
                                   "chinchax.cli.data", "chinchax.cli.tokenizer",
                                   "chinchax.cli.models", "chinchax.models.config",
                                   "chinchax.sweeps.data"])
def test_no_jax_on_import(start):
  """The grid is decided before compute; `import chinchax` and `chinchax plan` stay cheap,
  and so does every command's --help (what trains or reads batches is imported later)."""
  edges = graph(module_level_only=True)
  heavy = {(name, i) for name in reachable(edges, start) for i in outside_imports(name)
           if i in HEAVY}
  assert not heavy, sorted(heavy)


def test_a_fit_imports_no_scipy():
  """scipy is half a second of import; `chinchax fit` (and `import chinchax`) needs none of
  it: the modules that use it import it inside the functions that do."""
  edges = graph(module_level_only=True)
  for start in ("chinchax.cli.fit", "chinchax.scaling.api"):
    heavy = {name for name in reachable(edges, start) if "scipy" in outside_imports(name)}
    assert not heavy, (start, sorted(heavy))


def test_the_wheel_lists_every_package():
  """pyproject.toml names the packages one by one: a new folder must be added there."""
  setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
  assert setuptools["package-dir"] == FOLDERS
  on_disk = {name for name, path in project_modules().items() if path.name == "__init__.py"}
  assert set(setuptools["packages"]) == on_disk


def test_no_folder_imports_from_a_folder_above_it():
  """The rooms stay rooms: a folder's modules import nothing of the folders above them (the
  trainer, sweeps/train/, nothing of the sweep in sweeps/; accelerator readiness,
  sweeps/accel/, nothing of the executors or the grid; the data pipeline nothing of the
  console), imports inside functions included. The package root's own modules (errors, atomic
  writes, kill points) are the floor every folder stands on; the command line, chinchax/cli/,
  sits beside them and calls down into the folders."""
  modules, edges = project_modules(), graph()
  package_root = ROOT / "chinchax"
  bad = []
  for name, targets in edges.items():
    folder = modules[name].parent
    for t in targets:
      above = modules[t].parent
      if above == package_root or modules[t].name == "__init__.py":
        continue
      if above != folder and folder.is_relative_to(above):
        bad.append(f"{modules[name].relative_to(ROOT)} -> {modules[t].relative_to(ROOT)}")
  assert not bad, bad


# The measures of rooms: a folder is a concept a newcomer can find by its name.
MAX_MODULES = 15  # a folder's own modules; past it, the folder holds a room not yet made
CLI = ROOT / "chinchax" / "cli"  # one module per subcommand: its size is the command count
FLOOR = ROOT / "chinchax"  # errors, atomic, killpoints, json_checks: every folder stands on them


def folders() -> dict[pathlib.Path, list[str]]:
  """Each folder of the project and the names of its own modules (its __init__ aside)."""
  out: dict[pathlib.Path, list[str]] = {}
  for path in project_modules().values():
    out.setdefault(path.parent, [])
    if path.name != "__init__.py":
      out[path.parent].append(path.stem)
  return out


def crowded(rooms: dict[pathlib.Path, list[str]]) -> list[str]:
  return [f"{folder.relative_to(ROOT)}: {len(names)} modules" for folder, names in rooms.items()
          if len(names) > MAX_MODULES and folder != CLI]


def prefix_families(rooms: dict[pathlib.Path, list[str]]) -> list[str]:
  """Three or more modules of a folder named `X` or `X_...`: a room named by a prefix."""
  out = []
  for folder, names in rooms.items():
    family: dict[str, list[str]] = {}
    for n in names:
      family.setdefault(n.split("_")[0], []).append(n)
    out += [f"{folder.relative_to(ROOT)}: {sorted(v)}" for v in family.values() if len(v) >= 3]
  return out


def folder_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
  """folder -> the folders its modules import (relative paths), imports in functions included."""
  modules = project_modules()
  out: dict[str, set[str]] = {}
  for name, targets in edges.items():
    a = str(modules[name].parent.relative_to(ROOT))
    out.setdefault(a, set())
    for t in targets:
      b = str(modules[t].parent.relative_to(ROOT))
      if b != a:
        out[a].add(b)
  return out


def reexports() -> list[str]:
  """Names an __init__.py imports from a module of another folder: a way around the rules
  above (import the package, reach the other folder through it). The command line's
  dispatcher, chinchax/cli/__init__.py, is the top of the graph: nothing imports it."""
  modules, bad = project_modules(), []
  for name, path in modules.items():
    if path.name != "__init__.py" or path.parent == CLI:
      continue
    for imported, _ in imports_of(name, path, modules):
      target = _resolve(imported, modules)
      if target and modules[target].parent not in (path.parent, FLOOR) and not (
          modules[target].parent.is_relative_to(path.parent)):
        bad.append(f"{path.relative_to(ROOT)} imports {target}")
  return bad


def test_rooms_are_small():
  assert not crowded(folders())


def test_no_room_is_a_name_prefix():
  assert not prefix_families(folders())


def test_no_cycle_between_folders():
  """Sibling folders included (sweeps/accel and sweeps/train once imported each other), and
  a folder with the one above it; imports inside functions count."""
  assert find_cycle(folder_graph(graph())) is None


def test_no_reexport_across_folders():
  assert not reexports()


def test_the_room_measures_fail_when_broken():
  """Each measure above, on a layout that breaks it."""
  a = ROOT / "x"
  assert crowded({a: [f"m{i}" for i in range(16)]}) and not crowded({a: ["m"] * 15})
  assert not crowded({CLI: [f"m{i}" for i in range(30)]})
  assert prefix_families({a: ["law", "law_build", "law_text"]})
  assert not prefix_families({a: ["law", "law_build", "plan"]})
  assert find_cycle({"x": {"x/y"}, "x/y": {"x"}}) == ["x", "x/y", "x"]
  assert find_cycle({"x/y": {"x/z"}, "x/z": {"x/y"}}) is not None
  assert find_cycle({"x": {"x/y"}, "x/y": set()}) is None
