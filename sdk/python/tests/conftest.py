"""The real ``holdpoint serve`` for the whole session: a free loopback port, a fresh SQLite database in a temporary
directory, a bootstrap admin token (the person who answers) and, per test, an ``agent`` token (the agent that asks).

The binary comes from ``HOLDPOINT_BIN`` (``cargo xtask test`` sets it to ``target/debug/holdpoint``).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from holdpoint_client import Holdpoint

STARTUP_SECONDS = 30


@dataclass
class Server:
    url: str
    admin_token: str
    process: subprocess.Popen[str]
    log: list[str]

    def api(self, method: str, path: str, token: str | None = None, **kwargs: object) -> httpx.Response:
        """A raw API call, as a person's tool or a test outside the library makes it."""
        headers = {"Authorization": f"Bearer {token or self.admin_token}"}
        return httpx.request(method, f"{self.url}/api/v1{path}", headers=headers, timeout=30, **kwargs)  # type: ignore[arg-type]

    def create_token(self, role: str) -> str:
        """A token the operator's bootstrap token makes: a service identity, never one of a quorum's people."""
        response = self.api("POST", "/tokens", json={"name": f"{role}-{uuid.uuid4().hex[:8]}", "role": role})
        assert response.status_code == 201, response.text
        secret: str = response.json()["secret"]
        return secret

    def person_token(self, role: str) -> tuple[str, str]:
        """A new person (an admin account) and a token they made themselves with ``role``: it counts as them, as a
        quorum of people needs. Made as a person makes one: signed in, through the API with the session's CSRF
        token. Returns the username and the token."""
        username = f"p{uuid.uuid4().hex[:10]}"
        password = secrets.token_hex(16)
        added = self.api("POST", "/members", json={"username": username, "password": password, "role": "admin"})
        assert added.status_code == 201, added.text
        with httpx.Client(base_url=self.url, timeout=30) as browser:
            signed_in = browser.post(
                "/auth/signin", data={"username": username, "password": password}, headers={"Origin": self.url}
            )
            assert signed_in.status_code in (302, 303), signed_in.text
            page = browser.get("/settings").text
            csrf = re.search(r'name="csrf" value="([^"]+)"', page)
            assert csrf is not None, "the signed-in page carries the session's CSRF token"
            made = browser.post(
                "/api/v1/tokens",
                json={"name": f"{username}-{role}", "role": role},
                headers={"X-CSRF-Token": csrf.group(1)},
            )
            assert made.status_code == 201, made.text
            secret: str = made.json()["secret"]
        return username, secret


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    binary = os.environ.get("HOLDPOINT_BIN")
    if not binary:
        pytest.exit("HOLDPOINT_BIN is not set: run the suite with `cargo xtask test`, or point it at a holdpoint build")
    data_dir = tempfile.mkdtemp(prefix="holdpoint-sdk-python-")
    admin_token = f"hp_sdk_{secrets.token_hex(16)}"
    env = {name: value for name, value in os.environ.items() if name != "DATABASE_URL"}
    env.update(
        HOLDPOINT_ADDR="127.0.0.1:0",
        HOLDPOINT_DATA_DIR=data_dir,
        HOLDPOINT_BOOTSTRAP_TOKEN=admin_token,
        # Lets tests ask questions that expire or default within a second.
        HOLDPOINT_MIN_TIMEOUT_SECONDS="1",
        RUST_LOG=os.environ.get("RUST_LOG", "warn"),
    )
    process = subprocess.Popen(
        [binary, "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    log: list[str] = []
    found = threading.Event()
    address: list[str] = []

    def drain() -> None:
        # Read to the end, so a chatty server never blocks on a full pipe.
        assert process.stdout is not None
        for line in process.stdout:
            log.append(line)
            match = re.search(r"listening on (http://\S+)", line)
            if match and not found.is_set():
                address.append(match.group(1))
                found.set()

    threading.Thread(target=drain, daemon=True).start()
    if not found.wait(STARTUP_SECONDS):
        process.kill()
        pytest.exit(f"holdpoint did not start within {STARTUP_SECONDS} s:\n{''.join(log)}")
    yield Server(url=address[0], admin_token=admin_token, process=process, log=log)
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def agent_token(server: Server) -> str:
    return server.create_token("agent")


@pytest.fixture
def hp(server: Server, agent_token: str) -> Iterator[Holdpoint]:
    """The agent's client: asks, never answers."""
    with Holdpoint(server.url, agent_token) as client:
        yield client


@pytest.fixture
def person(server: Server) -> Iterator[Holdpoint]:
    """A person's client (the admin token): answers, approves, cancels."""
    with Holdpoint(server.url, server.admin_token) as client:
        yield client


@pytest.fixture
def project() -> str:
    """A project of the test's own, so lists and event streams see only this test's questions."""
    return f"sdk-{uuid.uuid4().hex[:12]}"
