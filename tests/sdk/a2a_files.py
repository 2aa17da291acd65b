"""Files in and out of a task with the official Python SDK's client (a2a-sdk 1.3.0).

    python a2a_files.py <base_url> <generation>      # generation: 1.0 or 0.3

Run by tests/door/a2a_sdk.rs against a `mur run` capsule serving tests/fixtures/files (which
copies each file its task.md names to out/files/) with `a2a.input.parts: [text, file, data]`
and `a2a.output.dir: out/files`. Through the SDK's public client API:

  card    the card's defaultInputModes name text/csv, its defaultOutputModes */*
  send    a blocking send of a text part and a file part (inline bytes, text/csv, report.csv):
          the task completes, and its artifact report.csv is a file part holding the same
          bytes with mediaType text/csv and filename report.csv; GetTask holds it too
  data    a data part ({"rows": 2}) comes back as part-1.json, application/json

With A2A_ANSWER=message in the environment the capsule declares `a2a.answer: message`: each
send is answered with one Message of the agent (not a task) whose parts are the `response`
text and the files, report.csv among them with its bytes, media type and name.

One line per step on stdout; on any failure a `FAIL: ...` line on stderr and exit status 1.
"""

import asyncio
import json
import os
import sys

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState
from google.protobuf import struct_pb2

from a2a_client import Failure, card_for, check, state_name

CSV = b"a,b\n1,2\n"


MESSAGE = os.environ.get("A2A_ANSWER") == "message"


def file_part(parts, name, what):
    found = [p for p in parts if p.filename == name]
    check(len(found) == 1, f"{what}: no one file part {name!r}: {[p.filename for p in parts]}")
    return found[0]


def file_artifact(task, name):
    found = [a for a in task.artifacts if a.name == name]
    check(len(found) == 1, f"task {task.id}: no one artifact {name!r}: {[a.name for a in task.artifacts]}")
    parts = found[0].parts
    check(len(parts) == 1, f"artifact {name!r} has {len(parts)} parts")
    return parts[0]


async def send(client, parts, what):
    message = Message(message_id=f"sdk-files-{what}", role=Role.ROLE_USER, parts=parts)
    answers = [e async for e in client.send_message(SendMessageRequest(message=message))]
    if MESSAGE:
        check(len(answers) == 1 and answers[0].HasField("message"), f"{what}: expected one message, got {answers}")
        answer = answers[0].message
        check(answer.role == Role.ROLE_AGENT, f"{what}: the message's role is {answer.role}")
        return answer
    check(len(answers) == 1 and answers[0].HasField("task"), f"{what}: expected one task, got {answers}")
    task = answers[0].task
    check(
        task.status.state == TaskState.TASK_STATE_COMPLETED,
        f"{what}: task {task.id} is {state_name(task.status.state)}",
    )
    return task


async def main(base_url, generation):
    step = "card"
    try:
        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, base_url).get_agent_card()
        modes = (list(card.default_input_modes), list(card.default_output_modes))
        print(f"[{generation}] card: input modes {modes[0]}, output modes {modes[1]}")
        check("text/csv" in modes[0] and "application/json" in modes[0], f"input modes {modes[0]}")
        check("*/*" in modes[1], f"output modes {modes[1]}")
        client = ClientFactory(ClientConfig(streaming=False, polling=False)).create(card_for(card, generation))
        try:
            step = "send"
            task = await send(
                client,
                [Part(text="here it is"), Part(raw=CSV, media_type="text/csv", filename="report.csv")],
                f"file-{generation}",
            )
            if MESSAGE:
                got = file_part(task.parts, "report.csv", "the message")
                check(task.parts[0].text.startswith("files: "), f"the message's first part {task.parts[0]}")
            else:
                got = file_artifact(task, "report.csv")
            check(got.raw == CSV, f"report.csv holds {got.raw!r}")
            check(got.media_type == "text/csv", f"report.csv is {got.media_type!r}")
            check(got.filename == "report.csv", f"report.csv is named {got.filename!r}")
            if MESSAGE:
                print(f"[{generation}] send: a message returned report.csv ({got.media_type}, {len(got.raw)} bytes)")
                print(f"[{generation}] ok")
                return 0
            again = await client.get_task(GetTaskRequest(id=task.id))
            check(file_artifact(again, "report.csv").raw == CSV, "GetTask lost report.csv")
            print(f"[{generation}] send: task {task.id} returned report.csv ({got.media_type}, {len(got.raw)} bytes)")

            step = "data"
            data = struct_pb2.Value()
            data.struct_value.update({"rows": 2})
            task = await send(client, [Part(data=data)], f"data-{generation}")
            got = file_artifact(task, "part-1.json")
            check(got.media_type == "application/json", f"part-1.json is {got.media_type!r}")
            check(json.loads(got.raw) == {"rows": 2}, f"part-1.json holds {got.raw!r}")
            print(f"[{generation}] data: task {task.id} returned part-1.json ({got.media_type})")
        finally:
            await client.close()
    except Failure as e:
        print(f"FAIL: [{generation}] {step}: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        print(f"FAIL: [{generation}] {step}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"[{generation}] ok")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("1.0", "0.3"):
        print(f"usage: {sys.argv[0]} <base_url> <1.0|0.3>", file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1].rstrip("/"), sys.argv[2])))
