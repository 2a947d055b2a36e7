import SwiftProtobuf

/// Why a byte stream is not a valid sequence of PartyCast messages.
public enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A length prefix beyond `WireFraming.maxMessageBytes`, refused before any allocation.
    case messageTooLarge(claimed: UInt32)
    case zeroLength
    case malformed(String)

    public var description: String {
        switch self {
        case .messageTooLarge(let claimed): "a message claims \(claimed) bytes (the limit is \(WireFraming.maxMessageBytes))"
        case .zeroLength: "a message of length 0"
        case .malformed(let why): "a malformed message (\(why))"
        }
    }
}

/// Framing: a 4-byte big-endian length, then that many bytes of a serialized `PCEnvelope`.
public enum WireFraming {
    /// Far above any real message (a 20 ms chunk of 8-channel float PCM at 384 kHz is 246 KB).
    public static let maxMessageBytes = 1 << 20

    public static func encode(_ envelope: PCEnvelope) throws -> [UInt8] {
        let body: [UInt8] = try envelope.serializedBytes()
        precondition(body.count <= maxMessageBytes, "message of \(body.count) bytes exceeds the wire limit")
        let n = UInt32(body.count)
        return [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + body
    }
}

/// Splits a byte stream into envelopes however the bytes arrive: the same messages for any split.
/// It holds at most one message's bytes plus whatever was pushed beyond it.
public struct WireFrameDecoder: Sendable {
    enum State: Sendable {
        case readingLength
        case readingBody(length: Int)
        /// A bad message ends the stream: nothing after it can be trusted to be in step.
        case failed(WireError)
    }

    private var state = State.readingLength
    private var buffer: [UInt8] = []
    private var head = 0

    public init() {}

    public mutating func push<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        if case .failed = state { return }
        if head > 0 && head * 2 >= buffer.count {
            buffer.removeFirst(head)
            head = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete message, or nil until more bytes arrive.
    public mutating func next() throws(WireError) -> PCEnvelope? {
        while true {
            switch state {
            case .failed(let error):
                throw error
            case .readingLength:
                guard buffer.count - head >= 4 else { return nil }
                let n = UInt32(buffer[head]) << 24 | UInt32(buffer[head + 1]) << 16 | UInt32(buffer[head + 2]) << 8 | UInt32(buffer[head + 3])
                head += 4
                if n == 0 { return try fail(.zeroLength) }
                if n > WireFraming.maxMessageBytes { return try fail(.messageTooLarge(claimed: n)) }
                state = .readingBody(length: Int(n))
            case .readingBody(let length):
                guard buffer.count - head >= length else { return nil }
                let body = buffer[head..<head + length]
                head += length
                state = .readingLength
                do {
                    return try PCEnvelope(serializedBytes: Array(body))
                } catch {
                    return try fail(.malformed("\(error)"))
                }
            }
        }
    }

    private mutating func fail(_ error: WireError) throws(WireError) -> PCEnvelope? {
        state = .failed(error)
        buffer = []
        head = 0
        throw error
    }
}
