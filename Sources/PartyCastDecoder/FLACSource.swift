import CFLAC
import PartyCastCore

/// libFLAC, opened by the first FLAC stream.
private let flacLibrary = loadCLibrary("libFLAC", code: .decoder, partycast_flac_open)

/// A FLAC stream as PCM through libFLAC's stream decoder, reading the `ByteSource` through
/// callbacks: seekable sources get libFLAC's sample-exact seeking, live ones play straight through.
/// libFLAC skips an ID3v2 tag before "fLaC" itself.
public final class FLACSource: PCMSource {
    fileprivate let bytes: CallbackBytes
    private let flac: PartyCastFLACFunctions
    private let decoder: UnsafeMutablePointer<FLAC__StreamDecoder>
    private var streamInfo: FLAC__StreamMetadata_StreamInfo?
    /// What the write callback decoded and `produce` has not handed out yet.
    private var decoded: [Float] = []
    /// Set by a seek past the last sample: nothing more until the next seek.
    private var pastEnd = false

    public private(set) var format: AudioFormat?
    public private(set) var tags = TrackTags()
    /// Frames libFLAC reported as lost sync, bad or failing their CRC (it writes silence for a
    /// frame whose CRC fails), and frames whose channel count differs from the stream's.
    public private(set) var concealedPackets = 0
    public var isSeekable: Bool { bytes.source.canSeek }
    public var wakeProducer: (@Sendable () -> Void)? { bytes.source.wakeReader }

    public var duration: Duration {
        guard let total = streamInfo?.total_samples, total > 0, total <= UInt64(Int.max) else { return .unknown }
        return .exact(frames: Int(total))
    }

    public init(bytes source: ByteSource) throws(PartyCastError) {
        flac = try flacLibrary.get()
        guard let decoder = flac.FLAC__stream_decoder_new() else { throw PartyCastError(.decoder, "libFLAC could not start") }
        self.decoder = decoder
        bytes = CallbackBytes(source)
        // Both fail only on a decoder already initialised; this one was made just above.
        _ = flac.FLAC__stream_decoder_set_md5_checking(decoder, 0)
        _ = flac.FLAC__stream_decoder_set_metadata_respond(decoder, FLAC__METADATA_TYPE_VORBIS_COMMENT)
        let seekable = source.canSeek
        let status = flac.FLAC__stream_decoder_init_stream(
            decoder, flacRead, seekable ? flacSeek : nil, seekable ? flacTell : nil, seekable ? flacLength : nil,
            flacEOF, flacWrite, flacMetadata, flacError, Unmanaged.passUnretained(self).toOpaque())
        guard status == FLAC__STREAM_DECODER_INIT_STATUS_OK else {
            flac.FLAC__stream_decoder_delete(decoder)
            throw PartyCastError(.decoder, "libFLAC could not start (init status \(status.rawValue))")
        }
    }

    deinit { flac.FLAC__stream_decoder_delete(decoder) }

    fileprivate static func from(_ context: UnsafeMutableRawPointer?) -> FLACSource {
        Unmanaged<FLACSource>.fromOpaque(context!).takeUnretainedValue()
    }

    public func prepare() throws(PartyCastError) {
        guard format == nil else { return }
        let ok = flac.FLAC__stream_decoder_process_until_end_of_metadata(decoder)
        try bytes.rethrowFailure()
        guard ok != 0, let info = streamInfo else {
            throw PartyCastError(.notAudio, "not a readable FLAC stream (no STREAMINFO block)")
        }
        // libFLAC bounds channels (1–8) and bits (4–32) by the field widths; a zero rate it lets through.
        guard info.sample_rate > 0, info.channels > 0 else {
            throw PartyCastError(.unsupportedFormat, "the FLAC stream claims \(info.sample_rate) Hz and \(info.channels) channels")
        }
        format = AudioFormat(sampleRate: Int(info.sample_rate), channels: Int(info.channels))
    }

