import PartyCastCore
import Synchronization

/// An output's thread and its life: it starts at most once and never after `stop()`, and `stop()`
/// returns only once it has ended, whatever thread calls which and whenever.
final class OutputThread: Sendable {
    private enum Life {
        case idle
        case running(DedicatedThread)
        /// Keeps the thread, if one ran, so that every `stop()` waits for it.
        case stopped(DedicatedThread?)
    }

    private let life = LockedValueBox(Life.idle)
    private let stopRequested = Atomic<Bool>(false)
    private let finalOutcome = LockedValueBox<OutputOutcome?>(nil)

    /// Checked by the output loop once per period; a plain atomic load, safe on the audio thread.
    var isStopRequested: Bool { stopRequested.load(ordering: .acquiring) }
    var outcome: OutputOutcome? { finalOutcome.withLockedValue { $0 } }
    /// Whether `start` would run a loop: worth checking before opening a device or a file.
    var canStart: Bool { life.withLockedValue { if case .idle = $0 { true } else { false } } }

    /// Runs `loop` on a new thread, then records its outcome and calls `onEnd` there. Does nothing
    /// and returns false if the thread was started or stopped before.
    @discardableResult
    func start(onEnd: @escaping @Sendable () -> Void, _ loop: sending @escaping () -> OutputOutcome) -> Bool {
        // A Mutex is Sendable whatever it holds: it carries the loop, and what it captured, into the
        // lock's closure (only this thread ever takes it, so it is no blind spot for ThreadSanitizer).
        let handover = Mutex(Optional(loop))
        return life.withLockedValue { life in
            guard case .idle = life, let loop = handover.withLock({ $0.take() }) else { return false }
            life = .running(DedicatedThread { [self] in
                let outcome = loop()
                finalOutcome.withLockedValue { $0 = outcome }
                onEnd()
            })
            return true
        }
    }

    /// Asks the loop to end and waits for it; before `start` it only makes sure no loop will run.
    func stop() {
        stopRequested.store(true, ordering: .releasing)
        let thread = life.withLockedValue { life -> DedicatedThread? in
            switch life {
            case .idle:
                finalOutcome.withLockedValue { $0 = .stopped }
                life = .stopped(nil)
                return nil
            case .running(let thread), .stopped(let thread?):
                life = .stopped(thread)
                return thread
            case .stopped(nil):
                return nil
            }
        }
        thread?.join()
    }
}
