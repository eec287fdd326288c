"""Listener and raw-frame probes through aioquic, an independent QUIC stack.

ALPN matrix on both ports (client-protocol.md §1.1, spec README rule 3), FLX1 bytes on the
internal port, the legacy `auth` answer (vector V7), and the wire answers the reference
Python client cannot be made to show: `unsupported` keeping request_id/extension, acks at
enqueue (no offset) vs. after commit, the pipelining window and ordered answers, and the
feature bits 0.6.2's API has no call for (client-protocol.md §7): SHARD_OWNERS, CACHE_SHARDS,
IDEMPOTENT_PRODUCER with SEQUENCE_REUSED, SHARD_MOVED advertised.
"""

import asyncio
import base64
import json
import struct

from harness import Broker, run
from quic_probe import Session, frame, handshake

V7 = bytes.fromhex("464c5831000100000000000d7b2274797065223a226f6b227d")
V16_REQ7 = bytes.fromhex("464c5831000100100000000b0000000000000000070000")
ERROR_CODES, UNSUPPORTED, PIPELINE = 0x0800, 0x2000, 0x8000
STREAM_WINDOW, ACK_ON_COMMIT = 0x2_0000, 0x8_0000
IDEMPOTENT, CACHE_SHARDS, SHARD_MOVED, SEQUENCE_REUSED = 0x0200, 0x0400, 0x1000, 0x4000
SHARD_OWNERS = 0x4_0000
ALL_FLAGS = 0x7FFF & ~0x0100  # every flag but the idempotent publish


def acked_publish(request_id, stream, payload, tenant="default", ns="default"):
    """A binary acked publish batch (0x0009), per_batch, one payload (§5.1)."""
    def s16(b):
        return struct.pack(">H", len(b)) + b
    body = struct.pack(">QB", request_id, 2) + s16(tenant.encode()) + s16(ns.encode())
    body += s16(stream.encode()) + struct.pack(">II", 1, len(payload)) + payload
    return frame(body, flags=0x0009)


def parse_ack(payload, flags):
    """(status, request_id, message, offset or None) of a binary publish ack (§5.2)."""
    status, request_id, message_len = struct.unpack(">BQH", payload[:11])
    message = payload[11:11 + message_len].decode()
    offset = struct.unpack(">Q", payload[-8:])[0] if flags & 0x1000 else None
    return status, request_id, message, offset


def auth(broker, flags=None, features=None):
    message = {"type": "auth", "tenant_id": "default", "token": broker.all_token()}
    if flags is not None:
        message["client_flags"] = flags
    if features is not None:
        message["client_features"] = features
    return frame(message)


def alpn_matrix_on_both_ports(broker):
    async def matrix():
        client = {str(a): await handshake(broker.quic, a, broker.ca_file)
                  for a in (["felix/1"], None, ["felix-internal/1"], ["h3"])}
        internal = {str(a): await handshake(broker.internal, a)
                    for a in (["felix-internal/1"], ["felix/1"], None)}
        return client, internal
    client, internal = asyncio.run(matrix())
    assert client["['felix/1']"] == ("ok", "felix/1"), client
    assert client["None"] == ("ok", None), client  # a client offering no ALPN is accepted
    assert client["['felix-internal/1']"][0] == "refused", client
    assert client["['h3']"][0] == "refused", client
    assert internal["['felix-internal/1']"] == ("ok", "felix-internal/1"), internal
    assert internal["['felix/1']"][0] == "refused", internal
    assert internal["None"][0] == "refused", internal


def flx1_on_the_internal_port_closes_with_bad_magic(broker):
    async def probe():
        async with Session(broker.internal, ["felix-internal/1"]) as p:
            sid = p.open_stream()
            p.send(sid, auth(broker, flags=25))
            await asyncio.wait_for(p.terminated, 10)
            return p.terminated.result()
    closed = asyncio.run(probe())
    assert "bad magic" in closed.reason_phrase, closed


def legacy_auth_is_answered_with_vector_v7(broker):
    async def probe():
        async with Session(broker.quic, None, broker.ca_file) as p:
            sid = p.open_stream()
            p.send(sid, auth(broker))  # no client_flags: a legacy client
            _, _, raw = await p.read_frame(sid)
            return raw
    assert asyncio.run(probe()) == V7


