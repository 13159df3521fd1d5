"""API parameter names as the command line says them: an error the API raises about a parameter is re-raised under
its flag, and the parameters its message names in backticks (```isl```) are said as flags too (``--isl``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

from roofline_opt.errors import InvalidInput

FLAG_OF = {"time_limit_s": "--time-limit"}
"""API parameters whose flag is not the parameter's name with dashes."""
_QUOTED = re.compile(r"`(\w+)`")


def flag(field: str) -> str:
    """The flag of an API parameter: ``max_usd_per_mtok`` -> ``--max-usd-per-mtok``."""
    return FLAG_OF.get(field, "--" + field.replace("_", "-"))


def flag_message(message: str) -> str:
    """A message of the API with the parameters it names in backticks said as flags."""
    return _QUOTED.sub(lambda m: flag(m.group(1)), message)


@contextmanager
def flag_names(fields: Collection[str], name: Callable[[str], str] = flag) -> Iterator[None]:
    """Re-raise InvalidInput about one of ``fields`` (``"usd_per_gpu_hour: h100-sxm"`` names the parameter and an
    item of it) under ``name(field)``, its message's parameters said as flags."""
    try:
        yield
    except InvalidInput as exc:
        head, sep, rest = exc.field.partition(": ")
        if head not in fields:
            raise
        raise InvalidInput(name(head) + sep + rest, flag_message(exc.message)) from exc
