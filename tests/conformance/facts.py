"""What the seed documents print, as data carried in the repository (``seed_facts/seed_00N.json``).

The conformance suite checks openmsprof against the five seed documents users hold.  A clone has
no ``../shared/seeds``, so the facts the suite needs — command lines, API calls, sample code, file
names, table columns, the acl.json / ini / profiler_config.json templates — are extracted once by
the rules below, each with the seed section it comes from, and stored beside this module.

``tests/conformance/test_seed_facts.py`` re-extracts them whenever the seeds are beside the
repository and fails if the stored data no longer matches; regenerate with
``python -m tests.conformance.facts --write``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: the seed documents: ``../shared/seeds`` beside the repository (CI lays it there), or where
#: ``OPENMSPROF_SEEDS`` points (a git worktree has no ``shared/`` beside it)
SEEDS = Path(os.environ.get("OPENMSPROF_SEEDS") or REPO.parent / "shared" / "seeds")
FACTS_DIR = Path(__file__).resolve().parent / "seed_facts"

#: seed number → the seed document's file name (in ../shared/seeds when present)
SEED_FILES = {
    "000": "000_aff5e764de414c00.txt",
    "001": "001_2e76267624258f2e.txt",
    "002": "002_4d2d7941ca213b0f.txt",
    "003": "003_2d2cdeb07e8c80ce.txt",
    "004": "004_07ba1061bfbc604d.txt",
}

Fact = dict[str, Any]


def flat(text: str) -> str:
    """Whitespace runs collapsed to one space (the seeds' code is flattened onto one line)."""
    return " ".join(text.split())


# ---------------------------------------------------------------------------------- sections

def _heading_000(line: str) -> bool:
    return line.startswith("Profiling pyACL APIs")  # the rows of "Table 1 pyACL API collection"


def _heading_001(line: str) -> bool:
    return line in ("Profiling性能数据采集", "基本原理") or re.fullmatch(r"示例代码\d", line) is not None


def _heading_002(line: str) -> bool:
    return line.endswith("¶")


def _heading_003(line: str) -> bool:
    return re.fullmatch(r"Collection Operations|Prerequisites|Restrictions|Collection of .*|Sampling .*"
                        r"|Data Collection Description|Table \d+ .*", line) is not None


def _row_003(line: str) -> bool:
    """An argument row of Table 1 (``aicpu``, ``host_sys_usage``): the files after it are its."""
    return re.fullmatch(r"[a-z][a-z0-9_]+(?:, [a-z][a-z0-9_]+)*(?: \([^)]*\))?", line) is not None


def _heading_004(line: str) -> bool:
    return (re.fullmatch(r"[^\s=:.()\"'\[\]{}#,][^=:.\"'\[\]{}#,]{1,40}", line) is not None
            and re.search(r"[\u4e00-\u9fff]", line) is not None and not line.endswith(("。", ":", ":")))


HEADINGS: dict[str, Callable[[str], bool]] = {
    "000": _heading_000, "001": _heading_001, "002": _heading_002, "003": _heading_003, "004": _heading_004}
#: sub-headings (table rows) shown as "heading: row"
ROWS: dict[str, Callable[[str], bool]] = {"003": _row_003}


def _lines_with_section(seed: str, text: str) -> list[tuple[str, str]]:
    """Each line of the seed with the heading it stands under ("" before the first)."""
    out, heading, row = [], "", ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line and not raw[:1].isspace():
            if HEADINGS[seed](line.strip()):
                heading, row = line.strip().rstrip("¶").strip(), ""
            elif seed in ROWS and heading.startswith("Table") and ROWS[seed](line.strip()):
                row = line.strip()
        out.append((f"{heading}: {row}" if row else heading, line))
    return out


def _first_seen(pairs: list[tuple[str, str]], pattern: str, group: int = 0) -> list[Fact]:
    """Every distinct match of ``pattern`` in document order, with the section of its first use."""
    seen: dict[str, str] = {}
    for section, line in pairs:
        for m in re.finditer(pattern, line):
            seen.setdefault(m.group(group).strip(), section)
    return [{"text": t, "section": s} for t, s in seen.items()]


# ---------------------------------------------------------------------------------- extractors

#: API calls the seeds spell (``acl.prof.init``, ``torch_npu.profiler.profile(...)``, ...), with
#: the argument list when it fits on the line without nested parentheses.
CALL = r"(?a)\b(?:acl|torch_npu|npu_bridge|tf)(?:\.\w+)+\*?(?:\([^()\n]*\))?"
#: File names and name patterns (``op_summary_*.csv``, ``acl_{device_id}...json``, ``trace_view.json``).
FILE = r"(?a)[\w{}*]+(?:\.[\w{}*]+)*\.(?:csv|json|db|log)\b"


def _apis(pairs: list[tuple[str, str]]) -> list[Fact]:
    return _first_seen(pairs, r"acl\.prof\.([A-Za-z_]+\*?)", 1)


def _files(pairs: list[tuple[str, str]]) -> list[Fact]:
    return [f for f in _first_seen(pairs, FILE) if re.search(r"[A-Za-z]", f["text"])]


def _samples_001(pairs: list[tuple[str, str]]) -> list[Fact]:
    """The code of 示例代码N: the line after the line-number gutter ("1 2 3 ... 43 |")."""
    out = []
    for i, (section, line) in enumerate(pairs[:-1]):
        if re.fullmatch(r"1( \d+)* \|", line.strip()):
            out.append({"section": section, "code": flat(pairs[i + 1][1].rstrip(" |"))})
    return out


def _table(pairs: list[tuple[str, str]], section: str) -> list[str]:
    """The field names of the "表 1 字段说明" table under ``section`` (name / meaning rows)."""
    rows = [line.strip() for s, line in pairs if s == section]
    start = next(i for i, r in enumerate(rows) if r.startswith("表 1 字段说明"))
    body = []
    for r in rows[start + 1:]:
        if r.startswith(("说明:", "说明:")):
            break
        body.append(r.rstrip(" |").strip())
    body = [b for b in body if b and not set(b) <= set("|-")]
    body = body[2:]  # the header row: 参数名/参数解释 or 字段名/字段解释
    return body[0::2]


def _tables_002(pairs: list[tuple[str, str]]) -> dict[str, Fact]:
    out = {}
    for name, section in (("acl_statistic", "ACL接口调用次数及耗时数据说明"), ("op_summary", "AA Core数据说明"),
                          ("op_statistic", "AA Core算子调用次数及耗时数据说明")):
        files = [f["text"] for f in _files([p for p in pairs if p[0] == section]) if f["text"].startswith(name + "_")]
        out[name] = {"section": section, "file": files[0], "columns": _table(pairs, section)}
    return out


def _line_starting(pairs: list[tuple[str, str]], prefix: str) -> Fact:
    section, line = next((s, ln) for s, ln in pairs if ln.strip().startswith(prefix))
    return {"text": line.strip(), "section": section}


def _profiler_config_004(pairs: list[tuple[str, str]]) -> Fact:
    """The profiler_config.json template (the braces after "profiler_config.json文件内容如下")."""
    idx = next(i for i, (_, ln) in enumerate(pairs) if ln.startswith("profiler_config.json文件内容如下"))
    start = next(i for i in range(idx, len(pairs)) if pairs[i][1].strip() == "{")
    end = next(i for i in range(start, len(pairs)) if pairs[i][1] == "}")
    text = "\n".join(ln for _, ln in pairs[start:end + 1])
    return {"section": pairs[idx][1].split("文件内容如下")[0] + "文件说明", "json": json.loads(text)}


def _table1_003(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Table 1 of seed 003: each argument row and the lines the seed prints for it."""
    out: dict[str, list[str]] = {}
    for section, line in pairs:
        head, _, row = section.partition(": ")
        if head.startswith("Table 1") and row and line.strip() and line.strip() != row:
            out.setdefault(row, []).append(line.strip())
    return out


def extract(seed: str, text: str) -> Fact:
    """The facts of one seed document, by the rules above."""
    pairs = _lines_with_section(seed, text)
    facts: Fact = {"seed": seed, "document": SEED_FILES[seed], "calls": _first_seen(pairs, CALL),
                   "files": _files(pairs)}
    if seed in ("000", "001"):
        facts["apis"] = _apis(pairs)
    if seed == "001":
        facts["samples"] = _samples_001(pairs)
    if seed == "002":
        # the command up to the prose the seed runs into it ("...--all执行上板采集命令后")
        facts["commands"] = _first_seen(pairs, r"python3\.7\.5 msprof\.pyc [\x20-\x7e]*")
        facts["acl_json"] = _line_starting(pairs, '{ "profiler":')
        facts["ini"] = _line_starting(pairs, "[ssh_config]")
        facts["tables"] = _tables_002(pairs)
    if seed == "003":
        facts["table1"] = _table1_003(pairs)
    if seed == "004":
        facts["profiler_config"] = _profiler_config_004(pairs)
    return facts


# ---------------------------------------------------------------------------------- loading

def facts_path(seed: str) -> Path:
    return FACTS_DIR / f"seed_{seed}.json"


@functools.cache
def facts(seed: str) -> Fact:
    """The stored facts of seed ``seed`` ("000" ... "004")."""
    doc: Fact = json.loads(facts_path(seed).read_text(encoding="utf-8"))
    return doc


def texts(seed: str, key: str) -> list[str]:
    """The ``text`` of every fact under ``key`` (``calls``, ``files``, ``commands``, ``apis``)."""
    return [f["text"] for f in facts(seed)[key]]


def name_regex(pattern: str, **fields: str) -> str:
    """A seed file-name pattern (``acl_{device_id}.{model_file_name}.json``) as a regex: each
    ``{field}`` replaced by ``fields[field]`` (a regex; every field must be given), the rest literal."""
    parts = re.split(r"\{(\w+)\}", pattern)
    return "".join(re.escape(p) if i % 2 == 0 else f"(?:{fields[p]})" for i, p in enumerate(parts))


def dump(doc: Fact) -> str:
    return json.dumps(doc, ensure_ascii=False, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite seed_facts/*.json from the seeds")
    ap.add_argument("--seeds", type=Path, default=SEEDS, help="the folder of the seed documents")
    a = ap.parse_args(argv)
    changed = 0
    for seed, name in SEED_FILES.items():
        doc = dump(extract(seed, (a.seeds / name).read_text(encoding="utf-8")))
        path = facts_path(seed)
        if not path.is_file() or path.read_text(encoding="utf-8") != doc:
            changed += 1
            print(f"{path.name}: {'rewritten' if a.write else 'differs from the seed'}")
            if a.write:
                FACTS_DIR.mkdir(exist_ok=True)
                path.write_text(doc, encoding="utf-8")
    return 1 if changed and not a.write else 0


if __name__ == "__main__":
    sys.exit(main())
