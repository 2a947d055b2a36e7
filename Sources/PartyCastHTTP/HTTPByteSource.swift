import FoundationEssentials
import PartyCastCore

/// An http:// or https:// stream as bytes: internet radio (Icecast/SHOUTcast, with ICY titles in
/// `streamTags`) or a remote file (seekable with Range requests). Redirects and .m3u/.pls
/// playlists are followed; a live stream that drops is reconnected, from the original URL.
public final class HTTPByteSource: ByteSource {
    public struct Timeouts: Sendable {
        public var connect: Swift.Duration = .seconds(5)
        public var headers: Swift.Duration = .seconds(10)
        /// A stream that sends nothing for this long is treated as dropped.
        public var silence: Swift.Duration = .seconds(10)
        public init() {}
    }

    public struct Options: Sendable {
        public var timeouts = Timeouts()
        /// A dropped stream that has not come back after this long is given up.
        public var giveUpAfter: Swift.Duration = .seconds(60)
        public var firstBackoff: Swift.Duration = .milliseconds(500)
        /// Short enough that a station back from an outage of any length is heard within the 5 s a
        /// party tolerates (the wait, then about a second to buffer); one attempt per 2 s costs nothing.
        public var maxBackoff: Swift.Duration = .seconds(2)
        public init() {}
    }

    static let maxRedirects = 5
    static let maxPlaylistDepth = 4
    static let playlistLimit = 256 * 1024
    /// A connection that has delivered this much ends an outage: the give-up clock starts afresh.
    static let productiveBytes: Int64 = 64 * 1024
    private static let loopMessage = "the playlist points back at itself; give the stream's own address"

    /// What the user gave: every reconnect and seek starts here again (not at a redirect's target).
    public let url: String
    private let originalURL: URL
    private let options: Options
    private let onEvent: (@Sendable (String) -> Void)?
    private let signal = ReaderSignal()
    private let tags = LockedValueBox<TrackTags?>(nil)
    private var connection: HTTPConnection?
    private var icy: ICYDemuxer?
    public private(set) var length: Int64?
    public private(set) var canSeek = false
    /// nil until a server says (Accept-Ranges, or a 206 or 200 answer to a Range request).
    public private(set) var rangeCapable: Bool?
    /// The offset of the next byte `read` returns.
    private var position: Int64 = 0
    /// Bytes of the current connection to drop first: a server that ignored Range sends from 0.
    private var skip: Int64 = 0
    /// When the current run of drops began (nil while connected and delivering).
    private var outageStart: UInt64?
    public private(set) var reconnects = 0

    public var isRemote: Bool { true }
    public var streamTags: TrackTags? { tags.withLockedValue { $0 } }
    public var wakeReader: (@Sendable () -> Void)? { { [signal] in signal.stop() } }

    /// Whether `spec` names something this source opens.
    public static func handles(_ spec: String) -> Bool {
        let lower = spec.lowercased()
        return lower.hasPrefix("http://") || lower.hasPrefix("https://")
    }

    /// Connects (following redirects and playlists) and reads the response head; a first connect
    /// that fails is an error at once, never retried.
    /// - Parameter onEvent: one line per reconnect attempt, for a log.
    public init(url: String, options: Options = Options(), onEvent: (@Sendable (String) -> Void)? = nil) throws(PartyCastError) {
        guard Self.handles(url), let parsed = URL(string: url), parsed.host(percentEncoded: false)?.isEmpty == false else {
            throw PartyCastError(.invalidArgument, "\(url): not a valid http:// or https:// URL; check it")
        }
        self.url = url
        originalURL = parsed
        self.options = options
        self.onEvent = onEvent
        let first = try resolve(parsed, range: nil, depth: 0, visited: [])
        let head = first.head
        let metaint = head.value("icy-metaint").flatMap { Int($0) }
        if metaint == nil, head.status == 200, let total = head.value("content-length").flatMap({ Int64($0) }) {
            length = total
            canSeek = true
            switch head.value("accept-ranges")?.lowercased() {
            case "bytes": rangeCapable = true
            case "none": rangeCapable = false
            default: break
            }
        }
        adopt(first, range: nil)
    }

    deinit { connection?.close() }

