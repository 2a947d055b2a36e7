import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import PartyCastCore
import PartyCastNetwork
import PartyCastSendspin
import ServiceLifecycle
// The WebSocket handler Hummingbird's server runs for the players that dial in, run here for the
// ones the party dials: same framing, pings and close handshake. Its client (WSClient) would link
// NIOSSL, which the package dropped for libcurl; this SPI is how that client and the server use it.
@_spi(WSInternal) import WSCore

/// The spec's server-initiated connections: the party dials Sendspin players that wait for servers
/// (`--sendspin-player ws://HOST:8928/sendspin`), runs over each connection the same session as
/// for a player that dialled in (`SendspinConnection`), and dials again when the player goes
/// away, on the listener's reconnection schedule, one line per failure, until the party ends.
public final class SendspinDialler: Service, Sendable {
    /// A player that accepts the connection has this long to answer its upgrade request; then the
    /// session's own hello deadline applies.
    static let upgradeDeadline = TimeAmount.seconds(10)
    static let connectTimeout = TimeAmount.seconds(3)

    private let players: [SendspinURL]
    private let shared: SendspinConnection.Shared
    private let group: any EventLoopGroup
    /// The budgets of the players that dial in: Hummingbird's defaults, which `SendspinServer` keeps.
    private let webSocket = WebSocketServerConfiguration()

    init(players: [SendspinURL], shared: SendspinConnection.Shared, group: any EventLoopGroup) {
        self.players = players
        self.shared = shared
        self.group = group
    }

