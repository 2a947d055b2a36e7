import PartyCastClock
import PartyCastSources
import XCTest

/// A link like UDP through a jittery relay: each packet held 0–`jitter` on its own (so answers
/// overtake each other), requests pipelined, answers handed over in the order they arrive. With
/// `keepsOrder`, as Wi-Fi: no packet leaves before one sent earlier the same way.
struct JitteryLink {
    /// Remote minus local at `joinTime`.
    var offset: Int64
    var driftPPM: Double
    /// How fast the drift wanders (temperature), ppm per minute.
    var wanderPPMPerMinute = 0.0
    var upJitter: Int64
    var downJitter: Int64
    var base: Int64 = 150_000
    /// Added to `base` on the way down only: a slower hop one way, which no exchange can see.
    var downSlower: Int64 = 0
    var random: SplitMix64
    var keepsOrder = false
    /// With `keepsOrder`: other traffic in the same queues, a packet every so often each way (audio
    /// down, its acknowledgements up), held as the exchanges are, from `joinTime`.
    var background: (up: Int64, down: Int64)?
    var lastUp: Int64 = .min, lastDown: Int64 = .min
    var nextBackground = (up: joinTime, down: joinTime)

    func remote(atLocal local: Int64) -> Int64 {
        let t = Double(local - joinTime)
        return local + offset + Int64((driftPPM * 1e-6 * t + 0.5 * wander * t * t).rounded())
    }

    func driftPPM(atLocal local: Int64) -> Double { driftPPM + wander * Double(local - joinTime) * 1e6 }

    private var wander: Double { wanderPPMPerMinute * 1e-6 / 60e9 }

    mutating func exchange(sentAt t1: Int64) -> (arrival: Int64, sample: ClockSample) {
        if keepsOrder, let background {
            while nextBackground.up < t1 {
                lastUp = max(lastUp, nextBackground.up + base + Int64.random(in: 0...upJitter, using: &random))
                nextBackground.up += background.up
            }
        }
        var received = t1 + base + Int64.random(in: 0...upJitter, using: &random)
        if keepsOrder { (received, lastUp) = (max(received, lastUp), max(received, lastUp)) }
        let replied = received + Int64.random(in: 5_000...30_000, using: &random)
        if keepsOrder, let background {
            while nextBackground.down < replied {
                lastDown = max(lastDown, nextBackground.down + base + downSlower + Int64.random(in: 0...downJitter, using: &random))
                nextBackground.down += background.down
            }
        }
        var t4 = replied + base + downSlower + Int64.random(in: 0...downJitter, using: &random)
        if keepsOrder { (t4, lastDown) = (max(t4, lastDown), max(t4, lastDown)) }
        return (t4, ClockSample(t1: t1, t2: remote(atLocal: received), t3: remote(atLocal: replied), t4: t4))
    }

    /// Sends on `interval` (ClockExchangeSchedule by default) for `duration` from `start` and hands
    /// each answer to `deliver` when it arrives; `probe` sees the estimator and the link every 10 ms.
    mutating func run(
        _ estimator: inout ClockEstimator, from start: Int64 = joinTime, duration: Int64, interval: ((Int64) -> Int64)? = nil,
        deliver: (inout ClockEstimator, ClockSample) -> Void = { $0.add($1) },
        probe: (Int64, ClockEstimator, JitteryLink) -> Void = { _, _, _ in }
    ) {
        // As ClockRequester: the schedule learns from the answers' order whether they overtake, and
        // a sparse request's answer brings a follow-up at once.
        var inFlight: [(arrival: Int64, sequence: UInt64, sample: ClockSample)] = []
        var order = AnswerOrder(), sequence: UInt64 = 0, followUps = ClockFollowUps()
        var nextSend = start, nextProbe = start
        while nextProbe < start + duration {
            let arrival = inFlight.map(\.arrival).min() ?? .max
            if arrival <= min(nextSend, nextProbe) {
                let answer = inFlight.remove(at: inFlight.firstIndex { $0.arrival == arrival }!)
                order.record(sequence: answer.sequence)
                deliver(&estimator, answer.sample)
                followUps.answered(sequence: answer.sequence)
                if interval == nil, followUps.isDue { nextSend = min(nextSend, arrival) }
            } else if nextSend <= nextProbe {
                sequence += 1
                followUps.sent(sequence: sequence, at: nextSend)
                let (arrival, sample) = exchange(sentAt: nextSend)
                inFlight.append((arrival, sequence, sample))
                let sinceJoin = nextSend - joinTime
                nextSend += interval?(sinceJoin) ?? ClockExchangeSchedule().interval(
                    sinceJoin: sinceJoin, linkNoise: estimator.linkNoise, answersOvertake: order.answersOvertake,
                    readsTopEdge: estimator.readsTopEdge)
            } else {
                probe(nextProbe, estimator, self)
                nextProbe += 10 * millisecond
            }
        }
    }

