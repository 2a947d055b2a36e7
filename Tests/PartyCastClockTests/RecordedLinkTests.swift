import Foundation
import PartyCastClock
import XCTest

/// The estimator's own bound against exchanges recorded on real links (`listener join --clock-log` in
/// `make bench-sync`, through partycast-netem beside a CPU hog), where the truth is known: the
/// broadcaster's clock was this machine's and the listener's a simulated one, whose parameters the
/// log's header holds. Real paths have what the simulated ones lack: a floor made fuzzy by the
/// relay's wake-ups, and directions that differ by a few µs at their fastest.
final class RecordedLinkTests: XCTestCase {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("RecordedLinks")

    /// 99 % of the time from 11 s after join, as bench-sync judges, probed every 10 ms. Recorded where
    /// the bounds of before held least: 76.9, 62.1 and 49.0 % of these runs when they read only the
    /// floors, and 96.9 % when they allowed for fuzzy floors but the pace held from 16 s where order
    /// is kept; and on a quiet relay whose least delay one way depends on how often it is used (its
    /// thread awake at the first second's pace, less so after it: 96.4 % when each floor's own drift
    /// was not weighed). A bound that merely grew would fail the medians, which cannot be below half
    /// each log's least round trip (96, 98, 63, 11 and 17 µs).
    func testTheBoundCoversTheErrorOnRecordedLinks() throws {
        let links: [(file: String, typicalBound: Int64)] = [
            ("order-kept-0-5ms.clock", 200_000),   // each packet held 0–5 ms, in order
            ("wifi-model.clock", 250_000),         // the Gilbert–Elliott Wi-Fi model, in order
            ("wifi-model-paced.clock", 100_000),   // the same, 64 exchanges a second
            ("quiet-relay-stalling.clock", 30_000), // no jitter, a 250 ms stall every 8 s
            ("quiet-relay-follow-ups.clock", 40_000), // no impairment, exchanges in pairs after the first second
        ]
        for (file, typicalBound) in links {
            let text = try String(contentsOf: Self.directory.appendingPathComponent(file), encoding: .utf8)
            let log = try XCTUnwrap(ClockExchangeLog.read(text[...]), file)
            XCTAssertEqual(log.skippedLines, 0, file)
            var probes = 0, covered = 0
            var bounds: [Int64] = []
            let replayed = log.replay(judgedFrom: 11_000_000_000, every: 10_000_000) { _, error, _, estimator in
                guard let bound = estimator.errorBound else { return }
                probes += 1
                bounds.append(bound)
                if error.magnitude <= bound { covered += 1 }
            }
            XCTAssertTrue(replayed, file)
            XCTAssertGreaterThan(probes, 4_000, file)
            let coverage = Double(covered) / Double(max(probes, 1))
            guard !bounds.isEmpty else { continue }
            let median = bounds.sorted()[bounds.count / 2]
            print("\(file): bound held \(coverage * 100) % of \(probes) probes, median ±\(median / 1000) µs")
            XCTAssertGreaterThanOrEqual(coverage, 0.99, file)
            XCTAssertLessThanOrEqual(median, typicalBound, file)
        }
    }

