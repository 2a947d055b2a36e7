/// A decoded MPEG audio layer III frame header (the 4 bytes that start every frame).
public struct FrameHeader: Sendable, Equatable {
    public enum Version: Sendable, Equatable { case mpeg1, mpeg2, mpeg25 }

    public let version: Version
    public let isProtected: Bool
    public let bitrateKbps: Int
    public let sampleRate: Int
    public let hasPadding: Bool
    public let isMono: Bool

    static let bitratesV1: [Int] = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320]
    static let bitratesV2: [Int] = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160]
    static let ratesV1: [Int] = [44100, 48000, 32000]

    /// Parses four bytes; nil for anything that is not a layer III header we can decode
    /// (reserved fields, free format, other layers).
    public init?(_ b0: UInt8, _ b1: UInt8, _ b2: UInt8, _ b3: UInt8) {
        guard b0 == 0xFF, b1 & 0xE0 == 0xE0 else { return nil }
        switch (b1 >> 3) & 0x3 {
        case 0: version = .mpeg25
        case 2: version = .mpeg2
        case 3: version = .mpeg1
        default: return nil
        }
        guard (b1 >> 1) & 0x3 == 1 else { return nil }  // layer III only
        isProtected = b1 & 1 == 0
        let bitrateIndex = Int(b2 >> 4)
        let rateIndex = Int((b2 >> 2) & 0x3)
        guard bitrateIndex != 0, bitrateIndex != 15, rateIndex != 3 else { return nil }  // free format, reserved
        bitrateKbps = version == .mpeg1 ? Self.bitratesV1[bitrateIndex] : Self.bitratesV2[bitrateIndex]
        let base = Self.ratesV1[rateIndex]
        sampleRate = version == .mpeg1 ? base : version == .mpeg2 ? base / 2 : base / 4
        hasPadding = (b2 >> 1) & 1 == 1
        isMono = b3 >> 6 == 3
        guard b3 & 0x3 != 2 else { return nil }  // reserved emphasis
    }

    public init?<C: RandomAccessCollection>(bytes: C) where C.Element == UInt8, C.Index == Int {
        guard bytes.count >= 4 else { return nil }
        let i = bytes.startIndex
        self.init(bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3])
    }

    public var samplesPerFrame: Int { version == .mpeg1 ? 1152 : 576 }
    public var channels: Int { isMono ? 1 : 2 }

    /// Bytes in the whole frame, header included.
    public var frameLength: Int {
        (samplesPerFrame / 8) * bitrateKbps * 1000 / sampleRate + (hasPadding ? 1 : 0)
    }

    /// Bytes of side information after the header (and CRC).
    public var sideInfoLength: Int {
        switch (version, isMono) {
        case (.mpeg1, true): return 17
        case (.mpeg1, false): return 32
        case (_, true): return 9
        case (_, false): return 17
        }
    }

    /// Offset of the side information from the start of the frame.
    public var sideInfoOffset: Int { isProtected ? 6 : 4 }

    /// A frame of this header's stream (version, rate, channels) at the lowest bitrate and without
    /// CRC, its side information and main data all zero: every coefficient is zero, so it decodes
    /// to silence.
    public var silentFrame: [UInt8] {
        let versionBits: UInt8 = switch version { case .mpeg1: 0b11; case .mpeg2: 0b10; case .mpeg25: 0b00 }
        let divisor = switch version { case .mpeg1: 1; case .mpeg2: 2; case .mpeg25: 4 }
        let rateIndex = UInt8(Self.ratesV1.firstIndex(of: sampleRate * divisor) ?? 0)
        let header: [UInt8] = [0xFF, 0xE0 | versionBits << 3 | 0b011, 0x10 | rateIndex << 2, isMono ? 0xC0 : 0x00]
        let length = FrameHeader(bytes: header)?.frameLength ?? header.count
        return header + [UInt8](repeating: 0, count: length - header.count)
    }

    /// Frames of one stream share these; a "header" that differs is a false sync.
    public func isCompatible(with other: FrameHeader) -> Bool {
        version == other.version && sampleRate == other.sampleRate && isMono == other.isMono
    }
}
