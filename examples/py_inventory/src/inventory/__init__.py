"""A small stock-keeping package: items, stock levels, prices, units and reports."""

__version__ = "0.1.0"
