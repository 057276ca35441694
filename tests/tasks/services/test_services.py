"""Declared services with the real servers: PostgreSQL (initdb/postgres) and Redis from the
machine's packages, on a private socket directory, reached from the real bwrap sandbox, one
database per job, and nothing left behind, even when the process running them is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from tasks.core.config import SandboxSettings
from tasks.envs import runner_with
from tasks.sandbox.make import make_runner
from tasks.services import ServiceError, ServicesSettings, processes_in, running_services
from tasks.services.binaries import postgres_servers
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.slow
BOTH = ServicesSettings(postgres=True, redis=True)
REPO = REPO_ROOT


def _gone(base: Path, timeout_s: float = 30.0) -> bool:
    """Wait (bounded) until nothing works in `base` and it no longer exists."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not base.exists() and not processes_in(str(base)):
            return True
        time.sleep(0.1)
    return False


def _uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError("no Uid line")


def test_postgres_and_redis_per_job_databases_and_cleanup() -> None:
    with running_services(BOTH) as svc:
        assert svc.postgres is not None and svc.redis is not None and svc.dirs is not None
        base = svc.dirs.base
        needs = svc.needs()
        assert needs.dirs == (str(base / "sock"),)
        assert needs.env["PGHOST"] == str(base / "sock")
        assert needs.env["DATABASE_URL"].startswith("postgresql:///autopilot_test?host=")
        assert needs.env["REDIS_URL"] == f"unix://{base / 'sock' / 'redis.sock'}?db=0"
        # No TCP at all: the server has no listening socket but its Unix one.
        assert svc.postgres.psql("show listen_addresses", "postgres").stdout.strip() == ""
        if os.geteuid() == 0:  # PostgreSQL refuses root: it runs unprivileged
            assert svc.postgres.proc is not None and _uid(svc.postgres.proc.pid) != 0
        # The template gets a table and a row; each job gets its own copy.
        svc.postgres.psql("create table items (name text)", "autopilot_test")
        svc.postgres.psql("insert into items values ('template')", "autopilot_test")
        one, two = svc.for_job("spec/a_spec.rb"), svc.for_job("spec/b_spec.rb")
        assert svc.for_job("spec/a_spec.rb") == one  # made once per job
        db1, db2 = one.env["PGDATABASE"], two.env["PGDATABASE"]
        assert len({db1, db2, "autopilot_test"}) == 3
        svc.postgres.psql("insert into items values ('job one')", db1)
        rows = svc.postgres.psql("select name from items order by name", db2).stdout.split()
        assert rows == ["template"]
        assert one.env["REDIS_URL"] != two.env["REDIS_URL"]
        assert svc.redis.command("SET", "k", "v").startswith(b"+OK")
        pids = processes_in(str(base))
        assert len(pids) >= 3  # postmaster, its helpers, redis
    assert _gone(base)
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists()


def test_sandbox_reaches_the_sockets_and_nothing_else(tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    worktree.mkdir()
    with running_services(BOTH) as svc:
        assert svc.dirs is not None
        needs = svc.needs()
        runner = runner_with(
            make_runner(
                SandboxSettings(backend="bwrap", timeout_s=60), worktree, toolchain_dirs=needs.dirs
            ),
            needs,
        )
        psql = runner.run(["psql", "-tAc", "select current_database()"], cwd=worktree)
        assert psql.exit_code == 0, psql.stderr
        assert psql.stdout.strip() == "autopilot_test"
        ruby = runner.run(
            ["ruby", "-rpg", "-e", "puts PG.connect(ENV['DATABASE_URL']).exec('select 41+1')[0]"],
            cwd=worktree,
        )
        assert ruby.exit_code == 0 and '"42"' in ruby.stdout, ruby.stderr
        sock = svc.dirs.sock / "redis.sock"
        redis = runner.run(["redis-cli", "-s", str(sock), "ping"], cwd=worktree)
        assert redis.exit_code == 0 and redis.stdout.strip() == "PONG", redis.stderr
        # Attacks: the data directories, the server logs, another path to the server.
        base = svc.dirs.base
        listing = runner.run(["ls", "-a", str(base)], cwd=worktree)
        assert listing.stdout.split() == [".", "..", "sock"]
        data = runner.run(["cat", str(base / "postgres" / "PG_VERSION")], cwd=worktree)
        assert data.exit_code != 0
        tcp = runner.run(["psql", "-h", "127.0.0.1", "-tAc", "select 1"], cwd=worktree)
        assert tcp.exit_code != 0
        host_run = runner.run(["ls", "/run/postgresql", "/var/run"], cwd=worktree)
        assert host_run.exit_code != 0 and host_run.stdout.strip() == ""
        # The sockets' directory is read-only: nothing can be planted beside them.
        plant = runner.run(["touch", str(svc.dirs.sock / "planted")], cwd=worktree)
        assert plant.exit_code != 0 and not (svc.dirs.sock / "planted").exists()
    assert _gone(base)


def test_other_users_of_the_host_cannot_reach_the_socket() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    with running_services(ServicesSettings(postgres=True)) as svc:
        assert svc.dirs is not None
        nobody = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "psql",
                "-tAc",
                "select 1",
            ],
            env={"PATH": os.environ["PATH"], **svc.needs().env},
            capture_output=True,
            text=True,
        )
        assert nobody.returncode != 0 and "Permission denied" in nobody.stderr


_HOLDER = """
import sys, time
from tasks.services import ServicesSettings, running_services
with running_services(ServicesSettings(postgres=True, redis=True)) as svc:
    print(svc.dirs.base, flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_job_leaves_nothing_running(sig: signal.Signals) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    base = Path(proc.stdout.readline().strip())
    assert base.is_dir() and processes_in(str(base))
    proc.send_signal(sig)
    proc.wait(timeout=60)
    assert _gone(base), f"left behind: {processes_in(str(base))} {base.exists()}"


def test_failure_inside_stops_and_removes() -> None:
    with pytest.raises(RuntimeError, match="boom"), running_services(BOTH) as svc:
        assert svc.dirs is not None
        base = svc.dirs.base
        raise RuntimeError("boom")
    assert _gone(base)


def test_a_pin_the_machine_cannot_meet_is_one_line() -> None:
    have = postgres_servers()[0].version
    before = set(Path("/tmp").glob("ap-svc-*"))
    with (
        pytest.raises(ServiceError) as err,
        running_services(ServicesSettings(postgres=str(have.major + 50))),
    ):
        pass
    message = str(err.value)
    assert "\n" not in message
    assert f"postgres = '{have.major + 50}' cannot be met" in message
    assert f"PostgreSQL {have}" in message
    assert set(Path("/tmp").glob("ap-svc-*")) == before  # nothing was started
    ok = ServicesSettings(postgres=f">={have.major},<{have.major + 1}")
    with running_services(ok) as svc:
        assert svc.postgres is not None and svc.postgres.server.version == have


def test_bad_pins_are_refused_at_load() -> None:
    with pytest.raises(ValidationError, match="not a version"):
        ServicesSettings(redis="seven")


def test_nothing_declared_starts_nothing() -> None:
    with running_services(ServicesSettings()) as svc:
        assert svc.dirs is None and svc.needs().dirs == () and svc.needs().env == {}
