#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Signs and checks clock datagrams (see `ClockDatagram.mac` in Proto/partycast.proto) with a key
/// from the connection's handshake (`KeySession.clockKey`). Datagrams carry no secret (clock
/// readings), so authenticating them is enough; replays are caught by `ReplayWindow` on `sequence`.
public struct ClockDatagramKey: Sendable {
    public static let tagBytes = 16
    private let key: SecretKey

    init(_ key: SecretKey) { self.key = key }

    public func sign(_ datagram: inout PCClockDatagram) {
        datagram.mac = Data(tag(datagram).prefix(Self.tagBytes))
    }

    public func verify(_ datagram: PCClockDatagram) -> Bool {
        guard datagram.mac.count == Self.tagBytes else { return false }
        return constantTimeEqual(tag(datagram).prefix(Self.tagBytes), datagram.mac)
    }

    private func tag(_ datagram: PCClockDatagram) -> [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(41)
        for field in [datagram.token, datagram.sequence, UInt64(bitPattern: datagram.t1),
                      UInt64(bitPattern: datagram.t2), UInt64(bitPattern: datagram.t3)] {
            withUnsafeBytes(of: field.bigEndian) { bytes.append(contentsOf: $0) }
        }
        bytes.append(datagram.answer ? 1 : 0)
        return key.hmacSHA256(bytes)
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
