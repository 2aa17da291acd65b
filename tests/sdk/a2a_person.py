"""A person in the loop through the official Python SDK's client (a2a-sdk 1.3.0).

    python a2a_person.py <base_url> <generation>      # generation: 1.0 or 0.3

Run by tests/agent/agent_person.rs against an agent capsule (mock provider) whose manifest
asks approval for `bash` commands containing `approve-me` (timeout 3 s, deny) and offers the
`ask` tool; the mock calls `bash` with `echo <task text>` for a task, `ask` ("which colour?")
for a task starting with `ask`, and answers `final: <tool result>` after a tool result. Steps:

  grant     send "approve-me grant <gen>" (polling), GetTask until input-required (the status
            names the call), answer with a data part {"approve": true} on the same task,
            GetTask until completed: the command ran (its output is in the answer)
  deny      send "approve-me deny <gen>", answer with the text "deny" over a stream (the
            stream carries the task working, then its end): the answer is the denial
  timeout   send "approve-me wait <gen>", answer nothing: completed with the timeout's denial
  ask       stream "ask <gen>": the stream ends at input-required, whose status message is the
            question; answer "blue" (polling): completed with "final: blue"
  other     (with A2A_OTHER_TOKEN) a second credential answering the first one's approval
            gets TaskNotFound; the first credential then denies it

A2A_DOOR_TOKEN (the task sender's) and A2A_OTHER_TOKEN come in the environment, never as
arguments. One line per step on stdout; on failure a `FAIL: ...` line on stderr, exit 1.
"""

import asyncio
import os
import sys
import time

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, CredentialService
from a2a.helpers import get_artifact_text, get_message_text, new_data_part, new_message, new_text_message
from a2a.types import AgentCard, GetTaskRequest, Role, SendMessageRequest, TaskState

TIMEOUT = 30.0
POLL_INTERVAL = 0.1


