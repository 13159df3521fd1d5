"""mkdocs hooks: the CLI reference generated from the argparse parsers, and the changelog page.

- ``reference/cli.md`` is written at build time from ``roofline_opt.cli.build_parser()``: every command and
  sub-command with its description, usage, flags and defaults, exactly as ``--help`` prints them, so the page cannot
  drift from the parsers.
- ``changelog.md`` is the repository's CHANGELOG.md, so the site and the repository show one text.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from mkdocs.structure.files import File

log = logging.getLogger("mkdocs.hooks.roofline_opt")

CLI_PAGE = "reference/cli.md"
CHANGELOG_PAGE = "changelog.md"
ROOT = Path(__file__).resolve().parent.parent
HELP_COLUMNS = "100"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _sections(parser: argparse.ArgumentParser, name: str, depth: int) -> list[str]:
    lines = [f"{'#' * depth} `{name}`", "", "```text", parser.format_help().rstrip(), "```", ""]
    for sub_name, sub in _subcommands(parser).items():
        lines += _sections(sub, f"{name} {sub_name}", depth + 1)
    return lines


def cli_reference() -> str:
    """The CLI reference page: the top-level help, then every command's help."""
    os.environ["COLUMNS"] = HELP_COLUMNS
    from roofline_opt.cli import build_parser

    parser = build_parser()
    lines = [
        "# Command-line reference",
        "",
        "Generated from the argparse parsers when the site is built (`tools/mkdocs_hooks.py`): each section is what",
        "`roofline-opt COMMAND --help` prints.",
        "",
        "```text",
        parser.format_help().rstrip(),
        "```",
        "",
    ]
    for name, sub in _subcommands(parser).items():
        lines += _sections(sub, f"roofline-opt {name}", 2)
    return "\n".join(lines)


def on_files(files, config):
    files.append(File.generated(config, CLI_PAGE, content=cli_reference()))
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    files.append(File.generated(config, CHANGELOG_PAGE, content=changelog))
    return files
