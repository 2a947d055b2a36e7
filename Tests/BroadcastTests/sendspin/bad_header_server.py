# A Sendspin server (aiosendspin's own Noise handshake, on aiohttp) whose first two connections
# start a FLAC stream with a header that is no FLAC, then send a few chunks of it; the third
# streams PCM: a 440 Hz tone at the server's clock (time.monotonic in µs), its clock answered.
# On 127.0.0.1:PORT/sendspin; prints "connection N at T" (time.monotonic, s) as each one's
# handshake is through.
import asyncio, base64, json, math, struct, sys, time
from aiohttp import web
from aiosendspin.models.player import pack_player_audio_frame, stamp_send_ahead
from aiosendspin.models.types import ClientMessage
from aiosendspin.noise import Identity
from aiosendspin.noise.constants import SENTINEL_PSK
from aiosendspin.noise.driver import run_handshake_server
from aiosendspin.noise.keys import psk_id_for
from aiosendspin.noise.trust_store import PskCategory, ResolvedPsk

identity = Identity.generate()
count = 0
now_us = lambda: time.monotonic_ns() // 1000


async def provide(client_id):
    return ResolvedPsk(psk_id_for(SENTINEL_PSK), SENTINEL_PSK, PskCategory.SENTINEL)


async def answer_clock(ws):
    async for message in ws:
        received = now_us()
        parsed = ClientMessage.from_json(message.data)
        if parsed.type == "client/time":
            await ws.send_str(json.dumps({"type": "server/time", "payload": {
                "client_transmitted": parsed.payload.client_transmitted, "server_received": received, "server_transmitted": now_us()}}))


async def handle(request):
    global count
    raw = web.WebSocketResponse()
    await raw.prepare(request)
    ws = (await run_handshake_server(raw, local_identity=identity, psk_provider=provide)).encrypted_ws
    turn, count = count, count + 1
    print(f"connection {turn} at {time.monotonic()}", flush=True)
    await ws.send_str(json.dumps({"type": "server/hello", "payload": {"name": "Hostile", "version": 1}}))
    await ws.receive()  # client/hello
    await ws.send_str(json.dumps({"type": "server/activate", "payload": {"activities": ["playback"], "active_roles": ["player@v1"]}}))
    clock = asyncio.create_task(answer_clock(ws))
    if turn < 2:
        header = base64.b64encode(b"fLaC" + b"\xff" * 38).decode()
        await ws.send_str(json.dumps({"type": "stream/start", "payload": {"player": {
            "codec": "flac", "sample_rate": 48000, "channels": 2, "bit_depth": 16, "codec_header": header}}}))
        for chunk in range(5):
            await ws.send_bytes(bytes(pack_player_audio_frame(now_us() + 500_000 + chunk * 20_000, b"\xff" * 100)))
    else:
        await ws.send_str(json.dumps({"type": "stream/start", "payload": {"player": {
            "codec": "pcm", "sample_rate": 48000, "channels": 2, "bit_depth": 16}}}))
        start = now_us() + 500_000
        for chunk in range(1500):  # 30 s of 20 ms chunks, sent 0.5 s ahead
            samples = (int(8000 * math.sin(2 * math.pi * 440 * (chunk * 960 + i) / 48000)) for i in range(960))
            frame = pack_player_audio_frame(start + chunk * 20_000, b"".join(struct.pack("<hh", s, s) for s in samples))
            stamp_send_ahead(frame, 500_000)
            await ws.send_bytes(bytes(frame))
            await asyncio.sleep(max(0, (start + chunk * 20_000 - 500_000 - now_us()) / 1e6))
    await clock
    return raw


app = web.Application()
app.router.add_get("/sendspin", handle)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
