"""Raw QUIC probes of a broker's listeners through aioquic (an independent QUIC stack).

`handshake()` reports what a connection attempt with a given ALPN offer came to; `Session`
opens bidirectional streams and sends/reads exact FLX1 bytes, for what the reference Python
client cannot drive (legacy auth, pipelining windows, raw refusals).
"""

import asyncio
import json
import ssl
import struct

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted, StreamDataReceived, \
    StreamReset

TIMEOUT = 10.0
MAGIC = b"FLX1"


def frame(payload, flags=0):
    """One FLX1 frame: magic, version 1, flags, length, payload."""
    if isinstance(payload, dict):
        payload = json.dumps(payload, separators=(",", ":")).encode()
    return MAGIC + struct.pack(">HHI", 1, flags, len(payload)) + payload


class ProbeProtocol(QuicConnectionProtocol):
    """Records the events the probes look at."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.alpn = None
        self.terminated = asyncio.get_event_loop().create_future()
        self.streams = {}  # stream id -> bytearray
        self.ended = {}  # stream id -> "fin" | ("reset", code)
        self.changed = asyncio.Event()

    def quic_event_received(self, event):
        if isinstance(event, HandshakeCompleted):
            self.alpn = event.alpn_protocol
        elif isinstance(event, StreamDataReceived):
            self.streams.setdefault(event.stream_id, bytearray()).extend(event.data)
            if event.end_stream:
                self.ended[event.stream_id] = "fin"
        elif isinstance(event, StreamReset):
            self.ended[event.stream_id] = ("reset", event.error_code)
        elif isinstance(event, ConnectionTerminated):
            if not self.terminated.done():
                self.terminated.set_result(event)
        self.changed.set()

    async def wait_for(self, predicate, timeout=TIMEOUT):
        async def loop():
            while not predicate():
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(loop(), timeout)

    def open_stream(self):
        return self._quic.get_next_available_stream_id()

    def send(self, stream_id, data, end=False):
        self._quic.send_stream_data(stream_id, data, end_stream=end)
        self.transmit()

    async def read_frame(self, stream_id, timeout=TIMEOUT):
        """The next whole frame on `stream_id` as (flags, payload bytes, raw frame bytes)."""
        def complete():
            buf = self.streams.get(stream_id, b"")
            return len(buf) >= 12 and len(buf) >= 12 + struct.unpack(">I", buf[8:12])[0]
        await self.wait_for(lambda: complete() or stream_id in self.ended, timeout)
        if not complete():
            raise AssertionError(f"stream {stream_id} ended without a frame: "
                                 f"{self.ended.get(stream_id)}")
        buf = self.streams[stream_id]
        length = struct.unpack(">I", buf[8:12])[0]
        raw = bytes(buf[:12 + length])
        del buf[:12 + length]
        assert raw[:4] == MAGIC, raw
        return struct.unpack(">H", raw[6:8])[0], raw[12:], raw

    async def read_json(self, stream_id, timeout=TIMEOUT):
        flags, payload, _ = await self.read_frame(stream_id, timeout)
        assert flags == 0, f"binary frame 0x{flags:04x} where JSON was expected"
        return json.loads(payload)


def configuration(alpn, ca_file=None):
    config = QuicConfiguration(is_client=True, alpn_protocols=alpn, server_name="localhost",
                               idle_timeout=TIMEOUT)
    if ca_file:
        config.load_verify_locations(ca_file)
    else:
        config.verify_mode = ssl.CERT_NONE  # internal port: its certificate is not the point
    return config


async def handshake(addr, alpn, ca_file=None):
    """('ok', negotiated alpn) or ('refused', reason) for one connection attempt."""
    host, port = addr.rsplit(":", 1)
    try:
        async with connect(host, int(port), configuration=configuration(alpn, ca_file),
                           create_protocol=ProbeProtocol) as protocol:
            await asyncio.wait_for(protocol.wait_connected(), TIMEOUT)
            return "ok", protocol.alpn
    except (ConnectionError, asyncio.TimeoutError) as e:
        return "refused", str(e)


class Session:
    """`async with Session(addr, alpn, ca_file) as p:` — a connected ProbeProtocol."""

    def __init__(self, addr, alpn=None, ca_file=None):
        self.host, port = addr.rsplit(":", 1)
        self.port = int(port)
        self.config = configuration(alpn, ca_file)

    async def __aenter__(self):
        self._cm = connect(self.host, self.port, configuration=self.config,
                           create_protocol=ProbeProtocol)
        self.protocol = await asyncio.wait_for(self._cm.__aenter__(), TIMEOUT)
        return self.protocol

    async def __aexit__(self, *exc):
        return await self._cm.__aexit__(*exc)
