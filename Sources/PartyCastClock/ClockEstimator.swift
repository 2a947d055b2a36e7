#if canImport(Glibc)
import Glibc
#endif

/// Turns clock exchanges into a mapping from the local clock to the broadcaster's.
///
/// With θ(t) = remote − local = θ₀ + drift × t, an exchange measures each direction on its own:
/// A = t2 − t1 = θ(t1) + outbound delay, B = t4 − t3 = −θ(t4) + inbound delay. Queueing only adds
/// delay, and so does every timestamp error here (t1, t3 taken just before sending, t2, t4 on receipt),
/// so the exchanges that met no queueing on a direction trace its lower envelope: θ + base delay for A,
/// −θ + base delay for B. The estimator fits each envelope (`DelayEnvelope`) and takes half their
/// difference: offset and drift, off only by half the difference of the base delays, which no
/// exchange can see. Each direction's quiet moments count on their own, where a round trip's offset
/// needs both at once; one-sided queueing (answers behind audio) lifts points off one envelope
/// instead of biasing them all; and a stall or a retransmission only makes points late, never low.
///
/// Samples may come in any order (replies overtake each other); storage is fixed, a refit is O(n).
public struct ClockEstimator: Sendable {
    /// How far back samples count: the drift's error shrinks with the span squared (more exchanges
    /// over a longer lever), and a drift that wanders 0.1 ppm a minute bends a line this long by
    /// under 1 µs.
    public static let window: Int64 = 64_000_000_000
    /// Bins per direction (`DelayEnvelope.binWidth` each): the whole window, however often the
    /// listener exchanges.
    public static let sampleCapacity = Int(window / DelayEnvelope.binWidth) + 1
    /// A reply this late is not queueing but a broken peer or a suspended host.
    public static let maximumRoundTrip: Int64 = 1_000_000_000

    /// Below this span a slope would be mostly jitter; the fit assumes rate 1 until then.
    static let minimumDriftSpan: Int64 = 500_000_000
    /// Crystals are good to ~±100 ppm each, so anything steeper is noise from a short, jittery span;
    /// and the steepest drift the mapping follows (`listener --simulate-clock` refuses more).
    public static let maximumDrift = 500e-6
    /// How far a one-way measurement may stray from the window's newest in the same direction: a
    /// round trip's worth of queueing plus a window of the steepest drift. Beyond it the remote clock
    /// jumped (a broken or hostile broadcaster; a restart is a new connection): not followed, and the
    /// envelope's arithmetic never sees values far enough apart to overflow.
    static let maximumStray: Int64 = maximumRoundTrip + Int64(Double(window) * maximumDrift)

    private var outbound = DelayEnvelope(capacity: sampleCapacity)
    private var inbound = DelayEnvelope(capacity: sampleCapacity)
    /// The same measurements negated: their lower envelopes are A's and B's upper ones, the lines
    /// over the greatest delays (`readTopEdge`).
    private var outboundTop = DelayEnvelope(capacity: sampleCapacity, edge: .top)
    private var inboundTop = DelayEnvelope(capacity: sampleCapacity, edge: .top)

    /// Whether `mapping` comes from the top edges of the delays rather than their floors.
    public private(set) var readsTopEdge = false
    /// How wide the interval of drifts the evidence allows is (the tops' where `readsTopEdge`): the
    /// mapping's error may grow by about this much a second away from the points it rests on.
    public private(set) var driftUncertainty = 2 * maximumDrift
    /// The drift the tops gave at the last refit that fitted them, read or not: what the next fit
    /// tells stragglers from the edge along.
    private var lastTopDrift: Double?
    /// The tops' drift interval of one to two seconds ago, and its reference (`checkedAgainstEarlier`).
    private var earlierTops: (slopes: ClosedRange<Double>, reference: Int64)?

    public private(set) var mapping: ClockMapping?
    /// How much the link queues: the median delay above the envelope of the newest exchanges, in
    /// the noisier direction (ns). What `ClockExchangeSchedule` sets its pace by.
    public private(set) var linkNoise: Int64?

