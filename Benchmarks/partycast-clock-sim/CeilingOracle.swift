/// The floor oracle's mirror image: an estimator that knows the drift and reads the clock from each
/// direction's greatest delay instead of its least. Judged against the true clock: the two
/// directions' edges differ by what each path adds (base delay, longest hold), as their floors do by
/// the bases alone, and a reading of the top pays for that difference.
///
/// Where every packet is held at most H (netem's uniform 0–20 ms) a held packet delays those behind
/// it by less than its own hold, so no load lifts a delay past base + H: the top edge is as sharp on
/// the busy direction as on the idle one, where the floor is not. Where the delays have a long tail
/// (Wi-Fi's retries, a bottleneck's queue) there is no edge to read, and this says how far off
/// reading one is.
struct CeilingOracle {
    /// Delays `step` ranks apart, from the top, may span at most `tolerance` times the median gap
    /// between neighbours in the top quarter (where the density is that of the holds near their top);
    /// the first that does is the edge, the sparse ones above it set aside (a stall's packets,
    /// released together up to 250 ms late).
    static let step = 4
    static let tolerance = 12.0

    private var up: [Int64] = [], down: [Int64] = []

    mutating func take(_ delays: (up: Int64, down: Int64)) {
        up.append(delays.up)
        down.append(delays.down)
    }

    /// The offset error, µs, signed: A's greatest reads θ + the up edge, B's −θ + the down edge, so
    /// half their difference is off by (up edge − down edge) / 2. Nil until each direction has
    /// enough delays to tell a dense top from outliers.
    var error: Double? {
        guard let upEdge = Self.edge(up), let downEdge = Self.edge(down) else { return nil }
        return Double(upEdge &- downEdge) / 2e3
    }

    static func edge(_ delays: [Int64]) -> Int64? {
        guard delays.count >= 4 * step else { return nil }
        let sorted = delays.sorted(by: >)
        let quarter = sorted.count / 4
        let gaps = (0..<quarter).map { Double(sorted[$0] &- sorted[$0 + 1]) }.sorted()
        let spanAllowed = tolerance * Double(step) * gaps[gaps.count / 2]
        var top = 0
        while top + step < sorted.count, Double(sorted[top] &- sorted[top + step]) > spanAllowed { top += 1 }
        return sorted[top]
    }
}
