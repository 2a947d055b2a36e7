import PartyCastCore
import PartyCastMP3Parser

/// Where every audio frame of a file starts, and its bit-reservoir figures: what exact seeking
/// and exact durations need. Built by one pass of the same parser playback uses.
struct FrameIndex {
    var offsets: [Int64] = []
    var mainDataBegin: [Int] = []
    var mainDataLength: [Int] = []
    var endOffset: Int64 = 0

    var count: Int { offsets.count }

    /// Whether it runs to the end of the stream: a remote file's index grows only as far as its
    /// seeks have needed.
    var isComplete = false

    static func scan(_ bytes: ByteSource) throws(PartyCastError) -> FrameIndex {
        var index = FrameIndex()
        try index.extend(bytes, toCount: .max)
        return index
    }

    /// Parses on from the end of the last indexed frame until `frames` frames are indexed or the
    /// stream ends.
    mutating func extend(_ bytes: ByteSource, toCount frames: Int) throws(PartyCastError) {
        guard !isComplete, count < frames else { return }
        try bytes.seek(to: endOffset)
        var parser = MP3Parser(startOffset: endOffset)
        var finished = false
        while true {
            while let event = try parser.next() {
                if case .frame(let frame) = event {
                    offsets.append(frame.offset)
                    mainDataBegin.append(frame.mainDataBegin)
                    mainDataLength.append(frame.mainDataLength)
                    endOffset = frame.offset + Int64(frame.bytes.count)
                    if count >= frames { return }
                }
            }
            if finished {
                isComplete = true
                return
            }
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
