"""The C row formatter (export/ascend_pt/_row_text.c): ``join`` / ``rows`` give byte for byte what
Python's ``template % row`` gives over the same values (random templates and columns, int64
extremes, ``%03d`` of negatives, empty texts), ``records`` what the concatenation gives; every
input from Python is checked (lengths, buffer kinds, codes, item types, conversions); and
``text.join`` / ``text.fill`` take the same bytes with the fallback forced."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys

import numpy as np
import orjson
import pytest

from openmsprof.export.ascend_pt import text

rt = pytest.importorskip("openmsprof.export.ascend_pt._row_text")

I64 = [0, 1, -1, 7, -7, 9, 10, 99, 100, 999, 1000, -999, -1000, 123456789, 2**31, -(2**31), 2**63 - 1, -(2**63),
       2**53 + 1, -(2**53) - 1, 10**18, -(10**18), 10**8 - 1, 10**8, -(10**8), 10**16 - 1, 10**16, -(10**16) + 1,
       1795793414745585, 4503599627370496 + 158]
#: (every length the short copies treat apart: 0-3, 4-7, 8-32 in words, above)
WORDS = [b"", b"a", b"\"q\"", b"%", b"%d", b"{}", b",", b"x" * 300, b"\x00\xff", "é名".encode(), b"abcdefg",
         b"12345678", b"y" * 15, b"z" * 16, b"w" * 17, b"v" * 31, b"u" * 32, b"t" * 33]


def _ints(rng: random.Random, n: int) -> list[int]:
    out = []
    for _ in range(n):
        k = rng.random()
        out.append(rng.choice(I64) if k < 0.3 else rng.randint(-1000, 1000) if k < 0.6 else
                   rng.randint(-(2**63), 2**63 - 1))
    return out


def _case(rng: random.Random) -> tuple[bytes, list[object], list[list[object]]]:
    """(template, columns as the formatter takes them, the same columns as Python values)."""
    n = rng.choice([0, 1, 2, 5, 64, 300])
    parts: list[bytes] = []
    cols: list[object] = []
    values: list[list[object]] = []
    for _ in range(rng.randint(1, 7)):
        parts.append(rng.choice([b"", b",", b'{"a":', b"%%", b"x%%y", b"\t", b"]", b'","pid":1234567,"ti',
                                 b'{"name":"ab"', b'"dur":%%{}0123456789abcdef']))
        kind = rng.choice(["d", "03d", "list", "vocab", "t", "u"])
        if kind in ("t", "u"):  # ns as µs: "%d.%03d" / orjson's ns / 1000 (0 <= ns < 10**12)
            v = _ints(rng, n) if kind == "t" else [rng.choice([0, 1, 10, 999, 1000, 1010, 10**12 - 1]) if
                                                   rng.random() < 0.5 else rng.randrange(10**12) for _ in range(n)]
            parts.append(b"%" + kind.encode())
            cols.append(np.asarray(v, np.int64))
            values.append([b"%d.%03d" % divmod(x, 1000) for x in v] if kind == "t" else
                          [orjson.dumps(x / 1000) for x in v])
        elif kind in ("d", "03d"):
            v = _ints(rng, n) if kind == "d" else [rng.choice([0, 5, 42, 999, 1000, -5, -42, -1000, 2**63 - 1,
                                                                -(2**63)]) for _ in range(n)]
            parts.append(b"%" + kind.encode())
            cols.append(np.asarray(v, np.int64))
            values.append(v)
        elif kind == "list":
            w = [rng.choice(WORDS) for _ in range(n)]
            parts.append(b"%b")
            cols.append(w)
            values.append(w)
        else:
            vocab = rng.sample(WORDS, rng.randint(1, len(WORDS)))
            codes = [rng.randrange(len(vocab)) for _ in range(n)]
            parts.append(b"%b")
            cols.append((np.asarray(codes, np.int64), vocab if rng.random() < 0.5 else tuple(vocab)))
            values.append([vocab[c] for c in codes])
    parts.append(rng.choice([b"", b"}", b"\n", b',"ph":"X","cat":"cpu_op"}']))
    template = b"".join(parts)
    # the expected rows by Python's %: each %t / %u as the %b of its text
    return template, cols, values


@pytest.mark.parametrize("seed", range(40))
def test_join_and_rows_equal_python_formatting(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(25):
        template, cols, values = _case(rng)
        plain = re.sub(rb"%(%|03d|d|b|t|u)", lambda m: m.group(0) if m.group(1) not in (b"t", b"u") else b"%b",
                       template)
        expect = [plain % row for row in zip(*values, strict=True)]
        assert rt.rows(template, tuple(cols)) == expect
        for sep in (b",", b"", b";\n"):
            assert rt.join(template, tuple(cols), sep) == sep.join(expect)


def test_numbers_as_python_spells_them() -> None:
    v = np.asarray(I64, np.int64)
    assert rt.rows(b"%d|%03d", (v, v)) == [b"%d|%03d" % (x, x) for x in I64]
    assert rt.join(b"%03d", (np.asarray([0, 5, 42, 999, -5, -42, 1234], np.int64),), b" ") == \
        b"000 005 042 999 -05 -42 1234"


def test_text_join_and_fill_take_the_fallback_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wrapper's two paths, over the kinds the views pass (int32 / uint32 arrays widened,
    uint64 left to Python, vocabularies as lists and tuples)."""
    rng = random.Random(7)
    ts = np.asarray(_ints(rng, 500), np.int64) // 4
    q, r = text.us_columns(ts)
    tid = np.asarray([rng.randrange(2**31) for _ in range(500)], np.int32)
    st = np.asarray([rng.randrange(2**32) for _ in range(500)], np.uint32)
    big = np.asarray([rng.randrange(2**64) for _ in range(500)], np.uint64)
    names = [b'"n%d"' % i for i in range(9)]
    code = np.asarray([rng.randrange(9) for _ in range(500)], np.int32)
    piece, durs = text.dur_columns(np.abs(ts) % 10**12)
    template = b'{"name":%b,"tid":%d,"ts":"%d.%03d","dur":' + piece + b',"s":%d,"b":%d}'
    cols: list[text.Column] = [(code, names), tid, q, r, *durs, st, big]
    native_join, native_fill = text.join(template, cols), text.fill(template, cols)
    monkeypatch.setattr(text, "NATIVE", None)
    assert native_join == text.join(template, cols)
    assert native_fill == text.fill(template, cols)
    assert native_join == b",".join(native_fill)
    dq, dr = np.divmod(np.abs(ts) % 10**12, 1000)
    assert piece == b"%d.%b"
    rows = zip([names[c] for c in code.tolist()], tid.tolist(), q.tolist(), r.tolist(), dq.tolist(),
               [(b"%03d" % x).rstrip(b"0") or b"0" for x in dr.tolist()], st.tolist(), big.tolist(), strict=True)
    assert native_fill == [template % row for row in rows]


