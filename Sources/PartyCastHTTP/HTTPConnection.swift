import CCurl
import FoundationEssentials
import PartyCastCore

// libcurl rather than SwiftNIO's HTTP/1 pieces and NIOSSL: the same HTTP and TLS (the system's trust
// store) without BoringSSL compiled into every build, and opened only when a stream is http(s)://.
// SHOUTcast v1's `ICY 200 OK` is an alias of HTTP/1.0 200 (CURLOPT_HTTP200ALIASES).

/// libcurl's functions, once: curl_global_init is not to run beside other curl calls.
private let curlLibrary: Result<Curl, PartyCastError> = loadCLibrary("libcurl", code: .io, partycast_curl_open).flatMap { table in
    let code = table.functions.curl_global_init(Int(CURL_GLOBAL_DEFAULT))
    guard code == CURLE_OK else { return .failure(PartyCastError(.io, "libcurl cannot start: \(curlText(table.functions.curl_easy_strerror(code)))")) }
    return .success(Curl(table: table))
}

/// curl's words for an error code.
private func curlText(_ text: UnsafePointer<CChar>?) -> String {
    text.map { String(cString: $0) } ?? "unknown error"
}

/// The table of libcurl's functions.
private struct Curl: @unchecked Sendable {
    // @unchecked: an immutable table of function addresses, filled once before anyone reads it.
    let table: PartyCastCurl
    var functions: PartyCastCurlFunctions { table.functions }

    func set(_ handle: UnsafeMutableRawPointer, _ option: CURLoption, _ value: Int) {
        _ = partycast_curl_set_long(table.setopt, handle, option, value)
    }

    func set(_ handle: UnsafeMutableRawPointer, _ option: CURLoption, _ value: String) {
        _ = value.withCString { partycast_curl_set_pointer(table.setopt, handle, option, $0) }
    }

    func set(_ handle: UnsafeMutableRawPointer, _ option: CURLoption, pointer: UnsafeRawPointer?) {
        _ = partycast_curl_set_pointer(table.setopt, handle, option, pointer)
    }
}

/// What wakes the reading thread: news from a transfer, or `wakeReader` (a stop).
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

/// A response's status line and headers, as libcurl read them.
struct ResponseHead: Sendable {
    let status: Int
    let reason: String
    let headers: [(name: String, value: String)]

    /// The first value of a header, its name matched without regard to case.
    func value(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }
}

/// One HTTP request and its response, read by a blocking thread while libcurl runs the transfer on a
/// thread of its own. The body waits in a bounded buffer; while it is full, curl's write callback
/// waits too, so curl stops reading from the socket and the server's sends back up.
final class HTTPConnection: Sendable {
    /// curl waits above this many buffered bytes, goes on below half of it.
    static let bufferLimit = 512 * 1024
    /// Raw response-head bytes kept (for `icy-name`, often Latin-1); a longer head is refused.
    static let rawHeadLimit = 16 * 1024

    enum Finish {
        case complete
        case failed(code: CURLcode, text: String)
    }

    struct State {
        var connected = false
        var head: ResponseHead?
        var rawHead: [UInt8] = []
        var headTooLong = false
        var body: [UInt8] = []
        /// Bytes of `body` already read.
        var consumed = 0
        var writerWaiting = false
        var finished: Finish?
        var closed = false
        var received: Int64 = 0

        var readable: Int { body.count - consumed }

        mutating func take(_ count: Int) -> [UInt8] {
            let bytes = Array(body[consumed..<consumed + count])
            consumed += count
            if consumed >= body.count / 2 {
                body.removeFirst(consumed)
                consumed = 0
            }
            return bytes
        }
    }

    enum Outcome {
        case bytes([UInt8])
        /// The body ended as HTTP says it does (curl finished the transfer).
        case end
        case dropped(String)
        case stopped
    }

    let url: URL
    private let state = LockedValueBox(State())
    private let signal: ReaderSignal
    /// Wakes curl's write callback when the reader has made room, or the connection was closed.
    private let room = Wakeup()

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
        let curl = try curlLibrary.get()
        let connection = HTTPConnection(url: url, signal: signal)
        try connection.start(curl, range: range, connectTimeout: timeouts.connect)

