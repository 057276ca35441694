"""Test helper: a secret no pattern recognises, the disguises a hostile test prints it in, and
which of them are still readable in a text."""

from __future__ import annotations

import base64
import secrets
import urllib.parse


def fresh() -> str:
    """A secret no pattern would recognise (no prefix, no name around it)."""
    return "Zq" + secrets.token_urlsafe(24).replace("-", "x").replace("_", "y")


def disguises(value: str) -> dict[str, str]:
    """Every way a test might print `value` to get it past a pattern-based filter."""
    data = value.encode()
    out = {
        "plain": value,
        "reversed": value[::-1],
        "hex": data.hex(),
        "HEX": data.hex().upper(),
        "percent": urllib.parse.quote(value, safe=""),
        "b64": base64.b64encode(data).decode(),
        "b64-unpadded": base64.b64encode(data).decode().rstrip("="),
        "b64-urlsafe": base64.urlsafe_b64encode(data).decode(),
    }
    for offset in range(3):  # inside a longer stream, at each of the three byte offsets
        stream = b"x" * offset + data + b"tail bytes"
        out[f"b64-in-stream-{offset}"] = base64.b64encode(stream).decode()
        out[f"b64url-in-stream-{offset}"] = base64.urlsafe_b64encode(stream).decode()
    return out


def leaked(value: str, text: str) -> list[str]:
    """The disguises of `value` still readable in `text` (the stream ones: decoded back)."""
    found = [name for name, form in disguises(value).items() if form in text]
    for chunk in text.split():
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                if value.encode() in decode(chunk + "=" * (-len(chunk) % 4)):
                    found.append("decodable " + chunk)
            except ValueError:
                pass
    return found