    /// bench-sync's judged link kept in order (each packet held 0–20 ms, 1 % loss, a 250 ms stall
    /// every 8 s, a CPU hog beside the relay), recorded at two seeds: few exchanges come near the
    /// floor on the way down, behind the audio, and an estimator that reads only floors is off by
    /// 100–600 µs here (p99 from 11 s), so the mapping comes from the delays' top edge, which no
    /// queueing passes. Read nearly throughout, within 100 µs 99 % of the time, the bound still
    /// covering the error. The Wi-Fi model's delays have a tail and no edge: its tops are never read,
    /// nor those of the 0–5 ms link, whose floors are as close.
    ///
    /// Seeds 449–454 were recorded at 126 exchanges a second, when the pace was held to half the
    /// least round trip; 451 and 454 were the two of eight where the whole window's edges alone
    /// missed (p99 122 and 260 µs): longest holds wandering both ways at once, and a straggler
    /// 0.47 ms past the edge. 451's sparse tops leave its first judged seconds ~100 µs off. Two are
    /// at today's pace (~300 a second while the tops are read): the worst of 44 far listeners' logs
    /// of seeds 449–471 over its first 35 s (452; 106 µs with stragglers judged 4 places up, 26 at
    /// 8), and CI's order-kept link at seed 11, where ~1 ms stragglers vouched for each other at 4
    /// places and θ was 1.3 ms off (`DelayEnvelope.stragglerSpan`).
    func testTheJudgedLinkKeptInOrderIsReadFromTheTopEdge() throws {
        let links: [(file: String, p99Bar: UInt64)] = [
            ("judged-order-kept-449.clock", 100_000), ("judged-order-kept-450.clock", 100_000),
            ("judged-order-kept-451.clock", 120_000), ("judged-order-kept-454.clock", 100_000),
            ("judged-order-kept-452-dense.clock", 100_000), ("judged-order-kept-11-ci.clock", 100_000),
        ]
        for (file, p99Bar) in links {
            let (errors, onTop, covered) = try replay(file)
            let p99 = errors.sorted()[errors.count * 99 / 100]
            print("\(file): p99 \(p99 / 1000) µs, top edge read at \(onTop) of \(errors.count) probes, bound held at \(covered)")
            XCTAssertGreaterThan(errors.count, 2_000, file)
            XCTAssertLessThanOrEqual(p99, p99Bar, file)
            XCTAssertGreaterThanOrEqual(Double(onTop), 0.95 * Double(errors.count), file)
            XCTAssertGreaterThanOrEqual(Double(covered), 0.99 * Double(errors.count), file)
        }
        for file in ["wifi-model.clock", "wifi-model-paced.clock", "order-kept-0-5ms.clock"] {
            let (errors, onTop, _) = try replay(file)
            XCTAssertGreaterThan(errors.count, 2_000, file)
            XCTAssertEqual(onTop, 0, file)
        }
    }

    /// bench-sync's 0–5 ms link kept in order, at the pace of then (~90 exchanges a second) and of now
    /// (~135), from 5 s: few exchanges meet an empty queue, and the floors alone leave θ 61 and 28 µs
    /// off (p99), the drift loose by a few ppm for tens of seconds. The tops' edge is sharp there,
    /// and fitted with the floors it gave 42 and 22 µs, the bound still holding; 33 and 21 since the
    /// floors are read by their lowest four (`testALoneLowPointOnAFuzzyFloorMovesTheClockLittle`).
    func testTheTopsPinTheDriftWhereFewExchangesMeetAnEmptyQueue() throws {
        let links: [(file: String, p99Bar: UInt64)] = [("order-kept-0-5ms.clock", 50_000), ("order-kept-0-5ms-paced.clock", 25_000)]
        for (file, p99Bar) in links { try assertHeld(file, probes: 4_000, p99Bar: p99Bar) }
    }

    /// bench-sync's 0–5 ms row and its Wi-Fi model, both kept in order: the least delays scatter tens
    /// of µs above the floor, and now and then one comes alone far below the rest, in one direction
    /// (13 µs down where the next is 38; on the Wi-Fi model 10 and 29 down where the next is 48, and
    /// 31 and 33 up where it is 67). Read by each direction's lowest alone, θ sat half that depth
    /// off for as long as it stayed in the window and the drift tilted towards it: p99 48 and 46 µs
    /// from 11 s. Read by the mean of the lowest four, 35 and 23, the bound still holding.
    func testALoneLowPointOnAFuzzyFloorMovesTheClockLittle() throws {
        let links: [(file: String, p99Bar: UInt64)] = [("order-kept-0-5ms-lone-lows.clock", 40_000), ("wifi-model-lone-lows.clock", 30_000)]
        for (file, p99Bar) in links { try assertHeld(file, from: 11_000_000_000, probes: 4_000, p99Bar: p99Bar) }
    }

    /// bench-sync's judged link kept in order, a far listener joining the song under way (seed 506,
    /// its first 20 s). From 8.8 s the floors' drift, loose by ~900 ppm, left their least round trip
    /// below 0 for a second: no bound from the floors, and the tops, which were read on each side
    /// of that second, went unread then, the mapping falling back to the floors' θ 0.47 ms off for
    /// a tenth of a second at a time (p99 476 µs from 5 s). The floors along the tops' drift judge
    /// the tops there instead.
    func testTheTopsAreReadWhereTheFloorsContradictThemselves() throws {
        try assertHeld("judged-order-kept-506-late.clock", probes: 1_400, p99Bar: 50_000, worstBar: 100_000)
    }

