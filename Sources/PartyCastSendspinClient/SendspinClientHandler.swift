import Logging
import NIOCore
import NIOWebSocket
import PartyCastClock
import PartyCastClockExchange
import PartyCastCore
import PartyCastNetwork
import PartyCastSendspin
import PartyCastWire

/// The session of one Sendspin connection on its event loop: WebSocket frames in, the session's
/// frames out, its events to the producer thread's inbox (reading pauses while that is full), and
/// the clock exchanges (`ClockRequester`, over this connection) feeding the listener's `ClockSync`.
final class SendspinClientHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private var session: SendspinClientSession
    private let inbox: Inbox<SendspinEvent>
    private let clockSync: ClockSync
    private let readStamp: ReadStamp
    private let logger: Logger
    private var context: ChannelHandlerContext?
    private var clockRequester: ClockRequester?
    private var closedReason: String?

    init(session: SendspinClientSession, inbox: Inbox<SendspinEvent>, clockSync: ClockSync, readStamp: ReadStamp, logger: Logger) {
        self.session = session
        self.inbox = inbox
        self.clockSync = clockSync
        self.readStamp = readStamp
        self.logger = logger
    }

    /// Added once the upgrade is through: the session speaks first.
    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        act(on: session.opening(), context: context, arrivedAt: clockSync.clock.now())
    }

    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // t4 of a clock exchange: when the socket read that brought it came.
        let arrivedAt = readStamp.time
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text:
            act(on: session.receive(text: frame.unmaskedData.readableBytesView), context: context, arrivedAt: arrivedAt)
        case .binary:
            act(on: session.receive(binary: frame.unmaskedData.readableBytesView), context: context, arrivedAt: arrivedAt)
        case .ping:
            send(WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData), context)
        case .connectionClose:
            end(context, "the server closed the WebSocket")
        default:
            break  // pongs; the aggregator has joined continuations
        }
    }

    /// A client/time, asked for by the requester's thread, stamped here on the loop as it is sealed
    /// and sent: the requester's own t1 would count the hop to this thread as network delay, one
    /// way only, which biases the offset by half of it.
    private func sendTime() {
        guard let context, closedReason == nil else { return }
        let t1 = clockSync.clock.now()
        // The client's clock in µs, rounded down: the echo comes back as ≤ t1, never after it.
        let (quotient, remainder) = t1.quotientAndRemainder(dividingBy: 1000)
        if let request = session.timeRequest(now: remainder < 0 ? quotient - 1 : quotient) {
            act(on: [request], context: context, arrivedAt: t1)
        }
    }

    private func act(on actions: [SendspinClientSession.Action], context: ChannelHandlerContext, arrivedAt: Int64) {
        var answers: [ClockSample] = []
        for action in actions {
            switch action {
            case .sendText(let bytes):
                send(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: context.channel.allocator.buffer(bytes: bytes)), context)
            case .sendBinary(let bytes):
                send(WebSocketFrame(fin: true, opcode: .binary, maskKey: .random(), data: context.channel.allocator.buffer(bytes: bytes)), context)
            case .joined(let name):
                startClockExchanges(on: context.channel)
                deliver(.joined(serverName: name), bytes: 0, context: context, arrivedAt: arrivedAt)
            case let .clock(clientTransmitted, serverReceived, serverTransmitted):
                if let sample = Self.sample(clientTransmitted, serverReceived, serverTransmitted, arrivedAt: arrivedAt) {
                    answers.append(sample)
                } else {
                    clockSync.countIgnored()
                }
            case .streamStart(let stream):
                deliver(.streamStart(stream), bytes: stream.codecHeader?.count ?? 0, context: context, arrivedAt: arrivedAt)
            case .streamClear:
                deliver(.streamClear, bytes: 0, context: context, arrivedAt: arrivedAt)
            case .streamEnd:
                deliver(.streamEnd, bytes: 0, context: context, arrivedAt: arrivedAt)
            case let .audio(timestamp, payload):
                deliver(.audio(timestamp: timestamp, payload: payload), bytes: payload.count, context: context, arrivedAt: arrivedAt)
            case .volume(let level):
                deliver(.volume(level), bytes: 0, context: context, arrivedAt: arrivedAt)
            case .mute(let muted):
                deliver(.mute(muted), bytes: 0, context: context, arrivedAt: arrivedAt)
            case .close(let reason):
                end(context, reason)
            }
        }
        // All of one read together, to the requester's thread: the estimator's maths stays off this loop.
        if !answers.isEmpty { clockRequester?.deliver(answers) }
    }

    /// µs → ns, nil when any time is outside what a monotonic clock reads (the filter rejects the rest).
    static func sample(_ t1: Int64, _ t2: Int64, _ t3: Int64, arrivedAt: Int64) -> ClockSample? {
        let plausible: Range<Int64> = -(1 << 52)..<(1 << 52)
        guard plausible.contains(t1), plausible.contains(t2), plausible.contains(t3) else { return nil }
        return ClockSample(t1: t1 * 1000, t2: t2 * 1000, t3: t3 * 1000, t4: arrivedAt)
    }

    private func deliver(_ event: SendspinEvent, bytes: Int, context: ChannelHandlerContext, arrivedAt: Int64) {
        let channel = context.channel
        let keepReading = inbox.put(.message(event, arrivedAt: arrivedAt), bytes: bytes + Inbox<SendspinEvent>.messageOverhead) {
            channel.eventLoop.execute { _ = channel.setOption(.autoRead, value: true) }
        }
        if !keepReading { _ = channel.setOption(.autoRead, value: false) }
    }

    private func send(_ frame: WebSocketFrame, _ context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
    }

    /// Says goodbye, if the session got that far, and closes.
    func leave() {
        guard let context else { return }
        if let goodbye = session.goodbye() { act(on: [goodbye], context: context, arrivedAt: 0) }
        end(context, "this listener left")
    }

    private func end(_ context: ChannelHandlerContext, _ reason: String) {
        guard closedReason == nil else { return }
        closedReason = reason
        let close = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: context.channel.allocator.buffer(bytes: [0x03, 0xE8]))
        context.writeAndFlush(wrapOutboundOut(close)).whenComplete { [channel = context.channel] _ in channel.close(promise: nil) }
    }

    /// Clock exchanges over this connection for as long as it lasts (Sendspin has no UDP of its own).
    private func startClockExchanges(on channel: Channel) {
        let loop = channel.eventLoop
        let handler = NIOLoopBound(self, eventLoop: loop)
        do throws(SystemCallError) {
            clockRequester = try ClockRequester(datagrams: nil, sync: clockSync, logger: logger) { _ in
                loop.execute { handler.value.sendTime() }
            }
        } catch {
            // Without exchanges the listener cannot place audio on the server's clock: said once.
            logger.error("clock sync cannot start (\(error)): this listener will not play in step with the server's other players")
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
