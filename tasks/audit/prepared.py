"""A run's outside needs, made ready once before its tests: the project's prepared environment
(cache level 2, ``tasks.envs``) and its declared services (``tasks.services``), with the
schema loaded the project's way.

:func:`prepared_run` is entered once per run inside the worktree (the audit, the nightly and
the post-merge repair all start here). Inside it every sandbox runner shows the environment and
the services' socket directory read-only and sets their variables, every toolchain uses the
environment's interpreter, and a file job in :func:`tasks.core.run_context.job_context` gets
its own database. On leaving, the services are stopped and removed, also on failure. A build
that failed or a service that could not start is not raised: it is the run's one-line
``problem``, which the caller reports (its test runs skipped), so nothing else is lost.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tasks.core.config import Settings
from tasks.core.errors import AutopilotError
from tasks.core.run_context import RunContext, run_context
from tasks.core.types import SuiteProblem, ValidationResult
from tasks.envs import EnvProblem, PreparedEnv, RunNeeds, prepare_environment, user_environment
from tasks.sandbox.make import make_runner
from tasks.services import ServiceError, Services, running_services
from tasks.toolchains.base import SuiteResult
from tasks.toolchains.registry import toolchain_class

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedRun:
    """What :func:`prepared_run` made ready, or why not."""

    env: PreparedEnv | None = None
    services: Services | None = None
    schema: str | None = None
    problem: str | None = None
    #: The same, as the problem of a suite that did not run (tool, cause, message).
    suite_problem: SuiteProblem | None = None


@contextlib.contextmanager
def prepared_run(
    settings: Settings, project: Path, worktree: Path, toolchain: str
) -> Iterator[PreparedRun]:
    """Prepare the environment, start the services, load the schema; run the body in that
    context; stop and remove the services afterwards.

    Args:
        settings: the run's settings (``envs``, ``services``, ``sandbox``, ``home``).
        project: the project inside the worktree (its lock files, its schema command).
        worktree: the sandbox root of the schema command.
        toolchain: the project's toolchain name.
    """
    chain = toolchain_class(toolchain).from_settings(settings)
    builder = chain.env_builder()
    outcome = prepare_environment(
        project, builder, home=settings.home, settings=settings.envs, sandbox=settings.sandbox
    )
    if isinstance(outcome, EnvProblem):
        tool = builder.tool if builder is not None else outcome.stack
        why = SuiteProblem(
            tool=tool,
            cause="environment",
            message=outcome.message,
            hint=f"environment {outcome.name} not built: {outcome.cause}",
        )
        yield PreparedRun(problem=outcome.one_line(), suite_problem=why)
        return
    if outcome is not None:
        log.info("environment %s %s", outcome.name, "built" if outcome.built else "reused")
    needs = (
        outcome.needs(project)
        if outcome is not None
        else user_environment(project, builder, settings.envs) or RunNeeds()
    )
    with contextlib.ExitStack() as stack:
        try:
            services = stack.enter_context(_services(settings))
        except ServiceError as exc:
            why = SuiteProblem(tool="services", cause="environment", message=str(exc))
            yield PreparedRun(env=outcome, problem=f"services: {exc}", suite_problem=why)
            return
        needs = needs.merged(services.needs())
        declared = settings.services.any
        context = RunContext(
            dirs=needs.dirs,
            env=needs.env,
            prepared=outcome,
            for_job=services.job_env if declared else None,
        )
        stack.enter_context(run_context(context))
        schema, problem, schema_error = None, None, None
        if declared:
            try:
                runner = make_runner(
                    settings.sandbox, root=worktree, toolchain_dirs=chain.sandbox_dirs(project)
                )
                schema = services.prepare_schema(runner, project, chain.schema_command(project))
            except (ServiceError, AutopilotError) as exc:
                schema_error = str(exc)
                problem = f"services: {schema_error}"
        schema_problem = (
            SuiteProblem(tool="services", cause="environment", message=schema_error)
            if schema_error is not None
            else None
        )
        yield PreparedRun(
            env=outcome,
            services=services,
            schema=schema,
            problem=problem,
            suite_problem=schema_problem,
        )


def _services(settings: Settings) -> contextlib.AbstractContextManager[Services]:
    """The declared services: under the docker backend, containers next to the sandbox's."""
    docker = settings.sandbox.backend == "docker"
    image = settings.sandbox.docker_image if docker else None
    return running_services(settings.services, image=image)


def not_ready_suite(toolchain: str, line: str, problem: SuiteProblem | None) -> SuiteResult:
    """A suite that did not run because its environment or a service is not ready: every
    report shows `problem` (a person fixes it) and nothing counts as passed."""
    why = problem or SuiteProblem(tool="autopilot", cause="environment", message=line)
    validation = ValidationResult(toolchain=toolchain, loaded=False, load_error=line, problem=why)
    return SuiteResult(validation=validation)
