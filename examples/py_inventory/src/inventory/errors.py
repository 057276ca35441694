"""Errors raised by the inventory package."""


class InventoryError(Exception):
    """Base class of every inventory error."""


class UnknownItemError(InventoryError):
    """An SKU that is not in the stock."""

    def __init__(self, sku: str) -> None:
        super().__init__(f"unknown item {sku!r}")
        self.sku = sku


class InsufficientStockError(InventoryError):
    """Removing more than is on hand."""

    def __init__(self, sku: str, requested: int, available: int) -> None:
        super().__init__(f"cannot remove {requested} of {sku!r}: only {available} on hand")
        self.sku = sku
        self.requested = requested
        self.available = available


class UnitError(InventoryError):
    """An unknown unit or an impossible conversion."""
