import Logging
import NIOConcurrencyHelpers
import PartyCastCore

/// Hummingbird's own log lines, each distinct message at most once a second (the next says how many
/// were left out). Hummingbird writes a line per connection that ends before its first request
/// ("Error handling upgrade result"), so 1,030 idle connections closed by `ControlConnectionGuard`
/// wrote 1,030 lines; a crowd must not grow the log by one line per connection.
struct ThrottledLogHandler: LogHandler {
    /// Shared by the copies swift-log makes whenever metadata changes.
    final class Tally: Sendable {
        static let maxMessages = 256
        struct Entry {
            var loggedAt: UInt64
            var skipped: Int
        }
        let entries = NIOLockedValueBox<[String: Entry]>([:])

        /// Nil to skip the line, else how many like it were skipped since the last one written.
        func admit(_ message: String, now: UInt64 = monotonicNanoseconds()) -> Int? {
            entries.withLockedValue { entries in
                if let entry = entries[message], now &- entry.loggedAt < 1_000_000_000 {
                    entries[message]?.skipped &+= 1
                    return nil
                }
                if entries[message] == nil && entries.count >= Self.maxMessages { entries.removeAll(keepingCapacity: true) }
                let skipped = entries[message]?.skipped ?? 0
                entries[message] = Entry(loggedAt: now, skipped: 0)
                return skipped
            }
        }
    }

    private var inner: any LogHandler
    private let tally: Tally

    init(wrapping inner: any LogHandler, tally: Tally = Tally()) {
        self.inner = inner
        self.tally = tally
    }

    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        guard let skipped = tally.admit(event.message.description) else { return }
        var event = event
        if skipped > 0 { event.message = "\(event.message) (and \(skipped) more like it in the last second)" }
        inner.log(event: event)
    }
}
