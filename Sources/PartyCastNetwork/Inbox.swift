import NIOCore
import PartyCastCore
import PartyCastWire

/// What arrives from a broadcaster (a PartyCast one, or a Sendspin server: `Message`), queued for
/// the listener's producer thread. Bounded by bytes, not by dropping: when it holds `byteBudget`, the
/// connection stops reading (TCP pushes back on the broadcaster) until the producer has taken half
/// of it. The end of a connection always gets in.
package final class Inbox<Message: Sendable>: Sendable {
    package enum Item: Sendable {
        case message(Message, arrivedAt: Int64)
        /// The connection ended; the reason is for the log.
        case closed(String)
        /// Retrying can't help (another protocol version, the party key).
        case failed(PartyCastError)
    }

    /// About 10 s of float PCM stereo at 48 kHz (the longest lead, `--buffer 10000`), more than a
    /// minute of Opus; far below a small box's memory.
    package static var byteBudget: Int { 4 << 20 }
    /// What queuing one message costs beyond its fields (its storage, its slot here), so that a
    /// flood of tiny messages is bounded by memory too, not only by their few bytes on the wire.
    package static var messageOverhead: Int { 512 }

    private struct State {
        var items: [(item: Item, bytes: Int)] = []
        var head = 0
        var bytes = 0
        /// Set while reading is paused: resumes it.
        var resume: (@Sendable () -> Void)?
    }

    private let state = LockedValueBox(State())
    /// Signalled by every put and by `NetworkSource.Control.cancel()`.
    package let wakeup = Wakeup()

    package init() {}

    /// Queues a message; false when the budget is spent and the caller should stop reading until
    /// `resume` runs.
    package func put(_ item: Item, bytes: Int, resume: @escaping @Sendable () -> Void) -> Bool {
        let accepted = state.withLockedValue { s in
            s.items.append((item, bytes))
            s.bytes += bytes
            guard s.bytes >= Self.byteBudget else { return true }
            s.resume = resume
            return false
        }
        wakeup.signal()
        return accepted
    }

    /// Queues the end of a connection, whatever the budget.
    package func close(_ item: Item) {
        state.withLockedValue { $0.items.append((item, 0)) }
        wakeup.signal()
    }

    /// The next item, waiting up to `timeoutNanoseconds` for one (for ever if nil; less if signalled).
    package func take(timeoutNanoseconds: UInt64? = nil) -> Item? {
        if let item = next() { return item }
        if let timeoutNanoseconds { wakeup.wait(nanoseconds: timeoutNanoseconds) } else { wakeup.wait() }
        return next()
    }

    private func next() -> Item? {
        let (item, resume): (Item?, (@Sendable () -> Void)?) = state.withLockedValue { s in
            guard s.head < s.items.count else { return (nil, nil) }
            let (item, bytes) = s.items[s.head]
            s.head += 1
            s.bytes -= bytes
            if s.head * 2 >= s.items.count {  // amortized O(1) removal
                s.items.removeFirst(s.head)
                s.head = 0
            }
            guard s.bytes <= Self.byteBudget / 2, let resume = s.resume else { return (item, nil) }
            s.resume = nil
            return (item, resume)
        }
        resume?()
        return item
    }

    /// Forgets what a dropped connection left unread (it is not to be played).
    package func discardMessages() {
        let resume = state.withLockedValue { s in
            s.items = Array(s.items[s.head...].filter { if case .message = $0.item { false } else { true } })
            s.head = 0
            s.bytes = 0
            defer { s.resume = nil }
            return s.resume
        }
        resume?()
    }
}

extension Inbox where Message == PCEnvelope {
    /// What holding `envelope` costs. The decoder has dropped unknown fields, so for anything but
    /// audio that is its re-encoded size: junk padding a message passes at the speed of reading,
    /// not of playback. A chunk (the bulk, and never smaller) is counted as it came.
    static func cost(of envelope: PCEnvelope, framedBytes: Int) -> Int {
        if case .audioChunk = envelope.body { return framedBytes + messageOverhead }
        let kept = ((try? envelope.serializedBytes()) as [UInt8]?)?.count ?? framedBytes
        return min(kept, framedBytes) + messageOverhead
    }
}

extension Inbox {
    /// Waits, on this inbox's wakeup, for a connection being made (`connecting`, whose value holds
    /// the channel `channel` names). nil after a cancel: a channel that still comes is closed.
    package func awaitConnection<Value: Sendable>(_ connecting: EventLoopFuture<Value>, channel: @escaping @Sendable (Value) -> Channel,
                                                  cancelled: () -> Bool) -> Result<Value, Error>? {
        let outcome = LockedValueBox<Result<Value, Error>?>(nil)
        connecting.whenComplete { [wakeup] result in
            outcome.withLockedValue { $0 = result }
            wakeup.signal()
        }
        while true {
            if let result = outcome.withLockedValue({ $0 }) {
                if case .success(let value) = result, cancelled() {
                    channel(value).close(promise: nil)
                    return nil
                }
                return result
            }
            if cancelled() {
                connecting.whenSuccess { channel($0).close(promise: nil) }
                return nil
            }
            wakeup.wait(nanoseconds: 1_000_000_000)
        }
    }
}
