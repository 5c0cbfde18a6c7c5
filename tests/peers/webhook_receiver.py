"""A webhook receiver for the e2e tests that verifies every delivery with the published
Standard Webhooks verifier (the `standardwebhooks` package from PyPI), as a receiver of
fleetgate's notifications would: `Webhook(SECRET).verify(body, headers)`.

Every `POST /hook` is verified and appended to OUT as one JSON line:

    {"accepted": bool, "why": "" or the verifier's refusal, "headers": {name: value}, "body": str}

and answered 204 when accepted, 401 when refused. The receiver's clock is injectable: `POST
/clock` with a body of seconds sets how far ahead of the real time the verifier judges "now"
(a replay "six minutes later" without waiting six minutes); the verifier itself is untouched.
Prints `listening PORT` on stdout once bound.

Usage: webhook_receiver.py SECRET OUT
"""

import json
import sys
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import standardwebhooks.webhooks as library
from standardwebhooks import Webhook

SECRET, OUT = sys.argv[1], sys.argv[2]
AHEAD = [0.0]


class Clock(datetime):
    """The library's `datetime`, with `now` as far ahead as the test set."""

    @classmethod
    def now(cls, tz=None):
        return datetime.now(tz) + timedelta(seconds=AHEAD[0])


library.datetime = Clock
VERIFIER = Webhook(SECRET)


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if self.path == "/clock":
            AHEAD[0] = float(body.decode())
            self.send_response(204)
            self.end_headers()
            return
        if self.path != "/hook":
            self.send_error(404)
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            VERIFIER.verify(body, headers)
            accepted, why = True, ""
        except Exception as e:  # the verifier's refusal, whatever its class
            accepted, why = False, f"{type(e).__name__}: {e}"
        with open(OUT, "a", encoding="utf-8") as out:
            out.write(json.dumps({"accepted": accepted, "why": why, "headers": headers, "body": body.decode()}) + "\n")
        self.send_response(204 if accepted else 401)
        self.end_headers()

    def log_message(self, *_):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
