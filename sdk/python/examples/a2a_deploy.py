"""A2A: ask a remote agent to deploy; when its task needs input, a person answers in Holdpoint and the answer goes
back on the same task.

    export HOLDPOINT_SERVER=http://127.0.0.1:3000 HOLDPOINT_TOKEN=hp_...   # an agent token
    python a2a_agent.py &     # the agent (or A2A_URL: any A2A agent)
    python a2a_deploy.py

Stop it while it waits and start it again: it re-attaches to the same task (its id is kept in a2a-task.txt) and
finds the same question. Needs `pip install "./sdk/python[a2a]"`.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from a2a.client import ClientConfig, create_client
from a2a.helpers import get_artifact_text, new_text_message
from a2a.types import Role, TaskState

from holdpoint_client import AsyncHoldpoint
from holdpoint_client.a2a import TaskWatcher

SAVED = Path("a2a-task.txt")


async def main() -> None:
    agent = await create_client(os.environ.get("A2A_URL", "http://127.0.0.1:9999"), ClientConfig(streaming=True))
    async with AsyncHoldpoint() as hp:  # HOLDPOINT_SERVER and HOLDPOINT_TOKEN
        watcher = TaskWatcher(agent, hp, project="a2a-demo", timeout_seconds=1800)
        if SAVED.exists():
            task = await watcher.watch(SAVED.read_text())  # a task this script started before it was stopped
        else:
            message = new_text_message("Deploy the api service.", role=Role.ROLE_USER)
            task = await watcher.send(message, on_task=SAVED.write_text)
        SAVED.unlink(missing_ok=True)
        print(TaskState.Name(task.status.state), *(get_artifact_text(a) for a in task.artifacts))
    await agent.close()


asyncio.run(main())
