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
HEAVY = ("jax", "jaxlib", "flax", "optax", "orbax")


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
  assert "chinchax.scaling.law" in edges["chinchax.sweeps.grid"]
  assert "chinchax.scaling.law" not in graph(module_level_only=True)["chinchax.sweeps.grid"]
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
                                   "chinchax.cli.plan"])
def test_no_jax_on_import(start):
  """The grid is decided before compute; `import chinchax` and `chinchax plan` stay cheap."""
  edges = graph(module_level_only=True)
  heavy = {(name, i) for name in reachable(edges, start) for i in outside_imports(name)
           if i in HEAVY}
  assert not heavy, sorted(heavy)


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