    public func read(maxBytes: Int) throws(PartyCastError) -> [UInt8] {
        while true {
            if signal.isStopped {
                connection?.close()
                return []
            }
            guard let connection else {
                if let length, position >= length { return [] }
                try recover(from: "the connection was lost")
                continue
            }
            switch connection.read(maxBytes: maxBytes, silence: options.timeouts.silence) {
            case .stopped:
                return []
            case .bytes(var bytes):
                if outageStart != nil, connection.received >= Self.productiveBytes { outageStart = nil }
                if skip > 0 {
                    let n = Int(min(skip, Int64(bytes.count)))
                    bytes.removeFirst(n)
                    skip -= Int64(n)
                }
                if var demuxer = icy {
                    var audio: [UInt8] = []
                    for block in demuxer.split(bytes, audio: &audio) { apply(block) }
                    icy = demuxer
                    bytes = audio
                }
                if bytes.isEmpty { continue }
                position += Int64(bytes.count)
                return bytes
            case .end where Self.endsByItself(connection.head):
                return []
            case .end:
                try recover(from: "the server ended the stream")
            case .dropped(let reason):
                if let length, position >= length { return [] }
                try recover(from: reason)
            }
        }
    }

    /// A body with a length (or chunked) ends when it is complete; one delimited by the connection
    /// closing (a live stream's) ends by dropping.
    private static func endsByItself(_ head: ResponseHead) -> Bool {
        head.value("content-length") != nil || head.value("transfer-encoding")?.lowercased().contains("chunked") == true
    }

    public func seek(to offset: Int64) throws(PartyCastError) {
        guard canSeek else { throw PartyCastError(.invalidArgument, "\(url): a live stream cannot seek") }
        if offset == position, connection != nil { return }
        // Without Range, forward is cheaper on the open connection than from the start again.
        if rangeCapable == false, offset > position, connection != nil {
            skip += offset - position
            position = offset
            return
        }
        connection?.close()
        connection = nil
        position = offset
        skip = 0
        if let length, offset >= length { return }
        adopt(try resolve(originalURL, range: offset, depth: 0, visited: []), range: offset)
    }

    /// Takes a connection's response: the ICY interval and station name, and where its body starts.
    private func adopt(_ new: HTTPConnection, range: Int64?) {
        connection = new
        let head = new.head
        icy = head.value("icy-metaint").flatMap { Int($0) }.flatMap { $0 > 0 ? ICYDemuxer(interval: $0) : nil }
        if icy != nil || head.value("icy-name") != nil {
            let station = Self.rawHeader("icy-name", in: new.rawHead).map { ICYMetadata.text($0) }
            tags.withLockedValue { tags in
                var updated = tags ?? TrackTags()
                updated.station = station.flatMap { $0.isEmpty ? nil : $0 }
                tags = updated
            }
        }
        if let range, range > 0 {
            if head.status == 206 {
                rangeCapable = true
            } else {
                rangeCapable = false
                skip = range
            }
        }
    }

    private func apply(_ block: [UInt8]) {
        guard let title = ICYMetadata.streamTitle(block) else { return }
        tags.withLockedValue { tags in
            var updated = tags ?? TrackTags()
            updated.title = title.isEmpty ? nil : title
            tags = updated
        }
    }

    /// A header's value as the server sent its bytes (curl's are read here as UTF-8, with replacements).
    static func rawHeader(_ name: String, in head: [UInt8]) -> [UInt8]? {
        let key = Array((name + ":").utf8)
        for line in head.split(separator: 10) {
            guard line.count >= key.count, zip(line, key).allSatisfy({ $0 | 0x20 == $1 | 0x20 }) else { continue }
            let value = line.dropFirst(key.count).drop { $0 == 32 || $0 == 9 }
            return Array(value.reversed().drop { $0 == 13 || $0 == 32 || $0 == 9 }.reversed())
        }
        return nil
    }

    // MARK: Reconnecting

    /// Reconnects after a drop, waiting 0.5 s, 1, 2, 4… between attempts; gives up once the stream
    /// has been down for `giveUpAfter`. A stop ends the wait (and `read` then returns the end).
    private func recover(from reason: String) throws(PartyCastError) {
        connection?.close()
        connection = nil
        let now = monotonicNanoseconds()
        let start = outageStart ?? now
        outageStart = start
        var delay = options.firstBackoff
        var lastReason = reason
        while !signal.isStopped {
            let elapsed = monotonicNanoseconds() - start
            guard elapsed < options.giveUpAfter.nanoseconds else {
                throw PartyCastError(.io, "\(url): the stream dropped (\(lastReason)) and did not come back within \(options.giveUpAfter.secondsText) s; try again later")
            }
            onEvent?("\(url): \(lastReason); reconnecting in \(delay.secondsText) s")
            let wakeAt = monotonicNanoseconds() + min(delay.nanoseconds, options.giveUpAfter.nanoseconds - elapsed)
            _ = signal.wait(until: wakeAt) { Bool?.none }
            if signal.isStopped { return }
            do throws(PartyCastError) {
                let resumeAt = canSeek ? position : nil
                adopt(try resolve(originalURL, range: resumeAt, depth: 0, visited: []), range: resumeAt)
                reconnects += 1
                onEvent?("\(url): reconnected")
                return
            } catch {
                lastReason = error.message
                delay = min(delay * 2, options.maxBackoff)
            }
        }
    }

