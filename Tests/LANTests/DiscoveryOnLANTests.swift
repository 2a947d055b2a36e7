import Foundation
import PartyCastTestSupport
import XCTest

/// mDNS between the hosts of a LAN made of network namespaces (scripts/lan/lan.sh), each host with
/// its own dbus and avahi-daemon, never the root namespace's. Tests can't run Swift code inside a
/// namespace, so they drive `partycast-mdns-probe` (PartyCastDiscovery from the command line) and
/// Debian's avahi-browse there through `lan.sh exec`.
///
/// This LAN has a namespace prefix and state directory of its own (pcdisco-host1…), so it never
/// meets a LAN that another test run has up at the same time.
final class DiscoveryOnLANTests: XCTestCase {
    static let harness = LANHarness(prefix: "pcdisco", state: "pc-lan-discovery-tests")
    static let lan = LANHarness.script
    static let environment = harness.environment
    let probe = productPath("partycast-mdns-probe")
    let serviceType = "_partycast._tcp"
    fileprivate var started: [LiveProcess] = []

    func host(_ i: Int) -> String { "pcdisco-host\(i)" }

    override func setUpWithError() throws {
        try Self.harness.up(hosts: 3, tools: [probe], timeout: 60)
    }

    override func tearDownWithError() throws {
        for process in started { _ = process.stop(timeout: 5); process.removeOutput() }
        started = []
        try Self.harness.down()
    }

    // MARK: Tests

    /// A publisher on host1 is resolved, TXT records and address included, by Debian's avahi-browse
    /// on host2 and by our browser on host3; a second publisher of the same name on host2 becomes
    /// "Test Party #2", and both are on the LAN.
    func testOtherHostsResolveThePublisherAndATwinIsRenamed() throws {
        let first = try publish(on: 1, "Test Party", port: 7360, ["proto=1", "codec=opus", "id=abc"])
        XCTAssertTrue(first.waitForLine("established\tTest Party", timeout: 15), first.transcript)

        // (a) Debian's avahi-browse on host2: "=;eth0;IPv4;Test\032Party;_partycast._tcp;local;host;address;port;txt".
        let record = try XCTUnwrap(eventually(timeout: 20, every: 0.3) { () throws -> [String]? in
            try self.avahiBrowse(on: 2).first { $0[3] == "Test Party" }
        }, "avahi-browse on \(host(2)) never resolved Test Party")
        XCTAssertEqual(record[6], "\(host(1)).local")
        XCTAssertEqual(record[7], "10.77.0.11")
        XCTAssertEqual(record[8], "7360")
        XCTAssertEqual(Set(record[9].split(separator: " ")), ["\"proto=1\"", "\"codec=opus\"", "\"id=abc\""])

        // (b) Our browser on host3 sees the same.
        let expectedFirst = "Test Party\t\(host(1)).local\t10.77.0.11\t7360\tcodec=opus,id=abc,proto=1"
        let found = try XCTUnwrap(eventually(timeout: 20, every: 0.3) { try self.browse(on: 3).nonEmpty })
        XCTAssertEqual(found, [expectedFirst])

        // (c) Same name on host2: renamed by avahi's rule, and both visible.
        let twin = try publish(on: 2, "Test Party", port: 7361, ["proto=1", "codec=opus", "id=def"])
        XCTAssertTrue(twin.waitForLine("established\tTest Party #2", timeout: 20), twin.transcript)
        XCTAssertEqual(twin.lines, ["renamed\tTest Party #2", "established\tTest Party #2"])
        let expectedTwin = "Test Party #2\t\(host(2)).local\t10.77.0.12\t7361\tcodec=opus,id=def,proto=1"
        let both = try eventually(timeout: 20, every: 0.3) { () throws -> [String]? in
            let lines = try self.browse(on: 3)
            return lines.count == 2 ? lines : nil
        }
        XCTAssertEqual(both, [expectedFirst, expectedTwin])
        let names = try eventually(timeout: 20, every: 0.3) { () throws -> Set<String>? in
            let names = Set(try self.avahiBrowse(on: 3).map { $0[3] })
            return names.count == 2 ? names : nil
        }
        XCTAssertEqual(names, ["Test Party", "Test Party #2"], "avahi-browse on \(host(3))")
        XCTAssertEqual(first.lines, ["established\tTest Party"], "the first holder of the name keeps it")

        for publisher in [first, twin] {
            let stopped = publisher.stop(timeout: 10)
            XCTAssertEqual(stopped.status, 0, publisher.transcript)
            XCTAssertEqual(stopped.lines.last, "stopped")
        }
    }

