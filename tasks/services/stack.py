"""One run's services: started together, shown to the sandbox as one socket directory, given
one database per file job, and stopped and removed at the end, also on failure or when the
process running them is killed (the reaper)."""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import tasks.services.reaper as reaper_script
from tasks.envs.needs import RunNeeds, RunnerLike
from tasks.services.binaries import Server, choose, postgres_servers, redis_servers
from tasks.services.identity import Identity, RunDirs, make_run_dirs, server_identity
from tasks.services.launch import ContainerLauncher
from tasks.services.postgres import Postgres, database_name
from tasks.services.procs import kill_in
from tasks.services.redis import Redis
from tasks.services.schema import Convention, prepare_schema
from tasks.services.settings import ServicesSettings

log = logging.getLogger(__name__)
#: The reaper runs as a script of its own (standard library only).
REAPER = Path(reaper_script.__file__)


class Services:
    """The running services of one run (see :func:`running_services`)."""

    def __init__(self, settings: ServicesSettings, dirs: RunDirs | None) -> None:
        self.settings = settings
        self.dirs = dirs
        self.postgres: Postgres | None = None
        self.redis: Redis | None = None
        self.schema: str | None = None
        self._jobs: dict[str, RunNeeds] = {}
        self._lock = threading.Lock()

    @property
    def template(self) -> str:
        """The template database the schema is loaded into."""
        return self.settings.database

    def needs(self) -> RunNeeds:
        """The socket directory (read-only) and the variables for the template database."""
        if self.dirs is None:
            return RunNeeds()
        env: dict[str, str] = {}
        if self.postgres is not None:
            env |= self.postgres.env(self.template)
        if self.redis is not None:
            env |= self.redis.env(0)
        return RunNeeds(dirs=(str(self.dirs.sock),), env=env)

    def prepare_schema(
        self, runner: RunnerLike, project: Path, convention: Convention = None
    ) -> str | None:
        """Load the schema into the template database, the project's way (the declared
        command, else `convention`: ``Toolchain.schema_command(project)``), in the sandbox
        (`runner` must show :meth:`needs`' directory). Returns the command run, if any."""
        if self.postgres is None:
            return None
        self.schema = prepare_schema(
            runner,
            project,
            self.needs().env,
            declared=self.settings.schema_command,
            timeout_s=self.settings.schema_timeout_s,
            convention=convention,
        )
        return self.schema

    def for_job(self, job: str) -> RunNeeds:
        """The needs of file job `job`: its own copy of the template database (made once),
        its own Redis database number."""
        with self._lock:
            if job in self._jobs:
                return self._jobs[job]
            base = self.needs()
            env = dict(base.env)
            if self.postgres is not None:
                name = database_name(self.template, f"{len(self._jobs) + 1}_{job}")
                self.postgres.create_database(name, template=self.template)
                env |= self.postgres.env(name)
            if self.redis is not None:
                env |= self.redis.env(len(self._jobs) + 1)
            needs = RunNeeds(dirs=base.dirs, env=env)
            self._jobs[job] = needs
            return needs

    def job_env(self, job: str) -> Mapping[str, str]:
        """Only the variables of :meth:`for_job`."""
        return self.for_job(job).env


@contextlib.contextmanager
def running_services(
    settings: ServicesSettings, *, parent: str | None = None, image: str | None = None
) -> Iterator[Services]:
    """Start the declared services; stop them and remove everything on exit.

    With nothing declared this yields an empty :class:`Services` (no directory, no process).
    With `image` (the docker sandbox's image) the servers run as containers of it, next to the
    sandbox's containers, with no network (:mod:`tasks.services.launch`); else on this machine.

    Raises:
        ServiceError: a server is missing, a version pin cannot be met, or a server did not
            start (one line); whatever had started is stopped and removed first.
    """
    if not settings.any:
        yield Services(settings, None)
        return
    identity = server_identity()
    launchers = _launchers(image, identity) if image else None
    pg, rd = _servers(settings, launchers)
    dirs = make_run_dirs(identity, parent)
    reaper = _start_reaper(dirs.base)
    services = Services(settings, dirs)
    try:
        if pg is not None:
            launcher = launchers["postgres"].at(dirs) if launchers else None
            services.postgres = Postgres(pg, dirs, identity, launcher)
            services.postgres.start(settings.start_timeout_s)
            services.postgres.create_database(services.template)
        if rd is not None:
            launcher = launchers["redis"].at(dirs) if launchers else None
            services.redis = Redis(rd, dirs, identity, launcher)
            services.redis.start(settings.start_timeout_s)
        yield services
    finally:
        _stop(services, dirs)
        _release_reaper(reaper)


def _launchers(image: str, identity: Identity) -> dict[str, ContainerLauncher]:
    return {name: ContainerLauncher(image, identity, name) for name in ("postgres", "redis")}


def _servers(
    settings: ServicesSettings, launchers: dict[str, ContainerLauncher] | None
) -> tuple[Server | None, Server | None]:
    """The PostgreSQL and Redis servers to start (None: not declared), the pins met."""
    found = {
        "postgres": (lambda: [launchers["postgres"].server()]) if launchers else postgres_servers,
        "redis": (lambda: [launchers["redis"].server()]) if launchers else redis_servers,
    }
    pg = (
        choose("postgres", settings.postgres, found["postgres"](), "postgresql")
        if settings.postgres is not False
        else None
    )
    rd = (
        choose("redis", settings.redis, found["redis"](), "redis-server")
        if settings.redis is not False
        else None
    )
    return pg, rd


def _stop(services: Services, dirs: RunDirs) -> None:
    for server in (services.redis, services.postgres):
        if server is not None:
            try:
                server.stop()
            except Exception as exc:  # cleanup goes on whatever one server does
                log.warning("stopping %s: %s", type(server).__name__, exc)
    kill_in(str(dirs.base), grace_s=2.0)
    shutil.rmtree(dirs.base, ignore_errors=True)
    log.info("services stopped and %s removed", dirs.base)


def _start_reaper(base: Path) -> subprocess.Popen[bytes]:
    # The pipe's write end stays in this process only (Python's pipes are close-on-exec), so
    # the servers started later never keep the reaper waiting.
    return subprocess.Popen(
        [sys.executable, "-I", str(REAPER), str(base)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _release_reaper(reaper: subprocess.Popen[bytes]) -> None:
    try:
        assert reaper.stdin is not None
        reaper.stdin.close()
        reaper.wait(timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("the services' reaper did not finish: %s", exc)
