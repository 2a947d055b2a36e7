import PartyCastClock
import PartyCastSources

/// What the simulation drives: the estimator of issue 11 and the baseline.
protocol Estimator {
    init()
    mutating func add(_ sample: ClockSample)
    var mapping: ClockMapping? { get }
}

extension ClockEstimator: Estimator {}
extension BaselineEstimator: Estimator {}

/// When the next request goes.
enum Schedule: String, CaseIterable {
    /// ClockExchangeSchedule as it was before issue 11: 20 ms for 0.5 s, 100 ms until 5 s, then 1 s.
    case fixed
    /// ClockExchangeSchedule now, paced by the new estimator's `linkNoise`.
    case adaptive

    func interval(sinceJoin: Int64, linkNoise: Int64?, answersOvertake: Bool, readsTopEdge: Bool, leastRoundTrip: Int64) -> Int64 {
        switch self {
        case .fixed: sinceJoin < 500 * millisecond ? 20 * millisecond : sinceJoin < 5 * second ? 100 * millisecond : second
        case .adaptive: ClockExchangeSchedule().interval(sinceJoin: sinceJoin, linkNoise: linkNoise, answersOvertake: answersOvertake,
                                                         readsTopEdge: readsTopEdge, leastRoundTrip: leastRoundTrip)
        }
    }
}

/// Errors of one estimator over one run or several, from `judgedFrom` on.
struct Errors {
    var offsets: [Double] = []  // |estimated − true remote|, µs
    /// Each run's p99 offset error: what one run of BadLinkSyncTests is judged by.
    var runP99s: [Double] = []
    var drifts: [Double] = []   // |estimated − true drift|, ppm
    /// The estimator's own 99 % bound at each probe (µs), and how many probes it covered.
    var bounds: [Double] = []
    var covered = 0
    var exchanges = 0
    var seconds = 0.0
    /// The estimator's error beside the floors' own limit at `FloorOracle.times`.
    var snapshots: [FloorOracle.Snapshot] = []

    mutating func merge(_ other: Errors) {
        offsets += other.offsets
        snapshots += other.snapshots
        runP99s += other.runP99s
        drifts += other.drifts
        bounds += other.bounds
        covered += other.covered
        exchanges += other.exchanges
        seconds += other.seconds
    }
}

/// The listener joins at a local time ~1.4 days after boot, so the arithmetic sees real magnitudes.
let joinTime: Int64 = 123_456_789_012_345
let probeInterval: Int64 = 10 * millisecond

/// One run: requests on the schedule (pipelined: a request goes when due, whatever is in flight),
/// answers delivered to both estimators in the order they arrive, and the mappings probed every
/// 10 ms against the true clock, each probe seeing only the answers arrived by then; errors count
/// from `judgedFrom` after join.
func simulate(_ trace: Trace, _ schedule: Schedule, seed: UInt64, duration: Int64, judgedFrom: Int64) -> (new: Errors, baseline: Errors) {
    var random = SplitMix64(seed: seed)
    let clock = RemoteClock(random: &random)
    var outbound = trace.outbound(duration + second, &random)
    var inbound = trace.inbound(duration + second, &random)
    var estimator = ClockEstimator(), baseline = BaselineEstimator()
    var errors = (new: Errors(), baseline: Errors())
    var inFlight: [(arrival: Int64, sequence: UInt64, sample: ClockSample, excess: FloorOracle.Excess)] = []
    var oracle = FloorOracle()
    var order = AnswerOrder(), sequence: UInt64 = 0
    var nextSend: Int64 = 0, nextProbe: Int64 = 0
    // As ClockRequester, a sparse request's answer brings a follow-up at once.
    var followUps = ClockFollowUps()
    // ClockRequester never sends faster than half the least of the last 32 round trips.
    var roundTrips: [Int64] = []

    while nextProbe <= duration {
        let nextArrival = inFlight.min { $0.arrival < $1.arrival }?.arrival ?? .max
        if nextArrival <= min(nextSend, nextProbe) {
            let index = inFlight.firstIndex { $0.arrival == nextArrival }!
            let (_, answered, sample, excess) = inFlight.remove(at: index)
            oracle.take(excess)
            order.record(sequence: answered)
            estimator.add(sample)
            baseline.add(sample)
            roundTrips = roundTrips.suffix(31) + [sample.roundTrip]
            if schedule == .adaptive {
                followUps.answered(sequence: answered)
                if followUps.isDue { nextSend = min(nextSend, nextArrival) }
            }
        } else if nextSend <= nextProbe {
            if nextSend >= judgedFrom { errors.new.exchanges += 1 }
            sequence += 1
            followUps.sent(sequence: sequence, at: nextSend)
            if let received = outbound.arrival(sentAt: nextSend, random: &random) {
                let replied = received + Int64.random(in: 5 * microsecond...30 * microsecond, using: &random)
                if let arrival = inbound.arrival(sentAt: replied, random: &random) {
                    let sample = ClockSample(t1: joinTime + nextSend, t2: joinTime + clock.remote(atLocal: received),
                                             t3: joinTime + clock.remote(atLocal: replied), t4: joinTime + arrival)
                    let excess = FloorOracle.Excess(up: received - nextSend - outbound.base, down: arrival - replied - inbound.base)
                    inFlight.append((arrival, sequence, sample, excess))
                }
            }
            let interval = schedule.interval(sinceJoin: nextSend, linkNoise: estimator.linkNoise, answersOvertake: order.answersOvertake,
                                             readsTopEdge: estimator.readsTopEdge, leastRoundTrip: roundTrips.min() ?? 0)
            nextSend += interval
            (outbound.peerPace, inbound.peerPace) = (interval, interval)
        } else {
            if let time = oracle.due(at: nextProbe) {
                let error = estimator.mapping.map { Double($0.remote(fromLocal: joinTime + nextProbe) - (joinTime + clock.remote(atLocal: nextProbe))) / 1e3 }
                errors.new.snapshots.append(oracle.snapshot(at: time, estimatorError: error))
            }
            if nextProbe >= judgedFrom {
                let truth = joinTime + clock.remote(atLocal: nextProbe)
                for (mapping, index) in [(estimator.mapping, 0), (baseline.mapping, 1)] {
                    guard let mapping else { continue }
                    let offset = abs(Double(mapping.remote(fromLocal: joinTime + nextProbe) - truth)) / 1e3
                    let drift = abs(mapping.driftPPM - clock.driftPPM(atLocal: nextProbe))
                    if index == 0 {
                        errors.new.offsets.append(offset)
                        errors.new.drifts.append(drift)
                        errors.new.record(bound: estimator.errorBound, offset: offset)
                    } else {
                        errors.baseline.offsets.append(offset)
                        errors.baseline.drifts.append(drift)
                    }
                }
            }
            nextProbe += probeInterval
        }
    }
    errors.new.seconds = Double(duration - judgedFrom) / 1e9
    errors.new.runP99s = [quantile(errors.new.offsets, 0.99)]
    errors.baseline.runP99s = [quantile(errors.baseline.offsets, 0.99)]
    errors.baseline.exchanges = errors.new.exchanges
    errors.baseline.seconds = errors.new.seconds
    return errors
}

extension Errors {
    mutating func record(bound: Int64?, offset: Double) {
        let bound = Double(bound ?? .max) / 1e3
        bounds.append(bound)
        if offset <= bound { covered += 1 }
    }

    /// Percent of probes whose error the bound covered.
    var coverage: Double { offsets.isEmpty ? .nan : 100 * Double(covered) / Double(offsets.count) }
}

func quantile(_ values: [Double], _ q: Double) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))]
}
