"""Prices: volume discounts, tax and rounding, all in integer cents."""

from __future__ import annotations

from inventory.errors import InventoryError

# (minimum quantity, percent off), highest threshold first.
VOLUME_DISCOUNTS = ((100, 15), (50, 10), (10, 5))
DEFAULT_TAX_PERCENT = 20


def volume_discount(quantity: int) -> int:
    """Percent off for buying `quantity` units."""
    if quantity <= 0:
        raise InventoryError(f"quantity must be positive, got {quantity}")
    for threshold, percent in VOLUME_DISCOUNTS:
        if quantity >= threshold:
            return percent
    return 0


def line_total(
    unit_price_cents: int, quantity: int, *, tax_percent: int = DEFAULT_TAX_PERCENT
) -> int:
    """Total in cents for a line, after the volume discount and with tax, rounded half up."""
    if unit_price_cents < 0:
        raise InventoryError("unit price must not be negative")
    if not 0 <= tax_percent <= 100:
        raise InventoryError(f"tax percent out of range: {tax_percent}")
    net = unit_price_cents * quantity * (100 - volume_discount(quantity))
    gross = net * (100 + tax_percent)
    # Integer arithmetic: cents * 10_000, rounded half up.
    return (gross + 5_000) // 10_000


def format_cents(cents: int, currency: str = "EUR") -> str:
    sign = "-" if cents < 0 else ""
    units, rest = divmod(abs(cents), 100)
    return f"{sign}{units}.{rest:02d} {currency}"
