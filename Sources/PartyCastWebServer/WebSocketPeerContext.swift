import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// A WebSocket route's context: Hummingbird's WebSocket one, plus the client's address (for the
/// per-address key throttle and connection caps). The remote's event stream and Sendspin's use it.
public struct WebSocketPeerContext: RequestContext, WebSocketRequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let webSocket: WebSocketHandlerReference<Self>
    public let remoteAddress: SocketAddress?

    public init(source: Source) {
        coreContext = .init(source: source)
        webSocket = .init()
        remoteAddress = source.channel.remoteAddress
    }
}
