@testable import PartyCastNetwork
import PartyCastClock
import PartyCastWire
import XCTest

/// Identify as the receiver takes it: passed on near where the stream stands, dropped and counted
/// otherwise, and bounded in a flood like every timeline message.
extension ListenerValidationTests {
    func identify(_ position: UInt64) -> PCEnvelope {
        var identify = PCIdentify()
        identify.atPosition = position
        return envelope(.identify(identify))
    }

    func testAnIdentifyNearTheStreamIsPassedOnAndAnAbsurdOneDropped() {
        var receiver = receiver()
        _ = play([welcome(), pcmFormat(), envelope(.audioChunk(pcmChunk(0))), identify(9600)], into: &receiver)
        XCTAssertEqual(receiver.takeEvents(), [.identify(atFrame: 9600)])
        // 30 s of the stream's rate either way is the reach; years ahead would never be heard.
        let absurd = [identify(.max), identify(StreamReceiver.maximumPosition), identify(UInt64(31 * 48_000))]
        XCTAssertEqual(play(absurd, into: &receiver), [])
        XCTAssertEqual(receiver.droppedMessages, absurd.count)
        XCTAssertEqual(receiver.takeEvents(), [])
        XCTAssertEqual(play([envelope(.audioChunk(pcmChunk(1)))], into: &receiver), [Float](repeating: 1, count: frames), "the stream goes on")
    }

    func testAFloodOfIdentifiesStaysBounded() {
        var receiver = receiver()
        _ = play([welcome(), pcmFormat(), envelope(.audioChunk(pcmChunk(0)))], into: &receiver)
        var pcm: [Float] = []
        for k in 0..<100_000 { XCTAssertEqual(receiver.receive(identify(UInt64(k % 1000)), arrivedAt: 0, into: &pcm), .continues) }
        XCTAssertEqual(receiver.takeEvents().count, StreamReceiver.eventLimit)
        XCTAssertEqual(receiver.droppedMessages, 100_000 - StreamReceiver.eventLimit)
    }
}
