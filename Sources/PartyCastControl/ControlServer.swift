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
/// web page, on an event loop of its own so the broadcast's threads never wait for a browser.
public final class ControlServer: Sendable {
    /// The port bound (the one asked for, or the one the system picked for 0).
    public let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let services: ServiceGroup
    private let stopped: EventLoopFuture<Void>
    private let running: Task<Void, Never>

    /// Binds before returning, so a busy port is an error here rather than a log line later.
    /// Blocks the calling thread until then: call it from a plain thread, not an event loop.
    /// Idle keep-alive connections close after this; silent new ones sooner (`ControlConnections`).
    static let idleTimeout = TimeAmount.seconds(30)

    /// - Parameter names: the Host names it answers to (default: this machine's own, `OwnNames.current`).
    /// - Parameter refusals: where its refusals are counted (the broadcaster's, for `status`).
    public init(control: any PartyControl, host: String, port: Int, key: PartyKey?, names: OwnNames? = nil,
                refusals: Refusals? = nil, logger: Logger) throws(PartyCastError) {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
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
        let bound = group.next().makePromise(of: Int.self)
        let stopped = group.next().makePromise(of: Void.self)
        let app = Application(
            router: api.router(),
            server: server,
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in bound.succeed(channel.localAddress?.port ?? port) },
            eventLoopGroupProvider: .shared(group),
            logger: serverLogger)
        // No signals: the broadcaster handles Ctrl-C itself and shuts this server down.
        let services = ServiceGroup(configuration: .init(services: [app], logger: serverLogger))
        running = Task.detached {
            do {
                try await services.run()
                bound.fail(ControlServerError.stoppedBeforeBinding)
            } catch {
                bound.fail(error)
            }
            stopped.succeed(())
        }
        do {
            self.port = try bound.futureResult.wait()
        } catch {
            running.cancel()
            // The task fulfils `stopped` right after failing `bound`: shutting the loop down first
            // left that promise unfulfilled ("leaking promise", a crash in debug builds). It never fails.
            try? stopped.futureResult.wait()
            try? group.syncShutdownGracefully()
            throw PartyCastError(.io, "cannot serve the remote control on \(host):\(port): \(Self.describe(error)) (choose another with --control-port)")
        }
        self.group = group
        self.services = services
        self.stopped = stopped.futureResult
    }

    /// Closes the listening socket and every connection: gracefully (WebSockets get a close frame)
    /// for up to two seconds, then by cancelling what is left.
    public func shutdown() {
        Task.detached { [services] in await services.triggerGracefulShutdown() }
        let deadline = NIODeadline.now() + .seconds(2)
        let timer = group.next().scheduleTask(deadline: deadline) { [running] in running.cancel() }
        _ = try? stopped.wait()
        timer.cancel()
        try? group.syncShutdownGracefully()
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? IOError { return error.description.replacingOccurrences(of: "bind(descriptor:ptr:bytes:): ", with: "") }
        return "\(error)"
    }
}

enum ControlServerError: Error {
    case stoppedBeforeBinding
}
