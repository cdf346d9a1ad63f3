"""The native Kineto block scan (``sources/_kineto_scan.c``): the columns it gives equal those of
orjson's events through ``Columns.add`` (the reference path), blocks it does not reproduce are
left to orjson, and a real profile's analysis is byte-identical with and without it."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

import openmsprof.torch.profiler as tp
from openmsprof.export.ascend_pt.columns import Columns
from openmsprof.export.ascend_pt.rank_analyse import export
from openmsprof.sources import kineto_trace
from openmsprof.sources.kineto_trace import Restart, TraceReader
from tests.torch.conftest import Trainer, rank_dirs

pytestmark = pytest.mark.skipif(kineto_trace.scan is None, reason="native Kineto scan not built")

COLUMNS = ("op_ts", "op_dur", "op_tid", "op_name", "op_annot", "op_args", "op_shape", "op_seq", "op_fwd",
           "op_ext", "flow_ts", "flow_start", "flow_id", "flow_tid", "py_ts", "py_dur", "py_dur_us", "py_tid",
           "py_name")


def _reference(blocks: list[bytes]) -> Columns:
    cols = Columns()
    for b in blocks:
        cols.add(TraceReader.events(b))
    cols.finish(1_000)
    return cols


def _native(blocks: list[bytes]) -> Columns:
    cols = Columns()
    for b in blocks:
        cols.add_block(b)
    cols.finish(1_000)
    return cols


def _same(a: Columns, b: Columns) -> None:
    assert (a.pid, a.names.items, a.args.items, a.shapes.items, a.py_names.items) == \
        (b.pid, b.names.items, b.args.items, b.shapes.items, b.py_names.items)
    for name in COLUMNS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name


def _op(rng: random.Random, i: int) -> dict[str, Any]:
    annot = rng.random() < 0.1
    e: dict[str, Any] = {"ph": "X", "cat": "user_annotation" if annot else "cpu_op",
                         "name": rng.choice(["aten::mm", "aten::add_", "ProfilerStep#3", "a \"quoted\"\\name\n",
                                             "aten::empty", ""]),
                         "pid": rng.choice([7, 7, "Spans"]), "tid": rng.choice([7, 8, "stream 1", 9.5]),
                         "ts": rng.choice([1_000_000 + i * 1.25, 1_000_000 + i, 1.5e6 + i, 123456789012.345678])}
    if rng.random() < 0.9:
        e["dur"] = rng.choice([3.5, 2, 0, 1e-3, 7.25e2])
    args: dict[str, Any] = {"External id": rng.choice([i, i, "x", None]), "Record function id": i, "Ev Idx": i}
    if rng.random() < 0.6:
        args["Input Dims"] = rng.choice([[[64, 64], [], []], [[2, 3]], [], [[1, 2], [3]], [["a"], 1.5]])
    if rng.random() < 0.5:
        args["Input type"] = rng.choice([["float", "Scalar"], ["float"], [], ["c10::Half", "\t"]])
    if rng.random() < 0.8:
        args["Sequence number"] = rng.choice([0, 5, 17, "7", 2.0, [1]])
    if rng.random() < 0.7:
        args["Fwd thread id"] = rng.choice([0, 1, None])
    args["Concrete Inputs"] = ["", "1", {"deep": [[[1]]]}]
    if rng.random() < 0.9:
        e["args"] = args if rng.random() < 0.95 else None
    return e


def _other(rng: random.Random, i: int) -> dict[str, Any]:
    e = _pick(rng, i)
    if rng.random() < 0.2:
        e.pop("dur", None)
    return e


def _pick(rng: random.Random, i: int) -> dict[str, Any]:
    return rng.choice([
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 7, "args": {"name": "thread 7 (python)"}},
        {"ph": "s", "cat": "fwdbwd", "id": i, "pid": 7, "tid": 7, "ts": 1e6 + i, "bp": "e"},
        {"ph": "f", "cat": "fwdbwd", "id": rng.choice([i, "z"]), "pid": 7, "tid": rng.choice([8, "t"]),
         "ts": 1e6 + i, "bp": "e"},
        {"ph": "f", "cat": "ac2g", "id": i, "pid": 7, "tid": 7, "ts": 1e6 + i},
        {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 5.5},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
         "ts": 1.0, "dur": 9.0, "args": {"Op count": 0}},
        {"ph": "X", "cat": "python_function", "name": rng.choice(["nn.Module: MLP_0", "<built-in method mm>", "f\\n"]),
         "pid": 7, "tid": rng.choice([7, 8, "x"]), "ts": 1e6 + i * 0.5, "dur": rng.choice([1.5, 3]),
         "args": {"Python id": i, "Python parent id": i - 1}},
    ])


def _block(events: list[dict[str, Any]], rng: random.Random) -> bytes:
    """Kineto's indented layout (one field a line), or orjson's compact one."""
    if rng.random() < 0.5:
        return orjson.dumps(events)
    return b"[" + b",".join(orjson.dumps(e, option=orjson.OPT_INDENT_2) for e in events) + b"]"


def _kineto(events: list[dict[str, Any]], dur_comma: bool = True) -> bytes:
    """Kineto's own layout (what the scan's Kineto member loop reads by its literal bytes): each
    member on its line after a 4-space indent, ``"dur": …`` followed by ``\n    ,``, the args
    object on its lines."""
    out = []
    for e in events:
        lines = []
        for k, v in e.items():
            text = (b"{\n      " + orjson.dumps(v)[1:-1] + b"\n    }" if k == "args" and isinstance(v, dict) and v
                    else orjson.dumps(v))
            lines.append(b"\n    " + orjson.dumps(k) + b": " + text + (b"\n    ," if k == "dur" and dur_comma else b","))
        body = b"".join(lines)
        body = body[:-6] if body.endswith(b"\n    ,") else body[:-1]
        out.append(b"  {" + body + b"\n  }")
    return b"[\n" + b",\n".join(out) + b"\n  ]"


def test_kinetos_own_layout_gives_the_reference_columns() -> None:
    """Blocks in Kineto's layout (the scan's literal fast loop), with members it leaves to the
    general loop (other keys, other orders, a duplicate) mixed in: the reference's columns."""
    rng = random.Random(13)
    blocks = []
    for b in range(30):
        events = [(_op if rng.random() < 0.8 else _other)(rng, b * 100 + i) for i in range(rng.randint(0, 50))]
        if b % 3 == 1:  # another key order: the general loop reads those events
            events = [dict(reversed(list(e.items()))) for e in events]
        blocks.append(_kineto(events, dur_comma=b % 2 == 0))
    assert all(kineto_trace.scan(b) is not None for b in blocks)
    _same(_native(blocks), _reference(blocks))
    dup = _kineto([{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1.5, "dur": 2}]).replace(
        b'"dur": 2', b'"dur": 2,\n    "ts": 3')
    assert kineto_trace.scan(dup) is None  # a duplicated field: left to orjson, as in any layout
    bad = _kineto([{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1.5, "dur": 2}]).replace(b'"ts": 1.5', b'"ts": 1.')
    assert kineto_trace.scan(bad) is None