    /// How far `mapping` may be from the broadcaster's clock, 99 % of the time, by the evidence (ns):
    /// half the least round trip along the fitted drift, which holds however the path's delays split
    /// between the two directions (a slower route one way, queueing that never drains on one side),
    /// and how far the drift's uncertainty moves the exchanges that set it (`bound`). Nil before
    /// the first fit, and while too few points lie near either floor to say how far apart they fall.
    public private(set) var errorBound: Int64?

    /// Exchanges in the window.
    public var samples: Int { outbound.exchanges }
    /// One-way measurements the last refit set aside as glitches, both directions (a bin's lowest each).
    public var glitchesSetAside: Int { outbound.setAside + inbound.setAside }

    public init() {}

    /// Takes one exchange and refits. Ignores samples that can't be real (time running backwards, a
    /// round trip that is negative or beyond `maximumRoundTrip`) and those older than the window.
    public mutating func add(_ sample: ClockSample) {
        add(contentsOf: CollectionOfOne(sample))
    }

    /// Takes exchanges that arrived together (answers held up by a stall, then released) and refits
    /// once: a refit costs far more than filing a point.
    public mutating func add(contentsOf samples: some Sequence<ClockSample>) {
        var newest: Int64?
        for sample in samples {
            guard let (up, down) = Self.measurements(sample), fits(up, outbound), fits(down, inbound) else { continue }
            let latest = inbound.count == 0 ? down.time : max(inbound[inbound.count - 1].time, down.time)
            let oldest = latest - Self.window
            guard up.time >= oldest, outbound.insert(up) else { continue }
            inbound.insert(down)
            outboundTop.insert(DelayEnvelope.Point(time: up.time, value: 0 &- up.value))
            inboundTop.insert(DelayEnvelope.Point(time: down.time, value: 0 &- down.value))
            outbound.removeOlder(than: oldest)
            inbound.removeOlder(than: oldest)
            outboundTop.removeOlder(than: oldest)
            inboundTop.removeOlder(than: oldest)
            newest = latest
        }
        if let newest { refit(at: newest) }
    }

