"""The viewer's web server: the page, one websocket per tab, downloads.

Routes:

* ``GET /``: the page (``index.html`` of the built bundle), ``GET /static/...``: its files;
* ``GET /api/health``: ``{"ok", "version", "sessions", "protocol"}``;
* ``GET /api/download/{token}``: a file the page asked for (BVH or glTF export), by a random
  one-time-ish token that lives as long as the tab's session;
* ``GET /api/body/{key}``: a skeleton's body, the skinned mesh the page draws
  (:mod:`motionmatch.viewer.body`);
* ``WS /ws``: the session protocol (:mod:`motionmatch.viewer.protocol`,
  :mod:`motionmatch.viewer.messages`).

Each websocket is one :class:`~motionmatch.viewer.session.Session` with its own 60 Hz
thread; closing the tab (or any disconnect) stops and frees it. Text messages are parsed
and validated here, on the event loop, so that a malformed or excessive message is
answered at once with an error (and the session goes on); valid ones are queued for the
session's next tick. Pose frames go out through a one-slot mailbox: a page that reads
slower than 60 Hz gets the newest frame, not a growing backlog.

Safety: binds to 127.0.0.1 unless told otherwise (:func:`serve` warns when the address is
reachable from other machines); answers any request (page, API or websocket handshake)
whose ``Host`` is not this server's with 421 (:class:`HostCheck`: a DNS-rebinding page,
whose Host and Origin are both its own name, gets nothing); refuses websocket connections
whose ``Origin`` is another site (a page elsewhere cannot drive a local viewer); serves files only from the bundle and
the download tokens; the page names data files by ids from the configured data folders
(:class:`~motionmatch.viewer.data.FileCatalog`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import secrets
import socket
import threading
import time
import webbrowser
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from motionmatch import __version__
from motionmatch.viewer.data import FileCatalog
from motionmatch.viewer.messages import Limits, MessageError, RateLimiter, parse
from motionmatch.viewer.protocol import PROTOCOL_VERSION

__all__ = ["Downloads", "HostCheck", "Viewer", "ViewerServer", "create_app", "host_allowed", "is_loopback", "serve"]


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def dumps(obj: Any) -> str:
    return json.dumps(obj, default=_json_default, separators=(",", ":"), allow_nan=False)


class Downloads:
    """Files prepared for the page (BVH exports), by random token, per session."""

    def __init__(self, max_bytes: int = 512 * 1024 * 1024):
        self._items: dict[str, tuple[str, str, bytes, str]] = {}
        self._lock = threading.Lock()
        self.max_bytes = max_bytes

    def add(self, session: str, filename: str, data: bytes, content_type: str) -> str:
        token = secrets.token_urlsafe(18)
        with self._lock:
            # bounded: drop this session's oldest files when over budget
            while self._items and sum(len(v[2]) for v in self._items.values()) + len(data) > self.max_bytes:
                oldest = next(iter(self._items))
                del self._items[oldest]
            self._items[token] = (session, filename, data, content_type)
        return token

    def get(self, token: str) -> tuple[str, bytes, str] | None:
        with self._lock:
            it = self._items.get(token)
        return None if it is None else (it[1], it[2], it[3])

    def drop_session(self, session: str) -> None:
        with self._lock:
            for k in [k for k, v in self._items.items() if v[0] == session]:
                del self._items[k]


@dataclass
class Viewer:
    """What all sessions share: the database (read-only), data folders, limits, workers."""

    db: Any
    catalog: FileCatalog = field(default_factory=FileCatalog)
    source_description: str = ""
    limits: Limits = field(default_factory=Limits)
    record_seconds: float = 120.0
    history_seconds: float = 10.0
    max_sessions: int = 16
    static_dir: Path | None = None
    allowed_origins: tuple[str, ...] = ()
    adaptive_rate: bool = True   # update background characters less often when a tick nears its budget
    max_divisor: int = 4
    body_mesh: Path | None = None  # a user's skinned glTF mesh drawn instead of the mannequin (where it fits)

    def __post_init__(self) -> None:
        self.sessions: dict[str, Any] = {}
        self.downloads = Downloads()
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="viewer-worker")
        from motionmatch.viewer.body import Bodies

        #: the skeletons' bodies (skinned meshes) the page fetches, built once each
        self.bodies = Bodies(self.pool, user_mesh=self.body_mesh)
        from motionmatch.viewer.characters import _db_extent

        self.db_extent = _db_extent(self.db)
        self._lock = threading.Lock()
        self.warmup = None  # set by prepare()

    def prepare(self, db_path: Path | None = None, *, background: bool = True, log=lambda m: None) -> None:
        """Compile the sessions' kernels before serving (:mod:`motionmatch.viewer.warmup`):
        what a moving character needs now; with ``background``, the rest in a worker
        process loading ``db_path`` (the database's file) and then a thread, while pages
        connect (a session holds the requests that need it until it is ready); without,
        everything now. A viewer never prepared compiles on first use."""
        from motionmatch.viewer.body import database_sample
        from motionmatch.viewer.warmup import Warmup

        self.bodies.register(database_sample(self.db), start=True)  # the page's first body, built meanwhile
        self.warmup = Warmup(self, db_path=db_path if background else None, log=log)
        self.warmup.on_ready(self._warmup_done)
        if background:
            self.warmup.run_first()
            self.warmup.start_rest()
        else:
            self.warmup.run_all()

    def waiting_for(self, stage: str) -> bool:
        """Whether a session must hold a request that uses ``stage``'s kernels (its warm-up
        is still running)."""
        return self.warmup is not None and not self.warmup.ready(stage)

    def _warmup_done(self) -> None:
        for s in list(self.sessions.values()):
            s.submit({"type": "_warmup_ready", "seq": None})

    def close(self) -> None:
        for s in list(self.sessions.values()):
            s.close()
        if self.warmup is not None:
            self.warmup.close()
        self.pool.shutdown(wait=False, cancel_futures=True)


class _Outbox:
    """Messages from a session's thread to its websocket: JSON in order, poses coalesced."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.json: deque[str] = deque()
        self.pose: bytes | None = None
        self.event = asyncio.Event()
        self.closed = False
        self.coalesced = 0

    def _put(self, item) -> None:
        if isinstance(item, (bytes, bytearray)):
            if self.pose is not None:
                self.coalesced += 1
            self.pose = bytes(item)
        else:
            self.json.append(item if isinstance(item, str) else dumps(item))
        self.event.set()

    def put(self, item) -> None:
        """Thread-safe."""
        if self.closed:
            return
        if not isinstance(item, (bytes, bytearray, str)):
            item = dumps(item)  # serialise on the producer's thread
        try:
            self.loop.call_soon_threadsafe(self._put, item)
        except RuntimeError:  # the loop is closing
            self.closed = True


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_allowed(host_header: str | None, bound: str, extra: tuple[str, ...] = ()) -> bool:
    """Whether a request's ``Host`` names this server: an IP address (a rebinding page
    cannot send one for its own name), ``localhost`` (or a name under it), the address
    the server is bound to, or one of ``extra`` (``--allow-host``); case and port ignored."""
    if not host_header:
        return False
    try:
        name = urlsplit("//" + host_header).hostname
    except ValueError:  # e.g. an unclosed IPv6 bracket
        return False
    if not name:
        return False
    name = name.lower().rstrip(".")
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    return (name == "localhost" or name.endswith(".localhost") or name == bound.lower()
            or name in {h.lower().rstrip(".") for h in extra})


