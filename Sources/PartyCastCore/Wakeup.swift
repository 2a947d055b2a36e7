#if canImport(Glibc)
import Glibc
#endif

/// Lets one thread sleep until another has news, or a timeout passes. It takes a lock, so never
/// signal it from a real-time audio callback; output threads signal it only once they have ended.
public final class Wakeup: @unchecked Sendable {
    // @unchecked: the mutex and condition variable are the synchronisation.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var signalled = false

    public init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func signal() {
        pthread_mutex_lock(mutex)
        signalled = true
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
    }

    /// Returns when signalled (consuming the signal).
    public func wait() {
        pthread_mutex_lock(mutex)
        while !signalled { pthread_cond_wait(condition, mutex) }
        signalled = false
        pthread_mutex_unlock(mutex)
    }

    /// Returns when signalled (consuming the signal) or after `nanoseconds`.
    public func wait(nanoseconds: UInt64) {
        let deadline = monotonicNanoseconds() + nanoseconds
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        pthread_mutex_lock(mutex)
        while !signalled {
            if pthread_cond_timedwait(condition, mutex, &ts) == ETIMEDOUT { break }
        }
        signalled = false
        pthread_mutex_unlock(mutex)
    }
}
