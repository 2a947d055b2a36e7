/// Sendspin's binary messages: a type byte, a big-endian Int64 timestamp (server clock, µs), and for
/// audio chunks on an encrypted aiosendspin 10 connection a big-endian UInt32 `send_ahead` (µs the
/// chunk was sent ahead of its time), then the payload. The spec's audio header has no `send_ahead`;
/// aiosendspin sends those 9 bytes to unencrypted clients and 13 to encrypted ones.
public struct SendspinFrame: Equatable, Sendable {
    public enum AudioHeader: Sendable {
        /// The spec's: type + timestamp.
        case spec
        /// aiosendspin 10's: type + timestamp + send_ahead.
        case withSendAhead

        public var size: Int { self == .spec ? 9 : 13 }
    }

    public enum Kind: Equatable, Sendable {
        case audio
        /// Artwork channel 0–3 (types 8–11).
        case artwork(channel: Int)
        /// Types 16–23.
        case visualizer
        /// Reserved or application-specific (types 0–3, 12–15, 24–255).
        case other
    }

    public static let audioType: UInt8 = 4

    public let type: UInt8
    public let timestamp: Int64
    public let payload: ArraySlice<UInt8>

    public var kind: Kind {
        switch type {
        case 4...7: type == Self.audioType ? .audio : .other
        case 8...11: .artwork(channel: Int(type) - 8)
        case 16...23: .visualizer
        default: .other
        }
    }

    /// Parses one binary message; nil when it is shorter than its header.
    public init?(_ bytes: ArraySlice<UInt8>, audioHeader: AudioHeader) {
        guard let type = bytes.first else { return nil }
        let headerSize = type == Self.audioType ? audioHeader.size : 9
        guard bytes.count >= headerSize else { return nil }
        let start = bytes.startIndex
        self.type = type
        self.timestamp = Int64(bitPattern: bytes[(start + 1)..<(start + 9)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        self.payload = bytes[(start + headerSize)...]
    }

    /// An audio chunk's bytes: header then `payload`. `sendAhead` (µs, saturated) goes in only with
    /// `.withSendAhead`.
    public static func audio(timestamp: Int64, sendAhead: Int64, payload: some Collection<UInt8>, header: AudioHeader) -> [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(header.size + payload.count)
        bytes.append(audioType)
        withUnsafeBytes(of: timestamp.bigEndian) { bytes.append(contentsOf: $0) }
        if header == .withSendAhead {
            let clamped = UInt32(clamping: max(0, sendAhead))
            withUnsafeBytes(of: clamped.bigEndian) { bytes.append(contentsOf: $0) }
        }
        bytes.append(contentsOf: payload)
        return bytes
    }
}
