import Foundation
import PartyCastTestSupport
import XCTest

/// A private party (`--key`) on a LAN of network namespaces (scripts/lan/lan.sh): only listeners with
/// its key get in, a listener with a key refuses a broadcaster that cannot prove it holds it, and a
/// handshake captured by a man in the middle (`partycast-relay`) is worth nothing when replayed to
/// either side, and everything after the handshake crosses the link sealed. Everything runs on one LAN of four hosts, brought up once (it is slow):
///
///   host1  private broadcaster "Private Party" (`--key`)      host3  partycast-relay; listener list; avahi-browse
///   host2  the listeners that join it                          host4  public broadcaster "Public Party"
///
/// The LAN has a namespace prefix and state directory of its own (pckey-host1…), so it never meets
/// the other LAN tests' LANs.
final class PrivatePartyOnLANTests: XCTestCase {
    static let harness = LANHarness(prefix: "pckey", state: "pc-lan-key-tests")
    static let lan = LANHarness.script
    static let environment = harness.environment
    let broadcaster = productPath("broadcaster")
    let listener = productPath("listener")
    let relay = productPath("partycast-relay")
    let secret = "purple walrus at midnight"
    private var started: [BackgroundProcess] = []

    func host(_ i: Int) -> String { "pckey-host\(i)" }
    func address(_ i: Int) -> String { "10.77.0.\(10 + i)" }

    override func setUpWithError() throws {
        try Self.harness.up(hosts: 4, tools: [broadcaster, listener, relay], timeout: 90)
    }

    override func tearDownWithError() throws {
        // Whatever is still running: SIGTERM by PID, then SIGKILL by PID after 5 s.
        for process in started where process.isRunning { process.signal(SIGTERM) }
        for process in started { _ = process.wait(timeout: 5) }
        started = []
        try Self.harness.down()
    }

