"""The reference Python client (felix-client 0.6.2) on caches, counters and consumer groups.

Cache put/get/delete (empty values are values, a miss is None, delete returns what it
removed, TTL expiry), counters (absent vs. zero, negative deltas), a consumer group through
acks, nacks, the attempt bound (FELIX_GROUP_MAX_ATTEMPTS=2 here), dead letters, redrive and
discard, and the permission refusals of each. The broker runs with FELIX_ACK_ON_COMMIT=true,
so the client's publishes are answered after the write, with offsets.
"""

import time

import felix

from harness import Broker, expect_error, run

T, NS = "default", "default"
DEADLINE = 10.0


def cache_put_get_delete_and_empty_values(broker):
    broker.create_cache("sessions")
    with broker.client() as client:
        assert client.cache_get(T, NS, "sessions", "user:1") is None
        client.cache_put(T, NS, "sessions", "user:1", b"alice")
        assert client.cache_get(T, NS, "sessions", "user:1") == b"alice"
        client.cache_put(T, NS, "sessions", "empty", b"")
        assert client.cache_get(T, NS, "sessions", "empty") == b""  # stored, not a miss
        assert client.cache_delete(T, NS, "sessions", "user:1") == b"alice"
        assert client.cache_delete(T, NS, "sessions", "user:1") is None
        assert client.cache_get(T, NS, "sessions", "user:1") is None
        assert client.cache_delete(T, NS, "sessions", "empty") == b""


def cache_ttl_expires_entries(broker):
    with broker.client() as client:
        client.cache_put(T, NS, "sessions", "long", b"kept", ttl=600.0)
        client.cache_put(T, NS, "sessions", "short", b"gone", ttl=0.2)
        assert client.cache_get(T, NS, "sessions", "long") == b"kept"
        # Expiry is the broker's; wait for it with a deadline.
        deadline = time.monotonic() + DEADLINE
        while client.cache_get(T, NS, "sessions", "short") is not None:
            assert time.monotonic() < deadline, "entry with a 200 ms TTL never expired"
            time.sleep(0.05)
        assert client.cache_get(T, NS, "sessions", "long") == b"kept"


def counters_add_and_get(broker):
    with broker.client() as client:
        assert client.counter_get(T, NS, "sessions", "logins") is None  # never written
        assert client.counter_add(T, NS, "sessions", "logins", 5) == 5
        assert client.counter_add(T, NS, "sessions", "logins", -7) == -2
        assert client.counter_get(T, NS, "sessions", "logins") == -2
        assert client.counter_add(T, NS, "sessions", "zero", 0) == 0
        assert client.counter_get(T, NS, "sessions", "zero") == 0


def cache_refusals(broker):
    with broker.client() as client:
        expect_error(felix.NotFoundError, lambda: client.cache_get(T, NS, "nocache", "k"),
                     code="not_found")
    reader = broker.token([f"cache.read:cache:{T}/*/*"])
    with broker.client(token=reader) as client:
        assert client.cache_get(T, NS, "sessions", "long") == b"kept"
        expect_error(felix.FelixError, lambda: client.cache_put(T, NS, "sessions", "k", b"v"),
                     code="forbidden", retry="fatal")


def group_acks_nacks_dead_letters_and_redrive(broker):
    broker.create_stream("jobs")
    with broker.client() as client:
        # FELIX_ACK_ON_COMMIT=true: every ack after the write, with its offset.
        assert [client.publish(T, NS, "jobs", f"j{i}".encode()) for i in range(3)] == [0, 1, 2]
        poll = lambda: client.group_poll(T, NS, "jobs", 0, "billing", max_records=10, wait=0)
        first = poll()
        assert [(r.offset, r.payload, r.attempts) for r in first] == [
            (0, b"j0", 1), (1, b"j1", 1), (2, b"j2", 1)]
        client.group_ack(T, NS, "jobs", 0, "billing", 0)
        client.group_ack(T, NS, "jobs", 0, "billing", 2)
        client.group_nack(T, NS, "jobs", 0, "billing", first[1])
        again = poll()
        assert [(r.offset, r.payload, r.attempts) for r in again] == [(1, b"j1", 2)]
        client.group_nack(T, NS, "jobs", 0, "billing", again[0])
        # A third delivery would pass FELIX_GROUP_MAX_ATTEMPTS=2: dead-lettered instead.
        assert poll() == []
        assert client.group_dead_letters(T, NS, "jobs", 0, "billing") == [1]
        client.group_redrive(T, NS, "jobs", 0, "billing", 1)
        redriven = poll()
        assert [(r.offset, r.payload, r.attempts) for r in redriven] == [(1, b"j1", 1)]
        client.group_nack(T, NS, "jobs", 0, "billing", redriven[0])
        assert [r.attempts for r in poll()] == [2]
        assert poll() == []  # dead-lettered again
        assert client.group_dead_letters(T, NS, "jobs", 0, "billing") == [1]
        client.group_discard(T, NS, "jobs", 0, "billing", 1)
        assert client.group_dead_letters(T, NS, "jobs", 0, "billing") == []
        # A second group sees every record from the start.
        other = client.group_poll(T, NS, "jobs", 0, "audit", max_records=10, wait=0)
        assert [r.offset for r in other] == [0, 1, 2]


def group_refusals(broker):
    with broker.client() as client:
        expect_error(felix.NotFoundError,
                     lambda: client.group_poll(T, NS, "nojobs", 0, "g", max_records=1, wait=0),
                     code="not_found")
    publisher = broker.token([f"stream.publish:stream:{T}/*/*"])
    with broker.client(token=publisher) as client:
        expect_error(felix.FelixError,
                     lambda: client.group_poll(T, NS, "jobs", 0, "g", max_records=1, wait=0),
                     code="forbidden", retry="fatal")
    consumer = broker.token([f"stream.subscribe:stream:{T}/*/*"])
    with broker.client(token=consumer) as client:
        # Consuming is allowed; redrive needs group.manage.
        client.group_poll(T, NS, "jobs", 0, "audit", max_records=1, wait=0)
        expect_error(felix.FelixError,
                     lambda: client.group_redrive(T, NS, "jobs", 0, "audit", 0),
                     code="forbidden", retry="fatal")


if __name__ == "__main__":
    run(lambda: Broker({"FELIX_GROUP_MAX_ATTEMPTS": "2", "FELIX_ACK_ON_COMMIT": "true"},
                       name="cache-groups"), [
        cache_put_get_delete_and_empty_values,
        cache_ttl_expires_entries,
        counters_add_and_get,
        cache_refusals,
        group_acks_nacks_dead_letters_and_redrive,
        group_refusals,
    ])
