/// One exchange, all in nanoseconds: t1, t4 on the local clock; t2, t3 on the remote (broadcaster) clock.
public struct ClockSample: Sendable, Equatable {
    /// Local clock when the request left.
    public var t1: Int64
    /// Remote clock when the request arrived.
    public var t2: Int64
    /// Remote clock when the reply left.
    public var t3: Int64
    /// Local clock when the reply arrived.
    public var t4: Int64

    public init(t1: Int64, t2: Int64, t3: Int64, t4: Int64) {
        self.t1 = t1
        self.t2 = t2
        self.t3 = t3
        self.t4 = t4
    }

    /// Time spent on the network: (t4 − t1) − (t3 − t2). Wraps instead of trapping on absurd input,
    /// which the estimator rejects.
    public var roundTrip: Int64 { (t4 &- t1) &- (t3 &- t2) }

    /// Remote minus local at the exchange's midpoint, ((t2 − t1) + (t3 − t4)) / 2, rounded down and
    /// without overflowing the sum when the clocks are far apart. Exact when the two directions take
    /// equally long; otherwise off by at most roundTrip / 2.
    public var offset: Int64 {
        let outbound = t2 &- t1, inbound = t3 &- t4
        return (outbound >> 1) &+ (inbound >> 1) &+ (outbound & inbound & 1)
    }
}

/// remote ≈ remoteReference + (local − localReference) × rate, where rate = 1 + drift (remote ns per local ns).
public struct ClockMapping: Sendable, Equatable {
    public var localReference: Int64
    public var remoteReference: Int64
    public var rate: Double

    public init(localReference: Int64, remoteReference: Int64, rate: Double) {
        self.localReference = localReference
        self.remoteReference = remoteReference
        self.rate = rate
    }

    /// How much faster the remote clock runs, in parts per million.
    public var driftPPM: Double { (rate - 1) * 1e6 }

    /// Only the distance from the reference goes through Double, so clocks ~1e18 ns apart keep
    /// nanosecond precision.
    public func remote(fromLocal local: Int64) -> Int64 {
        remoteReference &+ Int64((Double(local &- localReference) * rate).rounded())
    }

    public func local(fromRemote remote: Int64) -> Int64 {
        localReference &+ Int64((Double(remote &- remoteReference) / rate).rounded())
    }
}

/// When to send the next request: dense at join so the estimate converges fast, then as sparse as the
/// link allows. An exchange is ~100 bytes over UDP, so dense costs little; the envelope's error
/// shrinks like the link's queueing / the exchanges in the window, so a noisy link needs many.
public struct ClockExchangeSchedule: Sendable {
    /// A link queueing less than this (median, `ClockEstimator.linkNoise`) is quiet: 64 exchanges a
    /// window keep the envelope within a few µs.
    public static let quietLinkNoise: Int64 = 100_000

    public init() {}

    /// - 10 ms for the first second: ~100 exchanges, so the offset is good within a few hundred ms and
    ///   the drift fit starts from a span of 0.5 s.
    /// - then 20 ms while the link is noisy (or not yet measured);
    /// - on a quiet link, 100 ms until 5 s (the drift's span grows cheaply) and 1 s after: with the
    ///   drift known to ~0.1 ppm a 1 s gap costs nothing, and a steady listener costs the broadcaster
    ///   one small message a second.
    public func interval(sinceJoin nanoseconds: Int64, linkNoise: Int64? = nil) -> Int64 {
        let ms: Int64 = 1_000_000, s: Int64 = 1_000_000_000
        if nanoseconds < 1 * s { return 5 * ms }
        guard let linkNoise, linkNoise <= Self.quietLinkNoise else { return nanoseconds < 15 * s ? 5 * ms : 20 * ms }
        return nanoseconds < 5 * s ? 100 * ms : s
    }
}
