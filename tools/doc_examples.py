"""Run every example of README.md and docs/ and compare its output with what the page shows, or rewrite the pages.

What counts as an example:

- a ```` ```console ```` block: each line starting with ``$ `` is a shell command and the lines up to the next ``$ ``
  line are the output the page shows (stdout and stderr together). An output ending in a line ``...`` shows only
  the first lines of the real output.
- a ```` ```python ```` block: the code runs in a fresh interpreter; when the next block is ```` ```text ```` and
  the line between them is ``<!-- output -->``, that block is what the code prints.
- a ```` ```bash ```` block: its commands run and must exit 0 (no output is shown on the page).

An HTML comment on the line before a block marks it: ``<!-- example: skip REASON -->`` (not run, for instance a
pip install or a command that needs a Dask scheduler) or ``<!-- example: slow -->`` (run only when
``ROOFLINE_OPT_SLOW_EXAMPLES=1`` or by ``--write``).

Comparison: each line's text is compared after whitespace is collapsed and runs of dashes (table rules) are
shortened, so column widths may change; numbers compare within ``RELATIVE_TOLERANCE`` (2%) of the larger, or
within ``ABSOLUTE_TOLERANCE`` (solver gaps such as ``1.3e-16`` against ``0``).

Commands run in a fresh temporary folder (files named relative to the checkout, such as ``examples/observed.csv``,
are found in the package data), with this interpreter's ``bin`` folder first on ``PATH``.

Usage::

    python tools/doc_examples.py            # check every example, report differences (exit 1 on any)
    python tools/doc_examples.py --write    # rewrite the pages' outputs from the tool's real output
    python tools/doc_examples.py --write README.md docs/how-to/frontier.md
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RELATIVE_TOLERANCE = 0.02
ABSOLUTE_TOLERANCE = 1e-9
COMMAND_TIMEOUT_S = 600
SLOW_ENV = "ROOFLINE_OPT_SLOW_EXAMPLES"
FENCE = re.compile(r"^```(?P<lang>[A-Za-z]*)\s*$")
MARK = re.compile(r"^<!--\s*example:\s*(?P<kind>skip|slow)\b(?P<reason>.*?)-->\s*$")
OUTPUT_MARK = "<!-- output -->"
NUMBER = re.compile(r"(?<![A-Za-z_0-9.])[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?(?![A-Za-z_])")
ELLIPSIS = "..."


@dataclass(frozen=True)
class Command:
    """One ``$ `` line of a console block and the output lines the page shows for it."""

    text: str
    shown: tuple[str, ...]
    output_lines: tuple[int, int]  # [start, end) line indices of ``shown`` in the page


@dataclass(frozen=True)
class Example:
    """One runnable block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    body: tuple[str, ...]
    mark: str  # "", "skip" or "slow"
    reason: str
    commands: tuple[Command, ...] = ()
    output: tuple[int, int] | None = None  # [start, end) of a python block's text output block
    shown: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """README.md and every Markdown page under docs/, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _blocks(lines: list[str]) -> list[tuple[int, int, str]]:
    """(opening fence index, closing fence index, language) of every fenced block."""
    blocks, start, lang = [], None, ""
    for i, line in enumerate(lines):
        match = FENCE.match(line)
        if not match and not line.startswith("```"):
            continue
        if start is None:
            start, lang = i, (match.group("lang") if match else "other")
        elif match and not match.group("lang"):
            blocks.append((start, i, lang))
            start = None
    return blocks


def _console_commands(lines: list[str], start: int, end: int) -> tuple[Command, ...]:
    commands, i = [], start + 1
    while i < end:
        if not lines[i].startswith("$ "):
            raise ValueError(f"line {i + 1}: a console block's output must follow a '$ ' command line")
        text, j = lines[i][2:], i + 1
        while j < end and not lines[j].startswith("$ "):
            j += 1
        commands.append(Command(text, tuple(lines[i + 1 : j]), (i + 1, j)))
        i = j
    return tuple(commands)


def examples(page: Path) -> list[Example]:
    """Every runnable block of one page."""
    lines = page.read_text(encoding="utf-8").split("\n")
    blocks = _blocks(lines)
    found = []
    for k, (start, end, lang) in enumerate(blocks):
        if lang not in ("console", "python", "bash"):
            continue
        mark = MARK.match(lines[start - 1]) if start else None
        kind, reason = (mark.group("kind"), mark.group("reason").strip()) if mark else ("", "")
        body = tuple(lines[start + 1 : end])
        commands, output, shown = (), None, ()
        if lang == "console":
            commands = _console_commands(lines, start, end)
        elif lang == "python" and k + 1 < len(blocks):
            o_start, o_end, o_lang = blocks[k + 1]
            if o_lang == "text" and o_start == end + 2 and lines[end + 1].strip() == OUTPUT_MARK:
                output, shown = (o_start + 1, o_end), tuple(lines[o_start + 1 : o_end])
        found.append(Example(page, start + 1, lang, body, kind, reason, commands, output, shown))
    return found


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("COLUMNS", None)
    return env


@functools.cache
def run_shell(command: str) -> tuple[int, str]:
    """Exit code and combined output of one shell command, run once per process in a fresh folder."""
    with tempfile.TemporaryDirectory(prefix="roofline-example-") as folder:
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=folder,
            env=_environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
    return done.returncode, done.stdout


def run_console_block(example: Example) -> list[tuple[int, str]]:
    """Exit code and output of each command of a console block, run in order in one folder."""
    results = []
    with tempfile.TemporaryDirectory(prefix="roofline-example-") as folder:
        for command in example.commands:
            done = subprocess.run(
                ["bash", "-o", "pipefail", "-c", command.text],
                cwd=folder,
                env=_environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
            )
            results.append((done.returncode, done.stdout))
    return results


def run_python_block(example: Example) -> tuple[int, str]:
    """Exit code and combined output of a python block run by this interpreter in a fresh folder."""
    return run_shell(f"{sys.executable} - <<'ROOFLINE_EXAMPLE'\n" + "\n".join(example.body) + "\nROOFLINE_EXAMPLE")


def run_bash_block(example: Example) -> tuple[int, str]:
    """Exit code and combined output of a bash block's commands (stopping at the first failure)."""
    return run_shell("set -e\n" + "\n".join(example.body))