    private mutating func refit(at reference: Int64) {
        let fitDrift = min(outbound.span, inbound.span) >= Self.minimumDriftSpan
        guard let upSpread = outbound.fit(at: reference, fitSlope: fitDrift, maximumSlope: Self.maximumDrift),
              let downSpread = inbound.fit(at: reference, fitSlope: fitDrift, maximumSlope: Self.maximumDrift)
        else { return }
        // How far short of its best the joint objective may fall and still be as good as the best,
        // given the points: about the gap between each envelope and its nearest points, both summed
        // (1.5 ×: the simulator's best of 1, 1.5, 2 and 3). Where the link queues, the few points
        // near each floor scatter more than the average density says (a relay or host not always
        // awake adds tens of µs to most): there twice their spacing, if that is wider.
        let spacings = outbound.floorSpacing + inbound.floorSpacing
        let queueing = max(upSpread, downSpread) >= Self.queueingLink
        var tolerance = 1.5 * (outbound.gap + inbound.gap)
        if queueing, spacings.isFinite { tolerance = max(tolerance, 2 * spacings) }
        var slopes = fitDrift ? jointDrift(.floors, tolerance: tolerance) : -Self.maximumDrift...Self.maximumDrift
        let allowed = fitDrift && spacings.isFinite
            ? jointDrift(.floors, tolerance: Self.floorTolerance * spacings) : nil
        // Where the link queues the floor is fuzzy: the least delays scatter for tens of µs above it
        // (a relay or a medium not always awake), and a lone lucky point that came 20–40 µs below the
        // rest tilts the drift and moves θ by half its depth. So the floors are read by the mean of
        // each direction's lowest few along the line (`DelayEnvelope.lowest`), within the drifts
        // their lowest alone allows.
        let fuzzyFloors = queueing ? allowed : nil
        if let fuzzyFloors {
            outbound.gatherLowest(over: fuzzyFloors)
            inbound.gatherLowest(over: -fuzzyFloors.upperBound ... -fuzzyFloors.lowerBound)
            slopes = jointDrift(.floors, tolerance: tolerance, within: fuzzyFloors)
        }
        // A sharp top pins the drift as the floors do, from other points: on a link that keeps
        // order few exchanges come near the floors, which leave the drift a few ppm loose for tens
        // of seconds where the tops' edge holds it to one or two. Joined only where the floors are
        // good (where poor, `readTopEdge` reads the tops along their own drift) and allow the
        // tops' drift: a relay late now and then can tilt a top that still looks sharp. The tops are
        // fitted only on a link that queues and where the floors give a bound.
        let tops = allowed != nil && queueing ? sharpTops(at: reference, floorDrift: Self.middle(of: slopes)) : nil
        if let tops, spacings < Self.poorFloors, let allowed, allowed.contains(Self.middle(of: tops.slopes)) {
            slopes = jointDrift(.both, tolerance: tolerance + tops.tolerance, within: allowed)
        }
        let drift = Self.middle(of: slopes)
        // A's line rises with θ, B's falls: θ = (A − B) / 2 at the reference, halving the bases first
        // so that clocks ~2⁶² apart do not overflow.
        let up = outbound.lowest(slope: drift), down = inbound.lowest(slope: -drift)
        let halfBases = (outbound.fitBase >> 1) &- (inbound.fitBase >> 1)
        let parity = Double(outbound.fitBase & 1) - Double(inbound.fitBase & 1)
        let middleRest = (up.level - down.level + parity) / 2
        let rest = fuzzyFloors == nil ? middleRest
            : (outbound.level(slope: drift, lowest: DelayEnvelope.lowest) - inbound.level(slope: -drift, lowest: DelayEnvelope.lowest) + parity) / 2
        mapping = ClockMapping(localReference: reference, remoteReference: reference &+ halfBases &+ Int64(rest.rounded()),
                               rate: 1 + drift)
        linkNoise = Int64(max(upSpread, downSpread).rounded())
        var driftError = slopes.upperBound - slopes.lowerBound
        if let allowed { driftError = max(driftError, allowed.upperBound - drift, drift - allowed.lowerBound) }
        // Each floor alone gives the drift too (A's rises with it, B's falls). Where the two disagree,
        // a base delay moved within the window, which the joint fit cannot tell from drift: a path
        // whose least delay depends on how often it is used (a relay's thread awake or asleep) tilts
        // it with an interval that looks sharp (the quiet relay, follow-ups after its first second:
        // the drift 0.4 ppm off, its interval 0.04 ppm wide; the bound held 96.4 % of the time).
        if min(outbound.span, inbound.span) >= Self.ownDriftSpan {
            driftError = max(driftError, abs(outbound.ownSlope + inbound.ownSlope))
        }
        // A + B = both delays ≥ 0 (θ cancels): the least round trip along the drift, its bases near 0.
        let leastRoundTrip = Double(outbound.fitBase &+ inbound.fitBase) + up.level + down.level
        // The bound is about θ from the lowest points alone: widened by how far the lowest few moved it.
        errorBound = spacings.isFinite ? Self.bound(leastRoundTrip: leastRoundTrip, driftError: driftError,
                                                    lever: max(abs(up.time), abs(down.time)))
            .map { $0 &+ Int64(abs(rest - middleRest).rounded(.up)) } : nil
        readsTopEdge = false
        driftUncertainty = slopes.upperBound - slopes.lowerBound
        if let tops {
            readTopEdge(at: reference, floorOffset: Offset(halfBases: halfBases, rest: rest), floorBound: errorBound,
                        tops: tops.slopes, width: tops.width)
        }
    }

