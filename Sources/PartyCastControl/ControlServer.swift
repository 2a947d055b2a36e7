import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOPosix
import PartyCastControlSeam
import PartyCastCore
import PartyCastWebServer
import PartyCastWire
import ServiceLifecycle

/// The party's remote control: the HTTP + JSON API under /api, its WebSocket of snapshots and the
/// web page. Hummingbird's Application runs in a ServiceGroup of its own, started bound (so the
/// port is known before the party is announced); as a `Service` of the process's group, it serves
/// until that group's graceful shutdown and then shuts its own down.
public final class ControlServer: Service, Sendable {
    /// The port bound (the one asked for, or the one the system picked for 0).
    public var port: Int { application.port }
    private let application: BoundApplication

    /// Idle keep-alive connections close after this; silent new ones sooner (`ControlConnections`).
    static let idleTimeout = TimeAmount.seconds(30)

    /// Returns once bound, so a busy port is an error here rather than a log line later.
    /// - Parameter names: the Host names it answers to (default: this machine's own, `OwnNames.current`).
    /// - Parameter refusals: where its refusals are counted (the broadcaster's, for `status`).
    /// - Parameter group: the process's event loops (its one group).
    public init(control: any PartyControl, host: String, port: Int, key: PartyKey?, names: OwnNames? = nil,
                refusals: Refusals? = nil, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                logger: Logger) async throws(PartyCastError) {
        // Hummingbird's own start and stop lines would repeat what the broadcaster says itself.
        var serverLogger = logger
        serverLogger.handler = ThrottledLogHandler(wrapping: logger.handler)
        if serverLogger.logLevel == .info { serverLogger.logLevel = .notice }
        let refusals = refusals ?? Refusals(logger: logger)
        let api = ControlAPI(control: control, key: key, pages: WebPages.load(logger: logger, isPrivate: key != nil),
                             names: names ?? OwnNames.current(bind: host), refusals: refusals)
        let connections = ControlConnections(refusals: refusals)
        let webSocketResponder = api.webSocketRouter().buildResponder()
        let server = HTTPServerBuilder { responder in
            GuardedChildChannel(inner: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder,
                                                                    configuration: .init(http1: .init(idleTimeout: Self.idleTimeout))),
                                connections: connections)
        }
        do {
            application = try await BoundApplication(group: group, logger: serverLogger) { onServerRunning in
                Application(router: api.router(), server: server, configuration: .init(address: .hostname(host, port: port), serverName: nil),
                            onServerRunning: onServerRunning, eventLoopGroupProvider: .shared(group), logger: serverLogger)
            }
        } catch {
            throw PartyCastError(.io, "cannot serve the remote control on \(HostAndPort(host: host, port: port)): \(BoundApplication.describe(error)) (choose another with --control-port)")
        }
    }

    /// Serves until the process's graceful shutdown (or cancellation), then stops.
    public func run() async throws { try await application.run() }

    /// Closes the listening socket and every connection: gracefully (WebSockets get a close frame)
    /// for up to `BoundApplication.shutdownDeadline`, then by cancelling what is left.
    public func stop() async { await application.stop() }
}
