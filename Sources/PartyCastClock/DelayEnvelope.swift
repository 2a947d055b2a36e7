/// One direction's one-way measurements (local time, remote − local) of the exchanges in the window,
/// and the line below them that `ClockEstimator` reads the clock from.
///
/// Queueing only adds delay, so every point lies on or above θ(t) + base delay, and the points that
/// met no queueing trace that line from below: the lower envelope. Its estimate is the line under all
/// points with the greatest value at their mean time (Moon, Skelly and Towsley's linear programme),
/// which is the lower convex hull's edge spanning that time. Its error shrinks like jitter / n, where
/// averages (least squares, medians) only reach jitter / √n and keep the bias of one-sided queueing.
///
/// Storage is a time-sorted ring of `binWidth` bins, each holding its lowest point, so the window's
/// length does not depend on how often the listener exchanges. Another point of a bin could only
/// matter if it lay within drift × `binWidth` (15 µs at 150 ppm) of the lowest, which jitter makes
/// rare, and a quiet link exchanges in pairs every 500 ms: a pair a bin at most, whose lowest point is
/// the follow-up that found the path awake.
struct DelayEnvelope: Sendable {
    struct Point: Sendable {
        var time: Int64
        var value: Int64
    }

    /// A line under the points: `base + level` at `reference`, rising by `slope` per nanosecond.
    struct Line: Sendable {
        var reference: Int64
        var base: Int64
        var level: Double
        var slope: Double

        /// Relative to `base`.
        func value(at time: Int64) -> Double { level + slope * Double(time &- reference) }
    }

    static let binWidth: Int64 = 100_000_000
    /// Points that lie this far below the line the rest of the window draws are glitches (a bad
    /// timestamp, a path that is faster for a moment), not the link: the envelope ignores them.
    /// - `time`: how close in time the rest may not be, so a burst of glitches cannot vouch for itself;
    ///   at most an eighth of the span, or early on the rest would be too few and too far to judge by.
    /// - `margin`: the least depth that counts (timestamping noise is a few µs).
    /// - `spacings`: depth in units of the gap expected between the envelope and its nearest points:
    ///   2 × median excess / exchanges under uniform jitter, or the rest's own spacing near the floor
    ///   where that is wider (a link that keeps order: most points queue behind others, and one that
    ///   came alone lies far below the rest's lowest without being a glitch).
    static let glitchTime: Int64 = 1_000_000_000
    static let glitchMargin = 20_000.0
    /// `spacings` on the floor; on the top a tighter 8, since no relay's wake-up blurs the longest
    /// hold as it blurs the least (on bench-sync's judged link kept in order, 32 let through a point
    /// that held θ 80 µs off for 15 s).
    var glitchSpacings: Double { edge == .floor ? 32 : 8 }
    /// Glitch hunts per fit, each removing a glitch and its burst; the top's window holds a few more.
    var glitchRounds: Int { edge == .floor ? 3 : 8 }

    /// Which edge of the delays the envelope follows: `ClockEstimator` files the top's points
    /// negated, so that it too is a lower envelope. Only the top sets stalls aside (`setAsideStragglers`):
    /// a stall lifts delays, which the floor never sees.
    enum Edge: Sendable { case floor, top }
    let edge: Edge
    /// A top bin this far above the median of the window's (ns) is a stall's straggler, not the edge.
    /// Not less: a relay that a CPU hog keeps waiting lifts some bins' greatest delays 1–2 ms past
    /// it, and at 2 ms (over the median of its neighbours) a fifth of one listener's bins were set
    /// aside (bench-sync's judged link kept in order, seed 451), more than stalls explain, so the
    /// tops went unread for 18 s.
    static let burstMargin = 5_000_000.0
    /// The median excess is taken over the newest exchanges only, so it follows the link as it changes.
    static let spreadPoints = 64

    /// A bin's lowest point and how many exchanges fell in it.
    private struct Bin: Sendable {
        var point: Point
        var exchanges: Int
    }