    /// θ at the reference as the sum of a whole part and a fraction, as the fit forms it.
    private struct Offset {
        var halfBases: Int64
        var rest: Double
        func distance(from other: Offset) -> Double { Double(halfBases &- other.halfBases) + rest - other.rest }
    }

    /// Where every packet is held up to a fixed longest time and no load lifts a delay past it (a
    /// relay's uniform holds, a queue of bounded length), the greatest delays form an edge as sharp
    /// as the least ones, and on the busy direction a sharper one: there an exchange seldom finds
    /// the queue empty, so few come near the floor, but however long it queues it is never later
    /// than the longest hold, so every exchange lies under the top and many near it. Fitted as the
    /// floors are (the line over all points lowest at their mean time, one drift for both).
    ///
    /// Taken only where the evidence says there is such an edge, on a link that queues: after
    /// `topEdgeSpan`; stalls' stragglers (`DelayEnvelope.burstMargin`) a minority of the window;
    /// both tops at least `leastWall` above their floors; each quarter of the window reaching within
    /// `sharpness` of the wall's height of the others (a tail, as Wi-Fi's bursts and retransmissions
    /// draw, reaches further now and then). Returns the drifts the tops allow (checked against
    /// those of a second ago), how wide their own interval is, and the tolerance they were found
    /// with (`jointDrift`); nil where there is no such edge.
    private mutating func sharpTops(at reference: Int64, floorDrift: Double)
        -> (slopes: ClosedRange<Double>, width: Double, tolerance: Double)? {
        // Stragglers are told from the edge along the drift the tops gave last, else the floors'.
        let topDrift = lastTopDrift ?? floorDrift
        guard min(outbound.span, inbound.span) >= Self.topEdgeSpan,
              outboundTop.fit(at: reference, fitSlope: true, maximumSlope: Self.maximumDrift, alongSlope: -topDrift) != nil,
              inboundTop.fit(at: reference, fitSlope: true, maximumSlope: Self.maximumDrift, alongSlope: topDrift) != nil,
              Double(max(outboundTop.burstBins, inboundTop.burstBins)) <= Self.maximumBurstShare * Double(outboundTop.count)
        else { return nil }
        // −B rises with θ and −A falls: the joint slope is the drift, found on −B's side.
        let tolerance = 1.5 * (outboundTop.gap + inboundTop.gap)
        let own = jointDrift(.tops, tolerance: tolerance)
        let slopes = checkedAgainstEarlier(own, at: reference)
        let drift = Self.middle(of: slopes)
        lastTopDrift = drift
        // The wall's height each way: the top over the floor (the floor's levels at its own drift,
        // close enough to judge a height by, and steadier than the tops' early on).
        let upWall = -(Double(outboundTop.fitBase &+ outbound.fitBase) + outboundTop.level(slope: -drift) + outbound.level(slope: floorDrift))
        let downWall = -(Double(inboundTop.fitBase &+ inbound.fitBase) + inboundTop.level(slope: drift) + inbound.level(slope: -floorDrift))
        guard upWall >= Self.leastWall, downWall >= Self.leastWall,
              let upSpread = outboundTop.quarterSpread(slope: -drift), upSpread <= Self.sharpness * upWall,
              let downSpread = inboundTop.quarterSpread(slope: drift), downSpread <= Self.sharpness * downWall
        else { return nil }
        return (slopes, own.upperBound - own.lowerBound, tolerance)
    }