    func testOnlyTheKeyGetsInAndACapturedHandshakeIsWorthNothing() throws {
        let directory = try temporaryDirectory()
        let capturePath = "\(directory)/capture.tsv"
        // Seconds of 1 kHz sine on the private party. Both broadcasts start late enough (--start-in)
        // for every join, refusal, replay and listing below to happen first; the public one ends first.
        let tone = 8

        // Both broadcasters and the relay in front of the private one.
        let privateParty = try on(1, [broadcaster, "share", "tone:1000:\(tone)", "--codec", "pcm", "--start-in", "8",
                                      "--name", "Private Party", "--key", secret])
        let publicParty = try on(4, [broadcaster, "share", "tone:440:2", "--codec", "pcm", "--start-in", "11", "--name", "Public Party"])
        let capture = try on(3, [relay, "capture", "7400", "\(address(1)):7360", capturePath, "2", "--timeout", "80"])
        XCTAssertTrue(privateParty.waitForStderr("mDNS: published as \"Private Party\"", timeout: 20), privateParty.stderr)
        XCTAssertTrue(privateParty.stderr.contains("(pcm, private: listeners need the key)"), privateParty.stderr)
        XCTAssertTrue(capture.waitForStderr("listening on 7400", timeout: 10), capture.stderr)

        // (1) The right key, from PARTYCAST_KEY, joining by name over mDNS.
        let rightKey = try on(2, ["env", "PARTYCAST_KEY=\(secret)", listener, "join", "Private Party", "--listener-name", "rightkey",
                                  "--output", "wav:\(directory)/rightkey.wav", "--once", "--quiet"])

        // (6) Two sessions through the relay, the second once the first's handshake is through.
        let relayed1 = try join(on: 2, "\(address(3)):7400", key: secret, name: "relayed1", directory)
        XCTAssertNotNil(eventually(timeout: 20) { capturedLines(capturePath).contains { $0.hasPrefix("1\tb2l\tSealed\t") } ? true : nil },
                        "session 1 never got through the relay: \(capture.stderr)")
        let relayed2 = try join(on: 2, "\(address(3)):7400", key: secret, name: "relayed2", directory)

        // (3)-(5) Refusals, meanwhile: no key, a wrong key, and a key at a public party.
        let noKey = try join(on: 2, address(1), key: nil, name: "nokey", directory)
        let wrongKey = try join(on: 2, address(1), key: "not the party key", name: "wrongkey", directory)
        XCTAssertTrue(publicParty.waitForStderr("mDNS: published as \"Public Party\"", timeout: 20), publicParty.stderr)
        let keyedAtPublic = try join(on: 3, address(4), key: secret, name: "keyed", directory)

        // (6a) Session 1's listener side replayed to the broadcaster, once session 2 has joined too.
        XCTAssertNotNil(eventually(timeout: 20) { capturedLines(capturePath).contains { $0.hasPrefix("2\tb2l\tSealed\t") } ? true : nil },
                        "session 2 never got through the relay: \(capture.stderr)")
        let replayed = try on(3, [relay, "replay-to-broadcaster", capturePath, "1", "\(address(1)):7360"]).wait(timeout: 20)
        XCTAssertEqual(replayed.status, 0, replayed.stderr)
        let answers = replayed.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(answers.first, "KeyChallenge", replayed.stdout)
        XCTAssertEqual(answers.filter { $0.hasPrefix("Error\t") }.map { $0.split(separator: "\t")[1] }, ["KEY_REJECTED"], replayed.stdout)
        for admitted in ["Welcome", "StreamFormat", "Metadata", "AudioChunk"] {
            XCTAssertFalse(answers.contains(admitted), "a replayed handshake got \(admitted): \(replayed.stdout)")
        }
        XCTAssertTrue(privateParty.waitForStderr("closed connection from \(address(3)): it (relayed1) could not prove it holds the party key", timeout: 10),
                      privateParty.stderr)

        // (2) `listener list` on host3 tells the private party from the public one; so does avahi-browse.
        let listed = eventually(timeout: 20) { () -> [String]? in
            let lines = (try? self.run(3, [self.listener, "list", "--timeout", "2"], timeout: 15).stdout)?.split(separator: "\n").map(String.init) ?? []
            let sendspin = lines.contains { $0.hasPrefix("Public Party\t") && $0.contains("\tsendspin\t") }
            return lines.contains { $0.hasPrefix("Private Party\t") } && lines.contains { $0.hasPrefix("Public Party\t") } && sendspin ? lines : nil
        }
        // Each protocol a party speaks is a line: the public party's Sendspin server too, the private one's stays off.
        XCTAssertEqual(listed?.filter { $0.hasPrefix("Public Party\t") }.map { $0.split(separator: "\t")[3] }, ["partycast", "sendspin"], "\(listed ?? [])")
        XCTAssertEqual(listed?.first { $0.hasPrefix("Public Party\t") && $0.contains("\tsendspin\t") }?.split(separator: "\t").last.map(String.init),
                       "join --sendspin ws://\(address(4)):8927/sendspin", "\(listed ?? [])")
        XCTAssertEqual(listed?.filter { $0.hasPrefix("Private Party\t") }.count, 1, "\(listed ?? [])")
        let privateLine = listed?.first { $0.hasPrefix("Private Party\t") }
        XCTAssertEqual(privateLine?.split(separator: "\t").last, "private (needs --key)", "\(listed ?? [])")
        XCTAssertTrue(privateLine?.contains("\t\(address(1)):7360\t") == true, "\(listed ?? [])")
        XCTAssertEqual(listed?.first { $0.hasPrefix("Public Party\t") }?.split(separator: "\t").last, "public", "\(listed ?? [])")
        // Resolved records: "=;eth0;IPv4;Private\032Party;_partycast._tcp;local;HOST;ADDRESS;PORT;"txt" "txt"…".
        let browsed = eventually(timeout: 20) { () -> (String, String)? in
            let records = (try? self.run(3, ["avahi-browse", "-rtp", "_partycast._tcp"], timeout: 15).stdout)?.split(separator: "\n") ?? []
            func record(_ name: String) -> String? { records.first { $0.hasPrefix("=;") && $0.contains(";IPv4;\(name);") }.map(String.init) }
            guard let privateRecord = record("Private\\032Party"), let publicRecord = record("Public\\032Party") else { return nil }
            return (privateRecord, publicRecord)
        }
        XCTAssertTrue(browsed?.0.contains("\"key=required\"") == true, browsed?.0 ?? "avahi-browse never resolved both parties")
        XCTAssertEqual(browsed?.1.contains("\"key="), false, browsed?.1 ?? "avahi-browse never resolved both parties")

        // (3) No key: refused with one line that says the party is private, and one line at the broadcaster.
        let refusedNoKey = noKey.wait(timeout: 20)
        XCTAssertEqual(refusedNoKey.status, 12, refusedNoKey.stderr)
        XCTAssertEqual(errorLines(refusedNoKey.stderr), ["listener: error [key]: this party is private: join it with --key (or PARTYCAST_KEY)"],
                       refusedNoKey.stderr)
        // (4) A wrong key: the broadcaster's confirmation does not verify, so the listener refuses first.
        let refusedWrongKey = wrongKey.wait(timeout: 20)
        XCTAssertEqual(refusedWrongKey.status, 12, refusedWrongKey.stderr)
        XCTAssertEqual(errorLines(refusedWrongKey.stderr),
                       ["listener: error [key]: the broadcaster could not prove it holds your party key: the keys differ (or someone replayed an old handshake)"],
                       refusedWrongKey.stderr)
        // (5) A key, at a public party: the listener refuses the broadcaster.
        let refusedPublic = keyedAtPublic.wait(timeout: 20)
        XCTAssertEqual(refusedPublic.status, 12, refusedPublic.stderr)
        XCTAssertEqual(errorLines(refusedPublic.stderr),
                       ["listener: error [key]: \"Public Party\" did not prove it holds your party key, so it is not your party (a public one, or an impostor); refusing it"],
                       refusedPublic.stderr)
        for name in ["nokey", "wrongkey", "keyed"] { XCTAssertEqual(try framesPlayed("\(directory)/\(name).wav"), 0, "\(name) played audio") }

        // Everyone admitted plays to the end; the broadcasters and the relay end by themselves.
        // The relay carries TCP only: clock datagrams sent to its address go unanswered, and those
        // listeners say once that they keep time over the connection instead.
        let clockFallback = "listener: warning: clock: no answer over UDP for 1 s (a firewall?); keeping time over the TCP connection, less precisely on a busy link"
        for (name, process, lines) in [("rightkey", rightKey, []), ("relayed1", relayed1, [clockFallback]), ("relayed2", relayed2, [clockFallback])] {
            let result = process.wait(timeout: 40)
            XCTAssertEqual(result.status, 0, "\(name): \(result.stderr)")
            XCTAssertEqual(errorLines(result.stderr), lines, name)
        }
        let served = privateParty.wait(timeout: 30)
        XCTAssertEqual(served.status, 0, served.stderr)
        let servedPublic = publicParty.wait(timeout: 30)
        XCTAssertEqual(servedPublic.status, 0, servedPublic.stderr)
        let captured = capture.wait(timeout: 30)
        XCTAssertEqual(captured.status, 0, captured.stderr)

        let log = served.stderr.split(separator: "\n").map(String.init)
        for joined in ["rightkey@\(address(2)) joined", "relayed1@\(address(3)) joined", "relayed2@\(address(3)) joined"] {
            XCTAssertTrue(log.contains("broadcaster: \(joined)"), served.stderr)
        }
        // One line for each refusal (in the order they happened to come).
        XCTAssertEqual(log.filter { $0.contains("closed connection from") }.sorted(),
                       ["broadcaster: warning: closed connection from \(address(2)): it (nokey) has no party key; refused it",
                        "broadcaster: warning: closed connection from \(address(2)): it (wrongkey) refused this broadcaster's key: the party keys differ",
                        "broadcaster: warning: closed connection from \(address(3)): it (relayed1) could not prove it holds the party key (a different key, or a replayed handshake); refused it"].sorted(),
                       served.stderr)
        XCTAssertTrue(log.contains("broadcaster: the broadcast is over; 3 listener(s) joined"), served.stderr)
        XCTAssertEqual(servedPublic.stderr.split(separator: "\n").filter { $0.contains("closed connection from") },
                       ["broadcaster: warning: closed connection from \(address(3)): it refused this broadcaster: this broadcaster did not prove it holds the party key (the listener wants a private party)"],
                       servedPublic.stderr)

        // (1) The whole tone, sample for sample within 50 dB, for the listener that joined directly and
        // for the two that joined through the relay (it forwards every byte unchanged).
        let sox = "\(directory)/sox.wav"
        XCTAssertEqual(try runProcess("sox", ["-n", "-r", "48000", "-c", "2", "-e", "floating-point", "-b", "32", sox,
                                              "synth", "\(tone)", "sine", "1000", "vol", "0.5"]).status, 0)
        let reference = try readAudio(sox)
        for name in ["rightkey", "relayed1", "relayed2"] {
            let audio = try readAudio("\(directory)/\(name).wav")
            XCTAssertEqual(audio.frames, tone * 48000, "\(name) got the whole tone")
            XCTAssertGreaterThanOrEqual(snr(audio.samples[...], reference.samples[...]), 50, name)
        }

        // (6b) Session 1's broadcaster side replayed to a listener with the right key: the old
        // confirmation is not over this listener's share, so it refuses before confirming anything and plays nothing.
        let impostor = try on(3, [relay, "replay-to-listener", capturePath, "1", "7401"])
        XCTAssertTrue(impostor.waitForStderr("listening on 7401", timeout: 20), impostor.stderr)
        let victim = try join(on: 2, "\(address(3)):7401", key: secret, name: "victim", directory).wait(timeout: 20)
        XCTAssertEqual(victim.status, 12, victim.stderr)
        XCTAssertEqual(errorLines(victim.stderr),
                       ["listener: error [key]: the broadcaster could not prove it holds your party key: the keys differ (or someone replayed an old handshake)"],
                       victim.stderr)
        XCTAssertEqual(try framesPlayed("\(directory)/victim.wav"), 0, "the victim played the replayed audio")
        let impersonated = impostor.wait(timeout: 25)
        XCTAssertEqual(impersonated.status, 0, impersonated.stderr)
        XCTAssertEqual(impersonated.stdout.split(separator: "\n").map { $0.split(separator: "\t").prefix(2).joined(separator: " ") },
                       ["Hello", "Error KEY_REJECTED"], "what the listener sent the impostor: \(impersonated.stdout)")

        // (6c) The two captured sessions share no key-derived bytes, and the secret is in no frame.
        let sessions = try parseCapture(capturePath)
        XCTAssertEqual(sessions.keys.sorted(), [1, 2])
        // CPace's session id, shares (ristretto255 points) and confirmations (HMAC-SHA-512).
        let fieldSizes = ["Hello.key_session_id": 16, "Hello.listener_share": 32, "KeyChallenge.broadcaster_share": 32,
                          "KeyChallenge.broadcaster_confirmation": 64, "KeyProof.listener_confirmation": 64]
        for (number, session) in sessions.sorted(by: { $0.key < $1.key }) {
            XCTAssertEqual(session.kinds("l2b").prefix(2), ["Hello", "KeyProof"], "session \(number)")
            XCTAssertEqual(session.kinds("b2l").first, "KeyChallenge", "session \(number)")
            // After the handshake nothing is in the clear: the Welcome, the format, the audio are sealed records.
            XCTAssertEqual(Set(session.kinds("b2l").dropFirst()), ["Sealed"], "session \(number)")
            XCTAssertEqual(Set(session.kinds("l2b").dropFirst(2)), ["Sealed"], "session \(number)")
            XCTAssertGreaterThan(session.kinds("b2l").count, 100, "session \(number): the stream went through")
            XCTAssertEqual(session.fields.keys.sorted(), fieldSizes.keys.sorted(), "session \(number)")
            for (name, value) in session.fields {
                XCTAssertEqual(value.count, fieldSizes[name], "session \(number) \(name)")
                // The search below finds what is there: each value is in its own session's frames.
                XCTAssertTrue(session.contains(anyWindowOf: [value]), "session \(number): \(name) not found in its own frames")
            }
            let secretBytes = Array(secret.utf8)
            XCTAssertFalse(session.contains(anyWindowOf: [secretBytes]), "session \(number): 8 bytes of the secret in a frame")
        }
        if let one = sessions[1], let two = sessions[2] {
            XCTAssertFalse(two.contains(anyWindowOf: Array(one.fields.values)), "a share or confirmation of session 1 is in session 2's frames")
            XCTAssertFalse(one.contains(anyWindowOf: Array(two.fields.values)), "a share or confirmation of session 2 is in session 1's frames")
        }
    }

