"""The viewer's web server: the page, one websocket per tab, downloads.

Routes:

* ``GET /``: the page (``index.html`` of the built bundle), ``GET /static/...``: its files;
* ``GET /api/health``: ``{"ok", "version", "sessions", "closing", "jobs", "waiting_bytes",
  "protocol"}`` (``closing``: sessions of closed tabs whose thread has not ended yet, they
  count against the limit; ``jobs``: GenMM syntheses and exports running;
  ``waiting_bytes``: replies waiting for pages that read slowly);
* ``GET /api/download/{token}``: a file the page asked for (BVH or glTF export), by a random
  one-time-ish token that lives as long as the tab's session;
* ``GET /api/body/{key}``: a skeleton's body, the skinned mesh the page draws
  (:mod:`motionmatch.viewer.body`);
* ``POST /api/rig/{session}``: "Use my character": the body is a rig file (``.glb``/``.gltf``
  with a skeleton, optionally skinned, or ``.bvh``; the header ``X-Rig-Name`` its file name,
  ``X-Rig-Key`` the tab's upload key of its ``welcome`` message), at most
  :data:`~motionmatch._limits.MAX_RIG_UPLOAD_BYTES`, from this site's page only (the
  ``Origin`` check of the websocket); read on a worker thread
  (:meth:`~motionmatch.viewer.rig.RigLoader.load_upload`) and handed to the tab's session,
  which draws every motion-matching character on it. Answers ``{"ok": true, "name",
  "joints", "skinned", "warnings"}``, or 400/403/404/409/413 with ``{"ok": false, "error":
  one line}``; a refused file leaves the session as it was and nothing on disk;
* ``WS /ws``: the session protocol (:mod:`motionmatch.viewer.protocol`,
  :mod:`motionmatch.viewer.messages`).

Each websocket is one :class:`~motionmatch.viewer.session.Session` with its own 60 Hz
thread; closing the tab (or any disconnect) stops it, cancels its jobs and drops its
downloads. The event loop, which streams every tab's pose frames, does no per-message
work beyond constant-time checks: the page's text goes to the session's bounded
:class:`~motionmatch.viewer.inbox.Inbox` (refused at once when the tab sends too many,
owes server time or has a full queue); the session's thread parses, validates and
carries it out, charging the tab for the time it took. Replies and pose frames go out
through a bounded :class:`~motionmatch.viewer.outbox.Outbox` (poses coalesced: a page
that reads slower than 60 Hz gets the newest frame, not a growing backlog).

Safety: binds to 127.0.0.1 unless told otherwise; on any other address it needs a token
(:mod:`motionmatch.viewer.access`: the printed URL carries it, then a cookie); answers
any request (page, API or websocket handshake) whose ``Host`` is not this server's with
421 (:class:`HostCheck`: a DNS-rebinding page, whose Host and Origin are both its own
name, gets nothing); refuses websocket connections whose ``Origin`` is another site (a
page elsewhere cannot drive a local viewer); serves files only from the bundle and the
download tokens; the page names data files by ids from the configured data folders
(:class:`~motionmatch.viewer.data.FileCatalog`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import secrets
import socket
import threading
import time
import webbrowser
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from motionmatch import __version__
from motionmatch.errors import MotionMatchError
from motionmatch.viewer.access import TokenCheck, check_token, new_token, refuse, token_url
from motionmatch.viewer.data import FileCatalog
from motionmatch.viewer.jobs import ClientJobs
from motionmatch.viewer.messages import Limits, MessageError, RateLimiter
from motionmatch.viewer.outbox import Outbox, dumps
from motionmatch.viewer.protocol import PROTOCOL_VERSION

__all__ = ["DownloadError", "Downloads", "HostCheck", "Viewer", "ViewerServer", "content_disposition", "create_app",
           "host_allowed", "is_loopback", "serve"]

MiB = 1024 * 1024


class DownloadError(MotionMatchError):
    """A download that cannot be kept (its tab closed, it is too large, the space is full)."""


class Downloads:
    """Files prepared for the pages (exports), by random token, per session (tab): a tab's
    files go when it closes (:meth:`close_session`; a file finished after that is refused);
    over ``per_session`` or the viewer's ``max_bytes``, the tab's own oldest files make
    room, never another tab's."""

    def __init__(self, max_bytes: int = 512 * MiB, per_session: int = 64 * MiB):
        self._items: dict[str, tuple[str, str, bytes, str]] = {}
        self._open: dict[str, int] = {}  # open session -> bytes of its files
        self._bytes = 0
        self._lock = threading.Lock()
        self.max_bytes, self.per_session = int(max_bytes), int(per_session)

    def open_session(self, session: str) -> None:
        with self._lock:
            self._open.setdefault(session, 0)

    def add(self, session: str, filename: str, data: bytes, content_type: str) -> str:
        """Keep ``data`` for ``session``'s page; its token. Raises :class:`DownloadError`."""
        size = len(data)
        with self._lock:
            if session not in self._open:
                raise DownloadError(f"{filename}: its tab was closed before the file was ready")
            if size > min(self.per_session, self.max_bytes):
                raise DownloadError(f"{filename} is {size / MiB:.0f} MiB; the viewer keeps at most "
                                    f"{min(self.per_session, self.max_bytes) / MiB:.0f} MiB per tab "
                                    "(record fewer seconds: --record-seconds)")
            own = [k for k, v in self._items.items() if v[0] == session]  # oldest first
            while own and (self._bytes + size > self.max_bytes or self._open[session] + size > self.per_session):
                self._remove(own.pop(0))
            if self._bytes + size > self.max_bytes:
                raise DownloadError(f"{filename}: the viewer's space for downloads ({self.max_bytes / MiB:.0f} MiB) is "
                                    "full with other tabs' files; close those tabs, then export again")
            token = secrets.token_urlsafe(18)
            self._items[token] = (session, filename, data, content_type)
            self._bytes += size
            self._open[session] += size
        return token

    def _remove(self, token: str) -> None:
        session, _, data, _ = self._items.pop(token)
        self._bytes -= len(data)
        if session in self._open:
            self._open[session] -= len(data)

    def get(self, token: str) -> tuple[str, bytes, str] | None:
        with self._lock:
            it = self._items.get(token)
        return None if it is None else (it[1], it[2], it[3])

    def close_session(self, session: str) -> None:
        """The tab closed: its files go, and none is kept for it from now on."""
        with self._lock:
            for k in [k for k, v in self._items.items() if v[0] == session]:
                self._remove(k)
            self._open.pop(session, None)

    @property
    def bytes(self) -> int:
        return self._bytes


