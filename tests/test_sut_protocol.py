"""The wire protocol: frame codec (property tests) and the RPC server/client in-process."""
from __future__ import annotations

import asyncio
import logging
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sut.protocol import (
    FLAG_RESPONSE, BadRequest, Command, FrameDecoder, ProtocolError, RequestCode, ResponseCode,
    RpcClient, RpcConnectionError, RpcServer, RpcTimeout, decode_payload, encode, get_field,
)

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**62, 2**62), st.text(max_size=20))
fields_strategy = st.dictionaries(st.text(max_size=10), st.one_of(json_scalars, st.lists(json_scalars, max_size=4)),
                                  max_size=6)


@given(code=st.integers(0, 2**31), opaque=st.integers(0, 2**40), flags=st.integers(0, 3),
       fields=fields_strategy, body=st.binary(max_size=300))
def test_every_command_survives_a_round_trip(code, opaque, flags, fields, body):
    frame = encode(Command(code, fields, body, opaque, flags))
    (total,) = struct.unpack(">I", frame[:4])
    assert total == len(frame) - 4
    back = decode_payload(frame[4:])
    assert (back.code, back.opaque, back.flags, back.fields, back.body) == (code, opaque, flags, fields, body)


@given(st.binary(max_size=500))
@settings(max_examples=300)
def test_arbitrary_bytes_decode_or_raise_protocol_error_only(data):
    try:
        decode_payload(data)
    except ProtocolError:
        pass
    commands, error = FrameDecoder(max_frame=1000).feed(data)
    assert error is None or isinstance(error, ProtocolError)


@given(st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=30))
def test_frames_split_anywhere_decode_the_same(chunks):
    frames = [encode(Command(RequestCode.PULL_MESSAGE, {"i": i}, bytes([i]) * i, i)) for i in range(5)]
    stream = b"".join(frames)
    cuts = sorted({min(len(stream), sum(len(c) for c in chunks[:k])) for k in range(len(chunks))})
    decoder, got = FrameDecoder(), []
    for a, b in zip([0, *cuts], [*cuts, len(stream)]):
        commands, error = decoder.feed(stream[a:b])
        assert error is None
        got += commands
    assert [c.fields["i"] for c in got] == list(range(5)) and decoder.pending == 0


def test_oversized_frames_are_refused_before_reading_them():
    commands, error = FrameDecoder(max_frame=100).feed(struct.pack(">I", 101) + b"x" * 10)
    assert commands == [] and "exceeds the maximum of 100" in str(error)


def test_deeply_nested_json_is_a_protocol_error():
    header = b"[" * 100_000
    with pytest.raises(ProtocolError, match="not JSON"):
        decode_payload(struct.pack(">I", len(header)) + header)


def test_get_field_checks_types():
    cmd = Command(1, {"n": 3, "flag": True, "s": "x"})
    assert get_field(cmd, "n", int) == 3 and get_field(cmd, "missing", int, 7) == 7
    for name, kind in (("flag", int), ("s", int), ("missing", str)):
        with pytest.raises(BadRequest):
            get_field(cmd, name, kind)


async def _server(handler, log: logging.Logger | None = None) -> RpcServer:
    server = RpcServer("127.0.0.1", 0, handler, log or logging.getLogger("test"))
    await server.start()
    server.port = server._server.sockets[0].getsockname()[1]
    return server


def test_a_malformed_frame_closes_only_that_connection(caplog):
    async def handler(cmd, conn):
        if cmd.code == 2:
            raise BadRequest("field x is wrong")
        if cmd.code == 3:
            raise RuntimeError("bug")
        return cmd.reply(ResponseCode.SUCCESS, {"echo": cmd.fields.get("v")}, cmd.body)

    async def scenario():
        server = await _server(handler)
        good = RpcClient("127.0.0.1", server.port)
        try:
            assert (await good.call(1, {"v": 1}, b"abc")).body == b"abc"
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(struct.pack(">II", 9, 5) + b"{nope")
            assert await reader.read() == b""  # closed by the server
            bad = await good.call(2)
            assert bad.code == ResponseCode.BAD_REQUEST and "field x" in bad.fields["error"]
            assert (await good.call(3)).code == ResponseCode.SYSTEM_ERROR
            assert (await good.call(1, {"v": 2})).fields["echo"] == 2  # still served
        finally:
            await good.close()
            await server.close()

    with caplog.at_level(logging.ERROR):
        asyncio.run(scenario())
    assert "malformed frame" in caplog.text and "handler failed" in caplog.text


