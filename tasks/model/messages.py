"""Model call types (messages, prompt metadata, call records) and outgoing message preparation.

Every request carries the repository-relative path of the file it is about: when no message
mentions it, "File: <path>" is appended to the system message (or a system message holding it is
put first). Every outgoing message goes through :func:`tasks.core.secrets.redact`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from tasks.core.errors import ModelError
from tasks.core.secrets import redact

Role = Literal["generator", "diagnostician", "surgeon", "judge", "scout"]
ROLES: tuple[Role, ...] = ("generator", "diagnostician", "surgeon", "judge", "scout")


class Message(BaseModel):
    """One chat message."""

    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class PromptInfo(Protocol):
    """Anything naming a prompt: e.g. tasks.core.types.PromptMeta."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def sha256(self) -> str: ...


class CallRecord(BaseModel):
    """One logical model call: all its HTTP attempts and re-asks together."""

    role: str
    model: str
    prompt_name: str
    prompt_version: str
    prompt_sha256: str
    about: str
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    attempts: int = 0
    replayed: int = Field(
        0, description="Replies answered from the reply store (received by an earlier run)"
    )
    reasks: int = 0
    ok: bool = False
    error: str | None = None


class Reply(BaseModel):
    """A free-text reply and the record of the call that produced it."""

    text: str
    record: CallRecord


def prepare_messages(
    messages: Sequence[dict[str, Any] | Message], about: str
) -> list[dict[str, str]]:
    """Plain, redacted message dicts that mention `about` (see the module docstring).

    Raises:
        ModelError: a message has no role or its content is not text.
    """
    out: list[dict[str, str]] = []
    for i, m in enumerate(messages):
        data = m.model_dump() if isinstance(m, Message) else m
        role, content = data.get("role"), data.get("content")
        if role not in ("system", "user", "assistant") or not isinstance(content, str):
            raise ModelError(f"{about}: message {i} needs a role and text content")
        out.append({"role": role, "content": redact(content)})
    if not any(about in m["content"] for m in out):
        line = f"File: {about}"
        if out and out[0]["role"] == "system":
            out[0]["content"] = f"{out[0]['content'].rstrip()}\n\n{line}"
        else:
            out.insert(0, {"role": "system", "content": line})
    return out
