import Crypto
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOPosix
import NIOWebSocket
import PartyCastBroadcast
import PartyCastControl
import PartyCastControlSeam
import PartyCastCore
import PartyCastSendspin
import ServiceLifecycle

/// The party's Sendspin server role: a WebSocket at /sendspin where Sendspin players (Music
/// Assistant's speakers, `sendspin daemon`) join the party as listeners, on an event loop of its own.
public final class SendspinServer: Sendable {
    public static let path = "/sendspin"
    /// Connections at once, and from one address; more are closed as they come (each holds a few
    /// seconds of audio).
    static let maxConnections = 64
    static let maxConnectionsPerAddress = 16
    /// WebSocket close code 1013 ("Try Again Later", IANA's registry), which NIO does not name.
    static let tryAgainLater = WebSocketErrorCode.unknown(1013)
    static let idleTimeout = TimeAmount.seconds(10)

    public let port: Int
    /// Its Sendspin server id (its Noise key).
    public let serverID: String
    private let group: MultiThreadedEventLoopGroup
    private let services: ServiceGroup
    private let stopped: EventLoopFuture<Void>
    private let running: Task<Void, Never>

    /// Binds before returning (blocking the calling thread: not an event loop's).
    public init(party: Party, fanout: Fanout, name: String, host: String, port: Int, logger: Logger) throws(PartyCastError) {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let key = Curve25519.KeyAgreement.PrivateKey()
        let guarded = ControlConnections(refusals: fanout.refusals, label: "Sendspin", perAddress: Self.maxConnectionsPerAddress, total: Self.maxConnections,
                                         overCap: .connectionsTotal, silent: .silentPeer)
        let context = SendspinConnection.Shared(party: party, fanout: fanout, serverKey: key, serverName: name, logger: logger)
        let router = Router(context: SendspinRequestContext.self)
        router.ws(RouterPath(stringLiteral: String(Self.path.dropFirst()))) { inbound, outbound, request in
            let address = request.requestContext.remoteAddress?.ipAddress ?? "?"
            try await SendspinConnection(shared: context, address: address).run(inbound: inbound, outbound: outbound)
        }
        let webSocketResponder = router.buildResponder()
        var serverLogger = logger
        if serverLogger.logLevel == .info { serverLogger.logLevel = .notice }
        let bound = group.next().makePromise(of: Int.self)
        let stopped = group.next().makePromise(of: Void.self)
        let app = Application(
            router: Router(),
            // The remote control's guard: connections capped per address and in all, and closed when
            // silent (no upgrade request) for 10 s.
            server: HTTPServerBuilder { responder in
                GuardedChildChannel(inner: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder,
                                                                        configuration: .init(http1: .init(idleTimeout: Self.idleTimeout))),
                                    connections: guarded)
            },
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in bound.succeed(channel.localAddress?.port ?? port) },
            eventLoopGroupProvider: .shared(group),
            logger: serverLogger)
        let services = ServiceGroup(configuration: .init(services: [app], logger: serverLogger))
        running = Task.detached {
            do {
                try await services.run()
                bound.fail(PartyCastError(.io, "stopped before it could listen"))
            } catch {
                bound.fail(error)
            }
            stopped.succeed(())
        }
        do {
            self.port = try bound.futureResult.wait()
        } catch {
            running.cancel()
            // `stopped` is fulfilled right after `bound` fails and never fails itself.
            _ = try? stopped.futureResult.wait()
            try? group.syncShutdownGracefully()
            throw PartyCastError(.io, "cannot serve Sendspin on \(host):\(port): \(error) (choose another with --sendspin-port, or --no-sendspin)")
        }
        serverID = SendspinHandshake(serverKey: key).serverID
        self.group = group
        self.services = services
        self.stopped = stopped.futureResult
    }

    /// Closes the listening socket and every connection, gracefully for up to two seconds.
    public func shutdown() {
        Task.detached { [services] in await services.triggerGracefulShutdown() }
        let timer = group.next().scheduleTask(deadline: .now() + .seconds(2)) { [running] in running.cancel() }
        _ = try? stopped.wait()
        timer.cancel()
        try? group.syncShutdownGracefully()
    }
}

struct SendspinRequestContext: RequestContext, WebSocketRequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<Self>
    let remoteAddress: SocketAddress?

    init(source: Source) {
        coreContext = .init(source: source)
        webSocket = .init()
        remoteAddress = source.channel.remoteAddress
    }
}
