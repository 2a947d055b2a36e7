# A "Sendspin player" waiting for servers that no server should trust: on 127.0.0.1:PORT, its
# connections in turn answer the upgrade request with random bytes; open a WebSocket, then send
# well-framed messages that are no Sendspin (malformed JSON, a hello of the wrong side, binary);
# open a WebSocket, then send random bytes where frames belong (each of those then closes); or
# refuse the upgrade (404) and keep the connection open for the server to close, 5 s at most
# (less than the party's upgrade deadline, so only a close of its own counts).
# Prints "connection N" as each one's request arrives, and "connection N closed by the server"
# when a refused one is.
import asyncio, base64, hashlib, os, sys

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
count = 0


async def handle(reader, writer):
    global count
    turn, count = count, count + 1
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
        writer.close()
        return
    print(f"connection {turn}", flush=True)
    if turn % 4 == 3:
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        try:
            if await asyncio.wait_for(reader.read(), 5) == b"":
                print(f"connection {turn} closed by the server", flush=True)
        except TimeoutError:
            pass
    elif turn % 4 == 0:
        writer.write(os.urandom(4096))
    else:
        key = next(line.split(b":", 1)[1].strip() for line in head.split(b"\r\n") if line.lower().startswith(b"sec-websocket-key:"))
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        if turn % 4 == 1:
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
        await asyncio.sleep(120)


asyncio.run(main())
