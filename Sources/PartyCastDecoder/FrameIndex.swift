import PartyCastCore
import PartyCastMP3Parser

/// Where every audio frame of a local file starts, and its bit-reservoir figures: what exact seeking
/// and exact durations need. Built by one pass of the same parser playback uses.
struct FrameIndex {
    var offsets: [Int64] = []
    var mainDataBegin: [Int] = []
    var mainDataLength: [Int] = []
    var endOffset: Int64 = 0

    var count: Int { offsets.count }

    static func scan(_ bytes: ByteSource) throws(PartyCastError) -> FrameIndex {
        try bytes.seek(to: 0)
        var parser = MP3Parser()
        var index = FrameIndex()
        var finished = false
        while true {
            while let event = try parser.next() {
                if case .frame(let frame) = event {
                    index.offsets.append(frame.offset)
                    index.mainDataBegin.append(frame.mainDataBegin)
                    index.mainDataLength.append(frame.mainDataLength)
                    index.endOffset = frame.offset + Int64(frame.bytes.count)
                }
            }
            if finished { return index }
            let chunk = try bytes.read(maxBytes: 1 << 16)
            if chunk.isEmpty { parser.finish(); finished = true } else { parser.push(chunk) }
        }
    }

    /// The frame to start decoding from so that `target` decodes exactly as in a full decode.
    /// Frame `target`'s output depends on the two frames before it (IMDCT overlap and synthesis
    /// filter history), and each of those on earlier frames holding its main data (the reservoir).
    func prerollStart(for target: Int) -> Int {
        var start = max(0, target - 2)
        var needed = start < count ? mainDataBegin[start] : 0
        while start > 0 && needed > 0 {
            start -= 1
            needed -= mainDataLength[start]
        }
        // One more frame so the earliest frame that matters has its own reservoir filled too; then
        // back to a multiple of 8 frames, where libmpg123's synthesis filter (which rotates its
        // history through 16 slots of 32 samples) is in the same phase as in a decode from the
        // start, so the output is bit-identical rather than equal to within rounding.
        return max(0, start - 1) / 8 * 8
    }
}