def test_records_equal_the_concatenation() -> None:
    rng = random.Random(3)
    n, width = 1000, 64
    fixed = np.frombuffer(rng.randbytes(n * width), np.uint8)
    vocab = [rng.randbytes(rng.randrange(40)) for _ in range(17)]
    codes = np.asarray([rng.randrange(17) for _ in range(n)], np.int64)
    expect = b"".join(fixed[i * width:(i + 1) * width].tobytes() + vocab[c] for i, c in enumerate(codes.tolist()))
    assert rt.records(fixed, width, codes, vocab) == expect
    assert rt.records(fixed.tobytes(), width, codes, tuple(vocab)) == expect
    assert rt.records(b"", 64, np.zeros(0, np.int64), []) == b""
    with pytest.raises(ValueError, match="fixed parts"):
        rt.records(fixed[:-1], width, codes, vocab)
    with pytest.raises(ValueError, match="fixed parts"):
        rt.records(fixed, -1, codes, vocab)
    with pytest.raises(IndexError, match="code 17"):
        rt.records(fixed, width, np.where(np.arange(n) == 999, 17, codes), vocab)
    with pytest.raises(IndexError, match="code -1"):
        rt.records(fixed, width, np.where(np.arange(n) == 3, -1, codes), vocab)
    with pytest.raises(TypeError, match="not bytes"):
        rt.records(fixed, width, codes, [*vocab[:16], "text"])
    with pytest.raises(TypeError, match="int64"):
        rt.records(fixed, width, codes.astype(np.int32), vocab)


