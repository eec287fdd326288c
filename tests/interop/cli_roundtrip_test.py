"""Both directions between the reference Python client and our `felix` CLI (C++ client).

What the reference client writes (stream records, cache values, counters), our CLI reads, and
what our CLI writes, the reference client reads: same offsets, same bytes.
"""

from harness import Broker, run

T, NS = "default", "default"
WAIT = 10.0


def python_publishes_cli_subscribes(broker):
    broker.create_stream("py2cli")
    with broker.client() as client:
        offsets = [client.publish(T, NS, "py2cli", p) for p in (b"alpha", b"beta", b"gamma")]
    assert offsets == [None, None, None], offsets  # acked at enqueue: no offset to tell
    out = broker.cli("sub", "py2cli", "--from", "earliest", "--count", "3")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["0\talpha", "1\tbeta", "2\tgamma"], out.stdout


def cli_publishes_python_subscribes(broker):
    broker.create_stream("cli2py")
    out = broker.cli("pub", "cli2py", "one", "two")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "1"], out.stdout
    with broker.client() as client:
        with client.subscribe(T, NS, "cli2py", start="earliest") as sub:
            got = []
            while len(got) < 2:
                event = sub.next_event(timeout=WAIT)
                assert event is not None, got
                got.append((event.offset, event.payload))
    assert got == [(0, b"one"), (1, b"two")], got


def cache_and_counters_both_ways(broker):
    broker.create_cache("shared")
    with broker.client() as client:
        client.cache_put(T, NS, "shared", "from-python", b"hello from python")
        assert client.counter_add(T, NS, "shared", "hits", 41) == 41
    out = broker.cli("cache", "get", "shared", "from-python")
    assert (out.returncode, out.stdout.strip()) == (0, "hello from python"), out
    out = broker.cli("cache", "incr", "shared", "hits")
    assert (out.returncode, out.stdout.strip()) == (0, "42"), out
    out = broker.cli("cache", "put", "shared", "from-cli", "hello from the cli")
    assert out.returncode == 0, out.stderr
    with broker.client() as client:
        assert client.cache_get(T, NS, "shared", "from-cli") == b"hello from the cli"
        assert client.counter_get(T, NS, "shared", "hits") == 42


if __name__ == "__main__":
    run(lambda: Broker(name="cli-roundtrip"), [
        python_publishes_cli_subscribes,
        cli_publishes_python_subscribes,
        cache_and_counters_both_ways,
    ])
