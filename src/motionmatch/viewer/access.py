"""Who may use the viewer beyond this machine: a secret token.

A viewer that listens on an address other than loopback (``--host 0.0.0.0``) needs a
token (``--token``, else a random one): it prints its URL with the token
(``http://host:port/?token=...``, as notebook servers do). :class:`TokenCheck` admits a
request (the page, its files, the API, downloads, the websocket) that carries the token
as ``?token=``, in the cookie that the first such answer sets (so the page's own
requests and its websocket carry it without knowing it), or as an ``Authorization:
token ...`` header (scripts); any other request gets 401 (a websocket is refused before
it opens). On loopback no token is needed unless one is given.
"""

from __future__ import annotations

import re
import secrets
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs, quote

__all__ = ["TokenCheck", "check_token", "cookie_name", "new_token", "refuse", "token_url"]


def new_token() -> str:
    """A random token (32 URL-safe characters)."""
    return secrets.token_urlsafe(24)


def cookie_name(port: int) -> str:
    """The cookie of the viewer on ``port`` (cookies ignore ports: two viewers on one host
    keep theirs apart)."""
    return f"motionmatch-token-{int(port)}"


def token_url(url: str, token: str | None) -> str:
    """``url`` with ``?token=`` when there is a token."""
    return url if not token else f"{url}?token={quote(token, safe='')}"


def _given(scope, port: int) -> tuple[str | None, bool]:
    """The token a request carries, and whether it came in the query string."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if query.get("token"):
        return query["token"][0], True
    headers = dict(scope.get("headers") or [])
    auth = headers.get(b"authorization", b"").decode("latin-1").split(None, 1)
    if len(auth) == 2 and auth[0].lower() in ("token", "bearer"):
        return auth[1].strip(), False
    cookies = SimpleCookie()
    try:
        cookies.load(headers.get(b"cookie", b"").decode("latin-1"))
    except CookieError:
        return None, False
    c = cookies.get(cookie_name(port))
    return (c.value if c is not None else None), False


async def refuse(scope, send, status: int, text: str) -> None:
    """Answer an HTTP request, or refuse a websocket handshake, with ``status`` and ``text``
    (a websocket on a server without the denial extension is closed before it opens)."""
    body = text.encode()
    start = {"status": status, "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                           (b"content-length", str(len(body)).encode())]}
    if scope["type"] == "http":
        await send({"type": "http.response.start", **start})
        await send({"type": "http.response.body", "body": body})
    elif "websocket.http.response" in (scope.get("extensions") or {}):
        await send({"type": "websocket.http.response.start", **start})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008})


def check_token(token: str) -> str:
    """``token`` if it can be one (8 to 256 URL-safe characters), else ``ValueError``."""
    if not re.fullmatch(r"[A-Za-z0-9._~-]{8,256}", token or ""):
        raise ValueError("a viewer token must be 8 to 256 characters of A-Z a-z 0-9 . _ ~ - "
                         f"(got {len(token or '')} characters); leave --token out for a random one")
    return token


class TokenCheck:
    """ASGI middleware: only requests that carry ``token`` (see the module doc)."""

    def __init__(self, app, token: str, port: int):
        self.app, self.token, self.port = app, check_token(token), int(port)

    def set_port(self, port: int) -> None:
        """The port the server got (its cookie's name)."""
        self.port = int(port)

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        given, in_query = _given(scope, self.port)
        if given is not None and secrets.compare_digest(given.encode(), self.token.encode()):
            if in_query and scope["type"] == "http":
                return await self.app(scope, receive, self._with_cookie(send))
            return await self.app(scope, receive, send)
        await refuse(scope, send, 401, "401 Unauthorized: this viewer needs its token: open the URL it printed "
                     "(http://HOST:PORT/?token=...), or send the header 'Authorization: token ...'")

    def _with_cookie(self, send):
        cookie = (f"{cookie_name(self.port)}={self.token}; Path=/; HttpOnly; SameSite=Strict").encode("latin-1")

        async def send_with_cookie(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie)]}
            await send(message)

        return send_with_cookie
