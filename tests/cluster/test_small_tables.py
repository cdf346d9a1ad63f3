"""A rank's small tables (step trace, communication) are read without pyarrow, kept in one
small.json per rank and read back by DuckDB: the values must be those the pyarrow reader gave
(msprof-analyze reads every step trace column as float), inf and nan included, and a
step_trace/communication run must not import pyarrow, pandas or numpy (their imports were most
of its CPU: issue 26)."""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from openmsprof.cluster import rank_small, run_cluster, sqlviews
from tests.cluster.conftest import copy_tree

TOKENS = ["0", "1", "-3", "+5", "12345678901", "9223372036854775808", "1.5", "-0.25", ".5", "1.", "1e5", "2.5E-3",
          "1e400", "", "NA", "nan", "NaN", "null", "N/A", "inf", "-inf", "+Infinity", "True", "false", "abc", " 7",
          "1_000", "0x10", "-0x10", "1.2.3"]


def _pyarrow_reference(rank: int, data: bytes) -> tuple[list[str], list[list[Any]]]:
    """The reader this replaced: pyarrow's CSV inference, then every non-float column per cell."""
    tab = pacsv.read_csv(pa.BufferReader(data), convert_options=pacsv.ConvertOptions(
        column_types={"Step": pa.string()}, strings_can_be_null=False))
    names, cols = ["rank", "step"], [[rank] * tab.num_rows, pc.fill_null(tab["Step"], "").to_pylist()]
    for name in tab.column_names:
        if name in ("Step", "Device_id"):
            continue
        col = tab[name]
        if not pa.types.is_floating(col.type):
            col = pa.array([_float(v) for v in col.to_pylist()], pa.float64())
        names.append(name)
        cols.append(col.to_pylist())
    return names, [list(r) for r in zip(*cols, strict=True)]


def _float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return type(a) is type(b) and a == b


def _stored(v: Any) -> Any:
    """A value as DuckDB reads it back from small.json (inf and nan are kept as their text)."""
    return float(v) if isinstance(v, str) else v


def test_step_trace_cells_convert_as_the_pyarrow_reader_did(tmp_path: Path) -> None:
    rnd = random.Random(26)
    for case in range(300):
        cols = rnd.randint(1, 4)
        pool = rnd.sample(TOKENS, rnd.randint(1, 5))  # few kinds a column: all-int, all-float, mixed, ...
        rows = [[str(s), "0", *(rnd.choice(pool) for _ in range(cols))] for s in range(rnd.randint(1, 6))]
        text = "\n".join(",".join(r) for r in [["Step", "Device_id", *(f"c{i}" for i in range(cols))], *rows]) + "\n"
        path = tmp_path / f"st{case}.csv"
        path.write_text(text)
        names, got = rank_small.read_step_trace(3, path)
        want_names, want = _pyarrow_reference(3, text.encode())
        assert names == want_names, text
        got_rows = [[row["rank"], row["step"], *(_stored(row[n]) for n in names[2:])] for row in got]
        assert all(_same(a, b) for g, w in zip(got_rows, want, strict=True) for a, b in zip(g, w, strict=True)), (
            text, got_rows, want)


def test_non_finite_values_survive_the_store(synthetic: Path, tmp_path: Path) -> None:
    root = copy_tree(synthetic, tmp_path / "job")
    out = next(root.glob("*_1000_*")) / "ASCEND_PROFILER_OUTPUT"
    head, first, *rest = (out / "step_trace_time.csv").read_text().splitlines()
    cells = first.split(",")
    cells[2], cells[3] = "inf", ""  # Computing (a float column), Communication(Not Overlapped)
    (out / "step_trace_time.csv").write_text("\n".join([head, ",".join(cells), *rest]) + "\n")
    doc = orjson.loads((out / "communication.json").read_bytes())
    step = next(iter(doc))
    op = next(k for k in doc[step]["collective"] if not k.startswith("Total"))
    doc[step]["collective"][op]["Communication Time Info"]["Wait Time(ms)"] = "-inf"  # (JSON has no number for it)
    (out / "communication.json").write_bytes(orjson.dumps(doc))
    run = run_cluster(root, ["step_trace"], tmp_path / "o", workers=1)  # every rank's comm table is stored too
    assert not run.problems
    lines = (run.output / "cluster_step_trace_time.csv").read_text().splitlines()
    row = next(ln.split(",") for ln in lines if ln.startswith(f"{cells[1]},rank,0,"))
    assert row[3:5] == ["inf", ""], row
    con = sqlviews.connect(run.store)
    try:
        waits = con.execute("SELECT wait_ms FROM comm WHERE rank = 0 AND step = ? AND op_key = ?", [step, op]).fetchall()
    finally:
        con.close()
    assert waits == [(-math.inf,)]


def test_step_trace_and_communication_import_no_pyarrow_pandas_or_numpy(synthetic: Path, tmp_path: Path) -> None:
    code = ("import sys\n"
            "from openmsprof.cli.main import main\n"
            "rc = main(['cluster', '-d', sys.argv[1], '-o', sys.argv[2], '-m', 'step_trace', 'communication'])\n"
            "print(rc, sorted(m for m in ('pyarrow', 'pandas', 'numpy') if m in sys.modules))\n")
    env = {**os.environ, "PYTHONPATH": str(Path(rank_small.__file__).parents[2])}
    res = subprocess.run([sys.executable, "-c", code, str(synthetic), str(tmp_path)], capture_output=True, text=True,
                         timeout=600, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.splitlines()[-1] == "0 []", res.stdout
    out = tmp_path / "cluster_analysis_output"
    assert {p.name for p in out.iterdir()} >= {"cluster_step_trace_time.csv", "cluster_communication.json",
                                               "cluster_communication_matrix.json", "communication_group.json"}
