import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import PartyCastClock
import PartyCastClockExchange
import PartyCastCore
import PartyCastNetwork
import PartyCastSendspin
import PartyCastWire

/// What the connection hands the player's producer thread, in the order it came.
enum SendspinEvent: Sendable {
    case joined(serverName: String)
    case streamStart(SendspinClientSession.Stream)
    case streamClear
    case streamEnd
    case audio(timestamp: Int64, payload: [UInt8])
    case volume(Int)
    case mute(Bool)
}

/// One WebSocket connection to a Sendspin server (NIO's HTTP upgrade and frames), running a
/// `SendspinClientSession` on its event loop. Connecting can be cancelled at any moment.
final class SendspinClientConnection: Sendable {
    /// The largest WebSocket message taken: a sealed chunk is at most Noise's 64 KiB.
    static let maxFrameBytes = 1 << 17
    private let channel: Channel
    /// Set by the upgrade, on the event loop; nil until (or unless) the server accepts it.
    private let handler: LockedValueBox<NIOLoopBound<SendspinClientHandler>?>

    static func connect(to url: SendspinURL, group: EventLoopGroup, session: SendspinClientSession, inbox: Inbox<SendspinEvent>,
                        clockSync: ClockSync, logger: Logger, cancelled: () -> Bool) throws(PartyCastError) -> SendspinClientConnection {
        let added = LockedValueBox<NIOLoopBound<SendspinClientHandler>?>(nil)
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(.seconds(3))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let request = NIOLoopBound(UpgradeRequest(url: url), eventLoop: channel.eventLoop)
                    let stamp = NIOLoopBound(ReadStamp(clock: clockSync.clock), eventLoop: channel.eventLoop)
                    let upgrader = NIOWebSocketClientUpgrader(maxFrameSize: maxFrameBytes) { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            let handler = SendspinClientHandler(session: session, inbox: inbox, clockSync: clockSync, readStamp: stamp.value, logger: logger)
                            // A message split over fragments is put together, up to one frame's worth.
                            try channel.pipeline.syncOperations.addHandler(NIOWebSocketFrameAggregator(
                                minNonFinalFragmentSize: 1, maxAccumulatedFrameCount: 64, maxAccumulatedFrameSize: maxFrameBytes))
                            try channel.pipeline.syncOperations.addHandler(handler)
                            added.withLockedValue { $0 = NIOLoopBound(handler, eventLoop: channel.eventLoop) }
                        }
                    }
                    // First in the pipeline, so it sees each socket read before anything decodes it.
                    try channel.pipeline.syncOperations.addHandler(stamp.value)
                    try channel.pipeline.syncOperations.addHTTPClientHandlers(
                        leftOverBytesStrategy: .forwardBytes,
                        withClientUpgrade: (upgraders: [upgrader], completionHandler: { context in
                            context.pipeline.syncOperations.removeHandler(request.value, promise: nil)
                        }))
                    try channel.pipeline.syncOperations.addHandler(request.value)
                }
            }
        let connecting = (try? SocketAddress(ipAddress: url.host, port: url.port)).map { bootstrap.connect(to: $0) }
            ?? bootstrap.connect(host: url.host, port: url.port)
        switch inbox.awaitConnection(connecting, channel: { $0 }, cancelled: cancelled) {
        case .success(let channel):
            // Without a session (the upgrade refused or never answered) nobody else says the connection ended.
            channel.closeFuture.whenComplete { _ in
                if added.withLockedValue({ $0 }) == nil { inbox.close(.closed("the server did not open a WebSocket at \(url.path)")) }
            }
            return SendspinClientConnection(channel: channel, handler: added)
        case .failure(let error): throw PartyCastError(.io, "cannot connect to \(url): \(connectError(error))")
        case nil: throw PartyCastError(.io, "stopped while connecting to \(url)")
        }
    }

    private init(channel: Channel, handler: LockedValueBox<NIOLoopBound<SendspinClientHandler>?>) {
        self.channel = channel
        self.handler = handler
    }

    func close() { channel.close(promise: nil) }

    /// Says goodbye (if joined) and closes.
    func leave() {
        let (handler, channel) = (self.handler, self.channel)
        channel.eventLoop.execute {
            if let handler = handler.withLockedValue({ $0 }) { handler.value.leave() } else { channel.close(promise: nil) }
        }
    }
}

/// Sends the HTTP request the WebSocket upgrade rides on, as the connection opens.
final class UpgradeRequest: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart
    private let url: SendspinURL

    init(url: SendspinURL) { self.url = url }

    func channelActive(context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: url.authority)
        headers.add(name: "Content-Length", value: "0")
        context.write(wrapOutboundOut(.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: url.path, headers: headers))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    /// Only a refused upgrade's response gets here: the connection is of no use.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.close(promise: nil)
    }
}

/// When the socket read that brought the bytes being handled now came: a clock answer's t4, taken
/// before the frames in front of it in that read are decrypted and handled (a read can bring a
/// second of audio at once).
final class ReadStamp: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let clock: LocalClock
    private(set) var time: Int64 = 0

    init(clock: LocalClock) { self.clock = clock }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        time = clock.now()
        context.fireChannelRead(data)
    }
}
