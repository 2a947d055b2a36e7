import Logging
import NIOCore
import NIOPosix
import PartyCastClock
import PartyCastClockExchange
import PartyCastCore
import PartyCastWire
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One TCP connection to a broadcaster: the connection gate on its event loop, envelopes out to the
/// inbox. Connecting can be cancelled at any moment.
final class BroadcastClient: Sendable {
    private let channel: Channel
    private let handler: NIOLoopBound<ClientHandler>

    /// Connects, waiting until connected, failed, or `cancelled()` (checked whenever `wakeup` fires).
    static func connect(host: String, port: Int, group: EventLoopGroup, gate: ConnectionGate, inbox: Inbox<PCEnvelope>, clockSync: ClockSync,
                        logger: Logger, cancelled: () -> Bool) throws(PartyCastError) -> BroadcastClient {
        // The handler as it was added: a broadcaster that answers and closes at once (a version
        // mismatch) tears the pipeline down before the connect future completes, and looking the
        // handler up then fails ("notFound") although its messages are already in the inbox.
        let added = LockedValueBox<NIOLoopBound<ClientHandler>?>(nil)
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(.seconds(3))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            // A broadcaster that vanished without a word (its reset lost on the way, its host gone)
            // leaves a connection that would wait for ever, most of all while the party is paused
            // and nothing is due: the kernel probes a connection idle for 5 s and ends it after
            // 3 unanswered probes 2 s apart. A connection that carries audio is never idle that long.
            .channelOption(.socketOption(.so_keepalive), value: 1)
            .channelOption(ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: TCP_KEEPIDLE)), value: 5)
            .channelOption(ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: TCP_KEEPINTVL)), value: 2)
            .channelOption(ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: TCP_KEEPCNT)), value: 3)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // Nearer the socket than the ClientHandler, so clock requests written to the channel pass it too.
                    let sealing = RecordSealingHandler()
                    let handler = ClientHandler(gate: gate, inbox: inbox, clockSync: clockSync, sealing: sealing, logger: logger)
                    try channel.pipeline.syncOperations.addHandler(sealing)
                    try channel.pipeline.syncOperations.addHandler(handler)
                    added.withLockedValue { $0 = NIOLoopBound(handler, eventLoop: channel.eventLoop) }
                }
            }
        // Completes on the channel's event loop, where the handler may be touched.
        // An address (--host, or what mDNS resolved) skips NIO's resolver.
        let channel = (try? SocketAddress(ipAddress: host, port: port)).map { bootstrap.connect(to: $0) }
            ?? bootstrap.connect(host: host, port: port)
        let connecting = channel.flatMapThrowing { channel in
            guard let handler = added.withLockedValue({ $0 }) else { throw ChannelPipelineError.notFound }
            return (channel, handler)
        }
        switch inbox.awaitConnection(connecting, channel: { $0.0 }, cancelled: cancelled) {
        case .success(let (channel, handler)): return BroadcastClient(channel: channel, handler: handler)
        case .failure(let error): throw PartyCastError(.io, "cannot connect to \(HostAndPort(host: host, port: port)): \(connectError(error))")
        case nil: throw PartyCastError(.io, "stopped while connecting to \(HostAndPort(host: host, port: port))")
        }
    }

    private init(channel: Channel, handler: NIOLoopBound<ClientHandler>) {
        self.channel = channel
        self.handler = handler
    }

    /// Sends a message of the stream phase; dropped until the broadcaster has welcomed us, so the
    /// Hello (and the key handshake) always come first.
    func sendIfJoined(_ envelope: PCEnvelope) {
        let handler = self.handler
        channel.eventLoop.execute {
            handler.value.sendIfJoined(envelope)
        }
    }

    func close() { channel.close(promise: nil) }

    /// Says goodbye (if joined) and closes at once: what the kernel takes goes out before the FIN,
    /// and a broadcaster that stopped reading costs no wait.
    func leave() {
        var envelope = PCEnvelope()
        envelope.body = .goodbye(PCGoodbye())
        let (channel, handler, goodbye) = (self.channel, self.handler, envelope)
        channel.eventLoop.execute {
            handler.value.sendIfJoined(goodbye)
            channel.close(promise: nil)
        }
    }
}