    private var ring: [Bin]
    private var start = 0
    /// Bins in the ring.
    private(set) var count = 0
    /// Exchanges in the ring's bins.
    private(set) var exchanges = 0
    /// The newest exchanges' points, in arrival order, for the spread.
    private var recent: [Point]
    private var recentCount = 0
    /// Scratch, sized once: the hull's vertices (positions), glitch marks, recent and binned excesses.
    private var hull: [Int]
    private var glitch: [Bool]
    /// The top's bins along a slope, sorted (`setAsideStragglers`).
    private var ordered: [(value: Double, position: Int)]
    private var excesses: [Double]
    private var binExcesses: [Double]
    /// `gatherLowest`'s points: time from the last fit's reference, value from its base.
    private var candidates: [(time: Double, value: Double)]
    private var candidateCount = 0
    /// Per block of the window (`blockLows`).
    private var blockLowest: [Double]
    private var blockBins: [Int]

    init(capacity: Int, edge: Edge = .floor) {
        self.edge = edge
        ring = Array(repeating: Bin(point: Point(time: 0, value: 0), exchanges: 0), count: capacity)
        recent = Array(repeating: Point(time: 0, value: 0), count: Self.spreadPoints)
        hull = Array(repeating: 0, count: capacity)
        glitch = Array(repeating: false, count: capacity)
        ordered = Array(repeating: (0, 0), count: edge == .top ? capacity : 0)
        excesses = Array(repeating: 0, count: Self.spreadPoints)
        binExcesses = Array(repeating: 0, count: capacity)
        candidates = Array(repeating: (0, 0), count: edge == .floor ? capacity : 0)
        let blocks = edge == .top ? capacity / Int(Self.blockWidth / Self.binWidth) + 1 : 0
        blockLowest = Array(repeating: 0, count: blocks)
        blockBins = Array(repeating: 0, count: blocks)
    }

    /// The lowest point of the bin at `position`, oldest first.
    subscript(position: Int) -> Point { ring[(start + position) % ring.count].point }

    var span: Int64 { count < 2 ? 0 : self[count - 1].time - self[0].time }

    private static func bin(of time: Int64) -> Int64 { time >= 0 ? time / binWidth : (time + 1) / binWidth - 1 }

    /// Files the point in its bin. Replies that overtook others land a bin or two from the end, so
    /// the search is short. When full, the oldest bin goes, or the new point if its bin is the oldest.
    @discardableResult
    mutating func insert(_ point: Point) -> Bool {
        let bin = Self.bin(of: point.time)
        var position = count
        while position > 0, Self.bin(of: self[position - 1].time) > bin { position -= 1 }
        if position > 0, Self.bin(of: self[position - 1].time) == bin {
            let index = (start + position - 1) % ring.count
            if point.value < ring[index].point.value { ring[index].point = point }
            ring[index].exchanges += 1
        } else {
            if count == ring.count {
                guard position > 0 else { return false }
                removeOldest()
                position -= 1
            }
            for moved in stride(from: count, to: position, by: -1) {
                ring[(start + moved) % ring.count] = ring[(start + moved - 1) % ring.count]
            }
            ring[(start + position) % ring.count] = Bin(point: point, exchanges: 1)
            count += 1
        }
        exchanges += 1
        recent[recentCount % recent.count] = point
        recentCount += 1
        return true
    }

    mutating func removeOlder(than time: Int64) {
        while count > 0, self[0].time < time { removeOldest() }
    }

    private mutating func removeOldest() {
        exchanges -= ring[start].exchanges
        start = (start + 1) % ring.count
        count -= 1
    }

    // MARK: Fit