    /// |estimated − true| remote time at `local`, ns.
    func error(of estimator: ClockEstimator, at local: Int64) -> Int64 {
        guard let mapping = estimator.mapping else { return .max }
        return abs(mapping.remote(fromLocal: local) - remote(atLocal: local))
    }
}

/// The envelope estimator of issue 11: what it must hold on links with jitter, reordering, glitches
/// and drift that wanders. partycast-clock-sim compares it with the estimator before.
final class ClockEnvelopeTests: XCTestCase {
    func link(seed: UInt64, up: Int64, down: Int64, driftPPM: Double = 120, wander: Double = 0.1) -> JitteryLink {
        JitteryLink(offset: -4_200 * millisecond + Int64(seed), driftPPM: seed % 2 == 0 ? driftPPM : -driftPPM,
                    wanderPPMPerMinute: wander, upJitter: up, downJitter: down, random: SplitMix64(seed: seed))
    }

    /// The judged link's jitter, both ways or only on the way back (answers queued behind audio): the
    /// mapping is within 250 µs from 5 s and within 100 µs from 30 s, the drift within 3 ppm from 30 s.
    /// (The estimator before issue 11 was off by milliseconds here.)
    func testConvergesUnderTwentyMillisecondsOfJitterEitherWay() {
        for (up, down) in [(20 * millisecond, 20 * millisecond), (150 * microsecond, 20 * millisecond)] {
            for seed: UInt64 in 1...3 {
                var link = link(seed: seed, up: up, down: down)
                var estimator = ClockEstimator()
                var early: Int64 = 0, late: Int64 = 0, drift = 0.0
                link.run(&estimator, duration: 45 * second, probe: { now, estimator, link in
                    let sinceJoin = now - joinTime
                    guard sinceJoin >= 5 * second else { return }
                    let error = link.error(of: estimator, at: now)
                    if sinceJoin < 30 * second {
                        early = max(early, error)
                    } else {
                        late = max(late, error)
                        drift = max(drift, abs(estimator.mapping!.driftPPM - link.driftPPM(atLocal: now)))
                    }
                })
                let name = "jitter \(up / microsecond) µs up, \(down / microsecond) µs down, seed \(seed)"
                print("\(name): worst \(early / 1000) µs from 5 s, \(late / 1000) µs from 30 s, drift \(drift) ppm")
                XCTAssertLessThanOrEqual(early, 250 * microsecond, name)
                XCTAssertLessThanOrEqual(late, 100 * microsecond, name)
                XCTAssertLessThanOrEqual(drift, 3, name)
            }
        }
    }

