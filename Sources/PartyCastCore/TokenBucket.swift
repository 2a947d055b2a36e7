/// A rate with a burst: up to `burst` events at once, then `perSecond`. What each peer gets of a
/// shared service (clock answers, remote commands), so one cannot take everyone's share.
public struct TokenBucket: Sendable {
    public let burst: Double
    public let perSecond: Double
    private var tokens: Double
    private var refilledAt: UInt64

    public init(burst: Double, perSecond: Double, now: UInt64 = monotonicNanoseconds()) {
        self.burst = burst
        self.perSecond = perSecond
        tokens = burst
        refilledAt = now
    }

    /// Whether an event at `now` is within the rate; if so it is counted. A `now` earlier than the
    /// last (timestamps from two threads) adds nothing rather than trapping.
    public mutating func take(now: UInt64 = monotonicNanoseconds()) -> Bool {
        let elapsed = Double(now &- min(now, refilledAt)) / 1e9
        tokens = min(burst, tokens + elapsed * perSecond)
        refilledAt = max(now, refilledAt)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
