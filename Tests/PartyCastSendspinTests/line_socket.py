# A WebSocket stand-in for aiosendspin's drivers: each frame one JSON line, {"t": text} or
# {"b": base64}, on stdout to the peer under test and on stdin from it.
import asyncio, base64, json, sys
from aiohttp import WSMessage, WSMsgType


class LineSocket:
    closed = False
    close_code = None

    async def send_str(self, data):
        print(json.dumps({"t": data}), flush=True)

    async def send_bytes(self, data):
        print(json.dumps({"b": base64.b64encode(bytes(data)).decode()}), flush=True)

    async def receive(self):
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        if not line:
            return WSMessage(WSMsgType.CLOSED, None, None)
        frame = json.loads(line)
        if "t" in frame:
            return WSMessage(WSMsgType.TEXT, frame["t"], None)
        return WSMessage(WSMsgType.BINARY, base64.b64decode(frame["b"]), None)

    async def close(self):
        return True

    def exception(self):
        return None
