import Foundation

/// The lines background processes write to stderr, each stamped with when this process first saw
/// it: a thread reads what is new every 10 ms, so a line's time is known to about that without the
/// program printing times of its own.
public final class StderrWatch: @unchecked Sendable {
    // @unchecked: `seen`, `watched` and `stopping` are only touched under `lock`.
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

    public init() {
        Thread.detachNewThread { [self] in
            while lock.withLock({ !stopping }) {
                poll()
                usleep(10_000)
            }
            finished.signal()
        }
    }

    /// Watches `process`'s stderr under `name` (a name watched before starts afresh).
    public func watch(_ process: BackgroundProcess, as name: String) throws {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: process.stderrPath))
        lock.withLock {
            watched[name] = Watched(handle: handle)
            seen[name] = []
        }
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
        finished.wait()
    }

    private func poll() {
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