class HostCheck:
    """ASGI middleware: requests whose ``Host`` is not this server's (:func:`host_allowed`)
    get ``421 Misdirected Request``; a websocket handshake is refused the same way (or
    closed before it is accepted, HTTP 403, on servers without the denial extension)."""

    def __init__(self, app, bound: str, extra: tuple[str, ...] = ()):
        self.app, self.bound, self.extra = app, bound, tuple(extra)

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
        if host_allowed(host, self.bound, self.extra):
            return await self.app(scope, receive, send)
        body = (f"421 Misdirected Request: this viewer does not answer to the host {host[:100]!r}; "
                "start it with --allow-host NAME to serve a name of your own").encode()
        start = {"status": 421, "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                            (b"content-length", str(len(body)).encode())]}
        if scope["type"] == "http":
            await send({"type": "http.response.start", **start})
            await send({"type": "http.response.body", "body": body})
        elif "websocket.http.response" in (scope.get("extensions") or {}):
            await send({"type": "websocket.http.response.start", **start})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008})


def _origin_ok(origin: str | None, host_header: str | None, allowed: tuple[str, ...]) -> bool:
    """Same-origin pages only (non-browser clients send no Origin)."""
    if origin is None:
        return True
    if origin in allowed:
        return True
    o = urlsplit(origin)
    if not host_header:
        return False
    return o.netloc.lower() == host_header.lower()


