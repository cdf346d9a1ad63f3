"""docs/internals.md opens with the map of every package and keeps a module index (issue 22):
both must name every package and module of ``src/openmsprof``.

Regenerate the index after adding modules: ``python -m tests.test_docs_map > /tmp/index.md``
and paste it under "## Module index".
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "openmsprof"
DOC = ROOT / "docs" / "internals.md"


def _summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return first.split(". ")[0].rstrip(".") if first else ""


def modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if p.name not in {"__init__.py", "__main__.py"})


def index() -> str:
    lines = ["| module | what it holds |", "|---|---|"]
    for p in modules():
        rel = p.relative_to(PKG).as_posix()
        lines.append(f"| `{rel}` | {_summary(p).replace('|', '/')} |")
    return "\n".join(lines)


def test_map_names_every_package() -> None:
    text = DOC.read_text()
    head = text[: text.index("### The path of a record")]
    packages = sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").exists())
    missing = [n for n in packages if not re.search(rf"`{re.escape(n)}/?`", head)]
    assert not missing, f"docs/internals.md's map lacks packages: {missing}"


def test_module_index_names_every_module() -> None:
    text = DOC.read_text()
    assert "## Module index" in text
    idx = text[text.index("## Module index"):]
    missing = [p.relative_to(PKG).as_posix() for p in modules()
               if f"`{p.relative_to(PKG).as_posix()}`" not in idx]
    assert not missing, f"docs/internals.md's module index lacks: {missing} (python -m tests.test_docs_map)"


if __name__ == "__main__":
    print(index())
