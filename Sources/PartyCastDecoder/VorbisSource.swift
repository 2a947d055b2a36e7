import CVorbisFile
import Glibc
import PartyCastCore

/// libvorbisfile, opened by the first Ogg Vorbis stream.
private let vorbisfileLibrary = loadCLibrary("libvorbisfile", code: .decoder, partycast_vorbisfile_open)

/// An Ogg Vorbis stream as PCM through libvorbisfile, which trims to the granule positions (gapless)
/// and, on a seekable source, knows the exact length and seeks to the sample.
public final class VorbisSource: PCMSource {
    /// What the headers (comments with pictures included) may take before the stream is given up.
    static let headerBudget: Int64 = 32 << 20
    /// Errors in a row without a sample decoded before the stream is given up as undecodable.
    static let maxErrorsInARow = 1000

    private let bytes: CallbackBytes
    private let vorbisfile: PartyCastVorbisFileFunctions
    private let file = UnsafeMutablePointer<OggVorbis_File>.allocate(capacity: 1)
    private var isOpen = false
    private var pastEnd = false

    public private(set) var format: AudioFormat?
    public private(set) var tags = TrackTags()
    public private(set) var duration = Duration.unknown
    /// Holes (lost or corrupt pages) vorbisfile reported, and links whose channel count differs
    /// from the first link's (dropped: the output format cannot change mid-stream).
    public private(set) var concealedPackets = 0
    public var isSeekable: Bool { bytes.source.canSeek }
    public var wakeProducer: (@Sendable () -> Void)? { bytes.source.wakeReader }

    public init(bytes source: ByteSource) throws(PartyCastError) {
        bytes = CallbackBytes(source)
        vorbisfile = try vorbisfileLibrary.get()
    }

    deinit {
        // ov_clear always returns 0 (vorbisfile.c).
        if isOpen { _ = vorbisfile.ov_clear(file) }
        file.deallocate()
    }

    public func prepare() throws(PartyCastError) {
        guard !isOpen else { return }
        let callbacks = ov_callbacks(read_func: vorbisRead, seek_func: isSeekable ? vorbisSeek : nil, close_func: nil,
                                     tell_func: vorbisTell)
        bytes.readBudget = Self.headerBudget
        let result = vorbisfile.ov_open_callbacks(bytes.context, file, nil, 0, callbacks)
        bytes.readBudget = nil
        try bytes.rethrowFailure()
        switch result {
        case 0: break
        case OV_ENOTVORBIS, OV_EBADHEADER, OV_EREAD:
            throw PartyCastError(.notAudio, "not a readable Ogg Vorbis stream (its headers are missing or damaged)")
        case OV_EVERSION:
            throw PartyCastError(.unsupportedFormat, "the Vorbis stream has a version this decoder does not know")
        default:
            throw PartyCastError(.decoder, "libvorbisfile could not open the stream (error \(result))")
        }
        isOpen = true
        guard let info = vorbisfile.ov_info(file, -1)?.pointee, info.rate > 0, info.channels > 0 else {
            throw PartyCastError(.unsupportedFormat, "the Vorbis stream claims no sample rate or no channels")
        }
        format = AudioFormat(sampleRate: info.rate, channels: Int(info.channels))
        if vorbisfile.ov_seekable(file) != 0 {
            let total = vorbisfile.ov_pcm_total(file, -1)
            if total >= 0 { duration = .exact(frames: Int(total)) }
        }
        if let comment = vorbisfile.ov_comment(file, -1)?.pointee {
            tags = VorbisComments.tags(count: comment.comments, texts: comment.user_comments, lengths: comment.comment_lengths)
        }
    }

    public func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool {
        try prepare()
        guard let format, !pastEnd else { return false }
        var errorsInARow = 0
        while true {
            var planes: UnsafeMutablePointer<UnsafeMutablePointer<Float>?>? = nil
            var link: Int32 = 0
            let frames = vorbisfile.ov_read_float(file, &planes, 4096, &link)
            try bytes.rethrowFailure()
            if frames == 0 { return false }
            if frames < 0 {
                // OV_HOLE: pages lost or damaged; vorbisfile carries on after them.
                concealedPackets += 1
                errorsInARow += 1
                if errorsInARow >= Self.maxErrorsInARow {
                    throw PartyCastError(.decoder, "the Vorbis stream is undecodable (\(errorsInARow) errors in a row)")
                }
                continue
            }
            guard let planes, Int(vorbisfile.ov_info(file, link)?.pointee.channels ?? 0) == format.channels else {
                concealedPackets += 1
                continue
            }
            interleave(planes, frames: frames, channels: format.channels, into: &buffer)
            return true
        }
    }

    /// vorbisfile's seek: to the page before, then decodes and drops up to the sample.
    public func seek(toFrame frame: Int) throws(PartyCastError) {
        guard isSeekable else { throw PartyCastError(.invalidArgument, "this stream cannot seek") }
        try prepare()
        if let total = duration.frames, frame >= total {
            pastEnd = true
            return
        }
        pastEnd = false
        let result = vorbisfile.ov_pcm_seek(file, Int64(max(frame, 0)))
        try bytes.rethrowFailure()
        guard result == 0 else { throw PartyCastError(.decoder, "libvorbisfile could not seek to sample \(frame) (error \(result))") }
    }
}

/// Planar channels (as vorbisfile hands them out) appended to `buffer` interleaved.
func interleave(_ planes: UnsafeMutablePointer<UnsafeMutablePointer<Float>?>, frames: Int, channels: Int, into buffer: inout [Float]) {
    let start = buffer.count
    buffer.append(contentsOf: repeatElement(0, count: frames * channels))
    buffer.withUnsafeMutableBufferPointer { out in
        for c in 0..<channels {
            guard let plane = planes[c] else { continue }
            for i in 0..<frames { out[start + i * channels + c] = plane[i] }
        }
    }
}

extension VorbisSource: SniffedDecoder {
    public static var formatName: String { "Ogg Vorbis" }

    public static func recognises(_ head: ArraySlice<UInt8>) -> Bool {
        OggPage.firstPacket(in: head)?.starts(with: [1] + Array("vorbis".utf8)) == true
    }

    public static func open(_ bytes: ByteSource) throws(PartyCastError) -> PCMSource { try VorbisSource(bytes: bytes) }
}

/// The start of an Ogg stream, enough for sniffing which codec its first packet announces.
enum OggPage {
    /// The bytes of the first page's first packet (as far as `head` holds them); nil when `head`
    /// does not start with an Ogg page.
    static func firstPacket(in head: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        guard head.count >= 27, head.starts(with: Array("OggS".utf8)) else { return nil }
        let segments = Int(head[head.startIndex + 26])
        guard head.count >= 27 + segments else { return nil }
        return head[(head.startIndex + 27 + segments)...]
    }
}

// vorbisfile's callbacks (stdio-like): free functions that find their source through the context pointer.

private func vorbisRead(_ buffer: UnsafeMutableRawPointer?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    let (wanted, overflow) = size.multipliedReportingOverflow(by: count)
    guard size > 0, !overflow else { return 0 }
    let n = CallbackBytes.from(context).read(into: buffer, count: wanted)
    // vorbisfile tells an error from the end of the stream by errno.
    if n < 0 { errno = EIO; return 0 }
    return n / size
}

private func vorbisSeek(_ context: UnsafeMutableRawPointer?, _ offset: Int64, _ whence: Int32) -> Int32 {
    CallbackBytes.from(context).seek(offset, whence: whence) ? 0 : -1
}

private func vorbisTell(_ context: UnsafeMutableRawPointer?) -> Int {
    Int(CallbackBytes.from(context).position)
}