def create_app(viewer: Viewer, host: str = "127.0.0.1", allowed_hosts: tuple[str, ...] = ()):
    """The Starlette application of a :class:`Viewer` served at ``host``, behind
    :class:`HostCheck` (``allowed_hosts``: more names it answers to)."""
    from starlette.applications import Starlette
    from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
    from starlette.routing import Mount, Route, WebSocketRoute
    from starlette.staticfiles import StaticFiles
    from starlette.websockets import WebSocket, WebSocketDisconnect

    from motionmatch.viewer.session import Session

    static = viewer.static_dir
    csp = ("default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
           "media-src 'self' blob: mediastream:; connect-src 'self' ws: wss:; object-src 'none'; "
           "base-uri 'none'; frame-ancestors 'none'")
    headers = {"Content-Security-Policy": csp, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
               "Cache-Control": "no-cache"}

    async def index(request):
        if static is None or not (static / "index.html").is_file():
            return PlainTextResponse("the viewer's page is not built (see `motionmatch viewer --help`)", 503)
        return FileResponse(static / "index.html", headers=headers)

    async def health(request):
        return JSONResponse({"ok": True, "version": __version__, "protocol": PROTOCOL_VERSION,
                             "sessions": len(viewer.sessions)})

    async def download(request):
        item = viewer.downloads.get(request.path_params["token"])
        if item is None:
            return PlainTextResponse("no such download (it belongs to a closed tab, or never existed)", 404)
        filename, data, ctype = item
        return Response(data, media_type=ctype,
                        headers={"Content-Disposition": f'attachment; filename="{filename}"', **headers})

    async def body(request):
        key = request.path_params["key"]
        try:
            data = await asyncio.to_thread(viewer.bodies.get, key)
        except Exception as e:  # the mesh could not be built: the page draws the stick figure
            return PlainTextResponse(f"the body of skeleton {key} could not be built: {type(e).__name__}: {e}", 500)
        if data is None:
            return PlainTextResponse(f"no skeleton {key} in this viewer", 404)
        return Response(data, media_type="application/octet-stream",
                        headers={**headers, "Cache-Control": "private, max-age=3600"})

    async def ws_endpoint(websocket: WebSocket):
        if not _origin_ok(websocket.headers.get("origin"), websocket.headers.get("host"), viewer.allowed_origins):
            await websocket.close(code=1008)
            return
        await websocket.accept()
        if len(viewer.sessions) >= viewer.max_sessions:
            await websocket.send_text(dumps({"type": "error", "code": "busy",
                                             "message": f"at most {viewer.max_sessions} open tabs; close one"}))
            await websocket.close(code=1013)
            return
        loop = asyncio.get_running_loop()
        outbox = _Outbox(loop)
        session = Session(viewer, outbox.put)
        viewer.sessions[session.id] = session
        limiter = RateLimiter(viewer.limits.rate, viewer.limits.burst)
        errors = RateLimiter(20.0, 40.0)  # error replies are limited too

        async def sender():
            while True:
                await outbox.event.wait()
                outbox.event.clear()
                while outbox.json:
                    text = outbox.json.popleft()
                    await websocket.send_text(text)
                    session.bytes_sent += len(text)
                if outbox.pose is not None:
                    data, outbox.pose = outbox.pose, None
                    await websocket.send_bytes(data)
                    session.bytes_sent += len(data)

        task = asyncio.create_task(sender())
        session.start()
        try:
            while True:
                msg = await websocket.receive()
                if msg["type"] == "websocket.disconnect":
                    break
                try:
                    if not limiter.allow():
                        raise MessageError("rate_limited", f"more than {viewer.limits.rate:g} messages per second; "
                                           "message dropped")
                    raw = msg.get("text")
                    if raw is None:
                        raw = msg.get("bytes") or b""
                    session.submit(parse(raw, viewer.limits))
                except MessageError as e:
                    if errors.allow():
                        outbox._put({"type": "error", "code": e.code, "message": str(e), "seq": e.seq})
        except WebSocketDisconnect:
            pass
        finally:
            outbox.closed = True
            session.close()
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            viewer.sessions.pop(session.id, None)
            viewer.downloads.drop_session(session.id)

    routes = [Route("/", index), Route("/index.html", index), Route("/api/health", health),
              Route("/api/download/{token}", download), Route("/api/body/{key}", body),
              WebSocketRoute("/ws", ws_endpoint)]
    if static is not None and static.is_dir():
        routes.append(Mount("/static", app=StaticFiles(directory=str(static)), name="static"))
    return HostCheck(Starlette(routes=routes), host, allowed_hosts)


