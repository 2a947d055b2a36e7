import Foundation
import Logging
import PartyCastControl
import PartyCastTestSupport
import XCTest

/// Schemathesis (PyPI) against the live server over the recording party: generated requests, good
/// and bad, for every operation of the committed OpenAPI file; every answer must be one the file
/// describes (status, content type, schema) and none a 5xx. Skipped only when it cannot be installed.
final class OpenAPIContractTests: XCTestCase {
    private static let spec = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Sources/PartyCastControl/Web/openapi.yaml").standardized.path

    func testTheAPIKeepsToItsOpenAPIDescription() throws {
        if (try? runProcess("schemathesis", ["--version"], timeout: 60))?.status != 0 {
            _ = try? runProcess("python3", ["-m", "pip", "install", "--quiet", "schemathesis"], timeout: 600)
        }
        guard (try? runProcess("schemathesis", ["--version"], timeout: 60))?.status == 0 else {
            throw XCTSkip("schemathesis is not installed and could not be installed")
        }
        let party = RecordingParty()
        let server = try ControlServer(control: party, host: "127.0.0.1", port: 0, key: nil, logger: Logger(label: "openapi-test"))
        defer { server.shutdown() }
        let result = try runProcess("schemathesis", [
            "run", Self.spec, "--url", "http://127.0.0.1:\(server.port)", "--checks", "all", "--max-examples", "40",
            "--exclude-checks", Self.excludedChecks, "--request-timeout", "10", "--no-color",
        ], timeout: 600, environment: ["SCHEMATHESIS_HOOKS": ""])
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
    }

    /// positive_data_acceptance: a well-formed command the party refuses (seek past the end, an
    /// unknown item) is a documented 4xx, not a 2xx, so schema-valid data is not always accepted.
    private static let excludedChecks = "positive_data_acceptance"
}
