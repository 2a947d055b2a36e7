import PartyCastClock
import PartyCastSources

/// The least error any two-way method reading the floors could have on a link that keeps order,
/// however it probes. There a packet meets an empty queue only once everything sent before it has
/// left, so about one packet per longest hold does at most: sent every hold H, all of them; every
/// H/2, half of twice as many; every H/3, two ninths of three times as many. (Periodic schedules
/// are what this measures; a sender cannot see the queue, so no other does much better.)
/// Here the link carries nothing but the clock's packets (no audio, no acknowledgements), each
/// direction on its own fixed spacing, shared in turn by the listeners behind the link. Each
/// listener's offset comes from the floor oracle (the drift and both base delays known, each
/// direction's least delay so far taken as its floor), and beside it from the estimator, which
/// must learn the drift from the same exchanges.
struct ProbingLimit {
    var path: Path
    var listeners: Int
    var spacing: Int64

    /// The broadcaster's packet k leaves this long after the listener's: after it has arrived,
    /// through a stall too, so the two make an exchange.
    static let answerLag: Int64 = 300 * millisecond

    struct Run {
        /// One listener's error from `judgedFrom`, or with two the difference of theirs (the skew
        /// on the recorded audio), µs: the oracle's, and the estimator's.
        var oracle: (p99: Double, max: Double)
        var estimator: (p99: Double, max: Double)
        /// A listener's packets a second each way that came within 0.1 ms of the base delay (plus
        /// the timestamps' noise): the ones that pin a floor.
        var nearFloorPerSecond: Double
    }

    func run(seed: UInt64, duration: Int64, judgedFrom: Int64) -> Run {
        var random = SplitMix64(seed: seed)
        let clocks = (0..<listeners).map { _ in RemoteClock(random: &random) }
        var up = path, down = path
        var exchanges: [(listener: Int, excess: FloorOracle.Excess, sample: ClockSample)] = []
        var nearFloor = 0
        for index in 0...Int(duration / spacing) {
            let sent = Int64(index) * spacing, answered = sent + Self.answerLag
            let received = up.arrival(sentAt: sent, random: &random)
            let arrived = down.arrival(sentAt: answered, random: &random)
            for (time, from) in [(received, sent), (arrived, answered)] {
                if let time, time - from - path.base <= path.noise + 100 * microsecond { nearFloor += 1 }
            }
            guard let received, let arrived, received <= answered else { continue }
            let clock = clocks[index % listeners]
            exchanges.append((index % listeners,
                              FloorOracle.Excess(up: received - sent - path.base, down: arrived - answered - path.base),
                              ClockSample(t1: joinTime + sent, t2: joinTime + clock.remote(atLocal: received),
                                          t3: joinTime + clock.remote(atLocal: answered), t4: joinTime + arrived)))
        }
        exchanges.sort { $0.sample.t4 < $1.sample.t4 }
        var oracles = [FloorOracle](repeating: FloorOracle(), count: listeners)
        var estimators = [ClockEstimator](repeating: ClockEstimator(), count: listeners)
        var taken = 0, oracleErrors: [Double] = [], estimatorErrors: [Double] = []
        for probe in stride(from: judgedFrom, through: duration, by: Int(probeInterval)) {
            // What arrived since the last probe, each listener's in one refit (as the listener's
            // requester takes what one wakeup brings).
            var arrived = [[ClockSample]](repeating: [], count: listeners)
            while taken < exchanges.count, exchanges[taken].sample.t4 <= joinTime + probe {
                let exchange = exchanges[taken]
                oracles[exchange.listener].take(exchange.excess)
                arrived[exchange.listener].append(exchange.sample)
                taken += 1
            }
            for listener in 0..<listeners where !arrived[listener].isEmpty { estimators[listener].add(contentsOf: arrived[listener]) }
            func judged(_ errors: [Double?]) -> Double {
                let known = errors.compactMap { $0 }
                guard known.count == listeners else { return .infinity }
                return listeners == 1 ? abs(known[0]) : abs(known[0] - known[1])
            }
            oracleErrors.append(judged(oracles.map(\.error)))
            estimatorErrors.append(judged(zip(estimators, clocks).map { estimator, clock in
                estimator.mapping.map { Double($0.remote(fromLocal: joinTime + probe) - (joinTime + clock.remote(atLocal: probe))) / 1e3 }
            }))
        }
        return Run(oracle: (quantile(oracleErrors, 0.99), oracleErrors.max() ?? .nan),
                   estimator: (quantile(estimatorErrors, 0.99), estimatorErrors.max() ?? .nan),
                   nearFloorPerSecond: Double(nearFloor) / 2 / Double(listeners) / (Double(duration) / 1e9))
    }
}
