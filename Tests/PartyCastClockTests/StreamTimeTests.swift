import PartyCastCore
import XCTest

/// Frames → nanoseconds for parties that run for months, and for a peer's absurd numbers.
final class StreamTimeTests: XCTestCase {
    func testExactForMonthsAtAnyRate() {
        for rate in [8000, 44100, 48000, 384_000] {
            for days: Double in [0, 1, 5, 100, 365 * 3] {
                let frames = Int64(days * 86_400 * Double(rate)) + 12_345
                // frames × 10⁹ / rate through a 128-bit product: exact, and computed another way.
                let wide = frames.multipliedFullWidth(by: 1_000_000_000)
                let expected = Int64(rate).dividingFullWidth((wide.high, wide.low)).quotient
                XCTAssertEqual(StreamTime.nanoseconds(frames: frames, sampleRate: rate), expected, "\(days) days at \(rate) Hz")
                let seconds = Double(frames) / Double(rate)
                XCTAssertEqual(Double(StreamTime.nanoseconds(frames: frames, sampleRate: rate)!) / 1e9, seconds, accuracy: 1e-6)
            }
        }
        // The naive frames × 10⁹ overflows here: 2.2 days at 48 kHz.
        XCTAssertNotNil(StreamTime.nanoseconds(frames: 9_300_000_000, sampleRate: 48000))
    }

    func testWhatDoesNotFitIsNil() {
        XCTAssertNil(StreamTime.nanoseconds(frames: .max, sampleRate: 8000))
        XCTAssertNil(StreamTime.nanoseconds(frames: .min, sampleRate: 8000))
        XCTAssertNil(StreamTime.nanoseconds(frames: 1, sampleRate: 0))
        XCTAssertEqual(StreamTime.nanoseconds(frames: -48000, sampleRate: 48000), -1_000_000_000)
    }
}