def content_disposition(filename: str) -> str:
    """``Content-Disposition`` of a download named ``filename`` (any Unicode): RFC 6266's
    ``filename*`` (UTF-8, RFC 5987) and an ASCII ``filename`` for older clients."""
    ascii_name = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in filename)
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(filename, safe='')}"


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
    rig: Any = None  # the ViewerRig every session starts with (`motionmatch viewer --rig RIG`; viewer.rig)

    def __post_init__(self) -> None:
        self.sessions: dict[str, Any] = {}
        self._closing: set[Any] = set()  # sessions of closed tabs whose thread still runs
        self.outboxes: dict[str, Outbox] = {}  # each open tab's replies waiting to go out
        self.downloads = Downloads()
        #: background jobs running per client (one of each kind, across the client's tabs)
        self.client_jobs = ClientJobs()
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="viewer-worker")
        from motionmatch.viewer.body import Bodies

        #: the skeletons' bodies (skinned meshes) the page fetches, built once each
        self.bodies = Bodies(self.pool, user_mesh=self.body_mesh)
        from motionmatch.viewer.rig import RigLoader

        #: reads users' rigs ("Use my character", --rig) for this database
        self.rigs = RigLoader(self.db, self.bodies)
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

    def closing(self) -> int:
        """Sessions of closed tabs whose thread has not ended yet."""
        with self._lock:
            self._closing = {s for s in self._closing if s.alive}
            return len(self._closing)

    def at_capacity(self) -> bool:
        """Whether ``max_sessions`` sessions run (open tabs and closed ones still ending)."""
        return len(self.sessions) + self.closing() >= self.max_sessions

    def session_closed(self, session) -> None:
        """A tab closed: its session is no longer open, but counts until its thread ends."""
        self.sessions.pop(session.id, None)
        if session.alive:
            with self._lock:
                self._closing.add(session)

    def _warmup_done(self) -> None:
        for s in list(self.sessions.values()):
            s.submit({"type": "_warmup_ready", "seq": None})

    def close(self) -> None:
        for s in list(self.sessions.values()):
            s.close()
        if self.warmup is not None:
            self.warmup.close()
        self.pool.shutdown(wait=False, cancel_futures=True)
        from motionmatch.viewer.pose import close_loader

        close_loader()  # no pose classifier left training in the background


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
        await refuse(scope, send, 421, f"421 Misdirected Request: this viewer does not answer to the host "
                     f"{host[:100]!r}; start it with --allow-host NAME to serve a name of your own")


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


