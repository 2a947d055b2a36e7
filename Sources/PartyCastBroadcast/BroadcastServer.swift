import Foundation
import Logging
import NIOCore
import NIOPosix
import PartyCastClockExchange
import PartyCastControlSeam
import PartyCastCore
import PartyCastWire
import ServiceLifecycle

/// The network side of the broadcaster: accepts listeners over TCP, runs the handshake (Hello →
/// Welcome, with the key challenge in between for a private party) under a timeout, and hands joined
/// listeners to the `Fanout`; their clock requests go to the `ClockResponder` (UDP, on the same port
/// number where it is free), or are answered on the connection where UDP does not get through.
/// Hostile peers (garbage, oversized length prefixes, silence, wrong keys) are closed and logged;
/// serving goes on. As a `Service`, it serves until the process's graceful shutdown.
public final class BroadcastServer: Service, Sendable {
    public static let handshakeTimeout = TimeAmount.seconds(5)
    private let group: any EventLoopGroup
    /// The listening socket; replaced if it ever closes while serving.
    private let channel: LockedValueBox<Channel>
    private let shuttingDown = LockedValueBox(false)
    private let bind: @Sendable (_ port: Int) -> EventLoopFuture<Channel>
    private let clockResponder: ClockResponder?
    private let logger: Logger
    public let port: Int

    /// - Parameter welcome: builds the Welcome for a peer (protocol version, names, session).
    /// - Parameter key: a private party's key: only listeners that prove they hold it join.
    /// - Parameter group: the process's event loops (its one group).
    /// Returns once listening, so a busy port is an error here rather than a log line later.
    public init(host: String, port: Int, fanout: Fanout, key: PartyKey?, welcome: @escaping @Sendable () -> PCEnvelope,
                group: any EventLoopGroup, logger: Logger) async throws(PartyCastError) {
        // On the TCP port's number (UDP 7360 by default, firewalls allow the pair), or any free one.
        let clockResponder: ClockResponder?
        do {
            clockResponder = try ClockResponder(host: host, port: port)
        } catch {
            clockResponder = nil
            logger.warning("no UDP clock responder (\(error)): listeners keep time over their TCP connections")
        }
        let throttle = KeyGuessThrottle()
        let census = ConnectionCensus()
        let refusals = fanout.refusals
        let peerLog = ThrottledLog(logger: logger)
        bind = { port in
            ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .serverChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(AcceptErrorBackoff(refusals: refusals)) }
                }
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                // About 5 s of Opus, or 1 s of float PCM: a peer further behind than this is not writable.
                .childChannelOption(.writeBufferWaterMark, value: .init(low: 256 * 1024, high: 1024 * 1024))
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        // Nearest the socket: it counts the bytes as sent, sealed or not.
                        try channel.pipeline.syncOperations.addHandler(OutboundBudget(refusals: refusals, allowance: {
                            StreamBudgets.outboundAllowance(backlogBytes: fanout.backlogBytes)
                        }))
                        // Nearer the socket than the PeerHandler, so the fan-out's writes pass it too.
                        let sealing = RecordSealingHandler()
                        try channel.pipeline.syncOperations.addHandler(sealing)
                        try channel.pipeline.syncOperations.addHandler(PeerHandler(fanout: fanout, key: key, welcome: welcome,
                                                                                   clockResponder: clockResponder, sealing: sealing,
                                                                                   throttle: throttle, census: census, refusals: refusals,
                                                                                   peerLog: peerLog, logger: logger))
                    }
                }
                .bind(host: host, port: port)
        }
        let channel: Channel
        do {
            channel = try await bind(port).get()
        } catch {
            clockResponder?.shutdown()
            throw PartyCastError(.io, "cannot listen on \(HostAndPort(host: host, port: port)): \(error); is another broadcaster using the port? Try --port")
        }
        self.group = group
        self.channel = LockedValueBox(channel)
        self.port = channel.localAddress?.port ?? port
        self.logger = logger
        self.clockResponder = clockResponder
        keepListening(on: channel)
    }

    /// NIO closes a listening socket on an accept error it does not know to be harmless; the
    /// listeners already joined play on, but nobody new could join (or rejoin). Listen again.
    private func keepListening(on channel: Channel) {
        channel.closeFuture.whenComplete { [self] _ in
            guard !shuttingDown.withLockedValue({ $0 }) else { return }
            logger.warning("the listening socket on port \(port) closed; listening again")
            relisten(after: .milliseconds(100))
        }
    }

    private func relisten(after delay: TimeAmount) {
        group.next().scheduleTask(in: delay) { [self] in
            bind(port).whenComplete { [self] result in
                switch result {
                case .success(let channel):
                    let keep = shuttingDown.withLockedValue { stopping in
                        if !stopping { self.channel.withLockedValue { $0 = channel } }
                        return !stopping
                    }
                    if keep { keepListening(on: channel) } else { channel.close(promise: nil) }
                case .failure(let error):
                    guard !shuttingDown.withLockedValue({ $0 }) else { return }
                    logger.warning("cannot listen on port \(port) again (\(error)); retrying in 1 s")
                    relisten(after: .seconds(1))
                }
            }
        }
    }

    /// Serves until the graceful shutdown (or cancellation), then stops listening. The connections
    /// stay: the party says goodbye on them and closes them (`Party.sayGoodbye`).
    public func run() async throws {
        do { try await gracefulShutdown() } catch { /* cancelled: stop listening all the same */ }
        let channel = shuttingDown.withLockedValue { stopping in
            stopping = true
            return self.channel.withLockedValue { $0 }
        }
        do { try await channel.close() } catch ChannelError.alreadyClosed { /* relisten had not bound yet */ }
        if let clockResponder {
            clockResponder.shutdown()
            let ignored = clockResponder.ignoredDatagrams
            let ignoredText = ignored > 0 ? ", ignored \(ignored) datagrams (unknown session, bad signature, malformed or too many)" : ""
            logger.info("clock: answered \(clockResponder.answeredDatagrams) requests over UDP\(ignoredText)")
        }
    }
}