def test_mutated_kineto_blocks_are_scanned_as_orjson_reads_them_or_left_to_it() -> None:
    """Random byte edits of a block in Kineto's layout: what the scan takes orjson reads alike."""
    rng = random.Random(5)
    base = _kineto([_op(rng, i) for i in range(5)] + [_other(rng, 9)])
    assert _mutations_scanned_as_orjson_reads_them(base, rng, max_edits=2) > 100


def test_windows_read_one_after_another_change_nothing_kept() -> None:
    """The texts kept from one Columns to the next (``_shape_part``, ``classify``): reading the same
    window again, a window with other texts, then the first again, each gives the reference's
    columns, and growing one instance's vocabularies leaves what is kept as it was."""
    rng = random.Random(3)
    one = [_kineto([_op(rng, i) for i in range(40)]), _kineto([_op(rng, i) for i in range(40, 60)])]
    other = [orjson.dumps([_op(rng, i) | {"name": f"other{i}"} for i in range(30)])]
    for blocks in (one, one, other, one, other + one, other, one + other, one, other):
        _same(_native(blocks), _reference(blocks))


def test_spans_are_scanned_in_place_as_their_blocks(tmp_path: Path) -> None:
    """``TraceReader.spans`` + ``scan(buf, start, stop)`` (no copy of the events) give what
    ``blocks`` + ``scan(block)`` give, through ``Columns.add_span`` as through ``add_block``,
    native or not, on a trace file in Kineto's layout read in one block and in many; a span's
    range is checked (one line), and what is not an array's inside is left to orjson."""
    rng = random.Random(4)
    events = _kineto([(_op if rng.random() < 0.8 else _other)(rng, i) for i in range(400)])
    trace = tmp_path / "t.json"
    trace.write_bytes(b'{\n  "schemaVersion": 1,\n  "baseTimeNanoseconds": 1790000000000000000,\n  "traceEvents": '
                      + events + b',\n  "traceName": "x"\n}')
    for size in (4096, kineto_trace.BLOCK):
        spans = list(TraceReader(trace, block=size).spans())
        blocks = list(TraceReader(trace, block=size).blocks())
        # a trace within one block is one span (scanned once); a larger one ends with its last event
        assert len(spans) == len(blocks) and (len(spans) == 1 if size == kineto_trace.BLOCK else len(spans) > 3)
        for (buf, a, b), block in zip(spans, blocks, strict=True):
            assert b"[" + buf[a:b] + b"]" == block
            x, y = kineto_trace.scan(buf, a, b), kineto_trace.scan(block)
            assert x is not None and y is not None
            assert [bytes(v) if isinstance(v, bytearray) else v for v in x] == \
                [bytes(v) if isinstance(v, bytearray) else v for v in y]
        cols = Columns()
        for buf, a, b in spans:
            cols.add_span(buf, a, b)
        cols.finish(1_000)
        _same(cols, _native(blocks))
        _same(cols, _reference(blocks))
    rng = random.Random(2)
    body = b",".join(orjson.dumps(_op(rng, i)) for i in range(20))
    buf = b"xx" + body + b"yy"
    assert kineto_trace.scan(buf, 2, 2 + len(body)) is not None  # read in place, not left to orjson
    _same(_spans_columns([(buf, 2, 2 + len(body))]), _reference([b"[" + body + b"]"]))
    assert kineto_trace.scan(b"ab", 1, 1) is not None  # an empty array's inside
    for bad in (b"{", b'{"ph":"X","cat":"cpu_op","name":"a","ts":1},', b"[]", b"1,2", b"{}]"):
        assert kineto_trace.scan(bad, 0, len(bad)) is None, bad
    with pytest.raises(ValueError, match=r"^ops: start 3 / stop 2 are not a range of the 4-byte block$"):
        kineto_trace.scan(b"abcd", 3, 2)
    with pytest.raises(ValueError, match=r"^ops: start 0 / stop 5 are not a range of the 4-byte block$"):
        kineto_trace.scan(b"abcd", 0, 5)
    with pytest.raises(ValueError, match=r"^ops: start 1 / stop -1 are not a range of the 4-byte block$"):
        kineto_trace.scan(b"abcd", 1)


