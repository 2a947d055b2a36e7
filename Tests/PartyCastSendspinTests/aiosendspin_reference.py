# The aiosendspin reference side of SendspinReferenceTests: `client` prints client messages built with
# aiosendspin's models; `server FILE` reads each of our server messages (one a line) with them.
import json, sys
from aiosendspin.models.core import (ClientHelloMessage, ClientHelloPayload, ClientTimeMessage, ClientTimePayload,
    ClientStateMessage, ClientStatePayload, ClientCommandMessage, ClientCommandPayload, LegacyServerHelloPayload)
from aiosendspin.models.player import ClientHelloPlayerSupport, SupportedAudioFormat, PlayerStatePayload
from aiosendspin.models.controller import ControllerCommandPayload
from aiosendspin.models.types import AudioCodec, MediaCommand, PlayerCommand, ServerMessage

fmt = lambda c, ch, r, d: SupportedAudioFormat(codec=c, channels=ch, sample_rate=r, bit_depth=d)
if sys.argv[1] == "client":
    print(ClientHelloMessage(ClientHelloPayload(name="Ref", client_id="ref-1", version=1,
        supported_roles=["player@v1", "controller@v1", "metadata@v1"],
        player_support=ClientHelloPlayerSupport(supported_formats=[fmt(AudioCodec.FLAC, 2, 48000, 24),
            fmt(AudioCodec.PCM, 2, 48000, 16)], buffer_capacity=32000000))).to_json())
    print(ClientTimeMessage(ClientTimePayload(client_transmitted=123456789)).to_json())
    print(ClientStateMessage(ClientStatePayload(available=True, player=PlayerStatePayload(volume=35, muted=True,
        output_delay_ms=250, supported_commands=[PlayerCommand.VOLUME, PlayerCommand.MUTE]))).to_json())
    print(ClientCommandMessage(ClientCommandPayload(controller=ControllerCommandPayload(command=MediaCommand.NEXT))).to_json())
elif sys.argv[1] == "artwork-client":
    from aiosendspin.models.artwork import ArtworkChannel, ClientHelloArtworkSupport, ClientStateArtwork
    from aiosendspin.models.types import ArtworkSource, PictureFormat
    print(ClientHelloMessage(ClientHelloPayload(name="Frame", client_id="frame-1", version=1, supported_roles=["artwork@v1"],
        artwork_support=ClientHelloArtworkSupport(channels=[ArtworkChannel(source=ArtworkSource.ALBUM, format=PictureFormat.JPEG,
            width=300, height=200)]))).to_json())
    print(ClientStateMessage(ClientStatePayload(artwork=ClientStateArtwork(channels=[
        ArtworkChannel(source=ArtworkSource.ALBUM, format=PictureFormat.PNG, width=800, height=800),
        ArtworkChannel(source=ArtworkSource.NONE)]))).to_json())
elif sys.argv[1] == "artwork":
    # Each line one of our messages: {"text": JSON} or {"binary": hex}. Binary ones are checked as
    # aiosendspin 10's client checks them, then announces and parts put together into images.
    import hashlib
    from aiosendspin.client.connection import _malformed_artwork_message
    from aiosendspin.models.artwork import ARTWORK_FLAG_ANNOUNCE, ARTWORK_PREFIX_SIZE, unpack_artwork_announce
    pending = {}
    for line in open(sys.argv[2]):
        message = json.loads(line)
        if "text" in message:
            parsed = ServerMessage.from_json(message["text"])
            print(json.dumps({"class": type(parsed).__name__, "read": parsed.to_dict()}))
            continue
        data = bytes.fromhex(message["binary"])
        malformed = _malformed_artwork_message(data)
        if malformed:
            print(json.dumps({"malformed": malformed}))
            continue
        if data[1] & ARTWORK_FLAG_ANNOUNCE:
            announce = unpack_artwork_announce(data)
            pending[announce.channel] = (announce, bytearray())
        else:
            pending[data[0] - 8][1].extend(data[ARTWORK_PREFIX_SIZE:])
        announce, image = pending[data[0] - 8]
        if len(image) == announce.total_size:
            print(json.dumps({"channel": announce.channel, "timestamp": announce.timestamp_us, "bytes": len(image),
                              "sha256": hashlib.sha256(image).hexdigest()}))
else:
    # Each line ours; each answer the reference's reading of it, as JSON.
    for line in open(sys.argv[2]):
        message = json.loads(line)
        if message["type"] == "server/hello" and "server_id" in message["payload"]:
            parsed = LegacyServerHelloPayload.from_dict(message["payload"])
        else:
            parsed = ServerMessage.from_json(line)
        print(json.dumps({"type": message["type"], "class": type(parsed).__name__, "read": parsed.to_dict()}, default=str))
