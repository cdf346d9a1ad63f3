"""The one line at the end of a run: skips grouped by what they needed, with the install command."""

from __future__ import annotations

from tests.conftest import skip_summary


def test_no_skip_says_so() -> None:
    assert skip_summary([]) == "openmsprof: no test skipped"


def test_skips_grouped_with_their_install_command() -> None:
    line = skip_summary(["sshd not found (install openssh-server; .ci/run does)"] * 26
                        + ["chromium is not installed (.ci/run installs it)"] * 2
                        + ["ssh-keygen not found (install openssh-client)", "SCHED_BATCH? no",
                           "no CUDA device here"])
    assert "\n" not in line and line.startswith("openmsprof: 31 skipped: ")
    assert "27 need an OpenSSH server (make test-deps: apt-get install -y openssh-server openssh-client)" in line
    assert "2 need Chromium (make test-deps: apt-get install -y chromium)" in line
    assert "1 other (SCHED_BATCH? no)" in line
    assert "1 need a CUDA GPU (nothing to install: run on a machine with an NVIDIA GPU)" in line
