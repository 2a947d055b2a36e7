import NIOCore

/// The outbound half of a private party's record layer, in a connection's pipeline nearer the socket
/// than anything that writes frames: passes bytes through until `startSealing`, then seals every write
/// (`SessionRecords`), so the fan-out's shared frames, replies and clock requests all go out sealed
/// without any of them knowing. Every write is ByteBuffers of whole frames or parts of them.
public final class RecordSealingHandler: ChannelOutboundHandler {
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    private var sealer: RecordSealer?

    public init() {}

    /// Every write after this call (on the channel's event loop) is sealed.
    public func startSealing(with sealer: RecordSealer) {
        self.sealer = sealer
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard sealer != nil else { return context.write(data, promise: promise) }
        let plaintext = unwrapOutboundIn(data)
        let records = sealer!.seal(plaintext.readableBytesView)
        context.write(wrapOutboundOut(context.channel.allocator.buffer(bytes: records)), promise: promise)
    }
}

// NIO confines a handler to its channel's event loop; nothing here is shared across threads.
@available(*, unavailable)
extension RecordSealingHandler: Sendable {}