def unsupported_keeps_request_id_and_extension(broker):
    async def probe():
        async with Session(broker.quic, ["felix/1"], broker.ca_file) as p:
            sid = p.open_stream()
            p.send(sid, auth(broker, flags=ALL_FLAGS, features=ERROR_CODES | UNSUPPORTED))
            ok = await p.read_json(sid)
            assert ok["type"] == "auth_ok", ok
            p.send(sid, frame({"type": "extension", "name": "acme.ping", "request_id": 41}))
            _, extension, _ = await p.read_frame(sid)
            p.send(sid, frame({"type": "stream_read", "tenant_id": "default",
                               "namespace": "default", "stream": "x", "shard": 0,
                               "from": 0, "request_id": 42}))
            known = await p.read_json(sid)
            p.send(sid, frame({"type": "frobnicate", "request_id": 43}))
            unknown = await p.read_json(sid)
            return extension, known, unknown
    extension, known, unknown = asyncio.run(probe())
    assert extension == (b'{"type":"unsupported","request_type":"extension",'
                         b'"extension":"acme.ping","request_id":41}'), extension
    assert known == {"type": "unsupported", "request_type": "stream_read",
                     "request_id": 42}, known
    assert unknown == {"type": "unsupported", "request_type": "frobnicate",
                       "request_id": 43}, unknown


def acks_at_enqueue_carry_no_offset_and_commit_acks_do(broker):
    broker.create_stream("acks")
    broker.create_stream("mem", durable=False)

    async def probe():
        async with Session(broker.quic, ["felix/1"], broker.ca_file) as p:
            queued = p.open_stream()
            p.send(queued, auth(broker, flags=ALL_FLAGS, features=ERROR_CODES))
            assert (await p.read_json(queued))["type"] == "auth_ok"
            p.send(queued, acked_publish(7, "acks", b"a"))
            _, _, at_enqueue = await p.read_frame(queued)
            committed = p.open_stream()
            p.send(committed, auth(broker, flags=ALL_FLAGS, features=ERROR_CODES | ACK_ON_COMMIT))
            assert (await p.read_json(committed))["type"] == "auth_ok"
            p.send(committed, acked_publish(8, "acks", b"b"))
            flags, payload, _ = await p.read_frame(committed)
            p.send(committed, acked_publish(7, "mem", b"m"))
            _, _, in_memory = await p.read_frame(committed)
            return at_enqueue, parse_ack(payload, flags), in_memory
    at_enqueue, after_commit, in_memory = asyncio.run(probe())
    assert at_enqueue == V16_REQ7, at_enqueue.hex()
    assert after_commit == (0, 8, "", 1), after_commit
    assert in_memory == V16_REQ7, in_memory.hex()


def pipelining_grants_the_window_and_orders_answers(broker):
    broker.create_stream("piped")

    async def probe():
        async with Session(broker.quic, ["felix/1"], broker.ca_file) as p:
            sid = p.open_stream()
            p.send(sid, auth(broker, flags=ALL_FLAGS,
                             features=ERROR_CODES | ACK_ON_COMMIT | PIPELINE))
            ok = await p.read_json(sid)
            # One write: a publish that waits for its write, then one refused at once.
            p.send(sid, acked_publish(1, "piped", b"x") + acked_publish(2, "missing", b"y"))
            answers = []
            for _ in range(2):
                flags, payload, _ = await p.read_frame(sid)
                answers.append(parse_ack(payload, flags))
            return ok, answers
    ok, answers = asyncio.run(probe())
    assert ok["publish_window"] == 256, ok
    assert ok["server_features"] & (PIPELINE | STREAM_WINDOW) == PIPELINE | STREAM_WINDOW, ok
    assert answers == [(0, 1, "", 0), (1, 2, "stream not found", None)], answers


