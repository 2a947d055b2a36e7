import ArgumentParser
import Dispatch
import PartyCastClock
import PartyCastCore
import Synchronization

/// Replays simulated links through the clock estimators, old and new, and prints how far each
/// mapping is from the true remote clock after the first 5 s (`--judged-from`). Besides percentiles over
/// all runs, the worst run's own p99, as one run of a test is judged.
@main
struct ClockSim: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "partycast-clock-sim",
        abstract: "Clock estimator error (old vs new) over simulated link conditions, as a Markdown table.")

    @Option(help: "Seeds per trace (runs 1...n).") var seeds = 5
    @Option(help: "Seconds per run.") var duration = 60
    @Option(help: "Only the traces whose name contains this.") var trace: String?
    @Option(help: "Seconds after join from which errors count (BadLinkSyncTests judges from 11: a 6 s start, 5 s to settle).")
    var judgedFrom = 5
    @Option(parsing: .upToNextOption, help: ArgumentHelp(
        "Instead of simulating, replay these logs of real exchanges (listener join --clock-log; the broadcaster on the same machine), beside the floor and ceiling oracles on the same exchanges.",
        valueName: "FILE"))
    var replay: [String] = []
    @Flag(help: "With --replay: one JSON object a log (what bench-sync reads) instead of the table.") var json = false
    @Flag(help: "With --replay: after the table, each log second by second: the mapping's error beside the floor oracle's, its drift's error and its bound, and how close that second's exchanges came to each direction's least delay.")
    var timeline = false
    @Flag(help: "Instead of the table: the estimator beside the best any floor-based estimator could do (FloorOracle), adaptive schedule.")
    var floorOracle = false
    @Flag(help: "Instead of the table: the judged and 0–5 ms links kept in order, carrying only clock packets on fixed spacings shared by one or two listeners: the floor oracle and the estimator, however the link is probed.")
    var probingLimit = false

    func run() throws {
        guard replay.isEmpty else { return try replayLogs() }
        guard !floorOracle else { return compareWithOracle() }
        guard !probingLimit else { return showProbingLimit() }
        print("| trace | estimator | schedule | exchanges/s | median µs | p99 µs | max µs | worst run's p99 µs | drift p99 ppm | bound median µs | covered % |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for trace in Trace.all where self.trace.map({ trace.name.contains($0) }) ?? true {
            for schedule in Schedule.allCases {
                // Seeds run in parallel; each is its own deterministic world.
                let results = Mutex([(new: Errors, baseline: Errors)?](repeating: nil, count: seeds))
                DispatchQueue.concurrentPerform(iterations: seeds) { index in
                    let result = simulate(trace, schedule, seed: UInt64(index + 1), duration: Int64(duration) * second,
                                          judgedFrom: Int64(judgedFrom) * second)
                    results.withLock { $0[index] = result }
                }
                var new = Errors(), baseline = Errors()
                for case let result? in results.withLock({ $0 }) {
                    new.merge(result.new)
                    baseline.merge(result.baseline)
                }
                for (name, errors) in [("baseline (before #11)", baseline), ("envelope (#11)", new)] {
                    print("| \(trace.name) | \(name) | \(schedule.rawValue) | \(format(Double(errors.exchanges) / errors.seconds)) | "
                        + "\(format(quantile(errors.offsets, 0.5))) | \(format(quantile(errors.offsets, 0.99))) | "
                        + "\(format(errors.offsets.max() ?? .nan)) | \(format(errors.runP99s.max() ?? .nan)) | \(format(quantile(errors.drifts, 0.99))) | "
                        + "\(format(quantile(errors.bounds, 0.5))) | \(format(errors.coverage)) |")
                }
            }
        }
    }

    /// Per trace and time: each direction's gap, the oracle's and the estimator's error, one listener
    /// and the difference of two (runs paired by seed, as two listeners behind one link).
    private func compareWithOracle() {
        print("| trace | s after join | gap up / down, median µs | floor oracle p50 / p90 / p99 µs | estimator p50 / p90 / p99 µs | two listeners apart: oracle / estimator p90 µs |")
        print("|---|---|---|---|---|---|")
        for trace in Trace.all where self.trace.map({ trace.name.contains($0) }) ?? true {
            let results = Mutex([[FloorOracle.Snapshot]](repeating: [], count: seeds))
            DispatchQueue.concurrentPerform(iterations: seeds) { index in
                let result = simulate(trace, .adaptive, seed: UInt64(index + 1), duration: Int64(duration) * second, judgedFrom: 0)
                results.withLock { $0[index] = result.new.snapshots }
            }
            let runs = results.withLock { $0 }
            for time in FloorOracle.times where time <= Int64(duration) * second {
                let at = runs.map { $0.first { $0.time == time } }
                let taken = at.compactMap { $0 }
                func percentiles(_ values: [Double]) -> String {
                    [0.5, 0.9, 0.99].map { format(quantile(values.map(\.magnitude), $0)) }.joined(separator: " / ")
                }
                let pairs = stride(from: 0, to: at.count - 1, by: 2).compactMap { i -> (FloorOracle.Snapshot, FloorOracle.Snapshot)? in
                    guard let a = at[i], let b = at[i + 1] else { return nil }
                    return (a, b)
                }
                let oracleApart = pairs.map { ($0.0.oracleError - $0.1.oracleError).magnitude }
                let estimatorApart = pairs.compactMap { pair in pair.0.estimatorError.flatMap { a in pair.1.estimatorError.map { (a - $0).magnitude } } }
                print("| \(trace.name) | \(time / second) | \(format(quantile(taken.map(\.upGap), 0.5))) / \(format(quantile(taken.map(\.downGap), 0.5))) | "
                    + "\(percentiles(taken.map(\.oracleError))) | \(percentiles(taken.compactMap(\.estimatorError))) | "
                    + "\(format(quantile(oracleApart, 0.9))) / \(format(quantile(estimatorApart, 0.9))) |")
            }
        }
    }

    /// Per link, listeners behind it and spacing: how the oracle and the estimator fare over the
    /// seeds, judged by the issue's bar for that link (the judged one: p99 ≤ 100 µs and max ≤ 500 µs;
    /// 0–5 ms: p99 ≤ 50 µs), as BadLinkSyncTests and bench-sync judge a run.
    private func showProbingLimit() {
        print("| link, order kept | listeners on the link | spacing, all listeners' packets each way | packets a second each way, a listener "
            + "| of them within 0.1 ms of the floor, a minute | floor oracle: run's p99 µs, mean / worst | runs over the bar | 4 runs all within it "
            + "| estimator: run's p99 µs, mean / worst | runs over the bar | 4 runs all within it |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        let links = [("0–20 ms, 1 % loss, 250 ms stall / 8 s (p99 ≤ 100 µs, max ≤ 500)", Trace.judged, 100.0, 500.0),
                     ("0–5 ms (p99 ≤ 50 µs)", Path(jitter: 5 * millisecond), 50.0, Double.infinity)]
        for (name, link, p99Bar, maxBar) in links {
            var path = link
            path.inOrder = true
            for listeners in [1, 2] {
                for spacing in [path.jitter / 3, path.jitter / 2, path.jitter * 2 / 3, path.jitter, path.jitter * 3 / 2] {
                    let limit = ProbingLimit(path: path, listeners: listeners, spacing: spacing)
                    let results = Mutex([ProbingLimit.Run?](repeating: nil, count: seeds))
                    DispatchQueue.concurrentPerform(iterations: seeds) { index in
                        let run = limit.run(seed: UInt64(index + 1), duration: Int64(duration) * second, judgedFrom: Int64(judgedFrom) * second)
                        results.withLock { $0[index] = run }
                    }
                    let runs = results.withLock { $0 }.compactMap { $0 }
                    func judged(_ errors: [(p99: Double, max: Double)]) -> String {
                        let over = errors.filter { $0.p99 > p99Bar || $0.max > maxBar }.count
                        let passing = 1 - Double(over) / Double(errors.count)
                        let p99s = errors.map(\.p99)
                        return "\(format(p99s.reduce(0, +) / Double(p99s.count))) / \(format(p99s.max() ?? .nan)) | "
                            + "\(over) of \(errors.count) | \(Int((100 * passing * passing * passing * passing).rounded())) %"
                    }
                    print("| \(name) | \(listeners) | \(format(Double(spacing) / 1e6)) ms | \(format(1e9 / Double(spacing) / Double(listeners))) | "
                        + "\(format(60 * runs.map(\.nearFloorPerSecond).reduce(0, +) / Double(runs.count))) | "
                        + "\(judged(runs.map(\.oracle))) | \(judged(runs.map(\.estimator))) |")
                }
            }
        }
    }

    /// One row a log, then the worst log's p99 and the mean of their p99s: how a change is judged.
    private func replayLogs() throws {
        let runs: [Replay]
        do { runs = try replay.map { path throws(PartyCastError) in try Replay(path: path, judgedFrom: Int64(judgedFrom) * second) } } catch {
            throw ValidationError(error.description)
        }
        if json {
            for (path, run) in zip(replay, runs) {
                let e = run.errors
                // JSON has no NaN: a log too short to judge gives nulls.
                func number(_ value: Double?) -> String { value.map { $0.isFinite ? "\($0)" : "null" } ?? "null" }
                print("{\"log\": \"\(path.unicodeScalars.filter { $0 != "\"" && $0 != "\\" && $0.value >= 32 }.map(String.init).joined())\", "
                    + "\"exchanges\": \(run.exchanges), \"exchanges_per_s\": \(number(run.exchangesPerSecond)), "
                    + "\"p99_us\": \(number(quantile(e.offsets, 0.99))), \"max_us\": \(number(e.offsets.max())), "
                    + "\"bound_median_us\": \(number(quantile(e.bounds, 0.5))), \"covered_pct\": \(number(e.coverage)), "
                    + "\"floor_oracle_p99_us\": \(number(quantile(run.oracleErrors, 0.99))), "
                    + "\"ceiling_oracle_p99_us\": \(number(quantile(run.ceilingOracleErrors, 0.99))), "
                    + "\"error_by_second_us\": [\(run.timeline.map { number($0.error?.rounded()) }.joined(separator: ", "))]}")
            }
            return
        }
        print("| log | exchanges | median µs | p99 µs | max µs | drift p99 ppm | bound median µs | covered % | floor oracle p99 / max µs | ceiling oracle p99 / max µs |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        var p99s: [Double] = []
        for (path, run) in zip(replay, runs) {
            p99s += run.errors.runP99s
            print("| \(path)\(run.skippedLines > 0 ? " (\(run.skippedLines) lines skipped)" : "") | \(run.exchanges) | "
                + "\(format(quantile(run.errors.offsets, 0.5))) | \(format(quantile(run.errors.offsets, 0.99))) | "
                + "\(format(run.errors.offsets.max() ?? .nan)) | \(format(quantile(run.errors.drifts, 0.99))) | "
                + "\(format(quantile(run.errors.bounds, 0.5))) | \(format(run.errors.coverage)) | "
                + "\(format(quantile(run.oracleErrors, 0.99))) / \(format(run.oracleErrors.max() ?? .nan)) | "
                + "\(format(quantile(run.ceilingOracleErrors, 0.99))) / \(format(run.ceilingOracleErrors.max() ?? .nan)) |")
        }
        print("\nWorst log's p99 \(format(p99s.max() ?? .nan)) µs, mean p99 \(format(p99s.reduce(0, +) / Double(p99s.count))) µs over \(p99s.count) logs.")
        guard timeline else { return }
        func cell(_ value: Double?, signed: Bool = false) -> String {
            guard let value else { return "–" }
            return signed && value > 0 ? "+" + format(value) : value < 0 ? "−" + format(-value) : format(value)
        }
        for (path, run) in zip(replay, runs) {
            print("\n\(path)\n\n| s from the first exchange | error µs | floor oracle µs | drift error ppm | bound µs | read | least delay up, above the log's least µs | down µs |")
            print("|---|---|---|---|---|---|---|---|")
            for row in run.timeline {
                print("| \(row.second) | \(cell(row.error, signed: true)) | \(cell(row.oracleError, signed: true)) | \(cell(row.driftError, signed: true)) | \(cell(row.bound)) | \(row.readsTopEdge.map { $0 ? "tops" : "floors" } ?? "–") | "
                    + "\(cell(row.upAboveLeast)) | \(cell(row.downAboveLeast)) |")
            }
        }
    }

    private func format(_ value: Double) -> String {
        value.isNaN ? "–" : value >= 100 ? String(Int(value.rounded())) : String(Double(Int((value * 10).rounded())) / 10)
    }
}
