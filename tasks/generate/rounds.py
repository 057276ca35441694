"""One target's conversation with the generator: the budget, the prompts as sent, the files.

:class:`Conversation` holds what a target's loop keeps between rounds (kept small, so the loop in
:mod:`tasks.generate.loop` reads top to bottom): the exchanges archived exactly as sent, the call
records, the files the model wrote so far, and the budget checks (model calls, wall time).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tasks.core.errors import AutopilotError
from tasks.core.types import Exchange, PromptMeta, ValidationResult
from tasks.generate.files import reply_parser
from tasks.generate.gates import GateName
from tasks.generate.skills import Skill
from tasks.generate.targets import Target
from tasks.generate.types import RoundRecord
from tasks.model.client import CallRecord, ModelClient
from tasks.model.messages import prepare_messages
from tasks.model.prompts import render
from tasks.toolchains.files import FileRules


def round_record(round_no: int, validation: ValidationResult, gate: GateName | None) -> RoundRecord:
    """The structured record of one measured round (`gate`: the first gate it failed)."""
    return RoundRecord(
        round=round_no, loaded=validation.loaded, passed=validation.passed, gate=gate
    )


class BudgetExhaustedError(AutopilotError):
    """The run's model-call budget is spent: the file stops cleanly where it is."""


class Conversation:
    """The generator's side of one target's loop."""

    def __init__(
        self,
        target: Target,
        client: ModelClient,
        skill: Skill,
        rules: FileRules,
        *,
        max_calls: int | None,
        time_limit_s: float | None = None,
    ) -> None:
        self.target = target
        self.client = client
        self.skill = skill
        self.rules = rules
        self.max_calls = max_calls
        self.time_limit_s = time_limit_s
        self.started = time.monotonic()
        self.records: list[CallRecord] = []
        self.exchanges: list[Exchange] = []
        self.files: dict[str, str] = {}

    def check_budget(self, needed: int = 1) -> None:
        """Raise BudgetExhaustedError when `needed` more calls would pass the run's budget, or
        the file's time limit is reached (checked between steps, never in the middle of one)."""
        if self.max_calls is not None and self.client.calls + needed > self.max_calls:
            raise BudgetExhaustedError(
                f"{self.target.source}: model call budget of {self.max_calls} calls exhausted"
            )
        self.check_time()

    def check_time(self) -> None:
        """Raise BudgetExhaustedError when the file's time limit is reached (the first round
        always runs: a file that was started gets at least one complete try)."""
        limit = self.time_limit_s
        if limit is None or not self.exchanges:
            return
        if time.monotonic() - self.started >= limit:
            raise BudgetExhaustedError(f"{self.target.source}: time limit of {limit:g} s reached")

    def ask(self, name: str, project: Path, /, **variables: Any) -> None:
        """Render prompt `name`, send it, and take the files of the reply (checked by the
        reply parser against the skill and the toolchain's file rules; a bad reply is re-asked
        by the client with the reason)."""
        self.check_budget()
        rendered = render(name, path=self.target.source, **variables)
        # Archived exactly as sent: redacted, with the file it is about named.
        messages = prepare_messages(rendered.messages(), self.target.source)
        exchange = self.record_exchange(rendered.meta, messages)
        parser = reply_parser(
            project, self.target, self.skill, self.rules, exchange.replies, written=self.files
        )
        try:
            files, record = self.client.complete_parsed(
                "generator", messages, parser, prompt=rendered.meta, about=self.target.source
            )
        except AutopilotError as exc:
            exchange.error = str(exc)
            self.records.extend(
                r for r in self.client.records[-1:] if r.about == self.target.source
            )
            raise
        self.records.append(record)
        exchange.tokens = record.input_tokens + record.output_tokens
        self.files.update(files)

    def record_exchange(
        self, prompt: PromptMeta, messages: list[dict[str, str]], replies: list[str] | None = None
    ) -> Exchange:
        """A new archived exchange for a prompt sent as `messages`."""
        exchange = Exchange(
            iteration=len(self.exchanges) + 1,
            prompt_name=prompt.name,
            prompt_version=prompt.version,
            prompt_sha256=prompt.sha256,
            messages=messages,
            replies=list(replies or []),
        )
        self.exchanges.append(exchange)
        return exchange
