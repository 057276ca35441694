"""Scale-out with nothing lost: the nightly and the repair on a real multi-process Dask cluster
(``dask scheduler`` and two ``dask worker`` processes started here, on loopback, every process
pointed at a real Prefect server) give what the same runs give on one machine's threads: the
same verdicts, the same branch, the same archive layout, on repositories that need their
prepared environment and their services (examples/rails_pg: PostgreSQL; py_words: a venv with
a package from the index). The workers know the server and nothing else: no model key (it is
read from a Prefect Secret block, never sent with a job), no Autopilot setting (they travel with
the jobs). A worker killed mid-run loses no file, and no model reply is bought twice. No worker
keeps a server running after a run."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tasks.services import processes_in
from tests.conftest import REPO_ROOT
from tests.dask_cluster import Cluster, dask_cluster
from tests.envs_projects import DATA
from tests.examples_repo import git, make_example_repo
from tests.fakes.forge_server import FakeForge, forge_fixture  # noqa: F401
from tests.fakes.mistral_server import MistralServer, RecordedRequest, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.flows.commands.test_nightly import ERRORS_TEST
from tests.flows.test_nightly_rails import reply
from tests.flows.test_post_merge import is_surgeon
from tests.flows.test_premerge import PR, PY, _forge_env, open_pull_request
from tests.flows.test_rails_pg_flows import BOOK, LOAN_SPEC, SEARCH_FIX, SOURCE, SPEC
from tests.infra.test_infra import PrefectServer, running_server
from tests.tasks.generate.test_loop import GOOD, files_reply, judge_reply

pytestmark = [pytest.mark.slow, pytest.mark.own_prefect_server]

KEY = "block-held-key-4f1c2e9a7b"
BLOCK = "autopilot-model-key"
LABELS = "src/words/labels.py"
LABELS_SOURCE = '''"""Labels for model names."""

import inflection


def label(model: str) -> str:
    """`BlogPost` -> `Blog posts`."""
    return inflection.humanize(inflection.pluralize(inflection.underscore(model)))
'''
LABELS_TEST = """from words.labels import label


def test_label_of_a_camel_case_name() -> None:
    assert label("BlogPost") == "Blog posts"


def test_label_of_an_irregular_plural() -> None:
    assert label("Person") == "People"
"""
WORDS_INIT = "src/words/__init__.py"
WORDS_FIX = """```diff
--- a/src/words/__init__.py
+++ b/src/words/__init__.py
@@ -7,2 +7,2 @@
     \"\"\"`BlogPost` -> `blog_posts`.\"\"\"
-    return inflection.underscore(model)
+    return inflection.pluralize(inflection.underscore(model))
```
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    yield from running_server(tmp_path_factory.mktemp("prefect-scale"))


@pytest.fixture(scope="module")
def cluster(server: PrefectServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Two worker processes that know the server and nothing else."""
    env = server.env(PYTHONPATH=str(REPO_ROOT))
    env = {k: v for k, v in env.items() if not k.startswith(("AUTOPILOT_", "MISTRAL_"))}
    env["PREFECT_HOME"] = str(tmp_path_factory.mktemp("prefect-workers"))
    with dask_cluster(tmp_path_factory.mktemp("dask"), env, workers=2) as c:
        yield c


@pytest.fixture
def on_server(
    server: PrefectServer,
    mistral_server: MistralServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[None]:
    """This process's flows on the real server and the scripted model, whose key is only in a
    Secret block (in no environment variable, here or on the workers)."""
    from prefect.blocks.system import Secret
    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-client"))
    monkeypatch.setenv("PREFECT_API_URL", server.api_url)
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        Secret(value=KEY).save(BLOCK, overwrite=True)
        monkeypatch.delenv("MISTRAL_API_KEY", raising=False)
        monkeypatch.setenv("AUTOPILOT_MODEL__API_KEY_SECRET", BLOCK)
        yield


def _services_left(before: set[Path]) -> list[Path]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        now = set(Path("/tmp").glob("ap-svc-*")) - before
        left = [p for p in now if p.exists() or processes_in(str(p))]
        if not left:
            return []
        time.sleep(0.2)
    return left


def _archive_layout(root: Path) -> set[str]:
    """The archive's objects below each run's folder (flow/date/run-id left out)."""
    return {
        "/".join(p.relative_to(root).parts[3:]) for p in root.rglob("*") if p.is_file()
    }  # fmt: skip


def _on_cluster(cluster: Cluster, run: Callable[[], Any]) -> tuple[Any, list[str]]:
    """`run()`'s result and the key of every task the cluster ran meanwhile."""
    from distributed import Client, get_task_stream

    with Client(cluster.address) as client, get_task_stream(client=client) as stream:
        result = run()
    return result, [str(t["key"]) for t in stream.data]


def _both(
    tmp_path: Path,
    cluster: Cluster,
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[Path], Path],
    run: Callable[[Path, Path, str | None], Any],
) -> dict[str, tuple[Path, Any, list[str]]]:
    """The same run on this process's threads, then on the cluster: (repository, result, the
    cluster's task keys) for "local" and "dask", each with its own repository, archive and
    caches (the second must not answer from the first one's)."""
    out = {}
    for where, dask in (("local", None), ("dask", cluster.address)):
        monkeypatch.setenv("AUTOPILOT_CACHE_DIR", str(tmp_path / where / "cache"))
        repo = make(tmp_path / where)
        archive = tmp_path / where / "archive"
        result, keys = _on_cluster(cluster, lambda: run(repo, archive, dask))  # noqa: B023
        out[where] = (repo, result, keys)
    assert not out["local"][2]  # the threads ran everything in this process
    return out


