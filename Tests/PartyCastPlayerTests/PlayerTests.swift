import Foundation
import PartyCastCore
import PartyCastDecoder
import PartyCastOutput
import PartyCastPlayer
import PartyCastSources
import PartyCastTestSupport
import Synchronization
import XCTest

final class PlayerTests: XCTestCase {
    /// Records every state the player reports, in order, without repeats.
    final class StateLog: Sendable {
        let states = Mutex<[PlayerState]>([])
        func record(_ status: PlayerStatus) {
            states.withLock { if $0.last != status.state { $0.append(status.state) } }
        }
        var all: [PlayerState] { states.withLock { $0 } }
    }

    func mp3(_ name: String) throws -> Player.SourceFactory {
        let path = try fixture(name)
        return { () throws(PartyCastError) -> PCMSource in try MP3Source(bytes: FileByteSource(path: path)) }
    }

    func testPlaysToTheEndThroughEveryState() throws {
        let out = try temporaryDirectory() + "/out.wav"
        let player = Player(output: WavFileOutput(path: out), source: try mp3("cbr.mp3"))
        let log = StateLog()
        player.observe(log.record)
        XCTAssertEqual(player.run(), .endOfStream)
        XCTAssertEqual(log.all, [.connecting, .waitingForData, .buffering, .playing, .stopping, .stopped])
        XCTAssertEqual(try readAudio(out).frames, 882_000)
    }

    func testErrorsTakeTheSinglePathWithACode() throws {
        let missing: Player.SourceFactory = { () throws(PartyCastError) -> PCMSource in try MP3Source(bytes: FileByteSource(path: "/nonexistent/x.mp3")) }
        let player = Player(output: NullOutput(), source: missing)
        guard case .error(let error) = player.run() else { return XCTFail("expected an error") }
        XCTAssertEqual(error.code, .fileNotFound)
        XCTAssertEqual(player.status.state, .stopped)

        let tooFar = Player(output: NullOutput(), options: PlayerOptions(startSeconds: 99), source: try mp3("cbr.mp3"))
        guard case .error(let startError) = tooFar.run() else { return XCTFail("expected an error") }
        XCTAssertEqual(startError.code, .invalidArgument)
    }

