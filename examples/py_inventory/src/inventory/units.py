"""Quantity units and conversions between them."""

from __future__ import annotations

from inventory.errors import UnitError

# Factor to the base unit of each dimension.
_MASS = {"g": 1, "kg": 1000, "t": 1_000_000}
_COUNT = {"pc": 1, "dozen": 12, "box": 24}
_DIMENSIONS = (_MASS, _COUNT)


def _dimension(unit: str) -> dict[str, int]:
    for table in _DIMENSIONS:
        if unit in table:
            return table
    raise UnitError(f"unknown unit {unit!r}")


def convert(quantity: float, from_unit: str, to_unit: str) -> float:
    """Convert a quantity between two units of the same dimension."""
    source = _dimension(from_unit)
    target = _dimension(to_unit)
    if source is not target:
        raise UnitError(f"cannot convert {from_unit} to {to_unit}")
    return quantity * source[from_unit] / target[to_unit]


def parse_quantity(text: str) -> tuple[float, str]:
    """Parse "12 kg" or "3dozen" into (12.0, "kg") or (3.0, "dozen")."""
    stripped = text.strip()
    index = 0
    while index < len(stripped) and (stripped[index].isdigit() or stripped[index] in ".-"):
        index += 1
    number, unit = stripped[:index], stripped[index:].strip()
    if not number or not unit:
        raise UnitError(f"cannot parse quantity {text!r}")
    _dimension(unit)
    return float(number), unit
