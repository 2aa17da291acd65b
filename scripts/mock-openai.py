#!/usr/bin/env python3
"""A scripted OpenAI-compatible chat endpoint on 127.0.0.1 for scripts/deb-check.sh: the first
request of a conversation gets one `ls` tool call, a request that carries a tool result gets a
final answer quoting that result. Writes its port to PORT_FILE and one line per request to
LOG_FILE. Usage: mock-openai.py PORT_FILE LOG_FILE"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT_FILE, LOG_FILE = sys.argv[1], sys.argv[2]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        messages = body.get("messages", [])
        results = [m for m in messages if m.get("role") == "tool"]
        if results:
            listing = str(results[-1].get("content", ""))
            message = {"role": "assistant", "content": "The directory listing: " + listing}
            finish = "stop"
        else:
            call = {"id": "c1", "type": "function",
                    "function": {"name": "ls", "arguments": json.dumps({"command": "-1a"})}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        with open(LOG_FILE, "a") as log:
            log.write(json.dumps({"path": self.path, "model": body.get("model"), "tool_results": len(results)}) + "\n")
        answer = json.dumps({
            "id": "chatcmpl-1", "object": "chat.completion", "model": body.get("model", "m"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }).encode()
        self.send_response(200 if self.path == "/v1/chat/completions" else 404)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
