import NIOCore
import NIOPosix
import PartyCastCore
import PartyCastWire

/// The TCP side of the broadcaster: accepts listeners, runs the handshake (Hello → Welcome) under
/// a timeout, answers clock requests, and hands joined listeners to the `Fanout`. Hostile peers
/// (garbage, oversized length prefixes, silence) are closed and logged; serving goes on.
public final class BroadcastServer: Sendable {
    public static let handshakeTimeout = TimeAmount.seconds(5)
    private let group: MultiThreadedEventLoopGroup
    private let channel: Channel
    public let port: Int

    /// - Parameter welcome: builds the Welcome for a peer (protocol version, names, session).
    public init(host: String, port: Int, fanout: Fanout, welcome: @escaping @Sendable () -> PCEnvelope,
                log: @escaping @Sendable (String) -> Void) throws(PartyCastError) {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            // About 5 s of Opus, or 1 s of float PCM: a peer further behind than this is not writable.
            .childChannelOption(.writeBufferWaterMark, value: .init(low: 256 * 1024, high: 1024 * 1024))
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(PeerHandler(fanout: fanout, welcome: welcome, log: log))
                }
            }
        do {
            channel = try bootstrap.bind(host: host, port: port).wait()
        } catch {
            try? group.syncShutdownGracefully()
            throw PartyCastError(.io, "cannot listen on \(host):\(port): \(error); is another broadcaster using the port? Try --port")
        }
        self.group = group
        self.port = channel.localAddress?.port ?? port
    }

    public func shutdown() {
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }
}

/// One connection's life: waiting for Hello, then joined, then closed.
final class PeerHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum State {
        case awaitingHello
        case joined(id: Int, name: String)
        case closed
    }

    private let fanout: Fanout
    private let welcome: @Sendable () -> PCEnvelope
    private let log: @Sendable (String) -> Void
    private var decoder = WireFrameDecoder()
    private var state = State.awaitingHello
    private var address = "?"
    private var receivedAt: UInt64 = 0

    init(fanout: Fanout, welcome: @escaping @Sendable () -> PCEnvelope, log: @escaping @Sendable (String) -> Void) {
        self.fanout = fanout
        self.welcome = welcome
        self.log = log
    }

    func channelActive(context: ChannelHandlerContext) {
        address = context.remoteAddress?.ipAddress ?? "?"
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: BroadcastServer.handshakeTimeout) {
            let (handler, context) = loopBound.value
            if case .awaitingHello = handler.state {
                handler.drop(context, "sent no Hello within \(BroadcastServer.handshakeTimeout.nanoseconds / 1_000_000_000) s")
            }
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // t2 of a clock exchange: as close to the socket read as this handler gets.
        receivedAt = monotonicNanoseconds()
        let buffer = unwrapInboundIn(data)
        decoder.push(buffer.readableBytesView)
        do {
            while case .awaitingHello = state, let envelope = try decoder.next() { handle(envelope, context) }
            while case .joined = state, let envelope = try decoder.next() { handle(envelope, context) }
        } catch {
            drop(context, "sent bad data (\(error))")
        }
    }

    private func handle(_ envelope: PCEnvelope, _ context: ChannelHandlerContext) {
        switch (state, envelope.body) {
        case (.awaitingHello, .hello(let hello)?):
            if let mismatch = protocolMismatch(peerVersion: hello.protocolVersion, peerRole: "listener") {
                send(mismatch, context)
                drop(context, "speaks protocol \(hello.protocolVersion)")
                return
            }
            let greeting = try? WireFraming.encode(welcome())
            guard let id = fanout.join(channel: context.channel, name: hello.listenerName, host: hello.hostName,
                                       address: address, first: greeting.map { [ByteBuffer(bytes: $0)] } ?? []) else {
                state = .closed
                log("\(hello.listenerName)@\(address) came after the end; told it the broadcast is over")
                return
            }
            state = .joined(id: id, name: hello.listenerName)
            log("\(hello.listenerName)@\(address) joined")
        case (.joined, .clockRequest(let request)?):
            var response = PCClockResponse()
            response.t1 = request.t1
            response.t2 = Int64(bitPattern: receivedAt)
            response.t3 = Int64(bitPattern: monotonicNanoseconds())
            var reply = PCEnvelope()
            reply.body = .clockResponse(response)
            send(reply, context)
        case (.joined(let id, _), .status(let status)?):
            fanout.update(id, bufferMilliseconds: Int(status.bufferMilliseconds), syncErrorMicroseconds: status.hasSyncErrorMicroseconds ? Int(status.syncErrorMicroseconds) : nil)
        case (.joined(_, let name), .goodbye?):
            log("\(name)@\(address) left")
            close(context)
        case (.awaitingHello, _):
            drop(context, "spoke before saying Hello")
        default:
            break  // Messages a listener has no business sending are ignored.
        }
    }

    private func send(_ envelope: PCEnvelope, _ context: ChannelHandlerContext) {
        guard let bytes = try? WireFraming.encode(envelope) else { return }
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: bytes)), promise: nil)
    }

    private func drop(_ context: ChannelHandlerContext, _ reason: String) {
        log("closed connection from \(address): it \(reason)")
        close(context)
    }

    private func close(_ context: ChannelHandlerContext) {
        if case .joined(let id, _) = state { fanout.leave(id) }
        state = .closed
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if case .joined(let id, let name) = state {
            fanout.leave(id)
            log("\(name)@\(address) disconnected")
        }
        state = .closed
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        drop(context, "failed: \(error)")
    }
}