def _nightly(only: list[str]) -> Callable[[Path, Path, str | None], Any]:
    def run(repo: Path, archive: Path, dask: str | None) -> Any:
        from flows.nightly import nightly
        from flows.workers import on_task_runner

        flow = on_task_runner(nightly, dask, 2)
        return flow(repo=str(repo), only=only, max_iterations=2, archive=str(archive))

    return run


def _repair(repo: Path, archive: Path, dask: str | None) -> Any:
    from flows.post_merge import post_merge
    from flows.workers import on_task_runner

    flow = on_task_runner(post_merge, dask, 2)
    return flow(repo=str(repo), archive=str(archive), human_poll_s=1)


def _same_nightly(runs: dict[str, tuple[Path, Any, list[str]]], expected: list[Any]) -> None:
    (local_repo, local, _), (dask_repo, remote, keys) = runs["local"], runs["dask"]
    assert remote.baseline_error is None
    got = [(f.source, f.verdict, f.coverage_after) for f in remote.files]
    assert got == [(f.source, f.verdict, f.coverage_after) for f in local.files] == expected, [
        f.reasons for f in remote.files
    ]
    assert sum("generate" in k for k in keys) == len(expected)  # on the workers
    tree = ("ls-tree", "-r", "--name-only")
    assert git(dask_repo, *tree, remote.branch) == git(local_repo, *tree, local.branch)


def _script_repair(
    server: MistralServer, path: str, lines: tuple[int, int], cause: str, fix: str, diff: str
) -> None:
    """The diagnostician names `cause` in `path` at `lines`; the surgeon answers `diff`."""
    block = {"file_path": path, "start_line": lines[0], "end_line": lines[1], "description": cause}
    diagnosis = {
        "root_cause": cause,
        "affected_code_blocks": [block],
        "repair_strategy": fix,
        "confidence": 0.9,
        "wrong_side": "code",
        "alternatives": [{"root_cause": "x", "repair_strategy": "y", "confidence": 0.1}],
    }
    server.add(Rule(name="diagnose", schema_name="diagnosis", replies=[json.dumps(diagnosis)]))
    server.add(Rule(name="surgeon", when=is_surgeon, replies=[diff]))


def _words(where: Path) -> Path:
    """py_words (needs `inflection` from the package index) as a git repository."""
    repo = where / "py_words"
    shutil.copytree(DATA / "py_words", repo)
    git(where, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "base")
    return repo


