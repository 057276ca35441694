"""The ``[forge]`` settings group (to be hooked into ``tasks.core.config.Settings`` as ``forge``):
where pull requests are opened and with which token."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_API = {"github": "https://api.github.com", "gitlab": "https://gitlab.com/api/v4"}


class ForgeSettings(BaseModel):
    """A GitHub or GitLab project to open pull (merge) requests on."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["github", "gitlab"] | None = Field(
        None, description="github or gitlab; unset: no pull request is ever opened"
    )
    repository: str | None = Field(
        None,
        description="GitHub: owner/name; GitLab: the project's numeric id or its full path "
        "(group/subgroup/project)",
    )
    api_url: str | None = Field(
        None,
        description="The REST API root (GitHub Enterprise: https://host/api/v3; self-managed "
        "GitLab: https://host/api/v4); default: the public service's",
    )
    base: str = Field("main", description="The branch the pull request targets")
    token_secret: str | None = Field(
        None, description="Name of the Prefect Secret block holding the token"
    )
    token_env: str = Field(
        "AUTOPILOT_FORGE_TOKEN",
        description="Environment variable holding the token (GITHUB_TOKEN or GITLAB_TOKEN "
        "are read when it is unset)",
    )
    draft: bool = Field(False, description="Open pull requests as drafts")
    timeout_s: float = Field(30.0, gt=0, description="Per-request timeout")

    @model_validator(mode="after")
    def _needs_repository(self) -> ForgeSettings:
        if self.kind is not None and not self.repository:
            raise ValueError(f"forge.kind = {self.kind!r} needs forge.repository")
        if self.kind == "github" and self.repository and self.repository.count("/") != 1:
            raise ValueError(f"forge.repository {self.repository!r}: expected owner/name")
        return self

    @property
    def configured(self) -> bool:
        return self.kind is not None

    @property
    def api(self) -> str:
        """The API root without a trailing slash."""
        assert self.kind is not None
        return (self.api_url or DEFAULT_API[self.kind]).rstrip("/")
