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

/// When to send the next request: dense at join so the estimate converges fast, then sparse.
public struct ClockExchangeSchedule: Sendable {
    public init() {}

    /// - 20 ms for the first 0.5 s: ~25 exchanges, enough that some missed the queueing, so the
    ///   offset is good within a few hundred ms and a first drift fit exists from 0.25 s.
    /// - 100 ms until 5 s: the drift error shrinks with the span the fit covers more than with the
    ///   number of samples, so covering the span cheaply matters more than sampling densely.
    /// - 1 s after: with the drift known to ~1 ppm a 1 s gap costs ~1 µs, and a steady listener costs
    ///   the broadcaster one small message a second.
    public func interval(sinceJoin nanoseconds: Int64) -> Int64 {
        switch nanoseconds {
        case ..<500_000_000: 20_000_000
        case ..<5_000_000_000: 100_000_000
        default: 1_000_000_000
        }
    }
}