def test_every_input_is_checked() -> None:
    a = np.arange(4, dtype=np.int64)
    vocab = [b"x", b"y"]
    bad = {
        "lengths": (ValueError, lambda: rt.join(b"%d %d", (a, a[:3]), b",")),
        "list length": (ValueError, lambda: rt.join(b"%d %b", (a, [b"a"] * 5), b",")),
        "code high": (IndexError, lambda: rt.join(b"%b", ((np.asarray([0, 1, 2], np.int64), vocab),), b",")),
        "code negative": (IndexError, lambda: rt.rows(b"%b", ((np.asarray([0, -1], np.int64), vocab),))),
        "str item": (TypeError, lambda: rt.join(b"%b", (["a"],), b",")),
        "str in vocabulary": (TypeError, lambda: rt.rows(b"%b", ((np.zeros(2, np.int64), ["a"]),))),
        "float column": (TypeError, lambda: rt.join(b"%d", (np.zeros(3),), b",")),
        "int32 column": (TypeError, lambda: rt.join(b"%d", (np.zeros(3, np.int32),), b",")),
        "2-d column": (TypeError, lambda: rt.join(b"%d", (np.zeros((2, 2), np.int64),), b",")),
        "strided column": (TypeError, lambda: rt.join(b"%d", (np.zeros(8, np.int64)[::2],), b",")),
        "list for %d": (TypeError, lambda: rt.join(b"%d", ([1, 2],), b",")),
        "array for %b": (TypeError, lambda: rt.join(b"%b", (a,), b",")),
        "vocabulary not a sequence": (TypeError, lambda: rt.join(b"%b", ((a, {0: b"x"}),), b",")),
        "three-tuple": (TypeError, lambda: rt.join(b"%b", ((a, vocab, 1),), b",")),
        "%s": (ValueError, lambda: rt.join(b"%s", (a,), b",")),
        "%x": (ValueError, lambda: rt.join(b"%x", (a,), b",")),
        "%5d": (ValueError, lambda: rt.join(b"%5d", (a,), b",")),
        "trailing %": (ValueError, lambda: rt.join(b"%d%", (a,), b",")),
        "too few columns": (ValueError, lambda: rt.join(b"%d %d", (a,), b",")),
        "too many columns": (ValueError, lambda: rt.join(b"%d", (a, a), b",")),
        "no conversion": (ValueError, lambda: rt.join(b"plain", (), b",")),
        "str template": (TypeError, lambda: rt.join("%d", (a,), b",")),
        "list of columns": (TypeError, lambda: rt.join(b"%d", [a], b",")),
    }
    for what, (exc, call) in bad.items():
        with pytest.raises(exc):
            call()
            pytest.fail(what)
    with pytest.raises(IndexError):  # the fallback too: a negative code does not count from the end
        text._values((np.asarray([0, -1], np.int64), vocab))
    # the same vocabulary item may repeat; codes at both ends of the vocabulary
    assert rt.join(b"%b", ((np.asarray([1, 0, 1], np.int64), vocab),), b"") == b"yxy"


