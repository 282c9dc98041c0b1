"""``@requires_approval``: a plain function that runs only once a person approved the call."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar, cast

from ._async import AsyncHoldpoint
from ._errors import ApprovalDenied, HoldpointError
from ._sync import Holdpoint
from ._types import ApprovalResult, Assignee, JsonObject, JsonValue, Urgency

P = ParamSpec("P")
R = TypeVar("R")

Title = str | Callable[[JsonObject], str]


def requires_approval(
    client: Holdpoint | AsyncHoldpoint,
    *,
    tool_name: str | None = None,
    title: Title | None = None,
    body: str | None = None,
    allow_edit: bool = False,
    context: Mapping[str, JsonValue] | None = None,
    project: str | None = None,
    urgency: Urgency | None = None,
    timeout_seconds: float | timedelta | None = None,
    default: bool | None = None,
    assignee: Assignee | None = None,
    callback_url: str | None = None,
    agent: str | None = None,
    on_denied: Callable[[ApprovalResult], Any] | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Guards a function (sync or async) with an approval: each call asks Holdpoint first, with the function's name
    as the tool and its bound arguments as the action, and runs the function only once approved.

    The workspace's approval rules decide first (``POST /decide``): a call they allow runs at once, one they deny
    never asks anyone. With ``allow_edit`` the approver may change the arguments, and the function runs with theirs.
    When the call is not approved (denied by a rule, rejected, expired or cancelled), ``ApprovalDenied`` is raised
    with the result, or ``on_denied``'s return value is returned instead. ``agent`` is the name the rules' ``agents``
    globs match (the token's name by default). ``title`` is a string or a function of the arguments. An async function may
    use either client (a sync one runs in a thread); a sync function needs the sync ``Holdpoint``.
    """

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        name = tool_name or func.__name__
        signature = inspect.signature(func)

        def approval_request(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            arguments = bound_arguments(signature, args, kwargs)
            return dict(
                tool_name=name,
                arguments=arguments,
                title=title(arguments) if callable(title) else title,
                body=body,
                allow_edit=allow_edit,
                context=context,
                project=project,
                urgency=urgency,
                timeout_seconds=timeout_seconds,
                default=default,
                assignee=assignee,
                callback_url=callback_url,
                agent=agent,
            )

        def outcome(result: ApprovalResult, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            if not result.approved:
                if on_denied is not None:
                    return on_denied(result)
                raise ApprovalDenied(result, name)
            if result.edited_arguments is None:
                return func(*args, **kwargs)
            call_args, call_kwargs = apply_edit(signature, name, args, kwargs, result.edited_arguments)
            return func(*call_args, **call_kwargs)

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                request = approval_request(args, kwargs)
                if isinstance(client, AsyncHoldpoint):
                    result = await client.approve(**request)
                else:
                    result = await asyncio.to_thread(functools.partial(client.approve, **request))
                value = outcome(result, args, kwargs)
                return await value if inspect.isawaitable(value) else value

            return cast(Callable[P, R], guarded_async)

        if isinstance(client, AsyncHoldpoint):
            raise TypeError(f"{name} is not async: guard it with the sync Holdpoint client, not AsyncHoldpoint")
        sync_client = client

        @functools.wraps(func)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
            result = sync_client.approve(**approval_request(args, kwargs))
            return cast(R, outcome(result, args, kwargs))

        return guarded

    return decorate


def bound_arguments(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> JsonObject:
    """The call's arguments by parameter name, defaults filled in, as JSON (what does not fit JSON is shown as
    its ``str``)."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    shown: JsonObject = json.loads(json.dumps(dict(bound.arguments), default=str))
    return shown


def apply_edit(
    signature: inspect.Signature,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    edited: Mapping[str, JsonValue],
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    unknown = sorted(set(edited) - set(signature.parameters))
    if unknown:
        raise HoldpointError(f"the approver's edit names {unknown}, which {name} does not take")
    bound.arguments.update(edited)
    return bound.args, bound.kwargs
