#if canImport(Glibc)
import Glibc
#endif
import CMPDClient
import PartyCastControlSeam
import PartyCastCore

/// One connection to mpd through libmpdclient, which parses mpd's protocol and bounds its lines:
/// the few calls the link makes, each failure a `PartyCastError` with mpd's own words. Each answer
/// is bounded as a whole too: in time (`AnswerDeadline`), and, where libmpdclient would gather
/// it (status, current song), in lines and bytes. Used by the link's thread alone (libmpdclient's
/// connections are not for sharing).
final class MPDConnection {
    /// What connecting, or one answer, may take before mpd counts as gone.
    static let timeoutMilliseconds: UInt32 = 5000
    /// The largest cover read, as for ID3 pictures: a cover is a few hundred KiB.
    static let maxCoverBytes = 4 << 20
    /// mpd sends pictures in chunks of this size (its default `binarylimit`).
    static let coverChunkBytes = 8192
    /// The events the link waits for: song, pause, play and seek (player), and tags or songs
    /// changed in the queue (playlist).
    static let events = mpd_idle(rawValue: MPD_IDLE_PLAYER.rawValue | MPD_IDLE_PLAYLIST.rawValue)
    /// The most lines, and bytes, of a status or current song: mpd sends ~25 lines, 1-2 KiB.
    static let maxAnswerPairs = 256
    static let maxAnswerBytes = 64 << 10

    private let connection: OpaquePointer
    private let deadline: AnswerDeadline

    init(host: String, port: Int, deadline: AnswerDeadline) throws(PartyCastError) {
        guard let connection = mpd_connection_new(host, UInt32(port), Self.timeoutMilliseconds) else {
            throw PartyCastError(.io, "out of memory for a connection to mpd")
        }
        self.connection = connection
        self.deadline = deadline
        // Failed, it is freed by deinit all the same (self is whole by now).
        try check()
    }

    deinit { mpd_connection_free(connection) }

    /// The socket, for a wait in poll(2) beside other descriptors.
    var descriptor: Int32 { mpd_connection_get_fd(connection) }

    /// Asks mpd to answer when one of `events` happens; the answer is read by `receiveIdle`.
    func sendIdle() throws(PartyCastError) {
        guard answered({ mpd_send_idle_mask(connection, Self.events) }) else { throw failure() }
    }

    /// The events mpd answered the idle with; when `interrupt`, it is told to answer now (noidle).
    @discardableResult
    func receiveIdle(interrupt: Bool) throws(PartyCastError) -> UInt32 {
        if interrupt { guard answered({ mpd_send_noidle(connection) }) else { throw failure() } }
        let events = answered { mpd_recv_idle(connection, false) }
        if events.rawValue == 0 { try check() }
        return events.rawValue
    }

    /// Carries out a transport command. A command mpd refuses (seek past the end, play with an empty
    /// queue) is a refusal that leaves the connection usable; anything else ends it.
    func perform(_ command: PartyCommand) throws(MPDFailure) {
        let done: Bool
        switch command {
        case .pause: done = answered { mpd_run_pause(connection, true) }
        case .resume:
            // Stopped, mpd has nothing to unpause: play starts the queue's current song.
            let paused: Bool
            do throws(PartyCastError) { paused = try status { mpd_status_get_state($0) == MPD_STATE_PAUSE } } catch { throw .connection(error) }
            done = answered { paused ? mpd_run_pause(connection, false) : mpd_run_play(connection) }
        case .next: done = answered { mpd_run_next(connection) }
        case .previous: done = answered { mpd_run_previous(connection) }
        case .seek(let seconds): done = answered { mpd_run_seek_current(connection, Float(seconds), false) }
        default: throw .refused(PartyCommandError(.invalid, "mpd is not asked to \(command)"))
        }
        if !done { throw classified() }
    }

    /// mpd's state and current song, without the cover (`cover(of:)` reads that).
    func report() throws(PartyCastError) -> (report: SourceReport, uri: String?) {
        let (state, songID, elapsedMilliseconds, totalSeconds) = try status { status in
            (mpd_status_get_state(status), mpd_status_get_song_id(status), mpd_status_get_elapsed_ms(status), mpd_status_get_total_time(status))
        }
        var tags = TrackTags()
        var uri: String?
        var durationMilliseconds: UInt32 = 0
        var current: OpaquePointer?
        defer { current.map(mpd_song_free) }
        // A song's first line names its file; a second song (none is sent) would start at another.
        try exchange("currentsong", send: mpd_send_current_song) { pair in
            if let current { _ = mpd_song_feed(current, pair) } else { current = mpd_song_begin(pair) }
        }
        if let song = current {
            func tag(_ type: mpd_tag_type) -> String? { mpd_song_get_tag(song, type, 0).map { String(cString: $0) } }
            let path = String(cString: mpd_song_get_uri(song))
            // A song without a title is called by its file's name, as mpc calls it.
            let title = tag(MPD_TAG_TITLE) ?? (tag(MPD_TAG_NAME) == nil ? path.split(separator: "/").last.map(String.init) : nil)
            tags = TrackTags(title: title, artist: tag(MPD_TAG_ARTIST), album: tag(MPD_TAG_ALBUM), station: tag(MPD_TAG_NAME))
            uri = path
            durationMilliseconds = mpd_song_get_duration_ms(song)
        }
        let duration = durationMilliseconds > 0 ? Double(durationMilliseconds) / 1000 : totalSeconds > 0 ? Double(totalSeconds) : nil
        return (SourceReport(playing: state == MPD_STATE_PLAY, song: songID >= 0 ? Int(songID) : nil, tags: tags,
                             elapsedSeconds: Double(elapsedMilliseconds) / 1000, durationSeconds: duration, cover: nil), uri)
    }

