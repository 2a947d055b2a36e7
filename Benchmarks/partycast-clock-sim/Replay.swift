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
        guard let first = log.samples.first, let last = log.samples.last else { return }
        // Probes every 10 ms over the log's span: a day at most (times are within ±2⁶², so no overflow).
        guard last.t4 - first.t1 <= 86_400 * second else {
            throw PartyCastError(.invalidArgument, "\(path): spans more than a day (\(first.t1) to \(last.t4) ns)")
        }
        exchanges = log.samples.count
        exchangesPerSecond = last.t4 > first.t1 ? Double(exchanges) / (Double(last.t4 - first.t1) / 1e9) : 0
        skippedLines = log.skippedLines
        let trueDriftPPM = (1 / (1 + log.clock.driftPPM * 1e-6) - 1) * 1e6
        var estimator = ClockEstimator()
        var taken = 0
        for probe in stride(from: first.t1 + judgedFrom, through: last.t4, by: Int(probeInterval)) {
            while taken < log.samples.count, log.samples[taken].t4 <= probe {
                estimator.add(log.samples[taken])
                taken += 1
            }
            guard let mapping = estimator.mapping else { continue }
            let truth = Int64(bitPattern: log.clock.machine(fromLocal: probe))
            let offset = Double(mapping.remote(fromLocal: probe) &- truth).magnitude / 1e3
            errors.offsets.append(offset)
            errors.record(bound: estimator.errorBound, offset: offset)
            errors.drifts.append(abs(mapping.driftPPM - trueDriftPPM))
        }
        errors.runP99s = [quantile(errors.offsets, 0.99)]
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
