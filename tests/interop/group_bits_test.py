"""The "other group bits" with the reference Python client (felix-client 0.6.2) and raw frames.

client-protocol.md §7: with durable storage the reference broker advertises, besides
CONSUMER_GROUP | GROUP_CONSUMER | GROUP_DEAD_LETTERS, GROUP_SKIPPED (`skipped_before` on group
records), GROUP_PUBLISHER (`publisher`, only if stored: this broker runs with
FELIX_RECORD_PUBLISHERS=true, so each record keeps its token's `sub`) and RECORD_TIMESTAMPS
(`timestamp_micros` on group records, and `offset_for_time`); and GROUP_ADMIN and
GROUP_CLAIM_CONTROL (seek, describe, delete; visibility, extend, dead letter).

The reference client reads `skipped_before` (GroupRecord.skipped_before): records retention
removed before the group reached them are reported on the record above the hole. Timestamps,
publishers (0.6.2's GroupRecord has no `publisher`), the absence of optional fields for clients
that did not offer their bit, and offset_for_time (0.6.2's Python API has no call for it) go
through raw frames (aioquic).
"""

import asyncio
import json
import time
import urllib.request

from harness import Broker, run
from quic_probe import Session, frame

T, NS = "default", "default"
DEADLINE = 30.0
ERROR_CODES, UNSUPPORTED = 0x0800, 0x2000
GROUP_SKIPPED, GROUP_PUBLISHER, RECORD_TIMESTAMPS = 0x0040_0000, 0x0080_0000, 0x0400_0000
GROUP_BITS = GROUP_SKIPPED | GROUP_PUBLISHER | RECORD_TIMESTAMPS
GROUP_ADMIN, GROUP_CLAIM_CONTROL = 0x0100_0000, 0x0800_0000
ALL_FLAGS = 0x7FFF & ~0x0100
RECORDS = 240  # ~140 bytes each on disk: many 4 KiB segments, far over the 8 KiB bound


