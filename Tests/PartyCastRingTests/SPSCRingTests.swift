import PartyCastOutput
import PartyCastRing
import XCTest

final class SPSCRingTests: XCTestCase {
    func testCapacityRoundsUpAndFullAndEmptyAreDistinct() {
        let ring = SPSCRing(minimumCapacity: 100)
        XCTAssertEqual(ring.capacity, 128)
        let input = (0..<200).map(Float.init)
        XCTAssertEqual(input.withUnsafeBufferPointer { ring.write($0) }, 128)
        XCTAssertEqual(ring.availableToRead, 128)
        XCTAssertEqual(ring.availableToWrite, 0)
        var output = [Float](repeating: -1, count: 200)
        XCTAssertEqual(output.withUnsafeMutableBufferPointer { ring.read(into: $0) }, 128)
        XCTAssertEqual(Array(output.prefix(128)), Array(input.prefix(128)))
        XCTAssertEqual(ring.availableToRead, 0)
    }

    /// One producer thread and one consumer thread move ten million numbered samples through a
    /// small ring in odd-sized pieces; every sample must come out once, in order.
    func testConcurrentProducerAndConsumerKeepOrder() {
        let ring = SPSCRing(minimumCapacity: 1000)
        let total = 10_000_000
        let producer = Thread {
            var next = 0
            var chunk = [Float](repeating: 0, count: 333)
            while next < total {
                let n = min(chunk.count, total - next)
                for i in 0..<n { chunk[i] = Float((next + i) % 1_000_000) }
                var done = 0
                while done < n {
                    done += chunk.withUnsafeBufferPointer { ring.write(UnsafeBufferPointer(rebasing: $0[done..<n])) }
                }
                next += n
            }
        }
        producer.start()
        var expected = 0
        var buffer = [Float](repeating: 0, count: 257)
        var mismatches = 0
        while expected < total {
            let n = buffer.withUnsafeMutableBufferPointer { ring.read(into: $0) }
            for i in 0..<n where buffer[i] != Float((expected + i) % 1_000_000) { mismatches += 1 }
            expected += n
        }
        XCTAssertEqual(mismatches, 0)
        XCTAssertEqual(ring.availableToRead, 0)
    }

    /// The renderer hands out ring audio while running, silence while held or starved, and says
    /// when the stream has ended.
    func testRendererModesUnderrunAndEnd() {
        let ring = SPSCRing(minimumCapacity: 64)
        let renderer = Renderer(ring: ring, channels: 2)
        let buffer = UnsafeMutableBufferPointer<Float>.allocate(capacity: 16)
        defer { buffer.deallocate() }
        let input = [Float](repeating: 0.5, count: 20)
        input.withUnsafeBufferPointer { _ = ring.write($0) }
        XCTAssertEqual(renderer.render(into: buffer), .silence, "held")
        XCTAssertEqual(ring.availableToRead, 20, "holding leaves the ring alone")
        renderer.setMode(.run)
        XCTAssertEqual(renderer.render(into: buffer), .audio(frames: 8))
        XCTAssertEqual(renderer.render(into: buffer), .audio(frames: 2))
        XCTAssertEqual(Array(buffer[4...]), [Float](repeating: 0, count: 12), "the rest is silence")
        XCTAssertEqual(renderer.render(into: buffer), .silence)
        XCTAssertEqual(renderer.underruns, 1)
        input.withUnsafeBufferPointer { _ = ring.write($0) }
        let ticket = renderer.requestFlush()
        XCTAssertFalse(renderer.isFlushed(ticket))
        XCTAssertEqual(renderer.render(into: buffer), .silence)
        XCTAssertTrue(renderer.isFlushed(ticket))
        XCTAssertEqual(ring.availableToRead, 0)
        renderer.markEndOfStream()
        XCTAssertEqual(renderer.render(into: buffer), .finished(frames: 0))
        XCTAssertEqual(renderer.renderedFrames, 10)
    }
}
