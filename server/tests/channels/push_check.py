"""The web push channel's independent check: a browser's side of RFC 8291 and a push service's side of RFC 8292.

`subscribe` prints a new subscription's keys as a browser makes them (a P-256 key pair and a 16-byte secret), with
the private key so that `check` can decrypt. `check` reads from standard input what a push endpoint received (the
body in base64, the Authorization and Content-Encoding headers) and the subscription's secrets; it decrypts the body
with http_ece and verifies the VAPID JWT with py_vapid against the public key in `k`, and prints the plain text and
the JWT's claims as JSON. Any failure ends it with a traceback and a non-zero status.
"""

import base64
import json
import os
import re
import sys

import http_ece
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import jwt


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def subscribe():
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    secret = key.private_numbers().private_value.to_bytes(32, "big")
    print(json.dumps({"p256dh": b64url(public), "auth": b64url(os.urandom(16)), "private_key": b64url(secret)}))


def check():
    given = json.load(sys.stdin)
    assert given["content_encoding"] == "aes128gcm", given["content_encoding"]
    private_key = ec.derive_private_key(int.from_bytes(unb64url(given["private_key"]), "big"), ec.SECP256R1())
    plaintext = http_ece.decrypt(
        base64.b64decode(given["body"]),
        private_key=private_key,
        auth_secret=unb64url(given["auth"]),
        version="aes128gcm",
    )
    # RFC 8292 §3: `vapid` then the auth-params `t` and `k`, separated by a comma and optional whitespace.
    match = re.fullmatch(r"vapid\s+(.*)", given["authorization"])
    assert match, given["authorization"]
    params = dict(part.strip().split("=", 1) for part in match.group(1).split(","))
    claims = jwt.decode(params["t"], params["k"])
    header = json.loads(unb64url(params["t"].split(".")[0]))
    print(json.dumps({"plaintext": plaintext.decode(), "claims": claims, "jwt_header": header, "k": params["k"]}))


{"subscribe": subscribe, "check": check}[sys.argv[1]]()
