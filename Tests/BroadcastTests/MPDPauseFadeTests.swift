import Foundation
import PartyCastTestSupport
import XCTest

/// MPDSourceTests' one test that times the audio, in a class of its own so that it runs in the
/// timing lane (scripts/run-tests.sh) and the rest of MPDSourceTests beside it.
final class MPDPauseFadeTests: XCTestCase {
    /// mpd's pause as a listener hears it: the party's own pause, a fade to silence at its cut and
    /// a fade in at the resume, not the abrupt stop of a pipe run dry (the party counting on while
    /// its LiveBuffer empties, as before --mpd).
    func testMPDsPauseIsHeardAsAFadeNotAnUnderrun() async throws {
        let (directory, fifo, _) = try MPDSourceTests.makeLibrary()
        let mpd = try MPDSourceTests.MPD(directory: directory, fifo: fifo)
        defer { mpd.stop() }
        try mpd.mpc("update", "--wait")
        try mpd.mpc("add", "1.mp3")
        let (server, remote, port) = try MPDSourceTests.startBroadcaster(["pipe:\(fifo)", "--mpd", "127.0.0.1:\(mpd.port)", "--codec", "pcm"])
        defer { server.signal(SIGKILL) }
        let listener = try startProcess(productPath("listener"), ["join", "--host", "127.0.0.1:\(port)", "--output", "virtual:\(directory)/heard.wav",
                                                                  "--once", "--quiet"])
        defer { listener.signal(SIGKILL) }
        XCTAssertTrue(server.waitForStderr("joined", timeout: 20), server.stderr)
        try mpd.mpc("play")
        let heardAWhile = try await remote.wait(timeout: 10) { !$0.paused && $0.elapsedSeconds >= 4 }
        XCTAssertNotNil(heardAWhile, server.stderr)
        // When the party showed each change: its cut is heard a control margin (160 ms) and a fade later.
        var asked = monotonicNow()
        try mpd.mpc("pause")
        let paused = try await remote.wait(timeout: 5, since: asked) { $0.paused }
        let pausedAt = asked + Int64((paused?.seconds ?? 0) * 1e9)
        XCTAssertNotNil(paused, server.stderr)
        // The pause lasts as long as a user's would; then two seconds of the song again.
        try await letTimePass(1)
        asked = monotonicNow()
        try mpd.mpc("play")
        let playing = try await remote.wait(timeout: 5, since: asked) { !$0.paused }
        let resumedAt = asked + Int64((playing?.seconds ?? 0) * 1e9)
        XCTAssertNotNil(playing, server.stderr)
        try await letTimePass(2)
        server.signal(SIGINT)
        XCTAssertEqual(listener.wait(timeout: 20).status, 0, listener.stderr)
        let served = server.wait(timeout: 20)
        XCTAssertEqual(served.status, 0, served.stderr)
        XCTAssertFalse(served.stderr.contains("the party is over"), "mpd followed past the party's end: \(served.stderr)")

        let heard = try CardRecording(path: "\(directory)/heard.wav", name: "heard")
        let rate = Int(heard.rate)
        guard let silent = heard.silenceStart(from: heard.frame(at: pausedAt), run: rate * 3 / 10), let back = heard.soundStart(from: silent) else {
            return XCTFail("no pause in the recording: \(served.stderr)")
        }
        func late(_ frame: Int, _ time: Int64) -> Double { Double(heard.time(ofFrame: Double(frame)) - time) / 1e9 }
        XCTAssertEqual(late(silent, pausedAt), 0.25, accuracy: 0.25, "the silence heard is the pause's: \(served.stderr)")
        XCTAssertEqual(late(back, resumedAt), 0.25, accuracy: 0.25, "the sound after it is the resume's: \(served.stderr)")
        // A 5 ms fade (240 frames) changes the gain by a few hundredths a frame at most (measured
        // 0.005-0.026 on a debug build at load 7); running dry, by about 1 at once (0.90-1.13 with
        // mpd's pause not followed). Fitted to the tone over the 0.1 s next to each edge.
        let (edge, fit) = (rate / 100, rate / 10)
        let out = heard.largestGainStep(over: silent - edge..<silent + edge, before: silent - edge - fit..<silent - edge, frequencies: [440])
        let into = heard.largestGainStep(over: back - edge..<back + edge, before: back + edge..<back + edge + fit, frequencies: [440])
        print(String(format: "mpd's pause: the largest gain step a frame was %.4f going out, %.4f coming back", out, into))
        XCTAssertLessThan(out, 0.2, "an abrupt stop, not a fade")
        XCTAssertLessThan(into, 0.2, "an abrupt start, not a fade")
    }
}