    /// Dials every player until the party ends or the process's graceful shutdown, which comes
    /// after the pacer's (the services stop in reverse order): the players have had their stream's
    /// end by then, and what is left (a wait, a dial, a player that never joined) is cancelled.
    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { tasks in
                for url in self.players { tasks.addTask { await self.keepDialling(url) } }
            }
        }
    }

    /// Dials `url` again after each connection, as aiosendspin's server does its own dialled
    /// players (should_retry_server_initiated_connection): not at all after a client/goodbye other
    /// than `restart` (the player left for another server, was told to by its user, or shut down:
    /// dialling it back would pull it away from where it went); after a `restart`, not before a
    /// grace for the player to be back; else on the reconnection schedule, whose delays start over
    /// only after a healthy connection: one that joined the fanout and stayed up for the schedule's
    /// longest delay (a player that says hello and closes is not dialled in a loop).
    private func keepDialling(_ url: SendspinURL) async {
        var schedule = Reconnection()
        while !Task.isCancelled {
            let ending: SendspinConnection.Ending, why: String, upFor: UInt64
            do {
                (ending, why, upFor) = try await dial(url)
            } catch {
                (ending, why, upFor) = (.didNotJoin, Self.describe(error), 0)
            }
            if ending == .broadcastOver || Task.isCancelled { return }
            var wait: UInt64
            switch ending {
            case .left(_, let goodbye?) where goodbye != "restart":
                shared.logger.notice("Sendspin player \(url) said goodbye (\(goodbye)): not dialling it again")
                return
            case .left(let joinedFanout, let goodbye):
                wait = schedule.nextWait(wasHealthy: joinedFanout && upFor >= Reconnection.longestDelay)
                if goodbye == "restart" { wait = max(wait, Reconnection.firstDelay) }
            case .tooEarly, .broadcastOver:
                wait = schedule.nextWait(wasHealthy: false)
            }
            // Dialled before the first song opened (the connection said so): no failure, dialled again soon.
            if ending == .tooEarly {
                shared.logger.debug("Sendspin player \(url): the party has not started; dialling again in \(Double(wait) / 1e9) s")
            } else {
                shared.logger.warning("Sendspin player \(url): \(why); dialling again in \(Double(wait) / 1e9) s")
            }
            do {
                try await Task.sleep(for: .nanoseconds(Int64(clamping: wait)))
            } catch {
                return  // cancelled: the party is shutting down
            }
        }
    }

    /// One connection to the player at `url`, from the TCP connect to its close: how it ended, why
    /// in a few words, and how long its WebSocket was open (ns). Throws when no WebSocket opened.
    private func dial(_ url: SendspinURL) async throws -> (SendspinConnection.Ending, String, UInt64) {
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(Self.connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
        let maxFrameSize = webSocket.maxFrameSize
        let (connected, upgrade) = try await bootstrap.connect(host: url.host, port: url.port) { channel in
            channel.eventLoop.makeCompletedFuture { (channel, try Self.upgrading(channel, to: url, maxFrameSize: maxFrameSize)) }
        }
        // A refused upgrade, or an answer that is no HTTP, leaves the connection open: closed here.
        let upgraded: Upgrade
        do {
            upgraded = try await upgrade.get()
        } catch {
            connected.close(promise: nil)
            throw error
        }
        guard case .webSocket(let channel) = upgraded else {
            connected.close(promise: nil)
            throw PartyCastError(.io, "it did not open a WebSocket at \(url.path)")
        }
        let configuration = WebSocketHandler.Configuration(extensions: [], autoPing: webSocket.autoPing, closeTimeout: webSocket.closeTimeout,
                                                           validateUTF8: webSocket.validateUTF8, maxFrameSize: maxFrameSize)
        let connection = SendspinConnection(shared: shared, address: url.host)
        let opened = monotonicNanoseconds()
        var why = ""
        do {
            _ = try await WebSocketHandler.handle(type: .client, configuration: configuration, asyncChannel: channel,
                                                  context: Context(logger: shared.logger)) { inbound, outbound, _ in
                try await connection.run(inbound: inbound, outbound: outbound)
            }
        } catch {
            why = " (\(Self.describe(error)))"
        }
        let ended = connection.ending.withLockedValue { $0 }
        let what = switch ended {
        case .left(_, "restart"?): "it restarts"
        case .left(joinedFanout: true, _): "it went away"
        default: "it did not join as a player"
        }
        return (ended, what + why, monotonicNanoseconds() - opened)
    }

    private enum Upgrade: Sendable {
        case webSocket(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>)
        case refused
    }

    /// The HTTP upgrade to a WebSocket at `url`'s path; the connection is closed if the player has
    /// not answered it within `upgradeDeadline`.
    private static func upgrading(_ channel: any Channel, to url: SendspinURL, maxFrameSize: Int) throws -> EventLoopFuture<Upgrade> {
        let upgrader = NIOTypedWebSocketClientUpgrader<Upgrade>(maxFrameSize: maxFrameSize) { channel, _ in
            channel.eventLoop.makeCompletedFuture { .webSocket(try NIOAsyncChannel(wrappingChannelSynchronously: channel)) }
        }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: url.authority)
        let request = HTTPRequestHead(version: .http1_1, method: .GET, uri: url.path, headers: headers)
        var configuration = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: .init(
            upgradeRequestHead: request, upgraders: [upgrader],
            notUpgradingCompletionHandler: { channel in channel.eventLoop.makeSucceededFuture(.refused) }))
        configuration.leftOverBytesStrategy = .forwardBytes
        let upgraded = try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(configuration: configuration)
        let deadline = channel.eventLoop.scheduleTask(in: upgradeDeadline) { channel.close(promise: nil) }
        upgraded.whenComplete { _ in deadline.cancel() }
        return upgraded
    }

    /// A failed dial in a few words: NIO's errors describe themselves at length.
    static func describe(_ error: any Error) -> String {
        if let failure = connectFailure(error) { return "cannot connect (\(failure.reason))" }
        return switch error {
        case let error as PartyCastError: error.message
        case let error as IOError: errnoReason(error.errnoCode)
        case ChannelError.inappropriateOperationForState: "the connection closed before its WebSocket opened"
        case let error as HTTPParserError: "its answer is not HTTP (\(error))"
        default: "\(error)"
        }
    }

    private struct Context: WebSocketContext {
        let logger: Logger
    }
}
