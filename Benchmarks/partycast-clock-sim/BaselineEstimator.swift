import PartyCastClock

/// The estimator before issue 11, kept to compare: PartyCastClock's `ClockEstimator` as it was, renamed,
/// so the simulator's table stays reproducible. Don't fix it; it is the baseline.
///
/// A sample's offset is wrong by half the difference of its two one-way delays. Queueing only adds
/// delay, so a sample's round trip above the best one in the window (its excess) bounds that error:
/// |error| ≤ excess / 2. The estimator keeps the last `window` of samples in a fixed ring and fits,
/// by least squares weighted with 1 / (noise² + (excess / 2)²) (each sample's error bound as its
/// variance), offset = level + drift × time + asymmetry × excess. The asymmetry term soaks up the
/// bias that one-sided queueing gives every jittered sample alike, which a filter on round trips
/// alone only shrinks; the level, at excess 0, is what a sample without queueing would have seen.
struct BaselineEstimator: Sendable {
    /// How far back samples count: long enough to average the drift over many exchanges, short
    /// enough that a drift that wanders (temperature) still looks like a line.
    static let window: Int64 = 64_000_000_000
    /// The schedule yields ~130 samples per window; the cap only bites when a caller exchanges faster,
    /// and then the window shortens instead of the storage growing.
    static let sampleCapacity = 256
    /// A reply this late is not queueing but a broken peer or a suspended host.
    static let maximumRoundTrip: Int64 = 1_000_000_000

    /// Timestamping noise (ns) that even a sample without queueing has: below this excess, samples
    /// count about the same.
    static let timestampNoise = 5_000.0
    /// Below this span a slope would be mostly noise; the fit assumes rate 1 until then.
    static let minimumDriftSpan: Int64 = 250_000_000
    /// Crystals are good to ~±100 ppm each, so anything steeper is noise from a short, jittery span.
    static let maximumDrift = 500e-6

    /// Accepted samples in order of their local midpoints: a fixed-size ring, `samples` of them from `oldest` on.
    private var ring = [BaselinePoint](repeating: BaselinePoint(local: 0, offset: 0, roundTrip: 0), count: sampleCapacity)
    private var oldest = 0
    /// Samples currently in the window.
    private(set) var samples = 0

    private(set) var mapping: ClockMapping?
    /// The lowest round trip in the window: the offset of that sample is off by at most half of it,
    /// so it bounds how wrong the mapping can be near that sample, whatever the jitter.
    private(set) var bestRoundTrip: Int64?

    init() {}

    /// Takes one exchange and refits. Ignores samples that can't be real: time running backwards,
    /// a round trip that is negative or beyond `maximumRoundTrip`, or a midpoint earlier than the last
    /// sample's (one exchange at a time over TCP can't produce that).
    mutating func add(_ sample: ClockSample) {
        guard let point = BaselinePoint(sample) else { return }
        if let newest = newestPoint, point.local < newest.local { return }
        append(point)
        while point.local - self[0].local > Self.window { removeOldest() }
        refit()
    }

    // MARK: Ring

    private var newestPoint: BaselinePoint? { samples == 0 ? nil : self[samples - 1] }

    private subscript(index: Int) -> BaselinePoint { ring[(oldest + index) % ring.count] }

    private mutating func append(_ point: BaselinePoint) {
        if samples == ring.count { removeOldest() }
        ring[(oldest + samples) % ring.count] = point
        samples += 1
    }

    private mutating func removeOldest() {
        oldest = (oldest + 1) % ring.count
        samples -= 1
    }

    // MARK: Fit

    private mutating func refit() {
        guard let newest = newestPoint else { return }
        let points = (0..<samples).map { self[$0] }
        let best = points.min { $0.roundTrip < $1.roundTrip }!
        bestRoundTrip = best.roundTrip

        // Relative to the newest point and the best sample, so Doubles hold only small numbers.
        let times = points.map { Double($0.local - newest.local) }
        let excesses = points.map { Double($0.roundTrip - best.roundTrip) }
        let offsets = points.map { Double($0.offset &- best.offset) }
        let weights = excesses.map { 1 / (Self.timestampNoise * Self.timestampNoise + $0 * $0 / 4) }

        let totalWeight = weights.reduce(0, +)
        func weightedMean(_ values: [Double]) -> Double { zip(weights, values).map(*).reduce(0, +) / totalWeight }
        let meanTime = weightedMean(times), meanExcess = weightedMean(excesses), meanOffset = weightedMean(offsets)
        var stt = 0.0, ste = 0.0, see = 0.0, sto = 0.0, seo = 0.0
        for i in points.indices {
            let t = times[i] - meanTime, e = excesses[i] - meanExcess, o = offsets[i] - meanOffset
            stt += weights[i] * t * t
            ste += weights[i] * t * e
            see += weights[i] * e * e
            sto += weights[i] * t * o
            seo += weights[i] * e * o
        }

        let fitDrift = newest.local - self[0].local >= Self.minimumDriftSpan
        let determinant = stt * see - ste * ste
        var slope = 0.0, asymmetry = 0.0
        if fitDrift, determinant > 1e-9 * stt * see {
            slope = (sto * see - seo * ste) / determinant
            asymmetry = (stt * seo - ste * sto) / determinant
        } else if fitDrift, stt > 0 {
            slope = sto / stt  // every sample equally queued: nothing to learn about asymmetry
        } else if see > 0 {
            asymmetry = seo / see
        }
        // All of the excess on one side moves the offset by half of it, no more.
        if abs(asymmetry) > 0.5 {
            asymmetry = asymmetry > 0 ? 0.5 : -0.5
            if fitDrift, stt > 0 { slope = (sto - asymmetry * ste) / stt }
        }
        slope = min(max(slope, -Self.maximumDrift), Self.maximumDrift)

        // The line's offset at the newest point and excess 0, which becomes the mapping's reference.
        let level = meanOffset - asymmetry * meanExcess - slope * meanTime
        let offsetAtNewest = best.offset &+ Int64(level.rounded())
        mapping = ClockMapping(localReference: newest.local, remoteReference: newest.local &+ offsetAtNewest, rate: 1 + slope)
    }
}

/// What the fit needs of a sample: the local midpoint of the exchange, its offset and round trip.
private struct BaselinePoint: Sendable {
    var local: Int64
    var offset: Int64
    var roundTrip: Int64
}

extension BaselinePoint {
    init?(_ sample: ClockSample) {
        let (localElapsed, localOverflow) = sample.t4.subtractingReportingOverflow(sample.t1)
        let (remoteElapsed, remoteOverflow) = sample.t3.subtractingReportingOverflow(sample.t2)
        guard !localOverflow, !remoteOverflow, remoteElapsed >= 0,
              localElapsed >= remoteElapsed, localElapsed - remoteElapsed <= BaselineEstimator.maximumRoundTrip
        else { return nil }
        local = sample.t1 + localElapsed / 2
        offset = sample.offset
        roundTrip = localElapsed - remoteElapsed
    }
}