    /// Sets glitches aside, judged by this direction's own envelope (with `fitSlope` false the line is
    /// level: a slope from a short span would be mostly jitter; slopes are clamped to ±`maximumSlope`),
    /// and leaves the hull of the rest for `vertex` and `level(slope:)`. Returns the median excess of
    /// the newest points above the envelope: how much the link queues.
    ///
    /// On the top, `alongSlope` (the drift last read, as this envelope's slope) sets aside the points
    /// lifted past the edge first (`setAsideStragglers`); nil if that leaves none.
    mutating func fit(at reference: Int64, fitSlope: Bool, maximumSlope: Double, alongSlope: Double = 0) -> Double? {
        guard count > 0 else { return nil }
        for position in 0..<count { glitch[position] = false }
        burstBins = 0
        if edge == .top { setAsideStragglers(slope: alongSlope) }
        let base = self[0].value
        // A broadcaster picks every delay, and on the top may have them all set aside.
        guard var line = support(at: reference, base: base, fitSlope: fitSlope, maximumSlope: maximumSlope, around: nil)
        else { return nil }
        let spread = medianExcess(above: line)
        let jitterThreshold = Self.glitchMargin + glitchSpacings * 2 * spread / Double(exchanges)
        rounds: for _ in 0..<glitchRounds {
            for vertex in supportVertices(of: line) {
                let time = self[vertex].time, near = min(Self.glitchTime, span / 8)
                let neighbourhood = (time - near)...(time + near)
                guard let others = support(at: reference, base: base, fitSlope: fitSlope, maximumSlope: maximumSlope,
                                           around: neighbourhood),
                      depth(of: vertex, below: others) > jitterThreshold else { continue }
                // Only then the rest's spacing (a pass over the window per lowest point it reads).
                let restSpacing = spacingOfLowest(fillExcesses(above: others, outside: neighbourhood))
                let threshold = restSpacing.isFinite
                    ? max(jitterThreshold, Self.glitchMargin + glitchSpacings * restSpacing) : jitterThreshold
                guard depth(of: vertex, below: others) > threshold else { continue }
                for position in 0..<count where neighbourhood.contains(self[position].time)
                    && depth(of: position, below: others) > threshold {
                    glitch[position] = true
                }
                line = support(at: reference, base: base, fitSlope: fitSlope, maximumSlope: maximumSlope, around: nil)!
                continue rounds
            }
            break
        }
        // The last hull built may have been one without a neighbourhood: rebuild the one of record.
        _ = support(at: reference, base: base, fitSlope: fitSlope, maximumSlope: maximumSlope, around: nil)
        gap = binnedGap(above: line)
        setAside = glitch[0..<count].count(where: { $0 })
        return spread
    }

    /// Bins whose points the last fit set aside as glitches.
    private(set) var setAside = 0

    /// `setAsideStragglers` judges a point by the one this many places above it, which may lie at most
    /// `stragglerSpacings` median spacings a place away (24 in all). At 12 a place, a straggler
    /// 0.47 ms past the edge (bench-sync's judged link kept in order, seed 454) held θ 230 µs off for
    /// 5 s. Eight places, not four: a relay a timer tick late lifts a point ~1 ms past the edge every
    /// ten seconds or so, and at ~300 exchanges a second five or more such points in a window vouched
    /// for each other; the up edge's quarters then spread past `ClockEstimator.sharpness`, the tops
    /// went unread, and the floors held θ 0.3–1.3 ms off for 10 s (CI's order-kept link, seed 11).
    static let stragglerSpan = 8
    static let stragglerSpacings = 3.0

    /// Sets aside, along `slope` (the drift last read: a slope a few ppm off moves a point by far less
    /// than `burstMargin` over the window), what lies past the top's edge, in one sort of the bins:
    /// - a stall's stragglers: bins more than `burstMargin` below the median (whatever was sent in the
    ///   stall, and up to a hold before it, arrives together at its end), with their two neighbours,
    ///   since a bin cut at the stall's end holds stragglers only just past the edge;
    /// - then, lowest first, each point more than `stragglerSpacings` median spacings a place below
    ///   the `stragglerSpan`-th above it, the median spacing being the lowest quarter's: the edge's
    ///   points crowd together, and one a late relay lifted past it (on bench-sync's judged link kept
    ///   in order, four in a minute, 0.2–0.4 ms past an edge whose nearest points lay ~10 µs apart)
    ///   stands alone. The glitch hunt, which weighs only the points the line rests on, let those
    ///   near the window's newer end through, and they tilted the drift by 9 ppm.
    private mutating func setAsideStragglers(slope: Double) {
        guard count > 4 * Self.stragglerSpan else { return }
        for position in 0..<count {
            ordered[position] = (Double(self[position].value &- self[0].value) - slope * Double(self[position].time &- self[0].time),
                                 position)
        }
        ordered[0..<count].sort { $0.value < $1.value }
        let median = ordered[count / 2].value
        for (value, position) in ordered[0..<count] {
            guard value < median - Self.burstMargin else { break }
            for marked in max(0, position - 1)...min(count - 1, position + 1) { glitch[marked] = true }
        }
        burstBins = glitch[0..<count].count(where: { $0 })
        var points = 0
        for (value, position) in ordered[0..<count] where !glitch[position] {
            ordered[points] = (value, position)
            points += 1
        }
        let quarter = points / 4, span = Self.stragglerSpan
        guard quarter > span else { return }
        for index in 0..<quarter { binExcesses[index] = ordered[index + 1].value - ordered[index].value }
        binExcesses[0..<quarter].sort()
        let spacing = binExcesses[quarter / 2]
        var lowest = 0
        while lowest + span < quarter,
              ordered[lowest + span].value - ordered[lowest].value > Self.stragglerSpacings * Double(span) * spacing {
            glitch[ordered[lowest].position] = true
            lowest += 1
        }
    }

