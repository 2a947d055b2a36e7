#if canImport(Glibc)
import Glibc
#endif

/// Wakes a thread that sleeps in poll(2) on `readEnd` along with its real work: the threads that
/// wait for keys or datagrams stop this way, with no periodic wakeup to check a flag.
public final class WakePipe: Sendable {
    public let readEnd: Int32
    private let writeEnd: Int32

    public init() throws(SystemCallError) {
        var ends: [Int32] = [-1, -1]
        _ = try systemCall("pipe") { pipe(&ends) }
        readEnd = ends[0]
        writeEnd = ends[1]
        // Neither end is inherited by programs the listener or broadcaster might start. The write end
        // never blocks: a full pipe already holds a wakeup, and `wake()` must never block its caller
        // (an event loop). The read end blocks, for a thread that sleeps in read(2).
        do {
            for end in ends { _ = try systemCall("fcntl(F_SETFD)") { fcntl(end, F_SETFD, FD_CLOEXEC) } }
            let flags = try systemCall("fcntl(F_GETFL)") { fcntl(writeEnd, F_GETFL) }
            _ = try systemCall("fcntl(F_SETFL)") { fcntl(writeEnd, F_SETFL, flags | O_NONBLOCK) }
        } catch {
            close(readEnd)
            close(writeEnd)
            throw error
        }
    }

    /// Async-signal-safe (a write(2)); EAGAIN (the pipe is full) means a wakeup is pending already.
    public func wake() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// Empties what wakes have written (call when `readEnd` polls readable, or it blocks): one read
    /// takes up to 64 wakeups, more than ever pend; one left over only wakes its reader once more.
    public func drain() {
        var bytes = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        _ = withUnsafeMutableBytes(of: &bytes) { read(readEnd, $0.baseAddress, $0.count) }
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }
}
