import Logging
import PartyCastCore

/// When a peer is tried again: at once after a healthy connection (one that delivered audio, or
/// stayed up), else after a delay that doubles from 250 ms up to 4 s, so a peer that accepts and
/// closes is not hammered. The
/// listener's sources wait on their thread (`reconnect`); the broadcaster's dialler awaits
/// `nextWait` itself.
public struct Reconnection: Sendable {
    public static let firstDelay: UInt64 = 250_000_000
    public static let longestDelay: UInt64 = 4_000_000_000
    private var delay = Reconnection.firstDelay

    public init() {}

    /// The wait before the next attempt, in ns, and the schedule moved on: none after a healthy
    /// connection (the delays start over), else the delay, doubled for the next time.
    public mutating func nextWait(wasHealthy: Bool) -> UInt64 {
        if wasHealthy {
            delay = Self.firstDelay
            return 0
        }
        defer { delay = min(delay * 2, Self.longestDelay) }
        return delay
    }

    /// After a connection ended: connects again with `connect` until it succeeds or a cancel, one
    /// warning line per failed attempt. Every wait is cut short by a cancel (`wakeup` signalled,
    /// `cancelled` true).
    public mutating func reconnect(wasHealthy: Bool, wakeup: Wakeup, cancelled: () -> Bool, logger: Logger,
                                   _ connect: () throws(PartyCastError) -> Void) throws(PartyCastError) {
        Self.wait(nextWait(wasHealthy: wasHealthy), wakeup: wakeup, cancelled: cancelled)
        while !cancelled() {
            do throws(PartyCastError) {
                try connect()
                return
            } catch {
                let wait = nextWait(wasHealthy: false)
                logger.warning("\(error.message); retrying in \(Double(wait) / 1e9) s")
                Self.wait(wait, wakeup: wakeup, cancelled: cancelled)
            }
        }
        throw PartyCastError(.io, "stopped while reconnecting")
    }

    private static func wait(_ nanoseconds: UInt64, wakeup: Wakeup, cancelled: () -> Bool) {
        let deadline = monotonicNanoseconds() + nanoseconds
        while !cancelled(), case let now = monotonicNanoseconds(), now < deadline {
            wakeup.wait(nanoseconds: deadline - now)
        }
    }
}