    public func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool {
        try prepare()
        while decoded.isEmpty {
            if pastEnd || flac.FLAC__stream_decoder_get_state(decoder) == FLAC__STREAM_DECODER_END_OF_STREAM { return false }
            let ok = flac.FLAC__stream_decoder_process_single(decoder)
            try bytes.rethrowFailure()
            if ok == 0, flac.FLAC__stream_decoder_get_state(decoder) != FLAC__STREAM_DECODER_END_OF_STREAM {
                throw PartyCastError(.decoder, "libFLAC stopped: \(stateText)")
            }
        }
        buffer.append(contentsOf: decoded)
        decoded.removeAll(keepingCapacity: true)
        return true
    }

    /// For a source that is handed more bytes after it ran dry (a Sendspin stream's frames, one
    /// chunk at a time): decoding goes on from the next frame. A frame cut short by the end is lost.
    public func resumeAfterEnd() {
        guard bytes.reachedEnd || flac.FLAC__stream_decoder_get_state(decoder) == FLAC__STREAM_DECODER_END_OF_STREAM else { return }
        bytes.clearEnd()
        decoded.removeAll(keepingCapacity: true)
        _ = flac.FLAC__stream_decoder_flush(decoder)
    }

    /// libFLAC's own seek: it finds the frame holding `frame` (by its seek table or by bisection)
    /// and the write callback receives that frame already cut to start at `frame`.
    public func seek(toFrame frame: Int) throws(PartyCastError) {
        guard isSeekable else { throw PartyCastError(.invalidArgument, "this stream cannot seek") }
        try prepare()
        decoded.removeAll(keepingCapacity: true)
        let target = UInt64(max(frame, 0))
        if let total = streamInfo?.total_samples, total > 0, target >= total {
            pastEnd = true
            return
        }
        pastEnd = false
        let ok = flac.FLAC__stream_decoder_seek_absolute(decoder, target)
        try bytes.rethrowFailure()
        guard ok != 0 else {
            decoded.removeAll(keepingCapacity: true)
            // The seek's failure is what is reported; a flush that fails too adds nothing to it.
            _ = flac.FLAC__stream_decoder_flush(decoder)
            throw PartyCastError(.decoder, "libFLAC could not seek to sample \(target): \(stateText)")
        }
    }

    private var stateText: String {
        flac.FLAC__stream_decoder_get_resolved_state_string(decoder).map { String(cString: $0) } ?? "unknown state"
    }

    fileprivate func write(_ frame: FLAC__Frame, _ channelData: UnsafePointer<UnsafePointer<FLAC__int32>?>) {
        let channels = Int(frame.header.channels)
        let count = Int(frame.header.blocksize)
        let bits = Int(frame.header.bits_per_sample)
        guard let format, channels == format.channels, (1...32).contains(bits) else {
            concealedPackets += 1
            return
        }
        let scale = 1 / Float(Int64(1) << (bits - 1))
        let start = decoded.count
        decoded.append(contentsOf: repeatElement(0, count: count * channels))
        decoded.withUnsafeMutableBufferPointer { out in
            for c in 0..<channels {
                guard let samples = channelData[c] else { continue }
                for i in 0..<count { out[start + i * channels + c] = Float(samples[i]) * scale }
            }
        }
    }

    fileprivate func metadata(_ block: FLAC__StreamMetadata) {
        switch block.type {
        case FLAC__METADATA_TYPE_STREAMINFO:
            streamInfo = block.data.stream_info
        case FLAC__METADATA_TYPE_VORBIS_COMMENT:
            let comments = block.data.vorbis_comment
            tags = VorbisComments.tags(count: Int(comments.num_comments)) { i in
                guard let entry = comments.comments?[i], let text = entry.entry else { return nil }
                return UnsafeRawBufferPointer(start: text, count: Int(entry.length))
            }
        default:
            break
        }
    }

    fileprivate func error(_ status: FLAC__StreamDecoderErrorStatus) {
        concealedPackets += 1
    }
}