    /// bench-sync's judged link kept in order, the song 1 s after launch (seed 602, far2's first
    /// 30 s). 5.7 s after join one top point 0.3 ms past the edge, at the window's newer end, moved
    /// the tops' drift interval from [−135, −88] ppm to [−83, −30] (the truth −120), and θ was 174
    /// µs off at 6 s and ~0.2 ms off for a second (p99 193 µs from 5 s; live, pairwise 133). Held
    /// within the interval of a second before (`ClockEstimator.checkedAgainstEarlier`), that spell
    /// lasts a few tenths.
    func testALiftedTopPointMovesTheDriftNoFurtherThanTheEarlierEvidenceAllows() throws {
        try assertHeld("judged-order-kept-602-early.clock", probes: 2_400, p99Bar: 60_000)
    }

    /// Replays `file` from `judgedFrom` (5 s after join unless given), probed every 10 ms: more than
    /// `probes` probes, the error's p99 and worst within their bars, and the bound holding at 99 % of them.
    private func assertHeld(_ file: String, from judgedFrom: Int64 = 5_000_000_000, probes: Int, p99Bar: UInt64,
                            worstBar: UInt64 = .max) throws {
        let (errors, _, covered) = try replay(file, judgedFrom: judgedFrom)
        XCTAssertGreaterThan(errors.count, probes, file)
        let p99 = errors.sorted()[errors.count * 99 / 100]
        print("\(file): from \(judgedFrom / 1_000_000_000) s p99 \(p99 / 1000) µs, worst \(errors.max()! / 1000) µs, bound held at \(covered) of \(errors.count)")
        XCTAssertLessThanOrEqual(p99, p99Bar, file)
        XCTAssertLessThanOrEqual(errors.max()!, worstBar, file)
        XCTAssertGreaterThanOrEqual(Double(covered), 0.99 * Double(errors.count), file)
    }

    /// |error| at each probe from `judgedFrom` (11 s, as bench-sync judges), every 10 ms; at how many
    /// the top edge was read and the bound held.
    private func replay(_ file: String, judgedFrom: Int64 = 11_000_000_000) throws -> (errors: [UInt64], onTop: Int, covered: Int) {
        let text = try String(contentsOf: Self.directory.appendingPathComponent(file), encoding: .utf8)
        let log = try XCTUnwrap(ClockExchangeLog.read(text[...]), file)
        var errors: [UInt64] = [], onTop = 0, covered = 0
        XCTAssertTrue(log.replay(judgedFrom: judgedFrom, every: 10_000_000) { _, error, _, estimator in
            errors.append(error.magnitude)
            if estimator.readsTopEdge { onTop += 1 }
            if let bound = estimator.errorBound, error.magnitude <= bound { covered += 1 }
        }, file)
        return (errors, onTop, covered)
    }

    /// The delays a replay measures the evidence by are the ones the exchanges took: here made up on
    /// the machine's clock (the broadcaster's) and stamped on a simulated one, as a listener with
    /// `--simulate-clock` stamps them.
    func testOneWayDelaysAreTheOnesTheExchangesTook() throws {
        let clock = LocalClock(offsetSeconds: -5, driftPPM: -150, anchor: 45_882_727_771_978)
        let header = "# partycast clock log 1: offset-ns \(clock.offsetNanoseconds) drift-ppm \(clock.driftPPM) anchor-ns \(clock.anchor)\n"
        // (machine time of the request, up, time the broadcaster holds it, down), ns.
        let made: [(sent: UInt64, up: Int64, held: Int64, down: Int64)] = [
            (45_883_000_000_000, 3_000_000, 50_000, 2_000_000),
            (45_883_010_000_000, 150_000, 20_000, 19_750_000),
            (45_943_000_000_000, 12_345_678, 0, 151_234),
        ]
        let lines = made.map { exchange in
            let t2 = Int64(exchange.sent) + exchange.up, t3 = t2 + exchange.held
            return "\(clock.local(fromMachine: exchange.sent)) \(t2) \(t3) \(clock.local(fromMachine: UInt64(t3 + exchange.down)))"
        }
        let log = try XCTUnwrap(ClockExchangeLog.read((header + lines.joined(separator: "\n") + "\n")[...]))
        XCTAssertEqual(log.oneWayDelays.count, made.count)
        for (measured, exchange) in zip(log.oneWayDelays, made) {
            // The simulated clock's readings are whole nanoseconds: a nanosecond either way.
            XCTAssertEqual(Double(measured.up), Double(exchange.up), accuracy: 1)
            XCTAssertEqual(Double(measured.down), Double(exchange.down), accuracy: 1)
        }
    }

