"""Reusable field validators: each converts one value or raises InvalidInput with "must be ... Got ... instead"."""

from __future__ import annotations

import difflib
import math
import re
import reprlib
from collections.abc import Iterable
from numbers import Integral, Real
from typing import Any

from roofline_opt.errors import InvalidInput

MAX_INT = 2**31 - 1
"""Largest integer any field takes unless it states a smaller cap: every integer reaches numpy as an int64 product."""
_NUMBER_TEXT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|[+-]?(?:inf|infinity|nan)", re.ASCII | re.IGNORECASE)
"""A number as text: ASCII digits only (no Unicode digits, no underscores), optional exponent."""
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = 3, 60, 60, 40


class NumericText(str):
    """Text from a file that spells a number but was written as text (``'4'``, ``"4096"``, ``!!str 4096``): it stays
    text, and number fields refuse it instead of reading a number the file did not give as one."""


_QUOTED = " (a number written as text, quoted or !!str: write it unquoted)"


def shown(value: Any) -> str:
    """``repr(value)`` bounded in size and time (nested and aliased values are cut short): for error messages."""
    return _SHOWN.repr(value)


def _number(value: Any) -> float | None:
    """``value`` as a float if it is a real number or a string spelling one in ASCII, else None (bools are not
    numbers; integers too large for a float are infinite)."""
    if isinstance(value, bool | NumericText):
        return None
    if isinstance(value, Integral):
        whole = int(value)
        return float(whole) if abs(whole) < 2**1023 else math.copysign(math.inf, whole)
    if isinstance(value, Real):
        return float(value)
    if isinstance(value, str) and len(value) < 100 and _NUMBER_TEXT.fullmatch(value.strip()):
        return float(value.strip())
    return None


def _integer(value: Any) -> int | None:
    """``value`` as an int if it is an integer, an integral finite float, or a string spelling one, else None."""
    if isinstance(value, Integral) and not isinstance(value, bool):
        return int(value)
    number = _number(value)
    if number is not None and math.isfinite(number) and number.is_integer():
        return int(number)
    return None


def positive_int(field: str, value: Any, *, minimum: int = 1, maximum: int = MAX_INT) -> int:
    """``value`` as an int in ``minimum..maximum`` (1..MAX_INT by default); integral floats and strings like "8"
    are accepted."""
    converted = _integer(value)
    if converted is None or not minimum <= converted <= maximum:
        wanted = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        if converted is not None and converted > maximum:
            wanted = f"at most {maximum:,}" if minimum == 1 else f"an integer in {minimum}..{maximum:,}"
        msg = f"must be {wanted}. Got {shown(value)} instead{_QUOTED if isinstance(value, NumericText) else ''}."
        raise InvalidInput(field, msg)
    return converted


def positive_float(
    field: str, value: Any, *, allow_zero: bool = False, maximum: float = math.inf, minimum: float = 0.0
) -> float:
    """``value`` as a finite float > 0 (>= 0 with ``allow_zero``), within ``minimum..maximum`` when given; NaN and
    infinity are rejected."""
    number = _number(value)
    bad = number is None or not math.isfinite(number) or number < 0 or (number == 0 and not allow_zero)
    if number is None or bad or not minimum <= number <= maximum:
        wanted = "a finite number >= 0" if allow_zero else "a finite number > 0"
        if not bad:
            low = f">= {minimum:g}" if minimum > 0 or allow_zero else "> 0"
            wanted = f"a number {low} and <= {maximum:g}"
        msg = f"must be {wanted}. Got {shown(value)} instead{_QUOTED if isinstance(value, NumericText) else ''}."
        raise InvalidInput(field, msg)
    return number


def probability(field: str, value: Any, *, include_zero: bool = False, include_one: bool = False) -> float:
    """``value`` as a float in the interval (0, 1), each end closed on request."""
    number = _number(value)
    low_ok = number is not None and (number > 0 or (include_zero and number == 0))
    high_ok = number is not None and (number < 1 or (include_one and number == 1))
    if number is None or not (low_ok and high_ok):
        interval = ("[" if include_zero else "(") + "0, 1" + ("]" if include_one else ")")
        msg = f"must be a number in {interval}. Got {shown(value)} instead."
        raise InvalidInput(field, msg)
    return number