    // MARK: Redirects and playlists

    /// Opens `start`, following redirects, and playlists to their first playable entry.
    private func resolve(_ start: URL, range: Int64?, depth: Int, visited: Set<String>) throws(PartyCastError) -> HTTPConnection {
        var current = start
        var redirects = 0
        while true {
            let connection = try HTTPConnection.open(current, range: range, timeouts: options.timeouts, signal: signal)
            let head = connection.head
            let name = current.absoluteString
            switch head.status {
            case 301, 302, 303, 307, 308:
                connection.close()
                guard let location = head.value("location"), let next = URL(string: location, relativeTo: current)?.absoluteURL else {
                    throw PartyCastError(.io, "\(name): a redirect (HTTP \(head.status)) without a usable Location; check the address")
                }
                redirects += 1
                guard redirects <= Self.maxRedirects else {
                    throw PartyCastError(.io, "\(start.absoluteString): more than \(Self.maxRedirects) redirects (the last to \(next.absoluteString)); the server redirects in a loop")
                }
                current = next
                continue
            case 200..<300:
                break
            case 404, 410:
                connection.close()
                throw PartyCastError(.fileNotFound, "\(name): not found (HTTP \(head.status)); check the address")
            case 401, 403:
                connection.close()
                throw PartyCastError(.permissionDenied, "\(name): access refused (HTTP \(head.status) \(head.reason)); the stream may need a login")
            default:
                connection.close()
                throw PartyCastError(.io, "\(name): the server answered HTTP \(head.status) \(head.reason); try again later")
            }

            let type = (head.value("content-type") ?? "").split(separator: ";").first.map { String($0).lowercased() } ?? ""
            if type == "text/html" || type == "application/xhtml+xml" {
                connection.close()
                throw PartyCastError(.notAudio, "\(name) is an HTML page (\(type)), not an audio stream; give the address of the stream itself")
            }
            var isPlaylist = Playlist.isPlaylistContentType(type)
            let surelyAudio = type.hasPrefix("audio/") || type.hasPrefix("video/") || type == "application/ogg"
            if !isPlaylist, !surelyAudio, head.value("icy-metaint") == nil {
                let deadline = monotonicNanoseconds() + options.timeouts.headers.nanoseconds
                isPlaylist = connection.peek(1024, deadline: deadline).flatMap(Playlist.recognise) != nil
            }
            guard isPlaylist else { return connection }
            return try followPlaylist(connection, at: current, range: range, depth: depth, visited: visited.union([start.absoluteString, name]))
        }
    }

    private func followPlaylist(_ connection: HTTPConnection, at url: URL, range: Int64?, depth: Int, visited: Set<String>) throws(PartyCastError) -> HTTPConnection {
        let name = url.absoluteString
        guard depth < Self.maxPlaylistDepth else {
            connection.close()
            throw PartyCastError(.invalidArgument, "\(name): playlists nested more than \(Self.maxPlaylistDepth) deep; give the stream's own address")
        }
        let body = try connection.readAll(limit: Self.playlistLimit, deadline: monotonicNanoseconds() + options.timeouts.headers.nanoseconds)
        let entries: [String]
        do throws(Playlist.ParseError) {
            entries = try Playlist.entries(body, base: url)
        } catch {
            throw PartyCastError(.unsupportedFormat, "\(name) is an HLS playlist (segments), which PartyCast does not play; give a direct stream address")
        }
        guard !entries.isEmpty else {
            throw PartyCastError(.notAudio, "\(name): the playlist has no entries")
        }
        var failures: [(entry: String, error: PartyCastError)] = []
        for entry in entries {
            guard Self.handles(entry), let entryURL = URL(string: entry) else {
                failures.append((entry, PartyCastError(.invalidArgument, "not an http:// or https:// URL")))
                continue
            }
            if visited.contains(entryURL.absoluteString) { continue }
            do throws(PartyCastError) {
                return try resolve(entryURL, range: range, depth: depth + 1, visited: visited)
            } catch {
                if signal.isStopped { throw error }
                if !error.message.hasSuffix(Self.loopMessage) { failures.append((entry, error)) }
            }
        }
        guard let first = failures.first else { throw PartyCastError(.invalidArgument, "\(name): \(Self.loopMessage)") }
        throw PartyCastError(.notAudio, "\(name): no playable entry in the playlist (\(entries.count) tried; \(first.entry): \(first.error.message))")
    }
}
