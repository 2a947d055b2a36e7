// Sendspin's artwork role: the channels a client asks for, the picture the server has, and the
// binary messages that carry it. The spec sends one message (type, timestamp, image); aiosendspin 10
// announces the size, then sends parts that each fit one Noise message, which the encrypted
// dialect needs (SendspinFrame.artwork).

/// One artwork channel as a client asks for it (hello's `artwork@v1_support` in the spec, client/state's
/// `artwork` in aiosendspin 10) and as stream/start describes what the server sends on it.
public struct SendspinArtworkChannel: Codable, Equatable, Sendable {
    /// 'album', 'artist' or 'none'.
    public var source: String
    /// 'jpeg', 'png' or 'bmp'.
    public var format: String?
    public var width: Int?
    public var height: Int?

    public static let sources: Set<String> = ["album", "artist", "none"]
    public static let formats: Set<String> = ["jpeg", "png", "bmp"]

    public init(source: String, format: String? = nil, width: Int? = nil, height: Int? = nil) {
        self.source = source
        self.format = format
        self.width = width
        self.height = height
    }

    enum CodingKeys: String, CodingKey {
        case source, format, width, height
        // The spec's names for the largest size a client takes; aiosendspin reads both.
        case mediaWidth = "media_width", mediaHeight = "media_height"
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        source = try container.decode(String.self, forKey: .source)
        format = try container.decodeIfPresent(String.self, forKey: .format)
        width = try container.decodeIfPresent(Int.self, forKey: .width) ?? container.decodeIfPresent(Int.self, forKey: .mediaWidth)
        height = try container.decodeIfPresent(Int.self, forKey: .height) ?? container.decodeIfPresent(Int.self, forKey: .mediaHeight)
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(source, forKey: .source)
        try container.encodeIfPresent(format, forKey: .format)
        try container.encodeIfPresent(width, forKey: .width)
        try container.encodeIfPresent(height, forKey: .height)
    }

    /// As the spec allows it: a known source; unless 'none', a known format and a size of 1…65535 pixels.
    var isValid: Bool {
        guard Self.sources.contains(source) else { return false }
        if source == "none" { return true }
        guard let format, Self.formats.contains(format), let width, let height else { return false }
        return (1...65535).contains(width) && (1...65535).contains(height)
    }

    /// A client's list of channels, checked: 1–4 channels, each valid; nil otherwise.
    public static func checked(_ channels: [SendspinArtworkChannel]) -> [SendspinArtworkChannel]? {
        (1...4).contains(channels.count) && channels.allSatisfy(\.isValid) ? channels : nil
    }
}

/// A cover the party has, as artwork: its format and size read from its own header. The party
/// sends the original (no image library is linked to scale or convert it), so a client gets it at
/// this size and in this format whatever it asked for, and stream/start says which.
public struct SendspinPicture: Equatable, Sendable {
    /// Larger covers are not sent: a speaker's display takes a few hundred pixels, and a player's
    /// memory is small (ID3 allows 4 MiB).
    public static let maxBytes = 1 << 20

    public let format: String
    public let width: Int
    public let height: Int
    public let bytes: [UInt8]

    /// nil unless `bytes` is a PNG, JPEG or BMP of a size it states, within `maxBytes`, and of 1…65535
    /// pixels each way, as stream/start may say (a PNG's or BMP's header has room for 2³²−1).
    public init?(_ bytes: [UInt8]) {
        let pixels = 1...65535
        guard bytes.count <= Self.maxBytes, let (format, width, height) = Self.header(bytes), pixels.contains(width), pixels.contains(height) else { return nil }
        (self.format, self.width, self.height, self.bytes) = (format, width, height, bytes)
    }

    /// What stream/start says of a channel that carries this picture.
    public func channel(source: String) -> SendspinArtworkChannel {
        SendspinArtworkChannel(source: source, format: format, width: width, height: height)
    }

    private static func header(_ b: [UInt8]) -> (String, Int, Int)? {
        func bigEndian(_ at: Int, _ count: Int) -> Int? {
            guard at >= 0, at + count <= b.count else { return nil }
            return b[at..<(at + count)].reduce(0) { $0 << 8 | Int($1) }
        }
        func littleEndian32(_ at: Int) -> Int32? {
            guard at >= 0, at + 4 <= b.count else { return nil }
            return Int32(bitPattern: b[at..<(at + 4)].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        }
        if b.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) {
            // The first chunk is IHDR: width and height, big-endian, at 16 and 20.
            guard b.count >= 24, b[12..<16].elementsEqual("IHDR".utf8), let width = bigEndian(16, 4), let height = bigEndian(20, 4) else { return nil }
            return ("png", width, height)
        }
        if b.starts(with: [0x42, 0x4D]) {
            // BITMAPINFOHEADER: width at 18, height at 22 (negative: stored top-down).
            guard let width = littleEndian32(18), let height = littleEndian32(22), height != .min else { return nil }
            return ("bmp", Int(width), Int(abs(height)))
        }
        if b.starts(with: [0xFF, 0xD8]) {
            // Segments after SOI until a start of frame (SOF0–SOF15 but DHT, JPG, DAC): height, then width.
            var at = 2
            while let marker = bigEndian(at, 2), marker >> 8 == 0xFF, let length = bigEndian(at + 2, 2), length >= 2 {
                let kind = marker & 0xFF
                if (0xC0...0xCF).contains(kind), ![0xC4, 0xC8, 0xCC].contains(kind) {
                    guard let height = bigEndian(at + 5, 2), let width = bigEndian(at + 7, 2) else { return nil }
                    return ("jpeg", width, height)
                }
                at += 2 + length
            }
        }
        return nil
    }
}

extension SendspinFrame {
    /// How artwork is carried: the spec's one message, or aiosendspin 10's announce and parts.
    public enum ArtworkFraming: Sendable {
        case spec
        case announced
    }

    /// aiosendspin 10's flags (byte 1) and the largest message: one Noise transport message.
    static let artworkAnnounceFlag: UInt8 = 0x02
    public static let maxArtworkMessageBytes = 65519

    /// The messages that show `image` on `channel` (0–3) at `timestamp` (server clock, µs); an empty
    /// image clears the channel.
    public static func artwork(channel: Int, timestamp: Int64, image: [UInt8], framing: ArtworkFraming) -> [[UInt8]] {
        let type = UInt8(8 + min(max(channel, 0), 3))
        var first = [type]
        switch framing {
        case .spec:
            withUnsafeBytes(of: timestamp.bigEndian) { first.append(contentsOf: $0) }
            return [first + image]
        case .announced:
            first.append(artworkAnnounceFlag)
            withUnsafeBytes(of: timestamp.bigEndian) { first.append(contentsOf: $0) }
            withUnsafeBytes(of: UInt32(clamping: image.count).bigEndian) { first.append(contentsOf: $0) }
            let partBytes = maxArtworkMessageBytes - 2
            return [first] + stride(from: 0, to: image.count, by: partBytes).map { start in
                [type, 0] + image[start..<min(start + partBytes, image.count)]
            }
        }
    }
}
