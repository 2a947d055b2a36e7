import PartyCastClock
import PartyCastCore
import PartyCastSources

/// A real link's exchanges (`listener join --clock-log`) run again through ClockEstimator: taken in
/// the order the listener took them, the mapping probed every 10 ms of the listener's clock against
/// the truth, which is known where the broadcaster ran on the same machine (its clock is then
/// CLOCK_MONOTONIC), as in bench-sync. On bench-sync's judged link the replayed errors match the
/// listener's own within 1–2 µs (p99 of 14 listeners), so an estimator change can be judged on real
/// delays in seconds.
struct Replay {
    /// One second of the replay, from the first exchange: the mapping at its start against the truth
    /// beside the floor oracle's, and how close that second's exchanges came to the least one-way
    /// delays of the whole log, the floors the estimator hunts for (each direction's least delay is
    /// known here: both clocks are).
    struct Second {
        var second: Int
        var error: Double?
        var oracleError: Double?
        var driftError: Double?
        var bound: Double?
        /// Whether the estimate read the delays' top edge then (`ClockEstimator.readsTopEdge`).
        var readsTopEdge: Bool?
        var upAboveLeast: Double?
        var downAboveLeast: Double?
    }

    var errors = Errors()
    /// What the floor oracle (`FloorOracle`, given the log's least delays as the base delays and the
    /// true drift) would have been off at each probe, µs: the least error any estimator reading the
    /// floors could have had on this link, with these exchanges.
    var oracleErrors: [Double] = []
    /// What the ceiling oracle (`CeilingOracle`: the true drift, each direction's greatest delay)
    /// would have been off from the true clock, every tenth probe (it sorts all delays so far): what
    /// reading the top of the delays instead of their floor would do on this link.
    var ceilingOracleErrors: [Double] = []
    var timeline: [Second] = []
    var exchanges = 0
    var skippedLines = 0
    /// Exchanges over the log's span.
    var exchangesPerSecond = 0.0

    init(path: String, judgedFrom: Int64) throws(PartyCastError) {
        guard let log = ClockExchangeLog.read(try Self.contents(of: path)[...]) else {
            throw PartyCastError(.invalidArgument, "\(path): not a clock log (listener join --clock-log)")
        }
        exchanges = log.samples.count
        skippedLines = log.skippedLines
        if let first = log.samples.first, let last = log.samples.last, last.t4 > first.t1 {
            exchangesPerSecond = Double(exchanges) / (Double(last.t4 - first.t1) / 1e9)
        }
        let trueDriftPPM = (1 / (1 + log.clock.driftPPM * 1e-6) - 1) * 1e6
        var errors = Errors()
        let delays = log.oneWayDelays
        let (leastUp, leastDown) = (delays.map(\.up).min() ?? 0, delays.map(\.down).min() ?? 0)
        // Each exchange's true one-way delays above the log's least in the same direction.
        let excesses = delays.map { FloorOracle.Excess(up: $0.up &- leastUp, down: $0.down &- leastDown) }
        var timeline = Self.leastDelays(log, excesses)
        var oracle = FloorOracle(), oracleErrors: [Double] = [], taken = 0
        var ceilingOracle = CeilingOracle()
        var ceilingOracleErrors: [Double] = [], probes = 0
        let start = log.samples.first?.t1 ?? 0
        let replayed = log.replay(judgedFrom: judgedFrom, every: probeInterval) { local, error, mapping, estimator in
            // The exchanges the estimator has by now: those answered by `local`, in the log's order.
            while taken < excesses.count, log.samples[taken].t4 <= local {
                oracle.take(excesses[taken])
                ceilingOracle.take(delays[taken])
                taken += 1
            }
            let oracleError = oracle.snapshot(at: local, estimatorError: nil).oracleError
            oracleErrors.append(oracleError.magnitude)
            if probes % 10 == 0, let ceilingError = ceilingOracle.error { ceilingOracleErrors.append(ceilingError.magnitude) }
            probes += 1
            let offset = Double(error).magnitude / 1e3
            errors.offsets.append(offset)
            errors.record(bound: estimator.errorBound, offset: offset)
            errors.drifts.append(abs(mapping.driftPPM - trueDriftPPM))
            // The first probe of each second (they come every 10 ms from the first exchange on).
            let (index, sinceStart) = (Int((local &- start) / second), (local &- start) % second)
            if sinceStart < probeInterval, timeline.indices.contains(index), timeline[index].error == nil {
                timeline[index].error = Double(error) / 1e3
                timeline[index].oracleError = oracleError
                timeline[index].driftError = mapping.driftPPM - trueDriftPPM
                timeline[index].bound = estimator.errorBound.map { Double($0) / 1e3 }
                timeline[index].readsTopEdge = estimator.readsTopEdge
            }
        }
        guard replayed else { throw PartyCastError(.invalidArgument, "\(path): spans more than a day") }
        self.errors = errors
        self.oracleErrors = oracleErrors
        self.ceilingOracleErrors = ceilingOracleErrors
        self.timeline = timeline
        self.errors.runP99s = [quantile(errors.offsets, 0.99)]
    }

    /// Per second from the first exchange (by its request's time), each direction's least excess;
    /// the mapping's columns left for the replay.
    private static func leastDelays(_ log: ClockExchangeLog.Contents, _ excesses: [FloorOracle.Excess]) -> [Second] {
        guard let first = log.samples.first else { return [] }
        let seconds = log.samples.map { Int(($0.t1 &- first.t1) / second) }
        guard let last = seconds.max(), last < 86_400 else { return [] }
        var timeline = (0...last).map { Second(second: $0) }
        for (second, excess) in zip(seconds, excesses) where second >= 0 {
            let (up, down) = (Double(excess.up) / 1e3, Double(excess.down) / 1e3)
            timeline[second].upAboveLeast = min(timeline[second].upAboveLeast ?? up, up)
            timeline[second].downAboveLeast = min(timeline[second].downAboveLeast ?? down, down)
        }
        return timeline
    }

    private static func contents(of path: String) throws(PartyCastError) -> String {
        let file = try FileByteSource(path: path)
        var bytes: [UInt8] = []
        while true {
            let chunk = try file.read(maxBytes: 1 << 16)
            if chunk.isEmpty { return String(decoding: bytes, as: UTF8.self) }
            bytes += chunk
        }
    }
}