    // MARK: Helpers

    /// Starts `command` on host i (ended by PID in tearDown if still running).
    func on(_ i: Int, _ command: [String]) throws -> BackgroundProcess {
        let process = try startProcess(Self.lan, ["exec", host(i)] + command, environment: Self.environment)
        started.append(process)
        return process
    }

    func run(_ i: Int, _ command: [String], timeout: TimeInterval) throws -> ProcessResult {
        try on(i, command).wait(timeout: timeout)
    }

    /// `listener join --host` on host i, with `--key` when given one, to a WAV named after it.
    func join(on i: Int, _ endpoint: String, key: String?, name: String, _ directory: String) throws -> BackgroundProcess {
        try on(i, [listener, "join", "--host", endpoint, "--listener-name", name, "--output", "wav:\(directory)/\(name).wav", "--once", "--quiet"]
            + (key.map { ["--key", $0] } ?? []))
    }

    /// The lines of a program's stderr that report errors or warnings (the listener's "connected to" is neither).
    func errorLines(_ stderr: String) -> [String] {
        stderr.split(separator: "\n").map(String.init).filter { $0.contains("error") || $0.contains("warning") }
    }

    /// Frames in a listener's WAV output; 0 when it never made one (it played nothing).
    func framesPlayed(_ path: String) throws -> Int {
        FileManager.default.fileExists(atPath: path) ? try readAudio(path).frames : 0
    }

}

