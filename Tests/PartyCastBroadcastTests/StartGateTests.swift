@testable import PartyCastBroadcast
import PartyCastCore
import XCTest

/// The start held for the listeners' clocks (StartGate.swift), on PartyCommandTests' pacer driven
/// by hand: the song is taken back before its first sample is heard and starts whole, a lead after
/// the last clock settles, or once the wait is over.
extension PartyCommandTests {
    /// The listener (id 1) says whether its clock has settled (nil: it says nothing of it).
    func report(settled: Bool?) {
        party.fanout.update(1, bufferMilliseconds: 0, syncErrorMicroseconds: nil, clockBoundMicroseconds: nil, clockSettled: settled,
                            latencyOffsetMilliseconds: 0, channel: nil)
    }

    /// Starts the party (1 s from now), sends its lead and moves to where the gate is decided.
    func startAndReachTheGate() throws {
        XCTAssertTrue(try party.start())
        try pump()
        XCTAssertFalse(listener.chunks.isEmpty, "the lead went out before the gate")
        clock.advance(milliseconds: 1000 - Party.startDecisionLeadNanoseconds / 1_000_000)
        try pump()
        listener.gains = []  // the greeting's
    }

    /// What the listener hears from `position` for `count` frames is song 0 from its first sample,
    /// and nothing was sent for the frames before it.
    func assertTheSongStartsWhole(at position: UInt64, count: Int = 48000, line: UInt = #line) {
        assertSamples(listener.samples(from: 0, count: Int(position)), Array(repeating: nil, count: Int(position)), "before the start", line: line)
        assertSamples(listener.samples(from: position, count: count), (0..<count).map { Float($0) }, "from the start", line: line)
    }

    func testTheStartWaitsForAnUnsettledClockAndTheSongStartsWhole() throws {
        report(settled: false)
        try startAndReachTheGate()
        XCTAssertTrue(party.gateStart(), "held for the kitchen's clock")
        try pump()
        XCTAssertEqual(listener.withdrawals, [0])
        XCTAssertTrue(listener.chunks.isEmpty)
        XCTAssertFalse(party.snapshot.paused, "a hold for the clocks is not the remote's pause")
        XCTAssertNil(party.snapshot.current, "nothing is heard yet")
        XCTAssertEqual(party.snapshot.listeners.map(\.clockSettled), [false], "the remotes see whom the start waits for")

        clock.advance(milliseconds: 2000)
        XCTAssertTrue(party.gateStart())
        try pump()
        XCTAssertTrue(listener.chunks.isEmpty, "nothing is sent while held")

        report(settled: true)
        let startAt = party.state.timeline.position(at: clock.now + party.leadNanoseconds)
        XCTAssertFalse(party.gateStart(), "every clock has settled")
        XCTAssertNil(party.state.startGate)
        try pump()
        clock.advance(milliseconds: 1000)
        try pump()
        XCTAssertEqual(listener.metadata.last.map { [$0.startPosition, $0.songFrame] }, [startAt, 0])
        XCTAssertEqual(listener.gains.map { [Double($0.gain), Double($0.atPosition), Double($0.rampFrames)] },
                       [[0, 0, 0], [1, Double(startAt), 0]],
                       "silent while held (what a codec's delay carries over from the audio taken back), then whole: no fade")
        XCTAssertEqual(listener.pausedStates, [], "the listeners were never told of a pause")
        assertTheSongStartsWhole(at: startAt)
    }

    func testTheStartIsHeldNoLongerThanTheSettleWait() throws {
        report(settled: false)
        try startAndReachTheGate()
        XCTAssertTrue(party.gateStart())
        let until = party.state.timeline.origin + UInt64(party.options.settleWaitSeconds * 1e9)
        XCTAssertEqual(party.startGateDue, until)
        clock.advance(milliseconds: (until - clock.now) / 1_000_000 - 1)
        XCTAssertTrue(party.gateStart())
        clock.advance(milliseconds: 1)
        let startAt = party.state.timeline.position(at: clock.now + party.leadNanoseconds)
        XCTAssertFalse(party.gateStart(), "the wait is over, settled or not")
        try pump()
        clock.advance(milliseconds: 1000)
        try pump()
        assertTheSongStartsWhole(at: startAt)
    }

