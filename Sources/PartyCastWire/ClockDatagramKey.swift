import CSodium
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Seals and opens a private party's clock datagrams (see `ClockDatagram.sealed` in
/// Proto/partycast.proto) with a key from the connection's handshake (`KeySession.clockKey`): the
/// times travel encrypted and authenticated, bound to the connection's token, their sequence and
/// their direction. Replays are caught by `ReplayWindow` on `sequence`, and by the listener's
/// requests in flight.
public struct ClockDatagramKey: Sendable {
    static let sealedBytes = 3 * 8 + SessionRecords.tagBytes
    private let key: SecretKey

    init(_ key: SecretKey) { self.key = key }

    /// Moves t1, t2 and t3 into `sealed` for `direction` (a request goes from the listener).
    public func seal(_ datagram: inout PCClockDatagram, _ direction: RecordDirection) {
        var times = [UInt8]()
        times.reserveCapacity(24)
        for time in [datagram.t1, datagram.t2, datagram.t3] { withUnsafeBytes(of: time.bigEndian) { times.append(contentsOf: $0) } }
        var sealed = [UInt8](repeating: 0, count: Self.sealedBytes)
        let additional = Self.additionalData(datagram)
        // Fails only past 256 GiB in one message.
        let status = crypto_aead_chacha20poly1305_ietf_encrypt(&sealed, nil, times, UInt64(times.count), additional, UInt64(additional.count),
                                                               nil, SessionRecords.nonce(direction, datagram.sequence), key.bytes)
        precondition(status == 0)
        (datagram.t1, datagram.t2, datagram.t3, datagram.answer) = (0, 0, 0, false)
        datagram.sealed = Data(sealed)
    }

    /// The datagram with its times opened, or nil unless it was sealed with this key for
    /// `direction`, under its own token and sequence, and nothing of it changed since.
    public func open(_ datagram: PCClockDatagram, _ direction: RecordDirection) -> PCClockDatagram? {
        guard datagram.sealed.count == Self.sealedBytes, datagram.t1 == 0, datagram.t2 == 0, datagram.t3 == 0, !datagram.answer else { return nil }
        var times = [UInt8](repeating: 0, count: 24)
        let sealed = [UInt8](datagram.sealed)
        let additional = Self.additionalData(datagram)
        guard crypto_aead_chacha20poly1305_ietf_decrypt(&times, nil, nil, sealed, UInt64(sealed.count), additional, UInt64(additional.count),
                                                        SessionRecords.nonce(direction, datagram.sequence), key.bytes) == 0 else { return nil }
        var opened = datagram
        opened.sealed = Data()
        func time(_ index: Int) -> Int64 { times[(index * 8)..<(index * 8 + 8)].reduce(0) { $0 << 8 | Int64($1) } }
        (opened.t1, opened.t2, opened.t3) = (time(0), time(1), time(2))
        opened.answer = direction == .broadcasterToListener
        return opened
    }

    private static func additionalData(_ datagram: PCClockDatagram) -> [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(16)
        for field in [datagram.token, datagram.sequence] { withUnsafeBytes(of: field.bigEndian) { bytes.append(contentsOf: $0) } }
        return bytes
    }
}

/// Which sequence numbers were seen, over the last 64 below the highest: datagrams may be lost or
/// reordered, so a late one is still taken once, but a repeat, or one from before the window, never.
public struct ReplayWindow: Sendable {
    private var highest: UInt64 = 0
    /// Bit i set: `highest - i` was seen (bit 0 is `highest` itself, once anything was).
    private var seen: UInt64 = 0

    public init() {}

    /// Records `sequence`; false when it was seen already or is too old to tell.
    public mutating func accept(_ sequence: UInt64) -> Bool {
        if seen == 0 || sequence > highest {
            let shift = seen == 0 ? 64 : sequence - highest
            seen = shift >= 64 ? 1 : seen << shift | 1
            highest = sequence
            return true
        }
        let age = highest - sequence
        guard age < 64, seen & (1 << age) == 0 else { return false }
        seen |= 1 << age
        return true
    }
}
