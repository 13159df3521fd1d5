"""Save the answer of every query example of README.md and docs/ as JSON, for the test that launches each one.

A query example is a console command ``roofline-opt fastest|cheapest|frontier|plan ...`` (not marked skip). Each is
run again as the page shows it, less the options that write files (``--plot``, ``--csv``, ``--save-dir``,
``--emit`` ...), with ``--json``; its answer goes into tests/data/doc_answers.json under the command's text, with the
request lengths ``launch`` needs (``--isl``/``--osl``). An example that exits non-zero (an infeasible question, bad
input) is saved with its exit code and no answer. tests/test_deploy_docs.py launches every saved answer on every
engine and checks that the saved commands are the pages' current ones.

Usage::

    python tools/doc_answers.py            # check that the saved commands are the pages' (exit 1 if not)
    python tools/doc_answers.py --write    # run every query example again and save its answer
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import doc_examples  # noqa: E402

ROOT = doc_examples.ROOT
SAVED = ROOT / "tests" / "data" / "doc_answers.json"
QUERIES = ("fastest", "cheapest", "frontier", "plan")
WRITES_FILES = {"--plot", "--csv", "--save-dir", "--emit", "--engine", "--emit-point", "--observed", "--html"}
"""Options dropped before the answer is asked for as JSON (each takes one value)."""
DROPPED_SWITCHES = {"--json", "--compare"}


def queries() -> list[str]:
    """The query commands of every page, in page order, each once."""
    found: dict[str, None] = {}
    for page in doc_examples.pages():
        for example in doc_examples.examples(page):
            if example.lang != "console" or example.mark == "skip":
                continue
            for command in example.commands:
                words = command.text.split()
                compound = any(op in command.text for op in ("&&", "|", ">", ";"))  # a shell pipeline: not one query
                if len(words) > 1 and words[0] == "roofline-opt" and words[1] in QUERIES and not compound:
                    found[command.text.strip()] = None
    return list(found)


def json_command(text: str) -> list[str]:
    """The example's words without the options that write files, with --json."""
    words, out, skip = shlex.split(text), [], False
    for word in words:
        if skip:
            skip = False
        elif word in WRITES_FILES:
            skip = True
        elif word not in DROPPED_SWITCHES:
            out.append(word)
    return [*out, "--json"]


def lengths(words: list[str]) -> dict[str, int]:
    """--isl and --osl of a command, for launch."""
    out = {}
    for name in ("isl", "osl"):
        flag = f"--{name}"
        if flag in words and words.index(flag) + 1 < len(words):
            out[name] = int(words[words.index(flag) + 1])
    return out


def answer(text: str) -> dict:
    """The saved entry of one example: exit code, lengths and (exit 0) the JSON answer from stdout."""
    words = json_command(text)
    with tempfile.TemporaryDirectory(prefix="roofline-answer-") as folder:  # as doc_examples runs them
        done = subprocess.run(
            ["bash", "-c", shlex.join(words)],
            cwd=folder,
            env=doc_examples._environment(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=doc_examples.COMMAND_TIMEOUT_S,
        )
    entry: dict = {"exit": done.returncode, **lengths(words)}
    if done.returncode == 0:
        entry["answer"] = json.loads(done.stdout)
    return entry


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help="run every query example and save its answer")
    args = p.parse_args(argv)
    current = queries()
    if args.write:
        saved = {}
        for text in current:
            saved[text] = answer(text)
            print(f"exit {saved[text]['exit']}: {text}", file=sys.stderr)
        SAVED.write_text(json.dumps(saved, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return 0
    known = set(json.loads(SAVED.read_text(encoding="utf-8")))
    missing = [t for t in current if t not in known]
    for text in missing:
        print(f"not saved: {text}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
