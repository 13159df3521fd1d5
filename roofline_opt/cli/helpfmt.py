"""Help text conventions shared by every command: each flag's default shown, required flags marked."""

from __future__ import annotations

import argparse

REQUIRED = "(required)"


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps descriptions and epilogs as written and appends ``(default: X)`` to a flag without one in its help."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.help is argparse.SUPPRESS or not action.option_strings:
            return text
        if (
            "default" in text
            or "required" in text
            or isinstance(action, argparse._HelpAction | argparse._VersionAction)
        ):
            return text
        if action.required:
            return f"{text} {REQUIRED}"
        if isinstance(action, argparse._StoreTrueAction):
            return f"{text} (default: off)"
        if action.default is None:
            return f"{text} (default: none)"
        return f"{text} (default: {action.default})"
