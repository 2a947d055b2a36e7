import Foundation
import PartyCastTestSupport
import XCTest

/// The script `make deb` runs, on the release binaries (PARTYCAST_RELEASE_BIN), into a scratch
/// directory; its packages read back by Debian's own tools (dpkg-deb, readelf, ldd, systemd-analyze),
/// then unpacked into a scratch root (dpkg -x) and run as their units would run them.
final class DebianPackageTests: XCTestCase {
    struct Packages: Sendable {
        let directory: String
        let listener: String
        let broadcaster: String
    }

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized.path

    /// Built once for every test here (dpkg-deb compresses some 100 MB).
    static let built: Result<Packages, any Error> = Result {
        let bin = try releaseBuilds()
        let directory = try sharedTemporaryDirectory()
        // gzip -1: the packages' contents are what is checked, and xz spends minutes on them.
        let result = try runProcess("\(repository)/scripts/make-deb.sh", [bin, directory], timeout: 1800, environment: ["DPKG_DEB_OPTIONS": "-Zgzip -z1"])
        guard result.status == 0 else { throw PackagingFailure(message: "make-deb.sh failed: \(result.stderr)") }
        let made = result.stdout.split(separator: "\n").map(String.init)
        guard let listener = made.first(where: { $0.contains("/partycast-listener_") }),
              let broadcaster = made.first(where: { $0.contains("/partycast-broadcaster_") }) else {
            throw PackagingFailure(message: "make-deb.sh named no packages: \(result.stdout)")
        }
        return Packages(directory: directory, listener: listener, broadcaster: broadcaster)
    }

    struct PackagingFailure: Error, CustomStringConvertible { let message: String; var description: String { message } }

    override class func tearDown() {
        if case .success(let packages) = built { try? FileManager.default.removeItem(atPath: packages.directory) }
    }

