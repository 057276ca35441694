"""Serve the four flows from one process with their schedules (a single machine, no work pool).

``nightly`` gets a cron schedule (default 02:00 in the configured timezone), ``post-merge`` an
event trigger on ``autopilot.ci.failed`` (and ``prefect deployment run post-merge/post-merge``
from CI), ``premerge`` one on ``autopilot.pr.changed`` (and ``prefect deployment run
premerge/premerge`` from a pull request's CI), ``audit`` is on demand. The deployment names
match infra/prefect.yaml, so operators and CI scripts use the same ``<flow>/<deployment>``
names whichever way the flows are deployed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment

log = logging.getLogger(__name__)

DEFAULT_CRON = "0 2 * * *"
DEFAULT_TIMEZONE = "UTC"
CI_FAILED_EVENT = "autopilot.ci.failed"
PULL_REQUEST_EVENT = "autopilot.pr.changed"
# Run parameters taken from the CI event: the workflow emits them in its payload.
POST_MERGE_EVENT_PARAMETERS = {
    "repo": "{{ event.payload.repo }}",
    "ref": "{{ event.payload.ref }}",
}
#: Run parameters taken from a pull request's event.
PREMERGE_EVENT_PARAMETERS = {
    "repo": "{{ event.payload.repo }}",
    "base": "{{ event.payload.base }}",
    "head": "{{ event.payload.head }}",
    "pr_number": "{{ event.payload.pr_number }}",
}
TAGS = ["autopilot"]


@dataclass
class ServeOptions:
    """What `autopilot serve` registers; None leaves a flow parameter at its default."""

    cron: str = DEFAULT_CRON
    timezone: str = DEFAULT_TIMEZONE
    repo: str | None = None
    ref: str = "HEAD"
    archive: str | None = None
    max_files: int | None = None
    max_model_calls: int | None = None
    extra_tags: list[str] = field(default_factory=list)


#: Nightly flow runs at once (infra/prefect.yaml's ``concurrency_limit``; a test keeps them equal).
NIGHTLY_CONCURRENCY = 1


def nightly_parameters(opts: ServeOptions) -> dict[str, Any]:
    """The nightly deployment's default parameters (only those given)."""
    params: dict[str, Any] = {"ref": opts.ref}
    for name in ("repo", "archive", "max_files", "max_model_calls"):
        value = getattr(opts, name)
        if value is not None:
            params[name] = value
    return params


@dataclass(frozen=True)
class _Trigger:
    """An event trigger: its name, the event, and the run parameters taken from it."""

    name: str
    event: str
    parameters: dict[str, str]


def _triggered(
    flow: Any,
    name: str,
    trigger: _Trigger,
    description: str,
    parameters: dict[str, Any],
    tags: list[str],
) -> Any:
    """A deployment of `flow` started by `trigger`'s event (and by `prefect deployment run`)."""
    from prefect.deployments.runner import EntrypointType
    from prefect.events import DeploymentEventTrigger

    return flow.to_deployment(
        name=name,
        parameters=parameters,
        triggers=[
            DeploymentEventTrigger(
                name=trigger.name, expect={trigger.event}, parameters=trigger.parameters
            )
        ],
        description=description,
        tags=[*tags, name],
        entrypoint_type=EntrypointType.MODULE_PATH,
    )


def build_deployments(opts: ServeOptions) -> list[RunnerDeployment]:
    """The `nightly`, `post-merge`, `premerge` and `audit` deployments for `prefect.serve`.

    Without a repository the nightly's schedule is registered inactive: a scheduled run without
    its required `repo` parameter could only fail. Set `repo` in the UI and activate it there.

    Args:
        opts: schedule, timezone and default parameters.

    Returns:
        Four runner deployments named like the flows.
    """
    from prefect.deployments.runner import EntrypointType
    from prefect.schedules import Cron

    from flows.audit import audit
    from flows.nightly import nightly
    from flows.post_merge import post_merge
    from flows.premerge import premerge

    tags = TAGS + list(opts.extra_tags)
    # Module entry points: the served runs load `flows.nightly:nightly` from the installed
    # package, whatever directory `autopilot serve` was started from.
    module = EntrypointType.MODULE_PATH
    schedule = Cron(opts.cron, timezone=opts.timezone, active=opts.repo is not None)
    if opts.repo is None:
        log.warning("no repository given: the nightly schedule is registered inactive")
    repo_params = {"repo": opts.repo} if opts.repo else {}
    made = [
        nightly.to_deployment(
            name="nightly",
            schedule=schedule,
            parameters=nightly_parameters(opts),
            description="Write or improve tests, gated, on a new branch (scheduled).",
            tags=[*tags, "nightly"],
            entrypoint_type=module,
            # As infra/prefect.yaml: one nightly at a time, a late run never overlaps the next.
            concurrency_limit=NIGHTLY_CONCURRENCY,
        ),
        _triggered(
            post_merge,
            "post-merge",
            _Trigger(
                "repair after a failing main build", CI_FAILED_EVENT, POST_MERGE_EVENT_PARAMETERS
            ),
            "Repair failing tests after a merge; run by CI or on autopilot.ci.failed.",
            repo_params,
            tags,
        ),
        _triggered(
            premerge,
            "premerge",
            _Trigger(
                "test a pull request's changed lines", PULL_REQUEST_EVENT, PREMERGE_EVENT_PARAMETERS
            ),
            "Tests for a pull request's changed lines; run by CI or on autopilot.pr.changed.",
            repo_params,
            tags,
        ),
        audit.to_deployment(
            name="audit",
            parameters=repo_params,
            description="Measure the tests without a model.",
            tags=[*tags, "audit"],
            entrypoint_type=module,
        ),
    ]
    # `to_deployment` is dual sync/async; called from sync code it returns the deployment.
    return [cast("RunnerDeployment", d) for d in made]


def serve_flows(opts: ServeOptions, limit: int | None = None) -> None:
    """Register the deployments and run their flow runs here until interrupted.

    Args:
        opts: schedule and parameters.
        limit: at most this many flow runs at once (None: Prefect's default).
    """
    from prefect import serve

    deployments = build_deployments(opts)
    serve(*deployments, limit=limit, print_starting_message=False)
