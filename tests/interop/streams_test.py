"""The reference Python client (felix-client 0.6.2) on streams against our broker.

Publish (single, keyed), acks at enqueue (no offset: the client does not offer
ACK_ON_COMMIT), subscribe from earliest / latest / an
offset, a cursor past the tail, sharded subscriptions with the frozen shard hash
(semantics.md §4.2), in-memory streams (no offsets, §2.4), records far above one
packet, and the refusals a user meets: unknown stream, bad token, tenant mismatch,
missing permission.
"""

import felix

from harness import Broker, expect_error, run

T, NS = "default", "default"
WAIT = 10.0  # seconds an expected event may take: a deadline, not a pacing sleep


def next_events(sub, count):
    events = []
    while len(events) < count:
        event = sub.next_event(timeout=WAIT)
        assert event is not None, f"only {len(events)} of {count} events arrived"
        events.append(event)
    return events


def publish_is_acked_at_enqueue_without_an_offset(broker):
    # The reference client does not offer ACK_ON_COMMIT and this broker runs with the default
    # FELIX_ACK_ON_COMMIT=false: acks come once the batch is queued, and carry no offset
    # (semantics.md §2.3-2.4), so publish returns None, as against the reference broker.
    broker.create_stream("orders")
    with broker.client() as client:
        offsets = [client.publish(T, NS, "orders", f"o{i}".encode()) for i in range(3)]
    assert offsets == [None, None, None], offsets


def subscribe_earliest_latest_and_offset(broker):
    with broker.client() as client:
        with client.subscribe(T, NS, "orders", start="earliest") as sub:
            got = [(e.offset, e.payload, e.stream) for e in next_events(sub, 3)]
        assert got == [(0, b"o0", "orders"), (1, b"o1", "orders"), (2, b"o2", "orders")], got
        with client.subscribe(T, NS, "orders", start=1) as sub:
            got = [(e.offset, e.payload) for e in next_events(sub, 2)]
        assert got == [(1, b"o1"), (2, b"o2")], got
        with client.subscribe(T, NS, "orders", start="latest") as sub:
            assert client.publish(T, NS, "orders", b"live") is None
            [event] = next_events(sub, 1)
            assert (event.offset, event.payload) == (3, b"live")


def subscribe_past_the_tail_is_a_cursor_error(broker):
    with broker.client() as client:
        expect_error(felix.CursorError, lambda: client.subscribe(T, NS, "orders", start=500))


def keyed_publishes_land_on_the_frozen_hash_shards(broker):
    # semantics.md §4.2 golden values, N = 8: modulo and jump_hash.
    expected = {
        "modulo": {"customer-0": 0, "customer-1": 3, "customer-2": 6, "customer-4": 2,
                   "customer-6": 4},
        "jump_hash": {"customer-0": 3, "customer-1": 0, "customer-2": 5, "customer-4": 2,
                      "customer-6": 7},
    }
    for routing, shards in expected.items():
        name = f"wide-{routing.replace('_', '-')}"
        broker.create_stream(name, shards=8, routing=routing)
        with broker.client() as client:
            assert client.stream_shards(T, NS, name) == 8
            for key in shards:
                assert client.publish(T, NS, name, key.encode(), key=key.encode()) is None
            with client.subscribe_sharded(T, NS, name, start="earliest") as sub:
                assert sub.shards == 8
                seen = {}
                while len(seen) < len(shards):
                    item = sub.next_event(timeout=WAIT)
                    assert item is not None, f"{routing}: only {seen}"
                    assert isinstance(item, felix.ShardRecord), item
                    seen[item.event.payload.decode()] = (item.shard, item.event.offset)
        assert seen == {k: (s, 0) for k, s in shards.items()}, (routing, seen)


def in_memory_stream_acks_carry_no_offset(broker):
    broker.create_stream("ticks", durable=False)
    with broker.client() as client:
        with client.subscribe(T, NS, "ticks") as sub:
            assert client.publish(T, NS, "ticks", b"t0") is None
            assert client.publish(T, NS, "ticks", b"t1", ack="none") is None
            got = [(e.payload, e.offset) for e in next_events(sub, 2)]
        assert got == [(b"t0", None), (b"t1", None)], got


def large_records_cross_in_both_directions(broker):
    # Over loopback the broker sends QUIC packets up to 65,000 bytes where the peer allows
    # them (aioquic states no max_udp_payload_size, so the default 65,527 stands): records far
    # above one path-MTU packet arrive whole, both ways.
    broker.create_stream("big")
    payloads = [bytes([i]) * size for i, size in enumerate((1500, 20000, 64000, 300000))]
    with broker.client() as client:
        with client.subscribe(T, NS, "big", start="earliest") as sub:
            for p in payloads:
                assert client.publish(T, NS, "big", p) is None
            got = [e.payload for e in next_events(sub, len(payloads))]
    assert got == payloads, [len(g) for g in got]


def unknown_stream_is_not_found(broker):
    with broker.client() as client:
        expect_error(felix.NotFoundError, lambda: client.publish(T, NS, "nope", b"x"),
                     code="not_found", retry="retry_after")


def bad_token_is_an_auth_error(broker):
    token = broker.all_token()
    broken = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    def publish():
        with broker.client(token=broken) as client:
            client.publish(T, NS, "orders", b"x")
    expect_error(felix.AuthError, publish, code="unauthenticated", retry="fatal")


def tenant_mismatch_and_missing_permission_are_forbidden(broker):
    broker.create_tenant("other")
    broker.create_stream("theirs", tenant="other")
    with broker.client() as client:
        # The stream's tenant is not the authenticated one.
        e = expect_error(felix.FelixError, lambda: client.publish("other", NS, "theirs", b"x"),
                         code="forbidden", retry="fatal")
        assert "tenant mismatch" in str(e), str(e)
    reader = broker.token([f"stream.subscribe:stream:{T}/*/*"])
    with broker.client(token=reader) as client:
        e = expect_error(felix.FelixError, lambda: client.publish(T, NS, "orders", b"x"),
                         code="forbidden", retry="fatal")
        assert "forbidden" in str(e), str(e)
        with client.subscribe(T, NS, "orders", start=0) as sub:  # reading is allowed
            assert next_events(sub, 1)[0].payload == b"o0"


if __name__ == "__main__":
    run(lambda: Broker(name="streams"), [
        publish_is_acked_at_enqueue_without_an_offset,
        subscribe_earliest_latest_and_offset,
        subscribe_past_the_tail_is_a_cursor_error,
        keyed_publishes_land_on_the_frozen_hash_shards,
        in_memory_stream_acks_carry_no_offset,
        large_records_cross_in_both_directions,
        unknown_stream_is_not_found,
        bad_token_is_an_auth_error,
        tenant_mismatch_and_missing_permission_are_forbidden,
    ])
