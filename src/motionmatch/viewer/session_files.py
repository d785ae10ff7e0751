"""The file messages of a :class:`~motionmatch.viewer.session.Session`: GenMM syntheses
(run on the tab's worker, their variants played as clip characters) and exports (BVH,
glTF, ... written on the worker and offered for download). :class:`FileMessages` is a part
of the session (its base class), kept in a file of its own: it reads and writes the
session's own state."""

from __future__ import annotations

import numpy as np

from motionmatch.viewer.characters import ClipCharacter, MMCharacter, recorded_motion, skeleton_info
from motionmatch.viewer.session_common import TICK_HZ, Rejected
from motionmatch.viewer.work import export_file, synthesize

__all__ = ["FileMessages"]


class FileMessages:
    """The file part of :class:`~motionmatch.viewer.session.Session`."""

    def _on_files(self, m):
        files = self.viewer.catalog.list(m["kind"])
        self.send({"type": "files", "kind": m["kind"], "files": files})
        return {"count": len(files)}

    def _on_genmm(self, m):
        cat = self.viewer.catalog
        paths = [cat.resolve(f, "bvh") for f in m["examples"]]
        keys = cat.resolve(m["keyframes"], "bvh") if m["keyframes"] else None
        args = (paths, keys, float(m["seconds"]), int(m["seed"]), bool(m["loop"]), int(m["variants"]), self.jobs.check)

        files = dict(zip(m["examples"], paths)) | ({m["keyframes"]: keys} if keys is not None else {})

        def done(res, error):
            if error is None:
                self.submit({"type": "_genmm_done", "seq": None, "result": res, "request": m})
            else:
                self.submit({"type": "_genmm_done", "seq": None, "error": cat.explain(error, "bvh", files),
                             "request": m})

        self.jobs.submit("genmm", "a synthesis", lambda: synthesize(*args), done)
        self.send({"type": "genmm_status", "state": "running", "variants": m["variants"]})
        return {"state": "running"}

    def _on_genmm_done(self, m):
        if "error" in m:
            self.send({"type": "genmm_status", "state": "failed", "message": m["error"]})
            return
        fps, results, seconds_taken = m["result"]
        req = m["request"]
        for cid in [c for c, ch in self.chars.items() if isinstance(ch, ClipCharacter)]:
            self.remove_character(cid)
        skel = results[0].motion.skeleton
        feet = tuple(results[0].feet) if results[0].contacts is not None else ()
        sid = self._next_skeleton
        self._next_skeleton += 1
        wp = results[0].motion.world_positions
        info = skeleton_info(skel, feet, ground_root=False, height=float(np.ptp(wp[0, :, 1])) or None,
                             body=self.viewer.bodies.register(results[0].motion))
        self.skeletons[sid] = info
        spacing = max(1.5, 1.4 * info["height"])
        base_x = max((abs(ch.root_xz[0]) for ch in self.chars.values()), default=0.0) + 2.5
        ids = []
        for i, r in enumerate(results):
            cid = self._next_id
            self._next_id += 1
            loop_frames = r.motion.num_frames - 1 if req["loop"] else None
            ch = ClipCharacter(cid, f"variant {i + 1} (seed {req['seed'] + i})", r.motion, skeleton_id=sid,
                               place=(base_x + i * spacing, 0.0), contacts=r.contacts, loop_frames=loop_frames,
                               meta={"seed": req["seed"] + i, "synthesis_s": round(float(r.synthesis_s), 3)})
            self.chars[cid] = ch
            ch.step(0.0)
            ids.append(cid)
        self.selected = ids[0]
        self._send_characters()
        self.send({"type": "genmm_status", "state": "done", "ids": ids, "fps": fps,
                   "seconds": round(seconds_taken, 3), "frames": int(results[0].motion.num_frames)})
        if self.paused:
            self._emit_pose(stepped=False)

    def _on_genmm_clear(self, m):
        for cid in [c for c, ch in self.chars.items() if isinstance(ch, ClipCharacter)]:
            self.remove_character(cid)
        self._send_characters()

    def _on_export_bvh(self, m):
        return self._on_export({**m, "format": "bvh"})

    def _on_export(self, m):
        """The character's motion this session (the recorded frames of a motion-matching
        character, the clip of a GenMM variant) as a download: BVH, or binary glTF with the
        body the page draws (:mod:`motionmatch.io.gltf`); with a rig in use, a motion-matching
        character's on the rig (retargeted with foot IK, as a take) with its body."""
        cid = int(m["id"])
        fmt = m["format"]
        ch = self.chars.get(cid)
        if ch is None:
            raise Rejected(f"no character {cid}")
        self.jobs.ensure_free("export", "an export")  # before copying the recording
        if isinstance(ch, MMCharacter):
            if ch.recorder.frames == 0:
                raise Rejected("nothing recorded yet")
            r, t = ch.recorder.arrays()  # a snapshot taken now; the worker formats it
            moving, skel, scale, name = ch.recorder.moving, ch.db.skeleton, ch.db.file_scale, ch.name

            def make():
                return recorded_motion(skel, moving, r, t, TICK_HZ, name, scale)
        else:
            motion = ch.motion_for_export()

            def make():
                return motion

        filename = "".join(c if c.isalnum() or c in "-_" else "_" for c in ch.name) + "." + fmt
        sid, downloads, mannequin, check = self.id, self.viewer.downloads, self.viewer.bodies.mannequin, self.jobs.check
        if isinstance(ch, MMCharacter) and self.rig is not None:  # on the user's rig (session_rig)
            make, mannequin = self._rig_export(make)

        def job():
            mo = make()
            data, ctype = export_file(mo, fmt, mannequin, check)
            return downloads.add(sid, filename, data, ctype), mo.num_frames, mo.fps

        def done(res, error):
            if error is not None:
                self.send({"type": "error", "code": "rejected", "for": f"export_{fmt}", "message": str(error)})
                return
            token, frames, fps = res
            self.send({"type": "download", "url": f"/api/download/{token}", "filename": filename, "id": cid,
                       "format": fmt, "frames": frames, "seconds": round(frames / fps, 2)})

        self.jobs.submit("export", "an export", job, done)
        return {"state": "running"}