def test_a_response_frame_sent_to_a_server_closes_the_connection(caplog):
    async def scenario():
        server = await _server(lambda cmd, conn: None)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(encode(Command(0, {}, b"", 7, FLAG_RESPONSE)))
        assert await reader.read() == b""
        await server.close()

    with caplog.at_level(logging.ERROR):
        asyncio.run(scenario())
    assert "response frame" in caplog.text


def test_client_errors_say_whether_the_request_was_sent():
    async def slow(cmd, conn):
        await asyncio.sleep(10)

    async def scenario():
        server = await _server(slow)
        port = server.port
        client = RpcClient("127.0.0.1", port)
        with pytest.raises(RpcTimeout):
            await client.call(1, timeout=0.2)
        pending = asyncio.create_task(client.call(1, timeout=5))
        await asyncio.sleep(0.1)
        await server.close()
        with pytest.raises(RpcConnectionError) as broken:
            await pending
        assert broken.value.sent
        await client.close()
        refused = RpcClient("127.0.0.1", port)
        with pytest.raises(RpcConnectionError) as never:
            await refused.call(1)
        assert not never.value.sent

    asyncio.run(scenario())


def test_many_calls_in_flight_on_one_connection_pair_up_by_opaque():
    async def handler(cmd, conn):
        await asyncio.sleep(0.001 * (cmd.fields["i"] % 7))
        return cmd.reply(ResponseCode.SUCCESS, {"i": cmd.fields["i"]})

    async def scenario():
        server = await _server(handler)
        client = RpcClient("127.0.0.1", server.port)
        replies = await asyncio.gather(*(client.call(1, {"i": i}) for i in range(200)))
        await client.close()
        await server.close()
        return [r.fields["i"] for r in replies]

    assert asyncio.run(scenario()) == list(range(200))


def test_a_client_that_only_listens_for_pushes_hears_at_once_when_its_connection_ends():
    async def ok(cmd, conn):
        return cmd.reply(0)

    async def scenario():
        server = await _server(ok)
        lost: asyncio.Queue[str] = asyncio.Queue()
        client = RpcClient("127.0.0.1", server.port, on_lost=lost.put_nowait)
        await client.call(1)
        assert lost.empty()
        await server.close()   # the peer goes away while nothing is in flight
        reason = await asyncio.wait_for(lost.get(), 2)
        await client.close()
        return reason, lost.qsize()

    reason, more = asyncio.run(scenario())
    assert "127.0.0.1" in reason and more == 0   # once per connection, not again on close()


@pytest.mark.parametrize("close_on_timeout", [False, True])
def test_a_timed_out_call_closes_its_connection_only_when_asked(close_on_timeout):
    async def first_call_hangs(cmd, conn):
        if cmd.fields.get("hang"):
            await asyncio.sleep(10)
        return cmd.reply(ResponseCode.SUCCESS, {"peer": conn.peer})

    async def scenario():
        server = await _server(first_call_hangs)
        client = RpcClient("127.0.0.1", server.port, close_on_timeout=close_on_timeout)
        before = (await client.call(1)).fields["peer"]
        in_flight = asyncio.create_task(client.call(1, {"hang": True}, timeout=5))
        await asyncio.sleep(0.05)
        with pytest.raises(RpcTimeout):
            await client.call(1, {"hang": True}, timeout=0.2)
        connected = client.connected
        after = (await client.call(1)).fields["peer"]
        in_flight.cancel()
        outcome = await asyncio.gather(in_flight, return_exceptions=True)
        await client.close()
        await server.close()
        return before, connected, after, outcome[0]

    before, connected, after, in_flight = asyncio.run(scenario())
    assert connected is not close_on_timeout
    assert (after != before) is close_on_timeout   # a fresh connection (new local port) only when asked
    # Closing the connection fails the other calls pending on it, as Netty's closeChannel does.
    assert isinstance(in_flight, RpcConnectionError if close_on_timeout else asyncio.CancelledError)