extension FLACSource: SniffedDecoder {
    public static var formatName: String { "FLAC" }

    public static func recognises(_ head: ArraySlice<UInt8>) -> Bool {
        head.starts(with: Array("fLaC".utf8))
    }

    public static func open(_ bytes: ByteSource) throws(PartyCastError) -> PCMSource { try FLACSource(bytes: bytes) }
}

// libFLAC's callbacks: C function pointers, so free functions that find their decoder through the
// context pointer.

private func flacRead(_: UnsafePointer<FLAC__StreamDecoder>?, _ buffer: UnsafeMutablePointer<FLAC__byte>?,
                      _ count: UnsafeMutablePointer<Int>?, _ context: UnsafeMutableRawPointer?) -> FLAC__StreamDecoderReadStatus {
    guard let count else { return FLAC__STREAM_DECODER_READ_STATUS_ABORT }
    let n = FLACSource.from(context).bytes.read(into: buffer, count: count.pointee)
    count.pointee = max(n, 0)
    if n < 0 { return FLAC__STREAM_DECODER_READ_STATUS_ABORT }
    return n == 0 ? FLAC__STREAM_DECODER_READ_STATUS_END_OF_STREAM : FLAC__STREAM_DECODER_READ_STATUS_CONTINUE
}

private func flacSeek(_: UnsafePointer<FLAC__StreamDecoder>?, _ offset: FLAC__uint64,
                      _ context: UnsafeMutableRawPointer?) -> FLAC__StreamDecoderSeekStatus {
    guard offset <= UInt64(Int64.max), FLACSource.from(context).bytes.seek(to: Int64(offset)) else {
        return FLAC__STREAM_DECODER_SEEK_STATUS_ERROR
    }
    return FLAC__STREAM_DECODER_SEEK_STATUS_OK
}

private func flacTell(_: UnsafePointer<FLAC__StreamDecoder>?, _ offset: UnsafeMutablePointer<FLAC__uint64>?,
                      _ context: UnsafeMutableRawPointer?) -> FLAC__StreamDecoderTellStatus {
    offset?.pointee = UInt64(FLACSource.from(context).bytes.position)
    return FLAC__STREAM_DECODER_TELL_STATUS_OK
}

private func flacLength(_: UnsafePointer<FLAC__StreamDecoder>?, _ length: UnsafeMutablePointer<FLAC__uint64>?,
                        _ context: UnsafeMutableRawPointer?) -> FLAC__StreamDecoderLengthStatus {
    guard let known = FLACSource.from(context).bytes.source.length, known >= 0 else { return FLAC__STREAM_DECODER_LENGTH_STATUS_UNSUPPORTED }
    length?.pointee = UInt64(known)
    return FLAC__STREAM_DECODER_LENGTH_STATUS_OK
}

private func flacEOF(_: UnsafePointer<FLAC__StreamDecoder>?, _ context: UnsafeMutableRawPointer?) -> FLAC__bool {
    FLACSource.from(context).bytes.reachedEnd ? 1 : 0
}

private func flacWrite(_: UnsafePointer<FLAC__StreamDecoder>?, _ frame: UnsafePointer<FLAC__Frame>?,
                       _ buffer: UnsafePointer<UnsafePointer<FLAC__int32>?>?, _ context: UnsafeMutableRawPointer?) -> FLAC__StreamDecoderWriteStatus {
    if let frame, let buffer { FLACSource.from(context).write(frame.pointee, buffer) }
    return FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE
}

private func flacMetadata(_: UnsafePointer<FLAC__StreamDecoder>?, _ block: UnsafePointer<FLAC__StreamMetadata>?,
                          _ context: UnsafeMutableRawPointer?) {
    if let block { FLACSource.from(context).metadata(block.pointee) }
}

private func flacError(_: UnsafePointer<FLAC__StreamDecoder>?, _ status: FLAC__StreamDecoderErrorStatus,
                       _ context: UnsafeMutableRawPointer?) {
    FLACSource.from(context).error(status)
}
