import PartyCastCore

/// A `ByteSource` as the C libraries' read, seek and tell callbacks see it, handed to them as an
/// unmanaged context pointer. A Swift error cannot cross C: a callback keeps it in `failure`, tells
/// the library "I/O error", and the decoder rethrows it once the C call has returned.
final class CallbackBytes {
    let source: ByteSource
    private(set) var position: Int64 = 0
    private(set) var reachedEnd = false
    private(set) var failure: PartyCastError?
    /// Bytes left to read before reads end as at end of stream: caps what a library can be made
    /// to buffer while it looks for headers that never complete. nil: no cap.
    var readBudget: Int64?

    init(_ source: ByteSource) { self.source = source }

    /// The pointer the C side carries; valid while the decoder owning `self` lives.
    var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    static func from(_ context: UnsafeMutableRawPointer?) -> CallbackBytes {
        Unmanaged<CallbackBytes>.fromOpaque(context!).takeUnretainedValue()
    }

    /// Copies up to `count` bytes into `buffer`: how many (0 at end of stream), or -1 on failure.
    func read(into buffer: UnsafeMutableRawPointer?, count: Int) -> Int {
        guard let buffer, count > 0, failure == nil else { return failure == nil ? 0 : -1 }
        var wanted = count
        if let readBudget { wanted = Int(min(Int64(wanted), max(readBudget, 0))) }
        guard wanted > 0 else { return 0 }
        do {
            let piece = try source.read(maxBytes: wanted)
            if piece.isEmpty {
                reachedEnd = true
                return 0
            }
            piece.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            position += Int64(piece.count)
            if let readBudget { self.readBudget = readBudget - Int64(piece.count) }
            return piece.count
        } catch {
            failure = error
            return -1
        }
    }

    /// The source has more now (bytes pushed to it after it ran dry): reads may go on.
    func clearEnd() { reachedEnd = false }

    /// Moves to an absolute offset; false when the source cannot seek or the seek failed.
    func seek(to offset: Int64) -> Bool {
        guard source.canSeek, offset >= 0, failure == nil else { return false }
        do {
            try source.seek(to: offset)
        } catch {
            failure = error
            return false
        }
        position = offset
        reachedEnd = false
        return true
    }

    /// Seeks as fseek does (`whence` 0: absolute, 1: from here, 2: from the end).
    func seek(_ offset: Int64, whence: Int32) -> Bool {
        let base: Int64
        switch whence {
        case 0: base = 0
        case 1: base = position
        case 2:
            guard let length = source.length else { return false }
            base = length
        default: return false
        }
        let (target, overflow) = base.addingReportingOverflow(offset)
        return !overflow && seek(to: target)
    }

    /// Throws what a callback met during the last C call, once.
    func rethrowFailure() throws(PartyCastError) {
        guard let failure else { return }
        self.failure = nil
        throw failure
    }
}

/// Vorbis comments (`KEY=value`, keys case-insensitive), as FLAC, Ogg Vorbis and Ogg Opus carry them.
enum VorbisComments {
    /// Values longer than this are cut before decoding: a title is never megabytes long.
    static let maxValueBytes = 4096

    /// The title, artist and album among `count` comments, `comment(i)` being the i-th one's bytes.
    static func tags(count: Int, comment: (Int) -> UnsafeRawBufferPointer?) -> TrackTags {
        var tags = TrackTags()
        let fields: [(String, WritableKeyPath<TrackTags, String?>)] = [("TITLE", \.title), ("ARTIST", \.artist), ("ALBUM", \.album)]
        for i in 0..<max(count, 0) {
            guard let bytes = comment(i), let equals = bytes.firstIndex(of: UInt8(ascii: "=")) else { continue }
            let key = String(decoding: bytes[..<equals], as: UTF8.self).uppercased()
            guard let field = fields.first(where: { $0.0 == key })?.1, tags[keyPath: field] == nil else { continue }
            let value = bytes[(equals + 1)...].prefix(maxValueBytes)
            let text = String(untrusted: String(decoding: value, as: UTF8.self))
            if !text.isEmpty { tags[keyPath: field] = text }
        }
        return tags
    }

    /// The same, from the arrays libvorbis and libopusfile keep them in (`user_comments`, `comment_lengths`).
    static func tags(count: Int32, texts: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, lengths: UnsafeMutablePointer<Int32>?) -> TrackTags {
        tags(count: Int(count)) { i in
            guard let text = texts?[i], let length = lengths?[i], length >= 0 else { return nil }
            return UnsafeRawBufferPointer(start: text, count: Int(length))
        }
    }
}
