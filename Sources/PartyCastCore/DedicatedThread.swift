#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A plain POSIX thread for work that must not share a cooperative pool: audio output (which
/// blocks in the device) and the decoder feeding it.
public final class DedicatedThread: Sendable {
    private let thread: pthread_t
    /// Whether the thread has been joined; held while joining, so a second join() waits for the first.
    private let joined = LockedValueBox(false)
    private final class Box { let body: () -> Void; init(_ body: @escaping () -> Void) { self.body = body } }

    /// Runs `body` on a new thread; `body` (and all it captured) belongs to that thread from now on.
    public init(_ body: sending @escaping () -> Void) {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { argument in
            let box = Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue()
            box.body()
            return nil
        }, box)
        precondition(result == 0, "pthread_create failed: \(result)")
        self.thread = thread
    }

    /// A thread nobody joined releases its resources when it ends.
    deinit {
        if !joined.withLockedValue({ $0 }) { pthread_detach(thread) }
    }

    /// Waits until the thread has ended; from any thread, any number of times.
    public func join() {
        joined.withLockedValue { joined in
            guard !joined else { return }
            pthread_join(thread, nil)
            joined = true
        }
    }
}
