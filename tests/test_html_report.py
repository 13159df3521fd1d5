"""--html: one self-contained interactive report per answer, opened offline in a real headless browser."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from roofline_opt.cli import EXIT_BAD_INPUT, EXIT_OK, main

plotly = pytest.importorskip("plotly", reason="the html extra (plotly) is not installed")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SMALL = ["--tp-degrees", "4,8", "--pp-degrees", "1", "--tp-modes", "1d", "--max-batch", "512"]
OFFLINE_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)
"""Chromium as CI runs it: headless, no sandbox (root), and every host name unresolvable, so a report that reached
for the network would render no chart."""


@pytest.fixture(scope="module")
def frontier_report(tmp_path_factory) -> tuple[Path, int]:
    """A frontier report over two accelerators and two precisions, and how many setups the frontier has."""
    import json

    path = tmp_path_factory.mktemp("report") / "frontier.html"
    argv = ["frontier", "--model", "llama-3-70b", "--gpu", "h100-sxm,a100-80gb", "--weight-bits", "16,8", *SMALL]
    result = subprocess.run(
        [sys.executable, "-m", "roofline_opt", *argv, "--points", "6", "--json", "--html", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return path, len(json.loads(result.stdout))


def _rows(text: str) -> int:
    body = text.split('<table id="rows">', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return body.count("<tr>")


def test_a_frontier_report_is_one_file_with_plotly_inside_and_a_row_per_setup(frontier_report):
    path, setups = frontier_report
    text = path.read_text(encoding="utf-8")
    assert _rows(text) == setups
    assert re.search(r"<script[^>]*\ssrc=", text) is None, "a script loaded from elsewhere: not self-contained"
    assert "Plotly.newPlot" in text and len(text) > 1_000_000  # plotly.js itself is inline


def test_a_report_series_is_one_accelerator_and_precision(frontier_report):
    text = frontier_report[0].read_text(encoding="utf-8")
    names = set(re.findall(r'"name":"([^"]+)"', text))
    assert names & {"h100-sxm 8-bit", "h100-sxm 16-bit", "a100-80gb 8-bit", "a100-80gb 16-bit"}


def test_html_without_plotly_is_refused_before_solving(tmp_path, monkeypatch, capsys):
    import builtins

    real_import = builtins.__import__

    def no_plotly(name, *args, **kwargs):
        if name == "plotly" or name.startswith("plotly."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_plotly)
    out = tmp_path / "r.html"
    code = main(["frontier", "--model", "llama-3-70b", "--gpu", "h100-sxm", *SMALL, "--html", str(out)])
    assert code == EXIT_BAD_INPUT
    assert "roofline-opt[html]" in capsys.readouterr().err and not out.exists()


def test_plan_writes_a_report_with_a_row_per_plan_row(tmp_path, capsys):
    import json

    path = tmp_path / "plan.html"
    assert main(["plan", "instances/fleets/day-profile.yaml", "--json", "--html", str(path)]) == EXIT_OK
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert _rows(path.read_text(encoding="utf-8")) == len(rows)


def test_validate_writes_a_report_with_every_measured_row(tmp_path, capsys):
    import json

    path = tmp_path / "validate.html"
    assert main(["validate", "--measured", "examples/measured_points.csv", "--json", "--html", str(path)]) == EXIT_OK
    rows = json.loads(capsys.readouterr().out)
    assert _rows(path.read_text(encoding="utf-8")) == len(rows)


@pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on this machine (CI installs Debian's: apt-get install chromium)"
)
def test_the_report_renders_offline_in_headless_chromium(frontier_report, tmp_path):
    path = frontier_report[0]
    expected_rows = _rows(path.read_text(encoding="utf-8"))
    base = [CHROMIUM, *OFFLINE_FLAGS, "--window-size=1300,1000", "--virtual-time-budget=8000"]
    dom = subprocess.run(
        [*base, f"--user-data-dir={tmp_path / 'profile-dom'}", "--dump-dom", path.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert 'class="main-svg"' in dom, "plotly drew no chart"
    assert dom.count('class="scatterlayer') >= 1 and dom.count('class="point plotly-customdata"') == expected_rows
    assert _rows(dom) == expected_rows
    shot = tmp_path / "report.png"
    subprocess.run(
        [*base, f"--user-data-dir={tmp_path / 'profile-shot'}", f"--screenshot={shot}", path.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