    /// On the simulated card: pause holds the position while the card plays silence, a seek jumps
    /// ahead, and a user stop ends with reason `.user`. The card's recording shows all of it.
    func testPauseSeekAndStopOnTheVirtualCard() throws {
        let path = try temporaryDirectory() + "/card.wav"
        let player = Player(output: VirtualCardOutput(path: path), source: try mp3("vbr.mp3"))
        let log = StateLog()
        player.observe(log.record)
        let positions = Mutex<[Double]>([])
        let script = Thread {
            func waitFor(_ state: PlayerState) { waitUntil(timeout: 10, every: 0.005) { player.status.state == state } }
            waitFor(.playing)
            waitUntil(timeout: 10, every: 0.005) { player.status.positionSeconds >= 0.5 }
            player.togglePause()
            waitFor(.paused)
            letTimePass(0.1)
            let paused = player.status.positionSeconds
            letTimePass(0.4)  // paused this long, the position must not move
            positions.withLock { $0 += [paused, player.status.positionSeconds] }
            player.togglePause()
            waitFor(.playing)
            player.seek(bySeconds: 10)
            waitUntil(timeout: 10, every: 0.005) { player.status.positionSeconds >= 10 }
            let landed = player.status.positionSeconds
            waitUntil(timeout: 10, every: 0.005) { player.status.positionSeconds >= landed + 0.3 }
            positions.withLock { $0.append(player.status.positionSeconds) }
            player.stop()
        }
        script.start()
        XCTAssertEqual(player.run(), .user)
        let seen = positions.withLock { $0 }
        XCTAssertEqual(seen.count, 3)
        XCTAssertEqual(seen[0], seen[1], "position moved while paused")
        XCTAssertGreaterThanOrEqual(seen[2], 10.3)
        XCTAssertLessThan(seen[2], 15)
        XCTAssertTrue(log.all.contains(.paused))
        XCTAssertEqual(log.all.last, .stopped)
        // The card ran in real time the whole while: at least the 1.3 s the script waited.
        let card = try readAudio(path)
        XCTAssertGreaterThan(card.frames, Int(1.3 * 44100))
        let clock = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path + ".json"))) as? [String: Any]
        XCTAssertEqual(clock?["rate"] as? Int, 44100)
        XCTAssertEqual(clock?["drift_ppm"] as? Int, 0)
        XCTAssertNotNil(clock?["t0_ns"] as? UInt64)
    }

    /// The simulated card consumes at the stream's rate: a 1 s tone takes at least 1 s of the
    /// process's clock from frame 0 and the recording holds it all, silence around it included.
    func testVirtualCardPlaysInRealTime() throws {
        let path = try temporaryDirectory() + "/tone.wav"
        let tone: Player.SourceFactory = { () throws(PartyCastError) -> PCMSource in try ToneGenerator(spec: "440:1") }
        let player = Player(output: VirtualCardOutput(path: path), source: tone)
        XCTAssertEqual(player.run(), .endOfStream)
        let finished = monotonicNanoseconds()
        let clock = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path + ".json"))) as! [String: Any]
        let t0 = clock["t0_ns"] as! UInt64
        let card = try readAudio(path)
        XCTAssertGreaterThanOrEqual(card.frames, 48_000)
        // The card takes each 25 ms period as it starts playing: the last one may still be playing.
        XCTAssertGreaterThanOrEqual(Double(finished - t0) / 1e9, Double(card.frames - 48_000 / 40) / 48_000)
        let loud = stride(from: 0, to: card.samples.count, by: 2).filter { abs(card.samples[$0]) > 0.01 }.count
        XCTAssertGreaterThan(loud, 40_000, "the tone is in the recording")
    }

    /// Real alsa-lib code on alsa-lib's own `file` plugin (over the `null` device): what reaches
    /// the "device" is the tone sox makes. The `null` device takes frames as fast as they come, so
    /// any pause of the producer would be an underrun (silence on the device); a tone shorter than
    /// the player's 0.5 s prebuffer is all in the ring before playback starts, which rules that out.
    func testALSAOutputDeliversTheStreamToTheDevice() throws {
        let directory = try temporaryDirectory()
        let capture = directory + "/alsa.raw"
        let config = directory + "/asound.conf"
        try """
            pcm.capture { type file; slave.pcm "null"; file "\(capture)"; format "raw" }
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let result = try runProcess(productPath("listener"), ["play", "--quiet", "tone:1000:0.4", "--output", "alsa:capture"],
                                    timeout: 60, environment: ["ALSA_CONFIG_PATH": "/usr/share/alsa/alsa.conf:" + config])
        XCTAssertEqual(result.status, 0, result.stderr)
        let raw = try Data(contentsOf: URL(fileURLWithPath: capture))
        let samples = raw.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        let reference = directory + "/sox.wav"
        _ = try runProcess("sox", ["-n", "-r", "48000", "-c", "2", "-e", "floating-point", "-b", "32", reference, "synth", "0.4", "sine", "1000", "vol", "0.5"])
        let sox = try readAudio(reference)
        XCTAssertEqual(sox.frames, 19_200)
        // The device heard silence while the player buffered; the tone starts at sin(0) = 0, so
        // its first non-zero sample is frame 1.
        guard let firstSound = samples.firstIndex(where: { $0 != 0 }) else { return XCTFail("the device got only silence") }
        let start = firstSound - firstSound % 2 - 2
        XCTAssertGreaterThanOrEqual(samples.count - start, sox.samples.count)
        XCTAssertGreaterThanOrEqual(snr(samples[start...].prefix(sox.samples.count), sox.samples[...]), 80)
    }

    /// A source that stops delivering for a while: the real-time output underruns, the player goes
    /// to `buffering`, and resumes `playing` once the ring has refilled.
    func testUnderrunBuffersThenResumes() throws {
        final class StallingTone: PCMSource {
            let tone: ToneGenerator
            var produced = 0
            init() throws(PartyCastError) { tone = try ToneGenerator(spec: "440:3") }
            var format: AudioFormat? { tone.format }
            var tags: TrackTags { tone.tags }
            var duration: Duration { tone.duration }
            var isSeekable: Bool { false }
            var skippedBytes: Int64 { 0 }
            func prepare() throws(PartyCastError) {}
            func seek(toFrame frame: Int) throws(PartyCastError) {}
            func produce(into buffer: inout [Float]) throws(PartyCastError) -> Bool {
                produced += 1
                // 1024 frames a call: after ~1 s of audio, stall for 1.5 s, longer than the ring holds.
                if produced == 48 { letTimePass(1.5) }
                return try tone.produce(into: &buffer)
            }
        }
        let path = try temporaryDirectory() + "/stall.wav"
        let player = Player(output: VirtualCardOutput(path: path)) { () throws(PartyCastError) -> PCMSource in try StallingTone() }
        let log = StateLog()
        player.observe(log.record)
        XCTAssertEqual(player.run(), .endOfStream)
        XCTAssertEqual(log.all, [.connecting, .waitingForData, .buffering, .playing, .buffering, .playing, .stopping, .stopped])
        XCTAssertGreaterThan(player.status.underruns, 0)
    }

    func testOnlyLegalTransitionsAndOutputSpecs() throws {
        XCTAssertThrowsError(try makeOutput("speaker"))
        XCTAssertThrowsError(try makeOutput("wav:"))
        XCTAssertEqual(try makeOutput("null").name, "null")
        XCTAssertEqual(try makeOutput("alsa").name, "alsa:default")
        XCTAssertEqual(try makeOutput("virtual:/tmp/x.wav").name, "virtual:/tmp/x.wav")
    }
}
