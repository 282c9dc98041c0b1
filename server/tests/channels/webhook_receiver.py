"""A webhook receiver on loopback for the webhooks' tests, verifying every request with the `standardwebhooks`
package (the Standard Webhooks specification's own Python implementation), not with anything of Holdpoint's.

Prints `LISTENING <port>`, then one JSON line per request it received: the path, the Standard Webhooks headers,
whether a known secret verified it (and the error if none did), the body as received and parsed, whether the body
names this receiver's own URL as the question's `callback_url` (the check docs/webhooks.md asks of a callback's
receiver), and the status it answered.
Reads commands from stdin, one JSON object per line:
  {"secret": "whsec_..."}        verify with this secret too
  {"fail": N, "status": 503}     answer the next N requests with this status
  {"fail_all": 503}              answer every request with this status until told otherwise ({"fail_all": null})
  {"unverified": 410}            answer requests no known secret verifies with this status (401 until told)
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

lock = threading.Lock()
secrets = []
failing = {"next": 0, "status": 503, "all": None, "unverified": 401}


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(length).decode()
        headers = {name.lower(): value for name, value in self.headers.items()}
        verified, error = False, "no secret known yet"
        with lock:
            known = list(secrets)
            if failing["all"] is not None:
                status = failing["all"]
            elif failing["next"] > 0:
                failing["next"] -= 1
                status = failing["status"]
            else:
                status = 204
            unverified_status = failing["unverified"]
        for secret in known:
            try:
                Webhook(secret).verify(raw, headers)
                verified, error = True, None
                break
            except WebhookVerificationError as e:
                error = str(e)
        if not verified:
            status = unverified_status
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw
        own_url = f"http://127.0.0.1:{self.server.server_address[1]}{self.path}"
        try:
            names_own_url = body["data"]["question"]["callback_url"] == own_url
        except (TypeError, KeyError):
            names_own_url = False
        line = {
            "path": self.path,
            "id": headers.get("webhook-id"),
            "timestamp": headers.get("webhook-timestamp"),
            "signature": headers.get("webhook-signature"),
            "content_type": headers.get("content-type"),
            "verified": verified,
            "error": error,
            "answered": status,
            "body": body,
            "raw": raw,
            "names_own_url": names_own_url,
            "received_at": time.time(),
        }
        # Recorded before the answer goes out: the sender's next request may come the moment it has the answer, and
        # its handler's thread must not record it first.
        with lock:
            print(json.dumps(line), flush=True)
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def commands():
    for line in sys.stdin:
        command = json.loads(line)
        with lock:
            if "secret" in command:
                secrets.append(command["secret"])
            if "fail" in command:
                failing["next"] = command["fail"]
                failing["status"] = command.get("status", 503)
            if "fail_all" in command:
                failing["all"] = command["fail_all"]
            if "unverified" in command:
                failing["unverified"] = command["unverified"]
        print(json.dumps({"ack": command}), flush=True)


server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
threading.Thread(target=commands, daemon=True).start()
print(f"LISTENING {server.server_address[1]}", flush=True)
server.serve_forever()
