"""Files for ``file`` form fields and file questions against the real server: a person uploads, answers with the
upload, and the agent that asked downloads the same bytes; the server's refusals arrive as typed errors."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from holdpoint_client import (
    AsyncHoldpoint,
    ForbiddenError,
    FormField,
    Holdpoint,
    HoldpointError,
    InvalidError,
    TooLargeError,
    UploadedFile,
)

from .conftest import Server

REPORT = FormField("report", "The report", "file", accept=["application/pdf"], max_bytes=1_000_000, required=True)


def test_an_uploaded_file_answers_a_form_and_the_agent_downloads_it(
    hp: Holdpoint, person: Holdpoint, project: str, tmp_path: Path
) -> None:
    data = b"%PDF-1.4\n" + bytes(range(256)) * 40
    path = tmp_path / "report.pdf"
    path.write_bytes(data)
    asked = hp.ask("Send the report", response_type="form", fields=[REPORT], project=project, wait=False)
    uploaded = person.upload_file(path)
    assert uploaded == UploadedFile(
        file_id=uploaded.file_id,
        name="report.pdf",
        size=len(data),
        media_type="application/pdf",
        sha256=hashlib.sha256(data).hexdigest(),
    )
    person.answer(asked.question.id, {"report": uploaded.reference()})
    result = hp.wait(asked.question.id)
    assert result.outcome == "answered"
    assert result.value == {"report": uploaded.to_json()}
    assert hp.download_file(uploaded.file_id) == data


def test_a_question_that_is_itself_a_file_is_answered_with_one_upload(
    hp: Holdpoint, person: Holdpoint, project: str
) -> None:
    asked = hp.ask(
        "Scan of the signed form",
        response_type="file",
        extra={"accept": ["image/*"], "max_bytes": 100_000},
        project=project,
        wait=False,
    )
    assert asked.question.rules == {"accept": ["image/*"], "max_bytes": 100_000}
    text = person.upload_file(b"not an image", name="notes.txt", media_type="text/plain")
    with pytest.raises(InvalidError) as refused:
        person.answer(asked.question.id, text.reference())
    assert set(refused.value.fields) == {"value"}, refused.value.details
    data = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    scan = person.upload_file(data, name="scan.png", media_type="image/png")
    person.answer(asked.question.id, scan.reference())
    result = hp.wait(asked.question.id)
    assert result.outcome == "answered"
    assert result.value == scan.to_json()
    assert hp.download_file(scan.file_id) == data


def test_refused_uploads_and_references_are_typed_errors(
    hp: Holdpoint, person: Holdpoint, project: str
) -> None:
    with pytest.raises(HoldpointError, match="name"):
        person.upload_file(b"no name")
    with pytest.raises(ForbiddenError):
        hp.upload_file(b"an agent's", name="agent.txt")
    with pytest.raises(TooLargeError):
        person.upload_file(b"x" * (10 * 1024 * 1024 + 1), name="big.bin")
    asked = hp.ask("Send the report", response_type="form", fields=[REPORT], project=project, wait=False)
    text = person.upload_file(b"not a pdf", name="notes.txt", media_type="text/plain")
    with pytest.raises(InvalidError) as refused:
        person.answer(asked.question.id, {"report": text.reference()})
    assert "value.report" in str(refused.value.details)


def test_the_async_client_uploads_and_downloads(server: Server, agent_token: str, project: str) -> None:
    async def scenario() -> None:
        agent = AsyncHoldpoint(server.url, agent_token)
        answerer = AsyncHoldpoint(server.url, server.admin_token)
        async with agent, answerer:
            asked = await agent.ask(
                "Send the report", response_type="form", fields=[REPORT], project=project, wait=False
            )
            data = b"%PDF-1.7 async"
            uploaded = await answerer.upload_file(data, name="async.pdf", media_type="application/pdf")
            assert uploaded.sha256 == hashlib.sha256(data).hexdigest()
            await answerer.answer(asked.question.id, {"report": uploaded.reference()})
            assert (await agent.wait(asked.question.id)).outcome == "answered"
            assert await agent.download_file(uploaded.file_id) == data

    asyncio.run(asyncio.wait_for(scenario(), 60))