    /// The tops' drift interval within the one of one to two seconds ago (widened by
    /// `earlierWidening` a second), where the two overlap; else as it is. Early on, one top point
    /// lifted past the edge at the window's newer end tilts the tops' line by tens of ppm within a
    /// tenth of a second (seed 602 of bench-sync's judged link kept in order: θ 174 µs off for a
    /// second); held within the earlier interval, that spell lasts a few tenths. The reference is
    /// a second old, not the last refit's: intersecting refit after refit compounded, an early wide
    /// interval narrowing onto a wrong one and holding it (logs of 32–85 µs went over 1 ms).
    private mutating func checkedAgainstEarlier(_ slopes: ClosedRange<Double>, at reference: Int64) -> ClosedRange<Double> {
        guard let earlier = earlierTops, reference >= earlier.reference,
              reference &- earlier.reference < 2 * Self.earlierLag else {
            earlierTops = (slopes, reference)
            return slopes
        }
        if reference &- earlier.reference >= Self.earlierLag { earlierTops = (slopes, reference) }
        let widening = Self.earlierWidening * Double(reference &- earlier.reference) / 1e9
        let allowed = (earlier.slopes.lowerBound - widening)...(earlier.slopes.upperBound + widening)
        guard allowed.overlaps(slopes) else { return slopes }
        return max(allowed.lowerBound, slopes.lowerBound)...min(allowed.upperBound, slopes.upperBound)
    }

    /// How old the interval the tops' drift is checked against gets before it is renewed.
    static let earlierLag: Int64 = 1_000_000_000
    /// How far a second the drift may honestly move beyond that interval (a crystal's moves by
    /// well under 1 ppm a minute; the interval itself, early, by tens of ppm a second).
    static let earlierWidening = 10e-6

    /// Where the floors are poor and the sharp tops (`sharpTops`) lie closer together, the two tops
    /// give θ along the middle of the drifts they allow (`tops`) when the longest holds are alike
    /// both ways: taken where θ from the tops lies within the floors' own bound of theirs. The
    /// bound it gives rests on the floors, so it holds however unlike the two holds are. Where the
    /// floors give no bound (`floorBound` nil: along their own drift, loose by hundreds of ppm on
    /// such a link, their least round trip falls below 0), the floors taken along the tops' drift
    /// judge the tops instead: without that, the mapping fell back to the floors' θ, 0.45 ms off,
    /// for a tenth of a second at a time, in and out for a second (bench-sync's judged link, a late
    /// joiner 9 s in: a pairwise p99 of 272 µs). `width` is how wide the tops' own drift interval
    /// is, which the bound takes as the drift's error: `tops` may be narrower (`checkedAgainstEarlier`).
    private mutating func readTopEdge(at reference: Int64, floorOffset: Offset, floorBound: Int64?, tops: ClosedRange<Double>, width: Double) {
        let drift = Self.middle(of: tops)
        let floorSpacings = outbound.floorSpacing + inbound.floorSpacing
        guard floorSpacings >= Self.poorFloors, outboundTop.floorSpacing + inboundTop.floorSpacing < floorSpacings else { return }
        let upTop = outboundTop.level(slope: -drift), downTop = inboundTop.level(slope: drift)
        // θ = (−B's line − −A's line) / 2: (θ − top down) − (−θ − top up), equal tops cancelling;
        // the mean of the whole window's and the blocks' (`blockwiseRest`).
        let parity = Double(inboundTop.fitBase & 1) - Double(outboundTop.fitBase & 1)
        var rest = (downTop - upTop + parity) / 2
        if let blockwise = blockwiseRest(drift: drift) { rest = (rest + blockwise + parity / 2) / 2 }
        let offset = Offset(halfBases: (inboundTop.fitBase >> 1) &- (outboundTop.fitBase >> 1), rest: rest)
        let moved = offset.distance(from: floorOffset)
        // The floors' interval taken along the tops' drift instead (which needs only each direction's
        // longest hold to stay put, not the two to match) is narrower where the floors pin the drift
        // poorly; widened by the tops' own drift interval and by how far θ lies from its middle.
        let upFloor = outbound.lowest(slope: drift), downFloor = inbound.lowest(slope: -drift)
        let middle = Offset(halfBases: (outbound.fitBase >> 1) &- (inbound.fitBase >> 1),
                            rest: (upFloor.level - downFloor.level + Double(outbound.fitBase & 1) - Double(inbound.fitBase & 1)) / 2)
        let alongTops = Self.bound(leastRoundTrip: Double(outbound.fitBase &+ inbound.fitBase) + upFloor.level + downFloor.level,
                                   driftError: width, lever: max(abs(upFloor.time), abs(downFloor.time)))
        let fromMiddle = abs(offset.distance(from: middle))
        if let floorBound {
            guard abs(moved) <= Double(floorBound) else { return }
            errorBound = min(floorBound &+ Int64(abs(moved).rounded(.up)), alongTops.map { $0 &+ Int64(fromMiddle.rounded(.up)) } ?? .max)
        } else {
            guard let alongTops, fromMiddle <= Double(alongTops) else { return }
            errorBound = alongTops &+ Int64(fromMiddle.rounded(.up))
        }
        mapping = ClockMapping(localReference: reference, remoteReference: reference &+ offset.halfBases &+ Int64(offset.rest.rounded()),
                               rate: 1 + drift)
        readsTopEdge = true
        driftUncertainty = width
    }

