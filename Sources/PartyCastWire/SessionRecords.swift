import CSodium
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Who sent a sealed record: part of every nonce, so a record can never be reflected back to its sender.
public enum RecordDirection: UInt32, Sendable {
    case broadcasterToListener = 1
    case listenerToBroadcaster = 2
}

/// The record layer of a private party after its key handshake: every write becomes one or more
/// records, a 4-byte big-endian length and then that many bytes of ChaCha20-Poly1305 (ciphertext and
/// tag). The nonce is the direction and the record's count on the connection (4 + 8 bytes, big
/// endian), never sent: a replayed, reordered, dropped or injected record fails to open, and the
/// connection ends. The framed messages inside are unchanged, so the framing above never knows.
public enum SessionRecords {
    /// A whole frame at its largest, so the sender never splits one it could send whole.
    public static let maxPlaintextBytes = WireFraming.maxMessageBytes + 4
    static let tagBytes = 16

    static func nonce(_ direction: RecordDirection, _ counter: UInt64) -> [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(Int(crypto_aead_chacha20poly1305_ietf_NPUBBYTES))
        withUnsafeBytes(of: direction.rawValue.bigEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: counter.bigEndian) { bytes.append(contentsOf: $0) }
        return bytes
    }
}

public struct RecordSealer: Sendable {
    private let key: SecretKey
    private let direction: RecordDirection
    private var counter: UInt64 = 0

    init(key: SecretKey, direction: RecordDirection) {
        self.key = key
        self.direction = direction
    }

    /// The records that carry `plaintext`.
    public mutating func seal(_ plaintext: some Collection<UInt8>) -> [UInt8] {
        let bytes = Array(plaintext)
        var records: [UInt8] = []
        records.reserveCapacity(bytes.count + 20)
        var start = 0
        repeat {
            let end = min(bytes.count, start + SessionRecords.maxPlaintextBytes)
            let length = UInt32(end - start + SessionRecords.tagBytes)
            let prefix = withUnsafeBytes(of: length.bigEndian) { Array($0) }
            // The length prefix is authenticated too (the additional data).
            var ciphertext = [UInt8](repeating: 0, count: end - start)
            var tag = [UInt8](repeating: 0, count: SessionRecords.tagBytes)
            let message = Array(bytes[start..<end])
            // Fails only past 256 GiB in one record; a record is at most a frame.
            let status = crypto_aead_chacha20poly1305_ietf_encrypt_detached(
                &ciphertext, &tag, nil, message, UInt64(message.count), prefix, UInt64(prefix.count), nil,
                SessionRecords.nonce(direction, counter), key.bytes)
            precondition(status == 0)
            counter += 1
            records += prefix
            records += ciphertext
            records += tag
            start = end
        } while start < bytes.count
        return records
    }
}

/// Opens a peer's records however the bytes arrive; like `WireFrameDecoder`, it holds at most one
/// record and fails for good at the first bad one.
public struct RecordOpener: Sendable {
    private let key: SecretKey
    private let direction: RecordDirection
    private var counter: UInt64 = 0
    private var buffer: [UInt8] = []
    private var head = 0
    private var failure: WireError?

    init(key: SecretKey, direction: RecordDirection) {
        self.key = key
        self.direction = direction
    }

    public mutating func push(_ bytes: some Collection<UInt8>) {
        if failure != nil { return }
        if head > 0 && head * 2 >= buffer.count {
            buffer.removeFirst(head)
            head = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next record's plaintext, or nil until more bytes arrive.
    public mutating func next() throws(WireError) -> [UInt8]? {
        if let failure { throw failure }
        guard buffer.count - head >= 4 else { return nil }
        let length = buffer[head..<head + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard length >= SessionRecords.tagBytes, length <= SessionRecords.maxPlaintextBytes + SessionRecords.tagBytes else {
            throw fail(.unsealable("a sealed record claims \(length) bytes"))
        }
        guard buffer.count - head - 4 >= Int(length) else { return nil }
        let prefix = Array(buffer[head..<head + 4])
        let body = head + 4
        let tagStart = body + Int(length) - SessionRecords.tagBytes
        let ciphertext = Array(buffer[body..<tagStart])
        let tag = Array(buffer[tagStart..<tagStart + SessionRecords.tagBytes])
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count)
        guard crypto_aead_chacha20poly1305_ietf_decrypt_detached(
            &plaintext, nil, ciphertext, UInt64(ciphertext.count), tag, prefix, UInt64(prefix.count),
            SessionRecords.nonce(direction, counter), key.bytes) == 0 else {
            throw fail(.unsealable("sealed record \(counter) failed authentication (replayed, reordered, injected or under another key)"))
        }
        counter += 1
        head = tagStart + SessionRecords.tagBytes
        return plaintext
    }

    private mutating func fail(_ error: WireError) -> WireError {
        failure = error
        buffer = []
        head = 0
        return error
    }
}
