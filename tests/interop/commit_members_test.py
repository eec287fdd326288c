"""The reference Python client (felix-client 0.6.2) on atomic commits, shard state and named
group consumers.

`Client.commit` (one event plus state puts/deletes as one record) and `Client.state_get`
(value, version = offset of the commit that wrote the key, as_of = last commit), the commit's
event as seen by subscribers and consumer groups, the state surviving a broker restart, the
refusal on an in-memory stream; `group_poll(consumer=..., reclaim=True)` taking a member's
claims back on a new connection with another attempt each.
"""

import felix

from harness import Broker, expect_error, run

T, NS = "default", "default"
WAIT = 10.0


def commit_writes_event_and_state_as_one_record(broker):
    broker.create_stream("orders")
    with broker.client() as client:
        receipt = client.commit(T, NS, b"order-1", [
            felix.CommitOp.publish("orders", b"created"),
            felix.CommitOp.put("orders", "status", b"open"),
            felix.CommitOp.put("orders", "total", b"42"),
        ])
        assert receipt.offset == 0, receipt.offset
        receipt = client.commit(T, NS, b"order-1", [
            felix.CommitOp.enqueue("orders", b"paid"),
            felix.CommitOp.put("orders", "status", b"paid"),
            felix.CommitOp.delete("orders", "total"),
        ])
        assert receipt.offset == 1, receipt.offset
        status = client.state_get(T, NS, "orders", b"order-1", "status")
        assert (status.value, status.version, status.as_of) == (b"paid", 1, 1), (
            status.value, status.version, status.as_of)
        total = client.state_get(T, NS, "orders", b"order-1", "total")
        assert total.value is None and total.as_of == 1, (total.value, total.as_of)
        never = client.state_get(T, NS, "orders", b"order-1", "never")
        assert never.value is None and never.version is None, (never.value, never.version)
        # Readers see each commit as its event at its offset.
        with client.subscribe(T, NS, "orders", start="earliest") as sub:
            got = []
            while len(got) < 2:
                event = sub.next_event(timeout=WAIT)
                assert event is not None, f"only {len(got)} of 2 events arrived"
                got.append((event.offset, event.payload))
        assert got == [(0, b"created"), (1, b"paid")], got
        records = client.group_poll(T, NS, "orders", 0, "billing", max_records=10, wait=0)
        assert [(r.offset, r.payload) for r in records] == [(0, b"created"), (1, b"paid")]


def state_survives_a_restart(broker):
    broker.restart()
    with broker.client() as client:
        status = client.state_get(T, NS, "orders", b"order-1", "status")
        assert (status.value, status.version, status.as_of) == (b"paid", 1, 1), (
            status.value, status.version, status.as_of)
        receipt = client.commit(T, NS, b"order-1", [
            felix.CommitOp.publish("orders", b"shipped"),
            felix.CommitOp.put("orders", "status", b"shipped"),
        ])
        assert receipt.offset == 2, receipt.offset
        status = client.state_get(T, NS, "orders", b"order-1", "status")
        assert (status.value, status.version) == (b"shipped", 2)


def commit_refusals(broker):
    broker.create_stream("scratch", durable=False)
    with broker.client() as client:
        expect_error(felix.FelixError, lambda: client.commit(T, NS, b"e", [
            felix.CommitOp.publish("scratch", b"x"),
            felix.CommitOp.put("scratch", "k", b"v"),
        ]), code="invalid_request", retry="fatal")
        expect_error(felix.FelixError,
                     lambda: client.state_get(T, NS, "scratch", b"e", "k"),
                     code="invalid_request", retry="fatal")
    reader = broker.token([f"stream.subscribe:stream:{T}/*/*"])
    with broker.client(token=reader) as client:
        assert client.state_get(T, NS, "orders", b"order-1", "status").value == b"shipped"
        expect_error(felix.FelixError, lambda: client.commit(T, NS, b"order-1", [
            felix.CommitOp.publish("orders", b"nope"),
        ]), code="forbidden", retry="fatal")


def named_member_reclaims_on_a_new_connection(broker):
    broker.create_stream("work")
    with broker.client() as client:
        for i in range(3):
            client.publish(T, NS, "work", f"w{i}".encode())
    with broker.client() as first:
        got = first.group_poll(T, NS, "work", 0, "g", max_records=2, wait=0, consumer="w1")
        assert [(r.offset, r.attempts) for r in got] == [(0, 1), (1, 1)], got
        with broker.client() as other:
            # Another member cannot take w1's claims, even when it asks to reclaim.
            got = other.group_poll(T, NS, "work", 0, "g", max_records=10, wait=0,
                                   consumer="w2", reclaim=True)
            assert [(r.offset, r.attempts) for r in got] == [(2, 1)], got
        with broker.client() as second:
            got = second.group_poll(T, NS, "work", 0, "g", max_records=10, wait=0,
                                    consumer="w1", reclaim=True)
            assert [(r.offset, r.payload, r.attempts) for r in got] == [
                (0, b"w0", 2), (1, b"w1", 2)], got
            for r in got:
                second.group_ack(T, NS, "work", 0, "g", r.offset)
        # The older connection reclaims nothing back.
        assert first.group_poll(T, NS, "work", 0, "g", max_records=10, wait=0, consumer="w1",
                                reclaim=True) == []
        expect_error(felix.FelixError,
                     lambda: first.group_poll(T, NS, "work", 0, "g", wait=0, consumer="x" * 129),
                     code="invalid_request", retry="fatal")


if __name__ == "__main__":
    run(lambda: Broker({"FELIX_ACK_ON_COMMIT": "true"}, name="commit-members"), [
        commit_writes_event_and_state_as_one_record,
        state_survives_a_restart,
        commit_refusals,
        named_member_reclaims_on_a_new_connection,
    ])
