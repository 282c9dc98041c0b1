"""``AsyncHoldpoint``: the same calls, awaited."""

from __future__ import annotations

import asyncio

import pytest

from holdpoint_client import AsyncHoldpoint, ConflictError, Holdpoint, NotFoundError

from .conftest import Server
from .helpers import Answerer


def test_ask_approve_and_errors_with_the_async_client(
    server: Server, agent_token: str, person: Holdpoint, project: str
) -> None:
    async def scenario() -> None:
        async with AsyncHoldpoint(server.url, agent_token) as hp:
            answerer = Answerer(person, project, "blue")
            result = await hp.ask("Colour?", response_type="choice", options=["red", "blue"], project=project)
            await asyncio.to_thread(answerer.join)
            assert (result.outcome, result.value) == ("answered", "blue")

            answerer = Answerer(person, project, False, comment="use the staging cluster")
            approval = await hp.approve("deploy", {"cluster": "production"}, project=project)
            await asyncio.to_thread(answerer.join)
            assert (approval.outcome, approval.approved, approval.comment) == (
                "answered",
                False,
                "use the staging cluster",
            )

            expired = await hp.ask("Nobody home?", timeout_seconds=1, project=project)
            assert expired.outcome == "expired"

            pending = await hp.ask("Later", project=project, wait=False)
            cancelled = await hp.cancel(pending.question_id, reason="not needed")
            assert cancelled.status == "cancelled"
            with pytest.raises(ConflictError):
                await hp.cancel(pending.question_id)
            with pytest.raises(NotFoundError):
                await hp.get_question("01900000-0000-7000-8000-000000000000")
            page = await hp.list_questions(project=project)
            assert len(page.items) == 4

    asyncio.run(asyncio.wait_for(scenario(), 60))
