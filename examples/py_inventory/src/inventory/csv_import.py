"""Load items and initial quantities from CSV text (sku,name,price_cents,quantity)."""

from __future__ import annotations

import csv
import io

from inventory.errors import InventoryError
from inventory.stock import Item, Stock

REQUIRED = ("sku", "name", "price_cents", "quantity")


def load_csv(text: str, stock: Stock | None = None) -> Stock:
    """Register every row; a bad row raises InventoryError naming its line."""
    stock = stock if stock is not None else Stock()
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise InventoryError(f"missing columns: {', '.join(missing)}")
    for line_no, row in enumerate(reader, start=2):
        try:
            item = Item(row["sku"].strip(), row["name"].strip(), int(row["price_cents"]))
            stock.register(item, int(row["quantity"]))
        except (ValueError, InventoryError) as exc:
            raise InventoryError(f"line {line_no}: {exc}") from exc
    return stock
