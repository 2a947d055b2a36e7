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
/// link allows. Over UDP an exchange is ~100 bytes, so dense costs little.
///
/// The envelope's error grows with how much the link queues (`ClockEstimator.linkNoise`) and shrinks
/// with the exchanges in the window, so the interval is proportional to the span covered so far and
/// inversely proportional to the noise: the error stays about the same from join on, on any link.
/// Measured with partycast-clock-sim (p99 of the mapping's error after 5 s, 16 seeds):
/// - 0–20 ms jitter (noise ~10 ms): 2.5 ms until 16 s, 5 ms at 32 s, 10 ms from 64 s. A flat 20 ms after
///   the first second gives p99 210 µs, 5 ms until 15 s then 20 ms 74 µs.
/// - 0–5 ms jitter (noise ~2.5 ms): 10 ms at 16 s, 40 ms from 64 s; 10 ms from 16 s on where order is kept.
/// - A quiet link (noise ~10–20 µs): the sparsest from a few seconds on, once 250 ms. Not 1 s, nor 500 ms:
///   a real path's least delay is itself noisy (a relay or NIC that happens to be awake forwards
///   faster), and with few points a second the envelope rests on a few rare low points that come and
///   go. bench-sync (a CPU hog running), p99 of the LAN's worst pair / the quiet relay's far listener:
///   every 100 ms 24, 15 / 20, 24 µs; 250 ms 26, 25 / 9, 32 µs; 500 ms 29, 54 / 105, 53 µs; 1 s gave
///   steps of 30–70 µs. Four a second (~0.5 kB/s) keep enough such points in the window to rest on,
///   and let the glitch test judge them; each exchange costs a listener ~0.15 ms of CPU on loopback.
///   Since then a request this sparse brings a follow-up as soon as it is answered, which finds the
///   path awake (`coldAfter`, `ClockFollowUps`): pairs every 500 ms, as many exchanges as before.
public struct ClockExchangeSchedule: Sendable {
    /// Interval × noise (ns²) once the window is full: 10 ms at a noise of 10 ms.
    static let budget = 1e14
    /// The first second's pace, whatever the link: a quiet link needs no more.
    static let joining: Int64 = 5_000_000
    /// Only a noisy link comes down to this, while its window is short and the drift fit's lever with
    /// it. The 0–20 ms link with 1 % loss and stalls, where packets overtake each other (the judged one
    /// then), exchanges ~190 times a second over its first minute instead of ~110 (budget 2e14, densest
    /// 5 ms), and the error falls where sync missed its bar: bench-sync, 8 seeds of its link, p99 of
    /// the worse far listener mean 40 → 27 µs, worst 62 → 49; its clock logs replayed (16 listeners
    /// from 11 s) mean p99 37 → 24, worst 61 → 49; partycast-clock-sim (64 seeds, from 11 s)
    /// p99 / max / worst run's p99 29 / 70 / 51 → 22 / 43 / 40 µs, through the starved relay
    /// 57 / 238 / 168 → 36 / 69 / 53. Either half alone does not: densest 2.5 ms at budget 2e14 gained
    /// 16 % more exchanges and nothing measurable, budget 1e14 at 5 ms nothing either (3 seeds: 54, 67,
    /// 37 µs against 34, 42, 45). Quiet links go sparse as before.
    static let densest: Int64 = 2_500_000
    /// Where order is kept the pace stops slowing here, a quarter of the window (16 s) in. There an
    /// exchange comes near the floor only when it finds the path clear, at most about once per hold,
    /// so a sparser pace loses such points in proportion. Slowing on as the window filled left the
    /// newer end of the drift's lever resting on a few, and the error grew with the lever (bench-sync's
    /// 0–5 ms row: pairwise p99 mean 40 → 29 µs over 16 seeds, for 12.7 → 19.5 kB/s; figures in the
    /// commit). A link whose noise is 10 ms or more (the judged one) is paced by its noise either way,
    /// and one under 0.1 ms (quiet) by `sparsest`.
    static let orderKeptCoverage = 0.25
    static let sparsest: Int64 = 500_000_000
    /// A request sent this long after the one before finds the path cold: the threads and caches on
    /// its way asleep, which adds tens of µs, mostly on the way out (a quiet relay on a VM at 4
    /// exchanges a second: the outbound delay's least 33–45 µs and tenth percentile 77–88 µs, against
    /// 9–14 and 27–33 at 5 ms apart; inbound 23–37 and 44–45 against 8–14 and 14–26). Another goes
    /// as soon as its answer comes, which finds the path awake (`ClockFollowUps`).
    public static let coldAfter: Int64 = 50_000_000

