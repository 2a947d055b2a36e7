import NIOCore
import NIOPosix
import PartyCastClock
import PartyCastCore
import PartyCastWire
import Synchronization

/// What arrives from a broadcaster, queued for the listener's producer thread.
final class Inbox: Sendable {
    enum Item: Sendable {
        case message(PCEnvelope)
        /// The connection ended; the reason is for the log.
        case closed(String)
    }

    /// About 40 s of 20 ms chunks; beyond that the oldest are dropped (and counted).
    static let capacity = 2000
    private let items = Mutex<[Item]>([])
    private let dropped = Atomic<Int>(0)
    let wakeup = Wakeup()

    func put(_ item: Item) {
        items.withLock { q in
            if q.count >= Self.capacity { q.removeFirst(); dropped.add(1, ordering: .relaxed) }
            q.append(item)
        }
        wakeup.signal()
    }

    /// The next item, waiting up to `timeoutNanoseconds` for one.
    func take(timeoutNanoseconds: UInt64) -> Item? {
        if let item = items.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { return item }
        wakeup.wait(nanoseconds: timeoutNanoseconds)
        return items.withLock { $0.isEmpty ? nil : $0.removeFirst() }
    }

    var droppedCount: Int { dropped.load(ordering: .relaxed) }
}

/// One TCP connection to a broadcaster: frames in, envelopes out to the inbox.
final class BroadcastClient: Sendable {
    private let channel: Channel

    static func connect(host: String, port: Int, group: EventLoopGroup, inbox: Inbox, clockSync: ClockSync) throws(PartyCastError) -> BroadcastClient {
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(.seconds(3))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ClientHandler(inbox: inbox, clockSync: clockSync))
                }
            }
        do {
            return BroadcastClient(channel: try bootstrap.connect(host: host, port: port).wait())
        } catch {
            throw PartyCastError(.io, "cannot connect to \(host):\(port): \(error)")
        }
    }

    private init(channel: Channel) { self.channel = channel }

    func send(_ envelope: PCEnvelope) {
        guard let bytes = try? WireFraming.encode(envelope) else { return }
        channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
    }

    func close() { channel.close(promise: nil) }
}

final class ClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let inbox: Inbox
    private let clockSync: ClockSync
    private var decoder = WireFrameDecoder()
    private var closedReason: String?

    init(inbox: Inbox, clockSync: ClockSync) {
        self.inbox = inbox
        self.clockSync = clockSync
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // t4 of a clock exchange: as close to the socket read as this handler gets.
        let arrivedAt = clockSync.clock.now()
        decoder.push(unwrapInboundIn(data).readableBytesView)
        do {
            while let envelope = try decoder.next() {
                switch envelope.body {
                case .clockResponse(let response)?:
                    clockSync.record(ClockSample(t1: response.t1, t2: response.t2, t3: response.t3, t4: arrivedAt))
                case .welcome?:
                    // Joined: the broadcaster answers clock requests from now on.
                    startClockExchanges(on: context.channel)
                    inbox.put(.message(envelope))
                default:
                    inbox.put(.message(envelope))
                }
            }
        } catch {
            closedReason = "the broadcaster sent bad data (\(error))"
            context.close(promise: nil)
        }
    }

    /// Runs clock exchanges on the connection's event loop until it closes: dense at first, then
    /// sparse. t1 is stamped right before the write, on the loop that does it.
    private func startClockExchanges(on channel: Channel) {
        let clockSync = self.clockSync
        @Sendable func exchange() {
            guard channel.isActive else { return }
            var request = PCClockRequest()
            request.t1 = clockSync.clock.now()
            var envelope = PCEnvelope()
            envelope.body = .clockRequest(request)
            if let bytes = try? WireFraming.encode(envelope) { channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil) }
            channel.eventLoop.scheduleTask(in: .nanoseconds(clockSync.nextExchangeDelay())) { exchange() }
        }
        exchange()
    }

    func channelInactive(context: ChannelHandlerContext) {
        inbox.put(.closed(closedReason ?? "the connection closed"))
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        closedReason = "the connection failed (\(error))"
        context.close(promise: nil)
    }
}
