"""An upstream MCP server for the gateway's tests, made with the official Python SDK's FastMCP and served over
streamable HTTP on loopback, or over stdio with `--stdio` (as the gateway starts the configuration file's upstreams).

Prints `LISTENING <port>` once it listens, then one JSON line per tool call it receives
(`{"tool": ..., "arguments": {...}}`), so the test sees exactly what reached it. Over stdio, where stdout is MCP's,
the lines go to the file named by `MCP_UPSTREAM_RECORD`, after a first `{"pid": ...}` line. Its tools: `read_file`,
`delete_file`, `pay(amount)` and `ship(item)`, which asks its client for the delivery through an elicitation.
"""

import asyncio
import json
import os
import socket
import sys

import uvicorn
from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel, Field

server = FastMCP(sys.argv[1] if len(sys.argv) > 1 else "files", log_level="WARNING")


RECORD = os.environ.get("MCP_UPSTREAM_RECORD")


def record(tool, arguments):
    line = json.dumps({"tool": tool, "arguments": arguments})
    if RECORD:
        with open(RECORD, "a", encoding="utf-8") as file:
            file.write(line + "\n")
    else:
        print(line, flush=True)


@server.tool()
def read_file(path: str) -> str:
    """Reads a file."""
    record("read_file", {"path": path})
    return f"contents of {path}"


@server.tool()
def delete_file(path: str) -> str:
    """Deletes a file."""
    record("delete_file", {"path": path})
    return f"deleted {path}"


@server.tool()
def pay(amount: float, to: str = "acme") -> str:
    """Pays an amount."""
    record("pay", {"amount": amount, "to": to})
    return f"paid {amount:g} to {to}"


class Delivery(BaseModel):
    address: str = Field(title="Address", description="Street and city")
    express: bool = Field(default=False, title="Express delivery")
    copies: int = Field(default=1, title="Copies")


@server.tool()
async def ship(item: str, ctx: Context) -> str:
    """Ships an item, asking where to."""
    record("ship", {"item": item})
    answer = await ctx.elicit(message=f"Where should {item} go?", schema=Delivery)
    if answer.action == "accept":
        return json.dumps({"action": "accept", "content": answer.data.model_dump()})
    return json.dumps({"action": answer.action})


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


if "--stdio" in sys.argv:
    if RECORD:
        with open(RECORD, "a", encoding="utf-8") as file:
            file.write(json.dumps({"pid": os.getpid()}) + "\n")
    server.run(transport="stdio")
else:
    asyncio.run(main())
