import PartyCastCore

/// One complete MPEG audio frame as it appeared in the stream.
public struct MP3Frame: Sendable, Equatable {
    public let header: FrameHeader
    public let bytes: [UInt8]
    /// Position of the frame's first byte in the stream.
    public let offset: Int64

    /// How many bytes before this frame's main data starts, in earlier frames (the bit reservoir).
    public var mainDataBegin: Int {
        let s = header.sideInfoOffset
        return header.version == .mpeg1
            ? Int(bytes[s]) << 1 | Int(bytes[s + 1] >> 7)
            : Int(bytes[s])
    }

    /// Bytes of main data this frame carries (what later frames may borrow from).
    public var mainDataLength: Int { bytes.count - header.sideInfoOffset - header.sideInfoLength }
}

public enum MP3Event: Sendable, Equatable {
    case tags(TrackTags)
    /// The Xing/Info/VBRI header frame; it carries no audio and is not passed on as a frame.
    case streamInfo(StreamInfo, FrameHeader)
    case frame(MP3Frame)
}

/// An incremental MP3 parser. Push bytes in pieces of any size, call `finish()` at end of stream,
/// and pull events with `next()`. It decides nothing until it has the bytes the decision needs
/// (or knows there are no more), so it yields the same events however the bytes are split.
public struct MP3Parser: Sendable {
    /// Frames of the same stream needed in a row before a sync word is trusted when searching.
    public static let headersToTrustSync = 3
    /// Bytes searched without finding audio before the input is declared not to be MP3.
    public static let searchLimit = 1 << 20

    enum State: Sendable {
        case start
        /// Inside an ID3v2 tag: bytes of it left, its major version, and bytes of the current
        /// frame still to skip.
        case id3(remaining: Int, version: UInt8, skipping: Int)
        case searching
        case locked(FrameHeader)
    }

    private var state: State
    private var buffer: [UInt8] = []
    private var head = 0
    private var bufferOffset: Int64 = 0
    private var isFinished = false
    private var expectsStreamHeader: Bool
    private var tags = TrackTags()
    private var id3v2Claimed = 0

    /// The ID3v2 tag's picture: its front cover, else its first picture. Set while the tag is
    /// parsed, so it is there once the first frame is.
    public private(set) var cover: CoverArt?
    public private(set) var skippedBytes: Int64 = 0
    public private(set) var framesParsed = 0
    public private(set) var bytesPushed: Int64 = 0

    /// - Parameter startOffset: stream position of the first byte pushed (when starting mid-file).
    public init(startOffset: Int64 = 0) {
        state = startOffset == 0 ? .start : .searching
        expectsStreamHeader = startOffset == 0
        bufferOffset = startOffset
    }

