import Foundation
import PartyCastTestSupport
import XCTest

/// What keeps a listener light (issue 14), checked on the real processes: it loads no more of
/// Foundation than FoundationEssentials, and while nothing changes its control thread stays idle.
final class ListenerFootprintTests: XCTestCase {
    let broadcaster = productPath("broadcaster")
    let listener = productPath("listener")

    /// Full Foundation (and ICU through FoundationInternationalization) was a third of the
    /// listener's memory; the shared Swift runtime and its exported symbols another 5 MB. Per
    /// Debian's binutils and ldd: no Swift or Foundation library is loaded (the runtime and
    /// FoundationEssentials are linked in), the dynamic symbol table holds only what the listener
    /// imports (some 70 000 symbols were exported before), and relative relocations are packed.
    func testTheListenerLoadsNoSwiftLibraryAndExportsNothing() throws {
        let linked = try runProcess("ldd", [listener])
        XCTAssertEqual(linked.status, 0, linked.stderr)
        XCTAssertTrue(linked.stdout.contains("libc.so"), "ldd lists what it loads: \(linked.stdout)")
        for library in ["libswiftCore.so", "libFoundationEssentials.so", "libFoundation.so", "libFoundationInternationalization.so", "lib_FoundationICU.so",
                        "libstdc++.so"] {
            XCTAssertFalse(linked.stdout.contains(library), "the listener loads \(library):\n\(linked.stdout)")
        }
        let symbols = try runProcess("readelf", ["--dyn-syms", "-W", listener])
        XCTAssertEqual(symbols.status, 0, symbols.stderr)
        XCTAssertLessThan(symbols.stdout.split(separator: "\n").count, 2000, "the listener exports its symbols")
        let dynamic = try runProcess("readelf", ["-d", "-W", listener])
        XCTAssertTrue(dynamic.stdout.contains("(RELR)"), "relative relocations are not packed:\n\(dynamic.stdout)")
    }

    /// alsa-lib, avahi (with D-Bus and systemd's libraries behind it), libFLAC, libfaad and
    /// libvorbisfile are opened when a listener first needs them, not at start-up: 1.5 MB of a
    /// listener's resident set when all were linked. Per binutils none of them is needed by the
    /// binary, and per /proc/PID/maps a listener joining by address on the virtual card maps none;
    /// playing a FLAC file on ALSA's null device maps libFLAC and alsa-lib (with PulseAudio's ALSA
    /// plugin, libpulse and D-Bus), and still nothing else.
    func testTheListenerMapsOnlyTheLibrariesItsJobUses() throws {
        let lazy = ["libasound.so", "libavahi-client.so", "libavahi-common.so", "libdbus-1.so", "libFLAC.so", "libfaad.so", "libvorbisfile.so", "libcurl.so"]
        let dynamic = try runProcess("readelf", ["-d", "-W", listener])
        XCTAssertEqual(dynamic.status, 0, dynamic.stderr)
        for library in lazy { XCTAssertFalse(dynamic.stdout.contains(library), "the listener links \(library):\n\(dynamic.stdout)") }

        func mapped(_ pid: Int32) -> Set<String> {
            // Read to the end: a /proc file reports a size of 0, and a read by size stops at its first page.
            let data = (try? FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(pid)/maps")).readToEnd()) ?? nil
            let maps = String(decoding: data ?? Data(), as: UTF8.self)
            return Set(maps.split(separator: "\n").compactMap { line in
                line.contains("/") ? line.split(separator: "/").last.map { String($0.prefix { $0 != "." }) } : nil
            })
        }
        let (server, joined) = try joinAPartyNotYetStarted()
        defer { for process in [joined, server] { process.signal(SIGKILL); _ = process.wait(timeout: 10) } }
        let joinMaps = mapped(joined.pid)
        XCTAssertTrue(joinMaps.contains("libopus"), "no libopus among \(joinMaps.sorted())")
        for library in lazy { XCTAssertFalse(joinMaps.contains(String(library.prefix { $0 != "." })), "a join maps \(library)") }

        // The FLAC through a FIFO this test holds open: ALSA's null device takes audio as fast as it
        // comes, so a file would be played and gone before its maps were read; a pipe with a writer
        // left keeps the listener waiting for more.
        let fifo = try temporaryDirectory() + "/tone.flac.fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let holder = open(fifo, O_RDWR)  // on Linux, opening a FIFO for both never blocks
        defer { close(holder) }
        let played = try startProcess(listener, ["play", "pipe:\(fifo)", "--output", "alsa:null", "--quiet"])
        defer { played.signal(SIGKILL); _ = played.wait(timeout: 10) }
        let feeder = try startProcess("/bin/sh", ["-c", "exec cat \"$0\" > \"$1\"", try fixture("tone.flac"), fifo])
        defer { feeder.signal(SIGKILL); _ = feeder.wait(timeout: 10) }
        // Polls the process's own map until alsa-lib appears: the event, bounded by a deadline.
        var playMaps: Set<String> = []
        waitUntil(timeout: 30, every: 0.05) {
            playMaps = mapped(played.pid)
            return playMaps.contains("libasound") || !played.isRunning
        }
        XCTAssertTrue(playMaps.isSuperset(of: ["libFLAC", "libasound"]), "playing FLAC on ALSA maps \(playMaps.sorted()): \(played.stderr)")
        // Where PulseAudio's ALSA plugin is installed, alsa-lib loads it even for the null device, and
        // libpulse brings D-Bus: then D-Bus comes with alsa-lib, not with avahi.
        let pulseLoaded = playMaps.contains("libpulse")
        for library in ["libavahi-client", "libfaad", "libvorbisfile"] + (pulseLoaded ? [] : ["libdbus-1"]) {
            XCTAssertFalse(playMaps.contains(library), "playing FLAC maps \(library) (\(playMaps.sorted()))")
        }
    }

    /// The functions a listener runs are laid out first (Sources/listener/link/text-order.txt): per
    /// binutils, the first 500 of the list that the release binary holds lie in the first quarter of
    /// its text (18 % when measured; spread over 86 % without the order).
    func testTheListenersFunctionsInUseAreLaidOutTogether() throws {
        let bin = try releaseBuilds()
        let release = "\(bin)/listener"
        let list = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Sources/listener/link/text-order.txt")
        let order = try String(contentsOf: list, encoding: .utf8).split(separator: "\n").map(String.init)
        let symbols = try runProcess("nm", ["--defined-only", release])
        XCTAssertEqual(symbols.status, 0, symbols.stderr)
        var addresses: [String: UInt64] = [:]
        for line in symbols.stdout.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count == 3, fields[1] == "t" || fields[1] == "T", let address = UInt64(fields[0], radix: 16) else { continue }
            addresses[String(fields[2])] = address
        }
        let sections = try runProcess("readelf", ["-S", "-W", release])
        let text = try XCTUnwrap(sections.stdout.split(separator: "\n").first { $0.contains(" .text ") }, sections.stdout)
        // [Nr] Name Type Address Off Size …
        let fields = text.split(separator: "]")[1].split(separator: " ")
        let (start, size) = (try XCTUnwrap(UInt64(fields[2], radix: 16)), try XCTUnwrap(UInt64(fields[4], radix: 16)))
        let listed = order.compactMap { addresses[$0] }.prefix(500)
        XCTAssertEqual(listed.count, 500, "the list names functions the listener no longer has: run `make text-order`")
        let reach = Double(try XCTUnwrap(listed.max()) - start) / Double(size)
        print("ListenerFootprintTests: the first 500 listed functions lie in the first \(Int(reach * 100)) % of the text")
        XCTAssertLessThan(reach, 0.25, "the listener's text is not laid out by use")
    }