    /// θ's rest over the tops' half bases (parity aside), read block by block: each block's
    /// greatest delays both ways give θ there as the whole window's do, and a line through the
    /// blocks' gives it now. The longest holds wander for seconds at a time, often both ways at once
    /// (one relay, one busy medium, as a CPU hog slows it): the whole window's edges rest on points
    /// seconds apart and read that wander as θ moving, where a block's two edges move together and
    /// cancel. Each block's edge is coarser, so the two are averaged. Nil below `leastBlocks`.
    private mutating func blockwiseRest(drift: Double) -> Double? {
        let ups = outboundTop.blockLows(slope: -drift), downs = inboundTop.blockLows(slope: drift)
        blockLine.removeAll()
        for block in ups.indices where ups[block].isFinite && downs[block].isFinite {
            blockLine.append(time: -(Double(block) + 0.5) * Double(DelayEnvelope.blockWidth), value: (downs[block] - ups[block]) / 2)
        }
        return blockLine.count >= Self.leastBlocks ? blockLine.level() : nil
    }

    /// Fewer blocks than this give no line worth the whole window's edges.
    static let leastBlocks = 4
    private var blockLine = MedianLine(capacity: Int(window / DelayEnvelope.blockWidth) + 1)

    /// Below this span each floor's own drift is mostly the jitter of its few points: on loopback,
    /// 0.6 s after join, theirs disagreed enough to lift the bound past 0.5 ms and hold the party's
    /// start for a clock that had settled.
    static let ownDriftSpan: Int64 = 2_000_000_000
    /// Below this span a top edge's quarters are too thin to tell an edge from a tail.
    static let topEdgeSpan: Int64 = 2_000_000_000
    /// Floors whose nearest points lie this far apart, both directions' spacings summed (ns), leave
    /// room for the tops to do better; closer, they are good to ~10 µs and the tops, which assume the
    /// longest holds alike both ways (a stronger assumption than alike base delays), are not read.
    /// On bench-sync's judged link kept in order they sum to 35–370 µs, on its 0–5 ms link to 2–11
    /// µs, where reading the tops took the pairwise p99 from 21–33 µs to 65.
    static let poorFloors = 20_000.0
    /// A top less than this above the floor is a quiet link's, where the floors are better.
    static let leastWall = 1_000_000.0
    /// How far apart the quarters' tops may lie, as a share of the wall's height.
    static let sharpness = 0.05
    /// Stalls' bins (with their neighbours) may make up at most this share of the window.
    static let maximumBurstShare = 0.2

    /// A link whose median delay above the floor is this long (ns) queues: jitter of milliseconds,
    /// not a quiet link's tens of µs.
    static let queueingLink = 300_000.0

