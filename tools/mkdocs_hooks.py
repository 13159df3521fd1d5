"""mkdocs hooks: the CLI reference generated from the argparse parsers, and nav entries of pages still to be merged.

- ``reference/cli.md`` is written at build time from ``roofline_opt.cli.build_parser()``: every command and
  sub-command with its description, usage, flags and defaults, exactly as ``--help`` prints them, so the page cannot
  drift from the parsers.
- ``PENDING_PAGES`` lists pages other branches add (the lead merges them). A nav entry for one of them is dropped
  while its file is absent, so ``mkdocs build --strict`` passes before and after the merge; any other missing nav
  entry still fails the build. ``physics/index.md`` lists the section's pages that exist (see ``on_page_markdown``).
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
PENDING_PAGES = {
    "deploy.md": "Deploying a setup",
    "physics/memory-and-kv.md": "Memory and the KV cache",
    "physics/step-structure.md": "The structure of a step",
}
"""Pages other branches add today: path under docs/ -> title."""
PHYSICS_INDEX = "physics/index.md"
PHYSICS_LIST_MARK = "<!-- pages of this section -->"


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


def on_config(config):
    docs = Path(config["docs_dir"])

    def keep(entry) -> bool:
        if isinstance(entry, dict):
            ((title, target),) = entry.items()
            if isinstance(target, str) and target in PENDING_PAGES and not (docs / target).exists():
                log.info("nav: %s (%s) is not merged yet; left out", target, title)
                return False
            if isinstance(target, list):
                entry[title] = [e for e in target if keep(e)]
        return True

    config["nav"] = [e for e in config["nav"] if keep(e)]
    return config


def on_files(files, config):
    files.append(File.generated(config, CLI_PAGE, content=cli_reference()))
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    files.append(File.generated(config, CHANGELOG_PAGE, content=changelog))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != PHYSICS_INDEX:
        return markdown
    docs = Path(config["docs_dir"])
    present = [
        f"- [{title}]({Path(path).relative_to('physics') if path.startswith('physics/') else '../' + path})"
        for path, title in PENDING_PAGES.items()
        if (docs / path).exists()
    ]
    listing = "\n".join(present) if present else "(The detailed pages of this section are being merged.)"
    return markdown.replace(PHYSICS_LIST_MARK, listing)
