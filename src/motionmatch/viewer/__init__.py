"""Interactive web viewer: ``motionmatch viewer``.

A local web app. The Python server (:mod:`~motionmatch.viewer.server`: Starlette +
uvicorn + websockets) runs one simulation per browser tab at a fixed 60 Hz
(:mod:`~motionmatch.viewer.session`) and streams every character's pose as compact
binary frames (:mod:`~motionmatch.viewer.protocol`); the page (three.js, source in
``web/``, bundled with esbuild into ``motionmatch/viewer/static/``) draws them as skinned
bodies (each skeleton's mannequin, fetched once: :mod:`~motionmatch.viewer.body`; or the
user's rig, "Use my character": :mod:`~motionmatch.viewer.rig`) and sends
key-down/key-up events, drawn paths, obstacles and commands as validated JSON
(:mod:`~motionmatch.viewer.messages`). Environment-aware matching, crowds and pose commands
reach the session through its adapters (:mod:`~motionmatch.viewer.environment`,
:mod:`~motionmatch.viewer.crowd`, :mod:`~motionmatch.viewer.pose`).

Needs ``pip install 'motionmatch[viewer]'`` (starlette, uvicorn, websockets).

From Python::

    from motionmatch.viewer import Viewer, serve
    from motionmatch.viewer.data import open_database

    db, source = open_database()          # the default dataset, cached as a database
    serve(Viewer(db, source_description=source.description), port=8765)
"""

from __future__ import annotations

__all__ = ["Viewer", "ViewerServer", "create_app", "serve"]


def __getattr__(name):  # lazy: importing the package must not need the server's dependencies
    if name in __all__:
        from motionmatch.viewer import server

        return getattr(server, name)
    raise AttributeError(name)
