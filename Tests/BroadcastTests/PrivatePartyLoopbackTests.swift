import Foundation
import PartyCastTestSupport
import PartyCastWire
import XCTest

/// A private party (`--key`) on 127.0.0.1: only the key plays, a wrong one is refused before any
/// audio, and what crosses the link is sealed: a capture by `partycast-relay` holds no run of the PCM
/// that the listener played, where the same capture of a public party is full of it.
final class PrivatePartyLoopbackTests: XCTestCase {
    let broadcaster = productPath("broadcaster")
    let listener = productPath("listener")
    let relay = productPath("partycast-relay")
    let secret = "correct horse battery"
    var started: [BackgroundProcess] = []

    override func tearDown() {
        for process in started { _ = process.wait(timeout: 0.1) }
        started = []
    }

    func start(_ executable: String, _ arguments: [String]) throws -> BackgroundProcess {
        let process = try startProcess(executable, arguments)
        started.append(process)
        return process
    }

    func share(port: Int, key: String?, seconds: Int) throws -> BackgroundProcess {
        try start(broadcaster, ["share", "tone:1000:\(seconds)", "--codec", "pcm", "--no-mdns", "--port", "\(port)", "--start-in", "2"]
                  + (key.map { ["--key", $0] } ?? []))
    }

    func join(port: Int, key: String?, output: String) throws -> BackgroundProcess {
        try start(listener, ["join", "--host", "127.0.0.1:\(port)", "--output", "wav:\(output)", "--once", "--quiet"]
                  + (key.map { ["--key", $0] } ?? []))
    }