    /// Answers overtake each other; the estimate depends on which exchanges were made, not on the
    /// order their answers came in.
    func testAnswersInAnyOrderGiveTheSameMapping() throws {
        var link = link(seed: 5, up: 5 * millisecond, down: 5 * millisecond)
        var collected: [ClockSample] = []
        var inArrivalOrder = ClockEstimator()
        link.run(&inArrivalOrder, duration: 20 * second, deliver: { estimator, sample in
            estimator.add(sample)
            collected.append(sample)
        })
        var random = SplitMix64(seed: 9)
        var shuffled = ClockEstimator()
        for sample in collected.shuffled(using: &random) { shuffled.add(sample) }
        XCTAssertEqual(shuffled.samples, inArrivalOrder.samples)
        let (a, b) = try (XCTUnwrap(inArrivalOrder.mapping), XCTUnwrap(shuffled.mapping))
        XCTAssertEqual(a.driftPPM, b.driftPPM, accuracy: 0.01)
        for local in stride(from: joinTime + 15 * second, to: joinTime + 21 * second, by: Int(second)) {
            XCTAssertLessThanOrEqual(abs(a.remote(fromLocal: local) - b.remote(fromLocal: local)), 1_000)
        }
    }

    /// Timestamps that err the other way (a remote clock read late, a path faster for a moment) put a
    /// point below the envelope, where a pure minimum would follow it for the whole window. Alone or
    /// in a burst, such points are set aside, on a link that reorders or one that keeps order (where
    /// few points come near the floor, so the floor itself says how deep a glitch must lie).
    func testGlitchesBelowTheEnvelopeAreSetAside() {
        for burst in [1, 6] { for keepsOrder in [false, true] {
            var link = link(seed: 11, up: 5 * millisecond, down: 5 * millisecond)
            if keepsOrder { (link.keepsOrder, link.background) = (true, (up: 100 * millisecond, down: 50 * millisecond)) }
            var estimator = ClockEstimator()
            link.run(&estimator, duration: 20 * second)
            var clean = estimator
            // Each glitch claims a one-way delay 3 ms below the base; the other way took 10 ms, so the
            // exchange itself is plausible.
            for index in 0..<burst {
                let t1 = joinTime + 20 * second + Int64(index) * 30 * millisecond
                let received = t1 + link.base, replied = received + 20_000, t4 = replied + 10 * millisecond
                let early = ClockSample(t1: t1, t2: link.remote(atLocal: received) - 3 * millisecond,
                                        t3: link.remote(atLocal: replied), t4: t4)
                let late = ClockSample(t1: t1 + 10 * millisecond, t2: link.remote(atLocal: received + 10 * millisecond),
                                       t3: link.remote(atLocal: replied + 10 * millisecond) + 3 * millisecond,
                                       t4: t4 + 10 * millisecond + link.base)
                estimator.add(index % 2 == 0 ? early : late)
            }
            XCTAssertGreaterThan(estimator.glitchesSetAside, 0, "burst of \(burst), order kept \(keepsOrder)")
            var glitched = estimator
            link.run(&glitched, from: joinTime + 20 * second, duration: 2 * second, deliver: { estimator, sample in
                estimator.add(sample)
                clean.add(sample)
            })
            let now = joinTime + 22 * second
            let name = "burst of \(burst)\(keepsOrder ? ", order kept" : "")"
            print("\(name): error \(link.error(of: glitched, at: now)) ns glitched, \(link.error(of: clean, at: now)) ns clean")
            XCTAssertLessThanOrEqual(abs(glitched.mapping!.remote(fromLocal: now) - clean.mapping!.remote(fromLocal: now)), 5_000, name)
            XCTAssertLessThanOrEqual(link.error(of: glitched, at: now), 50 * microsecond, name)
        } }
    }

