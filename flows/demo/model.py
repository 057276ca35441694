"""The scripted demo model: a Mistral-compatible chat completions server on loopback.

It answers `POST /v1/chat/completions` with the replies of :mod:`flows.demo.replies`, under the
model name ``scripted-demo-model``, so the real client, prompts, parsers and archive run as they
would against Mistral. It never reaches a network and knows only the bundled Rails example.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from flows.demo.replies import answer

MODEL_NAME = "scripted-demo-model"
LABEL = "scripted demo model"
CHAT_PATH = "/v1/chat/completions"


def _completion(content: str, prompt_chars: int) -> bytes:
    doc = {
        "id": f"demo-{time.monotonic_ns()}",
        "object": "chat.completion",
        "model": MODEL_NAME,
        "created": int(time.time()),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "tool_calls": None},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_chars // 4 + 1,
            "completion_tokens": len(content) // 4 + 1,
            "total_tokens": prompt_chars // 4 + len(content) // 4 + 2,
        },
    }
    return json.dumps(doc).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the demo's output is the nightly's

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
            messages = body.get("messages") or []
            text = "\n".join(str(m.get("content", "")) for m in messages)
            fmt = body.get("response_format") or {}
            schema = (fmt.get("json_schema") or {}).get("name")
        except (ValueError, AttributeError):
            self._send(400, b'{"object": "error", "message": "not a chat completion request"}')
            return
        if self.path != CHAT_PATH:
            self._send(404, b'{"object": "error", "message": "no such route"}')
            return
        self._send(200, _completion(answer(text, schema), len(text)))

    def _send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@contextmanager
def demo_model() -> Iterator[str]:
    """Serve the scripted demo model on 127.0.0.1 (a free port) while the block runs; yields
    its base URL (for ``AUTOPILOT_MODEL_URL``: the SDK appends /v1/chat/completions)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="demo-model", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
