import CMPG123
import PartyCastCore

/// libmpg123 in feed mode, one whole frame at a time, Float32 out, no gapless trimming of its own
/// (the caller trims with what the parser read from the LAME tag). Every C call sits behind one
/// small method so failures come back as `PartyCastError`.
final class MPG123 {
    private let handle: OpaquePointer

    init() throws(PartyCastError) {
        var error: Int32 = 0
        guard let handle = mpg123_new(nil, &error) else {
            throw PartyCastError(.decoder, "libmpg123 could not start: \(Self.message(error))")
        }
        self.handle = handle
        try check(mpg123_param2(handle, Int32(MPG123_FLAGS.rawValue), Int(MPG123_FORCE_FLOAT.rawValue | MPG123_QUIET.rawValue | MPG123_NO_READAHEAD.rawValue), 0))
        try check(mpg123_format_none(handle))
        var rates: UnsafePointer<Int>? = nil
        var count = 0
        mpg123_rates(&rates, &count)
        for i in 0..<count {
            try check(mpg123_format(handle, rates![i], Int32(MPG123_MONO.rawValue | MPG123_STEREO.rawValue), Int32(MPG123_ENC_FLOAT_32.rawValue)))
        }
        try reset()
    }

    deinit { mpg123_delete(handle) }

    /// Forgets all decoder state (bit reservoir, filter history): the next frame starts afresh.
    func reset() throws(PartyCastError) {
        try check(mpg123_open_feed(handle))
    }

    /// Decodes one frame, appending its samples (interleaved) to `output`; returns how many frames
    /// of samples came out (normally the frame's samples per frame, 0 when it was undecodable).
    func decode(frame: [UInt8], into output: inout [Float]) throws(PartyCastError) -> Int {
        let fed = frame.withUnsafeBufferPointer { mpg123_feed(handle, $0.baseAddress, $0.count) }
        try check(fed)
        var produced = 0
        while true {
            var number: off_t = 0
            var audio: UnsafeMutablePointer<UInt8>? = nil
            var bytes = 0
            let result = partycast_mpg123_decode_frame(handle, &number, &audio, &bytes)
            if result == MPG123_NEED_MORE.rawValue { return produced }
            if result == MPG123_NEW_FORMAT.rawValue { continue }
            try check(result)
            guard let audio, bytes > 0 else { continue }
            let samples = bytes / MemoryLayout<Float>.size
            audio.withMemoryRebound(to: Float.self, capacity: samples) {
                output.append(contentsOf: UnsafeBufferPointer(start: $0, count: samples))
            }
            produced += samples / channels
        }
    }

    /// The output channel count of the current stream.
    var channels: Int {
        var rate = 0
        var channels: Int32 = 0
        var encoding: Int32 = 0
        mpg123_getformat(handle, &rate, &channels, &encoding)
        return max(Int(channels), 1)
    }

    private func check(_ result: Int32) throws(PartyCastError) {
        guard result != MPG123_OK.rawValue else { return }
        throw PartyCastError(.decoder, "libmpg123: \(String(cString: mpg123_strerror(handle)))")
    }

    private static func message(_ code: Int32) -> String {
        String(cString: mpg123_plain_strerror(code))
    }
}
