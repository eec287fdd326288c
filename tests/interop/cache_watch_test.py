"""Cache watches with the reference Python client (felix-client 0.6.2), and conditional
writes through raw frames (aioquic): 0.6.2's Python API has no cache_put_if/cache_delete_if.

Watches (client-protocol.md §6.5, §9.4): from an offset (history, then live, each change once
in cache-log order), retained (current values first, then live), key and prefix filters,
deletes and TTL expiries as deletes. Conditional writes: put if absent / at a version,
delete at a version, `version` on a get's hit, exact JSON answers — and what a conditional
write stored is what the reference client reads.
"""

import asyncio

import felix

from harness import Broker, run
from quic_probe import Session, frame

T, NS = "default", "default"
TIMEOUT = 10.0
ERROR_CODES, CONDITIONAL = 0x0800, 0x0200_0000
WATCH, WATCH_RETAINED = 0x0040, 0x0080
ALL_FLAGS = 0x7FFF & ~0x0100


def changes(handle, n):
    """The next n items of a watch as (key, value, offset) tuples."""
    out = []
    for _ in range(n):
        item = handle.recv(timeout=TIMEOUT)
        assert isinstance(item, felix.CacheChange), item
        out.append((item.key, item.value, item.offset))
    return out


def watch_from_an_offset_replays_then_goes_live(broker):
    broker.create_cache("profiles")
    with broker.client() as client:
        client.cache_put(T, NS, "profiles", "user:1", b"a")   # 0
        client.cache_put(T, NS, "profiles", "other", b"x")    # 1
        client.cache_put(T, NS, "profiles", "user:2", b"b")   # 2
        client.cache_delete(T, NS, "profiles", "user:1")      # 3
        with client.watch_cache(T, NS, "profiles", felix.CacheWatchFilter.prefix("user:"),
                                start=0) as watch:
            assert watch.resume_offset == 4, watch.resume_offset
            assert not watch.resnapshot
            assert changes(watch, 3) == [("user:1", b"a", 0), ("user:2", b"b", 2),
                                         ("user:1", None, 3)]
            client.cache_put(T, NS, "profiles", "other", b"y")   # 4: not matched
            client.cache_put(T, NS, "profiles", "user:3", b"")   # 5: an empty value
            client.cache_put(T, NS, "profiles", "user:4", b"t", ttl=0.1)  # 6, expiry later
            assert changes(watch, 3) == [("user:3", b"", 5), ("user:4", b"t", 6),
                                         ("user:4", None, 7)]  # the expiry is a delete


def retained_watch_sends_current_values_then_live(broker):
    with broker.client() as client:
        with client.watch_cache(T, NS, "profiles", felix.CacheWatchFilter.prefix("user:"),
                                retained=True) as watch:
            assert watch.retained_count == 2, watch.retained_count
            assert changes(watch, 2) == [("user:2", b"b", 2), ("user:3", b"", 5)]
            client.cache_put(T, NS, "profiles", "user:2", b"c")
            assert changes(watch, 1) == [("user:2", b"c", watch.resume_offset)]
        with client.watch_cache(T, NS, "profiles", felix.CacheWatchFilter.key("other"),
                                retained=True) as watch:
            assert watch.retained_count == 1
            assert changes(watch, 1) == [("other", b"y", 4)]


def watch_refusals(broker):
    broker.create_cache("scratch", durable=False)
    with broker.client() as client:
        try:
            client.watch_cache(T, NS, "scratch", felix.CacheWatchFilter.key("k"))
            raise AssertionError("a watch of an in-memory cache was accepted")
        except felix.FelixError as error:
            assert error.code == "invalid_request", (error.code, str(error))
    writer = broker.token([f"cache.write:cache:{T}/*/*"])
    with broker.client(token=writer) as client:
        try:
            client.watch_cache(T, NS, "profiles", felix.CacheWatchFilter.prefix(""))
            raise AssertionError("a watch without cache.read was accepted")
        except felix.FelixError as error:
            assert error.code == "forbidden", (error.code, str(error))


def conditional_writes_answer_applied_and_version(broker):
    async def probe():
        async with Session(broker.quic, ["felix/1"], broker.ca_file) as p:
            sid = p.open_stream()
            p.send(sid, frame({"type": "auth", "tenant_id": T, "token": broker.all_token(),
                               "client_flags": ALL_FLAGS,
                               "client_features": ERROR_CODES | CONDITIONAL}))
            ok = await p.read_json(sid)
            answers = []

            async def ask(body):
                p.send(sid, frame(body))
                answers.append(await p.read_json(sid))
                return answers[-1]

            base = {"tenant_id": T, "namespace": NS, "cache": "profiles", "key": "cas"}
            first = await ask(dict(base, type="cache_put_if", value="djE=", ttl_ms=None,
                                   condition="absent", request_id=1))
            v1 = first["version"]
            await ask(dict(base, type="cache_put_if", value="djI=", condition="absent",
                           request_id=2))
            await ask(dict(base, type="cache_get", request_id=3))
            await ask(dict(base, type="cache_put_if", value="djI=",
                           condition={"version": v1 + 1000}, request_id=4))
            second = await ask(dict(base, type="cache_put_if", value="djI=",
                                    condition={"version": v1}, request_id=5))
            await ask(dict(base, type="cache_delete_if", version=v1, request_id=6))
            return ok, answers, v1, second["version"]

    ok, answers, v1, v2 = asyncio.run(probe())
    assert ok["server_features"] & (CONDITIONAL | WATCH | WATCH_RETAINED) == (
        CONDITIONAL | WATCH | WATCH_RETAINED), ok
    assert v2 > v1
    assert answers == [
        {"type": "cache_condition_result", "applied": True, "version": v1, "request_id": 1},
        {"type": "cache_condition_result", "applied": False, "version": v1, "request_id": 2},
        {"type": "cache_value", "tenant_id": T, "namespace": NS, "cache": "profiles",
         "key": "cas", "value": "djE=", "request_id": 3, "version": v1},
        {"type": "cache_condition_result", "applied": False, "version": v1, "request_id": 4},
        {"type": "cache_condition_result", "applied": True, "version": v2, "request_id": 5},
        {"type": "cache_condition_result", "applied": False, "version": v2, "request_id": 6},
    ], answers
    # What the conditional write stored is what the reference client reads.
    with broker.client() as client:
        assert client.cache_get(T, NS, "profiles", "cas") == b"v2"


if __name__ == "__main__":
    run(lambda: Broker(name="cache-watch"), [
        watch_from_an_offset_replays_then_goes_live,
        retained_watch_sends_current_values_then_live,
        watch_refusals,
        conditional_writes_answer_applied_and_version,
    ])
