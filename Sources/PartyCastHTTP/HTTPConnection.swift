import FoundationEssentials
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import PartyCastCore

// NIO's HTTP/1 pieces rather than AsyncHTTPClient: SHOUTcast v1 answers `ICY 200 OK`, which NIO's
// llhttp-based HTTPResponseDecoder refuses ("Expected HTTP/, RTSP/ or ICE/"; see
// HTTPSourceTests.testNIOResponseDecoderRefusesICYWithoutTheShim), so a handler has to rewrite the status
// line before the decoder sees it, and AsyncHTTPClient's pipeline cannot take one. Owning the
// pipeline also gives the read-on-demand backpressure and the raw header bytes (below).

/// What wakes the reading thread: news from a connection's event loop, or `wakeReader` (a stop).
final class ReaderSignal: Sendable {
    let wakeup = Wakeup()
    private let stopped = LockedValueBox(false)

    var isStopped: Bool { stopped.withLockedValue { $0 } }

    func stop() {
        stopped.withLockedValue { $0 = true }
        wakeup.signal()
    }

    /// Waits until `check` gives a value, the deadline passes (nil) or a stop (nil).
    func wait<T>(until deadline: UInt64, _ check: () -> T?) -> T? {
        while true {
            if isStopped { return nil }
            if let value = check() { return value }
            let now = monotonicNanoseconds()
            if now >= deadline { return nil }
            wakeup.wait(nanoseconds: deadline - now)
        }
    }
}

/// One HTTP request and its response, read by a blocking thread: the event loop fills a bounded
/// buffer and stops reading from the socket while it is full (autoRead off, a read() per batch).
final class HTTPConnection: Sendable {
    /// Reading from the socket pauses above this many buffered bytes, resumes below half of it.
    static let bufferLimit = 512 * 1024
    /// Raw response-head bytes kept (for `icy-name`); NIO's decoder refuses heads over 80 KiB anyway.
    static let rawHeadLimit = 16 * 1024

    struct State {
        var channel: Channel?
        var connectFailure: Error?
        var head: HTTPResponseHead?
        var rawHead: [UInt8] = []
        var body = ByteBuffer()
        var ended = false
        var closed = false
        var failure: Error?
        var readPaused = false
        var received: Int64 = 0
    }

    enum Outcome {
        case bytes([UInt8])
        /// The body ended as HTTP says it does (the decoder's `.end`).
        case end
        case dropped(String)
        case stopped
    }

    let url: URL
    private let state = LockedValueBox(State())
    private let signal: ReaderSignal

    private init(url: URL, signal: ReaderSignal) {
        self.url = url
        self.signal = signal
    }

