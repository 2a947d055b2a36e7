#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed system call: its name and errno. Every syscall in PartyCast goes through `systemCall`,
/// so failures carry the same shape and tests can reason about them.
public struct SystemCallError: Error, Sendable, Equatable, CustomStringConvertible {
    public let call: String
    public let errno: Int32

    public init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    public var description: String {
        "\(call): \(String(cString: strerror(errno)))"
    }
}

/// Runs `body`, retrying on EINTR, and throws a typed error when it returns -1.
@inline(__always)
public func systemCall<T: BinaryInteger>(_ name: StaticString, _ body: () -> T) throws(SystemCallError) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = errno
        if code == EINTR { continue }
        throw SystemCallError(call: "\(name)", errno: code)
    }
}

/// Sleeps in poll(2) until one of `descriptors` can be read (or has hung up), or until
/// `timeoutMilliseconds` pass (-1: no limit); which ones can. The one wait of every thread that
/// sleeps on a socket or a pipe beside a `WakePipe`. A negative descriptor is skipped, as poll(2) does.
public func waitUntilReadable(_ descriptors: [Int32], timeoutMilliseconds: Int32 = -1) throws(SystemCallError) -> [Bool] {
    var polled = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
    _ = try systemCall("poll") { poll(&polled, nfds_t(polled.count), timeoutMilliseconds) }
    return polled.map { $0.revents != 0 }
}

/// Nanoseconds on CLOCK_MONOTONIC: the time base for pacing and for the simulated card's `t0_ns`.
@inline(__always)
public func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Sleeps until an absolute CLOCK_MONOTONIC instant (no drift accumulates across calls).
public func sleepUntil(monotonicNanoseconds deadline: UInt64) {
    var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
}

/// This machine's host name (what listeners and broadcasters show each other).
/// Empty if the system cannot say (gethostname fails only on a buffer too small for the name).
public func localHostName() -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    guard gethostname(&buffer, buffer.count - 1) == 0 else { return "" }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Raises the soft limit on open descriptors to the hard one and returns it: a broadcaster holds a
/// socket per listener and per remote, and at the usual soft 1,024 a crowd of idle connections would
/// leave no descriptor for a real listener (the connection caps stay well below the hard limit).
@discardableResult
public func raiseOpenFileLimit() throws(SystemCallError) -> UInt64 {
    var limit = rlimit()
    _ = try systemCall("getrlimit") { getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) }
    guard limit.rlim_cur < limit.rlim_max else { return UInt64(limit.rlim_cur) }
    limit.rlim_cur = limit.rlim_max
    _ = try systemCall("setrlimit") { setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) }
    return UInt64(limit.rlim_cur)
}

/// `path` with every symbolic link, `.` and `..` resolved (realpath(3)); fails if any part is missing.
public func canonicalPath(_ path: String) throws(SystemCallError) -> String {
    guard let resolved = realpath(path, nil) else { throw SystemCallError(call: "realpath", errno: errno) }
    defer { free(resolved) }
    return String(cString: resolved)
}
