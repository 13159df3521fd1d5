"""Accelerator prices on one stated basis: rental cards, owned-hardware cards (physics.md 10.6) and overrides.

A card states ``usd_per_hour`` with ``price_basis`` (the catalog's: ``on-demand rental``), ``price_date`` and
``price_source``; or, for hardware one owns, an ``owned:`` mapping from which the hourly price is derived:
usd_per_hour = purchase_usd / (amortisation_years * 8760 * availability) + power_kw * pue * usd_per_kwh
+ other_usd_per_hour.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from roofline_opt import checks
from roofline_opt.catalog.parse import MAX_CARD_NUMBER, spec_from_mapping
from roofline_opt.errors import InvalidInput
from roofline_opt.physics.specs import GpuSpec

HOURS_PER_YEAR = 8760.0

OWNED_FIELDS = {
    "purchase_usd": "purchase price of one accelerator with its share of the server and network, $",
    "amortisation_years": "years over which the purchase is written off",
    "power_kw": "average power of one accelerator with its share of the server, kW",
    "pue": "power usage effectiveness of the data centre (>= 1)",
    "usd_per_kwh": "electricity price, $ per kWh",
    "availability": "fraction of the hours the accelerator serves, in (0, 1]",
}
OWNED_OPTIONAL = {"other_usd_per_hour": "other hourly costs per accelerator (space, staff, support), $"}

OWNED_BASIS = "owned: amortised purchase + power (physics.md 10.6)"
OVERRIDE_BASIS = "override (--usd-per-gpu-hour)"


def owned_usd_per_hour(
    purchase_usd: float,
    amortisation_years: float,
    power_kw: float,
    pue: float,
    usd_per_kwh: float,
    availability: float,
    other_usd_per_hour: float = 0.0,
) -> float:
    """Hourly cost of an owned accelerator: amortised purchase over the available hours, plus power and other costs."""
    return (
        purchase_usd / (amortisation_years * HOURS_PER_YEAR * availability)
        + power_kw * pue * usd_per_kwh
        + (other_usd_per_hour)
    )


def _owned_price(where: str, owned: Any) -> tuple[float, str]:
    """The derived hourly price of an ``owned:`` mapping and the text saying how it was derived."""
    if not isinstance(owned, Mapping):
        raise InvalidInput(
            f"{where}: owned", f"must be a mapping with {', '.join(OWNED_FIELDS)}. Got {owned!r} instead."
        )
    for key in owned:
        checks.choice(f"{where}: owned", key, {**OWNED_FIELDS, **OWNED_OPTIONAL})
    values = {}
    for key in OWNED_FIELDS:
        if key not in owned:
            raise InvalidInput(f"{where}: owned: {key}", f"is missing ({OWNED_FIELDS[key]})")
        values[key] = checks.positive_float(f"{where}: owned: {key}", owned[key])
    values["other_usd_per_hour"] = checks.positive_float(
        f"{where}: owned: other_usd_per_hour", owned.get("other_usd_per_hour", 0.0), allow_zero=True
    )
    if values["availability"] > 1:
        raise InvalidInput(f"{where}: owned: availability", f"must be in (0, 1]. Got {values['availability']} instead.")
    if values["pue"] < 1:
        raise InvalidInput(f"{where}: owned: pue", f"must be >= 1. Got {values['pue']} instead.")
    price = owned_usd_per_hour(**values)
    how = ", ".join(f"{k} {v:g}" for k, v in values.items())
    return price, f"{OWNED_BASIS}: {how}"


def gpu_from_mapping(data: dict[str, Any], where: str) -> GpuSpec:
    """A GpuSpec from a card mapping; an ``owned:`` mapping derives ``usd_per_hour`` (and may not be given with it)."""
    data = dict(data)
    if "owned" in data:
        if "usd_per_hour" in data:
            msg = "must not be given together with owned: (the owned-hardware figures derive the price)"
            raise InvalidInput(f"{where}: usd_per_hour", msg)
        price, how = _owned_price(where, data.pop("owned"))
        data |= {"usd_per_hour": price, "price_basis": OWNED_BASIS, "price_source": how}
    return spec_from_mapping(GpuSpec, data, where)


def parse_price_overrides(field: str, value: str | Mapping[str, float] | None) -> dict[str, float]:
    """``"h100-sxm=2.5,h200=3.2"`` (or a mapping) -> {name: $ per GPU-hour}, each price > 0 and <= 1e300."""
    if value is None or value == "":
        return {}
    pairs: list[tuple[str, object]]  # prices as given: numbers from a mapping, text from a string
    if isinstance(value, Mapping):
        pairs = list(value.items())
    else:
        pairs = []
        for item in str(value).split(","):
            name, sep, text = item.partition("=")
            if not sep or not name.strip():
                msg = f"must be name=price pairs like h100-sxm=2.5,h200=3.2. Got {item.strip()!r} instead."
                raise InvalidInput(field, msg)
            pairs.append((name.strip(), text.strip()))
    top = MAX_CARD_NUMBER  # the cap a card's own price has
    prices: dict[str, float] = {}
    for name, price in pairs:
        if str(name) in prices:
            raise InvalidInput(f"{field}: {name}", "is given twice: give each accelerator's price once")
        prices[str(name)] = checks.positive_float(f"{field}: {name}", price, maximum=top)
    return prices


def with_prices(gpus: tuple[GpuSpec, ...], overrides: Mapping[str, float], field: str) -> tuple[GpuSpec, ...]:
    """The accelerators with overridden hourly prices; an override naming no accelerator of the question is an error.
    An override equal to the card's price changes nothing (the card keeps its basis), so a saved question that pins
    the prices it ran with (``--save-dir``) repeats the answer exactly."""
    names = {g.name for g in gpus}
    for name in overrides:
        checks.choice(field, name, names)
    return tuple(
        dataclasses.replace(
            g,
            usd_per_hour=overrides[g.name],
            price_basis=OVERRIDE_BASIS,
            price_date="",
            price_source=f"{OVERRIDE_BASIS}: {overrides[g.name]:g} $/GPU-hour",
        )
        if g.name in overrides and overrides[g.name] != g.usd_per_hour
        else g
        for g in gpus
    )