class ViewerServer:
    """uvicorn running :func:`create_app` on a socket bound here (port 0: a free port)."""

    def __init__(self, viewer: Viewer, host: str = "127.0.0.1", port: int = 0, allowed_hosts: tuple[str, ...] = ()):
        import uvicorn

        self.viewer = viewer
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(fam, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host, port))
        except OSError as e:
            self.sock.close()
            raise OSError(f"cannot listen on {host}:{port}: {e.strerror or e}; "
                          "choose another --port (0 picks a free one)") from None
        self.sock.listen(128)  # connections wait in the backlog until uvicorn serves them
        self.host = host
        self.port = self.sock.getsockname()[1]
        from uvicorn.config import WS_PROTOCOLS

        ws = "websockets-sansio" if "websockets-sansio" in WS_PROTOCOLS else "auto"
        config = uvicorn.Config(create_app(viewer, host, allowed_hosts), log_level="warning", ws_max_size=4 * 1024 * 1024,
                                ws_ping_interval=20.0, ws_ping_timeout=20.0, lifespan="off", ws=ws)
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        h = f"[{self.host}]" if ":" in self.host else self.host
        if self.host in ("0.0.0.0", "::"):
            h = "127.0.0.1"
        return f"http://{h}:{self.port}/"

    def run(self) -> None:
        """Serve in this thread until interrupted."""
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self.viewer.close()

    def start(self) -> ViewerServer:
        """Serve on a background thread (tests)."""
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True,
                                        name="viewer-server")
        self._thread.start()
        t0 = time.monotonic()
        while not self.server.started:
            if time.monotonic() - t0 > 20 or not self._thread.is_alive():
                raise RuntimeError("the viewer's server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self.viewer.close()
        with contextlib.suppress(OSError):
            self.sock.close()


def serve(viewer: Viewer, host: str = "127.0.0.1", port: int = 8765, *, open_browser: bool = False,
          allowed_hosts: tuple[str, ...] = (), log=print) -> None:
    """Serve until Ctrl+C, printing the URL (and a warning when reachable from elsewhere)."""
    srv = ViewerServer(viewer, host, port, allowed_hosts)
    if not is_loopback(host):
        log(f"WARNING: listening on {host}: anyone who can reach this machine on port {srv.port} can use the "
            "viewer (and run simulations on it). Use --host 127.0.0.1 to keep it local.")
    log(f"motionmatch viewer: {srv.url}  (Ctrl+C to stop)")
    if open_browser:
        def open_page() -> None:
            if not webbrowser.open(srv.url):
                log(f"--open: no web browser found on this machine; open {srv.url} yourself")

        threading.Timer(0.5, open_page).start()
    srv.run()