class Failure(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failure(message)


def name(state):
    return TaskState.Name(state)


class DoorToken(CredentialService):
    def __init__(self, token):
        self._token = token

    async def get_credentials(self, security_scheme_name, context):
        return self._token if security_scheme_name == "bearer" else None


def card_for(card, generation):
    if generation == "1.0":
        return card
    legacy = AgentCard()
    legacy.CopyFrom(card)
    keep = [i for i in card.supported_interfaces if i.protocol_version.startswith("0.3")]
    del legacy.supported_interfaces[:]
    legacy.supported_interfaces.extend(keep)
    return legacy


def clients(card, token):
    auth = [AuthInterceptor(DoorToken(token))] if token else None
    polling = ClientFactory(ClientConfig(streaming=False, polling=True)).create(card, auth)
    streaming = ClientFactory(ClientConfig(streaming=True)).create(card, auth)
    return polling, streaming


async def send(client, message):
    answers = [e async for e in client.send_message(SendMessageRequest(message=message))]
    check(len(answers) == 1 and answers[0].HasField("task"), f"expected one task, got {answers}")
    return answers[0].task


async def stream(client, message):
    events = []

    async def consume():
        async for e in client.send_message(SendMessageRequest(message=message)):
            events.append(e)

    await asyncio.wait_for(consume(), TIMEOUT)
    return events


def state_of(event):
    if event.HasField("task"):
        return event.task.status.state
    if event.HasField("status_update"):
        return event.status_update.status.state
    return None


async def until(client, task_id, state):
    deadline = time.monotonic() + TIMEOUT
    seen = []
    while True:
        task = await client.get_task(GetTaskRequest(id=task_id))
        if not seen or seen[-1] != name(task.status.state):
            seen.append(name(task.status.state))
        if task.status.state == state:
            print(f"  task {task_id}: {' -> '.join(seen)}")
            return task
        check(time.monotonic() < deadline, f"task {task_id} not {name(state)}: {seen}")
        await asyncio.sleep(POLL_INTERVAL)


def answer_of(task):
    named = [a for a in task.artifacts if a.name == "response"]
    check(len(named) == 1, f"task {task.id}: artifacts {[a.name for a in task.artifacts]}")
    return get_artifact_text(named[0], delimiter="")


def reply(task, parts):
    return new_message(parts, context_id=task.context_id, task_id=task.id, role=Role.ROLE_USER)


def user(text):
    return new_text_message(text, role=Role.ROLE_USER)


async def waiting(client, text):
    task = await send(client, user(text))
    task = await until(client, task.id, TaskState.TASK_STATE_INPUT_REQUIRED)
    said = get_message_text(task.status.message)
    check("approval required" in said and "bash" in said and text in said, f"status message {said!r}")
    print(f"  asks: {said[:100]!r}...")
    return task


async def step_grant(polling, gen):
    text = f"approve-me grant {gen}"
    task = await waiting(polling, text)
    await send(polling, reply(task, [new_data_part({"approve": True})]))
    done = await until(polling, task.id, TaskState.TASK_STATE_COMPLETED)
    got = answer_of(done)
    check(got.startswith("final: ") and text in got and "denied" not in got, f"answer {got!r}")
    print(f"  answer: {got.strip()[:80]!r}")


async def step_deny(polling, streaming, gen):
    task = await waiting(polling, f"approve-me deny {gen}")
    events = await stream(streaming, reply(task, [new_text_message("deny").parts[0]]))
    states = [name(s) for s in map(state_of, events) if s is not None]
    check(states and states[0] == "TASK_STATE_WORKING" and states[-1] == "TASK_STATE_COMPLETED", f"states {states}")
    done = await until(polling, task.id, TaskState.TASK_STATE_COMPLETED)
    got = answer_of(done)
    check("denied this call of bash" in got, f"answer {got!r}")
    print(f"  stream: {states}; answer: {got.strip()[:80]!r}")


async def step_timeout(polling, gen):
    task = await waiting(polling, f"approve-me wait {gen}")
    done = await until(polling, task.id, TaskState.TASK_STATE_COMPLETED)
    got = answer_of(done)
    check("no answer to the approval" in got, f"answer {got!r}")
    print(f"  answer: {got.strip()[:80]!r}")


async def step_ask(polling, streaming, gen):
    events = await stream(streaming, user(f"ask {gen}"))
    states = [name(s) for s in map(state_of, events) if s is not None]
    check(states and states[-1] == "TASK_STATE_INPUT_REQUIRED", f"the stream ended at {states}")
    last = events[-1]
    task_id = last.status_update.task_id if last.HasField("status_update") else last.task.id
    task = await polling.get_task(GetTaskRequest(id=task_id))
    question = get_message_text(task.status.message)
    check(question == "which colour?", f"question {question!r}")
    after = await send(polling, reply(task, [new_text_message("blue").parts[0]]))
    check(after.id == task.id and after.context_id == task.context_id, f"answered task {after.id}")
    done = await until(polling, task.id, TaskState.TASK_STATE_COMPLETED)
    got = answer_of(done)
    check(got.strip() == "final: blue", f"answer {got!r}")
    history = [get_message_text(m) for m in done.history]
    check(history[-2:] == ["which colour?", "blue"], f"history {history}")
    print(f"  stream: {states}; question {question!r}; answer {got.strip()!r}")


async def step_other(polling, other, gen):
    task = await waiting(polling, f"approve-me other {gen}")
    try:
        await send(other, reply(task, [new_data_part({"approve": True})]))
    except Exception as e:  # the SDK's mapped error
        check("TaskNotFound" in type(e).__name__ or "not found" in str(e).lower(), f"refused with {e!r}")
        print(f"  another credential: {type(e).__name__}")
    else:
        raise Failure("another credential answered the approval")
    still = await polling.get_task(GetTaskRequest(id=task.id))
    check(still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, f"now {name(still.status.state)}")
    await send(polling, reply(task, [new_text_message("deny").parts[0]]))
    done = await until(polling, task.id, TaskState.TASK_STATE_COMPLETED)
    check("denied this call of bash" in answer_of(done), f"answer {answer_of(done)!r}")


async def main(base, gen):
    token, other_token = os.environ.get("A2A_DOOR_TOKEN"), os.environ.get("A2A_OTHER_TOKEN")
    step = "card"
    try:
        import httpx

        async with httpx.AsyncClient() as http:
            card = card_for(await A2ACardResolver(http, base).get_agent_card(), gen)
        polling, streaming = clients(card, token)
        other = clients(card, other_token)[0] if other_token else None
        try:
            for step, run in [
                ("grant", lambda: step_grant(polling, gen)),
                ("deny", lambda: step_deny(polling, streaming, gen)),
                ("timeout", lambda: step_timeout(polling, gen)),
                ("ask", lambda: step_ask(polling, streaming, gen)),
                ("other", (lambda: step_other(polling, other, gen)) if other else None),
            ]:
                if run is None:
                    continue
                print(f"[{gen}] {step}")
                await run()
        finally:
            await polling.close()
            await streaming.close()
            if other:
                await other.close()
    except Failure as e:
        print(f"FAIL: [{gen}] {step}: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        print(f"FAIL: [{gen}] {step}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"[{gen}] ok")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("1.0", "0.3"):
        print(f"usage: {sys.argv[0]} <base_url> <1.0|0.3>", file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1].rstrip("/"), sys.argv[2])))