        let connectDeadline = monotonicNanoseconds() + timeouts.connect.nanoseconds + 1_000_000_000
        let connected = signal.wait(until: connectDeadline) {
            connection.state.withLockedValue { s -> Bool? in s.connected || s.finished != nil ? true : nil }
        }
        guard connected != nil else {
            connection.close()
            if signal.isStopped { throw PartyCastError(.io, "\(name): stopped while connecting") }
            throw PartyCastError(.io, "\(name): cannot connect to \(HostAndPort(host: host, port: port)) within \(timeouts.connect.secondsText) s; check the address")
        }

        let headDeadline = monotonicNanoseconds() + timeouts.headers.nanoseconds
        let answered = signal.wait(until: headDeadline) {
            connection.state.withLockedValue { s -> Result<Void, PartyCastError>? in
                if s.head != nil { return .success(()) }
                switch s.finished {
                case nil: return nil
                case .complete: return .failure(PartyCastError(.io, "\(name): the server closed the connection without answering"))
                case .failed(let code, _) where !s.connected && [CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_OPERATION_TIMEDOUT].contains(code):
                    return .failure(PartyCastError(.io, "\(name): cannot connect to \(HostAndPort(host: host, port: port)) (\(describe(s))); check the address and that the server is up"))
                case .failed:
                    return .failure(PartyCastError(.io, "\(name): \(describe(s))"))
                }
            }
        }
        switch answered {
        case .success: return connection
        case .failure(let error):
            connection.close()
            throw error
        case nil:
            connection.close()
            if signal.isStopped { throw PartyCastError(.io, "\(name): stopped while waiting for the server") }
            throw PartyCastError(.io, "\(name): the server accepted the connection but sent no answer within \(timeouts.headers.secondsText) s; check the address (is it an audio stream server?)")
        }
    }

    /// Sets up the transfer and runs it on a thread of its own, which holds the connection until
    /// curl returns.
    private func start(_ curl: Curl, range: Int64?, connectTimeout: Swift.Duration) throws(PartyCastError) {
        guard let handle = curl.functions.curl_easy_init() else { throw PartyCastError(.io, "\(url.absoluteString): libcurl cannot start a transfer") }
        let transfer = Transfer(connection: self, curl: curl, handle: handle)
        let context = UnsafeRawPointer(Unmanaged.passUnretained(transfer).toOpaque())
        curl.set(handle, CURLOPT_URL, url.absoluteString)
        curl.set(handle, CURLOPT_PROTOCOLS_STR, "http,https")
        curl.set(handle, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1)
        curl.set(handle, CURLOPT_NOSIGNAL, 1)
        curl.set(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(connectTimeout.nanoseconds / 1_000_000))
        curl.set(handle, CURLOPT_USERAGENT, "PartyCast")
        curl.set(handle, CURLOPT_HTTPHEADER, pointer: transfer.headers.map { UnsafeRawPointer($0) })
        curl.set(handle, CURLOPT_HTTP200ALIASES, pointer: transfer.aliases.map { UnsafeRawPointer($0) })
        if let range, range > 0 { curl.set(handle, CURLOPT_RANGE, "\(range)-") }
        curl.set(handle, CURLOPT_ERRORBUFFER, pointer: transfer.errorText)
        for option in [CURLOPT_WRITEDATA, CURLOPT_HEADERDATA, CURLOPT_XFERINFODATA, CURLOPT_PREREQDATA] {
            curl.set(handle, option, pointer: context)
        }
        _ = partycast_curl_set_data_callback(curl.table.setopt, handle, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            Transfer.of(context).deliver(data, size, count)
        }
        _ = partycast_curl_set_data_callback(curl.table.setopt, handle, CURLOPT_HEADERFUNCTION) { data, size, count, context in
            Transfer.of(context).headerLine(data, size, count)
        }
        curl.set(handle, CURLOPT_NOPROGRESS, 0)
        // Called about once a second even while nothing arrives: a closed connection ends there.
        _ = partycast_curl_set_progress_callback(curl.table.setopt, handle) { context, _, _, _, _ in
            Transfer.of(context).connection.isClosed ? 1 : 0
        }
        _ = partycast_curl_set_connected_callback(curl.table.setopt, handle) { context, _, _, _, _ in
            Transfer.of(context).connection.update { $0.connected = true }
            return Int32(CURL_PREREQFUNC_OK)
        }
        _ = DedicatedThread { transfer.run() }
    }

    var isClosed: Bool { state.withLockedValue { $0.closed } }

    /// Takes a piece of the body, waiting while the buffer is full; false once the connection was closed.
    fileprivate func deliver(_ bytes: UnsafeRawBufferPointer) -> Bool {
        while true {
            let taken = state.withLockedValue { s -> Bool? in
                if s.closed { return false }
                guard s.readable < Self.bufferLimit else {
                    s.writerWaiting = true
                    return nil
                }
                s.body.append(contentsOf: bytes)
                s.received += Int64(bytes.count)
                return true
            }
            if let taken {
                if taken { signal.wakeup.signal() }
                return taken
            }
            room.wait()
        }
    }

    /// One line of the response head, kept raw; false (curl then aborts) past the limit or once closed.
    fileprivate func keepHeadLine(_ line: UnsafeRawBufferPointer) -> Bool {
        update { s in
            guard !s.closed else { return false }
            guard s.rawHead.count + line.count <= Self.rawHeadLimit else {
                s.headTooLong = true
                return false
            }
            s.rawHead += line
            return true
        }
    }

    /// Applies a change from curl's thread and wakes the reader.
    fileprivate func update<T>(_ change: (inout State) -> T) -> T {
        defer { signal.wakeup.signal() }
        return state.withLockedValue(change)
    }

    /// One line for the failure that ended a transfer.
    private static func describe(_ s: State) -> String {
        if s.headTooLong {
            return "the server's response headers go on without end (over \(rawHeadLimit / 1024) KiB); is it an audio stream server?"
        }
        guard case .failed(let code, let text) = s.finished else { return "the server closed the connection" }
        switch code {
        case CURLE_PEER_FAILED_VERIFICATION:
            return "the server's TLS certificate was not trusted (\(text)); use a server with a valid certificate"
        case CURLE_SSL_CONNECT_ERROR:
            return "the TLS handshake failed (\(text))"
        case CURLE_GOT_NOTHING:
            return "the server closed the connection without answering"
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_WEIRD_SERVER_REPLY:
            return "the server's answer is not HTTP (\(text)); is it an audio stream server?"
        case CURLE_PARTIAL_FILE:
            return "the server closed the connection"
        default:
            return text
        }
    }

    var head: ResponseHead { state.withLockedValue { $0.head! } }
    var rawHead: [UInt8] { state.withLockedValue { $0.rawHead } }
    var received: Int64 { state.withLockedValue { $0.received } }

    /// Up to `maxBytes` of body; waits for them until `silence` has passed without any (a drop).
    func read(maxBytes: Int, silence: Swift.Duration) -> Outcome {
        let deadline = monotonicNanoseconds() + silence.nanoseconds
        let outcome = signal.wait(until: deadline) {
            state.withLockedValue { s -> (Outcome, Bool)? in
                if s.readable > 0 {
                    let bytes = s.take(min(maxBytes, s.readable))
                    // curl goes on once the buffer has drained to half.
                    let resume = s.writerWaiting && s.readable < Self.bufferLimit / 2
                    if resume { s.writerWaiting = false }
                    return (.bytes(bytes), resume)
                }
                switch s.finished {
                case nil: return nil
                case .complete: return (.end, false)
                case .failed: return (.dropped(Self.describe(s)), false)
                }
            }
        }
        guard let (result, resume) = outcome else {
            close()
            return signal.isStopped ? .stopped : .dropped("no data for \(silence.secondsText) s")
        }
        if resume { room.signal() }
        return result
    }

    /// The body's first `count` bytes (fewer if it ends sooner), left in the buffer; nil on timeout.
    func peek(_ count: Int, deadline: UInt64) -> [UInt8]? {
        signal.wait(until: deadline) {
            state.withLockedValue { s -> [UInt8]? in
                guard s.readable >= count || s.finished != nil else { return nil }
                return Array(s.body[s.consumed..<s.consumed + min(count, s.readable)])
            }
        }
    }

    /// The whole body, when it ends by `deadline` and holds at most `limit` bytes (a playlist).
    func readAll(limit: Int, deadline: UInt64) throws(PartyCastError) -> [UInt8] {
        let body = signal.wait(until: deadline) {
            state.withLockedValue { s -> Result<[UInt8], PartyCastError>? in
                if s.readable > limit {
                    return .failure(PartyCastError(.notAudio, "\(url.absoluteString): a playlist over \(limit / 1024) KiB; is it really a playlist?"))
                }
                guard s.finished != nil else { return nil }
                return .success(s.take(s.readable))
            }
        }
        close()
        switch body {
        case .success(let bytes): return bytes
        case .failure(let error): throw error
        case nil: throw PartyCastError(.io, "\(url.absoluteString): the playlist did not arrive in time")
        }
    }

    /// Ends the transfer: curl's next callback (within about a second) aborts it.
    func close() {
        state.withLockedValue { $0.closed = true }
        room.signal()
    }

    fileprivate func finish(_ code: CURLcode, _ text: String) {
        update { $0.finished = code == CURLE_OK ? .complete : .failed(code: code, text: text) }
    }
}

