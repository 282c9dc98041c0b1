"""The wire types of the Holdpoint API as frozen dataclasses.

Each type reads the server's JSON with ``from_json`` and writes a request body with ``to_json``; unknown fields the
server adds later are kept in ``raw`` rather than refused, so an older client keeps working against a newer server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, TypeAlias, cast

JsonValue: TypeAlias = Any
"""Any value JSON can hold: ``None``, ``bool``, ``int``, ``float``, ``str``, lists and string-keyed dicts of them."""

JsonObject: TypeAlias = dict[str, Any]

QuestionKind: TypeAlias = Literal["blocking", "non_blocking", "approval", "error_recovery"]
ResponseType: TypeAlias = Literal[
    "text",
    "boolean",
    "choice",
    "multi_choice",
    "approval",
    "error_recovery",
    "form",
    "number",
    "integer",
    "date",
    "datetime",
    "time",
    "rating",
    "email",
    "url",
    "markdown",
    "table",
    "file",
]
ColumnType: TypeAlias = Literal["text", "number", "integer", "boolean", "date", "choice"]
"""The response types a ``table`` column may have."""
Widget: TypeAlias = Literal["slider"]
Urgency: TypeAlias = Literal["low", "normal", "high", "critical"]
QuestionStatus: TypeAlias = Literal["pending", "answered", "defaulted", "expired", "cancelled"]
Resolution: TypeAlias = Literal["human", "default_on_timeout", "policy", "cancelled"]
Role: TypeAlias = Literal["viewer", "responder", "approver", "admin", "agent"]

Outcome: TypeAlias = Literal["answered", "defaulted", "expired", "cancelled", "pending"]
"""What became of a question. ``pending`` only when the caller chose not to wait, or to wait less than it took."""

_FRACTION = re.compile(r"\.(\d+)")


def parse_time(text: str) -> datetime:
    """An RFC 3339 time as the server writes it (``2026-11-24T20:14:03.123456789Z``), timezone-aware.

    Python 3.10's ``fromisoformat`` takes neither ``Z`` nor nine fraction digits, so both are normalised first.
    """
    normalised = text.strip().replace(" ", "T")
    if normalised.endswith(("Z", "z")):
        normalised = normalised[:-1] + "+00:00"
    normalised = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), normalised, count=1)
    parsed = datetime.fromisoformat(normalised)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _optional_time(value: JsonValue) -> datetime | None:
    return parse_time(value) if isinstance(value, str) else None


@dataclass(frozen=True)
class Option:
    """One choice of a ``choice``, ``multi_choice`` or ``error_recovery`` question."""

    value: str
    label: str
    description: str | None = None

    @classmethod
    def of(cls, option: Option | str) -> Option:
        """An option as given: a plain string is its own value and label."""
        return option if isinstance(option, Option) else cls(value=option, label=option)

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> Option:
        return cls(value=str(data["value"]), label=str(data["label"]), description=data.get("description"))

    def to_json(self) -> JsonObject:
        body: JsonObject = {"value": self.value, "label": self.label}
        if self.description is not None:
            body["description"] = self.description
        return body


@dataclass(frozen=True)
class TableColumn:
    """One column of a ``table`` field: each row of the answer has a value of ``response_type`` under ``key``."""

    key: str
    label: str
    response_type: ColumnType = "text"
    options: Sequence[Option | str] = ()
    """The choices of a ``choice`` column."""
    required: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> TableColumn:
        return cls(
            key=str(data["key"]),
            label=str(data["label"]),
            response_type=cast(ColumnType, data["response_type"]),
            options=tuple(Option.from_json(o) for o in data.get("options") or ()),
            required=bool(data.get("required", False)),
        )

    def to_json(self) -> JsonObject:
        body: JsonObject = {"key": self.key, "label": self.label, "response_type": self.response_type}
        if self.options:
            body["options"] = [Option.of(o).to_json() for o in self.options]
        if self.required:
            body["required"] = True
        return body


_RULES = ("min", "max", "step", "widget", "min_items", "max_items", "min_rows", "max_rows", "max_bytes")
"""The bounds a field (or a single-value question) may carry besides ``columns`` and ``accept``, by their wire
names."""


@dataclass(frozen=True)
class FormField:
    """One field of a ``form`` question; the answer maps each field's ``key`` to its value.

    Besides its type, a field may carry a ``description``, a ``placeholder`` and a ``default`` (which must fit it),
    and the bounds of its type: ``min``/``max``/``step`` (``integer``, ``number``; ``widget="slider"`` with both
    bounds), ``max`` (a ``rating``'s stars, 3..10), ``min_items``/``max_items`` (``multi_choice``), ``columns`` and
    ``min_rows``/``max_rows`` (``table``).
    """

    key: str
    label: str
    response_type: ResponseType = "text"
    options: Sequence[Option | str] = ()
    required: bool = False
    description: str | None = None
    placeholder: str | None = None
    default: JsonValue = None
    min: float | None = None
    max: float | None = None
    step: float | None = None
    widget: Widget | None = None
    min_items: int | None = None
    max_items: int | None = None
    columns: Sequence[TableColumn] = ()
    min_rows: int | None = None
    max_rows: int | None = None
    accept: Sequence[str] = ()
    """``file`` fields: the media types a file may have (``application/pdf``, or ``image/*``); any when empty."""
    max_bytes: int | None = None
    """``file`` fields: the largest file, in bytes (at most the server's upload limit, 10 MiB by default)."""

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> FormField:
        max_bytes = data.get("max_bytes")
        return cls(
            key=str(data["key"]),
            label=str(data["label"]),
            response_type=cast(ResponseType, data["response_type"]),
            options=tuple(Option.from_json(o) for o in data.get("options") or ()),
            required=bool(data.get("required", False)),
            description=data.get("description"),
            placeholder=data.get("placeholder"),
            default=data.get("default"),
            min=data.get("min"),
            max=data.get("max"),
            step=data.get("step"),
            widget=data.get("widget"),
            min_items=data.get("min_items"),
            max_items=data.get("max_items"),
            columns=tuple(TableColumn.from_json(c) for c in data.get("columns") or ()),
            min_rows=data.get("min_rows"),
            max_rows=data.get("max_rows"),
            accept=tuple(str(a) for a in data.get("accept") or ()),
            max_bytes=int(max_bytes) if max_bytes is not None else None,
        )

    def to_json(self) -> JsonObject:
        body: JsonObject = {
            "key": self.key,
            "label": self.label,
            "response_type": self.response_type,
            "required": self.required,
        }
        if self.options:
            body["options"] = [Option.of(o).to_json() for o in self.options]
        for name in ("description", "placeholder", "default", *_RULES):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        if self.columns:
            body["columns"] = [c.to_json() for c in self.columns]
        if self.accept:
            body["accept"] = list(self.accept)
        return body


@dataclass(frozen=True)
class UploadedFile:
    """A file uploaded with ``upload_file``: what an answer's ``file`` field references (``file.reference()``), and
    what such a field's value is once answered (the server's record of it, whatever the answer said)."""

    file_id: str
    name: str
    size: int
    media_type: str
    sha256: str

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> UploadedFile:
        return cls(
            file_id=str(data["file_id"]),
            name=str(data["name"]),
            size=int(data["size"]),
            media_type=str(data["media_type"]),
            sha256=str(data["sha256"]),
        )

    def to_json(self) -> JsonObject:
        return {
            "file_id": self.file_id,
            "name": self.name,
            "size": self.size,
            "media_type": self.media_type,
            "sha256": self.sha256,
        }

    def reference(self) -> JsonObject:
        """The value of a ``file`` field in an answer: ``{"file_id": ...}``."""
        return {"file_id": self.file_id}


@dataclass(frozen=True)
class Action:
    """What an ``approval`` question asks permission for: one tool call."""

    tool_name: str
    arguments: JsonValue = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> Action:
        return cls(tool_name=str(data["tool_name"]), arguments=data.get("arguments"))

    def to_json(self) -> JsonObject:
        return {"tool_name": self.tool_name, "arguments": self.arguments}


@dataclass(frozen=True)
class Response:
    """An answer body: what a person sent, and the shape of a question's ``default_response``."""

    value: JsonValue
    comment: str | None = None
    edited_arguments: JsonObject | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> Response:
        edited = data.get("edited_arguments")
        return cls(
            value=data.get("value"),
            comment=data.get("comment"),
            edited_arguments=edited if isinstance(edited, dict) else None,
        )

    def to_json(self) -> JsonObject:
        body: JsonObject = {"value": self.value}
        if self.comment is not None:
            body["comment"] = self.comment
        if self.edited_arguments is not None:
            body["edited_arguments"] = self.edited_arguments
        return body


@dataclass(frozen=True)
class Assignee:
    """Who may answer, on top of the role rules: one person (``Assignee(user="alice")``) or a minimum role
    (``Assignee(role="approver")``)."""

    user: str | None = None
    role: Role | None = None
    strategy: Literal["round_robin"] | None = None
    """Asking with a role: ``"round_robin"`` gives the question to the member of exactly that role assigned one least
    recently, who becomes its assignee."""

    def __post_init__(self) -> None:
        if (self.user is None) == (self.role is None):
            raise ValueError("an assignee is either a user or a role")
        if self.strategy is not None and self.role is None:
            raise ValueError("a strategy picks a member of a role")

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> Assignee:
        return cls(user=data.get("user"), role=data.get("role"), strategy=data.get("strategy"))

    def to_json(self) -> JsonObject:
        if self.user is not None:
            return {"user": self.user}
        if self.strategy is not None:
            return {"role": self.role, "strategy": self.strategy}
        return {"role": self.role}


@dataclass(frozen=True)
class Approval:
    """One person's approval of a question that needs several."""

    by: str
    at: datetime
    comment: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> Approval:
        return cls(by=str(data["by"]), at=parse_time(data["at"]), comment=data.get("comment"))


@dataclass(frozen=True)
class Grant:
    """A grant ("always allow"): calls of ``tool_name`` its ``matcher`` allows, within its scope, go through
    without asking until ``expires_at`` or until revoked."""

    id: str
    scope: Literal["run", "agent", "workspace"]
    run_id: str | None
    agent: str | None
    tool_name: str
    matcher: JsonObject
    """``{"equals": arguments}`` or ``{"command_prefix": "git status"}``."""
    created_by: str
    question_id: str | None
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None
    revoked_by: str | None
    uses: int
    last_used_at: datetime | None

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> Grant:
        return cls(
            id=str(data["id"]),
            scope=cast(Literal["run", "agent", "workspace"], data["scope"]),
            run_id=data.get("run_id"),
            agent=data.get("agent"),
            tool_name=str(data["tool_name"]),
            matcher=dict(data["matcher"]),
            created_by=str(data["created_by"]),
            question_id=data.get("question_id"),
            created_at=parse_time(data["created_at"]),
            expires_at=parse_time(data["expires_at"]),
            revoked_at=_optional_time(data.get("revoked_at")),
            revoked_by=data.get("revoked_by"),
            uses=int(data.get("uses", 0)),
            last_used_at=_optional_time(data.get("last_used_at")),
        )


@dataclass(frozen=True)
class Escalation:
    """A question's escalation plan, from its workspace's policy when it was asked: when the people it
    reached are reminded, when it is handed to ``escalate_to``, and when each step was taken (``None`` until then)."""

    remind_at: datetime | None
    reminded_at: datetime | None
    escalate_at: datetime | None
    escalate_to: Assignee | None
    escalated_at: datetime | None

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> Escalation:
        to = data.get("escalate_to")
        return cls(
            remind_at=_optional_time(data.get("remind_at")),
            reminded_at=_optional_time(data.get("reminded_at")),
            escalate_at=_optional_time(data.get("escalate_at")),
            escalate_to=Assignee.from_json(to) if isinstance(to, dict) else None,
            escalated_at=_optional_time(data.get("escalated_at")),
        )


@dataclass(frozen=True)
class Question:
    """A question as the server returns it."""

    id: str
    workspace: str
    project: str | None
    run_id: str | None
    tool_call_id: str | None
    parent_run_ids: tuple[str, ...]
    kind: QuestionKind
    response_type: ResponseType
    title: str
    body: str
    options: tuple[Option, ...]
    fields: tuple[FormField, ...]
    action: Action | None
    allow_edit: bool
    context: JsonObject
    urgency: Urgency
    timeout_at: datetime | None
    default_response: Response | None
    status: QuestionStatus
    response: Response | None
    answered_by: str | None
    resolution: Resolution | None
    created_at: datetime
    updated_at: datetime
    resolved_at: datetime | None
    assignee: Assignee | None
    escalation: Escalation | None
    """Its escalation plan, if a policy applied when it was asked."""
    callback_url: str | None
    """Where its own events are sent, signed with the workspace's callback secret."""
    required_approvals: int
    """How many distinct people must approve it (1 for most)."""
    eligible: JsonObject | None
    """Who may give those approvals: ``{"role": ...}`` or ``{"users": [...]}``, when restricted."""
    approvals: tuple[Approval, ...]
    """The approvals given so far, oldest first."""
    claimed_by: str | None
    """Who claimed it: until ``claim_expires_at`` only they (or an admin) may answer."""
    claim_expires_at: datetime | None
    raw: JsonObject = field(repr=False, compare=False)
    """The question's JSON exactly as received, including fields this version of the client does not know."""
    response_schema: JsonObject | None = None
    """The JSON Schema it was asked with instead of fields, as given (its ``fields`` were made from it)."""
    rules: JsonObject = field(default_factory=dict)
    """A single-value question's bounds (``min``, ``max``, ``step``, ``widget``, ``min_items``, ``max_items``,
    ``columns``, ``min_rows``, ``max_rows``, ``accept``, ``max_bytes``), as its JSON has them."""

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> Question:
        action = data.get("action")
        default = data.get("default_response")
        response = data.get("response")
        assignee = data.get("assignee")
        escalation = data.get("escalation")
        return cls(
            id=str(data["id"]),
            workspace=str(data.get("workspace", "")),
            project=data.get("project"),
            run_id=data.get("run_id"),
            tool_call_id=data.get("tool_call_id"),
            parent_run_ids=tuple(data.get("parent_run_ids") or ()),
            kind=cast(QuestionKind, data["kind"]),
            response_type=cast(ResponseType, data["response_type"]),
            title=str(data["title"]),
            body=str(data.get("body", "")),
            options=tuple(Option.from_json(o) for o in data.get("options") or ()),
            fields=tuple(FormField.from_json(f) for f in data.get("fields") or ()),
            action=Action.from_json(action) if isinstance(action, dict) else None,
            allow_edit=bool(data.get("allow_edit", False)),
            context=dict(data.get("context") or {}),
            urgency=cast(Urgency, data["urgency"]),
            timeout_at=_optional_time(data.get("timeout_at")),
            default_response=Response.from_json(default) if isinstance(default, dict) else None,
            status=cast(QuestionStatus, data["status"]),
            response=Response.from_json(response) if isinstance(response, dict) else None,
            answered_by=data.get("answered_by"),
            resolution=data.get("resolution"),
            created_at=parse_time(data["created_at"]),
            updated_at=parse_time(data["updated_at"]),
            resolved_at=_optional_time(data.get("resolved_at")),
            assignee=Assignee.from_json(assignee) if isinstance(assignee, dict) else None,
            escalation=Escalation.from_json(escalation) if isinstance(escalation, dict) else None,
            callback_url=data.get("callback_url"),
            required_approvals=int(data.get("required_approvals", 1)),
            eligible=dict(data["eligible"]) if isinstance(data.get("eligible"), dict) else None,
            approvals=tuple(Approval.from_json(a) for a in data.get("approvals") or ()),
            claimed_by=data.get("claimed_by"),
            claim_expires_at=_optional_time(data.get("claim_expires_at")),
            raw=dict(data),
            response_schema=dict(data["response_schema"]) if isinstance(data.get("response_schema"), dict) else None,
            rules={name: data[name] for name in (*_RULES, "columns", "accept") if data.get(name) is not None},
        )


@dataclass(frozen=True)
class Page:
    """One page of a cursor-paginated list; pass ``next_cursor`` as ``cursor`` for the next (``None``: the last)."""

    items: tuple[Question, ...]
    next_cursor: str | None


@dataclass(frozen=True)
class AskResult:
    """What became of a question, as an agent acts on it.

    ``outcome`` is ``answered`` (a person answered: ``value`` is their answer, which may well be a "no"),
    ``defaulted`` (the deadline passed and the question's default applied: ``value`` is the default), ``expired``
    (the deadline passed and nobody answered: no value), ``cancelled`` (withdrawn, superseded, or its run ended), or
    ``pending`` when the caller did not wait until the end.
    """

    question: Question

    @property
    def outcome(self) -> Outcome:
        return self.question.status

    @property
    def resolved(self) -> bool:
        """Whether the question is settled for good (every outcome but ``pending``)."""
        return self.outcome != "pending"

    @property
    def value(self) -> JsonValue:
        """The answer's value, or the default's; ``None`` when there is neither."""
        return self.question.response.value if self.question.response else None

    @property
    def comment(self) -> str | None:
        return self.question.response.comment if self.question.response else None

    @property
    def edited_arguments(self) -> JsonObject | None:
        return self.question.response.edited_arguments if self.question.response else None

    @property
    def answered_by(self) -> str | None:
        return self.question.answered_by

    @property
    def question_id(self) -> str:
        return self.question.id


Decision: TypeAlias = Literal["allow", "ask", "deny"]
"""What the workspace's approval rules decided about a call (``POST /decide``)."""

ApprovalOutcome: TypeAlias = Literal[
    "answered",
    "defaulted",
    "expired",
    "cancelled",
    "pending",
    "allowed_by_rule",
    "allowed_by_grant",
    "denied_by_rule",
]
"""What became of an approval: a question's outcome when a person was asked; ``allowed_by_rule`` or
``allowed_by_grant`` when the call may run without asking; ``denied_by_rule`` when a rule refuses it."""


@dataclass(frozen=True)
class ApprovalResult:
    """What became of a request to make one tool call, as the workspace's approval rules decided it (``POST
    /decide``).

    A rule may allow the call (``outcome == "allowed_by_rule"``, or ``"allowed_by_grant"`` when an earlier approval's
    grant covers it) or refuse it (``"denied_by_rule"``, with ``rule`` and ``rule_reason``) without asking anyone:
    then ``question`` is ``None``. Otherwise a person was asked and ``outcome`` is the question's: ``approved`` is
    true only when the answer (a person's, or a default that approves) was yes; an expired or cancelled approval is
    not approved, and ``outcome`` says that nobody decided, which is not the same as a "no".
    """

    question: Question | None
    """The approval question asked; ``None`` when the rules decided without asking."""
    decision: Decision = "ask"
    """The rules' decision as the server last gave it: ``ask`` while a person has not decided."""
    rule: str | None = None
    """The deciding rule's name; ``None`` when the document's default decided."""
    rule_reason: str | None = None
    """The server's reason: the rule's (always given with ``denied_by_rule``), or why a person's decision went
    against the call."""
    grant_id: str | None = None
    """The grant that let the call through without asking (``allowed_by_grant``)."""
    call_arguments: JsonValue = None
    """The arguments the call was asked about."""

    @classmethod
    def from_decision(cls, data: Mapping[str, JsonValue], arguments: JsonValue) -> ApprovalResult:
        """Reads the answer of ``POST /decide``."""
        question = data.get("question")
        return cls(
            question=Question.from_json(question) if isinstance(question, dict) else None,
            decision=cast(Decision, data.get("decision", "ask")),
            rule=data.get("rule"),
            rule_reason=data.get("reason"),
            grant_id=data.get("grant_id"),
            call_arguments=arguments,
        )

    def waited(self, question: Question) -> ApprovalResult:
        """This result once its question was waited on: the decision follows the question's outcome."""
        approved = question.status in ("answered", "defaulted") and (
            question.response is not None and question.response.value is True
        )
        decision: Decision = "ask" if question.pending else ("allow" if approved else "deny")
        return replace(self, question=question, decision=decision)

    @property
    def outcome(self) -> ApprovalOutcome:
        if self.question is not None:
            return self.question.status
        if self.decision == "deny":
            return "denied_by_rule"
        return "allowed_by_grant" if self.grant_id is not None else "allowed_by_rule"

    @property
    def resolved(self) -> bool:
        """Whether the approval is settled for good (every outcome but ``pending``)."""
        return self.outcome != "pending"

    @property
    def value(self) -> JsonValue:
        """The person's (or the default's) answer; ``None`` when nobody was asked or nobody answered."""
        response = self.question.response if self.question else None
        return response.value if response else None

    @property
    def comment(self) -> str | None:
        response = self.question.response if self.question else None
        return response.comment if response else None

    @property
    def edited_arguments(self) -> JsonObject | None:
        response = self.question.response if self.question else None
        return response.edited_arguments if response else None

    @property
    def answered_by(self) -> str | None:
        return self.question.answered_by if self.question else None

    @property
    def question_id(self) -> str | None:
        return self.question.id if self.question else None

    @property
    def tool_name(self) -> str | None:
        return self.question.action.tool_name if self.question and self.question.action else None

    @property
    def approved(self) -> bool:
        if self.question is None:
            return self.decision == "allow"
        return self.outcome in ("answered", "defaulted") and self.value is True

    @property
    def rejected(self) -> bool:
        """A person's decision against the call (their "no", or a default of ``false``): not an expiry, a cancel or
        a rule's refusal."""
        return self.outcome in ("answered", "defaulted") and self.value is False

    @property
    def denied_by_rule(self) -> bool:
        """Whether a rule refused the call without asking anyone (``rule`` names it, ``rule_reason`` says why)."""
        return self.outcome == "denied_by_rule"

    @property
    def arguments(self) -> JsonValue:
        """The arguments to call the tool with: the approver's edit if there is one, else those asked about."""
        if self.edited_arguments is not None:
            return self.edited_arguments
        if self.question is not None and self.question.action is not None:
            return self.question.action.arguments
        return self.call_arguments

    def reason(self) -> str:
        """A sentence for a model that may not run the call: the rule's reason, the rejection's comment, or why
        nobody decided."""
        if self.approved:
            return "approved"
        if self.denied_by_rule:
            why = self.rule_reason or "no reason given"
            return f"denied by rule {self.rule}: {why}" if self.rule else f"denied by the approval rules: {why}"
        if self.rejected:
            return self.comment or "rejected without a comment"
        if self.outcome == "expired":
            return "nobody decided before the approval's deadline; the call was not run"
        if self.outcome == "cancelled":
            return "the approval request was cancelled; the call was not run"
        return "the approval is still pending; the call was not run"


@dataclass(frozen=True)
class Event:
    """One entry of the event stream: ``id`` is the event log's id (what ``Last-Event-ID`` resumes from), ``type``
    is ``question_asked``, ``question_answered``, ``question_expired``, ``question_cancelled``, ``question_reminded``,
    ``question_escalated``, ``run_status`` or another type the server adds, and ``data`` is the event's JSON."""

    id: int
    type: str
    data: JsonObject

    @property
    def question(self) -> Question | None:
        """The question as the change left it, for question events."""
        question = self.data.get("question")
        return Question.from_json(question) if isinstance(question, dict) else None


def timeout_to_seconds(timeout: float | timedelta | None) -> float | None:
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    return timeout