def test_the_environment_forces_the_fallback() -> None:
    code = "from openmsprof.export.ascend_pt import text; print(text.NATIVE is None)"
    env = {**os.environ, "OPENMSPROF_ROW_TEXT_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
    env.pop("OPENMSPROF_ROW_TEXT_PYTHON")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_ns_conversions_and_their_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """``%t`` / ``%u`` take ns columns: the µs text and orjson's ``ns / 1000``; a ``%u`` value outside
    0..10**12 is a ValueError in C and the general float text through ``text.join`` / ``text.fill``,
    which give the same bytes with the fallback forced."""
    ns = np.asarray([0, 1, 999, 1000, 1001, 1010, 1100, 123_456_789, 10**12 - 1, -1, -1000, -1001, 2**63 - 1,
                     -(2**63)], np.int64)
    assert rt.rows(b"%t", (ns,)) == [b"%d.%03d" % divmod(x, 1000) for x in ns.tolist()]
    short = ns[(ns >= 0) & (ns < 10**12)]
    assert rt.rows(b"%u", (short,)) == [orjson.dumps(x / 1000) for x in short.tolist()]
    for bad in (-1, 10**12):
        with pytest.raises(ValueError, match="outside the short %u form"):
            rt.join(b"%u", (np.asarray([5, bad], np.int64),), b",")
    wide = np.asarray([5, 10**12, 7, -3000], np.int64)
    template = b'{"ts":"%t","dur":%u,"n":%b}'
    cols: list[text.Column] = [ns[:4], wide, [b"a", b"bb", b"%", b""]]
    got_join, got_fill = text.join(template, cols), text.fill(template, cols)
    want = [b'{"ts":"%d.%03d","dur":%b,"n":%b}' % (*divmod(t, 1000), orjson.dumps(d / 1000), w)
            for t, d, w in zip(ns[:4].tolist(), wide.tolist(), cols[2], strict=True)]
    assert got_fill == want and got_join == b",".join(want)
    monkeypatch.setattr(text, "NATIVE", None)
    assert text.join(template, cols) == got_join and text.fill(template, cols) == got_fill
    with pytest.raises(ValueError, match="conversions"):
        text.join(b"%t %u", [ns])


def test_t_conversion_is_the_us_text_of_ns() -> None:
    """``%t`` (not Python's): ``%d.%03d`` of ``divmod(ns, 1000)``, int64 extremes and negatives too."""
    v = np.asarray([*I64, -1, -999, -1000, -1001, 1001, 999_999], np.int64)
    want = [b"<%d.%03d>" % divmod(x, 1000) for x in v.tolist()]
    assert rt.rows(b"<%t>", (v,)) == want
    assert rt.join(b"<%t>", (v,), b";") == b";".join(want)
    assert rt.rows(b"%t", (np.asarray([1_795_793_414_739_323_348, 0, 5, -5], np.int64),)) == \
        [b"1795793414739323.348", b"0.000", b"0.005", b"-1.995"]


@pytest.mark.parametrize("seed", range(10))
def test_text_join_with_t_takes_the_fallback_bytes(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``text.join`` / ``text.fill`` with ``%t`` beside ``%%t`` literals, ``%d``, ``%03d`` and ``%b``
    columns: the C bytes are the fallback's (which rewrites ``%t`` to Python's ``%d.%03d``)."""
    rng = random.Random(seed)
    n = rng.choice([0, 1, 7, 300])
    ns = np.asarray(_ints(rng, n), np.int64)
    small = np.asarray([rng.randint(-5000, 5000) for _ in range(n)], np.int32)  # widened to int64
    words = [rng.choice(WORDS) for _ in range(n)]
    template = b"%%t=%t,%d|%b|%03d%%%t\n"
    cols: list[text.Column] = [ns, small, words, small, small]
    native_join, native_fill = text.join(template, cols, b""), text.fill(template, cols)
    monkeypatch.setattr(text, "NATIVE", None)
    assert text.join(template, cols, b"") == native_join
    assert text.fill(template, cols) == native_fill
    assert native_fill == [b"%%t=%d.%03d,%d|%b|%03d%%%d.%03d\n" % (*divmod(a, 1000), b, w, b, *divmod(b, 1000))
                           for a, b, w in zip(ns.tolist(), small.tolist(), words, strict=True)]
