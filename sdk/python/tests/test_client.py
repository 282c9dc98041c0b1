"""The blocking client against the real server: every response type asked and answered, every outcome, waiting,
idempotent creation and retries, and typed errors."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from holdpoint_client import (
    Action,
    Assignee,
    ConflictError,
    ForbiddenError,
    FormField,
    Holdpoint,
    InvalidError,
    NotFoundError,
    Option,
    RetryPolicy,
    TransportError,
    UnauthorizedError,
)

from .conftest import Server
from .helpers import Answerer, eventually, pending_in
from .proxy import Proxy

FORM = [
    FormField("environment", "Environment", "choice", options=["staging", "production"], required=True),
    FormField("replicas", "Replicas", "number", required=True),
    FormField("notify", "Tell the team?", "boolean"),
]


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ({"response_type": "text"}, "Ada Lovelace"),
        ({"response_type": "boolean"}, False),
        ({"response_type": "choice", "options": ["red", Option("blue", "Blue", "the calm one")]}, "blue"),
        ({"response_type": "multi_choice", "options": ["a", "b", "c"]}, ["a", "c"]),
        ({"response_type": "form", "fields": FORM}, {"environment": "production", "replicas": 3, "notify": True}),
        ({"kind": "error_recovery", "options": [Option("fallback", "Use the fallback mirror")]}, "fallback"),
        ({"kind": "error_recovery"}, "retry"),
    ],
    ids=["text", "boolean", "choice", "multi_choice", "form", "error_recovery_option", "error_recovery_retry"],
)
def test_ask_waits_for_the_answer_of_each_response_type(
    hp: Holdpoint, person: Holdpoint, project: str, question: dict[str, Any], answer: Any
) -> None:
    answerer = Answerer(person, project, answer, comment="from the test")
    result = hp.ask("What now?", project=project, body="Some **Markdown**", context={"step": 3}, **question)
    answerer.join()
    assert result.outcome == "answered"
    assert result.value == answer
    assert result.comment == "from the test"
    assert result.answered_by == "bootstrap"
    assert result.question.body == "Some **Markdown**"
    assert result.question.context == {"step": 3}
    assert result.question.resolved_at is not None


def test_a_persons_no_is_an_answer_not_an_exception(hp: Holdpoint, person: Holdpoint, project: str) -> None:
    answerer = Answerer(person, project, False, comment="not on a Friday")
    result = hp.approve("deploy", {"service": "api"}, project=project)
    answerer.join()
    assert (result.outcome, result.approved, result.rejected) == ("answered", False, True)
    assert result.reason() == "not on a Friday"
    assert result.arguments == {"service": "api"}


def test_an_approver_may_edit_the_arguments_when_allowed(hp: Holdpoint, person: Holdpoint, project: str) -> None:
    answerer = Answerer(person, project, True, edited_arguments={"service": "api", "environment": "staging"})
    result = hp.approve(
        "deploy", {"service": "api", "environment": "production"}, allow_edit=True, project=project, urgency="critical"
    )
    answerer.join()
    assert result.approved
    assert result.arguments == {"service": "api", "environment": "staging"}
    assert result.question is not None and result.question.action is not None
    assert result.question.action.arguments == {"service": "api", "environment": "production"}
    assert result.question.urgency == "critical"
    assert result.question.allow_edit


def test_a_question_past_its_deadline_is_defaulted_with_a_default_and_expired_without(
    hp: Holdpoint, project: str
) -> None:
    defaulted = hp.ask(
        "Retry the flaky job?", response_type="boolean", timeout_seconds=1, default_response=True, project=project
    )
    assert (defaulted.outcome, defaulted.value, defaulted.answered_by) == ("defaulted", True, None)
    assert defaulted.question.resolution == "default_on_timeout"

    expired = hp.approve("drop_table", {"table": "users"}, timeout_seconds=1, project=project)
    assert (expired.outcome, expired.value) == ("expired", None)
    assert not expired.approved and not expired.rejected, "nobody decided: neither approved nor a person's no"


def test_a_question_cancelled_while_the_agent_waits_ends_the_wait(
    hp: Holdpoint, person: Holdpoint, project: str
) -> None:
    def cancel() -> None:
        question = eventually("the question", lambda: pending_in(person, project))[0]
        person.cancel(question.id, reason="superseded")

    canceller = threading.Thread(target=cancel)
    canceller.start()
    result = hp.ask("Which region?", response_type="choice", options=["eu", "us"], project=project)
    canceller.join()
    assert result.outcome == "cancelled"
    assert result.question.resolution == "cancelled"


def test_waiting_less_than_it_takes_returns_pending(hp: Holdpoint, project: str) -> None:
    started = time.monotonic()
    result = hp.ask("Anyone?", project=project, wait_timeout=1.5)
    waited = time.monotonic() - started
    assert result.outcome == "pending" and not result.resolved
    assert 1.0 <= waited < 5, waited
    later = hp.wait(result.question_id, timeout=0.5)
    assert later.outcome == "pending"


def test_a_non_blocking_question_is_asked_without_waiting(hp: Holdpoint, project: str) -> None:
    result = hp.ask("Mention the deprecation?", kind="non_blocking", response_type="boolean", project=project)
    assert result.outcome == "pending"
    assert result.question.kind == "non_blocking" and result.question.urgency == "low"
    assert result.question.timeout_at is None


def test_the_same_idempotency_key_asks_once(hp: Holdpoint, person: Holdpoint, project: str) -> None:
    first = hp.create_question("Ship it?", response_type="boolean", project=project, idempotency_key="ship-42")
    again = hp.create_question("Ship it?", response_type="boolean", project=project, idempotency_key="ship-42")
    assert again.id == first.id
    assert [q.id for q in pending_in(person, project)] == [first.id]
    person.answer(first.id, True)
    # An agent restarted after the answer asks again with the same key and gets the answer at once.
    restarted = hp.ask("Ship it?", response_type="boolean", project=project, idempotency_key="ship-42")
    assert (restarted.outcome, restarted.value) == ("answered", True)
    with pytest.raises(ConflictError) as refused:
        hp.create_question("Ship something else?", project=project, idempotency_key="ship-42")
    assert refused.value.code == "conflict" and refused.value.status == 409


def test_a_creation_whose_response_was_lost_is_retried_without_a_second_question(
    server: Server, agent_token: str, person: Holdpoint, project: str
) -> None:
    proxy = Proxy(server.url)
    try:
        proxy.drop_responses_to = b"POST /api/v1/questions "
        proxy.drops_left = 2
        with Holdpoint(proxy.url, agent_token, retry=RetryPolicy(max_retries=3, backoff=0.05)) as hp:
            question = hp.create_question("Rotate the keys?", project=project)
        assert proxy.drops_left == 0, "both lost responses happened"
        keys = [line for line in proxy.sent_text().splitlines() if line.lower().startswith("idempotency-key:")]
        assert len(keys) == 3 and len(set(keys)) == 1, keys
        assert [q.id for q in pending_in(person, project)] == [question.id]
    finally:
        proxy.close()


def test_a_server_out_of_reach_is_a_transport_error_after_the_retries(server: Server, agent_token: str) -> None:
    proxy = Proxy(server.url)
    proxy.unreachable = True
    try:
        with Holdpoint(proxy.url, agent_token, retry=RetryPolicy(max_retries=2, backoff=0.05)) as hp:
            with pytest.raises(TransportError):
                hp.get_question("01900000-0000-7000-8000-000000000000")
    finally:
        proxy.close()


def test_errors_carry_the_servers_code_message_and_details(
    server: Server, hp: Holdpoint, person: Holdpoint, project: str
) -> None:
    with pytest.raises(NotFoundError) as missing:
        hp.get_question("01900000-0000-7000-8000-000000000000")
    assert (missing.value.code, missing.value.status) == ("not_found", 404)

    with pytest.raises(InvalidError) as invalid:
        hp.ask("Pick one", response_type="choice", options=["only"], project=project)
    assert invalid.value.code == "invalid" and invalid.value.status == 422
    assert "options" in invalid.value.fields, invalid.value.details

    question = hp.create_question("Proceed?", response_type="boolean", project=project)
    person.answer(question.id, True)
    with pytest.raises(ConflictError) as conflict:
        person.answer(question.id, False)
    assert conflict.value.details["status"] == "answered", conflict.value.details

    with pytest.raises(ForbiddenError) as forbidden:
        hp.answer(hp.create_question("Agents never answer", project=project).id, "yes")
    assert forbidden.value.code == "forbidden"

    with pytest.raises(InvalidError) as unknown_person:
        hp.ask("For nobody", assignee=Assignee(user="no-such-person"), project=project)
    assert "assignee" in str(unknown_person.value.details)

    with Holdpoint(server.url, "hp_not_a_real_token_at_all_000000000000") as stranger:
        with pytest.raises(UnauthorizedError) as unauthorized:
            stranger.list_questions()
    assert unauthorized.value.code == "unauthorized" and unauthorized.value.status == 401


def test_lists_page_with_a_cursor(hp: Holdpoint, project: str) -> None:
    asked = [hp.create_question(f"Question {n}", project=project).id for n in range(3)]
    first = hp.list_questions(project=project, limit=2)
    assert len(first.items) == 2 and first.next_cursor
    second = hp.list_questions(project=project, limit=2, cursor=first.next_cursor)
    assert second.next_cursor is None
    assert {q.id for q in first.items + second.items} == set(asked)


def test_a_question_under_an_escalation_policy_carries_its_plan(hp: Holdpoint, server: Server, project: str) -> None:
    policy = {
        "items": [
            {
                "kind": "non_blocking",
                "urgency": "critical",
                "remind_after_seconds": 60,
                "escalate_after_seconds": 120,
                "escalate_to": {"role": "admin"},
            }
        ]
    }
    assert server.api("PUT", "/escalation-policies", json=policy).status_code == 200
    try:
        planned = hp.ask("Rotate the root key?", kind="non_blocking", urgency="critical", project=project).question
        plan = planned.escalation
        assert plan is not None and plan.escalate_to == Assignee(role="admin")
        assert plan.remind_at is not None and plan.escalate_at is not None
        assert (plan.remind_at - planned.created_at).total_seconds() == 60
        assert (plan.escalate_at - planned.created_at).total_seconds() == 120
        assert plan.reminded_at is None and plan.escalated_at is None
        unplanned = hp.ask("Mention it in the notes?", kind="non_blocking", project=project).question
        assert unplanned.escalation is None
    finally:
        assert server.api("PUT", "/escalation-policies", json={"items": []}).status_code == 200


def test_a_question_names_its_callback_url_and_a_private_one_is_refused(hp: Holdpoint, project: str) -> None:
    # A public address, never resolved: the server refuses private ranges unless it is told otherwise.
    question = hp.create_question("Call me back?", callback_url="https://93.184.216.34/holdpoint", project=project)
    assert question.callback_url == "https://93.184.216.34/holdpoint"
    assert hp.get_question(question.id).callback_url == question.callback_url
    with pytest.raises(InvalidError) as private:
        hp.create_question("Call me here?", callback_url="http://127.0.0.1:9/hook", project=project)
    assert "callback_url" in private.value.fields, private.value.details


def test_an_approval_that_needs_two_people_waits_for_the_second_and_a_claim_keeps_others_off(
    hp: Holdpoint, server: Server, project: str
) -> None:
    question = hp.create_question(
        "Drop the staging database?",
        kind="approval",
        action=Action(tool_name="dropdb", arguments={"name": "staging"}),
        project=project,
        required_approvals=2,
    )
    assert question.required_approvals == 2
    # A quorum counts people: each approval comes from a token a person made (the bootstrap token is nobody's).
    ada, ada_token = server.person_token("approver")
    with Holdpoint(server.url, ada_token) as first_person:
        first = first_person.answer(question.id, True, comment="backed up")
    assert first.pending
    assert [(a.by, a.comment) for a in first.approvals] == [(f"{ada}-approver", "backed up")]

    _, second_token = server.person_token("approver")
    with Holdpoint(server.url, second_token) as second, Holdpoint(
        server.url, server.create_token("responder")
    ) as responder:
        claimed = second.claim(question.id, ttl_seconds=600)
        assert claimed.claimed_by is not None and claimed.claim_expires_at is not None
        text = hp.create_question("Which region?", project=project)
        second.claim(text.id)
        with pytest.raises(ConflictError) as refused:
            responder.answer(text.id, "eu-west-1")
        assert refused.value.details is not None and refused.value.details["claimed_by"] == claimed.claimed_by
        assert second.unclaim(text.id).claimed_by is None

        answered = second.answer(question.id, True)
    assert answered.status == "answered"
    assert [a.by for a in answered.approvals] == [f"{ada}-approver", claimed.claimed_by]


def test_an_approval_can_make_a_grant_which_is_listed_and_revoked(
    hp: Holdpoint, person: Holdpoint, project: str
) -> None:
    question = hp.create_question(
        "Run the tests?",
        kind="approval",
        action=Action(tool_name="shell", arguments={"command": "pytest -q"}),
        project=project,
    )
    grant = {"scope": "agent", "matcher": {"command_prefix": "pytest"}, "expires_in_seconds": 3600}
    person.answer(question.id, True, grant=grant)
    made = next(g for g in person.grants() if g.question_id == question.id)
    assert (made.scope, made.tool_name, made.matcher) == ("agent", "shell", {"command_prefix": "pytest"})
    revoked = person.revoke_grant(made.id)
    assert revoked.revoked_at is not None
    assert all(g.id != made.id for g in person.grants())
    assert any(g.id == made.id for g in person.grants(include_inactive=True))


def test_a_call_a_grant_covers_is_approved_as_it_is_asked(hp: Holdpoint, person: Holdpoint, project: str) -> None:
    question = hp.create_question(
        "Run the linter?",
        kind="approval",
        action=Action(tool_name="shell", arguments={"command": "ruff check"}),
        project=project,
    )
    grant = {"scope": "agent", "matcher": {"command_prefix": "ruff check"}, "expires_in_seconds": 3600}
    person.answer(question.id, True, grant=grant)
    made = next(g for g in person.grants() if g.question_id == question.id)
    try:
        # Nobody is asked: the grant lets the matching call through at once, and a different one is asked.
        result = hp.approve("shell", {"command": "ruff check src"}, project=project, wait_timeout=5)
        assert (result.outcome, result.approved, result.arguments) == (
            "allowed_by_grant",
            True,
            {"command": "ruff check src"},
        )
        assert (result.grant_id, result.question) == (made.id, None)
        other = hp.approve("shell", {"command": "ruff format"}, project=project, wait_timeout=0.5)
        assert other.outcome == "pending" and other.question is not None
        hp.cancel(other.question.id)
    finally:
        person.revoke_grant(made.id)

