"""A built wheel, installed (not editable) into a fresh environment, answers from any folder with its own catalogs.

No network: the wheel is built with this environment's setuptools (``--no-build-isolation``) and installed with
``--no-deps --no-index``; the fresh environment sees the dependencies (numpy, pyomo, highspy ...) through a ``.pth``
line naming this environment's site-packages, which adds them to ``sys.path`` without running this checkout's
editable-install hook. The sdist is checked to carry the catalogs too.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "roofline_opt", "models", "instances", "examples")


def _source_copy(root: Path) -> Path:
    """The files a build reads, copied so that building leaves no trace in the checkout."""
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(REPO / name, src / name)
    return src


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of a fresh virtual environment holding the wheel built from this checkout."""
    root = tmp_path_factory.mktemp("wheel")
    src = _source_copy(root)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", ".", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(root / "dist")],
        cwd=src,
        check=True,
        capture_output=True,
    )
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    wheel = next((root / "dist").glob("roofline_opt-*.whl"))
    subprocess.run(
        [*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "roofline_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def _cli(bin_dir: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_dir / "roofline-opt"), *argv], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_the_installed_package_is_the_wheel_with_its_catalog(installed: Path, tmp_path: Path) -> None:
    code = "import roofline_opt.catalog as c, roofline_opt; print(roofline_opt.__file__); print(c.packaged_root())"
    out = subprocess.run([str(installed / "python"), "-c", code], cwd=tmp_path, capture_output=True, text=True)
    module, data = out.stdout.split()
    assert module.startswith(str(installed.parent)) and data.endswith("roofline_opt/_data")


@pytest.mark.parametrize(
    "argv",
    [
        ["models", "--json"],
        ["gpus", "--json"],
        [
            "evaluate",
            "--model",
            "meta-llama/Llama-3.1-70B-Instruct",
            "--gpu",
            "examples/owned-h100.yaml",
            "--tp",
            "8",
            "--pp",
            "1",
            "--batch",
            "16",
            "--json",
        ],
        [
            "fastest",
            "--model",
            "llama-3-70b",
            "--cluster",
            "instances/clusters/hgx-h100.yaml",
            "--max-usd-per-mtok",
            "3",
            "--json",
        ],
        ["cheapest", "--model", "llama-3-8b", "--cluster", "pod-4x-hgx-h100", "--min-tok-s", "100", "--json"],
        [
            "frontier",
            "--model",
            "llama-3-8b",
            "--gpu",
            "h100-sxm",
            "--points",
            "3",
            "--tp-degrees",
            "1,2,4",
            "--pp-degrees",
            "1",
            "--observed",
            "examples/observed.csv",
            "--plot",
            "f.png",
            "--json",
        ],
        ["fastest", "--question", "examples/question.yaml", "--tp-degrees", "8", "--pp-degrees", "1,2"],
        ["reproduce", "--only", "llama-3-8b", "--points", "3", "--context", "0", "--out", "rep"],
    ],
    ids=lambda argv: argv[0],
)
def test_every_command_answers_from_an_empty_folder(installed: Path, tmp_path: Path, argv: list[str]) -> None:
    done = _cli(installed, tmp_path, *argv)
    assert done.returncode == 0, done.stderr
    if "--json" in argv:
        assert json.loads(done.stdout)


def test_the_sdist_carries_the_catalogs(tmp_path: Path) -> None:
    src = _source_copy(tmp_path)
    build = "from setuptools import build_meta; print(build_meta.build_sdist('dist'))"
    name = subprocess.run([sys.executable, "-c", build], cwd=src, check=True, capture_output=True, text=True)
    with tarfile.open(src / "dist" / name.stdout.strip().splitlines()[-1]) as sdist:
        members = {Path(*Path(m).parts[1:]).as_posix() for m in sdist.getnames()}
    assert {
        "models/llama-3-70b.yaml",
        "instances/gpus/h100-sxm.yaml",
        "instances/clusters/hgx-h100.yaml",
        "examples/observed.csv",
        "setup.py",
    } <= members
