import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOPosix
import PartyCastControlSeam
import PartyCastCore
import PartyCastWire
import ServiceLifecycle

/// The party's remote control: the HTTP + JSON API under /api, its WebSocket of snapshots and the
/// web page. Hummingbird's Application runs in a ServiceGroup of its own, started bound (so the
/// port is known before the party is announced); as a `Service` of the process's group, it serves
/// until that group's graceful shutdown and then shuts its own down.
public final class ControlServer: Service, Sendable {
    /// The port bound (the one asked for, or the one the system picked for 0).
    public let port: Int
    private let services: ServiceGroup
    private let stopped: EventLoopFuture<Void>
    private let running: Task<Void, Never>
    private let eventLoop: any EventLoop

    /// Idle keep-alive connections close after this; silent new ones sooner (`ControlConnections`).
    static let idleTimeout = TimeAmount.seconds(30)
    /// How long open connections (a WebSocket gets a close frame) may take to finish at shutdown.
    static let shutdownDeadline = TimeAmount.seconds(2)

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
        let api = ControlAPI(control: control, key: key, pages: WebPages.load(logger: logger),
                             names: names ?? OwnNames.current(bind: host), refusals: refusals)
        let connections = ControlConnections(refusals: refusals)
        let webSocketResponder = api.webSocketRouter().buildResponder()
        let server = HTTPServerBuilder { responder in
            GuardedChildChannel(inner: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder,
                                                                    configuration: .init(http1: .init(idleTimeout: Self.idleTimeout))),
                                connections: connections)
        }
        let eventLoop = group.next()
        let bound = eventLoop.makePromise(of: Int.self)
        let stopped = eventLoop.makePromise(of: Void.self)
        let app = Application(
            router: api.router(),
            server: server,
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in bound.succeed(channel.localAddress?.port ?? port) },
            eventLoopGroupProvider: .shared(group),
            logger: serverLogger)
        // No signals here: the process's own group has them, and ends this one through `run`.
        let services = ServiceGroup(configuration: .init(services: [app], logger: serverLogger))
        let running = Task {
            do {
                try await services.run()
                bound.fail(ControlServerError.stoppedBeforeBinding)
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
            throw PartyCastError(.io, "cannot serve the remote control on \(host):\(port): \(Self.describe(error)) (choose another with --control-port)")
        }
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

    /// Closes the listening socket and every connection: gracefully (WebSockets get a close frame)
    /// for up to `shutdownDeadline`, then by cancelling what is left.
    public func stop() async {
        await services.triggerGracefulShutdown()
        let timer = eventLoop.scheduleTask(in: Self.shutdownDeadline) { [running] in running.cancel() }
        // `stopped` never fails (see init).
        try? await stopped.get()
        timer.cancel()
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? IOError { return error.description.replacingOccurrences(of: "bind(descriptor:ptr:bytes:): ", with: "") }
        return "\(error)"
    }
}

enum ControlServerError: Error {
    case stoppedBeforeBinding
}