def _spans_columns(spans: list[tuple[bytes, int, int]]) -> Columns:
    cols = Columns()
    for buf, a, b in spans:
        cols.add_span(buf, a, b)
    cols.finish(1_000)
    return cols


def test_native_columns_equal_the_orjson_path() -> None:
    rng = random.Random(26)
    blocks = []
    for b in range(40):
        events = [(_op if rng.random() < 0.8 else _other)(rng, b * 100 + i) for i in range(rng.randint(0, 60))]
        blocks.append(_block(events, rng))
    assert all(kineto_trace.scan(b) is not None for b in blocks)  # every block took the native path
    _same(_native(blocks), _reference(blocks))


def test_whitespace_and_key_order_do_not_change_the_columns() -> None:
    e = _op(random.Random(1), 1) | {"args": {"Input Dims": [[1, 2]], "Sequence number": 3}}
    spaced = (b'[ {"args" : { "Sequence number" : 3 , "Input Dims" : [ [1 , 2] ] } ,\n "ts": '
              + orjson.dumps(e["ts"]) + b', "ph":"X", "cat":"' + e["cat"].encode() + b'", "name":'
              + orjson.dumps(e["name"]) + b', "pid":' + orjson.dumps(e["pid"]) + b', "tid":'
              + orjson.dumps(e["tid"]) + b', "dur":' + orjson.dumps(e.get("dur", 0)) + b"} ]")
    compact = orjson.dumps([e | {"dur": e.get("dur", 0)}])
    assert kineto_trace.scan(spaced) is not None
    a, b = _native([spaced, compact]), _reference([spaced, compact])
    _same(a, b)
    assert len(a.args.items) == 2 and len(a.shapes.items) == 2  # one value, keyed twice


