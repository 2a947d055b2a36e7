# A Sendspin player of the spec's plain dialect (client/hello in the clear, as players older than
# aiosendspin 10 speak it), on aiohttp's WebSocket, every message read with aiosendspin's models.
# Prints one JSON object: what it was told and the first audio frames' headers.
import asyncio, json, sys
import aiohttp
from aiosendspin.models.core import (ClientHelloMessage, ClientHelloPayload, ClientTimeMessage, ClientTimePayload,
                                     LegacyServerHelloPayload)
from aiosendspin.models.player import ClientHelloPlayerSupport, SupportedAudioFormat
from aiosendspin.models.types import AudioCodec, ServerMessage


async def main():
    seen = {"text": [], "frames": []}
    async with asyncio.timeout(30), aiohttp.ClientSession() as session, session.ws_connect(sys.argv[1]) as ws:
        await ws.send_str(ClientHelloMessage(ClientHelloPayload(
            name="plain-player", client_id="plain-1", version=1, supported_roles=["player@v1", "metadata@v1", "controller@v1"],
            player_support=ClientHelloPlayerSupport(supported_formats=[SupportedAudioFormat(
                codec=AudioCodec.PCM, channels=2, sample_rate=48000, bit_depth=16)], buffer_capacity=1000000))).to_json())
        seen["hello"] = LegacyServerHelloPayload.from_dict(json.loads((await ws.receive()).data)["payload"]).to_dict()
        await ws.send_str(ClientTimeMessage(ClientTimePayload(client_transmitted=5)).to_json())
        while "time" not in seen or len(seen["frames"]) < 10 or "metadata" not in seen or "controller" not in seen:
            message = await ws.receive()
            if message.type == aiohttp.WSMsgType.TEXT:
                parsed = ServerMessage.from_json(message.data)
                seen["text"].append(parsed.type)
                if parsed.type == "stream/start":
                    seen["format"] = parsed.payload.player.to_dict()
                if parsed.type == "server/time":
                    seen["time"] = parsed.payload.to_dict()
                if parsed.type == "server/state":
                    seen.update({role: value for role, value in parsed.payload.to_dict().items() if role in ("metadata", "controller")})
            elif message.type == aiohttp.WSMsgType.BINARY:
                data = message.data
                seen["frames"].append({"type": data[0], "timestamp": int.from_bytes(data[1:9], "big", signed=True), "bytes": len(data)})
            else:
                break
    print(json.dumps(seen, default=str))


asyncio.run(main())
