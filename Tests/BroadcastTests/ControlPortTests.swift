import Foundation
import PartyCastTestSupport
import XCTest

/// The remote control's default port (the stream port + 1) held by another program: the broadcaster
/// still plays and serves its remote on a free port, printing the one it took.
final class ControlPortTests: XCTestCase {
    func testATakenDefaultControlPortGivesWayToAFreeOne() throws {
        // A stream port whose neighbour this test can hold.
        var held: (fd: Int32, port: Int)?
        var port = 0
        for _ in 0..<20 where held == nil {
            port = freePort()
            held = boundLoopbackSocket(port: port + 1)
        }
        let (fd, takenPort) = try XCTUnwrap(held, "no free pair of ports")
        defer { close(fd) }
        XCTAssertEqual(listen(fd, 1), 0)
        let server = try startProcess(productPath("broadcaster"), ["share", "--no-mdns", "--port", "\(port)", "tone:440:30", "--start-in", "0"])
        defer { server.signal(SIGINT); _ = server.wait(timeout: 10) }
        XCTAssertTrue(server.waitForStderr("remote control: http://", timeout: 20), server.stderr)
        XCTAssertTrue(server.stderr.contains("usual port \(takenPort) cannot be used"), server.stderr)
        let printed = try XCTUnwrap(server.stderr.firstMatch(of: /remote control: http:\/\/[^:]+:(\d+)\//).flatMap { Int($0.output.1) })
        XCTAssertNotEqual(printed, takenPort)
        let connection = try XCTUnwrap(connectToLoopback(port: printed), "nobody answers on the printed port \(printed)")
        close(connection)
        XCTAssertNotNil(connectToLoopback(port: port).map { close($0) }, "the stream port")
    }
}
