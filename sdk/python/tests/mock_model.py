"""An OpenAI-compatible model on loopback for the OpenAI Agents tests: ``POST /v1/chat/completions``.

It is deterministic: asked without a tool result, it calls the tool it was configured with; given a tool result, it
answers with that result as text, so a test reads in the final output what the tool (or a rejection) said. Every
request is kept for the test to inspect.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class MockModel:
    def __init__(self, tool_name: str, arguments: dict[str, Any]) -> None:
        self.tool_name = tool_name
        self.arguments = arguments
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                request = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                self._send(200, model.complete(request))

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(request)
            number = len(self.requests)
        messages = request.get("messages", [])
        last = messages[-1] if messages else {}
        if last.get("role") == "tool":
            message: dict[str, Any] = {"role": "assistant", "content": f"The tool said: {last.get('content')}"}
            finish = "stop"
        else:
            call = {
                "id": f"call_{number}",
                "type": "function",
                "function": {"name": self.tool_name, "arguments": json.dumps(self.arguments)},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        return {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": 0,
            "model": request.get("model", "mock"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    def tool_results(self) -> list[str]:
        """What the model was told each tool call returned (a tool's output, or a rejection's message)."""
        return [
            str(message.get("content"))
            for request in self.requests
            for message in request.get("messages", [])
            if message.get("role") == "tool"
        ]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
