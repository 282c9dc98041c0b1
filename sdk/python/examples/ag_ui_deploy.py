"""AG-UI: run an agent; when a run ends with interrupts, people answer them in Holdpoint and the next run goes on
with their answers.

    export HOLDPOINT_SERVER=http://127.0.0.1:3000 HOLDPOINT_TOKEN=hp_...   # an agent token
    python ag_ui_agent.py &   # the agent (or AG_UI_URL: any agent served over AG-UI's HTTP transport)
    python ag_ui_deploy.py

Stop it while it waits and start it again: it carries on with the same questions (the interrupted run is kept in
./ag-ui-runs). Needs `pip install "./sdk/python[ag-ui]"`.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid

from ag_ui.core import RunAgentInput, UserMessage

from holdpoint_client import AsyncHoldpoint
from holdpoint_client.ag_ui import HoldpointInterrupts, run_agent


async def main() -> None:
    async with AsyncHoldpoint() as hp:  # HOLDPOINT_SERVER and HOLDPOINT_TOKEN
        interrupts = HoldpointInterrupts(hp, project="ag-ui-demo")
        first = RunAgentInput(
            thread_id=os.environ.get("THREAD_ID", "deploy-api-1"),
            run_id=str(uuid.uuid4()),
            messages=[UserMessage(id="user-1", content="Deploy the api service to production.")],
        )
        url = os.environ.get("AG_UI_URL", "http://127.0.0.1:8000/")
        run = await run_agent(url, first, interrupts, state_dir="ag-ui-runs")
        print(json.dumps(run.result, sort_keys=True))


asyncio.run(main())