def create_app(viewer: Viewer, host: str = "127.0.0.1", allowed_hosts: tuple[str, ...] = (), token: str | None = None,
               port: int = 0):
    """The Starlette application of a :class:`Viewer` served at ``host``, behind
    :class:`HostCheck` (``allowed_hosts``: more names it answers to) and, with a ``token``,
    :class:`~motionmatch.viewer.access.TokenCheck` (``port``: its cookie's name)."""
    from starlette.applications import Starlette
    from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
    from starlette.routing import Mount, Route, WebSocketRoute
    from starlette.staticfiles import StaticFiles
    from starlette.websockets import WebSocket, WebSocketDisconnect

    from motionmatch.viewer.session import Session

    static = viewer.static_dir
    upload_slots = threading.BoundedSemaphore(2)  # rig uploads read at once
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
                             "sessions": len(viewer.sessions), "closing": viewer.closing(),
                             "jobs": viewer.client_jobs.running(),
                             "waiting_bytes": sum(o.waiting_bytes for o in list(viewer.outboxes.values()))})

    async def download(request):
        item = viewer.downloads.get(request.path_params["token"])
        if item is None:
            return PlainTextResponse("no such download (it belongs to a closed tab, or never existed)", 404)
        filename, data, ctype = item
        return Response(data, media_type=ctype,
                        headers={"Content-Disposition": content_disposition(filename), **headers})

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

    async def rig_upload(request):
        from motionmatch._limits import MAX_RIG_UPLOAD_BYTES

        def refused(status: int, text: str):
            return JSONResponse({"ok": False, "error": text}, status, headers=headers)

        if not _origin_ok(request.headers.get("origin"), request.headers.get("host"), viewer.allowed_origins):
            return refused(403, "a rig may be sent only from this viewer's own page")
        session = viewer.sessions.get(request.path_params["session"])
        if session is None:
            return refused(404, "no such session (its tab closed): reload the page")
        key = request.headers.get("x-rig-key") or ""
        if not secrets.compare_digest(key.encode(), session.upload_key.encode()):
            return refused(403, "the upload does not carry this tab's key (X-Rig-Key of its welcome message)")
        name = unquote(request.headers.get("x-rig-name") or "")
        declared = request.headers.get("content-length")
        too_big = (f"{name or 'the rig'}: over the {MAX_RIG_UPLOAD_BYTES:,} bytes a rig file may have here; "
                   "give a smaller file (fewer or smaller textures)")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_RIG_UPLOAD_BYTES):
            return refused(413, too_big)
        if not upload_slots.acquire(blocking=False):
            return refused(409, "another rig is being read; wait for it")
        try:
            chunks, size = [], 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_RIG_UPLOAD_BYTES:
                    return refused(413, too_big)
                chunks.append(chunk)
            if size == 0:
                return refused(400, f"{name or 'the rig'}: an empty file; choose a rig file")
            try:
                rig = await asyncio.to_thread(viewer.rigs.load_upload, b"".join(chunks), name)
            except MotionMatchError as e:
                return refused(400, str(e))
        finally:
            upload_slots.release()
        session.submit({"type": "_rig_loaded", "seq": None, "rig": rig})
        return JSONResponse({"ok": True, "name": rig.name, "joints": rig.joints, "skinned": rig.file.skinned,
                             "warnings": list(rig.warnings)}, headers=headers)

    async def ws_endpoint(websocket: WebSocket):
        if not _origin_ok(websocket.headers.get("origin"), websocket.headers.get("host"), viewer.allowed_origins):
            await websocket.close(code=1008)
            return
        await websocket.accept()
        if viewer.at_capacity():
            await websocket.send_text(dumps({"type": "error", "code": "busy",
                                             "message": f"at most {viewer.max_sessions} open tabs (closed ones count "
                                                        "until their work has stopped); close one"}))
            await websocket.close(code=1013)
            return
        outbox = Outbox(asyncio.get_running_loop(), viewer.limits.outbox_bytes)
        client = websocket.client.host if websocket.client is not None else "unknown"
        session = Session(viewer, outbox.put, client=client)
        viewer.sessions[session.id] = session
        viewer.outboxes[session.id] = outbox
        errors = RateLimiter(20.0, 40.0)  # refusals are answered at this rate at most

        async def sender():
            while True:
                await outbox.event.wait()
                outbox.event.clear()
                while (item := outbox.take()) is not None:
                    if isinstance(item, str):
                        await websocket.send_text(item)
                    else:
                        await websocket.send_bytes(item)
                    session.bytes_sent += len(item)

        task = asyncio.create_task(sender())
        session.start()
        try:
            while True:
                msg = await websocket.receive()
                if msg["type"] == "websocket.disconnect":
                    break
                raw = msg.get("text")
                try:
                    session.receive(raw if raw is not None else (msg.get("bytes") or b""))
                except MessageError as e:
                    if errors.allow():
                        outbox.put({"type": "error", "code": e.code, "message": str(e), "seq": e.seq})
        except WebSocketDisconnect:
            pass
        finally:
            outbox.closed = True
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            viewer.outboxes.pop(session.id, None)
            viewer.session_closed(session)
            await asyncio.to_thread(session.close)  # its work stops; the loop streams the other tabs meanwhile

    routes = [Route("/", index), Route("/index.html", index), Route("/api/health", health),
              Route("/api/download/{token}", download), Route("/api/body/{key}", body),
              Route("/api/rig/{session}", rig_upload, methods=["POST"]),
              WebSocketRoute("/ws", ws_endpoint)]
    if static is not None and static.is_dir():
        routes.append(Mount("/static", app=StaticFiles(directory=str(static)), name="static"))
    app = Starlette(routes=routes)
    return HostCheck(TokenCheck(app, token, port) if token else app, host, allowed_hosts)


