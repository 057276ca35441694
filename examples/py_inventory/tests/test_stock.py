import pytest

from inventory.errors import InsufficientStockError
from inventory.stock import Item, Stock


@pytest.fixture
def stock():
    s = Stock()
    s.register(Item("A1", "Apple", 50, reorder_level=5), 10)
    return s


def test_add_increases_level(stock):
    assert stock.add("A1", 5) == 15


def test_remove_too_much(stock):
    with pytest.raises(InsufficientStockError, match="only 10 on hand"):
        stock.remove("A1", 11)


# Weak on purpose: only checks that something came back.
def test_needs_reorder(stock):
    stock.remove("A1", 6)
    assert stock.needs_reorder() is not None
