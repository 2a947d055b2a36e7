import Foundation

/// The lines background processes write to stderr, each stamped with when this process first saw
/// it: a thread woken by inotify whenever a watched file is written reads what is new, so a line's
/// time is known to well under a millisecond without the program printing times of its own.
public final class StderrWatch: @unchecked Sendable {
    // @unchecked: `seen`, `watched` and `stopping` are only touched under `lock`; the descriptors never change.
    public struct Line: Sendable {
        public let text: String
        /// Wall clock (s since 1970), as `date +%s.%N` prints it.
        public let wallClock: Double
        /// CLOCK_MONOTONIC (ns), as a virtual card's recording times its frames.
        public let monotonic: Int64
    }

    private struct Watched {
        let handle: FileHandle
        var partial = Data()
    }

    private let lock = NSLock()
    private var seen: [String: [Line]] = [:]
    private var watched: [String: Watched] = [:]
    private var stopping = false
    private let finished = DispatchSemaphore(value: 0)
    private let changes: Int32
    private let wake: (read: Int32, write: Int32)

    public init() {
        changes = inotify_init1(Int32(IN_CLOEXEC))
        var ends: [Int32] = [-1, -1]
        precondition(changes >= 0 && pipe(&ends) == 0, "inotify or pipe: \(String(cString: strerror(errno)))")
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }  // not inherited by the programs the tests start
        wake = (ends[0], ends[1])
        Thread.detachNewThread { [self] in
            var waiting = [pollfd(fd: changes, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            var events = [UInt8](repeating: 0, count: 4096)
            while lock.withLock({ !stopping }) {
                readNew()
                guard Glibc.poll(&waiting, 2, -1) >= 0 || errno == EINTR else { break }
                if waiting[0].revents != 0 { _ = read(changes, &events, events.count) }
            }
            readNew()
            finished.signal()
        }
    }

    /// Watches `process`'s stderr under `name` (a name watched before starts afresh).
    public func watch(_ process: BackgroundProcess, as name: String) throws {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: process.stderrPath))
        guard inotify_add_watch(changes, process.stderrPath, UInt32(IN_MODIFY)) >= 0 else {
            throw CocoaError(.fileReadUnknown, userInfo: [NSFilePathErrorKey: process.stderrPath])
        }
        lock.withLock {
            watched[name] = Watched(handle: handle)
            seen[name] = []
        }
        readNew()
    }

    public func lines(_ name: String) -> [Line] { lock.withLock { seen[name] ?? [] } }

    /// The first line of `name` containing `text` seen at or after `since` (wall clock), waiting
    /// up to `timeout` for it.
    public func wait(for text: String, in name: String, since: Double = 0, timeout: TimeInterval) -> Line? {
        var found: Line?
        waitUntil(timeout: timeout) {
            found = lines(name).first { $0.wallClock >= since && $0.text.contains(text) }
            return found != nil
        }
        return found
    }

    public func stop() {
        guard lock.withLock({ defer { stopping = true }; return !stopping }) else { return }
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
        finished.wait()
        [changes, wake.read, wake.write].forEach { close($0) }
    }

    private func readNew() {
        lock.withLock {
            for name in watched.keys {
                guard let data = try? watched[name]?.handle.readToEnd(), !data.isEmpty else { continue }
                let (wallClock, monotonic) = (Date().timeIntervalSince1970, monotonicNow())
                var pending = watched[name]!.partial + data
                while let end = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let text = String(decoding: pending[pending.startIndex..<end], as: UTF8.self)
                    seen[name, default: []].append(Line(text: text, wallClock: wallClock, monotonic: monotonic))
                    pending = pending[(end + 1)...]
                }
                watched[name]?.partial = Data(pending)
            }
        }
    }
}
