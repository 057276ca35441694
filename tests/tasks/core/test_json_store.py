"""The disk caches' shared store: atomic entries, damage is a miss, keys cannot escape."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from tasks.core.json_store import JsonStore


class Entry(BaseModel):
    value: int


def test_an_entry_round_trips_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    store = JsonStore(tmp_path / "c", Entry)
    assert store.get("ab12") is None
    assert store.put("ab12", Entry(value=7)) is True
    assert store.get("ab12") == Entry(value=7)
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["ab12.json"]


def test_a_damaged_or_foreign_entry_is_a_miss(tmp_path: Path) -> None:
    store = JsonStore(tmp_path, Entry)
    (tmp_path / "ab.json").write_text("{half", encoding="utf-8")
    (tmp_path / "cd.json").write_text('{"value": "not a number"}', encoding="utf-8")
    assert store.get("ab") is None and store.get("cd") is None


@pytest.mark.parametrize("key", ["", "../x", "AB", "a/b", "key"])
def test_a_key_that_is_not_a_hex_digest_is_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="invalid cache key"):
        JsonStore(tmp_path, Entry).get(key)


def test_an_unwritable_directory_is_logged_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    assert JsonStore(blocker / "sub", Entry).put("ab", Entry(value=1)) is False
