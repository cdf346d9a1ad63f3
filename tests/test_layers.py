"""The architecture rule of docs/internals.md (the map): a layer imports only the layers below it.

Module-level imports only; an import inside a function (the torch facade's offline ``analyse``,
which parses and exports) is a deliberate, lazy exception.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "openmsprof"
LAYERS = {
    "fileio": 0, "config": 0, "recorder": 1, "machine": 1, "sources": 2,
    "profile_api": 3, "mstx": 3, "acl": 3, "torch": 3, "demo": 3, "tensorflow": 3, "flight": 3,
    "parse": 4, "export": 5, "analysis": 6, "cluster": 6,
    "load": 7, "collector": 7, "_bootstrap": 7, "cli": 7,
}
TOP_LEVEL_OK = {"_version", "__init__", "__main__"}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "openmsprof" or len(parts) < 2 or parts[1] in TOP_LEVEL_OK:
        return None
    return LAYERS[parts[1]]


def _module_level_imports(tree: ast.Module) -> list[str]:
    out: list[str] = []
    for node in tree.body:  # only statements at module level, not inside functions
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            out.extend(f"{node.module}.{a.name}" for a in node.names if node.module == "openmsprof")
    return out


def test_every_module_imports_only_lower_layers() -> None:
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        own = _layer(".".join(rel.parts))
        if own is None:
            continue
        for target in _module_level_imports(ast.parse(path.read_text())):
            theirs = _layer(target)
            if theirs is not None and theirs > own:
                bad.append(f"{rel}: imports {target}")
    assert not bad, "\n".join(bad)


def test_every_package_is_assigned_a_layer() -> None:
    names = {p.stem if p.is_file() else p.name for p in PKG.iterdir()
             if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert names - TOP_LEVEL_OK <= set(LAYERS), names - TOP_LEVEL_OK - set(LAYERS)
