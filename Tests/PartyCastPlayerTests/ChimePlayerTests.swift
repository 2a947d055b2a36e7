import PartyCastClock
import PartyCastCore
import PartyCastOutput
import PartyCastPlayer
import PartyCastTestSupport
import XCTest

/// The identification chime through the real player, plain path on the virtual card: identifies
/// reach the output as a planned chime; a flood of them while one plays adds nothing more; the
/// music is untouched around it.
final class ChimePlayerTests: XCTestCase {
    func testAFloodOfIdentifiesPlaysOneChimeWhereTheFirstSaid() throws {
        let rate = 48_000, start = 36_000
        func music(_ frame: Int) -> Float { Float(frame % 64 + 1) / 512 }
        func block(_ frames: Range<Int>) -> [Float] { frames.flatMap { [music($0), music($0)] } }
        // The first asks for the chime; the thousand after it would each start while it plays.
        let flood = [TimelineEvent.identify(atFrame: start)] + (1...1000).map { .identify(atFrame: start + 10 * $0) }
        let steps: [ScriptedPartySource.Step] = [
            .audio(frame: 0, samples: block(0..<24_000)),
            .events(flood, paused: false, latencyOffset: nil),
            .audio(frame: 24_000, samples: block(24_000..<96_000)),
        ]
        let path = try temporaryDirectory() + "/chime.wav"
        var options = PlayerOptions()
        options.sync = false
        let player = Player(output: VirtualCardOutput(path: path), options: options) { () throws(PartyCastError) -> PCMSource in ScriptedPartySource(steps) }
        XCTAssertEqual(player.run(), .endOfStream)

        let recorded = try readAudio(path)
        // The music is never silent: the silence before it is the card waiting.
        let heard = Array(stride(from: 0, to: recorded.samples.count, by: 2).map { recorded.samples[$0] }.drop { $0 == 0 }.prefix(96_000))
        XCTAssertEqual(heard.count, 96_000)
        let chimed = heard.indices.filter { abs(heard[$0] - music($0)) > 1e-4 }
        let frames = Chime(sampleRate: rate).frames
        XCTAssertGreaterThan(chimed.count, frames * 9 / 10, "the chime was heard")
        XCTAssertGreaterThanOrEqual(chimed.first ?? -1, start, "not before the frame it was planned for")
        XCTAssertLessThan(chimed.last ?? .max, start + frames, "once: the flood neither restarted nor extended it")
    }
}
