import Logging
import NIOCore
import ServiceLifecycle

/// A Hummingbird Application run in a ServiceGroup of its own and started bound, so that its port is
/// known (and a busy one is an error) before the party is announced: what the remote control and the
/// Sendspin server each are. As a `Service` of the process's group it serves until that group's
/// graceful shutdown, then stops.
public final class BoundApplication: Service, Sendable {
    /// How long open connections (a WebSocket gets a close frame) may take to finish at shutdown.
    public static let shutdownDeadline = TimeAmount.seconds(2)

    /// The port bound (the one asked for, or the one the system picked for 0).
    public let port: Int
    private let services: ServiceGroup
    private let stopped: EventLoopFuture<Void>
    private let running: Task<Void, Never>
    private let eventLoop: any EventLoop

    /// Runs the application `make` builds with the `onServerRunning` it is handed, and returns once
    /// it listens; throws what kept it from listening (a busy port: `describe` says it in a line).
    public init(group: any EventLoopGroup, logger: Logger,
                _ make: (_ onServerRunning: @escaping @Sendable (any Channel) async -> Void) -> any Service) async throws {
        let eventLoop = group.next()
        let bound = eventLoop.makePromise(of: Int.self)
        let stopped = eventLoop.makePromise(of: Void.self)
        let app = make { channel in bound.succeed(channel.localAddress?.port ?? 0) }
        // No signals here: the process's own group has them, and ends this one through `run`.
        let services = ServiceGroup(configuration: .init(services: [app], logger: logger))
        let running = Task {
            do {
                try await services.run()
                bound.fail(BoundApplicationError.stoppedBeforeBinding)
            } catch {
                bound.fail(error)
            }
            stopped.succeed(())
        }
        do {
            port = try await bound.futureResult.get()
        } catch {
            running.cancel()
            // The task fulfils `stopped` right after failing `bound`; it never fails.
            try? await stopped.futureResult.get()
            throw error
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

    /// Closes the listening socket and every connection: gracefully for up to `shutdownDeadline`,
    /// then by cancelling what is left.
    public func stop() async {
        await services.triggerGracefulShutdown()
        let timer = eventLoop.scheduleTask(in: Self.shutdownDeadline) { [running] in running.cancel() }
        // `stopped` never fails (see init).
        try? await stopped.get()
        timer.cancel()
    }

    /// A bind error in one line, without NIO's call site.
    public static func describe(_ error: any Error) -> String {
        if let error = error as? IOError { return error.description.replacing("bind(descriptor:ptr:bytes:): ", with: "") }
        return "\(error)"
    }
}

enum BoundApplicationError: Error, CustomStringConvertible {
    case stoppedBeforeBinding

    var description: String { "it stopped before it could listen" }
}
