import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOPosix
import NIOWebSocket
import PartyCastBroadcast
import PartyCastControlSeam
import PartyCastCore
import PartyCastSendspin
import PartyCastWebServer
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

    public var port: Int { application.port }
    /// Its Sendspin server id (its Noise key).
    public let serverID: String
    private let application: BoundApplication
    /// What its connections share: the party, the fanout and its identity (a dialled player's too).
    private let shared: SendspinConnection.Shared
    private let group: any EventLoopGroup

    /// Returns once bound, so a busy port is an error here rather than a log line later.
    /// - Parameter group: the process's event loops (its one group).
    public init(party: Party, fanout: Fanout, name: String, host: String, port: Int,
                group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger) async throws(PartyCastError) {
        let key = X25519KeyPair()
        let guarded = ControlConnections(refusals: fanout.refusals, label: "Sendspin", perAddress: Self.maxConnectionsPerAddress, total: Self.maxConnections,
                                         overCap: .connectionsTotal, silent: .silentPeer)
        let context = SendspinConnection.Shared(party: party, fanout: fanout, serverKey: key, serverName: name, logger: logger)
        shared = context
        self.group = group
        let router = Router(context: WebSocketPeerContext.self)
        router.ws(RouterPath(stringLiteral: String(Self.path.dropFirst()))) { inbound, outbound, request in
            let address = request.requestContext.remoteAddress?.ipAddress ?? "?"
            try await SendspinConnection(shared: context, address: address).run(inbound: inbound, outbound: outbound)
        }
        let webSocketResponder = router.buildResponder()
        var serverLogger = logger
        if serverLogger.logLevel == .info { serverLogger.logLevel = .notice }
        do {
            application = try await BoundApplication(group: group, logger: serverLogger) { onServerRunning in
                Application(
                    router: Router(),
                    // The remote control's guard: connections capped per address and in all, and closed when
                    // silent (no upgrade request) for 10 s.
                    server: HTTPServerBuilder { responder in
                        GuardedChildChannel(inner: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder,
                                                                                configuration: .init(http1: .init(idleTimeout: Self.idleTimeout))),
                                            connections: guarded)
                    },
                    configuration: .init(address: .hostname(host, port: port), serverName: nil),
                    onServerRunning: onServerRunning,
                    eventLoopGroupProvider: .shared(group),
                    logger: serverLogger)
            }
        } catch {
            throw PartyCastError(.io, "cannot serve Sendspin on \(host):\(port): \(BoundApplication.describe(error)) (choose another with --sendspin-port, or --no-sendspin)")
        }
        serverID = SendspinHandshake(serverKey: key).serverID
    }

    /// A dialler of `players` that wait for servers, as this server: its identity and its party.
    public func dialler(for players: [SendspinURL]) -> SendspinDialler {
        SendspinDialler(players: players, shared: shared, group: group)
    }

    /// Serves until the process's graceful shutdown (or cancellation), then stops.
    public func run() async throws { try await application.run() }

    /// Closes the listening socket and every connection: gracefully for up to
    /// `BoundApplication.shutdownDeadline`, then by cancelling what is left.
    public func stop() async { await application.stop() }
}