    func testTheRightKeyPlaysAndAWrongKeyIsRefusedBeforeAnyAudio() throws {
        let directory = try temporaryDirectory()
        let port = freePort()
        let server = try share(port: port, key: secret, seconds: 4)
        XCTAssertTrue(server.waitForStderr("private: listeners need the key", timeout: 20), server.stderr)
        let wrong = try join(port: port, key: "correct horse battery!", output: "\(directory)/wrong.wav")
        let right = try join(port: port, key: secret, output: "\(directory)/right.wav")

        let refused = wrong.wait(timeout: 30)
        XCTAssertEqual(refused.status, 12, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("the broadcaster could not prove it holds your party key: the keys differ"), refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(directory)/wrong.wav"), "the wrong key played audio")

        let played = right.wait(timeout: 60)
        let served = server.wait(timeout: 30)
        XCTAssertEqual(played.status, 0, played.stderr + "\nbroadcaster:\n" + served.stderr)
        XCTAssertEqual(served.status, 0, served.stderr)
        XCTAssertTrue(served.stderr.contains("1 listener(s) joined"), served.stderr)
        // The wrong key's attempt: one line at the broadcaster.
        XCTAssertEqual(served.stderr.split(separator: "\n").filter { $0.contains("refused this broadcaster's key") }.count, 1, served.stderr)
        let audio = try readAudio("\(directory)/right.wav")
        XCTAssertEqual(audio.frames, 4 * 48000)
        XCTAssertGreaterThanOrEqual(snr(audio.samples[...], try referenceTone(seconds: 4, in: directory)[...]), 50)
    }

    /// A man in the middle flips one bit of the sealed stream, 2 s into the audio: the record does not
    /// open, the listener drops that connection with one line and rejoins, and plays every sample once.
    func testATamperedRecordEndsTheConnectionAndNothingOfItIsPlayed() throws {
        let directory = try temporaryDirectory()
        let port = freePort()
        let server = try share(port: port, key: secret, seconds: 5)
        XCTAssertTrue(waitForPort(port), "nothing listened on \(port)")
        let relay = try CuttingRelay(to: port, flipAt: 2 * 48000 * 8)
        defer { relay.stop() }
        let played = try join(port: relay.port, key: secret, output: "\(directory)/tampered.wav").wait(timeout: 60)
        let served = server.wait(timeout: 30)
        XCTAssertEqual(played.status, 0, played.stderr)
        let refusals = played.stderr.split(separator: "\n").filter { $0.contains("failed authentication") }
        XCTAssertEqual(refusals.count, 1, played.stderr)
        XCTAssertTrue(played.stderr.contains("reconnecting"), played.stderr)
        XCTAssertTrue(served.stderr.contains("2 listener(s) joined"), served.stderr)
        let audio = try readAudio("\(directory)/tampered.wav")
        XCTAssertEqual(audio.frames, 5 * 48000, "every sample once")
        XCTAssertGreaterThanOrEqual(snr(audio.samples[...], try referenceTone(seconds: 5, in: directory)[...]), 50)
    }

    /// The judged check: with `--key` and `--codec pcm`, no 64-byte run of the PCM appears in a
    /// capture of the link. The public party's capture is the control: the same search finds its PCM.
    func testACapturedPrivateLinkHoldsNoRunOfItsPCM() throws {
        let directory = try temporaryDirectory()
        for (name, key) in [("public", nil), ("private", secret)] as [(String, String?)] {
            let port = freePort(), relayPort = freePort()
            let server = try share(port: port, key: key, seconds: 3)
            XCTAssertTrue(waitForPort(port), "nothing listened on \(port)")
            let capturePath = "\(directory)/\(name).capture"
            let capture = try start(relay, ["capture", "\(relayPort)", "127.0.0.1:\(port)", capturePath, "1", "--timeout", "60"])
            XCTAssertTrue(capture.waitForStderr("listening on \(relayPort)", timeout: 10), capture.stderr)
            let played = try join(port: relayPort, key: key, output: "\(directory)/\(name).wav").wait(timeout: 60)
            XCTAssertEqual(played.status, 0, "\(name): \(played.stderr)")
            XCTAssertEqual(server.wait(timeout: 30).status, 0, name)
            XCTAssertEqual(capture.wait(timeout: 30).status, 0, "\(name): \(capture.stderr)")

            let pcm = try wavData("\(directory)/\(name).wav")
            XCTAssertEqual(pcm.count, 3 * 48000 * 2 * 4, "\(name): the whole tone as float32")
            let link = try capturedBytes(capturePath)
            XCTAssertGreaterThan(link.count, pcm.count, "\(name): the capture holds the whole stream")
            let found = longestCommonRun(in: link, of: pcm, atLeast: 64)
            if key == nil {
                XCTAssertTrue(found, "the control: a public party's capture holds its PCM in the clear")
            } else {
                XCTAssertFalse(found, "a 64-byte run of the private party's PCM crossed the link in the clear")
                let kinds = Set(try String(contentsOfFile: capturePath, encoding: .utf8).split(separator: "\n").map { $0.split(separator: "\t")[2] })
                XCTAssertFalse(kinds.contains("AudioChunk"), "audio chunks in the clear: \(kinds)")
                XCTAssertTrue(kinds.contains("Sealed"), "\(kinds)")
            }
        }
    }
}

/// The samples of a WAV file as stored: its data chunk's bytes.
private func wavData(_ path: String) throws -> [UInt8] {
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    var offset = 12
    while offset + 8 <= bytes.count {
        let size = Int(bytes[offset + 4..<offset + 8].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        if bytes[offset..<offset + 4].elementsEqual("data".utf8) { return Array(bytes[offset + 8..<min(bytes.count, offset + 8 + size)]) }
        offset += 8 + size + size % 2
    }
    throw CocoaError(.fileReadCorruptFile)
}

/// Every frame a `partycast-relay capture` file recorded, both directions, concatenated.
private func capturedBytes(_ path: String) throws -> [UInt8] {
    var bytes: [UInt8] = []
    for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
        let fields = line.split(separator: "\t")
        guard fields.count == 4, !fields[2].contains(".") else { continue }
        let digits = Array(fields[3].utf8)
        for i in stride(from: 0, to: digits.count - 1, by: 2) {
            bytes.append(UInt8(String(decoding: digits[i...i + 1], as: UTF8.self), radix: 16)!)
        }
    }
    return bytes
}

/// Whether some `length`-byte run of `needle` occurs in `haystack`. Any such run holds a whole
/// 32-byte block of `needle` at a multiple of 32, so the blocks are indexed by their first 8 bytes
/// and each hit is extended both ways.
private func longestCommonRun(in haystack: [UInt8], of needle: [UInt8], atLeast length: Int) -> Bool {
    let block = length / 2
    var blocks: [UInt64: [Int]] = [:]
    func word(_ bytes: [UInt8], _ at: Int) -> UInt64 { bytes[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) } }
    for start in stride(from: 0, to: needle.count - block + 1, by: block) { blocks[word(needle, start), default: []].append(start) }
    guard haystack.count >= length else { return false }
    for position in 0...(haystack.count - 8) {
        guard let starts = blocks[word(haystack, position)] else { continue }
        for start in starts {
            var before = 0
            while before < min(position, start), haystack[position - before - 1] == needle[start - before - 1] { before += 1 }
            var after = 0
            while position + after < haystack.count, start + after < needle.count, haystack[position + after] == needle[start + after] { after += 1 }
            if before + after >= length { return true }
        }
    }
    return false
}
