"""An upstream MCP server that asks for input with multi round-trip requests (MCP 2026-07-28: a tool call answered
`input_required`, retried by the client with the answers), made with the official Python SDK 2.x's MCPServer and
served over streamable HTTP on loopback. It runs from its own virtualenv (`requirements-mcp2.txt`).

Prints `LISTENING <port>` once it listens, then one JSON line per round of a call it receives (`{"tool", "arguments",
"request_state", "input_responses"}`), so the test sees exactly what came back each round. Its tools:

- `book(destination)`: asks for the dates, then (a second round) for the seat, then answers with both;
- `spin()`: asks for nothing but always wants another round (only `requestState`), to show the client's bound.
"""

import asyncio
import json
import socket
import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

server = MCPServer(sys.argv[1] if len(sys.argv) > 1 else "travel", log_level="WARNING")


def plain(value):
    return value.model_dump(mode="json", by_alias=True, exclude_none=True) if hasattr(value, "model_dump") else value


def record(tool, arguments, ctx):
    responses = {key: plain(value) for key, value in (ctx.input_responses or {}).items()}
    line = {"tool": tool, "arguments": arguments, "request_state": ctx.request_state, "input_responses": responses}
    print(json.dumps(line), flush=True)


def form(message, properties, required):
    schema = {"type": "object", "properties": properties, "required": required}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


@server.tool()
async def book(destination: str, ctx: Context) -> str | InputRequiredResult:
    """Books a trip, asking for the dates and then the seat."""
    record("book", {"destination": destination}, ctx)
    state = json.loads(ctx.request_state) if ctx.request_state else {"round": 0}
    responses = {key: plain(value) for key, value in (ctx.input_responses or {}).items()}
    if state["round"] == 0:
        dates = form(
            f"When do you travel to {destination}?",
            {"depart": {"type": "string", "title": "Departure"}, "nights": {"type": "integer", "title": "Nights"}},
            ["depart"],
        )
        return InputRequiredResult(input_requests={"dates": dates}, request_state=json.dumps({"round": 1}))
    if state["round"] == 1:
        dates = responses.get("dates", {})
        if dates.get("action") != "accept":
            return json.dumps({"action": dates.get("action")})
        seat = form("Window or aisle?", {"seat": {"type": "string", "enum": ["window", "aisle"]}}, ["seat"])
        next_state = {"round": 2, "dates": dates["content"]}
        return InputRequiredResult(input_requests={"seat": seat}, request_state=json.dumps(next_state))
    seat = responses.get("seat", {})
    if seat.get("action") != "accept":
        return json.dumps({"action": seat.get("action")})
    return json.dumps({"action": "accept", "dates": state["dates"], "seat": seat["content"]["seat"]})


@server.tool()
async def spin(ctx: Context) -> str | InputRequiredResult:
    """Always wants one more round."""
    record("spin", {}, ctx)
    rounds = int(ctx.request_state or "0") + 1
    return InputRequiredResult(request_state=str(rounds))


async def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    # Listening before the port is told: a client that connects at once waits in the backlog, never refused.
    listener.listen(128)
    port = listener.getsockname()[1]
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    print(f"LISTENING {port}", flush=True)
    await uvicorn.Server(config).serve(sockets=[listener])


asyncio.run(main())
