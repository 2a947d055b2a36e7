#if canImport(Glibc)
import Glibc
#endif
import Logging
import PartyCastCore

/// The deadline of each answer from mpd as a whole. libmpdclient bounds each read (5 s), not an
/// answer: an mpd sending a byte every 4.9 s would hold the link forever. Armed around each
/// exchange; past the deadline (or once ended) the socket is shut down, so the read under way
/// fails and the link connects again. One thread per link, asleep unless an exchange is late.
final class AnswerDeadline: Sendable {
    private struct Armed {
        var descriptor: Int32
        var deadline: UInt64
    }
    private struct State {
        var armed: Armed?
        var expired = false
        var ended = false
    }

    let nanoseconds: UInt64
    private let logger: Logger
    private let state: LockedValueBox<State>
    private let wakeup: Wakeup
    private let watcher: DedicatedThread

    init(seconds: Double, logger: Logger) {
        let state = LockedValueBox(State()), wakeup = Wakeup()
        nanoseconds = UInt64(seconds * 1e9)
        self.logger = logger
        self.state = state
        self.wakeup = wakeup
        watcher = DedicatedThread { Self.watch(state, wakeup, logger) }
    }

    /// Runs one exchange on `descriptor` under the deadline.
    func within<T, E: Error>(_ descriptor: Int32, _ exchange: () throws(E) -> T) throws(E) -> T {
        let ended = state.withLockedValue { s in
            s.armed = s.ended ? nil : Armed(descriptor: descriptor, deadline: monotonicNanoseconds() + nanoseconds)
            s.expired = s.ended
            return s.ended
        }
        // Ended, the watcher is gone: the exchange fails at once.
        if ended { Self.cut(descriptor, logger) } else { wakeup.signal() }
        defer { state.withLockedValue { $0.armed = nil } }
        return try exchange()
    }

    /// Whether the last exchange was cut short by the deadline.
    var expired: Bool { state.withLockedValue { $0.expired } }

    /// Cuts the exchange under way short, and every later one at once; returns once the watcher left.
    func end() {
        state.withLockedValue { s in
            s.ended = true
            s.armed?.deadline = 0
        }
        wakeup.signal()
        watcher.join()
    }

    private static func watch(_ state: LockedValueBox<State>, _ wakeup: Wakeup, _ logger: Logger) {
        while true {
            let now = monotonicNanoseconds()
            let (ended, wait) = state.withLockedValue { s -> (Bool, UInt64?) in
                guard let armed = s.armed else { return (s.ended, nil) }
                guard now >= armed.deadline else { return (false, armed.deadline - now) }
                // Under the lock: the exchange cannot end, and its socket be closed, meanwhile.
                cut(armed.descriptor, logger)
                s.armed = nil
                s.expired = true
                return (s.ended, nil)
            }
            if ended { return }
            if let wait { wakeup.wait(nanoseconds: wait) } else { wakeup.wait() }
        }
    }

    private static func cut(_ descriptor: Int32, _ logger: Logger) {
        do {
            _ = try systemCall("shutdown") { shutdown(descriptor, Int32(SHUT_RDWR)) }
        } catch {
            logger.notice("cannot cut a late answer from mpd short: \(error)")
        }
    }
}