/// What curl's callbacks reach through their context pointer: the connection, and the handle the
/// head is read from. The transfer's thread frees curl's handle and lists when curl returns.
private final class Transfer: @unchecked Sendable {
    // @unchecked: made by the opening thread before the transfer's thread starts, then used by that
    // thread alone (curl's callbacks run inside curl_easy_perform).
    let connection: HTTPConnection
    let curl: Curl
    let handle: UnsafeMutableRawPointer
    let headers: UnsafeMutablePointer<curl_slist>?
    let aliases: UnsafeMutablePointer<curl_slist>?
    let errorText = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))

    init(connection: HTTPConnection, curl: Curl, handle: UnsafeMutableRawPointer) {
        self.connection = connection
        self.curl = curl
        self.handle = handle
        headers = curl.functions.curl_slist_append(nil, "Icy-MetaData: 1")
        aliases = curl.functions.curl_slist_append(nil, "ICY 200 OK")
        errorText.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    /// The transfer that `context` (set by `start`) points at.
    static func of(_ context: UnsafeMutableRawPointer?) -> Transfer {
        Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
    }

    func run() {
        let code = curl.functions.curl_easy_perform(handle)
        let text = errorText.pointee == 0 ? curlText(curl.functions.curl_easy_strerror(code)) : String(cString: errorText)
        curl.functions.curl_easy_cleanup(handle)
        curl.functions.curl_slist_free_all(headers)
        curl.functions.curl_slist_free_all(aliases)
        errorText.deallocate()
        connection.finish(code, text)
    }

    func deliver(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int) -> Int {
        let (total, overflow) = size.multipliedReportingOverflow(by: count)
        guard let data, !overflow else { return 0 }
        return connection.deliver(UnsafeRawBufferPointer(start: data, count: total)) ? total : 0
    }

    /// Keeps a line of the head; its blank last line completes the head, unless it ended an
    /// interim (1xx) answer.
    func headerLine(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int) -> Int {
        let (total, overflow) = size.multipliedReportingOverflow(by: count)
        guard let data, !overflow else { return 0 }
        let line = UnsafeRawBufferPointer(start: data, count: total)
        guard connection.keepHeadLine(line) else { return 0 }
        guard line.elementsEqual([13, 10]) || line.elementsEqual([10]) else { return total }
        var status = 0
        _ = partycast_curl_get_long(curl.table.getinfo, handle, CURLINFO_RESPONSE_CODE, &status)
        if (100..<200).contains(status) {
            connection.update { $0.rawHead = [] }
            return total
        }
        var headers: [(name: String, value: String)] = []
        var previous: UnsafeMutablePointer<curl_header>?
        while let header = curl.functions.curl_easy_nextheader(handle, UInt32(CURLH_HEADER), -1, previous) {
            headers.append((String(cString: header.pointee.name), String(cString: header.pointee.value)))
            previous = header
        }
        connection.update { s in
            // The status line's words after the code: "HTTP/1.1 404 Not Found", "ICY 200 OK".
            let firstLine = s.rawHead.prefix { $0 != 13 && $0 != 10 }.split(separator: 32, maxSplits: 2)
            let reason = firstLine.count == 3 ? String(decoding: firstLine[2], as: UTF8.self) : ""
            s.head = ResponseHead(status: status, reason: reason, headers: headers)
        }
        return total
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
