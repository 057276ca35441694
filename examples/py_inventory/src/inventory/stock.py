"""Stock levels per SKU, with a history of movements."""

from __future__ import annotations

from dataclasses import dataclass, field

from inventory.errors import InsufficientStockError, InventoryError, UnknownItemError


@dataclass(frozen=True)
class Item:
    """Something kept in stock."""

    sku: str
    name: str
    unit_price_cents: int
    reorder_level: int = 0

    def __post_init__(self) -> None:
        if not self.sku:
            raise InventoryError("sku must not be empty")
        if self.unit_price_cents < 0:
            raise InventoryError(f"{self.sku}: price must not be negative")


@dataclass
class Stock:
    """Quantities on hand, keyed by SKU."""

    items: dict[str, Item] = field(default_factory=dict)
    levels: dict[str, int] = field(default_factory=dict)
    history: list[tuple[str, int]] = field(default_factory=list)

    def register(self, item: Item, quantity: int = 0) -> None:
        if item.sku in self.items:
            raise InventoryError(f"{item.sku} is already registered")
        self.items[item.sku] = item
        self.levels[item.sku] = 0
        if quantity:
            self.add(item.sku, quantity)

    def add(self, sku: str, quantity: int) -> int:
        self._check(sku, quantity)
        self.levels[sku] += quantity
        self.history.append((sku, quantity))
        return self.levels[sku]

    def remove(self, sku: str, quantity: int) -> int:
        self._check(sku, quantity)
        available = self.levels[sku]
        if quantity > available:
            raise InsufficientStockError(sku, quantity, available)
        self.levels[sku] = available - quantity
        self.history.append((sku, -quantity))
        return self.levels[sku]

    def quantity(self, sku: str) -> int:
        if sku not in self.levels:
            raise UnknownItemError(sku)
        return self.levels[sku]

    def needs_reorder(self) -> list[str]:
        """SKUs at or under their reorder level, sorted."""
        return sorted(
            sku for sku, item in self.items.items() if self.levels[sku] <= item.reorder_level
        )

    def _check(self, sku: str, quantity: int) -> None:
        if sku not in self.items:
            raise UnknownItemError(sku)
        if quantity <= 0:
            raise InventoryError(f"quantity must be positive, got {quantity}")