class ViewerServer:
    """uvicorn running :func:`create_app` on a socket bound here (port 0: a free port).

    ``token``: what every request must carry (:mod:`motionmatch.viewer.access`); a host
    other than loopback gets a random one when none is given, loopback none."""

    def __init__(self, viewer: Viewer, host: str = "127.0.0.1", port: int = 0, allowed_hosts: tuple[str, ...] = (),
                 token: str | None = None):
        import uvicorn

        self.viewer = viewer
        if token is not None:
            check_token(token)  # before binding: a bad --token is one line
        elif not is_loopback(host):
            token = new_token()
        self.token = token
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
        config = uvicorn.Config(create_app(viewer, host, allowed_hosts, token, self.port), log_level="warning", ws_max_size=4 * 1024 * 1024,
                                ws_ping_interval=20.0, ws_ping_timeout=20.0, lifespan="off", ws=ws)
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        h = f"[{self.host}]" if ":" in self.host else self.host
        if self.host in ("0.0.0.0", "::"):
            h = "127.0.0.1"
        return f"http://{h}:{self.port}/"

    @property
    def page_url(self) -> str:
        """:attr:`url` with the token, what a user opens."""
        return token_url(self.url, self.token)

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


def _lan_address() -> str | None:
    """This machine's address on its network (the route a UDP socket would take; nothing is
    sent), or ``None``."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("10.254.254.254", 1))
        return s.getsockname()[0]
    return None


def serve(viewer: Viewer, host: str = "127.0.0.1", port: int = 8765, *, open_browser: bool = False,
          allowed_hosts: tuple[str, ...] = (), token: str | None = None, log=print) -> None:
    """Serve until Ctrl+C, printing the URL (with the token, when there is one)."""
    srv = ViewerServer(viewer, host, port, allowed_hosts, token)
    if not is_loopback(host):
        log(f"listening on {host}: other machines can reach port {srv.port}; only with the token in the URL below "
            "(give it to whom may use the viewer; --token sets it). Use --host 127.0.0.1 to keep it local.")
    url = srv.page_url
    log(f"motionmatch viewer: {url}  (Ctrl+C to stop)")
    if host in ("0.0.0.0", "::") and (lan := _lan_address()) is not None:
        log(f"from other machines: {token_url(f'http://{lan}:{srv.port}/', srv.token)}")
    if open_browser:
        def open_page() -> None:
            if not webbrowser.open(url):
                log(f"--open: no web browser found on this machine; open {url} yourself")

        threading.Timer(0.5, open_page).start()
    srv.run()