    /// A listener that has joined a party not yet started has nothing to do: its control thread
    /// (the main thread) wakes for the once-a-second report to the broadcaster and nothing else
    /// (it ticked every 5 ms before), and Ctrl-C still stops it at once.
    func testAWaitingListenerStaysIdleAndStillStopsOnInterrupt() throws {
        let (server, joined) = try joinAPartyNotYetStarted()
        defer { for process in [joined, server] { process.signal(SIGKILL); _ = process.wait(timeout: 10) } }
        // From here on only the clock thread works.

        func mainThreadWakeups() -> Int? {
            let status = try? String(contentsOfFile: "/proc/\(joined.pid)/task/\(joined.pid)/status", encoding: .utf8)
            return status?.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") }
                .flatMap { Int($0.split(separator: "\t").last?.trimmingCharacters(in: .whitespaces) ?? "") }
        }
        let before = try XCTUnwrap(mainThreadWakeups())
        let window = 4.0
        letTimePass(window)
        let after = try XCTUnwrap(mainThreadWakeups())
        print("ListenerFootprintTests: main thread woke \(after - before) times in \(window) s")
        // One report a second, and as much again for anything else that wakes it.
        XCTAssertLessThanOrEqual(after - before, Int(window) * 2 + 2, "the control thread wakes while nothing changes")

        joined.signal(SIGINT)
        let result = joined.wait(timeout: 10)
        XCTAssertFalse(result.timedOut, "Ctrl-C did not stop a waiting listener: \(result.stderr)")
        XCTAssertEqual(result.status, 0, result.stderr)
    }

    /// A broadcaster whose party starts in a minute, and a listener joined to it on the virtual card:
    /// connected, the format known and the card started.
    private func joinAPartyNotYetStarted() throws -> (server: BackgroundProcess, joined: BackgroundProcess) {
        let directory = try temporaryDirectory()
        let port = freePort()
        let server = try startProcess(broadcaster, ["share", "--no-mdns", "--port", "\(port)", "--control-port", "0",
                                                    try fixture("cbr.mp3"), "--start-in", "60"])
        XCTAssertTrue(server.waitForStderr("broadcasting", timeout: 30), server.stderr)
        let joined: BackgroundProcess
        do {
            joined = try startProcess(listener, ["join", "--host", "127.0.0.1:\(port)", "--output", "virtual:\(directory)/card.wav",
                                                 "--quiet", "--log-level", "debug"])
        } catch {
            server.signal(SIGKILL)
            _ = server.wait(timeout: 10)
            throw error
        }
        XCTAssertTrue(joined.waitForStderr("player: buffering", timeout: 30), joined.stderr)
        return (server, joined)
    }
}
