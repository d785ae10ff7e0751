"""The viewer's bounds, one piece at a time (no server): a tab's inbox, its outbox, the
downloads, the jobs, the names of downloads and the token check."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from motionmatch.viewer.inbox import Inbox
from motionmatch.viewer.jobs import ClientJobs, JobRefused, TabJobs
from motionmatch.viewer.messages import Limits, MessageError, RateLimiter
from motionmatch.viewer.outbox import Outbox


def test_a_rate_limiter_in_debt_refuses_until_paid():
    now = [0.0]
    r = RateLimiter(1.0, 2.0, clock=lambda: now[0])
    r.charge(3.0, floor=-0.5)
    assert r.tokens == -0.5 and not r.allow(0.0)
    now[0] = 0.4
    assert not r.allow(0.0)
    now[0] = 0.6
    assert r.allow(0.0)


def test_the_inbox_is_bounded_and_refuses_with_a_code_and_the_seq():
    box = Inbox(Limits(queued_messages=3, queued_bytes=10_000, rate=1e6, burst=1e6))
    for i in range(3):
        box.offer(json.dumps({"type": "hello", "seq": i}))
    with pytest.raises(MessageError) as e:
        box.offer(json.dumps({"type": "hello", "seq": 7}))
    assert e.value.code == "busy" and e.value.seq == 7 and "3 messages" in str(e.value)
    with pytest.raises(MessageError) as e:
        box.offer(b"\x00")
    assert e.value.code == "binary"
    box = Inbox(Limits(queued_bytes=100, rate=1e6, burst=1e6))
    with pytest.raises(MessageError) as e:
        box.offer(json.dumps({"type": "hello", "client": "x" * 200, "seq": 3}))
    assert e.value.code == "busy" and e.value.seq == 3


def test_the_inbox_parses_on_the_drain_charges_its_time_and_waits_while_in_debt():
    box = Inbox(Limits(rate=1e6, burst=1e6, cost_rate=0.1, cost_burst=0.05, cost_debt=0.02))
    handled, refused = [], []

    def slow(msg):
        handled.append(msg["type"])
        time.sleep(0.03)

    box.offer("not json")
    for _ in range(5):
        box.offer(json.dumps({"type": "hello"}))
    box.drain(slow, refused.append, budget=10.0)
    assert [e.code for e in refused] == ["bad_json"]
    # 0.05 s of burst: the second slow message puts it in debt, the rest wait
    assert 2 <= len(handled) <= 3 and len(box) == 5 - len(handled), handled
    assert box.charged >= 0.05
    time.sleep(0.3)
    box.drain(slow, refused.append, budget=0.0)  # one at least per tick
    assert len(handled) >= 3


def test_a_closed_inbox_drops_what_waits_and_stops_a_drain():
    box = Inbox(Limits(rate=1e6, burst=1e6))
    for _ in range(10):
        box.offer(json.dumps({"type": "hello"}))
    done = []

    def handle(msg):
        done.append(msg)
        box.close()

    box.drain(handle, lambda e: None, budget=10.0)
    assert len(done) == 1 and len(box) == 0
    box.offer(json.dumps({"type": "hello"}))
    box.put({"type": "_genmm_done"})
    assert len(box) == 0


def test_the_outbox_keeps_the_newest_reports_and_drops_beyond_its_bytes():
    loop = asyncio.new_event_loop()
    try:
        box = Outbox(loop, max_bytes=1000)
        box.put({"type": "ack", "seq": 1})
        for i in range(50):
            box.put({"type": "stats", "tick": i})
            box.put({"type": "debug", "tick": i, "pad": "x" * 100})
        box.put(b"pose1")
        box.put(b"pose2")
        for i in range(40):
            box.put({"type": "event", "n": i, "pad": "y" * 50})
        assert box.waiting_bytes <= 1000 + len(b"pose2")
        assert box.dropped > 0 and box.coalesced == 1
        out = []
        while (item := box.take()) is not None:
            out.append(item)
        texts = [json.loads(t) for t in out if isinstance(t, str)]
        assert [t["type"] for t in texts[:3]] == ["ack", "stats", "debug"]
        assert texts[1]["tick"] == 49 and texts[2]["tick"] == 49  # the newest, in the first one's place
        assert texts[-1]["type"] == "warning" and texts[-1]["code"] == "dropped"
        assert f"{box.dropped} messages" in texts[-1]["message"]
        assert out[-1] == b"pose2" and box.waiting_bytes == 0
    finally:
        loop.close()


def test_downloads_evict_the_tabs_own_oldest_and_refuse_closed_tabs():
    from motionmatch.viewer.server import DownloadError, Downloads

    d = Downloads(max_bytes=1000, per_session=600)
    for s in ("a", "b"):
        d.open_session(s)
    a1 = d.add("a", "a1.bvh", b"x" * 300, "t")
    b1 = d.add("b", "b1.bvh", b"x" * 300, "t")
    a2 = d.add("a", "a2.bvh", b"x" * 300, "t")
    a3 = d.add("a", "a3.bvh", b"x" * 300, "t")  # over a's 600: a's oldest goes
    assert d.get(a1) is None and d.get(a2) and d.get(a3) and d.get(b1)
    d.open_session("c")
    with pytest.raises(DownloadError, match="full with other tabs"):
        d.add("c", "c1.bvh", b"x" * 500, "t")  # b's file is never evicted for c
    assert d.get(b1)
    with pytest.raises(DownloadError, match="at most"):
        d.add("a", "huge.bvh", b"x" * 700, "t")
    d.close_session("a")
    assert d.get(a2) is None and d.get(a3) is None and d.bytes == 300
    with pytest.raises(DownloadError, match="closed"):
        d.add("a", "late.bvh", b"x", "t")


def test_download_names_in_any_script_have_an_ascii_header():
    from motionmatch.viewer.server import content_disposition

    h = content_disposition("名前 Ωmega.bvh")
    assert h.isascii() and h.encode("latin-1")
    assert "filename*=UTF-8''%E5%90%8D%E5%89%8D%20%CE%A9mega.bvh" in h
    assert 'filename="____mega.bvh"' in h
    assert 'filename="a_b.glb"' in content_disposition('a"b.glb')


def test_jobs_one_per_client_and_kind_and_cancelled_with_the_tab():
    pool = ThreadPoolExecutor(2)
    clients = ClientJobs()
    a, b = TabJobs(pool, clients, "10.0.0.1"), TabJobs(pool, clients, "10.0.0.1")
    other = TabJobs(pool, clients, "10.0.0.2")
    started, results = threading.Event(), []

    def work():
        started.set()
        while True:
            a.check()
            time.sleep(0.01)

    a.submit("genmm", "a synthesis", work, lambda r, e: results.append((r, e)))
    assert started.wait(5)
    with pytest.raises(JobRefused, match="already running for this client"):
        b.submit("genmm", "a synthesis", lambda: 1, lambda r, e: None)
    with pytest.raises(JobRefused, match="a synthesis is already running"):
        b.ensure_free("genmm", "a synthesis")
    b.ensure_free("export", "an export")
    other.submit("genmm", "a synthesis", lambda: 2, lambda r, e: results.append((r, e)))
    b.submit("export", "an export", lambda: 3, lambda r, e: results.append((r, e)))
    t0 = time.monotonic()
    a.cancel()
    while clients.running("genmm") and time.monotonic() - t0 < 2:
        time.sleep(0.005)
    assert clients.running() == 0 and time.monotonic() - t0 < 0.5
    assert sorted(r for r, _ in results) == [2, 3]  # the cancelled job says nothing
    with pytest.raises(JobRefused):
        a.submit("genmm", "a synthesis", lambda: 1, lambda r, e: None)
    pool.shutdown()


def test_tokens_must_be_long_enough_and_url_safe():
    from motionmatch.viewer.access import check_token, new_token, token_url

    assert check_token(new_token())
    for bad in ("", "short", "has space in it", "ünïcödé-token"):
        with pytest.raises(ValueError, match="8 to 256"):
            check_token(bad)
    assert token_url("http://h:1/", "abc-def_12") == "http://h:1/?token=abc-def_12"
    assert token_url("http://h:1/", None) == "http://h:1/"
