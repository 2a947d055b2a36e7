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
/// Assistant's speakers, `sendspin daemon`) join the party as listeners. Like the remote control
/// (`ControlServer`), Hummingbird's Application runs in a ServiceGroup of its own, started bound;
/// as a `Service` of the process's group, it serves until that group's graceful shutdown.
public final class SendspinServer: Service, Sendable {
    public static let path = "/sendspin"
    /// Connections at once, and from one address; more are closed as they come (each holds a few
    /// seconds of audio).
    static let maxConnections = 64
    static let maxConnectionsPerAddress = 16
    /// WebSocket close code 1013 ("Try Again Later", IANA's registry), which NIO does not name.
    static let tryAgainLater = WebSocketErrorCode.unknown(1013)
    static let idleTimeout = TimeAmount.seconds(10)
    /// How long open connections (each gets a close frame) may take to finish at shutdown.
    static let shutdownDeadline = TimeAmount.seconds(2)

    public let port: Int
    /// Its Sendspin server id (its Noise key).
    public let serverID: String
    private let services: ServiceGroup
    private let stopped: EventLoopFuture<Void>
    private let running: Task<Void, Never>
    private let eventLoop: any EventLoop

    /// Returns once bound, so a busy port is an error here rather than a log line later.
    /// - Parameter group: the process's event loops (its one group).
    public init(party: Party, fanout: Fanout, name: String, host: String, port: Int,
                group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger) async throws(PartyCastError) {
        let key = X25519KeyPair()
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
        let eventLoop = group.next()
        let bound = eventLoop.makePromise(of: Int.self)
        let stopped = eventLoop.makePromise(of: Void.self)
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
        // No signals here: the process's own group has them, and ends this one through `run`.
        let services = ServiceGroup(configuration: .init(services: [app], logger: serverLogger))
        let running = Task {
            do {
                try await services.run()
                bound.fail(PartyCastError(.io, "stopped before it could listen"))
            } catch {
                bound.fail(error)
            }
            stopped.succeed(())
        }
        do {
            self.port = try await bound.futureResult.get()
        } catch {
            running.cancel()
            // The task fulfils `stopped` right after failing `bound`; it never fails.
            try? await stopped.futureResult.get()
            throw PartyCastError(.io, "cannot serve Sendspin on \(host):\(port): \(error) (choose another with --sendspin-port, or --no-sendspin)")
        }
        serverID = SendspinHandshake(serverKey: key).serverID
        self.services = services
        self.stopped = stopped.futureResult
        self.running = running
        self.eventLoop = eventLoop
    }

    /// Serves until the process's graceful shutdown (or cancellation), then stops.
    public func run() async throws {
        do { try await gracefulShutdown() } catch { /* cancelled: stop all the same */ }
        await stop()
    }

    /// Closes the listening socket and every connection: gracefully for up to `shutdownDeadline`,
    /// then by cancelling what is left.
    public func stop() async {
        await services.triggerGracefulShutdown()
        let timer = eventLoop.scheduleTask(in: Self.shutdownDeadline) { [running] in running.cancel() }
        // `stopped` never fails (see init).
        try? await stopped.get()
        timer.cancel()
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
