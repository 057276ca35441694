import pytest

from inventory.errors import UnitError
from inventory.units import convert, parse_quantity


def test_convert_kg_to_g():
    assert convert(2, "kg", "g") == 2000


def test_convert_dozen_to_pieces():
    assert convert(1, "dozen", "pc") == 12


# Weak on purpose: no match on the message, and no check of which units are incompatible.
def test_convert_incompatible():
    with pytest.raises(UnitError):
        convert(1, "kg", "pc")


def test_parse_quantity():
    assert parse_quantity("12 kg") == (12.0, "kg")
