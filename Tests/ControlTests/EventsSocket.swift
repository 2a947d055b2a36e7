import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// A client of the remote's push channel, `/api/events`, as a page's WebSocket is: NIO's typed
/// upgrader and async channel, masked frames, no TLS (a test has no use for more).
enum EventsSocket {
    private enum Upgrade: Sendable {
        case socket(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>)
        case refused
    }

    struct Refused: Error {}

    /// Connects to `ws://127.0.0.1:PORT/api/events`, sends `first` if given, and hands each text
    /// message to `onText` until it says to stop (false) or the server closes. Returns the close
    /// code the server sent, nil if it sent none.
    static func run(port: Int, first: String? = nil, onText: @Sendable (String) async throws -> Bool) async throws -> WebSocketErrorCode? {
        let upgrade: EventLoopFuture<Upgrade> = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let upgrader = NIOTypedWebSocketClientUpgrader<Upgrade>(maxFrameSize: 1 << 20) { channel, _ in
                        channel.eventLoop.makeCompletedFuture { .socket(try NIOAsyncChannel(wrappingChannelSynchronously: channel)) }
                    }
                    var headers = HTTPHeaders()
                    headers.add(name: "Host", value: "127.0.0.1:\(port)")
                    headers.add(name: "Content-Length", value: "0")
                    let configuration = NIOTypedHTTPClientUpgradeConfiguration(
                        upgradeRequestHead: HTTPRequestHead(version: .http1_1, method: .GET, uri: "/api/events", headers: headers),
                        upgraders: [upgrader],
                        notUpgradingCompletionHandler: { channel in channel.eventLoop.makeCompletedFuture { .refused } })
                    // The server speaks first: its first frame often comes in the same read as the
                    // 101, and NIO drops what follows the response unless told to forward it.
                    var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: configuration)
                    pipeline.leftOverBytesStrategy = .forwardBytes
                    return try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(configuration: pipeline)
                }
            }
        guard case .socket(let socket) = try await upgrade.get() else { throw Refused() }
        return try await socket.executeThenClose { inbound, outbound in
            if let first {
                try await outbound.write(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: ByteBuffer(string: first)))
            }
            for try await frame in inbound {
                switch frame.opcode {
                case .text:
                    guard try await onText(String(buffer: frame.data)) else { return nil }
                case .connectionClose:
                    var data = frame.unmaskedData
                    return data.readWebSocketErrorCode()
                default:
                    continue
                }
            }
            return nil
        }
    }
}
