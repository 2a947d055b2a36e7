import Logging
import PartyCastCore

/// When a live source tries its server again: at once after a connection that delivered audio,
/// else after a delay that doubles from 250 ms up to 4 s, so a server that accepts and closes is
/// not hammered. Every wait is cut short by a cancel (`wakeup` signalled, `cancelled` true).
public struct Reconnection: Sendable {
    static let firstDelay: UInt64 = 250_000_000
    static let longestDelay: UInt64 = 4_000_000_000
    private var delay = Reconnection.firstDelay

    public init() {}

    /// After a connection ended: connects again with `connect` until it succeeds or a cancel, one
    /// warning line per failed attempt.
    public mutating func reconnect(heardAudio: Bool, wakeup: Wakeup, cancelled: () -> Bool, logger: Logger,
                                   _ connect: () throws(PartyCastError) -> Void) throws(PartyCastError) {
        if heardAudio { delay = Self.firstDelay } else { backOff(wakeup: wakeup, cancelled: cancelled) }
        while !cancelled() {
            do throws(PartyCastError) {
                try connect()
                return
            } catch {
                logger.warning("\(error.message); retrying in \(Double(delay) / 1e9) s")
                backOff(wakeup: wakeup, cancelled: cancelled)
            }
        }
        throw PartyCastError(.io, "stopped while reconnecting")
    }

    /// Waits the delay (cut short by a cancel) and doubles it, up to the longest.
    private mutating func backOff(wakeup: Wakeup, cancelled: () -> Bool) {
        let deadline = monotonicNanoseconds() + delay
        while !cancelled(), case let now = monotonicNanoseconds(), now < deadline {
            wakeup.wait(nanoseconds: deadline - now)
        }
        delay = min(delay * 2, Self.longestDelay)
    }
}
