import Foundation
import PartyCastCore
import PartyCastDecoder
import PartyCastHTTP
import PartyCastTestSupport
import XCTest

/// Debian's icecast2 on 127.0.0.1, fed by ezstream with three short MP3 tracks in a loop; a
/// playlist program logs when each track starts, so the time a title takes to reach us is measured.
final class IcecastTests: XCTestCase {
    func testTitlesArriveWithinTwoSecondsOfTheChangeAndTheAudioDecodes() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // icecast refuses to run as root; as root it drops to nobody, who must reach the directory.
        chmod(dir, 0o777)
        for n in 1...3 {
            let wav = "\(dir)/t\(n).wav"
            XCTAssertEqual(try runProcess("sox", ["-n", "-r", "44100", "-c", "2", wav, "synth", "2.5", "sine", "\(300 * n)", "vol", "0.5"]).status, 0)
            XCTAssertEqual(try runProcess("lame", ["--quiet", "-b", "128", wav, "\(dir)/t\(n).mp3"]).status, 0)
        }
        let port = freePort()
        let root = getuid() == 0 ? "<changeowner><user>nobody</user><group>nogroup</group></changeowner>" : ""
        try """
            <icecast>
              <limits><sources>2</sources><burst-size>0</burst-size></limits>
              <authentication><source-password>partycast</source-password><admin-user>admin</admin-user><admin-password>partycast</admin-password></authentication>
              <hostname>127.0.0.1</hostname>
              <listen-socket><port>\(port)</port><bind-address>127.0.0.1</bind-address></listen-socket>
              <paths><basedir>\(dir)</basedir><logdir>\(dir)</logdir><webroot>/usr/share/icecast2/web</webroot><adminroot>/usr/share/icecast2/admin</adminroot></paths>
              <logging><errorlog>-</errorlog><accesslog>access.log</accesslog><loglevel>3</loglevel></logging>
              <security><chroot>0</chroot>\(root)</security>
            </icecast>
            """.write(toFile: "\(dir)/icecast.xml", atomically: true, encoding: .utf8)
        // Next track: counts 1, 2, 3, 1…, logs the start time; the metadata program names it.
        try """
            #!/bin/sh
            d=\(dir); n=$(cat $d/counter 2>/dev/null || echo 0); n=$((n % 3 + 1)); echo $n > $d/counter
            echo "$(date +%s.%N) Track $n" >> $d/changes.log
            echo $d/t$n.mp3
            """.write(toFile: "\(dir)/next.sh", atomically: true, encoding: .utf8)
        try """
            #!/bin/sh
            case "$1" in ""|title) echo "Track $(cat \(dir)/counter)";; *) echo;; esac
            """.write(toFile: "\(dir)/meta.sh", atomically: true, encoding: .utf8)
        chmod("\(dir)/next.sh", 0o755)
        chmod("\(dir)/meta.sh", 0o755)
        try """
            <ezstream>
              <servers><server><hostname>127.0.0.1</hostname><port>\(port)</port><password>partycast</password></server></servers>
              <streams><stream><mountpoint>/live.mp3</mountpoint><format>MP3</format><stream_name>PartyCast Test FM</stream_name></stream></streams>
              <intakes><intake><type>program</type><filename>\(dir)/next.sh</filename></intake></intakes>
              <metadata><program>\(dir)/meta.sh</program><format_str>@t@</format_str></metadata>
            </ezstream>
            """.write(toFile: "\(dir)/ezstream.xml", atomically: true, encoding: .utf8)
        chmod("\(dir)/ezstream.xml", 0o600)  // ezstream refuses a config others can write

        let icecast = try ServerProcess("icecast2", ["-c", "\(dir)/icecast.xml"], ready: "server started", port: port)
        defer { icecast.stop() }
        let ezstream = try startProcess("ezstream", ["-c", "\(dir)/ezstream.xml"])
        defer { ezstream.signal(SIGTERM); _ = ezstream.wait(timeout: 5) }

        let url = "http://127.0.0.1:\(port)/live.mp3"
        // The mount exists once ezstream has connected: until then icecast answers 404.
        var source: HTTPByteSource?
        XCTAssertTrue(eventually(timeout: 10) {
            source = try? HTTPByteSource(url: url)
            return source != nil
        }, "the mount never came up: \(ezstream.stderr)")
        let stream = try XCTUnwrap(source)
        XCTAssertEqual(stream.streamTags?.station, "PartyCast Test FM")

        // Each title change seen, and when (wall clock, as the playlist program logs it).
        var seen: [(title: String, at: Double)] = []
        var last = stream.streamTags?.title
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, seen.count < 4 {
            XCTAssertFalse(try stream.read(maxBytes: 4096).isEmpty)
            let title = stream.streamTags?.title
            if let title, title != last { seen.append((title, Date().timeIntervalSince1970)) }
            last = title
        }
        let log = (try? String(contentsOfFile: "\(dir)/changes.log", encoding: .utf8)) ?? ""
        let changes = log.split(separator: "\n").map { line -> (title: String, at: Double) in
            let parts = line.split(separator: " ", maxSplits: 1)
            return (String(parts[1]), Double(parts[0]) ?? 0)
        }
        XCTAssertGreaterThanOrEqual(seen.count, 3, "titles seen: \(seen), changes: \(log)")
        XCTAssertEqual(Set(seen.map(\.title)), ["Track 1", "Track 2", "Track 3"])
        for change in seen {
            // The latest start of that track before we saw it.
            guard let started = changes.last(where: { $0.title == change.title && $0.at <= change.at + 0.05 }) else {
                XCTFail("\(change.title) seen but never started: \(log)")
                continue
            }
            let latency = change.at - started.at
            print("icecast: \(change.title) after \(String(format: "%.2f", latency)) s")
            XCTAssertLessThan(latency, 2, change.title)
        }

        // The stream decodes: the tracks' rate, and not silent.
        let decoded = try DecoderRegistry.open(HTTPByteSource(url: url))
        try decoded.prepare()
        XCTAssertEqual(decoded.format?.sampleRate, 44100)
        XCTAssertEqual(decoded.tags.station, "PartyCast Test FM")
        var samples: [Float] = []
        while samples.count < 44100 * 2, try decoded.produce(into: &samples) {}
        XCTAssertGreaterThan(samples.map { $0 * $0 }.reduce(0, +) / Float(samples.count), 0.01)
    }
}