def choice(field: str, value: Any, options: Iterable[Any]) -> Any:
    """``value`` if it is one of ``options`` (compared as text), else an error suggesting the closest options."""
    by_text = {str(option): option for option in options}
    text = str(value).strip() if isinstance(value, str | int | float) else shown(value)
    if text in by_text:
        return by_text[text]
    msg = f"must be one of {', '.join(by_text)}. Got {shown(value)} instead."
    folded = {option.casefold(): option for option in by_text}  # suggestions ignore letter case: H10 -> h100-sxm
    key = text.casefold()
    extending = [option for option in by_text if key and option.casefold().startswith(key)]
    similar = [folded[o] for o in difflib.get_close_matches(key, list(folded), n=3)]
    close = list(dict.fromkeys(extending + similar))[:3]
    if close:
        msg += f" Did you mean {' or '.join(repr(c) for c in close)}?"
    raise InvalidInput(field, msg)


def _split(field: str, text: Any) -> list[str]:
    """Comma-separated items of ``text``, stripped; empty items are an error."""
    items = [item.strip() for item in text.split(",")] if isinstance(text, str) else []
    if not items or not all(items):
        msg = f"must be a comma-separated list without empty items, like '1,2,4'. Got {shown(text)} instead."
        raise InvalidInput(field, msg)
    return items


def items(field: str, value: Any) -> tuple[Any, ...]:
    """The values of a parameter that takes one value or several: a list or tuple as a tuple, anything else as one
    item. Comma-separated text (``"1,2,4"``) is the notation of the command line and of files, which split it before
    calling the API (``api.split_lists``); here it is refused rather than read as one odd name."""
    if isinstance(value, str):
        if "," in value:
            msg = f"must be one value or a list of values (not comma-separated text). Got {shown(value)} instead."
            raise InvalidInput(field, msg)
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(value)
    return (value,)


def once_each(field: str, values: tuple[Any, ...]) -> tuple[Any, ...]:
    """``values`` (already converted: ``"8"`` and ``"08"`` are both 8) if none repeats, else an error naming the
    first repeated value: a list that offers a value twice is a typo, not a wish."""
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            count = values.count(value)
            times = "twice" if count == 2 else f"{count} times"
            msg = f"must list each value once; {shown(value)} is given {times}. Got {shown(list(values))} instead."
            raise InvalidInput(field, msg)
        seen.add(value)
    return values


def parse_int_list(field: str, text: Any) -> tuple[int, ...]:
    """Text like ``"1,2,4"`` as ``(1, 2, 4)``; every item must be a positive integer."""
    return tuple(positive_int(field, item) for item in _split(field, text))


def parse_name_list(field: str, text: Any) -> tuple[str, ...]:
    """Text like ``"h100-sxm, h200"`` as ``("h100-sxm", "h200")``."""
    return tuple(_split(field, text))


_PREFIX_GB = {"M": 1e-3, "G": 1.0, "T": 1e3}
"""Unit prefixes in GB: 400Gb/s = 400 x 1 / 8 GB/s; 1.8TB/s = 1800 GB/s."""


def bandwidth_gb_s(field: str, value: Any, plausible_max_gb_s: float | None = None) -> float:
    """A bandwidth in GB/s per direction: a number (GB/s), or text with explicit units: ``400Gb/s`` / ``400 Gbps``
    (bits, divided by 8), ``50GB/s``, ``1.8TB/s``. Above ``plausible_max_gb_s`` a bare number is refused: it is
    almost certainly a Gb/s figure written where GB/s is meant."""
    import re

    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([MGT])(b|B|bit|byte)(/s|ps)\s*", value)
        if match is None and _number(value) is None:
            msg = f"must be a number in GB/s or carry a unit like 400Gb/s, 50GB/s or 1.8TB/s. Got {value!r} instead."
            raise InvalidInput(field, msg)
        if match is not None:
            number = positive_float(field, match.group(1))
            per_byte = match.group(3) in ("B", "byte")
            return number * _PREFIX_GB[match.group(2)] / (1.0 if per_byte else 8.0)
    gb_s = positive_float(field, value)
    if plausible_max_gb_s is not None and gb_s > plausible_max_gb_s:
        msg = (
            f"is in GB/s per direction, and {gb_s:g} GB/s is more than any NIC offers ({plausible_max_gb_s:g} GB/s = "
            f"{plausible_max_gb_s * 8:g} Gb/s). If you meant {gb_s:g} Gb/s, write '{gb_s:g}Gb/s' (= {gb_s / 8:g} GB/s)."
        )
        raise InvalidInput(field, msg)
    return gb_s


def figure(value: float, digits: int = 4) -> str:
    """A figure for a message: ``digits`` significant digits, thousands separated, an exponent only outside
    [1e-4, 1e15) (``100,000``, ``1,235``, ``12.35``, ``0.001234``, ``1e-308``)."""
    value = float(value)
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    if not 1e-4 <= abs(value) < 1e15:  # beyond these, digits in full would be a wall of zeros
        return f"{value:.{digits}g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{round(value, decimals):,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
