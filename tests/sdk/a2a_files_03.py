"""A file in and out of a task with the 0.3 generation's own Python SDK (a2a-sdk 0.3.26).

    python a2a_files_03.py <base_url>

Run by tests/door/a2a_sdk.rs against the same tests/fixtures/files capsule as a2a_files.py.
This client is of the 0.3 generation only: its card resolver sends no A2A-Version header, so
it reads the card the door serves by default (the merged form, whose `url` its pydantic
AgentCard requires), and its ClientFactory drives the card's `url` over JSON-RPC 0.3.

  card    resolved without A2A-Version: `url` is the door's, defaultInputModes name text/csv
  send    a blocking message/send of a text part and a FilePart (FileWithBytes, text/csv,
          r.csv): the task completes and its artifact r.csv is a FilePart holding the same
          bytes, mimeType text/csv, name r.csv

One line per step on stdout; on any failure a `FAIL: ...` line on stderr and exit status 1.
"""

import asyncio
import base64
import sys

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import FilePart, FileWithBytes, Message, Part, Role, TaskState, TextPart

CSV = b"a,b\n1,2\n"


class Failure(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failure(message)


async def main(base_url):
    step = "card"
    try:
        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, base_url).get_agent_card()
            print(f"[0.3.26] card: url {card.url}, input modes {card.default_input_modes}")
            check(card.url.rstrip("/").endswith(base_url.rsplit(":", 1)[1]), f"the card's url {card.url}")
            check("text/csv" in card.default_input_modes, f"input modes {card.default_input_modes}")
            step = "send"
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
            file = FileWithBytes(bytes=base64.b64encode(CSV).decode(), mime_type="text/csv", name="r.csv")
            message = Message(
                message_id="sdk03-file",
                role=Role.user,
                parts=[Part(root=TextPart(text="here it is")), Part(root=FilePart(file=file))],
            )
            events = [e async for e in client.send_message(message)]
            check(len(events) == 1 and isinstance(events[0], tuple), f"expected one task, got {events}")
            task = events[0][0]
            check(task.status.state == TaskState.completed, f"task {task.id} is {task.status.state}")
            found = [a for a in task.artifacts or [] if a.name == "r.csv"]
            check(len(found) == 1, f"no one artifact r.csv: {[a.name for a in task.artifacts or []]}")
            part = found[0].parts[0].root
            check(isinstance(part, FilePart), f"r.csv is a {type(part).__name__}")
            got = part.file
            check(base64.b64decode(got.bytes) == CSV, f"r.csv holds {got.bytes!r}")
            check((got.mime_type, got.name) == ("text/csv", "r.csv"), f"r.csv is {(got.mime_type, got.name)}")
            print(f"[0.3.26] send: task {task.id} returned r.csv ({got.mime_type})")
    except Failure as e:
        print(f"FAIL: [0.3.26] {step}: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        print(f"FAIL: [0.3.26] {step}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print("[0.3.26] ok")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} <base_url>", file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1].rstrip("/"))))
