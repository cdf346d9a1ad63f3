"""The module import graph (docs/internals.md, "Layers"): every import counts — module level,
inside functions, under ``TYPE_CHECKING`` — and the graph has no circles.  Upward imports (a
module importing a higher layer) are allowed only where docs/internals.md names them.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_layers import LAYERS, PKG, TOP_LEVEL_OK

# The one documented upward use (docs/internals.md): the torch facade's offline ``analyse``
# parses and exports a rank dir, lazily inside the function.
ALLOWED_UPWARD = {("openmsprof.torch.profiler.analysis", "openmsprof.export")}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    """The module a dotted import name lands in (``openmsprof.a.b.func`` → ``openmsprof.a.b``)."""
    while name:
        if name in mods:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(path: Path, own: str, mods: dict[str, Path]) -> set[str]:
    """Every openmsprof module ``path`` imports, at any depth of the tree."""
    out: set[str] = set()
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        for n in names:
            if not n.startswith("openmsprof"):
                continue
            target = _resolve(n, mods)
            if target and target != own:
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(p, m, mods) for m, p in mods.items()}


def _cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def _is_package_init_edge(a: str, b: str) -> bool:
    """A package's ``__init__`` re-exporting its own submodule is not a circle of concepts."""
    return b.startswith(a + ".")


def test_no_import_circles() -> None:
    g = {m: {t for t in ts if not _is_package_init_edge(m, t)} for m, ts in graph().items()}
    cycles = _cycles(g)
    assert not cycles, "import circles:\n" + "\n".join(" ↔ ".join(c) for c in cycles)


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2 or parts[1] in TOP_LEVEL_OK:
        return None
    return LAYERS[parts[1]]


def test_upward_imports_only_where_documented() -> None:
    bad = []
    for mod, targets in graph().items():
        own = _layer(mod)
        for t in targets:
            theirs = _layer(t)
            if own is None or theirs is None or theirs <= own:
                continue
            if not any(mod == a and (t == b or t.startswith(b + ".")) for a, b in ALLOWED_UPWARD):
                bad.append(f"{mod} imports {t}")
    assert not bad, "upward imports not documented in docs/internals.md:\n" + "\n".join(sorted(bad))


def test_the_checker_sees_function_level_and_type_checking_imports(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from openmsprof.cli import main\n"
        "def f():\n    import openmsprof.export.jobdb\n"
    )
    mods = _modules()
    assert _imports(src, "openmsprof.x", mods) == {
        "openmsprof.cli", "openmsprof.cli.main", "openmsprof.export.jobdb"}
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
