"""Question files (``--question FILE.yaml``: any of a command's flags) and run folders (``--save-dir DIR``).

A question file is a YAML mapping of flag names (``max-usd-per-mtok`` or ``max_usd_per_mtok``) to values, plus an
optional ``command:`` that must match the command it is given to. Its values act as defaults: a flag on the command
line wins. A run folder holds ``question.yaml`` (the resolved question: every flag of the command with the value it
took, defaults filled in, so ``roofline-opt COMMAND --question DIR/question.yaml`` repeats the run), the answer as
``answer.csv`` and ``answer.json``, and ``plot.png``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from roofline_opt.errors import InvalidInput

_OUTPUT_FLAGS = frozenset({"question", "save_dir", "json", "csv", "plot", "func", "command", "help", "version"})
NOT_IN_QUESTION = _OUTPUT_FLAGS | {"emit", "emit_point"}
"""Flags that say where output goes (or are argparse's own), not what is asked: kept out of question files."""


def _dests(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if a.option_strings and a.dest not in NOT_IN_QUESTION}


def apply_question_file(args: argparse.Namespace) -> None:
    """Make the question file's values the command's defaults, so that parsing again lets explicit flags win."""
    from roofline_opt.catalog import data_file
    from roofline_opt.catalog.parse import read_yaml

    path = Path(data_file(args.question))
    parser: argparse.ArgumentParser = args.parser
    if not path.is_file():
        raise InvalidInput(
            "--question", f"must be an existing YAML file. Got {args.question!r} instead (no such file)."
        )
    data = read_yaml(path, "a question file")
    command = data.pop("command", args.command)
    if command != args.command:
        raise InvalidInput(f"{path}: command", f"must be {args.command!r} for this command. Got {command!r} instead.")
    dests = _dests(parser)
    values: dict[str, Any] = {}
    spelled: dict[str, Any] = {}
    for key, value in data.items():
        dest = str(key).removeprefix("--").replace("-", "_")
        if dest not in dests:
            options = ", ".join(sorted(d.replace("_", "-") for d in dests))
            raise InvalidInput(f"{path}: {key}", f"is not a flag of {args.command}; valid: {options}")
        if dest in spelled:
            msg = f"is the flag {spelled[dest]!r} gives already (another spelling of one key): give each flag once"
            raise InvalidInput(f"{path}: {key}", msg)
        spelled[dest] = key
        _refuse_numeric_text(f"{path}: {key}", value)
        values[dest] = _flag_value(dests[dest], value)
    parser.set_defaults(**values)


def _refuse_numeric_text(field: str, value: Any) -> None:
    """A question file's numbers are YAML numbers: text spelling one (``'64'``, ``!!str 64``) is refused, as in
    cards, instead of being passed on as if typed on the command line."""
    from roofline_opt.checks import NumericText, shown

    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, NumericText):
            msg = f"must be a number written unquoted (not text: quoted or !!str). Got {shown(str(item))} instead."
            raise InvalidInput(field, msg)


def _flag_value(action: argparse.Action, value: Any) -> Any:
    """A YAML value as the flag would receive it (text; lists comma-separated; null = not given); switches bool."""
    if isinstance(action, argparse._StoreTrueAction | argparse.BooleanOptionalAction):
        return bool(value)
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return None if value is None else str(value)


def _yaml_value(value: Any) -> Any:
    """A flag's value as YAML shows it best: numbers as numbers, the rest as text."""
    if isinstance(value, bool | int | float):
        return value
    text = str(value)
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def resolved_question(args: argparse.Namespace, prices: dict[str, float] | None = None) -> dict[str, Any]:
    """Every question flag of the command with the value it took (defaults filled), as a question file holds it;
    ``prices`` pins the $/GPU-hour the run used, so that a later catalog update does not change the repeat."""
    out: dict[str, Any] = {"command": args.command}
    for dest in _dests(args.parser):
        value = getattr(args, dest, None)
        if value is not None:
            out[dest.replace("_", "-")] = _yaml_value(value)
    if prices and "usd_per_gpu_hour" in _dests(args.parser):
        out["usd-per-gpu-hour"] = ",".join(f"{name}={price!r}" for name, price in prices.items())
    return out


def check_save_dir(args: argparse.Namespace) -> Path | None:
    """The run folder, checked before solving (it may exist; its files are replaced atomically), or None."""
    from roofline_opt import files

    if not getattr(args, "save_dir", None):
        return None
    folder = Path(args.save_dir)
    if folder.exists() and not folder.is_dir():
        raise InvalidInput("--save-dir", f"must be a folder. Got {args.save_dir!r} instead (a file).")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInput("--save-dir", f"cannot be created: {exc.strerror}") from exc
    files.check_destination(str(folder / "question.yaml"), "--save-dir")
    return folder


def write_run(
    folder: Path, args: argparse.Namespace, csv_text: str, json_text: str, prices: dict[str, float] | None = None
) -> None:
    """question.yaml, answer.csv and answer.json of a finished run (the caller writes plot.png)."""
    import yaml

    from roofline_opt import files

    header = f"# repeat this run with:  roofline-opt {args.command} --question {folder}/question.yaml\n"
    question = header + yaml.safe_dump(resolved_question(args, prices), sort_keys=False)
    files.write_text_atomic(str(folder / "question.yaml"), question, field="--save-dir")
    files.write_text_atomic(str(folder / "answer.csv"), csv_text, field="--save-dir")
    files.write_text_atomic(str(folder / "answer.json"), json_text + "\n", field="--save-dir")
