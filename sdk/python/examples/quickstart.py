"""Plain Python: ask a person, gate a risky call, guard a function.

    export HOLDPOINT_SERVER=http://127.0.0.1:3000 HOLDPOINT_TOKEN=hp_...   # an agent token
    python quickstart.py

Answer the questions at http://127.0.0.1:3000/inbox as they arrive.
"""

from __future__ import annotations

from holdpoint_client import ApprovalDenied, Holdpoint, requires_approval

with Holdpoint() as hp:  # HOLDPOINT_SERVER and HOLDPOINT_TOKEN
    region = hp.ask(
        "Which region should the new cluster go to?",
        response_type="choice",
        options=["eu-west", "us-east"],
        project="quickstart",
        timeout_seconds=600,
        default_response="eu-west",
    )
    print(f"region: {region.value} ({region.outcome})")  # answered, or defaulted after 10 minutes

    approval = hp.approve("create_cluster", {"region": region.value, "nodes": 3}, allow_edit=True, project="quickstart")
    if approval.approved:
        print(f"creating the cluster with {approval.arguments}")
    else:
        print(f"not creating it: {approval.reason()}")  # a person's "no", or nobody deciding in time

    @requires_approval(hp, project="quickstart")
    def delete_snapshot(snapshot_id: str) -> str:
        return f"deleted {snapshot_id}"

    try:
        print(delete_snapshot("snap-042"))
    except ApprovalDenied as denied:
        print(f"kept the snapshot: {denied.result.reason()}")
