"""One wrapper class per type in the mistralai SDK, instead of one per call.

The SDK's serializers (``mistralai.client.utils.serializers``: ``marshal_json`` for every
request body, ``unmarshal`` for the messages it checks and every reply it reads) build a new
pydantic model class around the type each time they are called: pydantic then generates that
class's whole validation schema again (the chat message union included): about 4 ms of CPU
per completion measured alone, more with a nightly's threads all asking at once. The classes hold no
state: one per (name, type, config) serves every call. :func:`install` swaps the serializers'
``create_model`` for a memoising one; anything it cannot key (an unhashable type, other
arguments) is built as before.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger(__name__)

_LOCK = threading.Lock()
_MADE: dict[object, Any] = {}
_INSTALLED: list[bool] = []


def _key(name: str, fields: dict[str, Any]) -> object | None:
    if set(fields) != {"body", "__config__"}:
        return None
    config = fields["__config__"] or {}
    key = (name, fields["body"], tuple(sorted(config.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def install() -> bool:
    """Memoise the SDK serializers' wrapper classes (idempotent); False when the SDK's layout
    is not the one this was written for (nothing is changed then)."""
    with _LOCK:
        if _INSTALLED:
            return _INSTALLED[0]
        try:
            from mistralai.client.utils import serializers
        except ImportError:  # another SDK layout: leave it alone
            _INSTALLED.append(False)
            return False
        original = getattr(serializers, "create_model", None)
        if original is None:
            _INSTALLED.append(False)
            return False

        def create_model_once(name: str, /, **fields: Any) -> Any:
            key = _key(name, fields)
            if key is None:
                return original(name, **fields)
            made = _MADE.get(key)
            if made is None:
                made = original(name, **fields)
                with _LOCK:
                    made = _MADE.setdefault(key, made)
            return made

        serializers.create_model = create_model_once
        _INSTALLED.append(True)
        log.debug("mistralai serializers: wrapper classes memoised by type")
        return True
