import PartyCastCore

/// Online guesses at a private party's key, per address. Each KeyChallenge the broadcaster sends
/// answers one guess (CPace gives nothing to test offline), so the throttle counts answers, not
/// failures seen later: an answered handshake counts as failed until its KeyProof verifies, and many
/// connections opened at once get no more answers than one after the other. After `freeGuesses`
/// unconfirmed answers an address gets one a second.
public final class KeyGuessThrottle: Sendable {
    public static let freeGuesses = 3
    static let interval: UInt64 = 1_000_000_000
    /// Addresses remembered; beyond it the oldest is forgotten (an attacker that owns more
    /// addresses than this gets `freeGuesses` each, still only online).
    static let maxAddresses = 4096

    struct Record {
        /// Answered handshakes not confirmed since the last one that was.
        var unconfirmed = 0
        /// Handshakes refused for coming too soon.
        var refused = 0
        var nextAnswerAt: UInt64 = 0
        var lastSeen: UInt64 = 0
    }

    private let records = LockedValueBox<[String: Record]>([:])

    public init() {}

    /// Whether a handshake from `address` may be answered now; if so it counts as one guess.
    /// Otherwise returns false and how many were refused so far (to log one line now and then).
    public func answer(_ address: String, now: UInt64 = monotonicNanoseconds()) -> (allowed: Bool, refused: Int) {
        records.withLockedValue { records in
            var record = records[address] ?? Record()
            record.lastSeen = now
            defer {
                if records[address] == nil && records.count >= Self.maxAddresses,
                   let oldest = records.min(by: { $0.value.lastSeen < $1.value.lastSeen })?.key {
                    records.removeValue(forKey: oldest)
                }
                records[address] = record
            }
            guard record.unconfirmed < Self.freeGuesses || now >= record.nextAnswerAt else {
                record.refused += 1
                return (false, record.refused)
            }
            record.unconfirmed += 1
            record.nextAnswerAt = now + Self.interval
            return (true, record.refused)
        }
    }

    /// A handshake from `address` proved the key: its earlier guesses are forgiven.
    public func confirmed(_ address: String) {
        _ = records.withLockedValue { $0.removeValue(forKey: address) }
    }

    /// Unconfirmed guesses from `address` so far.
    public func failures(_ address: String) -> Int {
        records.withLockedValue { $0[address]?.unconfirmed ?? 0 }
    }

    /// Log a count only at 1, 2, 4, 8…: a flood of guesses writes a few lines, not one each.
    public static func worthLogging(_ count: Int) -> Bool {
        count > 0 && count & (count - 1) == 0
    }
}
