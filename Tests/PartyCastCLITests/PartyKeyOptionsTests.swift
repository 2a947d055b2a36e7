import ArgumentParser
import Foundation
import PartyCastCLI
import PartyCastWire
import XCTest

/// `--key-file`, as a systemd credential hands the key over: the file's text is the key `--key` would
/// give, its trailing line break aside; an empty file is a public party; anything else is refused.
final class PartyKeyOptionsTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "partycast-key-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try FileManager.default.removeItem(atPath: directory) }

    private func file(_ name: String, _ bytes: [UInt8]) throws -> String {
        let path = directory + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The message ArgumentParser prints for a refused command line.
    private func refusal(_ arguments: [String]) -> String {
        do {
            _ = try PartyKeyOptions.parse(arguments)
            return "accepted"
        } catch {
            return PartyKeyOptions.message(for: error)
        }
    }

    func testTheFilesTextIsTheKeyAsKeyGivesIt() throws {
        let secret = "correct horse battery"
        for (name, text) in [("plain", secret), ("echoed", secret + "\n"), ("dos", secret + "\r\n")] {
            let options = try PartyKeyOptions.parse(["--key-file", try file(name, Array(text.utf8))])
            XCTAssertEqual(try options.resolvedSecret, try PartyKeyOptions.parse(["--key", secret]).resolvedSecret, name)
            XCTAssertEqual(try XCTUnwrap(options.key).password, Array(secret.utf8), name)
        }
    }

    func testAnEmptyFileIsAPublicParty() throws {
        for (name, bytes) in [("empty", [UInt8]()), ("newline", [UInt8(ascii: "\n")])] {
            let options = try PartyKeyOptions.parse(["--key-file", try file(name, bytes)])
            XCTAssertNil(try options.resolvedSecret, name)
            XCTAssertNil(try options.key, name)
        }
    }

    func testWhatIsNotAKeyIsRefusedNamingTheFile() throws {
        let missing = directory + "/missing"
        XCTAssertEqual(refusal(["--key-file", missing]), "--key-file \(missing): cannot open (open: No such file or directory)")
        let long = try file("long", Array(repeating: UInt8(ascii: "k"), count: 4097))
        XCTAssertEqual(refusal(["--key-file", long]), "--key-file \(long): longer than 4096 bytes, not a key")
        let binary = try file("binary", [0xFF, 0xFE, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47])
        XCTAssertEqual(refusal(["--key-file", binary]), "--key-file \(binary): not UTF-8 text")
        let short = try file("short", Array("seven77\n".utf8))
        XCTAssertEqual(refusal(["--key-file", short]), "the party key must be at least 8 characters")
        XCTAssertEqual(refusal(["--key-file", short, "--key", "long enough"]), "give --key or --key-file, not both")
    }
}
