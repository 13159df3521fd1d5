"""Write a pip constraints file pinning every dependency to the lowest version pyproject.toml allows.

CI installs the package with these constraints in a second environment and runs the tests there, so a lower bound
that no longer works (an import added that an older release lacks) fails CI instead of a user's install.

Usage: ``python tools/lowest_constraints.py [EXTRA ...] > constraints.txt`` (runtime dependencies always; the named
optional extras too). Every requirement must carry a ``>=`` bound: one without a floor is an error, since it could
not be tested at its lowest.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
REQUIREMENT = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?P<spec>[^;]*)")
FLOOR = re.compile(r">=\s*(?P<version>[0-9][0-9A-Za-z.]*)")


def lowest_pins(requirements: list[str]) -> list[str]:
    """Return ``name==floor`` for each requirement string, in order.

    Parameters
    ----------
    requirements : list of str
        PEP 508 requirement strings such as ``"pyomo>=6.9.2,<7"`` or ``"dask[distributed]>=2024.8"``.

    Returns
    -------
    list of str
        One ``name==version`` constraint per requirement.

    Raises
    ------
    ValueError
        If a requirement has no ``>=`` lower bound.
    """
    pins = []
    for text in requirements:
        match = REQUIREMENT.match(text)
        floor = FLOOR.search(match.group("spec")) if match else None
        if floor is None:
            raise ValueError(f"requirement {text!r} has no '>=' lower bound to test")
        pins.append(f"{match.group('name')}=={floor.group('version')}")
    return pins


def main(extras: list[str]) -> int:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    print("\n".join(lowest_pins(requirements)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
