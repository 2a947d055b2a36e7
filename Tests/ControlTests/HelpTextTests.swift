import Foundation
import PartyCastTestSupport
import XCTest

/// The programs' help as a new user reads it, at argument-parser's 80 columns.
final class HelpTextTests: XCTestCase {
    func help(_ program: String, _ arguments: [String]) throws -> String {
        let result = try runProcess(productPath(program), arguments + ["--help"], timeout: 30, environment: ["COLUMNS": "80", "PATH": "/usr/bin:/bin"])
        XCTAssertEqual(result.status, 0, result.stderr)
        return result.stdout
    }

    /// The text above USAGE, wrapped by argument-parser alone: within a paragraph no line ends where
    /// the next line's first word would still have fitted, as a hard line break mid-sentence does.
    func testTheOverviewsAreWrappedAsParagraphs() throws {
        for (program, arguments) in [("broadcaster", ["ctl"]), ("listener", ["play"])] {
            let overview = try XCTUnwrap(try help(program, arguments).components(separatedBy: "USAGE:").first)
            for paragraph in overview.components(separatedBy: "\n\n") {
                let lines = paragraph.split(separator: "\n")
                for (line, next) in zip(lines, lines.dropFirst()) {
                    let word = next.split(separator: " ").first ?? ""
                    if line.count + 1 + word.count < 80 {  // argument-parser keeps lines under 80
                        XCTFail("\(program) \(arguments[0]) --help breaks a line short: \"\(line)\" before \"\(word)\"")
                    }
                }
            }
        }
    }

    func testLogLevelsAreListedOnce() throws {
        let text = try help("broadcaster", ["ctl"])
        XCTAssertEqual(text.components(separatedBy: "critical").count - 1, 1, text)
    }
}
