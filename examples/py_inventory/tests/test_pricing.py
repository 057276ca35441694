from inventory.pricing import format_cents, line_total, volume_discount


def test_no_discount_for_small_orders():
    assert volume_discount(1) == 0


def test_ten_units_get_five_percent():
    assert volume_discount(10) == 5


# Weak on purpose: bare truthiness, nothing about the amount.
def test_line_total():
    assert line_total(1000, 3)


def test_format_cents():
    assert format_cents(1999) == "19.99 EUR"
