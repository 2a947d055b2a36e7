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
else:
    # Each line ours; each answer the reference's reading of it, as JSON.
    for line in open(sys.argv[2]):
        message = json.loads(line)
        if message["type"] == "server/hello" and "server_id" in message["payload"]:
            parsed = LegacyServerHelloPayload.from_dict(message["payload"])
        else:
            parsed = ServerMessage.from_json(line)
        print(json.dumps({"type": message["type"], "class": type(parsed).__name__, "read": parsed.to_dict()}, default=str))