    public mutating func push<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        precondition(!isFinished, "push after finish")
        if head > 65536 && head * 2 > buffer.count {
            buffer.removeFirst(head)
            bufferOffset += Int64(head)
            head = 0
        }
        buffer.append(contentsOf: bytes)
        bytesPushed += Int64(bytes.count)
    }

    /// No more bytes will come: the remaining ones are decided on what is there.
    public mutating func finish() { isFinished = true }

    private var available: Int { buffer.count - head }

    private func startsWith(_ marker: String, at p: Int) -> Bool {
        let m = Array(marker.utf8)
        guard p + m.count <= buffer.count else { return false }
        return buffer[p..<p + m.count].elementsEqual(m)
    }

    /// The next event, or nil when more bytes are needed (or, after `finish()`, the stream is over).
    /// Throws when the input cannot be MP3 at all.
    public mutating func next() throws(PartyCastError) -> MP3Event? {
        while true {
            switch state {
            case .start:
                if available < 10 && !isFinished { return nil }
                if startsWith("ID3", at: head), available >= 10 {
                    let h = buffer[head..<head + 10]
                    let version = h[head + 3]
                    let flags = h[head + 5]
                    var size = ID3.synchsafe(h[(head + 6)...])
                    if flags & 0x10 != 0 { size += 10 }  // footer
                    id3v2Claimed = size
                    head += 10
                    // Unsynchronised or extended-header tags are skipped whole: too rare to be worth parsing.
                    let parseable = (2...4).contains(version) && flags & 0xC0 == 0
                    state = .id3(remaining: size, version: version, skipping: parseable ? 0 : size)
                } else {
                    state = .searching
                }

            case .id3(var remaining, let version, var skipping):
                if skipping > 0 || remaining == 0 {
                    let n = min(skipping > 0 ? skipping : 0, available)
                    head += n
                    remaining -= n
                    skipping -= n
                    if skipping > 0 {
                        state = .id3(remaining: remaining, version: version, skipping: skipping)
                        if isFinished { throw truncatedTagError(remaining: remaining) }
                        return nil
                    }
                    if remaining == 0 {
                        state = .searching
                        if !tags.isEmpty { return .tags(tags) }
                        continue
                    }
                    state = .id3(remaining: remaining, version: version, skipping: 0)
                }
                let headerLength = version == 2 ? 6 : 10
                if remaining < headerLength || (available >= 1 && buffer[head] == 0) {
                    // Padding (or a fragment too short for a frame): skip the rest of the tag.
                    state = .id3(remaining: remaining, version: version, skipping: remaining)
                    continue
                }
                guard available >= headerLength else {
                    if isFinished { throw truncatedTagError(remaining: remaining) }
                    return nil
                }
                let h = buffer[head..<head + headerLength]
                let idLength = version == 2 ? 3 : 4
                let id = String(decoding: h.prefix(idLength), as: UTF8.self)
                let sizeBytes = h[(head + idLength)..<(head + idLength + (version == 2 ? 3 : 4))]
                let size = version == 4 ? ID3.synchsafe(sizeBytes) : ID3.plain(sizeBytes)
                guard size <= remaining - headerLength else {
                    state = .id3(remaining: remaining, version: version, skipping: remaining)
                    continue
                }
                let wanted: WritableKeyPath<TrackTags, String?>? = switch id {
                case "TIT2", "TT2": \.title
                case "TPE1", "TP1": \.artist
                case "TALB", "TAL": \.album
                default: nil
                }
                // A picture's body is read as stored only when no format flag (compression, encryption,
                // unsynchronisation, grouping, data length) changes it; the others are skipped.
                let plainBody = version == 2 || h[head + 9] == 0
                if id == "APIC" || id == "PIC", plainBody, size <= ID3.maxPictureFrame, cover?.pictureType != 3 {
                    guard available >= headerLength + size else {
                        if isFinished { throw truncatedTagError(remaining: remaining) }
                        return nil
                    }
                    let start = head + headerLength
                    if let picture = ID3.picture(buffer[start..<start + size], version: version), cover == nil || picture.pictureType == 3 {
                        cover = picture
                    }
                    head += headerLength + size
                    remaining -= headerLength + size
                    state = .id3(remaining: remaining, version: version, skipping: 0)
                } else if let wanted, size <= ID3.maxTextFrame {
                    guard available >= headerLength + size else {
                        if isFinished { throw truncatedTagError(remaining: remaining) }
                        return nil
                    }
                    let start = head + headerLength
                    tags[keyPath: wanted] = ID3.text(buffer[start..<start + size])
                    head += headerLength + size
                    remaining -= headerLength + size
                    state = .id3(remaining: remaining, version: version, skipping: 0)
                } else {
                    head += headerLength
                    state = .id3(remaining: remaining - headerLength, version: version, skipping: size)
                }

            case .searching, .locked:
                var reference: FrameHeader? = nil
                if case .locked(let h) = state { reference = h }
                if startsWith("TAG", at: head) {
                    // ID3v1 is the last 128 bytes; only the end of the stream shows it is one.
                    if available <= 128 && !isFinished { return nil }
                    if available == 128 {
                        let v1 = ID3.v1(buffer[head...])
                        head = buffer.count
                        if tags.isEmpty, !v1.isEmpty { tags = v1; return .tags(v1) }
                        continue
                    }
                }
                switch check(at: head, reference: reference) {
                case .needMore:
                    return nil
                case .end:
                    skippedBytes += Int64(available)
                    head = buffer.count
                    if framesParsed == 0 && !expectsStreamHeaderSeen { throw noAudioError() }
                    return nil
                case .reject:
                    head += 1
                    skippedBytes += 1
                    if case .locked = state { state = .searching }
                    if framesParsed == 0, skippedBytes > Self.searchLimit { throw noAudioError() }
                case .accept(let header):
                    let bytes = Array(buffer[head..<head + header.frameLength])
                    let offset = bufferOffset + Int64(head)
                    head += header.frameLength
                    state = .locked(header)
                    if expectsStreamHeader {
                        expectsStreamHeader = false
                        if let info = StreamInfo.parse(frame: bytes, header: header) {
                            expectsStreamHeaderSeen = true
                            return .streamInfo(info, header)
                        }
                    }
                    framesParsed += 1
                    return .frame(MP3Frame(header: header, bytes: bytes, offset: offset))
                }
            }
        }
    }

    private var expectsStreamHeaderSeen = false

    enum Check { case accept(FrameHeader), reject, needMore, end }

    /// Whether a frame starts at `p`: its header must be valid (and match the stream once locked),
    /// and the headers that follow must chain on from it: enough of them when searching, one when locked.
    private func check(at p: Int, reference: FrameHeader?) -> Check {
        guard p + 4 <= buffer.count else { return isFinished ? .end : .needMore }
        guard let first = FrameHeader(buffer[p], buffer[p + 1], buffer[p + 2], buffer[p + 3]),
              reference.map(first.isCompatible(with:)) ?? true
        else { return .reject }
        guard p + first.frameLength <= buffer.count else {
            // A frame cut off by the end of the stream is not decodable.
            return isFinished ? .end : .needMore
        }
        let confirmations = reference == nil ? Self.headersToTrustSync - 1 : 1
        var q = p + first.frameLength
        for _ in 0..<confirmations {
            if q + 4 > buffer.count { return isFinished ? .accept(first) : .needMore }
            if startsWith("TAG", at: q) || startsWith("ID3", at: q) || startsWith("APETAGEX", at: q) || startsWith("LYRICS", at: q) {
                return .accept(first)
            }
            guard let next = FrameHeader(buffer[q], buffer[q + 1], buffer[q + 2], buffer[q + 3]),
                  next.isCompatible(with: first)
            else { return .reject }
            q += next.frameLength
        }
        return .accept(first)
    }

    private func noAudioError() -> PartyCastError {
        if bytesPushed == 0 { return PartyCastError(.notAudio, "the input is empty: there is no audio to play") }
        return PartyCastError(.notAudio, "no MPEG audio frames found in \(bytesPushed) bytes; is this really an MP3 file?")
    }

    private func truncatedTagError(remaining: Int) -> PartyCastError {
        PartyCastError(.notAudio, "the ID3v2 tag claims \(id3v2Claimed) bytes but the input ends \(remaining) bytes short of that; no audio follows it")
    }
}
