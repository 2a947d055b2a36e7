# aiosendspin's own server handshake (run_handshake_server, as `sendspin serve` runs it) over
# the line WebSocket stand-in, then a player's session as its server would hold it: every client
# message read with aiosendspin's models, and what they said printed for the test.
import asyncio, json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from line_socket import LineSocket
from aiosendspin.models.core import ClientHelloMessage, ClientStateMessage, ClientTimeMessage
from aiosendspin.models.player import pack_player_audio_frame, stamp_send_ahead
from aiosendspin.models.types import ClientMessage
from aiosendspin.noise import Identity
from aiosendspin.noise.constants import SENTINEL_PSK
from aiosendspin.noise.driver import run_handshake_server
from aiosendspin.noise.keys import psk_id_for
from aiosendspin.noise.trust_store import PskCategory, ResolvedPsk


async def provide(client_id):
    return ResolvedPsk(psk_id_for(SENTINEL_PSK), SENTINEL_PSK, PskCategory.SENTINEL)


async def read(ws):
    return ClientMessage.from_json((await ws.receive()).data)


def player_state(state):
    p = state.payload.player
    return {"available": state.payload.available, "volume": p.volume, "muted": p.muted, "output_delay_ms": p.output_delay_ms,
            "required_lead_time_ms": p.required_lead_time_ms, "min_buffer_ms": p.min_buffer_ms,
            "supported_commands": [c.value for c in p.supported_commands or []], "legacy_delay_key": p.legacy_delay_key,
            "ignored_commands": p.ignored_commands}


async def main():
    async with asyncio.timeout(30):
        result = await run_handshake_server(LineSocket(), local_identity=Identity.generate(), psk_provider=provide)
        ws = result.encrypted_ws
        await ws.send_str(json.dumps({"type": "server/hello", "payload": {"server_id": result.peer_id, "name": "Reference", "version": 1}}))
        hello = await read(ws)
        assert isinstance(hello, ClientHelloMessage), type(hello)
        h = hello.payload
        await ws.send_str(json.dumps({"type": "server/activate", "payload": {"activities": ["playback"], "active_roles": ["player@v1"]}}))
        state = await read(ws)
        assert isinstance(state, ClientStateMessage), type(state)
        time = await read(ws)
        assert isinstance(time, ClientTimeMessage), type(time)
        await ws.send_str(json.dumps({"type": "server/time", "payload": {"client_transmitted": time.payload.client_transmitted,
                                                                        "server_received": 1000, "server_transmitted": 1100}}))
        await ws.send_str(json.dumps({"type": "stream/start", "payload": {"player": {"codec": "pcm", "sample_rate": 48000, "channels": 2, "bit_depth": 16}}}))
        frame = pack_player_audio_frame(7_000_000, bytes([1, 0, 2, 0]))
        stamp_send_ahead(frame, 250_000)
        await ws.send_bytes(bytes(frame))
        await ws.send_str(json.dumps({"type": "server/command", "payload": {"player": {"command": "volume", "volume": 30}}}))
        after = await read(ws)
    print(json.dumps({"result": {
        "client_id": result.peer_id, "noncompliance": list(result.noncompliance), "psk": result.psk.category.value,
        "hello": {"name": h.name, "supported_roles": h.supported_roles,
                  "formats": [[f.codec.value, f.sample_rate, f.channels, f.bit_depth] for f in h.player_support.supported_formats],
                  "buffer_capacity": h.player_support.buffer_capacity, "pairing_psk": h.supported_pair_methods.pairing_psk is not None,
                  "unpaired_access": h.unpaired_access.enabled, "unpaired_access_incomplete": h.unpaired_access_incomplete,
                  "legacy_support_keys_used": h.legacy_support_keys_used, "unlisted_support_roles": h.unlisted_support_roles,
                  "missing_support_roles": h.missing_support_roles},
        "state": player_state(state), "time": time.payload.client_transmitted, "after_command": player_state(after)}}), flush=True)


asyncio.run(main())
