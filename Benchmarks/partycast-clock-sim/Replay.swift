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
    /// One second of the replay, from the first exchange: the mapping at its start against the truth,
    /// and how close that second's exchanges came to the least one-way delays of the whole log, the
    /// floors the estimator hunts for (each direction's least delay is known here: both clocks are).
    struct Second {
        var second: Int
        var error: Double?
        var driftError: Double?
        var bound: Double?
        var upAboveLeast: Double?
        var downAboveLeast: Double?
    }

    var errors = Errors()
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
        var timeline = Self.leastDelays(log)
        let start = log.samples.first?.t1 ?? 0
        let replayed = log.replay(judgedFrom: judgedFrom, every: probeInterval) { local, error, mapping, estimator in
            let offset = Double(error).magnitude / 1e3
            errors.offsets.append(offset)
            errors.record(bound: estimator.errorBound, offset: offset)
            errors.drifts.append(abs(mapping.driftPPM - trueDriftPPM))
            // The first probe of each second (they come every 10 ms from the first exchange on).
            let (index, sinceStart) = (Int((local &- start) / second), (local &- start) % second)
            if sinceStart < probeInterval, timeline.indices.contains(index), timeline[index].error == nil {
                timeline[index].error = Double(error) / 1e3
                timeline[index].driftError = mapping.driftPPM - trueDriftPPM
                timeline[index].bound = estimator.errorBound.map { Double($0) / 1e3 }
            }
        }
        guard replayed else { throw PartyCastError(.invalidArgument, "\(path): spans more than a day") }
        self.errors = errors
        self.timeline = timeline
        self.errors.runP99s = [quantile(errors.offsets, 0.99)]
    }

    /// Per second from the first exchange (by its request's time), each direction's least true
    /// one-way delay above the least of the whole log; the mapping's columns left for the replay.
    private static func leastDelays(_ log: ClockExchangeLog.Contents) -> [Second] {
        guard let first = log.samples.first else { return [] }
        func machine(_ local: Int64) -> Int64 { Int64(bitPattern: log.clock.machine(fromLocal: local)) }
        let delays = log.samples.map { sample in
            (second: Int((sample.t1 &- first.t1) / second), up: sample.t2 &- machine(sample.t1), down: machine(sample.t4) &- sample.t3)
        }
        guard let leastUp = delays.map(\.up).min(), let leastDown = delays.map(\.down).min(),
              let seconds = delays.map(\.second).max(), seconds < 86_400 else { return [] }
        var timeline = (0...seconds).map { Second(second: $0) }
        for delay in delays where delay.second >= 0 {
            let (up, down) = (Double(delay.up &- leastUp) / 1e3, Double(delay.down &- leastDown) / 1e3)
            timeline[delay.second].upAboveLeast = min(timeline[delay.second].upAboveLeast ?? up, up)
            timeline[delay.second].downAboveLeast = min(timeline[delay.second].downAboveLeast ?? down, down)
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