def shard_owners_and_cache_shards(broker):
    broker.create_stream("owned", durable=False, shards=3)
    broker.create_cache("three", shards=3)

    async def probe():
        async with Session(broker.quic, ["felix/1"], broker.ca_file) as p:
            sid = p.open_stream()
            p.send(sid, auth(broker, flags=ALL_FLAGS, features=ERROR_CODES))
            ok = await p.read_json(sid)
            ask = {"type": "shard_owners", "tenant_id": "default", "namespace": "default",
                   "kind": "stream"}
            p.send(sid, frame(dict(ask, name="owned", request_id=5)))
            _, owned, _ = await p.read_frame(sid)
            p.send(sid, frame(dict(ask, name="unknown", request_id=6)))
            unknown = await p.read_json(sid)
            p.send(sid, frame({"type": "cache_shards", "tenant_id": "default",
                               "namespace": "default", "cache": "three", "request_id": 7}))
            three = await p.read_json(sid)
            p.send(sid, frame({"type": "cache_shards", "tenant_id": "default",
                               "namespace": "default", "cache": "nope", "request_id": 8}))
            nope = await p.read_json(sid)
            return ok, owned, unknown, three, nope
    ok, owned, unknown, three, nope = asyncio.run(probe())
    wanted = SHARD_OWNERS | CACHE_SHARDS | SHARD_MOVED
    assert ok["server_features"] & wanted == wanted, hex(ok["server_features"])
    # A standalone broker owns every shard at generation 0 and names no address.
    assert owned == (b'{"type":"shard_owners_view","owners":[{"shard":0,"generation":0},'
                     b'{"shard":1,"generation":0},{"shard":2,"generation":0}],'
                     b'"request_id":5}'), owned
    assert (unknown["owners"], unknown["request_id"]) == ([], 6), unknown
    assert (three["type"], three["shards"], three["request_id"]) == ("cache_shards_view", 3, 7), \
        three
    assert (nope["shards"], nope["request_id"]) == (0, 8), nope  # 0 = unknown cache


def idempotent_producer_resends_get_the_original_offsets(broker):
    broker.create_stream("exactly")

    def publish(request_id, producer, sequence, payloads):
        return frame({"type": "publish_idempotent", "tenant_id": "default",
                      "namespace": "default", "stream": "exactly",
                      "payloads": [base64.b64encode(x).decode() for x in payloads],
                      "request_id": request_id, "producer_id": producer, "sequence": sequence})

    async def probe():
        async with Session(broker.quic, ["felix/1"], broker.ca_file) as p:
            sid = p.open_stream()
            p.send(sid, auth(broker, flags=ALL_FLAGS,
                             features=ERROR_CODES | IDEMPOTENT | SEQUENCE_REUSED))
            ok = await p.read_json(sid)
            p.send(sid, frame({"type": "producer_init", "request_id": 1}))
            init = await p.read_json(sid)
            producer = init["producer_id"]
            answers = []
            for request_id, sequence, payloads in [(2, 0, [b"a", b"b"]), (3, 0, [b"a", b"b"]),
                                                   (4, 0, [b"x"]), (5, 1, [b"c"])]:
                p.send(sid, publish(request_id, producer, sequence, payloads))
                answers.append(await p.read_json(sid))
            return ok, init, answers
    ok, init, answers = asyncio.run(probe())
    assert ok["server_features"] & (IDEMPOTENT | SEQUENCE_REUSED) == IDEMPOTENT | SEQUENCE_REUSED
    assert (init["type"], init["request_id"]) == ("producer_init_ok", 1), init
    assert init["producer_id"] != 0, init
    first, resend, reused, next_one = answers
    assert (first["type"], first["offset"], first["request_id"]) == ("publish_ok", 0, 2), first
    # The same batch again: the original offset, nothing appended.
    assert (resend["type"], resend["offset"], resend["request_id"]) == ("publish_ok", 0, 3), \
        resend
    # The same sequence with other payloads: refused as reused (SEQUENCE_REUSED offered).
    assert reused["type"] == "publish_refused" and reused["request_id"] == 4, reused
    assert "sequence_reused" in json.dumps(reused), reused
    assert (next_one["type"], next_one["offset"]) == ("publish_ok", 2), next_one


if __name__ == "__main__":
    run(lambda: Broker(name="probes"), [
        alpn_matrix_on_both_ports,
        flx1_on_the_internal_port_closes_with_bad_magic,
        legacy_auth_is_answered_with_vector_v7,
        unsupported_keeps_request_id_and_extension,
        acks_at_enqueue_carry_no_offset_and_commit_acks_do,
        pipelining_grants_the_window_and_orders_answers,
        shard_owners_and_cache_shards,
        idempotent_producer_resends_get_the_original_offsets,
    ])
