"""What model tokens cost: an ESTIMATE from Mistral's public list prices (USD per million
tokens, input and output), for comparison only. Unknown models (self-hosted servers) get no
cost. ``autopilot eval``'s table and the run history's cost per night use it."""

from __future__ import annotations

# USD per million tokens (input, output): Mistral's public list prices when this was written.
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "codestral-latest": (0.3, 0.9),
    "mistral-large-latest": (2.0, 6.0),
    "mistral-medium-latest": (0.4, 2.0),
    "mistral-small-latest": (0.1, 0.3),
    "devstral-small-latest": (0.1, 0.3),
    "devstral-medium-latest": (0.4, 2.0),
}


def price_per_token(model: str) -> float | None:
    """The blended USD price of one token for `model` (3 input : 1 output), if known."""
    prices = PRICES_PER_MTOK.get(model)
    if prices is None:
        return None
    return (3 * prices[0] + prices[1]) / 4 / 1_000_000


def call_cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """The USD cost of one call's tokens at `model`'s list prices, if known."""
    prices = PRICES_PER_MTOK.get(model)
    if prices is None:
        return None
    return (input_tokens * prices[0] + output_tokens * prices[1]) / 1_000_000
