"""The SUT's wire protocol: framed request/response commands over TCP.

In the spirit of RocketMQ's remoting command. `opaque` pairs a response with
its request, so one connection multiplexes many requests in flight. One
module per part: `codes` (the request and response code table), `frames`
(the frame codec), `server` (RpcServer and its per-connection handling),
`client` (RpcClient). Every name is importable from `sut.protocol`.
"""
from sut.protocol.client import RpcClient, RpcConnectionError, RpcError, RpcTimeout
from sut.protocol.codes import RequestCode, ResponseCode
from sut.protocol.frames import (FLAG_ONEWAY, FLAG_RESPONSE, MAX_FRAME_BYTES, BadRequest, Command, FrameDecoder,
                                 ProtocolError, Scalar, WriteBatch, decode_payload, encode, get_field, read_command)
from sut.protocol.server import Connection, Handler, RpcServer, ServerLimits

__all__ = ["FLAG_ONEWAY", "FLAG_RESPONSE", "MAX_FRAME_BYTES", "BadRequest", "Command", "Connection", "FrameDecoder",
           "Handler", "ProtocolError", "RequestCode", "ResponseCode", "RpcClient", "RpcConnectionError", "RpcError",
           "RpcServer", "RpcTimeout", "Scalar", "ServerLimits", "WriteBatch", "decode_payload", "encode", "get_field",
           "read_command"]