    /// The song's picture: the one in its file (readpicture), else one beside it in its folder
    /// (albumart); nil when it has none. One larger than `maxCoverBytes` is refused.
    func cover(of uri: String) throws(MPDFailure) -> CoverArt? {
        for read in [mpd_run_readpicture, mpd_run_albumart] {
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: Self.coverChunkBytes)
            while true {
                let count = chunk.withUnsafeMutableBytes { buffer in answered { read(connection, uri, UInt32(bytes.count), buffer.baseAddress, buffer.count) } }
                if count < 0 {
                    // No picture of that kind: readpicture answers nothing (-1 without an error),
                    // albumart refuses ("No file exists"). Try the next kind.
                    let code = mpd_connection_get_error(connection)
                    guard code == MPD_ERROR_SUCCESS || code == MPD_ERROR_SERVER && mpd_connection_clear_error(connection) else {
                        throw .connection(failure())
                    }
                    bytes = []
                    break
                }
                if count == 0 { break }
                bytes += chunk[0..<Int(count)]
                guard bytes.count <= Self.maxCoverBytes else {
                    throw .refused(PartyCommandError(.invalid, "the cover of \(String(untrusted: uri)) is over \(Self.maxCoverBytes >> 20) MiB: not shown"))
                }
            }
            if !bytes.isEmpty { return CoverArt(mimeType: CoverArt.imageType(of: bytes[...], claimed: []), pictureType: 3, bytes: bytes) }
        }
        return nil
    }

    /// mpd's status, read by `read`.
    private func status<T>(_ read: (OpaquePointer) -> T) throws(PartyCastError) -> T {
        guard let status = mpd_status_begin() else { throw PartyCastError(.io, "out of memory for mpd's status") }
        defer { mpd_status_free(status) }
        try exchange("status", send: mpd_send_status) { mpd_status_feed(status, $0) }
        return read(status)
    }

    /// Sends `command` and reads its answer line by line into `feed`, up to `maxAnswerPairs` lines
    /// and `maxAnswerBytes` bytes (libmpdclient would gather any number), all within one deadline.
    private func exchange(_ command: String, send: (OpaquePointer) -> Bool, feed: (UnsafePointer<mpd_pair>) -> Void) throws(PartyCastError) {
        try answered { () throws(PartyCastError) in
            guard send(connection) else { throw failure() }
            var (pairs, bytes) = (0, 0)
            while let pair = mpd_recv_pair(connection) {
                pairs += 1
                bytes += strlen(pair.pointee.name) + strlen(pair.pointee.value) + 3
                guard pairs <= Self.maxAnswerPairs, bytes <= Self.maxAnswerBytes else {
                    mpd_return_pair(connection, pair)
                    throw PartyCastError(.io, "its answer to \(command) ran over \(Self.maxAnswerPairs) lines or \(Self.maxAnswerBytes >> 10) KiB")
                }
                feed(pair)
                mpd_return_pair(connection, pair)
            }
            try check()
        }
    }

    /// One exchange with mpd, under the deadline of an answer.
    private func answered<T, E: Error>(_ exchange: () throws(E) -> T) throws(E) -> T { try deadline.within(descriptor, exchange) }

    /// Throws mpd's error, if there is one.
    private func check() throws(PartyCastError) {
        if mpd_connection_get_error(connection) != MPD_ERROR_SUCCESS { throw failure() }
    }

    /// mpd's error in its own words (cleaned: they are the peer's).
    private func failure() -> PartyCastError {
        if deadline.expired { return PartyCastError(.io, "no whole answer within \(deadline.nanoseconds / 1_000_000_000) s") }
        guard mpd_connection_get_error(connection) != MPD_ERROR_SUCCESS else { return PartyCastError(.io, "mpd gave no answer") }
        return PartyCastError(.io, String(untrusted: String(cString: mpd_connection_get_error_message(connection))))
    }

    /// mpd refused the command (the connection goes on), or the connection failed.
    private func classified() -> MPDFailure {
        let error = failure()
        if mpd_connection_get_error(connection) == MPD_ERROR_SERVER, mpd_connection_clear_error(connection) {
            return .refused(PartyCommandError(.invalid, "mpd: \(error.message)"))
        }
        return .connection(error)
    }
}

/// Why a command to mpd failed: a refusal (the connection goes on) or the connection itself.
enum MPDFailure: Error {
    case refused(PartyCommandError)
    case connection(PartyCastError)
}
