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
    var errors = Errors()
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
        let replayed = log.replay(judgedFrom: judgedFrom, every: probeInterval) { error, mapping, estimator in
            let offset = Double(error).magnitude / 1e3
            errors.offsets.append(offset)
            errors.record(bound: estimator.errorBound, offset: offset)
            errors.drifts.append(abs(mapping.driftPPM - trueDriftPPM))
        }
        guard replayed else { throw PartyCastError(.invalidArgument, "\(path): spans more than a day") }
        self.errors = errors
        self.errors.runP99s = [quantile(errors.offsets, 0.99)]
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
