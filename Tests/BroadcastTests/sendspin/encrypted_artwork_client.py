# aiosendspin 10's own client (Noise, unpaired access) with the artwork and metadata roles, its
# channel in client/state as it says them: prints each picture its artwork listener is handed, as
# JSON, once one is not empty. Its warnings (protocol errors it closes on, say) go to stderr.
import asyncio, hashlib, json, logging, sys
from dataclasses import replace
from aiosendspin.client import SendspinClient
from aiosendspin.models.artwork import ArtworkChannel
from aiosendspin.models.types import ArtworkSource, PictureFormat, Roles
from aiosendspin.noise import Identity, InMemoryClientPairingStore

logging.basicConfig(level=logging.WARNING)


async def main():
    store = InMemoryClientPairingStore()
    await store.store_pairing_config(replace(await store.get_pairing_config(), unpaired_access_enabled=True))
    client = SendspinClient(identity=Identity.generate(), client_name="encrypted-frame", roles=[Roles.ARTWORK, Roles.METADATA],
                            pairing_store=store, artwork_channels=[
                                ArtworkChannel(source=ArtworkSource.ALBUM, format=PictureFormat.JPEG, width=300, height=300)])
    images, shown = [], asyncio.Event()

    def on_artwork(channel, data):
        images.append({"channel": channel, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        if data:
            shown.set()

    client.add_artwork_listener(on_artwork)
    async with asyncio.timeout(30):
        await client.connect(sys.argv[1])
        await shown.wait()
        await client.disconnect()
    print(json.dumps(images))


asyncio.run(main())
