#if canImport(Glibc)
import Glibc
#endif

/// A value behind a pthread mutex. A pthread mutex rather than Synchronization.Mutex: ThreadSanitizer
/// understands pthread mutexes, where it cannot see the futexes Mutex takes on Linux and reports
/// every contended one as a race.
public final class LockedValueBox<Value> {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock.
    public func withLockedValue<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

// @unchecked: every access to `value` holds the mutex.
extension LockedValueBox: @unchecked Sendable where Value: Sendable {}