    private func field(_ name: String, of deb: String) throws -> String {
        let result = try runProcess("dpkg-deb", ["-f", deb, name])
        XCTAssertEqual(result.status, 0, result.stderr)
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The package unpacked as `dpkg -x` would install its files.
    private func unpacked(_ deb: String, into root: String) throws {
        let result = try runProcess("dpkg-deb", ["-x", deb, root])
        XCTAssertEqual(result.status, 0, result.stderr)
    }

    /// Package, Version and Architecture as dpkg reads them; every file in place, with its mode.
    func testThePackagesFieldsAndFiles() throws {
        let packages = try Self.built.get()
        let architecture = try runProcess("dpkg", ["--print-architecture"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let commit = try runProcess("git", ["-C", Self.repository, "rev-parse", "--short", "HEAD"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        for (program, deb) in [("listener", packages.listener), ("broadcaster", packages.broadcaster)] {
            XCTAssertEqual(try field("Package", of: deb), "partycast-\(program)")
            XCTAssertEqual(try field("Architecture", of: deb), architecture)
            let version = try field("Version", of: deb)
            XCTAssertTrue(version.hasSuffix(".\(commit)"), "version \(version) does not name commit \(commit)")
            XCTAssertEqual(try runProcess("dpkg", ["--validate-version", version]).status, 0, "dpkg refuses version \(version)")
            XCTAssertTrue(deb.hasSuffix("/partycast-\(program)_\(version)_\(architecture).deb"), deb)

            let contents = try runProcess("dpkg-deb", ["-c", deb]).stdout
            for (mode, path) in [("-rwxr-xr-x", "./usr/lib/partycast/\(program)"), ("lrwxrwxrwx", "./usr/bin/\(program) -> ../lib/partycast/\(program)"),
                                 ("-rw-r--r--", "./lib/systemd/system/partycast-\(program).service"),
                                 ("-rw-r--r--", "./etc/default/partycast-\(program)"), ("-rw-------", "./etc/partycast/\(program).key")] {
                XCTAssertTrue(contents.split(separator: "\n").contains { $0.hasPrefix("\(mode) root/root") && $0.hasSuffix(" \(path)") },
                              "\(deb) lacks \(mode) root/root \(path):\n\(contents)")
            }
            let conffiles = try runProcess("dpkg-deb", ["-I", deb, "conffiles"]).stdout.split(separator: "\n").map(String.init)
            XCTAssertEqual(conffiles, ["/etc/default/partycast-\(program)", "/etc/partycast/\(program).key"])
        }
        // The web remote's files beside the broadcaster, where Bundle.module looks first.
        let broadcasterFiles = try runProcess("dpkg-deb", ["-c", packages.broadcaster]).stdout
        for file in ["index.html", "app.js", "style.css", "favicon.svg", "openapi.yaml"] {
            XCTAssertTrue(broadcasterFiles.contains("./usr/lib/partycast/PartyCast_PartyCastControl.resources/Web/\(file)\n"), "no \(file) in the broadcaster's package")
        }
    }

    /// Per binutils the programs carry no symbol table and link no Swift library (no Debian package has
    /// one); Depends names the package of every library the loader resolves (ldd) and of those the
    /// programs open themselves, each satisfied by what this machine has installed.
    func testTheProgramsAreStrippedAndDependOnTheirLibrariesPackages() throws {
        let packages = try Self.built.get()
        let root = try temporaryDirectory()
        let opened = ["listener": ["libasound", "libavahi-client", "libFLAC", "libfaad", "libvorbisfile"],
                      "broadcaster": ["libavahi-client", "libFLAC", "libfaad", "libvorbisfile"]]
        for (program, deb) in [("listener", packages.listener), ("broadcaster", packages.broadcaster)] {
            try unpacked(deb, into: root)
            let binary = "\(root)/usr/lib/partycast/\(program)"
            let sections = try runProcess("readelf", ["-S", "-W", binary]).stdout
            XCTAssertFalse(sections.contains(".symtab"), "\(program) is not stripped")
            XCTAssertFalse(sections.contains(".debug_info"), "\(program) keeps debug info")
            let dynamic = try runProcess("readelf", ["-d", "-W", binary]).stdout
            for library in ["libswiftCore", "libFoundation", "lib_FoundationICU", "libdispatch", "libBlocksRuntime"] {
                XCTAssertFalse(dynamic.contains("[\(library)"), "\(program) links \(library):\n\(dynamic)")
            }
            let help = try runProcess(binary, ["--help"])
            XCTAssertEqual(help.status, 0, "the stripped \(program) does not run: \(help.stderr)")

            let depends = try field("Depends", of: deb)
            let names = depends.split(separator: ",").map { $0.split(separator: " ").first.map(String.init) ?? "" }
            // The libraries the binary itself needs (readelf), where the loader finds them (ldd).
            let needed = dynamic.split(separator: "\n").filter { $0.contains("(NEEDED)") }.compactMap { $0.split(separator: "[").last?.split(separator: "]").first }
            var found: [Substring: Substring] = [:]
            for row in try runProcess("ldd", [binary]).stdout.split(separator: "\n") {
                let words = row.split(whereSeparator: { $0 == " " || $0 == "\t" })
                if words.count >= 3, words[1] == "=>" { found[words[0]] = words[2] }
            }
            var wanted: Set<String> = []
            for soname in needed where !soname.hasPrefix("ld-linux") {
                wanted.insert(try owner(of: String(try XCTUnwrap(found[soname], "ldd does not find \(soname)"))))
            }
            XCTAssertTrue(wanted.contains { $0.hasPrefix("libmpg123") } && wanted.contains { $0.hasPrefix("libopus") }, "ldd: \(wanted)")
            for package in wanted { XCTAssertTrue(names.contains(package), "\(program): Depends \(depends) lacks \(package)") }
            for library in opened[program]! {
                let multiarch = try runProcess("dpkg-architecture", ["-qDEB_HOST_MULTIARCH"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                let file = try FileManager.default.contentsOfDirectory(atPath: "/usr/lib/\(multiarch)").first { $0.hasPrefix("\(library).so.") }
                let package = try owner(of: "/usr/lib/\(multiarch)/\(try XCTUnwrap(file, "no \(library) here"))")
                XCTAssertTrue(names.contains(package), "\(program) opens \(library), but Depends \(depends) lacks \(package)")
            }
            for item in depends.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) { try assertInstalled(item) }
        }
    }

    /// The Debian package that holds `path`, symbolic links followed; by its directory's and its own
    /// name, since dpkg records /lib/… or /usr/lib/… as each package spelled it.
    private func owner(of path: String) throws -> String {
        let real = URL(fileURLWithPath: path).resolvingSymlinksInPath()
        // Without a leading slash, dpkg-query matches the pattern anywhere in a path.
        let tail = real.deletingLastPathComponent().lastPathComponent + "/" + real.lastPathComponent
        let result = try runProcess("dpkg-query", ["-S", tail])
        let row = result.stdout.split(separator: "\n").first { $0.hasSuffix("/" + tail) }
        XCTAssertNotNil(row, "no package holds \(real.path): \(result.stderr)")
        return String((row ?? "").prefix { $0 != ":" })
    }

    /// `name (>= version)` is installed here at that version or later.
    private func assertInstalled(_ item: String) throws {
        let parts = item.split(separator: " ", maxSplits: 1).map(String.init)
        let installed = try runProcess("dpkg-query", ["-W", "-f", "${Version}", parts[0]])
        XCTAssertEqual(installed.status, 0, "\(parts[0]) is not installed: \(installed.stderr)")
        guard parts.count == 2 else { return }
        let relation = parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "()")).split(separator: " ").map(String.init)
        let operators = [">=": "ge", "<=": "le", "=": "eq", ">>": "gt", "<<": "lt"]
        let compared = try runProcess("dpkg", ["--compare-versions", installed.stdout, try XCTUnwrap(operators[relation[0]]), relation[1]])
        XCTAssertEqual(compared.status, 0, "installed \(parts[0]) \(installed.stdout) does not satisfy \(item)")
    }

    /// systemd-analyze verify passes both units as packaged (their programs' paths pointed into the
    /// unpacked package), and every option of the command they run is set by the unit or documented
    /// in the /etc/default file, but those a service has no use for.
    func testTheUnitsVerifyAndTheDefaultFilesDocumentEveryOption() throws {
        let packages = try Self.built.get()
        let root = try temporaryDirectory()
        let unused = ["listener": ["--help", "--key", "--quiet", "--once", "--simulate-clock", "--clock-log"], "broadcaster": ["--help", "--key"]]
        let subcommand = ["listener": "join", "broadcaster": "share"]
        var units: [String] = []
        let copies = try temporaryDirectory()
        for (program, deb) in [("listener", packages.listener), ("broadcaster", packages.broadcaster)] {
            try unpacked(deb, into: root)
            let unit = try String(contentsOfFile: "\(root)/lib/systemd/system/partycast-\(program).service", encoding: .utf8)
            let defaults = try String(contentsOfFile: "\(root)/etc/default/partycast-\(program)", encoding: .utf8)
            let help = try runProcess("\(root)/usr/bin/\(program)", [subcommand[program]!, "--help"]).stdout
            // The option rows' first column: "  -o, --output <output>   alsa…".
            let options = Set(help.split(separator: "\n").flatMap { row -> [String] in
                let columns = row.drop { $0 == " " }.components(separatedBy: "  ")
                guard let first = columns.first, first.hasPrefix("-") else { return [] }
                return first.split(whereSeparator: { $0 == " " || $0 == "," }).filter { $0.hasPrefix("--") }.map(String.init)
            })
            XCTAssertTrue(options.contains("--key-file") && options.contains("--log-level"), "\(program) --help: \(help)")
            for option in options.subtracting(unused[program]!) {
                XCTAssertTrue(unit.contains(option + " ") || defaults.contains(option + " "),
                              "\(program) \(subcommand[program]!) \(option) is neither set by the unit nor documented in /etc/default/partycast-\(program)")
            }
            let copy = copies + "/partycast-\(program).service"
            try unit.replacingOccurrences(of: "ExecStart=/usr/bin/", with: "ExecStart=\(root)/usr/bin/").write(toFile: copy, atomically: true, encoding: .utf8)
            units.append(copy)
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") else {
            throw XCTSkip("no systemd-analyze here (Debian's systemd package): the units were not verified")
        }
        let verified = try runProcess("systemd-analyze", ["verify"] + units)
        XCTAssertEqual(verified.status, 0, verified.stderr)
        XCTAssertEqual(verified.stderr, "", "systemd-analyze verify warns")
    }

    /// Both packages unpacked into one scratch root, as on a machine with both installed; each program
    /// started with the command line its unit builds from an /etc/default file set as a user would
    /// (the broadcaster's folder, the listener's --host and a WAV file as its card), the key handed
    /// over as the credential, under the kernel's refusal of writable executable memory (the units'
    /// MemoryDenyWriteExecute). A 440 Hz sine sox made plays through, at 440 Hz, on the listener's card.
    func testThePackagedListenerPlaysThePackagedBroadcastersFolder() throws {
        let packages = try Self.built.get()
        let scratch = try temporaryDirectory(), root = scratch + "/root"
        for deb in [packages.listener, packages.broadcaster] { try unpacked(deb, into: root) }
        let music = scratch + "/music"
        try FileManager.default.createDirectory(atPath: music, withIntermediateDirectories: true)
        let made = try runProcess("sox", ["-R", "-n", "-r", "48000", "-c", "2", "-b", "16", "\(music)/sine.wav", "synth", "10", "sine", "440", "gain", "-n", "-6"])
        XCTAssertEqual(made.status, 0, made.stderr)
        let secret = "a key from a credential file"
        var credentials: [String: String] = [:]
        for program in ["listener", "broadcaster"] {
            credentials[program] = scratch + "/credentials-\(program)"
            try FileManager.default.createDirectory(atPath: credentials[program]!, withIntermediateDirectories: true)
            try (secret + "\n").write(toFile: credentials[program]! + "/partycast-key", atomically: true, encoding: .utf8)
        }
        let port = freePort(), recording = scratch + "/card.wav"

        func service(_ program: String, _ settings: String) throws -> [String] {
            let unit = try String(contentsOfFile: "\(root)/lib/systemd/system/partycast-\(program).service", encoding: .utf8)
            let defaults = try String(contentsOfFile: "\(root)/etc/default/partycast-\(program)", encoding: .utf8) + settings
            var command = SystemdService(unit: unit, environmentFile: defaults).commandLine(["CREDENTIALS_DIRECTORY": credentials[program]!])
            XCTAssertEqual(command.first, "/usr/bin/\(program)")
            command[0] = root + command[0]
            return command
        }
        let broadcasterCommand = try service("broadcaster", """
            PARTYCAST_SOURCES=\(music)
            PARTYCAST_NAME="Packaged party"
            PARTYCAST_OPTIONS="--port \(port) --control-port 0 --no-mdns --start-in 4 --buffer 300"
            """)
        let broadcaster = try startProcess("python3", ["-c", Self.refusingWritableExecutableMemory] + broadcasterCommand)
        defer { broadcaster.signal(SIGKILL); _ = broadcaster.wait(timeout: 10) }
        XCTAssertTrue(broadcaster.waitForStderr("broadcasting \"Packaged party\"", timeout: 60), broadcaster.stderr)
        XCTAssertTrue(broadcaster.stderr.contains("private: listeners need the key"), broadcaster.stderr)

        let listenerCommand = try service("listener", """
            PARTYCAST_OUTPUT=wav:\(recording)
            PARTYCAST_OPTIONS="--host 127.0.0.1:\(port) --once --listener-name packaged"
            """)
        let listener = try startProcess("python3", ["-c", Self.refusingWritableExecutableMemory] + listenerCommand)
        let listened = listener.wait(timeout: 90)
        let broadcast = broadcaster.wait(timeout: 30)
        XCTAssertFalse(listened.timedOut || broadcast.timedOut, "listener: \(listened.stderr)\nbroadcaster: \(broadcast.stderr)")
        XCTAssertEqual(listened.status, 0, listened.stderr)
        XCTAssertEqual(broadcast.status, 0, broadcast.stderr)
        XCTAssertTrue(broadcast.stderr.contains("packaged@127.0.0.1 joined"), "the broadcaster never saw the listener join: \(broadcast.stderr)")
        for output in [listened.stderr, broadcast.stderr] {
            XCTAssertFalse(output.contains("\u{1B}") || output.contains("\r"), "a status line drawn without a terminal: \(output.debugDescription)")
        }

        let audio = try readAudio(recording)
        let left = channel(0, of: audio.samples, channels: audio.channels)
        let sounding = left.filter { abs($0) > 0.05 }.count
        XCTAssertGreaterThan(Double(sounding) / Double(audio.sampleRate), 3, "under 3 s of the 10 s sine reached the card")
        // Upward zero crossings over the loud part: the sine's frequency.
        guard let first = left.firstIndex(where: { abs($0) > 0.05 }), let last = left.lastIndex(where: { abs($0) > 0.05 }), last > first else { return }
        var crossings = 0
        for i in (first + 1)...last where left[i - 1] < 0 && left[i] >= 0 { crossings += 1 }
        let frequency = Double(crossings) / (Double(last - first) / Double(audio.sampleRate))
        XCTAssertEqual(frequency, 440, accuracy: 2, "the card played \(frequency) Hz")
    }

    /// Runs argv[1…] with PR_SET_MDWE (Linux ≥ 6.3) refusing writable executable memory, as systemd's
    /// MemoryDenyWriteExecute does; on an older kernel, without it.
    static let refusingWritableExecutableMemory = """
        import ctypes, os, sys
        PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1
        if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
            print("MDWE unavailable: errno", ctypes.get_errno(), file=sys.stderr)
        os.execv(sys.argv[1], sys.argv[1:])
        """
}
