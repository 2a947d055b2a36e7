import SwiftProtobuf

/// Why a byte stream is not a valid sequence of PartyCast messages. Each one ends the stream: after
/// a bad frame nothing that follows can be trusted to start on a message boundary.
public enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A length beyond `WireFraming.maxMessageBytes`, refused from the prefix alone, before any
    /// allocation, so a hostile or confused peer cannot make us reserve up to 4 GiB.
    case messageTooLarge(claimed: UInt32)
    /// A length within the protocol's limit but over what the connection allows at this stage
    /// (`WireFrameDecoder.maxMessageBytes`: a peer that has not joined sends only small messages).
    case overBudget(claimed: UInt32, limit: Int)
    /// A length of 0: only an envelope with no body serializes to nothing, and that says nothing.
    case zeroLength
    /// A body that is not a serialized `PCEnvelope` (or one that cannot be serialized).
    case malformed(String)
    /// At a private party, a record that does not open under the connection's key (`SessionRecords`).
    case unsealable(String)

    public var description: String {
        switch self {
        case .messageTooLarge(let claimed): "a message claims \(claimed) bytes (the limit is \(WireFraming.maxMessageBytes))"
        case .overBudget(let claimed, let limit): "a message claims \(claimed) bytes (the limit at this stage is \(limit))"
        case .zeroLength: "a message of length 0"
        case .malformed(let why): "a malformed message (\(why))"
        case .unsealable(let why): why
        }
    }
}

/// Framing: a 4-byte big-endian unsigned length, then that many bytes of a serialized `PCEnvelope`.
/// Protobuf messages do not delimit themselves, so TCP needs the prefix to find the boundaries.
public enum WireFraming {
    /// Far above any real message (a 20 ms chunk of 8-channel float PCM at 384 kHz is 246 KB), low
    /// enough that one frame per connection costs little memory on a small broadcaster.
    public static let maxMessageBytes = 1 << 20

    /// The frame for `envelope`: prefix and body. Throws rather than send what a peer would refuse.
    public static func encode(_ envelope: PCEnvelope) throws(WireError) -> [UInt8] {
        let body: [UInt8]
        do {
            body = try envelope.serializedBytes()
        } catch {
            throw .malformed("\(error)")
        }
        if body.isEmpty { throw .zeroLength }
        if body.count > maxMessageBytes { throw .messageTooLarge(claimed: UInt32(clamping: body.count)) }
        var frame: [UInt8] = []
        frame.reserveCapacity(4 + body.count)
        withUnsafeBytes(of: UInt32(body.count).bigEndian) { frame.append(contentsOf: $0) }
        frame.append(contentsOf: body)
        return frame
    }
}

/// Splits a byte stream into envelopes however the bytes arrive: the same messages, and the same
/// error, for any split. It never allocates on a peer's say-so: it holds only bytes it was given
/// and has not yet returned, so one message never costs more than `maxMessageBytes + 4`.
///
/// An envelope whose body is a kind this build does not know comes out with `body == nil`; skip it.
/// Fields this build does not know are dropped while decoding, so a message holds only what is read.
public struct WireFrameDecoder: Sendable {
    enum State: Sendable {
        /// Waiting for the 4 prefix bytes at `head`.
        case readingLength
        /// The prefix was valid; waiting for `length` body bytes at `head`.
        case readingBody(length: Int)
        /// Terminal: every later `next()` rethrows the error and pushed bytes are dropped.
        case failed(WireError)
    }

    private var state = State.readingLength
    /// Pushed bytes; those before `head` have been consumed and are dropped lazily, in `push`.
    private var buffer: [UInt8] = []
    private var head = 0
    /// At a private party, once its handshake is through: the pushed bytes are sealed records, and
    /// `buffer` holds what they opened to.
    private var opener: RecordOpener?
    /// The framed size (prefix included) of the message `next()` returned last: at least what holding it costs.
    public private(set) var lastMessageBytes = 0
    /// The largest message accepted now: a server lowers it for peers that have not yet earned more,
    /// so a stranger cannot make it hold a megabyte per connection. Never above the protocol's limit.
    public var maxMessageBytes = WireFraming.maxMessageBytes {
        didSet { maxMessageBytes = max(1, min(maxMessageBytes, WireFraming.maxMessageBytes)) }
    }
    private static let options = { var o = BinaryDecodingOptions(); o.discardUnknownFields = true; return o }()

    public init() {}

    public mutating func push(_ bytes: some Collection<UInt8>) {
        if case .failed = state { return }
        if opener != nil { return opener!.push(bytes) }
        append(bytes)
    }

    /// From now on every pushed byte is a sealed record; those pushed already and not yet returned
    /// as messages are too (they came after the handshake's last plaintext message).
    public mutating func openRecords(with opener: RecordOpener) {
        var opener = opener
        opener.push(buffer[head...])
        buffer = []
        head = 0
        self.opener = opener
    }

    private mutating func append(_ bytes: some Collection<UInt8>) {
        // Compacting only once the consumed part is at least half keeps the copying amortized O(1).
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
                guard buffer.count - head >= 4 else {
                    if try openRecord() { continue }
                    return nil
                }
                let length = buffer[head..<head + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                head += 4
                if length == 0 { throw fail(.zeroLength) }
                if length > WireFraming.maxMessageBytes { throw fail(.messageTooLarge(claimed: length)) }
                if length > maxMessageBytes { throw fail(.overBudget(claimed: length, limit: maxMessageBytes)) }
                state = .readingBody(length: Int(length))
            case .readingBody(let length):
                guard buffer.count - head >= length else {
                    if try openRecord() { continue }
                    return nil
                }
                let body = Array(buffer[head..<head + length])
                head += length
                state = .readingLength
                lastMessageBytes = 4 + length
                do {
                    return try PCEnvelope(serializedBytes: body, options: Self.options)
                } catch {
                    throw fail(.malformed("\(error)"))
                }
            }
        }
    }

    /// Moves the next opened record's plaintext into `buffer`; false when no whole record is there.
    private mutating func openRecord() throws(WireError) -> Bool {
        guard opener != nil else { return false }
        do {
            guard let plaintext = try opener!.next() else { return false }
            append(plaintext)
            return true
        } catch {
            throw fail(error)
        }
    }

    /// Enters the terminal state and frees the buffer; returns the error for the caller to throw.
    private mutating func fail(_ error: WireError) -> WireError {
        state = .failed(error)
        opener = nil
        buffer = []
        head = 0
        return error
    }
}

extension WireError {
    /// A frame refused for its size at this stage of the connection, not for its content.
    public var isOverBudget: Bool { if case .overBudget = self { true } else { false } }
}