    /// A log is a file anyone may hand the replay: one spanning more than a day would set the
    /// number of probes, so it is refused before any.
    func testALogSpanningMoreThanADayIsNotReplayed() throws {
        let header = "# partycast clock log 1: offset-ns 0 drift-ppm 0.0 anchor-ns 0\n"
        let log = try XCTUnwrap(ClockExchangeLog.read((header + "0 10 20 30\n4611686018427387000 4611686018427387010 4611686018427387020 4611686018427387030\n")[...]))
        var probes = 0
        XCTAssertFalse(log.replay(judgedFrom: 0, every: 10_000_000) { _, _, _, _ in probes += 1 })
        XCTAssertEqual(probes, 0)
    }

    /// Nor may the moment judged from set it: from centuries before the first exchange the replay
    /// probes from that exchange on (with a mapping from its answer on), from centuries after it
    /// nothing, and neither overflows.
    func testTheMomentJudgedFromCannotSetTheNumberOfProbes() throws {
        let header = "# partycast clock log 1: offset-ns 0 drift-ppm 0.0 anchor-ns 0\n"
        let log = try XCTUnwrap(ClockExchangeLog.read((header + "0 100 200 300\n1000000000 1000000100 1000000200 1000000300\n")[...]))
        // The first probe with a mapping is the first after the first answer (300 ns), or the moment
        // judged from; then one every 10 ms.
        for (judgedFrom, expected, firstProbe) in [(Int64.min, 100, 10_000_000), (-4_000_000_000_000_000_000, 100, 10_000_000),
                                                   (0, 100, 10_000_000), (500_000_000, 51, 500_000_000), (Int64.max, 0, 0)] {
            var locals: [Int64] = []
            XCTAssertTrue(log.replay(judgedFrom: judgedFrom, every: 10_000_000) { local, _, _, _ in locals.append(local) })
            XCTAssertEqual(locals.count, expected, "judged from \(judgedFrom)")
            guard let first = locals.first else { continue }
            XCTAssertEqual(first, Int64(firstProbe), "judged from \(judgedFrom)")
            XCTAssert(zip(locals, locals.dropFirst()).allSatisfy { $1 - $0 == 10_000_000 }, "judged from \(judgedFrom)")
        }
    }

    /// Nor may a log's readings and clock, at the ends of what a log may hold (times of ±2⁶², an
    /// anchor of 2⁶², a day's offset, −10000 ppm), trap the truth's arithmetic: before, the local
    /// time's distance from the anchor overflowed and the elapsed machine time left Int64.
    func testReadingsAtTheEndsOfALogAreReplayedWithoutATrap() throws {
        let header = "# partycast clock log 1: offset-ns 86400000000000 drift-ppm -10000.0 anchor-ns 4611686018427387904\n"
        let first = -4_611_686_018_427_387_904 as Int64
        let exchanges = [first, first + 1_000_000_000].map { "\($0) \($0 + 100) \($0 + 200) \($0 + 300)" }
        let log = try XCTUnwrap(ClockExchangeLog.read((header + exchanges.joined(separator: "\n") + "\n")[...]))
        XCTAssertEqual(log.samples.count, 2)
        var probes = 0
        XCTAssertTrue(log.replay(judgedFrom: 0, every: 10_000_000) { _, _, _, _ in probes += 1 })
        XCTAssertEqual(probes, 100)
        // Where nothing overflows, the mapping back is the one `--simulate-clock` applies, inverted.
        let clock = LocalClock(offsetSeconds: 9, driftPPM: 120, anchor: 45_882_727_771_978)
        for machine: UInt64 in [45_882_727_771_978, 45_891_746_846_895, 1 << 53] {
            XCTAssertEqual(Double(clock.machine(fromLocal: clock.local(fromMachine: machine))), Double(machine), accuracy: 1)
        }
    }
}
