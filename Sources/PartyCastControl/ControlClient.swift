import NIOCore
import NIOHTTP1
import NIOPosix
import PartyCastCore
import PartyCastNetwork

/// One HTTP/1.1 request to a remote control and its whole answer, over NIO's HTTP/1 codec: what
/// `broadcaster ctl` and the tests speak. A client of one API on the LAN needs neither pooling, TLS,
/// redirects nor HTTP/2, so not AsyncHTTPClient (and the dozen modules a build compiles for it).
public enum ControlClient {
    public struct Answer: Sendable {
        public var status: HTTPResponseStatus
        public var headers: HTTPHeaders
        public var body: ByteBuffer
    }

    public enum Failure: Error, CustomStringConvertible {
        case refused(host: String, port: Int)
        case cannotConnect(host: String, port: Int, reason: String)
        case timedOut(seconds: Int64)
        case answerTooLarge(limit: Int)
        case closedEarly

        public var description: String {
            switch self {
            case .refused(let host, let port): "nothing listens at \(HostAndPort(host: host, port: port)) (connection refused)"
            case .cannotConnect(let host, let port, let reason): "cannot connect to \(HostAndPort(host: host, port: port)) (\(reason))"
            case .timedOut(let seconds): "no answer within \(seconds) s"
            case .answerTooLarge(let limit): "the answer is over \(limit) bytes"
            case .closedEarly: "the connection closed before the answer ended"
            }
        }
    }

    /// Sends `method path` to host:port with `body` (whole, with its length; or, with `chunked`, as
    /// chunks of unknown length) and collects the answer up to `limit` bytes, all within `timeout`.
    public static func perform(_ method: HTTPMethod, host: String, port: Int, path: String, headers: HTTPHeaders = [:],
                               body: [ByteBuffer] = [], chunked: Bool = false, limit: Int = 1 << 20,
                               timeout: TimeAmount = .seconds(10)) async throws -> Answer {
        let channel: NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>
        do {
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(timeout)
                .connect(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            throw connectFailure(error, host: host, port: port)
        }
        // A deadline for the whole exchange: closing the channel ends the reads below with an error.
        let expired = LockedValueBox(false)
        let deadline = channel.channel.eventLoop.scheduleTask(in: timeout) {
            expired.withLockedValue { $0 = true }
            channel.channel.close(promise: nil)
        }
        defer { deadline.cancel() }
        do {
            return try await channel.executeThenClose { inbound, outbound in
                var head = HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)
                head.headers.replaceOrAdd(name: "Host", value: HostAndPort(host: host, port: port).authority(omittingPort: 80))
                head.headers.replaceOrAdd(name: "Connection", value: "close")
                if chunked {
                    head.headers.replaceOrAdd(name: "Transfer-Encoding", value: "chunked")
                } else if !body.isEmpty || [.POST, .PUT].contains(method) {
                    head.headers.replaceOrAdd(name: "Content-Length", value: String(body.reduce(0) { $0 + $1.readableBytes }))
                }
                // A server may answer before the request is all sent (a refusal, a body over its
                // limit) and close: then the answer, not the failed write, is what happened.
                var unsent: (any Error)?
                do {
                    try await outbound.write(.head(head))
                    for chunk in body { try await outbound.write(.body(.byteBuffer(chunk))) }
                    try await outbound.write(.end(nil))
                } catch {
                    unsent = error
                }
                do {
                    return try await collect(inbound, limit: limit)
                } catch Failure.closedEarly where unsent != nil {
                    throw unsent!
                }
            }
        } catch where expired.withLockedValue({ $0 }) {
            throw Failure.timedOut(seconds: timeout.nanoseconds / 1_000_000_000)
        }
    }

    /// A connection that could not be made, in one line.
    static func connectFailure(_ error: any Error, host: String, port: Int) -> any Error {
        guard let failure = PartyCastNetwork.connectFailure(error) else { return error }
        return failure.refused ? Failure.refused(host: host, port: port) : Failure.cannotConnect(host: host, port: port, reason: failure.reason)
    }

    private static func collect(_ inbound: NIOAsyncChannelInboundStream<HTTPClientResponsePart>, limit: Int) async throws -> Answer {
        var answer: Answer?
        for try await part in inbound {
            switch part {
            case .head(let head) where head.status.code >= 200:
                answer = Answer(status: head.status, headers: head.headers, body: ByteBuffer())
            case .head:
                continue  // 1xx: the real answer follows
            case .body(var bytes):
                guard answer != nil else { continue }
                guard answer!.body.readableBytes + bytes.readableBytes <= limit else { throw Failure.answerTooLarge(limit: limit) }
                answer!.body.writeBuffer(&bytes)
            case .end:
                if let answer { return answer }
            }
        }
        throw Failure.closedEarly
    }
}