def _normalise(line: str) -> tuple[str, list[float]]:
    numbers = [float(m.group().replace(",", "")) for m in NUMBER.finditer(line)]
    text = NUMBER.sub("#", line)
    text = re.sub(r"-{2,}", "--", text)
    return " ".join(text.split()), numbers


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= max(ABSOLUTE_TOLERANCE, RELATIVE_TOLERANCE * max(abs(a), abs(b)))


def differences(shown: tuple[str, ...] | list[str], output: str) -> list[str]:
    """Lines where ``output`` differs from what the page shows, each said in words (empty when they agree)."""
    real = output.rstrip("\n").split("\n") if output.strip() else []
    shown = list(shown)
    prefix_only = bool(shown) and shown[-1].strip() == ELLIPSIS
    if prefix_only:
        shown = shown[:-1]
    problems = []
    if (len(real) < len(shown)) if prefix_only else (len(real) != len(shown)):
        problems.append(f"the page shows {len(shown)} lines, the command printed {len(real)}")
    for number, (page_line, real_line) in enumerate(zip(shown, real, strict=False), start=1):
        page_text, page_numbers = _normalise(page_line)
        real_text, real_numbers = _normalise(real_line)
        same = page_text == real_text and len(page_numbers) == len(real_numbers)
        if not same or not all(_close(a, b) for a, b in zip(page_numbers, real_numbers, strict=True)):
            problems.append(f"line {number}:\n  page: {page_line.strip()}\n  real: {real_line.strip()}")
    return problems


def _accepted(code: int, output: str) -> bool:
    """0 answered; 1 infeasible and 2 bad input only when the page shows the tool's one-line message on purpose."""
    said = any(line.startswith("roofline-opt: ") for line in output.split("\n"))
    return code == 0 or (code in (1, 2) and said)


def check(example: Example) -> list[str]:
    """Every difference between an example's real output and its page (empty when they agree)."""
    problems = []
    if example.lang == "console":
        for command, (code, output) in zip(example.commands, run_console_block(example), strict=True):
            if not _accepted(code, output):
                problems.append(f"$ {command.text}\nexited {code}:\n{output}")
                continue
            problems += [f"$ {command.text}\n{p}" for p in differences(command.shown, output)]
        return problems
    code, output = run_python_block(example) if example.lang == "python" else run_bash_block(example)
    if code != 0:
        return [f"exited {code}:\n{output}"]
    if example.output is not None:
        problems += differences(example.shown, output)
    return problems


def _rewritten(shown: tuple[str, ...], output: str) -> list[str]:
    real = output.rstrip("\n").split("\n") if output.strip() else []
    if shown and shown[-1].strip() == ELLIPSIS:
        return [*real[: len(shown) - 1], ELLIPSIS]
    return real


def rewrite(page: Path) -> int:
    """Rewrite every example output of one page from the real output; return how many outputs changed."""
    lines = page.read_text(encoding="utf-8").split("\n")
    replacements = []
    for example in examples(page):
        if example.mark == "skip":
            continue
        if example.lang == "console":
            for command, (code, output) in zip(example.commands, run_console_block(example), strict=True):
                if not _accepted(code, output):
                    raise SystemExit(f"{example.name}: $ {command.text} exited {code}:\n{output}")
                replacements.append((command.output_lines, _rewritten(command.shown, output)))
        elif example.output is not None:
            code, output = run_python_block(example)
            if code != 0:
                raise SystemExit(f"{example.name}: exited {code}:\n{output}")
            replacements.append((example.output, _rewritten(example.shown, output)))
    changed = 0
    for (start, end), new in sorted(replacements, reverse=True):
        if lines[start:end] != new:
            changed += 1
            lines[start:end] = new
    page.write_text("\n".join(lines), encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the pages' outputs from the real output")
    parser.add_argument("pages", nargs="*", type=Path, help="pages to handle (default: README.md and docs/)")
    args = parser.parse_args(argv)
    chosen = [p.resolve() for p in args.pages] or pages()
    if args.write:
        for page in chosen:
            print(f"{page.relative_to(ROOT)}: {rewrite(page)} outputs changed")
        return 0
    failed = 0
    for page in chosen:
        for example in examples(page):
            if example.mark == "skip":
                print(f"{example.name}: skipped ({example.reason})")
                continue
            problems = check(example)
            failed += bool(problems)
            print(f"{example.name}: " + ("ok" if not problems else "DIFFERS\n" + "\n".join(problems)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