    /// Connects and sends a GET; returns once the response head is in (or throws a one-line error).
    static func open(_ url: URL, range: Int64?, timeouts: HTTPByteSource.Timeouts, signal: ReaderSignal) throws(PartyCastError) -> HTTPConnection {
        let name = url.absoluteString
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", let host = url.host(percentEncoded: false), !host.isEmpty else {
            throw PartyCastError(.invalidArgument, "\(name): not an http:// or https:// URL with a host")
        }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        let connection = HTTPConnection(url: url, signal: signal)
        let tls: NIOSSLContext?
        if scheme == "https" {
            switch tlsContext {
            case .success(let context): tls = context
            case .failure(let error): throw PartyCastError(.io, "\(name): cannot set up TLS (\(error))")
            }
        } else {
            tls = nil
        }
        // SNI takes names, never address literals.
        let sni = (try? SocketAddress(ipAddress: host, port: port)) == nil ? host : nil
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: (host.contains(":") ? "[\(host)]" : host) + (url.port.map { ":\($0)" } ?? ""))
        headers.add(name: "User-Agent", value: "PartyCast")
        headers.add(name: "Accept", value: "*/*")
        headers.add(name: "Icy-MetaData", value: "1")
        headers.add(name: "Connection", value: "close")
        if let range, range > 0 { headers.add(name: "Range", value: "bytes=\(range)-") }
        var path = url.path(percentEncoded: true)
        if path.isEmpty { path = "/" }
        if let query = url.query(percentEncoded: true) { path += "?" + query }
        let request = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)

        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.nanoseconds(Int64(timeouts.connect.nanoseconds)))
            .channelOption(.autoRead, value: false)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    if let tls { try pipeline.addHandler(NIOSSLClientHandler(context: tls, serverHostname: sni)) }
                    try pipeline.addHandler(ICYStatusLineHandler(connection: connection))
                    try pipeline.addHandler(HTTPRequestEncoder())
                    try pipeline.addHandler(ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .dropBytes)))
                    try pipeline.addHandler(ResponseHandler(request: request, connection: connection))
                }
            }
        bootstrap.connect(host: host, port: port).whenComplete { result in
            switch result {
            case .success(let channel): connection.update { $0.channel = channel }
            case .failure(let error): connection.update { $0.connectFailure = error }
            }
        }
        let connectDeadline = monotonicNanoseconds() + timeouts.connect.nanoseconds + 1_000_000_000
        let connected = signal.wait(until: connectDeadline) {
            connection.state.withLockedValue { s -> Result<Void, Error>? in
                if let error = s.connectFailure { return .failure(error) }
                return s.channel == nil ? nil : .success(())
            }
        }
        switch connected {
        case .success: break
        case .failure(let error): throw PartyCastError(.io, "\(name): cannot connect to \(host):\(port) (\(describe(error))); check the address and that the server is up")
        case nil:
            connection.close()
            if signal.isStopped { throw PartyCastError(.io, "\(name): stopped while connecting") }
            throw PartyCastError(.io, "\(name): cannot connect to \(host):\(port) within \(timeouts.connect.secondsText) s; check the address")
        }

        let headDeadline = monotonicNanoseconds() + timeouts.headers.nanoseconds
        let answered = signal.wait(until: headDeadline) {
            connection.state.withLockedValue { s -> Result<Void, Error>? in
                if s.head != nil { return .success(()) }
                if let error = s.failure { return .failure(error) }
                return s.closed ? .failure(ChannelError.eof) : nil
            }
        }
        switch answered {
        case .success: return connection
        case .failure(let error):
            connection.close()
            throw PartyCastError(.io, "\(name): \(describe(error))")
        case nil:
            connection.close()
            if signal.isStopped { throw PartyCastError(.io, "\(name): stopped while waiting for the server") }
            throw PartyCastError(.io, "\(name): the server accepted the connection but sent no answer within \(timeouts.headers.secondsText) s; check the address (is it an audio stream server?)")
        }
    }

    /// One line for a network or protocol failure.
    static func describe(_ error: Error) -> String {
        switch error {
        case NIOSSLError.handshakeFailed(let inner):
            let detail = "\(inner)"
            if detail.contains("CERTIFICATE_VERIFY_FAILED") {
                return "the server's TLS certificate was not trusted (\(detail.contains("self-signed") || detail.contains("self signed") ? "self-signed" : "verification failed")); use a server with a valid certificate"
            }
            return "the TLS handshake failed (\(detail))"
        case let error as NIOSSLExtraError where error == .failedToValidateHostname:
            return "the server's TLS certificate was not trusted (it is not for this host name)"
        case let error as HTTPParserError where error == .headerOverflow:
            return "the server's response headers go on without end (over 80 KiB); is it an audio stream server?"
        case let error as HTTPParserError:
            return "the server's answer is not HTTP (\(error)); is it an audio stream server?"
        case ChannelError.eof:
            return "the server closed the connection without answering"
        case ChannelError.connectTimeout:
            return "no connection within the timeout"
        case let error as NIOConnectionError:
            return error.connectionErrors.first.map { "\($0.error)" } ?? (error.dnsAError ?? error.dnsAAAAError).map { "cannot resolve the host name: \($0)" } ?? "\(error)"
        default:
            return "\(error)"
        }
    }

    /// TLS with the system's trust roots, set up once for every connection.
    private static let tlsContext: Result<NIOSSLContext, Error> = Result { try NIOSSLContext(configuration: .makeClientConfiguration()) }

    var head: HTTPResponseHead { state.withLockedValue { $0.head! } }
    var rawHead: [UInt8] { state.withLockedValue { $0.rawHead } }
    var received: Int64 { state.withLockedValue { $0.received } }

    /// Up to `maxBytes` of body; waits for them until `silence` has passed without any (a drop).
    func read(maxBytes: Int, silence: Swift.Duration) -> Outcome {
        let deadline = monotonicNanoseconds() + silence.nanoseconds
        let outcome = signal.wait(until: deadline) {
            state.withLockedValue { s -> (Outcome, Channel?)? in
                if s.body.readableBytes > 0 {
                    let bytes = s.body.readBytes(length: min(maxBytes, s.body.readableBytes))!
                    s.body.discardReadBytes()
                    // Resume socket reads once the buffer has drained to half.
                    if s.readPaused, s.body.readableBytes < Self.bufferLimit / 2 {
                        s.readPaused = false
                        return (.bytes(bytes), s.channel)
                    }
                    return (.bytes(bytes), nil)
                }
                if s.ended { return (.end, nil) }
                if let error = s.failure { return (.dropped(Self.describe(error)), nil) }
                if s.closed { return (.dropped("the server closed the connection"), nil) }
                return nil
            }
        }
        guard let (result, resume) = outcome else {
            close()
            return signal.isStopped ? .stopped : .dropped("no data for \(silence.secondsText) s")
        }
        if let resume { resume.eventLoop.execute { resume.read() } }
        return result
    }

    /// The body's first `count` bytes (fewer if it ends sooner), left in the buffer; nil on timeout.
    func peek(_ count: Int, deadline: UInt64) -> [UInt8]? {
        signal.wait(until: deadline) {
            state.withLockedValue { s -> [UInt8]? in
                let done = s.ended || s.closed || s.failure != nil
                guard s.body.readableBytes >= count || done else { return nil }
                return s.body.getBytes(at: s.body.readerIndex, length: min(count, s.body.readableBytes))
            }
        }
    }

    /// The whole body, when it ends by `deadline` and holds at most `limit` bytes (a playlist).
    func readAll(limit: Int, deadline: UInt64) throws(PartyCastError) -> [UInt8] {
        let body = signal.wait(until: deadline) {
            state.withLockedValue { s -> Result<[UInt8], PartyCastError>? in
                if s.body.readableBytes > limit {
                    return .failure(PartyCastError(.notAudio, "\(url.absoluteString): a playlist over \(limit / 1024) KiB; is it really a playlist?"))
                }
                guard s.ended || s.closed || s.failure != nil else { return nil }
                return .success(s.body.readBytes(length: s.body.readableBytes)!)
            }
        }
        close()
        switch body {
        case .success(let bytes): return bytes
        case .failure(let error): throw error
        case nil: throw PartyCastError(.io, "\(url.absoluteString): the playlist did not arrive in time")
        }
    }

    func close() {
        if let channel = state.withLockedValue({ $0.channel }) { channel.close(promise: nil) }
    }

    /// Applies a change from the event loop and wakes the reader.
    fileprivate func update<T>(_ change: (inout State) -> T) -> T {
        defer { signal.wakeup.signal() }
        return state.withLockedValue(change)
    }
}

