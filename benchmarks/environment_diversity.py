"""The coarse search's diversity claim of the environment-aware paper (its Table 1 and Sec. 6.3).

The paper counts diversity as "the number of distinct poses utilized" in its 90 s run of the
dense-obstacle path, and reads its Table 1 so: the full method ("Ours", 4378) has the highest
diversity, "even surpassing other environment-aware experiments", because its coarse search
"occasionally skips" the exact matches that an exhaustive traversal ("Linear Search", 3305)
keeps settling on. Measured here with the same count (distinct database frames played,
:func:`motionmatch.metrics.scenario.scenario_report`'s ``diversity``), on more than one run:
``scenarios/dense-obstacles.json``'s closed path started at ``starts`` points along it (a
quarter of the loop apart) in both directions, every row of the ablation on each, and two
measures of where the diversity comes from:

* ``jumps``: how many times the played frame is not the next one of the database (a
  transition to another place of the database), per run;
* open loop, on the same queries: every search of the "Ours" run repeated with the linear
  search (same query, obstacles, frame playing now), the distinct frames each returns. The
  closed loop's diversity also depends on where each run's path takes the character; this
  isolates the search.

Used by ``bench_environment.py --diversity``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from motionmatch.search.penalized import SearchOptions

#: the rows whose diversity is compared (the benchmark's ABLATIONS names)
ROWS = ("Motion Matching", "Linear Search", "One Obstacle", "Disk", "No Adaptive", "No Dissimilarity", "Start 0",
        "Large v", "Ours")


def path_variant(sc, start: int, starts: int, reverse: bool):
    """The scenario with its (closed) path starting ``start / starts`` of the way along it,
    walked the other way round with ``reverse``: the character starts on the path's first
    point, facing along it."""
    agent = sc.agents[0]
    p = np.asarray(agent.path, dtype=float)
    if np.allclose(p[0], p[-1]):
        p = p[:-1]
    if reverse:
        p = p[::-1]
    p = np.roll(p, -round(start * len(p) / starts), axis=0)
    p = np.vstack([p, p[:1]])
    d = p[1] - p[0]
    facing = tuple(float(x) for x in d / np.linalg.norm(d))
    return replace(sc, agents=[replace(agent, path=p, start=(float(p[0, 0]), float(p[0, 1])), facing=facing)])


def jumps(frames: np.ndarray) -> int:
    """Transitions in a run's played frames ``[T]`` (a frame that is not the previous one + 1)."""
    f = np.asarray(frames).reshape(-1)
    return int(np.count_nonzero(f[1:] != f[:-1] + 1))


def open_loop(matcher, log) -> dict:
    """The searches with obstacles of a recorded "Ours" run (``bench_environment.run(...,
    record=True)``'s log) repeated with the linear search: distinct frames returned by each,
    and the share where both return the same frame."""
    ours, lin = [], []
    for q, obs, cnt, kw, r in log:
        if r.method == "plain":
            continue
        kw = dict(kw)
        kw["options"] = SearchOptions(method="linear")
        ours.append(r.index)
        lin.append(matcher.search.search(q, obs, cnt, **kw).index)
    ours, lin = np.array(ours), np.array(lin)
    return {"searches": int(ours.size), "ours_distinct": int(np.unique(ours).size),
            "linear_distinct": int(np.unique(lin).size), "same": float(np.mean(ours == lin)) if ours.size else 0.0}


def study(db, matcher, sc, ablations: dict, run, starts: int = 4) -> dict:
    """Diversity (distinct frames played) and jumps of every row of ``ablations`` (name ->
    config, as ``bench_environment.ABLATIONS``) on ``2 * starts`` variants of ``sc``'s path
    (:func:`path_variant`), played by ``run(db, matcher, scenario, config, record)`` (the
    benchmark's); with the open-loop comparison of each variant's "Ours" searches. Prints a
    line per variant and the summary; returns ``{"variants": [...], "summary": {...}}``."""
    out = []
    for reverse in (False, True):
        for k in range(starts):
            v = path_variant(sc, k, starts, reverse)
            row = {"start": k / starts, "reverse": reverse}
            for name in ROWS:
                rep, log = run(db, matcher, v, ablations[name], record=name == "Ours")
                row[name] = rep["diversity"]
                row[f"{name} error_m"] = rep["error_m"]
                row[f"{name} jumps"] = rep["jumps"]
                if name == "Ours":
                    row["open_loop"] = open_loop(matcher, log)
            out.append(row)
            ol = row["open_loop"]
            print(f"  start {k}/{starts}{' reversed' if reverse else ''}: "
                  + ", ".join(f"{n} {row[n]}" for n in ROWS)
                  + f"; jumps linear {row['Linear Search jumps']} ours {row['Ours jumps']}; open loop distinct "
                    f"ours {ol['ours_distinct']} linear {ol['linear_distinct']} of {ol['searches']}", flush=True)
    summary = {}
    for name in ROWS:
        x = np.array([r[name] for r in out], dtype=float)
        summary[name] = {"mean": float(x.mean()), "min": float(x.min()), "max": float(x.max())}
    ours = np.array([r["Ours"] for r in out], dtype=float)
    summary["ours_above_linear"] = int(sum(r["Ours"] > r["Linear Search"] for r in out))
    summary["ours_highest_env_aware"] = int(sum(r["Ours"] >= max(r[n] for n in ROWS if n != "Motion Matching")
                                                for r in out))
    summary["ours_over_linear_mean"] = float(np.mean(ours / np.array([r["Linear Search"] for r in out])))
    for name in ("Linear Search", "Ours"):
        summary[f"{name} jumps_mean"] = float(np.mean([r[f"{name} jumps"] for r in out]))
    for key in ("ours_distinct", "linear_distinct"):
        summary[f"open_loop_{key}_mean"] = float(np.mean([r["open_loop"][key] for r in out]))
    summary["runs"] = len(out)
    return {"variants": out, "summary": summary}

