import PartyCastOutput
import XCTest

/// The identification chime on the output thread: added to the frames it was planned for, at the
/// gain of those frames, over the music, in both the plain and the scheduled path; every other
/// frame is the music bit for bit. The music is small steps (exact in Float, so a difference is the
/// chime alone, to Float's precision near the music's level).
final class ChimeMixTests: XCTestCase {
    static let rate = TimelineEditTests.rate, start = 12_000

    func music(_ frame: Int) -> Float { Float(frame % 64) / 512 }

    /// Plays 1 s of music with the chime planned at `start` (from the producer's side, before the
    /// frames are written, as the player does) and returns chime = heard − music per frame.
    func chimeHeard(scheduled: Bool, gain: Float) -> (added: [Float], chimeFrames: Int) {
        let chime = Chime(sampleRate: Self.rate)
        let rig = TimelineEditTests.Rig(scheduledFrom: scheduled ? 0 : nil, chime: chime)
        if gain != 1 {
            var curve = GainCurve()
            curve.set(gain, atFrame: 0, rampFrames: 0)
            rig.renderer.gains.publish(curve)
        }
        chime.play(atFrame: Self.start)
        let samples = (0..<Self.rate).flatMap { [music($0), music($0)] }
        XCTAssertEqual(samples.withUnsafeBufferPointer { rig.ring.write($0) }, samples.count)
        rig.render(periods: Self.rate / TimelineEditTests.period)
        return (rig.left.enumerated().map { $1 - gain * music($0) }, chime.frames)
    }

    /// The level of `frequency` in `samples` (Goertzel), as the amplitude of a sine that has it.
    func level(of frequency: Double, in samples: ArraySlice<Float>) -> Double {
        let w = 2 * Double.pi * frequency / Double(Self.rate)
        var (s1, s2) = (0.0, 0.0)
        for sample in samples { (s1, s2) = (Double(sample) + 2 * cos(w) * s1 - s2, s1) }
        return 2 * sqrt(max(0, s1 * s1 + s2 * s2 - 2 * cos(w) * s1 * s2)) / Double(samples.count)
    }

    func assertChime(scheduled: Bool, gain: Float, line: UInt = #line) {
        let (added, frames) = chimeHeard(scheduled: scheduled, gain: gain)
        let span = Self.start..<(Self.start + frames)
        XCTAssertEqual(frames, Self.rate * 6 / 10, "0.6 s", line: line)
        // Past the scheduled reader's fade-in as it starts (5 ms), and short of the last frames, which
        // wait in its input for the interpolation kernel's look-ahead.
        let outside = added.indices.filter { $0 >= Self.rate / 100 && $0 < Self.rate - 64 && !span.contains($0) && added[$0] != 0 }
        XCTAssertEqual(outside.first, nil, "a frame outside the chime differs from the music", line: line)
        let inside = added[span]
        let peak = inside.map(\.magnitude).max() ?? 0
        XCTAssertEqual(Double(peak), 0.3 * Double(gain), accuracy: 0.01 * Double(gain), "the chime's peak follows the gain", line: line)
        XCTAssertLessThan(max(inside.first!.magnitude, inside.last!.magnitude), 0.001 * gain, "it starts and ends at silence", line: line)
        let steepest = zip(inside.dropFirst(), inside).map { ($0 - $1).magnitude }.max() ?? 0
        XCTAssertLessThan(steepest, 0.07 * gain, "no click: no step beyond a 1.6 kHz sine's at the peak", line: line)
        // Three notes in turn: each third of the chime is mostly its own note.
        let notes = [1046.5, 1318.5, 1568.0]
        for (n, note) in notes.enumerated() {
            let third = inside.dropFirst(n * frames / 3).prefix(frames / 3)
            let levels = notes.map { level(of: $0, in: third) }
            XCTAssertGreaterThan(levels[n], 0.2 * Double(gain), "note \(n + 1) at \(note) Hz", line: line)
            for (other, level) in levels.enumerated() where other != n {
                XCTAssertLessThan(level, levels[n] / 10, "note \(n + 1) has no \(notes[other]) Hz", line: line)
            }
        }
    }

    func testThePlainPathAddsTheChimeToItsFramesAlone() { assertChime(scheduled: false, gain: 1) }
    func testTheScheduledPathAddsTheChimeToItsFramesAlone() { assertChime(scheduled: true, gain: 1) }
    func testTheChimeFollowsTheListenersGain() { assertChime(scheduled: true, gain: 0.25) }

    /// No chime planned, or one planned and then replaced before it was due: the music alone, then
    /// the second chime once.
    func testANewChimeReplacesAPlannedOneAndNoneAddsNothing() {
        let chime = Chime(sampleRate: Self.rate)
        let rig = TimelineEditTests.Rig(scheduledFrom: nil, chime: chime)
        chime.play(atFrame: 40_000)
        chime.play(atFrame: Self.start)
        let samples = (0..<(2 * Self.rate)).flatMap { [music($0), music($0)] }
        XCTAssertEqual(samples.withUnsafeBufferPointer { rig.ring.write($0) }, samples.count)
        rig.render(periods: 2 * Self.rate / TimelineEditTests.period)
        let differs = rig.left.indices.filter { rig.left[$0] != music($0) }
        XCTAssertGreaterThanOrEqual(differs.first ?? 0, Self.start)
        XCTAssertLessThan(differs.last ?? .max, Self.start + chime.frames, "one chime, from the frame planned last")
    }
}