    public init() {}

    /// - The first second: every 5 ms, while there is no noise to go by (~200 exchanges: the offset is
    ///   good within a few hundred ms, and the drift fit starts from a span of 0.5 s).
    /// - Then `budget` / noise × (time since join / window), between 2.5 ms and 500 ms; 20 ms while the
    ///   noise is unknown (no answer yet). Where order is kept the time since join counts only up to
    ///   `orderKeptCoverage` of the window.
    /// - Never more often than once per noise where answers do not overtake each other (Wi-Fi, TCP:
    ///   `AnswerOrder`): there a packet held holds everything behind it, so a request sent before the
    ///   last has left queues behind it, and at most about one exchange per noise finds the path
    ///   empty however many are sent (figures in the commit that brought this).
    /// - Never more often than every half of `leastRoundTrip` (the least of the recent answers'), which
    ///   keeps a congested path (a standing queue, where even the least round trip grows) from being
    ///   loaded further by the exchanges themselves.
    /// - `densest` while the estimator reads the delays' top edge (`ClockEstimator.readsTopEdge`),
    ///   whatever the round trip: there every exchange lies under the edge however it queued, so each
    ///   one counts. Held to half the least round trip (~8 ms on bench-sync's judged link: 126 a
    ///   second), each second's greatest delay lay ~165 µs under the edge, and the tops' drift was
    ///   17–60 ppm off 11 s after join on some seeds; at ~300 a second the pairwise p99 of seeds 451,
    ///   454, 457 and 460 went from 70, 124, 88, 180 µs to 58, 39, 33, 37 (figures in the commit).
    public func interval(sinceJoin nanoseconds: Int64, linkNoise: Int64?, answersOvertake: Bool, readsTopEdge: Bool,
                         leastRoundTrip: Int64 = 0) -> Int64 {
        let firstSecond = nanoseconds < 1_000_000_000
        if readsTopEdge, !firstSecond { return Self.densest }
        return max(firstSecond ? Self.joining : paced(sinceJoin: nanoseconds, linkNoise: linkNoise, answersOvertake: answersOvertake),
                   leastRoundTrip / 2)
    }

    private func paced(sinceJoin nanoseconds: Int64, linkNoise: Int64?, answersOvertake: Bool) -> Int64 {
        guard let linkNoise, linkNoise > 0 else { return 20_000_000 }
        var covered = Double(min(nanoseconds, ClockEstimator.window)) / Double(ClockEstimator.window)
        if !answersOvertake { covered = min(covered, Self.orderKeptCoverage) }
        var interval = Self.budget / Double(linkNoise) * covered
        if !answersOvertake { interval = max(interval, Double(linkNoise)) }
        return interval >= Double(Self.sparsest) ? Self.sparsest : max(Int64(interval), Self.densest)
    }
}

/// Which request's answer brings a follow-up: one sent `ClockExchangeSchedule.coldAfter` or more
/// after the one before, whose follow-up goes the moment it is answered. A follow-up is never cold
/// itself, whatever the round trip: on a path slower than `coldAfter` each would bring the next.
public struct ClockFollowUps: Sendable {
    private var lastSentAt: Int64?
    private var coldSequence: UInt64?
    /// Whether the next request is a follow-up, due at once.
    public private(set) var isDue = false

    public init() {}

    public mutating func sent(sequence: UInt64, at time: Int64) {
        let cold = !isDue && lastSentAt.map { time &- $0 >= ClockExchangeSchedule.coldAfter } ?? true
        (coldSequence, lastSentAt, isDue) = (cold ? sequence : nil, time, false)
    }

    /// An authentic answer to the request of `sequence`.
    public mutating func answered(sequence: UInt64) {
        guard sequence == coldSequence else { return }
        coldSequence = nil
        isDue = true
    }
}

