# A "Sendspin player" waiting for servers that no server should trust: on 127.0.0.1:PORT, its
# connections in turn answer the upgrade request with random bytes; open a WebSocket, then send
# well-framed messages that are no Sendspin (malformed JSON, a hello of the wrong side, binary);
# open a WebSocket, then send random bytes where frames belong (each of those then closes);
# refuse the upgrade (404) and keep the connection open for the server to close, 5 s at most
# (less than the party's upgrade deadline, so only a close of its own counts); or open a
# WebSocket, send a valid client/hello with the player role, and close once answered.
# With a third argument, every connection is a valid hello then a client/goodbye with that reason.
# Prints "connection N" as each one's request arrives, and "connection N closed by the server"
# when a refused one is.
import asyncio, base64, hashlib, json, os, sys

TURNS = 5
goodbye = sys.argv[2] if len(sys.argv) > 2 else None

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
count = 0


def send_text(writer, message):
    payload = message.encode()  # unmasked, as a WebSocket server's frames are
    length = bytes([len(payload)]) if len(payload) < 126 else bytes([126]) + len(payload).to_bytes(2, "big")
    writer.write(b"\x81" + length + payload)


def hello(turn):
    formats = [{"codec": "pcm", "sample_rate": rate, "channels": channels, "bit_depth": 16} for rate in (44100, 48000) for channels in (1, 2)]
    return json.dumps({"type": "client/hello", "payload": {
        "client_id": f"hostile-{turn}", "name": "hostile", "version": 1, "supported_roles": ["player@v1"],
        "player@v1_support": {"supported_formats": formats, "buffer_capacity": 1_000_000}}})


async def handle(reader, writer):
    global count
    turn, count = count, count + 1
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
        writer.close()
        return
    print(f"connection {turn}", flush=True)
    if goodbye is None and turn % TURNS == 3:
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        try:
            if await asyncio.wait_for(reader.read(), 5) == b"":
                print(f"connection {turn} closed by the server", flush=True)
        except TimeoutError:
            pass
    elif goodbye is None and turn % TURNS == 0:
        writer.write(os.urandom(4096))
    else:
        key = next(line.split(b":", 1)[1].strip() for line in head.split(b"\r\n") if line.lower().startswith(b"sec-websocket-key:"))
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        if goodbye is not None or turn % TURNS == 4:
            send_text(writer, hello(turn))
            # The server's first answer: it has read the hello.
            try:
                await asyncio.wait_for(reader.read(1), 5)
            except TimeoutError:
                pass
            if goodbye is not None:
                send_text(writer, json.dumps({"type": "client/goodbye", "payload": {"reason": goodbye}}))
        elif turn % TURNS == 1:
            # Unmasked, as a WebSocket server's frames are: text, text, binary.
            for opcode, payload in [(0x81, b"{not json"), (0x81, b'{"type":"server/hello","payload":{}}'), (0x82, os.urandom(100))]:
                writer.write(bytes([opcode, len(payload)]) + payload)
        else:
            writer.write(os.urandom(4096))
    await writer.drain()
    writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[1]))
    async with server:
        await server.serve_forever()  # until the test ends it (SIGTERM, by PID)


asyncio.run(main())
