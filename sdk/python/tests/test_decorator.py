"""``@requires_approval``: the function runs only once approved, with the approver's edit if allowed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from holdpoint_client import ApprovalDenied, AsyncHoldpoint, Holdpoint, requires_approval

from .conftest import Server
from .helpers import Answerer


def test_an_approved_call_runs_with_the_approvers_edit(hp: Holdpoint, person: Holdpoint, project: str) -> None:
    calls: list[tuple[str, int]] = []

    @requires_approval(hp, project=project, allow_edit=True, title=lambda args: f"Scale {args['service']}?")
    def scale(service: str, replicas: int = 2) -> str:
        calls.append((service, replicas))
        return f"{service} at {replicas}"

    answerer = Answerer(person, project, True, edited_arguments={"service": "api", "replicas": 5})
    assert scale("api") == "api at 5"
    question = answerer.join()
    assert question.title == "Scale api?"
    assert question.action is not None
    assert (question.action.tool_name, question.action.arguments) == ("scale", {"service": "api", "replicas": 2})
    assert calls == [("api", 5)]


def test_a_rejected_call_does_not_run(hp: Holdpoint, person: Holdpoint, project: str) -> None:
    calls: list[str] = []

    @requires_approval(hp, project=project)
    def delete(path: str) -> None:
        calls.append(path)

    answerer = Answerer(person, project, False, comment="that is the backup")
    with pytest.raises(ApprovalDenied) as denied:
        delete("/srv/backup")
    answerer.join()
    assert calls == []
    assert denied.value.result.outcome == "answered" and denied.value.result.comment == "that is the backup"
    assert "that is the backup" in str(denied.value)

    @requires_approval(hp, project=project, timeout_seconds=1, on_denied=lambda result: f"skipped: {result.outcome}")
    def restart(service: str) -> str:
        return f"restarted {service}"

    assert restart("api") == "skipped: expired"


def test_async_functions_are_guarded_with_either_client(
    server: Server, agent_token: str, hp: Holdpoint, person: Holdpoint, project: str
) -> None:
    async def scenario() -> list[Any]:
        async with AsyncHoldpoint(server.url, agent_token) as client:

            @requires_approval(client, project=project, tool_name="send_invoice")
            async def send(customer: str, amount: int) -> str:
                await asyncio.sleep(0)
                return f"sent {amount} to {customer}"

            @requires_approval(hp, project=project)
            async def refund(customer: str) -> str:
                return f"refunded {customer}"

            answerer = Answerer(person, project, True)
            sent = await send("acme", 120)
            await asyncio.to_thread(answerer.join)
            answerer = Answerer(person, project, True)
            refunded = await refund("acme")
            await asyncio.to_thread(answerer.join)
            return [sent, refunded]

    assert asyncio.run(asyncio.wait_for(scenario(), 60)) == ["sent 120 to acme", "refunded acme"]


def test_a_sync_function_cannot_be_guarded_by_the_async_client(server: Server, agent_token: str) -> None:
    client = AsyncHoldpoint(server.url, agent_token)
    with pytest.raises(TypeError):

        @requires_approval(client)
        def plain() -> None:
            pass
