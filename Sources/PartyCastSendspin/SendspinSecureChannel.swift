/// An encrypted Sendspin connection after its handshake (aiosendspin 10's noise/wire.py): every
/// WebSocket message is binary, one Noise transport message. Its plaintext's first byte says what it
/// is: 0 a JSON message (the rest), 1 a fragment of a larger message, 2–3 reserved, else a binary
/// message as the spec has them (type byte included).
public struct SendspinSecureChannel: Sendable {
    public enum Message: Equatable, Sendable {
        case text([UInt8])
        case binary([UInt8])
    }

    /// Noise's 65535-byte limit less the tag.
    public static let maxPlaintext = 65535 - 16
    private var transport: NoiseTransport

    init(transport: NoiseTransport) { self.transport = transport }

    public mutating func seal(text json: [UInt8]) throws(NoiseError) -> [UInt8] {
        try seal([0] + json)
    }

    /// A binary message (type byte first); the transport's own types 1–3 are refused.
    public mutating func seal(binary bytes: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let type = bytes.first, !(1...3).contains(type) else { throw NoiseError("binary type \(bytes.first.map(String.init) ?? "none") is the transport's") }
        return try seal(bytes)
    }

    private mutating func seal(_ plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        // Our messages are small (a chunk is 20 ms): larger ones would need fragments we never send.
        guard plaintext.count <= Self.maxPlaintext else { throw NoiseError("a message of \(plaintext.count) bytes needs fragments") }
        return try transport.seal(plaintext)
    }

    /// One WebSocket binary message from the peer. Fragments are refused: the messages either side
    /// are small, and reassembly would be memory a peer makes us hold.
    public mutating func open(_ frame: some Collection<UInt8>) throws(NoiseError) -> Message {
        guard frame.count <= 65535 else { throw NoiseError("a transport frame of \(frame.count) bytes") }
        let plaintext = try transport.open(frame)
        guard let type = plaintext.first else { throw NoiseError("an empty message") }
        switch type {
        case 0: return .text(Array(plaintext.dropFirst()))
        case 1...3: throw NoiseError("a fragmented message")
        default: return .binary(plaintext)
        }
    }
}