    /// How far below its best the joint objective may lie at the true drift, in floor spacings summed
    /// over both directions. At the true drift each line lies below its nearest point by a gap of
    /// about one spacing, exponentially distributed, so the two gaps' sum stays under 6.6 spacings
    /// 99 % of the time when the spacings are equal: 3.3 × their sum. 6 ×, because on a path whose
    /// floor is fuzzy (a relay, a host that is not always awake: partycast-netem here) the density
    /// rises above the floor and the lowest points' spacing understates the lowest gap, the more so
    /// the more exchanges there are: at 4 ×, once the pace held where order is kept, one far listener
    /// of 124 replayed bench-sync logs (the Wi-Fi row) was covered 96.9 % of the time by the bound of
    /// then, which read the floors.
    static let floorTolerance = 6.0

    /// Along the true drift, θ lies at or below every A and at or above every −B, however the least
    /// delays split between the directions: within half the least round trip of the middle, which
    /// is where the mapping puts it. Along the fitted drift instead, each end moves by the drift's
    /// error (ppm as a fraction: the larger of the fit's own interval, twice its half-width, and how
    /// far from the fit's drift the floors allow, `floorTolerance`) times how far from the reference
    /// the exchange that sets it lies. So the round trip is certain and only the drift is a 99 %
    /// matter. Nil where the exchanges contradict each other (a round trip below 0).
    static func bound(leastRoundTrip: Double, driftError: Double, lever: Double) -> Int64? {
        let bound = leastRoundTrip / 2 + driftError * lever
        return leastRoundTrip >= 0 && bound.isFinite && bound < 1e15 ? Int64(bound.rounded(.up)) : nil
    }

    /// Which envelopes `jointDrift` fits: A's floor and B's, −B's and −A's (the tops), or all four.
    private enum Edges { case floors, tops, both }

    /// One slope for both envelopes of each pair (rising on A, falling on B; or on −B and −A, the
    /// tops), from the two-sided form of the linear programme: how high the lines can be at their
    /// points' mean times together, summed over the pairs. Each envelope's lowest points constrain
    /// it, so it is as good as one fit of all their points, where averaging separate slopes gains
    /// only the square root of their number. The objective is concave and piecewise linear (a sum of
    /// such), so its maximum is at a hull edge's slope or at a bound; hulls have tens of vertices.
    ///
    /// Where few points pin the slope, the objective's top is nearly flat, and its maximum sits at one
    /// end of the flat, wherever the one lowest point happened to fall: drift errors of 10 ppm for
    /// seconds, early on a jittery link. So what it returns is the slopes whose objective comes within
    /// `tolerance` of the maximum: the fit takes their middle, the bound their half-width.
    /// partycast-clock-sim, 64 seeds judged from 11 s, p99 / worst run's p99, before → after: the
    /// judged link (then, where packets overtake) 41 / 88 → 33 / 53 µs, through the starved relay
    /// 80 / 182 → 75 / 129 µs, 0–20 ms of jitter 42 / 83 → 40 / 75 µs, 0–5 ms 33 / 49 → 27 / 35 µs,
    /// 0–20 ms down only 17 / 85 → 21 / 51 µs; quiet links unchanged.
    ///
    /// `within` (the drifts the floors allow) reads the floors by their lowest few points
    /// (`DelayEnvelope.gatherLowest` over those drifts first), and looks for slopes only there. The
    /// mean of the lowest few breaks where any two points cross, not only at hull edges, so the best
    /// is found by a golden-section search of the concave objective instead.
    private func jointDrift(_ edges: Edges, tolerance: Double, within: ClosedRange<Double>? = nil) -> ClosedRange<Double> {
        let range = within ?? -Self.maximumDrift...Self.maximumDrift
        // The envelopes are read in place: a copy would retain their every buffer at every step.
        func objective(_ slope: Double) -> Double {
            var sum = 0.0
            if edges != .tops {
                sum += within == nil ? outbound.level(slope: slope) + inbound.level(slope: -slope)
                    : outbound.level(slope: slope, lowest: DelayEnvelope.lowest) + inbound.level(slope: -slope, lowest: DelayEnvelope.lowest)
                sum += slope * (outbound.meanTime - inbound.meanTime)
            }
            if edges != .floors {
                sum += inboundTop.level(slope: slope) + outboundTop.level(slope: -slope) + slope * (inboundTop.meanTime - outboundTop.meanTime)
            }
            return sum
        }
        var best = (slope: range.lowerBound, value: objective(range.lowerBound))
        func consider(_ slope: Double) {
            guard range.contains(slope) else { return }
            let value = objective(slope)
            if value > best.value { best = (slope, value) }
        }
        consider(range.upperBound)
        func considerEdges(of envelope: DelayEnvelope, sign: Double) {
            guard envelope.hullCount >= 2 else { return }
            for index in 1..<envelope.hullCount {
                let (a, b) = (envelope.vertex(index - 1), envelope.vertex(index))
                consider(sign * (b.value - a.value) / (b.time - a.time))
            }
        }
        if within == nil {
            if edges != .tops { considerEdges(of: outbound, sign: 1); considerEdges(of: inbound, sign: -1) }
            if edges != .floors { considerEdges(of: inboundTop, sign: 1); considerEdges(of: outboundTop, sign: -1) }
        } else {
            let ratio = (5.0.squareRoot() - 1) / 2
            var low = range.lowerBound, high = range.upperBound
            var left = high - ratio * (high - low), right = low + ratio * (high - low)
            var leftValue = objective(left), rightValue = objective(right)
            while high - low > Self.slopePrecision {
                if leftValue > rightValue {
                    (high, right, rightValue) = (right, left, leftValue)
                    left = high - ratio * (high - low)
                    leftValue = objective(left)
                } else {
                    (low, left, leftValue) = (left, right, rightValue)
                    right = low + ratio * (high - low)
                    rightValue = objective(right)
                }
            }
            consider((low + high) / 2)
        }
        // Concave: the slopes within the tolerance form an interval around the best; bisect for its ends.
        let floor = best.value - tolerance
        func end(toward bound: Double) -> Double {
            guard objective(bound) < floor else { return bound }
            var inside = best.slope, outside = bound
            while abs(outside - inside) > Self.slopePrecision {
                let middle = (inside + outside) / 2
                if objective(middle) >= floor { inside = middle } else { outside = middle }
            }
            return inside
        }
        return end(toward: range.lowerBound)...end(toward: range.upperBound)
    }

