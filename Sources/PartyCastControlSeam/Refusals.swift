import Logging
import PartyCastCore

/// What the broadcaster refused its peers, by kind: counted (shown in `status`) and logged at most
/// once a second per kind, with how many went unlogged since, so a flood of hostile connections
/// costs a few lines of log rather than one per connection.
public final class Refusals: Sendable {
    public enum Kind: String, CaseIterable, Sendable {
        /// Stream port.
        case badData = "bad data"
        case silentPeer = "no Hello in time"
        case oversizedFrame = "frame over budget"
        case slowReader = "peer not reading"
        case clockFlood = "TCP clock requests over rate"
        case connectionsPerAddress = "connections over the per-address cap"
        case connectionsTotal = "connections over the total cap"
        case acceptFailed = "accept failed"
        case refusedPeer = "peer refused"
        case noKey = "no party key"
        case protocolMismatch = "another protocol version"
        /// Control port.
        case foreignHost = "control: foreign Host"
        case foreignOrigin = "control: foreign Origin"
        case controlConnections = "control: connections over cap"
        case controlHeaderTimeout = "control: no request in time"
        case controlCommands = "control: commands over rate"
        case controlKey = "control: wrong key"
    }

    struct Tally {
        var count = 0
        /// Refusals of this kind since the last line written.
        var unlogged = 0
        var loggedAt: UInt64?
    }

    static let logInterval: UInt64 = 1_000_000_000
    private let tallies = LockedValueBox<[Kind: Tally]>([:])
    private let logger: Logger

    public init(logger: Logger) { self.logger = logger }

    /// Counts one refusal and logs `line` unless a line of this kind was written less than a second ago.
    public func refuse(_ kind: Kind, _ line: @autoclosure () -> String, now: UInt64 = monotonicNanoseconds()) {
        let unlogged: Int? = tallies.withLockedValue { tallies in
            var tally = tallies[kind] ?? Tally()
            defer { tallies[kind] = tally }
            tally.count &+= 1
            if let last = tally.loggedAt, now &- last < Self.logInterval {
                tally.unlogged &+= 1
                return nil
            }
            defer { tally.unlogged = 0 }
            tally.loggedAt = now
            return tally.unlogged
        }
        guard let unlogged else { return }
        let more = unlogged > 0 ? " (and \(unlogged) more \(kind.rawValue) refusal(s) not logged since the last line)" : ""
        logger.warning("\(line())\(more)")
    }

    /// Refusals so far by kind (only kinds that happened), for `status`.
    public var counts: [String: Int] {
        tallies.withLockedValue { Dictionary(uniqueKeysWithValues: $0.map { ($0.key.rawValue, $0.value.count) }) }
    }
}

/// Info lines a crowd of peers could multiply (joined, left): a burst, then a few a second, and the
/// next line written says how many were left out. A party's real comings and goings all show.
public final class ThrottledLog: Sendable {
    struct State {
        var bucket: TokenBucket
        var skipped = 0
    }

    private let state: LockedValueBox<State>
    private let logger: Logger

    public init(logger: Logger, burst: Double = 50, perSecond: Double = 5) {
        self.logger = logger
        state = LockedValueBox(State(bucket: TokenBucket(burst: burst, perSecond: perSecond)))
    }

    public func info(_ line: @autoclosure () -> String) {
        let skipped: Int? = state.withLockedValue { s in
            guard s.bucket.take() else {
                s.skipped &+= 1
                return nil
            }
            defer { s.skipped = 0 }
            return s.skipped
        }
        guard let skipped else { return }
        logger.info("\(line())\(skipped > 0 ? " (\(skipped) other arrivals and departures not logged)" : "")")
    }
}