def metric(broker, name):
    with urllib.request.urlopen(f"http://{broker.http}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return -1.0


def oldest_retained(client):
    with client.subscribe(T, NS, "events", start="earliest") as sub:
        event = sub.next_event(timeout=10.0)
        assert event is not None, "no event from earliest"
        return event.offset


def reference_client_reads_skipped_before_after_retention(broker):
    broker.create_stream("events")
    with broker.client() as client:
        offsets = [client.publish(T, NS, "events", b"r" * 100) for _ in range(RECORDS)]
        assert offsets == list(range(RECORDS)), offsets[:5]
        deadline = time.monotonic() + DEADLINE
        while metric(broker, "felix_storage_retention_segments_deleted_total") <= 0:
            assert time.monotonic() < deadline, "the retention timer never deleted a segment"
            time.sleep(0.05)  # polling an observable metric, bounded by the deadline
        oldest = oldest_retained(client)
        assert 0 < oldest < RECORDS, oldest
        records = client.group_poll(T, NS, "events", 0, "workers", max_records=2, wait=0)
        assert [(r.offset, r.skipped_before, r.attempts) for r in records] == [
            (oldest, oldest, 1), (oldest + 1, 0, 1)], [
            (r.offset, r.skipped_before, r.attempts) for r in records]
        assert records[0].payload == b"r" * 100
        # Handed back, it comes again with the same hole below it.
        client.group_nack(T, NS, "events", 0, "workers", records[0])
        [again] = client.group_poll(T, NS, "events", 0, "workers", max_records=1, wait=0)
        assert (again.offset, again.skipped_before, again.attempts) == (oldest, oldest, 2)


def optional_record_fields_only_to_offerers(broker):
    with broker.client() as client:
        oldest = oldest_retained(client)
    poll = {"type": "group_poll", "tenant_id": T, "namespace": NS, "stream": "events",
            "shard": 0, "max_records": 1, "wait_ms": 0}

    async def probe():
        async with Session(broker.quic, ["felix/1"], broker.ca_file) as p:
            plain, offered = p.open_stream(), None
            p.send(plain, frame({"type": "auth", "tenant_id": T, "token": broker.all_token(),
                                 "client_flags": ALL_FLAGS, "client_features": ERROR_CODES}))
            plain_ok = await p.read_json(plain)
            p.send(plain, frame(dict(poll, group="plain", request_id=1)))
            _, plain_answer, _ = await p.read_frame(plain)
            offered = p.open_stream()
            p.send(offered, frame({"type": "auth", "tenant_id": T, "token": broker.all_token(),
                                   "client_flags": ALL_FLAGS,
                                   "client_features": ERROR_CODES | GROUP_BITS}))
            await p.read_json(offered)
            p.send(offered, frame(dict(poll, group="offered", request_id=2)))
            offered_answer = await p.read_json(offered)
            return plain_ok, plain_answer, offered_answer

    before = int(time.time() * 1e6)
    ok, plain, offered = asyncio.run(probe())
    assert ok["server_features"] & GROUP_BITS == GROUP_BITS, hex(ok["server_features"])
    payload = "cnJy" * 33 + "cg=="  # base64 of 100 b"r"
    assert plain == (b'{"type":"group_records","records":[{"offset":%d,"payload":"%s",'
                     b'"attempts":1}],"request_id":1}' % (oldest, payload.encode())), plain
    [record] = offered["records"]
    stamp = record.pop("timestamp_micros")
    assert record == {"offset": oldest, "payload": payload, "attempts": 1,
                      "skipped_before": oldest, "publisher": "interop"}, record  # token `sub`
    assert 0 < stamp <= before, (stamp, before)
    assert list(offered) == ["type", "records", "request_id"], offered


def offset_for_time_answers_and_refusals(broker):
    broker.create_stream("timed")
    broker.create_stream("mem", durable=False)
    with broker.client() as client:
        for i in range(5):
            assert client.publish(T, NS, "timed", b"t%d" % i) == i

    async def probe():
        async with Session(broker.quic, ["felix/1"], broker.ca_file) as p:
            sid = p.open_stream()
            p.send(sid, frame({"type": "auth", "tenant_id": T, "token": broker.all_token(),
                               "client_flags": ALL_FLAGS,
                               "client_features": ERROR_CODES | GROUP_BITS}))
            await p.read_json(sid)
            p.send(sid, frame({"type": "group_poll", "tenant_id": T, "namespace": NS,
                               "stream": "timed", "shard": 0, "group": "clock",
                               "max_records": 5, "wait_ms": 0, "request_id": 1}))
            times = [r["timestamp_micros"] for r in (await p.read_json(sid))["records"]]
            answers = []
            ask = {"type": "offset_for_time", "tenant_id": T, "namespace": NS, "shard": 0}
            queries = [("timed", 0), ("timed", times[2]), ("timed", times[4] + 1),
                       ("mem", 0), ("nope", 0)]
            for i, (stream, at) in enumerate(queries):
                p.send(sid, frame(dict(ask, stream=stream, at_micros=at, request_id=10 + i)))
                _, raw, _ = await p.read_frame(sid)
                answers.append(raw)
            # Without stream.subscribe: forbidden, and the stream ends.
            denied = p.open_stream()
            p.send(denied, frame({"type": "auth", "tenant_id": T,
                                  "token": broker.token([f"stream.publish:stream:{T}/*/*"]),
                                  "client_flags": ALL_FLAGS,
                                  "client_features": ERROR_CODES | GROUP_BITS}))
            await p.read_json(denied)
            p.send(denied, frame(dict(ask, stream="timed", at_micros=0, request_id=20)))
            forbidden = await p.read_json(denied)
            await p.wait_for(lambda: denied in p.ended)
            return times, answers, forbidden, p.ended[denied]

    times, answers, forbidden, ended = asyncio.run(probe())
    assert times == sorted(times), times
    first_at = next(i for i, t in enumerate(times) if t >= times[2])
    assert answers[0] == b'{"type":"offset_value","offset":0,"request_id":10}', answers[0]
    assert answers[1] == (b'{"type":"offset_value","offset":%d,"request_id":11}' % first_at), \
        answers[1]
    assert answers[2] == b'{"type":"offset_value","request_id":12}', answers[2]
    mem, missing = json.loads(answers[3]), json.loads(answers[4])
    assert (mem["type"], mem["code"], mem["retry"]) == ("error", "invalid_request", "fatal"), mem
    assert (missing["type"], missing["code"]) == ("error", "not_found"), missing
    assert (forbidden["type"], forbidden["code"]) == ("error", "forbidden"), forbidden
    assert ended == "fin", ended


def group_admin_and_claim_control(broker):
    """GROUP_ADMIN (group_seek, group_describe, group_delete) and GROUP_CLAIM_CONTROL
    (visibility_ms on a poll, group_extend naming the delivery, group_dead_letter) through raw
    frames: 0.6.2's Python API has no call for them."""
    broker.create_stream("admin")
    with broker.client() as client:
        for i in range(3):
            assert client.publish(T, NS, "admin", b"a%d" % i) == i
    scope = {"tenant_id": T, "namespace": NS, "stream": "admin", "shard": 0, "group": "ops"}

    async def probe():
        async with Session(broker.quic, ["felix/1"], broker.ca_file) as p:
            sid = p.open_stream()
            p.send(sid, frame({"type": "auth", "tenant_id": T, "token": broker.all_token(),
                               "client_flags": ALL_FLAGS,
                               "client_features": ERROR_CODES | GROUP_ADMIN | GROUP_CLAIM_CONTROL}))
            ok = await p.read_json(sid)
            out = {}
            steps = [
                ("seek", dict(scope, type="group_seek", start="earliest", request_id=1)),
                ("poll", dict(scope, type="group_poll", max_records=2, wait_ms=0,
                              visibility_ms=60000, request_id=2)),
                ("extend", dict(scope, type="group_extend", offset=0, attempts=1,
                                extend_ms=30000, request_id=3)),
                ("stale", dict(scope, type="group_extend", offset=0, attempts=7,
                               extend_ms=30000, request_id=4)),
                ("dead", dict(scope, type="group_dead_letter", offset=1, request_id=5)),
                ("describe", dict(scope, type="group_describe", request_id=6)),
                ("delete", dict(scope, type="group_delete", request_id=7)),
                ("gone", dict(scope, type="group_describe", request_id=8)),
            ]
            for name, message in steps:
                p.send(sid, frame(message))
                out[name] = await p.read_json(sid)
            return ok, out
    ok, out = asyncio.run(probe())
    wanted = GROUP_ADMIN | GROUP_CLAIM_CONTROL
    assert ok["server_features"] & wanted == wanted, hex(ok["server_features"])
    assert out["seek"]["type"] == "group_position" and out["seek"]["request_id"] == 1, out["seek"]
    assert [r["offset"] for r in out["poll"]["records"]] == [0, 1], out["poll"]
    assert out["extend"]["type"] == "group_extended", out["extend"]
    assert out["extend"]["visible_ms"] > 0 and out["extend"]["request_id"] == 3, out["extend"]
    # Naming a delivery that is not the current claim: refused stale_claim (fatal).
    assert (out["stale"]["type"], out["stale"]["code"]) == ("error", "stale_claim"), out["stale"]
    assert out["dead"]["type"] == "cache_ok" and out["dead"]["request_id"] == 5, out["dead"]
    info = out["describe"]
    assert info["type"] == "group_info" and info["dead_letters"] == 1, info
    assert (info["committed"], info["tail"]) == (0, 3), info  # offset 0 still claimed
    assert out["delete"] == {"type": "group_deleted", "existed": True, "request_id": 7}, \
        out["delete"]
    # After the delete: no cursor (no `committed`), nothing in flight, no dead letters.
    assert out["gone"] == {"type": "group_info", "tail": 3, "in_flight": 0, "owed": 0,
                           "dead_letters": 0, "request_id": 8}, out["gone"]


if __name__ == "__main__":
    run(lambda: Broker({"FELIX_ACK_ON_COMMIT": "true",
                        "FELIX_RECORD_PUBLISHERS": "true",
                        "FELIX_DURABLE_SEGMENT_BYTES": "4096",
                        "FELIX_DURABLE_RETENTION_BYTES": "8192",
                        "FELIX_DURABLE_RETENTION_INTERVAL_SECONDS": "1"}, name="group-bits"), [
        reference_client_reads_skipped_before_after_retention,
        optional_record_fields_only_to_offerers,
        offset_for_time_answers_and_refusals,
        group_admin_and_claim_control,
    ])