/// Sends the request, then passes the response into the connection's buffer and asks the socket
/// for more only while the buffer has room.
private final class ResponseHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let request: HTTPRequestHead
    private let connection: HTTPConnection

    init(request: HTTPRequestHead, connection: HTTPConnection) {
        self.request = request
        self.connection = connection
    }

    func channelActive(context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(.head(request)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.read()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): connection.update { $0.head = head }
        case .body(var buffer):
            connection.update { s in
                s.received += Int64(buffer.readableBytes)
                s.body.writeBuffer(&buffer)
            }
        case .end: connection.update { $0.ended = true }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        let full = connection.update { s in
            s.readPaused = s.body.readableBytes >= HTTPConnection.bufferLimit
            return s.readPaused
        }
        if !full { context.read() }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        connection.update { s in if s.failure == nil { s.failure = error } }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection.update { $0.closed = true }
        context.fireChannelInactive()
    }
}

/// SHOUTcast v1's `ICY 200 OK` becomes `HTTP/1.0 200 OK` for the decoder after it. Also keeps the
/// head's raw bytes: NIO decodes header values as UTF-8 (replacing what is not), and `icy-name` is
/// often Latin-1.
private final class ICYStatusLineHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private static let icy = Array("ICY ".utf8)
    private let connection: HTTPConnection
    /// The first bytes, held until there are enough to tell `ICY ` from `HTTP/`.
    private var start: ByteBuffer?
    private var decided = false
    /// The head's bytes so far; nil once handed over.
    private var raw: [UInt8]? = []

    init(connection: HTTPConnection) { self.connection = connection }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        keepRaw(buffer)
        if decided {
            context.fireChannelRead(data)
            return
        }
        var held = start ?? context.channel.allocator.buffer(capacity: buffer.readableBytes)
        held.writeBuffer(&buffer)
        let first = held.getBytes(at: held.readerIndex, length: min(4, held.readableBytes)) ?? []
        if first.count < 4, Self.icy.starts(with: first) {
            start = held
            return
        }
        start = nil
        decided = true
        if first == Self.icy {
            held.moveReaderIndex(forwardBy: 4)
            var rewritten = context.channel.allocator.buffer(string: "HTTP/1.0 ")
            rewritten.writeBuffer(&held)
            held = rewritten
        }
        context.fireChannelRead(wrapInboundOut(held))
    }

    /// Collects the head's bytes up to its blank line (or the limit) and hands them over.
    private func keepRaw(_ buffer: ByteBuffer) {
        guard var kept = raw else { return }
        kept += buffer.readableBytesView.prefix(HTTPConnection.rawHeadLimit - kept.count)
        let end = kept.indices.dropLast(3).first { kept[$0] == 13 && kept[$0 + 1] == 10 && kept[$0 + 2] == 13 && kept[$0 + 3] == 10 }
        if let end {
            kept.removeSubrange((end + 2)...)
        }
        if end != nil || kept.count >= HTTPConnection.rawHeadLimit {
            let head = kept
            connection.update { $0.rawHead = head }
            raw = nil
        } else {
            raw = kept
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let held = start {
            start = nil
            context.fireChannelRead(wrapInboundOut(held))
        }
        context.fireChannelInactive()
    }
}

extension Swift.Duration {
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        return UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }

    /// Whole or fractional seconds, for messages.
    var secondsText: String {
        let value = Double(nanoseconds) / 1e9
        return value == value.rounded() ? "\(Int(value))" : "\(value)"
    }
}