    func testTheStartIsNotHeldForSettledOrSilentClocks() throws {
        for settled: Bool? in [true, nil] {
            makeParty([ResolvedSource(spec: "ramp:0", label: "ramp", isLive: false, open: { () throws(PartyCastError) -> PCMSource in RampSource(base: 0) })])
            report(settled: settled)
            try startAndReachTheGate()
            XCTAssertFalse(party.gateStart(), "\(String(describing: settled))")
            XCTAssertNil(party.state.startGate)
            clock.advance(milliseconds: 1000)
            try pump()
            XCTAssertEqual(listener.withdrawals, [])
            assertTheSongStartsWhole(at: 0)
        }
    }

    /// The remote's pause during the hold keeps the party where it is, paused by the remote: the
    /// clocks settling no longer start it, its resume does.
    func testAPauseDuringTheHoldIsTheRemotes() throws {
        report(settled: false)
        try startAndReachTheGate()
        XCTAssertTrue(party.gateStart())
        XCTAssertNil(try command(.pause))
        XCTAssertEqual(listener.pausedStates, [true])
        XCTAssertTrue(party.snapshot.paused)
        report(settled: true)
        XCTAssertFalse(party.gateStart())
        try pump()
        XCTAssertTrue(listener.chunks.isEmpty, "still paused")
        XCTAssertNil(try command(.resume))
        XCTAssertEqual(listener.pausedStates, [true, false])
        XCTAssertFalse(party.snapshot.paused)
    }

    /// A song shorter than the lead is all sent before the gate: taken back, it is all sent again.
    func testASongSentWholeBeforeTheHoldIsHeardWhole() throws {
        let frames = 14400
        makeParty([ResolvedSource(spec: "ramp:0", label: "ramp", isLive: false, open: { () throws(PartyCastError) -> PCMSource in
            RampSource(base: 0, frames: frames)
        })])
        report(settled: false)
        try startAndReachTheGate()
        XCTAssertTrue(party.state.reachedEnd, "the whole song went out with the lead")
        XCTAssertTrue(party.gateStart())
        report(settled: true)
        let startAt = party.state.timeline.position(at: clock.now + party.leadNanoseconds)
        XCTAssertFalse(party.gateStart())
        clock.advance(milliseconds: 1000)
        try pump()
        assertTheSongStartsWhole(at: startAt, count: frames)
    }

    /// An embedder's times outside what `broadcaster share` accepts (negative, NaN, infinite, huge)
    /// are taken as the nearest within, or the default: the pacer starts and its arithmetic holds.
    func testAnEmbeddersTimesOutOfRangeAreTakenAsTheNearestWithin() throws {
        let cases: [(startIn: Double, settleWait: Double, lead: Int, expected: (Double, Double, Int))] = [
            (-5, -1, -1000, (0, 0, 150)),
            (.nan, .nan, 0, (1, 8, 150)),
            (1e300, .infinity, .max, (3600, 60, 10_000)),
        ]
        for (startIn, settleWait, lead, expected) in cases {
            makeParty([ResolvedSource(spec: "ramp:0", label: "ramp", isLive: false, open: { () throws(PartyCastError) -> PCMSource in RampSource(base: 0) })]) {
                ($0.startInSeconds, $0.settleWaitSeconds, $0.leadMilliseconds) = (startIn, settleWait, lead)
            }
            let options = party.options
            XCTAssertEqual(options.startInSeconds, expected.0, "start-in \(startIn)")
            XCTAssertEqual(options.settleWaitSeconds, expected.1, "settle-wait \(settleWait)")
            XCTAssertEqual(options.leadMilliseconds, expected.2, "lead \(lead)")
            XCTAssertTrue(try party.start())
            XCTAssertEqual(party.state.timeline.origin, clock.now + UInt64(expected.0 * 1e9))
            try pump()
        }
    }
}
