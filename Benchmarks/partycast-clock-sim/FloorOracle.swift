/// The least error any estimator that reads the clock from the two directions' least delays could
/// have, given the exchanges that came back by a time: one that knows the drift and both base delays
/// exactly, and takes each direction's least delay as its floor. Its offset is then off by half the
/// difference of the two directions' gaps (the least excess over the base delay each has seen), so
/// where few exchanges meet an empty queue no floor-based estimator can be better, whatever its fit.
struct FloorOracle {
    /// Seconds after join at which the estimator is set beside the oracle.
    static let times: [Int64] = [6, 11, 15, 20, 25, 35].map { $0 * second }

    /// One exchange's delays over each path's base, the truth the simulation knows.
    struct Excess {
        var up: Int64
        var down: Int64
    }

    struct Snapshot {
        var time: Int64
        /// Each direction's least excess so far, µs.
        var upGap: Double
        var downGap: Double
        /// The oracle's offset error ((up gap − down gap) / 2) and the estimator's, µs, signed.
        var oracleError: Double
        var estimatorError: Double?
    }

    private var upGap = Int64.max, downGap = Int64.max
    private var next = 0

    mutating func take(_ excess: Excess) {
        upGap = min(upGap, excess.up)
        downGap = min(downGap, excess.down)
    }

    /// The offset error ((up gap − down gap) / 2, µs, signed), nil until both directions have a point.
    var error: Double? { upGap < .max && downGap < .max ? (Double(upGap) - Double(downGap)) / 2e3 : nil }

    /// The next snapshot's time once `time` reaches it (each once).
    mutating func due(at time: Int64) -> Int64? {
        guard next < Self.times.count, time >= Self.times[next], upGap < .max else { return nil }
        next += 1
        return Self.times[next - 1]
    }

    func snapshot(at time: Int64, estimatorError: Double?) -> Snapshot {
        Snapshot(time: time, upGap: Double(upGap) / 1e3, downGap: Double(downGap) / 1e3,
                 oracleError: error ?? .nan, estimatorError: estimatorError)
    }
}
