"""``events()``: the event stream, resumed with ``Last-Event-ID`` after the connection drops, losing nothing and
repeating nothing."""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import Iterator

import httpx
import pytest

from holdpoint_client import AsyncHoldpoint, Event, Holdpoint, RateLimitedError, RetryPolicy

from .conftest import Server
from .helpers import eventually
from .proxy import Proxy

PATIENT = RetryPolicy(max_retries=50, backoff=0.05, max_backoff=0.2)


class Collector:
    """Reads a stream in a thread and keeps every event."""

    def __init__(self, stream: Iterator[Event]) -> None:
        self.events: list[Event] = []
        self.error: BaseException | None = None
        self.stopping = False
        self._stream = stream
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for event in self._stream:
                self.events.append(event)
        except Exception as error:
            # Closing the client at the end of the test ends the stream; anything before that is a failure.
            if not self.stopping:
                self.error = error

    def of(self, event_type: str) -> list[str]:
        return [e.question.title for e in self.events if e.type == event_type and e.question is not None]


def test_a_dropped_stream_resumes_with_last_event_id_and_loses_nothing(
    server: Server, hp: Holdpoint, person: Holdpoint, project: str
) -> None:
    proxy = Proxy(server.url)
    try:
        with Holdpoint(proxy.url, server.admin_token, retry=PATIENT) as watcher:
            collector = Collector(watcher.events(project=project, last_event_id=0))
            first = hp.create_question("first", project=project)
            eventually("the first event", lambda: collector.of("question_asked") == ["first"])
            last_seen = collector.events[-1].id

            proxy.unreachable = True
            proxy.cut()
            hp.create_question("second", project=project)
            hp.create_question("third", project=project)
            person.answer(first.id, "done")
            proxy.unreachable = False

            eventually("the missed events", lambda: len(collector.events) == 4)
            assert collector.of("question_asked") == ["first", "second", "third"]
            assert collector.of("question_answered") == ["first"]
            ids = [e.id for e in collector.events]
            assert ids == sorted(set(ids)), f"in order, without duplicates: {ids}"
            assert f"last-event-id: {last_seen}" in proxy.sent_text().lower()

            answered = collector.events[-1].question
            assert answered is not None and answered.response is not None
            assert (answered.status, answered.response.value) == ("answered", "done")
            assert collector.error is None, collector.error
            collector.stopping = True
    finally:
        proxy.close()


def test_a_stream_dropped_before_its_first_event_resumes_where_it_started(
    server: Server, hp: Holdpoint, project: str
) -> None:
    proxy = Proxy(server.url)
    try:
        with Holdpoint(proxy.url, server.admin_token, retry=PATIENT) as watcher:
            collector = Collector(watcher.events(project=project))
            # The server tells a stream without a last event id where it starts: an `id:` without data.
            match = eventually("its position", lambda: re.search(r"\nid: (\d+)\n\n", proxy.received_text()))
            proxy.unreachable = True
            proxy.cut()
            hp.create_question("asked while the stream was down", project=project)
            proxy.unreachable = False

            eventually("the missed event", lambda: len(collector.events) == 1)
            assert collector.of("question_asked") == ["asked while the stream was down"]
            assert f"last-event-id: {match.group(1)}" in proxy.sent_text().lower()
            assert collector.error is None, collector.error
            collector.stopping = True
    finally:
        proxy.close()


def test_a_stream_started_after_a_known_event_replays_only_what_came_after(
    hp: Holdpoint, person: Holdpoint, project: str
) -> None:
    hp.create_question("before", project=project)
    hp.create_question("after", project=project)
    everything = person.events(project=project, last_event_id=0)
    before = next(everything)
    after = next(everything)
    assert (before.question and before.question.title, after.question and after.question.title) == ("before", "after")
    resumed = person.events(project=project, last_event_id=before.id)
    replayed = next(resumed)
    assert replayed.id == after.id and replayed.type == "question_asked"


def test_the_async_stream_resumes_too(server: Server, hp: Holdpoint, project: str) -> None:
    proxy = Proxy(server.url)

    async def scenario() -> list[str]:
        titles: list[str] = []
        async with AsyncHoldpoint(proxy.url, server.admin_token, retry=PATIENT) as watcher:
            async for event in watcher.events(project=project, last_event_id=0):
                assert event.question is not None
                titles.append(event.question.title)
                if len(titles) == 1:
                    proxy.unreachable = True
                    proxy.cut()
                    await asyncio.to_thread(hp.create_question, "while cut off", project=project)
                    proxy.unreachable = False
                if len(titles) == 2:
                    return titles
        return titles

    try:
        hp.create_question("before the cut", project=project)
        titles = asyncio.run(asyncio.wait_for(scenario(), 30))
        assert titles == ["before the cut", "while cut off"]
    finally:
        proxy.close()


def test_a_caller_over_its_stream_limit_gets_a_rate_limited_error_with_retry_after(
    server: Server, agent_token: str
) -> None:
    limit = 32  # HOLDPOINT_STREAMS_PER_CALLER's default
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {agent_token}"}, timeout=30) as raw:
        with contextlib.ExitStack() as open_streams:
            for _ in range(limit):
                response = open_streams.enter_context(raw.stream("GET", "/api/v1/events"))
                assert response.status_code == 200
            with Holdpoint(server.url, agent_token, retry=RetryPolicy(max_retries=0)) as hp:
                with pytest.raises(RateLimitedError) as limited:
                    next(hp.events())
    assert (limited.value.code, limited.value.status) == ("rate_limited", 429)
    assert limited.value.retry_after is not None and limited.value.retry_after > 0
    assert limited.value.details["limit"] == "streams_per_caller"