    /// Bins the last fit's `setAsideStragglers` set aside as stalls'.
    private(set) var burstBins = 0

    /// How far apart the lowest points of the window's four quarters (in time) lie along `slope`,
    /// glitches left out (ns): tens of µs under a sharp edge that no delay passes, milliseconds under
    /// a tail. Nil if a quarter has no point.
    func quarterSpread(slope: Double) -> Double? {
        guard count >= 4, span > 0 else { return nil }
        var lowest = [Double](repeating: .infinity, count: 4)
        let first = self[0].time
        for position in 0..<count where !glitch[position] {
            let point = self[position]
            let quarter = min(3, Int(Double(point.time &- first) / Double(span) * 4))
            let value = Double(point.value &- fitBase) - slope * Double(point.time &- fitReference)
            lowest[quarter] = min(lowest[quarter], value)
        }
        guard let high = lowest.max(), high.isFinite, let low = lowest.min() else { return nil }
        return high - low
    }

    /// Blocks of `blockWidth` the top is read in as well as whole (`ClockEstimator.blockwiseRest`).
    static let blockWidth: Int64 = 2_000_000_000

    /// The lowest kept point along `slope` in each `blockWidth` back from the last fit's reference,
    /// newest first, relative to the fit's base; infinity where a block kept fewer than half its
    /// bins (a stall's, a gap in the exchanges), whose lowest would lie far from the edge.
    mutating func blockLows(slope: Double) -> ArraySlice<Double> {
        let blocks = blockLowest.count, binsPerBlock = Int(Self.blockWidth / Self.binWidth)
        for block in 0..<blocks { (blockLowest[block], blockBins[block]) = (.infinity, 0) }
        for position in 0..<count where !glitch[position] {
            let point = self[position]
            let age = fitReference &- point.time
            guard age >= 0, age / Self.blockWidth < Int64(blocks) else { continue }
            let block = Int(age / Self.blockWidth)
            let value = Double(point.value &- fitBase) - slope * Double(point.time &- fitReference)
            blockLowest[block] = min(blockLowest[block], value)
            blockBins[block] += 1
        }
        for block in 0..<blocks where 2 * blockBins[block] < binsPerBlock { blockLowest[block] = .infinity }
        return blockLowest[...]
    }

    /// How close above the last fit's line its nearest points lie, typically: the median excess of
    /// the bins' lowest points over the number of bins (ns). It depends only on the window's points,
    /// not on the order they came in, and one point more barely moves it.
    private(set) var gap = 0.0

    /// How far apart the lowest points above the last fit's line lie, each from the next (ns): the
    /// k-th lowest bin's excess over k − 1 (the line rests on the lowest, so k − 1 spacings). Near
    /// the floor the points fall like a Poisson process of this mean spacing, so the true floor lies
    /// below the lowest point by at most ln(1/α) spacings with probability 1 − α. Unlike `gap`, it
    /// reads only the floor's neighbourhood: on a link that keeps order most points queue behind
    /// others, far above, and say nothing of how often one comes near the floor.
    private(set) var floorSpacing = 0.0
    static let floorPoints = 8

