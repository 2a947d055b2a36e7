import Hummingbird
import HummingbirdCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PartyCastControlSeam

/// The control port's connections (and the Sendspin port's, with their own caps and names): capped
/// per address and in total, and each must have its first request answered within `headerTimeout`
/// of connecting. Hummingbird's idle timeout starts only once a request head has been read, so
/// without this a crowd of silent connections would hold the broadcaster's descriptors for ever
/// (1,030 of them starved a real listener's join).
public final class ControlConnections: Sendable {
    static let headerTimeout = TimeAmount.seconds(10)
    let perAddress: Int
    let total: Int
    /// How its refusals read: the port's name, and the kinds they are counted under.
    let label: String
    let overCap: Refusals.Kind
    let silent: Refusals.Kind

    struct Counts {
        var byAddress: [String: Int] = [:]
        var total = 0
    }

    let refusals: Refusals
    private let counts = NIOLockedValueBox(Counts())

    public init(refusals: Refusals, label: String = "remote control", perAddress: Int = 16, total: Int = 128,
                overCap: Refusals.Kind = .controlConnections, silent: Refusals.Kind = .controlHeaderTimeout) {
        self.refusals = refusals
        self.label = label
        self.perAddress = perAddress
        self.total = total
        self.overCap = overCap
        self.silent = silent
    }

    /// Nil when admitted, else the cap that refused it.
    func admit(_ address: String) -> String? {
        counts.withLockedValue { c in
            if c.total >= total { return "\(total) connections in all" }
            if c.byAddress[address, default: 0] >= perAddress { return "\(perAddress) connections from one address" }
            c.total += 1
            c.byAddress[address, default: 0] += 1
            return nil
        }
    }

    func release(_ address: String) {
        counts.withLockedValue { c in
            c.total -= 1
            let left = c.byAddress[address, default: 1] - 1
            c.byAddress[address] = left > 0 ? left : nil
        }
    }
}

/// Nearest the socket on each control connection: admits it or closes it, and closes it when no
/// answer has gone out within the header timeout (the first answer means a request head was read).
final class ControlConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer

    private let connections: ControlConnections
    private var address: String?
    private var headerTimer: Scheduled<Void>?

    init(connections: ControlConnections) { self.connections = connections }

    func channelActive(context: ChannelHandlerContext) {
        let address = context.remoteAddress?.ipAddress ?? "?"
        if let cap = connections.admit(address) {
            connections.refusals.refuse(connections.overCap, "\(connections.label): refused a connection from \(address): over \(cap)")
            context.close(promise: nil)
            return
        }
        self.address = address
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        headerTimer = context.eventLoop.scheduleTask(in: ControlConnections.headerTimeout) { [connections] in
            connections.refusals.refuse(connections.silent, "\(connections.label): closed a connection from \(address): no request within "
                                        + "\(ControlConnections.headerTimeout.nanoseconds / 1_000_000_000) s")
            bound.value.close(promise: nil)
        }
        context.fireChannelActive()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        headerTimer?.cancel()
        headerTimer = nil
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        headerTimer?.cancel()
        headerTimer = nil
        if let address { connections.release(address) }
        address = nil
        context.fireChannelInactive()
    }
}

/// Hummingbird's HTTP/WebSocket child channel with the `ControlConnectionGuard` in front of it.
public struct GuardedChildChannel<Inner: ServerChildChannel>: ServerChildChannel {
    public typealias Value = Inner.Value
    let inner: Inner
    let connections: ControlConnections

    public init(inner: Inner, connections: ControlConnections) {
        self.inner = inner
        self.connections = connections
    }

    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(ControlConnectionGuard(connections: connections))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return inner.setup(channel: channel, logger: logger)
    }

    public func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}
