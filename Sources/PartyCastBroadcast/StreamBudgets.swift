import NIOCore
import PartyCastClockExchange
import PartyCastControlSeam
import PartyCastCore

/// What one connection to the stream port may make the broadcaster hold.
enum StreamBudgets {
    /// A Hello or a key handshake message is a few hundred bytes: a stranger's frame is refused from
    /// its length prefix beyond this, so 300 half-sent megabyte frames cost nothing.
    static let frameBytesBeforeJoining = 4 * 1024
    /// A joined listener sends status reports, clock requests and its goodbye, all small.
    static let frameBytesJoined = 64 * 1024
    /// Bytes handed to a connection and not yet taken by its socket, beyond the party's unplayed
    /// backlog (`outboundAllowance`). A listener joining gets the preamble and that backlog at once;
    /// past the write buffer's high mark the fan-out skips chunks, so only a peer that does not read
    /// while being sent other things (clock answers, a pause, a retitle) gets near this.
    static let maxQueuedBytes = 4 << 20

    /// What one connection may have queued: the fixed budget plus twice the backlog the fan-out holds
    /// now. The backlog is `--buffer` worth of the stream: 10 s of 96 kHz float PCM is 7.7 MB, which
    /// a fixed 4 MiB would cut off on joining; an Opus party's stays well under 1 MiB.
    static func outboundAllowance(backlogBytes: Int) -> Int {
        maxQueuedBytes &+ backlogBytes.multipliedReportingOverflow(by: 2).partialValue
    }
    /// A connection that stays backed up this long has stopped reading: cut off, paused or not (while
    /// paused the fan-out sends nothing, so its skipped-chunk count never grows).
    static let maxBackedUp = TimeAmount.seconds(10)
}

/// Cuts off a connection whose queued outbound bytes pass `StreamBudgets.maxQueuedBytes`, or that
/// stays unwritable for `StreamBudgets.maxBackedUp`. Nearest the socket, so it counts what is really
/// queued (sealed records included).
final class OutboundBudget: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let refusals: Refusals
    /// The bytes this connection may have queued now (`StreamBudgets.outboundAllowance`).
    private let allowance: @Sendable () -> Int
    private let maxBackedUp: TimeAmount
    private var queued = 0
    private var backedUpTimer: Scheduled<Void>?
    private var cutOff = false

    init(refusals: Refusals, allowance: @escaping @Sendable () -> Int, maxBackedUp: TimeAmount = StreamBudgets.maxBackedUp) {
        self.refusals = refusals
        self.allowance = allowance
        self.maxBackedUp = maxBackedUp
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !cutOff else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        let bytes = unwrapOutboundIn(data).readableBytes
        queued += bytes
        let budget = allowance()
        if queued > budget {
            promise?.fail(ChannelError.ioOnClosedChannel)
            cut(context, "has \(queued) bytes waiting to be sent (the budget is \(budget)): it does not read")
            return
        }
        let written = promise ?? context.eventLoop.makePromise()
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        written.futureResult.whenComplete { _ in handler.value.queued -= bytes }
        context.write(data, promise: written)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            backedUpTimer?.cancel()
            backedUpTimer = nil
        } else if backedUpTimer == nil {
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            backedUpTimer = context.eventLoop.scheduleTask(in: maxBackedUp) {
                let (handler, context) = bound.value
                handler.backedUpTimer = nil
                guard !context.channel.isWritable else { return }
                handler.cut(context, "stayed backed up for \(handler.maxBackedUp.nanoseconds / 1_000_000_000) s: it does not read")
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        backedUpTimer?.cancel()
        backedUpTimer = nil
        context.fireChannelInactive()
    }

    private func cut(_ context: ChannelHandlerContext, _ reason: String) {
        guard !cutOff else { return }
        cutOff = true
        let address = context.remoteAddress?.ipAddress ?? "?"
        refusals.refuse(.slowReader, "cut off the connection from \(address): it \(reason)")
        context.close(promise: nil)
    }
}

/// Clock requests a joined listener may send over its TCP connection: the UDP responder's rate (a
/// burst, then a steady pace), so the fallback is no cheaper way to flood.
struct ClockRequestAllowance {
    /// Requests over the rate in a row after which the peer is taken for a flood and cut off.
    static let overRateTolerated = Int(ClockResponder.burst)
    private var bucket = TokenBucket(burst: ClockResponder.burst, perSecond: ClockResponder.requestsPerSecond)
    private(set) var overRateInARow = 0

    /// Whether a request arriving `now` is answered.
    mutating func take(now: UInt64) -> Bool {
        guard bucket.take(now: now) else {
            overRateInARow &+= 1
            return false
        }
        overRateInARow = 0
        return true
    }
}