    /// Killing host1's avahi-daemon under a publisher: one daemonUnavailable warning, the publisher
    /// keeps running, a browse there fails clearly, and once the daemon is back the service is
    /// published again and found from host2.
    func testPublisherWarnsOnceWhenAvahiDaemonGoesAndPublishesAgainWhenItIsBack() throws {
        let publisher = try publish(on: 1, "Test Party", port: 7360, ["proto=1", "codec=opus", "id=abc"])
        XCTAssertTrue(publisher.waitForLine("established\tTest Party", timeout: 15), publisher.transcript)

        let kill = try runProcess(Self.lan, ["kill-avahi", host(1)], timeout: 20, environment: Self.environment)
        XCTAssertEqual(kill.status, 0, kill.stderr)
        XCTAssertTrue(publisher.waitForLine("daemonUnavailable\t", prefix: true, timeout: 10), publisher.transcript)

        let browse = try runProcess(Self.lan, ["exec", host(1), probe, "browse", "2"], timeout: 15, environment: Self.environment)
        XCTAssertNotEqual(browse.status, 0, browse.stdout)
        XCTAssertTrue(browse.stderr.contains("avahi-daemon is not running: start it, or give the broadcaster's address (--host to join it"), browse.stderr)

        letTimePass(2)  // a while without the daemon: still one warning, still there
        XCTAssertTrue(publisher.isRunning, publisher.transcript)
        XCTAssertEqual(publisher.lines.count(where: { $0.hasPrefix("daemonUnavailable\t") }), 1, publisher.transcript)

        let start = try runProcess(Self.lan, ["start-avahi", host(1)], timeout: 30, environment: Self.environment)
        XCTAssertEqual(start.status, 0, start.stderr)
        XCTAssertTrue(publisher.waitForLine("established\tTest Party", count: 2, timeout: 20), publisher.transcript)
        let found = try eventually(timeout: 20, every: 0.3) { try self.browse(on: 2).nonEmpty }
        XCTAssertEqual(found, ["Test Party\t\(host(1)).local\t10.77.0.11\t7360\tcodec=opus,id=abc,proto=1"])
        XCTAssertEqual(publisher.lines.count(where: { $0.hasPrefix("daemonUnavailable\t") }), 1, publisher.transcript)

        let stopped = publisher.stop(timeout: 10)
        XCTAssertEqual(stopped.status, 0, publisher.transcript)
        XCTAssertEqual(stopped.lines.map { $0.hasPrefix("daemonUnavailable\t") ? "daemonUnavailable" : $0 },
                       ["established\tTest Party", "daemonUnavailable", "established\tTest Party", "stopped"], publisher.transcript)
    }

    // MARK: Helpers

    fileprivate func publish(on i: Int, _ name: String, port: Int, _ txt: [String]) throws -> LiveProcess {
        let process = try LiveProcess(Self.lan, ["exec", host(i), probe, "publish", name, "\(port)"] + txt, environment: Self.environment)
        started.append(process)
        return process
    }

    /// Our browser on host i: one line per service.
    func browse(on i: Int, seconds: Double = 5) throws -> [String] {
        let result = try runProcess(Self.lan, ["exec", host(i), probe, "browse", "\(seconds)"], timeout: seconds + 10, environment: Self.environment)
        XCTAssertEqual(result.status, 0, "browse on \(host(i)): \(result.stderr)")
        return result.stdout.split(separator: "\n").map(String.init)
    }

    /// Debian's `avahi-browse -rtp` on host i: the resolved IPv4 records, split at ";", the name
    /// (field 3) unescaped ("Test\032Party\032\0352" → "Test Party #2").
    func avahiBrowse(on i: Int) throws -> [[String]] {
        let result = try runProcess(Self.lan, ["exec", host(i), "avahi-browse", "-rtp", serviceType], timeout: 20, environment: Self.environment)
        XCTAssertEqual(result.status, 0, "avahi-browse on \(host(i)): \(result.stderr)")
        return result.stdout.split(separator: "\n")
            .map { $0.split(separator: ";", omittingEmptySubsequences: false).map(String.init) }
            .filter { $0.count >= 10 && $0[0] == "=" && $0[2] == "IPv4" }
            .map { fields in fields.enumerated().map { $0.offset == 3 ? Self.unescape($0.element) : $0.element } }
    }

    /// avahi-browse writes a name's spaces and punctuation as \DDD (decimal) and "." or "\" as \. and \\.
    static func unescape(_ name: String) -> String {
        var bytes: [UInt8] = []
        var rest = Substring(name).utf8[...]
        while let byte = rest.popFirst() {
            guard byte == UInt8(ascii: "\\") else { bytes.append(byte); continue }
            let digits = rest.prefix(3)
            if digits.count == 3, digits.allSatisfy({ (48...57).contains($0) }), let value = UInt8(String(decoding: digits, as: UTF8.self)) {
                bytes.append(value)
                rest = rest.dropFirst(3)
            } else if let next = rest.popFirst() {
                bytes.append(next)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

}

extension Array {
    fileprivate var nonEmpty: Self? { isEmpty ? nil : self }
}

/// A command whose output (a file, not a pipe) can be read while it runs.
fileprivate final class LiveProcess {
    private let process = Process()
    private let outputPath = NSTemporaryDirectory() + "partycast-live-" + UUID().uuidString

    init(_ executable: String, _ arguments: [String], environment: [String: String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        _ = FileManager.default.createFile(atPath: outputPath + ".err", contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath + ".err"))
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    func removeOutput() {
        try? FileManager.default.removeItem(atPath: outputPath)
        try? FileManager.default.removeItem(atPath: outputPath + ".err")
    }

    var isRunning: Bool { process.isRunning }

    private func read(_ path: String) -> String {
        String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
    }

    /// Whole lines printed so far.
    var lines: [String] {
        let text = read(outputPath)
        let complete = text.hasSuffix("\n") ? text : String(text[..<(text.lastIndex(of: "\n") ?? text.startIndex)])
        return complete.split(separator: "\n").map(String.init)
    }

    var transcript: String { "stdout:\n\(read(outputPath))stderr:\n\(read(outputPath + ".err"))" }

    /// Waits until `line` (or a line starting with it) has been printed `count` times.
    func waitForLine(_ line: String, prefix: Bool = false, count: Int = 1, timeout: TimeInterval) -> Bool {
        let printed = { self.lines.count(where: { prefix ? $0.hasPrefix(line) : $0 == line }) >= count }
        waitUntil(timeout: timeout, every: 0.05) { !process.isRunning || printed() }
        return printed()
    }

    /// SIGTERM (to this process only), then SIGKILL if it outlives `timeout`.
    func stop(timeout: TimeInterval) -> (status: Int32?, lines: [String]) {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        waitUntil(timeout: timeout, every: 0.02) { !process.isRunning }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return (nil, lines)
        }
        process.waitUntilExit()
        return (process.terminationStatus, lines)
    }
}
