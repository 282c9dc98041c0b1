"""OpenAI Agents: a tool that needs approval asks Holdpoint; the run goes on with the decision, after a restart too.

    export HOLDPOINT_SERVER=http://127.0.0.1:3000 HOLDPOINT_TOKEN=hp_...   # an agent token
    export OPENAI_API_KEY=...    # or OPENAI_BASE_URL for any OpenAI-compatible server
    python openai_agents_deploy.py

Stop it while it waits and start it again: it carries on with the same approval (the run state is in ./runs).
Needs `pip install "./sdk/python[openai-agents]"`.
"""

from __future__ import annotations

import asyncio
import os

from agents import Agent, function_tool, set_default_openai_api, set_tracing_disabled

from holdpoint_client import AsyncHoldpoint
from holdpoint_client.openai_agents import HoldpointApprovals, run_with_approvals


@function_tool(needs_approval=True)
def deploy(service: str, environment: str) -> str:
    """Deploy a service to an environment."""
    return f"deployed {service} to {environment}"


if os.environ.get("OPENAI_BASE_URL"):
    # OpenAI-compatible servers serve Chat Completions (the SDK's default is OpenAI's Responses API), and the SDK's
    # traces go to OpenAI's platform, which such a server's key does not open.
    set_default_openai_api("chat_completions")
    set_tracing_disabled(True)


async def main() -> None:
    async with AsyncHoldpoint() as hp:
        approvals = HoldpointApprovals(hp, "runs", project="deploys", timeout_seconds=1800)
        agent = Agent(
            name="deployer",
            instructions="You deploy services when asked. Use the deploy tool.",
            tools=[approvals.editable(deploy)],  # the approver may change the arguments
        )
        result = await run_with_approvals(agent, "Deploy the api service to production", approvals, run_key="api-1")
        print(result.final_output)


asyncio.run(main())
