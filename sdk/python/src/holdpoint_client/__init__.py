"""Holdpoint for Python: agents ask a person and carry on with the answer.

```python
from holdpoint_client import Holdpoint

with Holdpoint("http://127.0.0.1:3000", token) as hp:
    result = hp.ask("Deploy release 1.4 to production?", response_type="boolean")
    if result.outcome == "answered" and result.value is True:
        deploy()
```

``AsyncHoldpoint`` is the same for asyncio. The framework adapters are ``holdpoint_client.langgraph`` and
``holdpoint_client.openai_agents``; the protocol adapters ``holdpoint_client.ag_ui`` (AG-UI interrupts) and
``holdpoint_client.a2a`` (A2A tasks that need input).
"""

from ._async import AsyncHoldpoint
from ._core import RetryPolicy, TimeoutBounds, __version__
from ._decorator import requires_approval
from ._errors import (
    ApiError,
    ApprovalDenied,
    BadRequestError,
    ConflictError,
    ForbiddenError,
    GoneError,
    HoldpointError,
    InternalServerError,
    InvalidError,
    NotFoundError,
    RateLimitedError,
    TooLargeError,
    TransportError,
    UnauthorizedError,
)
from ._sync import Holdpoint
from ._types import (
    Action,
    Approval,
    ApprovalOutcome,
    ApprovalResult,
    AskResult,
    Assignee,
    Decision,
    ColumnType,
    Escalation,
    Event,
    FormField,
    Grant,
    JsonObject,
    JsonValue,
    Option,
    Outcome,
    Page,
    Question,
    QuestionKind,
    QuestionStatus,
    Resolution,
    Response,
    ResponseType,
    Role,
    TableColumn,
    UploadedFile,
    Urgency,
    Widget,
)

__all__ = [
    "Action",
    "ApiError",
    "Approval",
    "ApprovalDenied",
    "ApprovalOutcome",
    "ApprovalResult",
    "AskResult",
    "Assignee",
    "AsyncHoldpoint",
    "BadRequestError",
    "ColumnType",
    "ConflictError",
    "Decision",
    "Escalation",
    "Event",
    "ForbiddenError",
    "FormField",
    "GoneError",
    "Grant",
    "Holdpoint",
    "HoldpointError",
    "InternalServerError",
    "InvalidError",
    "JsonObject",
    "JsonValue",
    "NotFoundError",
    "Option",
    "Outcome",
    "Page",
    "Question",
    "QuestionKind",
    "QuestionStatus",
    "RateLimitedError",
    "Resolution",
    "Response",
    "ResponseType",
    "RetryPolicy",
    "Role",
    "TableColumn",
    "TimeoutBounds",
    "UploadedFile",
    "TooLargeError",
    "TransportError",
    "UnauthorizedError",
    "Urgency",
    "Widget",
    "__version__",
    "requires_approval",
]
