import NIOCore
import NIOEmbedded
@testable import PartyCastBroadcast
import PartyCastControlSeam
import PartyCastWire
import XCTest

/// The identify command (issue 27): one Identify message to the named listener alone, naming the
/// timeline frame heard a control margin from now; nothing else changes for anyone.
extension PartyCommandTests {
    /// The Identify messages among what `channel` was sent since it was last read.
    func identifies(_ channel: EmbeddedChannel) throws -> [PCIdentify] {
        try greeting(channel).compactMap { if case .identify(let message)? = $0.body { message } else { nil } }
    }

    func testIdentifyGoesToTheNamedListenerAloneAtTheControlMargin() throws {
        try startAndPlay()
        let hall = EmbeddedChannel()
        XCTAssertNotNil(party.fanout.join(channel: hall, listenerID: "L2", name: "hall", host: "hall.local", address: "127.0.0.2", first: []))
        _ = try greeting(hall)
        try pump()
        let sentBefore = Array(listener.samples(from: 0, count: 96_000).prefix { $0 != nil })
        XCTAssertGreaterThan(sentBefore.count, 48_000)

        let expected = party.state.timeline.position(at: clock.now + Self.margin)
        guard case .success = party.answer(.command(.identify(listener: "hall"))) else { return XCTFail("identify hall was refused") }
        XCTAssertEqual(try identifies(hall).map(\.atPosition), [expected], "one chime, a control margin (\(Self.margin / 1_000_000) ms) from now")
        XCTAssertGreaterThan(expected, party.state.timeline.position(at: clock.now), "not a frame already heard")
        XCTAssertEqual(try identifies(channel), [], "the kitchen is told nothing")

        // By id too; and the kitchen's audio, gains and settings stay exactly as they were.
        clock.advance(milliseconds: 700)
        guard case .success = party.answer(.command(.identify(listener: "L1"))) else { return XCTFail("identify L1 was refused") }
        XCTAssertEqual(try identifies(channel).count, 1)
        XCTAssertEqual(try identifies(hall), [])
        try pump()
        XCTAssertEqual(listener.withdrawals, [])
        XCTAssertEqual(listener.gains.count, 0)
        XCTAssertEqual(listener.settings.count, 0)
        assertSamples(listener.samples(from: 0, count: sentBefore.count), sentBefore, "the party's audio")
    }

    func testIdentifyRefusesWhomItCannotReach() throws {
        try startAndPlay()
        let outlet = RecordingOutlet()
        XCTAssertNotNil(party.fanout.join(outlet: outlet, listenerID: "S1", name: "speaker", host: "sendspin", address: "127.0.0.1"))
        XCTAssertEqual(try command(.identify(listener: "garden"))?.kind, .notFound)
        XCTAssertEqual(try command(.identify(listener: "speaker"))?.kind, .notFound, "a Sendspin player has no chime")
        XCTAssertNil(try command(.pause))
        XCTAssertEqual(try command(.identify(listener: "kitchen"))?.kind, .invalid, "paused: no frames to carry the chime")
        XCTAssertEqual(try identifies(channel), [])
    }
}