final class ClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var gate: ConnectionGate
    private let inbox: Inbox<PCEnvelope>
    private let clockSync: ClockSync
    private let sealing: RecordSealingHandler
    private let logger: Logger
    private var decoder = WireFrameDecoder()
    private var closedReason: String?
    private var context: ChannelHandlerContext?
    private var clockRequester: ClockRequester?

    init(gate: ConnectionGate, inbox: Inbox<PCEnvelope>, clockSync: ClockSync, sealing: RecordSealingHandler, logger: Logger) {
        self.gate = gate
        self.inbox = inbox
        self.clockSync = clockSync
        self.sealing = sealing
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    /// The Hello goes out the moment the connection exists, before anything else can be written.
    func channelActive(context: ChannelHandlerContext) {
        write(gate.hello, context)
        context.fireChannelActive()
    }

    func sendIfJoined(_ envelope: PCEnvelope) {
        guard gate.isJoined, let context else { return }
        write(envelope, context)
    }

    /// Frames and sends a message this listener built. One that does not frame is this listener's bug,
    /// not the broadcaster's: said once, and the connection ends rather than go on without it.
    private func write(_ envelope: PCEnvelope, _ context: ChannelHandlerContext) {
        do {
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: try WireFraming.encode(envelope))), promise: nil)
        } catch {
            logger.error("could not frame this listener's own message (\(error)); leaving the party")
            end(context, "this listener could not frame its own message")
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // t4 of a clock exchange, and the arrival time of chunks: as close to the socket read as this handler gets.
        let arrivedAt = clockSync.clock.now()
        decoder.push(unwrapInboundIn(data).readableBytesView)
        var clockAnswers: [ClockSample] = []
        do {
            while closedReason == nil, let envelope = try decoder.next() {
                for verdict in gate.handle(envelope, arrivedAt: arrivedAt) {
                    if case .clock(let sample) = verdict { clockAnswers.append(sample) } else { act(on: verdict, context: context, arrivedAt: arrivedAt) }
                }
            }
        } catch {
            end(context, "it sent bad data (\(error))")
        }
        // Clock answers over TCP (the fallback) go to the requester's thread, all of one read together.
        clockRequester?.deliver(clockAnswers)
    }

    private func act(on verdict: ConnectionGate.Verdict, context: ChannelHandlerContext, arrivedAt: Int64) {
        switch verdict {
        case .reply(let envelope):
            write(envelope, context)
        case .startSealing(let session):
            sealing.startSealing(with: session.sealer(sending: .listenerToBroadcaster))
            decoder.openRecords(with: session.opener(receiving: .broadcasterToListener))
        case .deliver(let envelope):
            if case .welcome(let welcome)? = envelope.body, gate.wantsSync { startClockExchanges(welcome, on: context.channel) }
            let channel = context.channel
            let keepReading = inbox.put(.message(envelope, arrivedAt: arrivedAt), bytes: Inbox.cost(of: envelope, framedBytes: decoder.lastMessageBytes)) {
                channel.eventLoop.execute { _ = channel.setOption(.autoRead, value: true) }
            }
            if !keepReading { _ = context.channel.setOption(.autoRead, value: false) }
        case .clock:
            break  // gathered by channelRead for the clock requester
        case .close(let reason):
            end(context, reason)
        case .fail(let error):
            inbox.close(.failed(error))
            end(context, error.message)
        }
    }

    private func end(_ context: ChannelHandlerContext, _ reason: String) {
        guard closedReason == nil else { return }
        closedReason = reason
        context.close(promise: nil)
    }

    /// Runs the clock exchanges until the connection closes: over UDP to the broadcaster's address
    /// when its Welcome offers a port, over this connection otherwise.
    private func startClockExchanges(_ welcome: PCWelcome, on channel: Channel) {
        let datagrams = channel.remoteAddress?.ipAddress.flatMap { host in
            welcome.clockPort == 0 || welcome.clockPort > UInt16.max ? nil
                : ClockRequester.Datagrams(host: host, port: Int(welcome.clockPort), token: welcome.clockToken, key: gate.clockKey)
        }
        do throws(SystemCallError) {
            let logger = self.logger
            clockRequester = try ClockRequester(datagrams: datagrams, sync: clockSync, logger: logger) { request in
                guard channel.isActive else { return }
                do {
                    channel.writeAndFlush(ByteBuffer(bytes: try WireFraming.encode(request)), promise: nil)
                } catch {
                    logger.error("could not frame this listener's own clock request (\(error)); leaving the party")
                    channel.close(promise: nil)
                }
            }
        } catch {
            // Without exchanges the listener cannot place audio on the party's clock: say so once.
            logger.error("clock sync cannot start (\(error)): this listener will not play in step with the party")
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        clockRequester?.stop()
        clockRequester = nil
        inbox.close(.closed(closedReason ?? "the connection closed"))
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        end(context, "the connection failed (\(error))")
    }
}
