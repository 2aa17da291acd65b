"""Push notifications through the official Python SDK's client (a2a-sdk 1.3.0).

    python a2a_push.py <base_url> <generation>      # generation: 1.0 or 0.3

Run by tests/door/a2a_sdk.rs against a tests/fixtures/slow capsule whose manifest allows
the webhook A2A_PUSH_WEBHOOK (a loopback server the test started; it checks what arrives).
Steps:

  card      the card declares capabilities.pushNotifications
  send      a polling client whose ClientConfig carries a push config (url
            <webhook>/sdk-<gen>, token tok-<gen>, Bearer A2A_PUSH_SECRET) sends "sleep 1";
            prints `sent <task id>`
  configs   create_task_push_notification_config (id extra) on that task, get it back, list
            it beside the send's, delete it, list again without it
  refused   a config naming A2A_PUSH_REFUSED (not in the manifest's allow-list) is an error
  done      GetTask until completed

A2A_PUSH_SECRET comes in the environment, never as an argument. One line per step on
stdout; on failure a `FAIL: ...` line on stderr, exit 1.
"""

import asyncio
import os
import sys
import time

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import new_text_message
from a2a.types import (
    AgentCard,
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    Role,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)

TIMEOUT = 30.0


class Failure(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failure(message)


def card_for(card, generation):
    if generation == "1.0":
        return card
    legacy = AgentCard()
    legacy.CopyFrom(card)
    keep = [i for i in card.supported_interfaces if i.protocol_version.startswith("0.3")]
    del legacy.supported_interfaces[:]
    legacy.supported_interfaces.extend(keep)
    return legacy


async def main(base, gen):
    hook, refused = os.environ["A2A_PUSH_WEBHOOK"], os.environ["A2A_PUSH_REFUSED"]
    secret = os.environ["A2A_PUSH_SECRET"]
    step = "card"
    try:
        import httpx

        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, base).get_agent_card()
        check(card.capabilities.push_notifications, "the card does not declare pushNotifications")
        card = card_for(card, gen)
        push = TaskPushNotificationConfig(
            url=f"{hook}/sdk-{gen}",
            token=f"tok-{gen}",
            authentication=AuthenticationInfo(scheme="Bearer", credentials=secret),
        )
        client = ClientFactory(
            ClientConfig(streaming=False, polling=True, push_notification_config=push)
        ).create(card)
        try:
            step = "send"
            message = new_text_message("sleep 1", role=Role.ROLE_USER)
            answers = [e async for e in client.send_message(SendMessageRequest(message=message))]
            check(len(answers) == 1 and answers[0].HasField("task"), f"expected a task: {answers}")
            task = answers[0].task
            print(f"sent {task.id}")

            step = "configs"
            extra = TaskPushNotificationConfig(task_id=task.id, id="extra", url=f"{hook}/sdk-{gen}-extra")
            made = await client.create_task_push_notification_config(extra)
            check(made.id == "extra" and made.url == extra.url, f"created {made}")
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id="extra")
            )
            check(got.url == extra.url and not got.authentication.credentials, f"got {got}")
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            urls = sorted(c.url for c in listed.configs)
            check(urls == sorted([push.url, extra.url]), f"listed {urls}")
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="extra")
            )
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            check([c.url for c in listed.configs] == [push.url], f"after delete {listed}")
            print(f"[{gen}] configs: set, get, list, delete")

            step = "refused"
            try:
                await client.create_task_push_notification_config(
                    TaskPushNotificationConfig(task_id=task.id, url=f"{refused}/nope")
                )
                raise Failure("a destination outside a2a.push.allow was taken")
            except Failure:
                raise
            except Exception as e:
                check("a2a.push.allow" in str(e), f"refused with {type(e).__name__}: {e}")
                print(f"[{gen}] refused: {type(e).__name__}")

            step = "done"
            deadline = time.monotonic() + TIMEOUT
            while True:
                t = await client.get_task(GetTaskRequest(id=task.id))
                if t.status.state == TaskState.TASK_STATE_COMPLETED:
                    break
                check(time.monotonic() < deadline, f"not completed: {TaskState.Name(t.status.state)}")
                await asyncio.sleep(0.1)
        finally:
            await client.close()
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