    /// A drift that wanders five times faster than the brief's 0.1 ppm a minute, on a quiet link, for
    /// ten minutes: the window follows it.
    func testDriftThatWandersIsTracked() {
        var link = link(seed: 2, up: 50 * microsecond, down: 50 * microsecond, driftPPM: 80, wander: 0.5)
        var estimator = ClockEstimator()
        var worst: Int64 = 0, drift = 0.0
        link.run(&estimator, duration: 600 * second, probe: { now, estimator, link in
            guard now - joinTime >= 20 * second else { return }
            worst = max(worst, link.error(of: estimator, at: now))
            drift = max(drift, abs(estimator.mapping!.driftPPM - link.driftPPM(atLocal: now)))
        })
        print("wandering drift: worst \(worst) ns, drift \(drift) ppm, \(estimator.samples) samples")
        XCTAssertLessThanOrEqual(worst, 15 * microsecond)
        // The drift is the slope at the window's middle, half a window behind: 0.27 ppm at this rate.
        XCTAssertLessThanOrEqual(drift, 0.6)
        XCTAssertLessThanOrEqual(estimator.samples, 257)  // a quiet link: a pair every 500 ms, in one 100 ms bin
    }

    /// Before the span means anything, the mapping is the envelopes' offset at rate 1.
    func testFewSamplesStillGiveAnOffset() throws {
        var estimator = ClockEstimator()
        XCTAssertNil(estimator.mapping)
        let apart: Int64 = 1_000_000_000_000_000_000
        // 40 µs out, 10 µs turnaround, 60 µs back: the offset is apart − 10 µs, as ClockSample's.
        let one = ClockSample(t1: 1_000, t2: apart + 41_000, t3: apart + 51_000, t4: 111_000)
        estimator.add(one)
        var mapping = try XCTUnwrap(estimator.mapping)
        XCTAssertEqual(mapping.rate, 1)
        XCTAssertEqual(mapping.remote(fromLocal: 111_000) - 111_000, one.offset)

        var link = link(seed: 3, up: 30 * microsecond, down: 30 * microsecond, driftPPM: 150)
        estimator = ClockEstimator()
        link.run(&estimator, duration: 60 * millisecond, interval: { _ in 20 * millisecond })
        mapping = try XCTUnwrap(estimator.mapping)
        XCTAssertEqual(estimator.samples, 3)
        XCTAssertEqual(mapping.rate, 1)
        XCTAssertLessThanOrEqual(link.error(of: estimator, at: joinTime + 60 * millisecond), 20 * microsecond)
    }

    /// A broadcaster whose clock leaps (broken or hostile: its times only have to look like
    /// CLOCK_MONOTONIC readings) within one connection: the leap is not followed, and values as far
    /// apart as 2⁶² never reach the envelope's arithmetic (they would overflow it).
    func testARemoteClockThatLeapsIsNotFollowed() throws {
        var estimator = ClockEstimator()
        let remoteFar: Int64 = 1 << 62
        for step: Int64 in 0..<50 {
            let t1 = joinTime + step * 20 * millisecond
            estimator.add(ClockSample(t1: t1, t2: remoteFar + t1 + 100_000, t3: remoteFar + t1 + 110_000, t4: t1 + 210_000))
        }
        let settled = try XCTUnwrap(estimator.mapping)
        let now = joinTime + second
        for leap: Int64 in [0, 5, 1 << 40] {
            estimator.add(ClockSample(t1: now, t2: leap, t3: leap + 10_000, t4: now + 200_000))
        }
        XCTAssertEqual(estimator.samples, 50, "the leaps were not taken")
        let mapping = try XCTUnwrap(estimator.mapping)
        XCTAssertEqual(mapping.remote(fromLocal: now), settled.remote(fromLocal: now))
    }

    /// linkNoise tells a quiet link from a jittery one, and sees queueing on one side only.
    func testLinkNoiseMeasuresQueueing() throws {
        let links: [(up: Int64, down: Int64, noise: ClosedRange<Int64>)] = [
            (20_000, 20_000, 0...20_000),
            (20_000_000, 20_000_000, 7_000_000...13_000_000),
            (20_000, 5_000_000, 1_500_000...3_500_000),
        ]
        for (up, down, range) in links {
            var link = link(seed: 4, up: up, down: down)
            var estimator = ClockEstimator()
            link.run(&estimator, duration: 10 * second)
            XCTAssert(range.contains(try XCTUnwrap(estimator.linkNoise)), "\(up) up, \(down) down: \(estimator.linkNoise!)")
        }
    }
}
