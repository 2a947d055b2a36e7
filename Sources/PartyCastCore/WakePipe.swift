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
        // Not inherited by programs the listener or broadcaster might start.
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        // A full pipe already holds a wakeup: `wake()` must never block its caller (an event loop).
        _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK)
        readEnd = ends[0]
        writeEnd = ends[1]
    }

    public func wake() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// Empties what wakes have written (call when `readEnd` polls readable).
    public func drain() {
        var bytes = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        _ = withUnsafeMutableBytes(of: &bytes) { read(readEnd, $0.baseAddress, $0.count) }
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }
}
