"""``openmsprof analyze`` from the command line: text/JSON, the HTML report, bad input."""

from __future__ import annotations

import shutil
import stat
from html.parser import HTMLParser
from pathlib import Path

import orjson
import pytest

from openmsprof.cli.main import main
from tests.analysis import advisor_jobs as J


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return J.sleepy_job(tmp_path_factory.mktemp("advisor_cli"))


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["analyze", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


class _Collect(HTMLParser):
    """Tags, text and ``<script>`` starts of a document."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:  # nothing fetched from elsewhere
            assert name not in ("src", "href") or (value or "").startswith("#"), (name, value)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_json_links_events(job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "-dir", str(job), "--format", "json", "--rule", "long_api")
    assert rc == 0
    doc = orjson.loads(out)
    assert doc["rules"] == ["long_api"] and doc["summary"]["tasks"] == 2 * J.SLEEPY_EXECUTES  # two nodes per execute
    load = next(f for f in doc["findings"] if f["evidence"]["api"] == "aclmdlLoadFromFile")
    (e,) = load["events"]
    assert e["table"] == "CANN_API" and e["name"] == "aclmdlLoadFromFile"
    assert float(e["dur_us"]) >= 1000 and float(e["ts_us"]) < float(e["start_us"])


def test_text_and_rule_list(job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "-dir", str(job), "--rule", "top_ops", "--rule", "host_gaps")
    assert rc == 0
    assert "[WARNING] host_gaps: device 0 idle" in out and "[WARNING] top_ops" in out
    assert "long_api" not in out.split("\n", 1)[1]
    assert "-> GAP id=" in out and "-> TASK id=" in out


def test_html_report(job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "report.html"
    rc, out, _ = _run(capsys, "-dir", str(job), "--html", str(path))
    assert rc == 0 and str(path) in out
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    raw = path.read_text()
    p = _Collect()
    p.feed(raw)
    p.close()
    text = "".join(p.text)
    assert "svg" in p.tags and "rect" in p.tags
    assert "script" not in p.tags and "link" not in p.tags  # self-contained, names escaped
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in raw
    assert J.HOSTILE in text  # the hostile op name is shown, as text
    assert "aclmdlLoadFromFile" in text and "FusedGemm" in text
    assert "Device time by op type" in raw and "Findings (" in text
    assert text.count("warning") >= 3  # the three warning findings are in the report


def test_output_file(job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "findings.json"
    rc, out, _ = _run(capsys, "-dir", str(job), "--format", "json", "--output", str(path))
    assert rc == 0 and "written to" in out
    assert orjson.loads(path.read_bytes())["findings"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


@pytest.mark.parametrize("argv, what", [
    (["--rule", "bogus"], "--rule 'bogus' is not a rule"),
    (["--html", "/nonexistent-dir/r.html"], "--html"),
    (["--output", "/nonexistent-dir/r.json"], "--output"),
])
def test_bad_options(job: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                     what: str) -> None:
    rc, out, err = _run(capsys, "-dir", str(job), *argv)
    assert rc == 1 and out == ""
    assert err.startswith("openmsprof: error: ") and what in err and err.count("\n") == 1


def test_bad_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(capsys, "-dir", str(tmp_path / "missing"))
    assert rc == 1 and "does not exist" in err and err.count("\n") == 1
    (tmp_path / "empty" / "host").mkdir(parents=True)
    rc, _, err = _run(capsys, "-dir", str(tmp_path / "empty"))
    assert rc == 1 and "is not a profiling job" in err and err.count("\n") == 1


def test_corrupt_database_is_rebuilt(job: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / job.name
    shutil.copytree(job, copy)
    (copy / "sqlite" / "msprof.db").write_bytes(b"not a database at all" * 100)
    rc, out, _ = _run(capsys, "-dir", str(copy), "--rule", "long_api")
    assert rc == 0 and "aclmdlLoadFromFile call took" in out