def test_rails_pg_nightly_on_two_dask_workers_equals_the_local_run(
    cluster: Cluster,
    on_server: None,
    mistral_server: MistralServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    verdict = judge_reply(0.8)
    mistral_server.add(Rule(name="judge", schema_name="judge_verdict", replies=[verdict]))
    ask = f"# Task: test `{SOURCE}`"
    mistral_server.add(Rule(name="generate", contains=ask, replies=[reply((SPEC, LOAN_SPEC))]))
    before = set(Path("/tmp").glob("ap-svc-*"))

    runs = _both(
        tmp_path,
        cluster,
        monkeypatch,
        lambda w: make_example_repo("rails_pg", w / "library"),
        _nightly([SOURCE]),
    )

    _same_nightly(runs, [(SOURCE, "accepted", 1.0)])
    dask_repo, remote, _ = runs["dask"]
    assert git(dask_repo, "show", f"{remote.branch}:{SPEC}") == LOAN_SPEC
    assert _archive_layout(tmp_path / "dask" / "archive") == _archive_layout(
        tmp_path / "local" / "archive"
    )
    # The key came from the Secret block on every request; no server is left running.
    assert {r.headers.get("Authorization") for r in mistral_server.requests} == {f"Bearer {KEY}"}
    assert _services_left(before) == []


def test_rails_pg_repair_on_two_dask_workers_equals_the_local_run(
    cluster: Cluster,
    on_server: None,
    mistral_server: MistralServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    cause = "The merge made the title search case-sensitive (LIKE instead of ILIKE)."
    _script_repair(mistral_server, BOOK, (1, 20), cause, "Use ILIKE again.", SEARCH_FIX)
    before = set(Path("/tmp").glob("ap-svc-*"))

    def regressed(where: Path) -> Path:
        repo = make_example_repo("rails_pg", where / "library")
        book = repo / BOOK
        book.write_text(book.read_text().replace('"title ILIKE ?"', '"title LIKE ?"'))
        git(repo, "commit", "-qam", "Merge: plain LIKE")
        return repo

    runs = _both(tmp_path, cluster, monkeypatch, regressed, _repair)

    (local_repo, local, _), (dask_repo, remote, keys) = runs["local"], runs["dask"]
    assert (
        [(g.outcome, g.attempts) for g in remote.groups]
        == [(g.outcome, g.attempts) for g in local.groups]
        == [("fixed", 1)]
    ), remote.groups[0].reasons
    assert sum("repair" in k for k in keys) == 1  # the group ran on a worker
    assert git(dask_repo, "show", f"{remote.branch}:{BOOK}") == git(
        local_repo, "show", f"{local.branch}:{BOOK}"
    )
    assert _archive_layout(tmp_path / "dask" / "archive") == _archive_layout(
        tmp_path / "local" / "archive"
    )
    manifest = next((tmp_path / "dask" / "archive").rglob("manifest.json"))
    listed = {o["key"] for o in json.loads(manifest.read_text())["objects"]}
    assert any(k.startswith("groups/") for k in listed)  # the worker's states are listed
    assert remote.metrics.tokens == local.metrics.tokens > 0  # the workers' calls counted
    assert _services_left(before) == []


def test_python_nightly_and_repair_with_a_prepared_venv_on_dask_equal_the_local_runs(
    cluster: Cluster,
    on_server: None,
    mistral_server: MistralServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    mistral_server.add(Rule(name="judge", schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    test_path = "tests/test_labels.py"
    mistral_server.add(
        Rule(name="generate", contains=LABELS, replies=[files_reply(LABELS_TEST, test_path)])
    )

    def with_labels(where: Path) -> Path:
        repo = _words(where)
        (repo / LABELS).write_text(LABELS_SOURCE)
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=t", "-c", "user.email=t@e.invalid", "commit", "-qm", "labels")
        return repo

    runs = _both(tmp_path / "n", cluster, monkeypatch, with_labels, _nightly([LABELS]))
    _same_nightly(runs, [(LABELS, "accepted", 1.0)])

    cause = "The merge dropped the pluralisation of table names."
    _script_repair(mistral_server, WORDS_INIT, (6, 8), cause, "Pluralise again.", WORDS_FIX)

    def regressed(where: Path) -> Path:
        repo = _words(where)
        init = repo / WORDS_INIT
        plural = "inflection.pluralize(inflection.underscore(model))"
        init.write_text(init.read_text().replace(plural, "inflection.underscore(model)"))
        git(repo, "-c", "user.name=t", "-c", "user.email=t@e.invalid", "commit", "-qam", "merge")
        return repo

    runs = _both(tmp_path / "r", cluster, monkeypatch, regressed, _repair)
    (_, local, _), (dask_repo, remote, keys) = runs["local"], runs["dask"]
    assert [g.outcome for g in remote.groups] == [g.outcome for g in local.groups] == ["fixed"], [
        g.reasons for g in remote.groups
    ]
    assert sum("repair" in k for k in keys) == 1
    assert "pluralize" in git(dask_repo, "show", f"{remote.branch}:{WORDS_INIT}")


def test_premerge_on_the_dask_workers(
    cluster: Cluster,
    on_server: None,
    mistral_server: MistralServer,
    forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A pull request's changed lines tested on the cluster: the same document, comment and
    status as on one machine (tests/flows/test_premerge.py), the file's job on a worker."""
    from flows.commands import premerge

    _forge_env(monkeypatch, forge, "github")
    repo = make_example_repo(PY.example, tmp_path / PY.example)
    _, head = open_pull_request(repo, PY)
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.9)]))
    reply = f"The tests.\n\n{PY.test_path}\n```python\n{PY.test}```\n"
    mistral_server.add(Rule(about=PY.source, replies=[reply]))

    def run() -> int:
        return premerge.run(
            repo, base="main", head="feature", pr_number=PR, json_out=True,
            archive=str(tmp_path / "a"), dask=cluster.address,
        )  # fmt: skip

    code, keys = _on_cluster(cluster, run)

    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    assert [(f["source"], f["verdict"]) for f in doc["files"]] == [(PY.source, "accepted")]
    assert doc["diff_coverage"]["after"] == 1.0
    assert sum("generate" in k for k in keys) == 1  # on a worker
    assert git(repo, "show", f"{doc['branch']}:{PY.test_path}") == PY.test
    [status] = forge.state.statuses
    assert status["sha"] == head and status["state"] == "success"
    assert len(forge.state.comments_on(PR)) == 1


def _worker_of(cluster: Cluster, peer: tuple[str, int]) -> str:
    """The name of the cluster's worker whose process holds the connection from `peer`."""
    import psutil

    for conn in psutil.net_connections(kind="tcp"):
        if conn.laddr and conn.laddr.port == peer[1] and conn.pid:
            proc = psutil.Process(conn.pid)
            chain = {proc.pid, *(p.pid for p in proc.parents())}
            for name, popen in cluster.workers.items():
                if popen.pid in chain:
                    return name
    raise AssertionError(f"no worker holds the connection from {peer}")


def test_a_worker_killed_mid_run_loses_no_file_and_no_reply_is_bought_twice(
    cluster: Cluster,
    server: PrefectServer,
    on_server: None,
    mistral_server: MistralServer,
    tmp_path: Path,
) -> None:
    """The worker working on reports.py is killed (SIGKILL to its nanny and worker) while its
    judge request is in flight, after the generator's reply arrived: the file's job runs again
    on the other worker, which replays the kept reply, sends only the request that was never
    answered, and ends as an uninterrupted run does."""
    killed = threading.Event()
    asked = threading.Event()
    held: list[RecordedRequest] = []

    def judge(req: RecordedRequest) -> str:
        if "src/inventory/reports.py" in req.text and not killed.is_set():
            held.append(req)
            asked.set()
            killed.wait(120)  # the test kills the worker that asked; this answer is never read
        return judge_reply(0.8)

    mistral_server.add(Rule(name="judge", schema_name="judge_verdict", replies=[judge]))
    errors_spec = "tests/test_errors.py"
    mistral_server.add(
        Rule(contains="src/inventory/errors.py", replies=[files_reply(ERRORS_TEST, errors_spec)])
    )
    mistral_server.add(Rule(contains="src/inventory/reports.py", replies=[files_reply(GOOD)]))
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    only = ["src/inventory/reports.py", "src/inventory/errors.py"]
    victim: list[str] = []

    def kill_when_asked() -> None:
        if asked.wait(300):
            victim.append(_worker_of(cluster, held[0].peer))
            cluster.kill(victim[0])
        killed.set()

    killer = threading.Thread(target=kill_when_asked, daemon=True)
    killer.start()
    report, _ = _on_cluster(
        cluster, lambda: _nightly(only)(repo, tmp_path / "archive", cluster.address)
    )
    killer.join(timeout=60)

    assert victim, "the judge request of reports.py never came"
    verdicts = {f.source: f.verdict for f in report.files}
    assert verdicts == dict.fromkeys(only, "accepted"), [f.reasons for f in report.files]
    # Every reply the server gave was given once: the generator's reply for reports.py was
    # replayed from the reply store on the other worker; only the unanswered judge request
    # went out again.
    bodies = [r.raw for r in mistral_server.requests]
    judged = [r for r in mistral_server.requests if r.rule == "judge" and "reports.py" in r.text]
    assert len(judged) == 2 and judged[0].raw == judged[1].raw
    assert len(bodies) - len(set(bodies)) == 1
    survivor = next(n for n in cluster.workers if n != victim[0])
    assert cluster.workers[survivor].poll() is None
