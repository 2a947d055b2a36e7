import Foundation
@testable import PartyCastBroadcast
import PartyCastControlSeam
import PartyCastCore
import PartyCastSources
import XCTest

/// The tone command (issue 27): a `tone:` source retuned at the cut, the phase going on. What the
/// listener was sent is checked sample by sample against the sine computed here.
extension PartyCommandTests {
    func makeToneParty() {
        makeParty([ResolvedSource(spec: "tone:440", label: "tone:440", isLive: false, open: { () throws(PartyCastError) -> PCMSource in
            try ToneGenerator(spec: "440")
        })])
    }

    /// The left channel the listener holds, frame by frame, from position 0 (the PCM is interleaved stereo).
    func heardLeftChannel() -> [Float] {
        var left: [Float] = []
        for (start, samples) in listener.chunks.sorted(by: { $0.key < $1.key }) {
            XCTAssertEqual(Int(start), left.count, "chunks follow each other without a gap")
            left += stride(from: 0, to: samples.count, by: 2).map { samples[$0] }
        }
        return left
    }

    func testToneRetunesEveryListenerAtTheCutWithoutAJumpInPhase() throws {
        makeToneParty()
        try startAndPlay()
        XCTAssertEqual(party.snapshot.toneHertz, 440)
        let cut = expectedCut()
        XCTAssertNil(try command(.tone(hertz: 1000)))
        XCTAssertEqual(listener.withdrawals, [cut], "what was sent beyond the cut is taken back")
        XCTAssertTrue(listener.gains.isEmpty, "nothing to fade: the phase goes on")
        XCTAssertEqual(answered?.toneHertz, 1000)
        XCTAssertEqual(answered?.queue.first?.title, "1000 Hz tone")
        clock.advance(milliseconds: 1000)
        try pump()

        let left = heardLeftChannel()
        XCTAssertGreaterThan(left.count, Int(cut) + 24000, "half a second after the cut was sent")
        let phaseAtCut = 2 * Double.pi * 440 * Double(cut) / 48000
        var worst = (error: 0.0, frame: 0)
        for (frame, sample) in left.enumerated() {
            let phase = frame < Int(cut)
                ? 2 * Double.pi * 440 * Double(frame) / 48000
                : phaseAtCut + 2 * Double.pi * 1000 * Double(frame - Int(cut)) / 48000
            let error = abs(Double(sample) - 0.5 * sin(phase))
            if error > worst.error { worst = (error, frame) }
        }
        XCTAssertLessThan(worst.error, 1e-5, "frame \(worst.frame) (cut at \(cut)) is off the sine by \(worst.error)")
    }

    func testToneRefusesWhatItCannotPlay() throws {
        try startAndPlay()
        XCTAssertEqual(try command(.tone(hertz: 440))?.kind, .invalid, "the ramps are no tone")
        makeToneParty()
        try startAndPlay()
        for hertz in [0, -1, 24000, .infinity, .nan] {
            XCTAssertEqual(try command(.tone(hertz: hertz))?.kind, .invalid, "\(hertz) Hz")
        }
        XCTAssertEqual(party.snapshot.toneHertz, 440, "refusals change nothing")
        XCTAssertTrue(listener.withdrawals.isEmpty)
    }
}
