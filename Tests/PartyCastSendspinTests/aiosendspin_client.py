# aiosendspin's own client handshake (run_handshake_client, as `sendspin daemon` runs it) over a
# WebSocket stand-in: each frame one JSON line, {"t": text} or {"b": base64}, on stdout to the
# server under test and on stdin from it. Then it speaks as a player and prints what it read.
import asyncio, json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from line_socket import LineSocket
from aiosendspin.models.core import ClientHelloMessage, ClientHelloPayload, ClientTimeMessage, ClientTimePayload
from aiosendspin.models.player import ClientHelloPlayerSupport, SupportedAudioFormat, unpack_player_audio_header, PLAYER_AUDIO_HEADER_SIZE
from aiosendspin.models.types import AudioCodec, ServerMessage
from aiosendspin.noise import Identity
from aiosendspin.noise.constants import SENTINEL_PSK
from aiosendspin.noise.driver import run_handshake_client
from aiosendspin.noise.keys import psk_id_for
from aiosendspin.noise.session import NoiseCipherSuite
from aiosendspin.noise.trust_store import PskCategory, ResolvedPsk


async def resolve(psk_id, category):
    if category is PskCategory.SENTINEL and psk_id == psk_id_for(SENTINEL_PSK):
        return ResolvedPsk(psk_id, SENTINEL_PSK, PskCategory.SENTINEL)
    return None


async def main():
    async with asyncio.timeout(30):
        result = await run_handshake_client(LineSocket(), local_identity=Identity.generate(),
                                            suite=NoiseCipherSuite(sys.argv[1]), psk_resolver=resolve)
        ws = result.encrypted_ws
        hello = ServerMessage.from_json((await ws.receive()).data)
        await ws.send_str(ClientHelloMessage(ClientHelloPayload(name="Reference", supported_roles=["player@v1"],
            player_support=ClientHelloPlayerSupport(supported_formats=[SupportedAudioFormat(
                codec=AudioCodec.PCM, channels=2, sample_rate=48000, bit_depth=16)], buffer_capacity=1000000))).to_json())
        activate = ServerMessage.from_json((await ws.receive()).data)
        await ws.send_str(ClientTimeMessage(ClientTimePayload(client_transmitted=424242)).to_json())
        time = ServerMessage.from_json((await ws.receive()).data)
        chunk = (await ws.receive()).data
        header = unpack_player_audio_header(chunk)
    print(json.dumps({"result": {
        "server_id": result.peer_id, "psk": result.psk.category.value, "server_name": hello.payload.name,
        "activities": [a.value for a in activate.payload.activities], "active_roles": activate.payload.active_roles,
        "time": time.payload.to_dict(), "audio": {"type": header.message_type, "timestamp": header.timestamp_us,
        "send_ahead": header.send_ahead, "payload": list(chunk[PLAYER_AUDIO_HEADER_SIZE:])}}}), flush=True)


asyncio.run(main())