/// The complete lines of a capture file being written.
private func capturedLines(_ path: String) -> [Substring] {
    let text = String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
    guard let end = text.lastIndex(of: "\n") else { return [] }
    return text[..<end].split(separator: "\n")
}

/// One session of a `partycast-relay capture` file: its frames in order, and the key handshake's fields.
private struct CapturedSession {
    var frames: [(direction: String, kind: String, bytes: [UInt8])] = []
    var fields: [String: [UInt8]] = [:]

    func kinds(_ direction: String) -> [String] { frames.filter { $0.direction == direction }.map(\.kind) }

    /// Whether any 8 consecutive bytes of any of `values` occur in any frame.
    func contains(anyWindowOf values: [[UInt8]]) -> Bool {
        var windows = Set<UInt64>()
        for value in values where value.count >= 8 {
            for start in 0...(value.count - 8) { windows.insert(value[start..<start + 8].reduce(0) { $0 << 8 | UInt64($1) }) }
        }
        for frame in frames {
            let found = frame.bytes.withUnsafeBufferPointer { bytes -> Bool in
                var window: UInt64 = 0
                for (i, byte) in bytes.enumerated() {
                    window = window << 8 | UInt64(byte)
                    if i >= 7 && windows.contains(window) { return true }
                }
                return false
            }
            if found { return true }
        }
        return false
    }
}