    private mutating func binnedGap(above line: Line) -> Double {
        let bins = fillExcesses(above: line, outside: nil)
        floorSpacing = spacingOfLowest(bins)
        guard bins > 0 else { return 0 }
        binExcesses[0..<bins].sort()
        return binExcesses[bins / 2] / Double(bins)
    }

    /// `floorSpacing` of the first `bins` excesses of `binExcesses` (reordering them): infinite with
    /// fewer than two.
    private mutating func spacingOfLowest(_ bins: Int) -> Double {
        let k = min(Self.floorPoints, bins)
        guard k >= 2 else { return .infinity }
        selectLowest(k, of: bins)
        return max(0, binExcesses[k - 1]) / Double(k - 1)
    }

    /// Moves the `k` lowest of the first `bins` of `binExcesses` to its front, in order: k passes of
    /// a selection, cheaper than a sort of them all.
    private mutating func selectLowest(_ k: Int, of bins: Int) {
        for rank in 0..<k {
            var lowest = rank
            for index in rank + 1..<bins where binExcesses[index] < binExcesses[lowest] { lowest = index }
            binExcesses.swapAt(rank, lowest)
        }
    }

    /// Puts the excess over `line` of each bin's point, glitches and those inside `excluded` left
    /// out, at the front of `binExcesses`; returns how many.
    private mutating func fillExcesses(above line: Line, outside excluded: ClosedRange<Int64>?) -> Int {
        var bins = 0
        for position in 0..<count where !glitch[position] && !(excluded?.contains(self[position].time) ?? false) {
            binExcesses[bins] = -depth(of: position, below: line)
            bins += 1
        }
        return bins
    }

    /// Vertices of the last fit's hull, oldest first: time from its reference, value from its base.
    private(set) var hullCount = 0
    /// The mean time of the points the last fit kept, from its reference.
    private(set) var meanTime = 0.0
    /// The slope of the last fit's hull at its mean time: this direction's own drift (clamped).
    private(set) var ownSlope = 0.0
    private var fitReference: Int64 = 0
    /// What the values of the last fit are relative to.
    private(set) var fitBase: Int64 = 0

    func vertex(_ index: Int) -> (time: Double, value: Double) {
        let point = self[hull[index]]
        return (Double(point.time &- fitReference), Double(point.value &- fitBase))
    }

    /// The value at the reference of the highest line of this slope under the points the fit kept: the
    /// lowest of them seen along the slope, which is always a hull vertex.
    func level(slope: Double) -> Double { lowest(slope: slope).level }

    /// That level, and the time (from the reference) of the vertex that sets it.
    func lowest(slope: Double) -> (level: Double, time: Double) {
        var lowest = (level: Double.infinity, time: 0.0)
        for index in 0..<hullCount {
            let (time, value) = vertex(index)
            if value - slope * time < lowest.level { lowest = (value - slope * time, time) }
        }
        return lowest
    }

    /// How many of the lowest points `level(slope:lowest:)` averages on a fuzzy floor: one alone is
    /// its luckiest point; more reach up into the queueing (of 3, 4 and 6, 4 did best).
    static let lowest = 4

    /// Keeps, of the floor's points the last fit kept, those that can be among the `lowest` along a
    /// slope of `slopes`: a point lies between where it lies along the two ends, so one above the
    /// `lowest`-th of the points' higher ends never is. Tens of the window's hundreds are left.
    mutating func gatherLowest(over slopes: ClosedRange<Double>) {
        var points = 0
        for position in 0..<count where !glitch[position] {
            let time = Double(self[position].time &- fitReference), value = Double(self[position].value &- fitBase)
            candidates[points] = (time, value)
            binExcesses[points] = max(value - slopes.lowerBound * time, value - slopes.upperBound * time)
            points += 1
        }
        candidateCount = 0
        guard points > 0 else { return }
        let lowest = min(Self.lowest, points)
        selectLowest(lowest, of: points)
        let highest = binExcesses[lowest - 1]
        for index in 0..<points {
            let (time, value) = candidates[index]
            guard min(value - slopes.lowerBound * time, value - slopes.upperBound * time) <= highest else { continue }
            candidates[candidateCount] = (time, value)
            candidateCount += 1
        }
    }

