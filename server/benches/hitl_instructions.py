"""Instructions per HITL cycle of a `holdpoint` binary, counted by valgrind's callgrind.

Wall-clock A/Bs on a shared two-core machine move by tens of percent with whatever else runs; an instruction count
does not. This starts `BINARY serve` under callgrind (SQLite in a fresh data dir, or PostgreSQL with `--postgres`, a
fresh database on 127.0.0.1:5432), keeps one person's event stream open, runs N cycles one after another — an agent
asks (`POST /questions`), the person answers (`POST /questions/{id}/answer`), the agent's long-poll reads the answer
(`GET /questions/{id}/wait`) — and prints the total instructions. Run it with N = 0 and N = 400 for each binary and
compare (total(400) - total(0)) / 400: the server's instructions per cycle, start-up excluded.

    python3 server/benches/hitl_instructions.py target/release/holdpoint 400 [--postgres]
"""

import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid


def main() -> None:
    binary, cycles = sys.argv[1], int(sys.argv[2])
    postgres = "--postgres" in sys.argv[3:]
    scratch = tempfile.mkdtemp(prefix="hitl-instructions-")
    token = "hp_bench_" + uuid.uuid4().hex
    env = dict(
        os.environ,
        HOLDPOINT_ADDR="127.0.0.1:0",
        HOLDPOINT_DATA_DIR=os.path.join(scratch, "data"),
        HOLDPOINT_BOOTSTRAP_TOKEN=token,
        # As the benchmark suite: the abuse limits would cap one token asking from one address.
        HOLDPOINT_CREATE_RATE_BURST="1000000",
        HOLDPOINT_CREATE_RATE_PER_SECOND="1000000",
        HOLDPOINT_CREATE_IP_RATE_BURST="1000000",
        HOLDPOINT_CREATE_IP_RATE_PER_SECOND="1000000",
    )
    env.pop("RUST_LOG", None)
    env.pop("DATABASE_URL", None)
    if postgres:
        database = "hitl_" + uuid.uuid4().hex[:12]
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"CREATE DATABASE {database}"], check=True)
        env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{database}"
    out = os.path.join(scratch, "callgrind.out")
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary, "serve"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=open(os.path.join(scratch, "server.log"), "w"),
        text=True,
    )
    assert server.stdout is not None
    host = None
    for line in server.stdout:
        if line.startswith("holdpoint listening on "):
            host = line.split()[-1].removeprefix("http://")
            break
    assert host, f"the server did not start; see {scratch}/server.log"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def follow_events() -> None:
        stream = http.client.HTTPConnection(host, timeout=600)
        stream.request("GET", "/api/v1/events", headers={**headers, "Accept": "text/event-stream"})
        response = stream.getresponse()
        while response.read1(65536):
            pass

    threading.Thread(target=follow_events, daemon=True).start()
    time.sleep(2)
    api = http.client.HTTPConnection(host, timeout=600)

    def call(method: str, path: str, body: object = None) -> dict:
        api.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        response = api.getresponse()
        data = response.read()
        assert response.status < 300, (method, path, response.status, data)
        return json.loads(data)

    for n in range(cycles):
        question = call("POST", "/api/v1/questions", {
            "title": f"Agent 1: may I deploy build {n}?",
            "body": "The canary is green; the change touches the billing service.",
            "project": "bench",
            "context": {"sent_us": n},
        })
        call("POST", f"/api/v1/questions/{question['id']}/answer", {"value": "yes, go ahead"})
        assert call("GET", f"/api/v1/questions/{question['id']}/wait?timeout_seconds=30")["status"] == "answered"
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=120)
    with open(out) as counts:
        total = next(int(line.split()[1]) for line in counts if line.startswith("summary:"))
    print(f"{binary}: {cycles} cycles, {total} instructions")


if __name__ == "__main__":
    main()