/// SESSION<TAB>l2b|b2l<TAB>KIND<TAB>HEX (a whole frame) or SESSION<TAB>DIR<TAB>KIND.FIELD<TAB>HEX (a key handshake field).
private func parseCapture(_ path: String) throws -> [Int: CapturedSession] {
    var sessions: [Int: CapturedSession] = [:]
    for line in capturedLines(path) {
        let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
        guard fields.count == 4, let number = Int(fields[0]), let bytes = unhex(fields[3]) else {
            XCTFail("not a capture line: \(line.prefix(100))")
            continue
        }
        if fields[2].contains(".") {
            XCTAssertNil(sessions[number, default: CapturedSession()].fields[String(fields[2])], "\(fields[2]) twice in session \(number)")
            sessions[number, default: CapturedSession()].fields[String(fields[2])] = bytes
        } else {
            sessions[number, default: CapturedSession()].frames.append((String(fields[1]), String(fields[2]), bytes))
        }
    }
    return sessions
}

private func unhex(_ text: Substring) -> [UInt8]? {
    var text = text
    return text.withUTF8 { digits -> [UInt8]? in
        guard digits.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: c - 48
            case 97...102: c - 87
            default: nil
            }
        }
        var bytes = [UInt8](repeating: 0, count: digits.count / 2)
        for i in 0..<bytes.count {
            guard let high = nibble(digits[2 * i]), let low = nibble(digits[2 * i + 1]) else { return nil }
            bytes[i] = high << 4 | low
        }
        return bytes
    }
}
