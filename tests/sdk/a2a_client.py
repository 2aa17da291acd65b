"""Drive an A2A agent with the official Python SDK's client (a2a-sdk 1.3.0).

    python a2a_client.py <base_url> <generation>      # generation: 1.0 or 0.3

Run by tests/door/a2a_sdk.rs against a `mur run` capsule serving tests/fixtures/slow (which answers
`done: <task text>` in an artifact named `response`, and sleeps N seconds on `sleep N`). Every
step goes through the SDK's public client API, the way a user would drive an agent:

  card      resolve <base_url>/.well-known/agent-card.json (A2ACardResolver)
  client    ClientFactory.create for the generation. The SDK picks the transport from the
            card alone, preferring a JSONRPC interface of protocolVersion 1.0; for 0.3 the
            client is handed a copy of the card whose supportedInterfaces keeps only the 0.3
            JSONRPC interfaces (the SDK has no other way to choose the 0.3 transport)
  poll      send "hello one" with polling (1.0 returnImmediately / 0.3 blocking false), then
            GetTask until completed; artifact `response` reads `done: hello one`
  stream    stream "hello two": a task or status in submitted/working first, the `response`
            artifact update, a completed status last, then the server closes the stream
  cancel    send "sleep 20" with polling, GetTask until working, CancelTask, GetTask until
            canceled

With A2A_DOOR_TOKEN in the environment (never an argument) the door is an authenticated one:
the card must name its `bearer` scheme and requirement, both clients authenticate through the
SDK's own AuthInterceptor and a CredentialService that holds the token, and an `auth` step
first checks that a client without them is refused with HTTP 401 and that the authenticated
client gets the extended card (GetExtendedAgentCard) with the capsule's grants.

One line per step on stdout; on any failure a `FAIL: ...` line on stderr and exit status 1.
The client keeps the SDK's defaults (among them httpx's 5 s timeout), as a user's would.
"""

import asyncio
import sys
import time

import os

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, CredentialService
from a2a.client.errors import A2AClientError
from a2a.helpers import get_artifact_text, new_text_message
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)

TIMEOUT = 30.0
POLL_INTERVAL = 0.2
ARTIFACT = "response"


