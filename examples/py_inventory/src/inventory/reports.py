"""Plain-text and dict reports over a Stock."""

from __future__ import annotations

from inventory.pricing import format_cents
from inventory.stock import Stock


def stock_value_cents(stock: Stock) -> int:
    """Value of everything on hand at unit price."""
    return sum(stock.items[sku].unit_price_cents * level for sku, level in stock.levels.items())


def summary(stock: Stock) -> dict[str, object]:
    return {
        "skus": len(stock.items),
        "units": sum(stock.levels.values()),
        "value": format_cents(stock_value_cents(stock)),
        "reorder": stock.needs_reorder(),
    }


def render_table(stock: Stock) -> str:
    """A fixed-width table, one SKU per line, sorted by SKU; empty stock gives a header only."""
    lines = [f"{'SKU':<10} {'NAME':<20} {'QTY':>5}"]
    for sku in sorted(stock.items):
        flag = " !" if sku in stock.needs_reorder() else ""
        lines.append(f"{sku:<10} {stock.items[sku].name:<20} {stock.levels[sku]:>5}{flag}")
    return "\n".join(lines)