ODD = [
    '[{"ph":"X","cat":"cpu_op","name":"\\u00e9","ts":1}]',                  # \u escape
    '[{"ph":"X","cat":"cpu_op","name":"é","ts":1}]',                        # non-ASCII
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":1,"ts":2}]',                 # duplicated key
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":1,"tid":true}]',             # bool as int
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":1,"args":{"External id":false}}]',
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":1,"args":{"Sequence number":1,"Sequence number":2}}]',
    '[{"ph":"X","cat":"python_function","name":"f","dur":1}]',              # no ts
    '[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1}]',                # GPU events
    '[{"ph":"i","name":"[memory]","ts":1,"args":{"Bytes":4}}]',             # profile_memory
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":1234567890123456789}]',      # 19 digits
    '[{"ph":"X","cat":"cpu_op","name":"a"}]',                               # no ts
    '[{"ph":"X","cat":"cpu_op","name":null,"ts":1}]',
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":1,"dur":null}]',
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":1,"args":[1]}]',
    '[{"ph":"X","cat":["cpu_op"],"name":"a","ts":1}]',
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":1,"na\\u006de":"b"}]',
    '[{"ph":"X","cat":"cpu_op","n\\"":"a","ts":1}]',
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":1,"args":{"x":' + '[' * 70 + ']' * 70 + '}}]',   # deep
    '[1]',
    '{"ph":"X"}',
    # not JSON: orjson's error is the caller's
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":1},]',
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":01}]',
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":1.}]',
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":1e}]',
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":tru}]',
    '[{"ph":"X","cat":"cpu_op","name":"a\tb","ts":1}]',
    '[{"ph":"X","cat":"cpu_op","name":"a\\x","ts":1}]',
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":1}',
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":1}] x',
    '[{"ph":"X","cat":"cpu_op","name":"a","ts":1e999}]',
    '[{"ph":"X" "cat":"cpu_op"}]',
    '[{ph:"X"}]',
    '',
]


@pytest.mark.parametrize("text", ODD)
def test_blocks_the_scan_does_not_reproduce_are_left_to_orjson(text: str) -> None:
    block = text.encode()
    assert kineto_trace.scan(block) is None
    try:
        expected: Columns | type[Exception] = _reference([block])
    except (Restart, AttributeError, KeyError, TypeError, ValueError) as exc:
        expected = type(exc)
    if isinstance(expected, Columns):
        _same(_native([block]), expected)
    else:
        with pytest.raises(expected):
            _native([block])


def test_a_null_duration_is_zero_not_an_undefined_cast() -> None:
    block = b'[{"ph":"X","cat":"cpu_op","name":"a","ts":1,"dur":null},{"ph":"X","cat":"cpu_op","name":"b","ts":2,"dur":3}]'
    cols = _reference([block])
    assert cols.op_dur.tolist() == [0, 3000] and cols.op_ts.tolist() == [2000, 3000]


