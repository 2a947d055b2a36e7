/// Splits an ICY stream (SHOUTcast/Icecast with `Icy-MetaData: 1`) into audio and metadata: after
/// every `interval` bytes of audio comes one length byte (× 16) and that many bytes of metadata.
/// Counted on the de-chunked body. A block is at most 255 × 16 bytes whatever it holds, so garbage
/// costs at most that much audio and the stream goes on.
public struct ICYDemuxer: Sendable {
    public let interval: Int
    private enum State: Sendable { case audio(left: Int), length, metadata(left: Int) }
    private var state: State
    private var block: [UInt8] = []

    public init(interval: Int) {
        self.interval = interval
        state = .audio(left: interval)
    }

    /// Appends the audio in `input` to `audio`; returns the metadata blocks completed in it.
    public mutating func split(_ input: [UInt8], audio: inout [UInt8]) -> [[UInt8]] {
        var blocks: [[UInt8]] = []
        var i = 0
        while i < input.count {
            switch state {
            case .audio(let left):
                let n = min(left, input.count - i)
                audio.append(contentsOf: input[i..<(i + n)])
                i += n
                state = left == n ? .length : .audio(left: left - n)
            case .length:
                let size = Int(input[i]) * 16
                i += 1
                state = size == 0 ? .audio(left: interval) : .metadata(left: size)
            case .metadata(let left):
                let n = min(left, input.count - i)
                block.append(contentsOf: input[i..<(i + n)])
                i += n
                if left == n {
                    blocks.append(block)
                    block = []
                    state = .audio(left: interval)
                } else {
                    state = .metadata(left: left - n)
                }
            }
        }
        return blocks
    }
}

public enum ICYMetadata {
    /// The `StreamTitle` of a metadata block (`StreamTitle='…';StreamUrl='…';`, NUL-padded): nil
    /// when the block has none (garbage included), "" when the station clears it. Titles may hold
    /// quotes, so the value runs to the `';` that ends the block or starts the next `Key='`.
    public static func streamTitle(_ block: [UInt8]) -> String? {
        let key = Array("StreamTitle='".utf8)
        guard let keyStart = find(key, in: block, from: 0) else { return nil }
        let start = keyStart + key.count
        var end: Int?
        var i = start
        while let hit = find([0x27, 0x3B], in: block, from: i) {  // "';"
            end = hit
            if startsField(block, at: hit + 2) { break }
            i = hit + 1
        }
        guard let end else { return nil }
        return text(block[start..<end])
    }

    /// Whether `bytes[at...]` is the end of the block (NULs) or a next `Key='`.
    private static func startsField(_ bytes: [UInt8], at index: Int) -> Bool {
        var i = index
        while i < bytes.count, bytes[i] == 0 || bytes[i] == 0x20 { i += 1 }
        if i == bytes.count { return true }
        let nameStart = i
        while i < bytes.count, (0x41...0x5A).contains(bytes[i] & 0xDF) { i += 1 }
        return i > nameStart && i + 1 < bytes.count && bytes[i] == 0x3D && bytes[i + 1] == 0x27  // "='"
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from: Int) -> Int? {
        guard haystack.count >= needle.count, from <= haystack.count - needle.count else { return nil }
        return (from...(haystack.count - needle.count)).first { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    /// Stations send UTF-8 or Latin-1 without saying which: UTF-8 when the bytes are valid as such.
    public static func text<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
        if let utf8 = String(validating: bytes, as: UTF8.self) { return utf8 }
        return String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
    }
}
