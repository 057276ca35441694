"""The ``[envs]`` settings group (to be hooked into ``tasks.core.config.Settings`` as ``envs``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EnvSettings(BaseModel):
    """Prepared environments: built once per lock file and toolchain, reused read-only."""

    model_config = ConfigDict(extra="forbid")

    prepare: bool = Field(
        True,
        description="Build the project's environment from its lock file before the test runs "
        "(the toolchain names the files); off: the system's packages or the interpreter "
        "setting only",
    )
    network: bool = Field(
        True,
        description="The install step may reach the package registries (the only step that "
        "ever may); off: installed gems, vendor/cache and the uv cache only",
    )
    install_timeout_s: float = Field(
        1800.0, gt=0, description="Wall-clock limit of one environment's whole install"
    )
    max_age_days: float = Field(
        30.0, gt=0, description="Environments unused for this long are pruned"
    )
    keep: int = Field(10, ge=1, description="At most this many environments are kept")
    bundle_path: str | None = Field(
        None,
        description="A bundle the user installed themselves (BUNDLE_PATH, e.g. vendor/bundle), "
        "used instead of a prepared environment",
    )
    ruby: str | None = Field(
        None,
        description="An interpreter whose bin/ goes first on the sandbox's PATH (e.g. an rbenv "
        "installation) for the stacks that read it; default: the system's",
    )
