"""``python -m roofline_opt`` runs the command-line tool."""

from roofline_opt.cli import run

run()