    /// How closely `jointDrift` finds slopes: 1e-4 ppm moves a point at the window's far end by 6 ns.
    static let slopePrecision = 1e-10

    /// The drift a fit takes from the drifts it allows.
    private static func middle(of slopes: ClosedRange<Double>) -> Double { (slopes.lowerBound + slopes.upperBound) / 2 }

    private func fits(_ point: DelayEnvelope.Point, _ envelope: DelayEnvelope) -> Bool {
        guard envelope.count > 0 else { return true }
        let (stray, overflow) = point.value.subtractingReportingOverflow(envelope[envelope.count - 1].value)
        return !overflow && stray.magnitude <= UInt64(Self.maximumStray)
    }

    /// A at t1 and B at t4, or nil for an exchange that can't be real.
    private static func measurements(_ sample: ClockSample) -> (DelayEnvelope.Point, DelayEnvelope.Point)? {
        let (localElapsed, localOverflow) = sample.t4.subtractingReportingOverflow(sample.t1)
        let (remoteElapsed, remoteOverflow) = sample.t3.subtractingReportingOverflow(sample.t2)
        let (up, upOverflow) = sample.t2.subtractingReportingOverflow(sample.t1)
        let (down, downOverflow) = sample.t4.subtractingReportingOverflow(sample.t3)
        guard !localOverflow, !remoteOverflow, !upOverflow, !downOverflow, remoteElapsed >= 0,
              localElapsed >= remoteElapsed, localElapsed - remoteElapsed <= maximumRoundTrip
        else { return nil }
        return (DelayEnvelope.Point(time: sample.t1, value: up), DelayEnvelope.Point(time: sample.t4, value: down))
    }
}