class Failure(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failure(message)


def state_name(state):
    return TaskState.Name(state)


def major_minor(version):
    parts = (version or "").split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


def card_for(card, generation):
    """The card the client is built from: the resolved card for 1.0 (the SDK prefers its 1.0
    interface by itself), a copy keeping only the 0.3 JSONRPC interfaces for 0.3."""
    wanted = (1, 0) if generation == "1.0" else (0, 3)
    matching = [
        i
        for i in card.supported_interfaces
        if i.protocol_binding == "JSONRPC" and major_minor(i.protocol_version) == wanted
    ]
    check(
        matching,
        f"the card has no JSONRPC interface of protocolVersion {generation}: "
        f"{[(i.protocol_binding, i.protocol_version, i.url) for i in card.supported_interfaces]}",
    )
    if generation == "1.0":
        return card
    legacy = AgentCard()
    legacy.CopyFrom(card)
    del legacy.supported_interfaces[:]
    legacy.supported_interfaces.extend(matching)
    return legacy


def user_message(text):
    return SendMessageRequest(message=new_text_message(text, role=Role.ROLE_USER))


def response_text(task):
    named = [a for a in task.artifacts if a.name == ARTIFACT]
    check(
        len(named) == 1,
        f"task {task.id}: expected one artifact named {ARTIFACT!r}, got "
        f"{[a.name for a in task.artifacts]}",
    )
    return get_artifact_text(named[0], delimiter="")


async def send_polling(client, text):
    """Send with polling; the one answer must be a task (not a message), returned at once."""
    started = time.monotonic()
    answers = [event async for event in client.send_message(user_message(text))]
    elapsed = time.monotonic() - started
    check(len(answers) == 1, f"send {text!r}: expected one answer, got {len(answers)}")
    check(
        answers[0].HasField("task"),
        f"send {text!r}: expected a task, got {answers[0].WhichOneof('payload')}",
    )
    task = answers[0].task
    check(task.id, f"send {text!r}: the task has no id")
    print(
        f"  sent {text!r}: task {task.id} {state_name(task.status.state)} "
        f"(answered in {elapsed:.2f}s)"
    )
    return task


async def poll_until(client, task_id, states, what):
    """GetTask until the task is in one of `states`; fails on another terminal state."""
    terminal = {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
    deadline = time.monotonic() + TIMEOUT
    seen = []
    while True:
        task = await client.get_task(GetTaskRequest(id=task_id))
        check(task.id == task_id, f"GetTask {task_id} answered task {task.id!r}")
        name = state_name(task.status.state)
        if not seen or seen[-1] != name:
            seen.append(name)
        if task.status.state in states:
            print(f"  task {task_id}: {' -> '.join(seen)}")
            return task
        check(
            task.status.state not in terminal,
            f"task {task_id} ended {name} while waiting for {what} (states seen: {seen})",
        )
        check(
            time.monotonic() < deadline,
            f"task {task_id} not {what} after {TIMEOUT:.0f}s (states seen: {seen})",
        )
        await asyncio.sleep(POLL_INTERVAL)


async def step_poll(client):
    task = await send_polling(client, "hello one")
    task = await poll_until(client, task.id, {TaskState.TASK_STATE_COMPLETED}, "completed")
    text = response_text(task)
    check(
        text.removesuffix("\n") == "done: hello one",
        f"artifact {ARTIFACT!r} reads {text!r}, expected 'done: hello one'",
    )
    print(f"  artifact {ARTIFACT!r}: {text!r}")


def describe(event):
    kind = event.WhichOneof("payload")
    if kind == "task":
        return kind, f"task({state_name(event.task.status.state)})"
    if kind == "status_update":
        return kind, f"status_update({state_name(event.status_update.status.state)})"
    if kind == "artifact_update":
        return kind, f"artifact_update({event.artifact_update.artifact.name})"
    return kind, str(kind)


async def step_stream(client):
    events = []
    kinds = []

    async def consume():
        async for event in client.send_message(user_message("hello two")):
            events.append(event)
            kinds.append(describe(event)[1])

    try:
        await asyncio.wait_for(consume(), TIMEOUT)
    except asyncio.TimeoutError:
        raise Failure(
            f"the stream did not end within {TIMEOUT:.0f}s (events so far: {kinds}); "
            "the server must close it after the final status"
        )
    print(f"  events: {', '.join(kinds)}")
    check(events, "the stream carried no event")

    first = events[0]
    kind = first.WhichOneof("payload")
    check(kind in ("task", "status_update"), f"first event is {kind}, expected a task or status")
    first_state = first.task.status.state if kind == "task" else first.status_update.status.state
    check(
        first_state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING),
        f"first event in state {state_name(first_state)}, expected submitted or working",
    )
    task_id = first.task.id if kind == "task" else first.status_update.task_id
    check(task_id, "the first event names no task")

    last = events[-1]
    check(
        last.WhichOneof("payload") == "status_update"
        and last.status_update.status.state == TaskState.TASK_STATE_COMPLETED,
        f"last event is {describe(last)[1]}, expected status_update(TASK_STATE_COMPLETED)",
    )
    artifacts = [
        (n, e.artifact_update)
        for n, e in enumerate(events)
        if e.WhichOneof("payload") == "artifact_update"
        and e.artifact_update.artifact.name == ARTIFACT
    ]
    check(artifacts, f"no artifact update named {ARTIFACT!r} in the stream")
    position, update = artifacts[0]
    check(
        0 < position < len(events) - 1,
        f"the {ARTIFACT!r} artifact update is event {position} of {len(events)}, "
        "expected between the first event and the final status",
    )
    text = "".join(get_artifact_text(u.artifact, delimiter="") for _, u in artifacts)
    check(
        text.removesuffix("\n") == "done: hello two",
        f"artifact {ARTIFACT!r} reads {text!r}, expected 'done: hello two'",
    )
    for e in events:
        other = e.task.id if e.HasField("task") else None
        if e.HasField("status_update"):
            other = e.status_update.task_id
        if e.HasField("artifact_update"):
            other = e.artifact_update.task_id
        check(other == task_id, f"event {describe(e)[1]} is for task {other!r}, not {task_id!r}")
    print(f"  task {task_id}: artifact {ARTIFACT!r}: {text!r}")


async def step_cancel(client):
    task = await send_polling(client, "sleep 20")
    await poll_until(client, task.id, {TaskState.TASK_STATE_WORKING}, "working")
    answer = await client.cancel_task(CancelTaskRequest(id=task.id))
    check(answer.id == task.id, f"CancelTask {task.id} answered task {answer.id!r}")
    print(f"  CancelTask answered {state_name(answer.status.state)}")
    await poll_until(client, task.id, {TaskState.TASK_STATE_CANCELED}, "canceled")


class DoorToken(CredentialService):
    """The door's token for its `bearer` scheme, whatever the call."""

    def __init__(self, token):
        self._token = token

    async def get_credentials(self, security_scheme_name, context):
        return self._token if security_scheme_name == "bearer" else None


def check_scheme(card):
    schemes = card.security_schemes
    check("bearer" in schemes, f"the card names no bearer scheme: {list(schemes)}")
    http = schemes["bearer"].http_auth_security_scheme
    check(http.scheme.lower() == "bearer", f"the bearer scheme is {http.scheme!r}")
    required = [list(r.schemes) for r in card.security_requirements]
    check(required == [["bearer"]], f"the card requires {required}, expected [['bearer']]")
    check(card.capabilities.extended_agent_card, "the card offers no extended card")
    print(f"  security: bearer ({http.bearer_format}), required")


async def step_auth(card, authed):
    """A client without the token is refused 401; the authenticated one reads the extended card."""
    anonymous = ClientFactory(ClientConfig(streaming=False, polling=True)).create(card)
    try:
        try:
            await send_polling(anonymous, "no token")
        except A2AClientError as e:
            check("401" in str(e), f"refused with {e!r}, expected HTTP 401")
            print("  without a token: HTTP 401")
        else:
            raise Failure("a client without a token was served")
    finally:
        await anonymous.close()
    extended = await authed.get_extended_agent_card(GetExtendedAgentCardRequest())
    uris = [e.uri for e in extended.capabilities.extensions]
    check("urn:murmur:capsule:v1" in uris, f"the extended card carries no capsule grants: {uris}")
    print(f"  extended card: extensions {uris}")


async def main(base_url, generation):
    token = os.environ.get("A2A_DOOR_TOKEN")
    step = "card"
    try:
        print(f"[{generation}] card: resolving {base_url}/.well-known/agent-card.json")
        import httpx

        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, base_url).get_agent_card()
        print(
            f"  {card.name!r}: interfaces "
            f"{[(i.protocol_binding, i.protocol_version, i.url) for i in card.supported_interfaces]}, "
            f"streaming {card.capabilities.streaming}"
        )
        check(card.capabilities.streaming, "the card does not declare capabilities.streaming")
        if token:
            check_scheme(card)

        step = "client"
        card = card_for(card, generation)
        auth = [AuthInterceptor(DoorToken(token))] if token else None
        polling = ClientFactory(ClientConfig(streaming=False, polling=True)).create(card, auth)
        streaming = ClientFactory(ClientConfig(streaming=True)).create(card, auth)
        transport = type(getattr(polling, "_transport", None)).__name__
        print(f"[{generation}] client: transport {transport}")
        expected = "JsonRpcTransport" if generation == "1.0" else "CompatJsonRpcTransport"
        check(transport == expected, f"the SDK chose {transport}, expected {expected}")

        try:
            if token:
                step = "auth"
                print(f"[{generation}] auth: a client without the token, then the extended card")
                await step_auth(card, polling)
            step = "poll"
            print(f"[{generation}] poll: send 'hello one' with polling, GetTask until completed")
            await step_poll(polling)
            step = "stream"
            print(f"[{generation}] stream: stream 'hello two'")
            await step_stream(streaming)
            step = "cancel"
            print(f"[{generation}] cancel: send 'sleep 20' with polling, cancel it when working")
            await step_cancel(polling)
        finally:
            await polling.close()
            await streaming.close()
    except Failure as e:
        print(f"FAIL: [{generation}] {step}: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # an SDK error: say which step and what it was
        print(f"FAIL: [{generation}] {step}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"[{generation}] ok")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("1.0", "0.3"):
        print(f"usage: {sys.argv[0]} <base_url> <1.0|0.3>", file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1].rstrip("/"), sys.argv[2])))
