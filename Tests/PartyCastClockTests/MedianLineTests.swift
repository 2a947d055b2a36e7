@testable import PartyCastClock
import XCTest

/// The Theil–Sen line against SciPy's (`scipy.stats.theilslopes(y, x, method='joint')`: the median
/// pairwise slope, and the median of y − slope × x as its value at 0).
final class MedianLineTests: XCTestCase {
    func testLevelIsSciPysTheilSenIntercept() throws {
        // Blocks' times, newest first, two of seven far off: SciPy gives slope −0.58333…, intercept 10.25.
        var line = MedianLine(capacity: 8)
        for (time, value) in zip([-1.0, -3, -5, -7, -9, -11, -13], [10.0, 12, 400, 14.5, 15, -300, 18]) {
            line.append(time: time, value: value)
        }
        XCTAssertEqual(try XCTUnwrap(line.level()), 10.25, accuracy: 1e-9)
        // On y = 2x + 1 but for one point: SciPy gives exactly slope 2, intercept 1.
        line.removeAll()
        for (time, value) in zip([0.0, 1, 2, 3, 4, 5], [1.0, 3, 5, 100, 9, 11]) { line.append(time: time, value: value) }
        XCTAssertEqual(try XCTUnwrap(line.level()), 1, accuracy: 1e-9)
    }

    func testFewerThanTwoTimesGiveNoLineAndAFullLineTakesNoMore() {
        var line = MedianLine(capacity: 2)
        XCTAssertNil(line.level())
        line.append(time: 1, value: 5)
        line.append(time: 1, value: 7)
        XCTAssertNil(line.level())
        line.append(time: 2, value: 9)
        XCTAssertEqual(line.count, 2)
    }
}
