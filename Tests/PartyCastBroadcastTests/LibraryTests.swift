import Foundation
@testable import PartyCastBroadcast
import PartyCastControlSeam
import PartyCastCore
import PartyCastSources
import PartyCastTestSupport
import XCTest

/// What `add` may open of a library folder, on a real folder with real links: realpath(3) is the
/// reference for where a spelling leads.
final class LibraryTests: XCTestCase {
    var top: String!
    var music: String { top + "/music" }

    override func setUpWithError() throws {
        let made = FileManager.default.temporaryDirectory.appendingPathComponent("library-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: made + "/music/sub", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: made + "/music/album", withIntermediateDirectories: true)
        top = try canonicalPath(made)
        for file in ["music/a.mp3", "music/sub/b.flac", "music/notes.txt", "outside.mp3"] {
            XCTAssertTrue(FileManager.default.createFile(atPath: top + "/" + file, contents: Data([0xFF, 0xFB])))
        }
    }

    override func tearDownWithError() throws {
        try FileManager.default.removeItem(atPath: top)
    }

    func refusal(_ library: Library, _ path: String) -> PartyCommandError? {
        do throws(PartyCommandError) {
            let opened = try library.locate(path)
            XCTFail("\(path) was accepted as \(opened)")
            return nil
        } catch {
            return error
        }
    }

    func testEverySpellingOfALibraryFileOpensIt() throws {
        let library = try Library(folder: music)
        XCTAssertEqual(library.files, [music + "/a.mp3", music + "/sub/b.flac"], "audio files only, sorted")
        XCTAssertEqual(try library.locate(music + "/a.mp3"), music + "/a.mp3", "as listed")
        XCTAssertEqual(try library.locate("a.mp3"), music + "/a.mp3", "inside the folder")
        XCTAssertEqual(try library.locate(music + "/sub/../sub/./b.flac"), music + "/sub/b.flac")
        XCTAssertEqual(try library.locate(top + "/music//a.mp3"), music + "/a.mp3")
        XCTAssertTrue(FileManager.default.createFile(atPath: music + "/later.mp3", contents: Data([0xFF, 0xFB])))
        XCTAssertEqual(try library.locate("later.mp3"), music + "/later.mp3", "a file put there since the start")
    }

    func testWhatMayNotBeAddedSaysWhy() throws {
        let library = try Library(folder: music)
        let missing = refusal(library, music + "/gone.mp3")
        XCTAssertEqual(missing?.kind, .notFound)
        let folder = refusal(library, "album")
        XCTAssertEqual(folder?.kind, .invalid)
        let notAudio = refusal(library, "notes.txt")
        XCTAssertEqual(notAudio?.kind, .invalid)
        let outside = refusal(library, music + "/../outside.mp3")
        XCTAssertEqual(outside?.kind, .notFound)
        XCTAssertEqual(refusal(library, "/nowhere/at/all.mp3")?.message, "/nowhere/at/all.mp3 is not in the library (\(music))",
                       "outside the folder, nothing is looked up: no telling which files exist there")
        let messages = [missing, folder, notAudio, outside].map { $0?.message ?? "" }
        XCTAssertEqual(Set(messages).count, 4, "four reasons, four messages: \(messages)")
        XCTAssertTrue(messages[0].contains("no such file"), messages[0])
        XCTAssertTrue(messages[1].contains("folder"), messages[1])
        XCTAssertEqual(messages[2], "notes.txt is not an audio file (the library holds .aac, .flac, .mp3, .oga, .ogg, .opus, .wav)")
    }

    /// A link inside the folder that leads out of it opens nothing, whether it names the file or a folder on the way.
    func testLinksOutOfTheLibraryAreRefused() throws {
        let library = try Library(folder: music)
        try FileManager.default.createSymbolicLink(atPath: music + "/escape.mp3", withDestinationPath: "../outside.mp3")
        try FileManager.default.createSymbolicLink(atPath: music + "/door", withDestinationPath: top)
        for path in ["escape.mp3", music + "/door/outside.mp3", "door/music/../outside.mp3"] {
            XCTAssertEqual(refusal(library, path)?.message, "\(path) is a link that leads out of the library")
        }
        XCTAssertEqual(try library.locate("door/music/a.mp3"), music + "/a.mp3", "a link that leads back in is fine")
    }

    func testWithoutALibraryNothingElseIsAdded() throws {
        XCTAssertEqual(refusal(Library(), music + "/a.mp3")?.kind, .notFound)
        XCTAssertThrowsError(try Library(folder: top + "/no such folder")) { error in
            XCTAssertEqual((error as? PartyCastError)?.message, "--library \(top!)/no such folder: no such folder")
        }
    }

    /// What the remotes list: the tags the party read of the files it started with, at once; a
    /// library file's, read on the catalogue's thread (a tone stands in for a tagged file); one
    /// that cannot be opened by its path alone.
    func testTheCatalogueListsTitlesReadInTheBackground() throws {
        let catalogue = LibraryCatalogue(files: ["started.mp3", "tone:440", "broken.mp3"],
                                         known: ["started.mp3": TrackTags(title: "Started", artist: "Someone")]) { spec throws(PartyCastError) in
            guard spec.hasPrefix("tone:") else { throw PartyCastError(.notAudio, "\(spec): not audio") }
            return ResolvedSource(spec: spec, label: spec, isLive: false) { () throws(PartyCastError) -> PCMSource in
                try ToneGenerator(spec: String(spec.dropFirst("tone:".count)))
            }
        }
        XCTAssertEqual(catalogue.list.first, LibraryEntry(path: "started.mp3", title: "Started", artist: "Someone"))
        // The tags of files not yet known are read on a thread of the catalogue's own.
        XCTAssertTrue(waitUntil(timeout: 10) { catalogue.list[1].title != nil }, "the tone's title was never read")
        XCTAssertEqual(catalogue.list, [LibraryEntry(path: "started.mp3", title: "Started", artist: "Someone"),
                                        LibraryEntry(path: "tone:440", title: "440 Hz tone"), LibraryEntry(path: "broken.mp3")])
    }
}
