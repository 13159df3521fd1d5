"""Help text conventions shared by every command: each flag's default shown, required flags marked."""

from __future__ import annotations

import argparse

REQUIRED = "(required)"
HTML_HELP = (
    "also write an interactive report here: one self-contained HTML file (plotly.js inside, opens offline), hover a "
    "point for its setup and figures, click the legend to toggle accelerators/precisions, every row in a table "
    "below (needs the extra html: pip install 'roofline-opt[html]')"
)
"""Help of --html, the same on every command that writes a report."""
MODEL_HELP = (
    "catalog name or alias (HuggingFace id such as meta-llama/Llama-3.1-70B-Instruct; a -int8/-int4 suffix sets the "
    "weight bits), YAML card or config.json"
)
PRICES_HELP = (
    "price overrides for this question, e.g. h100-sxm=2.5,h200=3.2 (default: the catalog's on-demand rental prices, "
    "see `roofline-opt gpus`)"
)
QUESTION_HELP = "YAML file holding any of these flags (flag: value); flags given here override it"
PRESET_HELP = "physics of the reference notebook (paper) or the realistic one (default)"
TIME_LIMIT_HELP = "HiGHS time limit per solve, in seconds"
MIP_GAP_HELP = "HiGHS relative MIP gap"
"""Help of flags several commands share, with the same meaning on each."""
EXAMPLES = {
    "models": ("roofline-opt models", "roofline-opt models --json"),
    "gpus": ("roofline-opt gpus", "roofline-opt gpus --json"),
    "cluster": ("roofline-opt cluster show hgx-h100", "roofline-opt cluster draw hgx-h100 --out hgx-h100.png"),
    "cluster show": (
        "roofline-opt cluster show hgx-h100",
        "roofline-opt cluster show instances/clusters/torus-4x4.yaml",
    ),
    "cluster draw": ("roofline-opt cluster draw hgx-h100 --out hgx-h100.png",),
    "cluster build": (
        "roofline-opt cluster build instances/clusters/torus-4x4.yaml --out torus.graphml",
        "roofline-opt cluster build '{nodes: 4, node_type: hgx-h100}' --out pod.json",
    ),
    "evaluate": (
        "roofline-opt evaluate --model llama-3-70b --gpu h100-sxm --tp 8 --pp 1 --batch 16",
        "roofline-opt evaluate --model llama-3-70b --gpu h200 --tp 8 --pp 1 --batch 64 --isl 2000 --osl 500 "
        "--serving disagg --prefill-gpu h100-sxm --prefill-tp 4 --prefill-instances 2 --decode-instances 3",
    ),
    "study": (
        "roofline-opt study instances/studies/hbm-value.yaml --out hbm.parquet",
        "roofline-opt study instances/studies/hbm-value.yaml --summary-plot hbm.png --html hbm.html",
    ),
}
"""Examples of the commands and subcommands whose modules do not write their own epilog."""


def examples(command: str) -> str:
    """The epilog of ``command``: its examples, one a line."""
    lines = EXAMPLES[command]
    return ("example:\n" if len(lines) == 1 else "examples:\n") + "\n".join(f"  {line}" for line in lines)


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
