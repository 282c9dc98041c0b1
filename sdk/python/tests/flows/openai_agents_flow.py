"""An OpenAI Agents deployer whose ``deploy`` tool needs approval, for the restart tests.

    python openai_agents_flow.py run   # the whole loop: run, ask Holdpoint, wait, go on (resumes a saved run)
    python openai_agents_flow.py ask   # run until the approval is needed, ask, save the state and exit

The model is the test's OpenAI-compatible mock ($MODEL_URL); every deployment the tool makes is appended to
$TOOL_LOG; the run's state lives in $STATE_DIR under $RUN_KEY. $AGENT_NAME names the agent (default "deployer"),
which the approval rules' ``agents`` globs match.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from holdpoint_client import AsyncHoldpoint
from holdpoint_client.openai_agents import HoldpointApprovals, run_with_approvals


@function_tool(needs_approval=True)
def deploy(service: str, environment: str) -> str:
    """Deploy a service to an environment."""
    with open(os.environ["TOOL_LOG"], "a", encoding="utf-8") as log:
        log.write(f"{service} {environment}\n")
    return f"deployed {service} to {environment}"


async def main(command: str) -> None:
    set_tracing_disabled(True)
    async with AsyncHoldpoint(os.environ["HOLDPOINT_URL"], os.environ["HOLDPOINT_TOKEN"]) as hp:
        approvals = HoldpointApprovals(hp, os.environ["STATE_DIR"], project=os.environ["PROJECT"])
        tool = approvals.editable(deploy) if os.environ.get("EDITABLE") == "1" else deploy
        model = OpenAIChatCompletionsModel(
            model="mock", openai_client=AsyncOpenAI(base_url=os.environ["MODEL_URL"], api_key="test", max_retries=0)
        )
        agent = Agent(name=os.environ.get("AGENT_NAME", "deployer"), instructions="Deploy what you are asked to.", tools=[tool], model=model)
        run_key = os.environ["RUN_KEY"]
        if command == "ask":
            result = await Runner.run(agent, "Deploy the api service to production")
            questions = await approvals.request(result, run_key=run_key)
            print(json.dumps({"questions": [q.id for q in questions]}))
        else:
            result = await run_with_approvals(agent, "Deploy the api service to production", approvals, run_key=run_key)
            print(json.dumps({"output": result.final_output, "saved": approvals.saved(run_key)}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
