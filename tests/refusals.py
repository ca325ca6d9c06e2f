"""Another local user against a server of ours that is guarded by a token (jupyter_gtc/vertex/guard.py):
refused before the server reads a byte of the body, served when it shows the token.

"Before the body" is what matters: a server that read first and refused after could be held by
anyone on the machine announcing a large body and never sending it. So the refused requests send
their headers alone and read the answer to the connection's close; a server that waited for the
body would leave them hanging until their timeout, and the run fails."""

from __future__ import annotations

import json
import subprocess

# Run as the other user; its one line of stdin is JSON (the token never in argv, where anyone sees it).
_AS_ANOTHER_USER = r"""
import http.client, json, socket, sys
given = json.loads(sys.stdin.readline())
port, path = given["port"], given["path"]
def announce(headers):  # headers only: the answer must come before any of the body
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n%s"
               "Content-Length: 1000000\r\n\r\n" % (path, port, headers)).encode())
    answer = b""
    while chunk := s.recv(65536):  # the refusal, then the connection closed unread
        answer += chunk
    s.close()
    answer = answer.decode(errors="replace")
    return [int(answer.split()[1]), answer.partition("\r\n\r\n")[2]]
refused = {"none": announce(""), "wrong": announce("Authorization: Bearer nope\r\n")}
c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
c.request("POST", path, body=given["body"], headers={"Content-Type": "application/json",
                                                     "Authorization": "Bearer " + given["token"]})
r = c.getresponse()
print(json.dumps({**refused, "token": [r.status, json.loads(r.read())]}))
"""


def post_as_another_user(user, port: int, token: str, path: str, body: str) -> dict:
    """``POST path`` on the loopback ``port`` as ``user`` (tests/non_root.py's ``normal_user``),
    three times: its headers alone without a token (``"none"``) and with a wrong one
    (``"wrong"``), each ``[status, the answer's body as text]``; then the whole request, ``body``
    and ``token`` (``"token"``: ``[status, the answer's JSON]``)."""
    given = json.dumps({"port": port, "token": token, "path": path, "body": body})
    ran = subprocess.run(["runuser", "-u", user.name, "--", user.python_exe, "-c", _AS_ANOTHER_USER],
                         input=given + "\n", env=user.env(), capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)
