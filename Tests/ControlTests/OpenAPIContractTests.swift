import Foundation
import Logging
import PartyCastControl
import PartyCastTestSupport
import XCTest

/// Schemathesis (PyPI) against the live server over the recording party: generated requests, good
/// and bad, for every operation of the committed OpenAPI file; every answer must be one the file
/// describes (status, content type, schema) and none a 5xx. Skipped where `make deps` has not run.
final class OpenAPIContractTests: XCTestCase {
    private static let spec = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Sources/PartyCastControl/Web/openapi.yaml").standardized.path

    func testTheAPIKeepsToItsOpenAPIDescription() async throws {
        let schemathesis = testDriver("schemathesis")
        guard (try? runProcess(schemathesis, ["--version"], timeout: 60))?.status == 0 else {
            throw XCTSkip("no \(schemathesis): run `make deps`")
        }
        let party = RecordingParty()
        let server = try await ControlServer(control: party, host: "127.0.0.1", port: 0, key: nil, logger: Logger(label: "openapi-test"))
        let checked = Result { try check(schemathesis, port: server.port) }
        await server.stop()
        try checked.get()
    }

    /// Runs schemathesis against the server on `port`: every check passes.
    private func check(_ schemathesis: String, port: Int) throws {
        // From a scratch folder: schemathesis leaves its cache in the working directory.
        let scratch = try temporaryDirectory()
        let report = scratch + "/output.txt"
        _ = FileManager.default.createFile(atPath: report, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: schemathesis)
        process.arguments = ["run", Self.spec, "--url", "http://127.0.0.1:\(port)", "--checks", "all",
                             "--exclude-checks", Self.excludedChecks, "--max-examples", "40", "--request-timeout", "10", "--no-color"]
        process.currentDirectoryURL = URL(fileURLWithPath: scratch)
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: report))
        process.standardError = process.standardOutput
        try process.run()
        process.waitUntilExit()
        let output = (try? String(contentsOfFile: report, encoding: .utf8)) ?? ""
        XCTAssertEqual(process.terminationStatus, 0, output)
    }
    /// positive_data_acceptance: a well-formed command the party refuses (seek past the end, an
    /// unknown item) is a documented 4xx, not a 2xx, so schema-valid data is not always accepted.
    private static let excludedChecks = "positive_data_acceptance"
}
