"""MCP tasks (revision 2025-11-25): ask a person through Holdpoint's MCP server without holding a connection open.

    export HOLDPOINT_SERVER=http://127.0.0.1:3000 HOLDPOINT_TOKEN=hp_...   # an agent token
    python mcp_task.py   # asks, then polls the task until a person answers at http://127.0.0.1:3000/inbox

`ask_user` called as a task answers at once with the task; the task shows `input_required` while the question waits
and `completed` once someone answered (or the deadline passed), and `tasks/result` is the tool's result. Stop the
script while it waits and start it again: it polls the same task (its id is kept in mcp-task.txt). The call that
creates the task is plain JSON-RPC, because the `mcp` SDK's `ClientSession.call_tool` cannot send `task`; polling and
the result go through the SDK. Needs `pip install mcp`.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import (
    CallToolResult,
    CreateTaskResult,
    GetTaskPayloadRequest,
    GetTaskPayloadRequestParams,
    GetTaskRequest,
    GetTaskRequestParams,
    GetTaskResult,
)

SERVER = os.environ.get("HOLDPOINT_SERVER", "http://127.0.0.1:3000")
TOKEN = os.environ["HOLDPOINT_TOKEN"]
PROTOCOL = "2025-11-25"
SAVED = Path("mcp-task.txt")


def rpc_result(response: httpx.Response, request_id: int) -> dict[str, object]:
    """The result of JSON-RPC request `request_id`, from an answer sent as JSON or as server-sent events."""
    response.raise_for_status()
    if response.headers["content-type"].startswith("application/json"):
        messages = [response.json()]
    else:
        events = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        messages = [json.loads(data) for data in events if data]
    message = next(m for m in messages if m.get("id") == request_id)
    if "error" in message:
        raise RuntimeError(message["error"])
    result: dict[str, object] = message["result"]
    return result


def ask_as_task() -> str:
    """`tools/call` of `ask_user` with `params.task`, in a session of its own; returns the task's id."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=SERVER, headers=headers, timeout=30) as http:
        hello = {
            "protocolVersion": PROTOCOL,
            "capabilities": {"tasks": {}},
            "clientInfo": {"name": "mcp-task-example", "version": "1"},
        }
        opened = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
        rpc_result(opened, 1)
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
        http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        arguments = {
            "title": "Ship release 2.4 today?",
            "response_type": "boolean",
            "project": "mcp-tasks",
            "timeout_seconds": 3600,
        }
        params = {"name": "ask_user", "arguments": arguments, "task": {"ttl": 86_400_000}}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
        created = CreateTaskResult.model_validate(rpc_result(http.post("/mcp", json=call, headers=session), 2))
        http.delete("/mcp", headers=session)
    return created.task.task_id


async def main() -> None:
    task_id = SAVED.read_text() if SAVED.exists() else ask_as_task()
    SAVED.write_text(task_id)
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    async with http, streamable_http_client(f"{SERVER}/mcp", http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            while True:
                task = await session.send_request(
                    GetTaskRequest(params=GetTaskRequestParams(task_id=task_id)), GetTaskResult
                )
                print(f"task {task_id}: {task.status}", flush=True)
                if task.status in ("completed", "failed", "cancelled"):
                    break
                await asyncio.sleep((task.poll_interval or 2000) / 1000)
            SAVED.unlink()
            if task.status == "cancelled":  # cancelled in Holdpoint, or with tasks/cancel: there is no result
                return
            result = await session.send_request(
                GetTaskPayloadRequest(params=GetTaskPayloadRequestParams(task_id=task_id)), CallToolResult
            )
    print(json.dumps(result.structured_content, sort_keys=True))


asyncio.run(main())
