"""MCP 2025-11-25's tasks at ``/mcp``, with the Python ``mcp`` SDK: a tool called as a task answers at once, the task
waits for a person's answer (``input_required``), ``tasks/result`` gives the tool's result once they answered, and
``tasks/cancel`` cancels the question.

The SDK has that revision's task types but cannot make the call that creates a task: ``ClientSession.call_tool``
takes no ``task``, and ``send_request`` checks any ``tools/call`` answer against ``CallToolResult``, which a
``CreateTaskResult`` is not. So that one call is raw JSON-RPC over HTTP (a session of its own, with the same token;
its answer read with the SDK's ``CreateTaskResult``), and everything after it goes through the SDK's
``ClientSession`` with its own request and result types: a task belongs to the token that asked, not to a session.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import (
    CallToolResult,
    CancelTaskRequest,
    CancelTaskRequestParams,
    CancelTaskResult,
    CreateTaskResult,
    GetTaskPayloadRequest,
    GetTaskPayloadRequestParams,
    GetTaskRequest,
    GetTaskRequestParams,
    GetTaskResult,
    ListTasksRequest,
    ListTasksResult,
)

from holdpoint_client import Holdpoint

from .conftest import Server

PROTOCOL = "2025-11-25"


def _message(response: httpx.Response, request_id: int) -> dict[str, Any]:
    """The JSON-RPC response to ``request_id`` in an MCP answer, sent as JSON or as server-sent events."""
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("application/json"):
        message: dict[str, Any] = response.json()
        return message
    for event in response.text.split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in event.splitlines() if line.startswith("data:"))
        if data:
            message = json.loads(data)
            if message.get("id") == request_id:
                return message
    raise AssertionError(f"no response to request {request_id} in {response.text!r}")


def call_as_task(server: Server, token: str, name: str, arguments: dict[str, Any]) -> CreateTaskResult:
    """``tools/call`` with ``params.task``, as a 2025-11-25 client sends it, in a session of its own."""
    answered = raw_task_call(server, token, name, arguments, {"ttl": 600_000})
    assert "result" in answered, answered
    return CreateTaskResult.model_validate(answered["result"])


def raw_task_call(server: Server, token: str, name: str, arguments: dict[str, Any], task: Any) -> dict[str, Any]:
    """The JSON-RPC response to a ``tools/call`` with ``params.task`` set to ``task``, in a session of its own."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    url = f"{server.url}/mcp"
    with httpx.Client(timeout=30) as http:
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {"tasks": {"list": {}, "cancel": {}}},
                "clientInfo": {"name": "raw-tasks-client", "version": "1"},
            },
        }
        opened = http.post(url, json=initialize, headers=headers)
        assert _message(opened, 1)["result"]["protocolVersion"] == PROTOCOL
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        headers["mcp-protocol-version"] = PROTOCOL
        initialized = http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        assert initialized.status_code == 202, initialized.text
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "task": task},
        }
        answered = _message(http.post(url, json=call, headers=headers), 2)
        http.delete(url, headers=headers)
    return answered


async def _session_scenario(server: Server, token: str, person: Holdpoint) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30.0, read=300.0))
    async with http, streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            opened = await session.initialize()
            tasks = opened.capabilities.tasks
            assert tasks is not None and tasks.requests is not None and tasks.requests.tools is not None, opened
            listed_tools = await session.list_tools()
            execution = {tool.name: tool.execution for tool in listed_tools.tools}
            ask_user = execution["ask_user"]
            assert ask_user is not None and ask_user.task_support == "optional", execution

            created = await asyncio.to_thread(
                call_as_task, server, token, "ask_user", {"title": "Ship the release?", "response_type": "boolean"}
            )
            task_id = created.task.task_id
            assert created.task.status == "working"
            assert created.task.ttl is not None and created.task.poll_interval is not None

            got = await session.send_request(
                GetTaskRequest(params=GetTaskRequestParams(task_id=task_id)), GetTaskResult
            )
            assert got.status == "input_required", got
            assert got.status_message is not None and "Ship the release?" in got.status_message

            # The task's id is its question's: a person answers it in Holdpoint (here, over REST).
            await asyncio.to_thread(person.answer, task_id, True, comment="go ahead")
            result = await session.send_request(
                GetTaskPayloadRequest(params=GetTaskPayloadRequestParams(task_id=task_id)), CallToolResult
            )
            assert not result.is_error, result
            assert result.structured_content is not None
            assert result.structured_content["outcome"] == "answered"
            assert result.structured_content["value"] is True
            assert result.structured_content["comment"] == "go ahead"
            done = await session.send_request(
                GetTaskRequest(params=GetTaskRequestParams(task_id=task_id)), GetTaskResult
            )
            assert done.status == "completed", done
            listed = await session.send_request(ListTasksRequest(), ListTasksResult)
            assert task_id in [task.task_id for task in listed.tasks], listed

            withdrawn = await asyncio.to_thread(
                call_as_task, server, token, "ask_user", {"title": "Still needed?"}
            )
            cancelled = await session.send_request(
                CancelTaskRequest(params=CancelTaskRequestParams(task_id=withdrawn.task.task_id)), CancelTaskResult
            )
            assert cancelled.status == "cancelled", cancelled
            question = await asyncio.to_thread(person.get_question, withdrawn.task.task_id)
            assert question.status == "cancelled", question

            # A call refused at once (an empty title) is a task that failed, said alike when created and when read;
            # ``tasks/result`` still gives the call's result.
            refused = await asyncio.to_thread(call_as_task, server, token, "ask_user", {"title": ""})
            assert refused.task.status == "failed", refused
            failed = await session.send_request(
                GetTaskRequest(params=GetTaskRequestParams(task_id=refused.task.task_id)), GetTaskResult
            )
            assert (failed.status, failed.status_message) == ("failed", refused.task.status_message), failed
            result = await session.send_request(
                GetTaskPayloadRequest(params=GetTaskPayloadRequestParams(task_id=refused.task.task_id)), CallToolResult
            )
            assert result.is_error, result


def test_a_malformed_task_request_is_refused_as_invalid_params_and_asks_nothing(
    server: Server, agent_token: str, project: str
) -> None:
    for task in (None, "x", 5, {"ttl": "soon"}, {"ttl": -1}):
        arguments = {"title": f"Malformed {task!r}", "project": project}
        answered = raw_task_call(server, agent_token, "ask_user", arguments, task)
        assert answered.get("error", {}).get("code") == -32602, (task, answered)
    asked = server.api("GET", f"/questions?project={project}").json()["items"]
    assert asked == [], asked


def test_a_tool_called_as_a_task_completes_with_the_answer_and_cancels_with_its_question(
    server: Server, agent_token: str, person: Holdpoint
) -> None:
    asyncio.run(asyncio.wait_for(_session_scenario(server, agent_token, person), timeout=60))
