# A Sendspin artwork and metadata client of the spec's plain dialect (its channels in client/hello's
# artwork@v1_support, as the spec has them), on aiohttp's WebSocket, messages read with aiosendspin's
# models. Writes the first picture shown on channel 0 to IMAGE. Then asks, one request after the
# other's stream/start, for other sizes of channel 0 (3 times), for no picture, for the album again,
# and then for other sizes until the server closes; records what each request brought ("answers":
# its binary messages before the next request's stream/start; "requests": how many it sent).
# Prints what it was told as JSON.
import asyncio, json, sys
import aiohttp
from aiosendspin.models.core import ClientHelloMessage, ClientHelloPayload, LegacyServerHelloPayload
from aiosendspin.models.types import ServerMessage

HELLO = {"type": "client/hello", "payload": {
    "client_id": "frame-1", "name": "picture-frame", "version": 1, "supported_roles": ["artwork@v1", "metadata@v1"],
    "artwork@v1_support": {"channels": [{"source": "album", "format": "jpeg", "media_width": 300, "media_height": 300}]}}}


async def main():
    # The reference's own reading of our hello's shape first: it must be a client/hello it accepts.
    ClientHelloMessage(ClientHelloPayload.from_dict(HELLO["payload"]))
    seen = {"starts": [], "images": []}
    async with asyncio.timeout(30), aiohttp.ClientSession() as session, session.ws_connect(sys.argv[1]) as ws:
        await ws.send_str(json.dumps(HELLO))
        seen["hello"] = LegacyServerHelloPayload.from_dict(json.loads((await ws.receive()).data)["payload"]).to_dict()
        while not any(image["bytes"] > 0 for image in seen["images"]) or "metadata" not in seen:
            message = await ws.receive()
            if message.type == aiohttp.WSMsgType.TEXT:
                parsed = ServerMessage.from_json(message.data)
                if parsed.type == "stream/start":
                    seen["starts"].append(parsed.payload.to_dict())
                if parsed.type == "server/state" and parsed.payload.metadata is not None and parsed.payload.metadata.title:
                    seen["metadata"] = parsed.payload.metadata.to_dict()
            elif message.type == aiohttp.WSMsgType.BINARY:
                data = message.data
                seen["images"].append({"type": data[0], "timestamp": int.from_bytes(data[1:9], "big", signed=True), "bytes": len(data) - 9})
                if data[0] == 8 and len(data) > 9:
                    open(sys.argv[2], "wb").write(data[9:])
            else:
                break
        seen["answers"], seen["requests"] = [], 0
        changes = [{"width": 200 + n, "height": 200 + n} for n in range(3)] + [{"source": "none"}, {"source": "album"}]

        async def request():
            n = seen["requests"]
            change = changes[n] if n < len(changes) else {"width": 100 + n, "height": 100}
            await ws.send_str(json.dumps({"type": "stream/request-format", "payload": {"artwork": {"channel": 0, **change}}}))
            seen["requests"] += 1

        await request()
        while seen["requests"] < 200:
            message = await ws.receive()
            if message.type == aiohttp.WSMsgType.TEXT:
                if ServerMessage.from_json(message.data).type == "stream/start":
                    seen["answers"].append(0)
                    await request()
            elif message.type == aiohttp.WSMsgType.BINARY:
                seen["answers"][-1] += 1
            else:
                seen["closed"] = True
                break
    print(json.dumps(seen, default=str))


asyncio.run(main())
