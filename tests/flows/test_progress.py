"""The run's progress artifact: updated as items finish, but not once per item (each update is
a Prefect API call), and always ending at 100 on the last item. Against a real Prefect server."""

from __future__ import annotations

from uuid import UUID

from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterId

from flows.progress import ProgressArtifact


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _data(artifact_id: UUID) -> object:
    # By its id: the session's server holds every other test's artifacts too, and a listing
    # comes in pages.
    only = ArtifactFilter(id=ArtifactFilterId(any_=[artifact_id]))
    with get_client(sync_client=True) as client:
        [found] = client.read_artifacts(artifact_filter=only)
    return found.data


def test_updates_are_spaced_and_the_last_item_always_lands(prefect_harness: None) -> None:
    clock = _Clock()

    @flow(name="progress-spaced")
    def run() -> tuple[ProgressArtifact, list[bool], object]:
        bar = ProgressArtifact("progress-spaced", "Items finished", 10, interval_s=2.0, clock=clock)
        shown = []
        for done in range(1, 11):
            clock.now += 0.5  # four items finish in two seconds
            shown.append(bar.advance(done))
            if done == 5:
                middle = _data(bar.id)
        return bar, shown, middle

    bar, shown, middle = run()
    assert shown == [False, False, False, True, False, False, False, True, False, True]
    assert bar.updates == 3
    assert middle == 40.0  # the update at item 4; item 5 waited
    assert _data(bar.id) == 100.0


def test_every_item_shows_when_items_are_slow(prefect_harness: None) -> None:
    clock = _Clock()

    @flow(name="progress-slow")
    def run() -> ProgressArtifact:
        bar = ProgressArtifact("progress-slow", "Items finished", 3, interval_s=2.0, clock=clock)
        for done in range(1, 4):
            clock.now += 5.0
            bar.advance(done)
        return bar

    bar = run()
    assert bar.updates == 3
    assert _data(bar.id) == 100.0
