"""A real SMTP server (aiosmtpd) on loopback for the email channel's tests.

Prints `LISTENING <port>` once it accepts connections, then one JSON line per message it accepted: the envelope,
the headers, and each MIME part as Python's own email parser reads it (for the HTML part, also what an HTML parser
makes of it: the links with their decoded addresses, the text, the tags). Recipients whose address starts with
`unknown@` are refused for good (550), with `busy@` for now (451), as a real server does.
"""

import asyncio
import email
import email.policy
import json
import sys
from html.parser import HTMLParser

from aiosmtpd.smtp import SMTP


class Html(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links = []
        self.tags = set()
        self.text = []
        self._href = None
        self._link_text = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._link_text = []

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.links.append({"href": self._href, "text": "".join(self._link_text).strip()})
            self._href = None

    def handle_data(self, data):
        self.text.append(data)
        if self._href is not None:
            self._link_text.append(data)


class Handler:
    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.startswith("unknown@"):
            return "550 5.1.1 No such user here"
        if address.startswith("busy@"):
            return "451 4.3.0 Mailbox busy, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        parts = []
        for part in message.walk():
            if part.is_multipart():
                continue
            entry = {
                "content_type": part.get_content_type(),
                "charset": part.get_content_charset(),
                "transfer_encoding": part.get("Content-Transfer-Encoding"),
                "content": part.get_content(),
            }
            if entry["content_type"] == "text/html":
                html = Html()
                html.feed(entry["content"])
                entry["links"] = html.links
                entry["tags"] = sorted(html.tags)
                entry["text"] = "".join(html.text)
            parts.append(entry)
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "subject": str(message["Subject"]),
            "from": str(message["From"]),
            "to": str(message["To"]),
            "content_type": message.get_content_type(),
            "auto_submitted": message.get("Auto-Submitted"),
            "message_id": message.get("Message-ID"),
            "parts": parts,
        }
        print(json.dumps(record), flush=True)
        return "250 Message accepted"


async def main():
    loop = asyncio.get_running_loop()
    # The port to listen on, if the test names one (a server that comes up where one was down); else any free one.
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = await loop.create_server(lambda: SMTP(Handler(), hostname="sink.test"), "127.0.0.1", port)
    print(f"LISTENING {server.sockets[0].getsockname()[1]}", flush=True)
    # Ends when the test closes our standard input (or kills us).
    await loop.run_in_executor(None, sys.stdin.read)


asyncio.run(main())