/// Says what went wrong accepting a connection (out of descriptors, an accepted socket that failed
/// on the way), at most once a second with a count, and stops accepting for a moment: NIO keeps a
/// listening socket open on EMFILE and the like, and its readiness would otherwise spin the loop
/// (816,213 log lines in 3 s at a full descriptor table). Whether the socket closes is NIO's call
/// and `BroadcastServer.keepListening`'s.
private final class AcceptErrorBackoff: ChannelInboundHandler, Sendable {
    typealias InboundIn = Channel
    static let pause = TimeAmount.milliseconds(100)
    private let refusals: Refusals

    init(refusals: Refusals) { self.refusals = refusals }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        refusals.refuse(.acceptFailed, "accepting a listener failed: \(error); pausing accepts for \(Self.pause.nanoseconds / 1_000_000) ms")
        let channel = context.channel
        channel.setOption(.autoRead, value: false).whenSuccess {
            // A closed channel refuses the option: `keepListening` opens a new one, nothing to undo.
            channel.eventLoop.scheduleTask(in: Self.pause) { channel.setOption(.autoRead, value: true).whenFailure { _ in } }
        }
        context.fireErrorCaught(error)
    }
}

/// One connection's life: waiting for Hello, proving the key both ways (private parties), joined,
/// then closed.
final class PeerHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Peer {
        var id: String
        var name: String
        var host: String
    }

    enum State {
        case awaitingHello
        case awaitingKeyProof(Peer, KeyHandshake.Responder)
        case joined(id: Int, name: String, clockToken: UInt64?)
        case closed
    }

    private let fanout: Fanout
    private let key: PartyKey?
    private let welcome: @Sendable () -> PCEnvelope
    private let clockResponder: ClockResponder?
    private let sealing: RecordSealingHandler
    private let throttle: KeyGuessThrottle
    private let census: ConnectionCensus
    private let refusals: Refusals
    /// Joins and departures: a crowd of guests must not fill the log either.
    private let peerLog: ThrottledLog
    private let logger: Logger
    private var decoder = WireFrameDecoder()
    private var state = State.awaitingHello
    private var address = "?"
    private var receivedAt: UInt64 = 0
    private var censusID: UInt64?
    private var clockAllowance = ClockRequestAllowance()

    init(fanout: Fanout, key: PartyKey?, welcome: @escaping @Sendable () -> PCEnvelope, clockResponder: ClockResponder?,
         sealing: RecordSealingHandler, throttle: KeyGuessThrottle, census: ConnectionCensus, refusals: Refusals,
         peerLog: ThrottledLog, logger: Logger) {
        self.fanout = fanout
        self.key = key
        self.welcome = welcome
        self.clockResponder = clockResponder
        self.sealing = sealing
        self.throttle = throttle
        self.census = census
        self.refusals = refusals
        self.peerLog = peerLog
        self.logger = logger
        decoder.maxMessageBytes = StreamBudgets.frameBytesBeforeJoining
    }

    func channelActive(context: ChannelHandlerContext) {
        address = context.remoteAddress?.ipAddress ?? "?"
        switch census.admit(context.channel, address: address) {
        case .admitted(let id, let evicted):
            censusID = id
            if let evicted {
                refusals.refuse(.connectionsPerAddress, "closed an older connection that had not yet joined or reported, to make room for one from \(address)")
                evicted.close(promise: nil)
            }
        case .refused(let kind):
            refusals.refuse(kind, "refused a connection from \(address): \(kind.rawValue) (\(census.perAddress) per address, \(census.total) in all)")
            state = .closed
            context.close(promise: nil)
            return
        }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: BroadcastServer.handshakeTimeout) {
            let (handler, context) = loopBound.value
            switch handler.state {
            case .awaitingHello:
                handler.drop(context, .silentPeer, "sent no Hello within \(BroadcastServer.handshakeTimeout.nanoseconds / 1_000_000_000) s")
            case .awaitingKeyProof(let peer, _):
                handler.refuseGuess(peer, "did not finish the key handshake within \(BroadcastServer.handshakeTimeout.nanoseconds / 1_000_000_000) s", context)
            case .joined, .closed:
                break
            }
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // t2 of a clock exchange over TCP (the fallback): as close to the socket read as this handler gets.
        receivedAt = monotonicNanoseconds()
        let buffer = unwrapInboundIn(data)
        decoder.push(buffer.readableBytesView)
        do {
            while !isClosed, let envelope = try decoder.next() { handle(envelope, context) }
        } catch {
            drop(context, error.isOverBudget ? .oversizedFrame : .badData, "sent bad data (\(error))")
        }
    }

    private var isClosed: Bool { if case .closed = state { true } else { false } }

    private func handle(_ envelope: PCEnvelope, _ context: ChannelHandlerContext) {
        switch (state, envelope.body) {
        case (.awaitingHello, .hello(let hello)?):
            if let mismatch = protocolMismatch(peerVersion: hello.protocolVersion, peerRole: "listener") {
                send(mismatch, context)
                drop(context, .protocolMismatch, "speaks protocol \(hello.protocolVersion)")
                return
            }
            // A listener without an id of its own gets one for this connection: settings never leak between peers.
            let listenerID = hello.listenerID.isEmpty ? "anonymous-\(String(UInt64.random(in: 1...UInt64.max), radix: 16))" : hello.listenerID
            let peer = Peer(id: String(untrusted: listenerID, limit: 40), name: String(untrusted: hello.listenerName, limit: 60),
                            host: String(untrusted: hello.hostName, limit: 60))
            guard let key else { return join(peer, clockKey: nil, context) }
            guard hello.holdsKey else {
                send(PCEnvelope.failure(.keyRequired, "this party is private: join it with --key (or PARTYCAST_KEY)"), context)
                drop(context, .noKey, "(\(peer.name)) has no party key; refused it")
                return
            }
            challenge(peer, hello, key: key, context)
        case (.awaitingKeyProof(let peer, let handshake), .keyProof(let proof)?):
            guard handshake.verify(listenerConfirmation: proof.listenerConfirmation) else {
                // In the clear: this peer's keys, if it has any, are not ours.
                send(PCEnvelope.failure(.keyRejected, "your party key is not this party's"), context)
                refuseGuess(peer, "could not prove it holds the party key (a different key, or a replayed handshake); refused it", context)
                return
            }
            throttle.confirmed(address)
            // Everything after the KeyProof is sealed, both ways: what this read holds beyond it too.
            sealing.startSealing(with: handshake.session.sealer(sending: .broadcasterToListener))
            decoder.openRecords(with: handshake.session.opener(receiving: .listenerToBroadcaster))
            join(peer, clockKey: handshake.session.clockKey, context)
        case (.awaitingKeyProof(let peer, _), .error(let error)?):
            // Our confirmation did not verify: its key differs (logged like any failed guess).
            refuseGuess(peer, "refused this broadcaster's key: \(String(untrusted: error.message))", context)
        case (_, .error(let error)?):
            // A listener refusing us: its key differs, or it wants a private party and this one is public.
            drop(context, .refusedPeer, "refused this broadcaster: \(String(untrusted: error.message))")
        case (.joined, .clockRequest(let request)?):
            answerClock(request, context)
        case (.joined(let id, _, _), .status(let status)?):
            if let censusID { census.prove(censusID, address: address) }
            fanout.update(id, bufferMilliseconds: Int(status.bufferMilliseconds),
                          syncErrorMicroseconds: status.hasSyncErrorMicroseconds ? Int(status.syncErrorMicroseconds) : nil,
                          clockBoundMicroseconds: status.hasClockBoundMicroseconds ? Int(status.clockBoundMicroseconds) : nil,
                          clockSettled: status.hasClockSettled ? status.clockSettled : nil,
                          latencyOffsetMilliseconds: Int(max(-2000, min(2000, status.latencyOffsetMilliseconds))),
                          channel: ChannelAssignment(wire: status.channel))
        case (.joined(_, let name, _), .goodbye?):
            peerLog.info("\(name)@\(address) left")
            close(context)
        case (.awaitingHello, _):
            drop(context, .badData, "spoke before saying Hello")
        case (.awaitingKeyProof(let peer, _), _):
            refuseGuess(peer, "broke off the key handshake", context)
        default:
            break  // Messages a listener has no business sending are ignored.
        }
    }

    /// Answers a Hello that holds a key with this party's CPace share and confirmation: one guess
    /// of the key, so at most one a second per address after a few (`KeyGuessThrottle`).
    private func challenge(_ peer: Peer, _ hello: PCHello, key: PartyKey, _ context: ChannelHandlerContext) {
        let (allowed, refused) = throttle.answer(address)
        guard allowed else {
            // Not a key error: the listener retries, as after any refused connection.
            send(PCEnvelope.failure(.errorUnspecified, "too many unconfirmed key handshakes from your address: one a second"), context)
            if KeyGuessThrottle.worthLogging(refused) {
                logger.warning("refused \(refused) key handshake(s) from \(address) so far: more than one a second after \(KeyGuessThrottle.freeGuesses) wrong")
            }
            close(context)
            return
        }
        guard let handshake = KeyHandshake.Responder(key: key, sessionID: [UInt8](hello.keySessionID),
                                                     listenerShare: [UInt8](hello.listenerShare)) else {
            refuseGuess(peer, "sent an invalid key handshake (a session id of \(hello.keySessionID.count) bytes, or a share that is no point)", context)
            return
        }
        var challenge = PCKeyChallenge()
        challenge.broadcasterShare = Data(handshake.share)
        challenge.broadcasterConfirmation = Data(handshake.confirmation)
        var reply = PCEnvelope()
        reply.body = .keyChallenge(challenge)
        send(reply, context)
        state = .awaitingKeyProof(peer, handshake)
    }

    /// Ends a key handshake that did not prove the key; logged at the 1st, 2nd, 4th, 8th… from its
    /// address, with the count, so a guessing flood writes a few lines.
    func refuseGuess(_ peer: Peer, _ reason: String, _ context: ChannelHandlerContext) {
        // At least this one: another handshake from the address may have confirmed meanwhile and
        // forgiven the count (the first failure after it was not logged, a race a test caught).
        let failures = max(1, throttle.failures(address))
        if KeyGuessThrottle.worthLogging(failures) {
            logger.warning("closed connection from \(address): it (\(peer.name)) \(reason)\(Self.count(failures))")
        }
        close(context)
    }

    private static func count(_ failures: Int) -> String {
        failures > 1 ? " (\(failures) unconfirmed key handshakes from this address)" : ""
    }

    private func join(_ peer: Peer, clockKey: ClockDatagramKey?, _ context: ChannelHandlerContext) {
        var greeting = welcome()
        let clockToken = clockResponder?.admit(key: clockKey)
        if case .welcome(var body)? = greeting.body, let clockResponder, let clockToken {
            body.clockPort = UInt32(clockResponder.port)
            body.clockToken = clockToken
            greeting.body = .welcome(body)
        }
        let bytes: [UInt8]
        do { bytes = try WireFraming.encode(greeting) } catch {
            if let clockToken { clockResponder?.dismiss(clockToken) }
            return ownMessageUnframed(error, context)
        }
        guard let id = fanout.join(channel: context.channel, listenerID: peer.id, name: peer.name, host: peer.host,
                                   address: address, first: [ByteBuffer(bytes: bytes)]) else {
            if let clockToken { clockResponder?.dismiss(clockToken) }
            state = .closed
            peerLog.info("\(peer.name)@\(address) came after the end; told it the broadcast is over")
            return
        }
        state = .joined(id: id, name: peer.name, clockToken: clockToken)
        decoder.maxMessageBytes = StreamBudgets.frameBytesJoined
        peerLog.info("\(peer.name)@\(address) joined")
    }

    private func send(_ envelope: PCEnvelope, _ context: ChannelHandlerContext) {
        do {
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: try WireFraming.encode(envelope))), promise: nil)
        } catch {
            ownMessageUnframed(error, context)
        }
    }

    /// A message the broadcaster built did not frame: its bug, not the listener's. Said once, and this
    /// connection ends rather than go on with a message missing.
    private func ownMessageUnframed(_ error: WireError, _ context: ChannelHandlerContext) {
        logger.error("could not frame a message for \(address) (\(error)); closing its connection")
        close(context)
    }

    /// Answers a clock request over TCP (where UDP does not get through) within the UDP responder's
    /// rate; none while the connection is backed up (an answer queued behind audio is useless, and
    /// would pile up), and a flood well over the rate ends the connection.
    private func answerClock(_ request: PCClockRequest, _ context: ChannelHandlerContext) {
        guard clockAllowance.take(now: receivedAt) else {
            if clockAllowance.overRateInARow > ClockRequestAllowance.overRateTolerated {
                drop(context, .clockFlood, "sent clock requests far over \(Int(ClockResponder.requestsPerSecond))/s")
            }
            return
        }
        guard context.channel.isWritable else { return }
        send(ClockResponder.answer(request, receivedAt: receivedAt), context)
    }

    private func drop(_ context: ChannelHandlerContext, _ kind: Refusals.Kind, _ reason: String) {
        refusals.refuse(kind, "closed connection from \(address): it \(reason)")
        close(context)
    }

    private func close(_ context: ChannelHandlerContext) {
        leave()
        state = .closed
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        switch state {
        case .joined(_, let name, _):
            leave()
            peerLog.info("\(name)@\(address) disconnected")
        case .awaitingKeyProof(let peer, _):
            // A listener that found our confirmation wrong may close before its refusal gets here.
            let failures = max(1, throttle.failures(address))
            if KeyGuessThrottle.worthLogging(failures) {
                logger.warning("\(peer.name)@\(address) left during the key handshake (a different key?)\(Self.count(failures))")
            }
        case .awaitingHello, .closed:
            break
        }
        if let censusID { census.release(censusID, address: address) }
        state = .closed
        context.fireChannelInactive()
    }

    /// A joined listener's share of the audio and of the clock responder ends with its connection.
    private func leave() {
        guard case .joined(let id, _, let clockToken) = state else { return }
        fanout.leave(id)
        if let clockToken { clockResponder?.dismiss(clockToken) }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        drop(context, .badData, "failed: \(error)")
    }
}