@pytest.fixture(scope="module")
def rank_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real training window with shapes, stacks and backward (fwdbwd flows), not yet analysed."""
    root = tmp_path_factory.mktemp("scan") / "r"
    t = Trainer("mlp")
    with tp.profile(schedule=tp.schedule(wait=0, active=2, repeat=1), record_shapes=True, with_stack=True,
                    on_trace_ready=tp.tensorboard_trace_handler(root, analyse_flag=False),
                    experimental_config=tp._ExperimentalConfig(data_simplification=False)) as prof:
        for _ in range(3):
            t.step()
            prof.step()
    (rd,) = rank_dirs(root)
    return rd


def test_blocks_of_a_real_trace_are_the_reference_blocks(rank_dir: Path, tmp_path: Path) -> None:
    """TraceReader.blocks → add_block and TraceReader.chunks → add read a real trace alike, and
    the analysis writes the same bytes with and without the native scan."""
    rd = rank_dir
    trace = rd / "FRAMEWORK" / "torch.kineto_trace.json"
    blocks = list(TraceReader(trace, block=4096).blocks())
    assert len(blocks) > 3 and all(kineto_trace.scan(b) is not None for b in blocks)
    native = _native(blocks)
    assert len(native.op_ts) > 50 and len(native.flow_ts) > 0 and len(native.shapes.items) > 3
    assert len(native.py_ts) > 50
    _same(native, _reference(blocks))
    a, b = (shutil.copytree(rd, tmp_path / side / rd.name) for side in ("a", "b"))
    export(a, parallel=False)
    scan, kineto_trace.scan = kineto_trace.scan, None
    try:
        export(b, parallel=False)
    finally:
        kineto_trace.scan = scan
    out = "ASCEND_PROFILER_OUTPUT"
    files = sorted(p.name for p in (a / out).iterdir())
    assert "trace_view.json" in files and "kernel_details.csv" in files
    assert files == sorted(p.name for p in (b / out).iterdir())
    for name in files:
        assert (a / out / name).read_bytes() == (b / out / name).read_bytes(), name


@pytest.mark.parametrize("native", [False, True])
def test_shape_and_args_texts_per_distinct_value(native: bool) -> None:
    """Both paths key the shape/args texts by value: literal expected texts and codes."""
    a = {"Input Dims": [[64, 64], [], []], "Input type": ["float", "Scalar", "Scalar"], "Sequence number": 0}
    b = {"Input Dims": [[2, 3]], "Input type": ["float"], "Fwd thread id": 1}
    ops = [{"ph": "X", "cat": "cpu_op", "name": "op", "ts": i, "dur": 1,
            "args": dict(x, **{"External id": i, "Ev Idx": i})} for i, x in enumerate([a, b, a, {}, b, a])]
    block = orjson.dumps(ops)
    cols = _native([block]) if native else _reference([block])
    assert cols.shapes.items == [("", ""), ("64,64;;", "float;Scalar;Scalar"), ("2,3", "float")]
    assert cols.op_shape.tolist() == [1, 2, 1, 0, 2, 1]
    assert cols.args.items == [b"{}", b'{"Input Dims":[[64,64],[],[]],"Input type":["float","Scalar","Scalar"],'
                                      b'"Sequence number":0}',
                               b'{"Input Dims":[[2,3]],"Input type":["float"],"Fwd thread id":1}']
    assert cols.op_args.tolist() == [1, 2, 1, 0, 2, 1]
    assert cols.op_ext.tolist() == [0, 1, 2, 3, 4, 5] and cols.op_seq.tolist() == [0, -1, 0, -1, -1, 0]


def test_mutated_blocks_are_scanned_as_orjson_reads_them_or_left_to_it() -> None:
    """Random byte edits of a block: whenever the scan takes one, orjson reads it as valid JSON
    and the columns are the reference's; what orjson refuses the scan refuses too."""
    rng = random.Random(7)
    base = orjson.dumps([_op(rng, i) for i in range(6)] + [_other(rng, 9)])
    # most single edits that stay JSON keep the block in the scan's subset
    assert _mutations_scanned_as_orjson_reads_them(base, rng, max_edits=3) > 100


def _mutations_scanned_as_orjson_reads_them(base: bytes, rng: random.Random, max_edits: int) -> int:
    """800 copies of ``base`` with 1..``max_edits`` random byte edits each: a copy orjson refuses
    the scan refuses too, one the scan takes has the reference's columns; how many it took."""
    alphabet = b'{}[]",:0123456789-+.eE \n\\tfnulrsX'
    taken = 0
    for _ in range(800):
        b = bytearray(base)
        for _ in range(rng.randint(1, max_edits)):
            at = rng.randrange(len(b))
            edit = rng.random()
            if edit < 0.4:
                b[at] = rng.choice(alphabet)
            elif edit < 0.7:
                del b[at]
            else:
                b.insert(at, rng.choice(alphabet))
        block = bytes(b)
        try:
            events = orjson.loads(block)
        except orjson.JSONDecodeError:
            assert kineto_trace.scan(block) is None, block
            continue
        if kineto_trace.scan(block) is None:
            continue
        taken += 1
        assert isinstance(events, list)
        _same(_native([block]), _reference([block]))
    return taken