    /// The mean of the `lowest` points along `slope`, of those `gatherLowest` kept (its slopes must
    /// hold `slope`), relative to the last fit's base at its reference.
    func level(slope: Double, lowest: Int) -> Double {
        withUnsafeTemporaryAllocation(of: Double.self, capacity: lowest) { low in
            var kept = 0
            for index in 0..<candidateCount {
                let value = candidates[index].value - slope * candidates[index].time
                guard kept < lowest || value < low[kept - 1] else { continue }
                var place = min(kept, lowest - 1)
                while place > 0, low[place - 1] > value { (low[place], place) = (low[place - 1], place - 1) }
                low[place] = value
                kept = min(kept + 1, lowest)
            }
            return kept == 0 ? .infinity : low[0..<kept].reduce(0, +) / Double(kept)
        }
    }

    private func depth(of position: Int, below line: Line) -> Double {
        line.value(at: self[position].time) - Double(self[position].value &- line.base)
    }

    /// The two points nearest the line from above: the ones it rests on.
    private func supportVertices(of line: Line) -> [Int] {
        var first = -1, second = -1, firstDepth = -Double.infinity, secondDepth = -Double.infinity
        for position in 0..<count where !glitch[position] {
            let depth = depth(of: position, below: line)
            if depth > firstDepth {
                (second, secondDepth) = (first, firstDepth)
                (first, firstDepth) = (position, depth)
            } else if depth > secondDepth {
                (second, secondDepth) = (position, depth)
            }
        }
        return second < 0 ? [first] : [first, second]
    }

    /// The line under every point that is neither a glitch nor within `around`, greatest at their
    /// mean time; nil when no point is left, or too few to judge others by (`around` given).
    private mutating func support(at reference: Int64, base: Int64, fitSlope: Bool, maximumSlope: Double,
                                  around excluded: ClosedRange<Int64>?) -> Line? {
        func included(_ position: Int) -> Bool {
            !glitch[position] && !(excluded?.contains(self[position].time) ?? false)
        }
        var hullCount = 0, points = 0, timeSum = 0.0
        for position in 0..<count where included(position) {
            points += 1
            timeSum += Double(self[position].time &- reference)
            // Andrew's monotone chain, lower half: each point pops the vertices it sees from below.
            let p = self[position]
            while hullCount > 0, self[hull[hullCount - 1]].time == p.time {
                guard p.value < self[hull[hullCount - 1]].value else { break }
                hullCount -= 1
            }
            if hullCount > 0, self[hull[hullCount - 1]].time == p.time { continue }
            while hullCount >= 2, !turnsLeft(self[hull[hullCount - 2]], self[hull[hullCount - 1]], p) { hullCount -= 1 }
            hull[hullCount] = position
            hullCount += 1
        }
        guard points > 0, excluded == nil || points >= 4 else { return nil }
        (self.hullCount, self.meanTime, fitReference, fitBase) = (hullCount, timeSum / Double(points), reference, base)
        let meanTime = reference &+ Int64(self.meanTime.rounded())

        var slope = 0.0
        if fitSlope, hullCount >= 2 {
            var edge = 0
            while edge < hullCount - 2, self[hull[edge + 1]].time < meanTime { edge += 1 }
            let a = self[hull[edge]], b = self[hull[edge + 1]]
            slope = Double(b.value &- a.value) / Double(b.time &- a.time)
        }
        slope = min(max(slope, -maximumSlope), maximumSlope)
        if excluded == nil { ownSlope = slope }
        // On the hull edge itself unless clamped.
        return Line(reference: reference, base: base, level: level(slope: slope), slope: slope)
    }

    private func turnsLeft(_ a: Point, _ b: Point, _ c: Point) -> Bool {
        let abTime = Double(b.time &- a.time), abValue = Double(b.value &- a.value)
        let acTime = Double(c.time &- a.time), acValue = Double(c.value &- a.value)
        return abTime * acValue - abValue * acTime > 0
    }

    private mutating func medianExcess(above line: Line) -> Double {
        let points = min(recentCount, recent.count)
        for index in 0..<points {
            excesses[index] = Double(recent[index].value &- line.base) - line.value(at: recent[index].time)
        }
        excesses[0..<points].sort()
        return excesses[points / 2]
    }
}
