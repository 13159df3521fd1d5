"""Helpers of the hardening tests: run the CLI in-process and check the one-line failure contract."""

from __future__ import annotations

from pathlib import Path

from roofline_opt.cli import main

EVALUATE = ["evaluate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--tp", "1", "--pp", "1", "--batch", "1"]
"""A cheap, valid evaluate command (milliseconds)."""
SMALL_QUERY = [
    "--model",
    "llama-3-8b",
    "--gpu",
    "h100-sxm",
    "--tp-degrees",
    "1,2",
    "--pp-degrees",
    "1",
    "--max-batch",
    "64",
    "--context",
    "1000",
]
"""Flags of a fastest/cheapest/frontier question small enough to solve in a fraction of a second."""


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``roofline-opt argv`` run in this process."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line(err: str, code: int, expected_code: int, *words: str) -> None:
    """The failure contract: the documented exit code, exactly one stderr line, no traceback, the words named."""
    assert code == expected_code, (code, err)
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err, err
    for word in words:
        assert word in err, (word, err)


def hidden_leftovers(folder: Path) -> list[str]:
    """Temporary files or folders a write could leave behind (names starting with a dot)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))