def _decimals(rng: random.Random) -> list[str]:
    """Decimal texts around the scan's fast path's edges: 2**53 and its neighbours split at every
    point, 15–19 significant digits, up to 25 fraction digits, leading zeros, negatives, -0.0."""
    out = ["0.0", "-0.0", "0.000", "-0.5", "0.1", "4926655710016.630", "9007199254740.993",
           "9007199254740993.0", "9007199254740992.0", "9007199254740991.5", "0.1234567890123456789012",
           "0.12345678901234567890123", "1.0000000000000000000000001", "123456789012.345678"]
    for m in (2**53 - 1, 2**53, 2**53 + 1, 10**15 + 7, 10**16 + 3, 10**17 - 1):
        digits = str(m)
        out += [f"{digits[:k]}.{digits[k:]}" for k in range(1, len(digits))]
    for _ in range(3000):
        whole = str(rng.randrange(0, 10 ** rng.randrange(1, 17)))
        frac = "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 24)))
        out.append(("-" if rng.random() < 0.2 else "") + f"{whole}.{frac}")
    return out


def test_decimal_times_are_the_correctly_rounded_floats() -> None:
    """Every ts / dur decimal is scanned to the float64 Python's float() gives, bit for bit
    (the fast path for short decimals and the general conversion alike): a python_function's
    duration comes back in µs as scanned, every time in ns as ``rint(µs × 1000)`` of that float."""
    texts = _decimals(random.Random(11))
    events = ",".join(f'{{"ph": "X", "cat": "{cat}", "name": "op", "pid": 1, "tid": 1, "ts": {t}, "dur": {t}}}'
                      for t in texts for cat in ("cpu_op", "python_function"))
    res = kineto_trace.scan(f"[{events}]".encode())
    assert res is not None
    want = np.asarray([float(t) for t in texts], np.float64)
    assert np.frombuffer(res[12], np.float64).view(np.int64).tolist() == want.view(np.int64).tolist()
    ns = [0 if not abs(x) < 9.2e15 else int(np.rint(x * 1000.0)) for x in want.tolist()]
    op, py = np.frombuffer(res[5], np.int64).reshape(6, -1), np.frombuffer(res[11], np.int64).reshape(3, -1)
    for got in (op[0], op[1], py[0], py[1]):
        assert got.tolist() == ns


def _key(*parts: bytes | None) -> bytes:
    """A scan key: per kept arg \x02 when absent, else \x01 and its raw JSON."""
    return b"".join(b"\x02" if p is None else b"\x01" + p for p in parts)


def test_key_texts_are_orjsons_own_serialisation_of_the_kept_args() -> None:
    """``vocab._key_texts`` (the shape part kept, a plain Sequence number / Fwd thread id spliced
    in as written) gives what orjson's round trip of the kept args gives, byte for byte, for plain
    integers, spellings orjson writes otherwise (-0, 1e3, 1.0, 19 digits, strings), absent parts
    and shapes; a raw value that is not JSON raises as orjson does."""
    from openmsprof.export.ascend_pt import vocab

    names = vocab.ARG_KEYS
    values: list[bytes | None] = [None, b"0", b"-0", b"7", b"-12", b"123456789012345678", b"1234567890123456789",
                                  b"1e3", b"1.0", b'"12"', b"null", b"true"]
    shapes: list[tuple[bytes | None, bytes | None]] = [(None, None), (b"[[2, 3], []]", b'["float", ""]'),
                                                       (b"[[1]]", None), (None, b'["int"]')]
    seen = 0
    for dims, types in shapes:
        for seq in values:
            for fwd in (None, b"0", b"-0", b"3", b"2.5"):
                raw = (dims, types, seq, fwd)
                want = orjson.dumps({n: orjson.loads(r) for n, r in zip(names, raw, strict=True) if r is not None})
                shape_texts, text = vocab._key_texts(_key(*raw))
                assert text == want, raw
                sub = {n: orjson.loads(r) for n, r in zip(names[:2], raw[:2], strict=True) if r is not None}
                assert shape_texts == (vocab._shapes(sub) if sub else ("", ""))
                seen += 1
    assert seen == 4 * 12 * 5
    with pytest.raises(ValueError):
        vocab._key_texts(_key(None, None, b"01", None))
    with pytest.raises(ValueError, match="3 parts"):
        vocab._key_texts(b"\x02\x02\x02")
