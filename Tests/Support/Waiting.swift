import Foundation

// The tests' only clocks. A test waits for an event (a process's exit, a line, a port, a state)
// through `waitUntil`, bounded by a deadline; it lets real time pass (`letTimePass`) only where time
// itself is the subject: a user's hands on a remote, a late joiner's arrival, a window measured.

/// Whether `condition` came to hold within `timeout` seconds, looked at every `interval` seconds:
/// for states that announce themselves to nobody (a status line, a process's maps, a port).
@discardableResult
public func waitUntil(timeout: TimeInterval, every interval: TimeInterval = 0.01, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = monotonicNow() + Int64(timeout * 1e9)
    while true {
        if try condition() { return true }
        if monotonicNow() >= deadline { return false }
        letTimePass(interval)
    }
}

/// Lets `seconds` of real time pass. Never a wait for something to happen: that is `waitUntil`.
public func letTimePass(_ seconds: TimeInterval) {
    Thread.sleep(forTimeInterval: seconds)
}

/// `letTimePass` for async code: suspends rather than blocks.
public func letTimePass(_ seconds: TimeInterval) async throws {
    try await Task.sleep(for: .seconds(seconds))
}

/// Until something accepts TCP connections on 127.0.0.1:`port` (false after `timeout` seconds).
@discardableResult
public func waitForPort(_ port: Int, timeout: TimeInterval = 10) -> Bool {
    waitUntil(timeout: timeout, every: 0.05) {
        guard let fd = connectToLoopback(port: port) else { return false }
        close(fd)
        return true
    }
}

/// The first value `body` gives within `timeout` seconds, tried every `interval` seconds; nil if none.
public func eventually<T>(timeout: TimeInterval, every interval: TimeInterval = 0.1, _ body: () throws -> T?) rethrows -> T? {
    var value: T?
    try waitUntil(timeout: timeout, every: interval) {
        value = try body()
        return value != nil
    }
    return value
}
